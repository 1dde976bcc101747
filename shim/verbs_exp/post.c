/* SPDX-License-Identifier: MIT */
/*
 * ibv_exp_post_send, ibv_exp_post_task and the ops behind ibv_post_send and
 * ibv_post_recv: work requests become emunic tasks (wr.c), posted with
 * emunic_mq_post_lists.
 *
 * Where the control work requests run: on the emunic MQ of the QP they were
 * posted to (in libmlx5 a WAIT or enable WQE executes on the QP whose send
 * queue holds it, the management QP).  A task list goes to emunic as one
 * list per stretch of tasks whose control work requests share a management
 * QP (data work requests join the stretch they are in: emunic sends them to
 * their own QP's queue whatever the MQ), in order, all in one
 * emunic_mq_post_lists under the shim's lock.  libmlx5's mlx5_post_task
 * posted task after task with ibv_exp_post_send under its task_mutex,
 * stopping at the first failure with *bad_task set and the tasks before it
 * left posted.  The shim is stricter: a task list is posted whole or not at
 * all, whether a task fails the shim's checks or emunic refuses a stretch
 * (its MQ full, say, after earlier stretches went to other MQs), so the
 * shim's per-QP counts are committed exactly when the work was posted.
 * *bad_task is the failing task for the shim's checks, and the first task
 * (the first not posted) for emunic's refusals.
 *
 * Errors are verbs_exp's: a positive errno returned (and in errno), *bad_wr
 * (*bad_task) the first refused one; emunic's -ENOSPC (its command ring or
 * an MQ full) is ENOMEM, as libmlx5's "work queue overflow".
 */
#include "shim/verbs_exp/vexp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct vexp_list {
	struct emunic_task *t;
	struct emunic_mq **mq;		/* per task: the MQ it must run on, or NULL (any) */
	unsigned n, cap;
	struct vexp_early *early;	/* receives posted in INIT, for their QPs at the end */
	unsigned nearly, early_cap;
};

static int list_grow(struct vexp_list *l)
{
	unsigned cap = l->cap ? 2 * l->cap : 16;
	struct emunic_task *t = realloc(l->t, cap * sizeof(*t));
	struct emunic_mq **mq;

	if (!t)
		return ENOMEM;
	l->t = t;
	if (!(mq = realloc(l->mq, cap * sizeof(*mq))))
		return ENOMEM;
	l->mq = mq;
	l->cap = cap;
	return 0;
}

static int is_control(int op)
{
	return op == EMUNIC_TASK_WAIT || op == EMUNIC_TASK_SEND_EN || op == EMUNIC_TASK_RECV_EN;
}

/* The list's next free task, or NULL when it cannot grow. */
static struct emunic_task *next_slot(struct vexp_list *l)
{
	return l->n < l->cap || !list_grow(l) ? &l->t[l->n] : NULL;
}

static int add_send(struct vexp_post *p, struct vexp_list *l, struct vexp_qp *qp, struct ibv_exp_send_wr *wr,
		    struct ibv_exp_send_wr **bad_wr)
{
	for (; wr; wr = wr->next) {
		struct emunic_task *t = next_slot(l);
		int r = t ? vexp_send_wr_task(p, qp, wr, t) : vexp_fail(ENOMEM, "no memory");

		if (r && bad_wr)
			*bad_wr = wr;
		if (r)
			return r;
		l->mq[l->n++] = is_control(t->op) ? qp->mq : NULL;
	}
	return 0;
}

/* A receive posted in INIT, set aside: its QP takes it at the end of a
 * post that succeeded (its room, the QP's depth, is made now, so the end
 * cannot fail). */
static int keep_early(struct vexp_list *l, struct vexp_qp *qp, const struct emunic_task *t)
{
	if (l->nearly == l->early_cap) {
		unsigned cap = l->early_cap ? 2 * l->early_cap : 8;
		struct vexp_early *e = realloc(l->early, cap * sizeof(*e));

		if (!e)
			return vexp_fail(ENOMEM, "no memory");
		l->early = e;
		l->early_cap = cap;
	}
	if (!qp->early && !(qp->early = calloc(qp->depth, sizeof(*qp->early))))
		return vexp_fail(ENOMEM, "no memory");
	l->early[l->nearly++] = (struct vexp_early){ .qp = qp, .t = *t };
	return 0;
}

