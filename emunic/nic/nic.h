/* SPDX-License-Identifier: MIT */
/*
 * The engine of the emulated NIC: its objects and what it offers the units
 * that plug into it (mq/, triggered/, cm/, fault/; see unit.h).
 *
 * Who touches what:
 *  - "app" fields are written by application threads under dev->post_lock
 *    (or before the object is published);
 *  - "status" fields are words the engine writes and anyone reads;
 *  - everything else is the engine's, read and written only by the thread
 *    that holds the device's ownership token (owner.c): the core thread,
 *    or an application thread that runs the engine while it waits.
 *
 * What crosses from the app to the engine is a command in the ring naming
 * objects by handle (index + generation, objs.c), never by pointer.
 */
#ifndef EMUNIC_NIC_H
#define EMUNIC_NIC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "emunic/verbs.h"
#include "emunic/base/base.h"
#include "emunic/base/ring.h"

struct nic_unit;
struct cm_dev;
struct qp_conn;
struct trig_dev;
struct mq_dev;
struct fault_qp;
struct emunic_fault_spec;

/* ---- objects and handles ------------------------------------------------------ */

/* OBJ_PREP: a prepared MQ list, only ever in the handle table (a START
 * command names it); never linked. */
enum obj_kind { OBJ_CQ = 1, OBJ_QP, OBJ_MQ, OBJ_MR, OBJ_CT, OBJ_EQ, OBJ_LE, OBJ_PREP, OBJ_KINDS };

#define NIC_HANDLE_INDEX_BITS 20
#define NIC_HANDLE_INDEX(h) ((h) & ((1u << NIC_HANDLE_INDEX_BITS) - 1))
#define NIC_TAB_CHUNK 1024u
#define NIC_TAB_CHUNKS 1024u		/* up to 1M live objects a device */

struct obj {
	enum obj_kind kind;
	uint32_t handle;		/* index | generation << NIC_HANDLE_INDEX_BITS */
	struct emunic_dev *dev;
	struct obj *next, *prev;	/* engine: the device's list of this kind */
	_Atomic bool dead;		/* app: destroy was called */
	_Atomic bool gone;		/* engine: released, never touched again */
	bool linked;			/* engine: in its list */
	struct obj *grave;		/* app: destroyed, kept until close */
};

struct nic_tab_slot {
	struct obj *_Atomic o;
	uint32_t gen;
};

struct nic_objtab {
	struct nic_tab_slot *_Atomic chunk[NIC_TAB_CHUNKS];
	pthread_mutex_t lock;		/* app: allocation */
	uint32_t *free;			/* free indices (a stack) */
	uint32_t nfree, cap, next;	/* next: first never used */
};

/* ---- tasks: the engine's work-queue entries ---------------------------------------- */

struct nic_task;
struct emunic_qp;
struct emunic_dev;

/* Whoever queued a task is told when it finishes, with its status and, for
 * a real completion, the verbs one (NULL: a flush, a cancel, a replay). */
struct nic_task_ops {
	void (*done)(struct emunic_dev *d, struct emunic_qp *qp, struct nic_task *t, int status,
		     const struct ibv_wc *wc);
	/* Optional: it was handed to verbs (on the wire from here). */
	void (*issued)(struct emunic_dev *d, struct emunic_qp *qp, struct nic_task *t);
};

#define NIC_TASK_SIGNAL 0x01		/* MQ: a completion on the MQ */
#define NIC_TASK_LIST_END 0x02		/* MQ: the list's last control task */
#define NIC_TASK_QUIET 0x04		/* nobody counts its completion: it may go unsignaled */
#define NIC_TASK_CALC_DONE 0x08		/* CALC: its result is in addr (never reduce twice) */

struct nic_task {
	const struct nic_task_ops *ops;
	void *ctx;			/* the owner's: its MQ, its triggered op */
	uint64_t wr_id;			/* the application's */
	uint8_t op;			/* enum emunic_task_op */
	uint8_t flags;			/* NIC_TASK_* */
	bool signaled;			/* handed to verbs with a completion asked for */
	bool early;			/* its completion came before a signaled one's ahead of it (siw) */
	uint32_t len, lkey, rkey;
	union { uint32_t imm; uint32_t calc; };			/* CALC: op << 8 | type */
	uint64_t addr;
	union { uint64_t remote_addr; uint64_t calc_a; };	/* CALC: the operands */
	union { uint64_t add; uint64_t calc_b; };
	uint64_t imm_idx;		/* writes-with-immediate before it on its connection */
	/* control tasks (an MQ's own queue) */
	struct obj *obj;		/* WAIT: its CQ; SEND_EN / RECV_EN: its QP */
	uint64_t target;		/* WAIT: count to reach; *_EN: enable up to */
};

