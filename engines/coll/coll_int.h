/* SPDX-License-Identifier: MIT */
/*
 * Private to engines/coll: the collective object, the ops table through
 * which it runs its algorithm, and what its files give each other.  Calls
 * point one way: request.c and coll.c to complete.c, coll.c to the
 * algorithms' tables, every file to common.c and schedule.c.
 */
#ifndef EMUNIC_COLL_INT_H
#define EMUNIC_COLL_INT_H

#include <errno.h>
#include <stdbool.h>
#include <emunic/coll.h>

#include "engines/coll/schedule.h"

/* Barriers one coll may have in flight; bounds every queue depth below. */
#define COLL_MAX_INFLIGHT 64
/* The largest attr.max_bytes (a work request's length is 32-bit). */
#define COLL_MAX_BYTES (1ull << 30)
/* Receives kept posted ahead per partner.  A partner can send its signal for
 * barrier k + 1 only once barrier k completed there, i.e. once this rank
 * posted barrier k (and so k + window receives): a window of 1 never meets
 * RNR; 2 keeps a margin. */
#define COLL_RECV_WINDOW 2
/* wr_id of every task: the barrier's sequence number above, the peer below,
 * so an error completion names both. */
#define COLL_PEER_BITS 24
#define COLL_PEER_MASK ((1ull << COLL_PEER_BITS) - 1)

struct coll_peer {
	struct emunic_qp *qp;		/* NULL: no connection to this rank */
	struct emunic_cq *rcq;		/* COUNT_ONLY: this peer's signals, for WAIT */
	bool partner;			/* the barrier exchanges signals with it */
};

struct emunic_coll;
struct coll_ar;
struct coll_bc;
struct coll_xg;

/* What one operation works on: request.c checks kind against the object's. */
struct coll_args {
	enum emunic_coll_kind kind;	/* the call made */
	const void *sbuf;
	void *rbuf;			/* bcast: the buffer (sbuf too) */
	size_t count;			/* bcast: bytes; the exchanges: the block */
	int type, op;			/* enum emunic_calc_type, emunic_calc_op */
	int root;			/* bcast, gather */
};

/*
 * An algorithm: what coll.c calls, so that it names no algorithm's
 * functions and each collective to come (ibcast, iallreduce, ialltoall,
 * igather) is a file with a table of its own.  Each returns 0 or a negative
 * errno.  This is the task-list builder of a collective's one ops table
 * (baseline/coll_ops.h, a layer above: engines never point at the
 * baselines), which reaches it by kind through emunic_coll_create.
 */
struct coll_alg {
	const char *name;		/* in error lines: "barrier 7: ..." */
	/* Its lists may be longer than the device's list limit: they are
	 * posted split (coll_post_lists), not refused at create. */
	bool splits;
	/* At create, before any QP: c->step, c->nstep, the partners (which
	 * sparse connections are made to), c->task and c->ntask; optionally
	 * c->nsend and c->inflight (else from the steps, and 64). */
	int (*setup)(struct emunic_coll *c);
	/* Once every QP is connected: the receives ahead of the first post. */
	int (*prepost)(struct emunic_coll *c);
	/* Posts the next operation; *seq is its number, complete once
	 * c->done reaches it.  -ENOSPC: too many in flight, post it later. */
	int (*post)(struct emunic_coll *c, const struct coll_args *a, uint64_t *seq);
	/* Destroy's fence: *seq completes once every signal this rank sent was
	 * delivered (0: nothing to wait for). */
	int (*fence)(struct emunic_coll *c, uint64_t *seq);
	/* Optional: operation seq completed (on the app's thread). */
	void (*complete)(struct emunic_coll *c, uint64_t seq);
	/* Optional: names what timed-out operation seq still waits for
	 * (" PEER (...)" per peer) into buf; returns the length written.
	 * Without it the steps' partners are named (one signal each). */
	int (*late)(const struct emunic_coll *c, uint64_t seq, char *buf, size_t len);
	/* Optional: frees what setup made, after every QP and CQ is gone. */
	void (*fini)(struct emunic_coll *c);
};

/* One operation's sends, in c->sent at seq % COLL_MAX_INFLIGHT: an
 * operation may complete here before its sends do (a bcast's forward, a
 * signal whose ACK comes later), and what they read must stay until then. */
