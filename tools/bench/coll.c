/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench's collective frame, for allreduce.c, bcast.c, alltoall.c and
 * gather.c (gather, allgather): each measures an offloaded collective (mq:
 * an emunic_coll on the progress core) against its host-progressed
 * baseline (ptp) the same way, and this file is that way:
 *  - the options (--sizes, --iters, --warmup, --segment where it has one);
 *  - the loop over the two implementations (ptp first) and the sizes;
 *  - at each size: the subcommand's check (if any), the warm-up, latency
 *    (K blocking calls, mean and median), and overlap, as the OSU
 *    benchmarks define it: t_pure (post + wait, no work), t_compute (the
 *    work alone, sized to t_pure), t_total (post, work, wait); overlap =
 *    100 x (1 - (t_total - t_compute) / t_pure), at least 0;
 *  - the figures (rank 0's, or the means over the ranks), the CSV rows, the
 *    table and the target lines.
 * A subcommand describes itself in a struct coll_bench: its collective's
 * ops table (baseline/coll_ops.h: the name, the offload and the baseline,
 * which this file opens and closes and the subcommand calls through
 * im->ops), and what differs (its calls' arguments and data checks, the
 * timed loop, the head of its report) as callbacks.  bench_coll_main calls
 * nothing of the subcommands but those.
 */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COLL_BASELINE "ptp"

/* One rank's times at one size, ns; gathered to average over ranks. */
struct coll_times {
	double lat, p50, pure, compute, total;
};

/* What the report shows: rank 0's figures or the means over the ranks. */
struct coll_fig {
	double lat, p50, slowest, overlap;
};

int bench_coll_start(struct coll_impl *im, const struct emunic_coll_call *c, void **q, int timeout_ms)
{
	int64_t deadline = bench_mono_ns() + (int64_t)timeout_ms * 1000000;
	int rc;

	while ((rc = im->ops->start(im->h, c, q)) == -ENOSPC && bench_mono_ns() < deadline)
		;
	return rc;
}

size_t bench_coll_max_size(const struct coll_opts *o)
{
	size_t m = 8;

	for (int i = 0; i < o->nsizes; i++)
		m = o->sizes[i] > m ? o->sizes[i] : m;
	return m;
}

int bench_coll_sync(struct bench *b, const char *where)
{
	int r = emunic_boot_barrier(b->boot);

	return r ? bench_err(b, r, "the bootstrap barrier %s", where) : 0;
}

/* Every rank learns whether any failed, so all stop together instead of
 * waiting in a collective for a rank that left. */
int bench_coll_agree(struct bench *b, int r)
{
	int *all = calloc((size_t)b->size, sizeof(*all)), g, bad = -1;

	g = all ? emunic_boot_allgather(b->boot, &r, sizeof(r), all) : -ENOMEM;
	for (int q = 0; !g && q < b->size && bad < 0; q++)
		bad = all[q] ? q : -1;
	if (!r && g)
		r = bench_err(b, g, "the allgather of the check results");
	else if (!r && bad >= 0)
		r = bench_err(b, all[bad], "rank %d failed (its line says why)", bad);
	free(all);
	return r;
}

/* OSU's overlap, %, in 0..100. */
static double osu_overlap(double pure, double compute, double total)
{
	double v = pure > 0 ? 100.0 * (1.0 - (total - compute) / pure) : 0;

	return v < 0 ? 0 : v > 100 ? 100 : v;
}

/* ---- the two implementations ------------------------------------------------ */

static int impl_open(struct bench *b, const struct coll_bench *cb, const struct coll_opts *o,
		     struct coll_impl *im, char *device, size_t len)
{
	/* A core each: poll, as the barrier's ptp does; else sleep. */
	int spin = sysconf(_SC_NPROCESSORS_ONLN) >= bench_local_ranks(b) ? -1 : 50;
	struct emunic_coll_impl_attr a = { .max_bytes = bench_coll_max_size(o), .segment = o->segment,
					   .timeout_ms = o->timeout_ms, .spin_us = spin };
	bool mq = strcmp(im->name, COLL_BASELINE);
	int r = mq ? bench_open_dev(b, NULL, &im->dev, device, len) : 0;

	if (r)
		return r;	/* it said why */
	im->ops = mq ? &cb->ops->offload : &cb->ops->baseline;
	r = im->ops->open(cb->ops->kind, b->boot, im->dev, &a, &im->h);
	if (r && mq)
		return bench_err(b, r, "mq: %s (%s, %s %zu bytes)", im->ops->create, cb->ops->name, cb->max_what,
				 a.max_bytes);
	return r ? bench_err(b, r, "%s: %s (%s)", im->name, im->ops->create, cb->ops->name) : 0;
}

static void impl_close(struct coll_impl *im)
{
	if (im->h)
		im->ops->close(im->h);
	if (im->dev)
		emunic_dev_close(im->dev);
	im->h = NULL;
	im->dev = NULL;
}

/* ---- one size ---------------------------------------------------------------- */

/* This rank's times at one size: check, warm-up, latency, overlap. */
static int run_size(struct bench *b, const struct coll_bench *cb, const struct coll_opts *o, struct coll_impl *im,
		    size_t bytes, struct coll_times *t)
{
	double *samp = calloc((size_t)o->iters, sizeof(double));
	char sz[16];
	uint64_t work;
	int64_t t0;
	int r = samp ? 0 : bench_err(b, -ENOMEM, "%d samples", o->iters);

	bench_size_str(sz, sizeof(sz), bytes);
	if (cb->check) {
		bench_progress(b, "[%s] %s: check", im->name, sz);
		r = r ? r : cb->check(b, o, im, bytes);
	}
	bench_progress(b, "[%s] %s: latency", im->name, sz);
	r = r ? r : cb->warmup(b, o, im, bytes);
	r = r ? r : cb->timed(b, o, im, bytes, 0, samp, &t->lat);
	if (!r)
		t->p50 = bench_median(samp, o->iters);
	bench_progress(b, "[%s] %s: overlap", im->name, sz);
	r = r ? r : cb->timed(b, o, im, bytes, 0, NULL, &t->pure);
	work = bench_work_iters(b, t->pure);
	t0 = bench_mono_ns();
	for (int i = 0; !r && i < o->iters; i++)
		bench_nops(work);
	t->compute = (double)(bench_mono_ns() - t0) / o->iters;
	r = r ? r : cb->timed(b, o, im, bytes, work, NULL, &t->total);
	free(samp);
	return r;
}

/* This rank's figures, or (cb->means) the means over the ranks, the overlap
 * from the mean times, as OSU's. */
static int summarize(struct bench *b, const struct coll_bench *cb, const struct coll_times *t, struct coll_fig *f)
{
	struct coll_times *all, m = { 0 };
	int r;

	if (!cb->means) {
		*f = (struct coll_fig){ .lat = t->lat, .p50 = t->p50, .slowest = t->lat,
					.overlap = osu_overlap(t->pure, t->compute, t->total) };
		return 0;
	}
	all = calloc((size_t)b->size, sizeof(*all));
	r = all ? emunic_boot_allgather(b->boot, t, sizeof(*t), all) : -ENOMEM;
	*f = (struct coll_fig){ 0 };
	for (int q = 0; !r && q < b->size; q++) {
		m.lat += all[q].lat / b->size;
		m.p50 += all[q].p50 / b->size;
		m.pure += all[q].pure / b->size;
		m.compute += all[q].compute / b->size;
		m.total += all[q].total / b->size;
		f->slowest = all[q].lat > f->slowest ? all[q].lat : f->slowest;
	}
	free(all);
	if (r)
		return bench_err(b, r, "the allgather of the figures");
	f->lat = m.lat;
	f->p50 = m.p50;
	f->overlap = osu_overlap(m.pure, m.compute, m.total);
	return 0;
}

static int measure(struct bench *b, const struct coll_bench *cb, const struct coll_opts *o, struct coll_impl *im,
		   size_t bytes, struct coll_fig *f)
{
	struct coll_times t = { 0 };
	char sz[16], m[40];
	int r = run_size(b, cb, o, im, bytes, &t);

	r = r ? r : summarize(b, cb, &t, f);
	if (r)
		return r;
	bench_size_str(sz, sizeof(sz), bytes);
	snprintf(m, sizeof(m), "%s_latency_%s", cb->ops->name, sz);
	r = bench_add(b, im->name, m, f->lat / 1e3, "us");
	snprintf(m, sizeof(m), "%s_latency_p50_%s", cb->ops->name, sz);
	r = r ? r : bench_add(b, im->name, m, f->p50 / 1e3, "us");
	if (cb->slowest) {
		snprintf(m, sizeof(m), "%s_latency_slowest_%s", cb->ops->name, sz);
		r = r ? r : bench_add(b, im->name, m, f->slowest / 1e3, "us");
	}
	snprintf(m, sizeof(m), "i%s_overlap_%s", cb->ops->name, sz);
	return r ? r : bench_add(b, im->name, m, f->overlap, "%");
}

/* ---- report ------------------------------------------------------------------ */

static void report_targets(const struct bench *b, const struct coll_bench *cb, const struct coll_opts *o,
			   struct coll_fig (*fig)[COLL_MAX_SIZES])
{
	double lat_limit = b->size == 2 ? 1.15 : 1.0;
	char ctx[96], sz[16], what[64];

	printf("\ntargets (reported, never asserted)\n");
	for (int s = 0; s < o->nsizes; s++) {
		bench_size_str(sz, sizeof(sz), o->sizes[s]);
		snprintf(what, sizeof(what), "%s %s mean <= %.2fx ptp (%d ranks)", cb->ops->name, sz, lat_limit, b->size);
		snprintf(ctx, sizeof(ctx), "median %.2fx", fig[1][s].p50 / fig[0][s].p50);
		bench_target_ratio(what, "mq", fig[1][s].lat / fig[0][s].lat, lat_limit, true, ctx);
		if (o->sizes[s] != cb->overlap_size || b->size != 2)
			continue;
		snprintf(ctx, sizeof(ctx), "ptp %.1f%%", fig[0][s].overlap);
		snprintf(what, sizeof(what), "i%s %s overlap >= 50%% (2 ranks)", cb->ops->name, sz);
		printf("  %-7s %-42s %-9s %.1f%%; %s\n", fig[1][s].overlap >= 50 ? "met" : "MISSED", what, "mq",
		       fig[1][s].overlap, ctx);
		snprintf(what, sizeof(what), "i%s %s overlap >= 2x ptp's (2 ranks)", cb->ops->name, sz);
		bench_target_ratio(what, "mq",
				   fig[0][s].overlap > 0 ? fig[1][s].overlap / fig[0][s].overlap : fig[1][s].overlap > 0 ? 99 : 0,
				   2.0, false, ctx);
	}
}

static void report(const struct bench *b, const struct coll_bench *cb, const struct coll_opts *o,
		   const char *device, struct coll_fig (*fig)[COLL_MAX_SIZES])
{
	char sz[16];

	cb->report_head(b, o, device);
	printf("  %-8s %-5s %12s %12s ", "size", "impl", "mean, us", "median, us");
	if (cb->slowest)
		printf("%12s ", "slowest, us");
	printf("%10s %10s\n", "vs ptp", "overlap %");
	for (int s = 0; s < o->nsizes; s++) {
		bench_size_str(sz, sizeof(sz), o->sizes[s]);
		for (int k = 0; k < 2; k++) {
			printf("  %-8s %-5s %12.1f %12.1f ", sz, k ? "mq" : "ptp", fig[k][s].lat / 1e3, fig[k][s].p50 / 1e3);
			if (cb->slowest)
				printf("%12.1f ", fig[k][s].slowest / 1e3);
			if (k)
				printf("%9.2fx", fig[1][s].lat / fig[0][s].lat);
			else
				printf("%10s", "-");
			printf(" %10.1f\n", fig[k][s].overlap);
		}
	}
	report_targets(b, cb, o, fig);
	bench_write_csv(b, COLL_BASELINE);
}

/* ---- options and main -------------------------------------------------------- */

struct coll_parse {
	const struct coll_bench *cb;
	struct coll_opts *o;
	const char *sizes;
};

static bool add_size(void *ctx, const char *s)
{
	struct coll_parse *p = ctx;
	size_t v = bench_parse_size(s);

	if ((!v && (!p->cb->zero || strcmp(s, "0"))) || v % p->cb->align || v > p->cb->max_size ||
	    p->o->nsizes == COLL_MAX_SIZES)
		return false;
	p->o->sizes[p->o->nsizes++] = v;
	return true;
}

static int coll_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct coll_parse *p = ctx;
	char max[16];

	if (val == 'k')
		return bench_opt_int(cmd, name, arg, 1, 1000000, "a count in 1..1000000", &p->o->iters);
	if (val == 'w')
		return bench_opt_int(cmd, name, arg, 0, 1000000, "a count in 0..1000000", &p->o->warmup);
	if (val == 's') {
		p->o->segment = bench_parse_size(arg);
		if (p->o->segment && p->o->segment <= p->cb->max_size)
			return 0;
		bench_size_str(max, sizeof(max), p->cb->max_size);
		return bench_usage_error(cmd, "--%s wants bytes in 1..%s (32K), not '%s'", name, max, arg);
	}
	p->sizes = arg;
	return 0;
}

