/* SPDX-License-Identifier: MIT */
/*
 * emunic/mq.h — management queues, as CORE-Direct defined them, emulated by
 * the progress core.  Include <emunic.h>, which includes this.
 *
 * Objects: CQs count completions (and queue them for emunic_cq_poll unless
 * created COUNT_ONLY); QPs are RC connections to one peer whose sends
 * (receives) are held until enabled when created MANAGED_SEND (MANAGED_RECV);
 * an MQ takes task lists and has its own completion queue.
 *
 * The rules (DESIGN.md, "Management queues"), all enforced in emunic/mq/:
 *  - SEND_EN(qp, n) / RECV_EN(qp, n) release the next n work requests posted
 *    to that queue; n = 0 releases everything posted so far; enabling more
 *    than was posted is -EINVAL and changes nothing.
 *  - WAIT(cq, n) completes when cq has produced n completions counted from its
 *    wait base; a WAIT flagged WAIT_EN_LAST advances the base by the largest
 *    count since the last advance.  Completions a posted WAIT covers are not
 *    returned by emunic_cq_poll.
 *  - A task list is posted in order, to the queue each task names, never
 *    interleaved with another list; each queue runs its tasks in order as
 *    they become eligible.  WAIT, SEND_EN and RECV_EN run on the MQ's own
 *    queue.  A task flagged SIGNAL puts one completion on the MQ.
 *  - SEND_EN/RECV_EN on a QP not created MANAGED_SEND/MANAGED_RECV, a WAIT on
 *    a CQ of another device or a destroyed CQ, an unknown opcode or an empty
 *    list: -EINVAL at post time, and nothing of the list is posted.  A list
 *    longer than the device's limit (emunic_dev_list_tasks: attr.list_tasks,
 *    $EMUNIC_LIST_TASKS, 1024 by default): -E2BIG, nothing posted; work
 *    larger than that is split over several lists (as seed 001 split its
 *    alltoall).
 *  - Counts are in work requests.  Every data task produces one completion on
 *    its QP's send or receive CQ, failed ones included.
 *  - Failures are never hidden: once a CQ has produced a failed completion,
 *    every WAIT on it whose count reaches that completion completes on the
 *    MQ with that status, peer and QP number, flagged SIGNAL or not (as
 *    verbs reports error CQEs of unsignaled work); a WAIT met by the
 *    successes before it completes as usual.  Such a failed WAIT ends its
 *    task list: the list's later WAIT, SEND_EN and RECV_EN do not run and,
 *    if SIGNAL, complete with WR_FLUSH_ERR (as a QP's work after a failure
 *    flushes), so nothing a failed step guarded is released.  Later lists
 *    run as usual.
 *  - Depths: a CQ queues up to `depth` unpolled completions (more are counted
 *    as overruns); an MQ holds up to `depth` unfinished control tasks and
 *    queues up to `depth` unpolled completions (more are lost, with a line).
 *  - One thread polls a given CQ or MQ; any thread may post.  A destroyed
 *    object's handle stays readable (and is rejected as dead) until the
 *    device closes; work still queued that names it is dropped.
 */
#ifndef EMUNIC_MQ_H
#define EMUNIC_MQ_H

#include <stddef.h>
#include <stdint.h>

struct emunic_dev;
struct emunic_mr;
struct emunic_cq;
struct emunic_qp;
struct emunic_mq;

/* ---- completions ------------------------------------------------------ */

/* Completion status: 0 is success; the rest mirror the verbs statuses so an
 * error from the wire keeps its meaning (RNR_RETRY_EXC, RETRY_EXC, ...). */
enum emunic_wc_status {
	EMUNIC_WC_SUCCESS = 0,
	EMUNIC_WC_LOC_LEN_ERR = 1,
	EMUNIC_WC_LOC_QP_OP_ERR = 2,
	EMUNIC_WC_LOC_PROT_ERR = 4,
	EMUNIC_WC_WR_FLUSH_ERR = 5,
	EMUNIC_WC_REM_ACCESS_ERR = 10,
	EMUNIC_WC_REM_OP_ERR = 11,
	EMUNIC_WC_RETRY_EXC_ERR = 12,
	EMUNIC_WC_RNR_RETRY_EXC_ERR = 13,
	EMUNIC_WC_GENERAL_ERR = 21,
	EMUNIC_WC_CANCELED = 64,	/* emunic: the device closed first */
	EMUNIC_WC_TIMEOUT = 65,		/* emunic: a bounded wait ran out */
};
const char *emunic_wc_status_str(int status);

