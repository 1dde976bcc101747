/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench rndv's own declarations: its options and variants, what rank
 * 1 measures at a point, what the header reports, shared by rndv.c
 * (options, measurement) and rndv_report.c (the tables and target lines).
 */
#ifndef EMUNIC_BENCH_RV_H
#define EMUNIC_BENCH_RV_H

#include "bench.h"

#define RV_BASELINE "single"
#define RV_MAX_SIZES 16
#define RV_MAX_VARIANTS 9		/* single + 8 chunked */
#define RV_MAX_ITERS 200		/* within the endpoint's max_sends */
#define RV_MAX_ROUNDS 50
#define RV_TARGET 0.9			/* chunked / single, sizes >= 1 MiB */
#define RV_TARGET_FROM ((size_t)1 << 20)
#define RV_TAG_CHECK 1
#define RV_TAG_TIMED 2

struct rv_variant {
	char name[40];			/* "single", "chunked-64K/4" */
	const char *label;		/* "single", "64K/4" */
	size_t chunk;			/* SIZE_MAX: one get */
	unsigned credits;
};

struct rv_opts {
	size_t sizes[RV_MAX_SIZES];
	int nsizes;
	struct rv_variant v[RV_MAX_VARIANTS];
	int nv;
	int iters;			/* 0: by size */
	int rounds;
	unsigned sink_mbps;		/* 0: no slow-receiver pass */
	const char *sink_from;		/* "--sink-mbps" or "EMUNIC_SINK_MBPS" */
	int timeout_ms;
	size_t first;			/* the endpoint's, for the number of gets */
	const char *csv;
};

/* What rank 1 saw at one point, shared with rank 0. */
struct rv_res {
	double mbps;
	int32_t max_inflight;		/* sink pass: the most gets of one message in flight */
	int32_t expected;		/* timed receives matched as expected */
	int32_t err;			/* 0, or rank 1 failed here (and said why) */
};

struct rv_info {
	char device[96];
	int expected, timed;		/* over every timed receive */
	bool trace_short;		/* the trace may have dropped records */
};

/* rndv_report.c: how many messages a point has (K, in *rounds rounds of
 * *per), a point's metric name ("throughput_64K"), and rank 0's tables,
 * target lines and CSV. */
int rv_iters(const struct rv_opts *o, size_t size, bool sink, int *rounds, int *per);
void rv_metric(char *buf, size_t len, const char *prefix, size_t size);
void rv_report(struct bench *b, const struct rv_opts *o, const struct rv_info *info);

#endif