/* A CALC task's reduction, done once, when the task runs (the op x type
 * pair and the length were checked at post time). */
static inline void nic_task_calc(struct nic_task *t)
{
	int type = (int)(t->calc & 0xff);

	if (t->flags & NIC_TASK_CALC_DONE)
		return;
	t->flags |= NIC_TASK_CALC_DONE;
	emunic_calc((int)(t->calc >> 8), type, (void *)(uintptr_t)t->addr, (const void *)(uintptr_t)t->calc_a,
		    (const void *)(uintptr_t)t->calc_b, t->len / emunic_calc_size(type));
}

/* A queue of tasks (software WQEs).  Indices only grow. */
struct nic_fifo {
	struct nic_task *q;
	uint32_t mask;
	bool grows;			/* engine-only queues double instead of refusing */
	uint64_t head;			/* next to hand to verbs (or to run, on the MQ) */
	uint64_t done;			/* completed, in order */
	uint64_t tail;			/* queued */
	_Atomic uint64_t completed;	/* status: for the app's room check */
	uint64_t posted;		/* app: tasks posted (room = posted - completed) */
};

int nic_fifo_init(struct nic_fifo *f, uint32_t entries, bool grows);
void nic_fifo_fini(struct nic_fifo *f);
static inline struct nic_task *nic_fifo_at(struct nic_fifo *f, uint64_t i) { return &f->q[i & f->mask]; }
static inline bool nic_fifo_room(struct nic_fifo *f, uint64_t more)
{
	return f->posted - atomic_load_explicit(&f->completed, memory_order_acquire) + more <= f->mask + 1;
}

/* ---- QPs ------------------------------------------------------------------------------ */

/* The QP's state as everyone sees it; the connection unit (cm/) keeps the
 * details of how it gets there. */
enum qp_state {
	QP_NEW,			/* created, not yet seen by the engine */
	QP_CONNECTING,		/* work waits, in order */
	QP_UP,			/* work flows */
	QP_DOWN,		/* the connection failed and is being made again: work waits */
	QP_ERROR,		/* failed for good: work completes with errors */
	QP_CLOSED,
};

/* A write-with-immediate's immediate and length, as the SEND that stands
 * for it carries them (imm_send.c); network order. */
struct nic_imm_msg {
	uint32_t imm, len;
};

/* A QP index that is a pair key (emunic_qp_attr.pair_key), never a count. */
#define NIC_QP_KEYED (1 << 30)
/* How messages name a QP to its peer: "#k" (the k-th) or "key K". */
#define NIC_QP_FMT "%s%d"
#define NIC_QP_ARG(qp) ((qp)->index & NIC_QP_KEYED ? "key " : "#"), ((qp)->index & ~NIC_QP_KEYED)

