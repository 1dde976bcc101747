/* SPDX-License-Identifier: MIT */
/*
 * The offloaded broadcast: a binomial tree from each call's root
 * (schedule.c's coll_bin_tree), the message cut into segments, each bcast
 * one task list on the management queue.  For segment i:
 *
 *   root:      SEND(slot + i) SEND_EN           to each child, largest first
 *   non-root:  WAIT(parent, 1)  then SEND(entry) SEND_EN to each child
 *   (the last task is SIGNAL: its MQ completion is the bcast's)
 *
 * so a rank forwards segment i as soon as it arrived, while segment i + 1
 * is still on its way: the tree's levels work at once (the pipeline).
 *
 * Where data lands: a bcast's size and root are known only when it is
 * posted, but a fast parent's data can come before that, so it lands in
 * ring.h's landing rings, one per peer that can be this rank's parent (a
 * power of two away).  An entry's receive is posted again (by the next list
 * posted) once the bcast that read it completed (its data copied to the
 * caller's buffer) and the forwards from it completed.  A ring holds three
 * of the largest messages (as many as may be in flight): a parent that runs
 * further ahead meets RNR and retries until this rank posts.
 *
 * The root copies its buffer into one of BC_SLOTS slots when it posts; a
 * slot is reused once its sends completed.  At most BC_INFLIGHT in flight.
 */
#include "engines/coll/coll_int.h"
#include "engines/coll/ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BC_SLOTS 4
#define BC_INFLIGHT (BC_SLOTS - 1)
#define BC_DEFAULT_MAX (64 * 1024)
#define BC_DEFAULT_SEG (32 * 1024)
#define BC_MAX_SEGS 32		/* per bcast: bounds the rings and QP depths */
#define BC_MAX_CHILD 31

struct bc_slot {
	uint64_t seq;			/* the bcast using it */
	int parent;			/* -1: this rank was its root */
	uint64_t first;			/* its first message from parent, from 0 */
	unsigned nseg;
	void *buf;			/* the caller's */
	size_t bytes;
};

struct coll_bc {
	size_t limit;			/* max_bytes */
	size_t seg;			/* bytes per segment */
	unsigned mseg;			/* segments of the largest bcast */
	unsigned char *mem;		/* the root's slots, then the rings */
	struct emunic_mr *mr;
	struct coll_rings rs;		/* by rank; mem NULL: never a parent */
	struct bc_slot slot[BC_SLOTS];
	int child[BC_MAX_CHILD];	/* scratch: one bcast's children */
};

static unsigned char *slot_mem(const struct coll_bc *bc, uint64_t seq)
{
	return bc->mem + (seq % BC_SLOTS) * coll_round64(bc->limit);
}

static unsigned char *entry(const struct coll_bc *bc, int peer, uint64_t k)
{
	return coll_ring_entry(&bc->rs, peer, k);
}

static unsigned nseg_of(const struct coll_bc *bc, size_t bytes)
{
	return coll_nseg(bc->seg, bytes);
}

static int ceil_log2(int n)
{
	int k = 0;

	while ((1 << k) < n)
		k++;
	return k;
}

