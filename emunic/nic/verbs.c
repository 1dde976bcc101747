/* SPDX-License-Identifier: MIT */
/*
 * The data path between the engine's task queues and verbs.  Each QP has a
 * send and a receive queue of tasks; a task goes to verbs when the QP is up,
 * the verbs queue has room and, on a MANAGED queue, an enable released it.
 * Only QPs with something to do are looked at (the ready list), and all a
 * QP's eligible tasks go in one chained post (one doorbell).
 * Completions come back in order per queue: a completion also completes the
 * unsignaled tasks before it (RC executes in order).  Except on iWARP: siw
 * sends a write on while a READ before it waits for its response, and
 * completes the write first; so a read (or atomic) is always signaled, and
 * a completion that overtakes a signaled task waits for that task's own.
 * Each finished task is
 * handed to its owner's done op; arrivals on TRIGGERED QPs go to the
 * arrival hook; a failure goes to the connection unit's hook.
 *
 * wr_id: the QP's handle << 32 | the task's index (31 bits) << 1 | receive.
 */
#include "emunic/nic/nic.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define POLL_BATCH 32
#define CHAIN_MAX 32		/* work requests in one post */
#define SIGNAL_EVERY 16		/* an unsignaled run is this long at most */
#define IDX_MASK 0x7fffffffull

static uint64_t wr_id(const struct emunic_qp *qp, uint64_t idx, bool recv)
{
	return (uint64_t)qp->o.handle << 32 | (idx & IDX_MASK) << 1 | recv;
}

/* The data path reaches verbs only through the device's shim ops
 * (shim/shim.h): one indirect call, the table read from the device.  The
 * backend's entries are functions of their own, so an instruction count
 * (emunic-bench instr, callgrind) still tells verbs' cost from the
 * engine's by name. */
static int post_send(struct emunic_dev *d, struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return emunic_shim_post_send(&d->v->shim, qp, wr, bad);
}

static int post_recv(struct emunic_dev *d, struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return emunic_shim_post_recv(&d->v->shim, qp, wr, bad);
}

/* ---- queueing ------------------------------------------------------------------- */

/* The task consumes a receive at the peer, which counts it per connection
 * (reconnection's delivered count: imm_sent, imm_idx). */
static bool counted_at_peer(const struct nic_task *t)
{
	return t->op == EMUNIC_TASK_WRITE_IMM || t->op == EMUNIC_TASK_SEND || t->op == EMUNIC_TASK_CALC;
}

/* Up to where a queue's tasks may go to verbs: an enable's, or all. */
static uint64_t released_of(const struct emunic_qp *qp, bool recv)
{
	return (qp->attr.flags & (recv ? EMUNIC_QP_MANAGED_RECV : EMUNIC_QP_MANAGED_SEND))
		       ? (recv ? qp->rq_enabled : qp->sq_enabled) : UINT64_MAX;
}

/* Released work left after a push waits for a completion to make room:
 * the device counts such QPs, as only they make a completion urgent
 * (owner.c's hand-over; work merely in verbs is collected lazily). */
static void set_stalled(struct emunic_dev *d, struct emunic_qp *qp, bool stalled)
{
	if (qp->stalled != stalled) {
		qp->stalled = stalled;
		d->stalled += stalled ? 1u : -1u;
	}
}

static bool unpushed(const struct emunic_qp *qp, bool recv)
{
	const struct nic_fifo *f = recv ? &qp->rq : &qp->sq;
	uint64_t released = released_of(qp, recv);

	return f->head < f->tail && f->head < released;
}

void nic_qp_ready(struct emunic_dev *d, struct emunic_qp *qp)
{
	if (qp->ready)
		return;
	qp->ready = true;
	qp->ready_next = NULL;
	if (d->ready_tail)
		d->ready_tail->ready_next = qp;
	else
		d->ready = qp;
	d->ready_tail = qp;
}

