/* SPDX-License-Identifier: MIT */
/*
 * What a fired op does, in the engine: puts, gets and atomics become tasks
 * on their QP's send queue (which takes them whatever their number: the
 * transport's own queue is taken only when verbs gets them); their
 * completion counts on the op's counter and event queue; a get or atomic on
 * a counted target then tells the target's engine (zero-length write with
 * immediate).  A finish that must run an event handler waits for a thread
 * that may run handlers, with its count, so the event still comes first.
 */
#include "emunic/triggered/trig.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>

static const int done_kind[] = {
	[EMUNIC_OP_PUT] = EMUNIC_EV_ACK, [EMUNIC_OP_GET] = EMUNIC_EV_REPLY, [EMUNIC_OP_FETCH_ADD] = EMUNIC_EV_FETCH,
	[EMUNIC_OP_CT_INC] = EMUNIC_EV_CT_DONE, [EMUNIC_OP_CT_SET] = EMUNIC_EV_CT_DONE,
};
static const int target_kind[] = {
	[EMUNIC_OP_PUT] = IMM_PUT, [EMUNIC_OP_GET] = IMM_GET, [EMUNIC_OP_FETCH_ADD] = IMM_ATOMIC,
};

static uint32_t imm_of(const struct trig *x)
{
	const struct emunic_target *t = &x->target;

	return (uint32_t)target_kind[x->kind] << IMM_KIND_SHIFT | (uint32_t)t->id << IMM_ID_SHIFT |
	       (uint32_t)(x->offset >> t->shift);
}

static void task_done(struct emunic_dev *d, struct emunic_qp *qp, struct nic_task *t, int status,
		      const struct ibv_wc *wc);
static void task_issued(struct emunic_dev *d, struct emunic_qp *qp, struct nic_task *t);

static const struct nic_task_ops trig_task_ops = { .done = task_done, .issued = task_issued };

/* Nobody counts its completion: verbs may skip signaling it (never a
 * read's or an atomic's: nic/verbs.c push_queue). */
static bool quiet(const struct trig *x)
{
	return !x->ct && !x->eq && !(x->target.id && (x->kind == EMUNIC_OP_GET || x->kind == EMUNIC_OP_FETCH_ADD));
}

/* The task that carries x at its stage. */
static struct nic_task task_of(struct emunic_dev *d, struct trig *x)
{
	struct nic_task t = {
		.ops = &trig_task_ops, .ctx = x, .wr_id = x->user, .addr = x->addr, .len = (uint32_t)x->len,
		.lkey = x->lkey, .remote_addr = x->target.addr + x->offset, .rkey = x->target.rkey,
	};

	if (x->stage == STAGE_NOTIFY) {
		t.op = EMUNIC_TASK_WRITE_IMM;
		t.addr = 0;
		t.len = 0;
		t.lkey = 0;
		t.imm = imm_of(x);
		t.flags = NIC_TASK_QUIET;
		return t;
	}
	switch (x->kind) {
	case EMUNIC_OP_PUT:
		t.op = x->target.id ? EMUNIC_TASK_WRITE_IMM : EMUNIC_TASK_WRITE;
		t.imm = imm_of(x);
		break;
	case EMUNIC_OP_GET:
		t.op = EMUNIC_TASK_READ;
		break;
	default:
		t.op = EMUNIC_TASK_FETCH_ADD;
		t.add = x->add;
		break;
	}
	if (quiet(x) && !d->trig->sink_bps)
		t.flags = NIC_TASK_QUIET;
	return t;
}

static struct emunic_qp *live_qp(struct emunic_dev *d, uint32_t h)
{
	struct emunic_qp *qp = (struct emunic_qp *)nic_resolve(d, h, OBJ_QP);
	int s;

	if (!qp || atomic_load_explicit(&qp->o.gone, memory_order_relaxed))
		return NULL;
	s = atomic_load(&qp->state);
	return s == QP_ERROR || s == QP_CLOSED ? NULL : qp;
}

static void enqueue(struct emunic_dev *d, struct trig *x)
{
	struct emunic_qp *qp = live_qp(d, x->qp);
	struct nic_task t;

	if (!qp) {
		trig_finish(d, x, EMUNIC_WC_WR_FLUSH_ERR);
		return;
	}
	t = task_of(d, x);
	nic_qp_queue(d, qp, &t, false);
}

