/* SPDX-License-Identifier: MIT */
/*
 * Private to emunic/triggered: counters, list entries, event queues and
 * posted operations of emunic/triggered.h.  The rules are in settle.c (when
 * an op fires) and ops.c (what a fired op does).  App threads write an op
 * into a slot and name it by index in the ring; objects it names travel as
 * handles, resolved by the engine when the op runs.
 */
#ifndef EMUNIC_TRIG_H
#define EMUNIC_TRIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <emunic.h>

#include "emunic/nic/nic.h"

/* Write-with-immediate between engines: kind, list entry, offset. */
#define IMM_KIND_SHIFT 30
#define IMM_ID_SHIFT 16
#define IMM_ID_MAX 0x3fff
#define IMM_UNIT_MAX 0xffff
enum imm_kind { IMM_PUT = 1, IMM_GET = 2, IMM_ATOMIC = 3 };

enum trig_stage {
	STAGE_OP = 0,		/* the op itself */
	STAGE_NOTIFY,		/* after a get/atomic: tell the target's engine */
};

/* One posted operation, triggered or not, in its slot. */
struct trig {
	uint32_t id;		/* its slot: what the ring carries */
	uint8_t kind;		/* enum emunic_op_kind */
	uint8_t stage;		/* enum trig_stage */
	int peer;		/* its QP's, for events and the trace */
	/* handles (0: none) */
	uint32_t qp, ct, eq, ct_target, on;
	/* arguments, copied at post */
	uint64_t addr, len, offset, add, user;
	uint32_t lkey;
	struct emunic_target target;
	struct emunic_ct_val ct_value;
	uint64_t threshold;
	/* engine */
	int status;		/* a deferred finish's result */
	uint64_t issue_ns;	/* handed to verbs */
	uint64_t due_ns;	/* sink-delayed: when the data has drained */
	struct trig *next;	/* pending list, sink queue, deferred list, free list */
};

struct emunic_ct {
	struct obj o;
	_Atomic uint64_t success, failure;
	struct emunic_word word;	/* bumped when it changes */
	/* engine */
	struct trig *pending;		/* by threshold, ties in posting order */
	struct trig *pending_tail;	/* its last: rising posts append in O(1) */
	struct emunic_ct *dirty_next;	/* changed since its triggers were checked */
	bool dirty;
};

struct emunic_eq {
	struct obj o;
	emunic_eq_handler handler;
	void *arg;
	struct emunic_ring ev;		/* engine -> app; for a handler: events it has yet to see */
	struct emunic_word word;
	_Atomic uint64_t dropped;
	/* engine */
	bool deferred;			/* handler events wait in ev for a thread that may run it */
	struct emunic_eq *deferred_next;
};

struct emunic_le {
	struct obj o;
	uint16_t id;
	struct emunic_le_attr attr;
	uint32_t rkey;
};

#define TRIG_SLAB 1024u			/* slots a chunk */
#define TRIG_CHUNKS 4096u

/* The unit's per-device state. */
struct trig_dev {
	/* app side */
	unsigned max;			/* triggers pending at once */
	_Atomic unsigned used;		/* app reserves at post; the engine frees at fire */
	struct trig *_Atomic chunk[TRIG_CHUNKS];	/* slots */
	uint32_t chunks;		/* app (post_lock): chunks made */
	struct trig *app_free;		/* app (post_lock): free slots */
	struct trig *_Atomic eng_free;	/* engine -> app: slots freed since */
	struct emunic_le *_Atomic *les;	/* by list entry id (app sets under post_lock) */
	uint16_t le_next;		/* app: where the next id search starts */
	/* engine */
	struct emunic_ct *dirty;	/* counters whose triggers need a look */
	struct trig *deferred, *deferred_tail;	/* finishes that must run a handler */
	struct emunic_eq *handler_eqs;	/* EQs with handler events waiting */
	uint64_t sink_bps;		/* 0 = unthrottled */
	uint64_t sink_free_ns;		/* when the sink drains what it has */
	struct trig *sink, *sink_tail;	/* completions held by the sink */
	unsigned triggered_qps;		/* TRIGGERED QPs linked: arrivals may come */
	/* trace */
	struct emunic_ring trace;	/* engine -> app, when started */
	_Atomic bool tracing;
	_Atomic uint64_t trace_dropped;
	pthread_mutex_t trace_lock;	/* app: one reader */
};

/* post.c: slots */
struct trig *trig_slot(struct emunic_dev *d, uint32_t id);
void trig_put(struct emunic_dev *d, struct trig *x);		/* engine: free a slot */
void trig_slots_fini(struct emunic_dev *d);

/* settle.c: pending lists, firing */
void trig_on_cmd(struct emunic_dev *d, const struct nic_cmd *c);
int trig_settle(struct emunic_dev *d);
void trig_ct_release(struct emunic_dev *d, struct emunic_ct *ct, bool closing);

/* ops.c: what a fired op does */
void trig_fire(struct emunic_dev *d, struct trig *x);
void trig_finish(struct emunic_dev *d, struct trig *x, int status);
int trig_run_deferred(struct emunic_dev *d);

/* target.c: arrivals on TRIGGERED QPs */
void trig_arrival(struct emunic_dev *d, struct emunic_qp *qp, const struct ibv_wc *wc);

/* sink.c: the slow receiver */
void trig_sink_hold(struct emunic_dev *d, struct trig *x);
struct trig *trig_sink_pop(struct emunic_dev *d, uint64_t now);
uint64_t trig_sink_due(struct emunic_dev *d);

/* counters.c: the engine's changes to a counter (marked dirty for settle.c) */
void trig_ct_changed(struct emunic_dev *d, struct emunic_ct *ct);
void trig_ct_add(struct emunic_dev *d, struct emunic_ct *ct, uint64_t success, uint64_t failure);
void trig_ct_store(struct emunic_dev *d, struct emunic_ct *ct, struct emunic_ct_val v);

/* events.c */
void trig_eq_push(struct emunic_dev *d, struct emunic_eq *eq, const struct emunic_event *ev);
int trig_eq_run_handlers(struct emunic_dev *d);
/* The EQ's events go to a handler this thread may not run now. */
bool trig_eq_defers(const struct emunic_eq *eq);

/* trace.c */
void trig_trace(struct emunic_dev *d, uint32_t what, const struct trig *x, int status);

/* unit.c */
int emunic_trig_unit_init(struct emunic_dev *d);

#endif
