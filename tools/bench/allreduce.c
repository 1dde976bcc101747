/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench allreduce: the offloaded allreduce (mq: emunic_allreduce on
 * the progress core, CALC tasks) against the host-progressed one (ptp:
 * baseline/ptp_allreduce.c, the same algorithm and operand order, moved only
 * inside its calls), a SUM of doubles at each size:
 *  1. latency: K blocking allreduces, mean and median;
 *  2. overlap, as the OSU benchmarks define it: t_pure (post + wait, no
 *     work), t_compute (the work alone, sized to t_pure), t_total (post,
 *     work, wait); overlap = 100 x (1 - (t_total - t_compute) / t_pure),
 *     at least 0.
 * Targets (issue 19): latency <= 1.15x ptp at 2 ranks, <= 1.0x at more;
 * overlap of an 8 KiB iallreduce >= 50% at 2 ranks and >= 2x ptp's.
 */
#include "bench.h"
#include "baseline/ptp.h"

#include <emunic/coll.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AR_BASELINE "ptp"
#define AR_MAX_SIZES 6
#define AR_OVERLAP_SIZE 8192

struct ar_opts {
	int iters, warmup, timeout_ms;
	size_t sizes[AR_MAX_SIZES];
	int nsizes;
	const char *csv;
};

struct ar_impl {
	const char *name;		/* "ptp", "mq" */
	struct emunic_dev *dev;
	struct emunic_coll *coll;
	struct emunic_ptp_ar *p;
};

struct ar_fig {
	double lat, p50, overlap;
};

static size_t max_size(const struct ar_opts *o)
{
	size_t m = 8;

	for (int i = 0; i < o->nsizes; i++)
		m = o->sizes[i] > m ? o->sizes[i] : m;
	return m;
}

static int im_open(struct bench *b, const struct ar_opts *o, struct ar_impl *im, char *device, size_t len)
{
	struct emunic_coll_attr ca;
	int r;

	if (im->p == NULL && !strcmp(im->name, AR_BASELINE)) {
		/* A core each: poll, as the barrier's ptp does; else sleep. */
		int spin = sysconf(_SC_NPROCESSORS_ONLN) >= bench_local_ranks(b) ? -1 : 50;

		r = emunic_ptp_ar_create(b->boot, max_size(o), o->timeout_ms, spin, &im->p);
		return r ? bench_err(b, r, "ptp: emunic_ptp_ar_create") : 0;
	}
	r = bench_open_dev(b, NULL, &im->dev, device, len);
	if (r)
		return r;
	emunic_coll_attr_init(&ca);
	ca.kind = EMUNIC_COLL_ALLREDUCE;
	ca.max_bytes = max_size(o);
	ca.timeout_ms = o->timeout_ms;
	r = emunic_coll_create(im->dev, &ca, &im->coll);
	return r ? bench_err(b, r, "mq: emunic_coll_create (allreduce, max %zu bytes)", ca.max_bytes) : 0;
}

static void im_close(struct ar_impl *im)
{
	if (im->coll)
		emunic_coll_destroy(im->coll);
	if (im->dev)
		emunic_dev_close(im->dev);
	if (im->p)
		emunic_ptp_ar_destroy(im->p);
	im->coll = NULL;
	im->dev = NULL;
	im->p = NULL;
}

static int im_allreduce(struct ar_impl *im, const double *s, double *r, size_t n)
{
	return im->p ? emunic_ptp_allreduce(im->p, s, r, n, EMUNIC_CALC_DOUBLE, EMUNIC_CALC_SUM)
		     : emunic_allreduce(im->coll, s, r, n, EMUNIC_CALC_DOUBLE, EMUNIC_CALC_SUM);
}

/* post, work for `work` loop iterations, wait. */
static int im_overlapped(struct ar_impl *im, const double *s, double *r, size_t n, uint64_t work, int timeout_ms)
{
	struct emunic_ptp_ar_req *pq;
	struct emunic_coll_req *cq;
	int rc;

	if (im->p) {
		rc = emunic_ptp_iallreduce(im->p, s, r, n, EMUNIC_CALC_DOUBLE, EMUNIC_CALC_SUM, &pq);
		bench_nops(work);
		return rc ? rc : emunic_ptp_ar_wait(pq, timeout_ms);
	}
	rc = emunic_iallreduce(im->coll, s, r, n, EMUNIC_CALC_DOUBLE, EMUNIC_CALC_SUM, &cq);
	bench_nops(work);
	return rc ? rc : emunic_coll_wait(cq, timeout_ms);
}

