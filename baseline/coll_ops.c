/* SPDX-License-Identifier: MIT */
/*
 * The collectives' ops tables (coll_ops.h says why they live here): each
 * entry adapts one call of the public API (emunic/coll.h, the offload) or of
 * baseline/ptp.h (the baseline) to the tables' common calls.  Nothing else:
 * what each call does is the engine's or the baseline's.
 */
#include "baseline/coll_ops.h"
#include "baseline/ptp.h"

/* ---- the offload: emunic_coll_create(kind) runs engines/coll's builder ---- */

static int off_open(enum emunic_coll_kind kind, struct emunic_boot *boot, struct emunic_dev *dev,
		    const struct emunic_coll_impl_attr *a, void **h)
{
	struct emunic_coll_attr ca;
	struct emunic_coll *c = NULL;
	int r;

	(void)boot;	/* the device's, already bootstrapped */
	emunic_coll_attr_init(&ca);
	ca.kind = kind;
	ca.max_bytes = a->max_bytes;
	ca.segment = a->segment;
	ca.timeout_ms = a->timeout_ms;
	ca.signal = a->signal;
	ca.conn = a->conn;
	r = emunic_coll_create(dev, &ca, &c);
	*h = c;
	return r;
}

static int off_close(void *h)
{
	return emunic_coll_destroy(h);
}

static int off_test(void *req)
{
	return emunic_coll_test(req);
}

static int off_wait(void *req, int timeout_ms)
{
	return emunic_coll_wait(req, timeout_ms);
}

static int off_barrier(void *h, const struct emunic_coll_call *c)
{
	(void)c;
	return emunic_barrier(h);
}

static int off_ibarrier(void *h, const struct emunic_coll_call *c, void **req)
{
	(void)c;
	return emunic_ibarrier(h, (struct emunic_coll_req **)req);
}

static int off_allreduce(void *h, const struct emunic_coll_call *c)
{
	return emunic_allreduce(h, c->sbuf, c->rbuf, c->count, c->type, c->op);
}

static int off_iallreduce(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_iallreduce(h, c->sbuf, c->rbuf, c->count, c->type, c->op, (struct emunic_coll_req **)req);
}

static int off_bcast(void *h, const struct emunic_coll_call *c)
{
	return emunic_bcast(h, c->rbuf, c->count, c->root);
}

static int off_ibcast(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_ibcast(h, c->rbuf, c->count, c->root, (struct emunic_coll_req **)req);
}

static int off_alltoall(void *h, const struct emunic_coll_call *c)
{
	return emunic_alltoall(h, c->sbuf, c->rbuf, c->count);
}

static int off_ialltoall(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_ialltoall(h, c->sbuf, c->rbuf, c->count, (struct emunic_coll_req **)req);
}

static int off_allgather(void *h, const struct emunic_coll_call *c)
{
	return emunic_allgather(h, c->sbuf, c->rbuf, c->count);
}

static int off_iallgather(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_iallgather(h, c->sbuf, c->rbuf, c->count, (struct emunic_coll_req **)req);
}

static int off_gather(void *h, const struct emunic_coll_call *c)
{
	return emunic_gather(h, c->sbuf, c->rbuf, c->count, c->root);
}

static int off_igather(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_igather(h, c->sbuf, c->rbuf, c->count, c->root, (struct emunic_coll_req **)req);
}

/* Every offload entry but its two calls. */
#define OFFLOAD(blocking, nonblocking)                                                              \
	{ .create = "emunic_coll_create", .open = off_open, .close = off_close, .call = blocking,    \
	  .start = nonblocking, .test = off_test, .wait = off_wait }

/* ---- the baselines ------------------------------------------------------------ */

static int bar_open(enum emunic_coll_kind kind, struct emunic_boot *boot, struct emunic_dev *dev,
		    const struct emunic_coll_impl_attr *a, void **h)
{
	struct emunic_ptp_attr pa;
	struct emunic_ptp *p = NULL;
	int r;

	(void)kind;
	(void)dev;	/* the baseline opens its own */
	emunic_ptp_attr_init(&pa);
	pa.signal = a->signal;
	pa.timeout_ms = a->timeout_ms;
	pa.spin_us = a->spin_us;
	r = emunic_ptp_create(boot, &pa, &p);
	*h = p;
	return r;
}

static int bar_close(void *h)
{
	return emunic_ptp_destroy(h);
}

static int bar_call(void *h, const struct emunic_coll_call *c)
{
	(void)c;
	return emunic_ptp_barrier(h);
}

static int bar_start(void *h, const struct emunic_coll_call *c, void **req)
{
	(void)c;
	return emunic_ptp_ibarrier(h, (struct emunic_ptp_req **)req);
}

static int bar_test(void *req)
{
	return emunic_ptp_test(req);
}

static int bar_wait(void *req, int timeout_ms)
{
	return emunic_ptp_wait(req, timeout_ms);
}

static int ar_open(enum emunic_coll_kind kind, struct emunic_boot *boot, struct emunic_dev *dev,
		   const struct emunic_coll_impl_attr *a, void **h)
{
	struct emunic_ptp_ar *p = NULL;
	int r = emunic_ptp_ar_create(boot, a->max_bytes, a->timeout_ms, a->spin_us, &p);

	(void)kind;
	(void)dev;	/* the baseline opens its own */
	*h = p;
	return r;
}

static int ar_close(void *h)
{
	return emunic_ptp_ar_destroy(h);
}

static int ar_call(void *h, const struct emunic_coll_call *c)
{
	return emunic_ptp_allreduce(h, c->sbuf, c->rbuf, c->count, c->type, c->op);
}