/* An engine-only queue that is full doubles (fired ops are never refused). */
static bool grow(struct nic_fifo *f)
{
	uint32_t n = (f->mask + 1) * 2;
	struct nic_task *q = calloc(n, sizeof(*q));

	if (!q)
		return false;
	for (uint64_t i = f->done; i < f->tail; i++)
		q[i & (n - 1)] = f->q[i & f->mask];
	free(f->q);
	f->q = q;
	f->mask = n - 1;
	return true;
}

struct nic_task *nic_qp_slot(struct emunic_qp *qp, bool recv)
{
	struct nic_fifo *f = recv ? &qp->rq : &qp->sq;

	if (f->tail - f->done > f->mask && !(f->grows && grow(f)))
		return NULL;	/* room was checked at post; only memory can fail here */
	return nic_fifo_at(f, f->tail);
}

void nic_qp_queued(struct emunic_dev *d, struct emunic_qp *qp, bool recv)
{
	(recv ? &qp->rq : &qp->sq)->tail++;
	nic_qp_ready(d, qp);
}

void nic_qp_queue(struct emunic_dev *d, struct emunic_qp *qp, const struct nic_task *t, bool recv)
{
	struct nic_task *slot = nic_qp_slot(qp, recv);

	if (!slot) {
		struct nic_task copy = *t;

		nic_notice(d, "peer %d qp %u: no memory to queue a %s: it fails", qp->peer, atomic_load(&qp->qpn),
			   emunic_task_op_str(t->op));
		copy.ops->done(d, qp, &copy, EMUNIC_WC_GENERAL_ERR, NULL);
		return;
	}
	*slot = *t;
	nic_qp_queued(d, qp, recv);
}

void nic_qp_enable(struct emunic_dev *d, struct emunic_qp *qp, bool recv, uint64_t upto)
{
	uint64_t *e = recv ? &qp->rq_enabled : &qp->sq_enabled;

	if (upto > *e) {
		/* A CALC runs when released: what the MQ runs after this
		 * enable (a local CALC, say) reads its result. */
		for (uint64_t i = *e > qp->sq.head ? *e : qp->sq.head; !recv && i < upto && i < qp->sq.tail; i++)
			if (nic_fifo_at(&qp->sq, i)->op == EMUNIC_TASK_CALC)
				nic_task_calc(nic_fifo_at(&qp->sq, i));
		*e = upto;
		nic_qp_ready(d, qp);
	}
}

bool nic_qp_has_work(const struct emunic_qp *qp)
{
	return qp->sq.tail != qp->sq.done;
}

void nic_qp_set_state(struct emunic_qp *qp, enum qp_state s)
{
	atomic_store(&qp->state, s);
	emunic_word_bump(&qp->word);
}

bool nic_qp_failed(struct emunic_dev *d, struct emunic_qp *qp, int status, unsigned how, const char *why)
{
	if (d->qp_hooks && d->qp_hooks->failed)
		return d->qp_hooks->failed(d, qp, status, how, why);
	nic_qp_set_state(qp, QP_ERROR);
	nic_qp_ready(d, qp);
	return false;
}

/* ---- finishing tasks without verbs ----------------------------------------------------- */

static void task_done(struct emunic_dev *d, struct emunic_qp *qp, struct nic_task *t, int status,
		      const struct ibv_wc *wc)
{
	EMUNIC_TL(TL_COMPLETION, TL_TRACK_QP, NIC_HANDLE_INDEX(qp->o.handle), qp->peer, t->wr_id, t->op, status);
	if (t->ops)
		t->ops->done(d, qp, t, status, wc);
}

/* Tasks [from, to) of f complete with status, without verbs; `in_verbs`:
 * they were handed to verbs. */
static uint64_t complete_range(struct emunic_qp *qp, struct nic_fifo *f, uint64_t from, uint64_t to, int status,
			       bool in_verbs)
{
	struct emunic_dev *d = qp->o.dev;

	for (uint64_t i = from; i < to; i++) {
		struct nic_task *t = nic_fifo_at(f, i);

		/* A held task's own completion said success (siw, below). */
		task_done(d, qp, t, t->early ? EMUNIC_WC_SUCCESS : status, NULL);
	}
	atomic_fetch_add_explicit(&f->completed, to - from, memory_order_release);
	if (in_verbs)
		d->inflight -= (unsigned)(to - from);
	return to - from;
}

