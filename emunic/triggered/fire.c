/* SPDX-License-Identifier: MIT */
/*
 * The trigger rules, in one place (DESIGN.md, "Triggered operations"):
 *   post (app thread)  – arguments checked and copied; a triggered post takes
 *                        a trigger-table entry or fails with -ENOSPC, never
 *                        blocks; the op goes to the core through the ring.
 *   insert (core)      – into its counter's pending list, kept sorted by
 *                        threshold, ties after the ones posted before.
 *   fire (core)        – a counter that moved is "dirty"; settling walks its
 *                        list head while success + failure >= threshold,
 *                        freeing the table entry and running the op.  Only
 *                        the core does this: ct_set/ct_inc from the app are
 *                        ops too, so they are ordered with the posts around
 *                        them and the triggers they satisfy fire here.
 *   fail (core)        – a trigger whose counter is freed (or whose device
 *                        closes) never runs: its own completion counter counts
 *                        a failure and its event queue gets the status.
 * What an op does once fired is in wire.c.
 */
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <errno.h>
#include <stdlib.h>

const char *emunic_op_kind_str(int kind)
{
	static const char *const names[] = {
		[EMUNIC_OP_PUT] = "put", [EMUNIC_OP_GET] = "get", [EMUNIC_OP_FETCH_ADD] = "fetch_add",
		[EMUNIC_OP_CT_INC] = "ct_inc", [EMUNIC_OP_CT_SET] = "ct_set",
	};

	return kind >= EMUNIC_OP_PUT && kind <= EMUNIC_OP_CT_SET ? names[kind] : "unknown";
}

/* ---- post (app thread) ---------------------------------------------------------- */

static int bad(const struct emunic_op *op, const char *why)
{
	return emunic_err(-EINVAL, "%s to peer %d (user %llu): %s; nothing was posted", emunic_op_kind_str(op->kind),
			  op->qp && op->qp->o.kind == OBJ_QP ? op->qp->peer : -1, (unsigned long long)op->user, why);
}

static int check(struct emunic_dev *d, const struct emunic_op *op)
{
	const struct emunic_target *t = &op->target;

	if (op->ct && !emunic_obj_alive(d, &op->ct->o, OBJ_CT))
		return bad(op, "its completion counter is not a live counter of this device");
	if (op->eq && !emunic_obj_alive(d, &op->eq->o, OBJ_EQ))
		return bad(op, "its event queue is not a live event queue of this device");
	switch (op->kind) {
	case EMUNIC_OP_CT_INC:
	case EMUNIC_OP_CT_SET:
		if (!emunic_obj_alive(d, op->ct_target ? &op->ct_target->o : NULL, OBJ_CT))
			return bad(op, "the counter it changes is not a live counter of this device");
		return 0;
	case EMUNIC_OP_PUT:
	case EMUNIC_OP_GET:
	case EMUNIC_OP_FETCH_ADD:
		break;
	default:
		return bad(op, "unknown operation kind");
	}
	if (!emunic_obj_alive(d, op->qp ? &op->qp->o : NULL, OBJ_QP))
		return bad(op, "its QP is not a live QP of this device");
	if (!(op->qp->attr.flags & EMUNIC_QP_TRIGGERED))
		return bad(op, "its QP was not created EMUNIC_QP_TRIGGERED");
	if (op->len && (!op->mr || !emunic_obj_alive(d, &op->mr->o, OBJ_MR)))
		return bad(op, "its local buffer has no registered memory region");
	if (op->len && !emunic_mr_covers(op->mr, op->addr, op->len))
		return bad(op, "its local buffer is not inside its memory region");
	if (op->len > UINT32_MAX)
		return bad(op, "longer than one verbs message (4 GiB)");
	if (op->offset > t->len || op->len > t->len - op->offset)
		return bad(op, "offset + length runs past the end of the target");
	if (op->kind == EMUNIC_OP_FETCH_ADD && (op->len != 8 || (t->addr + op->offset) % 8))
		return bad(op, "fetch_add needs an 8-byte local buffer and an 8-byte aligned target");
	if (t->id && (t->id > IMM_ID_MAX || t->shift > 24 || op->offset % (1ull << t->shift) ||
		      (op->offset >> t->shift) > IMM_UNIT_MAX))
		return bad(op, "the offset is not a multiple of the target's unit or is beyond 65535 units");
	return 0;
}

#define POST_STACK 8	/* single posts (the common case) need no array */

static void free_trigs(struct trig **x, unsigned n, struct trig **stack)
{
	for (unsigned i = 0; i < n; i++)
		free(x[i]);
	if (x != stack)
		free(x);
}

/* n ops, all or none: checked and copied, table entries reserved, then
 * published under one lock with one doorbell. */
