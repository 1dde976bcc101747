/* SPDX-License-Identifier: MIT */
/*
 * emunic-barrier: checks that a barrier is one.  Each round every rank sleeps
 * a random 0..MAX us, notes when it entered and when it left the barrier
 * (CLOCK_REALTIME: ranks on two machines exit 77, see one_clock), and at the end every rank's
 * times are gathered: no rank may leave a round before the last rank entered
 * it.  --ibarrier-compute instead posts an ibarrier, computes without calling
 * the library, and checks with one test call that the barrier completed
 * meanwhile (offload progress); the host-progressed PTP baseline fails that.
 */
#include "baseline/coll_ops.h"
#include "baseline/ptp.h"

#include <emunic.h>
#include <emunic/coll.h>

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"

#define EXIT_VERIFY TEST_FAIL
#define EXIT_USAGE TEST_USAGE
#define EXIT_RUN TEST_NORUN
#define MAX_REPORTS 10

/* IMPL_NONE: no barrier at all, so the verification must fail. */
enum impl { IMPL_MQ, IMPL_PTP, IMPL_NONE };

struct opts {
	enum impl impl;
	struct emunic_coll_attr ca;
	int rounds, skew_us, compute_ms, spin_us, timeout_ms, ibarrier_compute;
	int stall_rank;			/* stops entering barriers half-way */
	int timeout_rank, timeout_rank_ms;	/* this rank's timeout instead */
	int inflight;			/* > 1: that many ibarriers posted at once */
	int full;			/* --full: a blocking post with no room */
	int behind;			/* --behind: a failure queued behind a waited one */
	enum emunic_idle idle;
};

struct bar {
	struct opts o;
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	const struct emunic_coll_impl *ops;	/* emunic_barrier_ops' offload or baseline; NULL: none */
	void *h;
	int rank, size;
	uint64_t rng;
};

/* ---- the two implementations, from the barrier's ops table ----------------- */

static const struct emunic_coll_call no_args;

static int do_barrier(struct bar *b)
{
	return b->ops ? b->ops->call(b->h, &no_args) : 0;
}

static int do_ibarrier(struct bar *b, void **req)
{
	return b->ops->start(b->h, &no_args, req);
}

static int do_test(struct bar *b, void *req)
{
	return b->ops->test(req);
}

static int do_wait(struct bar *b, void *req)
{
	return b->ops->wait(req, b->o.timeout_ms);
}

static const char *impl_name(const struct bar *b)
{
	return b->o.impl == IMPL_MQ ? "mq" : b->o.impl == IMPL_PTP ? "ptp" : "none";
}

static int fail(const struct bar *b, int err, const char *what)
{
	fprintf(stderr, "emunic-barrier: rank %d: %s failed: %s\n", b->rank, what, strerror(-err));
	return err;
}

static struct emunic_coll_impl_attr impl_attr(const struct bar *b)
{
	return (struct emunic_coll_impl_attr){ .timeout_ms = b->o.ca.timeout_ms, .signal = b->o.ca.signal,
					       .conn = b->o.ca.conn };
}

static int setup_ptp(struct bar *b)
{
	struct emunic_coll_impl_attr a = impl_attr(b);
	struct emunic_ptp_attr pa;
	int r;

	emunic_ptp_attr_init(&pa);	/* its default spin */
	a.spin_us = b->o.spin_us != -2 ? b->o.spin_us : pa.spin_us;
	b->ops = &emunic_barrier_ops.baseline;
	r = b->ops->open(EMUNIC_COLL_BARRIER, b->boot, NULL, &a, &b->h);
	return r ? fail(b, r, b->ops->create) : 0;
}

