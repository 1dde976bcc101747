/* SPDX-License-Identifier: MIT */
/*
 * The offloaded exchanges: alltoall, allgather and gather (LibNBC's
 * schedules, seeds 000 and 001), one engine, each operation one sequence of
 * tasks on the management queue.  schedule.c's coll_xchg_step says, per
 * kind, whom a rank sends to at step s = 1 .. size - 1 and whose block it
 * then waits for:
 *
 *   SEND(slot block, segment i) SEND_EN    for each segment i   (a send)
 *   WAIT(src, segments)                                          (a wait)
 *   (the last task SIGNAL: its MQ completion is the operation's)
 *
 * alltoall: pairwise exchange, the block for rank + s, waiting for rank - s,
 * so step s + 1's sends are released only once step s's block arrived (one
 * peer at a time, as the host algorithm, without the app); allgather: the
 * same, sending the rank's own block every step; gather: a non-root only
 * sends, so its gather completes when its sends are handed to verbs (as a
 * bcast's root: no round trip; a failed send fails its next one), and the
 * root waits for each peer in turn.  The sequence is one task list, or
 * consecutive lists where longer than the device's limit (coll_post_lists:
 * seed 001's split).
 *
 * Blocks land in ring.h's landing rings, one per peer (any rank may be a
 * gather's root); an operation's entries are given back once it was copied
 * out and its sends completed (they read the slot, which must not be reused
 * before).  The caller's sbuf is copied into one of XG_SLOTS slots when
 * posted.
 */
#include "engines/coll/coll_int.h"
#include "engines/coll/ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XG_SLOTS 4
#define XG_INFLIGHT (XG_SLOTS - 1)
#define XG_DEFAULT_MAX (64 * 1024)
#define XG_DEFAULT_SEG (32 * 1024)
#define XG_MAX_SEGS 32		/* per block: bounds the rings and QP depths */

struct xg_slot {
	uint64_t seq;			/* the operation using it */
	unsigned nseg;			/* segments of each block */
	size_t block;
	int root;			/* a gather's */
	void *rbuf;			/* the caller's; NULL: nothing lands here */
	uint64_t *first;		/* by peer: its first message of this operation */
	unsigned *segs;			/* by peer: its messages in it (0: it sends none here) */
	unsigned nsends;		/* its sends (build_list) */
};

struct coll_xg {
	enum emunic_coll_kind kind;
	int nblk;			/* blocks in a copy of sbuf */
	size_t limit;			/* max_bytes: the largest block */
	size_t seg;
	unsigned mseg;			/* segments of the largest block */
	unsigned char *mem;		/* the slots (nblk blocks each), then the rings */
	struct emunic_mr *mr;
	struct coll_rings rs;
	struct xg_slot slot[XG_SLOTS];
};

/* Where seq's copy of block k of sbuf is. */
static unsigned char *block_mem(const struct emunic_coll *c, uint64_t seq, int k)
{
	size_t stride = coll_round64(c->xg->limit);

	return c->xg->mem + ((seq % XG_SLOTS) * (size_t)c->xg->nblk + (size_t)k) * stride;
}

static size_t seg_len(const struct coll_xg *x, const struct xg_slot *sl, unsigned i)
{
	size_t off = (size_t)i * x->seg;

	return sl->block - off < x->seg ? sl->block - off : x->seg;
}

static int xg_setup(struct emunic_coll *c)
{
	struct coll_xg *x;
	unsigned peers = (unsigned)c->size - 1;
	int r;

	if (c->attr.conn != EMUNIC_COLL_DENSE)
		return coll_err(c, -EINVAL, "%s: every pair exchanges data: create it with conn DENSE", c->alg->name);
	c->xg = x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->kind = c->attr.kind;
	x->nblk = coll_xchg_blocks(x->kind, c->size);
	for (int q = 0; q < c->size; q++)
		c->peer[q].partner = q != c->rank;
	for (int k = 0; k < XG_SLOTS; k++) {
		x->slot[k].first = calloc((size_t)c->size, sizeof(uint64_t));
		x->slot[k].segs = calloc((size_t)c->size, sizeof(unsigned));
		if (!x->slot[k].first || !x->slot[k].segs)
			return -ENOMEM;
	}
	x->limit = c->attr.max_bytes ? c->attr.max_bytes : XG_DEFAULT_MAX;
	x->seg = coll_seg_bytes(c->attr.segment, XG_DEFAULT_SEG, x->limit, XG_MAX_SEGS);
	x->mseg = coll_nseg(x->seg, x->limit);
	/* A ring holds what three operations in flight bring from a peer,
	 * and a spare: a peer further ahead meets RNR until this rank posts. */
	r = coll_rings_init(&x->rs, c, x->seg, XG_INFLIGHT * x->mseg + 2);
	if (r)
		return r;
	/* A sequence: the receives given back (at most a full ring per peer),
	 * then per step at most a SEND + SEND_EN per segment and a WAIT. */
	c->ntask = peers * x->rs.nring + peers * (2 * x->mseg + 1);
	c->nsend = peers * x->mseg;
	c->inflight = XG_INFLIGHT;
	c->task = calloc(c->ntask, sizeof(*c->task));
	if (!c->task)
		return -ENOMEM;
	if (c->size == 1)
		return 0;
	return coll_rings_alloc(&x->rs, c, XG_SLOTS * (size_t)x->nblk * coll_round64(x->limit), x->limit, &x->mem,
				&x->mr);
}

