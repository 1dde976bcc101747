/* SPDX-License-Identifier: MIT */
/*
 * The management-queue rules at run time, on the progress core (the rules
 * at post time are in post.c).  Each queue runs its tasks in order as they
 * become eligible:
 *   - a QP's send (receive) queue hands its next task to verbs when the QP is
 *     up, the verbs queue has room and, if MANAGED_SEND (MANAGED_RECV), an
 *     enable has released it;
 *   - an MQ runs WAIT (blocks until the CQ's count reaches the target fixed at
 *     post time), SEND_EN and RECV_EN (raise the QP's released count) in order;
 *   - every verbs completion is counted on its CQ; it is queued for the app's
 *     poll unless a WAIT already posted covers it (or the CQ is COUNT_ONLY);
 *     a SIGNAL task also puts one completion on its MQ.
 */
#include "emunic/core/core.h"
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>

static bool is_recv_op(int op) { return op == EMUNIC_TASK_RECV; }

static struct core_task *fifo_at(struct task_fifo *f, uint64_t i) { return &f->q[i & f->mask]; }

static void mq_complete(struct emunic_mq *mq, const struct emunic_wc *wc)
{
	if (atomic_load_explicit(&mq->o.gone, memory_order_relaxed))
		return;
	if (!emunic_ring_push(&mq->wc, wc)) {
		emunic_info("MQ completion queue full: wr_id %llu lost (poll the MQ)",
			    (unsigned long long)wc->wr_id);
		return;
	}
	atomic_fetch_add_explicit(&mq->seq, 1, memory_order_release);
	if (atomic_load(&mq->waiters))
		emunic_futex_wake(&mq->seq);
}

static void cq_complete(struct emunic_cq *cq, const struct emunic_wc *wc)
{
	/* The core is the only writer of count. */
	uint64_t n = atomic_load_explicit(&cq->count, memory_order_relaxed) + 1;

	if (atomic_load_explicit(&cq->o.gone, memory_order_relaxed))
		return;		/* destroyed under a QP that still used it */
	/* A CQ that saw a failure stays failed for the WAITs on it (run_mq). */
	if (wc->status != EMUNIC_WC_SUCCESS && !cq->err_status) {
		cq->err_status = wc->status;
		cq->err_peer = wc->peer;
		cq->err_qpn = wc->qp_num;
	}
	if (n > atomic_load_explicit(&cq->covered, memory_order_acquire) && !(cq->flags & EMUNIC_CQ_COUNT_ONLY) &&
	    !emunic_ring_push(&cq->wc, wc))
		atomic_fetch_add(&cq->overrun, 1);
	/* Counted only once pollable: an app that sees count reach n finds the
	 * n-th completion in its poll (unless a WAIT consumed it). */
	atomic_store_explicit(&cq->count, n, memory_order_release);
}

/* One data task finished (verbs completion, flush, or cancel). */
static void task_done(struct emunic_qp *qp, struct core_task *t, int status, const struct ibv_wc *vwc)
{
	struct emunic_wc wc = {
		.wr_id = t->t.wr_id, .status = status, .op = t->t.op, .peer = qp->peer,
		.qp_num = atomic_load(&qp->qpn),
	};
	struct emunic_cq *cq = is_recv_op(t->t.op) ? qp->attr.recv_cq : qp->attr.send_cq;

	if (t->x) {	/* a triggered op: counters and events, not CQs */
		emunic_trig_task_done(qp->o.dev, qp, t->x, status, vwc ? vwc->byte_len : 0);
		return;
	}
	if (vwc) {
		wc.byte_len = vwc->byte_len;
		wc.has_imm = !!(vwc->wc_flags & IBV_WC_WITH_IMM);
		wc.imm = wc.has_imm ? ntohl(vwc->imm_data) : 0;
	}
	if (cq)
		cq_complete(cq, &wc);
	if ((t->t.flags & EMUNIC_TASK_SIGNAL) && t->mq)
		mq_complete(t->mq, &wc);
}

bool emunic_exec_room(struct emunic_qp *qp)
{
	return qp->sq.tail - qp->sq.done <= qp->sq.mask;
}

