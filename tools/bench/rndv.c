/* SPDX-License-Identifier: MIT */
/*
 * rndv: throughput of the chunked receiver-driven rendezvous (engines/rndv)
 * against one get a message, by message size.  Rank 0 sends, rank 1
 * receives.  Every variant has its own endpoint (emunic_rndv_create,
 * collective), all made first, so that the variants take turns size by size
 * and round by round and drift in the machine's speed (a shared host, TCG)
 * falls on all of them alike.  A size: for each variant one untimed message
 * whose data rank 1 checks; then R rounds, in each of which every variant in
 * turn has K / R receives posted (the expected case), one bootstrap barrier,
 * the sends from rank 0; a round's throughput = its bytes / rank 1's time
 * from posting the first receive to seeing the last complete, and a point's
 * the median of its rounds.  With a slow receiver (--sink-mbps: the
 * receiver's device drains fetched data at that rate), the same again with
 * rank 1's trace on, from which the largest number of one message's gets in
 * flight (EMUNIC_TR_ISSUE to EMUNIC_TR_DONE, grouped by the op's user, the
 * request) is taken.
 */
#include "rv.h"

#include <emunic/rndv.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rv_ngets(const struct rv_opts *o, const struct rv_variant *v, size_t size)
{
	if (size <= o->first)
		return 0;
	return v->chunk == SIZE_MAX ? 1 : (size - o->first + v->chunk - 1) / v->chunk;
}

/* Rank 0's source and rank 1's destination, and what rank 1 expects. */
struct rv_bufs {
	char *buf, *ref;
	size_t len;
};

static int rv_bufs_alloc(struct bench *b, const struct rv_opts *o, struct rv_bufs *bf)
{
	for (int i = 0; i < o->nsizes; i++)
		bf->len = o->sizes[i] > bf->len ? o->sizes[i] : bf->len;
	bf->len = (bf->len + 4095) & ~(size_t)4095;
	bf->buf = aligned_alloc(4096, bf->len);
	bf->ref = b->rank == 1 ? aligned_alloc(4096, bf->len) : bf->buf;
	if (!bf->buf || !bf->ref)
		return bench_err(b, -ENOMEM, "buffers of %zu bytes", bf->len);
	for (size_t i = 0; i < bf->len; i++)
		bf->ref[i] = (char)bench_pattern(i);
	return 0;
}

static void rv_bufs_free(struct rv_bufs *bf)
{
	if (bf->ref != bf->buf)
		free(bf->ref);
	free(bf->buf);
}

/* ---- the trace: gets in flight per message --------------------------------- */

struct inflight {
	uint64_t user;
	int cur, max;
};

/* Reads rank 1's trace since the last read; the largest number of one
 * request's gets between EMUNIC_TR_ISSUE and EMUNIC_TR_DONE at once. */
static int rv_trace_inflight(struct bench *b, struct emunic_dev *dev, struct rv_res *res)
{
	struct emunic_trace_rec rec[512];
	struct inflight *fl = NULL;
	int nfl = 0, cap = 0, n;

	res->max_inflight = 0;
	while ((n = emunic_trace_read(dev, rec, 512)) > 0) {
		for (int i = 0; i < n; i++) {
			struct inflight *f = NULL;

			if (rec[i].op != EMUNIC_OP_GET || (rec[i].what != EMUNIC_TR_ISSUE && rec[i].what != EMUNIC_TR_DONE))
				continue;
			for (int j = 0; j < nfl && !f; j++)
				f = fl[j].user == rec[i].user ? &fl[j] : NULL;
			if (!f) {
				if (nfl == cap) {
					struct inflight *g = realloc(fl, (size_t)(cap = cap ? 2 * cap : 64) * sizeof(*g));

					if (!g) {
						free(fl);
						return bench_err(b, -ENOMEM, "reading the trace");
					}
					fl = g;
				}
				f = &fl[nfl++];
				*f = (struct inflight){ .user = rec[i].user };
			}
			if (rec[i].what == EMUNIC_TR_ISSUE) {
				f->max = ++f->cur > f->max ? f->cur : f->max;
				res->max_inflight = f->max > res->max_inflight ? f->max : res->max_inflight;
			} else if (f->cur > 0) {
				f->cur--;
			}
		}
	}
	free(fl);
	return n < 0 ? bench_err(b, n, "emunic_trace_read") : 0;
}

/* ---- one point ---------------------------------------------------------------- */

