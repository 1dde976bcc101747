/* SPDX-License-Identifier: MIT */
/*
 * The management-queue rules at post time (run-time rules: exec.c).  A list
 * is checked whole against copies of the counters it would change; only a
 * valid list changes them and is published to the engine in one step, under
 * the post lock, so lists never interleave.  Then, if the engine is free,
 * the posting thread runs it at once (no hand-off to another thread).
 */
#include "emunic/mq/mq.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define POST_STACK 16		/* lists this short need no allocation */

/* The counters a list changes, per object it names (lists are short). */
struct shadow {
	void *obj;
	uint64_t a, b;		/* qp: posted, claimed; cq: wait_index, wait_count */
	uint64_t a2, b2;	/* qp: rq posted, rq claimed */
	uint64_t fifo;		/* tasks this list adds to the object's queue(s) */
};

static struct shadow *shadow_of(struct shadow *s, unsigned *ns, void *obj, bool *fresh)
{
	for (unsigned i = 0; i < *ns; i++)
		if (s[i].obj == obj) {
			*fresh = false;
			return &s[i];
		}
	*fresh = true;
	s[*ns] = (struct shadow){ .obj = obj };
	return &s[(*ns)++];
}

static int bad(struct emunic_mq *mq, unsigned i, const struct emunic_task *t, const char *why)
{
	return emunic_err(-EINVAL, "mq %p: task %u of the list (%s, wr_id %llu): %s; nothing was posted",
			  (void *)mq, i, emunic_task_op_str(t->op), (unsigned long long)t->wr_id, why);
}

static struct shadow *qp_shadow(struct shadow *sh, unsigned *nsh, struct emunic_qp *qp)
{
	bool fresh;
	struct shadow *s = shadow_of(sh, nsh, qp, &fresh);

	if (fresh) {
		s->a = qp->sq_posted; s->b = qp->sq_claimed;
		s->a2 = qp->rq_posted; s->b2 = qp->rq_claimed;
	}
	return s;
}

static int check_data(struct emunic_dev *d, struct emunic_mq *mq, unsigned i, const struct emunic_task *t,
		      bool qp_live, struct nic_cmd *c, struct shadow *sh, unsigned *nsh)
{
	bool recv = t->op == EMUNIC_TASK_RECV;
	struct shadow *s;

	if (!qp_live)
		return bad(mq, i, t, "its QP is not a live QP of this device");
	if (t->len && (!t->mr || !nic_obj_alive(d, &t->mr->o, OBJ_MR)))
		return bad(mq, i, t, "its buffer has no registered memory region");
	if (t->op == EMUNIC_TASK_FETCH_ADD && t->len != 8)
		return bad(mq, i, t, "fetch_add needs an 8-byte local buffer");
	if (t->op == EMUNIC_TASK_FETCH_ADD || t->op == EMUNIC_TASK_WRITE_IMM) {
		/* What the device cannot carry: -EOPNOTSUPP, not a QP broken later. */
		const char *why = emunic_vdev_lacks(d->v, t->op == EMUNIC_TASK_FETCH_ADD ? EMUNIC_LACKS_ATOMIC
											   : EMUNIC_LACKS_IMM);
		if (why)
			return emunic_err(-EOPNOTSUPP, "mq %p: task %u of the list (%s, wr_id %llu): device %s: %s; "
					  "nothing was posted", (void *)mq, i, emunic_task_op_str(t->op),
					  (unsigned long long)t->wr_id, d->v->name, why);
	}
	c->obj = t->qp->o.handle;
	c->lkey = t->len ? t->mr->mr->lkey : 0;
	s = qp_shadow(sh, nsh, t->qp);
	if (recv ? !nic_fifo_room(&t->qp->rq, ++s->a2 - t->qp->rq_posted)
		 : !nic_fifo_room(&t->qp->sq, ++s->a - t->qp->sq_posted))
		return -ENOSPC;
	return 0;
}

/* CALC: a defined op x type pair over whole elements; with a QP it is a
 * data task (a SEND of the result), without one it runs on the MQ. */
static int check_calc(struct emunic_dev *d, struct emunic_mq *mq, unsigned i, const struct emunic_task *t,
		      bool qp_live, struct nic_cmd *c, struct shadow *sh, unsigned *nsh)
{
	size_t size = emunic_calc_size(t->calc_type);
	char why[128];

	if (emunic_calc_check(t->calc_op, t->calc_type)) {
		snprintf(why, sizeof(why), "calc %s is not defined on %s (op %d, type %d)",
			 emunic_calc_op_str(t->calc_op), emunic_calc_type_str(t->calc_type), t->calc_op,
			 t->calc_type);
		return bad(mq, i, t, why);
	}
	if (t->len % size) {
		snprintf(why, sizeof(why), "its length, %u bytes, is not a whole number of %s elements (%zu bytes)",
			 t->len, emunic_calc_type_str(t->calc_type), size);
		return bad(mq, i, t, why);
	}
	if (t->len && (!t->addr || !t->calc_a || !t->calc_b))
		return bad(mq, i, t, "calc needs a result buffer (addr) and both operands (calc_a, calc_b)");
	c->calc_a = (uintptr_t)t->calc_a;
	c->calc_b = (uintptr_t)t->calc_b;
	c->calc = (uint32_t)t->calc_op << 8 | (uint32_t)t->calc_type;
	return t->qp ? check_data(d, mq, i, t, qp_live, c, sh, nsh) : 0;
}