struct coll_sent {
	uint64_t seq;			/* 0: unused */
	uint32_t posted, done;
};

/* Why a post found no room (-ENOSPC): a blocking post that times out
 * names it (request.c). */
enum coll_full {
	COLL_FULL_INFLIGHT = 1,	/* as many operations in flight as it keeps */
	COLL_FULL_SENDS,	/* the sends of an earlier one not yet completed */
	COLL_FULL_SLOTS,	/* the buffers of earlier ones not yet given back */
	COLL_FULL_QUEUE,	/* the MQ, a peer's queue or the command ring */
};

struct emunic_coll {
	struct emunic_dev *dev;
	struct emunic_coll_attr attr;
	const struct coll_alg *alg;	/* what it runs, by attr.kind */
	int rank, size;
	struct emunic_mq *mq;
	struct emunic_cq *scq;		/* every QP's sends, drained by progress */
	uint64_t scq_seen;		/* its count at the last drain */
	struct coll_peer *peer;		/* by rank */
	int nqp;
	struct coll_step *step;		/* this rank's schedule */
	int nstep;
	struct emunic_task *task;	/* scratch for one barrier's task list */
	struct emunic_mq_prepared *prep;	/* a list the same every time, prepared once (barrier) */
	bool post_whole;		/* barrier: EMUNIC_COLL_PREPARED=0, each list posted whole */
	unsigned ntask;			/* tasks in one barrier's list */
	unsigned nsend;			/* sends in one list (0: the steps') */
	unsigned inflight;		/* lists in flight at most (0: COLL_MAX_INFLIGHT) */
	uint64_t posted, done;		/* barrier sequence numbers, from 1 */
	uint64_t sends_posted;		/* every operation's, for destroy's fence */
	struct coll_sent sent[COLL_MAX_INFLIGHT];	/* by operation (coll_sends_add) */
	int err;			/* first failure; operations from err_seq on fail */
	uint64_t err_seq;
	bool left;			/* its QPs disconnected after the failure (coll_leave_if_failed) */
	uint64_t leave_seq;		/* the first failure the group is told of (0: none) */
	int nreq;			/* requests handed out, not yet waited */
	struct emunic_coll_req *spare;	/* waited requests, for the next post: no allocation a call */
	bool wait_next;			/* a blocking call posts: its wait follows */
	enum coll_full full;		/* why the last post found no room */
	struct coll_ar *ar;		/* allreduce.c's state */
	struct coll_bc *bc;		/* bcast.c's state */
	struct coll_xg *xg;		/* exchange.c's state */
};

struct emunic_coll_req {
	struct emunic_coll *c;
	uint64_t seq;
	struct emunic_coll_req *next;	/* on c->spare, once waited */
};