static int setup_mq(struct bar *b)
{
	struct emunic_coll_impl_attr a = impl_attr(b);
	struct emunic_dev_attr da;
	int r;

	emunic_dev_attr_init(&da);
	da.idle = b->o.idle;
	r = emunic_dev_open(b->boot, &da, &b->dev);
	if (r)
		return fail(b, r, "emunic_dev_open");
	b->ops = &emunic_barrier_ops.offload;
	r = b->ops->open(EMUNIC_COLL_BARRIER, b->boot, b->dev, &a, &b->h);
	return r ? fail(b, r, b->ops->create) : 0;
}

static int setup(struct bar *b)
{
	int r = emunic_boot_init(&b->boot);

	if (r)
		return fail(b, r, "bootstrap");
	b->rank = emunic_boot_rank(b->boot);
	b->size = emunic_boot_size(b->boot);
	if (b->rank == b->o.timeout_rank)
		b->o.timeout_ms = b->o.ca.timeout_ms = b->o.timeout_rank_ms;
	if (b->o.impl == IMPL_NONE)
		return 0;
	return b->o.impl == IMPL_PTP ? setup_ptp(b) : setup_mq(b);
}

static int teardown(struct bar *b)
{
	int r = 0, t;

	/* The offload's close is emunic_coll_destroy, the baseline's
	 * emunic_ptp_destroy. */
	if (b->h && (t = b->ops->close(b->h)))
		r = fail(b, t, b->o.impl == IMPL_MQ ? "emunic_coll_destroy" : "emunic_ptp_destroy");
	if (b->dev && (t = emunic_dev_close(b->dev)))
		r = fail(b, t, "emunic_dev_close");
	if (b->boot)
		emunic_boot_fini(b->boot);
	return r;
}

/* ---- time and randomness ---------------------------------------------------- */

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rnd(struct bar *b)
{
	b->rng ^= b->rng << 13;
	b->rng ^= b->rng >> 7;
	b->rng ^= b->rng << 17;
	return b->rng;
}

static void skew(struct bar *b)
{
	long us = b->o.skew_us ? (long)(rnd(b) % ((uint64_t)b->o.skew_us + 1)) : 0;
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 };

	if (us)
		nanosleep(&ts, NULL);
}

/* Application work that never enters the library: only the progress core
 * (or nothing, for PTP) can move a posted barrier meanwhile. */
static double compute(int ms)
{
	int64_t end = mono_ns() + (int64_t)ms * 1000000;
	volatile double x = 1.0;

	while (mono_ns() < end)
		for (int i = 0; i < 4096; i++)
			x = x * 1.0000001 + 1e-9;
	return x;
}

/* ---- skewed rounds, verified ---------------------------------------------- */

struct stamp {
	int64_t in, out;
};

/* A rank that never comes back: the others must time out and name it. */
static void stall(const struct bar *b, int i)
{
	fprintf(stderr, "emunic-barrier: rank %d: stalling before round %d (--stall-rank)\n", b->rank, i);
	for (;;)
		pause();
}

static int round_failed(const struct bar *b, int i, const char *what, int r)
{
	fprintf(stderr, "emunic-barrier: rank %d: round %d of %d: %s failed: %s\n", b->rank, i, b->o.rounds,
		what, strerror(-r));
	return r;
}

/* Completes req by polling: the first of a group goes through test. */
static int test_until_done(struct bar *b, void *req)
{
	int t;

	while (!(t = do_test(b, req)))
		sched_yield();
	return t < 0 ? t : 0;
}

/* Rounds first..first+n-1 posted one after another (each after its skew),
 * then completed in order: the first by test, the rest by wait. */
static int run_group(struct bar *b, struct stamp *st, int first, int n)
{
	void *req[64];		/* --inflight is at most 64 */
	int r = 0, posted;

	for (posted = 0; posted < n && !r; posted++) {
		skew(b);
		st[first + posted].in = realtime_ns();
		r = do_ibarrier(b, &req[posted]);
		if (r)
			round_failed(b, first + posted, "ibarrier", r);
	}
	if (r)
		posted--;
	for (int j = 0; j < posted; j++) {
		int t = j == 0 && !r ? test_until_done(b, req[j]) : 0;
		int w = do_wait(b, req[j]);

		st[first + j].out = realtime_ns();
		if (!r && (t || w))
			r = round_failed(b, first + j, t ? "ibarrier test" : "ibarrier wait", t ? t : w);
	}
	return r;
}