void nic_qp_flush_unposted(struct emunic_qp *qp, int status)
{
	complete_range(qp, &qp->sq, qp->sq.head, qp->sq.tail, status, false);
	qp->sq.tail = qp->sq.head;
	complete_range(qp, &qp->rq, qp->rq.head, qp->rq.tail, status, false);
	qp->rq.tail = qp->rq.head;
	set_stalled(qp->o.dev, qp, false);	/* nothing left to push */
}

/* rxe before Linux 6.2 never flushes the receive queue of a QP in the error
 * state, and a QP reset (a retry fault) completes nothing: work verbs holds
 * would wait forever.  Once the QP failed it completes here, once
 * (qp->flushing); a verbs flush that does come later finds nothing
 * outstanding and is dropped in the poll. */
static void flush_in_verbs(struct emunic_qp *qp, struct nic_fifo *f)
{
	qp->flushing = true;
	complete_range(qp, f, f->done, f->head, EMUNIC_WC_WR_FLUSH_ERR, true);
	f->done = f->head;
}

void nic_qp_replay(struct emunic_qp *qp, uint64_t delivered, int status)
{
	struct emunic_dev *d = qp->o.dev;
	struct nic_fifo *f = &qp->sq;
	uint64_t n = f->head - f->done, k = 0;
	struct nic_task *keep = malloc((n ? n : 1) * sizeof(*keep));

	if (!keep) {		/* cannot reorder: fail them, as without reconnection */
		flush_in_verbs(qp, f);
		qp->flushing = false;
		return;
	}
	for (uint64_t i = f->done; i < f->head; i++) {
		struct nic_task *t = nic_fifo_at(f, i);
		/* A write-with-immediate the peer counted ran, and so did every
		 * write before it (RC runs in order): done.  A read's data may
		 * not have come back: it goes again. */
		bool counted = (t->op == EMUNIC_TASK_WRITE_IMM || t->op == EMUNIC_TASK_SEND ||
				t->op == EMUNIC_TASK_WRITE) && t->imm_idx < delivered;

		if (counted)
			task_done(d, qp, t, EMUNIC_WC_SUCCESS, NULL);
		else if (t->op == EMUNIC_TASK_FETCH_ADD)
			task_done(d, qp, t, status, NULL);	/* it may have run: not again */
		else {
			keep[k] = *t;
			keep[k++].early = false;	/* its completion is to come again */
		}
	}
	/* What goes again sits just before what verbs never saw, in order. */
	for (uint64_t j = 0; j < k; j++)
		*nic_fifo_at(f, f->head - k + j) = keep[j];
	atomic_fetch_add_explicit(&f->completed, n - k, memory_order_release);
	d->inflight -= (unsigned)n;
	f->done = f->head = f->head - k;
	free(keep);
	nic_qp_ready(d, qp);
}

void nic_qp_give_up(struct emunic_qp *qp, int status)
{
	complete_range(qp, &qp->sq, qp->sq.done, qp->sq.head, status, true);
	qp->sq.done = qp->sq.head;
	nic_qp_flush_unposted(qp, status);
}

uint64_t nic_qp_cancel(struct emunic_qp *qp)
{
	uint64_t n = 0;

	set_stalled(qp->o.dev, qp, false);	/* nothing of it goes to verbs any more */
	for (int i = 0; i < 2; i++) {
		struct nic_fifo *f = i ? &qp->rq : &qp->sq;

		n += complete_range(qp, f, f->done, f->head, EMUNIC_WC_CANCELED, true);
		n += complete_range(qp, f, f->head, f->tail, EMUNIC_WC_CANCELED, false);
		f->done = f->head = f->tail;
	}
	return n;
}

/* ---- receives for arrivals (TRIGGERED QPs) ----------------------------------------------------- */

