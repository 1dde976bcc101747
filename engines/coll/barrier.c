/* SPDX-License-Identifier: MIT */
/*
 * The offloaded recursive-doubling barrier (seed 003, tables I-IV), for any
 * number of ranks M: schedule.c's steps, each rank's barrier one task list
 * on its management queue.  N is the largest power of two <= M; rank r >= N
 * (an "extra" rank) is paired with r - N:
 *
 *   extra rank r:        SEND(r-N) SEND_EN(r-N) WAIT(r-N)*
 *   rank r < N:          [WAIT(r+N)]  then for d = 1, 2, .. N/2:
 *                        SEND(r^d) SEND_EN(r^d) WAIT(r^d)
 *                        [SEND(r+N) SEND_EN(r+N)]*
 *   (* = SIGNAL: its MQ completion is the barrier's completion)
 *
 * preceded by one RECV per partner to keep the receive window full.  SENDs go
 * to MANAGED_SEND QPs, so they are held until their SEND_EN runs on the MQ,
 * i.e. until every earlier WAIT there is satisfied; each WAIT counts one
 * arrival on that peer's own receive CQ and advances its base (WAIT_EN_LAST),
 * so an early signal for a later barrier is simply counted ahead.
 *
 * coll.c runs it through coll_barrier_alg, the table at the end.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Tasks in one barrier's list: a RECV and a WAIT per wait step, a data task
 * and a SEND_EN per send step. */
static unsigned list_len(const struct emunic_coll *c)
{
	unsigned n = 0;

	for (int i = 0; i < c->nstep; i++)
		n += (c->step[i].wait ? 2u : 0u) + (c->step[i].send ? 2u : 0u);
	return n;
}

#define PREPARED_ENV "EMUNIC_COLL_PREPARED"

static int barrier_setup(struct emunic_coll *c)
{
	const char *e = getenv(PREPARED_ENV);
	int r = coll_rd_setup(c);

	if (r)
		return r;
	/* 0: each barrier posts its list whole, every check each time (to
	 * measure what preparing saves: emunic-bench instr). */
	if (e && strcmp(e, "0") && strcmp(e, "1"))
		return coll_err(c, -EINVAL, "barrier: %s='%s' is not 0 or 1", PREPARED_ENV, e);
	c->post_whole = e && !strcmp(e, "0");
	c->ntask = list_len(c);
	c->task = calloc(c->ntask ? c->ntask : 1, sizeof(*c->task));
	return c->task ? 0 : -ENOMEM;
}

/* The signal itself: a 0-byte SEND or WRITE_IMM, held until SEND_EN. */
static void add_signal(struct emunic_coll *c, unsigned *n, int peer, uint64_t seq)
{
	struct emunic_task *t;

	if (c->attr.signal == EMUNIC_COLL_WRITE_IMM) {
		/* 0 bytes need no target address or rkey (IBA C9-88).  The
		 * immediate is 0: the list is prepared once for every barrier
		 * (the barrier's number is in the wr_id). */
		coll_task_add(c, n, EMUNIC_TASK_WRITE_IMM, peer, seq, NULL);
	} else {
		coll_task_add(c, n, EMUNIC_TASK_SEND, peer, seq, NULL);
	}
	t = coll_task_add(c, n, EMUNIC_TASK_SEND_EN, peer, seq, NULL);
	t->count = 1;
}

/* Barrier seq's list (prepared with seq 0: coll_mq_start adds each one's). */
static unsigned build_list(struct emunic_coll *c, uint64_t seq)
{
	unsigned n = 0;

	/* Replenish first: this barrier consumes one receive per partner. */
	for (int i = 0; i < c->nstep; i++)
		if (c->step[i].wait)
			coll_task_add(c, &n, EMUNIC_TASK_RECV, c->step[i].peer, seq, NULL);
	for (int i = 0; i < c->nstep; i++) {
		if (c->step[i].send)
			add_signal(c, &n, c->step[i].peer, seq);
		if (c->step[i].wait)
			coll_task_wait(c, &n, c->step[i].peer, seq, 1);
	}
	c->task[n - 1].flags |= EMUNIC_TASK_SIGNAL;
	return n;
}

static int count_sends(const struct emunic_coll *c)
{
	int n = 0;

	for (int i = 0; i < c->nstep; i++)
		n += c->step[i].send;
	return n;
}

/* Posts the next barrier; *seq is its number. */
static int barrier_post(struct emunic_coll *c, const struct coll_args *a, uint64_t *seq)
{
	(void)a;
	uint64_t s = c->posted + 1;
	unsigned n;
	int r;

	if (c->size == 1) {
		c->posted = c->done = s;
		*seq = s;
		return 0;
	}
	/* Bounds every queue: see COLL_MAX_INFLIGHT. */
	if (c->posted - c->done >= COLL_MAX_INFLIGHT)
		return coll_no_room(c, COLL_FULL_INFLIGHT);
	/* Every barrier's list is the same but for its wr_ids: checked and
	 * built once (emunic_mq_prepare), then started (seed 003's lists were
	 * posted anew each time; a persistent barrier, as MPI-4's
	 * MPI_Barrier_init, need not). */
	n = c->ntask;
	if (c->post_whole) {
		n = build_list(c, s);
		r = coll_mq_post(c, c->task, n);
	} else if (!c->prep && (r = emunic_mq_prepare(c->mq, c->task, build_list(c, 0), &c->prep))) {
		return coll_err(c, r, "barrier %llu: preparing its %u-task list failed (%d)", (unsigned long long)s,
				n, r);
	} else {
		r = coll_mq_start(c, c->prep, s);
	}
	if (r == -ENOSPC)
		return r;
	if (r)
		return coll_err(c, r, "barrier %llu: posting its %u-task list failed (%d)",
				(unsigned long long)s, n, r);
	c->posted = s;
	coll_sends_add(c, s, count_sends(c));
	*seq = s;
	return 0;
}

/* The receive window, posted once before the first barrier (as sequence 0). */
static int barrier_prepost(struct emunic_coll *c)
{
	struct emunic_task *t;
	unsigned n = 0;
	int r;

	if (c->size == 1)
		return 0;
	for (int w = 0; w < COLL_RECV_WINDOW; w++)
		for (int i = 0; i < c->nstep; i++)
			if (c->step[i].wait)
				n++;
	t = calloc(n, sizeof(*t));
	if (!t)
		return -ENOMEM;
	n = 0;
	for (int w = 0; w < COLL_RECV_WINDOW; w++)
		for (int i = 0; i < c->nstep; i++) {
			int p = c->step[i].peer;

			if (c->step[i].wait)
				t[n++] = (struct emunic_task){ .op = EMUNIC_TASK_RECV, .wr_id = coll_wr_id(0, p),
							       .qp = c->peer[p].qp };
		}
	r = coll_mq_post(c, t, n);
	free(t);
	if (r)
		return coll_err(c, r, "posting the %u initial receives failed (%d)", n, r);
	return 0;
}

const struct coll_alg coll_barrier_alg = {
	.name = "barrier",
	.setup = barrier_setup,
	.prepost = barrier_prepost,
	.post = barrier_post,
	.fence = coll_send_fence,
};
