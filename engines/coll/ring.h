/* SPDX-License-Identifier: MIT */
/*
 * engines/coll/ring.h — landing rings: where a peer's segments land when
 * the operation they belong to may not be posted here yet.  A collective
 * whose size is known only at post time (bcast, the exchanges) cannot tie
 * receives to a call, yet a fast peer's data can come first; so each peer
 * that sends to this rank has a ring of nring segment-sized entries, and
 * the k-th message from it lands in entry k % nring.  Every rank calls the
 * same operations in the same order, so each knows which messages are
 * which operation's (used).  An entry's receive is posted again by the next
 * list once the operation that read it is done with it (freed); a peer that
 * runs further ahead meets RNR and retries, never drops.
 */
#ifndef EMUNIC_COLL_RING_H
#define EMUNIC_COLL_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct emunic_coll;
struct emunic_mr;

struct coll_ring {
	unsigned char *mem;		/* nring entries of seg bytes; NULL: no ring */
	uint64_t posted;		/* receives posted: entries 0 .. posted - 1 */
	uint64_t used;			/* messages given to operations posted so far */
	uint64_t freed;			/* messages read: their entries are free */
};

struct coll_rings {
	size_t seg;			/* bytes per entry (a segment) */
	unsigned nring;			/* entries per ring */
	struct coll_ring *ring;		/* by rank */
	uint64_t *posted;		/* scratch: each ring's receives once a list is posted */
	struct emunic_mr *mr;		/* registers the entries (the caller's region) */
	uint64_t reclaimed;		/* operations whose entries were given back */
};

/* By rank, rings for the peers with c->peer[q].partner; -ENOMEM. */
int coll_rings_init(struct coll_rings *rs, const struct emunic_coll *c, size_t seg, unsigned nring);
/* One registered region (coll_mem_alloc, *mem and *mr): the caller's
 * slots, slots bytes, then the rings. */
int coll_rings_alloc(struct coll_rings *rs, struct emunic_coll *c, size_t slots, size_t max_bytes,
		     unsigned char **mem, struct emunic_mr **mr);
unsigned char *coll_ring_entry(const struct coll_rings *rs, int peer, uint64_t k);
/* Appends to c->task the receives of every free entry (up to a full ring
 * per peer); applied by coll_rings_commit once the list is posted. */
void coll_rings_add_recvs(struct emunic_coll *c, struct coll_rings *rs, unsigned *n, uint64_t seq);
void coll_rings_commit(struct coll_rings *rs, int size);
/* give_back(c, seq): operation seq's entries back to their rings (freed),
 * and true; false while its sends may still read them or its slot. */
typedef bool (*coll_give_back_fn)(struct emunic_coll *c, uint64_t seq);
/* Operations done give their entries back oldest first (receives are
 * posted again in ring order), up to the first not ready to. */
void coll_rings_reclaim(struct coll_rings *rs, struct emunic_coll *c, coll_give_back_fn give_back);
/* Posts every entry's receive before the first operation; what names the
 * collective in the error line. */
int coll_rings_prepost(struct emunic_coll *c, struct coll_rings *rs, const char *what);
void coll_rings_fini(struct coll_rings *rs);

#endif
