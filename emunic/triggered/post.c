/* SPDX-License-Identifier: MIT */
/*
 * Posting ops, on the app's thread: arguments are checked and copied into a
 * slot (objects by handle); a triggered post takes a trigger-table entry or
 * fails with -ENOSPC, never blocks; the ops go to the engine through the
 * ring, all of a batch at once.  Slots come from chunks that are never
 * freed before close; the engine gives finished ones back on a list the app
 * takes whole when its own runs dry.
 */
#include "emunic/triggered/trig.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>

/* ---- slots ---------------------------------------------------------------------- */

struct trig *trig_slot(struct emunic_dev *d, uint32_t id)
{
	struct trig *c = atomic_load_explicit(&d->trig->chunk[id / TRIG_SLAB], memory_order_acquire);

	return c ? &c[id % TRIG_SLAB] : NULL;
}

/* app, under post_lock */
static struct trig *take(struct emunic_dev *d)
{
	struct trig_dev *t = d->trig;
	struct trig *x;

	if (!t->app_free)
		t->app_free = atomic_exchange_explicit(&t->eng_free, NULL, memory_order_acquire);
	if (!t->app_free && t->chunks < TRIG_CHUNKS) {
		struct trig *c = calloc(TRIG_SLAB, sizeof(*c));

		if (!c)
			return NULL;
		for (uint32_t i = TRIG_SLAB; i-- > 0;) {
			c[i].id = t->chunks * TRIG_SLAB + i;
			c[i].next = t->app_free;
			t->app_free = &c[i];
		}
		atomic_store_explicit(&t->chunk[t->chunks++], c, memory_order_release);
	}
	x = t->app_free;
	if (x)
		t->app_free = x->next;
	return x;
}

static void untake(struct emunic_dev *d, struct trig *x)
{
	x->next = d->trig->app_free;
	d->trig->app_free = x;
}

/* engine: one producer (the token holder), the app takes the list whole */
void trig_put(struct emunic_dev *d, struct trig *x)
{
	struct trig_dev *t = d->trig;

	x->next = atomic_load_explicit(&t->eng_free, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&t->eng_free, &x->next, x, memory_order_release,
						      memory_order_relaxed))
		;
}

void trig_slots_fini(struct emunic_dev *d)
{
	for (uint32_t i = 0; i < d->trig->chunks; i++)
		free(atomic_load(&d->trig->chunk[i]));
}

/* ---- checks ------------------------------------------------------------------------ */

static int bad(const struct emunic_op *op, const char *why)
{
	return emunic_err(-EINVAL, "%s to peer %d (user %llu): %s; nothing was posted", emunic_op_kind_str(op->kind),
			  op->qp && op->qp->o.kind == OBJ_QP ? op->qp->peer : -1, (unsigned long long)op->user, why);
}

/* What the device cannot carry: -EOPNOTSUPP, not a QP broken later. */
static int lacks(struct emunic_dev *d, const struct emunic_op *op)
{
	const char *why = NULL;

	/* A target is told in immediate data, or where the device has none
	 * by the SEND that stands for it (nic/imm_send.c): never refused. */
	if (op->kind == EMUNIC_OP_FETCH_ADD)
		why = emunic_vdev_lacks(d->v, EMUNIC_LACKS_ATOMIC);
	if (!why)
		return 0;
	return emunic_err(-EOPNOTSUPP, "%s to peer %d (user %llu): device %s: %s; nothing was posted",
			  emunic_op_kind_str(op->kind), op->qp->peer, (unsigned long long)op->user, d->v->name, why);
}

