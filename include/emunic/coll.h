/* SPDX-License-Identifier: MIT */
/*
 * emunic/coll.h — offloaded collectives, built on the management queues of
 * <emunic.h> (never on verbs): the progress core runs them, so a posted
 * collective completes while the application only computes.
 *
 * A struct emunic_coll spans every rank of a device (the whole job).  It
 * holds one management queue and RC QPs to the ranks it talks to, and is
 * used by one application thread at a time.  Creating one is collective:
 * every rank calls emunic_coll_create() with the same attributes, and all
 * ranks create their collectives (and any other QPs between the same
 * ranks) in the same order, since QPs pair up by creation order.
 *
 * An object runs one kind of collective (attr.kind).  Barrier: recursive
 * doubling over the largest power of two N <= size ranks; each rank r >= N
 * first signals r - N and is released by it afterwards (seed 003, tables
 * I-IV).  Allreduce: the same schedule carrying data, reduced by CALC tasks
 * (below).  Bcast: a binomial tree rooted at each call's root, pipelined in
 * segments.  Alltoall: pairwise exchange, split over several task lists
 * where longer than the device's list limit (below).  Allgather: the same
 * exchange, each rank sending its own block at every step.  Gather: linear,
 * every rank sending its block straight to the root.
 *
 * Failures: a barrier is done when its partners' signals came (the task
 * list's WAIT on the receives, as on the HCA); it does not wait for its own
 * signals' acknowledgements, which would add a round trip to every barrier.
 * So a SEND of this rank that failed after its partner's signal arrived is
 * reported by the next barrier (or wait, or test) at the latest: from the
 * first failed barrier on, every barrier fails with that error.  Once the
 * operations before the failed one (and their sends) are done, the object
 * disconnects all its QPs (emunic_qp_disconnect), so that every peer's
 * operation in flight fails too and each peer does the same: the group
 * fails within a few hops' time, each rank naming a failure, instead of
 * at its timeout.  A timeout disconnects nothing (the next call may
 * succeed).
 */
#ifndef EMUNIC_COLL_H
#define EMUNIC_COLL_H

#include <emunic.h>

