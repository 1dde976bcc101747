/* SPDX-License-Identifier: MIT */
/*
 * The management-queue rules at post time (run-time rules: exec.c).  A post
 * is one or more lists, each to its MQ; they are checked whole against
 * copies of the counters they would change (a later list sees what the
 * earlier ones post); only a valid post changes them and is published to
 * the engine in one step, under the post lock, so lists never interleave
 * and a refused post leaves nothing.  Then, if the engine is free, the
 * posting thread runs it at once (no hand-off to another thread).
 */
#include "emunic/mq/mq.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POST_STACK 16		/* posts this short need no allocation */

/* The counters a post changes, per object it names (posts are short). */
struct shadow {
	void *obj;
	uint64_t a, b;		/* qp: posted, claimed; cq: wait_index, wait_count */
	uint64_t a2, b2;	/* qp: rq posted, rq claimed */
	uint64_t fifo;		/* mq: control tasks the post adds to its queue */
};

/* One post: its lists, the counters they change, where their commands are
 * built and which list is being checked (for the checks and the messages). */
struct post {
	struct emunic_dev *d;
	const struct emunic_mq_list *lists;
	unsigned nlists;
	unsigned k, base;	/* the list being checked, its first command */
	struct nic_cmd *buf;	/* commands built aside (no room in the ring), or NULL */
	struct shadow *sh;
	unsigned nsh;
	bool prepare;		/* checks that do not depend on the counters only */
	uint64_t wr_id_add;	/* a start's: the wr_ids its messages name */
};

static struct shadow *shadow_of(struct post *p, void *obj, bool *fresh)
{
	for (unsigned i = 0; i < p->nsh; i++)
		if (p->sh[i].obj == obj) {
			*fresh = false;
			return &p->sh[i];
		}
	*fresh = true;
	p->sh[p->nsh] = (struct shadow){ .obj = obj };
	return &p->sh[p->nsh++];
}

/* After "mq %p": which of several lists it is ("" for one; messages only). */
static const char *list_where(char *buf, size_t size, unsigned k, unsigned nlists)
{
	if (nlists == 1)
		return "";
	snprintf(buf, size, " (lists[%u] of %u)", k, nlists);
	return buf;
}

/* A refusal, naming the MQ, the list and the task. */
static int refuse(const struct post *p, int err, unsigned i, const struct emunic_task *t, const char *why)
{
	char buf[48];

	return emunic_err(err, "mq %p%s: task %u of the list (%s, wr_id %llu): %s; nothing was posted",
			  (void *)p->lists[p->k].mq, list_where(buf, sizeof(buf), p->k, p->nlists), i,
			  emunic_task_op_str(t->op), (unsigned long long)(t->wr_id + p->wr_id_add), why);
}

static int bad(const struct post *p, unsigned i, const struct emunic_task *t, const char *why)
{
	return refuse(p, -EINVAL, i, t, why);
}

static struct shadow *qp_shadow(struct post *p, struct emunic_qp *qp)
{
	bool fresh;
	struct shadow *s = shadow_of(p, qp, &fresh);

	if (fresh) {
		s->a = qp->sq_posted; s->b = qp->sq_claimed;
		s->a2 = qp->rq_posted; s->b2 = qp->rq_claimed;
	}
	return s;
}

static int check_data(struct post *p, unsigned i, const struct emunic_task *t, bool qp_live, struct nic_cmd *c)
{
	if (!qp_live)
		return bad(p, i, t, "its QP is not a live QP of this device");
	if (t->len && (!t->mr || !nic_obj_alive(p->d, &t->mr->o, OBJ_MR)))
		return bad(p, i, t, "its buffer has no registered memory region");
	if (t->op == EMUNIC_TASK_FETCH_ADD && t->len != 8)
		return bad(p, i, t, "fetch_add needs an 8-byte local buffer");
	if (t->op == EMUNIC_TASK_FETCH_ADD || t->op == EMUNIC_TASK_WRITE_IMM) {
		/* What the device cannot carry: -EOPNOTSUPP, not a QP broken later. */
		const char *lacks = emunic_vdev_lacks(p->d->v, t->op == EMUNIC_TASK_FETCH_ADD ? EMUNIC_LACKS_ATOMIC
											      : EMUNIC_LACKS_IMM);
		char why[160];

		if (lacks) {
			snprintf(why, sizeof(why), "device %s: %s", p->d->v->name, lacks);
			return refuse(p, -EOPNOTSUPP, i, t, why);
		}
	}
	c->obj = t->qp->o.handle;
	c->lkey = t->len ? t->mr->mr->lkey : 0;
	return 0;
}

/* ---- the counter rules: what depends on what was posted before ---------------- */

/* One more work request on its queue, with room for it. */
static int count_data(struct post *p, const struct emunic_task *t)
{
	struct shadow *s = qp_shadow(p, t->qp);

	if (t->op == EMUNIC_TASK_RECV ? !nic_fifo_room(&t->qp->rq, ++s->a2 - t->qp->rq_posted)
				      : !nic_fifo_room(&t->qp->sq, ++s->a - t->qp->sq_posted))
		return -ENOSPC;
	return 0;
}

/* An enable's target: everything posted so far (count 0), or count more
 * than the last enable's, never more than was posted. */
