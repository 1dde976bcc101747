/* SPDX-License-Identifier: MIT */
/* CQs and MQs as the application sees them: create, destroy, poll, wait. */
#include "emunic/mq/mq.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- CQs ------------------------------------------------------------------------ */

int emunic_cq_create(struct emunic_dev *d, unsigned depth, unsigned flags, struct emunic_cq **out)
{
	struct emunic_cq *cq;

	if (!d || !out || (flags & ~EMUNIC_CQ_COUNT_ONLY))
		return -EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	nic_obj_init(&cq->o, d, OBJ_CQ);
	cq->flags = flags;
	if (emunic_ring_init(&cq->wc, depth ? depth : 1024, sizeof(struct cq_entry))) {
		free(cq);
		return -ENOMEM;
	}
	if (nic_obj_create(&cq->o)) {
		emunic_ring_fini(&cq->wc);
		free(cq);
		return -EIO;
	}
	*out = cq;
	return 0;
}

int emunic_cq_destroy(struct emunic_cq *cq)
{
	return nic_obj_destroy(cq ? &cq->o : NULL, "cq");
}

static int cq_take(struct emunic_cq *cq, struct emunic_wc *wc, int n)
{
	int got = 0;
	struct cq_entry *e;

	while (got < n && (e = emunic_ring_peek(&cq->wc))) {
		/* A WAIT posted after this completion was queued counts it:
		 * it is the WAIT's, whichever came first. */
		if (e->n > atomic_load_explicit(&cq->covered, memory_order_acquire))
			wc[got++] = e->wc;
		emunic_ring_pop(&cq->wc);
	}
	return got;
}

int emunic_cq_poll(struct emunic_cq *cq, struct emunic_wc *wc, int n)
{
	int got;

	if (!cq || !wc || n < 0 || atomic_load(&cq->o.dead))
		return -EINVAL;
	got = cq_take(cq, wc, n);
	/* Nothing yet: the poller runs the engine once if it is free, so a
	 * polling app sees its completions as a waiting one does. */
	if (!got && n && nic_poll_assist(cq->o.dev))
		got = cq_take(cq, wc, n);
	return got;
}

uint64_t emunic_cq_count(const struct emunic_cq *cq)
{
	return atomic_load_explicit(&((struct emunic_cq *)cq)->count, memory_order_acquire);
}

/* ---- MQs ------------------------------------------------------------------------ */

int emunic_mq_create(struct emunic_dev *d, unsigned depth, struct emunic_mq **out)
{
	struct emunic_mq *mq;

	if (!d || !out)
		return -EINVAL;
	mq = calloc(1, sizeof(*mq));
	if (!mq)
		return -ENOMEM;
	nic_obj_init(&mq->o, d, OBJ_MQ);
	if (!depth)
		depth = 4096;
	if (nic_fifo_init(&mq->q, depth, false) || emunic_ring_init(&mq->wc, depth, sizeof(struct emunic_wc))) {
		nic_fifo_fini(&mq->q);
		free(mq);
		return -ENOMEM;
	}
	if (nic_obj_create(&mq->o)) {
		nic_fifo_fini(&mq->q);
		emunic_ring_fini(&mq->wc);
		free(mq);
		return -EIO;
	}
	*out = mq;
	return 0;
}

int emunic_mq_destroy(struct emunic_mq *mq)
{
	return nic_obj_destroy(mq ? &mq->o : NULL, "mq");
}

static int mq_take(struct emunic_mq *mq, struct emunic_wc *wc, int n)
{
	int got = 0;
	void *e;

	while (got < n && (e = emunic_ring_peek(&mq->wc))) {
		memcpy(&wc[got++], e, sizeof(*wc));
		emunic_ring_pop(&mq->wc);
	}
	return got;
}

int emunic_mq_poll(struct emunic_mq *mq, struct emunic_wc *wc, int n)
{
	int got;

	if (!mq || !wc || n < 0 || atomic_load(&mq->o.dead))
		return -EINVAL;
	got = mq_take(mq, wc, n);
	if (!got && n && nic_poll_assist(mq->o.dev))	/* as emunic_cq_poll */
		got = mq_take(mq, wc, n);
	return got;
}

int emunic_mq_pending(const struct emunic_mq *mq)
{
	return mq && !emunic_ring_empty(&mq->wc);
}

static bool mq_has(void *arg)
{
	struct emunic_mq *mq = arg;

	return !emunic_ring_empty(&mq->wc) || atomic_load(&mq->o.dead);
}

int emunic_mq_wait(struct emunic_mq *mq, struct emunic_wc *wc, int timeout_ms)
{
	struct emunic_word *w;
	int r;

	if (!mq || atomic_load(&mq->o.dead))
		return -EINVAL;
	w = &mq->word;
	for (;;) {
		if (mq_take(mq, wc, 1))		/* no poll's pass: the wait runs them */
			return 0;
		r = nic_wait(mq->o.dev, &w, 1, mq_has, mq, timeout_ms);
		if (r)
			return r;
	}
}