static int post_recvs(struct emunic_dev *d, struct emunic_qp *qp, unsigned n)
{
	struct ibv_recv_wr wr[CHAIN_MAX], *bad;
	struct ibv_sge sge[CHAIN_MAX];

	while (n) {
		unsigned k = 0;
		int r;

		for (; k < n && k < CHAIN_MAX; k++) {
			if (d->fault && !d->fault->recv_ok(d, qp)) {
				qp->owed += n - k;	/* an rnr rule holds them back */
				n = k;
				break;
			}
			wr[k] = (struct ibv_recv_wr){ .wr_id = wr_id(qp, 0, true), .next = &wr[k + 1] };
			if (qp->imm_by_send) {
				wr[k].wr_id = wr_id(qp, nic_imm_recv_slot(qp, &sge[k]), true);
				wr[k].sg_list = &sge[k];
				wr[k].num_sge = 1;
			}
		}
		if (!k)
			return 0;
		wr[k - 1].next = NULL;
		r = post_recv(d, qp->vqp, wr, &bad);
		if (r) {
			nic_notice(d, "peer %d qp %u: posting a receive for arrivals failed (%s)", qp->peer,
				   atomic_load(&qp->qpn), strerror(-r));
			return r;
		}
		n -= k;
	}
	return 0;
}

int nic_qp_arrivals_init(struct emunic_dev *d, struct emunic_qp *qp)
{
	int r;

	if (!qp->arrivals || qp->recvs_posted)
		return 0;
	if ((r = nic_imm_slots_init(d, qp)))
		return r;
	qp->recvs_posted = true;
	return post_recvs(d, qp, qp->attr.depth);
}

void nic_qp_post_owed(struct emunic_dev *d, struct emunic_qp *qp)
{
	unsigned n = qp->owed;

	qp->owed = 0;
	if (qp->vqp)
		post_recvs(d, qp, n);
}

/* What the engine kept of a verbs QP that is gone. */
static void verbs_forgotten(struct emunic_qp *qp)
{
	qp->recvs_posted = false;
	qp->flushing = false;
	qp->owed = 0;		/* receives are the new verbs QP's own */
	/* No verbs QP, no room to wait for: its work waits for the connection
	 * (the connection unit's deadlines), and stalled would keep the
	 * hand-over urgent till then.  The new connection's push decides again. */
	set_stalled(qp->o.dev, qp, false);
}

void nic_qp_drop_verbs(struct emunic_dev *d, struct emunic_qp *qp)
{
	if (qp->vqp)
		emunic_shim_destroy_qp(&d->v->shim, qp->vqp);
	qp->vqp = NULL;
	while (nic_verbs_poll(d) == POLL_BATCH)
		;
	verbs_forgotten(qp);
}

void nic_qp_drop_unconnected(struct emunic_dev *d, struct emunic_qp *qp)
{
	if (!qp->vqp)
		return;
	emunic_shim_destroy_qp(&d->v->shim, qp->vqp);
	qp->vqp = NULL;
	verbs_forgotten(qp);
}

/* ---- handing work to verbs ------------------------------------------------------------ */

static void build_send(struct ibv_send_wr *wr, struct ibv_sge *sge, const struct nic_task *t)
{
	*sge = (struct ibv_sge){ .addr = t->addr, .length = t->len, .lkey = t->lkey };
	wr->sg_list = sge;
	wr->num_sge = t->len ? 1 : 0;
	wr->wr.rdma.remote_addr = t->remote_addr;
	wr->wr.rdma.rkey = t->rkey;
	switch (t->op) {
	case EMUNIC_TASK_SEND:
	case EMUNIC_TASK_CALC: wr->opcode = IBV_WR_SEND; break;
	case EMUNIC_TASK_WRITE: wr->opcode = IBV_WR_RDMA_WRITE; break;
	case EMUNIC_TASK_WRITE_IMM:
		wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr->imm_data = htonl(t->imm);
		break;
	case EMUNIC_TASK_READ: wr->opcode = IBV_WR_RDMA_READ; break;
	case EMUNIC_TASK_FETCH_ADD:
		wr->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr->wr.atomic.remote_addr = t->remote_addr;
		wr->wr.atomic.rkey = t->rkey;
		wr->wr.atomic.compare_add = t->add;
		break;
	}
}

