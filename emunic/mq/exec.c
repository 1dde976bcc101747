/* SPDX-License-Identifier: MIT */
/*
 * The management-queue rules at run time, as an engine unit (the rules at
 * post time are in post.c).  Each queue runs its tasks in order as they
 * become eligible:
 *   - data tasks go to their QP's send or receive queue (nic/verbs.c), which
 *     hands them to verbs when the QP is up, verbs has room and, if the QP is
 *     MANAGED_SEND (MANAGED_RECV), an enable released them;
 *   - an MQ runs WAIT (blocks until the CQ's count reaches the target fixed
 *     at post time), SEND_EN and RECV_EN (raise the QP's released count) and
 *     a CALC without a QP (reduces into its buffer) in order; only MQs with something to do are looked at (a ready list; a
 *     blocked MQ waits on its CQ's list);
 *   - every data task's completion is counted on its CQ and queued for the
 *     app's poll unless a posted WAIT covers it (or the CQ is COUNT_ONLY);
 *     a SIGNAL task also puts one completion on its MQ.
 */
#include "emunic/mq/mq.h"
#include "emunic/nic/unit.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

static void mq_ready(struct mq_dev *m, struct emunic_mq *mq)
{
	if (mq->ready)
		return;
	mq->ready = true;
	mq->ready_next = NULL;
	if (m->ready_tail)
		m->ready_tail->ready_next = mq;
	else
		m->ready = mq;
	m->ready_tail = mq;
}

static void mq_complete(struct emunic_dev *d, struct emunic_mq *mq, const struct emunic_wc *wc)
{
	if (atomic_load_explicit(&mq->o.gone, memory_order_relaxed))
		return;
	if (!emunic_ring_push(&mq->wc, wc)) {
		nic_notice(d, "MQ completion queue full: wr_id %llu lost (poll the MQ)", (unsigned long long)wc->wr_id);
		return;
	}
	emunic_word_bump(&mq->word);
}

static void cq_complete(struct emunic_dev *d, struct emunic_cq *cq, const struct emunic_wc *wc)
{
	/* The engine is the only writer of count. */
	uint64_t n = atomic_load_explicit(&cq->count, memory_order_relaxed) + 1;
	struct cq_entry e = { .wc = *wc, .n = n };

	if (atomic_load_explicit(&cq->o.gone, memory_order_relaxed))
		return;		/* destroyed under a QP that still used it */
	/* A CQ that saw a failure stays failed for the WAITs on it (run_mq). */
	if (wc->status != EMUNIC_WC_SUCCESS && !cq->err_status) {
		cq->err_status = wc->status;
		cq->err_peer = wc->peer;
		cq->err_qpn = wc->qp_num;
		cq->err_n = n;
	}
	if (n > atomic_load_explicit(&cq->covered, memory_order_acquire) && !(cq->flags & EMUNIC_CQ_COUNT_ONLY) &&
	    !emunic_ring_push(&cq->wc, &e))
		atomic_fetch_add(&cq->overrun, 1);
	/* Counted only once pollable: an app that sees count reach n finds the
	 * n-th completion in its poll (unless a WAIT consumed it). */
	atomic_store_explicit(&cq->count, n, memory_order_release);
	while (cq->blocked) {
		struct emunic_mq *mq = cq->blocked;

		cq->blocked = mq->blocked_next;
		mq->blocked_on = NULL;
		mq_ready(d->mq, mq);
	}
}

