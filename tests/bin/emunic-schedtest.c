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
 * Exit 0 and "emunic-schedtest: CHECK: PASS", or 1 with what broke.
 */
#include "engines/coll/schedule.h"

#include <stdio.h>
#include <string.h>

#define MAXN 64

static int fails;

#define FAIL(...) do { fprintf(stderr, "emunic-schedtest: FAIL: " __VA_ARGS__); fputc('\n', stderr); \
		       fails++; } while (0)

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

int main(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "bintree")) {
		fprintf(stderr, "usage: emunic-schedtest bintree\n");
		return 2;
	}
	bintree();
	if (!fails)
		printf("emunic-schedtest: %s: PASS\n", argv[1]);
	return fails ? 1 : 0;
}