static int count_enable(struct post *p, unsigned i, const struct emunic_task *t, struct nic_cmd *c)
{
	bool snd = t->op == EMUNIC_TASK_SEND_EN;
	struct shadow *s = qp_shadow(p, t->qp);
	uint64_t *posted = snd ? &s->a : &s->a2, *claimed = snd ? &s->b : &s->b2;

	if (t->count == 0) {
		*claimed = *posted;
	} else if (*claimed + t->count > *posted) {
		emunic_err(-EINVAL, "peer %d: %s(%u) but only %llu posted and not yet enabled", t->qp->peer,
			   emunic_task_op_str(t->op), t->count, (unsigned long long)(*posted - *claimed));
		return bad(p, i, t, "enables more work requests than were posted");
	} else {
		*claimed += t->count;
	}
	c->target = *claimed;
	return 0;
}

/* As libmlx5 did: target = base + n; the base moves by the largest count
 * of the group on WAIT_EN_LAST. */
static void count_wait(struct post *p, const struct emunic_task *t, struct nic_cmd *c)
{
	bool fresh;
	struct shadow *s = shadow_of(p, t->cq, &fresh);

	if (fresh) {
		s->a = t->cq->wait_index;
		s->b = t->cq->wait_count;
	}
	c->target = s->a + t->count;
	if (t->count > s->b)
		s->b = t->count;
	if (t->flags & EMUNIC_TASK_WAIT_EN_LAST) {
		s->a += s->b;
		s->b = 0;
	}
}

static int count_task(struct post *p, unsigned i, const struct emunic_task *t, struct nic_cmd *c)
{
	switch (t->op) {
	case EMUNIC_TASK_SEND_EN: case EMUNIC_TASK_RECV_EN:
		return count_enable(p, i, t, c);
	case EMUNIC_TASK_WAIT:
		count_wait(p, t, c);
		return 0;
	case EMUNIC_TASK_CALC:
		return t->qp ? count_data(p, t) : 0;
	default:
		return count_data(p, t);
	}
}

/* CALC: a defined op x type pair over whole elements; with a QP it is a
 * data task (a SEND of the result), without one it runs on the MQ. */
static int check_calc(struct post *p, unsigned i, const struct emunic_task *t, bool qp_live, struct nic_cmd *c)
{
	size_t size = emunic_calc_size(t->calc_type);
	char why[128];

	if (emunic_calc_check(t->calc_op, t->calc_type)) {
		snprintf(why, sizeof(why), "calc %s is not defined on %s (op %d, type %d)",
			 emunic_calc_op_str(t->calc_op), emunic_calc_type_str(t->calc_type), t->calc_op,
			 t->calc_type);
		return bad(p, i, t, why);
	}
	if (t->len % size) {
		snprintf(why, sizeof(why), "its length, %u bytes, is not a whole number of %s elements (%zu bytes)",
			 t->len, emunic_calc_type_str(t->calc_type), size);
		return bad(p, i, t, why);
	}
	if (t->len && (!t->addr || !t->calc_a || !t->calc_b))
		return bad(p, i, t, "calc needs a result buffer (addr) and both operands (calc_a, calc_b)");
	c->calc_a = (uintptr_t)t->calc_a;
	c->calc_b = (uintptr_t)t->calc_b;
	c->calc = (uint32_t)t->calc_op << 8 | (uint32_t)t->calc_type;
	return t->qp ? check_data(p, i, t, qp_live, c) : 0;
}

static int check_enable(struct post *p, unsigned i, const struct emunic_task *t, bool qp_live, struct nic_cmd *c)
{
	bool snd = t->op == EMUNIC_TASK_SEND_EN;

	if (!qp_live)
		return bad(p, i, t, "its QP is not a live QP of this device");
	if (!(t->qp->attr.flags & (snd ? EMUNIC_QP_MANAGED_SEND : EMUNIC_QP_MANAGED_RECV)))
		return bad(p, i, t, snd ? "the QP was not created MANAGED_SEND" : "the QP was not created MANAGED_RECV");
	c->obj = t->qp->o.handle;
	return 0;
}

static int check_wait(struct post *p, unsigned i, const struct emunic_task *t, struct nic_cmd *c)
{
	if (!t->cq || !nic_obj_alive(p->d, &t->cq->o, OBJ_CQ))
		return bad(p, i, t, "its CQ is not a live CQ of this device");
	c->obj = t->cq->o.handle;
	return 0;
}

/* Where command i of the post is built: in `buf`, or, with none, straight
 * in the ring's free slots, which are the post lock holder's alone until
 * it publishes them (so a post that fails its checks leaves nothing). */
static struct nic_cmd *cmd_at(struct emunic_dev *d, struct nic_cmd *buf, unsigned i)
{
	return buf ? &buf[i] : emunic_ring_slot(&d->cmd, i);
}

