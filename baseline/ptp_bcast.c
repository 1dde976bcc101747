/* SPDX-License-Identifier: MIT */
/*
 * The host-progressed broadcast (see ptp.h): the offloaded bcast's binomial
 * tree (schedule.c's coll_bin_tree) and segments run by the application
 * thread over plain verbs, so the benchmark compares two ways of running one
 * algorithm.  The root sends each segment to its children in the tree's
 * order; any other rank forwards a segment to its children from where it
 * landed, once a poll saw it arrive, and copies the whole message into buf
 * in the step that finishes the bcast.
 *
 * Landing: every other rank can be a parent (the tree moves with the root),
 * so each peer q has a ring of R = 3 x Mseg + 2 entries of a segment each
 * (Mseg: the segments of the largest message): the k-th message from q
 * lands in entry (k - 1) % R.  A receive takes the next message whatever
 * its bcast, so receives are reposted strictly in order: receive k + R only
 * once message k's bcast completed (copied out) and its forwards completed.
 * A root that runs ahead of a slow rank finds its ring full and is held by
 * RNR retries (the mesh retries forever), never dropped.
 *
 * Bcasts run one at a time, oldest first; at most PTPB_INFLIGHT are in
 * flight.  A root's bcast is done once its sends are posted: it copied buf
 * into slot seq % PTPB_SLOTS, reused only once the sends from it completed.
 */
#include "baseline/ptp.h"
#include "baseline/ptp_cq.h"
#include "engines/coll/schedule.h"
#include "emunic/base/log.h"
#include "emunic/verbs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define PTPB_SLOTS 4
#define PTPB_INFLIGHT (PTPB_SLOTS - 1)
#define PTPB_DEFAULT_MAX (64 * 1024)
#define PTPB_DEFAULT_SEG (32 * 1024)
#define PTPB_MAX_SEGS 32	/* the segment is raised so a message has no more */
#define PTPB_MAX_CHILD 31	/* coll_bin_tree's bound */
/* wr_id: a receive is RECV | peer; a root's send seq << PEER_BITS | child;
 * a forward FWD | entry << ENTRY_SHIFT | child << PEER_BITS | ring's peer. */
#define PTPB_PEER_BITS 24
#define PTPB_PEER_MASK ((1ull << PTPB_PEER_BITS) - 1)
#define PTPB_ENTRY_SHIFT 48
#define PTPB_ENTRY_MASK 0xffull
#define PTPB_RECV_FLAG (1ull << 63)
#define PTPB_FWD_FLAG (1ull << 62)

struct ptpb_op {
	void *buf;
	size_t bytes;
	int root, parent, nchild;
	int child[PTPB_MAX_CHILD];
	uint32_t nseg;
};

/* What came from one peer: messages numbered from 1 in arrival order. */
struct ptpb_ring {
	uint64_t arrived;
	uint64_t released;		/* ... whose bcast completed */
	uint64_t posted;		/* receives posted for messages 1..posted */
	unsigned *fwd_out;		/* by entry: forwards from it not complete */
	uint32_t *len;			/* by entry: the bytes that landed */
	uint64_t *seq;			/* by entry: the bcast that used it, for error lines */
};

struct emunic_ptp_bc {
	struct ptp_base b;		/* mem: the slots, then the rings, peers in rank order */
	size_t limit;			/* max_bytes */
	size_t max;			/* ... rounded up: a slot's size */
	size_t seg;			/* a segment, a ring entry's size */
	uint32_t ring;			/* R, entries a peer */
	struct ptpb_ring *in;		/* by rank; in[rank] unused */
	struct ptpb_op op[PTPB_SLOTS];
	unsigned slot_out[PTPB_SLOTS];	/* the root's sends from each slot not complete */
	uint64_t sends_out;		/* every send not complete, for destroy */
	struct ptp_ops ops;		/* bcasts, numbered from 1; the first failure */
	uint32_t cur_seg;		/* the oldest bcast: segments sent or forwarded */
};

struct emunic_ptp_bc_req {
	struct ptp_req r;
};

/* A bcast call's arguments. */
struct ptpb_args {
	void *buf;
	size_t bytes;
	int root;
};

static unsigned char *slot_buf(const struct emunic_ptp_bc *p, uint64_t seq)
{
	return p->b.mem + (seq % PTPB_SLOTS) * p->max;
}

static uint32_t entry(const struct emunic_ptp_bc *p, uint64_t k)
{
	return (uint32_t)((k - 1) % p->ring);
}

