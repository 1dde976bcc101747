/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench p2p's own declarations: its options and impls, shared by
 * p2p.c (options, the ping-pongs, recording a point) and p2p_report.c (the
 * header and the tables).
 */
#ifndef EMUNIC_BENCH_PP_H
#define EMUNIC_BENCH_PP_H

#include "bench.h"

#define PP_BASELINE "host"
#define PP_MAX_SIZES 16
#define PP_MAX_IMPLS 6			/* host, 4 RTR progress schemes, chunked */
#define PP_BUDGET ((size_t)32 << 20)	/* default K: at most this many bytes a pass */

struct pp_impl {
	char name[24];			/* CSV impl: host, rtr-core, .., chunked-core */
	bool host;
	unsigned proto, progress;
	struct emunic_rndv *rv;
};

struct pp_opts {
	size_t sizes[PP_MAX_SIZES];
	int nsizes;
	struct pp_impl im[PP_MAX_IMPLS];
	int nim;
	size_t eager;
	int iters;			/* 0: by size */
	int warmup;
	int timeout_ms;
	const char *csv;
};

/* Iterations a pass at size: --iters, or at most PP_BUDGET bytes, 10..100. */
static inline int pp_iters(const struct pp_opts *o, size_t size)
{
	size_t k = PP_BUDGET / size;

	return o->iters ? o->iters : k < 10 ? 10 : k > 100 ? 100 : (int)k;
}
/* A metric of an impl at a size ("latency_8"). */
int pp_add(struct bench *b, const char *impl, const char *prefix, size_t size, double v, const char *unit);
/* Rank 0: the header, the tables and the CSV. */
void pp_report(struct bench *b, const struct pp_opts *o, const char *device);

#endif /* EMUNIC_BENCH_PP_H */
