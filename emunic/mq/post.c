/* SPDX-License-Identifier: MIT */
/*
 * The management-queue rules at post time (run-time rules: exec.c).  A list
 * is checked whole against copies of the counters it would change; only a
 * valid list changes them and is published to the progress core in one step,
 * under the post lock, so lists never interleave.
 */
#include "emunic/core/core.h"
#include "emunic/log.h"

#include <errno.h>
#include <stdlib.h>

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

static bool fifo_room(struct task_fifo *f, uint64_t more)
{
	return f->posted - atomic_load_explicit(&f->completed, memory_order_acquire) + more <= f->mask + 1;
}

static int check(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n, struct core_task *out,
		 struct shadow *sh, unsigned *nsh)
{
	struct emunic_dev *d = mq->o.dev;

	for (unsigned i = 0; i < n; i++) {
		const struct emunic_task *t = &tasks[i];
		struct shadow *s;
		bool fresh;

		out[i] = (struct core_task){ .t = *t, .mq = mq };
		if (t->qp && emunic_obj_alive(d, &t->qp->o, OBJ_QP) && (t->qp->attr.flags & EMUNIC_QP_TRIGGERED))
			return bad(mq, i, t, "its QP was created TRIGGERED (for triggered operations only)");
		switch (t->op) {
		case EMUNIC_TASK_SEND: case EMUNIC_TASK_WRITE: case EMUNIC_TASK_WRITE_IMM:
		case EMUNIC_TASK_READ: case EMUNIC_TASK_FETCH_ADD: case EMUNIC_TASK_RECV:
			if (!t->qp || !emunic_obj_alive(d, &t->qp->o, OBJ_QP))
				return bad(mq, i, t, "its QP is not a live QP of this device");
			if (t->len && (!t->mr || !emunic_obj_alive(d, &t->mr->o, OBJ_MR)))
				return bad(mq, i, t, "its buffer has no registered memory region");
			if (t->op == EMUNIC_TASK_FETCH_ADD && t->len != 8)
				return bad(mq, i, t, "fetch_add needs an 8-byte local buffer");
			out[i].lkey = t->len ? t->mr->mr->lkey : 0;
			s = shadow_of(sh, nsh, t->qp, &fresh);
			if (fresh) {
				s->a = t->qp->sq_posted; s->b = t->qp->sq_claimed;
				s->a2 = t->qp->rq_posted; s->b2 = t->qp->rq_claimed;
			}
			if (t->op == EMUNIC_TASK_RECV)
				s->a2++;
			else
				s->a++;
			if (!fifo_room(t->op == EMUNIC_TASK_RECV ? &t->qp->rq : &t->qp->sq,
				       t->op == EMUNIC_TASK_RECV ? s->a2 - t->qp->rq_posted : s->a - t->qp->sq_posted))
				return -ENOSPC;
			break;
		case EMUNIC_TASK_SEND_EN: case EMUNIC_TASK_RECV_EN: {
			bool snd = t->op == EMUNIC_TASK_SEND_EN;
			uint64_t *posted, *claimed;

			if (!t->qp || !emunic_obj_alive(d, &t->qp->o, OBJ_QP))
				return bad(mq, i, t, "its QP is not a live QP of this device");
			if (!(t->qp->attr.flags & (snd ? EMUNIC_QP_MANAGED_SEND : EMUNIC_QP_MANAGED_RECV)))
				return bad(mq, i, t, snd ? "the QP was not created MANAGED_SEND"
							 : "the QP was not created MANAGED_RECV");
			s = shadow_of(sh, nsh, t->qp, &fresh);
			if (fresh) {
				s->a = t->qp->sq_posted; s->b = t->qp->sq_claimed;
				s->a2 = t->qp->rq_posted; s->b2 = t->qp->rq_claimed;
			}
			posted = snd ? &s->a : &s->a2;
			claimed = snd ? &s->b : &s->b2;
			if (t->count == 0) {
				*claimed = *posted;	/* everything posted so far */
			} else if (*claimed + t->count > *posted) {
				emunic_err(-EINVAL, "peer %d: %s(%u) but only %llu posted and not yet enabled",
					   t->qp->peer, emunic_task_op_str(t->op), t->count,
					   (unsigned long long)(*posted - *claimed));
				return bad(mq, i, t, "enables more work requests than were posted");
			} else {
				*claimed += t->count;
			}
			out[i].target = *claimed;
			goto mq_slot;
		}
		case EMUNIC_TASK_WAIT:
			if (!t->cq || !emunic_obj_alive(d, &t->cq->o, OBJ_CQ))
				return bad(mq, i, t, "its CQ is not a live CQ of this device");
			s = shadow_of(sh, nsh, t->cq, &fresh);
			if (fresh) {
				s->a = t->cq->wait_index;
				s->b = t->cq->wait_count;
			}
			/* As libmlx5 did: target = base + n; the base moves by the
			 * largest count of the group on WAIT_EN_LAST. */
			out[i].target = s->a + t->count;
			if (t->count > s->b)
				s->b = t->count;
			if (t->flags & EMUNIC_TASK_WAIT_EN_LAST) {
				s->a += s->b;
				s->b = 0;
			}
mq_slot:
			s = shadow_of(sh, nsh, mq, &fresh);
			s->fifo++;
			if (!fifo_room(&mq->q, s->fifo))
				return -ENOSPC;
			break;
		default:
			return bad(mq, i, t, "unknown opcode");
		}
	}
	return 0;
}

