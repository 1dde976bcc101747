/* SPDX-License-Identifier: MIT */
/*
 * Private to baseline/: the one CQ and completion channel each host-
 * progressed baseline polls, the numbering of its operations, and the wait
 * both run on them (poll for spin_us, then sleep on the channel in slices,
 * within a bound).  The baselines give their own completion handler and
 * progress step as callbacks.  At the end, what every collective baseline
 * object holds and sets up alike (struct ptp_base).
 */
#ifndef EMUNIC_BASELINE_PTP_CQ_H
#define EMUNIC_BASELINE_PTP_CQ_H

#include <stddef.h>
#include <stdint.h>

#include "emunic/verbs.h"

struct ptp_cq {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;		/* NULL: one rank alone, no verbs */
	const struct emunic_shim *shim;	/* the device's data path (shim/shim.h) */
	unsigned unacked_events;	/* completion-channel events to ack */
	uint64_t polled;		/* completions polled so far */
};

/* The operations a baseline numbers: from 1, completing in order; the
 * first failure is kept, and every operation from it on fails with it. */
struct ptp_ops {
	uint64_t posted, done;
	int err;
	uint64_t err_seq;
};
void ptp_ops_fail(struct ptp_ops *o, uint64_t seq, int err);
/* 1 done, 0 not yet, < 0 the error it failed with. */
int ptp_ops_status(const struct ptp_ops *o, uint64_t seq);

typedef void (*ptp_wc_fn)(void *ctx, const struct ibv_wc *wc);
typedef int (*ptp_progress_fn)(void *ctx);		/* polls, then moves what it can */
typedef int (*ptp_timeout_fn)(void *ctx, uint64_t seq, int timeout_ms);	/* the -ETIMEDOUT line */

long long ptp_now_us(void);
/* who: the baseline's name in error lines ("ptp", "ptp allreduce"). */
int ptp_cq_open(struct ptp_cq *c, struct emunic_vdev *dev, int depth, const char *who);
void ptp_cq_close(struct ptp_cq *c);
/* Hands every completion there is to fn. */
int ptp_cq_poll(struct ptp_cq *c, ptp_wc_fn fn, void *ctx, const char *who);
/* Sleeps until a completion or timeout_ms: armed first, then progressed
 * once more, so a completion that came in between is not slept through. */
int ptp_cq_sleep(struct ptp_cq *c, ptp_progress_fn progress, void *ctx, int timeout_ms, const char *who);
/* Progresses until operation seq of ops is done or failed, polling for
 * spin_us (< 0: always) and then sleeping; at timeout_ms (< 0: none) returns
 * on_timeout's value. */
int ptp_cq_wait(struct ptp_cq *c, ptp_progress_fn progress, ptp_timeout_fn on_timeout, void *ctx,
		const struct ptp_ops *ops, uint64_t seq, int timeout_ms, int spin_us, const char *who);
/* Destroy's drain: progresses (polls, then sleeps on the channel in slices)
 * while outstanding(ctx) is not 0, ops has not failed and c has a CQ; at
 * bound_ms (< 0: none) fails with "<who>: <n> <what> not delivered". */
typedef uint64_t (*ptp_count_fn)(void *ctx);
int ptp_cq_drain(struct ptp_cq *c, ptp_progress_fn progress, ptp_count_fn outstanding, void *ctx,
		 const struct ptp_ops *ops, int bound_ms, const char *what, const char *who);

/*
 * The calls every baseline makes the same way: the blocking one, and the
 * i-call, _test and _wait over a request.  A baseline describes itself in a
 * struct ptp_kind; its public request type is a struct whose only member is
 * a struct ptp_req, so a pointer to one converts to the other.
 */
/* Starts an operation of ctx with the call's arguments: *seq its number;
 * -ENOSPC: no room yet (progress makes some). */
typedef int (*ptp_start_fn)(void *ctx, const void *args, uint64_t *seq);
/* Progresses ctx until operation seq is done or failed, or timeout_ms. */
typedef int (*ptp_wait_fn)(void *ctx, uint64_t seq, int timeout_ms);

struct ptp_kind {
	const char *who;		/* in error lines */
	ptp_start_fn start;
	ptp_progress_fn progress;
	ptp_wait_fn wait;
};

struct ptp_req {
	const struct ptp_kind *kind;
	void *ctx;
	const struct ptp_ops *ops;	/* ctx's numbering */
	int *nreq;			/* ctx's count of requests not waited, or NULL */
	uint64_t seq;
};

/* Starts, retrying on -ENOSPC with progress for up to bound_ms (< 0: no
 * bound), then waits up to bound_ms. */
int ptp_call(const struct ptp_kind *k, void *ctx, const void *args, int bound_ms);
/* A request for a new operation (freed again if it does not start); out
 * points to the caller's request pointer, set only on success. */
int ptp_req_start(const struct ptp_kind *k, void *ctx, const struct ptp_ops *ops, int *nreq, const void *args,
		  void *out);
/* Progresses once: 1 done, 0 not yet, < 0 failed; req stays valid. */
int ptp_req_test(struct ptp_req *req);
/* Waits up to timeout_ms; frees req whatever the result. */
int ptp_req_wait(struct ptp_req *req, int timeout_ms);

/*
 * What every collective baseline object holds first (the ping-pong's
 * differs: two buffers, no channel): its ranks, bounds, device, CQ, full
 * mesh and one registered region.  Create fills it in three steps:
 * ptp_base_init, ptp_base_alloc (if it has a region), then where there are
 * peers emunic_vdev_open (the queue sizes may read the device's limits)
 * and ptp_base_connect; ptp_base_fini undoes whatever of it was done
 * (rank and size stay, for the caller's own teardown).
 */
struct ptp_base {
	struct emunic_boot *boot;
	int rank, size;
	int timeout_ms;			/* 0: 30000; < 0: no bound */
	int spin_us;			/* < 0: waits never sleep */
	struct emunic_vdev *dev;	/* NULL: one rank alone, no verbs */
	struct ptp_cq q;		/* sends and receives of every QP */
	struct emunic_mesh *mesh;
	unsigned char *mem;		/* zeroed, page-aligned; NULL: none */
	size_t mem_bytes;
	struct ibv_mr *mr;		/* registers mem */
};

void ptp_base_init(struct ptp_base *b, struct emunic_boot *boot, int timeout_ms, int spin_us);
/* The bound of create, of a blocking call and of destroy's drain. */
int ptp_base_bound(const struct ptp_base *b);
/* b->mem: bytes, zeroed; -ENOMEM. */
int ptp_base_alloc(struct ptp_base *b, size_t bytes);
/* With b->dev open: the CQ (depth), mem registered, the mesh (qo: NULL for
 * the defaults) connected within the bound, post_recvs(ctx, q) for every
 * peer q, and then a boot barrier: no data may arrive before every rank's
 * receives are up. */
int ptp_base_connect(struct ptp_base *b, int depth, const struct emunic_qp_opts *qo,
		     int (*post_recvs)(void *ctx, int q), void *ctx, const char *who);
void ptp_base_fini(struct ptp_base *b);

#endif