void emunic_exec_task(struct emunic_dev *d, struct core_task *t)
{
	struct task_fifo *f;

	(void)d;
	switch (t->t.op) {
	case EMUNIC_TASK_WAIT:
		/* fallthrough */
	case EMUNIC_TASK_SEND_EN:
	case EMUNIC_TASK_RECV_EN:
		f = &t->mq->q;
		break;
	case EMUNIC_TASK_RECV:
		f = &t->t.qp->rq;
		break;
	default:
		f = &t->t.qp->sq;
		break;
	}
	*fifo_at(f, f->tail++) = *t;	/* room was checked at post time */
}

/* ---- verbs queues ---------------------------------------------------------- */

static int post_one(struct emunic_qp *qp, struct core_task *ct, bool recv)
{
	struct emunic_task *t = &ct->t;
	struct ibv_sge sge = { .addr = (uintptr_t)t->addr, .length = t->len,
			       .lkey = ct->lkey };
	struct ibv_send_wr wr = { .wr_id = (uintptr_t)qp, .sg_list = &sge, .num_sge = t->len ? 1 : 0 }, *bad;
	struct ibv_recv_wr rwr = { .wr_id = (uintptr_t)qp | 1, .sg_list = &sge, .num_sge = t->len ? 1 : 0 }, *rbad;

	if (recv)
		return ibv_post_recv(qp->vqp, &rwr, &rbad);
	switch (t->op) {
	case EMUNIC_TASK_SEND: wr.opcode = IBV_WR_SEND; break;
	case EMUNIC_TASK_WRITE: wr.opcode = IBV_WR_RDMA_WRITE; break;
	case EMUNIC_TASK_WRITE_IMM:
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl(t->imm);
		break;
	case EMUNIC_TASK_READ: wr.opcode = IBV_WR_RDMA_READ; break;
	case EMUNIC_TASK_FETCH_ADD:
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = t->remote_addr;
		wr.wr.atomic.rkey = t->rkey;
		wr.wr.atomic.compare_add = t->add;
		break;
	}
	if (t->op != EMUNIC_TASK_FETCH_ADD) {
		wr.wr.rdma.remote_addr = t->remote_addr;
		wr.wr.rdma.rkey = t->rkey;
	}
	return ibv_post_send(qp->vqp, &wr, &bad);
}

/* Tasks [from, to) of f complete with status, without verbs.  Returns how many. */
static uint64_t complete_range(struct emunic_qp *qp, struct task_fifo *f, uint64_t from, uint64_t to, int status)
{
	for (uint64_t i = from; i < to; i++)
		task_done(qp, fifo_at(f, i), status, NULL);
	atomic_fetch_add_explicit(&f->completed, to - from, memory_order_release);
	return to - from;
}

/* A failed QP: tasks verbs never saw complete now with status; those in
 * verbs complete when verbs flushes them, or in flush_in_verbs. */
static void flush_unposted(struct emunic_qp *qp, struct task_fifo *f, int status)
{
	complete_range(qp, f, f->head, f->tail, status);
	f->tail = f->head;
}

/* rxe before Linux 6.2 never flushes the receive queue of a QP in the error
 * state, and a QP reset (a retry fault) completes nothing: work verbs holds
 * would wait forever.  Once the QP failed it completes here, once
 * (qp->flushing); a verbs flush that does come later finds nothing
 * outstanding and is dropped in emunic_exec_poll. */
static void flush_in_verbs(struct emunic_qp *qp, struct task_fifo *f)
{
	qp->flushing = true;
	complete_range(qp, f, f->done, f->head, EMUNIC_WC_WR_FLUSH_ERR);
	f->done = f->head;
}

void emunic_exec_qp_error(struct emunic_qp *qp, int status)
{
	flush_unposted(qp, &qp->sq, status);
	flush_unposted(qp, &qp->rq, status);
}