enum emunic_task_op {
	EMUNIC_TASK_SEND = 1,
	EMUNIC_TASK_RECV,
	EMUNIC_TASK_WRITE,
	EMUNIC_TASK_WRITE_IMM,
	EMUNIC_TASK_READ,
	EMUNIC_TASK_FETCH_ADD,
	EMUNIC_TASK_WAIT,
	EMUNIC_TASK_SEND_EN,
	EMUNIC_TASK_RECV_EN,
	EMUNIC_TASK_CALC,		/* reduce, then send the result (see below) */
};
const char *emunic_task_op_str(int op);

struct emunic_wc {
	uint64_t wr_id;
	int status;			/* enum emunic_wc_status */
	int op;				/* enum emunic_task_op */
	uint32_t byte_len;		/* RECV, READ */
	uint32_t imm;			/* WRITE_IMM at the target (host order) */
	int has_imm;
	int peer;			/* SEND_EN/RECV_EN: the QP's; WAIT: the failed one's, else -1 */
	uint32_t qp_num;
};

/* ---- calc: reductions on the NIC ----------------------------------------- */

/*
 * A CALC task reduces as it sends, as CORE-Direct's calc did: when it runs,
 * the progress core writes calc_a[i] op calc_b[i] into addr (len bytes, a
 * whole number of elements; addr may be calc_a or calc_b), then
 *   - with a qp: sends addr's len bytes as a SEND (addr must be in mr); it is
 *     a data task like SEND, completing on the QP's send CQ.  On a
 *     MANAGED_SEND QP it reduces when the SEND_EN that releases it runs (so
 *     it reads operands the WAITs before that guarded, and the MQ's later
 *     tasks see its result); on another QP when it is handed to verbs;
 *   - with qp NULL: runs on the MQ's own queue, in order with its WAITs and
 *     enables (so after the WAITs before it), and keeps the result local.
 * The op x type pairs are MPI's (SUM, PROD, MIN, MAX on every type but the
 * pairs; the logical and bitwise ops on the integer types; MINLOC and MAXLOC
 * on the pairs), and for the BE_ slot types those ConnectX's calc had
 * (below); any other pair is -EINVAL at post time.  Integers wrap.
 *
 * The BE_ types are the operand format of CORE-Direct's calc on the HCA
 * (MLNX_OFED's IBV_EXP_SEND_WITH_CALC, as its cc_pingpong example packs
 * it): an element is a 16-byte slot, a big-endian 64-bit value at +0 and,
 * for MAXLOC, a big-endian 64-bit id at +8.  SUM, BAND, BOR and BXOR on
 * all three (the bitwise ops on the value's bits), MAXLOC on BE_UINT64
 * only (libmlx5's mlx5_calc_ops_table); MIN and MINLOC were done as MAXLOC
 * on negated values.  The result's +8 is the winner's id for MAXLOC (a tie
 * keeps the smaller id, as MPI's MAXLOC) and zero for the other ops.
 */
enum emunic_calc_op {
	EMUNIC_CALC_SUM = 1, EMUNIC_CALC_PROD, EMUNIC_CALC_MIN, EMUNIC_CALC_MAX,
	EMUNIC_CALC_LAND, EMUNIC_CALC_LOR, EMUNIC_CALC_LXOR,
	EMUNIC_CALC_BAND, EMUNIC_CALC_BOR, EMUNIC_CALC_BXOR,
	EMUNIC_CALC_MINLOC, EMUNIC_CALC_MAXLOC,
};

enum emunic_calc_type {
	EMUNIC_CALC_INT8 = 1, EMUNIC_CALC_UINT8, EMUNIC_CALC_INT16, EMUNIC_CALC_UINT16,
	EMUNIC_CALC_INT32, EMUNIC_CALC_UINT32, EMUNIC_CALC_INT64, EMUNIC_CALC_UINT64,
	EMUNIC_CALC_FLOAT, EMUNIC_CALC_DOUBLE,
	/* (value, int index) pairs, laid out as struct { float v; int i; } etc.,
	 * as MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT */
	EMUNIC_CALC_FLOAT_INT, EMUNIC_CALC_DOUBLE_INT, EMUNIC_CALC_LONG_INT, EMUNIC_CALC_2INT,
	EMUNIC_CALC_SHORT_INT,
	/* 16-byte big-endian slots of CORE-Direct's calc (above) */
	EMUNIC_CALC_BE_INT64, EMUNIC_CALC_BE_UINT64, EMUNIC_CALC_BE_DOUBLE,
};

/* Bytes of one element of type; 0 for an unknown type. */
size_t emunic_calc_size(int type);
/* 0 when op is defined on type, else -EINVAL. */
int emunic_calc_check(int op, int type);
/* dst[i] = a[i] op b[i] for count elements, on the host (what a CALC task
 * does on the NIC; for baselines and references).  dst may be a or b. */