/* Posts a chain of nwr work requests: 0 or verbs' error, with *took set
 * to how many it took (on a failure, those before the one it names). */
static int post_chain(struct emunic_dev *d, struct emunic_qp *qp, unsigned nwr, bool recv, void *wrs,
		      unsigned *took)
{
	int r;

	*took = nwr;
	if (recv) {
		struct ibv_recv_wr *w = wrs, *bad = NULL;

		if ((r = post_recv(d, qp->vqp, w, &bad)))
			*took = bad ? (unsigned)(bad - w) : 0;
	} else {
		struct ibv_send_wr *w = wrs, *bad = NULL;

		if ((r = post_send(d, qp->vqp, w, &bad)))
			*took = bad ? (unsigned)(bad - w) : 0;
	}
	return r;
}

static int push_queue(struct emunic_dev *d, struct emunic_qp *qp, bool recv)
{
	struct nic_fifo *f = recv ? &qp->rq : &qp->sq;
	uint64_t released = released_of(qp, recv);
	struct ibv_send_wr swr[CHAIN_MAX];
	struct ibv_recv_wr rwr[CHAIN_MAX];
	struct ibv_sge sge[CHAIN_MAX];
	struct nic_imm_msg msg[CHAIN_MAX];
	uint8_t last_wr[CHAIN_MAX];	/* a task's last work request (imm_by_send: two a task) */
	int n = 0;

	for (bool more = true; more;) {
		uint64_t first = f->head, end = f->tail;
		unsigned k = 0, w = 0, took, wtook;
		bool issued = false;	/* some task has an issued hook */
		int r;

		/* more: the chain ended only because it was full, so another
		 * may follow; else this one took all that may go now. */
		more = false;
		if (end > released)
			end = released;
		if (end > f->done + qp->attr.depth)
			end = f->done + qp->attr.depth;
		for (; first + k < end; k++) {
			struct nic_task *t = nic_fifo_at(f, first + k);

			if (w == CHAIN_MAX) {
				more = true;
				break;
			}
			if (recv) {
				if (d->fault && !d->fault->recv_ok(d, qp))
					break;		/* an rnr rule holds receives back */
				sge[w] = (struct ibv_sge){ .addr = t->addr, .length = t->len, .lkey = t->lkey };
				rwr[w] = (struct ibv_recv_wr){ .wr_id = wr_id(qp, first + k, true), .sg_list = &sge[w],
							       .num_sge = t->len ? 1 : 0, .next = &rwr[w + 1] };
				w++;
			} else {
				if (t->op == EMUNIC_TASK_WRITE_IMM && qp->imm_by_send) {
					if (w + (t->len ? 2 : 1) > CHAIN_MAX) {
						more = true;
						break;
					}
					w += nic_imm_build_send(&swr[w], &sge[w], &msg[k], t, wr_id(qp, first + k, false));
				} else {
					swr[w] = (struct ibv_send_wr){ .wr_id = wr_id(qp, first + k, false),
								       .next = &swr[w + 1] };
					if (t->op == EMUNIC_TASK_CALC)
						nic_task_calc(t);	/* released only now: its operands are ready */
					build_send(&swr[w], &sge[w], t);
					w++;
				}
				t->imm_idx = qp->imm_sent;
				if (counted_at_peer(t))
					qp->imm_sent++;
				/* Signaled: any task whose completion is counted, a
				 * read or atomic (its data lands with its own
				 * completion, never one taken from a later one), one
				 * in SIGNAL_EVERY, and the chain's last (below); the
				 * others complete when a later one does. */
				t->signaled = !(t->flags & NIC_TASK_QUIET) || t->op == EMUNIC_TASK_READ ||
					      t->op == EMUNIC_TASK_FETCH_ADD || ++qp->sq_unsignaled >= SIGNAL_EVERY;
				t->early = false;
				if (t->signaled) {
					swr[w - 1].send_flags |= IBV_SEND_SIGNALED;
					qp->sq_unsignaled = 0;
				}
			}
			issued |= t->ops && t->ops->issued;
			last_wr[k] = (uint8_t)(w - 1);
		}
		if (!k)
			return n;
		if (recv) {
			rwr[w - 1].next = NULL;
		} else {
			struct nic_task *t = nic_fifo_at(f, first + k - 1);

			swr[w - 1].next = NULL;
			if (!t->signaled) {
				t->signaled = true;
				swr[w - 1].send_flags |= IBV_SEND_SIGNALED;
				qp->sq_unsignaled = 0;
			}
		}
		/* Before the call: rxe's loopback may deliver (and the peer
		 * complete) inside it. */
		if (emunic_tl_on)
			for (unsigned i = 0; i < k; i++)
				EMUNIC_TL(TL_WR_POSTED, TL_TRACK_QP, NIC_HANDLE_INDEX(qp->o.handle), qp->peer,
					  nic_fifo_at(f, first + i)->wr_id, nic_fifo_at(f, first + i)->op, first + i);
		r = post_chain(d, qp, w, recv, recv ? (void *)rwr : (void *)swr, &wtook);
		took = k;
		if (r) {
			/* A task whose last request verbs refused did not go.  A
			 * WRITE of it that went is sent again with it (the same
			 * bytes); till then it holds a place in the verbs queue no
			 * task counts, and an error it raises is dropped (its index
			 * is not in verbs). */
			for (took = 0; took < k && last_wr[took] < wtook; took++)
				;
			nic_notice(d, "peer %d qp %u: posting %s failed (%s)", qp->peer, atomic_load(&qp->qpn),
				   emunic_task_op_str(nic_fifo_at(f, first + took)->op), strerror(-r));
		}
		for (unsigned i = 0; issued && i < took; i++) {
			struct nic_task *t = nic_fifo_at(f, first + i);

			if (t->ops && t->ops->issued)
				t->ops->issued(d, qp, t);
		}
		f->head += took;
		d->inflight += took;
		n += (int)took;
		if (took < k) {
			for (unsigned i = took; i < k && !recv; i++)	/* counted again when it goes */
				if (counted_at_peer(nic_fifo_at(f, first + i)))
					qp->imm_sent--;
			return n;
		}
	}
	return n;
}

