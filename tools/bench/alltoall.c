/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench alltoall: the offloaded all-to-all (mq: emunic_alltoall, the
 * pairwise exchange's steps released one by one by the progress core)
 * against the host-progressed one (ptp: baseline/ptp_exchange.c, the same
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
 * coll.c runs it all; here are the calls, the check, the timed loop and
 * the report's head.
 */
#include "bench.h"

#include <emunic/coll.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define AA_INFLIGHT 3		/* both implementations' bound */
#define AA_CHECKS 2		/* blocking alltoalls of the check */
#define AA_POISON 0x5a		/* a receive buffer before a checked call */

static int im_alltoall(struct coll_impl *im, const void *sbuf, void *rbuf, size_t block)
{
	struct emunic_coll_call c = { .sbuf = sbuf, .rbuf = rbuf, .count = block };

	return im->ops->call(im->h, &c);
}

/* -ENOSPC only while an earlier call's copies or landing segments are not
 * yet free: retried until timeout_ms (0: one try). */
static int im_ialltoall(struct coll_impl *im, const void *sbuf, void *rbuf, size_t block, void **q, int timeout_ms)
{
	struct emunic_coll_call c = { .sbuf = sbuf, .rbuf = rbuf, .count = block };

	*q = NULL;
	return bench_coll_start(im, &c, q, timeout_ms);
}

static int im_wait(struct coll_impl *im, void **q, int timeout_ms)
{
	return im->ops->wait(*q, timeout_ms);
}

/* post, work for `work` loop iterations, wait. */
static int im_overlapped(struct coll_impl *im, const void *sbuf, void *rbuf, size_t block, uint64_t work,
			 int timeout_ms)
{
	void *q;
	int rc = im_ialltoall(im, sbuf, rbuf, block, &q, timeout_ms);

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

static int verify(const struct bench *b, const struct coll_impl *im, const unsigned char *rbuf, size_t block,
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

/* ---- the check ------------------------------------------------------------- */

/* Blocking alltoalls, a different pattern each, into the same buffers. */
static int check_blocking(struct bench *b, struct coll_impl *im, unsigned char *sbuf, unsigned char *rbuf, size_t block)
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
static int check_inflight(struct bench *b, const struct coll_opts *o, struct coll_impl *im, unsigned char **sbuf,
			  unsigned char **rbuf, size_t block)
{
	void *q[AA_INFLIGHT];
	int posted = 0, waited = 0, r = 0;

	for (int k = 0; !r && k < AA_INFLIGHT; k++) {
		fill(b, sbuf[k], rbuf[k], block, (unsigned)(100 + k));
		r = im_ialltoall(im, sbuf[k], rbuf[k], block, &q[k], 0);
		while (r == -ENOSPC && waited < posted) {
			r = im_wait(im, &q[waited++], o->timeout_ms);
			r = r ? r : im_ialltoall(im, sbuf[k], rbuf[k], block, &q[k], 0);
		}
		if (r == -ENOSPC)
			r = im_ialltoall(im, sbuf[k], rbuf[k], block, &q[k], o->timeout_ms);
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

static int check(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t block)
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
	return bench_coll_agree(b, r);
}

/* ---- timing ---------------------------------------------------------------- */

/* Mean time of `iters` calls of post + `work` + wait, back to back after a
 * barrier, in ns; samp: each call's.  The first call lands in rbuf[0], the
 * others in rbuf[1]; both are verified once the clock stopped (the first
 * and the last call). */
static int timed(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t block, uint64_t work,
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
	rc = rc ? rc : bench_coll_sync(b, "between loops");
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
	return bench_coll_agree(b, rc);
}

static int warmup(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t block)
{
	size_t len = (size_t)b->size * block + 1;
	unsigned char *ws = calloc(1, len), *wr = calloc(1, len);
	int r = ws && wr ? 0 : bench_err(b, -ENOMEM, "buffers of %zu bytes", len);

	for (int i = 0; !r && i < o->warmup; i++) {
		r = im_alltoall(im, ws, wr, block);
		if (r)
			r = bench_err(b, r, "%s: warm-up alltoall %d of %d (%zu-byte blocks)", im->name, i, o->warmup,
				      block);
	}
	free(ws);
	free(wr);
	return r;
}

/* ---- report ---------------------------------------------------------------- */

static void report_head(const struct bench *b, const struct coll_opts *o, const char *device)
{
	char seg[16];

	bench_size_str(seg, sizeof(seg), o->segment);
	printf("\nemunic-bench alltoall: offloaded (mq, the pairwise exchange on the progress core) vs host-progressed "
	       "(ptp)\n"
	       "  device       %s, %d ranks, segment %s, %d calls a loop, sizes are bytes a peer\n"
	       "  figures      the calls of a loop back to back after a barrier, means over the ranks\n"
	       "  overlap      OSU: 100 x (1 - (t_total - t_compute) / t_pure), work sized to t_pure\n\n",
	       device, b->size, o->segment ? seg : "default", o->iters);
}

static const struct coll_bench alltoall_bench = {
	.ops = &emunic_alltoall_ops,
	COLL_BLOCK_BENCH,
	.check = check,
	.warmup = warmup,
	.timed = timed,
	.report_head = report_head,
};

int bench_alltoall_main(int argc, char **argv)
{
	return bench_coll_main(&alltoall_bench, argc, argv);
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
