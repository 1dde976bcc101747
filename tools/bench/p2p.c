/* SPDX-License-Identifier: MIT */
/*
 * p2p: seed 000 figs. 4-5.  A ping-pong between ranks 0 and 1 through the
 * point-to-point engine (engines/rndv): the receiver-initiated rendezvous
 * (EMUNIC_RNDV_RTR) under each progress scheme, and the chunked one under
 * the progress core; against a host-progressed ping-pong over the same verbs
 * (host: baseline/ptp_pingpong.c, SEND/RECV the app posts and polls).
 *
 * An iteration, as seed 000's "nbov" loop has it (test, never wait):
 *   rank 0  isend(ping), irecv(pong), then emunic_test on whichever is not
 *           done yet, in turn, until both are;
 *   rank 1  emunic_test on its receive (posted an iteration ahead, so it is
 *           there before the ping can be) until done, irecv(next ping),
 *           isend(pong), emunic_test on the send until done.
 * host does the same with the shim's post_send / post_recv / one poll_cq a
 * test, except that rank 0 posts its receive before its send: a SEND that
 * finds no receive is an RNR NAK and a retry 0.64 ms later, which would
 * measure the retry timer, not the host.
 * A point (size, impl): W warm-up iterations (the first checks the data
 * both ways), K iterations with each call timed (the overhead: time inside
 * isend, irecv and test), K timed only as a whole (the latency: half the
 * round trip).  Rank 0's medians.  Sizes take turns impl by impl; the host
 * runs first, with no emunic device open (its progress core would compete).
 */
#include "pp.h"
#include "baseline/ptp.h"

#include <emunic/rndv.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PP_MAX_SIZE ((size_t)64 << 20)
#define PP_MAX_EAGER 65536		/* 64 slots of it fit the engine's 4 MiB ring */
#define PP_TAG 9
#define PP_POLL_CHECK 256		/* test calls between looks at the clock */

/* What one ping-pong run needs: the impl, its buffers and the peer. */
struct pp_run {
	struct bench *b;
	const struct pp_opts *o;
	struct pp_impl *im;
	struct emunic_ptp_pp *host;	/* host */
	char *sbuf, *rbuf, *ref;	/* ref: the pattern every message carries */
	size_t size;
	int peer;
	bool check;			/* this iteration checks the data received */
	struct emunic_dev *dev;		/* the engine's (NULL: host) */
};

/* A request of either kind behind one face. */
struct pp_req {
	struct emunic_req *q;
	uint64_t ticket;		/* host */
	bool recv, live, done;
};

/* One iteration on this rank: ns inside the calls, and test calls. */
struct pp_sample {
	double isend, irecv, test;
	int tests;
};

static int64_t pp_clock(bool timed)
{
	return timed ? bench_mono_ns() : 0;
}

/* ns since t0, less the clock read the measurement itself costs. */
static double pp_since(const struct pp_run *x, int64_t t0, bool timed)
{
	double d;

	if (!timed)
		return 0;
	d = (double)(bench_mono_ns() - t0) - x->b->clock_ns;
	return d > 0 ? d : 0;
}

static int pp_isend(struct pp_run *x, struct pp_req *rq)
{
	int r;

	*rq = (struct pp_req){ .live = true };
	if (x->im->host)
		r = emunic_ptp_pp_isend(x->host, x->peer, x->size, &rq->ticket);
	else
		r = emunic_isend(x->im->rv, x->sbuf, x->size, x->peer, PP_TAG, &rq->q);
	rq->live = !r;
	return r ? bench_err(x->b, r, "%s: %zu bytes: %s", x->im->name, x->size,
			     x->im->host ? "emunic_ptp_pp_isend" : "emunic_isend") : 0;
}

static int pp_irecv(struct pp_run *x, struct pp_req *rq)
{
	int r;

	*rq = (struct pp_req){ .recv = true, .live = true };
	if (x->im->host)
		r = emunic_ptp_pp_irecv(x->host, x->peer, &rq->ticket);
	else
		r = emunic_irecv(x->im->rv, x->rbuf, x->size, x->peer, PP_TAG, &rq->q);
	rq->live = !r;
	return r ? bench_err(x->b, r, "%s: %zu bytes: %s", x->im->name, x->size,
			     x->im->host ? "emunic_ptp_pp_irecv" : "emunic_irecv") : 0;
}