int nic_verbs_push(struct emunic_dev *d)
{
	struct emunic_qp *qp = d->ready;
	int n = 0;

	d->ready = d->ready_tail = NULL;
	while (qp) {
		struct emunic_qp *next = qp->ready_next;
		int s = atomic_load(&qp->state);
		bool left = false;

		qp->ready = false;
		if (atomic_load_explicit(&qp->o.gone, memory_order_relaxed)) {
			/* released since it was queued */
		} else if (s == QP_ERROR) {
			nic_qp_flush_unposted(qp, EMUNIC_WC_WR_FLUSH_ERR);
			if (qp->rq.done != qp->rq.head)
				flush_in_verbs(qp, &qp->rq);
			if (qp->sq.done != qp->sq.head)
				flush_in_verbs(qp, &qp->sq);
		} else if (s == QP_UP && qp->vqp) {
			if (qp->owed)
				nic_qp_post_owed(d, qp);
			/* Receives first (the order of a + b's calls is the
			 * compiler's): a send may make the peer answer at once,
			 * inside ibv_post_send on rxe's loopback, and an answer
			 * that finds no receive posted is an RNR NAK followed by
			 * min_rnr_timer (0.64 ms) of nothing. */
			/* A look before push_queue's frame; what is still
			 * unpushed after it waits for room. */
			if (unpushed(qp, true)) {
				n += push_queue(d, qp, true);
				left = unpushed(qp, true);
			}
			if (unpushed(qp, false)) {
				n += push_queue(d, qp, false);
				left = left || unpushed(qp, false);
			}
		}
		/* Only an up QP waits for room; a failed or reconnecting one
		 * waits for its connection unit, not a completion. */
		set_stalled(d, qp, left);
		qp = next;
	}
	return n;
}

/* ---- completions --------------------------------------------------------------------- */

