/* SPDX-License-Identifier: MIT */
/*
 * Private to the progress core: counters, list entries, event queues and
 * posted operations of emunic/triggered.h.  App threads read counters and
 * take events; everything marked "core" is the progress thread's alone.
 */
#ifndef EMUNIC_TRIG_H
#define EMUNIC_TRIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <emunic.h>

#include "emunic/core/core.h"

/* Write-with-immediate between progress cores: kind, list entry, offset. */
#define IMM_KIND_SHIFT 30
#define IMM_ID_SHIFT 16
#define IMM_ID_MAX 0x3fff
#define IMM_UNIT_MAX 0xffff
enum imm_kind { IMM_PUT = 1, IMM_GET = 2, IMM_ATOMIC = 3 };

enum trig_stage {
	STAGE_OP = 0,		/* the op itself */
	STAGE_NOTIFY,		/* after a get/atomic: tell the target's core */
};

/* One posted operation, triggered or not; freed by the core when done. */
struct trig {
	struct emunic_op op;	/* copied at post: arguments are fixed */
	uint32_t lkey;		/* of op.mr, taken at post */
	struct emunic_ct *on;	/* NULL: run at once */
	uint64_t threshold;
	enum trig_stage stage;
	int status;		/* sink-delayed completions: the result */
	uint64_t byte_len;
	uint64_t issue_ns;	/* handed to verbs */
	uint64_t due_ns;	/* sink-delayed: when the data has drained */
	struct trig *next;	/* core: pending list, QP backlog or sink queue */
};

struct emunic_ct {
	struct obj o;
	_Atomic uint64_t success, failure;
	_Atomic int waiters;	/* app threads in ct_wait/ct_poll on it */
	struct trig *pending;	/* core: by threshold, ties in posting order */
	struct emunic_ct *dirty_next;	/* core: changed since its triggers were checked */
	bool dirty;
};

struct emunic_eq {
	struct obj o;
	emunic_eq_handler handler;
	void *arg;
	struct emunic_ring ev;	/* core -> app */
	_Atomic uint32_t seq;	/* futex word */
	_Atomic int waiters;
	_Atomic uint64_t dropped;
};

struct emunic_le {
	struct obj o;
	uint16_t id;
	struct emunic_le_attr attr;
	uint32_t rkey;
};

/* Core hooks, called from the loop (progress.c), the verbs poll (exec.c) and
 * object release (objects.c). */
void emunic_trig_cmd(struct emunic_dev *d, struct trig *x);
int emunic_trig_run(struct emunic_dev *d);
/* Nanoseconds until the slow sink releases a completion (UINT64_MAX: none held). */
uint64_t emunic_trig_next_due_ns(struct emunic_dev *d);
void emunic_trig_task_done(struct emunic_dev *d, struct emunic_qp *qp, struct trig *x, int status,
			   uint64_t byte_len);
void emunic_trig_arrival(struct emunic_dev *d, struct emunic_qp *qp, const struct ibv_wc *wc);
/* Receives for arrivals, posted once the QP is in INIT: 0 or -errno. */
int emunic_trig_qp_init(struct emunic_dev *d, struct emunic_qp *qp);
/* Posts the receives an rnr fault rule held back (emunic/fault). */
void emunic_trig_post_owed(struct emunic_dev *d, struct emunic_qp *qp);
void emunic_trig_release(struct emunic_dev *d, struct obj *o);
void emunic_trig_cancel_all(struct emunic_dev *d);

/* fire.c / wire.c: an op fired; an op done (its counter, event, notify). */
void emunic_trig_fire(struct emunic_dev *d, struct trig *x);
void emunic_trig_finish(struct emunic_dev *d, struct trig *x, int status);
void emunic_trig_ct_release(struct emunic_dev *d, struct emunic_ct *ct, bool closing);
int emunic_trig_backlog_run(struct emunic_dev *d);
int emunic_trig_sink_run(struct emunic_dev *d);

/* counters.c: the core's changes to a counter (wake waiters, mark dirty). */
void emunic_ct_add(struct emunic_dev *d, struct emunic_ct *ct, uint64_t success, uint64_t failure);
void emunic_ct_store(struct emunic_dev *d, struct emunic_ct *ct, struct emunic_ct_val v);
/* events.c */
void emunic_eq_push(struct emunic_eq *eq, const struct emunic_event *ev);
/* wire.c: a triggered op went to verbs (trace, sink clock). */
void emunic_trig_issued(struct emunic_dev *d, struct trig *x);
/* trace.c */
void emunic_trace_rec(struct emunic_dev *d, uint32_t what, const struct trig *x, int status);
uint64_t emunic_now_ns(void);

#endif