static int check_enable(struct emunic_mq *mq, unsigned i, const struct emunic_task *t, bool qp_live,
			struct nic_cmd *c, struct shadow *sh, unsigned *nsh)
{
	bool snd = t->op == EMUNIC_TASK_SEND_EN;
	uint64_t *posted, *claimed;
	struct shadow *s;

	if (!qp_live)
		return bad(mq, i, t, "its QP is not a live QP of this device");
	if (!(t->qp->attr.flags & (snd ? EMUNIC_QP_MANAGED_SEND : EMUNIC_QP_MANAGED_RECV)))
		return bad(mq, i, t, snd ? "the QP was not created MANAGED_SEND" : "the QP was not created MANAGED_RECV");
	s = qp_shadow(sh, nsh, t->qp);
	posted = snd ? &s->a : &s->a2;
	claimed = snd ? &s->b : &s->b2;
	if (t->count == 0) {
		*claimed = *posted;	/* everything posted so far */
	} else if (*claimed + t->count > *posted) {
		emunic_err(-EINVAL, "peer %d: %s(%u) but only %llu posted and not yet enabled", t->qp->peer,
			   emunic_task_op_str(t->op), t->count, (unsigned long long)(*posted - *claimed));
		return bad(mq, i, t, "enables more work requests than were posted");
	} else {
		*claimed += t->count;
	}
	c->obj = t->qp->o.handle;
	c->target = *claimed;
	return 0;
}

static int check_wait(struct emunic_dev *d, struct emunic_mq *mq, unsigned i, const struct emunic_task *t,
		      struct nic_cmd *c, struct shadow *sh, unsigned *nsh)
{
	struct shadow *s;
	bool fresh;

	if (!t->cq || !nic_obj_alive(d, &t->cq->o, OBJ_CQ))
		return bad(mq, i, t, "its CQ is not a live CQ of this device");
	s = shadow_of(sh, nsh, t->cq, &fresh);
	if (fresh) {
		s->a = t->cq->wait_index;
		s->b = t->cq->wait_count;
	}
	/* As libmlx5 did: target = base + n; the base moves by the largest
	 * count of the group on WAIT_EN_LAST. */
	c->obj = t->cq->o.handle;
	c->target = s->a + t->count;
	if (t->count > s->b)
		s->b = t->count;
	if (t->flags & EMUNIC_TASK_WAIT_EN_LAST) {
		s->a += s->b;
		s->b = 0;
	}
	return 0;
}

/* Where command i of the list is built: in `buf`, or, with none, straight
 * in the ring's free slots, which are the post lock holder's alone until
 * it publishes them (so a list that fails its checks leaves nothing). */
static struct nic_cmd *cmd_at(struct emunic_dev *d, struct nic_cmd *buf, unsigned i)
{
	return buf ? &buf[i] : emunic_ring_slot(&d->cmd, i);
}

static int check(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n, struct nic_cmd *buf,
		 struct shadow *sh, unsigned *nsh)
{
	struct emunic_dev *d = mq->o.dev;
	unsigned ctl = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct emunic_task *t = &tasks[i];
		struct nic_cmd *c = cmd_at(d, buf, i);
		bool qp_live = t->qp && nic_obj_alive(d, &t->qp->o, OBJ_QP);
		int r;

		*c = (struct nic_cmd){
			.type = NIC_CMD_TASK, .op = (uint8_t)t->op, .mq = mq->o.handle, .wr_id = t->wr_id,
			.flags = (t->flags & EMUNIC_TASK_SIGNAL) ? NIC_TASK_SIGNAL : 0,
			.addr = (uintptr_t)t->addr, .len = t->len, .remote_addr = t->remote_addr, .rkey = t->rkey,
			.imm = t->imm, .add = t->add,
		};
		if (qp_live && (t->qp->attr.flags & EMUNIC_QP_TRIGGERED))
			return bad(mq, i, t, "its QP was created TRIGGERED (for triggered operations only)");
		switch (t->op) {
		case EMUNIC_TASK_SEND: case EMUNIC_TASK_WRITE: case EMUNIC_TASK_WRITE_IMM:
		case EMUNIC_TASK_READ: case EMUNIC_TASK_FETCH_ADD: case EMUNIC_TASK_RECV:
			r = check_data(d, mq, i, t, qp_live, c, sh, nsh);
			break;
		case EMUNIC_TASK_SEND_EN: case EMUNIC_TASK_RECV_EN:
			r = check_enable(mq, i, t, qp_live, c, sh, nsh);
			ctl++;
			break;
		case EMUNIC_TASK_WAIT:
			r = check_wait(d, mq, i, t, c, sh, nsh);
			ctl++;
			break;
		case EMUNIC_TASK_CALC:
			r = check_calc(d, mq, i, t, qp_live, c, sh, nsh);
			ctl += !t->qp;
			break;
		default:
			return bad(mq, i, t, "unknown opcode");
		}
		if (r)
			return r;
	}
	return nic_fifo_room(&mq->q, ctl) ? 0 : -ENOSPC;
}