/* List p->k, its commands from p->base on. */
static int check(struct post *p)
{
	const struct emunic_mq_list *l = &p->lists[p->k];
	struct emunic_mq *mq = l->mq;
	uint64_t ctl = 0;

	for (unsigned i = 0; i < l->n; i++) {
		const struct emunic_task *t = &l->tasks[i];
		struct nic_cmd *c = cmd_at(p->d, p->buf, p->base + i);
		bool qp_live = t->qp && nic_obj_alive(p->d, &t->qp->o, OBJ_QP);
		int r;

		*c = (struct nic_cmd){
			.type = NIC_CMD_TASK, .op = (uint8_t)t->op, .mq = mq->o.handle, .wr_id = t->wr_id,
			.flags = (t->flags & EMUNIC_TASK_SIGNAL) ? NIC_TASK_SIGNAL : 0,
			.addr = (uintptr_t)t->addr, .len = t->len, .remote_addr = t->remote_addr, .rkey = t->rkey,
			.imm = t->imm, .add = t->add,
		};
		if (qp_live && (t->qp->attr.flags & EMUNIC_QP_TRIGGERED))
			return bad(p, i, t, "its QP was created TRIGGERED (for triggered operations only)");
		switch (t->op) {
		case EMUNIC_TASK_SEND: case EMUNIC_TASK_WRITE: case EMUNIC_TASK_WRITE_IMM:
		case EMUNIC_TASK_READ: case EMUNIC_TASK_FETCH_ADD: case EMUNIC_TASK_RECV:
			r = check_data(p, i, t, qp_live, c);
			break;
		case EMUNIC_TASK_SEND_EN: case EMUNIC_TASK_RECV_EN:
			r = check_enable(p, i, t, qp_live, c);
			ctl++;
			break;
		case EMUNIC_TASK_WAIT:
			r = check_wait(p, i, t, c);
			ctl++;
			break;
		case EMUNIC_TASK_CALC:
			r = check_calc(p, i, t, qp_live, c);
			ctl += !t->qp;
			break;
		default:
			return bad(p, i, t, "unknown opcode");
		}
		if (r || (!p->prepare && (r = count_task(p, i, t, c))))
			return r;
	}
	if (p->prepare)
		return 0;
	if (p->nlists > 1) {	/* the MQ's room counts all its lists */
		bool fresh;

		ctl = shadow_of(p, mq, &fresh)->fifo += ctl;
	}
	return nic_fifo_room(&mq->q, ctl) ? 0 : -ENOSPC;
}

/* Runs on the MQ's own queue (WAIT, the enables, a CALC without a QP). */
static bool on_mq(const struct emunic_task *t)
{
	return t->op == EMUNIC_TASK_WAIT || t->op == EMUNIC_TASK_SEND_EN || t->op == EMUNIC_TASK_RECV_EN ||
	       (t->op == EMUNIC_TASK_CALC && !t->qp);
}

/* The list's last task on its MQ's own queue, which ends the list there
 * (NIC_TASK_LIST_END); n if none. */
static unsigned list_end(const struct emunic_task *tasks, unsigned n)
{
	for (unsigned i = n; i-- > 0;)
		if (on_mq(&tasks[i]))
			return i;
	return n;
}

/* List p->k's tasks into its queues, its commands built from p->base on. */
static void commit_list(struct post *p)
{
	const struct emunic_mq_list *l = &p->lists[p->k];
	struct emunic_mq *mq = l->mq;
	unsigned end = list_end(l->tasks, l->n);

	if (end < l->n)
		cmd_at(p->d, NULL, p->base + end)->flags |= NIC_TASK_LIST_END;
	for (unsigned i = 0; i < l->n; i++) {
		const struct emunic_task *t = &l->tasks[i];

		EMUNIC_TL(TL_TASK_POSTED, TL_TRACK_MQ, NIC_HANDLE_INDEX(mq->o.handle), -1,
			  cmd_at(p->d, NULL, p->base + i)->wr_id, t->op, i);
		if (t->op == EMUNIC_TASK_WAIT) {
			uint64_t target = cmd_at(p->d, NULL, p->base + i)->target;

			/* From now on the completions it counts are the WAIT's,
			 * not the app's (emunic_cq_poll skips them). */
			if (target > atomic_load(&t->cq->covered))
				atomic_store_explicit(&t->cq->covered, target, memory_order_release);
			mq->q.posted++;
		} else if (on_mq(t)) {
			mq->q.posted++;
		} else if (t->op == EMUNIC_TASK_RECV) {
			t->qp->rq.posted++;
		} else {
			t->qp->sq.posted++;
		}
	}
}

static void commit_shadows(const struct post *p)
{
	for (unsigned i = 0; i < p->nsh; i++) {
		const struct shadow *s = &p->sh[i];
		struct obj *o = s->obj;

		if (o->kind == OBJ_QP) {
			struct emunic_qp *qp = s->obj;

			qp->sq_posted = s->a; qp->sq_claimed = s->b;
			qp->rq_posted = s->a2; qp->rq_claimed = s->b2;
		} else if (o->kind == OBJ_CQ) {
			struct emunic_cq *cq = s->obj;

			cq->wait_index = s->a;
			cq->wait_count = s->b;
		}
	}
}

static int check_flags(const struct emunic_mq *mq, unsigned flags)
{
	if (flags & ~EMUNIC_POST_WAIT_NEXT)
		return emunic_err(-EINVAL, "mq %p: unknown post flags 0x%x; nothing was posted", (void *)mq,
				  flags & ~EMUNIC_POST_WAIT_NEXT);
	return 0;
}

/* A valid post, under the post lock: its lists into their queues, the
 * counters it changed, and every command to the engine at once. */
static void commit(struct post *p, uint32_t total)
{
	for (p->k = 0, p->base = 0; p->k < p->nlists; p->base += p->lists[p->k++].n)
		commit_list(p);
	commit_shadows(p);
	emunic_ring_publish(&p->d->cmd, total);
}

/* What needs no lock: live MQs of one device, lists neither empty nor
 * longer than the device takes, known flags.  *total: the post's tasks. */