struct emunic_qp {
	struct obj o;
	int peer, index;		/* index: the k-th QP to this peer, or NIC_QP_KEYED | pair_key */
	struct emunic_qp_attr attr;	/* app: fixed at create */
	uint64_t sq_posted, sq_claimed;	/* app: for SEND_EN validation */
	uint64_t rq_posted, rq_claimed;
	struct emunic_qp *od_next;	/* app (post_lock): accepted on demand, not claimed */
	struct emunic_qp *keyed_next;	/* app (post_lock): on the device's list of keyed QPs */
	/* status */
	_Atomic int state;		/* enum qp_state */
	_Atomic bool was_up;		/* the connection was up once */
	_Atomic uint32_t qpn;
	_Atomic unsigned reconnects;	/* reconnections settled */
	struct emunic_word word;	/* bumped when state changes */
	/* engine */
	struct ibv_qp *vqp;
	struct nic_fifo sq, rq;
	uint64_t sq_enabled, rq_enabled;	/* managed: released up to */
	uint64_t sq_unsignaled;		/* handed to verbs since the last signaled one */
	bool flushing;			/* what verbs holds was completed by emunic */
	bool ready;			/* in the device's ready list */
	bool stalled;			/* released work waits for verbs room (a completion) */
	struct emunic_qp *ready_next;
	/* TRIGGERED: receives kept posted for arrivals, counted per connection */
	bool arrivals;
	bool recvs_posted;		/* ... on the current verbs QP */
	unsigned owed;			/* receives a fault rule held back */
	uint64_t conn_id;		/* set by the connection unit */
	uint64_t imm_sent;		/* writes-with-immediate handed to verbs on it */
	uint64_t rx_conn, rx_count;	/* latest connection anything arrived on; arrivals */
	/* ... on a device without immediate data (imm_send.c) */
	bool imm_by_send;		/* writes-with-immediate go as WRITE + SEND */
	struct nic_imm_msg *imm_slots;	/* where arrivals land: the receive queue's depth */
	struct ibv_mr *imm_mr;
	uint64_t imm_next;		/* receives posted into slots: the next one's is this % depth */
	struct qp_conn *conn;		/* the connection unit's */
	struct fault_qp *flt;		/* the fault unit's (NULL: no rule touched it) */
};

struct emunic_mr {
	struct obj o;
	struct ibv_mr *mr;
	struct ibv_mr *stuck;		/* deregistering failed: tried again at close */
};

/* The region holds [addr, addr + len). */
static inline bool nic_mr_covers(const struct emunic_mr *m, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, base = (uintptr_t)m->mr->addr;

	return a >= base && a + len <= base + m->mr->length;
}

/* ---- commands: the ring from the app to the engine ----------------------------------- */

enum nic_cmd_type {
	NIC_CMD_TASK = 1,	/* one task of an MQ list; lists are published whole */
	NIC_CMD_TRIG,		/* an op of emunic/triggered.h, triggered or not */
	NIC_CMD_OBJ_CREATE,	/* link an object (QPs start connecting) */
	NIC_CMD_OBJ_DESTROY,
	NIC_CMD_START,		/* a start of a prepared MQ list (start_*) */
	NIC_CMD_QP_DISCONNECT,	/* emunic_qp_disconnect: the QP fails for good */
	NIC_CMD_TYPES,
};

/* START: a start of a prepared list in one command.  The engine reads the
 * list's commands where the prepare left them (they do not change) and
 * gives each its wr_id moved by start_add and, in order, the targets this
 * start worked out (the enables' and WAITs'; a list with more goes as its
 * commands, copied). */
#define NIC_START_TARGETS 6

struct nic_cmd {
	uint16_t type;
	uint8_t op;		/* TASK: enum emunic_task_op */
	uint8_t flags;		/* TASK: NIC_TASK_* */
	uint32_t obj;		/* handle: TASK: the QP (data, *_EN) or CQ (WAIT); OBJ_*: the object
				 * (op: its kind); START: the prepared list (OBJ_PREP) */
	union {
		struct {
			uint32_t mq;		/* TASK: the MQ's handle; TRIG: the op's slot */
			uint32_t len;
			uint64_t wr_id;
			uint64_t target;	/* WAIT: count to reach; *_EN: enable up to */
			uint64_t addr;
			union { uint64_t remote_addr; uint64_t calc_a; };	/* CALC: the operands */
			union { uint64_t add; uint64_t calc_b; };
			uint32_t lkey, rkey;
			union { uint32_t imm; uint32_t calc; };		/* CALC: op << 8 | type */
		};
		struct {
			uint32_t start_n;	/* START: targets */
			uint64_t start_add;	/* ... the wr_id offset */
			uint64_t start_target[NIC_START_TARGETS];
		};
	};
};

_Static_assert(sizeof(struct nic_cmd) == 72, "a command is 72 bytes, a START one of them");

typedef void (*nic_cmd_fn)(struct emunic_dev *d, const struct nic_cmd *c);

/* ---- hooks the connection and fault units install -------------------------------------- */

/* How a failure is final: tell the peer; or say nothing when no work waits. */
#define NIC_QPF_DISCONNECT 1u
#define NIC_QPF_QUIET_IDLE 2u