/* Where message k (from 1) of rank q lands. */
static unsigned char *land(const struct emunic_ptp_bc *p, int q, uint64_t k)
{
	size_t peer = (size_t)(q < p->b.rank ? q : q - 1);

	return p->b.mem + PTPB_SLOTS * p->max + (peer * p->ring + entry(p, k)) * p->seg;
}

static size_t seg_len(const struct emunic_ptp_bc *p, const struct ptpb_op *o, uint32_t i)
{
	size_t off = (size_t)i * p->seg;

	return o->bytes - off < p->seg ? o->bytes - off : p->seg;
}

static int post_recv(struct emunic_ptp_bc *p, int q, uint64_t k)
{
	struct ibv_sge sge = { .addr = (uintptr_t)land(p, q, k), .length = (uint32_t)p->seg, .lkey = p->b.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = PTPB_RECV_FLAG | (uint64_t)q, .sg_list = &sge, .num_sge = 1 }, *bad;
	int r = emunic_shim_post_recv(&p->b.dev->shim, p->b.mesh->conn[q].qp, &wr, &bad);

	return r ? emunic_err(r, "ptp bcast: peer %d: posting a receive failed: %s", q, strerror(-r)) : 0;
}

/* Posts q's receives whose entries are free, in message order: the RQ
 * fills them first in, first out, so one held entry holds the rest.  Also
 * create's first receives (ptp_base_connect), hence ctx. */
static int repost(void *ctx, int q)
{
	struct emunic_ptp_bc *p = ctx;
	struct ptpb_ring *g = &p->in[q];

	/* After a failure the QPs are flushing: posting adds nothing. */
	while (!p->ops.err) {
		uint64_t k = g->posted + 1, prev = k > p->ring ? k - p->ring : 0;
		int r;

		if (prev && (prev > g->released || g->fwd_out[entry(p, prev)]))
			return 0;
		if ((r = post_recv(p, q, k)))
			return r;
		g->posted = k;
	}
	return 0;
}

static int post_send(struct emunic_ptp_bc *p, int to, uint64_t wr_id, uint64_t seq, const void *buf, size_t bytes)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = (uint32_t)bytes, .lkey = p->b.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = bytes ? 1 : 0,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int r = emunic_shim_post_send(&p->b.dev->shim, p->b.mesh->conn[to].qp, &wr, &bad);

	if (r)
		return emunic_err(r, "ptp bcast %llu: posting a send to peer %d failed: %s", (unsigned long long)seq,
				  to, strerror(-r));
	p->sends_out++;
	return 0;
}

static void on_recv(struct emunic_ptp_bc *p, const struct ibv_wc *wc)
{
	int q = (int)(wc->wr_id & PTPB_PEER_MASK);
	struct ptpb_ring *g = &p->in[q];
	uint64_t seq = p->ops.done + 1;

	if (wc->status == IBV_WC_SUCCESS) {
		g->len[entry(p, g->arrived + 1)] = wc->byte_len;
		g->arrived++;
		return;
	}
	/* One line for the cause; the flushes after it say nothing new. */
	if (wc->status != IBV_WC_WR_FLUSH_ERR || !p->ops.err)
		emunic_err(-EIO, "ptp bcast %llu: receive from peer %d (qp %u) failed: %s", (unsigned long long)seq, q,
			   wc->qp_num, ibv_wc_status_str(wc->status));
	ptp_ops_fail(&p->ops, seq, -EIO);
}

static void on_send(struct emunic_ptp_bc *p, const struct ibv_wc *wc)
{
	bool fwd = wc->wr_id & PTPB_FWD_FLAG;
	int to = (int)((wc->wr_id >> (fwd ? PTPB_PEER_BITS : 0)) & PTPB_PEER_MASK);
	uint64_t seq;
	int r = 0;

	p->sends_out--;
	if (fwd) {
		int q = (int)(wc->wr_id & PTPB_PEER_MASK);
		uint32_t e = (uint32_t)((wc->wr_id >> PTPB_ENTRY_SHIFT) & PTPB_ENTRY_MASK);

		seq = p->in[q].seq[e];
		if (!--p->in[q].fwd_out[e])
			r = repost(p, q);
	} else {
		seq = (wc->wr_id & ~PTPB_FWD_FLAG) >> PTPB_PEER_BITS;
		p->slot_out[seq % PTPB_SLOTS]--;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR || !p->ops.err)
			emunic_err(-EIO, "ptp bcast %llu: %s a segment to peer %d (qp %u) failed: %s",
				   (unsigned long long)seq, fwd ? "forwarding" : "sending", to, wc->qp_num,
				   ibv_wc_status_str(wc->status));
		r = -EIO;
	}
	if (r)
		ptp_ops_fail(&p->ops, seq, r);
}

