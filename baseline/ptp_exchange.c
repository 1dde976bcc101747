/* SPDX-License-Identifier: MIT */
/*
 * The host-progressed exchanges (see ptp.h): the offloaded alltoall's,
 * allgather's and gather's schedules (schedule.c's coll_xchg_step) and
 * segments, run by the application thread over plain verbs, so the
 * benchmark compares two ways of running one algorithm.  At step s = 1 ..
 * size - 1 a rank sends the step's block (in segments) to the step's dst,
 * if any, and goes on to step s + 1 only once a poll saw every segment of
 * the step's src's block arrive, if it waits for one; its own block is
 * copied.  A gather's non-root so completes once its sends are posted.
 *
 * Landing: a peer q that sends to this one sends one block an operation,
 * so each peer has a ring of R = 3 x Mseg + 2 entries of a segment each
 * (Mseg: the segments of the largest block): the k-th message from q (from
 * 1) lands in entry (k - 1) % R.  A receive takes the next message whatever
 * its operation, so receives are reposted strictly in order: receive k + R
 * only once the operation that read message k completed (copied out).  A
 * peer that runs ahead of a slow rank finds its ring full and is held by
 * RNR retries (the mesh retries forever), never dropped.
 *
 * Operations run one at a time, oldest first; at most PTPA_INFLIGHT are in
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
	void *rbuf;			/* NULL: nothing lands here (a gather's non-root) */
	size_t block;
	uint32_t nseg;
	int root;			/* a gather's */
};

/* What came from one peer: messages numbered from 1 in arrival order. */
struct ptpa_ring {
	uint64_t arrived;
	uint64_t released;		/* ... whose operation completed */
	uint64_t posted;		/* receives posted for messages 1..posted */
	uint32_t *len;			/* by entry: the bytes that landed */
};

struct emunic_ptp_a2a {
	const struct ptp_kind *kind;	/* what it runs: its name in error lines */
	enum emunic_coll_kind ckind;
	int nblk;			/* blocks in a copy of sbuf */
	struct ptp_base b;		/* mem: the slots (nblk x max each), then the rings */
	size_t limit;			/* max_block */
	size_t max;			/* ... rounded up to 64 */
	size_t seg;			/* a segment, a ring entry's size */
	uint32_t ring;			/* R, entries a peer */
	struct ptpa_ring *in;		/* by rank; in[rank] unused */
	struct ptpa_op op[PTPA_SLOTS];
	unsigned slot_out[PTPA_SLOTS];	/* sends from each slot not complete */
	uint64_t sends_out;		/* every send not complete, for destroy */
	struct ptp_ops ops;		/* operations, numbered from 1; the first failure */
	int step;			/* the oldest operation: its step, 1 .. size - 1 */
	bool sent;			/* ... whose sends are posted */
};

struct emunic_ptp_a2a_req {
	struct ptp_req r;
};

/* A call's arguments. */
struct ptpa_args {
	enum emunic_coll_kind kind;
	const void *sbuf;
	void *rbuf;
	size_t block;
	int root;
};

static unsigned char *slot_buf(const struct emunic_ptp_a2a *p, uint64_t seq)
{
	return p->b.mem + (seq % PTPA_SLOTS) * (size_t)p->nblk * p->max;
}

static uint32_t entry(const struct emunic_ptp_a2a *p, uint64_t k)
{
	return (uint32_t)((k - 1) % p->ring);
}

/* Where message k (from 1) of rank q lands. */
static unsigned char *land(const struct emunic_ptp_a2a *p, int q, uint64_t k)
{
	size_t peer = (size_t)(q < p->b.rank ? q : q - 1);

	return p->b.mem + PTPA_SLOTS * (size_t)p->nblk * p->max + (peer * p->ring + entry(p, k)) * p->seg;
}

