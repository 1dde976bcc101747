/* SPDX-License-Identifier: MIT */
/*
 * The collective object: its management queue, QPs and CQs, and the
 * application side of completion (test, wait).  The collectives themselves
 * run on the progress core; this file only has them post their lists,
 * through the algorithm's table (c->alg, struct coll_alg), and reads MQ and
 * send-CQ completions.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define COLL_QP_DEPTH 128	/* >= COLL_MAX_INFLIGHT + COLL_RECV_WINDOW */
#define COLL_WAIT_SLICE_MS 100	/* how often a blocked wait looks at send errors */
#define COLL_POLL_BATCH 16

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

/* ---- completions ---------------------------------------------------------- */

static int status_errno(int status)
{
	switch (status) {
	case EMUNIC_WC_CANCELED: return -ECANCELED;
	case EMUNIC_WC_TIMEOUT: return -ETIMEDOUT;
	default: return -EIO;
	}
}

/* Barriers from seq on report err; the first failure is the one kept. */
static void set_err(struct emunic_coll *c, uint64_t seq, int err)
{
	if (!c->err || seq < c->err_seq) {
		c->err = err;
		c->err_seq = seq;
	}
}

static void on_send_wc(struct emunic_coll *c, const struct emunic_wc *wc)
{
	uint64_t seq = wc->wr_id >> COLL_PEER_BITS;

	c->sends_done++;
	if (wc->status == EMUNIC_WC_SUCCESS)
		return;
	coll_err(c, 0, "%s %llu: %s to peer %d failed: %s", c->alg->name, (unsigned long long)seq,
		 emunic_task_op_str(wc->op), wc->peer >= 0 ? wc->peer : (int)(wc->wr_id & COLL_PEER_MASK),
		 emunic_wc_status_str(wc->status));
	set_err(c, seq, status_errno(wc->status));
}

static void on_mq_wc(struct emunic_coll *c, const struct emunic_wc *wc)
{
	uint64_t seq = wc->wr_id >> COLL_PEER_BITS;
	int peer = (int)(wc->wr_id & COLL_PEER_MASK);

	if (wc->status == EMUNIC_WC_SUCCESS) {
		if (seq > c->done)
			c->done = seq;
		return;
	}
	if (peer == (int)COLL_PEER_MASK)
		coll_err(c, 0, "teardown fence (WAIT for %llu send completions) failed: %s",
			 (unsigned long long)c->sends_posted, emunic_wc_status_str(wc->status));
	else
		coll_err(c, 0, "%s %llu: %s for peer %d failed: %s", c->alg->name, (unsigned long long)seq,
			 emunic_task_op_str(wc->op), peer, emunic_wc_status_str(wc->status));
	set_err(c, seq, status_errno(wc->status));
}

static int drain_sends(struct emunic_coll *c)
{
	struct emunic_wc wc[COLL_POLL_BATCH];
	int n;

	do {
		n = emunic_cq_poll(c->scq, wc, COLL_POLL_BATCH);
		if (n < 0)
			return coll_err(c, n, "polling the send CQ failed (%d)", n);
		for (int i = 0; i < n; i++)
			on_send_wc(c, &wc[i]);
	} while (n == COLL_POLL_BATCH);
	return 0;
}

/* Reads whatever the progress core finished; never blocks. */
int coll_progress(struct emunic_coll *c)
{
	struct emunic_wc wc[COLL_POLL_BATCH];
	int n, r;

	if (c->size == 1)
		return 0;
	r = drain_sends(c);
	if (r)
		return r;
	do {
		n = emunic_mq_poll(c->mq, wc, COLL_POLL_BATCH);
		if (n < 0)
			return coll_err(c, n, "polling the management queue failed (%d)", n);
		for (int i = 0; i < n; i++)
			on_mq_wc(c, &wc[i]);
	} while (n == COLL_POLL_BATCH);
	return 0;
}

/* 1 done, 0 not yet, < 0 failed.  Lists complete in order on the MQ. */
int coll_seq_status(const struct emunic_coll *c, uint64_t seq)
{
	if (c->err && seq >= c->err_seq)
		return c->err;
	return seq <= c->done;
}

/* Names the partners whose signal for barrier seq has not arrived: each
 * partner signals exactly once a barrier, so its receive CQ count says. */