struct nic_qp_hooks {
	/* qp's connection failed with status: true when it will be made again
	 * (leave its work alone), false when the failure is final (the QP is
	 * in QP_ERROR). */
	bool (*failed)(struct emunic_dev *d, struct emunic_qp *qp, int status, unsigned how, const char *why);
	/* A write-with-immediate of qp completed: the peer takes writes again. */
	void (*delivered)(struct emunic_dev *d, struct emunic_qp *qp);
	/* The application ends qp's connection for good (emunic_qp_disconnect). */
	void (*end)(struct emunic_dev *d, struct emunic_qp *qp);
};

struct nic_fault_ops {
	/* QP transport settings the rules ask for. */
	void (*qp_opts)(struct emunic_dev *d, const struct emunic_qp *qp, struct emunic_qp_opts *o);
	/* May the engine hand one more receive to verbs on qp?  Counts it if so. */
	bool (*recv_ok)(struct emunic_dev *d, struct emunic_qp *qp);
	/* The QP is up: true if a rule reset it right now. */
	bool (*qp_up)(struct emunic_dev *d, struct emunic_qp *qp);
	/* A message consumed a receive on qp. */
	void (*arrival)(struct emunic_dev *d, struct emunic_qp *qp);
	/* A verbs completion of work request op: may turn it into an error. */
	void (*wc)(struct emunic_dev *d, struct emunic_qp *qp, struct ibv_wc *wc, int op);
};

/* An arrival on a TRIGGERED QP (the triggered unit counts it). */
typedef void (*nic_arrival_fn)(struct emunic_dev *d, struct emunic_qp *qp, const struct ibv_wc *wc);

/* ---- the device ----------------------------------------------------------------------- */

#define NIC_MAX_UNITS 8
#define NIC_NOTICE_LEN 320
#define NIC_NOTICES 64

struct emunic_dev {
	struct emunic_vdev *v;
	struct emunic_boot *boot;
	int rank, size;
	struct emunic_dev_attr attr;
	enum emunic_idle idle;

	/* app side */
	struct emunic_lock post_lock;	/* one producer at a time; lists whole (calloc: free) */
	_Atomic uint32_t deaths;	/* objects marked dead so far: a prepared list's start
					 * looks at its objects only when this moved */
	struct emunic_ring cmd;		/* struct nic_cmd */
	struct nic_objtab tab;
	int *qp_seq;			/* QPs made to each peer so far */
	bool od_accept;			/* accept on-demand requests with od_attr */
	struct emunic_qp_attr od_attr;
	struct emunic_qp *od_unclaimed;	/* made by the engine, no emunic_qp_create yet */
	struct emunic_qp *keyed;	/* app (post_lock): QPs made with a pair_key, dead ones too */
	_Atomic unsigned nqps;
	struct obj *graveyard;		/* destroyed, kept so a stale handle reads as dead */

	/* the ownership token (owner.c) */
	_Atomic uint32_t held;		/* 1: someone runs the engine */
	_Atomic uint32_t kick;		/* work was asked for while it was held */
	_Atomic bool core_kicked;	/* a hint: the kick is (also) the core thread's (owner.c) */
	_Atomic uint32_t assisting;	/* app threads running the engine while they wait */
	_Atomic uint32_t sleepers;	/* waiters asleep (or going to sleep) on their word */

	/* the core thread (thread.c) */
	pthread_t thread;
	bool thread_started;
	_Atomic bool stop;
	_Atomic bool sleeping;		/* blocked in io_uring */
	_Atomic bool armed;		/* a completion event is asked for */
	_Atomic bool cm_ready;		/* the CM channel has events */
	_Atomic uint64_t wake_ns;	/* when the core's timer fires (UINT64_MAX: not set) */
	bool wake_urgent;		/* ... set for work waiting on a completion */
	int cm_fd;			/* the rdma_cm channel (-1: none) */
	int doorbell;			/* eventfd (wake.c) */
	int wake_timer;			/* timerfd (wake.c) */
	void *uring;
	bool rt;			/* the core runs at real-time priority */
	_Atomic bool core_shares_cpu;	/* not pinned to a CPU of its own (thread.c) */

