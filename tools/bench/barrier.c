/* SPDX-License-Identifier: MIT */
/*
 * barrier measures, for the offloaded barrier (MQ: emunic_coll on the
 * progress core) and the host-progressed point-to-point one (PTP:
 * emunic_ptp, which moves only inside its test and wait calls), both taken
 * from the barrier's ops table (baseline/coll_ops.h):
 *  1. barrier and ibarrier latency (seed 003, figs. 4 and 5);
 *  2. CPU availability with a test loop: post an ibarrier, alternate small
 *     work quanta with test until it completes (seed 003, fig. 6);
 *  3. CPU availability with one work slice: post, work W% of the raw
 *     ibarrier time, wait; the largest W that leaves the completion time
 *     within a tolerance of the same loop's without work (seed 003, fig. 7);
 *  4. the application thread's CPU time inside post + wait (the overhead of
 *     seed 000: time the application spends in communication calls).
 */
#include "bar.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- the two implementations, from the barrier's ops table ------------------- */

static const struct emunic_coll_call no_args;

static int im_barrier(struct impl *im)
{
	return im->ops->call(im->h, &no_args);
}

static int im_ibarrier(struct impl *im, void **req)
{
	return im->ops->start(im->h, &no_args, req);
}

static int im_test(struct impl *im, void *req)
{
	return im->ops->test(req);
}

static int im_wait(struct impl *im, void *req, int timeout_ms)
{
	return im->ops->wait(req, timeout_ms);
}

/* Nice is per thread on Linux and inherited by the threads it creates: the
 * progress core is started at 0, then only the app thread is reniced. */
static int set_app_nice(struct bench *b, const struct impl *im, int val)
{
	errno = 0;
	if (getpriority(PRIO_PROCESS, (id_t)gettid()) == val && !errno)
		return 0;
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), val))
		return bench_err(b, -errno, "%s: setpriority(app thread, nice %d)", im->name, val);
	return 0;
}

static int im_open(struct bench *b, const struct bar_opts *o, struct impl *im, struct bar_info *info)
{
	int r;

	struct emunic_coll_impl_attr a = { .timeout_ms = o->timeout_ms, .signal = o->ca.signal, .conn = o->ca.conn };
	struct emunic_dev_attr da;

	if (o->app_nice && (r = set_app_nice(b, im, im->ptp ? o->app_nice : 0)))
		return r;
	if (im->ptp) {
		struct emunic_ptp_attr pa;

		emunic_ptp_attr_init(&pa);	/* its default spin */
		a.spin_us = pa.spin_us;
		if (o->ptp_spin_us != -2)
			a.spin_us = o->ptp_spin_us;
		else if (sysconf(_SC_NPROCESSORS_ONLN) >= bench_local_ranks(b))
			a.spin_us = -1;	/* a core each: poll, as seed 003's PTP did */
		info->ptp_spin_us = a.spin_us;
		info->ptp_qps = b->size - 1;
		im->ops = &emunic_barrier_ops.baseline;
		r = im->ops->open(EMUNIC_COLL_BARRIER, b->boot, NULL, &a, &im->h);
		return r ? bench_err(b, r, "ptp: %s", im->ops->create) : 0;
	}

	emunic_dev_attr_init(&da);
	da.idle = im->want;
	r = emunic_dev_open(b->boot, &da, &im->dev);
	if (r)
		return bench_err(b, r, "mq: emunic_dev_open (idle %s)", bench_idle_str(im->want));
	if (o->app_nice && (r = set_app_nice(b, im, o->app_nice)))
		return r;
	snprintf(im->name, sizeof(im->name), "mq-%s", bench_idle_str(emunic_dev_idle(im->dev)));
	snprintf(info->device, sizeof(info->device), "%s", emunic_dev_name(im->dev));
	if (im->want == EMUNIC_IDLE_DEFAULT)
		info->have_default = true;
	im->ops = &emunic_barrier_ops.offload;
	r = im->ops->open(EMUNIC_COLL_BARRIER, b->boot, im->dev, &a, &im->h);
	if (r)
		return bench_err(b, r, "%s: %s (%s, %s)", im->name, im->ops->create,
				 emunic_coll_signal_str(o->ca.signal), emunic_coll_conn_str(o->ca.conn));
	info->mq_qps = emunic_coll_qp_count(im->h);	/* the offload's handle is its emunic_coll */
	return 0;
}