static int precheck(const struct emunic_mq_list *lists, unsigned nlists, unsigned flags, size_t *total)
{
	struct emunic_dev *d = lists[0].mq ? lists[0].mq->o.dev : NULL;
	char buf[48];
	int r;

	*total = 0;
	for (unsigned k = 0; k < nlists; k++) {
		const struct emunic_mq_list *l = &lists[k];

		if (!l->mq || atomic_load(&l->mq->o.dead))
			return nlists == 1 ? emunic_err(-EINVAL, "emunic_mq_post: not a live MQ")
					   : emunic_err(-EINVAL, "emunic_mq_post_lists: lists[%u] of %u names no "
							"live MQ; nothing was posted", k, nlists);
		if (l->mq->o.dev != d)
			return emunic_err(-EINVAL, "mq %p%s: not of the device of lists[0]'s mq %p; nothing was posted",
					  (void *)l->mq, list_where(buf, sizeof(buf), k, nlists), (void *)lists[0].mq);
		if (!l->tasks || l->n == 0)
			return emunic_err(-EINVAL, "mq %p%s: empty task list; nothing was posted", (void *)l->mq,
					  list_where(buf, sizeof(buf), k, nlists));
		if (l->n > d->attr.list_tasks)
			return emunic_err(-E2BIG, "mq %p%s: a task list of %u tasks is longer than the device's limit of "
					  "%u (attr.list_tasks, EMUNIC_LIST_TASKS); nothing was posted", (void *)l->mq,
					  list_where(buf, sizeof(buf), k, nlists), l->n, d->attr.list_tasks);
		*total += l->n;
	}
	if ((r = check_flags(lists[0].mq, flags)))
		return r;
	if (*total > d->cmd.mask + 1u)		/* never room for it: not -ENOSPC forever */
		return emunic_err(-E2BIG, "emunic_mq_post_lists: %zu tasks in %u lists, more than the command ring's "
				  "%u entries; nothing was posted", *total, nlists, d->cmd.mask + 1u);
	return 0;
}

/* After the post lock: the engine runs what was posted. */
static int posted(struct emunic_dev *d, int r, unsigned flags)
{
	if (!r)
		nic_submitted(d, flags & EMUNIC_POST_WAIT_NEXT ? NIC_LEAVE_WAIT_NEXT : NIC_LEAVE_HAND_OVER);
	else if (r == -ENOSPC)
		nic_poll_assist(d);	/* room held by completions not yet polled: a retry finds it */
	return r;
}

static int post(const struct emunic_mq_list *lists, unsigned nlists, unsigned flags)
{
	struct shadow sstack[POST_STACK + 1];
	struct post p = { .lists = lists, .nlists = nlists, .sh = sstack };
	size_t total;
	int r;

	if (!lists || nlists == 0)
		return emunic_err(-EINVAL, "emunic_mq_post_lists: no lists; nothing was posted");
	if ((r = precheck(lists, nlists, flags, &total)))
		return r;
	p.d = lists[0].mq->o.dev;
	/* At most one object per task, plus each list's MQ. */
	if (total + nlists > POST_STACK + 1 && !(p.sh = malloc((total + nlists) * sizeof(*p.sh))))
		return -ENOMEM;
	emunic_lock(&p.d->post_lock);
	/* No room in the ring: the lists still get their checks (an invalid
	 * post is -EINVAL whatever the ring holds), built aside. */
	if (emunic_ring_space(&p.d->cmd) < total && !(p.buf = malloc(total * sizeof(*p.buf))))
		r = -ENOMEM;
	for (p.k = 0; !r && p.k < nlists; p.base += lists[p.k++].n)
		r = check(&p);
	if (p.buf) {
		free(p.buf);
		r = r ? r : -ENOSPC;
	}
	if (!r)
		commit(&p, (uint32_t)total);
	emunic_unlock(&p.d->post_lock);
	if (p.sh != sstack)
		free(p.sh);
	return posted(p.d, r, flags);
}

int emunic_mq_post_lists(const struct emunic_mq_list *lists, unsigned nlists, unsigned flags)
{
	return post(lists, nlists, flags);
}

/* The one-list case, the hot one: flattened, so post() and its checks are
 * compiled here with nlists == 1 and no loop over lists or call is paid. */
__attribute__((flatten))
int emunic_mq_post_flags(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n, unsigned flags)
{
	struct emunic_mq_list l = { .mq = mq, .tasks = tasks, .n = n };

	return post(&l, 1, flags);
}

int emunic_mq_post(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n)
{
	return emunic_mq_post_flags(mq, tasks, n, 0);
}

/* ---- prepared lists: checked once, started many times ---------------------------
 *
 * As MPI-4's persistent collectives (MPI_Barrier_init, then MPI_Start): a
 * list posted again and again with the same tasks is checked and built into
 * commands once.  A start then does only what depends on what was posted
 * before it (the counter rules above, count_task: enables, WAIT bases,
 * room) and that each object the list names is still alive.
 *
 * The counter rules of a whole list reduce, at prepare time, to a few
 * numbers per queue (struct prep_q): read each queue's counters once, add,
 * compare.  A start that passes them is the common case and runs only that
 * (start_fast); one that fails any is run again through the task-by-task
 * rules above, which name the first bad task as a post would.  In a
 * sanitizer build (EMUNIC_CHECK_RULES) every fast start is checked against
 * those rules too. */

/* A base a start reads from one queue's counters, and what a command's
 * target adds to it. */
