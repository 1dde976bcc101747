/* SPDX-License-Identifier: MIT */
/*
 * The leaf helpers every part of the emulated NIC shares: the one clock,
 * futex waits, wait words, and checked integers from the environment.  Nothing here knows about devices.
 */
#ifndef EMUNIC_BASE_H
#define EMUNIC_BASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* $name as an int in [lo, hi]: 0, -ENOENT (unset or empty), -EINVAL (not
 * a whole number in range). */
int emunic_env_int(const char *name, int lo, int hi, int *out);

/* CLOCK_MONOTONIC in nanoseconds: the one clock of emunic. */
uint64_t emunic_now_ns(void);
#define EMUNIC_NS_PER_MS 1000000ull

/*
 * A wait word: a sequence number bumped when what it guards changes, and a
 * count of threads sleeping on it, so a change wakes only those (and costs
 * no syscall when nobody sleeps).  Every object an app thread waits on (an
 * MQ, a counter, an event queue, a request) has its own.
 */
struct emunic_word {
	_Atomic uint32_t seq;
	_Atomic uint32_t sleepers;
};

static inline uint32_t emunic_word_seq(struct emunic_word *w)
{
	return atomic_load_explicit(&w->seq, memory_order_acquire);
}
/* Something changed: bump, and wake the sleepers if there are any. */
void emunic_word_bump(struct emunic_word *w);
/* Sleeps while the word still reads seq, at most ns (0: do not sleep).
 * Returns at once if it moved in between.  The caller rechecks. */
void emunic_word_sleep(struct emunic_word *w, uint32_t seq, uint64_t ns);
/* The same on n words at once (futex_waitv where the kernel has it, else
 * a 1 ms slice on the first). */
void emunic_word_sleep_any(struct emunic_word *const *w, const uint32_t *seq, unsigned n, uint64_t ns);

/*
 * A lock on a futex word (Drepper, "Futexes Are Tricky", mutex 3): 0 free,
 * 1 held, 2 held and maybe waited for.  Free, it costs one compare-and-swap
 * to take and one exchange to give back, inline: the post lock is taken by
 * every post and start, where glibc's mutex cost ~57 instructions a round.
 * A contended taker sleeps on the futex and never spins, as a default
 * mutex: the real-time core thread takes it too and must not spin against
 * a holder it preempted.  Not recursive; no priority inheritance.
 */
struct emunic_lock {
	_Atomic uint32_t v;
};
void emunic_lock_slow(struct emunic_lock *l, uint32_t seen);
void emunic_unlock_wake(struct emunic_lock *l);

static inline void emunic_lock(struct emunic_lock *l)
{
	uint32_t c = 0;

	if (!atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire, memory_order_relaxed))
		emunic_lock_slow(l, c);
}

static inline void emunic_unlock(struct emunic_lock *l)
{
	if (atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2)
		emunic_unlock_wake(l);
}

#endif