static int sync_ranks(struct bench *b)
{
	int r = emunic_boot_barrier(b->boot);

	return r ? bench_err(b, r, "the bootstrap barrier between loops") : 0;
}

/* Mean time of `iters` calls of post + `work` + wait, in ns. */
static int timed(struct bench *b, const struct ar_opts *o, struct ar_impl *im, size_t bytes, uint64_t work,
		 double *samp, double *mean_ns)
{
	size_t n = bytes / sizeof(double);
	double *s = calloc(n + 1, sizeof(double)), *r = calloc(n + 1, sizeof(double));
	int64_t t0, t1;
	int rc = s && r ? sync_ranks(b) : -ENOMEM;

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

static int measure(struct bench *b, const struct ar_opts *o, struct ar_impl *im, size_t bytes, struct ar_fig *f)
{
	double *samp = calloc((size_t)o->iters, sizeof(double)), pure = 0, total = 0, compute;
	char sz[16], m[40];
	uint64_t work;
	int64_t t0;
	int r = samp ? 0 : -ENOMEM;

	bench_size_str(sz, sizeof(sz), bytes);
	bench_progress(b, "[%s] %s: latency", im->name, sz);
	for (int i = 0; !r && i < o->warmup; i++)
		r = im_allreduce(im, (double[1]){ 0 }, (double[1]){ 0 }, 1);
	r = r ? r : timed(b, o, im, bytes, 0, samp, &f->lat);
	if (!r)
		f->p50 = bench_median(samp, o->iters);
	bench_progress(b, "[%s] %s: overlap", im->name, sz);
	r = r ? r : timed(b, o, im, bytes, 0, NULL, &pure);
	work = bench_work_iters(b, pure);
	t0 = bench_mono_ns();
	for (int i = 0; !r && i < o->iters; i++)
		bench_nops(work);
	compute = (double)(bench_mono_ns() - t0) / o->iters;
	r = r ? r : timed(b, o, im, bytes, work, NULL, &total);
	if (!r) {
		f->overlap = 100.0 * (1.0 - (total - compute) / pure);
		f->overlap = f->overlap < 0 ? 0 : f->overlap > 100 ? 100 : f->overlap;
		snprintf(m, sizeof(m), "allreduce_latency_%s", sz);
		r = bench_add(b, im->name, m, f->lat / 1e3, "us");
		snprintf(m, sizeof(m), "allreduce_latency_p50_%s", sz);
		r = r ? r : bench_add(b, im->name, m, f->p50 / 1e3, "us");
		snprintf(m, sizeof(m), "iallreduce_overlap_%s", sz);
		r = r ? r : bench_add(b, im->name, m, f->overlap, "%");
	}
	free(samp);
	return r;
}

static void report(const struct bench *b, const struct ar_opts *o, const char *device,
		   struct ar_fig (*fig)[AR_MAX_SIZES])
{
	double lat_limit = b->size == 2 ? 1.15 : 1.0;
	char ctx[96], sz[16];

	printf("\nemunic-bench allreduce: offloaded (mq, CALC on the progress core) vs host-progressed (ptp)\n"
	       "  device       %s, %d ranks, SUM of doubles, %d calls a loop\n"
	       "  overlap      OSU: 100 x (1 - (t_total - t_compute) / t_pure), work sized to t_pure\n\n",
	       device, b->size, o->iters);
	printf("  %-8s %-5s %12s %12s %10s %10s\n", "size", "impl", "mean, us", "median, us", "vs ptp", "overlap %");
	for (int s = 0; s < o->nsizes; s++) {
		bench_size_str(sz, sizeof(sz), o->sizes[s]);
		for (int k = 0; k < 2; k++) {
			printf("  %-8s %-5s %12.1f %12.1f ", sz, k ? "mq" : "ptp", fig[k][s].lat / 1e3, fig[k][s].p50 / 1e3);
			if (k)
				printf("%9.2fx", fig[1][s].lat / fig[0][s].lat);
			else
				printf("%10s", "-");
			printf(" %10.1f\n", fig[k][s].overlap);
		}
	}
	printf("\ntargets (reported, never asserted)\n");
	for (int s = 0; s < o->nsizes; s++) {
		char what[64];

		bench_size_str(sz, sizeof(sz), o->sizes[s]);
		snprintf(what, sizeof(what), "allreduce %s mean <= %.2fx ptp (%d ranks)", sz, lat_limit, b->size);
		snprintf(ctx, sizeof(ctx), "median %.2fx", fig[1][s].p50 / fig[0][s].p50);
		bench_target_ratio(what, "mq", fig[1][s].lat / fig[0][s].lat, lat_limit, true, ctx);
		if (o->sizes[s] != AR_OVERLAP_SIZE || b->size != 2)
			continue;
		snprintf(ctx, sizeof(ctx), "ptp %.1f%%", fig[0][s].overlap);
		printf("  %-7s %-42s %-9s %.1f%%; %s\n", fig[1][s].overlap >= 50 ? "met" : "MISSED",
		       "iallreduce 8K overlap >= 50% (2 ranks)", "mq", fig[1][s].overlap, ctx);
		bench_target_ratio("iallreduce 8K overlap >= 2x ptp's (2 ranks)", "mq",
				   fig[0][s].overlap > 0 ? fig[1][s].overlap / fig[0][s].overlap : fig[1][s].overlap > 0 ? 99 : 0,
				   2.0, false, ctx);
	}
	bench_write_csv(b, AR_BASELINE);
}

static bool add_size(void *ctx, const char *s)
{
	struct ar_opts *o = ctx;
	size_t v = bench_parse_size(s);

	if (!v || v % 8 || v > ((size_t)16 << 20) || o->nsizes == AR_MAX_SIZES)
		return false;
	o->sizes[o->nsizes++] = v;
	return true;
}

struct ar_parse {
	struct ar_opts *o;
	const char *sizes;
};

static int ar_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct ar_parse *p = ctx;

	if (val == 'k')
		return bench_opt_int(cmd, name, arg, 1, 1000000, "a count in 1..1000000", &p->o->iters);
	if (val == 'w')
		return bench_opt_int(cmd, name, arg, 0, 1000000, "a count in 0..1000000", &p->o->warmup);
	p->sizes = arg;
	return 0;
}