static size_t seg_len(const struct emunic_ptp_a2a *p, const struct ptpa_op *o, uint32_t i)
{
	size_t off = (size_t)i * p->seg;

	return o->block - off < p->seg ? o->block - off : p->seg;
}

/* The peers of step s of o: dst gets block blk of the copy, src's comes. */
static struct coll_xstep step_of(const struct emunic_ptp_a2a *p, const struct ptpa_op *o, int s)
{
	struct coll_xstep st;

	coll_xchg_step(p->ckind, p->b.rank, p->b.size, o->root, s, &st);
	return st;
}

/* Posts q's receives whose entries are free, in message order: the RQ
 * fills them first in, first out, so one held entry holds the rest.  Also
 * create's first receives (ptp_base_connect), hence ctx. */
static int repost(void *ctx, int q)
{
	struct emunic_ptp_a2a *p = ctx;
	struct ptpa_ring *g = &p->in[q];

	/* After a failure the QPs are flushing: posting adds nothing. */
	while (!p->ops.err && g->posted + 1 <= g->released + p->ring) {
		uint64_t k = g->posted + 1;
		struct ibv_sge sge = { .addr = (uintptr_t)land(p, q, k), .length = (uint32_t)p->seg,
				       .lkey = p->b.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = PTPA_RECV_FLAG | (uint64_t)q, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;
		int r = emunic_shim_post_recv(&p->b.dev->shim, p->b.mesh->conn[q].qp, &wr, &bad);

		if (r)
			return emunic_err(r, "%s: posting receive %llu from peer %d (qp %u) failed: %s", p->kind->who,
					  (unsigned long long)k, q, p->b.mesh->conn[q].qp->qp_num, strerror(-r));
		g->posted = k;
	}
	return 0;
}

/* Step's sends: every segment of block blk of the slot, to dst. */
static int send_block(struct emunic_ptp_a2a *p, const struct ptpa_op *o, uint64_t seq, int dst, int blk)
{
	const unsigned char *src = slot_buf(p, seq) + (size_t)blk * o->block;
	struct ibv_qp *qp = p->b.mesh->conn[dst].qp;

	for (uint32_t i = 0; i < o->nseg; i++) {
		size_t len = seg_len(p, o, i);
		struct ibv_sge sge = { .addr = (uintptr_t)(src + (size_t)i * p->seg), .length = (uint32_t)len,
				       .lkey = p->b.mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = seq << PTPA_PEER_BITS | (uint64_t)dst, .sg_list = &sge, .num_sge = len ? 1 : 0,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, *bad;
		int r = emunic_shim_post_send(&p->b.dev->shim, qp, &wr, &bad);

		if (r)
			return emunic_err(r, "%s %llu: posting segment %u to peer %d (qp %u) failed: %s", p->kind->who,
					  (unsigned long long)seq, i, dst, qp->qp_num, strerror(-r));
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
		emunic_err(-EIO, "%s %llu: %s peer %d (qp %u) failed: %s", p->kind->who, (unsigned long long)seq,
			   recv ? "a receive from" : "a send to", q, wc->qp_num,
			   ibv_wc_status_str(wc->status));
	ptp_ops_fail(&p->ops, seq, -EIO);
}

/* Whether every segment of q's block in the oldest operation arrived:
 * every earlier message of q belongs to an earlier, completed one. */
static bool block_in(const struct emunic_ptp_a2a *p, const struct ptpa_op *o, int q)
{
	return p->in[q].arrived >= p->in[q].released + o->nseg;
}

/* The last step: every block into rbuf (lengths checked), the entries
 * released and their receives posted again. */
static int finish(struct emunic_ptp_a2a *p, const struct ptpa_op *o, uint64_t seq)
{
	unsigned char *rbuf = o->rbuf;

	if (rbuf && o->block)
		memcpy(rbuf + (size_t)p->b.rank * o->block,
		       slot_buf(p, seq) + (size_t)(p->nblk > 1 ? p->b.rank : 0) * o->block, o->block);
	for (int s = 1; s < p->b.size; s++) {
		int q = step_of(p, o, s).src;
		struct ptpa_ring *g;
		int r;

		if (q < 0)
			continue;
		g = &p->in[q];
		for (uint32_t i = 0; i < o->nseg; i++) {
			uint64_t k = g->released + i + 1;
			uint32_t got = g->len[entry(p, k)];

			if (got != seg_len(p, o, i))
				return emunic_err(-EBADMSG, "%s %llu (block %zu): segment %u from peer %d (qp %u) "
						  "has %u bytes, not %zu: do all ranks call with the same block?",
						  p->kind->who, (unsigned long long)seq, o->block, i, q,
						  p->b.mesh->conn[q].qp->qp_num, got, seg_len(p, o, i));
			if (got)
				memcpy(rbuf + (size_t)q * o->block + (size_t)i * p->seg, land(p, q, k), got);
		}
		g->released += o->nseg;
		if ((r = repost(p, q)))
			return r;
	}
	return 0;
}

/* Runs the oldest operation as far as what arrived allows, then the next. */
static int advance(struct emunic_ptp_a2a *p)
{
	while (p->ops.done < p->ops.posted && !p->ops.err) {
		uint64_t seq = p->ops.done + 1;
		const struct ptpa_op *o = &p->op[seq % PTPA_SLOTS];
		int r = 0;

		for (; p->step < p->b.size; p->step++, p->sent = false) {
			struct coll_xstep st = step_of(p, o, p->step);

			if (!p->sent && st.dst >= 0 && (r = send_block(p, o, seq, st.dst, st.blk)))
				break;
			p->sent = true;
			if (st.src >= 0 && !block_in(p, o, st.src))
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
	int r = p->b.q.cq ? ptp_cq_poll(&p->b.q, on_wc, p, p->kind->who) : 0;

	return r ? r : advance(p);
}

/* Names the oldest operation's step and every peer whose block is missing. */
static int report_timeout(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp_a2a *p = ctx;
	uint64_t old = p->ops.done + 1;
	const struct ptpa_op *o = &p->op[old % PTPA_SLOTS];
	char late[200] = "";
	size_t n = 0;

	for (int s = 1; s < p->b.size; s++) {
		int q = step_of(p, o, s).src;

		if (q < 0 || block_in(p, o, q))
			continue;
		if (n + 24 > sizeof(late)) {	/* room for one more and the ellipsis */
			strcpy(late + n, ", ...");
			break;
		}
		n += (size_t)snprintf(late + n, sizeof(late) - n, "%s%d", n ? ", " : "", q);
	}
	return emunic_err(-ETIMEDOUT, "%s %llu not complete after %d ms: %s %llu (block %zu) waits at step %d "
			  "of %d for peer %d; blocks not arrived from peers %s", p->kind->who,
			  (unsigned long long)seq, timeout_ms, p->kind->who, (unsigned long long)old, o->block,
			  p->step, p->b.size - 1, step_of(p, o, p->step).src, late);
}

static int wait_seq(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp_a2a *p = ctx;

	return ptp_cq_wait(&p->b.q, progress, report_timeout, p, &p->ops, seq, timeout_ms, p->b.spin_us,
			   p->kind->who);
}

static const char *kind_str(enum emunic_coll_kind k)
{
	return k == EMUNIC_COLL_ALLTOALL ? "alltoall" : k == EMUNIC_COLL_ALLGATHER ? "allgather" : "gather";
}

/* The call fits the object and its arguments are whole. */
static int check_args(const struct emunic_ptp_a2a *p, const struct ptpa_args *a)
{
	bool lands = a->kind != EMUNIC_COLL_GATHER || a->root == p->b.rank;	/* rbuf is used */

	if (a->kind != p->ckind)
		return emunic_err(-EINVAL, "%s: a%s %s call on a %s object", p->kind->who,
				  a->kind == EMUNIC_COLL_GATHER ? "" : "n", kind_str(a->kind), kind_str(p->ckind));
	if (a->kind == EMUNIC_COLL_GATHER && (a->root < 0 || a->root >= p->b.size))
		return emunic_err(-EINVAL, "%s: root %d is not a rank (size %d)", p->kind->who, a->root, p->b.size);
	if ((!a->sbuf || (lands && !a->rbuf)) && a->block)
		return emunic_err(-EINVAL, "%s: a NULL buffer for blocks of %zu bytes", p->kind->who, a->block);
	if (a->block > p->limit)
		return emunic_err(-EMSGSIZE, "%s: a block of %zu bytes, more than max_block (%zu)", p->kind->who,
				  a->block, p->limit);
	return 0;
}

/* Starts an operation: sbuf into its slot; runs what it can. */
static int start(void *ctx, const void *args, uint64_t *seq)
{
	struct emunic_ptp_a2a *p = ctx;
	const struct ptpa_args *a = args;
	uint64_t s = p->ops.posted + 1;
	struct ptpa_op *o = &p->op[s % PTPA_SLOTS];
	int r = check_args(p, a);

	if (r)
		return r;
	if (p->ops.err)
		return p->ops.err;
	/* Progress, not only a poll: a caller that retries on -ENOSPC
	 * without testing its oldest request still makes room. */
	if ((r = progress(p)))
		return r;
	if (p->ops.posted - p->ops.done >= PTPA_INFLIGHT || p->slot_out[s % PTPA_SLOTS])
		return -ENOSPC;
	*o = (struct ptpa_op){ .rbuf = a->kind != EMUNIC_COLL_GATHER || a->root == p->b.rank ? a->rbuf : NULL,
			       .block = a->block, .root = a->root };
	o->nseg = coll_nseg(p->seg, a->block);
	if (p->b.size == 1) {
		if (a->block)
			memmove(a->rbuf, a->sbuf, a->block);
		p->ops.posted = p->ops.done = *seq = s;
		return 0;
	}
	if (a->block)
		memcpy(slot_buf(p, s), a->sbuf, (size_t)p->nblk * a->block);
	p->ops.posted = *seq = s;
	return advance(p);
}

static const struct ptp_kind kinds[] = {
	{ "ptp alltoall", start, progress, wait_seq },
	{ "ptp allgather", start, progress, wait_seq },
	{ "ptp gather", start, progress, wait_seq },
};

/* The blocking calls and the i-calls of every kind. */
static int call(struct emunic_ptp_a2a *p, const struct ptpa_args *a, struct emunic_ptp_a2a_req **out)
{
	if (!p)
		return -EINVAL;
	return out ? ptp_req_start(p->kind, p, &p->ops, NULL, a, out) : ptp_call(p->kind, p, a, ptp_base_bound(&p->b));
}

int emunic_ptp_alltoall(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block)
{
	return call(p, &(struct ptpa_args){ EMUNIC_COLL_ALLTOALL, sbuf, rbuf, block, 0 }, NULL);
}

int emunic_ptp_ialltoall(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block,
			 struct emunic_ptp_a2a_req **out)
{
	return out ? call(p, &(struct ptpa_args){ EMUNIC_COLL_ALLTOALL, sbuf, rbuf, block, 0 }, out) : -EINVAL;
}

int emunic_ptp_allgather(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block)
{
	return call(p, &(struct ptpa_args){ EMUNIC_COLL_ALLGATHER, sbuf, rbuf, block, 0 }, NULL);
}

int emunic_ptp_iallgather(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block,
			  struct emunic_ptp_a2a_req **out)
{
	return out ? call(p, &(struct ptpa_args){ EMUNIC_COLL_ALLGATHER, sbuf, rbuf, block, 0 }, out) : -EINVAL;
}

int emunic_ptp_gather(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block, int root)
{
	return call(p, &(struct ptpa_args){ EMUNIC_COLL_GATHER, sbuf, rbuf, block, root }, NULL);
}

int emunic_ptp_igather(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block, int root,
		       struct emunic_ptp_a2a_req **out)
{
	return out ? call(p, &(struct ptpa_args){ EMUNIC_COLL_GATHER, sbuf, rbuf, block, root }, out) : -EINVAL;
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
	size_t total = PTPA_SLOTS * (size_t)p->nblk * p->max + (size_t)(p->b.size - 1) * p->ring * p->seg;

	p->in = calloc((size_t)p->b.size, sizeof(*p->in));
	if (!p->in)
		return -ENOMEM;
	for (int q = 0; q < p->b.size; q++)
		if (!(p->in[q].len = calloc(p->ring, sizeof(*p->in[q].len))))
			return -ENOMEM;
	p->step = 1;
	return ptp_base_alloc(&p->b, total);
}

/* Queues deep enough for every receive up and every send that can be
 * outstanding (a block to each peer from each slot); the device's limits
 * cap them. */
static int open_verbs(struct emunic_ptp_a2a *p)
{
	const struct ibv_device_attr *da;
	uint64_t sends = PTPA_SLOTS * (uint64_t)((p->ring - 2) / PTPA_INFLIGHT) + 16;
	uint64_t depth = (uint64_t)(p->b.size - 1) * (p->ring + sends) + 64;
	struct emunic_qp_opts qo;
	int r = emunic_vdev_open(NULL, &p->b.dev);

	if (r)
		return r;
	da = &p->b.dev->attr.orig_attr;
	emunic_qp_opts_default(&qo);
	qo.max_recv_wr = p->ring;
	qo.max_send_wr = (uint32_t)(sends < (uint64_t)da->max_qp_wr ? sends : (uint64_t)da->max_qp_wr);
	return ptp_base_connect(&p->b, (int)(depth < (uint64_t)da->max_cqe ? depth : (uint64_t)da->max_cqe), &qo,
				repost, p, p->kind->who);
}

static void ptp_a2a_free(struct emunic_ptp_a2a *p)
{
	ptp_base_fini(&p->b);
	for (int q = 0; p->in && q < p->b.size; q++)
		free(p->in[q].len);
	free(p->in);
	free(p);
}

int emunic_ptp_xchg_create(struct emunic_boot *boot, enum emunic_coll_kind kind, size_t max_block, size_t segment,
			   int timeout_ms, int spin_us, struct emunic_ptp_a2a **out)
{
	struct emunic_ptp_a2a *p;
	int r;

	if (!boot || !out || max_block > (1u << 30) ||
	    (kind != EMUNIC_COLL_ALLTOALL && kind != EMUNIC_COLL_ALLGATHER && kind != EMUNIC_COLL_GATHER))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ckind = kind;
	p->kind = &kinds[kind == EMUNIC_COLL_ALLTOALL ? 0 : kind == EMUNIC_COLL_ALLGATHER ? 1 : 2];
	ptp_base_init(&p->b, boot, timeout_ms, spin_us);
	p->nblk = coll_xchg_blocks(kind, p->b.size);
	set_sizes(p, max_block, segment);
	r = setup(p);
	if (!r && p->b.size > 1)
		r = open_verbs(p);
	if (r) {
		ptp_a2a_free(p);
		return r;
	}
	*out = p;
	return 0;
}

int emunic_ptp_a2a_create(struct emunic_boot *boot, size_t max_block, size_t segment, int timeout_ms, int spin_us,
			  struct emunic_ptp_a2a **out)
{
	return emunic_ptp_xchg_create(boot, EMUNIC_COLL_ALLTOALL, max_block, segment, timeout_ms, spin_us, out);
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
	r = ptp_cq_drain(&p->b.q, progress, sends_out, p, &p->ops, ptp_base_bound(&p->b), "send(s)", p->kind->who);
	ptp_a2a_free(p);
	return r;
}