static int im_close(struct bench *b, struct impl *im)
{
	int r = 0, t;

	if (im->h && (t = im->ops->close(im->h)))
		r = bench_err(b, t, "%s: closing what %s made", im->name, im->ops->create);
	if (im->dev && (t = emunic_dev_close(im->dev)))
		r = r ? r : bench_err(b, t, "%s: emunic_dev_close", im->name);
	im->h = NULL;
	im->dev = NULL;
	return r;
}

/* Out of band: no rank starts a timed loop while another still finishes
 * the last one (or is still computing). */
static int sync_ranks(struct bench *b, const struct impl *im, const char *before)
{
	int r = emunic_boot_barrier(b->boot);

	return r ? bench_err(b, r, "%s: the bootstrap barrier before %s", im->name, before) : 0;
}

/* One ibarrier, completed by wait. */
static int one_ibarrier(struct bench *b, const struct bar_opts *o, struct impl *im, const char *phase, int i)
{
	void *req;
	int r = im_ibarrier(im, &req);

	if (r)
		return bench_err(b, r, "%s: %s %d: ibarrier", im->name, phase, i);
	r = im_wait(im, req, o->timeout_ms);
	return r ? bench_err(b, r, "%s: %s %d: ibarrier wait", im->name, phase, i) : 0;
}

static int warm_up(struct bench *b, const struct bar_opts *o, struct impl *im)
{
	for (int i = 0; i < o->warmup; i++) {
		int r = im_barrier(im);

		if (r)
			return bench_err(b, r, "%s: warm-up barrier %d", im->name, i);
		r = one_ibarrier(b, o, im, "warm-up", i);
		if (r)
			return r;
	}
	return 0;
}

/* 1. Tight loops, as seed 003 measured: K barriers; K (post, wait).  Each
 * call is timed too, for the median, which a stalled vCPU moves far less
 * than the mean; the one clock read a call costs (a syscall where the
 * clocksource has no vDSO, as in the TCG guest) is taken off the times and
 * off the CPU time, which is the whole loop's. */
static int measure_latency(struct bench *b, const struct bar_opts *o, struct impl *im, double *samp,
			   double *raw_ns)
{
	double ck = b->clock_ns, cpu;	/* each call pays one clock read */
	int64_t t0, t1, c0;
	int r = sync_ranks(b, im, "barrier latency");

	if (r)
		return r;
	c0 = bench_cpu_ns();
	t0 = t1 = bench_mono_ns();
	for (int i = 0; i < o->iters; i++) {
		int64_t t = t1;

		if ((r = im_barrier(im)))
			return bench_err(b, r, "%s: barrier %d of %d", im->name, i, o->iters);
		t1 = bench_mono_ns();
		samp[i] = (double)(t1 - t) - ck;
	}
	c0 = bench_cpu_ns() - c0;
	cpu = (double)c0 / o->iters - ck;
	r = bench_add(b, im->name, "barrier_latency", ((double)(t1 - t0) / o->iters - ck) / 1e3, "us");
	r = r ? r : bench_add(b, im->name, "barrier_latency_p50", bench_median(samp, o->iters) / 1e3, "us");
	r = r ? r : bench_add(b, im->name, "app_cpu_barrier", (cpu > 0 ? cpu : 0) / 1e3, "us");
	r = r ? r : sync_ranks(b, im, "ibarrier latency");
	if (r)
		return r;
	c0 = bench_cpu_ns();
	t0 = t1 = bench_mono_ns();
	for (int i = 0; i < o->iters; i++) {
		int64_t t = t1;

		if ((r = one_ibarrier(b, o, im, "ibarrier", i)))
			return r;
		t1 = bench_mono_ns();
		samp[i] = (double)(t1 - t) - ck;
	}
	c0 = bench_cpu_ns() - c0;
	*raw_ns = bench_median(samp, o->iters);
	r = bench_add(b, im->name, "ibarrier_latency", ((double)(t1 - t0) / o->iters - ck) / 1e3, "us");
	r = r ? r : bench_add(b, im->name, "ibarrier_latency_p50", *raw_ns / 1e3, "us");
	cpu = (double)c0 / o->iters - ck;
	r = r ? r : bench_add(b, im->name, "app_cpu_post_wait", (cpu > 0 ? cpu : 0) / 1e3, "us");
	bench_progress(b, "[%s] barrier %.1f us (median %.1f), ibarrier %.1f us (median %.1f), app CPU in post+wait "
		       "%.1f us/call", im->name, bench_get(b, im->name, "barrier_latency"),
		       bench_get(b, im->name, "barrier_latency_p50"), bench_get(b, im->name, "ibarrier_latency"),
		       *raw_ns / 1e3, bench_get(b, im->name, "app_cpu_post_wait"));
	return r;
}