static int add_recv(struct vexp_post *p, struct vexp_list *l, struct vexp_qp *qp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr)
{
	for (struct emunic_task *t; wr; wr = wr->next) {
		int r = (t = next_slot(l)) ? vexp_recv_wr_task(p, qp, wr, t) : vexp_fail(ENOMEM, "no memory");

		if (!r && !t->qp)
			r = keep_early(l, qp, t);
		else if (!r)
			l->mq[l->n++] = NULL;
		if (r)
			return bad_wr ? (*bad_wr = wr, r) : r;
	}
	return 0;
}

#define RUNS_STACK 8		/* stretches a post may have without an allocation */

/* The list as emunic lists, one per stretch sharing an MQ, each no longer
 * than the device takes, posted as one unit: all of them or none, so a
 * refused post leaves nothing and the shim's counts (end) stay true.
 * quiet_full: a full ring or MQ is ENOMEM without a line (a caller that
 * waits it out says what it gave up on). */
static int post_runs(const struct vexp_list *l, struct emunic_mq *dflt, bool quiet_full)
{
	struct vexp_state *s = vexp_get();
	unsigned most = emunic_dev_list_tasks(s->dev), i = 0, nr = 0;
	struct emunic_mq_list stack[RUNS_STACK], *runs = stack;
	int r;

	/* At most one stretch per task. */
	if (l->n > RUNS_STACK && !(runs = malloc(l->n * sizeof(*runs))))
		return vexp_fail(ENOMEM, "no memory");
	while (i < l->n) {
		struct emunic_mq *mq = NULL;
		unsigned j = i;

		for (; j < l->n && j - i < most; j++) {
			if (l->mq[j] && mq && l->mq[j] != mq)
				break;
			if (l->mq[j])
				mq = l->mq[j];
		}
		runs[nr++] = (struct emunic_mq_list){ .mq = mq ? mq : dflt, .tasks = &l->t[i], .n = j - i };
		i = j;
	}
	r = emunic_mq_post_lists(runs, nr, 0);
	if (runs != stack)
		free(runs);
	if (r == -ENOSPC && quiet_full)
		return ENOMEM;
	if (r == -ENOSPC)
		return vexp_fail(ENOMEM, "work queue overflow (emunic's MQ or command ring is full); nothing was "
				 "posted");
	if (r)
		return vexp_fail(-r, "emunic_mq_post_lists refused %u tasks in %u lists; nothing was posted", l->n,
				 nr);
	return 0;
}

static void begin(struct vexp_post *p)
{
	memset(p, 0, sizeof(*p));
	p->epoch = ++vexp_get()->epoch;
	if (!p->epoch)		/* 0 is every new QP's: never a post's */
		p->epoch = ++vexp_get()->epoch;
}

/* ok: the whole list was posted (post_runs posts all of it or none), so
 * the counts the checks moved in *_tmp become the QPs' own. */
static void end(struct vexp_post *p, struct vexp_list *l, int ok)
{
	for (unsigned i = 0; ok && i < p->ntouched; i++) {
		p->touched[i]->sq = p->touched[i]->sq_tmp;
		p->touched[i]->rq = p->touched[i]->rq_tmp;
	}
	for (unsigned i = 0; ok && i < l->nearly; i++) {
		struct vexp_qp *qp = l->early[i].qp;

		qp->early[qp->nearly++] = l->early[i].t;	/* at most depth: wr.c */
	}
	free(p->touched);
	free(l->t);
	free(l->mq);
	free(l->early);
}

int vexp_post_early(struct vexp_qp *qp)
{
	struct vexp_list l = { .t = qp->early, .n = qp->nearly };
	int r;

	for (unsigned i = 0; i < qp->nearly; i++)
		qp->early[i].qp = qp->qp;
	if (!(l.mq = calloc(qp->nearly, sizeof(*l.mq))))
		r = vexp_fail(ENOMEM, "no memory");
	/* All of them or none; a full command ring empties as the engine
	 * runs (post_runs's refusal let it run), so it is waited out, 2 s. */
	for (int i = 0; l.mq && (r = post_runs(&l, qp->mq, true)) == ENOMEM && i < 2000; i++)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	free(l.mq);
	if (r) {
		for (unsigned i = 0; i < qp->nearly; i++)
			qp->early[i].qp = NULL;
		return vexp_fail(r, "ibv_modify_qp on QP %u to RTR: the %u receives posted in INIT were not taken; "
				 "the QP stays in INIT with them", qp->ibv.qp_num, qp->nearly);
	}
	free(qp->early);
	qp->early = NULL;
	qp->nearly = 0;
	return 0;
}