/* A completed receive: the whole message, and (when checking) the right bytes. */
static int pp_received(struct pp_run *x, int error, size_t len, size_t total)
{
	size_t at = 0;

	if (error || len != x->size || total != x->size)
		return bench_err(x->b, error ? error : -EIO, "%s: a %zu-byte message completed with error %d, %zu "
				 "bytes delivered of %zu sent", x->im->name, x->size, error, len, total);
	if (!x->check || !memcmp(x->rbuf, x->ref, x->size))
		return 0;
	while (x->rbuf[at] == x->ref[at])
		at++;
	return bench_err(x->b, -EIO, "%s: %zu-byte message: wrong data from byte %zu on (0x%02x, want 0x%02x)",
			 x->im->name, x->size, at, (unsigned char)x->rbuf[at], (unsigned char)x->ref[at]);
}

/* One test call: rq->done once complete (and checked, for a receive). */
static int pp_test(struct pp_run *x, struct pp_req *rq)
{
	struct emunic_status st;
	int done = 0, r;

	if (x->im->host) {
		r = emunic_ptp_pp_test(x->host, rq->ticket);
		if (r < 0)
			return bench_err(x->b, r, "%s: %zu bytes: emunic_ptp_pp_test", x->im->name, x->size);
		rq->done = r > 0;
		if (rq->done && rq->recv) {
			size_t got = emunic_ptp_pp_last_len(x->host);

			return pp_received(x, 0, got, got);
		}
		return 0;
	}
	r = emunic_test(rq->q, &done, &st);
	if (r)
		return bench_err(x->b, r, "%s: %zu bytes: emunic_test", x->im->name, x->size);
	rq->done = done;
	if (done && rq->recv)
		return pp_received(x, st.error, st.len, st.total);
	if (done && st.error)
		return bench_err(x->b, st.error, "%s: a %zu-byte send completed with an error", x->im->name, x->size);
	return 0;
}

static int pp_release(struct pp_run *x, struct pp_req *rq)
{
	int r = 0;

	if (rq->live && !x->im->host && (r = emunic_req_free(rq->q)))
		r = bench_err(x->b, r, "%s: emunic_req_free", x->im->name);
	rq->live = false;
	return r;
}

/* Tests a and b (when given) in turn, as MPI_Testall looks at each, until
 * both are done, timing each call when timed; bounded by the timeout,
 * looked at now and then (a clock read is not free). */
static int pp_complete(struct pp_run *x, struct pp_req *a, struct pp_req *b, struct pp_sample *s, bool timed)
{
	int64_t deadline = bench_mono_ns() + (int64_t)x->o->timeout_ms * 1000000;
	struct pp_req *each[2] = { a, b };
	unsigned n = 0;
	int r = 0;

	while (!r && !(a->done && (!b || b->done))) {
		for (int i = 0; i < 2 && !r; i++) {
			int64_t t;

			if (!each[i] || each[i]->done)
				continue;
			t = pp_clock(timed);
			r = pp_test(x, each[i]);
			s->test += pp_since(x, t, timed);
			s->tests++;
		}
		if (!r && ++n % PP_POLL_CHECK == 0 && bench_mono_ns() > deadline)
			r = bench_err(x->b, -ETIMEDOUT, "%s: %zu bytes: not complete after %d ms of tests", x->im->name,
				      x->size, x->o->timeout_ms);
	}
	return r;
}

/* Rank 0: the ping out, the pong back. */
static int pp_iter_ping(struct pp_run *x, struct pp_sample *s, bool timed)
{
	struct pp_req sq = { 0 }, rq = { 0 };
	int64_t t;
	int r;

	/* host: its receive first (no RNR); the engine's, after the send. */
	if (x->im->host) {
		t = pp_clock(timed);
		if ((r = pp_irecv(x, &rq)))
			return r;
		s->irecv = pp_since(x, t, timed);
	}
	t = pp_clock(timed);
	r = pp_isend(x, &sq);
	s->isend = pp_since(x, t, timed);
	if (!r && !x->im->host) {
		t = pp_clock(timed);
		r = pp_irecv(x, &rq);
		s->irecv = pp_since(x, t, timed);
	}
	r = r ? r : pp_complete(x, &sq, &rq, s, timed);
	if (!r)
		r = pp_release(x, &sq);
	return r ? r : pp_release(x, &rq);
}

