/* SPDX-License-Identifier: MIT */
/*
 * Private to baseline/: the one CQ and completion channel each host-
 * progressed baseline polls, the numbering of its operations, and the wait
 * both run on them (poll for spin_us, then sleep on the channel in slices,
 * within a bound).  The baselines give their own completion handler and
 * progress step as callbacks.
 */
#ifndef EMUNIC_BASELINE_PTP_CQ_H
#define EMUNIC_BASELINE_PTP_CQ_H

#include <stdint.h>

#include "emunic/verbs.h"

struct ptp_cq {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;		/* NULL: one rank alone, no verbs */
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

#endif
