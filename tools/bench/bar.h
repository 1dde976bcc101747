/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench barrier's own declarations: its options, the implementations
 * it measures (ptp and mq with each idle policy) and what its header
 * reports, shared by barrier.c (options, measurement) and barrier_report.c
 * (the tables and target lines, rank 0).
 */
#ifndef EMUNIC_BENCH_BAR_H
#define EMUNIC_BENCH_BAR_H

#include "bench.h"
#include "baseline/ptp.h"

#include <emunic/coll.h>

#define MAX_IMPLS 3
#define SWEEP_STEPS 11			/* work of 0%, 10%, .., 100% of raw */
#define BASELINE "ptp"

struct bar_opts {
	int iters, warmup, sweep_iters;
	struct emunic_coll_attr ca;
	enum emunic_idle idle[2];	/* progress-core idle policies to run */
	int nidle;
	double tol;			/* fig. 7: allowed slowdown over raw */
	double quantum_us;		/* fig. 6 work quantum; 0: 2% of raw */
	int ptp_spin_us;		/* -2: auto (see --help) */
	int timeout_ms;
	int app_nice;			/* the app thread's nice while measuring */
	bool no_ptp;
	const char *csv;
};

struct impl {
	char name[24];			/* "ptp", "mq-sleep", "mq-spin" */
	bool ptp;
	enum emunic_idle want;
	struct emunic_dev *dev;
	const struct emunic_coll_impl *ops;	/* emunic_barrier_ops' offload or baseline */
	void *h;
};

/* What the header reports, learnt while running. */
struct bar_info {
	char device[64];
	bool have_default;		/* an mq run used EMUNIC_IDLE_DEFAULT */
	int ptp_spin_us;
	int mq_qps, ptp_qps;
	double quantum_us[MAX_IMPLS];
};

/* barrier_report.c: rank 0's tables, target lines and CSV. */
void bar_report(struct bench *b, const struct bar_opts *o, const struct bar_info *info, const struct impl *im,
		int n);

#endif