/* A data task finished (verbs completion, flush, replay or cancel). */
static void data_done(struct emunic_dev *d, struct emunic_qp *qp, struct nic_task *t, int status,
		      const struct ibv_wc *vwc)
{
	struct emunic_mq *mq = t->ctx;
	struct emunic_wc wc = {
		.wr_id = t->wr_id, .status = status, .op = t->op, .peer = qp->peer, .qp_num = atomic_load(&qp->qpn),
	};
	struct emunic_cq *cq = t->op == EMUNIC_TASK_RECV ? qp->attr.recv_cq : qp->attr.send_cq;

	if (vwc) {
		wc.byte_len = vwc->byte_len;
		wc.has_imm = !!(vwc->wc_flags & IBV_WC_WITH_IMM);
		wc.imm = wc.has_imm ? ntohl(vwc->imm_data) : 0;
	}
	if (cq)
		cq_complete(d, cq, &wc);
	if ((t->flags & NIC_TASK_SIGNAL) && mq)
		mq_complete(d, mq, &wc);
}

static const struct nic_task_ops data_ops = { .done = data_done };

/* ---- commands ------------------------------------------------------------------- */

/* Where a task goes: its MQ's own queue, its QP's, or nowhere (an object
 * destroyed since the post: the task is dropped (mq.h), and so is the list
 * of a destroyed MQ). */
enum task_to { TO_NONE, TO_MQ, TO_QP };

/* A task's command as the engine runs it, with its wr_id and target as
 * this post or start gave them; mq: its MQ (c->mq resolved). */
static enum task_to build_task(struct emunic_dev *d, struct emunic_mq *mq, const struct nic_cmd *c, uint64_t wr_id,
			       uint64_t target, struct nic_task *t, struct emunic_qp **qp)
{
	*t = (struct nic_task){
		.ops = &data_ops, .ctx = mq, .wr_id = wr_id, .op = c->op, .flags = c->flags, .len = c->len,
		.lkey = c->lkey, .rkey = c->rkey, .imm = c->imm, .addr = c->addr, .remote_addr = c->remote_addr,
		.add = c->add, .target = target,
	};
	switch (c->op) {
	case EMUNIC_TASK_WAIT:
		t->obj = nic_resolve(d, c->obj, OBJ_CQ);
		return mq && t->obj ? TO_MQ : TO_NONE;
	case EMUNIC_TASK_CALC:
		if (!c->obj)
			return mq ? TO_MQ : TO_NONE;	/* local: runs on the MQ's queue */
		break;					/* a SEND of the result */
	case EMUNIC_TASK_SEND_EN:
	case EMUNIC_TASK_RECV_EN:
		t->obj = nic_resolve(d, c->obj, OBJ_QP);
		return mq && t->obj ? TO_MQ : TO_NONE;
	}
	*qp = (struct emunic_qp *)nic_resolve(d, c->obj, OBJ_QP);
	return *qp ? TO_QP : TO_NONE;
}

static void mq_queue(struct emunic_dev *d, struct emunic_mq *mq, const struct nic_task *t)
{
	*nic_fifo_at(&mq->q, mq->q.tail++) = *t;
	d->mq->queued++;
	mq_ready(d->mq, mq);
}

/* A task's command, built and queued where it goes. */
static void queue_task(struct emunic_dev *d, struct emunic_mq *mq, const struct nic_cmd *c, uint64_t wr_id,
		       uint64_t target)
{
	struct emunic_qp *qp = NULL;
	struct nic_task t;

	switch (build_task(d, mq, c, wr_id, target, &t, &qp)) {
	case TO_MQ:
		mq_queue(d, mq, &t);
		break;
	case TO_QP:
		nic_qp_queue(d, qp, &t, t.op == EMUNIC_TASK_RECV);
		break;
	case TO_NONE:
		break;
	}
}

static void on_task(struct emunic_dev *d, const struct nic_cmd *c)
{
	queue_task(d, (struct emunic_mq *)nic_resolve(d, c->mq, OBJ_MQ), c, c->wr_id, c->target);
}

/* A prepared list as the engine runs it: each task built once, its objects
 * resolved, and built again only when some object of the device died since.
 * A start copies each task where it goes and sets its wr_id and target.
 * Reusing a resolved object is safe because no start of a list naming a
 * dead object gets this far: start_fast and start_slow (post.c) refuse it
 * (and a handle is never reused: its generation moves). */