static int bc_setup(struct emunic_coll *c)
{
	struct coll_bc *bc;
	int fanout = ceil_log2(c->size), r;

	c->bc = bc = calloc(1, sizeof(*bc));
	if (!bc)
		return -ENOMEM;
	/* Every pair some root's tree uses: what a sparse object connects. */
	for (int q = 0; q < c->size; q++)
		if (q != c->rank && coll_bin_paired(c->rank, q, c->size))
			c->peer[q].partner = true;
	bc->limit = c->attr.max_bytes ? c->attr.max_bytes : BC_DEFAULT_MAX;
	/* The segment grows so that the largest bcast has at most
	 * BC_MAX_SEGS; a ring holds BC_INFLIGHT of them (all in flight from
	 * one parent) and a spare. */
	bc->seg = coll_seg_bytes(c->attr.segment, BC_DEFAULT_SEG, bc->limit, BC_MAX_SEGS);
	bc->mseg = nseg_of(bc, bc->limit);
	r = coll_rings_init(&bc->rs, c, bc->seg, BC_INFLIGHT * bc->mseg + 2);
	if (r)
		return r;
	/* A list: the receives given back (at most what BC_SLOTS bcasts
	 * used), then per segment a WAIT and a SEND + SEND_EN per child. */
	c->ntask = BC_SLOTS * bc->mseg + bc->mseg * (1 + 2 * (unsigned)fanout);
	c->nsend = bc->mseg * (unsigned)fanout;
	c->inflight = BC_INFLIGHT;
	c->task = calloc(c->ntask, sizeof(*c->task));
	if (!c->task)
		return -ENOMEM;
	if (c->size == 1)
		return 0;
	return coll_rings_alloc(&bc->rs, c, BC_SLOTS * coll_round64(bc->limit), bc->limit, &bc->mem, &bc->mr);
}

static struct emunic_task *add(struct emunic_coll *c, unsigned *n, int op, int peer, uint64_t seq)
{
	return coll_task_add(c, n, op, peer, seq, c->bc->mr);
}

/* A bcast done (copied out) gives its entries back to its parent's ring
 * once its forwards, which read them, completed (coll_rings_reclaim). */
static bool give_back(struct emunic_coll *c, uint64_t seq)
{
	struct coll_bc *bc = c->bc;
	const struct bc_slot *sl = &bc->slot[seq % BC_SLOTS];

	if (sl->seq != seq)
		return true;		/* it holds nothing */
	if (!coll_sends_done(c, seq))
		return false;
	if (sl->parent >= 0)
		bc->rs.ring[sl->parent].freed += sl->nseg;
	return true;
}

/* Bcast seq's segments: from the parent's ring, or from the root's slot. */
static void build_list(struct emunic_coll *c, unsigned *n, const struct bc_slot *sl, const unsigned char *src,
		       int nchild, unsigned *nsends)
{
	struct coll_bc *bc = c->bc;

	*nsends = 0;
	for (unsigned i = 0; i < sl->nseg; i++) {
		size_t off = (size_t)i * bc->seg;
		uint32_t len = (uint32_t)(sl->bytes - off < bc->seg ? sl->bytes - off : bc->seg);
		const unsigned char *from = src + off;
		struct emunic_task *t;

		if (!sl->bytes)
			len = 0;
		if (sl->parent >= 0) {
			coll_task_wait(c, n, sl->parent, sl->seq, 1);
			from = entry(bc, sl->parent, sl->first + i);
		}
		for (int k = 0; k < nchild; k++) {
			t = add(c, n, EMUNIC_TASK_SEND, bc->child[k], sl->seq);
			t->addr = (void *)from;
			t->len = len;
			t = add(c, n, EMUNIC_TASK_SEND_EN, bc->child[k], sl->seq);
			t->count = 1;
			++*nsends;
		}
	}
}

static int check_args(struct emunic_coll *c, const struct coll_args *a, uint64_t s)
{
	if (a->root < 0 || a->root >= c->size)
		return coll_err(c, -EINVAL, "bcast %llu: root %d is not a rank (size %d)", (unsigned long long)s,
				a->root, c->size);
	if (a->count && !a->rbuf)
		return coll_err(c, -EINVAL, "bcast %llu: a NULL buffer for %zu bytes", (unsigned long long)s,
				a->count);
	if (a->count > c->bc->limit)
		return coll_err(c, -EMSGSIZE, "bcast %llu: %zu bytes are more than max_bytes (%zu)",
				(unsigned long long)s, a->count, c->bc->limit);
	return 0;
}

