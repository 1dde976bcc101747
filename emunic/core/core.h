/* SPDX-License-Identifier: MIT */
/*
 * The progress core's objects.  App threads touch only what is marked
 * "app" (under dev->post_lock) and the rings; everything marked "core" is
 * read and written by the progress thread alone.
 */
#ifndef EMUNIC_CORE_H
#define EMUNIC_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "emunic/verbs.h"
#include "emunic/core/ring.h"
#include "emunic/fault/fault.h"

struct trig;

enum cmd_type {
	CMD_TASK = 1,		/* one task of a list; lists are published whole */
	CMD_OBJ_CREATE,		/* link an object; QPs start connecting */
	CMD_OBJ_DESTROY,
	CMD_TRIG,		/* an op of emunic/triggered.h, triggered or not */
};

/* A task as the core runs it: counts resolved to absolute targets at post. */
struct core_task {
	struct emunic_task t;
	struct emunic_mq *mq;
	uint64_t target;	/* WAIT: cq count to reach; *_EN: enable up to */
	uint32_t lkey;		/* of t.mr, taken at post */
	struct trig *x;		/* triggered op (its completion goes to emunic/triggered) */
	bool list_end;		/* the last MQ task (WAIT/SEND_EN/RECV_EN) of its list */
	uint64_t imm_idx;	/* core: writes-with-immediate before it on its connection */
};

struct cmd {
	uint32_t type;
	void *obj;		/* CMD_OBJ_*: the object; CMD_TRIG: struct trig */
	struct core_task task;
};

/* A FIFO of tasks a queue holds (software WQEs). */
struct task_fifo {
	struct core_task *q;
	uint32_t mask;
	uint64_t head;		/* next to hand to verbs (or to run, on the MQ) */
	uint64_t done;		/* completed (verbs queues: in order) */
	uint64_t tail;		/* posted */
	_Atomic uint64_t completed;	/* read by the app for its room check */
	uint64_t posted;		/* app: tasks posted (room = posted - completed) */
};

enum obj_kind { OBJ_CQ = 1, OBJ_QP, OBJ_MQ, OBJ_MR, OBJ_CT, OBJ_EQ, OBJ_LE };

struct obj {
	enum obj_kind kind;
	struct emunic_dev *dev;
	struct obj *next;		/* core: device's list */
	_Atomic bool dead;		/* app: destroy was called */
	_Atomic bool gone;		/* core: released, never touched again */
	struct obj *grave;		/* app: destroyed objects, freed at close */
};

struct emunic_cq {
	struct obj o;
	unsigned flags;
	_Atomic uint64_t count;		/* completions produced */
	uint64_t wait_index, wait_count;	/* app: WAIT base (post time) */
	_Atomic uint64_t covered;	/* app: highest WAIT target posted */
	struct emunic_ring wc;		/* core -> app: completions to poll */
	_Atomic uint64_t overrun;
	int err_status, err_peer;	/* core: first failed completion (sticky) */
	uint32_t err_qpn;
};

enum qp_state { QP_NEW, QP_CONNECTING, QP_UP, QP_ERROR, QP_CLOSED };

/* Core: reconnection of a failed connection (reconnect.c).  Connection ids
 * are (connecting rank + 1) << 40 | its count, so both sides name one alike. */
struct qp_rc {
	unsigned left;			/* reconnections left before a failure is final */
	unsigned made;			/* reconnections settled (counted once each) */
	bool down;			/* failed, being made again (state CONNECTING) */
	bool settled;			/* this reconnection's work was settled */
	bool teardown;			/* the verbs QP and id of the failure still exist */
	int status;			/* what failed it */
	uint64_t seq;			/* connections this side started */
	uint64_t conn;			/* the current (or being made) connection */
	uint64_t up_conn;		/* the last one that came up here */
	uint64_t joined;		/* the last one accepted here or answered to us */
	bool passive;			/* qp->id is a request we accepted */
	uint64_t tx_conn, imm_sent;	/* where the tasks verbs holds went; writes-with-imm among them */
	uint64_t rx_conn, rx_count;	/* latest connection anything arrived on; arrivals */
	uint64_t since_ns;		/* reconnecting with work waiting since */
	uint64_t next_try_ns;		/* after a failed attempt */
	struct rdma_cm_id *dead_id;	/* a failed attempt's id, destroyed outside its event */
};