static int run_rounds(struct bar *b, struct stamp *st)
{
	for (int i = 0; i < b->o.rounds; i++) {
		int r;

		if (b->rank == b->o.stall_rank && i == b->o.rounds / 2)
			stall(b, i);
		if (b->o.inflight > 1 && b->o.impl != IMPL_NONE) {
			int n = b->o.rounds - i < b->o.inflight ? b->o.rounds - i : b->o.inflight;

			r = run_group(b, st, i, n);
			if (r)
				return r;
			i += n - 1;
			continue;
		}
		skew(b);
		st[i].in = realtime_ns();
		r = do_barrier(b);
		st[i].out = realtime_ns();
		if (r)
			return round_failed(b, i, "barrier", r);
	}
	return 0;
}

/* Rank 0 has printed the verdict: only now may a rank exit (with it),
 * since emunic-run kills the others when one exits non-zero. */
static int report_done(struct bar *b, int verdict)
{
	int r;

	fflush(stdout);
	r = emunic_boot_barrier(b->boot);
	return r ? fail(b, r, "emunic_boot_barrier") : verdict;
}

struct verdict {
	long violations;
	double mean_us, max_us;		/* last entry to last exit */
};

/* all[rank * rounds + i].  Reports (on rank 0) the first violations. */
static struct verdict verify(const struct bar *b, const struct stamp *all)
{
	struct verdict v = { 0 };
	int n = b->o.rounds;

	for (int i = 0; i < n; i++) {
		int64_t last_in = all[i].in, last_out = all[i].out;
		int who = 0;

		for (int q = 1; q < b->size; q++) {
			if (all[q * n + i].in > last_in) {
				last_in = all[q * n + i].in;
				who = q;
			}
			if (all[q * n + i].out > last_out)
				last_out = all[q * n + i].out;
		}
		for (int q = 0; q < b->size; q++) {
			int64_t early = last_in - all[q * n + i].out;

			if (early <= 0)
				continue;
			if (b->rank == 0 && v.violations < MAX_REPORTS)
				printf("emunic-barrier: VIOLATION round %d: rank %d left %.1f us "
				       "before rank %d entered\n", i, q, early / 1e3, who);
			v.violations++;
		}
		v.mean_us += (last_out - last_in) / 1e3 / n;
		if ((last_out - last_in) / 1e3 > v.max_us)
			v.max_us = (last_out - last_in) / 1e3;
	}
	return v;
}

/* The entry/exit stamps are CLOCK_REALTIME, comparable only within one
 * kernel: ranks on two machines (or VMs) have clocks further apart than a
 * barrier lasts, and the check would judge the clocks.  The kernel's boot_id
 * tells whether every rank shares this one. */
static int one_clock(struct bar *b)
{
	char id[40] = "unknown", *all = calloc((size_t)b->size, sizeof(id));
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	int r, others = 0;

	if (!all) {
		if (f)
			fclose(f);
		return fail(b, -ENOMEM, "allocating boot ids");
	}
	if (f) {
		if (!fgets(id, sizeof(id), f))
			snprintf(id, sizeof(id), "unknown");
		fclose(f);
	}
	r = emunic_boot_allgather(b->boot, id, sizeof(id), all);
	for (int q = 0; !r && q < b->size; q++)
		others += strncmp(all + (size_t)q * sizeof(id), id, sizeof(id)) != 0;
	free(all);
	if (r)
		return fail(b, r, "emunic_boot_allgather (boot ids)");
	if (others)
		SKIP("rank %d: %d rounds done, not verified: %d of %d ranks run under another kernel, "
		     "and the order check compares CLOCK_REALTIME stamps, which only one machine's ranks share",
		     b->rank, b->o.rounds, others, b->size);
	return 0;
}