struct prep_exec {
	uint32_t deaths;		/* the device's when built */
	struct emunic_mq *mq;
	struct exec_task {
		struct nic_task t;	/* wr_id before the start's offset */
		struct emunic_qp *qp;	/* TO_QP's */
		enum task_to to;
	} task[];
};

static struct prep_exec *exec_of(struct emunic_dev *d, struct emunic_mq_prepared *pl)
{
	uint32_t deaths = atomic_load_explicit(&d->deaths, memory_order_acquire);
	struct prep_exec *ex = pl->exec;

	if (ex && ex->deaths == deaths)
		return ex;
	if (!ex && !(ex = pl->exec = malloc(sizeof(*ex) + pl->n * sizeof(ex->task[0]))))
		return NULL;
	ex->deaths = deaths;
	ex->mq = (struct emunic_mq *)nic_resolve(d, pl->cmd[0].mq, OBJ_MQ);	/* one MQ: the list's */
	for (unsigned i = 0; i < pl->n; i++) {
		struct exec_task *e = &ex->task[i];

		e->qp = NULL;
		e->to = build_task(d, ex->mq, &pl->cmd[i], pl->cmd[i].wr_id, pl->cmd[i].target, &e->t, &e->qp);
	}
	return ex;
}

/* The start's target of command i (the start gives them in command order). */
static uint64_t start_target(const struct emunic_mq_prepared *pl, const struct nic_cmd *s, unsigned i, unsigned *j,
			     uint64_t target)
{
	return *j < s->start_n && pl->target[*j].cmd == i ? s->start_target[(*j)++] : target;
}

static void start_by_tasks(struct emunic_dev *d, const struct emunic_mq_prepared *pl, const struct nic_cmd *s)
{
	struct emunic_mq *mq = (struct emunic_mq *)nic_resolve(d, pl->cmd[0].mq, OBJ_MQ);
	unsigned j = 0;

	for (unsigned i = 0; i < pl->n; i++) {
		const struct nic_cmd *c = &pl->cmd[i];

		queue_task(d, mq, c, c->wr_id + s->start_add, start_target(pl, s, i, &j, c->target));
	}
}

/* A start of a prepared list: its tasks as the prepare left them, each
 * wr_id moved, the targets (in command order) from the start.  A list
 * freed since cannot be (emunic_mq_prepared_free waits for its last
 * START to be taken), so a handle that no longer resolves is a bug's, or
 * a free racing a start of the same list (mq.h forbids it). */
static void on_start(struct emunic_dev *d, const struct nic_cmd *s)
{
	struct emunic_mq_prepared *pl = (struct emunic_mq_prepared *)nic_resolve(d, s->obj, OBJ_PREP);
	struct prep_exec *ex;
	bool on_mq = false;
	unsigned j = 0;

	if (!pl) {
		nic_notice(d, "a start of prepared list %#x: no such list; its tasks are dropped", s->obj);
		return;
	}
	if (!(ex = exec_of(d, pl))) {
		start_by_tasks(d, pl, s);	/* no memory for it: task by task, as a post */
		return;
	}
	for (unsigned i = 0; i < pl->n; i++) {
		const struct exec_task *e = &ex->task[i];
		uint64_t target = start_target(pl, s, i, &j, e->t.target);	/* every i: the targets go in order */
		bool recv = e->t.op == EMUNIC_TASK_RECV;
		struct nic_task *t, failed;

		if (e->to == TO_NONE)
			continue;
		t = e->to == TO_MQ ? nic_fifo_at(&ex->mq->q, ex->mq->q.tail++) : nic_qp_slot(e->qp, recv);
		if (!t)
			t = &failed;	/* no memory for it in the QP's queue */
		*t = e->t;
		t->wr_id += s->start_add;
		t->target = target;
		if (e->to == TO_MQ) {
			d->mq->queued++;
			on_mq = true;
		} else if (t == &failed) {
			nic_qp_queue(d, e->qp, t, recv);	/* fails it */
		} else {
			nic_qp_queued(d, e->qp, recv);
		}
	}
	if (on_mq)
		mq_ready(d->mq, ex->mq);
}

