/* SPDX-License-Identifier: MIT */
/*
 * Reduce-scatter + allgather (Rabenseifner), the schedule: see rsag.h.
 * For rank r < N, with blocks [lo, hi) of the vector still its to reduce
 * (from [0, N)):
 *
 *   [IN from r+N]
 *   for d = N/2, .., 1:  HALVE with r^d: the lower rank keeps the lower
 *                        half of [lo, hi), sends the other (so r keeps
 *                        block r at the end)
 *   for d = 1, .., N/2:  GATHER with r^d: r holds the d blocks from
 *                        r & ~(d - 1), gets the d from (r^d) & ~(d - 1)
 *   [OUT to r+N]
 */
#include "engines/coll/rsag.h"
#include "engines/coll/schedule.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t coll_rs_block(size_t count, int nblk, int b)
{
	size_t q = count / (size_t)nblk, rem = count % (size_t)nblk, ub = (size_t)b;

	return ub * q + (ub < rem ? ub : rem);
}

static void add(struct coll_rs_step *st, int *n, enum coll_rs_kind kind, int peer, size_t soff, size_t scnt,
		size_t roff, size_t rcnt)
{
	st[(*n)++] = (struct coll_rs_step){ .kind = kind, .peer = peer, .soff = soff, .scnt = scnt, .roff = roff,
					    .rcnt = rcnt };
}

/* Blocks [b0, b1) as an element range. */
static void range(size_t count, int nblk, int b0, int b1, size_t *off, size_t *cnt)
{
	*off = coll_rs_block(count, nblk, b0);
	*cnt = coll_rs_block(count, nblk, b1) - *off;
}

int coll_rsag_plan(int rank, int size, size_t count, struct coll_rs_step *st)
{
	int nb = coll_rd_pow2(size), n = 0, lo = 0, hi = nb;
	bool extra = rank < nb && rank + nb < size;
	size_t so, sc, ro, rc;

	if (size == 1)
		return 0;
	if (rank >= nb) {
		add(st, &n, COLL_RS_EXTRA, rank - nb, 0, count, 0, count);
		return n;
	}
	if (extra)
		add(st, &n, COLL_RS_IN, rank + nb, 0, 0, 0, count);
	for (int d = nb / 2; d >= 1; d /= 2) {
		int mid = lo + (hi - lo) / 2;
		bool low = !(rank & d);

		range(count, nb, low ? mid : lo, low ? hi : mid, &so, &sc);
		range(count, nb, low ? lo : mid, low ? mid : hi, &ro, &rc);
		add(st, &n, COLL_RS_HALVE, rank ^ d, so, sc, ro, rc);
		if (low)
			hi = mid;
		else
			lo = mid;
	}
	for (int d = 1; d < nb; d *= 2) {
		int mine = rank & ~(d - 1), theirs = (rank ^ d) & ~(d - 1);

		range(count, nb, mine, mine + d, &so, &sc);
		range(count, nb, theirs, theirs + d, &ro, &rc);
		add(st, &n, COLL_RS_GATHER, rank ^ d, so, sc, ro, rc);
	}
	if (extra)
		add(st, &n, COLL_RS_OUT, rank + nb, 0, count, 0, 0);
	return n;
}

int coll_rsag_bytes(size_t attr_bytes, int size, size_t *out)
{
	const char *e = getenv(COLL_RSAG_ENV);
	unsigned long long v;
	char *end;

	*out = attr_bytes ? attr_bytes : coll_rd_pow2(size) >= 4 ? COLL_RSAG_DEFAULT : SIZE_MAX;
	if (attr_bytes || !e)
		return 0;
	if (!strcmp(e, "never")) {
		*out = SIZE_MAX;
		return 0;
	}
	if (*e < '0' || *e > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(e, &end, 10);
	if (*end == 'K' || *end == 'M') {
		unsigned shift = *end == 'K' ? 10 : 20;

		if (v > (SIZE_MAX >> shift))
			return -EINVAL;
		v <<= shift;
		end++;
	}
	if (errno || *end || (unsigned long long)(size_t)v != v)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}
