/* SPDX-License-Identifier: MIT */
/*
 * Private to the offloaded allreduce: its state (allreduce.c: the object,
 * posting, completion) and its task lists (allreduce_list.c).
 */
#ifndef EMUNIC_COLL_ALLREDUCE_H
#define EMUNIC_COLL_ALLREDUCE_H

#include "engines/coll/coll_int.h"
#include "engines/coll/rsag.h"

#define AR_SLOTS 4
/* Steps of a rank at most: log2 of COLL_PEER_MASK ranks, and the extra
 * rank's two. */
#define AR_MAX_STEPS (COLL_PEER_BITS + 2)

struct ar_slot {
	uint64_t seq;			/* the allreduce using it */
	void *rbuf;
	size_t bytes;
	const void *copy_from;		/* the result, where not rbuf */
	uint64_t need[AR_MAX_STEPS];	/* by step: its peer's messages through this one */
	unsigned nmsg[AR_MAX_STEPS];	/* ... of which this one's */
};

struct coll_ar {
	size_t limit;			/* max_bytes */
	size_t max;			/* ... rounded up: a buffer's size */
	size_t slot_bytes;
	unsigned char *mem;
	struct emunic_mr *mr;
	bool extra;			/* rank >= N: folded into rank - N */
	size_t rsag;			/* from this many bytes: reduce-scatter + allgather */
	uint64_t msgs[AR_MAX_STEPS];	/* by step: its peer's messages so far */
	struct ar_slot slot[AR_SLOTS];
	struct coll_rs_step plan[COLL_RS_MAX_STEPS];
};

/* A slot's buffers, max_bytes each: the copy of sbuf, a landing buffer per
 * wait step (tmp), a result per step (acc). */
enum ar_buf { AR_SRC, AR_TMP, AR_ACC };

/* Inline, so that allreduce.c and allreduce_list.c both use it without
 * calling each other. */
static inline unsigned char *coll_ar_buf(const struct emunic_coll *c, uint64_t seq, enum ar_buf b, int step)
{
	const struct coll_ar *ar = c->ar;
	size_t off = b == AR_SRC ? 0 : b == AR_TMP ? 1 + (size_t)step : 1 + (size_t)c->nstep + (size_t)step;

	return ar->mem + (seq % AR_SLOTS) * ar->slot_bytes + off * ar->max;
}

/* allreduce_list.c.  The receives of allreduce seq's first message from
 * each partner, into its slot's tmp buffers. */
void coll_ar_recvs(struct emunic_coll *c, unsigned *n, uint64_t seq);
/* Allreduce seq's list into c->task, by recursive doubling (of bytes) or
 * reduce-scatter + allgather; returns its length, *nsends the sends in it. */
unsigned coll_ar_rd_list(struct emunic_coll *c, const struct coll_args *a, uint64_t seq, uint32_t bytes,
			 unsigned *nsends);
unsigned coll_ar_rsag_list(struct emunic_coll *c, const struct coll_args *a, uint64_t seq, unsigned *nsends);

#endif
