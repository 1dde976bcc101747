/* SPDX-License-Identifier: MIT */
/*
 * engines/coll/schedule.h — the recursive-doubling barrier schedule (seed
 * 003, tables I-IV): which peers a rank signals and waits for, in which
 * order.  One definition for the offloaded barrier (engines/coll/barrier.c)
 * and the host-progressed baseline (baseline/ptp_barrier.c), so that the
 * benchmark compares two ways of running the same algorithm, never two
 * algorithms.  Pure: no verbs, no emunic objects.
 */
#ifndef EMUNIC_COLL_SCHEDULE_H
#define EMUNIC_COLL_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

#include <emunic/coll.h>

/* One step of a rank's barrier: signal peer, then (or only) wait for it. */
struct coll_step {
	int peer;
	bool send, wait;
};

/*
 * Rank's schedule in a job of size ranks (0 <= rank < size), in a new array
 * (free() it) at *out: the number of steps (0 for one rank alone), or
 * -ENOMEM.  A rank's partners are the peers its steps name.
 */
int coll_rd_schedule(int rank, int size, struct coll_step **out);
/* N, the largest power of two <= size (>= 1): ranks N and up are the extra
 * ones, folded into rank - N. */
int coll_rd_pow2(int size);

/*
 * The binomial tree of a broadcast from root (MPICH's): relative rank
 * v = (rank - root) mod size gets the data from v minus its lowest set bit
 * and sends it to v + 2^k for each 2^k below that bit (every 2^k < size for
 * the root), largest subtree first.  *parent: the parent's rank (-1 on the
 * root); child[] (room for 31): the children's ranks in sending order; the
 * number of children.  Two ranks are ever paired only if they are a power
 * of two apart one way round (coll_bin_paired), whatever the root.
 */
int coll_bin_tree(int rank, int size, int root, int *parent, int *child);
bool coll_bin_paired(int a, int b, int size);

/*
 * The exchanges (alltoall, allgather, gather; LibNBC's schedules), offloaded
 * and host-progressed alike: at step s = 1 .. size - 1 a rank sends one block
 * of its copy of sbuf to dst (-1: no send at this step), the block at index
 * blk of the copy, and then waits for the block of src (-1: no wait).
 *   alltoall:   dst = rank + s with the block for dst; src = rank - s
 *   allgather:  the same pairs, every step sending the rank's own block
 *   gather:     linear: a non-root sends its block to root at step 1 and
 *               waits for nothing; the root waits for root + s at step s
 * So over the steps every rank that gets data gets one block from each other
 * rank that sends to it, and each block is sent once per receiving rank.
 */
struct coll_xstep {
	int dst, blk, src;
};
void coll_xchg_step(enum emunic_coll_kind kind, int rank, int size, int root, int s, struct coll_xstep *st);
/* Blocks in a rank's sbuf (and so in its copy): size for an alltoall, 1
 * for the others (the rank's own block). */
int coll_xchg_blocks(enum emunic_coll_kind kind, int size);

/* The segment of a pipelined collective (bcast, the exchanges), offloaded and
 * host-progressed alike: segment (0: dflt), raised so that a message of
 * limit bytes has at most max_segs, rounded up to 64 bytes, at most limit
 * so rounded. */
size_t coll_seg_bytes(size_t segment, size_t dflt, size_t limit, unsigned max_segs);
/* Segments of a message of bytes (1 for 0 bytes: an empty message). */
unsigned coll_nseg(size_t seg, size_t bytes);
size_t coll_round64(size_t n);

#endif