struct emunic_qp {
	struct obj o;
	int peer, index;		/* index: k-th QP to this peer */
	struct emunic_qp_attr attr;
	uint64_t sq_posted, sq_claimed;	/* app: for SEND_EN validation */
	uint64_t rq_posted, rq_claimed;
	/* core */
	struct rdma_cm_id *id;
	struct ibv_qp *vqp;
	_Atomic int state;
	_Atomic bool was_up;		/* the connection was established once */
	_Atomic uint32_t qpn;
	struct task_fifo sq, rq;
	uint64_t sq_enabled, rq_enabled;	/* managed: released up to */
	bool flushing;			/* receives in verbs were completed by emunic */
	bool disconnected;		/* rdma_disconnect was called */
	struct trig *backlog, *backlog_tail;	/* TRIGGERED: fired, waiting for room */
	bool recvs_posted;			/* TRIGGERED: receives for arrivals */
	struct emunic_qp *od_next;		/* app (post_lock): accepted on demand, not claimed */
	struct fault_qp flt;			/* core: what the fault rules did to it */
	struct qp_rc rc;			/* core: reconnection */
};

struct emunic_mq {
	struct obj o;
	struct task_fifo q;		/* WAIT / SEND_EN / RECV_EN */
	struct emunic_ring wc;		/* core -> app: SIGNAL completions */
	_Atomic uint32_t seq;		/* futex word: bumped per completion */
	_Atomic int waiters;
	bool skipping;			/* core: a WAIT failed; the rest of its list flushes */
};

struct emunic_mr {
	struct obj o;
	struct ibv_mr *mr;
};

/* A connection request that came before the QP it is for was created. */
struct parked_req {
	struct rdma_cm_id *id;
	int peer, index;
	struct emunic_conn_hello h;	/* what it said */
	uint64_t due_ns;		/* delayed requests: when to look at it */
	struct parked_req *next;
};

struct emunic_dev {
	struct emunic_vdev *v;
	struct emunic_boot *boot;
	int rank, size;
	struct emunic_dev_attr attr;
	enum emunic_idle idle;

	/* app side */
	pthread_mutex_t post_lock;	/* one producer at a time; lists whole */
	struct emunic_ring cmd;
	int *qp_seq;			/* QPs made to each peer so far */
	bool od_accept;			/* accept on-demand requests with od_attr */
	struct emunic_qp_attr od_attr;
	struct emunic_qp *od_unclaimed;	/* made by the core, no emunic_qp_create yet */
	_Atomic unsigned nqps;

	/* core side */
	pthread_t thread;
	_Atomic bool stop;
	_Atomic bool sleeping;
	int doorbell;			/* eventfd */
	struct ibv_comp_channel *chan;
	struct ibv_cq *vcq;
	struct rdma_event_channel *cm;
	struct rdma_cm_id *listen;
	struct sockaddr_in *addr;	/* every rank's listener */
	struct obj *objs;
	struct obj *graveyard;		/* app (post_lock): destroyed, kept so a
					 * stale handle still reads as dead */
	struct parked_req *parked;
	struct parked_req *delayed;	/* $EMUNIC_ACCEPT_DELAY_MS: requests held back */
	unsigned accept_delay_ms;
	void *uring;			/* struct io_uring, sleep mode */

	/* emunic/triggered */
	unsigned trig_max;
	_Atomic unsigned trig_used;	/* app reserves at post; core frees at fire */
	struct emunic_le *les[0x4000];	/* by list entry id (app sets under post_lock) */
	uint16_t le_next;		/* app: where the next id search starts */
	_Atomic uint32_t ct_seq;	/* futex word: bumped when a counter changes */
	struct emunic_ct *dirty;	/* core: counters whose triggers need a look */
	uint64_t sink_bps;		/* core: 0 = unthrottled */
	uint64_t sink_free_ns;		/* core: when the sink drains what it has */
	struct trig *sink, *sink_tail;	/* core: completions held by the sink */
	unsigned backlogged;		/* core: ops fired, waiting for a send queue */
	struct emunic_ring trace;	/* core -> app, when started */
	_Atomic bool tracing;
	_Atomic uint64_t trace_dropped;
	pthread_mutex_t trace_lock;	/* app: one reader */
	uint64_t loops, sleeps;

	/* emunic/fault: rules (core), what they did (read by the app) */
	struct emunic_fault_spec *faults;
	_Atomic uint64_t fault_wc, fault_held, fault_failed;
};

/* progress.c: the loop */
void *emunic_core_main(void *arg);
void emunic_core_doorbell(struct emunic_dev *d);

/* idle.c: sleep mode */
int emunic_idle_init(struct emunic_dev *d);
/* Sleeps until a completion, CM event or doorbell, or max_ns (at most 100 ms). */
void emunic_idle_sleep(struct emunic_dev *d, uint64_t max_ns);
void emunic_idle_fini(struct emunic_dev *d);

/* cm.c: connections on the core */
int emunic_cm_listen(struct emunic_dev *d);
void emunic_cm_start(struct emunic_dev *d, struct emunic_qp *qp);
int emunic_cm_events(struct emunic_dev *d);
/* A work request failed on qp (not a flush): tell the peer, whose work to
 * this QP would otherwise wait for retries that cannot succeed. */