/* Rank 1: the ping in (its receive posted before), the next receive, the pong. */
static int pp_iter_pong(struct pp_run *x, struct pp_req *next, bool more, struct pp_sample *s, bool timed)
{
	struct pp_req sq = { 0 };
	int64_t t;
	int r = pp_complete(x, next, NULL, s, timed);

	r = r ? r : pp_release(x, next);
	if (!r && more) {
		t = pp_clock(timed);
		r = pp_irecv(x, next);
		s->irecv = pp_since(x, t, timed);
	}
	if (!r) {
		t = pp_clock(timed);
		r = pp_isend(x, &sq);
		s->isend = pp_since(x, t, timed);
	}
	r = r ? r : pp_complete(x, &sq, NULL, s, timed);
	return r ? r : pp_release(x, &sq);
}

/* k iterations: per-call times into s[] (timed), or each iteration's
 * wall time into wall[] (rank 0's latency pass), or neither (warm-up). */
static int pp_pass(struct pp_run *x, int k, struct pp_sample *s, double *wall, bool check)
{
	struct pp_req next = { 0 };
	int64_t t1;
	int r = 0;

	if (k <= 0)
		return 0;
	if (check)
		memset(x->rbuf, 0, x->size);
	/* Rank 1's first receive is up before rank 0 may send. */
	if (x->b->rank == 1)
		r = pp_irecv(x, &next);
	if (emunic_boot_barrier(x->b->boot) && !r)
		r = bench_err(x->b, -EIO, "%s: the bootstrap barrier before a pass", x->im->name);
	t1 = bench_mono_ns();
	for (int i = 0; i < k && !r; i++) {
		struct pp_sample dummy, *si = s ? &s[i] : &dummy;
		int64_t t0 = t1;

		*si = (struct pp_sample){ 0 };
		x->check = check && i == 0;
		if (x->b->rank == 0)
			r = pp_iter_ping(x, si, s != NULL);
		else
			r = pp_iter_pong(x, &next, i + 1 < k, si, s != NULL);
		t1 = bench_mono_ns();
		if (wall)
			wall[i] = (double)(t1 - t0) - x->b->clock_ns;
	}
	x->check = false;
	return r;
}

/* Rank 0's medians of a point. */
static int pp_record(struct bench *b, const struct pp_opts *o, const struct pp_impl *im, size_t size,
		     const struct pp_sample *s, double *wall, int k)
{
	static const char *const name[4] = { "isend", "irecv", "test", "tests" };
	double *v = malloc((size_t)k * sizeof(*v)), med[4] = { 0 }, lat;
	int r = v ? 0 : bench_err(b, -ENOMEM, "samples");
	char sz[24];

	for (int j = 0; j < 4 && !r; j++) {
		for (int i = 0; i < k; i++)
			v[i] = j == 0 ? s[i].isend / 1e3 : j == 1 ? s[i].irecv / 1e3 :
			       j == 2 ? (s[i].tests ? s[i].test / s[i].tests / 1e3 : 0) : s[i].tests;
		med[j] = bench_median(v, k);
		r = pp_add(b, im->name, name[j], size, med[j], j == 3 ? "count" : "us");
	}
	lat = bench_median(wall, k) / 2 / 1e3;
	r = r ? r : pp_add(b, im->name, "latency", size, lat, "us");
	/* bench_median() sorted wall: the fastest round trip, for when iterations
	 * fall into a fast and a slow mode (a vCPU waiting for a tick). */
	r = r ? r : pp_add(b, im->name, "latency_min", size, wall[0] / 2 / 1e3, "us");
	if (!r && size > o->eager)
		r = pp_add(b, im->name, "bandwidth", size, lat > 0 ? (double)size / lat : -1, "MB/s");
	free(v);
	bench_size_str(sz, sizeof(sz), size);
	if (!r)
		bench_progress(b, "%-17s %6s: latency %.1f us; isend %.1f us, irecv %.1f us, %.0f tests of %.2f us", im->name,
			       sz, lat, med[0], med[1], med[3], med[2]);
	return r;
}

static int pp_stats(struct pp_run *x, struct emunic_dev_stats *st)
{
	int r = emunic_dev_stats(x->dev, st);

	return r ? bench_err(x->b, r, "emunic_dev_stats") : 0;
}