static int rv_status(struct bench *b, const char *what, const struct rv_variant *v, size_t size, int r,
		     const struct emunic_status *st)
{
	char sz[24];

	bench_size_str(sz, sizeof(sz), size);
	if (r)
		return bench_err(b, r, "%s %s, %s bytes: emunic_wait", v->name, what, sz);
	if (st->error || st->len != size || st->total != size)
		return bench_err(b, st->error ? st->error : -EIO, "%s %s, %s bytes: completed with error %d, %zu "
				 "bytes delivered of %zu sent (want %zu)", v->name, what, sz, st->error, st->len, st->total,
				 size);
	return 0;
}

/* k messages of size: rank 1 posts the receives first, then both meet in a
 * bootstrap barrier, then rank 0 sends; each side waits for all of them. */
static int rv_batch(struct bench *b, const struct rv_opts *o, struct emunic_rndv *rv, const struct rv_variant *v,
		    struct rv_bufs *bf, size_t size, int k, int tag)
{
	const char *what = tag == RV_TAG_CHECK ? "checked message" : "timed message";
	struct emunic_req **q = calloc((size_t)k, sizeof(*q));
	int r = q ? 0 : bench_err(b, -ENOMEM, "requests"), posted = 0, t;

	for (; b->rank == 1 && posted < k && !r; posted++)
		if ((r = emunic_irecv(rv, bf->buf, size, 0, tag, &q[posted])))
			r = bench_err(b, r, "%s: emunic_irecv (%zu bytes)", v->name, size);
	if ((t = emunic_boot_barrier(b->boot)))
		r = r ? r : bench_err(b, t, "%s: the bootstrap barrier before the sends", v->name);
	for (; b->rank == 0 && posted < k && !r; posted++)
		if ((r = emunic_isend(rv, bf->buf, size, 1, tag, &q[posted])))
			r = bench_err(b, r, "%s: emunic_isend (%zu bytes)", v->name, size);
	for (int i = 0; i < posted; i++) {
		struct emunic_status st;

		t = emunic_wait(q[i], &st, o->timeout_ms);
		t = rv_status(b, b->rank ? what : "send", v, size, t, &st);
		r = r ? r : t;
		/* A request that did not complete stays: the endpoint will
		 * not be destroyed, and the run ends. */
		if (!t && (t = emunic_req_free(q[i])))
			r = r ? r : bench_err(b, t, "%s: emunic_req_free", v->name);
	}
	free(q);
	return r;
}

/* Every batch ends here on both ranks, so a failure on one ends both;
 * *out is rank 1's. */
static int rv_share(struct bench *b, struct rv_res *mine, int r, struct rv_res *out)
{
	struct rv_res all[2];

	mine->err = r != 0;
	if ((r = emunic_boot_allgather(b->boot, mine, sizeof(*mine), all)))
		return bench_err(b, r, "the bootstrap allgather of a batch's result");
	if (all[0].err || all[1].err)
		return -EIO;
	*out = all[1];
	return 0;
}

/* Rank 1: the checked message's data, against the pattern. */
static int rv_verify(struct bench *b, const struct rv_variant *v, const struct rv_bufs *bf, size_t size)
{
	size_t at = 0;

	if (!memcmp(bf->buf, bf->ref, size))
		return 0;
	while (bf->buf[at] == bf->ref[at])
		at++;
	return bench_err(b, -EIO, "%s: %zu-byte message: wrong data from byte %zu on (0x%02x, want 0x%02x)", v->name,
			 size, at, (unsigned char)bf->buf[at], (unsigned char)bf->ref[at]);
}

/* One batch of one variant: the untimed message whose data rank 1 checks,
 * or a timed round.  Rank 1's throughput and receives matched expected;
 * with the trace on, the most gets of one message in flight. */
static int rv_round(struct bench *b, const struct rv_opts *o, struct emunic_dev *dev, struct emunic_rndv *rv,
		    const struct rv_variant *v, struct rv_bufs *bf, size_t size, int k, bool check, bool sink,
		    struct rv_res *out)
{
	struct rv_res mine = { .mbps = -1 };
	struct emunic_rndv_stats s0, s1;
	int64_t t0;
	int r;

	if (check && b->rank == 1)
		memset(bf->buf, 0, size);
	r = emunic_rndv_stats(rv, &s0);
	t0 = bench_mono_ns();
	r = r ? r : rv_batch(b, o, rv, v, bf, size, k, check ? RV_TAG_CHECK : RV_TAG_TIMED);
	if (!r && b->rank == 1) {
		mine.mbps = (double)size * k / ((double)(bench_mono_ns() - t0) / 1e9) / 1e6;
		r = emunic_rndv_stats(rv, &s1);
		mine.expected = (int32_t)(s1.expected - s0.expected);
		if (!r && check)
			r = rv_verify(b, v, bf, size);
		if (!r && sink)
			r = rv_trace_inflight(b, dev, &mine);
	}
	return rv_share(b, &mine, r, out);
}