static int skew_test(struct bar *b)
{
	struct stamp *st = calloc((size_t)b->o.rounds, sizeof(*st));
	struct stamp *all = calloc((size_t)b->o.rounds * (size_t)b->size, sizeof(*all));
	int64_t t0 = mono_ns();
	struct verdict v;
	int r;

	if (!st || !all) {
		free(st);
		free(all);
		return fail(b, -ENOMEM, "allocating timestamps");
	}
	r = run_rounds(b, st);
	t0 = mono_ns() - t0;
	r = r ? r : emunic_boot_allgather(b->boot, st, (size_t)b->o.rounds * sizeof(*st), all);
	r = r ? r : one_clock(b);
	if (!r) {
		v = verify(b, all);
		if (b->rank == 0)
			printf("emunic-barrier: %s %s %s, %d ranks (%d QPs on rank 0), %d rounds, skew 0..%d us: "
			       "%ld violations; last entry to last exit %.1f us mean, %.1f us max; %.2f s\n",
			       impl_name(b), emunic_coll_signal_str(b->o.ca.signal),
			       emunic_coll_conn_str(b->o.ca.conn), b->size,
			       b->o.impl == IMPL_MQ ? emunic_coll_qp_count(b->h) : b->size - 1, b->o.rounds, b->o.skew_us,
			       v.violations, v.mean_us, v.max_us, t0 / 1e9);
		r = report_done(b, v.violations ? EXIT_VERIFY : 0);
	}
	free(st);
	free(all);
	return r;
}

/* ---- ibarrier while computing ----------------------------------------------- */

static int compute_round(struct bar *b, int i, long *incomplete)
{
	void *req;
	int r, t;

	/* Out of band, so no rank polls a signal of this round before posting
	 * it: for PTP, the first rank to test then cannot have finished. */
	r = emunic_boot_barrier(b->boot);
	if (r)
		return fail(b, r, "emunic_boot_barrier");
	skew(b);
	r = do_ibarrier(b, &req);
	if (r)
		return fail(b, r, "ibarrier");
	/* Every rank has posted before any computes (out of band again): a
	 * rank held up before its post (5 ranks computing on 2 CPUs) must
	 * not count against the others' compute time. */
	if ((r = emunic_boot_barrier(b->boot))) {
		do_wait(b, req);
		return fail(b, r, "emunic_boot_barrier");
	}
	compute(b->o.compute_ms);
	t = do_test(b, req);
	if (t == 0) {
		fprintf(stderr, "emunic-barrier: rank %d: round %d: ibarrier not complete after %d ms of "
			"computing (one test call)\n", b->rank, i, b->o.compute_ms);
		(*incomplete)++;
	}
	r = do_wait(b, req);
	if (t < 0 || r) {
		fprintf(stderr, "emunic-barrier: rank %d: round %d: ibarrier failed: %s\n", b->rank, i,
			strerror(t < 0 ? -t : -r));
		return t < 0 ? t : r;
	}
	return 0;
}

static int compute_test(struct bar *b)
{
	long incomplete = 0, total = 0, *all = calloc((size_t)b->size, sizeof(long));
	int r = all ? 0 : -ENOMEM;

	for (int i = 0; i < b->o.rounds && !r; i++)
		r = compute_round(b, i, &incomplete);
	r = r ? r : emunic_boot_allgather(b->boot, &incomplete, sizeof(incomplete), all);
	if (!r) {
		for (int q = 0; q < b->size; q++)
			total += all[q];
		if (b->rank == 0)
			printf("emunic-barrier: ibarrier-compute %s %s %s, %d ranks, %d rounds of %d ms: "
			       "%ld of %ld ibarriers %s at the first test\n", impl_name(b),
			       emunic_coll_signal_str(b->o.ca.signal), emunic_coll_conn_str(b->o.ca.conn), b->size,
			       b->o.rounds, b->o.compute_ms, total ? total : (long)b->o.rounds * b->size,
			       (long)b->o.rounds * b->size, total ? "NOT complete" : "complete");
		r = report_done(b, total ? EXIT_VERIFY : 0);
	}
	free(all);
	return r;
}