	/* the engine */
	struct ibv_comp_channel *chan;
	struct ibv_cq *vcq;
	struct obj *objs[OBJ_KINDS];	/* linked objects by kind */
	struct emunic_qp *ready, *ready_tail;	/* QPs with work to hand to verbs */
	unsigned inflight;		/* tasks in verbs, all QPs */
	unsigned stalled;		/* QPs stalled (above) */
	uint64_t fired;			/* triggers fired, a running count (nic_fired) */
	const struct nic_unit *unit[NIC_MAX_UNITS];
	unsigned nunits;
	int (*step[NIC_MAX_UNITS])(struct emunic_dev *d);	/* the units' steps, for a pass's one loop */
	unsigned nsteps;
	nic_cmd_fn on_cmd[NIC_CMD_TYPES];
	void (*obj_free[OBJ_KINDS])(struct obj *o);	/* a kind's own parts, at close */
	_Atomic bool need_core;		/* work only a handler-safe thread may do: the
					 * triggered unit's deferred finishes and events,
					 * set and cleared by it under the token */
	const struct nic_qp_hooks *qp_hooks;
	const struct nic_fault_ops *fault;	/* NULL: no rules */
	nic_arrival_fn on_arrival;
	struct emunic_dev_stats st;	/* statistics (emunic_dev_stats) */

	/* units' own state */
	struct cm_dev *cm;
	struct trig_dev *trig;
	struct mq_dev *mq;
	struct emunic_fault_spec *faults;	/* parsed rules (fault/) */
	_Atomic uint64_t fault_wc, fault_held, fault_failed;
	unsigned fault_timed;		/* QPs whose held receives go at a deadline (fault/inject.c) */

	/* notices: engine messages, printed outside the engine (notice.c) */
	pthread_mutex_t notice_lock;
	char notice[NIC_NOTICES][NIC_NOTICE_LEN];
	unsigned notice_head, notice_tail;
	_Atomic uint32_t notices;	/* queued, not printed */
	uint64_t notices_lost;
};

/* ---- objs.c: object table, linking, release ---------------------------------------- */

void nic_obj_init(struct obj *o, struct emunic_dev *d, enum obj_kind k);
/* Gives o a handle (app side); -ENOSPC when the table is full. */
int nic_obj_handle(struct obj *o);
void nic_obj_unhandle(struct obj *o);
/* The live object behind handle h of kind k, or NULL (engine side). */
struct obj *nic_resolve(struct emunic_dev *d, uint32_t h, enum obj_kind k);
bool nic_obj_alive(struct emunic_dev *d, const struct obj *o, enum obj_kind k);
bool nic_obj_kill(struct obj *o);
/* Publish / destroy through the ring; destroy waits (bounded) until the
 * engine released it.  0 or -errno. */
int nic_obj_create(struct obj *o);
int nic_obj_destroy(struct obj *o, const char *what);
/* Engine: link an object it made itself (accepted on demand). */
void nic_obj_link(struct emunic_dev *d, struct obj *o);
void nic_mr_link(struct emunic_dev *d, struct emunic_mr *m, bool live);
void nic_obj_free(struct obj *o);
/* A QP object, not yet published (caller holds post_lock). */
struct emunic_qp *nic_qp_new(struct emunic_dev *d, int peer, const struct emunic_qp_attr *attr);
void nic_free_objs(struct emunic_dev *d);
void nic_objs_init(struct emunic_dev *d);
int nic_objtab_init(struct nic_objtab *t);
void nic_objtab_fini(struct nic_objtab *t);

/* ---- ring.c (in objs.c): commands ---------------------------------------------------- */

/* Control commands wait (bounded) for ring room rather than fail. */
int nic_send_cmd(struct emunic_dev *d, uint16_t type, uint8_t op, uint32_t obj, uint32_t aux);
/* How a posting thread leaves the engine once its commands ran. */
enum nic_leave {
	NIC_LEAVE_HAND_OVER,	/* run the passes others asked for meanwhile, hand the rest to the core */
	NIC_LEAVE_WAIT_NEXT,	/* it waits on d right after (EMUNIC_POST_WAIT_NEXT): as an assisting
				 * thread, without handing the engine over to the core */
	NIC_LEAVE_TO_CORE,	/* work the core thread asked for meanwhile is the core's (nic_unown_posted):
				 * a triggered op or counter change may start a chain of any length, the NIC's
				 * to run, not the application's */
};
/* The app published commands: run them now if the engine is free, else
 * make sure whoever runs it does (nic_submitted, below: inline for a
 * blocking call's post, which leaves them to its wait).  The caller has
 * kicked. */