enum { B_POSTED, B_CLAIMED, B_RQ_POSTED, B_RQ_CLAIMED, B_PER_Q };
#define B_CQ_INDEX B_POSTED		/* cq: wait_index */
#define B_CQ_AFTER B_CLAIMED		/* cq: wait_index + max(wait_count, m1), after a WAIT_EN_LAST */

/* What a start does to one QP or CQ, as count_task would do it task by task. */
struct prep_q {
	struct obj *obj;
	struct emunic_qp *qp;		/* the object as what it is (one of the two) */
	struct emunic_cq *cq;
	uint64_t b[B_PER_Q];		/* a start's bases, read from the counters (under the post lock) */
	/* qp, per direction (0 send, 1 receive) */
	uint32_t n[2];			/* data tasks: posted and room */
	int64_t need[2];		/* posted - claimed must be at least this (enables of a count) */
	bool from_posted[2];		/* an enable of count 0: claimed then follows posted */
	uint64_t claim_end[2];		/* claimed's end: the base (claimed, or posted) plus this */
	/* cq */
	bool enlast;			/* a WAIT_EN_LAST: the base moves (B_CQ_AFTER) */
	uint64_t m1;			/* the largest count up to the first WAIT_EN_LAST (all, without) */
	uint64_t index_end, count_end;	/* after one: wait_index = B_CQ_AFTER + index_end, wait_count = count_end */
};

/* The engine has taken the list's last START from the ring (it reads the
 * list's commands when it does). */
static bool starts_taken(void *arg)
{
	const struct emunic_mq_prepared *pl = arg;
	struct emunic_ring *ring = &pl->o.dev->cmd;
	uint32_t h = atomic_load_explicit(&ring->head, memory_order_acquire);
	uint32_t t = atomic_load_explicit(&ring->tail, memory_order_acquire);

	/* Its slot (last_pos - 1) is no longer among [head, tail), however
	 * many commands went by since. */
	return (uint32_t)(pl->last_pos - 1 - h) >= t - h;
}

void emunic_mq_prepared_free(struct emunic_mq_prepared *pl)
{
	if (!pl)
		return;
	if (pl->o.handle) {
		/* What its starts posted runs whatever happens to the list
		 * (mq.h): the engine must have read its commands first. */
		if (pl->started && !starts_taken(pl)) {
			struct emunic_word w = { 0 }, *wp = &w;
			int r = nic_wait(pl->o.dev, &wp, 1, starts_taken, pl, 10000);

			if (r) {
				emunic_err(r, "emunic_mq_prepared_free: %s; the list is left allocated",
					   r == -EDEADLK ? "called from an event handler while the engine still has to take "
							   "the list's last start"
							 : "the engine did not take the list's last start in 10 s");
				return;
			}
		}
		nic_obj_unhandle(&pl->o);
	}
	free(pl->tasks);
	free(pl->cmd);
	free(pl->obj);
	free(pl->obj_task);
	free(pl->q);
	free(pl->target);
	free(pl->exec);		/* the engine is done with it: it took the last start */
	free(pl);
}

static void use_obj(struct emunic_mq_prepared *pl, struct obj *o, unsigned i)
{
	for (unsigned k = 0; k < pl->nobj; k++)
		if (pl->obj[k] == o)
			return;
	pl->obj[pl->nobj] = o;
	pl->obj_task[pl->nobj++] = i;
}

/* The objects a task uses (as check() finds them): its QP where it has one
 * (not a WAIT, not a CALC on the MQ), its buffer's MR, a WAIT's CQ. */
static void use_objs(struct emunic_mq_prepared *pl, unsigned i)
{
	const struct emunic_task *t = &pl->tasks[i];

	if (t->op == EMUNIC_TASK_WAIT) {
		use_obj(pl, &t->cq->o, i);
		return;
	}
	if (t->qp)
		use_obj(pl, &t->qp->o, i);
	if (t->len && t->mr && !on_mq(t))
		use_obj(pl, &t->mr->o, i);
}

static unsigned prep_q_of(struct emunic_mq_prepared *pl, struct obj *o)
{
	unsigned k;

	for (k = 0; k < pl->nq; k++)
		if (pl->q[k].obj == o)
			return k;
	pl->q[pl->nq++] = (struct prep_q){ .obj = o, .qp = o->kind == OBJ_QP ? (struct emunic_qp *)(void *)o : NULL,
					   .cq = o->kind == OBJ_CQ ? (struct emunic_cq *)(void *)o : NULL };
	return k;
}

/* count_task over the list with every counter a symbol: each QP direction's
 * posted P and claimed C, each CQ's wait_index A and wait_count B.  posted
 * is P plus the data tasks so far; claimed is C plus the counts enabled so
 * far, or, after an enable of count 0, P plus what it and later enables
 * cover (claim_end either way); a WAIT's base is A until the first WAIT_EN_LAST,
 * then A + max(B, the counts so far) plus what later groups add.  An enable
 * of a count checks claimed + count <= posted: with claimed on C a need on
 * P - C, with claimed on P a fact of the list (false: no fast start). */