/* An operation done (copied out) gives its entries back once its sends,
 * which read its slot, completed (coll_rings_reclaim). */
static bool give_back(struct emunic_coll *c, uint64_t seq)
{
	struct coll_xg *x = c->xg;
	const struct xg_slot *sl = &x->slot[seq % XG_SLOTS];

	if (sl->seq != seq)
		return true;		/* it holds nothing */
	if (!coll_sends_done(c, seq))
		return false;
	for (int q = 0; q < c->size; q++)
		x->rs.ring[q].freed += sl->segs[q];
	return true;
}

/* The steps' sends and waits (schedule.c's coll_xchg_step); segs[] says
 * whose messages the operation takes. */
static void build_list(struct emunic_coll *c, unsigned *n, struct xg_slot *sl)
{
	struct coll_xg *x = c->xg;

	sl->nsends = 0;
	for (int s = 1; s < c->size; s++) {
		struct coll_xstep st;
		struct emunic_task *t;

		coll_xchg_step(x->kind, c->rank, c->size, sl->root, s, &st);
		for (unsigned i = 0; st.dst >= 0 && i < sl->nseg; i++) {
			t = coll_task_add(c, n, EMUNIC_TASK_SEND, st.dst, sl->seq, x->mr);
			t->addr = block_mem(c, sl->seq, st.blk) + (size_t)i * x->seg;
			t->len = (uint32_t)seg_len(x, sl, i);
			t = coll_task_add(c, n, EMUNIC_TASK_SEND_EN, st.dst, sl->seq, x->mr);
			t->count = 1;
			sl->nsends++;
		}
		if (st.src < 0)
			continue;
		sl->segs[st.src] = sl->nseg;
		coll_task_wait(c, n, st.src, sl->seq, sl->nseg);
	}
	c->task[*n - 1].flags |= EMUNIC_TASK_SIGNAL;
}

static int check_args(struct emunic_coll *c, const struct coll_args *ar, uint64_t s)
{
	bool gather = ar->kind == EMUNIC_COLL_GATHER;
	bool lands = !gather || ar->root == c->rank;	/* rbuf is used */

	if (gather && (ar->root < 0 || ar->root >= c->size))
		return coll_err(c, -EINVAL, "gather %llu: root %d is not a rank (size %d)", (unsigned long long)s,
				ar->root, c->size);
	if (ar->count && (!ar->sbuf || (lands && !ar->rbuf)))
		return coll_err(c, -EINVAL, "%s %llu: a NULL %s for blocks of %zu bytes", c->alg->name,
				(unsigned long long)s, ar->sbuf ? "rbuf" : "sbuf", ar->count);
	if (ar->count > c->xg->limit)
		return coll_err(c, -EMSGSIZE, "%s %llu: blocks of %zu bytes are more than max_bytes (%zu)",
				c->alg->name, (unsigned long long)s, ar->count, c->xg->limit);
	return 0;
}

/* Room for seq (0), or why not: fewer than XG_INFLIGHT in flight, its
 * slot's last operation given back, and (known once its list is built)
 * every ring it takes messages from free for them. */
static enum coll_full room(const struct emunic_coll *c, uint64_t s, const struct xg_slot *sl)
{
	const struct coll_xg *x = c->xg;

	if (!sl)
		return c->posted - c->done >= XG_INFLIGHT ? COLL_FULL_INFLIGHT
		       : s > XG_SLOTS && x->rs.reclaimed < s - XG_SLOTS ? COLL_FULL_SLOTS : 0;
	for (int q = 0; q < c->size; q++)
		if (x->rs.ring[q].used + sl->segs[q] > x->rs.ring[q].freed + x->rs.nring)
			return COLL_FULL_SLOTS;
	return 0;
}

/* A job of one: the data is the caller's own. */
static void post_alone(struct emunic_coll *c, const struct coll_args *ar, uint64_t s)
{
	if (ar->count && ar->rbuf != ar->sbuf)
		memmove(ar->rbuf, ar->sbuf, ar->count);
	c->posted = c->done = s;
}

