/* SPDX-License-Identifier: MIT */
/*
 * What a fired op does, on the progress core: puts, gets and atomics become
 * verbs work on their QP's send queue (or wait in the QP's backlog when the
 * queue is full: transport resources are taken at fire time); their
 * completion counts on the op's counter and event queue; a get or atomic on
 * a counted target then tells the target's core (zero-length write with
 * immediate).  Arrivals on TRIGGERED QPs are counted on the list entry the
 * immediate names.  The slow-sink emulation holds get completions here.
 */
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const int done_kind[] = {
	[EMUNIC_OP_PUT] = EMUNIC_EV_ACK, [EMUNIC_OP_GET] = EMUNIC_EV_REPLY, [EMUNIC_OP_FETCH_ADD] = EMUNIC_EV_FETCH,
	[EMUNIC_OP_CT_INC] = EMUNIC_EV_CT_DONE, [EMUNIC_OP_CT_SET] = EMUNIC_EV_CT_DONE,
};
static const int target_kind[] = {
	[EMUNIC_OP_PUT] = IMM_PUT, [EMUNIC_OP_GET] = IMM_GET, [EMUNIC_OP_FETCH_ADD] = IMM_ATOMIC,
};

static bool gone(const struct obj *o)
{
	return !o || atomic_load_explicit(&((struct obj *)o)->gone, memory_order_relaxed);
}

static uint32_t imm_of(const struct trig *x)
{
	const struct emunic_target *t = &x->op.target;

	return (uint32_t)target_kind[x->op.kind] << IMM_KIND_SHIFT | (uint32_t)t->id << IMM_ID_SHIFT |
	       (uint32_t)(x->op.offset >> t->shift);
}

/* The verbs work request that carries x at its stage. */
static struct core_task task_of(struct emunic_qp *qp, struct trig *x)
{
	struct core_task ct = { .x = x, .lkey = x->lkey };
	struct emunic_task *t = &ct.t;
	const struct emunic_op *op = &x->op;

	t->wr_id = op->user;
	t->qp = qp;
	t->addr = op->addr;
	t->len = (uint32_t)op->len;
	t->remote_addr = op->target.addr + op->offset;
	t->rkey = op->target.rkey;
	if (x->stage == STAGE_NOTIFY) {
		t->op = EMUNIC_TASK_WRITE_IMM;
		t->addr = NULL;
		t->len = 0;
		ct.lkey = 0;
		t->imm = imm_of(x);
		return ct;
	}
	switch (op->kind) {
	case EMUNIC_OP_PUT:
		t->op = op->target.id ? EMUNIC_TASK_WRITE_IMM : EMUNIC_TASK_WRITE;
		t->imm = imm_of(x);
		break;
	case EMUNIC_OP_GET:
		t->op = EMUNIC_TASK_READ;
		break;
	default:
		t->op = EMUNIC_TASK_FETCH_ADD;
		t->add = op->add;
		break;
	}
	return ct;
}

static void backlog_flush(struct emunic_dev *d, struct emunic_qp *qp, int status)
{
	while (qp->backlog) {
		struct trig *x = qp->backlog;

		qp->backlog = x->next;
		d->backlogged--;
		emunic_trig_finish(d, x, status);
	}
	qp->backlog_tail = NULL;
}

static bool qp_failed(struct emunic_qp *qp)
{
	int s = atomic_load(&qp->state);

	return gone(&qp->o) || s == QP_ERROR || s == QP_CLOSED;
}

static void enqueue(struct emunic_dev *d, struct trig *x)
{
	struct emunic_qp *qp = x->op.qp;
	struct core_task ct;

	if (qp_failed(qp)) {
		emunic_trig_finish(d, x, EMUNIC_WC_WR_FLUSH_ERR);
		return;
	}
	if (qp->backlog || !emunic_exec_room(qp)) {
		x->next = NULL;
		if (qp->backlog_tail)
			qp->backlog_tail->next = x;
		else
			qp->backlog = x;
		qp->backlog_tail = x;
		d->backlogged++;
		return;
	}
	ct = task_of(qp, x);
	emunic_exec_task(d, &ct);
}

int emunic_trig_backlog_run(struct emunic_dev *d)
{
	int n = 0;

	if (!d->backlogged)
		return 0;
	for (struct obj *o = d->objs; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (o->kind != OBJ_QP || !qp->backlog)
			continue;
		if (qp_failed(qp)) {
			backlog_flush(d, qp, EMUNIC_WC_WR_FLUSH_ERR);
			continue;
		}
		while (qp->backlog && emunic_exec_room(qp)) {
			struct trig *x = qp->backlog;
			struct core_task ct;

			qp->backlog = x->next;
			if (!qp->backlog)
				qp->backlog_tail = NULL;
			d->backlogged--;
			ct = task_of(qp, x);
			emunic_exec_task(d, &ct);
			n++;
		}
	}
	return n;
}