int bench_allreduce_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "iters", required_argument, NULL, 'k' }, { "warmup", required_argument, NULL, 'w' },
		{ "sizes", required_argument, NULL, 'z' }, OPTS_COMMON
	};
	struct ar_opts o = { .iters = 200, .warmup = 10, .timeout_ms = 60000 };
	struct ar_parse p = { .o = &o };
	struct common_opts com = { .timeout_ms = o.timeout_ms };
	struct ar_impl im[2] = { { .name = AR_BASELINE }, { .name = "mq" } };
	struct ar_fig fig[2][AR_MAX_SIZES];
	char device[96] = "?";
	struct bench b = { 0 };
	int r = bench_parse_opts("allreduce", argc, argv, lo, ar_opt, &p, &com);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	if (!bench_each_item(p.sizes ? p.sizes : "8,8K,64K", add_size, &o))
		return bench_usage_error("allreduce", "--sizes wants up to %d sizes, each a multiple of 8 bytes "
					 "up to 16M (8, 8K, 1M), not '%s'", AR_MAX_SIZES, p.sizes);
	o.timeout_ms = com.timeout_ms;
	o.csv = com.csv;
	r = bench_init(&b, "allreduce", o.csv);
	r = r ? r : bench_calibrate(&b);
	for (int k = 0; k < 2 && !r; k++) {
		r = im_open(&b, &o, &im[k], device, sizeof(device));
		for (int s = 0; s < o.nsizes && !r; s++)
			r = measure(&b, &o, &im[k], o.sizes[s], &fig[k][s]);
		im_close(&im[k]);
	}
	if (!r && b.rank == 0)
		report(&b, &o, device, fig);
	return bench_fini(&b, r);
}

const char bench_allreduce_help[] =
"  allreduce [OPTIONS]\n"
"    The offloaded allreduce (mq: CALC tasks on the progress core) against\n"
"    the host-progressed one (ptp: the same algorithm and operand order, moved\n"
"    only inside its calls), a SUM of doubles at each size: the latency of\n"
"    blocking calls (mean, median, mq/ptp) and the overlap of a nonblocking\n"
"    one with work as long as its latency, as the OSU benchmarks define it:\n"
"    100 x (1 - (t_total - t_compute) / t_pure), at least 0.  Targets:\n"
"    latency <= 1.15x ptp at 2 ranks, <= 1.0x at more; 8K overlap >= 50% and\n"
"    >= 2x ptp's at 2 ranks.  Any number of ranks.\n"
"\n"
"    --sizes LIST       bytes, multiples of 8 up to 16M (default 8,8K,64K)\n"
"    --iters K          calls a loop (default 200)\n"
"    --warmup W         calls before the first loop (default 10)\n"
"    --timeout-ms MS    bound on every call (default 60000)\n"
"    --csv FILE         rank 0 writes the results to FILE: impl ptp or mq;\n"
"                       metrics allreduce_latency_S, allreduce_latency_p50_S\n"
"                       (us), iallreduce_overlap_S (%)\n";