/* --full: rank 0 posts FULL_INFLIGHT ibarriers, as many as an object keeps in
 * flight, while the others hold back (the bootstrap's barrier, not a sleep:
 * however slow rank 0 is, nothing of its set can complete before its
 * blocking barrier returned); that blocking barrier then finds no room for
 * its whole bound and must fail -ENOSPC (the library names why on stderr).
 * Then the others come, and every ibarrier completes. */
#define FULL_INFLIGHT 64
static int full_test(struct bar *b)
{
	int r = 0, verdict = 0;

	if (b->rank == 0) {
		void *req[FULL_INFLIGHT];
		int n = 0;

		for (; n < FULL_INFLIGHT && !r; n++)
			if ((r = do_ibarrier(b, &req[n])))
				fail(b, r, "an ibarrier of the full set");
		n -= r != 0;
		if (!r) {
			long long t0 = mono_ns();
			int f = do_barrier(b);

			printf("emunic-barrier: full: a blocking barrier behind %d ibarriers in flight: %s after %lld ms\n",
			       n, f ? strerror(-f) : "posted and complete", (long long)(mono_ns() - t0) / 1000000);
			if (f != -ENOSPC)
				verdict = EXIT_VERIFY;
		}
		if (emunic_boot_barrier(b->boot) && !r)
			r = fail(b, -EIO, "emunic_boot_barrier (the others come now)");
		for (int j = 0; j < n; j++) {
			int w = do_wait(b, req[j]);

			if (w && !r)
				r = fail(b, w, "waiting for an ibarrier of the full set");
		}
	} else {
		if ((r = emunic_boot_barrier(b->boot)))
			return fail(b, r, "emunic_boot_barrier (waiting for rank 0's blocking barrier)");
		for (int j = 0; j < FULL_INFLIGHT && !r; j++)
			if ((r = do_barrier(b)))
				fail(b, r, "a barrier matching rank 0's ibarriers");
	}
	return r ? r : report_done(b, verdict);
}

/* --behind (2 ranks, mq, under a fault that fails the second on rank 0): each
 * rank posts two ibarriers; once both ranks have (the bootstrap's barrier:
 * every signal is on its way) the core runs them for 2 s, and on rank 0
 * until its fault statistics say the failure was injected (the engine pass
 * that injects it queues it), so the second's failure is queued behind the
 * first's completion by the time the first is waited.
 * That wait must read it (the library names it on stderr, and tells the
 * peers) before it returns, not leave it to the next call: the line
 * printed after it comes after the failure's. */
static int behind_test(struct bar *b)
{
	struct timespec nap = { 2, 0 };
	void *req[2];
	int r, w1, w2;

	if ((r = do_ibarrier(b, &req[0])))
		return fail(b, r, "the first ibarrier");
	if ((r = do_ibarrier(b, &req[1]))) {
		do_wait(b, req[0]);
		return fail(b, r, "the second ibarrier");
	}
	if ((r = emunic_boot_barrier(b->boot)))
		return fail(b, r, "emunic_boot_barrier");
	nanosleep(&nap, NULL);
	if (b->rank == 0) {
		struct emunic_fault_stats fs = { 0 };
		struct timespec tick = { 0, 10 * 1000000 }, rest = { 0, 100 * 1000000 };
		int i = 0, e = 0;

		/* Counted in the verbs poll of the pass whose MQ step then
		 * queues the failed WAIT: the rest of that pass, then wait. */
		for (; i < 3000 && !(e = emunic_fault_stats(b->dev, &fs)) && !fs.wc_injected; i++)
			nanosleep(&tick, NULL);
		nanosleep(&rest, NULL);
		if (!fs.wc_injected)
			fprintf(stderr, "emunic-barrier: rank 0: behind: no fault injected %d ms after the 2 s%s%s\n",
				i * 10, e ? ": emunic_fault_stats: " : "", e ? strerror(-e) : "");
	}
	w1 = do_wait(b, req[0]);
	fprintf(stderr, "emunic-barrier: rank %d: behind: ibarrier 1 waited: %s\n", b->rank, w1 ? strerror(-w1) : "ok");
	w2 = do_wait(b, req[1]);
	fprintf(stderr, "emunic-barrier: rank %d: behind: ibarrier 2 waited: %s\n", b->rank, w2 ? strerror(-w2) : "ok");
	return report_done(b, 0);
}