static void on_wc(void *ctx, const struct ibv_wc *wc)
{
	if (wc->wr_id & PTPB_RECV_FLAG)
		on_recv(ctx, wc);
	else
		on_send(ctx, wc);
}

static int poll_cq(struct emunic_ptp_bc *p)
{
	return ptp_cq_poll(&p->b.q, on_wc, p, "ptp bcast");
}

/* The root: every segment to every child, from its slot. */
static int send_root(struct emunic_ptp_bc *p, const struct ptpb_op *o, uint64_t seq)
{
	const unsigned char *src = slot_buf(p, seq);

	for (; p->cur_seg < o->nseg; p->cur_seg++)
		for (int c = 0; c < o->nchild; c++) {
			uint64_t id = seq << PTPB_PEER_BITS | (uint64_t)o->child[c];
			int r = post_send(p, o->child[c], id, seq, src + (size_t)p->cur_seg * p->seg,
					  seg_len(p, o, p->cur_seg));

			if (r)
				return r;
			p->slot_out[seq % PTPB_SLOTS]++;
		}
	return 0;
}

/* Segment i of bcast seq is message base + i + 1 of its parent: every
 * earlier message of the parent belongs to an earlier, completed bcast. */
static int check_len(const struct emunic_ptp_bc *p, const struct ptpb_op *o, uint64_t seq, uint64_t k)
{
	uint32_t got = p->in[o->parent].len[entry(p, k)];

	if (got == seg_len(p, o, p->cur_seg))
		return 0;
	return emunic_err(-EBADMSG, "ptp bcast %llu (root %d, %zu bytes): segment %u from peer %d has %u bytes, "
			  "not %zu: do all ranks call with the same root and bytes?", (unsigned long long)seq, o->root,
			  o->bytes, p->cur_seg, o->parent, got, seg_len(p, o, p->cur_seg));
}

/* A non-root: every segment that arrived, on to each child from where it
 * landed, the entry held until those sends complete. */
static int forward(struct emunic_ptp_bc *p, const struct ptpb_op *o, uint64_t seq)
{
	struct ptpb_ring *g = &p->in[o->parent];

	for (; p->cur_seg < o->nseg && g->arrived > g->released + p->cur_seg; p->cur_seg++) {
		uint64_t k = g->released + p->cur_seg + 1;
		uint32_t e = entry(p, k);
		int r = check_len(p, o, seq, k);

		g->seq[e] = seq;
		for (int c = 0; !r && c < o->nchild; c++) {
			uint64_t id = PTPB_FWD_FLAG | (uint64_t)e << PTPB_ENTRY_SHIFT |
				      (uint64_t)o->child[c] << PTPB_PEER_BITS | (uint64_t)o->parent;

			r = post_send(p, o->child[c], id, seq, land(p, o->parent, k), g->len[e]);
			g->fwd_out[e] += !r;
		}
		if (r)
			return r;
	}
	return 0;
}

/* A non-root's last step: the segments into buf; their entries are
 * released (reposted once their forwards completed too). */
static int finish(struct emunic_ptp_bc *p, const struct ptpb_op *o)
{
	struct ptpb_ring *g = &p->in[o->parent];

	for (uint32_t i = 0; o->bytes && i < o->nseg; i++)
		memcpy((unsigned char *)o->buf + (size_t)i * p->seg, land(p, o->parent, g->released + i + 1),
		       seg_len(p, o, i));
	g->released += o->nseg;
	return repost(p, o->parent);
}

/* Runs the oldest bcast as far as what arrived allows, then the next. */
static int advance(struct emunic_ptp_bc *p)
{
	while (p->ops.done < p->ops.posted && !p->ops.err) {
		uint64_t seq = p->ops.done + 1;
		const struct ptpb_op *o = &p->op[seq % PTPB_SLOTS];
		int r = o->parent < 0 ? send_root(p, o, seq) : forward(p, o, seq);

		if (!r && p->cur_seg < o->nseg)
			return 0;
		if (!r && o->parent >= 0)
			r = finish(p, o);
		if (r) {
			ptp_ops_fail(&p->ops, seq, r);
			return r;
		}
		p->ops.done = seq;
		p->cur_seg = 0;
	}
	return 0;
}