int emunic_calc(int op, int type, void *dst, const void *a, const void *b, size_t count);
const char *emunic_calc_op_str(int op);
const char *emunic_calc_type_str(int type);

/* ---- memory -------------------------------------------------------------- */

struct emunic_rkey {			/* what a peer needs to reach a region */
	uint64_t addr;
	uint32_t rkey;
	uint32_t pad;
};
/* A region still registered when its device closes is deregistered there,
 * after the device's QPs; its handle dies with the device, as every
 * object's does (emunic_mr_dereg after the close is a use after free). */
int emunic_mr_reg(struct emunic_dev *dev, void *addr, size_t len, struct emunic_mr **out);
/* 0, -EINVAL (not a live region), or the device's error: the handle is
 * released either way, but then the device keeps the region registered
 * until it closes (and peers may reach it): keep the memory till then. */
int emunic_mr_dereg(struct emunic_mr *mr);
struct emunic_rkey emunic_mr_rkey(const struct emunic_mr *mr);

/* ---- CQs, QPs, MQs -------------------------------------------------------- */

#define EMUNIC_CQ_COUNT_ONLY (1u << 0)	/* count for WAIT, never queue for poll */

int emunic_cq_create(struct emunic_dev *dev, unsigned depth, unsigned flags, struct emunic_cq **out);
int emunic_cq_destroy(struct emunic_cq *cq);
/* Up to n completions not consumed by a WAIT; returns how many.  Finding
 * none, it polls verbs once first when no other thread runs the engine and only
 * work in verbs is left (its completions are otherwise collected lazily;
 * other work is already the progress core's), so a polling app sees them
 * as soon as a waiting one would. */
int emunic_cq_poll(struct emunic_cq *cq, struct emunic_wc *wc, int n);
/* Completions this CQ has produced so far (consumed or not). */
uint64_t emunic_cq_count(const struct emunic_cq *cq);

#define EMUNIC_QP_MANAGED_SEND (1u << 0)
#define EMUNIC_QP_MANAGED_RECV (1u << 1)
/* For triggered operations (emunic/triggered.h): the progress core keeps
 * receives posted and turns arriving writes-with-immediate into counts and
 * events; task lists may not name it. */
#define EMUNIC_QP_TRIGGERED (1u << 2)
/* Connections on demand (seed 002): either side may connect first, and a
 * peer's request for a QP this rank has not made yet makes it (see
 * emunic_qp_accept_on_demand).  When both connect at once the higher
 * rank's connection is kept and the lower rank's is refused, so a pair
 * never ends up with two QPs. */
#define EMUNIC_QP_ON_DEMAND (1u << 3)

struct emunic_qp_attr {
	unsigned flags;			/* EMUNIC_QP_MANAGED_* */
	struct emunic_cq *send_cq;
	struct emunic_cq *recv_cq;
	unsigned depth;			/* work requests in flight each way (0: 256) */
	/* 0: paired by order (below).  Else, below 2^30: paired with the
	 * peer's QP made with the same key, whatever the order (a key in use
	 * to that peer is -EEXIST, free again once emunic_qp_destroy of its
	 * QP returned 0; not with EMUNIC_QP_ON_DEMAND). */
	unsigned pair_key;
	int rnr_retry;			/* 0..7, 7 = forever; < 0: default 7 */
	int retry_cnt;			/* 0..7; < 0: default 7 */
	int timeout;			/* ACK timeout exponent; < 0: default 14 */
	/* EMUNIC_QP_TRIGGERED only: a connection that fails after it was up is
	 * made again, up to `reconnects` times in a row (a write-with-immediate
	 * that completes refills them), each within reconnect_timeout_ms (0:
	 * 10000) of work waiting; see emunic_qp_reconnects.  0: a failure is
	 * final. */
	unsigned reconnects;
	int reconnect_timeout_ms;
};
void emunic_qp_attr_init(struct emunic_qp_attr *a);

/*
 * A QP to peer, connected by the progress core.  Both ranks create their QPs
 * to each other in the same order: the k-th QP rank a makes to rank b is
 * connected to the k-th QP rank b makes to rank a (QPs made with a
 * pair_key are not counted: each connects to the peer's QP of its key).
 * Work posted before the connection is up waits, in order.
 */
int emunic_qp_create(struct emunic_dev *dev, int peer, const struct emunic_qp_attr *attr,
		     struct emunic_qp **out);