/* ---- running the queues ------------------------------------------------------------------ */

static void block_on(struct emunic_mq *mq, struct emunic_cq *cq)
{
	if (mq->blocked_on)
		return;
	mq->blocked_on = cq;
	mq->blocked_next = cq->blocked;
	cq->blocked = mq;
}

static int run_mq(struct emunic_dev *d, struct emunic_mq *mq)
{
	struct nic_fifo *f = &mq->q;
	int n = 0;

	while (f->head < f->tail) {
		struct nic_task *t = nic_fifo_at(f, f->head);
		struct emunic_wc wc = { .wr_id = t->wr_id, .op = t->op, .peer = -1 };
		struct emunic_qp *qp = t->op == EMUNIC_TASK_SEND_EN || t->op == EMUNIC_TASK_RECV_EN
					       ? (struct emunic_qp *)t->obj : NULL;
		struct emunic_cq *cq = t->op == EMUNIC_TASK_WAIT ? (struct emunic_cq *)t->obj : NULL;

		if (mq->skipping) {
			/* A WAIT of this list failed: what it guarded does not
			 * run, as a QP's work after a failure flushes. */
			wc.status = EMUNIC_WC_WR_FLUSH_ERR;
			if (qp)
				wc.peer = qp->peer;
			if (t->flags & NIC_TASK_SIGNAL)
				mq_complete(d, mq, &wc);
			mq->skipping = !(t->flags & NIC_TASK_LIST_END);
			goto next;
		}
		switch (t->op) {
		case EMUNIC_TASK_WAIT:
			if (atomic_load_explicit(&cq->count, memory_order_acquire) < t->target) {
				block_on(mq, cq);
				return n;	/* blocks the queue, as on the HCA */
			}
			/* A failure among the completions it counts is never
			 * hidden: the WAIT completes with it, signaled or not.
			 * One that came after them (a peer that left once its
			 * data was in, flushing the receives behind it) is not
			 * this WAIT's: it fails the WAITs that count it. */
			if (cq->err_status && cq->err_n <= t->target) {
				wc.status = cq->err_status;
				wc.peer = cq->err_peer;
				wc.qp_num = cq->err_qpn;
				mq->skipping = !(t->flags & NIC_TASK_LIST_END);
			}
			EMUNIC_TL(TL_WAIT_DONE, TL_TRACK_MQ, NIC_HANDLE_INDEX(mq->o.handle), -1,
				  NIC_HANDLE_INDEX(cq->o.handle), t->target, wc.status);
			break;
		case EMUNIC_TASK_SEND_EN:
		case EMUNIC_TASK_RECV_EN:
			nic_qp_enable(d, qp, t->op == EMUNIC_TASK_RECV_EN, t->target);
			wc.peer = qp->peer;
			EMUNIC_TL(TL_ENABLED, TL_TRACK_MQ, NIC_HANDLE_INDEX(mq->o.handle), qp->peer,
				  NIC_HANDLE_INDEX(qp->o.handle), t->target, t->op);
			break;
		case EMUNIC_TASK_CALC:
			nic_task_calc(t);
			wc.byte_len = t->len;
			break;
		}
		if ((t->flags & NIC_TASK_SIGNAL) || wc.status)
			mq_complete(d, mq, &wc);
next:
		f->head++;
		f->done++;
		d->mq->queued--;
		atomic_fetch_add_explicit(&f->completed, 1, memory_order_release);
		n++;
	}
	return n;
}

