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

/* The segment of a pipelined collective (bcast, alltoall), offloaded and
 * host-progressed alike: segment (0: dflt), raised so that a message of
 * limit bytes has at most max_segs, rounded up to 64 bytes, at most limit
 * so rounded. */
size_t coll_seg_bytes(size_t segment, size_t dflt, size_t limit, unsigned max_segs);
/* Segments of a message of bytes (1 for 0 bytes: an empty message). */
unsigned coll_nseg(size_t seg, size_t bytes);
size_t coll_round64(size_t n);

#endif