void trig_fire(struct emunic_dev *d, struct trig *x)
{
	struct emunic_ct *ct;

	trig_trace(d, EMUNIC_TR_FIRE, x, 0);
	if (atomic_load(&d->stop)) {	/* fired by a cancellation at close */
		trig_finish(d, x, EMUNIC_WC_CANCELED);
		return;
	}
	switch (x->kind) {
	case EMUNIC_OP_CT_INC:
	case EMUNIC_OP_CT_SET:
		ct = (struct emunic_ct *)nic_resolve(d, x->ct_target, OBJ_CT);
		if (!ct || atomic_load_explicit(&ct->o.gone, memory_order_relaxed)) {
			trig_finish(d, x, EMUNIC_WC_CANCELED);
			return;
		}
		if (x->kind == EMUNIC_OP_CT_INC)
			trig_ct_add(d, ct, x->ct_value.success, x->ct_value.failure);
		else
			trig_ct_store(d, ct, x->ct_value);
		trig_finish(d, x, EMUNIC_WC_SUCCESS);
		return;
	default:
		enqueue(d, x);
	}
}

/* The event, then the count, then (a get or atomic on a counted target)
 * the notice to the target. */
static void finish_now(struct emunic_dev *d, struct trig *x, int status)
{
	struct emunic_eq *eq = x->eq ? (struct emunic_eq *)nic_resolve(d, x->eq, OBJ_EQ) : NULL;
	struct emunic_ct *ct = x->ct ? (struct emunic_ct *)nic_resolve(d, x->ct, OBJ_CT) : NULL;

	trig_trace(d, EMUNIC_TR_DONE, x, status);
	/* The event before the count: whoever sees the count say done may
	 * rely on every event of it having been delivered (and handled). */
	if (eq && !atomic_load_explicit(&eq->o.gone, memory_order_relaxed)) {
		struct emunic_qp *qp = x->qp ? (struct emunic_qp *)nic_resolve(d, x->qp, OBJ_QP) : NULL;
		struct emunic_event ev = {
			.kind = done_kind[x->kind], .status = status, .peer = x->peer,
			.qp_num = qp ? atomic_load(&qp->qpn) : 0, .le = x->target.id,
			.length = x->len, .offset = x->offset, .user = x->user,
		};

		trig_eq_push(d, eq, &ev);
	}
	if (ct)
		trig_ct_add(d, ct, status == EMUNIC_WC_SUCCESS, status != EMUNIC_WC_SUCCESS);
	/* The target counts a get or atomic it served only if told. */
	if (status == EMUNIC_WC_SUCCESS && x->target.id && (x->kind == EMUNIC_OP_GET || x->kind == EMUNIC_OP_FETCH_ADD)) {
		x->stage = STAGE_NOTIFY;
		enqueue(d, x);
		return;
	}
	trig_put(d, x);
}

void trig_finish(struct emunic_dev *d, struct trig *x, int status)
{
	struct trig_dev *t = d->trig;
	struct emunic_eq *eq;

	if (x->stage == STAGE_NOTIFY) {	/* the op itself was counted already */
		trig_put(d, x);
		return;
	}
	eq = x->eq ? (struct emunic_eq *)nic_resolve(d, x->eq, OBJ_EQ) : NULL;
	if (t->deferred || (eq && trig_eq_defers(eq))) {
		/* Its handler cannot run on this thread: the whole finish
		 * waits, in order, for one that may (the core, a waiter). */
		x->status = status;
		x->next = NULL;
		if (t->deferred_tail)
			t->deferred_tail->next = x;
		else
			t->deferred = x;
		t->deferred_tail = x;
		atomic_store(&d->need_core, true);
		return;
	}
	finish_now(d, x, status);
}

int trig_run_deferred(struct emunic_dev *d)
{
	struct trig_dev *t = d->trig;
	int n = 0;

	if (!nic_handlers_ok())
		return 0;
	while (t->deferred) {
		struct trig *x = t->deferred;

		t->deferred = x->next;
		if (!t->deferred)
			t->deferred_tail = NULL;
		finish_now(d, x, x->status);
		n++;
	}
	return n;
}

static void task_issued(struct emunic_dev *d, struct emunic_qp *qp, struct nic_task *t)
{
	struct trig *x = t->ctx;

	(void)qp;
	x->issue_ns = emunic_now_ns();
	trig_trace(d, EMUNIC_TR_ISSUE, x, 0);
}

static void task_done(struct emunic_dev *d, struct emunic_qp *qp, struct nic_task *t, int status,
		      const struct ibv_wc *wc)
{
	struct trig *x = t->ctx;

	(void)qp;
	(void)wc;		/* the sink counts what the get asked for */
	if (x->stage == STAGE_NOTIFY) {
		trig_put(d, x);	/* a failure was logged by the verbs poll */
		return;
	}
	if (status == EMUNIC_WC_SUCCESS && x->kind == EMUNIC_OP_GET && d->trig->sink_bps) {
		trig_sink_hold(d, x);
		return;
	}
	trig_finish(d, x, status);
}
