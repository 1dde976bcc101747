/* SPDX-License-Identifier: MIT */
/*
 * How long the core thread spins after its last work before it sleeps: at
 * least EMUNIC_SPIN_US (20), at most EMUNIC_SPIN_MAX_US (400).  The gap
 * between bursts of work is about the device's round trip (a few us on
 * hardware, tens under QEMU's TCG), and a core that sleeps through it pays
 * a sleep and a wake-up for every arrival (a cross-CPU wake-up costs ~90 us
 * one way in the TCG guest on this kind of host).  So each gap the core
 * slept through (its last work to its next) moves the spin: one within the
 * most it may spin doubles it, a longer one halves it.
 *
 * A core on a CPU of its own (pinned: EMUNIC_CPU, or a free CPU at open)
 * spins what it adapted to after any work.  Where the core shares the
 * application's CPUs a longer spin takes them from some application
 * thread: in the guest (2 ranks, their apps and cores on 2 vCPUs) a 400 us
 * spin after everything made the triggered hot potato 3-5x faster (46-69 us
 * a round trip against 113-675) and a 2-rank blocking barrier 2.3-2.9x
 * slower; at normal priority, or yielding after each look, it helped
 * neither.  So a core that shares the CPUs spins what it adapted to only
 * within that spin of a pass that fired a trigger, and adapts only on gaps
 * that ended in one: what a fired trigger sent is usually answered
 * by a peer's put that fires the next, with no application thread in the
 * engine to take it, so a core asleep pays a wake-up for each (the potato:
 * 1.6-2.7x ib_write_lat against 3.0-3.4x at 20 us, in runs here), while an
 * MQ's collectives fire no trigger.  Neither spins past the least while an
 * application thread waits in the engine (it is the engine; a core beside
 * it only competes for the token), nor after a wake-up that found nothing:
 * an idle device pays what it paid before.
 */
#include "emunic/nic/nic.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SPIN_MIN_US 20
#define SPIN_MAX_US 400
#define SPIN_LIMIT_US 1000000		/* what the variables may say */

static uint64_t spin_env(struct emunic_dev *d, const char *name, int dflt)
{
	int us = dflt, r = emunic_env_int(name, 0, SPIN_LIMIT_US, &us);

	if (r == -EINVAL) {
		nic_notice(d, "progress core: %s='%s' is not a count of microseconds in 0..%d; using %d", name,
			   getenv(name), SPIN_LIMIT_US, dflt);
		us = dflt;
	}
	return (uint64_t)us * 1000;
}

void nic_spin_init(struct emunic_dev *d, struct nic_spin *s)
{
	memset(s, 0, sizeof(*s));
	s->min_ns = spin_env(d, "EMUNIC_SPIN_US", SPIN_MIN_US);
	s->max_ns = spin_env(d, "EMUNIC_SPIN_MAX_US", SPIN_MAX_US);
	if (s->max_ns < s->min_ns)
		s->max_ns = s->min_ns;
	s->ns = s->min_ns;
	d->st.core_spin_ns = s->ns;
}

void nic_spin_slept(struct nic_spin *s, bool own_gap)
{
	s->slept = true;
	s->fired_at = 0;
	if (!own_gap)
		s->idle_from = 0;	/* an application thread ran the engine meanwhile */
}

static bool own_cpu(struct emunic_dev *d)
{
	return !atomic_load_explicit(&d->core_shares_cpu, memory_order_relaxed);
}

void nic_spin_pass(struct emunic_dev *d, struct nic_spin *s, int n, uint64_t now, bool fired)
{
	if (!n)
		return;
	/* A core that shares the CPUs learns only from gaps that ended in an
	 * answer: a pass that fired a trigger. */
	if (s->slept && s->idle_from && (own_cpu(d) || fired)) {
		uint64_t gap = now - s->idle_from;

		if (gap > s->max_ns)
			s->ns = s->ns / 2 > s->min_ns ? s->ns / 2 : s->min_ns;
		else if (gap > s->ns)
			s->ns = !s->ns ? 1000 : 2 * s->ns < s->max_ns ? 2 * s->ns : s->max_ns;
		d->st.core_spin_ns = s->ns;
	}
	/* The answer is awaited for one spin after the pass that fired: work
	 * that fires nothing (the put's own completion) does not end the wait,
	 * nor does it keep the core spinning long once the wait is over. */
	if (fired)
		s->fired_at = now;
	else if (s->fired_at && now - s->fired_at > s->ns)
		s->fired_at = 0;
	s->slept = false;
	s->idle_from = now;
}

uint64_t nic_spin_ns(struct emunic_dev *d, const struct nic_spin *s)
{
	if (s->slept || atomic_load_explicit(&d->assisting, memory_order_relaxed) || (!own_cpu(d) && !s->fired_at))
		return s->min_ns;
	return s->ns;
}