/* ---- a size, then a pass: every size, on a device of its own ------------------ */

static int rv_record(struct bench *b, const struct rv_opts *o, const struct rv_variant *v, size_t size, bool sink,
		     double *rounds, int n, int inflight)
{
	double mbps = bench_median(rounds, n);
	char m[64], sz[24];
	int r;

	rv_metric(m, sizeof(m), sink ? "sink_throughput" : "throughput", size);
	r = bench_add(b, v->name, m, mbps, "MB/s");
	if (!r && sink) {
		rv_metric(m, sizeof(m), "sink_max_inflight", size);
		r = bench_add(b, v->name, m, inflight, "count");
	}
	bench_size_str(sz, sizeof(sz), size);
	if (sink)
		bench_progress(b, "[sink %u MB/s] %-14s %6s: %.1f MB/s (rounds %.1f .. %.1f), at most %d gets of a "
			       "message in flight", o->sink_mbps, v->name, sz, mbps, rounds[0], rounds[n - 1], inflight);
	else
		bench_progress(b, "%-14s %6s: %.1f MB/s (rounds %.1f .. %.1f)", v->name, sz, mbps, rounds[0],
			       rounds[n - 1]);
	return r;
}

static int rv_size(struct bench *b, const struct rv_opts *o, struct emunic_dev *dev, struct emunic_rndv **rv,
		   struct rv_bufs *bf, size_t size, bool sink, struct rv_info *info)
{
	double mbps[RV_MAX_VARIANTS][RV_MAX_ROUNDS];
	int inflight[RV_MAX_VARIANTS] = { 0 }, rounds, per, r = 0;

	rv_iters(o, size, sink, &rounds, &per);
	/* Round -1: each variant's checked message. */
	for (int k = -1; k < rounds && !r; k++)
		for (int i = 0; i < o->nv && !r; i++) {
			struct rv_res res = { 0 };

			r = rv_round(b, o, dev, rv[i], &o->v[i], bf, size, k < 0 ? 1 : per, k < 0, sink, &res);
			inflight[i] = res.max_inflight > inflight[i] ? res.max_inflight : inflight[i];
			if (k < 0)
				continue;
			mbps[i][k] = res.mbps;
			info->expected += res.expected;
			info->timed += per;
		}
	for (int i = 0; i < o->nv && !r; i++)
		r = rv_record(b, o, &o->v[i], size, sink, mbps[i], rounds, inflight[i]);
	return r;
}

/* Records a trace ring of one batch's gets needs (3 records each, and the
 * credit puts). */
static unsigned rv_trace_entries(const struct rv_opts *o, bool *short_)
{
	uint64_t need = 4096;

	for (int s = 0; s < o->nsizes; s++)
		for (int i = 0; i < o->nv; i++) {
			int rounds, per;
			uint64_t n;

			rv_iters(o, o->sizes[s], true, &rounds, &per);
			n = 3 * (uint64_t)(per > o->nv ? per : o->nv) * (rv_ngets(o, &o->v[i], o->sizes[s]) + 2) + 4096;
			need = n > need ? n : need;
		}
	*short_ = need > (1u << 22);
	return need > (1u << 22) ? 1u << 22 : (unsigned)need;
}

static int rv_pass(struct bench *b, const struct rv_opts *o, bool sink, struct rv_bufs *bf, struct rv_info *info)
{
	struct emunic_rndv *rv[RV_MAX_VARIANTS] = { 0 };
	struct emunic_dev_attr da;
	struct emunic_dev *dev = NULL;
	int r, t;

	emunic_dev_attr_init(&da);
	da.trig_entries = 16384;
	if (sink && b->rank == 1)
		da.sink_mbps = o->sink_mbps;
	if ((r = bench_open_dev(b, &da, &dev, info->device, sizeof(info->device))))
		return r;
	if (sink && b->rank == 1 && (r = emunic_trace_start(dev, rv_trace_entries(o, &info->trace_short))))
		r = bench_err(b, r, "emunic_trace_start");
	for (int i = 0; i < o->nv && !r; i++) {
		struct emunic_rndv_attr ra;

		emunic_rndv_attr_init(&ra);
		ra.chunk = o->v[i].chunk;
		ra.credits = o->v[i].credits;
		ra.connect_timeout_ms = o->timeout_ms;
		if ((r = emunic_rndv_create(dev, &ra, &rv[i])))
			r = bench_err(b, r, "%s: emunic_rndv_create", o->v[i].name);
	}
	for (int s = 0; s < o->nsizes && !r; s++)
		r = rv_size(b, o, dev, rv, bf, o->sizes[s], sink, info);
	/* After a failure requests may be live: leave the endpoints. */
	for (int i = 0; i < o->nv && !r; i++)
		if ((r = emunic_rndv_destroy(rv[i])))
			r = bench_err(b, r, "%s: emunic_rndv_destroy", o->v[i].name);
	if (!r && (t = emunic_dev_close(dev)))
		r = bench_err(b, t, "emunic_dev_close");
	return r;
}

