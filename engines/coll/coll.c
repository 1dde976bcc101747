/* SPDX-License-Identifier: MIT */
/*
 * The collective object's life: create (the send CQ, the management queue,
 * a QP and receive CQ per peer it talks to, connected, and the algorithm's
 * setup and prepost, through its table c->alg), destroy (the algorithm's
 * fence, then every object in the order the progress core lets go of them),
 * and its attributes and names.  Completions are complete.c's, the
 * application's calls request.c's.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
#include <string.h>
#include <stdlib.h>

#define COLL_QP_DEPTH 128	/* >= COLL_MAX_INFLIGHT + COLL_RECV_WINDOW */

void emunic_coll_attr_init(struct emunic_coll_attr *a)
{
	*a = (struct emunic_coll_attr){ .signal = EMUNIC_COLL_SEND, .conn = EMUNIC_COLL_DENSE, .timeout_ms = 0 };
}

const char *emunic_coll_signal_str(enum emunic_coll_signal s)
{
	return s == EMUNIC_COLL_SEND ? "send" : s == EMUNIC_COLL_WRITE_IMM ? "write_imm" : "?";
}

int emunic_coll_signal_parse(const char *s)
{
	for (int v = EMUNIC_COLL_SEND; v <= EMUNIC_COLL_WRITE_IMM; v++)
		if (s && !strcmp(s, emunic_coll_signal_str((enum emunic_coll_signal)v)))
			return v;
	return -EINVAL;
}

int emunic_coll_conn_parse(const char *s)
{
	for (int v = EMUNIC_COLL_DENSE; v <= EMUNIC_COLL_SPARSE; v++)
		if (s && !strcmp(s, emunic_coll_conn_str((enum emunic_coll_conn)v)))
			return v;
	return -EINVAL;
}

const char *emunic_coll_conn_str(enum emunic_coll_conn c)
{
	return c == EMUNIC_COLL_DENSE ? "dense" : c == EMUNIC_COLL_SPARSE ? "sparse" : "?";
}

int emunic_coll_qp_count(const struct emunic_coll *c)
{
	return c ? c->nqp : -EINVAL;
}

/* ---- create / destroy ---------------------------------------------------- */

/* What each kind runs: one table each (struct coll_alg). */
static const struct coll_alg *const algs[] = {
	[EMUNIC_COLL_BARRIER] = &coll_barrier_alg,
	[EMUNIC_COLL_ALLREDUCE] = &coll_allreduce_alg,
	[EMUNIC_COLL_BCAST] = &coll_bcast_alg,
	[EMUNIC_COLL_ALLTOALL] = &coll_alltoall_alg,
	[EMUNIC_COLL_ALLGATHER] = &coll_allgather_alg,
	[EMUNIC_COLL_GATHER] = &coll_gather_alg,
};

static int create_peer(struct emunic_coll *c, int p)
{
	struct coll_peer *cp = &c->peer[p];
	struct emunic_qp_attr qa;
	int r;

	r = emunic_cq_create(c->dev, COLL_QP_DEPTH, EMUNIC_CQ_COUNT_ONLY, &cp->rcq);
	if (r)
		return coll_err(c, r, "peer %d: creating its receive CQ failed (%d)", p, r);
	emunic_qp_attr_init(&qa);
	qa.flags = EMUNIC_QP_MANAGED_SEND;
	qa.send_cq = c->scq;
	qa.recv_cq = cp->rcq;
	qa.depth = COLL_QP_DEPTH;
	r = emunic_qp_create(c->dev, p, &qa, &cp->qp);
	if (r)
		return coll_err(c, r, "peer %d: creating its QP failed (%d)", p, r);
	c->nqp++;
	return 0;
}

/* Every rank makes its QPs in rank order, so the k-th QP a makes to b meets
 * the k-th b makes to a (emunic_qp_create). */
static int create_qps(struct emunic_coll *c)
{
	for (int p = 0; p < c->size; p++) {
		int r;

		if (p == c->rank || (c->attr.conn == EMUNIC_COLL_SPARSE && !c->peer[p].partner))
			continue;
		r = create_peer(c, p);
		if (r)
			return r;
	}
	return 0;
}

static int connect_qps(struct emunic_coll *c)
{
	int t = coll_timeout(c);
	long long deadline = coll_now_ms() + t;

	for (int p = 0; p < c->size; p++) {
		long long left = t < 0 ? -1 : deadline - coll_now_ms();
		int r;

		if (!c->peer[p].qp)
			continue;
		r = emunic_qp_wait_connected(c->peer[p].qp, (int)(t < 0 ? -1 : left > 0 ? left : 0));
		if (r)
			return coll_err(c, r, "no connection to peer %d after %d ms (%d)", p, t, r);
	}
	return 0;
}