static int post(struct emunic_dev *d, const struct emunic_op *ops, struct emunic_ct *const *on,
		const uint64_t *threshold, unsigned n)
{
	struct trig *stack[POST_STACK], **x;
	unsigned ntrig = 0;
	int r = 0;

	if (!d || !ops || !n)
		return emunic_err(-EINVAL, "op_post: no device or no ops");
	for (unsigned i = 0; i < n; i++) {
		if (on && on[i] && !emunic_obj_alive(d, &on[i]->o, OBJ_CT))
			return emunic_err(-EINVAL, "trig_post: op %u: the trigger counter is not a live counter of "
					  "this device; nothing was posted", i);
		if ((r = check(d, &ops[i])))
			return r;
		ntrig += on && on[i];
	}
	x = n > POST_STACK ? calloc(n, sizeof(*x)) : stack;
	for (unsigned i = 0; x && i < n; i++) {
		x[i] = calloc(1, sizeof(**x));
		if (!x[i]) {
			free_trigs(x, i, stack);
			return -ENOMEM;
		}
		x[i]->op = ops[i];
		x[i]->lkey = ops[i].len ? ops[i].mr->mr->lkey : 0;
		x[i]->on = on ? on[i] : NULL;
		x[i]->threshold = threshold ? threshold[i] : 0;
	}
	if (!x)
		return -ENOMEM;
	/* Table entries are taken here and given back when the triggers
	 * fire: a full table refuses, it never waits. */
	if (ntrig && atomic_fetch_add(&d->trig_used, ntrig) + ntrig > d->trig_max) {
		atomic_fetch_sub(&d->trig_used, ntrig);
		free_trigs(x, n, stack);
		return -ENOSPC;
	}
	pthread_mutex_lock(&d->post_lock);
	if (emunic_ring_space(&d->cmd) >= n) {
		for (unsigned i = 0; i < n; i++)
			*(struct cmd *)emunic_ring_slot(&d->cmd, i) = (struct cmd){ .type = CMD_TRIG, .obj = x[i] };
		emunic_ring_publish(&d->cmd, n);
	} else {
		r = -ENOSPC;
	}
	pthread_mutex_unlock(&d->post_lock);
	if (r) {
		atomic_fetch_sub(&d->trig_used, ntrig);
		free_trigs(x, n, stack);
		return r;
	}
	free_trigs(x, 0, stack);	/* the core owns the ops now */
	if (!emunic_on_core(d))
		emunic_core_doorbell(d);
	return 0;
}

int emunic_op_post(struct emunic_dev *d, const struct emunic_op *op)
{
	return post(d, op, NULL, NULL, 1);
}

int emunic_trig_post(struct emunic_dev *d, const struct emunic_op *op, struct emunic_ct *on, uint64_t threshold)
{
	if (!on)
		return emunic_err(-EINVAL, "trig_post: no trigger counter");
	return post(d, op, &on, &threshold, 1);
}

int emunic_trig_post_n(struct emunic_dev *d, const struct emunic_op *ops, struct emunic_ct *const *on,
		       const uint64_t *threshold, unsigned n)
{
	return post(d, ops, on, threshold, n);
}

unsigned emunic_trig_pending(const struct emunic_dev *d)
{
	return atomic_load(&((struct emunic_dev *)d)->trig_used);
}

/* ---- insert, fire, fail (core) ------------------------------------------------------ */

static uint64_t total(const struct emunic_ct *ct)
{
	return atomic_load_explicit(&ct->success, memory_order_relaxed) +
	       atomic_load_explicit(&ct->failure, memory_order_relaxed);
}

/* Fires every trigger whose counter reached it, each counter's list in
 * threshold order (counters themselves in no promised order).  Firing may move other
 * counters (ct_inc, ct_set); they are settled in the same call. */
static void settle(struct emunic_dev *d)
{
	while (d->dirty) {
		struct emunic_ct *ct = d->dirty;

		d->dirty = ct->dirty_next;
		ct->dirty = false;
		while (ct->pending && total(ct) >= ct->pending->threshold) {
			struct trig *x = ct->pending;

			ct->pending = x->next;
			x->next = NULL;
			atomic_fetch_sub(&d->trig_used, 1);
			emunic_trig_fire(d, x);
		}
	}
}

void emunic_trig_cmd(struct emunic_dev *d, struct trig *x)
{
	struct trig **pp;

	if (!x->on) {
		emunic_trig_fire(d, x);
	} else if (atomic_load_explicit(&x->on->o.gone, memory_order_relaxed)) {
		atomic_fetch_sub(&d->trig_used, 1);
		emunic_trig_finish(d, x, EMUNIC_WC_CANCELED);	/* freed before it arrived */
	} else {
		/* A linear walk: lists are short, or posted in rising order
		 * (then this is the cost of one pass over the pending ones). */
		for (pp = &x->on->pending; *pp && (*pp)->threshold <= x->threshold; pp = &(*pp)->next)
			;
		x->next = *pp;
		*pp = x;
		if (!x->on->dirty) {	/* a threshold already met fires at once */
			x->on->dirty = true;
			x->on->dirty_next = d->dirty;
			d->dirty = x->on;
		}
	}
	settle(d);
}

int emunic_trig_run(struct emunic_dev *d)
{
	int n = d->dirty != NULL;

	settle(d);
	return n + emunic_trig_backlog_run(d) + emunic_trig_sink_run(d);
}

/* A counter freed, or the device closing: its triggers never run. */
static unsigned fail_pending(struct emunic_dev *d, struct emunic_ct *ct)
{
	unsigned n = 0;

	while (ct->pending) {
		struct trig *x = ct->pending;

		ct->pending = x->next;
		atomic_fetch_sub(&d->trig_used, 1);
		emunic_trig_finish(d, x, EMUNIC_WC_CANCELED);
		n++;
	}
	return n;
}

void emunic_trig_ct_release(struct emunic_dev *d, struct emunic_ct *ct, bool closing)
{
	unsigned n = fail_pending(d, ct);

	if (n)
		emunic_info("ct %p %s with %u trigger(s) pending: failed, not fired", (void *)ct,
			    closing ? "canceled at device close" : "freed", n);
	/* Waiters read dead and return -ECANCELED. */
	atomic_fetch_add_explicit(&d->ct_seq, 1, memory_order_release);
	emunic_futex_wake(&d->ct_seq);
	settle(d);	/* failures counted on other counters may fire theirs */
}