/* ---- options -------------------------------------------------------------------- */

const char bench_rndv_help[] =
"  rndv [OPTIONS]  (2 ranks)\n"
"    Throughput of the chunked receiver-driven rendezvous against one get a\n"
"    message, by message size.  Rank 0 sends, rank 1 receives.  Every\n"
"    variant has an endpoint; they take turns size by size and round by\n"
"    round.  A size: for each variant one untimed message whose data is\n"
"    checked; then R rounds, in each every variant in turn has K / R\n"
"    receives posted (the expected case), one bootstrap barrier, the sends;\n"
"    a round's throughput = its bytes / rank 1's time from posting the first\n"
"    receive to the last completion, in MB/s (10^6 bytes/s); a point's, the\n"
"    median of its rounds.\n"
"    One table: a row a size, a column a variant, and chunked / single for\n"
"    each chunked one; ratios below the target (0.9x at >= 1 MiB) are\n"
"    marked.  With a slow receiver (--sink-mbps), a second pass with rank\n"
"    1's device draining fetched data at M MB/s and its trace on: the\n"
"    throughput achieved and the most gets of one message in flight at\n"
"    once (single: 1; chunked: at most c).\n"
"\n"
"    --sizes LIST       message sizes, bytes with an optional K, M or G\n"
"                       (default 4K,16K,64K,256K,1M,4M,16M; at most 256M)\n"
"    --chunks LIST      chunked variants s/c: gets of s bytes (a power of\n"
"                       two), at most c in flight (default\n"
"                       64K/2,64K/4,256K/4,1M/2); single always runs\n"
"    --iters K          messages per point (default 64 MiB / size within\n"
"                       [5, 50]; with a slow receiver 16 MiB / size within\n"
"                       [3, 10]); at most 200\n"
"    --rounds R         rounds a point (default 3, at most K)\n"
"    --sink-mbps M      also run with a slow receiver of M MB/s (default\n"
"                       $EMUNIC_SINK_MBPS, else not; the first pass is\n"
"                       always unthrottled)\n"
"    --timeout-ms MS    bound on every connect and wait (default 120000)\n"
"    --quick            a short run, for tests: sizes 64K,1M,4M, 3\n"
"                       messages a point (3 rounds), variants single and\n"
"                       64K/4\n"
"    --csv FILE         rank 0 writes every result to FILE (see CSV)\n";

static void rv_variant_set(struct rv_variant *v, size_t chunk, unsigned credits)
{
	char sz[24];

	v->chunk = chunk;
	v->credits = credits;
	if (chunk == SIZE_MAX) {
		snprintf(v->name, sizeof(v->name), "single");
	} else {
		bench_size_str(sz, sizeof(sz), chunk);
		snprintf(v->name, sizeof(v->name), "chunked-%s/%u", sz, credits);
	}
	v->label = chunk == SIZE_MAX ? v->name : v->name + strlen("chunked-");
}

static bool add_size(void *ctx, const char *s)
{
	struct rv_opts *o = ctx;
	size_t v = bench_parse_size(s);

	if (!v || o->nsizes == RV_MAX_SIZES)
		return false;
	o->sizes[o->nsizes++] = v;
	return true;
}

static bool add_variant(void *ctx, const char *s)
{
	struct rv_opts *o = ctx;
	const char *slash = strchr(s, '/');
	char sz[32];
	size_t chunk;
	int credits;

	if (!slash || slash == s || (size_t)(slash - s) >= sizeof(sz) || o->nv == RV_MAX_VARIANTS)
		return false;
	memcpy(sz, s, (size_t)(slash - s));
	sz[slash - s] = 0;
	chunk = bench_parse_size(sz);
	if (!chunk || (chunk & (chunk - 1)) || !bench_parse_int(slash + 1, 1, 4096, &credits))
		return false;
	rv_variant_set(&o->v[o->nv++], chunk, (unsigned)credits);
	return true;
}