/* One point on both ranks: warm-up, overhead, latency; rank 0 records. */
static int pp_point(struct pp_run *x, size_t size)
{
	struct emunic_dev_stats st0, st1;
	int k = pp_iters(x->o, size), r;
	struct pp_sample *s = calloc((size_t)k, sizeof(*s));
	double *wall = calloc((size_t)k, sizeof(*wall));

	x->size = size;
	r = s && wall ? 0 : bench_err(x->b, -ENOMEM, "samples");
	r = r ? r : pp_pass(x, x->o->warmup, NULL, NULL, true);
	r = r ? r : pp_pass(x, k, s, NULL, false);
	if (!r && x->dev)
		r = pp_stats(x, &st0);
	r = r ? r : pp_pass(x, k, NULL, wall, false);
	if (!r && x->dev)
		r = pp_stats(x, &st1);
	if (!r && x->b->rank == 0)
		r = pp_record(x->b, x->o, x->im, size, s, wall, k);
	/* Who ran the engine in the latency pass, an iteration: test calls
	 * (emunic_dev_progress), the core; and how often the core woke. */
	if (!r && x->dev && x->b->rank == 0) {
		r = pp_add(x->b, x->im->name, "test_passes", size,
			   (double)(st1.progress_passes - st0.progress_passes) / k, "count");
		r = r ? r : pp_add(x->b, x->im->name, "core_passes", size,
				   (double)(st1.core_passes - st0.core_passes) / k, "count");
		r = r ? r : pp_add(x->b, x->im->name, "core_wakes", size,
				   (double)(st1.core_wakes - st0.core_wakes) / k, "count");
	}
	free(s);
	free(wall);
	return r;
}

/* Every rank sends and checks the same pattern. */
static void pp_fill(char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)bench_pattern(i);
}

static size_t pp_max_size(const struct pp_opts *o)
{
	size_t m = 0;

	for (int i = 0; i < o->nsizes; i++)
		m = o->sizes[i] > m ? o->sizes[i] : m;
	return m;
}

/* The host ping-pong at every size, on its own device and mesh. */
static int pp_host_pass(struct bench *b, const struct pp_opts *o, struct pp_impl *im, char *ref)
{
	struct pp_run x = { .b = b, .o = o, .im = im, .ref = ref, .peer = 1 - b->rank };
	int r = emunic_ptp_pp_create(b->boot, pp_max_size(o), o->timeout_ms, &x.host), t;

	if (r)
		return bench_err(b, r, "host: emunic_ptp_pp_create");
	x.sbuf = emunic_ptp_pp_sendbuf(x.host);
	x.rbuf = emunic_ptp_pp_recvbuf(x.host);
	memcpy(x.sbuf, ref, pp_max_size(o));
	bench_progress(b, "[host] connected (SEND/RECV, buffers registered once)");
	for (int i = 0; i < o->nsizes && !r; i++)
		r = pp_point(&x, o->sizes[i]);
	/* Both ranks' last messages are in before either's QPs go. */
	if (!r && (t = emunic_boot_barrier(b->boot)))
		r = bench_err(b, t, "host: the bootstrap barrier before closing");
	if (!r && (t = emunic_ptp_pp_destroy(x.host)))
		r = bench_err(b, t, "host: emunic_ptp_pp_destroy");
	return r;
}

static int pp_endpoint(struct bench *b, const struct pp_opts *o, struct emunic_dev *dev, struct pp_impl *im)
{
	struct emunic_rndv_attr ra;
	int r;

	emunic_rndv_attr_init(&ra);
	ra.first = o->eager;
	ra.proto = im->proto;
	ra.progress = im->progress;
	ra.connect_timeout_ms = o->timeout_ms;
	/* A ping-pong has at most 2 requests in flight; fewer send stages
	 * keep a large eager limit's staging small. */
	ra.max_sends = 64;
	r = emunic_rndv_create(dev, &ra, &im->rv);
	return r ? bench_err(b, r, "%s: emunic_rndv_create (first %zu)", im->name, o->eager) : 0;
}

/* The engine's impls on one device: an endpoint each, made first; at each
 * size they take turns. */