int emunic_qp_destroy(struct emunic_qp *qp);
int emunic_qp_peer(const struct emunic_qp *qp);
/* Sends a QP that is not TRIGGERED holds at once, posted and not yet
 * completed (more are -ENOSPC): a ring of this many result slots, indexed
 * by the QP's send count, is never overwritten under a send in flight. */
unsigned emunic_qp_send_capacity(const struct emunic_qp *qp);
/* Nonzero once the QP failed (its work completes with errors from now on). */
int emunic_qp_failed(const struct emunic_qp *qp);
/*
 * Ends qp's connection for good, as a final completion error would: its
 * work not yet done completes with EMUNIC_WC_WR_FLUSH_ERR (WAITs counting
 * it fail), later work fails, and the peer is told (rdma_disconnect), so
 * that its QP fails too, now rather than at its next timeout (a peer QP
 * with reconnections asks to connect again once it has work, and is
 * refused).  No reconnection, whatever attr.reconnects says.  The progress
 * core applies it (emunic_qp_failed is nonzero from then on); a QP that
 * failed already is left as it is.  A QP being connected is not cut short:
 * it ends when the connection comes up, or fails with the attempt (one
 * being made again between attempts is given up at once).  For an
 * application that gives up on a peer, or on a whole group: a collective
 * object that failed disconnects all its QPs (emunic/coll.h).  0; -EINVAL
 * for NULL, a destroyed QP or a call from an event handler; -EIO when the
 * command ring stayed full (the progress core stuck).
 */
int emunic_qp_disconnect(struct emunic_qp *qp);
/* Waits (bounded) until the connection is up: 0, -ETIMEDOUT, -ECONNREFUSED. */
int emunic_qp_wait_connected(struct emunic_qp *qp, int timeout_ms);
/* Nonzero once the connection is up. */
int emunic_qp_connected(const struct emunic_qp *qp);
/*
 * Reconnection (attr.reconnects > 0, TRIGGERED QPs): when the connection
 * fails (a completion error, the peer's disconnect, a fault rule), the
 * progress core tears it down and connects the pair again, in place: the
 * QP handle, the triggered operations waiting on counters and the order of
 * work stay as they were.  Each side tells the other, in the connection's
 * private data, how many writes-with-immediate arrived on the connection
 * that failed; of the work verbs held, those the peer counted (and the
 * plain writes before them: RC ran them in order) complete as done, the
 * rest (and every read) go out again first, in order.  So every write-with-
 * immediate lands exactly once, and what waits on it sees one success.
 * Atomics cannot be replayed safely: one caught in a failure completes with
 * the failure's status.  While reconnecting the QP is neither connected nor
 * failed.  When the budget or the time runs out, or the peer's QP is gone,
 * the failure is final (as without).  Returns the reconnections made so far
 * (each counted when the failed connection's work is settled, just before
 * the new connection carries it).
 */
unsigned emunic_qp_reconnects(const struct emunic_qp *qp);
/*
 * From now on an EMUNIC_QP_ON_DEMAND request from a peer for a QP this rank
 * has not created is accepted on a QP the progress core makes with attr
 * (flags must include EMUNIC_QP_ON_DEMAND); the next emunic_qp_create to that
 * peer with EMUNIC_QP_ON_DEMAND returns it instead of making another.
 * Without it such requests wait until this rank creates the QP.
 */
int emunic_qp_accept_on_demand(struct emunic_dev *dev, const struct emunic_qp_attr *attr);
/* QPs this device has (created by the app or accepted on demand, not destroyed). */
unsigned emunic_dev_qps(const struct emunic_dev *dev);

#define EMUNIC_TASK_SIGNAL (1u << 0)		/* one completion on the MQ */
#define EMUNIC_TASK_WAIT_EN_LAST (1u << 1)	/* WAIT: advance the CQ's wait base */

struct emunic_task {
	int op;				/* enum emunic_task_op */
	unsigned flags;			/* EMUNIC_TASK_* */
	uint64_t wr_id;
	struct emunic_qp *qp;		/* data tasks, SEND_EN, RECV_EN */
	struct emunic_cq *cq;		/* WAIT */
	uint32_t count;			/* WAIT, SEND_EN, RECV_EN */
	void *addr;			/* local buffer (in mr) */
	uint32_t len;
	struct emunic_mr *mr;		/* NULL only when len == 0 */
	uint64_t remote_addr;		/* WRITE*, READ, FETCH_ADD */
	uint32_t rkey;
	uint32_t imm;			/* WRITE_IMM, host order */
	uint64_t add;			/* FETCH_ADD */
	/* CALC: calc_op, calc_type: enum emunic_calc_op, emunic_calc_type;
	 * calc_a, calc_b: the operands, len bytes each (any memory). */
	int calc_op, calc_type;
	const void *calc_a, *calc_b;
};

