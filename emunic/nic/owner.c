/* SPDX-License-Identifier: MIT */
/*
 * The ownership token: exactly one thread runs the engine at a time, the
 * core thread or an application thread that posts or waits.  Taking it
 * never blocks (whoever finds it held leaves the work to the holder), and no
 * request for work is lost: a requester sets `kick` and then tries the
 * token; a holder clears `held` and then looks at `kick`.  With a full
 * fence on both sides at least one of them sees the other (as in liburing's
 * SQ_NEED_WAKEUP handshake), so either the holder runs one more pass or the
 * requester gets the token.
 *
 * A kick the core thread made (core_kicked: whatever woke it, a completion,
 * its timer or the doorbell, found the token held) is run by that holder
 * only if it stays in the engine's business (an MQ post, a wait); a
 * triggered op's or counter's post leaves it to the core (nic_unown_posted),
 * with the doorbell, as the core may be asleep by then.  core_kicked is a
 * hint, not state: an application's kick merged into the core's goes to the
 * core, and a core's kick whose flag another holder's nic_take_kick cleared
 * in between is run by the poster, as before; either way the kick is
 * served (spec/token.pml), only by another thread.
 *
 * An application thread that gives the token back hands the engine over to
 * the core thread: if work is left that the core must move (engine.c
 * nic_urgent: a unit's, a QP stalled for verbs room), the core's timer is
 * set to wake it shortly (the application usually comes back first, to
 * wait, and then the core never wakes); work merely in verbs, and an MQ's
 * WAIT where the core shares the application's CPUs, is found by the app's
 * own poll or wait (nic_poll_assist, assist.c), else collected within LAZY
 * (there, a core woken while the application computes takes the CPU from
 * that work: a nonblocking collective started, computed over, then waited
 * for took longer than the work and the collective one after the other);
 * a unit's deadline sets the timer too.
 */
#include "emunic/nic/nic.h"

#include <stdlib.h>

#define UNOWN_ROUNDS 4			/* extra passes a leaving holder runs for others */
#define LAZY_NS (10 * EMUNIC_NS_PER_MS)
#define SAFETY_NS (1000 * EMUNIC_NS_PER_MS)	/* as the core's own periodic look */

_Thread_local const struct emunic_dev *nic_owner_of;
static _Thread_local bool handlers_ok, is_core;

bool nic_own(struct emunic_dev *d)
{
	if (atomic_load_explicit(&d->held, memory_order_relaxed) ||
	    atomic_exchange_explicit(&d->held, 1, memory_order_acquire))
		return false;
	nic_owner_of = d;
	return true;
}

bool nic_owned(const struct emunic_dev *d)
{
	return nic_owner_of == d;
}

static uint64_t handover_ns(void)
{
	static _Atomic uint64_t ns;
	uint64_t v = atomic_load_explicit(&ns, memory_order_relaxed);

	if (!v) {
		const char *s = getenv("EMUNIC_HANDOVER_US");

		v = (s && *s ? strtoull(s, NULL, 10) : 50) * 1000 + 1;
		atomic_store_explicit(&ns, v, memory_order_relaxed);
	}
	return v - 1;
}

/* Under the token: when must the core thread look again, given what this
 * application thread leaves behind?  While a thread assists (waits, running
 * the engine) it is the engine: only a timer planned for urgent work is
 * pushed out, so the core does not wake while the waiter polls. */
static void hand_over(struct emunic_dev *d)
{
	bool assisted = atomic_load_explicit(&d->assisting, memory_order_relaxed);
	uint64_t now, want, cur;
	bool urgent = false;

	if (assisted && !d->wake_urgent && !atomic_load(&d->need_core)) {
		/* The assisting thread hands over when it leaves.  Should it
		 * never leave (an EMUNIC_POST_WAIT_NEXT poster that does not
		 * wait), a core asleep with no timer (it slept while this
		 * thread held the token) still looks within SAFETY. */
		if (atomic_load(&d->wake_ns) == UINT64_MAX)
			nic_set_wake(d, emunic_now_ns() + SAFETY_NS);
		return;
	}
	now = emunic_now_ns();
	want = nic_next_due_ns(d, now);
	cur = atomic_load(&d->wake_ns);
	if (cur <= now)
		cur = UINT64_MAX;	/* it fired: the core may have taken it already */
	if (atomic_load(&d->need_core)) {
		want = now;
		urgent = true;
	} else if (!assisted && nic_urgent(d)) {
		if (now + handover_ns() < want)
			want = now + handover_ns();
		urgent = true;
	} else if (d->inflight && now + LAZY_NS < want) {
		want = now + LAZY_NS;
	}
	if (assisted && want == UINT64_MAX)
		want = now + SAFETY_NS;		/* as above: should it never leave */
	else if (want != UINT64_MAX && want > now + SAFETY_NS)
		want = now + SAFETY_NS;		/* a set timer is never far: a blocking post counts on it */
	/* Earlier than planned: move the timer.  An urgent wake planned for
	 * work that is gone: push it out, so a tight post/wait loop never
	 * wakes the core. */
	if (want < cur || (d->wake_urgent && !urgent && want > cur)) {
		nic_set_wake(d, want);
		d->wake_urgent = urgent;
	}
}

