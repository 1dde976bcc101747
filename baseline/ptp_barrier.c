/* SPDX-License-Identifier: MIT */
/*
 * The host-progressed recursive-doubling barrier (see ptp.h).  Its schedule
 * is engines/coll/schedule.c's, the one the offloaded barrier runs: N is the
 * largest power of two <= M ranks; an extra rank r >= N signals r - N,
 * which waits for it before the doubling steps and releases it after them.
 *
 * Matching is by counting: every partner signals exactly once a barrier, so
 * barrier s may pass its step with peer q once arrived[q] >= s, and a signal
 * that comes early (the peer is already in barrier s + 1) is simply counted.
 * Each consumed receive is reposted as its completion is polled.
 */
#include "baseline/ptp.h"
#include "baseline/ptp_cq.h"
#include "engines/coll/schedule.h"
#include "emunic/base/log.h"
#include "emunic/verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTP_MAX_INFLIGHT 64	/* barriers started and not complete */
/* Receives posted ahead per partner.  Between two polls a partner can send
 * at most two signals this rank has not polled (its part of the barrier in
 * progress and of the next), so 2 never meets RNR; 4 keeps a margin. */
#define PTP_RECV_WINDOW 4
#define PTP_SEND_LIMIT 128	/* unpolled sends; the mesh's SQs hold 256 */
#define PTP_PEER_BITS 24
#define PTP_PEER_MASK ((1ull << PTP_PEER_BITS) - 1)

struct emunic_ptp {
	struct ptp_base b;		/* no mem: signals carry no data */
	enum emunic_coll_signal signal;
	struct coll_step *step;		/* this rank's schedule */
	int nstep;
	uint64_t *arrived;		/* by rank: signals received so far */
	struct ptp_ops ops;		/* barriers, numbered from 1; the first failure */
	int cur;			/* the oldest barrier's next step */
	bool cur_sent;			/* ... and whether its signal is out */
	unsigned sends_out;		/* posted, completion not yet polled */
	int nreq;
};

struct emunic_ptp_req {
	struct ptp_req r;
};

void emunic_ptp_attr_init(struct emunic_ptp_attr *a)
{
	*a = (struct emunic_ptp_attr){ .signal = EMUNIC_COLL_SEND, .timeout_ms = 0, .spin_us = 50 };
}

/* ---- schedule ------------------------------------------------------------ */

static int build_schedule(struct emunic_ptp *p)
{
	int n = coll_rd_schedule(p->b.rank, p->b.size, &p->step);

	if (n < 0)
		return n;
	p->nstep = n;
	return 0;
}

/* ---- verbs --------------------------------------------------------------- */

static struct ibv_qp *qp_of(struct emunic_ptp *p, int peer)
{
	return p->b.mesh->conn[peer].qp;
}

static int post_recv(struct emunic_ptp *p, int peer)
{
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)peer }, *bad;
	int r = emunic_shim_post_recv(&p->b.dev->shim, qp_of(p, peer), &wr, &bad);

	if (r)
		return emunic_err(r, "ptp: peer %d qp %u: posting a receive failed: %s", peer,
				  qp_of(p, peer)->qp_num, strerror(-r));
	return 0;
}

static void on_wc(void *ctx, const struct ibv_wc *wc)
{
	struct emunic_ptp *p = ctx;
	int peer = (int)(wc->wr_id & PTP_PEER_MASK);
	bool recv = wc->opcode & IBV_WC_RECV;
	uint64_t seq = recv ? p->ops.done + 1 : wc->wr_id >> PTP_PEER_BITS;

	if (!recv)
		p->sends_out--;
	if (wc->status != IBV_WC_SUCCESS) {
		emunic_err(-EIO, "ptp: barrier %llu: %s peer %d (qp %u) failed: %s", (unsigned long long)seq,
			   recv ? "receive from" : "signal to", peer, wc->qp_num, ibv_wc_status_str(wc->status));
		ptp_ops_fail(&p->ops, seq, -EIO);
		return;
	}
	if (recv) {
		p->arrived[peer]++;
		/* Replenish at once: the window stays full between polls. */
		if (post_recv(p, peer))
			ptp_ops_fail(&p->ops, seq, -EIO);
	}
}

static int poll_cq(struct emunic_ptp *p)
{
	return ptp_cq_poll(&p->b.q, on_wc, p, "ptp");
}

static int post_signal(struct emunic_ptp *p, int peer, uint64_t seq)
{
	struct ibv_send_wr wr = {
		.wr_id = seq << PTP_PEER_BITS | (uint64_t)peer, .send_flags = IBV_SEND_SIGNALED,
		.opcode = p->signal == EMUNIC_COLL_WRITE_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND,
	}, *bad;
	int r;

	/* 0 bytes: no SGE, and no remote address or rkey (IBA C9-88). */
	wr.imm_data = htonl((uint32_t)seq);
	/* Keep the send queues and the CQ from overflowing; acks come from
	 * the peer's transport, not its application, so this ends. */
	while (p->sends_out >= PTP_SEND_LIMIT)
		if (poll_cq(p))
			return -EIO;
	r = emunic_shim_post_send(&p->b.dev->shim, qp_of(p, peer), &wr, &bad);
	if (r)
		return emunic_err(r, "ptp: barrier %llu: posting the signal to peer %d failed: %s",
				  (unsigned long long)seq, peer, strerror(-r));
	p->sends_out++;
	return 0;
}

/* ---- progress ------------------------------------------------------------ */

/* Runs the oldest barrier's schedule as far as the counted arrivals allow,
 * then the next one's; never polls. */
