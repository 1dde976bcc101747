/* SPDX-License-Identifier: MIT */
/*
 * The recursive-doubling barrier schedule (see schedule.h), for any number
 * of ranks M.  N is the largest power of two <= M; rank r >= N (an "extra"
 * rank) is paired with r - N:
 *
 *   extra rank r:        signal r-N and wait for it (its release)
 *   rank r < N:          [wait for r+N]  then for d = 1, 2, .. N/2:
 *                        signal r^d and wait for it
 *                        [signal r+N]
 *
 * so every partner signals exactly once a barrier, which is what lets both
 * users match signals by counting them.
 */
#include "engines/coll/schedule.h"

#include <errno.h>
#include <stdlib.h>

int coll_rd_pow2(int m)
{
	int n = 1;

	while (n <= m / 2)
		n *= 2;
	return n;
}

static void add_step(struct coll_step *step, int *n, int peer, bool send, bool wait)
{
	step[(*n)++] = (struct coll_step){ .peer = peer, .send = send, .wait = wait };
}

int coll_rd_schedule(int rank, int size, struct coll_step **out)
{
	int n = coll_rd_pow2(size), r = rank, nstep = 0, max = 2;
	bool has_extra = r < n && r + n < size;
	struct coll_step *step;

	/* At most log2(M) doubling steps plus the two extra-rank steps. */
	for (int m = 1; m < size; m <<= 1)
		max++;
	step = calloc((size_t)max, sizeof(*step));
	if (!step)
		return -ENOMEM;
	*out = step;
	if (size == 1)
		return 0;
	if (r >= n) {
		add_step(step, &nstep, r - n, true, true);
		return nstep;
	}
	/* The extra rank's signal first: it has entered too. */
	if (has_extra)
		add_step(step, &nstep, r + n, false, true);
	for (int d = 1; d < n; d <<= 1)
		add_step(step, &nstep, r ^ d, true, true);
	/* Everyone has entered: release the extra rank. */
	if (has_extra)
		add_step(step, &nstep, r + n, true, false);
	return nstep;
}

int coll_bin_tree(int rank, int size, int root, int *parent, int *child)
{
	int v = (rank - root + size) % size, low = size, n = 0;

	*parent = -1;
	if (v) {
		low = v & -v;
		*parent = (v - low + root) % size;
	}
	/* Below the lowest set bit, largest first: the deepest subtree starts
	 * first. */
	for (int m = 1 << 30; m; m >>= 1)
		if (m < low && v + m < size)
			child[n++] = (v + m + root) % size;
	return n;
}

static bool pow2(int d)
{
	return d > 0 && !(d & (d - 1));
}

bool coll_bin_paired(int a, int b, int size)
{
	return pow2((a - b + size) % size) || pow2((b - a + size) % size);
}

void coll_xchg_step(enum emunic_coll_kind kind, int rank, int size, int root, int s, struct coll_xstep *st)
{
	*st = (struct coll_xstep){ .dst = (rank + s) % size, .blk = 0, .src = (rank - s + size) % size };
	if (kind == EMUNIC_COLL_ALLTOALL)
		st->blk = st->dst;
	if (kind != EMUNIC_COLL_GATHER)
		return;
	st->dst = rank != root && s == 1 ? root : -1;
	st->src = rank == root ? (root + s) % size : -1;
}

int coll_xchg_blocks(enum emunic_coll_kind kind, int size)
{
	return kind == EMUNIC_COLL_ALLTOALL ? size : 1;
}

size_t coll_round64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

size_t coll_seg_bytes(size_t segment, size_t dflt, size_t limit, unsigned max_segs)
{
	size_t seg = segment ? segment : dflt, floor = (limit + max_segs - 1) / max_segs;

	seg = coll_round64(seg > floor ? seg : floor);
	return seg > coll_round64(limit) ? coll_round64(limit) : seg;	/* none larger than a message */
}

unsigned coll_nseg(size_t seg, size_t bytes)
{
	return bytes ? (unsigned)((bytes + seg - 1) / seg) : 1;
}
