/* SPDX-License-Identifier: MIT */
/*
 * The trigger rules, in one place (DESIGN.md, "Triggered operations"):
 *   post (app thread)  - post.c: checked and copied; a triggered post takes a
 *                        trigger-table entry or fails with -ENOSPC, never
 *                        blocks; the op goes to the engine through the ring.
 *   insert (engine)    - into its counter's pending list, kept sorted by
 *                        threshold, ties after the ones posted before.
 *   fire (engine)      - a counter that moved is "dirty"; settling walks its
 *                        list head while success + failure >= threshold,
 *                        freeing the table entry and running the op.  Only
 *                        the engine does this, under its token: ct_set and
 *                        ct_inc from the app are ops too, so they are ordered
 *                        with the posts around them and the triggers they
 *                        satisfy fire in the engine, never inline in a call
 *                        that bumps a counter.
 *   fail (engine)      - a trigger whose counter is freed (or whose device
 *                        closes) never runs: its own completion counter counts
 *                        a failure and its event queue gets the status.
 * What an op does once fired is in ops.c.
 */
#include "emunic/triggered/trig.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <stdlib.h>

static uint64_t total(const struct emunic_ct *ct)
{
	return atomic_load_explicit(&ct->success, memory_order_relaxed) +
	       atomic_load_explicit(&ct->failure, memory_order_relaxed);
}

/* Fires every trigger whose counter reached it, each counter's list in
 * threshold order (counters themselves in no promised order).  Firing may
 * move other counters (ct_inc, ct_set); they are settled in the same call. */
int trig_settle(struct emunic_dev *d)
{
	struct trig_dev *t = d->trig;
	int n = 0;

	while (t->dirty) {
		struct emunic_ct *ct = t->dirty;

		t->dirty = ct->dirty_next;
		ct->dirty = false;
		n++;
		while (ct->pending && total(ct) >= ct->pending->threshold) {
			struct trig *x = ct->pending;

			ct->pending = x->next;
			if (!ct->pending)
				ct->pending_tail = NULL;
			x->next = NULL;
			atomic_fetch_sub(&t->used, 1);
			nic_fired(d);
			EMUNIC_TL(TL_TRIG_FIRED, TL_TRACK_CT, NIC_HANDLE_INDEX(ct->o.handle), x->peer, x->user,
				  x->threshold, x->kind);
			trig_fire(d, x);
		}
	}
	return n;
}

void trig_on_cmd(struct emunic_dev *d, const struct nic_cmd *c)
{
	struct trig *x = trig_slot(d, c->mq), **pp;
	struct emunic_ct *on;

	if (!x)
		return;
	if (!x->on) {
		trig_fire(d, x);
		return;
	}
	on = (struct emunic_ct *)nic_resolve(d, x->on, OBJ_CT);
	if (!on || atomic_load_explicit(&on->o.gone, memory_order_relaxed)) {
		atomic_fetch_sub(&d->trig->used, 1);
		trig_finish(d, x, EMUNIC_WC_CANCELED);	/* freed before it arrived */
		return;
	}
	/* Thresholds are mostly posted rising (a pipeline, a game of puts):
	 * those append at the tail; only an earlier threshold walks. */
	if (!on->pending_tail || on->pending_tail->threshold <= x->threshold) {
		pp = on->pending_tail ? &on->pending_tail->next : &on->pending;
	} else {
		for (pp = &on->pending; (*pp)->threshold <= x->threshold; pp = &(*pp)->next)
			;
	}
	x->next = *pp;
	*pp = x;
	if (!x->next)
		on->pending_tail = x;
	trig_ct_changed(d, on);		/* a threshold already met fires at once */
	trig_settle(d);
}

/* A counter freed, or the device closing: its triggers never run. */
static unsigned fail_pending(struct emunic_dev *d, struct emunic_ct *ct)
{
	unsigned n = 0;

	while (ct->pending) {
		struct trig *x = ct->pending;

		ct->pending = x->next;
		if (!ct->pending)
			ct->pending_tail = NULL;
		atomic_fetch_sub(&d->trig->used, 1);
		trig_finish(d, x, EMUNIC_WC_CANCELED);
		n++;
	}
	return n;
}

void trig_ct_release(struct emunic_dev *d, struct emunic_ct *ct, bool closing)
{
	unsigned n = fail_pending(d, ct);

	if (n)
		nic_notice(d, "ct %p %s with %u trigger(s) pending: failed, not fired", (void *)ct,
			   closing ? "canceled at device close" : "freed", n);
	/* Waiters read dead and return -ECANCELED. */
	emunic_word_bump(&ct->word);
	trig_settle(d);		/* failures counted on other counters may fire theirs */
}
