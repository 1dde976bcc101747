/* SPDX-License-Identifier: MIT */
/*
 * engines/coll/rsag.h — the large allreduce's schedule (Rabenseifner:
 * reduce-scatter by recursive halving, then allgather by recursive
 * doubling), one definition for the offloaded allreduce (engines/coll/
 * allreduce.c) and the host-progressed one (baseline/ptp_allreduce.c), so
 * that the benchmark compares two ways of running one algorithm; and the
 * size from which an allreduce uses it.  Pure: no verbs, no emunic objects.
 */
#ifndef EMUNIC_COLL_RSAG_H
#define EMUNIC_COLL_RSAG_H

#include <stdbool.h>
#include <stddef.h>

/*
 * What a step does with the rank's vector V (its copy of sbuf, reduced in
 * place into the result).  Ranges are in elements: [soff, soff + scnt) is
 * sent, [roff, roff + rcnt) is what comes from the peer.
 *   IN      (rank r < N, from r + N): wait for the extra rank's whole
 *           vector and reduce it into V
 *   HALVE   reduce-scatter: send the half of V's current range the peer
 *           keeps, wait for the peer's partial of the half this rank keeps
 *           and reduce it into V
 *   GATHER  allgather: send the blocks of the result this rank holds, wait
 *           for the peer's, placed into V as they are
 *   OUT     (rank r < N, to r + N): send the whole result
 *   EXTRA   (rank r >= N, with r - N): send V whole, wait for the result
 * Every reduction takes the lower rank's operand first (the lower rank's
 * side holds the lower ranks' partial), as the recursive doubling does.
 */
enum coll_rs_kind { COLL_RS_IN, COLL_RS_HALVE, COLL_RS_GATHER, COLL_RS_OUT, COLL_RS_EXTRA };

struct coll_rs_step {
	enum coll_rs_kind kind;
	int peer;
	size_t soff, scnt, roff, rcnt;
};

/* Steps at most: IN, log2(N) halvings, log2(N) gathers, OUT. */
#define COLL_RS_MAX_STEPS 64

static inline bool coll_rs_sends(enum coll_rs_kind k)
{
	return k != COLL_RS_IN;
}

static inline bool coll_rs_waits(enum coll_rs_kind k)
{
	return k != COLL_RS_OUT;
}

/*
 * Rank's steps for count elements in a job of size ranks, in order, into
 * st (room for COLL_RS_MAX_STEPS); returns their number (0 for one rank).
 * N is the largest power of two <= size (schedule.h's coll_rd_pow2); rank
 * r >= N is folded into r - N first and sent the result last, as in the
 * recursive doubling.  The count elements are cut into N blocks, the first
 * count % N of them one element larger (blocks may be empty: their steps
 * still send and wait, for a message of 0 bytes).  Halving at distance
 * N/2, N/4, .., 1, the lower rank of a pair keeping the lower half, leaves
 * rank r with block r reduced over every rank; the gathers at distance 1,
 * 2, .., N/2 then double what each holds.  Each step's peer sends it
 * exactly one message (in its own matching step), so both sides count
 * messages alike whatever the sizes.
 */
int coll_rsag_plan(int rank, int size, size_t count, struct coll_rs_step *st);

/* Element offset of block b of count elements cut into nblk blocks. */
size_t coll_rs_block(size_t count, int nblk, int b);

/*
 * The size from which an allreduce of size ranks uses reduce-scatter +
 * allgather: attr_bytes (emunic_coll_attr.rsag_bytes; SIZE_MAX: never)
 * unless 0, else $EMUNIC_RSAG_BYTES (bytes, optionally with a K or M
 * suffix, or "never"; 0: every allreduce, even of 0 bytes), else
 * COLL_RSAG_DEFAULT from N = 4 on and never below.  -EINVAL for a
 * malformed variable (the caller names it: COLL_RSAG_ENV, COLL_RSAG_WANTS).
 * Every rank must see the same value.
 *
 * The default is measured (emunic-bench allreduce, rxe under TCG, both the
 * offload and the baseline): at 4 ranks recursive doubling is faster up to
 * 32 KiB, reduce-scatter + allgather 16-23% faster from 64 KiB to 1 MiB; at
 * 8 ranks they tie at 32 KiB and the latter is 28-45% faster from 64 KiB.
 * With N = 2 the halving sends as many bytes as recursive doubling, in two
 * rounds instead of one, and saves only half the reductions: it was slower
 * at every size up to 1 MiB (1.35x there), so it is not the default.
 */
#define COLL_RSAG_DEFAULT ((size_t)64 * 1024)
#define COLL_RSAG_ENV "EMUNIC_RSAG_BYTES"
#define COLL_RSAG_WANTS "a byte count (digits, optionally K or M) or 'never'"
int coll_rsag_bytes(size_t attr_bytes, int size, size_t *out);

#endif