void emunic_exec_replay(struct emunic_qp *qp, uint64_t delivered, int status)
{
	struct task_fifo *f = &qp->sq;
	uint64_t n = f->head - f->done, k = 0;
	struct core_task *keep = malloc(n * sizeof(*keep));

	if (!keep) {		/* cannot reorder: fail them, as without reconnection */
		flush_in_verbs(qp, f);
		qp->flushing = false;
		return;
	}
	for (uint64_t i = f->done; i < f->head; i++) {
		struct core_task *t = fifo_at(f, i);
		/* A write-with-immediate the peer counted ran, and so did every
		 * write before it (RC runs in order): done.  A read's data may
		 * not have come back: it goes again. */
		bool counted = (t->t.op == EMUNIC_TASK_WRITE_IMM || t->t.op == EMUNIC_TASK_SEND ||
				t->t.op == EMUNIC_TASK_WRITE) && t->imm_idx < delivered;

		if (counted)
			task_done(qp, t, EMUNIC_WC_SUCCESS, NULL);
		else if (t->t.op == EMUNIC_TASK_FETCH_ADD)
			task_done(qp, t, status, NULL);	/* it may have run: not again */
		else
			keep[k++] = *t;
	}
	/* What goes again sits just before what verbs never saw, in order. */
	for (uint64_t j = 0; j < k; j++)
		*fifo_at(f, f->head - k + j) = keep[j];
	atomic_fetch_add_explicit(&f->completed, n - k, memory_order_release);
	f->done = f->head = f->head - k;
	free(keep);
}

void emunic_exec_give_up(struct emunic_qp *qp, int status)
{
	complete_range(qp, &qp->sq, qp->sq.done, qp->sq.head, status);
	qp->sq.done = qp->sq.head;
	emunic_exec_qp_error(qp, status);
}

/* Device closing: every task still held, in verbs or not, is canceled.
 * Returns how many. */
static uint64_t cancel_fifo(struct emunic_qp *qp, struct task_fifo *f)
{
	uint64_t n = complete_range(qp, f, f->done, f->tail, EMUNIC_WC_CANCELED);

	f->done = f->head = f->tail;
	return n;
}

static int push_fifo(struct emunic_qp *qp, struct task_fifo *f, uint64_t released, bool recv)
{
	int n = 0;

	while (f->head < f->tail && f->head < released && f->head - f->done < qp->attr.depth) {
		int r;

		if (recv && qp->o.dev->faults && !emunic_fault_recv_ok(qp->o.dev, qp))
			break;		/* an rnr rule holds receives back */
		r = post_one(qp, fifo_at(f, f->head), recv);

		if (r) {
			emunic_info("peer %d qp %u: posting %s failed (%s)", qp->peer, atomic_load(&qp->qpn),
				    emunic_task_op_str(fifo_at(f, f->head)->t.op), strerror(r));
			break;
		}
		if (fifo_at(f, f->head)->x)
			emunic_trig_issued(qp->o.dev, fifo_at(f, f->head)->x);
		if (!recv)
			fifo_at(f, f->head)->imm_idx = qp->rc.imm_sent;
		if (!recv && (fifo_at(f, f->head)->t.op == EMUNIC_TASK_WRITE_IMM ||
			      fifo_at(f, f->head)->t.op == EMUNIC_TASK_SEND))
			qp->rc.imm_sent++;
		f->head++;
		n++;
	}
	return n;
}

int emunic_exec_push(struct emunic_dev *d)
{
	int n = 0;

	for (struct obj *o = d->objs; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (o->kind != OBJ_QP)
			continue;
		if (qp->rc.down || qp->rc.teardown || qp->rc.dead_id) {
			n += emunic_rc_step(d, qp);
			continue;
		}
		if (atomic_load(&qp->state) == QP_ERROR) {
			emunic_exec_qp_error(qp, EMUNIC_WC_WR_FLUSH_ERR);
			if (qp->rq.done != qp->rq.head)
				flush_in_verbs(qp, &qp->rq);
			if (qp->sq.done != qp->sq.head)
				flush_in_verbs(qp, &qp->sq);
			continue;
		}
		if (atomic_load(&qp->state) != QP_UP)
			continue;
		if (qp->flt.owed)
			emunic_trig_post_owed(d, qp);
		n += push_fifo(qp, &qp->sq, (qp->attr.flags & EMUNIC_QP_MANAGED_SEND) ? qp->sq_enabled : UINT64_MAX,
			       false);
		n += push_fifo(qp, &qp->rq, (qp->attr.flags & EMUNIC_QP_MANAGED_RECV) ? qp->rq_enabled : UINT64_MAX,
			       true);
	}
	return n;
}

