/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench alltoall: the offloaded all-to-all (mq: emunic_alltoall, the
 * pairwise exchange's steps released one by one by the progress core)
 * against the host-progressed one (ptp: baseline/ptp_alltoall.c, the same
 * steps and segments, moved only inside its calls), at each block size
 * (the bytes a rank sends to each peer):
 *  0. a check, outside every timing: blocking alltoalls and three
 *     ialltoalls in flight, every block verified on every rank (and the
 *     first and last call of every timed loop, after its clock stopped);
 *  1. latency: K blocking alltoalls, mean and median;
 *  2. overlap, as the OSU benchmarks define it: t_pure (post + wait, no
 *     work), t_compute (the work alone, sized to t_pure), t_total (post,
 *     work, wait); overlap = 100 x (1 - (t_total - t_compute) / t_pure),
 *     at least 0.
 * An alltoall is symmetric (no rank returns before it has every peer's
 * block), so as allreduce.c does (and OSU's osu_alltoall) the calls of a
 * loop run back to back after one bootstrap barrier and are timed together;
 * the figures are the means over the ranks, as bcast.c's.
 * Targets (issue 19): latency <= 1.15x ptp at 2 ranks, <= 1.0x at more;
 * overlap of a 64 KiB ialltoall >= 50% at 2 ranks and >= 2x ptp's.
 */
#include "bench.h"
#include "baseline/ptp.h"

#include <emunic/coll.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AA_BASELINE "ptp"
#define AA_MAX_SIZES 6
#define AA_MAX_SIZE ((size_t)4 << 20)
#define AA_OVERLAP_SIZE 65536
#define AA_INFLIGHT 3		/* both implementations' bound */
#define AA_CHECKS 2		/* blocking alltoalls of the check */
#define AA_POISON 0x5a		/* a receive buffer before a checked call */

struct aa_opts {
	int iters, warmup, timeout_ms;
	size_t segment;
	size_t sizes[AA_MAX_SIZES];
	int nsizes;
	const char *csv;
};

struct aa_impl {
	const char *name;		/* "ptp", "mq" */
	struct emunic_dev *dev;
	struct emunic_coll *coll;
	struct emunic_ptp_a2a *p;
};

struct aa_req {
	struct emunic_ptp_a2a_req *p;
	struct emunic_coll_req *c;
};

/* One rank's figures at one size, ns; gathered to average over ranks. */
struct aa_fig {
	double lat, p50, pure, compute, total;
};

/* What the report shows: means over the ranks. */
struct aa_sum {
	double lat, p50, overlap;
};

static size_t max_size(const struct aa_opts *o)
{
	size_t m = 8;

	for (int i = 0; i < o->nsizes; i++)
		m = o->sizes[i] > m ? o->sizes[i] : m;
	return m;
}

static int im_open(struct bench *b, const struct aa_opts *o, struct aa_impl *im, char *device, size_t len)
{
	struct emunic_coll_attr ca;
	int r;

	if (!strcmp(im->name, AA_BASELINE)) {
		/* A core each: poll, as the barrier's ptp does; else sleep. */
		int spin = sysconf(_SC_NPROCESSORS_ONLN) >= bench_local_ranks(b) ? -1 : 50;

		r = emunic_ptp_a2a_create(b->boot, max_size(o), o->segment, o->timeout_ms, spin, &im->p);
		return r ? bench_err(b, r, "ptp: emunic_ptp_a2a_create") : 0;
	}
	r = bench_open_dev(b, NULL, &im->dev, device, len);
	if (r)
		return r;
	emunic_coll_attr_init(&ca);
	ca.kind = EMUNIC_COLL_ALLTOALL;
	ca.max_bytes = max_size(o);
	ca.segment = o->segment;
	ca.timeout_ms = o->timeout_ms;
	r = emunic_coll_create(im->dev, &ca, &im->coll);
	return r ? bench_err(b, r, "mq: emunic_coll_create (alltoall, blocks up to %zu bytes)", ca.max_bytes) : 0;
}

static void im_close(struct aa_impl *im)
{
	if (im->coll)
		emunic_coll_destroy(im->coll);
	if (im->dev)
		emunic_dev_close(im->dev);
	if (im->p)
		emunic_ptp_a2a_destroy(im->p);
	im->coll = NULL;
	im->dev = NULL;
	im->p = NULL;
}

static int im_alltoall(struct aa_impl *im, const void *sbuf, void *rbuf, size_t block)
{
	return im->p ? emunic_ptp_alltoall(im->p, sbuf, rbuf, block) : emunic_alltoall(im->coll, sbuf, rbuf, block);
}

static int im_ialltoall(struct aa_impl *im, const void *sbuf, void *rbuf, size_t block, struct aa_req *q)
{
	*q = (struct aa_req){ 0 };
	return im->p ? emunic_ptp_ialltoall(im->p, sbuf, rbuf, block, &q->p)
		     : emunic_ialltoall(im->coll, sbuf, rbuf, block, &q->c);
}

static int im_wait(struct aa_impl *im, struct aa_req *q, int timeout_ms)
{
	return im->p ? emunic_ptp_a2a_wait(q->p, timeout_ms) : emunic_coll_wait(q->c, timeout_ms);
}

/* -ENOSPC only while an earlier call's copies or landing segments are not
 * yet free: retried, within the bound. */
static int im_ialltoall_retry(struct aa_impl *im, const void *sbuf, void *rbuf, size_t block, struct aa_req *q,
			      int timeout_ms)
{
	int64_t deadline = bench_mono_ns() + (int64_t)timeout_ms * 1000000;
	int rc;

	while ((rc = im_ialltoall(im, sbuf, rbuf, block, q)) == -ENOSPC && bench_mono_ns() < deadline)
		;
	return rc;
}

/* post, work for `work` loop iterations, wait. */
static int im_overlapped(struct aa_impl *im, const void *sbuf, void *rbuf, size_t block, uint64_t work,
			 int timeout_ms)
{
	struct aa_req q;
	int rc = im_ialltoall_retry(im, sbuf, rbuf, block, &q, timeout_ms);

	bench_nops(work);
	return rc ? rc : im_wait(im, &q, timeout_ms);
}

/* ---- data ------------------------------------------------------------------ */

/* Byte i of the block rank src sends rank dst: different for every pair. */
static unsigned char expect(const struct bench *b, int src, int dst, size_t i, unsigned seed)
{
	return bench_pattern(i + (size_t)seed * 4099 + ((size_t)src * (size_t)b->size + (size_t)dst) * 1031);
}

/* This rank's send buffer, and its receive buffer poisoned (so stale data
 * cannot pass). */
static void fill(const struct bench *b, unsigned char *sbuf, unsigned char *rbuf, size_t block, unsigned seed)
{
	for (int q = 0; q < b->size; q++)
		for (size_t i = 0; i < block; i++)
			sbuf[(size_t)q * block + i] = expect(b, b->rank, q, i, seed);
	memset(rbuf, AA_POISON, (size_t)b->size * block);
}

static int verify(const struct bench *b, const struct aa_impl *im, const unsigned char *rbuf, size_t block,
		  unsigned seed, const char *what)
{
	size_t bad = 0, first = 0;
	int from = 0;

	for (int q = 0; q < b->size; q++)
		for (size_t i = 0; i < block; i++)
			if (rbuf[(size_t)q * block + i] != expect(b, q, b->rank, i, seed) && !bad++) {
				from = q;
				first = i;
			}
	if (!bad)
		return 0;
	return bench_err(b, -EBADMSG, "%s: WRONG DATA after %s of %zu-byte blocks: byte %zu of rank %d's block is "
			 "0x%02x, not 0x%02x (%zu bytes wrong)", im->name, what, block, first, from,
			 rbuf[(size_t)from * block + first], expect(b, from, b->rank, first, seed), bad);
}

/* Every rank learns whether any failed, so all stop together instead of
 * waiting in an alltoall for a rank that left. */
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

/* Blocking alltoalls, a different pattern each, into the same buffers. */
static int check_blocking(struct bench *b, struct aa_impl *im, unsigned char *sbuf, unsigned char *rbuf, size_t block)
{
	int r = 0;

	for (int k = 0; !r && k < AA_CHECKS; k++) {
		fill(b, sbuf, rbuf, block, (unsigned)k + 1);
		r = im_alltoall(im, sbuf, rbuf, block);
		if (r)
			r = bench_err(b, r, "%s: check: alltoall %d of %d (%zu-byte blocks)", im->name, k + 1, AA_CHECKS,
				      block);
		r = r ? r : verify(b, im, rbuf, block, (unsigned)k + 1, "an alltoall");
	}
	return r;
}

/* Three ialltoalls in flight, each its own buffers and pattern: one waits
 * for the oldest only when refused with -ENOSPC (or, none to wait, retries:
 * earlier calls' copies may still be sending). */
static int check_inflight(struct bench *b, const struct aa_opts *o, struct aa_impl *im, unsigned char **sbuf,
			  unsigned char **rbuf, size_t block)
{
	struct aa_req q[AA_INFLIGHT];
	int posted = 0, waited = 0, r = 0;

	for (int k = 0; !r && k < AA_INFLIGHT; k++) {
		fill(b, sbuf[k], rbuf[k], block, (unsigned)(100 + k));
		r = im_ialltoall(im, sbuf[k], rbuf[k], block, &q[k]);
		while (r == -ENOSPC && waited < posted) {
			r = im_wait(im, &q[waited++], o->timeout_ms);
			r = r ? r : im_ialltoall(im, sbuf[k], rbuf[k], block, &q[k]);
		}
		if (r == -ENOSPC)
			r = im_ialltoall_retry(im, sbuf[k], rbuf[k], block, &q[k], o->timeout_ms);
		if (r)
			r = bench_err(b, r, "%s: check: ialltoall %d of %d in flight", im->name, k + 1, AA_INFLIGHT);
		else
			posted++;
	}
	for (; waited < posted; waited++) {
		int w = im_wait(im, &q[waited], o->timeout_ms);

		if (w && !r)
			r = bench_err(b, w, "%s: check: waiting for ialltoall %d of %d in flight", im->name, waited + 1,
				      AA_INFLIGHT);
	}
	for (int k = 0; !r && k < AA_INFLIGHT; k++)
		r = verify(b, im, rbuf[k], block, (unsigned)(100 + k), "ialltoalls in flight");
	return r;
}

static int check(struct bench *b, const struct aa_opts *o, struct aa_impl *im, size_t block)
{
	size_t len = (size_t)b->size * block + 1;
	unsigned char *sbuf[AA_INFLIGHT], *rbuf[AA_INFLIGHT];
	int r = 0;

	for (int k = 0; k < AA_INFLIGHT; k++) {
		sbuf[k] = malloc(len);
		rbuf[k] = malloc(len);
		if (!sbuf[k] || !rbuf[k])
			r = -ENOMEM;
	}
	if (r)
		r = bench_err(b, r, "check buffers");
	r = r ? r : check_blocking(b, im, sbuf[0], rbuf[0], block);
	r = r ? r : check_inflight(b, o, im, sbuf, rbuf, block);
	for (int k = 0; k < AA_INFLIGHT; k++) {
		free(sbuf[k]);
		free(rbuf[k]);
	}
	return agree(b, r);
}

/* ---- timing ---------------------------------------------------------------- */

static int sync_ranks(struct bench *b)
{
	int r = emunic_boot_barrier(b->boot);

	return r ? bench_err(b, r, "the bootstrap barrier between loops") : 0;
}

/* Mean time of `iters` calls of post + `work` + wait, back to back after a
 * barrier, in ns; samp: each call's.  The first call lands in rbuf[0], the
 * others in rbuf[1]; both are verified once the clock stopped (the first
 * and the last call). */
static int timed(struct bench *b, const struct aa_opts *o, struct aa_impl *im, size_t block, uint64_t work,
		 double *samp, double *mean_ns)
{
	size_t len = (size_t)b->size * block + 1;
	unsigned char *sbuf = malloc(len), *rbuf[2] = { malloc(len), malloc(len) };
	int64_t t0, t1;
	int rc = sbuf && rbuf[0] && rbuf[1] ? 0 : bench_err(b, -ENOMEM, "buffers of %zu bytes", len);

	if (!rc) {
		fill(b, sbuf, rbuf[0], block, 0);
		memset(rbuf[1], AA_POISON, len);
	}
	rc = rc ? rc : sync_ranks(b);
	t0 = t1 = bench_mono_ns();
	for (int i = 0; !rc && i < o->iters; i++) {
		unsigned char *rb = rbuf[i > 0];
		int64_t t = t1;

		rc = work || !samp ? im_overlapped(im, sbuf, rb, block, work, o->timeout_ms)
				   : im_alltoall(im, sbuf, rb, block);
		if (rc)
			rc = bench_err(b, rc, "%s: alltoall %d of %d (%zu-byte blocks)", im->name, i, o->iters, block);
		t1 = bench_mono_ns();
		if (samp)
			samp[i] = (double)(t1 - t) - b->clock_ns;
	}
	*mean_ns = (double)(t1 - t0) / o->iters - b->clock_ns;
	rc = rc ? rc : verify(b, im, rbuf[0], block, 0, "the first call of a loop");
	if (!rc && o->iters > 1)
		rc = verify(b, im, rbuf[1], block, 0, "the last call of a loop");
	free(sbuf);
	free(rbuf[0]);
	free(rbuf[1]);
	return agree(b, rc);
}

/* This rank's figures at one size. */
static int run_size(struct bench *b, const struct aa_opts *o, struct aa_impl *im, size_t block, struct aa_fig *f)
{
	size_t len = (size_t)b->size * block + 1;
	double *samp = calloc((size_t)o->iters, sizeof(double));
	unsigned char *ws = calloc(1, len), *wr = calloc(1, len);
	char sz[16];
	uint64_t work;
	int64_t t0;
	int r = samp && ws && wr ? 0 : bench_err(b, -ENOMEM, "buffers of %zu bytes", len);

	bench_size_str(sz, sizeof(sz), block);
	bench_progress(b, "[%s] %s: check", im->name, sz);
	r = r ? r : check(b, o, im, block);
	bench_progress(b, "[%s] %s: latency", im->name, sz);
	for (int i = 0; !r && i < o->warmup; i++) {
		r = im_alltoall(im, ws, wr, block);
		if (r)
			r = bench_err(b, r, "%s: warm-up alltoall %d of %d (%zu-byte blocks)", im->name, i, o->warmup,
				      block);
	}
	r = r ? r : timed(b, o, im, block, 0, samp, &f->lat);
	if (!r)
		f->p50 = bench_median(samp, o->iters);
	bench_progress(b, "[%s] %s: overlap", im->name, sz);
	r = r ? r : timed(b, o, im, block, 0, NULL, &f->pure);
	work = bench_work_iters(b, f->pure);
	t0 = bench_mono_ns();
	for (int i = 0; !r && i < o->iters; i++)
		bench_nops(work);
	f->compute = (double)(bench_mono_ns() - t0) / o->iters;
	r = r ? r : timed(b, o, im, block, work, NULL, &f->total);
	free(samp);
	free(ws);
	free(wr);
	return r;
}

/* Means over the ranks; the overlap from the mean times, as OSU's. */
static int summarize(struct bench *b, const struct aa_fig *f, struct aa_sum *s)
{
	struct aa_fig *all = calloc((size_t)b->size, sizeof(*all)), m = { 0 };
	int r = all ? emunic_boot_allgather(b->boot, f, sizeof(*f), all) : -ENOMEM;

	*s = (struct aa_sum){ 0 };
	for (int q = 0; !r && q < b->size; q++) {
		m.lat += all[q].lat / b->size;
		m.p50 += all[q].p50 / b->size;
		m.pure += all[q].pure / b->size;
		m.compute += all[q].compute / b->size;
		m.total += all[q].total / b->size;
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

static int measure(struct bench *b, const struct aa_opts *o, struct aa_impl *im, size_t block, struct aa_sum *s)
{
	struct aa_fig f = { 0 };
	char sz[16], m[40];
	int r = run_size(b, o, im, block, &f);

	r = r ? r : summarize(b, &f, s);
	if (r)
		return r;
	bench_size_str(sz, sizeof(sz), block);
	snprintf(m, sizeof(m), "alltoall_latency_%s", sz);
	r = bench_add(b, im->name, m, s->lat / 1e3, "us");
	snprintf(m, sizeof(m), "alltoall_latency_p50_%s", sz);
	r = r ? r : bench_add(b, im->name, m, s->p50 / 1e3, "us");
	snprintf(m, sizeof(m), "ialltoall_overlap_%s", sz);
	return r ? r : bench_add(b, im->name, m, s->overlap, "%");
}

/* ---- report ---------------------------------------------------------------- */

static void report_targets(const struct bench *b, const struct aa_opts *o, struct aa_sum (*fig)[AA_MAX_SIZES])
{
	double lat_limit = b->size == 2 ? 1.15 : 1.0;
	char ctx[96], sz[16];

	printf("\ntargets (reported, never asserted)\n");
	for (int s = 0; s < o->nsizes; s++) {
		char what[64];

		bench_size_str(sz, sizeof(sz), o->sizes[s]);
		snprintf(what, sizeof(what), "alltoall %s mean <= %.2fx ptp (%d ranks)", sz, lat_limit, b->size);
		snprintf(ctx, sizeof(ctx), "median %.2fx", fig[1][s].p50 / fig[0][s].p50);
		bench_target_ratio(what, "mq", fig[1][s].lat / fig[0][s].lat, lat_limit, true, ctx);
		if (o->sizes[s] != AA_OVERLAP_SIZE || b->size != 2)
			continue;
		snprintf(ctx, sizeof(ctx), "ptp %.1f%%", fig[0][s].overlap);
		printf("  %-7s %-42s %-9s %.1f%%; %s\n", fig[1][s].overlap >= 50 ? "met" : "MISSED",
		       "ialltoall 64K overlap >= 50% (2 ranks)", "mq", fig[1][s].overlap, ctx);
		bench_target_ratio("ialltoall 64K overlap >= 2x ptp's (2 ranks)", "mq",
				   fig[0][s].overlap > 0 ? fig[1][s].overlap / fig[0][s].overlap : fig[1][s].overlap > 0 ? 99 : 0,
				   2.0, false, ctx);
	}
}

static void report(const struct bench *b, const struct aa_opts *o, const char *device,
		   struct aa_sum (*fig)[AA_MAX_SIZES])
{
	char sz[16], seg[16];

	bench_size_str(seg, sizeof(seg), o->segment);
	printf("\nemunic-bench alltoall: offloaded (mq, the pairwise exchange on the progress core) vs host-progressed "
	       "(ptp)\n"
	       "  device       %s, %d ranks, segment %s, %d calls a loop, sizes are bytes a peer\n"
	       "  figures      the calls of a loop back to back after a barrier, means over the ranks\n"
	       "  overlap      OSU: 100 x (1 - (t_total - t_compute) / t_pure), work sized to t_pure\n\n",
	       device, b->size, o->segment ? seg : "default", o->iters);
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
	report_targets(b, o, fig);
	bench_write_csv(b, AA_BASELINE);
}

/* ---- options --------------------------------------------------------------- */

static bool add_size(void *ctx, const char *s)
{
	struct aa_opts *o = ctx;
	size_t v = strcmp(s, "0") ? bench_parse_size(s) : 0;

	if ((!v && strcmp(s, "0")) || v > AA_MAX_SIZE || o->nsizes == AA_MAX_SIZES)
		return false;
	o->sizes[o->nsizes++] = v;
	return true;
}

struct aa_parse {
	struct aa_opts *o;
	const char *sizes;
};

static int aa_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct aa_parse *p = ctx;

	if (val == 'k')
		return bench_opt_int(cmd, name, arg, 1, 1000000, "a count in 1..1000000", &p->o->iters);
	if (val == 'w')
		return bench_opt_int(cmd, name, arg, 0, 1000000, "a count in 0..1000000", &p->o->warmup);
	if (val == 's') {
		p->o->segment = bench_parse_size(arg);
		return p->o->segment && p->o->segment <= AA_MAX_SIZE ? 0 :
		       bench_usage_error(cmd, "--%s wants bytes in 1..4M (32K), not '%s'", name, arg);
	}
	p->sizes = arg;
	return 0;
}

int bench_alltoall_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "iters", required_argument, NULL, 'k' }, { "warmup", required_argument, NULL, 'w' },
		{ "sizes", required_argument, NULL, 'z' }, { "segment", required_argument, NULL, 's' }, OPTS_COMMON
	};
	struct aa_opts o = { .iters = 100, .warmup = 10, .timeout_ms = 60000 };
	struct aa_parse p = { .o = &o };
	struct common_opts com = { .timeout_ms = o.timeout_ms };
	struct aa_impl im[2] = { { .name = AA_BASELINE }, { .name = "mq" } };
	struct aa_sum fig[2][AA_MAX_SIZES];
	char device[96] = "?";
	struct bench b = { 0 };
	int r = bench_parse_opts("alltoall", argc, argv, lo, aa_opt, &p, &com);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	if (!bench_each_item(p.sizes ? p.sizes : "8,8K,64K", add_size, &o))
		return bench_usage_error("alltoall", "--sizes wants up to %d block sizes, each 0 to 4M bytes (0, 8, "
					 "8K, 64K), not '%s'", AA_MAX_SIZES, p.sizes);
	o.timeout_ms = com.timeout_ms;
	o.csv = com.csv;
	r = bench_init(&b, "alltoall", o.csv);
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

const char bench_alltoall_help[] =
"  alltoall [OPTIONS]\n"
"    The offloaded all-to-all (mq: the pairwise exchange's steps released by\n"
"    the progress core) against the host-progressed one (ptp: the same steps\n"
"    and segments, moved only inside its calls), at each block size (bytes a\n"
"    rank sends each peer): the latency of blocking calls (mean, median,\n"
"    mq/ptp) and the overlap of a nonblocking one with work as long as its\n"
"    latency, as the OSU benchmarks define it: 100 x (1 - (t_total -\n"
"    t_compute) / t_pure), at least 0.  The calls of a loop run back to back\n"
"    after a bootstrap barrier; figures are means over the ranks.  Before\n"
"    timing, blocking alltoalls and three ialltoalls in flight, and the first\n"
"    and last call of every loop, are checked on every rank: wrong data is an\n"
"    error.  Targets: latency <= 1.15x ptp at 2 ranks, <= 1.0x at more; 64K\n"
"    overlap >= 50% and >= 2x ptp's at 2 ranks.  Any number of ranks.\n"
"\n"
"    --sizes LIST       bytes a peer, 0 to 4M (default 8,8K,64K)\n"
"    --segment BYTES    the segment of both (default 32K, raised and rounded\n"
"                       as the offload's is)\n"
"    --iters K          calls a loop (default 100)\n"
"    --warmup W         calls before the first loop (default 10)\n"
"    --timeout-ms MS    bound on every call (default 60000)\n"
"    --csv FILE         rank 0 writes the results to FILE: impl ptp or mq;\n"
"                       metrics alltoall_latency_S, alltoall_latency_p50_S\n"
"                       (us), ialltoall_overlap_S (%)\n";