int ibv_exp_post_send(struct ibv_qp *ibqp, struct ibv_exp_send_wr *wr, struct ibv_exp_send_wr **bad_wr)
{
	struct vexp_state *s = vexp_get();
	struct vexp_list l = { 0 };
	struct vexp_post p;
	struct vexp_qp *qp;
	int r;

	if (!ibqp || !vexp_ours(ibqp->context))
		return vexp_fail(EINVAL, "ibv_exp_post_send: not a QP of ibv_exp_create_qp");
	qp = to_vqp(ibqp);
	pthread_mutex_lock(&s->lock);
	begin(&p);
	r = add_send(&p, &l, qp, wr, bad_wr);
	if (!r && l.n && (r = post_runs(&l, qp->mq, false)) && bad_wr)
		*bad_wr = wr;
	end(&p, &l, !r);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int vexp_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct vexp_state *s = vexp_get();
	struct vexp_qp *qp = to_vqp(ibqp);
	struct vexp_list l = { 0 };
	struct vexp_post p;
	int r;

	pthread_mutex_lock(&s->lock);
	begin(&p);
	r = add_recv(&p, &l, qp, wr, bad_wr);
	if (!r && l.n && (r = post_runs(&l, qp->mq, false)) && bad_wr)
		*bad_wr = wr;
	end(&p, &l, !r);
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* ibv_post_send on a shim QP: the same path, one ibv_send_wr at a time
 * turned into its verbs_exp form (the opcodes and flags share values). */
int vexp_post_send_legacy(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	for (; wr; wr = wr->next) {
		struct ibv_exp_send_wr x = {
			.wr_id = wr->wr_id, .sg_list = wr->sg_list, .num_sge = wr->num_sge,
			.exp_opcode = (enum ibv_exp_wr_opcode)wr->opcode, .exp_send_flags = wr->send_flags,
		};
		int r;

		x.ex.imm_data = wr->imm_data;
		x.wr.rdma.remote_addr = wr->wr.rdma.remote_addr;
		x.wr.rdma.rkey = wr->wr.rdma.rkey;
		if ((r = ibv_exp_post_send(qp, &x, NULL))) {
			if (bad_wr)
				*bad_wr = wr;
			return r;
		}
	}
	return 0;
}

int ibv_exp_post_task(struct ibv_context *context, struct ibv_exp_task *task, struct ibv_exp_task **bad_task)
{
	struct vexp_state *s = vexp_get();
	struct vexp_list l = { 0 };
	struct emunic_mq *dflt = NULL;
	struct vexp_post p;
	int r = 0;

	(void)context;		/* libmlx5 took only its task_mutex from it */
	pthread_mutex_lock(&s->lock);
	begin(&p);
	for (struct ibv_exp_task *t = task; t && !r; t = t->next) {
		struct ibv_qp *q = t->item.qp;

		if (!q || !vexp_ours(q->context))
			r = vexp_fail(EINVAL, "ibv_exp_post_task: a task names no QP of ibv_exp_create_qp");
		else if (t->task_type == IBV_EXP_TASK_SEND)
			r = add_send(&p, &l, to_vqp(q), t->item.send_wr, NULL);
		else if (t->task_type == IBV_EXP_TASK_RECV)
			r = add_recv(&p, &l, to_vqp(q), t->item.recv_wr, NULL);
		else
			r = vexp_fail(EINVAL, "ibv_exp_post_task: task type %d", t->task_type);
		if (r && bad_task)
			*bad_task = t;
		if (!dflt && !r)
			dflt = to_vqp(q)->mq;
	}
	if (!r && l.n && (r = post_runs(&l, dflt, false)) && bad_task)
		*bad_task = task;
	end(&p, &l, !r);
	pthread_mutex_unlock(&s->lock);
	return r;
}