void emunic_trig_fire(struct emunic_dev *d, struct trig *x)
{
	emunic_trace_rec(d, EMUNIC_TR_FIRE, x, 0);
	if (atomic_load(&d->stop)) {	/* fired by a cancellation at close */
		emunic_trig_finish(d, x, EMUNIC_WC_CANCELED);
		return;
	}
	switch (x->op.kind) {
	case EMUNIC_OP_CT_INC:
	case EMUNIC_OP_CT_SET:
		if (gone(&x->op.ct_target->o)) {
			emunic_trig_finish(d, x, EMUNIC_WC_CANCELED);
			return;
		}
		if (x->op.kind == EMUNIC_OP_CT_INC)
			emunic_ct_add(d, x->op.ct_target, x->op.ct_value.success, x->op.ct_value.failure);
		else
			emunic_ct_store(d, x->op.ct_target, x->op.ct_value);
		emunic_trig_finish(d, x, EMUNIC_WC_SUCCESS);
		return;
	default:
		enqueue(d, x);
	}
}

void emunic_trig_finish(struct emunic_dev *d, struct trig *x, int status)
{
	if (x->stage == STAGE_NOTIFY) {	/* the op itself was counted already */
		free(x);
		return;
	}
	emunic_trace_rec(d, EMUNIC_TR_DONE, x, status);
	/* The event before the count: whoever sees the count say done may
	 * rely on every event of it having been delivered (and handled). */
	if (x->op.eq && !gone(&x->op.eq->o)) {
		struct emunic_qp *qp = x->op.qp;
		struct emunic_event ev = {
			.kind = done_kind[x->op.kind], .status = status, .peer = qp ? qp->peer : -1,
			.qp_num = qp ? atomic_load(&qp->qpn) : 0, .le = x->op.target.id,
			.length = x->op.len, .offset = x->op.offset, .user = x->op.user,
		};

		emunic_eq_push(x->op.eq, &ev);
	}
	if (x->op.ct)
		emunic_ct_add(d, x->op.ct, status == EMUNIC_WC_SUCCESS, status != EMUNIC_WC_SUCCESS);
	/* The target counts a get or atomic it served only if told. */
	if (status == EMUNIC_WC_SUCCESS && x->op.target.id &&
	    (x->op.kind == EMUNIC_OP_GET || x->op.kind == EMUNIC_OP_FETCH_ADD)) {
		x->stage = STAGE_NOTIFY;
		enqueue(d, x);
		return;
	}
	free(x);
}

/* ---- the slow sink ------------------------------------------------------------------ */

void emunic_trig_issued(struct emunic_dev *d, struct trig *x)
{
	x->issue_ns = emunic_now_ns();
	emunic_trace_rec(d, EMUNIC_TR_ISSUE, x, 0);
}

/* Data a get fetches drains into memory at sink_bps from when the get went
 * out (the wire and the sink overlap, for one big get as for chunks): its
 * completion is counted once both the wire and the sink are done. */
static void sink_hold(struct emunic_dev *d, struct trig *x, uint64_t bytes)
{
	uint64_t now = emunic_now_ns(), start = d->sink_free_ns > x->issue_ns ? d->sink_free_ns : x->issue_ns;

	d->sink_free_ns = start + bytes * 1000000000ull / d->sink_bps;
	x->due_ns = d->sink_free_ns > now ? d->sink_free_ns : now;
	x->next = NULL;
	if (d->sink_tail)
		d->sink_tail->next = x;
	else
		d->sink = x;
	d->sink_tail = x;
}

int emunic_trig_sink_run(struct emunic_dev *d)
{
	uint64_t now;
	int n = 0;

	if (!d->sink)
		return 0;
	now = emunic_now_ns();
	while (d->sink && d->sink->due_ns <= now) {
		struct trig *x = d->sink;

		d->sink = x->next;
		if (!d->sink)
			d->sink_tail = NULL;
		emunic_trig_finish(d, x, EMUNIC_WC_SUCCESS);
		n++;
	}
	return n;
}

uint64_t emunic_trig_next_due_ns(struct emunic_dev *d)
{
	uint64_t now;

	if (!d->sink)
		return UINT64_MAX;
	now = emunic_now_ns();
	return d->sink->due_ns > now ? d->sink->due_ns - now : 0;
}

void emunic_trig_task_done(struct emunic_dev *d, struct emunic_qp *qp, struct trig *x, int status,
			   uint64_t byte_len)
{
	(void)qp;
	(void)byte_len;		/* the sink counts what the get asked for */
	if (x->stage == STAGE_NOTIFY) {
		free(x);	/* a failure was logged by the verbs poll */
		return;
	}
	if (status == EMUNIC_WC_SUCCESS && x->op.kind == EMUNIC_OP_GET && d->sink_bps) {
		sink_hold(d, x, x->op.len);
		return;
	}
	emunic_trig_finish(d, x, status);
}


/* ---- the target side ------------------------------------------------------------------ */

static int post_recvs(struct emunic_qp *qp, unsigned n)
{
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)qp | 1 }, *bad;

	for (unsigned i = 0; i < n; i++) {
		int r;

		if (qp->o.dev->faults && !emunic_fault_recv_ok(qp->o.dev, qp)) {
			qp->flt.owed += n - i;	/* an rnr rule holds them back */
			return 0;
		}
		r = ibv_post_recv(qp->vqp, &wr, &bad);

		if (r)
			return emunic_err(-r, "peer %d qp %u: posting a receive for arrivals failed (%s)", qp->peer,
					  atomic_load(&qp->qpn), strerror(r));
	}
	return 0;
}