static void commit(struct shadow *sh, unsigned nsh, const struct core_task *ct, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const struct emunic_task *t = &ct[i].t;

		if (t->op == EMUNIC_TASK_WAIT) {
			/* From now on completions it counts are the WAIT's, not
			 * the app's: set before the core can see them. */
			if (ct[i].target > atomic_load(&t->cq->covered))
				atomic_store_explicit(&t->cq->covered, ct[i].target, memory_order_release);
			ct[i].mq->q.posted++;
		}
		else if (t->op == EMUNIC_TASK_SEND_EN || t->op == EMUNIC_TASK_RECV_EN)
			ct[i].mq->q.posted++;
		else if (t->op == EMUNIC_TASK_RECV)
			t->qp->rq.posted++;
		else
			t->qp->sq.posted++;
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

int emunic_mq_post(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n)
{
	struct emunic_dev *d;
	struct core_task *ct;
	struct shadow *sh;
	unsigned nsh = 0;
	int r;

	if (!mq || atomic_load(&mq->o.dead))
		return emunic_err(-EINVAL, "emunic_mq_post: not a live MQ");
	if (!tasks || n == 0)
		return emunic_err(-EINVAL, "mq %p: empty task list; nothing was posted", (void *)mq);
	d = mq->o.dev;
	ct = calloc(n, sizeof(*ct));
	sh = calloc(n + 1, sizeof(*sh));
	if (!ct || !sh) {
		free(ct);
		free(sh);
		return -ENOMEM;
	}
	pthread_mutex_lock(&d->post_lock);
	r = check(mq, tasks, n, ct, sh, &nsh);
	if (!r && emunic_ring_space(&d->cmd) < n)
		r = -ENOSPC;
	if (!r) {
		for (unsigned i = n; i-- > 0;)
			if (ct[i].t.op == EMUNIC_TASK_WAIT || ct[i].t.op == EMUNIC_TASK_SEND_EN ||
			    ct[i].t.op == EMUNIC_TASK_RECV_EN) {
				ct[i].list_end = true;
				break;
			}
		for (unsigned i = 0; i < n; i++) {
			struct cmd *c = emunic_ring_slot(&d->cmd, i);

			c->type = CMD_TASK;
			c->obj = NULL;
			c->task = ct[i];
		}
		commit(sh, nsh, ct, n);
		emunic_ring_publish(&d->cmd, n);	/* the whole list at once */
	}
	pthread_mutex_unlock(&d->post_lock);
	if (!r)
		emunic_core_doorbell(d);
	free(ct);
	free(sh);
	return r;
}