static int xg_post(struct emunic_coll *c, const struct coll_args *ar, uint64_t *seq)
{
	struct coll_xg *x = c->xg;
	uint64_t s = c->posted + 1;
	unsigned n = 0;
	struct xg_slot *sl = &x->slot[s % XG_SLOTS];
	enum coll_full full;
	int r;

	r = check_args(c, ar, s);
	if (r)
		return r;
	*seq = s;
	if (c->size == 1) {
		post_alone(c, ar, s);
		return 0;
	}
	coll_rings_reclaim(&x->rs, c, give_back);
	if ((full = room(c, s, NULL)))
		return coll_no_room(c, full);
	*sl = (struct xg_slot){ .seq = s, .nseg = coll_nseg(x->seg, ar->count), .block = ar->count, .root = ar->root,
				.rbuf = ar->kind != EMUNIC_COLL_GATHER || ar->root == c->rank ? ar->rbuf : NULL,
				.first = sl->first, .segs = sl->segs };
	memset(sl->segs, 0, (size_t)c->size * sizeof(*sl->segs));
	/* The copy first: the core may send from it as soon as it is posted. */
	for (int k = 0; k < x->nblk && ar->count; k++)
		memcpy(block_mem(c, s, k), (const unsigned char *)ar->sbuf + (size_t)k * ar->count, ar->count);
	coll_rings_add_recvs(c, &x->rs, &n, s);
	build_list(c, &n, sl);
	r = (full = room(c, s, sl)) ? coll_no_room(c, full) : coll_post_lists(c, n, s);
	if (r) {
		sl->seq = 0;
		return r == -ENOSPC ? r : coll_err(c, r, "%s %llu: posting its %u tasks failed (%d)", c->alg->name,
						    (unsigned long long)s, n, r);
	}
	coll_rings_commit(&x->rs, c->size);
	for (int q = 0; q < c->size; q++) {
		sl->first[q] = x->rs.ring[q].used;
		x->rs.ring[q].used += sl->segs[q];
	}
	c->posted = s;
	coll_sends_add(c, s, sl->nsends);
	return 0;
}

static int xg_prepost(struct emunic_coll *c)
{
	return coll_rings_prepost(c, &c->xg->rs, c->alg->name);
}

/* Every peer's block out of its ring, this rank's own out of the slot. */
static void xg_complete(struct emunic_coll *c, uint64_t seq)
{
	struct coll_xg *x = c->xg;
	struct xg_slot *sl = &x->slot[seq % XG_SLOTS];

	if (sl->seq != seq || !sl->block || !sl->rbuf)
		return;
	memcpy((unsigned char *)sl->rbuf + (size_t)c->rank * sl->block,
	       block_mem(c, seq, x->nblk > 1 ? c->rank : 0), sl->block);
	for (int q = 0; q < c->size; q++) {
		unsigned char *to = (unsigned char *)sl->rbuf + (size_t)q * sl->block;

		for (unsigned i = 0; i < sl->segs[q]; i++)
			memcpy(to + (size_t)i * x->seg, coll_ring_entry(&x->rs, q, sl->first[q] + i),
			       seg_len(x, sl, i));
	}
}

/* A timed-out operation: the peers whose blocks did not all come. */
static int xg_late(const struct emunic_coll *c, uint64_t seq, char *buf, size_t len)
{
	const struct xg_slot *sl = &c->xg->slot[seq % XG_SLOTS];
	int at = 0;

	if (sl->seq != seq)
		return 0;
	for (int q = 0; q < c->size && (size_t)at < len; q++) {
		uint64_t got;

		if (!sl->segs[q])
			continue;
		got = emunic_cq_count(c->peer[q].rcq);
		if (got < sl->first[q] + sl->segs[q])
			at += snprintf(buf + at, len - (size_t)at, " %d (segments %llu of %u)", q,
				       (unsigned long long)(got > sl->first[q] ? got - sl->first[q] : 0), sl->segs[q]);
	}
	return (size_t)at < len ? at : (int)len - 1;
}

static void xg_fini(struct emunic_coll *c)
{
	struct coll_xg *x = c->xg;

	if (!x)
		return;
	coll_mem_free(x->mem, x->mr);
	coll_rings_fini(&x->rs);
	for (int k = 0; k < XG_SLOTS; k++) {
		free(x->slot[k].first);
		free(x->slot[k].segs);
	}
	free(x);
	c->xg = NULL;
}

/* One engine, three names (in error lines and the kind check). */
#define XG_ALG(nm) { .name = nm, .splits = true, .setup = xg_setup, .prepost = xg_prepost, .post = xg_post, \
		     .fence = coll_send_fence, .complete = xg_complete, .late = xg_late, \
		     .fini = xg_fini }
const struct coll_alg coll_alltoall_alg = XG_ALG("alltoall");
const struct coll_alg coll_allgather_alg = XG_ALG("allgather");
const struct coll_alg coll_gather_alg = XG_ALG("gather");