#ifdef __cplusplus
extern "C" {
#endif

enum emunic_coll_signal {
	EMUNIC_COLL_SEND = 0,		/* 0-byte SEND into a pre-posted receive */
	EMUNIC_COLL_WRITE_IMM,		/* 0-byte RDMA WRITE with immediate */
};

enum emunic_coll_conn {
	EMUNIC_COLL_DENSE = 0,		/* a QP to every other rank */
	EMUNIC_COLL_SPARSE,		/* QPs only to the log2 partners (and the extra rank's) */
};

/* What a collective object runs: the calls of the other kind are -EINVAL. */
enum emunic_coll_kind {
	EMUNIC_COLL_BARRIER = 0,	/* emunic_barrier, emunic_ibarrier */
	EMUNIC_COLL_ALLREDUCE,		/* emunic_allreduce, emunic_iallreduce */
	EMUNIC_COLL_BCAST,		/* emunic_bcast, emunic_ibcast */
	EMUNIC_COLL_ALLTOALL,		/* emunic_alltoall, emunic_ialltoall */
	EMUNIC_COLL_ALLGATHER,		/* emunic_allgather, emunic_iallgather */
	EMUNIC_COLL_GATHER,		/* emunic_gather, emunic_igather */
};

struct emunic_coll_attr {
	enum emunic_coll_signal signal;	/* BARRIER */
	enum emunic_coll_conn conn;
	enum emunic_coll_kind kind;
	/* ALLREDUCE, BCAST: the largest message in bytes; ALLTOALL,
	 * ALLGATHER, GATHER: the largest block per rank (0: 64 KiB; at most
	 * 1 GiB).  An allreduce object registers 4 x (1 + 2 x its steps)
	 * buffers of this size; a bcast object 4 (the root's copies) plus,
	 * per peer that can be its parent, a ring of receive segments that
	 * holds three such messages; an alltoall object 4 x size blocks
	 * (copies of sbuf) plus such a ring per peer; an allgather or gather
	 * object 4 blocks plus such a ring per peer. */
	size_t max_bytes;
	/* BCAST, ALLTOALL, ALLGATHER, GATHER: a message (block) is sent in
	 * segments of this many bytes, a bcast's forwarded down the tree as
	 * soon as each arrived (0: 32 KiB; raised to
	 * max_bytes / 32 when that is larger; rounded up to a multiple of 64
	 * bytes; at most max_bytes so rounded). */
	size_t segment;
	/* Bound on connecting (create), on emunic_barrier() and on draining
	 * (destroy), in ms; 0: 30000; < 0: no bound. */
	int timeout_ms;
	/* ALLREDUCE: messages of at least this many bytes use reduce-scatter
	 * + allgather (0: $EMUNIC_RSAG_BYTES, else 64 KiB from 4 ranks on and
	 * never with 2 or 3; SIZE_MAX: never). */
	size_t rsag_bytes;
};
void emunic_coll_attr_init(struct emunic_coll_attr *a);

struct emunic_coll;
struct emunic_coll_req;

/* Collective over every rank of dev.  Returns once every QP is connected. */
int emunic_coll_create(struct emunic_dev *dev, const struct emunic_coll_attr *a, struct emunic_coll **out);
/* Waits (bounded by timeout_ms) for the signals this rank sent to be
 * delivered, then frees everything; -EBUSY while requests are not waited. */
int emunic_coll_destroy(struct emunic_coll *c);
/* QPs this rank holds (dense: size - 1; sparse: its partners only). */
int emunic_coll_qp_count(const struct emunic_coll *c);

/* Blocks until every rank has entered the barrier (bounded by timeout_ms). */
int emunic_barrier(struct emunic_coll *c);

/*
 * Posts a barrier to the progress core and returns; it completes with no
 * further call.  Barriers complete in the order posted.  -ENOSPC when too
 * many are in flight (64), or the signals of the barrier 64 before it are
 * not yet acknowledged (wait for some first, or call again).
 */
int emunic_ibarrier(struct emunic_coll *c, struct emunic_coll_req **req);
/*
 * Allreduce: rbuf = sbuf of rank 0 op sbuf of rank 1 op ..., count elements
 * of type (enum emunic_calc_op / emunic_calc_type of <emunic/mq.h>), on a
 * collective created with kind EMUNIC_COLL_ALLREDUCE.  Over the largest
 * power of two N <= size ranks, rank r >= N folded into r - N first and sent
 * the result last: below attr.rsag_bytes recursive doubling (the barrier's
 * schedule), from it reduce-scatter + allgather (Rabenseifner: recursive
 * halving, each rank ending with 1/N of the vector reduced, then recursive
 * doubling of those blocks; about 2 x (N - 1) / N vectors sent a rank
 * instead of log2(N)); every reduction is a CALC task run by the progress
 * core when the data it needs has arrived, so a posted iallreduce completes
 * while the app computes.  sbuf is copied when posted (it may be reused at
 * once, and may be rbuf); rbuf holds the result once the request completes:
 * written by the progress core, or (on a rank >= N, and for every
 * reduce-scatter + allgather) copied by the call (test, wait) that sees the
 * completion.  An allreduce that timed out stays posted, so its rbuf stays
 * in use until it completes or the collective is destroyed.  Every rank
 * gets the same bits (each pair reduces the same two operands in the same
 * order; after a reduce-scatter each block's result is copied, not
 * recomputed), though the two algorithms associate differently.
 * -EINVAL: an op x type pair emunic_calc_check rejects; -EMSGSIZE: more than
 * max_bytes; -ENOSPC (nonblocking form): three in flight, or the sends of
 * the allreduce four back (whose buffer slot this one takes) not yet
 * complete, which may outlast its request when the peers' acknowledgements
 * are slow, as across machines (retry; the blocking form does).
 * Allreduces complete in the order posted; from a failed one on, each
 * fails with its error.
 */
int emunic_iallreduce(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t count, int type, int op,
		      struct emunic_coll_req **req);
int emunic_allreduce(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t count, int type, int op);

/*
 * Broadcast: the root's bytes bytes of buf land in buf on every rank, on a
 * collective created with kind EMUNIC_COLL_BCAST.  A binomial tree over the
 * ranks relative to root (relative rank v gets the data from v minus its
 * lowest set bit and sends it on to v + 2^k for each 2^k below that bit, the
 * largest subtree first), the message cut into attr.segment pieces: a rank
 * forwards a segment as soon as it arrived, so the tree's levels work at
 * once.  Every receive is a WAIT, every forward a SEND released by it, run by
 * the progress core: a posted ibcast completes while the app computes.  On
 * the root buf is copied when posted (it may be reused at once) and the bcast
 * completes once its sends are handed to verbs; on the others buf holds the
 * data once the request completes, copied by the call (test, wait) that sees
 * the completion, out of the segments the data landed in.  Every rank must
 * call with the same root and bytes, in the same order.  A root that runs
 * ahead of a late rank finds the ring of receive segments full and is held by
 * RNR retries (never dropped) until that rank posts.  Sparse objects connect
 * each rank only to the ranks a power of two away (either way round), which
 * is every pair a binomial tree of any root uses.  -EINVAL: root out of
 * range, a NULL buffer with bytes; -EMSGSIZE: more than max_bytes; -ENOSPC
 * (nonblocking form): three in flight, or the sends or landing segments of
 * earlier ones not yet free (even with no request held: they free as the core
 * progresses, so try again; the blocking form does, within the bound).
 */
int emunic_ibcast(struct emunic_coll *c, void *buf, size_t bytes, int root, struct emunic_coll_req **req);
int emunic_bcast(struct emunic_coll *c, void *buf, size_t bytes, int root);

/*
 * All-to-all: block bytes at sbuf + q x block go to rank q, landing at
 * rbuf + rank x block there, on a collective created with kind
 * EMUNIC_COLL_ALLTOALL (max_bytes: the largest block).  Pairwise exchange:
 * at step s = 1 .. size - 1 a rank sends to rank + s and, once the block
 * from rank - s arrived, goes on to step s + 1 (a WAIT on that peer's
 * receives releases the next step's SEND_ENs), each block in attr.segment
 * pieces; the whole exchange is one task list, or several consecutive ones
 * where it is longer than the device's list limit (emunic_dev_list_tasks;
 * seed 001's split), all run by the progress core.  sbuf is copied when
 * posted (it may be reused at once, and may be rbuf); rbuf holds the data
 * once the request completes, copied by the call (test, wait) that sees the
 * completion.  Every rank must call with the same block, in the same order.
 * -EINVAL: a NULL buffer with block > 0; -EMSGSIZE: block > max_bytes;
 * -ENOSPC (nonblocking form): three in flight, or the copies or landing
 * segments of earlier ones not yet free (retry; the blocking form does).
 */
int emunic_ialltoall(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block,
		     struct emunic_coll_req **req);
int emunic_alltoall(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block);

/*
 * Allgather: the block bytes at sbuf of every rank q land at rbuf + q x
 * block on every rank, on a dense collective created with kind
 * EMUNIC_COLL_ALLGATHER (max_bytes: the largest block).  The all-to-all's
 * pairwise exchange (above), sending the rank's own block at every step:
 * the same task lists, split alike, run by the progress core.  sbuf is
 * copied when posted (it may be reused at once, and may be rbuf + rank x
 * block: in place); rbuf holds the data once the request completes, copied
 * by the call (test, wait) that sees the completion.  Every rank must call
 * with the same block, in the same order.  Errors as for the all-to-all:
 * -EINVAL a NULL buffer with block > 0; -EMSGSIZE block > max_bytes;
 * -ENOSPC (nonblocking form) three in flight or earlier ones' copies or
 * landing segments not yet free (retry; the blocking form does).
 */
int emunic_iallgather(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block,
		      struct emunic_coll_req **req);
int emunic_allgather(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block);

/*
 * Gather: the block bytes at sbuf of every rank q land at rbuf + q x block
 * on root, on a dense collective created with kind EMUNIC_COLL_GATHER
 * (max_bytes: the largest block; any rank may be a call's root, so each
 * keeps a landing ring per peer).  Linear: every other rank sends its block
 * to the root in attr.segment pieces (SEND + SEND_EN each, in one task
 * list); the root's list WAITs for each peer's segments in turn, the last
 * WAIT signalling its completion, all run by the progress core.  sbuf is
 * copied when posted (it may be reused at once; on the root it may be
 * rbuf + root x block: in place).  On the root rbuf holds the data once the
 * request completes, copied by the call that sees the completion; elsewhere
 * rbuf is not used (it may be NULL) and the gather completes once its
 * sends are handed to verbs (as a bcast's root), with no round trip to the
 * root: a send that fails later fails this rank's next gather (or this one,
 * if not yet waited), and destroy waits for every send to be delivered.  A
 * non-root may so run ahead of a late root by as many gathers as it keeps
 * copies of sbuf (four): its data waits in the root's landing ring, or is
 * held by RNR retries beyond it, never dropped.  Every rank must call with the same block and root, in the same
 * order.  -EINVAL: root out of range, a NULL sbuf (or, on the root, rbuf)
 * with block > 0; -EMSGSIZE: block > max_bytes; -ENOSPC (nonblocking form):
 * three in flight, or the copies or landing segments of earlier ones not
 * yet free (retry; the blocking form does).
 */
int emunic_igather(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block, int root,
		   struct emunic_coll_req **req);
int emunic_gather(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block, int root);

/* 1 done, 0 not yet, < 0 the operation failed.  Never blocks; req stays valid. */
int emunic_coll_test(struct emunic_coll_req *req);
/* Waits at most timeout_ms (< 0: no bound) and frees req, whatever the
 * result: 0 done, -ETIMEDOUT, or the error the operation failed with.  One
 * that timed out stays posted and still completes in order. */
int emunic_coll_wait(struct emunic_coll_req *req, int timeout_ms);

const char *emunic_coll_signal_str(enum emunic_coll_signal s);
const char *emunic_coll_conn_str(enum emunic_coll_conn c);
/* The inverse of the _str names ("send", "write_imm"; "dense", "sparse"):
 * the value, or -EINVAL for any other string. */
int emunic_coll_signal_parse(const char *s);
int emunic_coll_conn_parse(const char *s);

#ifdef __cplusplus
}
#endif

#endif /* EMUNIC_COLL_H */
