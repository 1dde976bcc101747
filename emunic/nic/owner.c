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
 * An application thread that gives the token back hands the engine over to
 * the core thread: if work is left that only a completion can move, the
 * core's timer is set to wake it after the hand-over delay (the application
 * usually comes back first, to wait, and then the core never wakes; the
 * core adapts the delay, thread.c); completions nobody waits for are
 * collected within LAZY; a unit's deadline sets the timer too.
 */
#include "emunic/nic/nic.h"


#define UNOWN_ROUNDS 4			/* extra passes a leaving holder runs for others */

static _Thread_local const struct emunic_dev *owner_of;
static _Thread_local bool handlers_ok, is_core;

bool nic_own(struct emunic_dev *d)
{
	if (atomic_load_explicit(&d->held, memory_order_relaxed) ||
	    atomic_exchange_explicit(&d->held, 1, memory_order_acquire))
		return false;
	owner_of = d;
	return true;
}

bool nic_owned(const struct emunic_dev *d)
{
	return owner_of == d;
}

/* Under the token: when must the core thread look again, given what this
 * application thread leaves behind?  A thread that assists (waits, running
 * the engine) is the engine and changes nothing.  A thread that leaves
 * stamps the time and, if work is left that needs the engine, makes sure
 * the timer fires within the hand-over delay; a timer already due sooner
 * stays, so a tight post/wait loop makes no system call here: when that
 * timer fires with the application still about, the core sets it again
 * itself (thread.c). */
static void hand_over(struct emunic_dev *d)
{
	uint64_t now, want, cur;
	bool urgent = false;

	if (atomic_load_explicit(&d->assisting, memory_order_relaxed) && !atomic_load(&d->need_core))
		return;
	now = emunic_now_ns();
	atomic_store_explicit(&d->left_ns, now, memory_order_relaxed);
	want = nic_next_due_ns(d);
	cur = atomic_load(&d->wake_ns);
	if (cur <= now)
		cur = UINT64_MAX;	/* it fired: the core may have taken it already */
	if (atomic_load(&d->need_core)) {
		want = now;
		urgent = true;
	} else if (nic_pending(d)) {
		uint64_t delay = atomic_load_explicit(&d->handover_ns, memory_order_relaxed);

		if (now + delay < want)
			want = now + delay;
		urgent = true;
	}
	if (want < cur) {
		nic_set_wake(d, want);
		atomic_store_explicit(&d->wake_urgent, urgent, memory_order_relaxed);
	}
}

void nic_unown(struct emunic_dev *d)
{
	for (int round = 0;; round++) {
		if (!is_core)
			hand_over(d);
		owner_of = NULL;
		atomic_store_explicit(&d->held, 0, memory_order_release);
		atomic_thread_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&d->kick, memory_order_relaxed))
			return;
		if (round == UNOWN_ROUNDS) {
			nic_doorbell(d);	/* the core takes it from here */
			return;
		}
		if (!nic_own(d))
			return;			/* the new holder sees the kick */
		atomic_store_explicit(&d->kick, 0, memory_order_relaxed);
		nic_pass(d);
	}
}

void nic_kick(struct emunic_dev *d)
{
	atomic_store_explicit(&d->kick, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}

bool nic_handlers_ok(void) { return handlers_ok; }
void nic_set_handlers_ok(bool ok) { handlers_ok = ok; }
void nic_set_core_thread(void) { is_core = handlers_ok = true; }
bool nic_is_core_thread(void) { return is_core; }