static int bc_post(struct emunic_coll *c, const struct coll_args *a, uint64_t *seq)
{
	struct coll_bc *bc = c->bc;
	uint64_t s = c->posted + 1;
	struct bc_slot next;
	unsigned n = 0, nsends;
	int nchild, parent, r;

	r = check_args(c, a, s);
	if (r)
		return r;
	if (c->size == 1) {
		c->posted = c->done = s;
		*seq = s;
		return 0;
	}
	coll_rings_reclaim(&bc->rs, c, give_back);
	nchild = coll_bin_tree(c->rank, c->size, a->root, &parent, bc->child);
	next = (struct bc_slot){ .seq = s, .parent = parent, .nseg = nseg_of(bc, a->count), .buf = a->rbuf,
				 .bytes = a->count, .first = parent >= 0 ? bc->rs.ring[parent].used : 0 };
	/* Room: this slot's last bcast given back, its segments' entries free. */
	if (c->posted - c->done >= BC_INFLIGHT)
		return coll_no_room(c, COLL_FULL_INFLIGHT);
	if ((s > BC_SLOTS && bc->rs.reclaimed < s - BC_SLOTS) ||
	    (parent >= 0 && next.first + next.nseg > bc->rs.ring[parent].freed + bc->rs.nring))
		return coll_no_room(c, COLL_FULL_SLOTS);
	coll_rings_add_recvs(c, &bc->rs, &n, s);
	if (parent < 0 && a->count)
		memcpy(slot_mem(bc, s), a->sbuf, a->count);
	build_list(c, &n, &next, slot_mem(bc, s), nchild, &nsends);
	c->task[n - 1].flags |= EMUNIC_TASK_SIGNAL;
	r = coll_mq_post(c, c->task, n);
	if (r == -ENOSPC)
		return r;
	if (r)
		return coll_err(c, r, "bcast %llu: posting its %u-task list failed (%d)", (unsigned long long)s, n, r);
	coll_rings_commit(&bc->rs, c->size);
	if (parent >= 0)
		bc->rs.ring[parent].used += next.nseg;
	bc->slot[s % BC_SLOTS] = next;
	c->posted = s;
	coll_sends_add(c, s, nsends);
	*seq = s;
	return 0;
}

/* Every entry of every ring gets its receive, before anything is posted. */
static int bc_prepost(struct emunic_coll *c)
{
	return coll_rings_prepost(c, &c->bc->rs, "bcast");
}

/* A non-root's data: the segments from its parent's ring, into buf. */
static void bc_complete(struct emunic_coll *c, uint64_t seq)
{
	struct coll_bc *bc = c->bc;
	struct bc_slot *sl = &bc->slot[seq % BC_SLOTS];

	if (sl->seq != seq || sl->parent < 0)
		return;
	for (unsigned i = 0; i < sl->nseg && sl->bytes; i++) {
		size_t off = (size_t)i * bc->seg, len = sl->bytes - off < bc->seg ? sl->bytes - off : bc->seg;

		memcpy((unsigned char *)sl->buf + off, entry(bc, sl->parent, sl->first + i), len);
	}
}

/* A timed-out bcast: which parent's segments are missing. */
static int bc_late(const struct emunic_coll *c, uint64_t seq, char *buf, size_t len)
{
	const struct coll_bc *bc = c->bc;
	const struct bc_slot *sl = &bc->slot[seq % BC_SLOTS];
	uint64_t got;

	if (sl->seq != seq || sl->parent < 0)
		return 0;
	got = emunic_cq_count(c->peer[sl->parent].rcq);
	if (got >= sl->first + sl->nseg)
		return 0;
	return snprintf(buf, len, " %d (segments %llu of %u)", sl->parent,
			(unsigned long long)(got > sl->first ? got - sl->first : 0), sl->nseg);
}

static void bc_fini(struct emunic_coll *c)
{
	if (!c->bc)
		return;
	coll_mem_free(c->bc->mem, c->bc->mr);
	coll_rings_fini(&c->bc->rs);
	free(c->bc);
	c->bc = NULL;
}

const struct coll_alg coll_bcast_alg = {
	.name = "bcast",
	.setup = bc_setup,
	.prepost = bc_prepost,
	.post = bc_post,
	.fence = coll_send_fence,
	.complete = bc_complete,
	.late = bc_late,
	.fini = bc_fini,
};