static void prepare_rules(struct emunic_mq_prepared *pl)
{
	pl->fast = true;
	for (unsigned i = 0; i < pl->n; i++) {
		const struct emunic_task *t = &pl->tasks[i];
		struct prep_target *g = &pl->target[pl->ntarget];
		struct prep_q *q;
		unsigned qi;

		*g = (struct prep_target){ .cmd = i };
		if (t->op == EMUNIC_TASK_WAIT) {
			qi = prep_q_of(pl, &t->cq->o);
			q = &pl->q[qi];
			g->cq = t->cq;
			pl->ntarget++;
			if (!q->enlast) {
				g->base = &q->b[B_CQ_INDEX];
				g->off = t->count;
				if (t->count > q->m1)
					q->m1 = t->count;
				if (t->flags & EMUNIC_TASK_WAIT_EN_LAST)
					q->enlast = true;	/* index_end 0, count_end 0 */
			} else {
				g->base = &q->b[B_CQ_AFTER];
				g->off = q->index_end + t->count;
				if (t->count > q->count_end)
					q->count_end = t->count;
				if (t->flags & EMUNIC_TASK_WAIT_EN_LAST) {
					q->index_end += q->count_end;
					q->count_end = 0;
				}
			}
		} else if (t->op == EMUNIC_TASK_SEND_EN || t->op == EMUNIC_TASK_RECV_EN) {
			unsigned dir = t->op == EMUNIC_TASK_RECV_EN;

			qi = prep_q_of(pl, &t->qp->o);
			q = &pl->q[qi];
			if (t->count == 0) {
				q->from_posted[dir] = true;
				q->claim_end[dir] = q->n[dir];
			} else if (q->from_posted[dir]) {
				if (q->claim_end[dir] + t->count > q->n[dir])
					pl->fast = false;	/* always refused: the rules say which task */
				q->claim_end[dir] += t->count;
			} else {
				int64_t need = (int64_t)(q->claim_end[dir] + t->count) - (int64_t)q->n[dir];

				if (need > q->need[dir])
					q->need[dir] = need;
				q->claim_end[dir] += t->count;
			}
			g->base = &q->b[dir ? (q->from_posted[1] ? B_RQ_POSTED : B_RQ_CLAIMED)
					    : (q->from_posted[0] ? B_POSTED : B_CLAIMED)];
			g->off = q->claim_end[dir];
			pl->ntarget++;
		} else if (!on_mq(t)) {
			qi = prep_q_of(pl, &t->qp->o);
			pl->q[qi].n[t->op == EMUNIC_TASK_RECV]++;
		}
	}
}

int emunic_mq_prepare(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n,
		      struct emunic_mq_prepared **out)
{
	struct emunic_mq_list l = { .mq = mq, .tasks = tasks, .n = n };
	struct post p = { .lists = &l, .nlists = 1, .prepare = true };
	struct emunic_mq_prepared *pl;
	size_t total;
	int r;

	if (!out)
		return emunic_err(-EINVAL, "emunic_mq_prepare: out is NULL");
	*out = NULL;
	if ((r = precheck(&l, 1, 0, &total)))
		return r;
	pl = calloc(1, sizeof(*pl));
	if (!pl || !(pl->tasks = malloc(n * sizeof(*pl->tasks))) || !(pl->cmd = malloc(n * sizeof(*pl->cmd))) ||
	    !(pl->obj = malloc(2 * n * sizeof(*pl->obj))) || !(pl->obj_task = malloc(2 * n * sizeof(*pl->obj_task))) ||
	    !(pl->q = malloc(n * sizeof(*pl->q))) || !(pl->target = malloc(n * sizeof(*pl->target)))) {
		emunic_mq_prepared_free(pl);
		return -ENOMEM;
	}
	memcpy(pl->tasks, tasks, n * sizeof(*tasks));
	l.tasks = pl->tasks;
	pl->mq = mq;
	pl->n = pl->ncmd = n;
	p.d = mq->o.dev;
	nic_obj_init(&pl->o, p.d, OBJ_PREP);
	p.buf = pl->cmd;
	/* The first start looks at every object (the MQ too, which check()
	 * does not), then only after a death. */
	pl->deaths_seen = atomic_load_explicit(&p.d->deaths, memory_order_acquire) - 1;
	emunic_lock(&p.d->post_lock);
	r = check(&p);
	emunic_unlock(&p.d->post_lock);
	if (r) {
		emunic_mq_prepared_free(pl);
		return r;
	}
	for (unsigned i = 0; i < n; i++) {
		pl->ctl += on_mq(&pl->tasks[i]);
		use_objs(pl, i);
	}
	if (list_end(pl->tasks, n) < n)		/* in the commands a start copies */
		pl->cmd[list_end(pl->tasks, n)].flags |= NIC_TASK_LIST_END;
	prepare_rules(pl);
	/* Started as one command where its targets fit one and it has a
	 * handle (without one, as its commands: nothing is lost). */
	if (pl->ntarget <= NIC_START_TARGETS && n > 1 && !nic_obj_handle(&pl->o)) {
		pl->as_start = true;
		pl->ncmd = 1;
	}
	*out = pl;
	return 0;
}

static const char *obj_noun(const struct obj *o)
{
	return o->kind == OBJ_QP ? "its QP" : o->kind == OBJ_CQ ? "its CQ" : "its memory region";
}

#ifdef EMUNIC_CHECK_RULES
/* The precomputed rules and the rules task by task disagree: a bug here,
 * stopped where it shows. */
__attribute__((format(printf, 1, 2), noreturn))
static void rules_differ(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "emunic_mq_start: EMUNIC_CHECK_RULES: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	abort();
}
#endif

/* A start by the rules task by task (under the post lock): the one that
 * names what is wrong; and, where the precomputed rules said yes, what
 * EMUNIC_CHECK_RULES compares them with. */
