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

#include <stddef.h>
#include <stdint.h>

struct emunic_coll;
struct emunic_mr;
struct emunic_task;

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
};

/* By rank, rings for the peers with c->peer[q].partner; -ENOMEM. */
int coll_rings_init(struct coll_rings *rs, const struct emunic_coll *c, size_t seg, unsigned nring);
/* Bytes the rings need, and placing them at mem (inside the caller's
 * registered region mr). */
size_t coll_rings_bytes(const struct coll_rings *rs, const struct emunic_coll *c);
void coll_rings_place(struct coll_rings *rs, const struct emunic_coll *c, unsigned char *mem,
		      struct emunic_mr *mr);
unsigned char *coll_ring_entry(const struct coll_rings *rs, int peer, uint64_t k);
/* Appends to c->task the receives of every free entry (up to a full ring
 * per peer); applied by coll_rings_commit once the list is posted. */
void coll_rings_add_recvs(struct emunic_coll *c, struct coll_rings *rs, unsigned *n, uint64_t seq);
void coll_rings_commit(struct coll_rings *rs, int size);
/* Posts every entry's receive before the first operation; what names the
 * collective in the error line. */
int coll_rings_prepost(struct emunic_coll *c, struct coll_rings *rs, const char *what);
void coll_rings_fini(struct coll_rings *rs);

/* A task of operation seq for peer (its QP, wr_id and mr), appended to
 * c->task at *n. */
struct emunic_task *coll_task_add(struct emunic_coll *c, unsigned *n, int op, int peer, uint64_t seq,
				  struct emunic_mr *mr);

#endif