/* ---- options -------------------------------------------------------------- */

static const char usage[] =
"usage: emunic-run -n N emunic-barrier [--impl mq|ptp|none] [--signal send|write_imm]\n"
"           [--conn dense|sparse] [--rounds N] [--skew-us MAX] [--ibarrier-compute]\n"
"           [--compute-ms MS] [--spin-us US] [--idle default|spin|sleep] [--timeout-ms MS]\n"
"           [--stall-rank R] [--timeout-rank R:MS] [--inflight K] [--full] [--behind]\n"
"  Verifies that no rank leaves a barrier before the last one entered it, over\n"
"  N rounds with every rank entering after a random 0..MAX us (default 100).\n"
"  --ibarrier-compute: post an ibarrier, compute MS ms (default 300) without\n"
"  calling the library, then one test call must find it complete.\n"
"  --impl ptp is the host-progressed baseline (dense only; --spin-us: how long\n"
"  its wait spins before sleeping).  --idle: the progress core's idle policy.\n"
"  --stall-rank R: rank R stops half-way, so the others must time out\n"
"  (--timeout-ms) and name the peers whose signals are missing.\n"
"  --timeout-rank R:MS: rank R times out after MS instead, so that it is the\n"
"  first to (the ranks waiting on a rank that waits would otherwise race it).\n"
"  --inflight K:\n"
"  post K ibarriers (each after its delay), then complete them in order, the\n"
"  first by test calls, the rest by wait.  --impl none: no barrier at all,\n"
"  which the verification must catch.  --full (2 ranks, mq): rank 0 posts\n"
"  64 ibarriers, as many as an object keeps in flight, while the others\n"
"  wait for its blocking barrier, which must fail ENOSPC at its bound\n"
"  (--timeout-ms), naming why; then every ibarrier completes.  --behind (2\n"
"  ranks, mq, with a fault spec that fails the second on rank 0): two\n"
"  ibarriers, both run for 2 s (and on rank 0 till the fault was injected)\n"
"  before the first is waited; each wait's result is printed.\n"
"  Exit: 0 verified, 1 verification failed, 2 usage, 3 RDMA or bootstrap error.\n";

