/* SPDX-License-Identifier: MIT */
/*
 * The host-progressed all-to-all (see ptp.h): the offloaded alltoall's
 * pairwise exchange (emunic/coll.h) and segments, run by the application
 * thread over plain verbs, so the benchmark compares two ways of running one
 * algorithm.  At step s = 1 .. size - 1 a rank sends its block for rank + s
 * (in segments) and goes on to step s + 1 only once a poll saw every
 * segment of the block from rank - s arrive; its own block is copied.
 *
 * Landing: every other rank sends to this one once per alltoall, so each
 * peer q has a ring of R = 3 x Mseg + 2 entries of a segment each (Mseg:
 * the segments of the largest block): the k-th message from q (from 1)
 * lands in entry (k - 1) % R.  A receive takes the next message whatever
 * its alltoall, so receives are reposted strictly in order: receive k + R
 * only once the alltoall that read message k completed (copied out).  A
 * peer that runs ahead of a slow rank finds its ring full and is held by
 * RNR retries (the mesh retries forever), never dropped.
 *
 * Alltoalls run one at a time, oldest first; at most PTPA_INFLIGHT are in
 * flight.  Each copies sbuf into slot seq % PTPA_SLOTS when it starts; a
 * slot is reused only once the sends from it completed.
 */
#include "baseline/ptp.h"
#include "baseline/ptp_cq.h"
#include "engines/coll/schedule.h"
#include "emunic/base/log.h"
#include "emunic/verbs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTPA_SLOTS 4
#define PTPA_INFLIGHT (PTPA_SLOTS - 1)
#define PTPA_DEFAULT_MAX (64 * 1024)
#define PTPA_DEFAULT_SEG (32 * 1024)
#define PTPA_MAX_SEGS 32	/* the segment is raised so a block has no more */
/* wr_id: a receive is RECV | peer; a send seq << PEER_BITS | peer. */
#define PTPA_PEER_BITS 24
#define PTPA_PEER_MASK ((1ull << PTPA_PEER_BITS) - 1)
#define PTPA_RECV_FLAG (1ull << 63)

struct ptpa_op {
	void *rbuf;
	size_t block;
	uint32_t nseg;
};

/* What came from one peer: messages numbered from 1 in arrival order. */
struct ptpa_ring {
	uint64_t arrived;
	uint64_t released;		/* ... whose alltoall completed */
	uint64_t posted;		/* receives posted for messages 1..posted */
	uint32_t *len;			/* by entry: the bytes that landed */
};

struct emunic_ptp_a2a {
	struct emunic_boot *boot;
	int rank, size, timeout_ms, spin_us;
	struct emunic_vdev *dev;
	struct ptp_cq q;
	struct emunic_mesh *mesh;
	size_t limit;			/* max_block */
	size_t max;			/* ... rounded up to 64 */
	size_t seg;			/* a segment, a ring entry's size */
	uint32_t ring;			/* R, entries a peer */
	unsigned char *mem;		/* slots (size x max each), then the rings */
	size_t mem_bytes;
	struct ibv_mr *mr;
	struct ptpa_ring *in;		/* by rank; in[rank] unused */
	struct ptpa_op op[PTPA_SLOTS];
	unsigned slot_out[PTPA_SLOTS];	/* sends from each slot not complete */
	uint64_t sends_out;		/* every send not complete, for destroy */
	struct ptp_ops ops;		/* alltoalls, numbered from 1; the first failure */
	int step;			/* the oldest alltoall: its step, 1 .. size - 1 */
	bool sent;			/* ... whose sends are posted */
};

struct emunic_ptp_a2a_req {
	struct ptp_req r;
};

/* An alltoall call's arguments. */
struct ptpa_args {
	const void *sbuf;
	void *rbuf;
	size_t block;
};

static int bound(const struct emunic_ptp_a2a *p)
{
	return p->timeout_ms ? p->timeout_ms : 30000;
}

static unsigned char *slot_buf(const struct emunic_ptp_a2a *p, uint64_t seq)
{
	return p->mem + (seq % PTPA_SLOTS) * (size_t)p->size * p->max;
}