/* Rank 0's raw ibarrier time sizes every rank's work, so all ranks compute
 * the same amount. */
static int share_raw(struct bench *b, struct impl *im, double *raw_ns)
{
	double *all = calloc((size_t)b->size, sizeof(*all));
	int r = all ? emunic_boot_allgather(b->boot, raw_ns, sizeof(*raw_ns), all) : -ENOMEM;

	if (r)
		r = bench_err(b, r, "%s: sharing rank 0's raw ibarrier time", im->name);
	else
		*raw_ns = all[0];
	free(all);
	return r;
}

/* 2. Seed 003 fig. 6: (work quantum, test) until done.  The work counted is
 * what the loop takes alone (calibrated), so a progress thread that takes
 * the CPU away shows as lost availability.  Per call, then the median. */
static int measure_test_loop(struct bench *b, const struct bar_opts *o, struct impl *im, double *samp,
			     double raw_ns, double *quantum_us)
{
	double q_ns = o->quantum_us > 0 ? o->quantum_us * 1e3 : raw_ns * 0.02, avail;
	double *time = samp + o->iters, *tests = samp + 2 * o->iters;
	uint64_t q_it;
	int r;

	if (q_ns < 1000)
		q_ns = 1000;
	q_it = bench_work_iters(b, q_ns);
	*quantum_us = q_ns / 1e3;
	if ((r = sync_ranks(b, im, "the test loop")))
		return r;
	for (int i = 0; i < o->iters; i++) {
		int64_t t0 = bench_mono_ns(), quanta = 0;
		void *req;
		int t;

		if ((r = im_ibarrier(im, &req)))
			return bench_err(b, r, "%s: test loop %d: ibarrier", im->name, i);
		do {
			bench_nops(q_it);
			quanta++;
			t = im_test(im, req);
		} while (t == 0);
		r = im_wait(im, req, o->timeout_ms);
		if (t < 0 || r)
			return bench_err(b, t < 0 ? t : r, "%s: test loop %d: ibarrier %s", im->name, i,
					 t < 0 ? "test" : "wait");
		time[i] = (double)(bench_mono_ns() - t0);
		samp[i] = 100.0 * (double)quanta * (double)q_it * b->ns_per_iter / time[i];
		if (samp[i] > 100)	/* calibration noise, not extra CPU */
			samp[i] = 100;
		tests[i] = (double)quanta;
	}
	avail = bench_median(samp, o->iters);
	r = bench_add(b, im->name, "cpu_avail_test_loop", avail, "%");
	r = r ? r : bench_add(b, im->name, "test_loop_time_p50", bench_median(time, o->iters) / 1e3, "us");
	r = r ? r : bench_add(b, im->name, "tests_per_call", bench_median(tests, o->iters), "count");
	bench_progress(b, "[%s] test loop (quantum %.1f us): availability %.1f%%, %.1f us/call, %.1f tests/call",
		       im->name, *quantum_us, avail, bench_get(b, im->name, "test_loop_time_p50"),
		       bench_get(b, im->name, "tests_per_call"));
	return r;
}

/* 3. Seed 003 fig. 7: post, one work slice of W% of raw, wait; the median
 * completion time of each W.  Also the app CPU time of post and of wait
 * around the 100% slice (4.). */
