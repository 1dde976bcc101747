/* SPDX-License-Identifier: MIT */
/*
 * emunic/triggered.h — Portals-4-style counters, triggered operations and
 * full events, run by the progress core.  Include <emunic.h>, which
 * includes this.
 *
 * Objects:
 *  - a counter (CT) holds a success and a failure count;
 *  - a list entry (LE) exposes a registered buffer to peers, with a counter
 *    and/or an event queue bound to it: puts arriving into it and gets
 *    served from it are counted there (target-side counting);
 *  - an event queue (EQ) carries full events (kind, peer, match bits,
 *    length, offset) to a poller, or to a handler run in the engine (on the
 *    progress core, or on a thread waiting or testing in emunic).
 *
 * Operations (put, get, fetch-and-add, ct-inc, ct-set) go over QPs created
 * EMUNIC_QP_TRIGGERED.  emunic_op_post runs one now; emunic_trig_post runs it
 * once a counter reaches a threshold.  The rules (DESIGN.md, "Triggered
 * operations"), all enforced in emunic/triggered/settle.c:
 *  - a trigger (ct, threshold) fires once, when ct.success + ct.failure >=
 *    threshold; a threshold already met fires at once;
 *  - triggers on one counter fire in threshold order, ties in posting order;
 *  - the operation's arguments are copied when it is posted;
 *  - only the engine fires triggers, under its token: an app's
 *    emunic_ct_inc/set is an op queued behind the posts before it, like any
 *    post (the token's holder, which may be the calling thread when the
 *    token is free, runs it); event handlers never run inside a post;
 *  - posting never blocks: a full trigger table (emunic_dev_attr.trig_entries)
 *    or command ring gives -ENOSPC.  Transport resources (a QP's send queue)
 *    are taken when an operation fires, not while it waits;
 *  - a counted event that fails increments failure, and waits return on any
 *    failure, so no waiter spins on a counter that cannot reach its test;
 *  - freeing a counter wakes its waiters (-ECANCELED) and fails its pending
 *    triggers: each one's own completion counter counts a failure and its
 *    event queue gets an EMUNIC_WC_CANCELED event; nothing hangs.
 *  - close the device only when no thread waits on its counters or queues:
 *    every handle dies with it.
 *
 * Wire: a put to a list entry is RDMA WRITE with immediate; the immediate
 * carries the entry's id (which names its counter and event queue) and the
 * offset in the entry's units.  A get from an entry is RDMA READ; when it
 * completes the getter's progress core sends the entry's owner a zero-length
 * WRITE with immediate, so the target counts gets it never saw on its CPU.
 * A device without immediate data (iWARP) sends the RDMA WRITE, then a
 * SEND of the immediate and the length, which the target's engine reads
 * as the write-with-immediate it stands for.
 */
#ifndef EMUNIC_TRIGGERED_H
#define EMUNIC_TRIGGERED_H

#include <stddef.h>
#include <stdint.h>

struct emunic_dev;
struct emunic_mr;
struct emunic_qp;
struct emunic_ct;
struct emunic_eq;
struct emunic_le;

/* ---- counters ------------------------------------------------------------- */

struct emunic_ct_val {
	uint64_t success;
	uint64_t failure;
};

int emunic_ct_alloc(struct emunic_dev *dev, struct emunic_ct **out);
/* Wakes waiters and fails pending triggers (see above).  The handle stays
 * readable, and is rejected with -EINVAL, until the device closes. */
int emunic_ct_free(struct emunic_ct *ct);
int emunic_ct_get(struct emunic_ct *ct, struct emunic_ct_val *out);
/* Both are applied by the progress core, in order with the ops and triggers
 * posted before them; a trigger they satisfy fires on the core.  They
 * return before the core applied them: a ct_get or ct_wait right after may
 * still read the old value. */
int emunic_ct_set(struct emunic_ct *ct, struct emunic_ct_val v);
int emunic_ct_inc(struct emunic_ct *ct, struct emunic_ct_val by);
/* Waits until success + failure >= test or failure > 0; out gets the value.
 * Failure is sticky (as in Portals): once counted, every wait returns at
 * once until a ct_set clears it.
 * timeout_ms < 0: no bound.  0, -ETIMEDOUT, -ECANCELED (freed meanwhile),
 * -EINVAL (not a live counter). */
