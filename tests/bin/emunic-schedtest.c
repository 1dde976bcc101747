/* SPDX-License-Identifier: MIT */
/*
 * emunic-schedtest: the collectives' pure schedules (engines/coll/
 * schedule.h) checked by their properties, on the host (no RDMA):
 *   bintree   for every size 1..64 and root: every rank but the root has
 *             one parent, which lists it as a child; the tree reaches every
 *             rank in at most ceil(log2 size) levels (exactly that many
 *             for a power of two); children are sent to in decreasing
 *             distance (the largest nominal subtree, 2^k ranks, first, as
 *             MPICH's binomial bcast does); every parent/child pair is
 *             coll_bin_paired.
 *   xchg      for every size 1..64, kind (alltoall, allgather, gather) and
 *             gather root: what coll_xchg_step has each rank send makes,
 *             step by step, exactly the waits of the others: every rank
 *             that gets data (all; a gather's root only) waits once for
 *             every other rank, which sends it one block, the block for it
 *             (alltoall) or its own (block 0), and nothing else is sent.
 * Exit 0 and "emunic-schedtest: CHECK: PASS", or 1 with what broke.
 */
#include "engines/coll/schedule.h"

#include <stdio.h>
#include <string.h>

#include "harness.h"

#define MAXN 64

static int subtree(int size, int root, int r, int depth, int *maxdepth)
{
	int parent, child[32], n = coll_bin_tree(r, size, root, &parent, child), count = 1;

	if (depth > *maxdepth)
		*maxdepth = depth;
	if (depth > MAXN)
		return MAXN + 1;	/* a cycle: the count check below fails */
	for (int k = 0; k < n; k++)
		count += subtree(size, root, child[k], depth + 1, maxdepth);
	return count;
}

static void bintree(void)
{
	for (int size = 1; size <= MAXN; size++)
		for (int root = 0; root < size; root++) {
			int parent_of[MAXN], nparent[MAXN] = { 0 }, levels = 0, depth = 0;

			while ((1 << levels) < size)
				levels++;
			for (int r = 0; r < size; r++) {
				int parent, child[32], n = coll_bin_tree(r, size, root, &parent, child), prev = size;

				parent_of[r] = parent;
				if ((r == root) != (parent < 0))
					FAIL("size %d root %d: rank %d has parent %d", size, root, r, parent);
				for (int k = 0; k < n; k++) {
					int dist = (child[k] - r + size) % size;

					if (child[k] < 0 || child[k] >= size || child[k] == r)
						FAIL("size %d root %d: rank %d has child %d", size, root, r, child[k]);
					else
						nparent[child[k]]++;
					if (!coll_bin_paired(r, child[k], size))
						FAIL("size %d root %d: %d -> %d not paired", size, root, r, child[k]);
					if (dist >= prev)
						FAIL("size %d root %d: rank %d sends %d away after %d away", size, root,
						     r, dist, prev);
					prev = dist;
				}
			}
			if (nparent[root])
				FAIL("size %d root %d: the root is a child", size, root);
			for (int r = 0; r < size; r++) {
				if (r != root && nparent[r] != 1)
					FAIL("size %d root %d: rank %d is the child of %d ranks", size, root, r, nparent[r]);
				if (r != root && parent_of[r] >= 0) {
					int parent, child[32], n = coll_bin_tree(parent_of[r], size, root, &parent, child);
					int found = 0;

					for (int k = 0; k < n; k++)
						found |= child[k] == r;
					if (!found)
						FAIL("size %d root %d: parent %d does not list %d", size, root, parent_of[r], r);
				}
			}
			if (subtree(size, root, root, 0, &depth) != size)
				FAIL("size %d root %d: the tree does not reach every rank", size, root);
			if (depth > levels || (!(size & (size - 1)) && depth != levels))
				FAIL("size %d root %d: %d levels for %d ranks", size, root, depth, size);
		}
}

/* sent[r][d]: blocks r sends d; waited[d][r]: waits of d for r. */
static void xchg_one(enum emunic_coll_kind kind, int size, int root)
{
	static int sent[MAXN][MAXN], waited[MAXN][MAXN];

	memset(sent, 0, sizeof(sent));
	memset(waited, 0, sizeof(waited));
	for (int r = 0; r < size; r++)
		for (int s = 1; s < size; s++) {
			struct coll_xstep st;

			coll_xchg_step(kind, r, size, root, s, &st);
			if (st.dst >= 0) {
				int want = kind == EMUNIC_COLL_ALLTOALL ? st.dst : 0;

				if (st.dst >= size || st.dst == r || st.blk != want)
					FAIL("kind %d size %d root %d: rank %d step %d sends block %d to %d", kind, size,
					     root, r, s, st.blk, st.dst);
				else
					sent[r][st.dst]++;
			}
			if (st.src >= 0 && (st.src >= size || st.src == r))
				FAIL("kind %d size %d root %d: rank %d step %d waits for %d", kind, size, root, r, s,
				     st.src);
			else if (st.src >= 0)
				waited[r][st.src]++;
		}
	for (int d = 0; d < size; d++)
		for (int r = 0; r < size; r++) {
			int want = r != d && (kind != EMUNIC_COLL_GATHER || d == root);

			if (sent[r][d] != want || waited[d][r] != want)
				FAIL("kind %d size %d root %d: %d sends %d %d block(s), %d waits for it %d time(s), not %d",
				     kind, size, root, r, d, sent[r][d], d, waited[d][r], want);
		}
}

static void xchg(void)
{
	static const enum emunic_coll_kind kinds[] = { EMUNIC_COLL_ALLTOALL, EMUNIC_COLL_ALLGATHER,
						       EMUNIC_COLL_GATHER };

	for (int size = 1; size <= MAXN; size++)
		for (unsigned k = 0; k < 3; k++) {
			if (coll_xchg_blocks(kinds[k], size) != (kinds[k] == EMUNIC_COLL_ALLTOALL ? size : 1))
				FAIL("kind %d size %d: %d blocks", kinds[k], size, coll_xchg_blocks(kinds[k], size));
			for (int root = 0; root < (kinds[k] == EMUNIC_COLL_GATHER ? size : 1); root++)
				xchg_one(kinds[k], size, root);
		}
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "bintree") && strcmp(argv[1], "xchg"))) {
		fprintf(stderr, "usage: emunic-schedtest bintree|xchg\n");
		return 2;
	}
	if (!strcmp(argv[1], "bintree"))
		bintree();
	else
		xchg();
	if (!fails)
		printf("emunic-schedtest: %s: PASS\n", argv[1]);
	return harness_status();
}
