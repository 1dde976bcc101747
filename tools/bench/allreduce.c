/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench allreduce: the offloaded allreduce (mq: emunic_allreduce on
 * the progress core, CALC tasks) against the host-progressed one (ptp:
 * baseline/ptp_allreduce.c, the same algorithm and operand order, moved only
 * inside its calls: both switch from recursive doubling to reduce-scatter +
 * allgather at the same size, rsag.h's coll_rsag_bytes), a SUM of doubles
 * at each size:
 *  1. latency: K blocking allreduces, mean and median;
 *  2. overlap, as the OSU benchmarks define it: t_pure (post + wait, no
 *     work), t_compute (the work alone, sized to t_pure), t_total (post,
 *     work, wait); overlap = 100 x (1 - (t_total - t_compute) / t_pure),
 *     at least 0.
 * Targets (issue 19): latency <= 1.15x ptp at 2 ranks, <= 1.0x at more;
 * overlap of an 8 KiB iallreduce >= 50% at 2 ranks and >= 2x ptp's.
 * coll.c runs it all; here are the calls, the timed loop and the report's
 * head.
 */
#include "bench.h"
#include "engines/coll/rsag.h"

#include <emunic/coll.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A SUM of n doubles. */
static struct emunic_coll_call ar_call(const double *s, double *r, size_t n)
{
	return (struct emunic_coll_call){ .sbuf = s, .rbuf = r, .count = n, .type = EMUNIC_CALC_DOUBLE,
					  .op = EMUNIC_CALC_SUM };
}

static int im_allreduce(struct coll_impl *im, const double *s, double *r, size_t n)
{
	struct emunic_coll_call c = ar_call(s, r, n);

	return im->ops->call(im->h, &c);
}

/* post (retried on -ENOSPC: the sends of the allreduce four back may be
 * unacknowledged), work for `work` loop iterations, wait. */
static int im_overlapped(struct coll_impl *im, const double *s, double *r, size_t n, uint64_t work, int timeout_ms)
{
	struct emunic_coll_call c = ar_call(s, r, n);
	void *q;
	int rc = bench_coll_start(im, &c, &q, timeout_ms);

	bench_nops(work);
	return rc ? rc : im->ops->wait(q, timeout_ms);
}

static int warmup(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t bytes)
{
	int r = 0;

	(void)b;
	(void)bytes;
	for (int i = 0; !r && i < o->warmup; i++)
		r = im_allreduce(im, (double[1]){ 0 }, (double[1]){ 0 }, 1);
	return r;
}

/* Mean time of `iters` calls of post + `work` + wait, back to back after a
 * barrier, in ns. */
static int timed(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t bytes, uint64_t work,
		 double *samp, double *mean_ns)
{
	size_t n = bytes / sizeof(double);
	double *s = calloc(n + 1, sizeof(double)), *r = calloc(n + 1, sizeof(double));
	int64_t t0, t1;
	int rc = s && r ? bench_coll_sync(b, "between loops") : -ENOMEM;

	for (size_t i = 0; s && i < n; i++)
		s[i] = (double)(b->rank + 1) * 0.5 + (double)i;
	t0 = t1 = bench_mono_ns();
	for (int i = 0; !rc && i < o->iters; i++) {
		int64_t t = t1;

		rc = work || !samp ? im_overlapped(im, s, r, n, work, o->timeout_ms) : im_allreduce(im, s, r, n);
		if (rc)
			rc = bench_err(b, rc, "%s: allreduce %d of %d (%zu bytes)", im->name, i, o->iters, bytes);
		t1 = bench_mono_ns();
		if (samp)
			samp[i] = (double)(t1 - t) - b->clock_ns;
	}
	*mean_ns = (double)(t1 - t0) / o->iters - b->clock_ns;
	free(s);
	free(r);
	return rc;
}

static void report_head(const struct bench *b, const struct coll_opts *o, const char *device)
{
	char th[96] = "recursive doubling at every size", sz[16];
	size_t t;

	(void)coll_rsag_bytes(0, b->size, &t);	/* the objects' create checked it */
	if (t != SIZE_MAX) {
		bench_size_str(sz, sizeof(sz), t);
		snprintf(th, sizeof(th), "recursive doubling below %s, reduce-scatter + allgather from it", sz);
	}
	printf("\nemunic-bench allreduce: offloaded (mq, CALC on the progress core) vs host-progressed (ptp)\n"
	       "  device       %s, %d ranks, SUM of doubles, %d calls a loop\n"
	       "  algorithm    %s (both; %s)\n"
	       "  overlap      OSU: 100 x (1 - (t_total - t_compute) / t_pure), work sized to t_pure\n\n",
	       device, b->size, o->iters, th, COLL_RSAG_ENV);
}

/* Each rank's figures are its own; rank 0's are reported. */
static const struct coll_bench allreduce_bench = {
	.ops = &emunic_allreduce_ops,
	.max_what = "max",
	.iters = 200,
	.sizes = "8,8K,64K,256K,1M",
	.sizes_wants = "sizes, each a multiple of 8 bytes up to 16M (8, 8K, 1M)",
	.max_size = (size_t)16 << 20,
	.align = sizeof(double),
	.overlap_size = 8192,
	.warmup = warmup,
	.timed = timed,
	.report_head = report_head,
};

int bench_allreduce_main(int argc, char **argv)
{
	return bench_coll_main(&allreduce_bench, argc, argv);
}

const char bench_allreduce_help[] =
"  allreduce [OPTIONS]\n"
"    The offloaded allreduce (mq: CALC tasks on the progress core) against\n"
"    the host-progressed one (ptp: the same algorithm and operand order, moved\n"
"    only inside its calls; both switch from recursive doubling to\n"
"    reduce-scatter + allgather at the same size: 64K from 4 ranks on\n"
"    (never at 2 or 3), unless EMUNIC_RSAG_BYTES says otherwise (bytes, K or\n"
"    M, or never)), a SUM of doubles at each size: the latency of\n"
"    blocking calls (mean, median, mq/ptp) and the overlap of a nonblocking\n"
"    one with work as long as its latency, as the OSU benchmarks define it:\n"
"    100 x (1 - (t_total - t_compute) / t_pure), at least 0.  Targets:\n"
"    latency <= 1.15x ptp at 2 ranks, <= 1.0x at more; 8K overlap >= 50% and\n"
"    >= 2x ptp's at 2 ranks.  Any number of ranks.\n"
"\n"
"    --sizes LIST       bytes, multiples of 8 up to 16M (default 8,8K,64K,256K,\n"
"                       1M)\n"
"    --iters K          calls a loop (default 200)\n"
"    --warmup W         calls before the first loop (default 10)\n"
"    --timeout-ms MS    bound on every call (default 60000)\n"
"    --csv FILE         rank 0 writes the results to FILE: impl ptp or mq;\n"
"                       metrics allreduce_latency_S, allreduce_latency_p50_S\n"
"                       (us), iallreduce_overlap_S (%)\n";