static int progress(void *ctx)
{
	struct emunic_ptp_bc *p = ctx;
	int r = p->b.q.cq ? poll_cq(p) : 0;

	return r ? r : advance(p);
}

static int report_timeout(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp_bc *p = ctx;
	const struct ptpb_op *o = &p->op[(p->ops.done + 1) % PTPB_SLOTS];

	if (seq != p->ops.done + 1 || o->parent < 0)
		return emunic_err(-ETIMEDOUT, "ptp bcast %llu not complete after %d ms (bcast %llu is the oldest)",
				  (unsigned long long)seq, timeout_ms, (unsigned long long)p->ops.done + 1);
	return emunic_err(-ETIMEDOUT, "ptp bcast %llu (root %d, %zu bytes) not complete after %d ms: "
			  "segment %u of %u from peer %d has not arrived", (unsigned long long)seq, o->root,
			  o->bytes, timeout_ms, p->cur_seg, o->nseg, o->parent);
}

static int wait_seq(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp_bc *p = ctx;

	return ptp_cq_wait(&p->b.q, progress, report_timeout, p, &p->ops, seq, timeout_ms, p->b.spin_us, "ptp bcast");
}

static int check_args(const struct emunic_ptp_bc *p, const void *buf, size_t bytes, int root)
{
	if (root < 0 || root >= p->b.size)
		return emunic_err(-EINVAL, "ptp bcast: root %d is not a rank (0..%d)", root, p->b.size - 1);
	if (!buf && bytes)
		return emunic_err(-EINVAL, "ptp bcast: a NULL buffer for %zu bytes", bytes);
	if (bytes > p->limit)
		return emunic_err(-EMSGSIZE, "ptp bcast: %zu bytes, more than max_bytes (%zu)", bytes, p->limit);
	return 0;
}

/* Starts a bcast: the root copies buf into its slot; runs what it can. */
static int start(void *ctx, const void *args, uint64_t *seq)
{
	struct emunic_ptp_bc *p = ctx;
	const struct ptpb_args *a = args;
	uint64_t s = p->ops.posted + 1;
	struct ptpb_op *o = &p->op[s % PTPB_SLOTS];
	int r = check_args(p, a->buf, a->bytes, a->root);

	if (r)
		return r;
	if (p->ops.err)
		return p->ops.err;
	/* Progress, not only a poll: a caller that retries on -ENOSPC
	 * without testing its oldest request still makes room. */
	r = progress(p);
	if (r)
		return r;
	if (p->ops.posted - p->ops.done >= PTPB_INFLIGHT || (a->root == p->b.rank && p->slot_out[s % PTPB_SLOTS]))
		return -ENOSPC;
	*o = (struct ptpb_op){ .buf = a->buf, .bytes = a->bytes, .root = a->root };
	o->nseg = a->bytes ? (uint32_t)((a->bytes + p->seg - 1) / p->seg) : 1;
	o->nchild = coll_bin_tree(p->b.rank, p->b.size, a->root, &o->parent, o->child);
	if (a->root == p->b.rank && a->bytes && p->b.size > 1)
		memcpy(slot_buf(p, s), a->buf, a->bytes);
	if (p->b.size == 1) {
		p->ops.posted = p->ops.done = s;
		*seq = s;
		return 0;
	}
	p->ops.posted = *seq = s;
	return advance(p);
}

static const struct ptp_kind kind = { "ptp bcast", start, progress, wait_seq };

int emunic_ptp_bcast(struct emunic_ptp_bc *p, void *buf, size_t bytes, int root)
{
	const struct ptpb_args a = { buf, bytes, root };

	return p ? ptp_call(&kind, p, &a, ptp_base_bound(&p->b)) : -EINVAL;
}

int emunic_ptp_ibcast(struct emunic_ptp_bc *p, void *buf, size_t bytes, int root, struct emunic_ptp_bc_req **out)
{
	const struct ptpb_args a = { buf, bytes, root };

	return p ? ptp_req_start(&kind, p, &p->ops, NULL, &a, out) : -EINVAL;
}

int emunic_ptp_bc_test(struct emunic_ptp_bc_req *req)
{
	return ptp_req_test((struct ptp_req *)req);
}

int emunic_ptp_bc_wait(struct emunic_ptp_bc_req *req, int timeout_ms)
{
	return ptp_req_wait((struct ptp_req *)req, timeout_ms);
}

/* ---- create / destroy ---------------------------------------------------- */