static int report_timeout(const struct emunic_coll *c, uint64_t seq, int timeout_ms)
{
	char late[256] = "";
	size_t off = 0;

	for (int i = 0; i < c->nstep; i++) {
		int p = c->step[i].peer;
		uint64_t got;

		if (!c->step[i].wait)
			continue;
		got = emunic_cq_count(c->peer[p].rcq);
		if (got < seq && off < sizeof(late))
			off += (size_t)snprintf(late + off, sizeof(late) - off, " %d (%llu of %llu)", p,
						(unsigned long long)got, (unsigned long long)seq);
	}
	return coll_err(c, -ETIMEDOUT, "%s %llu not complete after %d ms; signals missing from peer%s",
			c->alg->name, (unsigned long long)seq, timeout_ms,
			off ? late : "s: none (the progress core is behind)");
}

int coll_wait_seq(struct emunic_coll *c, uint64_t seq, int timeout_ms)
{
	long long deadline = timeout_ms < 0 ? -1 : coll_now_ms() + timeout_ms;

	for (;;) {
		struct emunic_wc wc;
		long long left = COLL_WAIT_SLICE_MS;
		int r = coll_progress(c), s;

		if (r)
			return r;
		s = coll_seq_status(c, seq);
		if (s)
			return s < 0 ? s : 0;
		if (deadline >= 0) {
			left = deadline - coll_now_ms();
			if (left <= 0)
				return report_timeout(c, seq, timeout_ms);
		}
		/* Sliced so that a failed send (whose peer then never
		 * signals back) is seen before the whole bound runs out. */
		r = emunic_mq_wait(c->mq, &wc, (int)(left < COLL_WAIT_SLICE_MS ? left : COLL_WAIT_SLICE_MS));
		if (r >= 0)
			on_mq_wc(c, &wc);
		else if (r != -ETIMEDOUT)
			return coll_err(c, r, "waiting on the management queue failed (%d)", r);
	}
}

/* ---- requests ------------------------------------------------------------ */

/* A full queue (ibarriers in flight, or other engines' lists ahead in the
 * command ring) only delays a blocking barrier: retry within the bound. */
static int post_blocking(struct emunic_coll *c, uint64_t *seq)
{
	long long deadline = coll_now_ms() + coll_timeout(c);
	struct timespec nap = { 0, 50 * 1000 };

	for (;;) {
		int r = coll_progress(c);

		r = r ? r : c->alg->post(c, seq);
		if (r != -ENOSPC)
			return r;
		if (coll_timeout(c) >= 0 && coll_now_ms() > deadline)
			return coll_err(c, r, "%s: no room to post it for %d ms", c->alg->name, coll_timeout(c));
		nanosleep(&nap, NULL);
	}
}

int emunic_barrier(struct emunic_coll *c)
{
	uint64_t seq;
	int r;

	if (!c)
		return -EINVAL;
	r = post_blocking(c, &seq);
	return r ? r : coll_wait_seq(c, seq, coll_timeout(c));
}

int emunic_ibarrier(struct emunic_coll *c, struct emunic_coll_req **out)
{
	struct emunic_coll_req *req;
	int r;

	if (!c || !out)
		return -EINVAL;
	r = coll_progress(c);
	if (r)
		return r;
	req = calloc(1, sizeof(*req));
	if (!req)
		return -ENOMEM;
	req->c = c;
	r = c->alg->post(c, &req->seq);
	if (r) {
		free(req);
		return r;
	}
	c->nreq++;
	*out = req;
	return 0;
}

int emunic_coll_test(struct emunic_coll_req *req)
{
	int r;

	if (!req)
		return -EINVAL;
	r = coll_progress(req->c);
	return r ? r : coll_seq_status(req->c, req->seq);
}

int emunic_coll_wait(struct emunic_coll_req *req, int timeout_ms)
{
	int r;

	if (!req)
		return -EINVAL;
	r = coll_wait_seq(req->c, req->seq, timeout_ms);
	req->c->nreq--;
	free(req);
	return r;
}

/* ---- create / destroy ---------------------------------------------------- */

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
	return 0;
}

static int setup_queues(struct emunic_coll *c)
{
	unsigned nsend = 0, depth;
	int r;

	for (int i = 0; i < c->nstep; i++)
		nsend += c->step[i].send;
	/* Unpolled send completions: every list in flight, plus one more
	 * round of them finished between two drains. */
	r = emunic_cq_create(c->dev, (COLL_MAX_INFLIGHT + 1) * nsend + 16, 0, &c->scq);
	if (r)
		return coll_err(c, r, "creating the send CQ failed (%d)", r);
	depth = (COLL_MAX_INFLIGHT + 1) * c->ntask + COLL_RECV_WINDOW * (unsigned)c->nstep + 16;
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
	/* The only algorithm so far; the collectives to come bring tables of
	 * their own (struct coll_alg). */
	c->alg = &coll_barrier_alg;
	c->peer = calloc((size_t)c->size, sizeof(*c->peer));
	r = c->peer ? c->alg->setup(c) : -ENOMEM;
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