static int measure_sweep(struct bench *b, const struct bar_opts *o, struct impl *im, double *samp, double raw_ns)
{
	double ref = 0;		/* median completion time with no work, us */
	int avail = 0;
	bool passing = true;
	int r;

	for (int s = 0; s < SWEEP_STEPS; s++) {
		int pct = s * 10;
		uint64_t it = bench_work_iters(b, raw_ns * pct / 100.0);
		int64_t cpu_post = 0, cpu_wait = 0;
		char metric[40];
		double med;

		if ((r = sync_ranks(b, im, "a work-slice step")))
			return r;
		for (int i = 0; i < o->sweep_iters; i++) {
			int64_t t0 = bench_mono_ns(), c0 = bench_cpu_ns(), c1;
			void *req;

			if ((r = im_ibarrier(im, &req)))
				return bench_err(b, r, "%s: work slice %d%% %d: ibarrier", im->name, pct, i);
			c1 = bench_cpu_ns();
			cpu_post += c1 - c0;
			bench_nops(it);
			c0 = bench_cpu_ns();
			if ((r = im_wait(im, req, o->timeout_ms)))
				return bench_err(b, r, "%s: work slice %d%% %d: ibarrier wait", im->name, pct, i);
			c1 = bench_cpu_ns();
			cpu_wait += c1 - c0;
			samp[i] = (double)(bench_mono_ns() - t0) / 1e3;
		}
		med = bench_median(samp, o->sweep_iters);
		snprintf(metric, sizeof(metric), "work_slice_time_w%03d", pct);
		if ((r = bench_add(b, im->name, metric, med, "us")))
			return r;
		if (pct == 100) {
			r = bench_add(b, im->name, "app_cpu_post_overlap", cpu_post / 1e3 / o->sweep_iters, "us");
			r = r ? r : bench_add(b, im->name, "app_cpu_wait_overlap", cpu_wait / 1e3 / o->sweep_iters, "us");
			if (r)
				return r;
		}
		/* Raw is the same loop with no work: it pays the same clock
		 * reads, so only the work can make the difference. */
		if (pct == 0)
			ref = med;
		else {
			passing = passing && med <= ref * (1 + o->tol);
			if (passing)
				avail = pct;
		}
	}
	r = bench_add(b, im->name, "cpu_avail_work_slice", avail, "%");
	bench_progress(b, "[%s] work slices 0..100%% of %.1f us: availability %d%% (completion within %.0f%% of %.1f us)",
		       im->name, raw_ns / 1e3, avail, o->tol * 100, ref);
	return r;
}

static int run_impl(struct bench *b, const struct bar_opts *o, struct impl *im, struct bar_info *info,
		    double *quantum_us)
{
	int nsamp = 3 * (o->iters > o->sweep_iters ? o->iters : o->sweep_iters);
	double raw_ns = 0, *samp = calloc((size_t)nsamp, sizeof(*samp));
	int r = samp ? im_open(b, o, im, info) : bench_err(b, -ENOMEM, "%s: samples", im->name), t;

	if (!r)
		bench_progress(b, "[%s] connected, warming up", im->name);
	r = r ? r : warm_up(b, o, im);
	r = r ? r : measure_latency(b, o, im, samp, &raw_ns);
	r = r ? r : share_raw(b, im, &raw_ns);
	r = r ? r : measure_test_loop(b, o, im, samp, raw_ns, quantum_us);
	r = r ? r : measure_sweep(b, o, im, samp, raw_ns);
	t = im_close(b, im);
	free(samp);
	return r ? r : t;
}

/* ---- options ----------------------------------------------------------------- */