static int check(struct emunic_dev *d, const struct emunic_op *op)
{
	const struct emunic_target *t = &op->target;

	if (op->ct && !nic_obj_alive(d, &op->ct->o, OBJ_CT))
		return bad(op, "its completion counter is not a live counter of this device");
	if (op->eq && !nic_obj_alive(d, &op->eq->o, OBJ_EQ))
		return bad(op, "its event queue is not a live event queue of this device");
	switch (op->kind) {
	case EMUNIC_OP_CT_INC:
	case EMUNIC_OP_CT_SET:
		if (!nic_obj_alive(d, op->ct_target ? &op->ct_target->o : NULL, OBJ_CT))
			return bad(op, "the counter it changes is not a live counter of this device");
		return 0;
	case EMUNIC_OP_PUT:
	case EMUNIC_OP_GET:
	case EMUNIC_OP_FETCH_ADD:
		break;
	default:
		return bad(op, "unknown operation kind");
	}
	if (!nic_obj_alive(d, op->qp ? &op->qp->o : NULL, OBJ_QP))
		return bad(op, "its QP is not a live QP of this device");
	if (!(op->qp->attr.flags & EMUNIC_QP_TRIGGERED))
		return bad(op, "its QP was not created EMUNIC_QP_TRIGGERED");
	if (op->len && (!op->mr || !nic_obj_alive(d, &op->mr->o, OBJ_MR)))
		return bad(op, "its local buffer has no registered memory region");
	if (op->len && !nic_mr_covers(op->mr, op->addr, op->len))
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
	return lacks(d, op);
}

static uint32_t handle_of(const void *o)
{
	return o ? ((const struct obj *)o)->handle : 0;
}

static void fill(struct trig *x, const struct emunic_op *op, const struct emunic_ct *on, uint64_t threshold)
{
	uint32_t id = x->id;

	*x = (struct trig){
		.id = id, .kind = (uint8_t)op->kind, .peer = op->qp ? op->qp->peer : -1,
		.qp = handle_of(op->qp), .ct = handle_of(op->ct), .eq = handle_of(op->eq),
		.ct_target = handle_of(op->ct_target), .on = handle_of(on),
		.addr = (uintptr_t)op->addr, .len = op->len, .offset = op->offset, .add = op->add, .user = op->user,
		.lkey = op->len ? op->mr->mr->lkey : 0, .target = op->target, .ct_value = op->ct_value,
		.threshold = threshold,
	};
}

/* ---- posting ----------------------------------------------------------------------- */

/* n ops, all or none: checked, then slots filled, table entries reserved
 * and the ops published under one lock. */
static int post(struct emunic_dev *d, const struct emunic_op *ops, struct emunic_ct *const *on,
		const uint64_t *threshold, unsigned n)
{
	struct trig_dev *t;
	unsigned ntrig = 0, got = 0;
	struct trig *first = NULL;
	int r = 0;

	if (!d || !ops || !n)
		return emunic_err(-EINVAL, "op_post: no device or no ops");
	t = d->trig;
	for (unsigned i = 0; i < n; i++) {
		if (on && on[i] && !nic_obj_alive(d, &on[i]->o, OBJ_CT))
			return emunic_err(-EINVAL, "trig_post: op %u: the trigger counter is not a live counter of "
					  "this device; nothing was posted", i);
		if ((r = check(d, &ops[i])))
			return r;
		ntrig += on && on[i];
	}
	/* Table entries are taken here and given back when the triggers
	 * fire: a full table refuses, it never waits. */
	if (ntrig && atomic_fetch_add(&t->used, ntrig) + ntrig > t->max) {
		atomic_fetch_sub(&t->used, ntrig);
		return -ENOSPC;
	}
	emunic_lock(&d->post_lock);
	if (emunic_ring_space(&d->cmd) < n)
		r = -ENOSPC;
	for (; !r && got < n; got++) {
		struct trig *x = take(d);
		struct nic_cmd *c = emunic_ring_slot(&d->cmd, got);

		if (!x) {
			r = -ENOMEM;
			break;
		}
		fill(x, &ops[got], on ? on[got] : NULL, threshold ? threshold[got] : 0);
		*c = (struct nic_cmd){ .type = NIC_CMD_TRIG, .mq = x->id };
		x->next = first;	/* to give back if the batch fails */
		first = x;
	}
	if (!r)
		emunic_ring_publish(&d->cmd, n);
	else
		while (first) {
			struct trig *x = first;

			first = x->next;
			untake(d, x);
		}
	emunic_unlock(&d->post_lock);
	if (r) {
		atomic_fetch_sub(&t->used, ntrig);
		return r;
	}
	nic_submitted(d, NIC_LEAVE_TO_CORE);
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
	return atomic_load(&d->trig->used);
}