/* A failure that is final tells the peer; a flush only follows one. */
static unsigned final_how(enum ibv_wc_status st)
{
	return st != IBV_WC_WR_FLUSH_ERR ? EMUNIC_QPF_DISCONNECT : 0;
}

int emunic_exec_poll(struct emunic_dev *d)
{
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(d->vcq, 32, wc);

	for (int i = 0; i < n; i++) {
		struct emunic_qp *qp = (struct emunic_qp *)(uintptr_t)(wc[i].wr_id & ~(uint64_t)1);
		struct task_fifo *f = (wc[i].wr_id & 1) ? &qp->rq : &qp->sq;
		/* A message into a triggered QP: arrivals, not tasks. */
		bool arrival = (wc[i].wr_id & 1) && (qp->attr.flags & EMUNIC_QP_TRIGGERED);
		struct core_task *t;
		/* An arrival's failure: its status, or one a wc rule injected
		 * into an arrival that is still counted and delivered. */
		enum ibv_wc_status fail = IBV_WC_SUCCESS;

		if (atomic_load_explicit(&qp->o.gone, memory_order_relaxed))
			continue;	/* left in the CQ by a QP destroyed since */
		if (!arrival && f->done == f->head && qp->flushing)
			continue;	/* completed by flush_in_verbs already */
		if (d->faults) {
			enum ibv_wc_status was = wc[i].status;

			emunic_fault_wc(d, qp, &wc[i], (wc[i].wr_id & 1) ? EMUNIC_TASK_RECV : fifo_at(f, f->done)->t.op);
			if ((wc[i].wr_id & 1) && wc[i].status == IBV_WC_SUCCESS)
				emunic_fault_arrival(d, qp);
			/* On a QP that reconnects, an arrival turned into an error
			 * did arrive (its sender saw success and will not send it
			 * again): it counts, then the connection fails. */
			if (arrival && qp->attr.reconnects && was == IBV_WC_SUCCESS && wc[i].status != was) {
				fail = wc[i].status;
				wc[i].status = IBV_WC_SUCCESS;
			}
		}
		if (arrival && wc[i].status != IBV_WC_SUCCESS)
			fail = wc[i].status;
		if (arrival) {
			if (wc[i].status == IBV_WC_SUCCESS && wc[i].qp_num == atomic_load(&qp->qpn)) {
				/* Counted per connection: a reconnection tells the peer. */
				if (qp->rc.rx_conn != qp->rc.conn) {
					qp->rc.rx_conn = qp->rc.conn;
					qp->rc.rx_count = 0;
				}
				qp->rc.rx_count++;
			}
			if (fail != IBV_WC_SUCCESS && fail != IBV_WC_WR_FLUSH_ERR && !qp->rc.down)
				emunic_info("peer %d qp %u: RECV (arrival) failed: %s", qp->peer, wc[i].qp_num,
					    ibv_wc_status_str(fail));
			if (fail != IBV_WC_SUCCESS)
				emunic_qp_fail(d, qp, (int)fail, final_how(fail), "a receive for arrivals failed");
			emunic_trig_arrival(d, qp, &wc[i]);
			continue;
		}
		if (qp->rc.down)
			continue;	/* the rest of a failed connection: settled when it is made again */
		t = fifo_at(f, f->done);
		if (wc[i].status != IBV_WC_SUCCESS) {
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
				emunic_info("peer %d qp %u: %s (wr_id %llu) failed: %s", qp->peer, wc[i].qp_num,
					    emunic_task_op_str(t->t.op), (unsigned long long)t->t.wr_id,
					    ibv_wc_status_str(wc[i].status));
			if (emunic_qp_fail(d, qp, (int)wc[i].status, final_how(wc[i].status), "the connection failed"))
				continue;	/* it stays: reconnection sends it again */
		} else if (t->t.op == EMUNIC_TASK_WRITE_IMM && qp->rc.left < qp->attr.reconnects) {
			qp->rc.left = qp->attr.reconnects;	/* the peer takes writes again */
		}
		f->done++;
		atomic_fetch_add_explicit(&f->completed, 1, memory_order_release);
		task_done(qp, t, (int)wc[i].status, &wc[i]);
	}
	return n > 0 ? n : 0;
}