/* idle: the holder changed nothing, so the hand-over whoever left the
 * work made still stands (only a kick's extra pass needs a new one).
 * posted: an application thread that posted and goes back to its work; a
 * kick of the core thread's (made while this thread held the token) is
 * then the core's to serve, not this thread's: the passes that kick asks
 * for would run the offloaded work on the application's thread (a
 * triggered chain started by emunic_ct_inc ran up to UNOWN_ROUNDS puts of
 * itself inside the call). */
static bool unown(struct emunic_dev *d, bool idle, bool posted)
{
	for (int round = 0;; round++) {
		if (!is_core && !(idle && round == 0))
			hand_over(d);
		nic_owner_of = NULL;
		atomic_store_explicit(&d->held, 0, memory_order_release);
		atomic_thread_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&d->kick, memory_order_relaxed))
			return round > 0;
		if (round == UNOWN_ROUNDS || (posted && atomic_load(&d->core_kicked))) {
			/* The core takes it from here: the kick stays set, so a
			 * core not yet asleep does not sleep (core_sleep looks
			 * at it after marking itself sleeping; nic_doorbell
			 * rings if it is). */
			nic_doorbell(d);
			return true;
		}
		if (!nic_own(d))
			return round > 0;	/* the new holder sees the kick */
		nic_take_kick(d);
		nic_pass(d);
	}
}

bool nic_unown(struct emunic_dev *d)
{
	return unown(d, false, false);
}

bool nic_unown_posted(struct emunic_dev *d)
{
	return unown(d, false, !is_core);
}

void nic_assist_took(struct emunic_dev *d)
{
	if (d->wake_urgent)
		hand_over(d);
}

void nic_take_kick(struct emunic_dev *d)
{
	atomic_store_explicit(&d->kick, 0, memory_order_relaxed);
	atomic_store_explicit(&d->core_kicked, false, memory_order_relaxed);
}

bool nic_poll_assist(struct emunic_dev *d)
{
	int n;

	/* The holder polls; and a thread in some device's engine (a handler
	 * polling another device) must not run a second engine inside it
	 * (nic_owner_of names one device). */
	if (nic_owner_of || !nic_own(d))
		return false;
	/* Urgent work already has its hand-over (the core's timer), and a
	 * blocking call's wait runs it: a poll looks only for completions of
	 * work in verbs that nobody else collects soon (merely in verbs, or
	 * behind an MQ's WAIT where the core shares the CPUs).  What they make
	 * runnable (a WAIT satisfied, room freed), this thread runs. */
	if (!d->inflight || nic_urgent(d)) {
		n = unown(d, true, false);	/* a kick's rounds may run passes */
	} else {
		n = nic_verbs_poll(d);
		if (n && nic_urgent(d))
			n += nic_pass(d);
		n = unown(d, n == 0, false) || n > 0;
	}
	nic_notices_out(d);
	return n;
}

int nic_progress(struct emunic_dev *d)
{
	bool handlers = handlers_ok, ran = false;
	int n;

	if (nic_owner_of || !nic_own(d))
		return 0;
	/* A thread that polls for a result runs what its arrival asks of the
	 * engine's handlers (an engine's protocol step), as a waiter would. */
	handlers_ok = true;
	/* A look at verbs first: a test loop's usual call finds nothing, and
	 * holds the token for that look only (a thread preempted holding it
	 * stalls the engine: the core cannot take over).  A kick left for the
	 * holder is served by a whole pass, here or in leaving. */
	n = nic_verbs_poll(d);
	if (n || nic_runnable(d) || atomic_load(&d->kick) || atomic_load(&d->need_core)) {
		nic_take_kick(d);
		n += nic_pass(d);
		d->st.progress_passes++;
		ran = true;
	}
	/* A pass run for a kick hands over as the kick asked, even if it
	 * found nothing (a waiter that left, a core that found the token
	 * held, each counts on the holder's hand-over). */
	n = unown(d, n == 0 && !ran, false) || n > 0;
	handlers_ok = handlers;
	nic_notices_out(d);
	return n;
}

bool nic_handlers_ok(void) { return handlers_ok; }
void nic_set_handlers_ok(bool ok) { handlers_ok = ok; }
void nic_set_core_thread(void) { is_core = handlers_ok = true; }
bool nic_is_core_thread(void) { return is_core; }