static int advance(struct emunic_ptp *p)
{
	while (p->ops.done < p->ops.posted && !p->ops.err) {
		uint64_t seq = p->ops.done + 1;

		for (; p->cur < p->nstep; p->cur++, p->cur_sent = false) {
			const struct coll_step *st = &p->step[p->cur];

			if (st->send && !p->cur_sent) {
				int r = post_signal(p, st->peer, seq);

				if (r) {
					ptp_ops_fail(&p->ops, seq, r);
					return r;
				}
				p->cur_sent = true;
			}
			if (st->wait && p->arrived[st->peer] < seq)
				return 0;
		}
		p->ops.done = seq;
		p->cur = 0;
	}
	return 0;
}

static int progress(void *ctx)
{
	struct emunic_ptp *p = ctx;
	/* One rank alone has no verbs: its barriers pass in advance(). */
	int r = p->b.q.cq ? poll_cq(p) : 0;

	return r ? r : advance(p);
}

static int report_timeout(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp *p = ctx;
	char late[256] = "";
	size_t off = 0;

	for (int i = 0; i < p->nstep; i++) {
		int q = p->step[i].peer;

		if (p->step[i].wait && p->arrived[q] < seq && off < sizeof(late))
			off += (size_t)snprintf(late + off, sizeof(late) - off, " %d (%llu of %llu)", q,
						(unsigned long long)p->arrived[q], (unsigned long long)seq);
	}
	return emunic_err(-ETIMEDOUT, "ptp: barrier %llu not complete after %d ms; signals missing from peer%s",
			  (unsigned long long)seq, timeout_ms, off ? late : "s: none");
}

static int wait_seq(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp *p = ctx;

	return ptp_cq_wait(&p->b.q, progress, report_timeout, p, &p->ops, seq, timeout_ms, p->b.spin_us, "ptp");
}

/* ---- requests ------------------------------------------------------------ */

static int start(void *ctx, const void *args, uint64_t *seq)
{
	struct emunic_ptp *p = ctx;

	(void)args;
	if (p->ops.err)
		return p->ops.err;
	if (p->ops.posted - p->ops.done >= PTP_MAX_INFLIGHT)
		return -ENOSPC;
	*seq = ++p->ops.posted;
	return advance(p);
}

static const struct ptp_kind kind = { "ptp", start, progress, wait_seq };

int emunic_ptp_barrier(struct emunic_ptp *p)
{
	uint64_t seq;
	int r;

	if (!p)
		return -EINVAL;
	r = start(p, NULL, &seq);
	return r ? r : wait_seq(p, seq, ptp_base_bound(&p->b));
}

int emunic_ptp_ibarrier(struct emunic_ptp *p, struct emunic_ptp_req **out)
{
	return p ? ptp_req_start(&kind, p, &p->ops, &p->nreq, NULL, out) : -EINVAL;
}

int emunic_ptp_test(struct emunic_ptp_req *req)
{
	return ptp_req_test((struct ptp_req *)req);
}

int emunic_ptp_wait(struct emunic_ptp_req *req, int timeout_ms)
{
	return ptp_req_wait((struct ptp_req *)req, timeout_ms);
}

/* ---- create / destroy ---------------------------------------------------- */

/* The receive window of q, if a step waits for it. */
static int prepost(void *ctx, int q)
{
	struct emunic_ptp *p = ctx;

	for (int i = 0; i < p->nstep; i++) {
		if (!p->step[i].wait || p->step[i].peer != q)
			continue;
		for (int w = 0; w < PTP_RECV_WINDOW; w++) {
			int r = post_recv(p, q);

			if (r)
				return r;
		}
	}
	return 0;
}

static int open_verbs(struct emunic_ptp *p)
{
	int depth = PTP_SEND_LIMIT + PTP_RECV_WINDOW * p->nstep + 64;
	int r = emunic_vdev_open(NULL, &p->b.dev);

	return r ? r : ptp_base_connect(&p->b, depth, NULL, prepost, p, "ptp");
}

static void ptp_free(struct emunic_ptp *p)
{
	ptp_base_fini(&p->b);
	free(p->arrived);
	free(p->step);
	free(p);
}

int emunic_ptp_create(struct emunic_boot *boot, const struct emunic_ptp_attr *a, struct emunic_ptp **out)
{
	struct emunic_ptp_attr at;
	struct emunic_ptp *p;
	int r;

	if (!boot || !out || (a && a->signal != EMUNIC_COLL_SEND && a->signal != EMUNIC_COLL_WRITE_IMM))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (a)
		at = *a;
	else
		emunic_ptp_attr_init(&at);
	ptp_base_init(&p->b, boot, at.timeout_ms, at.spin_us);
	p->signal = at.signal;
	p->arrived = calloc((size_t)p->b.size, sizeof(*p->arrived));
	r = p->arrived ? build_schedule(p) : -ENOMEM;
	if (!r && p->b.size > 1)
		r = open_verbs(p);
	if (r) {
		ptp_free(p);
		return r;
	}
	*out = p;
	return 0;
}

static uint64_t sends_out(void *ctx)
{
	return ((struct emunic_ptp *)ctx)->sends_out;
}

/* Every signal this rank sent must be delivered before its QPs go, or a
 * partner (the extra rank, released last) would wait for ever. */
int emunic_ptp_destroy(struct emunic_ptp *p)
{
	int r;

	if (!p)
		return -EINVAL;
	if (p->nreq)
		return emunic_err(-EBUSY, "ptp: destroy with %d barrier request(s) not waited", p->nreq);
	r = ptp_cq_drain(&p->b.q, progress, sends_out, p, &p->ops, ptp_base_bound(&p->b), "signal(s)", "ptp");
	ptp_free(p);
	return r;
}
