/* SPDX-License-Identifier: MIT */
/*
 * baseline/coll_ops.h — one ops table per collective (issue 19): its
 * algorithm's name, its task-list builder (the offload) and its
 * host-progressed baseline, the two behind the same calls, so a benchmark
 * or a test picks either from the table instead of switching between two
 * APIs.
 *
 * Why here and not in engines/coll's own table (struct coll_alg): the
 * baselines run verbs on the application's thread, and engines depend on
 * emunic.h only (DESIGN), so engines/coll may not point at them; baseline/
 * already sits above engines/coll (its baselines reuse engines/coll's
 * schedules) and below tools/ and tests/, so it is the one layer that sees
 * both halves and is seen by everything that picks one.  The task-list
 * builder is reached as every caller reaches it, through
 * emunic_coll_create(kind), which runs engines/coll's struct coll_alg for
 * that kind (its setup, post and fence); engines/coll stays unaware of the
 * table.  The barrier is here too: its signal (SEND or WRITE_IMM, both
 * implementations) and the offload's connections are attributes.
 */
#ifndef EMUNIC_BASELINE_COLL_OPS_H
#define EMUNIC_BASELINE_COLL_OPS_H

#include <emunic.h>
#include <emunic/coll.h>

#include <stddef.h>

/* One call of a collective, whichever implementation runs it. */
struct emunic_coll_call {
	const void *sbuf;	/* bcast: unused; barrier: none of these */
	void *rbuf;		/* bcast: the buffer, the root's data */
	size_t count;		/* allreduce: elements; bcast: bytes; the exchanges: a block's bytes */
	int type, op;		/* allreduce: enum emunic_calc_type, enum emunic_calc_op */
	int root;		/* bcast, gather */
};

/* What an implementation's handle is made for. */
struct emunic_coll_impl_attr {
	size_t max_bytes;	/* the largest message (the exchanges: block) */
	size_t segment;		/* bcast and the exchanges: bytes a segment; 0: the default */
	int timeout_ms;		/* bounds connecting and every wait: 0 is 30000, < 0 none */
	int spin_us;		/* the baseline's waits poll this long, then sleep (< 0: always poll) */
	enum emunic_coll_signal signal;	/* barrier: how a step signals (both) */
	enum emunic_coll_conn conn;	/* barrier: the offload's QPs */
};

/*
 * One implementation: a handle's life and its calls, each returning 0 or a
 * negative errno (test: 1 done, 0 not yet).  open takes the device for the
 * offload, the bootstrap for the baseline (which opens its own); wait frees
 * the request whatever the result.
 */
struct emunic_coll_impl {
	const char *create;	/* what open calls, for error lines */
	int (*open)(enum emunic_coll_kind kind, struct emunic_boot *boot, struct emunic_dev *dev,
		    const struct emunic_coll_impl_attr *a, void **h);
	int (*close)(void *h);
	int (*call)(void *h, const struct emunic_coll_call *c);
	int (*start)(void *h, const struct emunic_coll_call *c, void **req);
	int (*test)(void *req);
	int (*wait)(void *req, int timeout_ms);
};

struct emunic_coll_ops {
	const char *name;		/* the algorithm's: engines/coll's error lines say it too */
	enum emunic_coll_kind kind;
	struct emunic_coll_impl offload;	/* the task lists, on the progress core */
	struct emunic_coll_impl baseline;	/* host-progressed, baseline/ptp_*.c */
};

extern const struct emunic_coll_ops emunic_barrier_ops;
extern const struct emunic_coll_ops emunic_allreduce_ops;
extern const struct emunic_coll_ops emunic_bcast_ops;
extern const struct emunic_coll_ops emunic_alltoall_ops;
extern const struct emunic_coll_ops emunic_allgather_ops;
extern const struct emunic_coll_ops emunic_gather_ops;

#endif