const char bench_barrier_help[] =
"  barrier [OPTIONS]\n"
"    Runs, for each implementation in turn (ptp, then mq once per idle\n"
"    policy), the recursive-doubling barrier of seed 003 and measures:\n"
"      1. barrier and ibarrier latency: K calls in a tight loop (ibarrier:\n"
"         post, wait); mean and median us/call, and mq/ptp;\n"
"      2. CPU availability with a test loop (seed 003 fig. 6): post an\n"
"         ibarrier, alternate work quanta with test until it completes;\n"
"         availability = calibrated work time / total time (median);\n"
"      3. CPU availability with one work slice (seed 003 fig. 7): post,\n"
"         work 0%, 10%, .., 100% of the raw (median) ibarrier time, wait;\n"
"         the availability is the largest W up to which every step's\n"
"         median completion time stays within (1 + tolerance) x that of\n"
"         W = 0 (the same loop without work), in percent of raw;\n"
"      4. the application thread's CPU time inside post + wait\n"
"         (CLOCK_THREAD_CPUTIME_ID; seed 000's overhead), and mq/ptp.\n"
"    The work is a nop loop calibrated in thread CPU time on all ranks at\n"
"    once before any progress core runs, so a progress thread (or another\n"
"    rank, or rxe's kernel work) that takes the application's CPU shows as\n"
"    lost availability.  Rank 0 prints one table a measurement, then the\n"
"    targets (mq within 1.10x of ptp; work-slice availability >= 90%; mq\n"
"    app CPU <= 10% of ptp's) with met or MISSED and by how much; targets\n"
"    are reported, never a cause of failure.  Progress lines go to stderr.\n"
"\n"
"    --iters K          timed calls per loop (default 200)\n"
"    --warmup W         untimed barriers and ibarriers first (default\n"
"                       K/10, at least 5)\n"
"    --sweep-iters S    calls per work-slice step (default K)\n"
"    --signal send|write_imm\n"
"                       0-byte SEND or RDMA WRITE with immediate (both impls)\n"
"    --conn dense|sparse\n"
"                       mq connections (ptp is always dense)\n"
"    --idle default|spin|sleep|both\n"
"                       the progress core's idle policy; default: as\n"
"                       emunic_dev_open picks it ($EMUNIC_IDLE, else spin\n"
"                       when there are 2 CPUs per local rank); both: sleep,\n"
"                       then spin\n"
"    --tolerance PCT    fig. 7 allowed slowdown over W = 0 (default 10)\n"
"    --quantum-us US    fig. 6 work quantum (default 2% of raw, >= 1 us)\n"
"    --ptp-spin-us auto|US\n"
"                       how long the ptp wait busy-polls before sleeping;\n"
"                       -1: always; auto (default): always when every\n"
"                       local rank has a CPU (as seed 003's PTP polled),\n"
"                       else the baseline's default (50 us)\n"
"    --timeout-ms MS    bound on every connect and wait (default 60000)\n"
"    --app-nice N       run the application thread at nice N while\n"
"                       measuring, its progress core at 0: a stand-in for a\n"
"                       NIC with a processor of its own (default 0)\n"
"    --no-ptp           measure mq only (no ratios)\n"
"    --csv FILE         rank 0 writes every result to FILE (see CSV)\n";

struct bar_parse {
	struct bar_opts *o;
	int warmup, sweep;
};

static int barrier_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct bar_parse *p = ctx;
	struct bar_opts *o = p->o;
	double pct;
	int v, r;

	switch (val) {
	case 'k':
		return bench_opt_int(cmd, name, arg, 1, 10000000, "a count >= 1", &o->iters);
	case 'w':
		return bench_opt_int(cmd, name, arg, 0, 10000000, "a count >= 0", &p->warmup);
	case 'S':
		return bench_opt_int(cmd, name, arg, 1, 10000000, "a count >= 1", &p->sweep);
	case 's':
		if ((v = emunic_coll_signal_parse(arg)) < 0)
			return bench_usage_error(cmd, "--signal is send or write_imm, not '%s'", arg);
		o->ca.signal = (enum emunic_coll_signal)v;
		return 0;
	case 'c':
		if ((v = emunic_coll_conn_parse(arg)) < 0)
			return bench_usage_error(cmd, "--conn is dense or sparse, not '%s'", arg);
		o->ca.conn = (enum emunic_coll_conn)v;
		return 0;
	case 'i':
		o->nidle = 1;
		if (!strcmp(arg, "default"))
			o->idle[0] = EMUNIC_IDLE_DEFAULT;
		else if (!strcmp(arg, "spin"))
			o->idle[0] = EMUNIC_IDLE_SPIN;
		else if (!strcmp(arg, "sleep"))
			o->idle[0] = EMUNIC_IDLE_SLEEP;
		else if (!strcmp(arg, "both")) {
			o->idle[0] = EMUNIC_IDLE_SLEEP;
			o->idle[1] = EMUNIC_IDLE_SPIN;
			o->nidle = 2;
		} else
			return bench_usage_error(cmd, "--idle is default, spin, sleep or both, not '%s'", arg);
		return 0;
	case 'T':
		r = bench_opt_double(cmd, name, arg, 0, 1000, "a percentage", &pct);
		o->tol = pct / 100;
		return r;
	case 'q':
		return bench_opt_double(cmd, name, arg, 0.001, 1e9, "a time > 0", &o->quantum_us);
	case 'p':
		if (!strcmp(arg, "auto"))
			o->ptp_spin_us = -2;
		else if (!bench_parse_int(arg, -1, 100000000, &o->ptp_spin_us))
			return bench_usage_error(cmd, "--ptp-spin-us wants auto, -1 or a time in us, not '%s'", arg);
		return 0;
	case 'n':
		o->no_ptp = true;
		return 0;
	case 'N':
		return bench_opt_int(cmd, name, arg, -20, 19, "-20..19", &o->app_nice);
	}
	return 0;
}