static int pp_engine_pass(struct bench *b, const struct pp_opts *o, struct pp_impl *im, int n, char *ref,
			  char *device, size_t dlen)
{
	struct pp_run x = { .b = b, .o = o, .ref = ref, .peer = 1 - b->rank };
	size_t max = pp_max_size(o);
	struct emunic_dev_attr da;
	struct emunic_dev *dev = NULL;
	int r, t;

	emunic_dev_attr_init(&da);
	if ((r = bench_open_dev(b, &da, &dev, device, dlen)))
		return r;
	x.dev = dev;
	x.sbuf = aligned_alloc(4096, (max + 4095) & ~(size_t)4095);
	x.rbuf = aligned_alloc(4096, (max + 4095) & ~(size_t)4095);
	r = x.sbuf && x.rbuf ? 0 : bench_err(b, -ENOMEM, "buffers of %zu bytes", max);
	if (!r)
		memcpy(x.sbuf, ref, max);
	for (int i = 0; i < n && !r; i++)
		r = pp_endpoint(b, o, dev, &im[i]);
	if (!r)
		bench_progress(b, "%d endpoints on %s", n, device);
	for (int s = 0; s < o->nsizes && !r; s++)
		for (int i = 0; i < n && !r; i++) {
			x.im = &im[i];
			r = pp_point(&x, o->sizes[s]);
		}
	/* After a failure requests may be live: leave the endpoints. */
	for (int i = 0; i < n && !r; i++)
		if ((r = emunic_rndv_destroy(im[i].rv)))
			r = bench_err(b, r, "%s: emunic_rndv_destroy", im[i].name);
	if (!r && (t = emunic_dev_close(dev)))
		r = bench_err(b, t, "emunic_dev_close");
	free(x.sbuf);
	free(x.rbuf);
	return r;
}

/* ---- the report (rank 0) ------------------------------------------------------- */

/* ---- options -------------------------------------------------------------------- */

const char bench_p2p_help[] =
"  p2p [OPTIONS]  (2 ranks)\n"
"    Seed 000 figs. 4-5: a ping-pong between ranks 0 and 1 through the\n"
"    point-to-point engine: the receiver-initiated rendezvous (rtr) under\n"
"    each progress scheme (core: the progress core answers RTRs; test: the\n"
"    first test starts a request; test-on-init: isend/irecv start it;\n"
"    wait-on-send: isend also waits up to 200 us for its RTR) and the\n"
"    chunked rendezvous under the progress core; against host, a ping-pong\n"
"    of plain SEND/RECV over the same verbs (one RC QP, buffers registered\n"
"    once) that the app posts and polls itself, run first.\n"
"    Rank 0 isends the ping, irecvs the pong and calls emunic_test until\n"
"    both are done (never emunic_wait: seed 000's nbov loop); rank 1 has its\n"
"    receive posted an iteration ahead, tests it, posts the next, isends the\n"
"    pong and tests it.  Per size and impl, rank 0's medians: us inside one\n"
"    isend, one irecv, one test call (each call timed), test calls an\n"
"    iteration, latency (half the round trip, a pass timing only whole\n"
"    iterations), x host (latency / host's at that size), the fastest half\n"
"    round trip and MB/s (size / latency, rendezvous sizes): table 1, a\n"
"    row per size and impl.  Table 2, a row per size and engine impl: who\n"
"    ran rank 0's engine in the latency pass, an iteration (passes by test\n"
"    calls, which lend their thread to the engine; passes by the progress\n"
"    core; the core's wake-ups).\n"
"\n"
"    --sizes LIST       message sizes, bytes with an optional K, M or G\n"
"                       (default 8, the eager limit + 1, 64K, 1M; at most\n"
"                       64M)\n"
"    --variants LIST    engine impls: core, test, test-on-init, wait-on-send\n"
"                       (rtr under that progress scheme) and chunked\n"
"                       (default all five); host always runs\n"
"    --eager K          the eager limit, attr.first (default 4096, 1..65536)\n"
"    --iters K          iterations a pass (default 32 MiB / size within\n"
"                       [10, 100])\n"
"    --warmup W         untimed iterations first, the first checking the\n"
"                       data (default 3, at least 1)\n"
"    --timeout-ms MS    bound on every connect and on each test loop\n"
"                       (default 60000)\n"
"    --quick            a short run, for tests: 5 iterations a pass, 1\n"
"                       warm-up, the default sizes\n"
"    --csv FILE         rank 0 writes every result to FILE (see CSV)\n";

struct p2p_parse {
	struct pp_opts *o;
	const char *sizes, *variants;
	int eager, warmup;
};

static bool pp_add_size(void *ctx, const char *s)
{
	struct pp_opts *o = ctx;
	size_t v = bench_parse_size(s);

	if (!v || v > PP_MAX_SIZE || o->nsizes == PP_MAX_SIZES)
		return false;
	o->sizes[o->nsizes++] = v;
	return true;
}