static int pick(const char *s, const char *a, const char *b_)
{
	return !strcmp(s, a) ? 0 : !strcmp(s, b_) ? 1 : -1;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "impl", required_argument, NULL, 'i' }, { "signal", required_argument, NULL, 's' },
		{ "conn", required_argument, NULL, 'c' }, { "rounds", required_argument, NULL, 'r' },
		{ "skew-us", required_argument, NULL, 'k' }, { "ibarrier-compute", no_argument, NULL, 'b' },
		{ "compute-ms", required_argument, NULL, 'm' }, { "spin-us", required_argument, NULL, 'p' },
		{ "idle", required_argument, NULL, 'd' }, { "timeout-ms", required_argument, NULL, 't' },
		{ "stall-rank", required_argument, NULL, 'S' }, { "inflight", required_argument, NULL, 'n' },
		{ "timeout-rank", required_argument, NULL, 'T' }, { "full", no_argument, NULL, 'F' },
		{ "behind", no_argument, NULL, 'B' }, { "help", no_argument, NULL, 'h' }, { 0 }
	};
	int c, v;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'i':
			if ((v = pick(optarg, "mq", "ptp")) < 0 && strcmp(optarg, "none"))
				return -1;
			o->impl = v < 0 ? IMPL_NONE : (enum impl)v;
			break;
		case 's': if ((v = emunic_coll_signal_parse(optarg)) < 0) return -1;
			o->ca.signal = (enum emunic_coll_signal)v; break;
		case 'c': if ((v = emunic_coll_conn_parse(optarg)) < 0) return -1;
			o->ca.conn = (enum emunic_coll_conn)v; break;
		case 'r': if ((o->rounds = atoi(optarg)) < 1) return -1; break;
		case 'k': if ((o->skew_us = atoi(optarg)) < 0) return -1; break;
		case 'b': o->ibarrier_compute = 1; break;
		case 'm': if ((o->compute_ms = atoi(optarg)) < 0) return -1; break;
		case 'p': o->spin_us = atoi(optarg); break;
		case 'd':
			if (!strcmp(optarg, "default")) o->idle = EMUNIC_IDLE_DEFAULT;
			else if (!strcmp(optarg, "spin")) o->idle = EMUNIC_IDLE_SPIN;
			else if (!strcmp(optarg, "sleep")) o->idle = EMUNIC_IDLE_SLEEP;
			else return -1;
			break;
		case 't': if (!(o->timeout_ms = atoi(optarg))) return -1; o->ca.timeout_ms = o->timeout_ms; break;
		case 'S': o->stall_rank = atoi(optarg); break;
		case 'T':
			if (sscanf(optarg, "%d:%d", &o->timeout_rank, &o->timeout_rank_ms) != 2 || o->timeout_rank < 0 ||
			    o->timeout_rank_ms <= 0)
				return -1;
			break;
		case 'n': if ((o->inflight = atoi(optarg)) < 1 || o->inflight > 64) return -1; break;
		case 'F': o->full = 1; break;
		case 'B': o->behind = 1; break;
		case 'h': fputs(usage, stdout); exit(0);
		default: return -1;
		}
	}
	if (optind != argc)
		return -1;
	if (o->impl == IMPL_PTP && o->ca.conn == EMUNIC_COLL_SPARSE) {
		fprintf(stderr, "emunic-barrier: --impl ptp has dense connections only\n");
		return -1;
	}
	if ((o->full || o->behind) && o->impl != IMPL_MQ) {
		fprintf(stderr, "emunic-barrier: --full and --behind are for --impl mq\n");
		return -1;
	}
	if (o->impl == IMPL_NONE && o->ibarrier_compute) {
		fprintf(stderr, "emunic-barrier: --impl none has no ibarrier\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct bar b = { .rank = -1 };
	int r, t;

	emunic_coll_attr_init(&b.o.ca);
	b.o.rounds = 100;
	b.o.skew_us = 100;
	b.o.compute_ms = 300;
	b.o.spin_us = -2;		/* the PTP default */
	b.o.timeout_ms = 30000;
	b.o.stall_rank = -1;
	b.o.timeout_rank = -1;
	b.o.inflight = 1;
	b.o.ca.timeout_ms = b.o.timeout_ms;
	if (parse(argc, argv, &b.o)) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	r = setup(&b);
	b.rng = 0x9e3779b97f4a7c15ull * (uint64_t)(b.rank + 1) ^ (uint64_t)realtime_ns();
	b.rng = b.rng ? b.rng : 1;
	/* Untimed: connections settle, and no rank starts while another still
	 * sets up. */
	if (!r && (r = do_barrier(&b)))
		fail(&b, r, "the first barrier");
	if (!r)
		r = b.o.full	     ? full_test(&b)
		    : b.o.behind	     ? behind_test(&b)
		    : b.o.ibarrier_compute ? compute_test(&b)
					     : skew_test(&b);
	t = teardown(&b);
	if (r == EXIT_VERIFY)
		return EXIT_VERIFY;
	return r || t ? EXIT_RUN : 0;
}