/* 0, EXIT_USAGE, or BENCH_HELP for --help. */
static int barrier_parse(int argc, char **argv, struct bar_opts *o)
{
	static const struct option lo[] = {
		{ "iters", required_argument, NULL, 'k' }, { "warmup", required_argument, NULL, 'w' },
		{ "sweep-iters", required_argument, NULL, 'S' }, { "signal", required_argument, NULL, 's' },
		{ "conn", required_argument, NULL, 'c' }, { "idle", required_argument, NULL, 'i' },
		{ "tolerance", required_argument, NULL, 'T' }, { "quantum-us", required_argument, NULL, 'q' },
		{ "ptp-spin-us", required_argument, NULL, 'p' }, { "no-ptp", no_argument, NULL, 'n' },
		{ "app-nice", required_argument, NULL, 'N' }, OPTS_COMMON
	};
	struct bar_parse p = { .o = o, .warmup = -1, .sweep = -1 };
	struct common_opts com = { .timeout_ms = o->timeout_ms };
	int r = bench_parse_opts("barrier", argc, argv, lo, barrier_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = o->ca.timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	o->warmup = p.warmup >= 0 ? p.warmup : (o->iters / 10 > 5 ? o->iters / 10 : 5);
	o->sweep_iters = p.sweep > 0 ? p.sweep : o->iters;
	return 0;
}

int bench_barrier_main(int argc, char **argv)
{
	struct bar_opts o = { .iters = 200, .tol = 0.10, .ptp_spin_us = -2, .timeout_ms = 60000, .nidle = 1 };
	struct impl im[MAX_IMPLS] = { 0 };
	struct bar_info info = { .ptp_spin_us = -2 };
	struct bench b = { 0 };
	int n = 0, r;

	emunic_coll_attr_init(&o.ca);
	o.ca.timeout_ms = o.timeout_ms;
	o.idle[0] = EMUNIC_IDLE_DEFAULT;
	r = barrier_parse(argc, argv, &o);
	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	if (!o.no_ptp) {
		im[n].ptp = true;
		snprintf(im[n++].name, sizeof(im[0].name), "ptp");
	}
	for (int k = 0; k < o.nidle; k++) {
		im[n].want = o.idle[k];
		snprintf(im[n++].name, sizeof(im[0].name), "mq-%s", bench_idle_str(o.idle[k]));
	}
	r = bench_init(&b, "barrier", o.csv);
	r = r ? r : bench_calibrate(&b);
	if (!r)
		bench_progress(&b, "%d ranks, %d iterations, work loop %.3f ns/iteration", b.size, o.iters,
			       b.ns_per_iter);
	for (int k = 0; k < n && !r; k++)
		r = run_impl(&b, &o, &im[k], &info, &info.quantum_us[k]);
	if (!r)
		bar_report(&b, &o, &info, im, n);
	return bench_fini(&b, r);
}
