/* SPDX-License-Identifier: MIT */
/* Landing rings (ring.h): shared by bcast.c and exchange.c. */
#include "engines/coll/coll_int.h"
#include "engines/coll/ring.h"

#include <errno.h>
#include <stdlib.h>

int coll_rings_init(struct coll_rings *rs, const struct emunic_coll *c, size_t seg, unsigned nring)
{
	*rs = (struct coll_rings){ .seg = seg, .nring = nring };
	rs->ring = calloc((size_t)c->size, sizeof(*rs->ring));
	rs->posted = calloc((size_t)c->size, sizeof(*rs->posted));
	return rs->ring && rs->posted ? 0 : -ENOMEM;
}

int coll_rings_alloc(struct coll_rings *rs, struct emunic_coll *c, size_t slots, size_t max_bytes,
		     unsigned char **mem, struct emunic_mr **mr)
{
	size_t bytes = slots;
	unsigned char *at;
	int r;

	for (int q = 0; q < c->size; q++)
		bytes += c->peer[q].partner ? (size_t)rs->nring * rs->seg : 0;
	r = coll_mem_alloc(c, bytes, max_bytes, mem, mr);
	if (r)
		return r;
	rs->mr = *mr;
	at = *mem + slots;
	for (int q = 0; q < c->size; q++)
		if (c->peer[q].partner) {
			rs->ring[q].mem = at;
			at += (size_t)rs->nring * rs->seg;
		}
	return 0;
}

unsigned char *coll_ring_entry(const struct coll_rings *rs, int peer, uint64_t k)
{
	return rs->ring[peer].mem + (k % rs->nring) * rs->seg;
}

void coll_rings_add_recvs(struct emunic_coll *c, struct coll_rings *rs, unsigned *n, uint64_t seq)
{
	for (int q = 0; q < c->size; q++) {
		struct coll_ring *rg = &rs->ring[q];

		rs->posted[q] = rg->posted;
		if (!rg->mem)
			continue;
		for (; rs->posted[q] < rg->freed + rs->nring; rs->posted[q]++) {
			struct emunic_task *t = coll_task_add(c, n, EMUNIC_TASK_RECV, q, seq, rs->mr);

			t->addr = coll_ring_entry(rs, q, rs->posted[q]);
			t->len = (uint32_t)rs->seg;
		}
	}
}

void coll_rings_commit(struct coll_rings *rs, int size)
{
	for (int q = 0; q < size; q++)
		rs->ring[q].posted = rs->posted[q];
}

void coll_rings_reclaim(struct coll_rings *rs, struct emunic_coll *c, coll_give_back_fn give_back)
{
	while (rs->reclaimed < c->done && give_back(c, rs->reclaimed + 1))
		rs->reclaimed++;
}

int coll_rings_prepost(struct emunic_coll *c, struct coll_rings *rs, const char *what)
{
	for (int q = 0; q < c->size; q++) {
		unsigned n = 0;
		int r;

		if (!rs->ring[q].mem)
			continue;
		for (uint64_t k = 0; k < rs->nring; k++) {
			struct emunic_task *t = coll_task_add(c, &n, EMUNIC_TASK_RECV, q, 0, rs->mr);

			t->addr = coll_ring_entry(rs, q, k);
			t->len = (uint32_t)rs->seg;
		}
		r = coll_post_lists(c, n, 0);
		if (r)
			return coll_err(c, r, "%s: posting the %u receives of peer %d failed (%d)", what, n, q, r);
		rs->ring[q].posted = rs->nring;
	}
	return 0;
}

void coll_rings_fini(struct coll_rings *rs)
{
	free(rs->ring);
	free(rs->posted);
	rs->ring = NULL;
	rs->posted = NULL;
}
