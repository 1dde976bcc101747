/* SPDX-License-Identifier: MIT */
/*
 * The offloaded all-to-all: pairwise exchange (seed 001), each alltoall one
 * sequence of tasks on the management queue.  For step s = 1 .. size - 1,
 * with dst = rank + s and src = rank - s (mod size):
 *
 *   SEND(slot + dst's block, segment i) SEND_EN    for each segment i
 *   WAIT(src, segments)                            (the last one SIGNAL)
 *
 * so step s + 1's sends are released only once src's whole block of step s
 * arrived: one peer at a time, as the host algorithm does, without the app.
 * The sequence is one task list, or consecutive lists where it is longer
 * than the device's list limit (coll_post_lists: seed 001's split).
 *
 * Blocks land in ring.h's landing rings, one per peer; an alltoall's
 * entries are given back once it was copied out and its sends completed
 * (they read the slot, which must not be reused before).  The caller's
 * sbuf is copied into one of A2A_SLOTS slots when posted.
 */
#include "engines/coll/coll_int.h"
#include "engines/coll/ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define A2A_SLOTS 4
#define A2A_INFLIGHT (A2A_SLOTS - 1)
#define A2A_DEFAULT_MAX (64 * 1024)
#define A2A_DEFAULT_SEG (32 * 1024)
#define A2A_MAX_SEGS 32		/* per block: bounds the rings and QP depths */

struct a2a_slot {
	uint64_t seq;			/* the alltoall using it */
	unsigned nseg;			/* segments of each block */
	size_t block;
	void *rbuf;			/* the caller's */
	uint64_t *first;		/* by peer: its first message of this alltoall */
	uint64_t sends_posted, sends_done;
};

struct coll_a2a {
	size_t limit;			/* max_bytes: the largest block */
	size_t seg;
	unsigned mseg;			/* segments of the largest block */
	unsigned char *mem;		/* the slots (size blocks each), then the rings */
	size_t mem_bytes;
	struct emunic_mr *mr;
	struct coll_rings rs;
	uint64_t reclaimed;		/* alltoalls whose entries were given back */
	struct a2a_slot slot[A2A_SLOTS];
};

/* Where seq's copy of the block for peer q is. */
static unsigned char *block_mem(const struct emunic_coll *c, uint64_t seq, int q)
{
	size_t stride = coll_round64(c->a2a->limit);

	return c->a2a->mem + ((seq % A2A_SLOTS) * (size_t)c->size + (size_t)q) * stride;
}

static int a2a_alloc(struct emunic_coll *c, struct coll_a2a *a)
{
	size_t slots = A2A_SLOTS * (size_t)c->size * coll_round64(a->limit);
	int r;

	a->mem_bytes = slots + coll_rings_bytes(&a->rs, c);
	a->mem = aligned_alloc(4096, (a->mem_bytes + 4095) & ~(size_t)4095);
	if (!a->mem)
		return coll_err(c, -ENOMEM, "alltoall: no memory for %zu bytes of buffers (max_bytes %zu)",
				a->mem_bytes, a->limit);
	memset(a->mem, 0, a->mem_bytes);
	r = emunic_mr_reg(c->dev, a->mem, a->mem_bytes, &a->mr);
	if (r)
		return coll_err(c, r, "alltoall: registering %zu bytes of buffers failed (%d)", a->mem_bytes, r);
	coll_rings_place(&a->rs, c, a->mem + slots, a->mr);
	return 0;
}

static int a2a_setup(struct emunic_coll *c)
{
	struct coll_a2a *a;
	unsigned peers = (unsigned)c->size - 1;
	int r;

	if (c->attr.conn != EMUNIC_COLL_DENSE)
		return coll_err(c, -EINVAL, "alltoall: every pair exchanges data: create it with conn DENSE");
	c->a2a = a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	for (int q = 0; q < c->size; q++)
		c->peer[q].partner = q != c->rank;
	for (int k = 0; k < A2A_SLOTS; k++)
		if (!(a->slot[k].first = calloc((size_t)c->size, sizeof(uint64_t))))
			return -ENOMEM;
	a->limit = c->attr.max_bytes ? c->attr.max_bytes : A2A_DEFAULT_MAX;
	a->seg = coll_seg_bytes(c->attr.segment, A2A_DEFAULT_SEG, a->limit, A2A_MAX_SEGS);
	a->mseg = coll_nseg(a->seg, a->limit);
	/* A ring holds what three alltoalls in flight bring from a peer, and
	 * a spare: a peer further ahead meets RNR until this rank posts. */
	r = coll_rings_init(&a->rs, c, a->seg, A2A_INFLIGHT * a->mseg + 2);
	if (r)
		return r;
	/* A sequence: the receives given back (at most a full ring per peer),
	 * then per step a SEND + SEND_EN per segment and a WAIT. */
	c->ntask = peers * a->rs.nring + peers * (2 * a->mseg + 1);
	c->nsend = peers * a->mseg;
	c->inflight = A2A_INFLIGHT;
	c->task = calloc(c->ntask, sizeof(*c->task));
	if (!c->task)
		return -ENOMEM;
	return c->size > 1 ? a2a_alloc(c, a) : 0;
}

