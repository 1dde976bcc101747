/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench bcast: the offloaded broadcast (mq: emunic_bcast, the
 * binomial tree's receives and forwards run by the progress core) against
 * the host-progressed one (ptp: baseline/ptp_bcast.c, the same tree and
 * segments, moved only inside its calls), root 0, at each size:
 *  0. a check, outside every timing: a bcast from every root and three
 *     ibcasts in flight from different roots, the data verified on every
 *     rank (and the first and last call of every timed loop);
 *  1. latency: K blocking bcasts, mean and median;
 *  2. overlap, as the OSU benchmarks define it: t_pure (post + wait, no
 *     work), t_compute (the work alone, sized to t_pure), t_total (post,
 *     work, wait); overlap = 100 x (1 - (t_total - t_compute) / t_pure),
 *     at least 0.
 * A bcast is not symmetric (the root returns once it has sent), so as in
 * OSU's osu_bcast / osu_ibcast every call is timed alone between bootstrap
 * barriers and the figures are the means over the ranks.
 * Targets (issue 19): latency <= 1.15x ptp at 2 ranks, <= 1.0x at more;
 * the issue sets its overlap target (>= 50% at 2 ranks and >= 2x ptp's)
 * for the 8 KiB iallreduce and the 64 KiB ialltoall; it is held against
 * the 8 KiB ibcast here too.
 */
#include "bench.h"
#include "baseline/ptp.h"

#include <emunic/coll.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BC_BASELINE "ptp"
#define BC_MAX_SIZES 6
#define BC_MAX_SIZE ((size_t)16 << 20)
#define BC_OVERLAP_SIZE 8192
#define BC_ROOT 0
#define BC_INFLIGHT 3		/* both implementations' bound */
#define BC_POISON 0x5a		/* a non-root's buffer before a checked call */

struct bc_opts {
	int iters, warmup, timeout_ms;
	size_t segment;
	size_t sizes[BC_MAX_SIZES];
	int nsizes;
	const char *csv;
};

struct bc_impl {
	const char *name;		/* "ptp", "mq" */
	struct emunic_dev *dev;
	struct emunic_coll *coll;
	struct emunic_ptp_bc *p;
};

struct bc_req {
	struct emunic_ptp_bc_req *p;
	struct emunic_coll_req *c;
};

/* One rank's figures at one size, ns; gathered to average over ranks. */
struct bc_fig {
	double lat, p50, pure, compute, total;
};

/* What the report shows: means over the ranks. */
struct bc_sum {
	double lat, p50, slowest, overlap;
};

static size_t max_size(const struct bc_opts *o)
{
	size_t m = 8;

	for (int i = 0; i < o->nsizes; i++)
		m = o->sizes[i] > m ? o->sizes[i] : m;
	return m;
}

static int im_open(struct bench *b, const struct bc_opts *o, struct bc_impl *im, char *device, size_t len)
{
	struct emunic_coll_attr ca;
	int r;

	if (!strcmp(im->name, BC_BASELINE)) {
		/* A core each: poll, as the barrier's ptp does; else sleep. */
		int spin = sysconf(_SC_NPROCESSORS_ONLN) >= bench_local_ranks(b) ? -1 : 50;

		r = emunic_ptp_bc_create(b->boot, max_size(o), o->segment, o->timeout_ms, spin, &im->p);
		return r ? bench_err(b, r, "ptp: emunic_ptp_bc_create") : 0;
	}
	r = bench_open_dev(b, NULL, &im->dev, device, len);
	if (r)
		return r;
	emunic_coll_attr_init(&ca);
	ca.kind = EMUNIC_COLL_BCAST;
	ca.max_bytes = max_size(o);
	ca.segment = o->segment;
	ca.timeout_ms = o->timeout_ms;
	r = emunic_coll_create(im->dev, &ca, &im->coll);
	return r ? bench_err(b, r, "mq: emunic_coll_create (bcast, max %zu bytes)", ca.max_bytes) : 0;
}

static void im_close(struct bc_impl *im)
{
	if (im->coll)
		emunic_coll_destroy(im->coll);
	if (im->dev)
		emunic_dev_close(im->dev);
	if (im->p)
		emunic_ptp_bc_destroy(im->p);
	im->coll = NULL;
	im->dev = NULL;
	im->p = NULL;
}

static int im_bcast(struct bc_impl *im, void *buf, size_t bytes, int root)
{
	return im->p ? emunic_ptp_bcast(im->p, buf, bytes, root) : emunic_bcast(im->coll, buf, bytes, root);
}

static int im_ibcast(struct bc_impl *im, void *buf, size_t bytes, int root, struct bc_req *q)
{
	*q = (struct bc_req){ 0 };
	return im->p ? emunic_ptp_ibcast(im->p, buf, bytes, root, &q->p) : emunic_ibcast(im->coll, buf, bytes, root, &q->c);
}

static int im_wait(struct bc_impl *im, struct bc_req *q, int timeout_ms)
{
	return im->p ? emunic_ptp_bc_wait(q->p, timeout_ms) : emunic_coll_wait(q->c, timeout_ms);
}

/* -ENOSPC only while an earlier call's sends are not yet complete (the
 * root's copies): retried, within the bound. */
static int im_ibcast_retry(struct bc_impl *im, void *buf, size_t bytes, int root, struct bc_req *q, int timeout_ms)
{
	int64_t deadline = bench_mono_ns() + (int64_t)timeout_ms * 1000000;
	int rc;

	while ((rc = im_ibcast(im, buf, bytes, root, q)) == -ENOSPC && bench_mono_ns() < deadline)
		;
	return rc;
}

/* post, work for `work` loop iterations, wait. */
static int im_overlapped(struct bc_impl *im, void *buf, size_t bytes, uint64_t work, int timeout_ms)
{
	struct bc_req q;
	int rc = im_ibcast_retry(im, buf, bytes, BC_ROOT, &q, timeout_ms);

	bench_nops(work);
	return rc ? rc : im_wait(im, &q, timeout_ms);
}

/* ---- data ------------------------------------------------------------------ */

static unsigned char expect(size_t i, unsigned seed)
{
	return bench_pattern(i + (size_t)seed * 4099);
}

/* The root's data, or a non-root's poison (so stale data cannot pass). */
static void fill(const struct bench *b, unsigned char *buf, size_t bytes, int root, unsigned seed)
{
	for (size_t i = 0; i < bytes; i++)
		buf[i] = b->rank == root ? expect(i, seed) : BC_POISON;
}

static int verify(const struct bench *b, const struct bc_impl *im, const unsigned char *buf, size_t bytes, int root,
		  unsigned seed, const char *what)
{
	size_t bad = 0, first = 0;

	for (size_t i = 0; i < bytes; i++)
		if (buf[i] != expect(i, seed) && !bad++)
			first = i;
	if (!bad)
		return 0;
	return bench_err(b, -EBADMSG, "%s: WRONG DATA after %s of %zu bytes from root %d: byte %zu is 0x%02x, not "
			 "0x%02x (%zu bytes wrong)", im->name, what, bytes, root, first, buf[first],
			 expect(first, seed), bad);
}

/* Every rank learns whether any failed, so all stop together instead of
 * waiting in a bcast for a rank that left. */
static int agree(struct bench *b, int r)
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

/* ---- the check ------------------------------------------------------------- */

/* A blocking bcast from every root. */
static int check_roots(struct bench *b, struct bc_impl *im, unsigned char *buf, size_t bytes)
{
	int r = 0;

	for (int root = 0; !r && root < b->size; root++) {
		fill(b, buf, bytes, root, (unsigned)root + 1);
		r = im_bcast(im, buf, bytes, root);
		if (r)
			r = bench_err(b, r, "%s: check: bcast of %zu bytes from root %d", im->name, bytes, root);
		r = r ? r : verify(b, im, buf, bytes, root, (unsigned)root + 1, "a bcast");
	}
	return r;
}

/* Three ibcasts in flight, roots size - 1, 0, 1: one waits for the oldest
 * only when refused with -ENOSPC (or, none to wait, retries: the root's
 * copies of earlier calls may still be sending). */
static int check_inflight(struct bench *b, const struct bc_opts *o, struct bc_impl *im, unsigned char **buf,
			  size_t bytes)
{
	struct bc_req q[BC_INFLIGHT];
	int posted = 0, waited = 0, r = 0;

	for (int k = 0; !r && k < BC_INFLIGHT; k++) {
		int root = (b->size - 1 + k) % b->size;

		fill(b, buf[k], bytes, root, (unsigned)(100 + k));
		r = im_ibcast(im, buf[k], bytes, root, &q[k]);
		while (r == -ENOSPC && waited < posted) {
			r = im_wait(im, &q[waited++], o->timeout_ms);
			r = r ? r : im_ibcast(im, buf[k], bytes, root, &q[k]);
		}
		if (r == -ENOSPC)
			r = im_ibcast_retry(im, buf[k], bytes, root, &q[k], o->timeout_ms);
		if (r)
			r = bench_err(b, r, "%s: check: ibcast %d of %d in flight (root %d)", im->name, k + 1,
				      BC_INFLIGHT, root);
		else
			posted++;
	}
	for (; waited < posted; waited++) {
		int w = im_wait(im, &q[waited], o->timeout_ms);

		if (w && !r)
			r = bench_err(b, w, "%s: check: waiting for ibcast %d of %d in flight", im->name, waited + 1,
				      BC_INFLIGHT);
	}
	for (int k = 0; !r && k < BC_INFLIGHT; k++)
		r = verify(b, im, buf[k], bytes, (b->size - 1 + k) % b->size, (unsigned)(100 + k), "ibcasts in flight");
	return r;
}

static int check(struct bench *b, const struct bc_opts *o, struct bc_impl *im, size_t bytes)
{
	unsigned char *buf[BC_INFLIGHT];
	int r = 0;

	for (int k = 0; k < BC_INFLIGHT; k++)
		buf[k] = malloc(bytes + 1);
	if (!buf[0] || !buf[1] || !buf[2])
		r = bench_err(b, -ENOMEM, "check buffers");
	r = r ? r : check_roots(b, im, buf[0], bytes);
	r = r ? r : check_inflight(b, o, im, buf, bytes);
	for (int k = 0; k < BC_INFLIGHT; k++)
		free(buf[k]);
	return agree(b, r);
}

/* ---- timing ---------------------------------------------------------------- */

static int sync_ranks(struct bench *b)
{
	int r = emunic_boot_barrier(b->boot);

	return r ? bench_err(b, r, "the bootstrap barrier between calls") : 0;
}

/* The first and the last call of a loop deliver the data. */
static int check_call(const struct bench *b, const struct bc_impl *im, unsigned char *buf, size_t bytes, int i,
		      int iters)
{
	int r = 0;

	if (i == 0 || i == iters - 1)
		r = verify(b, im, buf, bytes, BC_ROOT, 0, i ? "the last call of a loop" : "the first call of a loop");
	if (i == 0 && b->rank != BC_ROOT)
		memset(buf, BC_POISON, bytes);
	return r;
}

/* Mean time of `iters` calls of post + `work` + wait, each alone between
 * barriers, in ns; samp: each call's. */
static int timed(struct bench *b, const struct bc_opts *o, struct bc_impl *im, size_t bytes, uint64_t work,
		 double *samp, double *mean_ns)
{
	unsigned char *buf = malloc(bytes + 1);
	double sum = 0;
	int rc = buf ? 0 : -ENOMEM;

	if (buf)
		fill(b, buf, bytes, BC_ROOT, 0);
	for (int i = 0; !rc && i < o->iters; i++) {
		int64_t t;

		rc = sync_ranks(b);
		t = bench_mono_ns();
		rc = rc ? rc : work || !samp ? im_overlapped(im, buf, bytes, work, o->timeout_ms)
					     : im_bcast(im, buf, bytes, BC_ROOT);
		t = bench_mono_ns() - t;
		if (rc)
			rc = bench_err(b, rc, "%s: bcast %d of %d (%zu bytes)", im->name, i, o->iters, bytes);
		rc = rc ? rc : check_call(b, im, buf, bytes, i, o->iters);
		if (samp)
			samp[i] = (double)t - b->clock_ns;
		sum += (double)t - b->clock_ns;
	}
	*mean_ns = sum / o->iters;
	free(buf);
	return agree(b, rc);
}

/* This rank's figures at one size. */
static int run_size(struct bench *b, const struct bc_opts *o, struct bc_impl *im, size_t bytes, struct bc_fig *f)
{
	double *samp = calloc((size_t)o->iters, sizeof(double));
	unsigned char *w = calloc(1, bytes + 1);
	char sz[16];
	uint64_t work;
	int64_t t0;
	int r = samp && w ? 0 : -ENOMEM;

	bench_size_str(sz, sizeof(sz), bytes);
	bench_progress(b, "[%s] %s: check", im->name, sz);
	r = r ? r : check(b, o, im, bytes);
	bench_progress(b, "[%s] %s: latency", im->name, sz);
	for (int i = 0; !r && i < o->warmup; i++)
		r = im_bcast(im, w, bytes, BC_ROOT);
	r = r ? r : timed(b, o, im, bytes, 0, samp, &f->lat);
	if (!r)
		f->p50 = bench_median(samp, o->iters);
	bench_progress(b, "[%s] %s: overlap", im->name, sz);
	r = r ? r : timed(b, o, im, bytes, 0, NULL, &f->pure);
	work = bench_work_iters(b, f->pure);
	t0 = bench_mono_ns();
	for (int i = 0; !r && i < o->iters; i++)
		bench_nops(work);
	f->compute = (double)(bench_mono_ns() - t0) / o->iters;
	r = r ? r : timed(b, o, im, bytes, work, NULL, &f->total);
	free(samp);
	free(w);
	return r;
}

/* Means over the ranks; the overlap from the mean times, as OSU's. */
static int summarize(struct bench *b, const struct bc_fig *f, struct bc_sum *s)
{
	struct bc_fig *all = calloc((size_t)b->size, sizeof(*all)), m = { 0 };
	int r = all ? emunic_boot_allgather(b->boot, f, sizeof(*f), all) : -ENOMEM;

	*s = (struct bc_sum){ 0 };
	for (int q = 0; !r && q < b->size; q++) {
		m.lat += all[q].lat / b->size;
		m.p50 += all[q].p50 / b->size;
		m.pure += all[q].pure / b->size;
		m.compute += all[q].compute / b->size;
		m.total += all[q].total / b->size;
		s->slowest = all[q].lat > s->slowest ? all[q].lat : s->slowest;
	}
	free(all);
	if (r)
		return bench_err(b, r, "the allgather of the figures");
	s->lat = m.lat;
	s->p50 = m.p50;
	s->overlap = m.pure > 0 ? 100.0 * (1.0 - (m.total - m.compute) / m.pure) : 0;
	s->overlap = s->overlap < 0 ? 0 : s->overlap > 100 ? 100 : s->overlap;
	return 0;
}

static int measure(struct bench *b, const struct bc_opts *o, struct bc_impl *im, size_t bytes, struct bc_sum *s)
{
	struct bc_fig f = { 0 };
	char sz[16], m[40];
	int r = run_size(b, o, im, bytes, &f);

	r = r ? r : summarize(b, &f, s);
	if (r)
		return r;
	bench_size_str(sz, sizeof(sz), bytes);
	snprintf(m, sizeof(m), "bcast_latency_%s", sz);
	r = bench_add(b, im->name, m, s->lat / 1e3, "us");
	snprintf(m, sizeof(m), "bcast_latency_p50_%s", sz);
	r = r ? r : bench_add(b, im->name, m, s->p50 / 1e3, "us");
	snprintf(m, sizeof(m), "bcast_latency_slowest_%s", sz);
	r = r ? r : bench_add(b, im->name, m, s->slowest / 1e3, "us");
	snprintf(m, sizeof(m), "ibcast_overlap_%s", sz);
	return r ? r : bench_add(b, im->name, m, s->overlap, "%");
}

/* ---- report ---------------------------------------------------------------- */

static void report_targets(const struct bench *b, const struct bc_opts *o, struct bc_sum (*fig)[BC_MAX_SIZES])
{
	double lat_limit = b->size == 2 ? 1.15 : 1.0;
	char ctx[96], sz[16];

	printf("\ntargets (reported, never asserted)\n");
	for (int s = 0; s < o->nsizes; s++) {
		char what[64];

		bench_size_str(sz, sizeof(sz), o->sizes[s]);
		snprintf(what, sizeof(what), "bcast %s mean <= %.2fx ptp (%d ranks)", sz, lat_limit, b->size);
		snprintf(ctx, sizeof(ctx), "median %.2fx", fig[1][s].p50 / fig[0][s].p50);
		bench_target_ratio(what, "mq", fig[1][s].lat / fig[0][s].lat, lat_limit, true, ctx);
		if (o->sizes[s] != BC_OVERLAP_SIZE || b->size != 2)
			continue;
		snprintf(ctx, sizeof(ctx), "ptp %.1f%%", fig[0][s].overlap);
		printf("  %-7s %-42s %-9s %.1f%%; %s\n", fig[1][s].overlap >= 50 ? "met" : "MISSED",
		       "ibcast 8K overlap >= 50% (2 ranks)", "mq", fig[1][s].overlap, ctx);
		bench_target_ratio("ibcast 8K overlap >= 2x ptp's (2 ranks)", "mq",
				   fig[0][s].overlap > 0 ? fig[1][s].overlap / fig[0][s].overlap : fig[1][s].overlap > 0 ? 99 : 0,
				   2.0, false, ctx);
	}
}

static void report(const struct bench *b, const struct bc_opts *o, const char *device,
		   struct bc_sum (*fig)[BC_MAX_SIZES])
{
	char sz[16], seg[16];

	bench_size_str(seg, sizeof(seg), o->segment);
	printf("\nemunic-bench bcast: offloaded (mq, the tree on the progress core) vs host-progressed (ptp)\n"
	       "  device       %s, %d ranks, root %d, segment %s, %d calls a loop\n"
	       "  figures      each call timed alone between barriers, means over the ranks (OSU)\n"
	       "  overlap      OSU: 100 x (1 - (t_total - t_compute) / t_pure), work sized to t_pure\n\n",
	       device, b->size, BC_ROOT, o->segment ? seg : "default", o->iters);
	printf("  %-8s %-5s %12s %12s %12s %10s %10s\n", "size", "impl", "mean, us", "median, us", "slowest, us",
	       "vs ptp", "overlap %");
	for (int s = 0; s < o->nsizes; s++) {
		bench_size_str(sz, sizeof(sz), o->sizes[s]);
		for (int k = 0; k < 2; k++) {
			printf("  %-8s %-5s %12.1f %12.1f %12.1f ", sz, k ? "mq" : "ptp", fig[k][s].lat / 1e3,
			       fig[k][s].p50 / 1e3, fig[k][s].slowest / 1e3);
			if (k)
				printf("%9.2fx", fig[1][s].lat / fig[0][s].lat);
			else
				printf("%10s", "-");
			printf(" %10.1f\n", fig[k][s].overlap);
		}
	}
	report_targets(b, o, fig);
	bench_write_csv(b, BC_BASELINE);
}

/* ---- options --------------------------------------------------------------- */

static bool add_size(void *ctx, const char *s)
{
	struct bc_opts *o = ctx;
	size_t v = strcmp(s, "0") ? bench_parse_size(s) : 0;

	if ((!v && strcmp(s, "0")) || v > BC_MAX_SIZE || o->nsizes == BC_MAX_SIZES)
		return false;
	o->sizes[o->nsizes++] = v;
	return true;
}

struct bc_parse {
	struct bc_opts *o;
	const char *sizes;
};

static int bc_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct bc_parse *p = ctx;

	if (val == 'k')
		return bench_opt_int(cmd, name, arg, 1, 1000000, "a count in 1..1000000", &p->o->iters);
	if (val == 'w')
		return bench_opt_int(cmd, name, arg, 0, 1000000, "a count in 0..1000000", &p->o->warmup);
	if (val == 's') {
		p->o->segment = bench_parse_size(arg);
		return p->o->segment && p->o->segment <= BC_MAX_SIZE ? 0 :
		       bench_usage_error(cmd, "--%s wants bytes in 1..16M (32K), not '%s'", name, arg);
	}
	p->sizes = arg;
	return 0;
}

int bench_bcast_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "iters", required_argument, NULL, 'k' }, { "warmup", required_argument, NULL, 'w' },
		{ "sizes", required_argument, NULL, 'z' }, { "segment", required_argument, NULL, 's' }, OPTS_COMMON
	};
	struct bc_opts o = { .iters = 100, .warmup = 10, .timeout_ms = 60000 };
	struct bc_parse p = { .o = &o };
	struct common_opts com = { .timeout_ms = o.timeout_ms };
	struct bc_impl im[2] = { { .name = BC_BASELINE }, { .name = "mq" } };
	struct bc_sum fig[2][BC_MAX_SIZES];
	char device[96] = "?";
	struct bench b = { 0 };
	int r = bench_parse_opts("bcast", argc, argv, lo, bc_opt, &p, &com);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	if (!bench_each_item(p.sizes ? p.sizes : "8,8K,64K,1M", add_size, &o))
		return bench_usage_error("bcast", "--sizes wants up to %d sizes, each 0 to 16M bytes (0, 8, 8K, 1M), "
					 "not '%s'", BC_MAX_SIZES, p.sizes);
	o.timeout_ms = com.timeout_ms;
	o.csv = com.csv;
	r = bench_init(&b, "bcast", o.csv);
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

