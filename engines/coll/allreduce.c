/* SPDX-License-Identifier: MIT */
/*
 * The offloaded allreduce: the object, posting and completion (its task
 * lists are allreduce_list.c's).  Each allreduce is one task list, every
 * reduction a CALC task the progress core runs when the data it needs has
 * arrived (seed 001's calc, as MVAPICH2 used CORE-Direct's): recursive
 * doubling on the barrier's schedule below attr.rsag_bytes (rsag.h's
 * coll_rsag_bytes), reduce-scatter + allgather (rsag.c) from it.
 *
 * Buffers: AR_SLOTS slots, one registered region; a slot holds an
 * allreduce's copy of sbuf, a landing buffer per wait step (tmp) and a
 * result per step (acc), max_bytes each.  Allreduce k's list posts the
 * receives of allreduce k + 1's first message from each partner (a window
 * of one, as the barrier's): a partner's data for k + 1 is released only
 * after its list for k ran, which needed this rank's data for k, so those
 * receives are up and from the second allreduce on no data meets RNR (the
 * first's receives are posted at create, which a fast partner may beat:
 * RNR retries then delay it).  A partner's second message of an allreduce
 * (reduce-scatter + allgather's gather) has its receive in that allreduce's
 * own list.  So at most AR_SLOTS - 1 are in flight, and a slot is reused
 * only once the sends from it completed.  Where the result is not written
 * to rbuf by a CALC (the extra rank's, and every reduce-scatter +
 * allgather's), the call that sees the completion copies it there.
 */
#include "engines/coll/allreduce.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AR_INFLIGHT (AR_SLOTS - 1)
#define AR_DEFAULT_MAX (64 * 1024)

static int ar_setup(struct emunic_coll *c)
{
	struct coll_ar *ar;
	int r = coll_rd_setup(c);

	if (r)
		return r;
	/* Per step at most (recursive doubling): a receive, two CALCs (or a
	 * SEND), SEND_EN, WAIT; for reduce-scatter + allgather, per partner:
	 * two receives, a halving's four tasks and a gather's three. */
	c->ntask = 9 * (unsigned)c->nstep + 1;
	c->nsend = 2 * (unsigned)c->nstep;
	c->task = calloc(c->ntask, sizeof(*c->task));
	c->ar = ar = calloc(1, sizeof(*ar));
	if (!c->task || !ar)
		return -ENOMEM;
	if (coll_rsag_bytes(c->attr.rsag_bytes, c->size, &ar->rsag))
		return coll_err(c, -EINVAL, "allreduce: %s='%s' is not %s", COLL_RSAG_ENV, getenv(COLL_RSAG_ENV),
				COLL_RSAG_WANTS);
	ar->limit = c->attr.max_bytes ? c->attr.max_bytes : AR_DEFAULT_MAX;
	ar->max = (ar->limit + 63) & ~(size_t)63;
	ar->slot_bytes = (1 + 2 * (size_t)c->nstep) * ar->max;
	ar->extra = c->rank >= coll_rd_pow2(c->size);
	return coll_mem_alloc(c, AR_SLOTS * ar->slot_bytes, ar->max, &ar->mem, &ar->mr);
}

/* Counts the messages allreduce seq takes from each partner (for late). */
static void count_msgs(struct emunic_coll *c, struct ar_slot *sl, bool rsag)
{
	struct coll_ar *ar = c->ar;

	for (int i = 0; i < c->nstep; i++) {
		bool twice = rsag && !ar->extra && c->step[i].send && c->step[i].wait;	/* halving, gather */

		sl->nmsg[i] = c->step[i].wait ? 1 + twice : 0;
		ar->msgs[i] += sl->nmsg[i];
		sl->need[i] = ar->msgs[i];
	}
}