static uint32_t entry(const struct emunic_ptp_a2a *p, uint64_t k)
{
	return (uint32_t)((k - 1) % p->ring);
}

/* Where message k (from 1) of rank q lands. */
static unsigned char *land(const struct emunic_ptp_a2a *p, int q, uint64_t k)
{
	size_t peer = (size_t)(q < p->rank ? q : q - 1);

	return p->mem + PTPA_SLOTS * (size_t)p->size * p->max + (peer * p->ring + entry(p, k)) * p->seg;
}

static size_t seg_len(const struct emunic_ptp_a2a *p, const struct ptpa_op *o, uint32_t i)
{
	size_t off = (size_t)i * p->seg;

	return o->block - off < p->seg ? o->block - off : p->seg;
}

/* The peers of step s: dst gets this rank's block, src's block comes. */
static int step_dst(const struct emunic_ptp_a2a *p, int s)
{
	return (p->rank + s) % p->size;
}

static int step_src(const struct emunic_ptp_a2a *p, int s)
{
	return (p->rank - s + p->size) % p->size;
}

/* Posts the receives whose entries are free, in message order: the RQ
 * fills them first in, first out, so one held entry holds the rest. */
static int repost(struct emunic_ptp_a2a *p, int q)
{
	struct ptpa_ring *g = &p->in[q];

	/* After a failure the QPs are flushing: posting adds nothing. */
	while (!p->ops.err && g->posted + 1 <= g->released + p->ring) {
		uint64_t k = g->posted + 1;
		struct ibv_sge sge = { .addr = (uintptr_t)land(p, q, k), .length = (uint32_t)p->seg,
				       .lkey = p->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = PTPA_RECV_FLAG | (uint64_t)q, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;
		int r = ibv_post_recv(p->mesh->conn[q].qp, &wr, &bad);

		if (r)
			return emunic_err(-r, "ptp alltoall: posting receive %llu from peer %d (qp %u) failed: %s",
					  (unsigned long long)k, q, p->mesh->conn[q].qp->qp_num, strerror(r));
		g->posted = k;
	}
	return 0;
}

/* Step's sends: every segment of the block for dst, from the slot. */
static int send_block(struct emunic_ptp_a2a *p, const struct ptpa_op *o, uint64_t seq, int dst)
{
	const unsigned char *src = slot_buf(p, seq) + (size_t)dst * o->block;
	struct ibv_qp *qp = p->mesh->conn[dst].qp;

	for (uint32_t i = 0; i < o->nseg; i++) {
		size_t len = seg_len(p, o, i);
		struct ibv_sge sge = { .addr = (uintptr_t)(src + (size_t)i * p->seg), .length = (uint32_t)len,
				       .lkey = p->mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = seq << PTPA_PEER_BITS | (uint64_t)dst, .sg_list = &sge, .num_sge = len ? 1 : 0,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, *bad;
		int r = ibv_post_send(qp, &wr, &bad);

		if (r)
			return emunic_err(-r, "ptp alltoall %llu: posting segment %u to peer %d (qp %u) failed: %s",
					  (unsigned long long)seq, i, dst, qp->qp_num, strerror(r));
		p->sends_out++;
		p->slot_out[seq % PTPA_SLOTS]++;
	}
	return 0;
}

static void on_wc(void *ctx, const struct ibv_wc *wc)
{
	struct emunic_ptp_a2a *p = ctx;
	bool recv = wc->wr_id & PTPA_RECV_FLAG;
	int q = (int)(wc->wr_id & PTPA_PEER_MASK);
	uint64_t seq = recv ? p->ops.done + 1 : (wc->wr_id & ~PTPA_RECV_FLAG) >> PTPA_PEER_BITS;

	if (recv && wc->status == IBV_WC_SUCCESS) {
		p->in[q].len[entry(p, p->in[q].arrived + 1)] = wc->byte_len;
		p->in[q].arrived++;
		return;
	}
	if (!recv) {
		p->sends_out--;
		p->slot_out[seq % PTPA_SLOTS]--;
		if (wc->status == IBV_WC_SUCCESS)
			return;
	}
	/* One line for the cause; the flushes after it say nothing new. */
	if (wc->status != IBV_WC_WR_FLUSH_ERR || !p->ops.err)
		emunic_err(-EIO, "ptp alltoall %llu: %s peer %d (qp %u) failed: %s", (unsigned long long)seq,
			   recv ? "a receive from" : "a send to", q, wc->qp_num,
			   ibv_wc_status_str(wc->status));
	ptp_ops_fail(&p->ops, seq, -EIO);
}

/* Whether every segment of q's block in the oldest alltoall arrived: every
 * earlier message of q belongs to an earlier, completed alltoall. */
static bool block_in(const struct emunic_ptp_a2a *p, const struct ptpa_op *o, int q)
{
	return p->in[q].arrived >= p->in[q].released + o->nseg;
}

/* The last step: every block into rbuf (lengths checked), the entries
 * released and their receives posted again. */
static int finish(struct emunic_ptp_a2a *p, const struct ptpa_op *o, uint64_t seq)
{
	unsigned char *rbuf = o->rbuf;

	for (int q = 0; q < p->size; q++) {
		struct ptpa_ring *g = &p->in[q];
		int r;

		if (q == p->rank) {
			if (o->block)
				memcpy(rbuf + (size_t)q * o->block, slot_buf(p, seq) + (size_t)q * o->block, o->block);
			continue;
		}
		for (uint32_t i = 0; i < o->nseg; i++) {
			uint64_t k = g->released + i + 1;
			uint32_t got = g->len[entry(p, k)];

			if (got != seg_len(p, o, i))
				return emunic_err(-EBADMSG, "ptp alltoall %llu (block %zu): segment %u from "
						  "peer %d (qp %u) has %u bytes, not %zu: do all ranks call with the "
						  "same block?", (unsigned long long)seq, o->block, i, q,
						  p->mesh->conn[q].qp->qp_num, got, seg_len(p, o, i));
			if (got)
				memcpy(rbuf + (size_t)q * o->block + (size_t)i * p->seg, land(p, q, k), got);
		}
		g->released += o->nseg;
		if ((r = repost(p, q)))
			return r;
	}
	return 0;
}

/* Runs the oldest alltoall as far as what arrived allows, then the next. */
static int advance(struct emunic_ptp_a2a *p)
{
	while (p->ops.done < p->ops.posted && !p->ops.err) {
		uint64_t seq = p->ops.done + 1;
		const struct ptpa_op *o = &p->op[seq % PTPA_SLOTS];
		int r = 0;

		for (; p->step < p->size; p->step++, p->sent = false) {
			if (!p->sent && (r = send_block(p, o, seq, step_dst(p, p->step))))
				break;
			p->sent = true;
			if (!block_in(p, o, step_src(p, p->step)))
				return 0;
		}
		if (!r)
			r = finish(p, o, seq);
		if (r) {
			ptp_ops_fail(&p->ops, seq, r);
			return r;
		}
		p->ops.done = seq;
		p->step = 1;
	}
	return 0;
}

static int progress(void *ctx)
{
	struct emunic_ptp_a2a *p = ctx;
	int r = p->q.cq ? ptp_cq_poll(&p->q, on_wc, p, "ptp alltoall") : 0;

	return r ? r : advance(p);
}

/* Names the oldest alltoall's step and every peer whose block is missing. */
static int report_timeout(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp_a2a *p = ctx;
	uint64_t old = p->ops.done + 1;
	const struct ptpa_op *o = &p->op[old % PTPA_SLOTS];
	char late[200] = "";
	size_t n = 0;

	for (int q = 0; q < p->size; q++) {
		if (q == p->rank || block_in(p, o, q))
			continue;
		if (n + 24 > sizeof(late)) {	/* room for one more and the ellipsis */
			strcpy(late + n, ", ...");
			break;
		}
		n += (size_t)snprintf(late + n, sizeof(late) - n, "%s%d", n ? ", " : "", q);
	}
	return emunic_err(-ETIMEDOUT, "ptp alltoall %llu not complete after %d ms: alltoall %llu (block %zu) "
			  "waits at step %d of %d for peer %d; blocks not arrived from peers %s",
			  (unsigned long long)seq, timeout_ms, (unsigned long long)old, o->block, p->step,
			  p->size - 1, step_src(p, p->step), late);
}

static int wait_seq(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp_a2a *p = ctx;

	return ptp_cq_wait(&p->q, progress, report_timeout, p, &p->ops, seq, timeout_ms, p->spin_us,
			   "ptp alltoall");
}

/* Starts an alltoall: sbuf into its slot; runs what it can. */
static int start(void *ctx, const void *args, uint64_t *seq)
{
	struct emunic_ptp_a2a *p = ctx;
	const struct ptpa_args *a = args;
	uint64_t s = p->ops.posted + 1;
	struct ptpa_op *o = &p->op[s % PTPA_SLOTS];
	int r;

	if ((!a->sbuf || !a->rbuf) && a->block)
		return emunic_err(-EINVAL, "ptp alltoall: a NULL buffer for blocks of %zu bytes", a->block);
	if (a->block > p->limit)
		return emunic_err(-EMSGSIZE, "ptp alltoall: a block of %zu bytes, more than max_block (%zu)", a->block,
				  p->limit);
	if (p->ops.err)
		return p->ops.err;
	/* Progress, not only a poll: a caller that retries on -ENOSPC
	 * without testing its oldest request still makes room. */
	if ((r = progress(p)))
		return r;
	if (p->ops.posted - p->ops.done >= PTPA_INFLIGHT || p->slot_out[s % PTPA_SLOTS])
		return -ENOSPC;
	*o = (struct ptpa_op){ .rbuf = a->rbuf, .block = a->block };
	o->nseg = coll_nseg(p->seg, a->block);
	if (p->size == 1) {
		if (a->block)
			memmove(a->rbuf, a->sbuf, a->block);
		p->ops.posted = p->ops.done = *seq = s;
		return 0;
	}
	if (a->block)
		memcpy(slot_buf(p, s), a->sbuf, (size_t)p->size * a->block);
	p->ops.posted = *seq = s;
	return advance(p);
}

static const struct ptp_kind kind = { "ptp alltoall", start, progress, wait_seq };

int emunic_ptp_alltoall(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block)
{
	const struct ptpa_args a = { sbuf, rbuf, block };

	return p ? ptp_call(&kind, p, &a, bound(p)) : -EINVAL;
}

int emunic_ptp_ialltoall(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block,
			 struct emunic_ptp_a2a_req **out)
{
	const struct ptpa_args a = { sbuf, rbuf, block };

	return p ? ptp_req_start(&kind, p, &p->ops, NULL, &a, out) : -EINVAL;
}

int emunic_ptp_a2a_test(struct emunic_ptp_a2a_req *req)
{
	return ptp_req_test((struct ptp_req *)req);
}

int emunic_ptp_a2a_wait(struct emunic_ptp_a2a_req *req, int timeout_ms)
{
	return ptp_req_wait((struct ptp_req *)req, timeout_ms);
}

/* ---- create / destroy ---------------------------------------------------- */

/* The segment and the ring: the offload's own rules (engines/coll/schedule.h). */
static void set_sizes(struct emunic_ptp_a2a *p, size_t max_block, size_t segment)
{
	p->limit = max_block ? max_block : PTPA_DEFAULT_MAX;
	p->max = (p->limit + 63) & ~(size_t)63;
	p->seg = coll_seg_bytes(segment, PTPA_DEFAULT_SEG, p->limit, PTPA_MAX_SEGS);
	p->ring = PTPA_INFLIGHT * coll_nseg(p->seg, p->limit) + 2;
}

static int setup(struct emunic_ptp_a2a *p)
{
	size_t total = PTPA_SLOTS * (size_t)p->size * p->max + (size_t)(p->size - 1) * p->ring * p->seg;

	p->in = calloc((size_t)p->size, sizeof(*p->in));
	if (!p->in)
		return -ENOMEM;
	for (int q = 0; q < p->size; q++)
		if (!(p->in[q].len = calloc(p->ring, sizeof(*p->in[q].len))))
			return -ENOMEM;
	p->mem = aligned_alloc(4096, (total + 4095) & ~(size_t)4095);
	if (!p->mem)
		return -ENOMEM;
	memset(p->mem, 0, total);
	p->mem_bytes = total;
	p->step = 1;
	return p->size == 1 ? 0 : emunic_vdev_open(NULL, &p->dev);
}

/* Queues deep enough for every receive up and every send that can be
 * outstanding (a block to each peer from each slot); the device's limits
 * cap them. */
static int open_verbs(struct emunic_ptp_a2a *p)
{
	const struct ibv_device_attr *da = &p->dev->attr.orig_attr;
	uint64_t sends = PTPA_SLOTS * (uint64_t)((p->ring - 2) / PTPA_INFLIGHT) + 16;
	uint64_t depth = (uint64_t)(p->size - 1) * (p->ring + sends) + 64;
	struct emunic_qp_opts qo;
	int r;

	emunic_qp_opts_default(&qo);
	qo.max_recv_wr = p->ring;
	qo.max_send_wr = (uint32_t)(sends < (uint64_t)da->max_qp_wr ? sends : (uint64_t)da->max_qp_wr);
	r = ptp_cq_open(&p->q, p->dev, (int)(depth < (uint64_t)da->max_cqe ? depth : (uint64_t)da->max_cqe),
			"ptp alltoall");
	if (r)
		return r;
	p->mr = ibv_reg_mr(p->dev->pd, p->mem, p->mem_bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr)
		return emunic_err(-errno, "ptp alltoall: ibv_reg_mr of %zu bytes failed: %s", p->mem_bytes,
				  strerror(errno));
	r = emunic_mesh_open(p->dev, p->boot, &qo, p->q.cq, p->q.cq, &p->mesh);
	r = r ? r : emunic_mesh_connect_all(p->mesh, bound(p) < 0 ? 1 << 30 : bound(p));
	for (int q = 0; !r && q < p->size; q++)
		r = q == p->rank ? 0 : repost(p, q);
	/* No data may arrive before every rank's receives are up. */
	return r ? r : emunic_boot_barrier(p->boot);
}

static void ptp_a2a_free(struct emunic_ptp_a2a *p)
{
	emunic_mesh_close(p->mesh);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	ptp_cq_close(&p->q);
	if (p->dev)
		emunic_vdev_close(p->dev);
	free(p->mem);
	for (int q = 0; p->in && q < p->size; q++)
		free(p->in[q].len);
	free(p->in);
	free(p);
}

int emunic_ptp_a2a_create(struct emunic_boot *boot, size_t max_block, size_t segment, int timeout_ms, int spin_us,
			  struct emunic_ptp_a2a **out)
{
	struct emunic_ptp_a2a *p;
	int r;

	if (!boot || !out || max_block > (1u << 30))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->boot = boot;
	p->rank = emunic_boot_rank(boot);
	p->size = emunic_boot_size(boot);
	p->timeout_ms = timeout_ms;
	p->spin_us = spin_us;
	set_sizes(p, max_block, segment);
	r = setup(p);
	if (!r && p->size > 1)
		r = open_verbs(p);
	if (r) {
		ptp_a2a_free(p);
		return r;
	}
	*out = p;
	return 0;
}

static uint64_t sends_out(void *ctx)
{
	return ((struct emunic_ptp_a2a *)ctx)->sends_out;
}

/* Every send must be delivered before the QPs go: a peer still waiting
 * for a block would never get it. */
int emunic_ptp_a2a_destroy(struct emunic_ptp_a2a *p)
{
	int r;

	if (!p)
		return -EINVAL;
	r = ptp_cq_drain(&p->q, progress, sends_out, p, &p->ops, bound(p), "send(s)", "ptp alltoall");
	ptp_a2a_free(p);
	return r;
}