/* Alltoalls done, copied out and with their sends complete give their
 * entries back, oldest first. */
static void reclaim(struct emunic_coll *c)
{
	struct coll_a2a *a = c->a2a;

	while (a->reclaimed < c->done) {
		struct a2a_slot *sl = &a->slot[(a->reclaimed + 1) % A2A_SLOTS];

		if (sl->seq == a->reclaimed + 1) {
			if (sl->sends_done < sl->sends_posted)
				return;
			for (int q = 0; q < c->size; q++)
				if (q != c->rank)
					a->rs.ring[q].freed += sl->nseg;
		}
		a->reclaimed++;
	}
}

static void build_list(struct emunic_coll *c, unsigned *n, struct a2a_slot *sl)
{
	struct coll_a2a *a = c->a2a;

	sl->sends_posted = 0;
	for (int s = 1; s < c->size; s++) {
		int dst = (c->rank + s) % c->size, src = (c->rank - s + c->size) % c->size;
		const unsigned char *from = block_mem(c, sl->seq, dst);
		struct emunic_task *t;

		for (unsigned i = 0; i < sl->nseg; i++) {
			size_t off = (size_t)i * a->seg;

			t = coll_task_add(c, n, EMUNIC_TASK_SEND, dst, sl->seq, a->mr);
			t->addr = (void *)(from + off);
			t->len = (uint32_t)(sl->block - off < a->seg ? sl->block - off : a->seg);
			t = coll_task_add(c, n, EMUNIC_TASK_SEND_EN, dst, sl->seq, a->mr);
			t->count = 1;
			sl->sends_posted++;
		}
		t = coll_task_add(c, n, EMUNIC_TASK_WAIT, src, sl->seq, a->mr);
		t->qp = NULL;
		t->cq = c->peer[src].rcq;
		t->count = sl->nseg;
		t->flags = EMUNIC_TASK_WAIT_EN_LAST;
	}
	c->task[*n - 1].flags |= EMUNIC_TASK_SIGNAL;
}

static int check_args(struct emunic_coll *c, const struct coll_args *ar, uint64_t s)
{
	if (ar->count && (!ar->sbuf || !ar->rbuf))
		return coll_err(c, -EINVAL, "alltoall %llu: a NULL %s for blocks of %zu bytes",
				(unsigned long long)s, ar->sbuf ? "rbuf" : "sbuf", ar->count);
	if (ar->count > c->a2a->limit)
		return coll_err(c, -EMSGSIZE, "alltoall %llu: blocks of %zu bytes are more than max_bytes (%zu)",
				(unsigned long long)s, ar->count, c->a2a->limit);
	return 0;
}