int emunic_ct_wait(struct emunic_ct *ct, uint64_t test, struct emunic_ct_val *out, int timeout_ms);
/* The same over n counters (one device): returns the index of the first that
 * met its test, with its value in *out. */
int emunic_ct_poll(struct emunic_ct *const *cts, const uint64_t *tests, unsigned n,
		   struct emunic_ct_val *out, int timeout_ms);

/* ---- events ---------------------------------------------------------------- */

enum emunic_ev_kind {
	EMUNIC_EV_PUT = 1,	/* target: a put arrived in a list entry */
	EMUNIC_EV_GET,		/* target: a get was served from a list entry */
	EMUNIC_EV_ATOMIC,	/* target: a fetch-and-add hit a list entry */
	EMUNIC_EV_ACK,		/* initiator: a put completed */
	EMUNIC_EV_REPLY,	/* initiator: a get completed (data is here) */
	EMUNIC_EV_FETCH,	/* initiator: a fetch-and-add completed */
	EMUNIC_EV_CT_DONE,	/* initiator: a triggered ct-inc/ct-set ran */
};
const char *emunic_ev_kind_str(int kind);

struct emunic_event {
	int kind;		/* enum emunic_ev_kind */
	int status;		/* enum emunic_wc_status; 0 = success */
	int peer;
	uint32_t qp_num;
	uint32_t le;		/* list entry id (target events; initiator: the target's) */
	uint32_t pad;
	uint64_t match_bits;	/* EMUNIC_LE_HDR entries: from the put's header */
	uint64_t hdr_data;	/* likewise */
	uint64_t length;	/* put: bytes arrived (without the header); initiator: op
				 * length; target GET/ATOMIC: 0 (the notice carries none) */
	uint64_t offset;	/* where in the entry (target) / the op's remote offset */
	uint64_t user;		/* initiator: the op's user value */
};

/* Called in the engine for each event instead of queueing it (on the
 * progress core, or on an application thread that waits in emunic or lends
 * itself through emunic_dev_progress, never inside a post or a counter
 * bump): the part of an engine a programmable NIC would run.  It must not
 * block; it may post ops and triggers (which then fail with -ENOSPC rather
 * than wait). */
typedef void (*emunic_eq_handler)(void *arg, const struct emunic_event *ev);
/* From a handler, for a target PUT event whose data the engine recognised
 * (by its own sequence numbers) as a second copy of one it already had: the
 * arrival is not counted as delivered on its connection, so a reconnection
 * (emunic_qp_reconnects in emunic/mq.h) still resends what came after it.
 * rxe (Linux 6.1) has been seen, under packet loss, to execute a
 * retransmitted write-with-immediate twice before failing the connection.
 * 0, -EPERM (not on the progress core), -ENOENT (no such connection now). */
int emunic_ev_duplicate(struct emunic_dev *dev, const struct emunic_event *ev);

int emunic_eq_create(struct emunic_dev *dev, unsigned depth, emunic_eq_handler handler, void *arg,
		     struct emunic_eq **out);
int emunic_eq_destroy(struct emunic_eq *eq);
/* Up to n events; returns how many.  One thread polls a given EQ. */
int emunic_eq_poll(struct emunic_eq *eq, struct emunic_event *ev, int n);
/* One event, waiting at most timeout_ms (< 0: no bound); -ETIMEDOUT. */
int emunic_eq_wait(struct emunic_eq *eq, struct emunic_event *ev, int timeout_ms);
/* Events lost because the queue was full (each also logged once). */
uint64_t emunic_eq_dropped(const struct emunic_eq *eq);

/* ---- list entries (target buffers) ------------------------------------------- */

/* The first 16 bytes of every put into the entry are a header {match_bits,
 * hdr_data}; its PUT events report them (the header is part of the data). */
#define EMUNIC_LE_HDR (1u << 0)

struct emunic_le_attr {
	struct emunic_mr *mr;	/* registered memory holding the buffer */
	void *addr;
	size_t len;
	struct emunic_ct *ct;	/* counts puts in and gets served (NULL: none) */
	struct emunic_eq *eq;	/* full events (NULL: none) */
	unsigned flags;		/* EMUNIC_LE_* */
	unsigned shift;		/* offsets travel in units of 1 << shift (0..24) */
};