/* The engine fetches at most 65536 chunks of a message. */
static int rv_check(const struct rv_opts *o)
{
	for (int i = 1; i < o->nv; i++)
		for (int s = 0; s < o->nsizes; s++)
			if (rv_ngets(o, &o->v[i], o->sizes[s]) > 65536)
				return bench_usage_error("rndv",
							 "%s: a %zu-byte message would take more than 65536 gets",
							 o->v[i].label, o->sizes[s]);
	return 0;
}

struct rndv_parse {
	struct rv_opts *o;
	const char *sizes, *chunks;
	int mbps;
};

static int rndv_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct rndv_parse *p = ctx;

	switch (val) {
	case 's':
		p->sizes = arg;
		return 0;
	case 'c':
		p->chunks = arg;
		return 0;
	case 'k':
		return bench_opt_int(cmd, name, arg, 1, RV_MAX_ITERS, "1..200", &p->o->iters);
	case 'r':
		return bench_opt_int(cmd, name, arg, 1, RV_MAX_ROUNDS, "1..50", &p->o->rounds);
	case 'S':
		return bench_opt_int(cmd, name, arg, 1, 1000000, "a rate in MB/s >= 1", &p->mbps);
	}
	return 0;
}

/* 0, EXIT_USAGE, or BENCH_HELP for --help. */
static int rndv_parse(int argc, char **argv, struct rv_opts *o)
{
	static const struct option lo[] = {
		{ "sizes", required_argument, NULL, 's' }, { "chunks", required_argument, NULL, 'c' },
		{ "iters", required_argument, NULL, 'k' }, { "sink-mbps", required_argument, NULL, 'S' },
		{ "rounds", required_argument, NULL, 'r' }, OPT_QUICK, OPTS_COMMON
	};
	struct rndv_parse p = { .o = o, .mbps = -1 };
	struct common_opts com = { .timeout_ms = o->timeout_ms };
	const char *env = getenv("EMUNIC_SINK_MBPS");
	int r = bench_parse_opts("rndv", argc, argv, lo, rndv_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	if (!bench_each_item(p.sizes ? p.sizes : com.quick ? "64K,1M,4M" : "4K,16K,64K,256K,1M,4M,16M", add_size, o))
		return bench_usage_error("rndv", "--sizes wants up to %d sizes (bytes, K, M or G; 1 .. 256M), not '%s'",
					 RV_MAX_SIZES, p.sizes);
	rv_variant_set(&o->v[o->nv++], SIZE_MAX, 1);
	if (!bench_each_item(p.chunks ? p.chunks : com.quick ? "64K/4" : "64K/2,64K/4,256K/4,1M/2", add_variant, o))
		return bench_usage_error("rndv", "--chunks wants up to %d s/c pairs (s a power of two, c 1..4096), "
					 "not '%s'", RV_MAX_VARIANTS - 1, p.chunks);
	if (!o->iters && com.quick)
		o->iters = 3;
	o->sink_from = "--sink-mbps";
	if (p.mbps < 0 && env && *env) {
		if (!bench_parse_int(env, 0, 1000000, &p.mbps))
			return bench_usage_error("rndv", "EMUNIC_SINK_MBPS wants a rate in MB/s, not '%s'", env);
		o->sink_from = "EMUNIC_SINK_MBPS";
	}
	o->sink_mbps = p.mbps > 0 ? (unsigned)p.mbps : 0;
	/* The first pass is unthrottled: the device must not take it from
	 * the environment. */
	unsetenv("EMUNIC_SINK_MBPS");
	return rv_check(o);
}

int bench_rndv_main(int argc, char **argv)
{
	struct rv_opts o = { .timeout_ms = 120000, .rounds = 3 };
	struct rv_info info = { .device = "?" };
	struct rv_bufs bf = { 0 };
	struct emunic_rndv_attr ra;
	struct bench b = { 0 };
	int r;

	emunic_rndv_attr_init(&ra);
	o.first = ra.first;
	r = rndv_parse(argc, argv, &o);
	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	r = bench_init(&b, "rndv", o.csv);
	r = r ? r : bench_two_ranks(&b);
	r = r ? r : rv_bufs_alloc(&b, &o, &bf);
	if (!r)
		bench_progress(&b, "%d sizes x %d variants%s", o.nsizes, o.nv, o.sink_mbps ? ", then a slow receiver" : "");
	r = r ? r : rv_pass(&b, &o, false, &bf, &info);
	if (!r && o.sink_mbps)
		r = rv_pass(&b, &o, true, &bf, &info);
	if (!r)
		rv_report(&b, &o, &info);
	rv_bufs_free(&bf);
	return bench_fini(&b, r);
}