static int ar_post(struct emunic_coll *c, const struct coll_args *a, uint64_t *seq)
{
	struct coll_ar *ar = c->ar;
	uint64_t s = c->posted + 1;
	struct ar_slot *sl = &ar->slot[s % AR_SLOTS];
	size_t esz, bytes;
	unsigned n, nsends;
	bool rsag;
	int r;

	if (emunic_calc_check(a->op, a->type))
		return coll_err(c, -EINVAL, "allreduce %llu: %s is not defined on %s (op %d, type %d)",
				(unsigned long long)s, emunic_calc_op_str(a->op), emunic_calc_type_str(a->type), a->op,
				a->type);
	esz = emunic_calc_size(a->type);
	if (a->count && (!a->sbuf || !a->rbuf))
		return coll_err(c, -EINVAL, "allreduce %llu: a NULL buffer", (unsigned long long)s);
	if (a->count > ar->limit / esz)
		return coll_err(c, -EMSGSIZE, "allreduce %llu: %zu %s elements are more than max_bytes (%zu)",
				(unsigned long long)s, a->count, emunic_calc_type_str(a->type), ar->limit);
	bytes = a->count * esz;
	if (c->size == 1) {
		if (bytes)
			memmove(a->rbuf, a->sbuf, bytes);
		c->posted = c->done = s;
		*seq = s;
		return 0;
	}
	/* The slot must be free: its last allreduce done, its sends read. */
	if (c->posted - c->done >= AR_INFLIGHT)
		return coll_no_room(c, COLL_FULL_INFLIGHT);
	if (!coll_sends_done(c, sl->seq))
		return coll_no_room(c, COLL_FULL_SENDS);
	rsag = bytes >= ar->rsag;
	if (bytes)
		memcpy(coll_ar_buf(c, s, AR_SRC, 0), a->sbuf, bytes);
	n = rsag ? coll_ar_rsag_list(c, a, s, &nsends) : coll_ar_rd_list(c, a, s, (uint32_t)bytes, &nsends);
	r = coll_mq_post(c, c->task, n);
	if (r == -ENOSPC)
		return r;
	if (r)
		return coll_err(c, r, "allreduce %llu: posting its %u-task list failed (%d)", (unsigned long long)s,
				n, r);
	sl->seq = s;
	sl->rbuf = a->rbuf;
	sl->bytes = bytes;
	sl->copy_from = ar->extra ? coll_ar_buf(c, s, AR_TMP, 0) : rsag ? coll_ar_buf(c, s, AR_SRC, 0) : NULL;
	count_msgs(c, sl, rsag);
	c->posted = s;
	coll_sends_add(c, s, nsends);
	*seq = s;
	return 0;
}

/* The receives of allreduce 1, before anything is posted. */
static int ar_prepost(struct emunic_coll *c)
{
	unsigned n = 0;
	int r;

	if (c->size == 1)
		return 0;
	coll_ar_recvs(c, &n, 1);
	r = coll_mq_post(c, c->task, n);
	return r ? coll_err(c, r, "allreduce: posting the %u initial receives failed (%d)", n, r) : 0;
}

static void ar_complete(struct emunic_coll *c, uint64_t seq)
{
	struct ar_slot *sl = &c->ar->slot[seq % AR_SLOTS];

	if (sl->seq == seq && sl->copy_from && sl->bytes)
		memcpy(sl->rbuf, sl->copy_from, sl->bytes);
}

/* A timed-out allreduce: which partners' messages are missing. */
static int ar_late(const struct emunic_coll *c, uint64_t seq, char *buf, size_t len)
{
	const struct ar_slot *sl = &c->ar->slot[seq % AR_SLOTS];
	size_t off = 0;

	for (int i = 0; sl->seq == seq && i < c->nstep; i++) {
		uint64_t got = emunic_cq_count(c->peer[c->step[i].peer].rcq), first = sl->need[i] - sl->nmsg[i];

		if (got < sl->need[i] && off < len)
			off += (size_t)snprintf(buf + off, len - off, " %d (messages %llu of %u)", c->step[i].peer,
						(unsigned long long)(got > first ? got - first : 0), sl->nmsg[i]);
	}
	return (int)(off < len ? off : len - 1);
}

static void ar_fini(struct emunic_coll *c)
{
	if (!c->ar)
		return;
	coll_mem_free(c->ar->mem, c->ar->mr);
	free(c->ar);
	c->ar = NULL;
}

const struct coll_alg coll_allreduce_alg = {
	.name = "allreduce",
	.setup = ar_setup,
	.prepost = ar_prepost,
	.post = ar_post,
	.fence = coll_send_fence,
	.complete = ar_complete,
	.late = ar_late,
	.fini = ar_fini,
};