/* ---- management queues ----------------------------------------------------- */

static int run_mq(struct emunic_mq *mq)
{
	struct task_fifo *f = &mq->q;
	int n = 0;

	while (f->head < f->tail) {
		struct core_task *t = fifo_at(f, f->head);
		struct emunic_wc wc = { .wr_id = t->t.wr_id, .op = t->t.op, .peer = -1 };

		if (mq->skipping) {
			/* A WAIT of this list failed: what it guarded does not
			 * run, as a QP's work after a failure flushes. */
			wc.status = EMUNIC_WC_WR_FLUSH_ERR;
			if (t->t.op != EMUNIC_TASK_WAIT)
				wc.peer = t->t.qp->peer;
			if (t->t.flags & EMUNIC_TASK_SIGNAL)
				mq_complete(mq, &wc);
			mq->skipping = !t->list_end;
			goto next;
		}
		switch (t->t.op) {
		case EMUNIC_TASK_WAIT:
			if (atomic_load_explicit(&t->t.cq->count, memory_order_acquire) < t->target)
				return n;	/* blocks the queue, as on the HCA */
			/* A failure among the completions it counts is never
			 * hidden: the WAIT completes with it, signaled or not. */
			if (t->t.cq->err_status) {
				wc.status = t->t.cq->err_status;
				wc.peer = t->t.cq->err_peer;
				wc.qp_num = t->t.cq->err_qpn;
				mq->skipping = !t->list_end;
			}
			break;
		case EMUNIC_TASK_SEND_EN:
			if (t->target > t->t.qp->sq_enabled)
				t->t.qp->sq_enabled = t->target;
			break;
		case EMUNIC_TASK_RECV_EN:
			if (t->target > t->t.qp->rq_enabled)
				t->t.qp->rq_enabled = t->target;
			break;
		}
		if (t->t.op != EMUNIC_TASK_WAIT)
			wc.peer = t->t.qp->peer;
		if ((t->t.flags & EMUNIC_TASK_SIGNAL) || wc.status)
			mq_complete(mq, &wc);
next:
		f->head++;
		f->done++;
		atomic_fetch_add_explicit(&f->completed, 1, memory_order_release);
		n++;
	}
	return n;
}

int emunic_exec_mqs(struct emunic_dev *d)
{
	int n = 0;

	for (struct obj *o = d->objs; o; o = o->next)
		if (o->kind == OBJ_MQ)
			n += run_mq((struct emunic_mq *)o);
	return n;
}

/* Device closing: whatever has not finished completes as CANCELED. */
void emunic_exec_cancel_all(struct emunic_dev *d)
{
	for (struct obj *o = d->objs; o; o = o->next) {
		uint64_t n = 0;

		if (o->kind == OBJ_QP) {
			struct emunic_qp *qp = (struct emunic_qp *)o;

			n = cancel_fifo(qp, &qp->sq) + cancel_fifo(qp, &qp->rq);
			if (n)
				emunic_info("device %s closing: peer %d qp %u: %llu unfinished work request(s) "
					    "canceled", d->v->name, qp->peer, atomic_load(&qp->qpn),
					    (unsigned long long)n);
		} else if (o->kind == OBJ_MQ) {
			struct emunic_mq *mq = (struct emunic_mq *)o;

			for (; mq->q.head < mq->q.tail; mq->q.head++, n++) {
				struct core_task *t = fifo_at(&mq->q, mq->q.head);
				struct emunic_wc wc = { .wr_id = t->t.wr_id, .op = t->t.op, .peer = -1,
							.status = EMUNIC_WC_CANCELED };

				if (t->t.flags & EMUNIC_TASK_SIGNAL)
					mq_complete(mq, &wc);
			}
			if (n)
				emunic_info("device %s closing: mq %p: %llu unfinished task(s) canceled (first: %s)",
					    d->v->name, (void *)mq, (unsigned long long)n,
					    emunic_task_op_str(fifo_at(&mq->q, mq->q.head - n)->t.op));
		}
	}
}