void nic_submitted_run(struct emunic_dev *d, enum nic_leave how);

/* ---- owner.c: the ownership token --------------------------------------------------- */

/* Takes the token if it is free: then this thread runs the engine. */
bool nic_own(struct emunic_dev *d);
/* Gives it back; work asked for meanwhile is run first, or handed on.
 * True when it ran a pass for such work (or left it to the core). */
bool nic_unown(struct emunic_dev *d);
/* As nic_unown, for an application thread that posted and goes back to its
 * own work: work the core thread asked for is left to the core. */
bool nic_unown_posted(struct emunic_dev *d);
/* Takes a kick over: the holder's next pass serves it. */
void nic_take_kick(struct emunic_dev *d);
/* Under the token, a waiter that took it to keep it across its looks: an
 * urgent core timer set for work the waiter now runs is pushed out, as
 * the hand-over of a look that gave the token back did (a tight post/wait
 * loop never wakes the core). */
void nic_assist_took(struct emunic_dev *d);
/* This thread holds the token (it is inside the engine: a handler, say). */
bool nic_owned(const struct emunic_dev *d);
/* This thread holds some device's token (it is inside an engine). */
extern _Thread_local const struct emunic_dev *nic_owner_of;
static inline bool nic_in_engine(void)
{
	return nic_owner_of != NULL;
}
/* Asks whoever holds the token for one more pass (the requester's side of
 * owner.c's handshake: the fence pairs with a leaving holder's). */