static __attribute__((noinline)) int run_ready(struct emunic_dev *d)
{
	struct mq_dev *m = d->mq;
	struct emunic_mq *mq = m->ready;
	int n = 0;

	m->ready = m->ready_tail = NULL;
	while (mq) {
		struct emunic_mq *next = mq->ready_next;

		mq->ready = false;
		if (!atomic_load_explicit(&mq->o.gone, memory_order_relaxed))
			n += run_mq(d, mq);
		mq = next;
	}
	return n;
}

static bool runnable(struct emunic_dev *d)
{
	return d->mq->ready != NULL;	/* else every queued task is behind a WAIT */
}

/* Most passes find no MQ ready: they pay this look, not run_ready's frame. */
static int step(struct emunic_dev *d)
{
	return runnable(d) ? run_ready(d) : 0;
}

static bool pending(struct emunic_dev *d)
{
	return d->mq->queued != 0;
}

/* ---- objects going, closing ------------------------------------------------------------------- */

static void unblock(struct emunic_mq *mq)
{
	struct emunic_cq *cq = mq->blocked_on;

	if (!cq)
		return;
	for (struct emunic_mq **pp = &cq->blocked; *pp; pp = &(*pp)->blocked_next)
		if (*pp == mq) {
			*pp = mq->blocked_next;
			break;
		}
	mq->blocked_on = NULL;
}

static void release(struct emunic_dev *d, struct obj *o)
{
	if (o->kind == OBJ_MQ) {
		struct emunic_mq *mq = (struct emunic_mq *)o;

		/* Left in the ready list, it is skipped there (gone). */
		unblock(mq);
		d->mq->queued -= mq->q.tail - mq->q.head;
		mq->q.head = mq->q.tail;
	} else if (o->kind == OBJ_CQ) {
		struct emunic_cq *cq = (struct emunic_cq *)o;

		while (cq->blocked)
			unblock(cq->blocked);
	}
}

/* Device closing: whatever has not run completes as CANCELED. */
static void cancel_all(struct emunic_dev *d)
{
	for (struct obj *o = d->objs[OBJ_MQ]; o; o = o->next) {
		struct emunic_mq *mq = (struct emunic_mq *)o;
		uint64_t n = 0, first = mq->q.head;

		for (; mq->q.head < mq->q.tail; mq->q.head++, n++) {
			struct nic_task *t = nic_fifo_at(&mq->q, mq->q.head);
			struct emunic_wc wc = { .wr_id = t->wr_id, .op = t->op, .peer = -1,
						.status = EMUNIC_WC_CANCELED };

			if (t->flags & NIC_TASK_SIGNAL)
				mq_complete(d, mq, &wc);
		}
		d->mq->queued -= n;
		if (n)
			nic_notice(d, "device %s closing: mq %p: %llu unfinished task(s) canceled (first: %s)", d->v->name,
				   (void *)mq, (unsigned long long)n, emunic_task_op_str(nic_fifo_at(&mq->q, first)->op));
	}
}

static void fini(struct emunic_dev *d)
{
	free(d->mq);
	d->mq = NULL;
}

static void free_cq(struct obj *o)
{
	emunic_ring_fini(&((struct emunic_cq *)o)->wc);
}

static void free_mq(struct obj *o)
{
	nic_fifo_fini(&((struct emunic_mq *)o)->q);
	emunic_ring_fini(&((struct emunic_mq *)o)->wc);
}

static const struct nic_unit mq_unit = {
	.name = "mq", .step = step, .pending = pending, .runnable = runnable, .release = release,
	.cancel_all = cancel_all, .fini = fini,
};

int emunic_mq_unit_init(struct emunic_dev *d)
{
	d->mq = calloc(1, sizeof(*d->mq));
	if (!d->mq)
		return -ENOMEM;
	nic_on_cmd(d, NIC_CMD_TASK, on_task);
	nic_on_cmd(d, NIC_CMD_START, on_start);
	d->obj_free[OBJ_CQ] = free_cq;
	d->obj_free[OBJ_MQ] = free_mq;
	return nic_register(d, &mq_unit);
}