/* Runs on the MQ's own queue (WAIT, the enables, a CALC without a QP). */
static bool on_mq(const struct emunic_task *t)
{
	return t->op == EMUNIC_TASK_WAIT || t->op == EMUNIC_TASK_SEND_EN || t->op == EMUNIC_TASK_RECV_EN ||
	       (t->op == EMUNIC_TASK_CALC && !t->qp);
}

static void commit(struct emunic_mq *mq, struct shadow *sh, unsigned nsh, const struct emunic_task *tasks,
		   unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const struct emunic_task *t = &tasks[i];

		EMUNIC_TL(TL_TASK_POSTED, TL_TRACK_MQ, NIC_HANDLE_INDEX(mq->o.handle), -1, t->wr_id, t->op, i);
		if (t->op == EMUNIC_TASK_WAIT) {
			uint64_t target = cmd_at(mq->o.dev, NULL, i)->target;

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
	for (unsigned i = 0; i < nsh; i++) {
		struct obj *o = sh[i].obj;

		if (o->kind == OBJ_QP) {
			struct emunic_qp *qp = sh[i].obj;

			qp->sq_posted = sh[i].a; qp->sq_claimed = sh[i].b;
			qp->rq_posted = sh[i].a2; qp->rq_claimed = sh[i].b2;
		} else if (o->kind == OBJ_CQ) {
			struct emunic_cq *cq = sh[i].obj;

			cq->wait_index = sh[i].a;
			cq->wait_count = sh[i].b;
		}
	}
}

int emunic_mq_post_flags(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n, unsigned flags)
{
	struct shadow sstack[POST_STACK + 1], *sh = sstack;
	struct emunic_dev *d;
	unsigned nsh = 0;
	int r;

	if (!mq || atomic_load(&mq->o.dead))
		return emunic_err(-EINVAL, "emunic_mq_post: not a live MQ");
	if (!tasks || n == 0)
		return emunic_err(-EINVAL, "mq %p: empty task list; nothing was posted", (void *)mq);
	if (flags & ~EMUNIC_POST_WAIT_NEXT)
		return emunic_err(-EINVAL, "mq %p: unknown post flags 0x%x; nothing was posted", (void *)mq,
				  flags & ~EMUNIC_POST_WAIT_NEXT);
	d = mq->o.dev;
	if (n > d->attr.list_tasks)
		return emunic_err(-E2BIG, "mq %p: a task list of %u tasks is longer than the device's limit of %u "
				  "(attr.list_tasks, EMUNIC_LIST_TASKS); nothing was posted", (void *)mq, n,
				  d->attr.list_tasks);
	if (n > POST_STACK && !(sh = malloc((n + 1) * sizeof(*sh))))
		return -ENOMEM;
	pthread_mutex_lock(&d->post_lock);
	if (emunic_ring_space(&d->cmd) >= n) {
		r = check(mq, tasks, n, NULL, sh, &nsh);	/* built in the ring */
	} else {
		/* No room: the list still gets its checks (an invalid list is
		 * -EINVAL whatever the ring holds), built aside. */
		struct nic_cmd *c = malloc(n * sizeof(*c));

		r = c ? check(mq, tasks, n, c, sh, &nsh) : -ENOMEM;
		free(c);
		r = r ? r : -ENOSPC;
	}
	if (!r) {
		for (unsigned i = n; i-- > 0;)
			if (on_mq(&tasks[i])) {
				cmd_at(d, NULL, i)->flags |= NIC_TASK_LIST_END;
				break;
			}
		commit(mq, sh, nsh, tasks, n);
		emunic_ring_publish(&d->cmd, n);	/* the whole list at once */
	}
	pthread_mutex_unlock(&d->post_lock);
	if (sh != sstack)
		free(sh);
	if (!r)
		nic_submitted(d, flags & EMUNIC_POST_WAIT_NEXT);
	return r;
}

int emunic_mq_post(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n)
{
	return emunic_mq_post_flags(mq, tasks, n, 0);
}
