/* SPDX-License-Identifier: MIT */
/*
 * Private to emunic/mq: CQs and management queues.  The rules are in two
 * files: post.c (checked when a list is posted, on the app's thread) and
 * exec.c (run by the engine).
 */
#ifndef EMUNIC_MQ_INT_H
#define EMUNIC_MQ_INT_H

#include "emunic/nic/nic.h"

/* A completion as the CQ queues it: the n-th the CQ produced. */
struct cq_entry {
	struct emunic_wc wc;
	uint64_t n;
};

struct emunic_cq {
	struct obj o;
	unsigned flags;
	_Atomic uint64_t count;		/* status: completions produced */
	uint64_t wait_index, wait_count;	/* app: WAIT base (post time) */
	_Atomic uint64_t covered;	/* app: highest WAIT target posted */
	struct emunic_ring wc;		/* engine -> app: struct cq_entry */
	_Atomic uint64_t overrun;
	/* engine */
	int err_status, err_peer;	/* the first failed completion (sticky) */
	uint32_t err_qpn;
	uint64_t err_n;			/* ... its place in count */
	struct emunic_mq *blocked;	/* MQs whose next WAIT counts on this CQ */
};

struct emunic_mq {
	struct obj o;
	struct nic_fifo q;		/* WAIT / SEND_EN / RECV_EN */
	struct emunic_ring wc;		/* engine -> app: SIGNAL completions */
	struct emunic_word word;	/* bumped per completion */
	/* engine */
	bool skipping;			/* a WAIT failed: the rest of its list flushes */
	bool ready;
	struct emunic_mq *ready_next;
	struct emunic_mq *blocked_next;	/* on its CQ's blocked list */
	struct emunic_cq *blocked_on;
};

/* The MQ unit's per-device state. */
struct mq_dev {
	struct emunic_mq *ready, *ready_tail;
	uint64_t queued;		/* control tasks not yet run, all MQs */
};

/* A command with a target (an enable, a WAIT): set at start to a base read
 * from its queue's counters plus an offset. */
struct prep_target {
	uint32_t cmd;			/* which command (task) */
	const uint64_t *base;		/* one of its queue's b[] */
	uint64_t off;
	struct emunic_cq *cq;		/* a WAIT's: its covered count follows the target */
};

/* A list prepared once, started many times (post.c; a start's commands
 * reach the engine as one NIC_CMD_START naming it, exec.c on_start). */
struct prep_q;
struct emunic_mq_prepared {
	struct obj o;			/* OBJ_PREP: its handle, for START commands */
	struct emunic_mq *mq;
	unsigned n, nobj;
	uint64_t ctl;			/* tasks on the MQ's own queue */
	struct emunic_task *tasks;	/* a copy: the counter rules and messages read it */
	struct nic_cmd *cmd;		/* the commands (engine: read, never written, once prepared) */
	struct obj **obj;		/* each object the tasks use, once */
	unsigned *obj_task;		/* ... the first task that uses it */
	/* the counter rules, precomputed */
	bool fast;			/* false: a rule refuses every start (start_fast leaves it to the rules) */
	unsigned nq;
	struct prep_q *q;
	unsigned ntarget;
	struct prep_target *target;	/* the commands with a target, in order (engine: .cmd) */
	uint32_t deaths_seen;		/* the device's deaths when every object was last seen alive */
	unsigned ncmd;			/* commands a start puts in the ring: n, or 1 ... */
	bool as_start;			/* ... a START (handled, its targets fit one) */
	bool started;			/* a START of it went into the ring ... */
	uint32_t last_pos;		/* ... the ring's tail after the last one: freeing waits for the engine to pass it */
	struct prep_exec *exec;		/* the engine's: the list as it runs it (exec.c), from its first start */
};

/* exec.c: registers the unit. */
int emunic_mq_unit_init(struct emunic_dev *d);

#endif