static int start_slow(struct emunic_mq_prepared *pl, uint64_t wr_id_add, struct post *p, bool commit_it)
{
	struct nic_cmd aside;
	char why[96];
	bool room;
	int r = 0;
#ifdef EMUNIC_CHECK_RULES
	const struct prep_target *g = pl->target, *g_end = pl->target + pl->ntarget;
#endif

	/* Objects are destroyed without the post lock: a cross-check after
	 * start_fast's look would see a destroy it did not, and differ. */
	if (commit_it && atomic_load(&pl->mq->o.dead))
		return emunic_err(-EINVAL, "mq %p: destroyed since the list was prepared; nothing was posted",
				  (void *)pl->mq);
	for (unsigned k = 0; commit_it && k < pl->nobj; k++)
		if (atomic_load(&pl->obj[k]->dead)) {
			snprintf(why, sizeof(why), "%s was destroyed since the list was prepared", obj_noun(pl->obj[k]));
			return bad(p, pl->obj_task[k], &pl->tasks[pl->obj_task[k]], why);
		}
	/* No room in the ring: the counter rules still run (a start that
	 * breaks one is -EINVAL whatever the ring holds), aside. */
	room = emunic_ring_space(&p->d->cmd) >= pl->n;
	for (unsigned i = 0; !r && i < pl->n; i++) {
		struct nic_cmd *c = room && commit_it ? cmd_at(p->d, NULL, i) : &aside;

		*c = pl->cmd[i];
		c->wr_id += wr_id_add;
		r = count_task(p, i, &pl->tasks[i], c);
#ifdef EMUNIC_CHECK_RULES
		if (g < g_end && g->cmd == i) {
			if (!commit_it && !r && c->target != *g->base + g->off)
				rules_differ("task %u: precomputed target %llu, the rules' %llu", i,
					     (unsigned long long)(*g->base + g->off),
					     (unsigned long long)c->target);
			g++;
		}
#endif
	}
	if (!r && (!room || !nic_fifo_room(&pl->mq->q, pl->ctl)))
		r = -ENOSPC;
	if (!r && commit_it)
		commit(p, pl->n);
	return r;
}

/* A target of this start, from its queue's base; a WAIT's covered count
 * moves with it, as commit_list's. */
static inline uint64_t target_of(const struct prep_target *g)
{
	uint64_t target = *g->base + g->off;

	if (g->cq && target > atomic_load_explicit(&g->cq->covered, memory_order_relaxed))
		atomic_store_explicit(&g->cq->covered, target, memory_order_release);
	return target;
}

/* A start by the precomputed rules (under the post lock): 0, posted; or
 * -EAGAIN, nothing changed, for any refusal (start_slow then finds which
 * task and why, or that room was freed since). */