/* What a peer needs to put into or get from an entry (send it out of band). */
struct emunic_target {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint16_t id;		/* 0: plain memory, not counted at the target */
	uint8_t shift;
	uint8_t pad;
};

int emunic_le_create(struct emunic_dev *dev, const struct emunic_le_attr *attr, struct emunic_le **out);
int emunic_le_destroy(struct emunic_le *le);
struct emunic_target emunic_le_target(const struct emunic_le *le);
/* A target for plain registered memory (puts and gets not counted there). */
struct emunic_target emunic_mr_target(const struct emunic_mr *mr);

/* ---- operations -------------------------------------------------------------- */

enum emunic_op_kind {
	EMUNIC_OP_PUT = 1,
	EMUNIC_OP_GET,
	EMUNIC_OP_FETCH_ADD,
	EMUNIC_OP_CT_INC,
	EMUNIC_OP_CT_SET,
};
const char *emunic_op_kind_str(int kind);

struct emunic_op {
	int kind;			/* enum emunic_op_kind */
	struct emunic_qp *qp;		/* PUT, GET, FETCH_ADD: created EMUNIC_QP_TRIGGERED */
	void *addr;			/* local buffer: put source, get destination,
					 * fetch-and-add result (8 bytes) */
	size_t len;
	struct emunic_mr *mr;		/* holds addr (NULL only when len == 0) */
	struct emunic_target target;	/* the peer's entry (emunic_le_target) */
	uint64_t offset;		/* into the target; a multiple of 1 << target.shift
					 * when the target is counted */
	uint64_t add;			/* FETCH_ADD (8-byte aligned target) */
	struct emunic_ct *ct;		/* counts this op's local completion (NULL: none) */
	struct emunic_eq *eq;		/* and/or an ACK/REPLY/FETCH event */
	uint64_t user;			/* carried in its events and the trace */
	struct emunic_ct *ct_target;	/* CT_INC / CT_SET: the counter changed */
	struct emunic_ct_val ct_value;	/* CT_INC: the increment; CT_SET: the value */
};

/* Runs op now (on the progress core): 0, -EINVAL (nothing posted), -ENOSPC.
 * Any post: -EOPNOTSUPP (nothing posted) for a fetch_add on a device
 * without atomics (emunic_dev_lacks).  On a device without immediate data
 * (iWARP) an op that tells its target still runs: the target is told by a
 * SEND after the data (README, "siw"). */
int emunic_op_post(struct emunic_dev *dev, const struct emunic_op *op);
/* Runs op once trig.success + trig.failure >= threshold. */
int emunic_trig_post(struct emunic_dev *dev, const struct emunic_op *op, struct emunic_ct *trig,
		     uint64_t threshold);
/* n ops at once, all or none (one lock, one doorbell): op i runs when
 * on[i] reaches threshold[i], or at once where on (or on[i]) is NULL.
 * 0, -EINVAL (nothing posted), -ENOSPC (nothing posted). */
int emunic_trig_post_n(struct emunic_dev *dev, const struct emunic_op *ops, struct emunic_ct *const *on,
		       const uint64_t *threshold, unsigned n);
/* Triggers posted and not fired yet, device-wide. */
unsigned emunic_trig_pending(const struct emunic_dev *dev);

/* ---- trace --------------------------------------------------------------------- */

enum emunic_trace_what {
	EMUNIC_TR_FIRE = 1,	/* an op fired (or was posted untriggered) */
	EMUNIC_TR_ISSUE,	/* handed to verbs: on the wire from here */
	EMUNIC_TR_DONE,		/* its completion was counted */
};

struct emunic_trace_rec {
	uint64_t ns;		/* CLOCK_MONOTONIC */
	uint32_t what;		/* enum emunic_trace_what */
	uint32_t op;		/* enum emunic_op_kind */
	int32_t peer;
	int32_t status;
	uint64_t len;
	uint64_t user;
};

/* Starts recording triggered-op events in a ring of `entries` records
 * (older records are kept, newer ones dropped when it is full). */
int emunic_trace_start(struct emunic_dev *dev, unsigned entries);
/* Takes up to n records, oldest first; returns how many. */
int emunic_trace_read(struct emunic_dev *dev, struct emunic_trace_rec *out, int n);
/* Records lost to a full ring (a trace with losses proves nothing). */
uint64_t emunic_trace_dropped(const struct emunic_dev *dev);

#endif /* EMUNIC_TRIGGERED_H */