int emunic_mq_create(struct emunic_dev *dev, unsigned depth, struct emunic_mq **out);
int emunic_mq_destroy(struct emunic_mq *mq);
/* Posts n tasks as one list; 0, -EINVAL (nothing posted), -ENOSPC (full),
 * -EOPNOTSUPP (a WRITE_IMM or FETCH_ADD the device cannot carry, see
 * emunic_dev_lacks; nothing posted). */
int emunic_mq_post(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n);
/* Flags of emunic_mq_post_flags. */
#define EMUNIC_POST_WAIT_NEXT (1u << 0)
/* As emunic_mq_post.  EMUNIC_POST_WAIT_NEXT: the calling thread waits on
 * this device right after (a blocking call's post, as io_uring's
 * submit-and-wait): the engine is left to that wait, which runs it, instead
 * of being handed over to the progress core in between (no timer set and
 * pushed out again for each list).  A caller that does not wait after all
 * still gets progress, from the core's periodic look: late, never stuck. */
int emunic_mq_post_flags(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n, unsigned flags);
/* Several lists, each to its own MQ, all MQs of one device, posted as one
 * unit: checked together (an enable in lists[1] sees the sends lists[0]
 * posts; an MQ's room counts all its lists), each ending its MQ's list as
 * if posted alone, and published at once, in array order.  Any refusal
 * posts nothing of any list: -EINVAL (naming the list and task; MQs of
 * different devices too), -ENOSPC, -E2BIG (a list longer than
 * emunic_dev_list_tasks), -EOPNOTSUPP.  Flags as emunic_mq_post_flags.
 * emunic_mq_post_flags is the one-list case. */
struct emunic_mq_list {
	struct emunic_mq *mq;
	const struct emunic_task *tasks;
	unsigned n;
};
int emunic_mq_post_lists(const struct emunic_mq_list *lists, unsigned nlists, unsigned flags);
/* A list checked once and started many times, as MPI-4's persistent
 * collectives (MPI_Barrier_init, MPI_Start).  emunic_mq_prepare makes every
 * check of emunic_mq_post that does not depend on what was posted before
 * (-EINVAL, -E2BIG, -EOPNOTSUPP as there; -ENOMEM) and copies the tasks: the
 * caller's array is not read again.  emunic_mq_start is then
 * emunic_mq_post_flags(mq, tasks, n, flags) of those tasks, each wr_id
 * increased by wr_id_add (e.g. an iteration number shifted above the bits
 * the wr_ids use), with the checks that do depend on it: an enable of more
 * than was posted (-EINVAL), room (-ENOSPC), and every object the tasks use
 * (MQ, QPs, CQs, memory regions) still alive (-EINVAL naming the task).
 * A start checks its flags, then liveness, then task by task the counter
 * rules and each QP's room, then the command ring's and the MQ's room:
 * where a post would name the first bad task, a start with a dead object
 * names that object's first task even if an earlier task breaks a counter
 * rule.  Its messages name the wr_ids as moved.  A refused start posts
 * nothing.  Free a prepared list before closing its
 * device; freeing it does not touch what its starts posted (the engine
 * reads a started list's tasks from the list itself: the free waits, at
 * most 10 s, until it has taken the last start; from inside an event
 * handler, where it cannot wait, it says so and leaves the list allocated).
 * Not concurrently with a start of the same list. */
struct emunic_mq_prepared;
int emunic_mq_prepare(struct emunic_mq *mq, const struct emunic_task *tasks, unsigned n,
		      struct emunic_mq_prepared **out);
int emunic_mq_start(struct emunic_mq_prepared *pl, uint64_t wr_id_add, unsigned flags);
void emunic_mq_prepared_free(struct emunic_mq_prepared *pl);
/* Up to n MQ completions (SIGNAL tasks); returns how many.  Finding none,
 * it polls verbs once first as emunic_cq_poll does. */
int emunic_mq_poll(struct emunic_mq *mq, struct emunic_wc *wc, int n);
/* One MQ completion, waiting at most timeout_ms (< 0: forever); -ETIMEDOUT. */
int emunic_mq_wait(struct emunic_mq *mq, struct emunic_wc *wc, int timeout_ms);
/* 1 if MQ completions are queued, not yet taken, else 0: a look that runs
 * nothing (no engine pass), for a caller that wants to read what is
 * already there without paying for a poll that finds nothing. */
int emunic_mq_pending(const struct emunic_mq *mq);

#endif /* EMUNIC_MQ_H */