static int start_fast(struct emunic_mq_prepared *pl, uint64_t wr_id_add, struct emunic_dev *d)
{
	struct emunic_ring *ring = &d->cmd;

	uint32_t deaths = atomic_load_explicit(&d->deaths, memory_order_acquire);

	if (!pl->fast || emunic_ring_space(ring) < pl->ncmd || !nic_fifo_room(&pl->mq->q, pl->ctl))
		return -EAGAIN;
	/* Alive, each object it names: looked at only when some object of
	 * the device died since they were last seen alive. */
	if (deaths != pl->deaths_seen) {
		if (atomic_load_explicit(&pl->mq->o.dead, memory_order_relaxed))
			return -EAGAIN;
		for (unsigned k = 0; k < pl->nobj; k++)
			if (atomic_load_explicit(&pl->obj[k]->dead, memory_order_relaxed))
				return -EAGAIN;
		pl->deaths_seen = deaths;
	}
	/* Every queue's bases, and whether its rules hold. */
	for (struct prep_q *q = pl->q, *end = pl->q + pl->nq; q < end; q++) {
		uint64_t *b = q->b;

		if (q->qp) {
			struct emunic_qp *qp = q->qp;

			b[B_POSTED] = qp->sq_posted; b[B_CLAIMED] = qp->sq_claimed;
			b[B_RQ_POSTED] = qp->rq_posted; b[B_RQ_CLAIMED] = qp->rq_claimed;
			if ((int64_t)(qp->sq_posted - qp->sq_claimed) < q->need[0] ||
			    (int64_t)(qp->rq_posted - qp->rq_claimed) < q->need[1] ||
			    (q->n[0] && !nic_fifo_room(&qp->sq, q->n[0])) || (q->n[1] && !nic_fifo_room(&qp->rq, q->n[1])))
				return -EAGAIN;
		} else {
			struct emunic_cq *cq = q->cq;

			b[B_CQ_INDEX] = cq->wait_index;
			b[B_CQ_AFTER] = cq->wait_index + (cq->wait_count > q->m1 ? cq->wait_count : q->m1);
		}
	}
#ifdef EMUNIC_CHECK_RULES
	/* The rules task by task, on shadows, from the same counters. */
	struct shadow sstack[POST_STACK + 1];
	struct emunic_mq_list l = { .mq = pl->mq, .tasks = pl->tasks, .n = pl->n };
	struct post p = { .d = d, .lists = &l, .nlists = 1, .wr_id_add = wr_id_add };

	if (!(p.sh = pl->n + 1 > POST_STACK + 1 ? malloc((pl->n + 1) * sizeof(*p.sh)) : sstack))
		return -EAGAIN;
	if (start_slow(pl, wr_id_add, &p, false))
		rules_differ("the precomputed rules take a start the rules refuse (%u tasks)", pl->n);
#endif
	/* The commands: one START naming the list, with this start's targets
	 * (the engine reads the rest from the list); or the list's commands,
	 * copied, each with its target.  Either way a WAIT's covered count
	 * moves now, as commit_list's. */
	{
		struct nic_cmd *slots = (struct nic_cmd *)(void *)ring->slots;
		uint32_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed), mask = ring->mask;

		if (pl->as_start) {
			struct nic_cmd *c = &slots[tail & mask];

			c->type = NIC_CMD_START;
			c->obj = pl->o.handle;
			c->start_n = pl->ntarget;
			c->start_add = wr_id_add;
			for (unsigned j = 0; j < pl->ntarget; j++)
				c->start_target[j] = target_of(&pl->target[j]);
			pl->started = true;
			pl->last_pos = tail + 1;
		} else {
			for (unsigned i = 0; i < pl->n; i++) {
				struct nic_cmd *c = &slots[(tail + i) & mask];

				*c = pl->cmd[i];
				c->wr_id += wr_id_add;
			}
			for (const struct prep_target *g = pl->target, *g_end = g + pl->ntarget; g < g_end; g++)
				slots[(tail + g->cmd) & mask].target = target_of(g);
		}
		if (__builtin_expect(emunic_tl_on, 0))
			for (unsigned i = 0; i < pl->n; i++)
				EMUNIC_TL(TL_TASK_POSTED, TL_TRACK_MQ, NIC_HANDLE_INDEX(pl->mq->o.handle), -1,
					  pl->cmd[i].wr_id + wr_id_add, pl->tasks[i].op, i);
	}
	/* The counters, as commit_list and commit_shadows leave them. */
	for (const struct prep_q *q = pl->q, *end = pl->q + pl->nq; q < end; q++) {
		const uint64_t *b = q->b;

		if (q->qp) {
			struct emunic_qp *qp = q->qp;

			qp->sq_claimed = (q->from_posted[0] ? b[B_POSTED] : b[B_CLAIMED]) + q->claim_end[0];
			qp->rq_claimed = (q->from_posted[1] ? b[B_RQ_POSTED] : b[B_RQ_CLAIMED]) + q->claim_end[1];
			qp->sq_posted += q->n[0];
			qp->rq_posted += q->n[1];
			qp->sq.posted += q->n[0];
			qp->rq.posted += q->n[1];
		} else {
			struct emunic_cq *cq = q->cq;

			if (q->enlast) {
				cq->wait_index = b[B_CQ_AFTER] + q->index_end;
				cq->wait_count = q->count_end;
			} else if (q->m1 > cq->wait_count) {
				cq->wait_count = q->m1;
			}
		}
	}
	pl->mq->q.posted += pl->ctl;
#ifdef EMUNIC_CHECK_RULES
	/* ... and the counters they leave. */
	for (unsigned k = 0; k < p.nsh; k++) {
		const struct shadow *sh = &p.sh[k];
		const struct obj *o = sh->obj;
		const struct emunic_qp *qp = sh->obj;
		const struct emunic_cq *cq = sh->obj;

		if (o->kind == OBJ_QP ? qp->sq_posted != sh->a || qp->sq_claimed != sh->b || qp->rq_posted != sh->a2 ||
					qp->rq_claimed != sh->b2
				      : o->kind == OBJ_CQ && (cq->wait_index != sh->a || cq->wait_count != sh->b))
			rules_differ("%s %p: the precomputed rules leave its counters other than the rules do",
				     o->kind == OBJ_QP ? "qp" : "cq", (void *)o);
	}
	if (p.sh != sstack)
		free(p.sh);
#endif
	emunic_ring_publish(ring, pl->ncmd);
	return 0;
}

/* A start the precomputed rules refused, run through the rules task by
 * task (under the post lock).  Out of line: its shadows' stack is no cost
 * of the start that passes. */
__attribute__((noinline))
static int start_refused(struct emunic_mq_prepared *pl, uint64_t wr_id_add, struct emunic_dev *d)
{
	struct shadow sstack[POST_STACK + 1];
	struct emunic_mq_list l = { .mq = pl->mq, .tasks = pl->tasks, .n = pl->n };
	struct post p = { .d = d, .lists = &l, .nlists = 1, .sh = sstack, .wr_id_add = wr_id_add };
	int r;

	if (pl->n + 1 > POST_STACK + 1 && !(p.sh = malloc((pl->n + 1) * sizeof(*p.sh))))
		return -ENOMEM;
	r = start_slow(pl, wr_id_add, &p, true);
	if (p.sh != sstack)
		free(p.sh);
	return r;
}

/* The hot path of a persistent collective. */
int emunic_mq_start(struct emunic_mq_prepared *pl, uint64_t wr_id_add, unsigned flags)
{
	struct emunic_dev *d;
	int r;

	if (!pl)
		return emunic_err(-EINVAL, "emunic_mq_start: no prepared list");
	if ((r = check_flags(pl->mq, flags)))
		return r;
	d = pl->mq->o.dev;
	emunic_lock(&d->post_lock);
	r = start_fast(pl, wr_id_add, d);
	if (r == -EAGAIN)
		r = start_refused(pl, wr_id_add, d);
	emunic_unlock(&d->post_lock);
	return posted(d, r, flags);
}