static bool pp_add_variant(void *ctx, const char *s)
{
	struct pp_opts *o = ctx;
	struct pp_impl *im = &o->im[o->nim];
	unsigned progress = EMUNIC_PROGRESS_CORE;
	bool chunked = !strcmp(s, "chunked");

	if (o->nim == PP_MAX_IMPLS || (!chunked && emunic_rndv_progress_parse(s, &progress)))
		return false;
	for (int i = 1; i < o->nim; i++)	/* each once */
		if (o->im[i].proto == (chunked ? EMUNIC_RNDV_CHUNKED : EMUNIC_RNDV_RTR) && o->im[i].progress == progress)
			return false;
	*im = (struct pp_impl){ .proto = chunked ? EMUNIC_RNDV_CHUNKED : EMUNIC_RNDV_RTR, .progress = progress };
	snprintf(im->name, sizeof(im->name), "%s-%s", emunic_rndv_proto_str(im->proto),
		 emunic_rndv_progress_str(progress));
	o->nim++;
	return true;
}

static int p2p_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct p2p_parse *p = ctx;

	switch (val) {
	case 's':
		p->sizes = arg;
		return 0;
	case 'v':
		p->variants = arg;
		return 0;
	case 'e':
		return bench_opt_int(cmd, name, arg, 1, PP_MAX_EAGER, "1..65536", &p->eager);
	case 'k':
		return bench_opt_int(cmd, name, arg, 1, 1000000, "a count >= 1", &p->o->iters);
	case 'w':
		/* At least 1: the first warm-up iteration checks the data. */
		return bench_opt_int(cmd, name, arg, 1, 1000000, "a count >= 1", &p->warmup);
	}
	return 0;
}

/* 0, EXIT_USAGE, or BENCH_HELP for --help. */
static int p2p_parse(int argc, char **argv, struct pp_opts *o)
{
	static const struct option lo[] = {
		{ "sizes", required_argument, NULL, 's' }, { "variants", required_argument, NULL, 'v' },
		{ "eager", required_argument, NULL, 'e' }, { "iters", required_argument, NULL, 'k' },
		{ "warmup", required_argument, NULL, 'w' }, OPT_QUICK, OPTS_COMMON
	};
	struct p2p_parse p = { .o = o, .eager = 4096, .warmup = -1 };
	struct common_opts com = { .timeout_ms = o->timeout_ms };
	char defaults[64];
	int r = bench_parse_opts("p2p", argc, argv, lo, p2p_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	o->eager = (size_t)p.eager;
	snprintf(defaults, sizeof(defaults), "8,%zu,64K,1M", o->eager + 1);
	if (!bench_each_item(p.sizes ? p.sizes : defaults, pp_add_size, o))
		return bench_usage_error("p2p", "--sizes wants up to %d sizes (bytes, K, M or G; 1 .. 64M), not '%s'",
					 PP_MAX_SIZES, p.sizes);
	o->im[o->nim++] = (struct pp_impl){ .name = PP_BASELINE, .host = true };
	if (!bench_each_item(p.variants ? p.variants : "core,test,test-on-init,wait-on-send,chunked",
			     pp_add_variant, o))
		return bench_usage_error("p2p", "--variants wants some of core, test, test-on-init, wait-on-send and "
					 "chunked, each once, not '%s'", p.variants);
	if (!o->iters && com.quick)
		o->iters = 5;
	o->warmup = p.warmup >= 0 ? p.warmup : com.quick ? 1 : 3;
	return 0;
}

int bench_p2p_main(int argc, char **argv)
{
	struct pp_opts o = { .timeout_ms = 60000 };
	char device[96] = "?", *ref = NULL;
	struct bench b = { 0 };
	int r = p2p_parse(argc, argv, &o);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	r = bench_init(&b, "p2p", o.csv);
	r = r ? r : bench_two_ranks(&b);
	/* The clock read each timed call costs, taken off. */
	r = r ? r : bench_calibrate(&b);
	if (!r && !(ref = malloc(pp_max_size(&o))))
		r = bench_err(&b, -ENOMEM, "the pattern");
	if (!r) {
		pp_fill(ref, pp_max_size(&o));
		bench_progress(&b, "%d sizes x %d impls, eager limit %zu", o.nsizes, o.nim, o.eager);
		r = pp_host_pass(&b, &o, &o.im[0], ref);
	}
	r = r ? r : pp_engine_pass(&b, &o, &o.im[1], o.nim - 1, ref, device, sizeof(device));
	if (!r)
		pp_report(&b, &o, device);
	free(ref);
	return bench_fini(&b, r);
}