/* A failure that is final tells the peer; a flush only follows one. */
static unsigned final_how(enum ibv_wc_status st)
{
	return st != IBV_WC_WR_FLUSH_ERR ? NIC_QPF_DISCONNECT : 0;
}

static void arrival(struct emunic_dev *d, struct emunic_qp *qp, struct ibv_wc *wc, enum ibv_wc_status fail)
{
	if (wc->status == IBV_WC_WR_FLUSH_ERR && atomic_load(&qp->state) == QP_CONNECTING)
		return;		/* a dropped attempt's receives (nic_qp_drop_unconnected): not this connection's */
	if (qp->imm_by_send)	/* read before the slot is posted again, below */
		nic_imm_from_send(qp, wc, (uint32_t)((wc->wr_id >> 1) & IDX_MASK));
	if (wc->status == IBV_WC_SUCCESS && wc->qp_num == atomic_load(&qp->qpn)) {
		/* Counted per connection: a reconnection tells the peer. */
		if (qp->rx_conn != qp->conn_id) {
			qp->rx_conn = qp->conn_id;
			qp->rx_count = 0;
		}
		qp->rx_count++;
	}
	if (fail != IBV_WC_SUCCESS && fail != IBV_WC_WR_FLUSH_ERR && atomic_load(&qp->state) != QP_DOWN)
		nic_notice(d, "peer %d qp %u: RECV (arrival) failed: %s", qp->peer, wc->qp_num,
			   ibv_wc_status_str(fail));
	if (fail != IBV_WC_SUCCESS)
		nic_qp_failed(d, qp, (int)fail, final_how(fail), "a receive for arrivals failed");
	if (wc->status == IBV_WC_SUCCESS && qp->vqp && wc->qp_num == atomic_load(&qp->qpn))
		post_recvs(d, qp, 1);	/* not for a connection that failed since */
	if (d->on_arrival)
		d->on_arrival(d, qp, wc);
}

/* A signaled task in [f->done, i) whose completion has not come: one that
 * completion i overtook (siw answers a READ after the writes behind it). */
static bool overtaken(struct nic_fifo *f, uint64_t i)
{
	for (uint64_t j = f->done; j < i; j++) {
		const struct nic_task *t = nic_fifo_at(f, j);

		if (t->signaled && !t->early)
			return true;
	}
	return false;
}

/* Completion i came, and the completions that had overtaken a signaled
 * task before it may now go too, in order, each with the unsignaled tasks
 * before it. */
static void complete_through(struct emunic_dev *d, struct emunic_qp *qp, struct nic_fifo *f, uint64_t i,
			     int status, const struct ibv_wc *wc)
{
	for (;;) {
		struct nic_task *t = nic_fifo_at(f, i);
		struct ibv_wc held;

		if (status == EMUNIC_WC_SUCCESS) {
			if (f->done < i)	/* the unsignaled tasks before it */
				complete_range(qp, f, f->done, i, EMUNIC_WC_SUCCESS, true);
		} else {
			/* A final failure: a signaled task before it whose own
			 * completion never came (a READ it overtook) did not
			 * finish; the unsignaled ones did. */
			for (uint64_t j = f->done; j < i; j++)
				complete_range(qp, f, j, j + 1, nic_fifo_at(f, j)->signaled ? EMUNIC_WC_WR_FLUSH_ERR
											: EMUNIC_WC_SUCCESS, true);
		}
		f->done = i + 1;
		atomic_fetch_add_explicit(&f->completed, 1, memory_order_release);
		d->inflight--;
		t->early = false;
		task_done(d, qp, t, status, wc);
		for (i = f->done; i < f->head && !nic_fifo_at(f, i)->signaled; i++)
			;
		if (i == f->head || !nic_fifo_at(f, i)->early)
			return;
		/* Its own completion said success; its length (no immediate
		 * on a send queue) is all a done op reads. */
		held = (struct ibv_wc){ .wr_id = wr_id(qp, i, false), .status = IBV_WC_SUCCESS,
					.byte_len = nic_fifo_at(f, i)->len, .qp_num = atomic_load(&qp->qpn) };
		wc = &held;
		status = EMUNIC_WC_SUCCESS;
	}
}

