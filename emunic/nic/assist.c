/* SPDX-License-Identifier: MIT */
/*
 * Every bounded wait of emunic (MQ, counter, event queue, request,
 * connection, destroy) is this one.  A waiting thread lends itself to the
 * engine: while the token is free it runs passes itself, so on a machine
 * with few CPUs the completion it waits for is found by the thread that
 * wants it, with no hand-off between threads (caller-assisted progress).
 * Once it has the token it keeps it from look to look (serving the kicks
 * others leave it, as any holder does), so a look is a pass, not a take,
 * a pass and a hand-over; it gives the token back when its condition
 * holds, when a pass queued a notice (printed outside the engine), and
 * when the assist budget runs out with nothing moving: then it hands the
 * engine over to the core thread and sleeps on its object's own wait
 * word, and assists again for a moment after each wake.
 */
#include "emunic/nic/nic.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#define SLEEP_SLICE_NS (1000 * EMUNIC_NS_PER_MS)	/* recheck the condition at least this often */
#define BUSY_YIELD 64		/* tries for a held token between yields of the CPU */

/* How long a waiter runs the engine itself before it sleeps:
 * $EMUNIC_ASSIST_US (-1: until done); by default, as the host-progressed
 * baseline polls, until done when every local rank has a CPU of its own,
 * else 50 us. */
static uint64_t assist_ns(void)
{
	static _Atomic uint64_t ns;
	uint64_t v = atomic_load_explicit(&ns, memory_order_relaxed);

	if (!v) {
		const char *s = getenv("EMUNIC_ASSIST_US");
		int l = emunic_local_size();
		long long us = s && *s ? strtoll(s, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN) >= (l ? l : 1) ? -1 : 50;

		v = us < 0 ? UINT64_MAX : (uint64_t)us * 1000 + 1;
		atomic_store_explicit(&ns, v, memory_order_relaxed);
	}
	return v == UINT64_MAX ? v : v - 1;
}

/* A waiter stops assisting: it hands the engine over (mine: it holds the
 * token).  If another thread holds the token, that one may have seen this
 * waiter still assisting and set no timer; a kick makes it pass and hand
 * over again (the requester's side of owner.c's handshake; spec/token.pml,
 * D2). */
static void leave(struct emunic_dev *d, bool mine)
{
	atomic_fetch_sub(&d->assisting, 1);
	if (!mine && !nic_own(d)) {
		nic_kick(d);
		if (!nic_own(d))
			return;		/* the holder sees the kick */
	}
	nic_unown(d);			/* hands over */
}

int nic_wait(struct emunic_dev *d, struct emunic_word *const *w, unsigned nw, bool (*cond)(void *), void *arg,
	     int timeout_ms)
{
	uint64_t now = emunic_now_ns(), budget = assist_ns(), until = budget == UINT64_MAX ? budget : now + budget;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now + (uint64_t)timeout_ms * EMUNIC_NS_PER_MS;
	bool handlers = nic_handlers_ok(), assisting = true, mine = false;
	unsigned busy = 0;
	uint32_t seq[128];
	int r;

	if (nw > 128)
		nw = 128;
	if (nic_owned(d))		/* an event handler: the engine is this thread */
		return cond(arg) ? 0 : -EDEADLK;
	nic_set_handlers_ok(true);
	atomic_fetch_add(&d->assisting, 1);
	/* Any thread waits, with or without the token: counted atomically
	 * (++ from two waiting threads at once could lose counts). */
	__atomic_fetch_add(&d->st.waits, 1, __ATOMIC_RELAXED);
	for (;;) {
		for (unsigned i = 0; i < nw; i++)
			seq[i] = emunic_word_seq(w[i]);
		if (cond(arg)) {
			r = 0;
			break;
		}
		now = emunic_now_ns();
		if (now >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		if (now < until) {
			if (!mine && (mine = nic_own(d)))
				nic_assist_took(d);
			if (mine) {
				int n;

				nic_take_kick(d);	/* this pass serves it */
				n = nic_pass(d);
				if (atomic_load_explicit(&d->notices, memory_order_relaxed)) {
					nic_unown(d);
					mine = false;
					nic_notices_out(d);
				}
				busy = 0;
				if (n && budget != UINT64_MAX)
					until = now + budget;	/* things move: stay */
			} else if (++busy % BUSY_YIELD) {
				__builtin_ia32_pause();
			} else {
				/* Another thread is the engine (the core, say):
				 * spinning on may take the CPU it needs. */
				sched_yield();
			}
			continue;
		}
		/* Nothing moved for a whole budget: the core takes over.
		 * Counted asleep first, so the hand-over sees a sleeper:
		 * work in verbs is then urgent (its completion may be ours). */
		__atomic_fetch_add(&d->st.wait_sleeps, 1, __ATOMIC_RELAXED);
		atomic_fetch_add(&d->sleepers, 1);
		if (assisting) {
			assisting = false;
			leave(d, mine);
			mine = false;
		}
		nic_notices_out(d);
		emunic_word_sleep_any(w, seq, nw, deadline - now < SLEEP_SLICE_NS ? deadline - now : SLEEP_SLICE_NS);
		atomic_fetch_sub(&d->sleepers, 1);
		atomic_fetch_add(&d->assisting, 1);
		assisting = true;
		until = budget == UINT64_MAX ? budget : emunic_now_ns() + budget / 4;
	}
	if (assisting)
		leave(d, mine);
	nic_set_handlers_ok(handlers);
	nic_notices_out(d);
	return r;
}