const char bench_bcast_help[] =
"  bcast [OPTIONS]\n"
"    The offloaded broadcast (mq: the binomial tree's receives and forwards on\n"
"    the progress core) against the host-progressed one (ptp: the same tree\n"
"    and segments, moved only inside its calls), root 0, at each size: the\n"
"    latency of blocking calls (mean, median, slowest rank's mean, mq/ptp)\n"
"    and the overlap of a nonblocking one with work as long as its latency,\n"
"    as the OSU benchmarks define it: 100 x (1 - (t_total - t_compute) /\n"
"    t_pure), at least 0.  Each call is timed alone between bootstrap\n"
"    barriers; figures are means over the ranks.  Before timing, a bcast\n"
"    from every root and three ibcasts in flight, and the first and last\n"
"    call of every loop, are checked on every rank: wrong data is an error.\n"
"    Targets: latency <= 1.15x ptp at 2 ranks, <= 1.0x at more; 8K overlap\n"
"    >= 50% and >= 2x ptp's at 2 ranks.  Any number of ranks.\n"
"\n"
"    --sizes LIST       bytes, 0 to 16M (default 8,8K,64K,1M)\n"
"    --segment BYTES    the pipeline segment of both (default 32K, raised to\n"
"                       the largest size / 32)\n"
"    --iters K          calls a loop (default 100)\n"
"    --warmup W         calls before the first loop (default 10)\n"
"    --timeout-ms MS    bound on every call (default 60000)\n"
"    --csv FILE         rank 0 writes the results to FILE: impl ptp or mq;\n"
"                       metrics bcast_latency_S, bcast_latency_p50_S,\n"
"                       bcast_latency_slowest_S (us), ibcast_overlap_S (%)\n";