static int ar_start(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_ptp_iallreduce(h, c->sbuf, c->rbuf, c->count, c->type, c->op, (struct emunic_ptp_ar_req **)req);
}

static int ar_test(void *req)
{
	return emunic_ptp_ar_test(req);
}

static int ar_wait(void *req, int timeout_ms)
{
	return emunic_ptp_ar_wait(req, timeout_ms);
}

static int bc_open(enum emunic_coll_kind kind, struct emunic_boot *boot, struct emunic_dev *dev,
		   const struct emunic_coll_impl_attr *a, void **h)
{
	struct emunic_ptp_bc *p = NULL;
	int r = emunic_ptp_bc_create(boot, a->max_bytes, a->segment, a->timeout_ms, a->spin_us, &p);

	(void)kind;
	(void)dev;
	*h = p;
	return r;
}

static int bc_close(void *h)
{
	return emunic_ptp_bc_destroy(h);
}

static int bc_call(void *h, const struct emunic_coll_call *c)
{
	return emunic_ptp_bcast(h, c->rbuf, c->count, c->root);
}

static int bc_start(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_ptp_ibcast(h, c->rbuf, c->count, c->root, (struct emunic_ptp_bc_req **)req);
}

static int bc_test(void *req)
{
	return emunic_ptp_bc_test(req);
}

static int bc_wait(void *req, int timeout_ms)
{
	return emunic_ptp_bc_wait(req, timeout_ms);
}

/* One object type runs the three exchanges, the kind chosen at create. */
static int xg_open(enum emunic_coll_kind kind, struct emunic_boot *boot, struct emunic_dev *dev,
		   const struct emunic_coll_impl_attr *a, void **h)
{
	struct emunic_ptp_a2a *p = NULL;
	int r = emunic_ptp_xchg_create(boot, kind, a->max_bytes, a->segment, a->timeout_ms, a->spin_us, &p);

	(void)dev;
	*h = p;
	return r;
}

static int xg_close(void *h)
{
	return emunic_ptp_a2a_destroy(h);
}

static int xg_test(void *req)
{
	return emunic_ptp_a2a_test(req);
}

static int xg_wait(void *req, int timeout_ms)
{
	return emunic_ptp_a2a_wait(req, timeout_ms);
}

static int a2a_call(void *h, const struct emunic_coll_call *c)
{
	return emunic_ptp_alltoall(h, c->sbuf, c->rbuf, c->count);
}

static int a2a_start(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_ptp_ialltoall(h, c->sbuf, c->rbuf, c->count, (struct emunic_ptp_a2a_req **)req);
}

static int ag_call(void *h, const struct emunic_coll_call *c)
{
	return emunic_ptp_allgather(h, c->sbuf, c->rbuf, c->count);
}

static int ag_start(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_ptp_iallgather(h, c->sbuf, c->rbuf, c->count, (struct emunic_ptp_a2a_req **)req);
}

static int ga_call(void *h, const struct emunic_coll_call *c)
{
	return emunic_ptp_gather(h, c->sbuf, c->rbuf, c->count, c->root);
}

static int ga_start(void *h, const struct emunic_coll_call *c, void **req)
{
	return emunic_ptp_igather(h, c->sbuf, c->rbuf, c->count, c->root, (struct emunic_ptp_a2a_req **)req);
}

/* An exchange's baseline entry but its two calls. */
#define XCHG_BASELINE(blocking, nonblocking)                                                        \
	{ .create = "emunic_ptp_xchg_create", .open = xg_open, .close = xg_close, .call = blocking, \
	  .start = nonblocking, .test = xg_test, .wait = xg_wait }

/* ---- the tables ------------------------------------------------------------------ */

const struct emunic_coll_ops emunic_barrier_ops = {
	.name = "barrier",
	.kind = EMUNIC_COLL_BARRIER,
	.offload = OFFLOAD(off_barrier, off_ibarrier),
	.baseline = { .create = "emunic_ptp_create", .open = bar_open, .close = bar_close, .call = bar_call,
		      .start = bar_start, .test = bar_test, .wait = bar_wait },
};

const struct emunic_coll_ops emunic_allreduce_ops = {
	.name = "allreduce",
	.kind = EMUNIC_COLL_ALLREDUCE,
	.offload = OFFLOAD(off_allreduce, off_iallreduce),
	.baseline = { .create = "emunic_ptp_ar_create", .open = ar_open, .close = ar_close, .call = ar_call,
		      .start = ar_start, .test = ar_test, .wait = ar_wait },
};

const struct emunic_coll_ops emunic_bcast_ops = {
	.name = "bcast",
	.kind = EMUNIC_COLL_BCAST,
	.offload = OFFLOAD(off_bcast, off_ibcast),
	.baseline = { .create = "emunic_ptp_bc_create", .open = bc_open, .close = bc_close, .call = bc_call,
		      .start = bc_start, .test = bc_test, .wait = bc_wait },
};

const struct emunic_coll_ops emunic_alltoall_ops = {
	.name = "alltoall",
	.kind = EMUNIC_COLL_ALLTOALL,
	.offload = OFFLOAD(off_alltoall, off_ialltoall),
	.baseline = XCHG_BASELINE(a2a_call, a2a_start),
};

const struct emunic_coll_ops emunic_allgather_ops = {
	.name = "allgather",
	.kind = EMUNIC_COLL_ALLGATHER,
	.offload = OFFLOAD(off_allgather, off_iallgather),
	.baseline = XCHG_BASELINE(ag_call, ag_start),
};

const struct emunic_coll_ops emunic_gather_ops = {
	.name = "gather",
	.kind = EMUNIC_COLL_GATHER,
	.offload = OFFLOAD(off_gather, off_igather),
	.baseline = XCHG_BASELINE(ga_call, ga_start),
};
