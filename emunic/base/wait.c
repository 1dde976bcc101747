/* SPDX-License-Identifier: MIT */
/*
 * Wait words on futexes.  A sleeper announces itself (sleepers++) and then
 * sleeps only while seq is unchanged; a bumper changes seq and then looks
 * at sleepers.  With both sides fenced, either the sleeper sees the new
 * seq (and does not sleep) or the bumper sees the sleeper (and wakes it):
 * no wake-up is lost, and a change nobody waits for costs no syscall.
 */
#include "emunic/base/base.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
#endif

struct waitv {			/* struct futex_waitv of Linux 5.16 */
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};

#define WAITV_MAX 128

void emunic_word_bump(struct emunic_word *w)
{
	atomic_fetch_add_explicit(&w->seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&w->sleepers, memory_order_seq_cst))
		syscall(SYS_futex, &w->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void emunic_lock_slow(struct emunic_lock *l, uint32_t seen)
{
	/* Marked waited-for before sleeping, so the unlock wakes someone. */
	if (seen != 2)
		seen = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
	while (seen != 0) {
		syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
		seen = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
	}
}

void emunic_unlock_wake(struct emunic_lock *l)
{
	syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static struct timespec rel(uint64_t ns)
{
	return (struct timespec){ (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
}

void emunic_word_sleep(struct emunic_word *w, uint32_t seq, uint64_t ns)
{
	struct timespec ts = rel(ns);

	if (!ns)
		return;
	atomic_fetch_add_explicit(&w->sleepers, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&w->seq, memory_order_seq_cst) == seq)
		syscall(SYS_futex, &w->seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
	atomic_fetch_sub_explicit(&w->sleepers, 1, memory_order_relaxed);
}

void emunic_word_sleep_any(struct emunic_word *const *w, const uint32_t *seq, unsigned n, uint64_t ns)
{
	static _Atomic int no_waitv;
	struct waitv v[WAITV_MAX];
	struct timespec abs;
	bool moved = false;

	if (n == 1 || n > WAITV_MAX || atomic_load_explicit(&no_waitv, memory_order_relaxed)) {
		emunic_word_sleep(w[0], seq[0], n == 1 || ns < 1000000 ? ns : 1000000);
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		atomic_fetch_add_explicit(&w[i]->sleepers, 1, memory_order_seq_cst);
		v[i] = (struct waitv){ .val = seq[i], .uaddr = (uintptr_t)&w[i]->seq, .flags = FUTEX_32 };
	}
	for (unsigned i = 0; i < n; i++)
		moved = moved || atomic_load_explicit(&w[i]->seq, memory_order_seq_cst) != seq[i];
	if (!moved && ns) {
		/* futex_waitv takes an absolute CLOCK_MONOTONIC time. */
		uint64_t t = emunic_now_ns() + ns;

		abs = rel(t);
		if (syscall(SYS_futex_waitv, v, n, 0, &abs, CLOCK_MONOTONIC) < 0 && errno == ENOSYS)
			atomic_store_explicit(&no_waitv, 1, memory_order_relaxed);
	}
	for (unsigned i = 0; i < n; i++)
		atomic_fetch_sub_explicit(&w[i]->sleepers, 1, memory_order_relaxed);
}