static void completion(struct emunic_dev *d, struct emunic_qp *qp, struct ibv_wc *wc, bool recv)
{
	struct nic_fifo *f = recv ? &qp->rq : &qp->sq;
	/* The full index of the task this completion names. */
	uint64_t i = f->done + ((((wc->wr_id >> 1) & IDX_MASK) - f->done) & IDX_MASK);
	struct nic_task *t;

	if (i >= f->head)
		return;		/* completed already (a flush, a replay) */
	t = nic_fifo_at(f, i);
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			nic_notice(d, "peer %d qp %u: %s (wr_id %llu) failed: %s", qp->peer, wc->qp_num,
				   emunic_task_op_str(t->op), (unsigned long long)t->wr_id, ibv_wc_status_str(wc->status));
		if (nic_qp_failed(d, qp, (int)wc->status, final_how(wc->status), "the connection failed"))
			return;		/* it stays: reconnection sends it again */
	} else if (t->op == EMUNIC_TASK_WRITE_IMM && d->qp_hooks && d->qp_hooks->delivered) {
		d->qp_hooks->delivered(d, qp);	/* the peer takes writes again */
	}
	if (wc->status == IBV_WC_SUCCESS && overtaken(f, i)) {
		t->early = true;	/* the one it overtook takes it along */
		return;
	}
	/* Unsignaled tasks before it ran: RC completes in order. */
	complete_through(d, qp, f, i, (int)wc->status, wc);
	/* Room in verbs: for work a push left behind (set_stalled), or a
	 * failed connection's, which flushes. */
	if (qp->stalled || wc->status != IBV_WC_SUCCESS)
		nic_qp_ready(d, qp);
}

int nic_verbs_poll(struct emunic_dev *d)
{
	struct ibv_wc wc[POLL_BATCH];
	int n = emunic_shim_poll_cq(&d->v->shim, d->vcq, POLL_BATCH, wc);

	for (int i = 0; i < n; i++) {
		struct emunic_qp *qp = (struct emunic_qp *)nic_resolve(d, (uint32_t)(wc[i].wr_id >> 32), OBJ_QP);
		bool recv = wc[i].wr_id & 1, arr;
		struct nic_fifo *f;
		/* An arrival's failure: its status, or one a wc rule injected
		 * into an arrival that is still counted and delivered. */
		enum ibv_wc_status fail = IBV_WC_SUCCESS;

		if (!qp || atomic_load_explicit(&qp->o.gone, memory_order_relaxed))
			continue;	/* left in the CQ by a QP destroyed since */
		arr = recv && qp->arrivals;
		f = recv ? &qp->rq : &qp->sq;
		if (!arr && f->done == f->head && qp->flushing)
			continue;	/* completed by flush_in_verbs already */
		if (d->fault) {
			enum ibv_wc_status was = wc[i].status;
			uint64_t idx = f->done + ((((wc[i].wr_id >> 1) & IDX_MASK) - f->done) & IDX_MASK);

			d->fault->wc(d, qp, &wc[i], recv ? EMUNIC_TASK_RECV :
				     idx < f->head ? nic_fifo_at(f, idx)->op : 0);
			if (recv && wc[i].status == IBV_WC_SUCCESS)
				d->fault->arrival(d, qp);
			/* On a QP that reconnects, an arrival turned into an error
			 * did arrive (its sender saw success and will not send it
			 * again): it counts, then the connection fails. */
			if (arr && qp->attr.reconnects && was == IBV_WC_SUCCESS && wc[i].status != was) {
				fail = wc[i].status;
				wc[i].status = IBV_WC_SUCCESS;
			}
		}
		if (arr) {
			if (wc[i].status != IBV_WC_SUCCESS)
				fail = wc[i].status;
			arrival(d, qp, &wc[i], fail);
			continue;
		}
		if (atomic_load(&qp->state) == QP_DOWN)
			continue;	/* the rest of a failed connection: settled when it is made again */
		completion(d, qp, &wc[i], recv);
	}
	return n > 0 ? n : 0;
}