int bench_coll_main(const struct coll_bench *cb, int argc, char **argv)
{
	static const struct option lo_seg[] = {
		{ "iters", required_argument, NULL, 'k' }, { "warmup", required_argument, NULL, 'w' },
		{ "sizes", required_argument, NULL, 'z' }, { "segment", required_argument, NULL, 's' }, OPTS_COMMON
	};
	static const struct option lo[] = {
		{ "iters", required_argument, NULL, 'k' }, { "warmup", required_argument, NULL, 'w' },
		{ "sizes", required_argument, NULL, 'z' }, OPTS_COMMON
	};
	struct coll_opts o = { .iters = cb->iters, .warmup = 10, .timeout_ms = 60000 };
	struct coll_parse p = { .cb = cb, .o = &o };
	struct common_opts com = { .timeout_ms = o.timeout_ms };
	struct coll_impl im[2] = { { .name = COLL_BASELINE }, { .name = "mq" } };
	struct coll_fig fig[2][COLL_MAX_SIZES];
	char device[96] = "?";
	struct bench b = { 0 };
	int r = bench_parse_opts(cb->ops->name, argc, argv, cb->segment ? lo_seg : lo, coll_opt, &p, &com);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	if (!bench_each_item(p.sizes ? p.sizes : cb->sizes, add_size, &p))
		return bench_usage_error(cb->ops->name, "--sizes wants up to %d %s, not '%s'", COLL_MAX_SIZES, cb->sizes_wants,
					 p.sizes);
	o.timeout_ms = com.timeout_ms;
	r = bench_init(&b, cb->ops->name, com.csv);
	r = r ? r : bench_calibrate(&b);
	for (int k = 0; k < 2 && !r; k++) {
		r = impl_open(&b, cb, &o, &im[k], device, sizeof(device));
		for (int s = 0; s < o.nsizes && !r; s++)
			r = measure(&b, cb, &o, &im[k], o.sizes[s], &fig[k][s]);
		impl_close(&im[k]);
	}
	if (!r && b.rank == 0)
		report(&b, cb, &o, device, fig);
	return bench_fini(&b, r);
}