void emunic_cm_disconnect(struct emunic_qp *qp);
void emunic_cm_fini(struct emunic_dev *d);
/* Accepts a parked request for qp (true) if there is one. */
bool emunic_cm_accept_parked(struct emunic_dev *d, struct emunic_qp *qp);
/* Refuses the parked requests for qp: it is gone or failed for good. */
void emunic_cm_refuse_parked(struct emunic_dev *d, const struct emunic_qp *qp);

/* reconnect.c: the reconnection rules, in one place */
/* qp's connection failed with status: true when it will be made again
 * (the caller leaves its work alone), false when the failure is final (the
 * QP is in QP_ERROR, disconnected with EMUNIC_QPF_DISCONNECT). */
#define EMUNIC_QPF_DISCONNECT 1u	/* final: tell the peer */
#define EMUNIC_QPF_QUIET_IDLE 2u	/* say nothing if no work waits (a peer that closed) */
bool emunic_qp_fail(struct emunic_dev *d, struct emunic_qp *qp, int status, unsigned how, const char *why);
/* Core loop, for a QP being reconnected: tear down, accept, connect, give up. */
int emunic_rc_step(struct emunic_dev *d, struct emunic_qp *qp);
/* What this side tells the peer in a request or an answer. */
void emunic_rc_hello(const struct emunic_qp *qp, struct emunic_conn_hello *h);
/* The peer told us h (NULL: nothing): settle the work of the connection
 * that failed before anything goes out on the next. */
void emunic_rc_resolve(struct emunic_qp *qp, const struct emunic_conn_hello *h);
/* The connection is up. */
void emunic_rc_up(struct emunic_qp *qp);
/* An attempt to reconnect failed: true when another will be made. */
bool emunic_rc_attempt_failed(struct emunic_qp *qp, bool gone, const char *why);
/* qp's id is to be destroyed outside the event being handled. */
void emunic_rc_bury_id(struct emunic_qp *qp);

/* mq/exec.c: the MQ rules at run time */
void emunic_exec_task(struct emunic_dev *d, struct core_task *t);
/* The send queue can take one more task from the core (triggered ops). */
bool emunic_exec_room(struct emunic_qp *qp);
int emunic_exec_mqs(struct emunic_dev *d);
int emunic_exec_push(struct emunic_dev *d);
int emunic_exec_poll(struct emunic_dev *d);
void emunic_exec_cancel_all(struct emunic_dev *d);
void emunic_exec_qp_error(struct emunic_qp *qp, int status);
/* Reconnection: the tasks verbs held when the connection failed; the peer
 * counted the first `delivered` writes-with-immediate among them.  Those
 * complete as done, atomics with status, the rest go out again first. */
void emunic_exec_replay(struct emunic_qp *qp, uint64_t delivered, int status);
/* Reconnecting gave up: everything the QP holds completes with status. */
void emunic_exec_give_up(struct emunic_qp *qp, int status);

/* mq/objects.c */
/* A QP object, not yet linked or connected (caller holds post_lock). */
struct emunic_qp *emunic_qp_new(struct emunic_dev *d, int peer, const struct emunic_qp_attr *attr);
void emunic_obj_release(struct emunic_dev *d, struct obj *o);
void emunic_obj_free(struct obj *o);
int fifo_init(struct task_fifo *f, uint32_t entries);
void emunic_obj_init(struct obj *o, struct emunic_dev *d, enum obj_kind k);
int emunic_obj_create(struct obj *o);
int emunic_obj_destroy(struct obj *o, const char *what);
bool emunic_obj_alive(struct emunic_dev *d, const struct obj *o, enum obj_kind k);
int emunic_send_cmd(struct emunic_dev *d, uint32_t type, void *o);
bool emunic_on_core(const struct emunic_dev *d);
/* Sleeps on a futex word while it still reads val, at most ms. */
void emunic_futex_wait(_Atomic uint32_t *word, uint32_t val, long ms);
void emunic_futex_wake(_Atomic uint32_t *word);
/* Milliseconds since *t0 (set on the first call when its tv_sec is 0). */
long emunic_elapsed_ms(struct timespec *t0);
/* One sleep of a bounded wait on a futex word the core bumps: -ETIMEDOUT
 * once timeout_ms (< 0: no bound) passed since *t0, else 0 after sleeping
 * while *word reads seq (50 ms at most, so the clock gets looked at). */
int emunic_wait_step(_Atomic uint32_t *word, uint32_t seq, _Atomic int *waiters, struct timespec *t0,
		     int timeout_ms);
/* The region holds [addr, addr + len). */
bool emunic_mr_covers(const struct emunic_mr *mr, const void *addr, size_t len);

#endif