static inline void nic_kick(struct emunic_dev *d)
{
	atomic_store_explicit(&d->kick, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}
/* A blocking call's post (EMUNIC_POST_WAIT_NEXT) outside an engine: the
 * wait that follows takes the token and runs these commands in its first
 * pass, so running them here too costs a token round and a hand-over for
 * nothing.  The kick makes a holder meanwhile run them.  A poster that
 * never waits is still served (mq.h) by the core's timer if one is set (at
 * most 1 s away: prepare_sleep and hand_over cap it); with none set, the
 * post runs them itself and hands over as before.  The kick comes first:
 * a holder that clears the timer and then leaves either sees the kick
 * (after its fence) or cleared it before this look (after the kick's). */
static inline void nic_submitted(struct emunic_dev *d, enum nic_leave how)
{
	nic_kick(d);
	if (how == NIC_LEAVE_WAIT_NEXT && !nic_in_engine() &&
	    atomic_load_explicit(&d->wake_ns, memory_order_relaxed) != UINT64_MAX)
		return;
	nic_submitted_run(d, how);
}
/* This thread may run event-queue handlers (the core thread, and threads
 * that wait: not threads that post, which may hold their own locks). */
bool nic_handlers_ok(void);
void nic_set_handlers_ok(bool ok);
void nic_set_core_thread(void);
bool nic_is_core_thread(void);

/* ---- engine.c: one pass ------------------------------------------------------------- */

/* Drains the ring, polls verbs, steps every unit, hands eligible work to
 * verbs.  Returns how much it did (0: nothing).  Caller holds the token. */
int nic_pass(struct emunic_dev *d);
/* When some unit must run with no event (emunic_now_ns time, now as the
 * caller read it; UINT64_MAX: never). */
uint64_t nic_next_due_ns(struct emunic_dev *d, uint64_t now);
/* Work a pass can do now, with no completion to wait for: commands, a
 * unit's runnable work, QPs with work for verbs (ready, or stalled). */
bool nic_runnable(struct emunic_dev *d);
/* Work the core must come for soon: commands, a unit's runnable work,
 * QPs with work for verbs (ready, or stalled for room), work in verbs while
 * a waiter sleeps, and a unit's pending work where the core has a CPU of
 * its own or the unit wakes it anyway (triggers).  Otherwise work merely in
 * verbs, or an MQ's WAIT where the core shares the application's CPUs, is
 * not: its completions are polled by whoever polls or waits, or lazily
 * (owner.c). */
bool nic_urgent(struct emunic_dev *d);
/* A completion would move something: urgent work, or work in verbs that a
 * unit's pending work waits on (an MQ's WAIT, triggers).  What the core
 * asks a completion event for: not for work merely in verbs (a collective's
 * landing receives, sends whose completions nobody waits for), collected
 * by the app's next poll or wait, or lazily: waking the core for each of
 * those arrivals took the CPUs from the ranks and from rxe's own packet
 * work (thread.c prepare_sleep). */
bool nic_awaited(struct emunic_dev *d);
/* A unit fired a trigger.  What it sent is usually answered a round trip
 * later by an arrival that fires the next one (a peer's put on its
 * counter), with no application thread involved: so even a core that
 * shares the CPUs spins for that answer after a pass that fired one
 * (thread.c reads the count around its passes; spin.c). */
static inline void nic_fired(struct emunic_dev *d) { d->fired++; }
/* An app poll that found nothing: if the engine is free and nothing urgent
 * is left, poll verbs (as ibv_poll_cq reads what the HCA wrote), and run a
 * pass if what it found made work runnable (a WAIT met).  Never from a
 * thread that runs some device's engine.  True when it did anything. */
bool nic_poll_assist(struct emunic_dev *d);
/* emunic_dev_progress: if the engine is free (never from inside one), a
 * look at verbs, and a pass with this thread's event handlers allowed when
 * that found something or work waits (commands, a kick, a handler's
 * events); then the token goes back as a poll's does.  1 when it did
 * anything. */
int nic_progress(struct emunic_dev *d);
/* Device closing: every unit fails what cannot finish. */
void nic_cancel_all(struct emunic_dev *d);
void nic_release_obj(struct emunic_dev *d, struct obj *o);
int nic_register(struct emunic_dev *d, const struct nic_unit *u);
void nic_on_cmd(struct emunic_dev *d, enum nic_cmd_type type, nic_cmd_fn fn);

/* ---- verbs.c: the data path ------------------------------------------------------------ */

/* Queues t on qp's send (recv) queue; it goes to verbs when eligible. */
void nic_qp_queue(struct emunic_dev *d, struct emunic_qp *qp, const struct nic_task *t, bool recv);
/* The same in two steps, the task built in place: its slot (NULL: no
 * memory; nic_qp_queue then fails the task), then nic_qp_queued. */
struct nic_task *nic_qp_slot(struct emunic_qp *qp, bool recv);
void nic_qp_queued(struct emunic_dev *d, struct emunic_qp *qp, bool recv);
/* Managed QPs: releases the send (recv) queue up to `upto` tasks. */
void nic_qp_enable(struct emunic_dev *d, struct emunic_qp *qp, bool recv, uint64_t upto);
/* qp may have work to hand to verbs (it came up, a fault hold ended...). */
void nic_qp_ready(struct emunic_dev *d, struct emunic_qp *qp);
/* Work waits on qp's send queue (for verbs or in it). */
bool nic_qp_has_work(const struct emunic_qp *qp);
int nic_verbs_poll(struct emunic_dev *d);
int nic_verbs_push(struct emunic_dev *d);
/* The connection failed: tasks verbs never saw complete with status. */
void nic_qp_flush_unposted(struct emunic_qp *qp, int status);
/* Reconnection: of the tasks verbs held, the first `delivered`
 * writes-with-immediate (and the writes before them) complete as done,
 * atomics with status, the rest go out again first. */
void nic_qp_replay(struct emunic_qp *qp, uint64_t delivered, int status);
/* Everything the QP holds completes with status. */
void nic_qp_give_up(struct emunic_qp *qp, int status);
/* Device closing: every task is canceled; returns how many. */
uint64_t nic_qp_cancel(struct emunic_qp *qp);
/* A new verbs QP: post the receives arrivals need (TRIGGERED QPs). */
int nic_qp_arrivals_init(struct emunic_dev *d, struct emunic_qp *qp);
/* Immediate data by SEND (imm_send.c), on a QP with imm_by_send: its
 * receive slots (registered at its first connection, freed with the QP's
 * memory, at device close); the slot and buffer of the next receive; the
 * WRITE (if t has data) and SEND that carry a WRITE_IMM task t, built at
 * wr/sge/msg (returns how many: 1 or 2, each with wr_id, the last one's
 * next left for the caller); and an arrival in `slot` turned back into a
 * write-with-immediate's wc. */
int nic_imm_slots_init(struct emunic_dev *d, struct emunic_qp *qp);
void nic_imm_slots_fini(struct emunic_qp *qp);
uint32_t nic_imm_recv_slot(struct emunic_qp *qp, struct ibv_sge *sge);
unsigned nic_imm_build_send(struct ibv_send_wr *wr, struct ibv_sge *sge, struct nic_imm_msg *msg,
			    const struct nic_task *t, uint64_t wr_id);
void nic_imm_from_send(struct emunic_qp *qp, struct ibv_wc *wc, uint32_t slot);
/* A fault rule released the receives it held. */
void nic_qp_post_owed(struct emunic_dev *d, struct emunic_qp *qp);
/* The verbs QP and what the CQ still holds of it go (reconnection). */
void nic_qp_drop_verbs(struct emunic_dev *d, struct emunic_qp *qp);
/* The verbs QP of an attempt that never connected goes, the CQ untouched
 * (called inside rdma_cm events): no work was handed to it, and the
 * receives for arrivals it held, which siw flushes at destroy, are dropped
 * by the poll while the QP connects. */
void nic_qp_drop_unconnected(struct emunic_dev *d, struct emunic_qp *qp);
/* The QP's connection failed (a completion, the peer, a fault rule). */
bool nic_qp_failed(struct emunic_dev *d, struct emunic_qp *qp, int status, unsigned how, const char *why);
void nic_qp_set_state(struct emunic_qp *qp, enum qp_state s);

/* ---- notice.c: engine messages --------------------------------------------------------- */

/* Queues a message ("emunic: rank R: ..." once printed); never blocks. */
void nic_notice(struct emunic_dev *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints what is queued (outside the engine: the core loop, waits, close). */
void nic_notices_flush(struct emunic_dev *d);
/* The same, where it is cheap to look often: whoever leaves the engine
 * (the core after a pass, a wait, a poll, a post that ran it) prints what
 * that pass queued, so a failure is said before a peer it told can act. */
static inline void nic_notices_out(struct emunic_dev *d)
{
	if (atomic_load_explicit(&d->notices, memory_order_relaxed))
		nic_notices_flush(d);
}

/* ---- thread.c: the core thread ------------------------------------------------------------ */

int nic_core_start(struct emunic_dev *d);
void nic_core_stop(struct emunic_dev *d);
/* spin.c: how long the core spins after its last work before it sleeps. */
struct nic_spin {
	uint64_t min_ns, max_ns, ns;	/* EMUNIC_SPIN_US, EMUNIC_SPIN_MAX_US, now */
	uint64_t idle_from;		/* the end of the last work (0: not timing a gap) */
	uint64_t fired_at;		/* the last pass that fired a trigger (0: none since it slept) */
	bool slept;			/* ... since which the core slept */
};
void nic_spin_init(struct emunic_dev *d, struct nic_spin *s);
/* The core sleeps; own_gap: it left the engine idle (not to an app thread). */
void nic_spin_slept(struct nic_spin *s, bool own_gap);
/* The core ran a pass at `now` that did n things, fired: among them a
 * trigger (d->fired moved). */
void nic_spin_pass(struct emunic_dev *d, struct nic_spin *s, int n, uint64_t now, bool fired);
/* How long after its last work the core spins before it sleeps: its
 * adapted spin on a CPU of its own, or within that spin of a pass that
 * fired a trigger; else (and while an application thread waits in the
 * engine, or after a wake-up that found nothing) the least. */
uint64_t nic_spin_ns(struct emunic_dev *d, const struct nic_spin *s);
/* wake.c: the doorbell and the timer that wake the core thread. */
int nic_wake_init(struct emunic_dev *d, bool timer);
void nic_wake_fini(struct emunic_dev *d);
void nic_doorbell(struct emunic_dev *d);
/* The core's timer fires at `when` (emunic_now_ns time); under the token. */
void nic_set_wake(struct emunic_dev *d, uint64_t when);

/* ---- assist.c: every bounded wait ----------------------------------------------------- */

/*
 * Waits until cond(arg) holds, at most timeout_ms (< 0: no bound): while the
 * engine's token is free this thread runs the engine itself (caller-assisted
 * progress) for up to the assist budget, then sleeps on the object's own
 * wait word(s) until they move.  0, or -ETIMEDOUT.
 */
int nic_wait(struct emunic_dev *d, struct emunic_word *const *w, unsigned nw, bool (*cond)(void *), void *arg,
	     int timeout_ms);

#endif