/* The segment: as the offload's (ptp.h), and never more than a message
 * needs (a larger one cuts nothing more, it only makes the rings larger). */
/* The segment and the ring: the offload's own rules (engines/coll/schedule.h). */
static void set_sizes(struct emunic_ptp_bc *p, size_t max_bytes, size_t segment)
{
	p->limit = max_bytes ? max_bytes : PTPB_DEFAULT_MAX;
	p->max = coll_round64(p->limit);
	p->seg = coll_seg_bytes(segment, PTPB_DEFAULT_SEG, p->limit, PTPB_MAX_SEGS);
	p->ring = PTPB_INFLIGHT * coll_nseg(p->seg, p->limit) + 2;
}

static int setup(struct emunic_ptp_bc *p)
{
	size_t total = PTPB_SLOTS * p->max + (size_t)(p->b.size - 1) * p->ring * p->seg;

	p->in = calloc((size_t)p->b.size, sizeof(*p->in));
	if (!p->in)
		return -ENOMEM;
	for (int q = 0; q < p->b.size; q++) {
		struct ptpb_ring *g = &p->in[q];

		g->fwd_out = calloc(p->ring, sizeof(*g->fwd_out));
		g->len = calloc(p->ring, sizeof(*g->len));
		g->seq = calloc(p->ring, sizeof(*g->seq));
		if (!g->fwd_out || !g->len || !g->seq)
			return -ENOMEM;
	}
	return ptp_base_alloc(&p->b, total);
}

static uint32_t min_u32(uint64_t a, uint64_t b)
{
	return (uint32_t)(a < b ? a : b);
}

/* Queues deep enough for every receive up and every send that can be
 * outstanding: the root's slots to each child, and a forward from each held
 * entry to each child (at most ceil(log2 size) children); the device's
 * limits cap them. */
static void queue_sizes(const struct emunic_ptp_bc *p, struct emunic_qp_opts *o, int *cq_depth)
{
	uint64_t mseg = (p->ring - 2) / PTPB_INFLIGHT, held = (uint64_t)(p->b.size - 1) * p->ring;
	uint64_t per_child = PTPB_SLOTS * mseg + held, nchild = 0, depth;

	while ((1ull << nchild) < (uint64_t)p->b.size)
		nchild++;
	depth = held + per_child * nchild + 64;
	emunic_qp_opts_default(o);
	o->max_recv_wr = p->ring;
	o->max_send_wr = min_u32(per_child + 16, (uint64_t)p->b.dev->attr.orig_attr.max_qp_wr);
	*cq_depth = (int)min_u32(depth, (uint64_t)p->b.dev->attr.orig_attr.max_cqe);
}

static int open_verbs(struct emunic_ptp_bc *p)
{
	struct emunic_qp_opts qo;
	int depth, r = emunic_vdev_open(NULL, &p->b.dev);

	if (r)
		return r;
	queue_sizes(p, &qo, &depth);
	return ptp_base_connect(&p->b, depth, &qo, repost, p, "ptp bcast");
}

static void ptp_bc_free(struct emunic_ptp_bc *p)
{
	ptp_base_fini(&p->b);
	for (int q = 0; p->in && q < p->b.size; q++) {
		free(p->in[q].fwd_out);
		free(p->in[q].len);
		free(p->in[q].seq);
	}
	free(p->in);
	free(p);
}

int emunic_ptp_bc_create(struct emunic_boot *boot, size_t max_bytes, size_t segment, int timeout_ms, int spin_us,
			 struct emunic_ptp_bc **out)
{
	struct emunic_ptp_bc *p;
	int r;

	if (!boot || !out || max_bytes > (1u << 30))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	ptp_base_init(&p->b, boot, timeout_ms, spin_us);
	set_sizes(p, max_bytes, segment);
	r = setup(p);
	if (!r && p->b.size > 1)
		r = open_verbs(p);
	if (r) {
		ptp_bc_free(p);
		return r;
	}
	*out = p;
	return 0;
}

static uint64_t sends_out(void *ctx)
{
	return ((struct emunic_ptp_bc *)ctx)->sends_out;
}

/* Every send must be delivered before the QPs go: a child still waiting
 * for a forward would never get it. */
int emunic_ptp_bc_destroy(struct emunic_ptp_bc *p)
{
	int r;

	if (!p)
		return -EINVAL;
	r = ptp_cq_drain(&p->b.q, progress, sends_out, p, &p->ops, ptp_base_bound(&p->b), "send(s)", "ptp bcast");
	ptp_bc_free(p);
	return r;
}
