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
 * coll.c runs it all; here are the calls, the check, the timed loop and
 * the report's head.
 */
#include "bench.h"

#include <emunic/coll.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BC_ROOT 0
#define BC_INFLIGHT 3		/* both implementations' bound */
#define BC_POISON 0x5a		/* a non-root's buffer before a checked call */

static int im_bcast(struct coll_impl *im, void *buf, size_t bytes, int root)
{
	struct emunic_coll_call c = { .rbuf = buf, .count = bytes, .root = root };

	return im->ops->call(im->h, &c);
}

static int im_wait(struct coll_impl *im, void **q, int timeout_ms)
{
	return im->ops->wait(*q, timeout_ms);
}

/* -ENOSPC only while an earlier call's sends are not yet complete (the
 * root's copies): retried until timeout_ms (0: one try). */
static int im_ibcast(struct coll_impl *im, void *buf, size_t bytes, int root, void **q, int timeout_ms)
{
	struct emunic_coll_call c = { .rbuf = buf, .count = bytes, .root = root };

	*q = NULL;
	return bench_coll_start(im, &c, q, timeout_ms);
}

/* post, work for `work` loop iterations, wait. */
static int im_overlapped(struct coll_impl *im, void *buf, size_t bytes, uint64_t work, int timeout_ms)
{
	void *q;
	int rc = im_ibcast(im, buf, bytes, BC_ROOT, &q, timeout_ms);

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

static int verify(const struct bench *b, const struct coll_impl *im, const unsigned char *buf, size_t bytes, int root,
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

/* ---- the check ------------------------------------------------------------- */

/* A blocking bcast from every root. */
static int check_roots(struct bench *b, struct coll_impl *im, unsigned char *buf, size_t bytes)
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
static int check_inflight(struct bench *b, const struct coll_opts *o, struct coll_impl *im, unsigned char **buf,
			  size_t bytes)
{
	void *q[BC_INFLIGHT];
	int posted = 0, waited = 0, r = 0;

	for (int k = 0; !r && k < BC_INFLIGHT; k++) {
		int root = (b->size - 1 + k) % b->size;

		fill(b, buf[k], bytes, root, (unsigned)(100 + k));
		r = im_ibcast(im, buf[k], bytes, root, &q[k], 0);
		while (r == -ENOSPC && waited < posted) {
			r = im_wait(im, &q[waited++], o->timeout_ms);
			r = r ? r : im_ibcast(im, buf[k], bytes, root, &q[k], 0);
		}
		if (r == -ENOSPC)
			r = im_ibcast(im, buf[k], bytes, root, &q[k], o->timeout_ms);
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

static int check(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t bytes)
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
	return bench_coll_agree(b, r);
}

/* ---- timing ---------------------------------------------------------------- */

/* The first and the last call of a loop deliver the data. */
static int check_call(const struct bench *b, const struct coll_impl *im, unsigned char *buf, size_t bytes, int i,
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
static int timed(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t bytes, uint64_t work,
		 double *samp, double *mean_ns)
{
	unsigned char *buf = malloc(bytes + 1);
	double sum = 0;
	int rc = buf ? 0 : -ENOMEM;

	if (buf)
		fill(b, buf, bytes, BC_ROOT, 0);
	for (int i = 0; !rc && i < o->iters; i++) {
		int64_t t;

		rc = bench_coll_sync(b, "between calls");
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
	return bench_coll_agree(b, rc);
}

static int warmup(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t bytes)
{
	unsigned char *w = calloc(1, bytes + 1);
	int r = w ? 0 : bench_err(b, -ENOMEM, "a buffer of %zu bytes", bytes + 1);

	for (int i = 0; !r && i < o->warmup; i++)
		r = im_bcast(im, w, bytes, BC_ROOT);
	free(w);
	return r;
}

/* ---- report ---------------------------------------------------------------- */

static void report_head(const struct bench *b, const struct coll_opts *o, const char *device)
{
	char seg[16];

	bench_size_str(seg, sizeof(seg), o->segment);
	printf("\nemunic-bench bcast: offloaded (mq, the tree on the progress core) vs host-progressed (ptp)\n"
	       "  device       %s, %d ranks, root %d, segment %s, %d calls a loop\n"
	       "  figures      each call timed alone between barriers, means over the ranks (OSU)\n"
	       "  overlap      OSU: 100 x (1 - (t_total - t_compute) / t_pure), work sized to t_pure\n\n",
	       device, b->size, BC_ROOT, o->segment ? seg : "default", o->iters);
}

static const struct coll_bench bcast_bench = {
	.ops = &emunic_bcast_ops,
	.max_what = "max",
	.iters = 100,
	.sizes = "8,8K,64K,1M",
	.sizes_wants = "sizes, each 0 to 16M bytes (0, 8, 8K, 1M)",
	.max_size = (size_t)16 << 20,
	.align = 1,
	.zero = true,
	.segment = true,
	.means = true,
	.slowest = true,
	.overlap_size = 8192,
	.check = check,
	.warmup = warmup,
	.timed = timed,
	.report_head = report_head,
};

int bench_bcast_main(int argc, char **argv)
{
	return bench_coll_main(&bcast_bench, argc, argv);
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