static int a2a_post(struct emunic_coll *c, const struct coll_args *ar, uint64_t *seq)
{
	struct coll_a2a *a = c->a2a;
	uint64_t s = c->posted + 1;
	unsigned n = 0, nseg;
	struct a2a_slot *sl;
	int r;

	/* From a failure on, every alltoall fails with it (what it skipped
	 * never completes, so its slot and entries never come back). */
	if (c->err && s >= c->err_seq)
		return c->err;
	r = check_args(c, ar, s);
	if (r)
		return r;
	if (c->size == 1) {
		if (ar->count && ar->rbuf != ar->sbuf)
			memmove(ar->rbuf, ar->sbuf, ar->count);
		c->posted = c->done = s;
		*seq = s;
		return 0;
	}
	reclaim(c);
	nseg = coll_nseg(a->seg, ar->count);
	/* Room: this slot's last alltoall given back, every ring's entries
	 * for it free. */
	if (c->posted - c->done >= A2A_INFLIGHT || (s > A2A_SLOTS && a->reclaimed < s - A2A_SLOTS))
		return -ENOSPC;
	for (int q = 0; q < c->size; q++)
		if (q != c->rank && a->rs.ring[q].used + nseg > a->rs.ring[q].freed + a->rs.nring)
			return -ENOSPC;
	sl = &a->slot[s % A2A_SLOTS];
	sl->seq = s;
	sl->nseg = nseg;
	sl->block = ar->count;
	sl->rbuf = ar->rbuf;
	sl->sends_done = 0;
	for (int q = 0; q < c->size && ar->count; q++)
		memcpy(block_mem(c, s, q), (const unsigned char *)ar->sbuf + (size_t)q * ar->count, ar->count);
	for (int q = 0; q < c->size; q++)
		sl->first[q] = a->rs.ring[q].used;
	coll_rings_add_recvs(c, &a->rs, &n, s);
	build_list(c, &n, sl);
	r = coll_post_lists(c, n, s);
	if (r == -ENOSPC) {
		sl->seq = 0;
		return r;
	}
	if (r) {
		sl->seq = 0;
		return coll_err(c, r, "alltoall %llu: posting its %u tasks failed (%d)", (unsigned long long)s, n, r);
	}
	coll_rings_commit(&a->rs, c->size);
	for (int q = 0; q < c->size; q++)
		if (q != c->rank)
			a->rs.ring[q].used += nseg;
	c->posted = s;
	c->sends_posted += sl->sends_posted;
	*seq = s;
	return 0;
}

static int a2a_prepost(struct emunic_coll *c)
{
	return coll_rings_prepost(c, &c->a2a->rs, "alltoall");
}

/* Every peer's block out of its ring, this rank's own out of the slot. */
static void a2a_complete(struct emunic_coll *c, uint64_t seq)
{
	struct coll_a2a *a = c->a2a;
	struct a2a_slot *sl = &a->slot[seq % A2A_SLOTS];

	if (sl->seq != seq || !sl->block)
		return;
	for (int q = 0; q < c->size; q++) {
		unsigned char *to = (unsigned char *)sl->rbuf + (size_t)q * sl->block;

		if (q == c->rank) {
			memcpy(to, block_mem(c, seq, q), sl->block);
			continue;
		}
		for (unsigned i = 0; i < sl->nseg; i++) {
			size_t off = (size_t)i * a->seg, len = sl->block - off < a->seg ? sl->block - off : a->seg;

			memcpy(to + off, coll_ring_entry(&a->rs, q, sl->first[q] + i), len);
		}
	}
}

static void a2a_send_done(struct emunic_coll *c, uint64_t seq)
{
	struct a2a_slot *sl = &c->a2a->slot[seq % A2A_SLOTS];

	if (sl->seq == seq)
		sl->sends_done++;
}

/* A timed-out alltoall: the peers whose blocks did not all come. */
static int a2a_late(const struct emunic_coll *c, uint64_t seq, char *buf, size_t len)
{
	const struct a2a_slot *sl = &c->a2a->slot[seq % A2A_SLOTS];
	int at = 0;

	if (sl->seq != seq)
		return 0;
	for (int q = 0; q < c->size && (size_t)at < len; q++) {
		uint64_t got;

		if (q == c->rank)
			continue;
		got = emunic_cq_count(c->peer[q].rcq);
		if (got < sl->first[q] + sl->nseg)
			at += snprintf(buf + at, len - (size_t)at, " %d (segments %llu of %u)", q,
				       (unsigned long long)(got > sl->first[q] ? got - sl->first[q] : 0), sl->nseg);
	}
	return (size_t)at < len ? at : (int)len - 1;
}

static void a2a_fini(struct emunic_coll *c)
{
	struct coll_a2a *a = c->a2a;

	if (!a)
		return;
	if (a->mr)
		emunic_mr_dereg(a->mr);
	free(a->mem);
	coll_rings_fini(&a->rs);
	for (int k = 0; k < A2A_SLOTS; k++)
		free(a->slot[k].first);
	free(a);
	c->a2a = NULL;
}

const struct coll_alg coll_alltoall_alg = {
	.name = "alltoall",
	.splits = true,
	.setup = a2a_setup,
	.prepost = a2a_prepost,
	.post = a2a_post,
	.fence = coll_send_fence,
	.complete = a2a_complete,
	.send_done = a2a_send_done,
	.late = a2a_late,
	.fini = a2a_fini,
};