/* common.c.  "emunic: rank R: coll: ..." on stderr; returns err (negative). */
int coll_err(const struct emunic_coll *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The timeout bound of create, barrier and destroy: attr.timeout_ms, 0 is 30000. */
int coll_timeout(const struct emunic_coll *c);
long long coll_now_ms(void);
/* Every task's wr_id: the operation's number above, the peer below. */
uint64_t coll_wr_id(uint64_t seq, int peer);
/* This rank's recursive-doubling steps (schedule.c's) into c->step and
 * c->nstep, their peers marked partners (what a sparse object connects). */
int coll_rd_setup(struct emunic_coll *c);
/* A task of operation seq for peer (its QP and wr_id; mr registers its
 * buffer, NULL for none), appended to c->task at *n. */
struct emunic_task *coll_task_add(struct emunic_coll *c, unsigned *n, int op, int peer, uint64_t seq,
				  struct emunic_mr *mr);
/* Appends a WAIT for count more messages of peer, counted on its own
 * receive CQ, whose base then moves past them (WAIT_EN_LAST): a message of
 * a later operation that came early is counted ahead, for that one. */
void coll_task_wait(struct emunic_coll *c, unsigned *n, int peer, uint64_t seq, uint32_t count);
/* A zeroed, page-aligned region of bytes registered on c's device; the
 * error lines name c->alg and max_bytes.  coll_mem_free takes either NULL. */
int coll_mem_alloc(struct emunic_coll *c, size_t bytes, size_t max_bytes, unsigned char **mem,
		   struct emunic_mr **mr);
void coll_mem_free(unsigned char *mem, struct emunic_mr *mr);
/* "barrier", "allreduce", "bcast", "alltoall", "allgather", "gather". */
const char *coll_kind_str(enum emunic_coll_kind k);
/* Posts c->task[0 .. n) of operation seq: one list, or consecutive lists of
 * at most the device's limit where it is longer (seed 001's split; the MQ
 * runs lists in the order posted, never interleaved, and one thread posts
 * to a collective, so the effect is one list's).  -ENOSPC only when nothing
 * was posted (retry); a later list waits for room within the bound, and if
 * it still fails, seq and every later operation fail with -EIO. */
/* Every list of the engine goes to the MQ through this (or, split,
 * coll_post_lists, which shares its flag rule): a blocking
 * call's (c->wait_next) with EMUNIC_POST_WAIT_NEXT. */
int coll_mq_post(struct emunic_coll *c, const struct emunic_task *t, unsigned n);
/* A prepared list (wr_ids of sequence 0) started as operation seq's, with
 * the same flag rule. */
int coll_mq_start(struct emunic_coll *c, struct emunic_mq_prepared *pl, uint64_t seq);
int coll_post_lists(struct emunic_coll *c, unsigned n, uint64_t seq);
/* -ENOSPC, noting why (the three above note COLL_FULL_QUEUE themselves). */
static inline int coll_no_room(struct emunic_coll *c, enum coll_full why)
{
	c->full = why;
	return -ENOSPC;
}
/* Operation seq, just posted, has n sends (every algorithm's post says so). */
void coll_sends_add(struct emunic_coll *c, uint64_t seq, unsigned n);
/* A send of operation seq completed (or failed). */
void coll_send_completed(struct emunic_coll *c, uint64_t seq);
/* Every send of operation seq completed: what they read may be reused.
 * True for seq 0, one with no sends, and one no longer held (its entry
 * went to a later operation only once they had: coll_sends_room). */
bool coll_sends_done(const struct emunic_coll *c, uint64_t seq);
/* Operation seq may take its entry: the one that held it sent all. */
bool coll_sends_room(const struct emunic_coll *c, uint64_t seq);
/* Every send of every operation before seq completed. */
bool coll_sent_before(const struct emunic_coll *c, uint64_t seq);
/* The fence of struct coll_alg: a WAIT for every send posted so far. */
int coll_send_fence(struct emunic_coll *c, uint64_t *seq);
/* After the first failure, once every operation before it is complete and
 * their sends too: disconnects every QP of c, once. */
void coll_leave_if_failed(struct emunic_coll *c);
/* Operations from seq on fail with err (the first failure is kept); tell:
 * the group is told of it (leave_seq), then coll_leave_if_failed. */
void coll_set_failed(struct emunic_coll *c, uint64_t seq, int err, bool tell);

/* barrier.c: the recursive-doubling barrier (schedule.c's) as task lists. */
extern const struct coll_alg coll_barrier_alg;
/* allreduce.c: recursive doubling with CALC on the same schedule. */
extern const struct coll_alg coll_allreduce_alg;
/* bcast.c: a binomial tree, pipelined in segments. */
extern const struct coll_alg coll_bcast_alg;
/* exchange.c: alltoall and allgather (pairwise exchange, split over
 * lists where long) and gather (linear), one engine (schedule.h's
 * coll_xchg_step says who sends to whom). */
extern const struct coll_alg coll_alltoall_alg;
extern const struct coll_alg coll_allgather_alg;
extern const struct coll_alg coll_gather_alg;

/* complete.c: reads what the progress core finished; never blocks. */
int coll_progress(struct emunic_coll *c);
/* coll_progress, then the engine run once (an assist, if it is free) for
 * what this thread left in the ring for its own wait: a blocking call's
 * after its wait failed. */
int coll_progress_run(struct emunic_coll *c);
/* coll_progress as a post needs it: with nothing outstanding, only the
 * sends are read (no engine assist). */
int coll_progress_to_post(struct emunic_coll *c);
/* 1 done, 0 not yet, < 0 the error operation seq failed with. */
int coll_seq_status(const struct emunic_coll *c, uint64_t seq);
/* 0 once seq is done, -ETIMEDOUT (naming the late peers) or its error. */
int coll_wait_seq(struct emunic_coll *c, uint64_t seq, int timeout_ms);

#endif