/* The core must stop using a QP or CQ before it goes: MQ first, CQs last. */
static void coll_free(struct emunic_coll *c)
{
	if (c->mq)
		emunic_mq_destroy(c->mq);
	for (int p = 0; c->peer && p < c->size; p++)
		if (c->peer[p].qp)
			emunic_qp_destroy(c->peer[p].qp);
	for (int p = 0; c->peer && p < c->size; p++)
		if (c->peer[p].rcq)
			emunic_cq_destroy(c->peer[p].rcq);
	if (c->scq)
		emunic_cq_destroy(c->scq);
	if (c->alg && c->alg->fini)
		c->alg->fini(c);
	emunic_mq_prepared_free(c->prep);
	while (c->spare) {
		struct emunic_coll_req *req = c->spare;

		c->spare = req->next;
		free(req);
	}
	free(c->peer);
	free(c->step);
	free(c->task);
	free(c);
}

static int check_attr(const struct emunic_coll_attr *a)
{
	if (a->signal != EMUNIC_COLL_SEND && a->signal != EMUNIC_COLL_WRITE_IMM)
		return -EINVAL;
	if (a->conn != EMUNIC_COLL_DENSE && a->conn != EMUNIC_COLL_SPARSE)
		return -EINVAL;
	if ((unsigned)a->kind >= sizeof(algs) / sizeof(algs[0]))
		return -EINVAL;
	if (a->max_bytes > COLL_MAX_BYTES || a->segment > COLL_MAX_BYTES)	/* a receive's length is 32-bit */
		return -EINVAL;
	return 0;
}

static int setup_queues(struct emunic_coll *c)
{
	unsigned nsend = c->nsend, inflight = c->inflight ? c->inflight : COLL_MAX_INFLIGHT, depth;
	int r;

	for (int i = 0; !c->nsend && i < c->nstep; i++)
		nsend += c->step[i].send;
	/* Unpolled send completions: every list in flight, plus one more
	 * round of them finished between two drains. */
	r = emunic_cq_create(c->dev, (inflight + 1) * nsend + 16, 0, &c->scq);
	if (r)
		return coll_err(c, r, "creating the send CQ failed (%d)", r);
	depth = (inflight + 1) * c->ntask + COLL_RECV_WINDOW * (unsigned)c->nstep + 16;
	r = emunic_mq_create(c->dev, depth, &c->mq);
	if (r)
		return coll_err(c, r, "creating the management queue (depth %u) failed (%d)", depth, r);
	r = create_qps(c);
	r = r ? r : connect_qps(c);
	return r ? r : c->alg->prepost(c);
}

int emunic_coll_create(struct emunic_dev *dev, const struct emunic_coll_attr *a, struct emunic_coll **out)
{
	struct emunic_coll *c;
	int r;

	if (!dev || !out || (a && check_attr(a)))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->dev = dev;
	if (a)
		c->attr = *a;
	else
		emunic_coll_attr_init(&c->attr);
	c->rank = emunic_dev_rank(dev);
	c->size = emunic_dev_size(dev);
	if (c->rank < 0 || c->size < 1 || c->rank >= c->size || c->size > (int)COLL_PEER_MASK) {
		r = -EINVAL;
		goto fail;
	}
	c->alg = algs[c->attr.kind];
	c->peer = calloc((size_t)c->size, sizeof(*c->peer));
	r = c->peer ? c->alg->setup(c) : -ENOMEM;
	if (!r && !c->alg->splits && c->ntask > emunic_dev_list_tasks(dev))
		r = coll_err(c, -E2BIG, "%s: a list may need %u tasks, more than the device's limit of %u "
			     "(attr.list_tasks, EMUNIC_LIST_TASKS)%s", c->alg->name, c->ntask,
			     emunic_dev_list_tasks(dev),
			     c->attr.kind == EMUNIC_COLL_BCAST ? ": raise attr.segment or lower max_bytes" : "");
	if (!r && c->size > 1)
		r = setup_queues(c);
	if (r)
		goto fail;
	*out = c;
	return 0;
fail:
	coll_free(c);
	return r;
}

int emunic_coll_destroy(struct emunic_coll *c)
{
	uint64_t fence;
	int r = 0;

	if (!c)
		return -EINVAL;
	if (c->nreq)
		return coll_err(c, -EBUSY, "destroy with %d %s request(s) not waited", c->nreq, c->alg->name);
	/* The fence runs after every barrier on the MQ: with one failed or
	 * still stuck (timed out) it would never run, and the peers such a
	 * barrier waits for are not coming anyway. */
	r = coll_progress(c);
	if (!r && !c->err && c->done == c->posted) {
		r = c->alg->fence(c, &fence);
		if (!r && fence)
			r = coll_wait_seq(c, fence, coll_timeout(c));
	}
	coll_free(c);
	return r;
}