void emunic_trig_post_owed(struct emunic_dev *d, struct emunic_qp *qp)
{
	unsigned n = qp->flt.owed;

	(void)d;
	qp->flt.owed = 0;
	post_recvs(qp, n);
}

int emunic_trig_qp_init(struct emunic_dev *d, struct emunic_qp *qp)
{
	(void)d;
	if (!(qp->attr.flags & EMUNIC_QP_TRIGGERED) || qp->recvs_posted)
		return 0;
	qp->recvs_posted = true;
	return post_recvs(qp, qp->attr.depth);
}

void emunic_trig_arrival(struct emunic_dev *d, struct emunic_qp *qp, const struct ibv_wc *wc)
{
	static const int ev_kind[] = { [IMM_PUT] = EMUNIC_EV_PUT, [IMM_GET] = EMUNIC_EV_GET,
				       [IMM_ATOMIC] = EMUNIC_EV_ATOMIC };
	struct emunic_event ev = { .peer = qp->peer, .qp_num = wc->qp_num };
	struct emunic_le *le;
	uint32_t imm, kind, unit;

	if (wc->status != IBV_WC_SUCCESS)
		return;		/* the QP failed: its sends report it */
	if (qp->vqp && wc->qp_num == atomic_load(&qp->qpn))
		post_recvs(qp, 1);	/* not for a connection that failed since */
	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		emunic_info("peer %d qp %u: a message without immediate data on a triggered QP: dropped",
			    qp->peer, wc->qp_num);
		return;
	}
	imm = ntohl(wc->imm_data);
	kind = imm >> IMM_KIND_SHIFT;
	ev.le = (imm >> IMM_ID_SHIFT) & IMM_ID_MAX;
	unit = imm & IMM_UNIT_MAX;
	le = __atomic_load_n(&d->les[ev.le], __ATOMIC_ACQUIRE);
	if (!kind || !le || gone(&le->o)) {
		emunic_info("peer %d qp %u: %s for list entry %u, which does not exist (destroyed?): not counted",
			    qp->peer, wc->qp_num, kind == IMM_PUT ? "a put" : "a get or atomic", ev.le);
		return;
	}
	ev.kind = ev_kind[kind];
	ev.offset = (uint64_t)unit << le->attr.shift;
	if (kind == IMM_PUT) {
		ev.length = wc->byte_len;
		if ((le->attr.flags & EMUNIC_LE_HDR) && wc->byte_len >= 16 && ev.offset + 16 <= le->attr.len) {
			const char *p = (const char *)le->attr.addr + ev.offset;

			memcpy(&ev.match_bits, p, 8);
			memcpy(&ev.hdr_data, p + 8, 8);
			ev.length -= 16;
		}
	}
	if (le->attr.eq && !gone(&le->attr.eq->o))
		emunic_eq_push(le->attr.eq, &ev);
	if (le->attr.ct)
		emunic_ct_add(d, le->attr.ct, 1, 0);
}

/* ---- release and close ------------------------------------------------------------------ */

void emunic_trig_release(struct emunic_dev *d, struct obj *o)
{
	switch (o->kind) {
	case OBJ_CT:
		emunic_trig_ct_release(d, (struct emunic_ct *)o, false);
		break;
	case OBJ_LE: {
		struct emunic_le *le = (struct emunic_le *)o;

		pthread_mutex_lock(&d->post_lock);
		if (d->les[le->id] == le)
			__atomic_store_n(&d->les[le->id], NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&d->post_lock);
		break;
	}
	case OBJ_QP: {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		backlog_flush(d, qp, EMUNIC_WC_CANCELED);
		/* Ops verbs had when the QP went: their completions will not
		 * come (the poll drops a gone QP's). */
		for (uint64_t i = qp->sq.done; i < qp->sq.head; i++) {
			struct core_task *ct = &qp->sq.q[i & qp->sq.mask];

			if (ct->x)
				emunic_trig_finish(d, ct->x, EMUNIC_WC_CANCELED);
			ct->x = NULL;
		}
		break;
	}
	default:
		break;
	}
}

void emunic_trig_cancel_all(struct emunic_dev *d)
{
	unsigned n = 0;

	for (struct obj *o = d->objs; o; o = o->next) {
		if (o->kind == OBJ_CT)
			emunic_trig_ct_release(d, (struct emunic_ct *)o, true);
		else if (o->kind == OBJ_QP)
			backlog_flush(d, (struct emunic_qp *)o, EMUNIC_WC_CANCELED);
	}
	while (d->sink) {
		struct trig *x = d->sink;

		d->sink = x->next;
		emunic_trig_finish(d, x, EMUNIC_WC_CANCELED);
		n++;
	}
	d->sink_tail = NULL;
	if (n)
		emunic_info("device %s closing: %u get(s) held by the emulated slow sink canceled", d->v->name, n);
}
