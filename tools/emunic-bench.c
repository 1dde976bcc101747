/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench: benchmarks of emunic's offloads against the host-progressed
 * baselines, run under emunic-run (or a PMIx launcher).
 *
 *   emunic-run -n N emunic-bench barrier [OPTIONS]
 *   emunic-run -n 2 emunic-bench trig [OPTIONS]
 *   emunic-run -n 2 emunic-bench rndv [OPTIONS]
 *   emunic-run -n 2 emunic-bench p2p [OPTIONS]
 *   emunic-run -n N emunic-bench conn [OPTIONS]      (2 <= N <= 16)
 *
 * Subcommands are rows of the table `subcmds` at the end of this file: a
 * name, a one-line summary, a man-page section and a function that takes
 * (argc, argv) with argv[0] the subcommand's name and returns the exit
 * status.  The shared part (bootstrap, results, tables, CSV, the calibrated
 * work loop, target lines) is the "bench_" section below; a new subcommand
 * uses it and adds one row.
 *
 * barrier measures, for the offloaded barrier (MQ: emunic_coll on the
 * progress core) and the host-progressed point-to-point one (PTP:
 * emunic_ptp, which moves only inside its test and wait calls):
 *  1. barrier and ibarrier latency (seed 003, figs. 4 and 5);
 *  2. CPU availability with a test loop: post an ibarrier, alternate small
 *     work quanta with test until it completes (seed 003, fig. 6);
 *  3. CPU availability with one work slice: post, work W% of the raw
 *     ibarrier time, wait; the largest W that leaves the completion time
 *     within a tolerance of the same loop's without work (seed 003, fig. 7);
 *  4. the application thread's CPU time inside post + wait (the overhead of
 *     seed 000: time the application spends in communication calls).
 *
 * trig: a chain of triggered puts against the same chain driven by the app
 * thread: wall time and the app's CPU (section "trig").  rndv: chunked
 * receiver-driven rendezvous against one get a message, throughput by size,
 * and with a slow receiver the gets in flight from the trace ("rndv").
 * p2p: a ping-pong by protocol and progress scheme against a host-progressed
 * one (baseline/ptp_pingpong.c): time inside isend, irecv and test, latency
 * ("p2p").  conn: QPs per rank and start-up time, static mesh against
 * connections on demand, under four patterns ("conn").
 */
#include "baseline/ptp.h"

#include <emunic.h>
#include <emunic/coll.h>
#include <emunic/rndv.h>

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_RUN 3

/* ==== shared by every subcommand ========================================== */

struct row {
	char impl[24];
	char metric[40];
	double value;
	const char *unit;
};

struct bench {
	const char *cmd;		/* subcommand */
	struct emunic_boot *boot;
	int rank, size;
	const char *csv_path;
	FILE *csv;
	struct row *rows;
	int nrows, caprows;
	double ns_per_iter;		/* the nop loop, calibrated */
	double clock_ns;		/* one CLOCK_MONOTONIC read */
	double calib_spread;		/* (max - min) / median of the runs */
	int64_t t0;			/* start, for progress lines */
	bool usage;			/* the failure is bad usage (exit 2) */
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Under emunic-run every rank parses the same arguments: only rank 0 (or a
 * program started by hand) explains what is wrong with them. */
static bool speaks(void)
{
	const char *r = getenv("EMUNIC_RANK");

	return !r || !*r || !strcmp(r, "0");
}

static int bench_err(const struct bench *b, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bench_err(const struct bench *b, int err, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "emunic-bench: rank %d: %s %s: %s\n", b->rank, b->cmd, buf,
		strerror(err < 0 ? -err : err));
	return err < 0 ? err : -err;
}

/* One line a phase, from rank 0, so a long run shows where it is. */
static void bench_progress(const struct bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bench_progress(const struct bench *b, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (b->rank != 0)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "emunic-bench: [%6.1f s] %s %s\n", (mono_ns() - b->t0) / 1e9, b->cmd, buf);
}

static int bench_init(struct bench *b, const char *cmd, const char *csv_path)
{
	int r;

	b->cmd = cmd;
	b->rank = -1;
	b->t0 = mono_ns();
	r = emunic_boot_init(&b->boot);
	if (r)
		return bench_err(b, r, "bootstrap (run me under emunic-run or a PMIx launcher)");
	b->rank = emunic_boot_rank(b->boot);
	b->size = emunic_boot_size(b->boot);
	emunic_log_set_rank(b->rank);
	b->csv_path = csv_path;
	/* Fail before measuring, not after. */
	if (csv_path && b->rank == 0 && !(b->csv = fopen(csv_path, "w")))
		return bench_err(b, -errno, "opening the CSV file %s", csv_path);
	return 0;
}

/* Every rank waits for rank 0 to have printed, then leaves. */
static int bench_fini(struct bench *b, int status)
{
	if (b->csv && fclose(b->csv) && !status)
		status = bench_err(b, -errno, "writing the CSV file %s", b->csv_path);
	b->csv = NULL;
	fflush(stdout);
	if (b->boot && !status) {
		int r = emunic_boot_barrier(b->boot);

		if (r)
			status = bench_err(b, r, "the final bootstrap barrier");
	}
	if (b->boot)
		emunic_boot_fini(b->boot);
	free(b->rows);
	return status ? (b->usage ? EXIT_USAGE : EXIT_RUN) : 0;
}

/* For the subcommands that measure one pair of ranks. */
static int bench_two_ranks(struct bench *b)
{
	if (b->size == 2)
		return 0;
	if (b->rank == 0)
		fprintf(stderr, "emunic-bench: %s needs exactly 2 ranks (emunic-run -n 2), not %d\n", b->cmd, b->size);
	b->usage = true;
	return -EINVAL;
}

static int bench_add(struct bench *b, const char *impl, const char *metric, double value, const char *unit)
{
	struct row *rw;

	if (b->nrows == b->caprows) {
		int cap = b->caprows ? 2 * b->caprows : 64;
		struct row *n = realloc(b->rows, (size_t)cap * sizeof(*n));

		if (!n)
			return bench_err(b, -ENOMEM, "keeping results");
		b->rows = n;
		b->caprows = cap;
	}
	rw = &b->rows[b->nrows++];
	snprintf(rw->impl, sizeof(rw->impl), "%s", impl);
	snprintf(rw->metric, sizeof(rw->metric), "%s", metric);
	rw->value = value;
	rw->unit = unit;
	return 0;
}

static const struct row *bench_find(const struct bench *b, const char *impl, const char *metric)
{
	for (int i = 0; i < b->nrows; i++)
		if (!strcmp(b->rows[i].impl, impl) && !strcmp(b->rows[i].metric, metric))
			return &b->rows[i];
	return NULL;
}

static double bench_get(const struct bench *b, const char *impl, const char *metric)
{
	const struct row *rw = bench_find(b, impl, metric);

	return rw ? rw->value : -1;
}

/* value / the baseline's value of the same metric; < 0 when there is none. */
static double bench_ratio(const struct bench *b, const struct row *rw, const char *baseline)
{
	const struct row *base = bench_find(b, baseline, rw->metric);

	if (!base || base->value <= 0 || rw->value < 0)
		return -1;
	return rw->value / base->value;
}

/* bench,impl,ranks,metric,value,unit,ratio_vs_<baseline>; says where on stdout. */
static void bench_write_csv(const struct bench *b, const char *baseline)
{
	if (!b->csv)
		return;
	fprintf(b->csv, "bench,impl,ranks,metric,value,unit,ratio_vs_%s\n", baseline);
	for (int i = 0; i < b->nrows; i++) {
		const struct row *rw = &b->rows[i];
		double ratio = bench_ratio(b, rw, baseline);

		fprintf(b->csv, "%s,%s,%d,%s,%.3f,%s,", b->cmd, rw->impl, b->size, rw->metric, rw->value, rw->unit);
		if (ratio >= 0)
			fprintf(b->csv, "%.4f", ratio);
		fputc('\n', b->csv);
	}
	fflush(b->csv);
	printf("\nCSV: %d rows in %s\n", b->nrows, b->csv_path);
}

/* ---- the work loop ------------------------------------------------------- */

static void nops(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		__asm__ __volatile__("nop");
}

static uint64_t work_iters(const struct bench *b, double ns)
{
	return ns > 0 ? (uint64_t)(ns / b->ns_per_iter + 0.5) : 0;
}

static int cmp_double(const void *a, const void *b_)
{
	double x = *(const double *)a, y = *(const double *)b_;

	return x < y ? -1 : x > y;
}

/*
 * CPU ns per nop iteration, timed by the thread's own CPU clock: the work
 * the loop does while it has a CPU, whatever else shares the CPUs (other
 * ranks, a vCPU the host preempts).  A work slice of T ns is then T ns of
 * CPU, and a rank that gets less than a whole CPU while it computes shows
 * it as lost availability.  All ranks at once, before any progress core
 * runs; runs of at least 20 ms, the median of five.
 */
static int bench_calibrate(struct bench *b)
{
	double run[5];
	uint64_t n = 1 << 14;
	int r = emunic_boot_barrier(b->boot);

	if (r)
		return bench_err(b, r, "the bootstrap barrier before calibrating");
	for (;;) {
		int64_t t = cpu_ns();

		nops(n);
		t = cpu_ns() - t;
		if (t >= 20000000 || n >= (1ull << 40))
			break;
		n *= t < 2000000 ? 8 : 2;
	}
	for (int i = 0; i < 5; i++) {
		int64_t t = cpu_ns();

		nops(n);
		run[i] = (double)(cpu_ns() - t) / (double)n;
	}
	qsort(run, 5, sizeof(run[0]), cmp_double);
	b->ns_per_iter = run[2] > 0 ? run[2] : 1e-3;
	b->calib_spread = (run[4] - run[0]) / b->ns_per_iter;
	/* A clock read is a syscall where the clocksource has no vDSO (hpet
	 * in the TCG guest): what timing each call adds, to subtract. */
	for (int i = 0; i < 5; i++) {
		int64_t t = mono_ns();

		for (int j = 0; j < 999; j++)
			(void)mono_ns();
		run[i] = (double)(mono_ns() - t) / 1000;
	}
	qsort(run, 5, sizeof(run[0]), cmp_double);
	b->clock_ns = run[2];
	return 0;
}

/* Ranks on this node (emunic-run sets EMUNIC_LOCAL_SIZE). */
static int local_ranks(const struct bench *b)
{
	const char *s = getenv("EMUNIC_LOCAL_SIZE");
	int n = s && *s ? atoi(s) : b->size;

	return n > 0 ? n : 1;
}

/* The share of a CPU each rank can have while all of them compute. */
static double cpu_ceiling(const struct bench *b)
{
	double c = 100.0 * (double)sysconf(_SC_NPROCESSORS_ONLN) / local_ranks(b);

	return c > 100 ? 100 : c;
}

/* ---- targets --------------------------------------------------------------- */

/* "met" or "MISSED", and by how much; ctx adds context (may be NULL).
 * at_most: the ratio may not exceed limit; else it may not fall below it.
 * Returns 1 when missed. */
static int target_ratio(const char *what, const char *impl, double ratio, double limit, bool at_most,
			const char *ctx)
{
	const char *fmt = limit < 0.1 ? "%.3fx" : "%.2fx";
	char v[96], r[24], l[24];
	int missed = ratio >= 0 && (at_most ? ratio > limit : ratio < limit);

	snprintf(r, sizeof(r), fmt, ratio);
	snprintf(l, sizeof(l), fmt, limit);
	if (ratio < 0)
		snprintf(v, sizeof(v), "no value");
	else if (!missed)
		snprintf(v, sizeof(v), "%s", r);
	else
		snprintf(v, sizeof(v), "%s, %.0f%% %s the %s target", r, (at_most ? ratio / limit - 1 : 1 - ratio / limit) * 100,
			 at_most ? "above" : "below", l);
	printf("  %-7s %-42s %-9s %s%s%s\n", ratio < 0 ? "n/a" : missed ? "MISSED" : "met", what, impl, v,
	       ctx ? "; " : "", ctx ? ctx : "");
	return missed;
}

static int target_pct_min(const char *what, const char *impl, double pct, double limit)
{
	int missed = pct >= 0 && pct < limit;

	if (pct < 0)
		printf("  %-7s %-42s %-9s no value\n", "n/a", what, impl);
	else if (!missed)
		printf("  %-7s %-42s %-9s %.0f%%\n", "met", what, impl, pct);
	else
		printf("  %-7s %-42s %-9s %.0f%%, %.0f points short\n", "MISSED", what, impl, pct, limit - pct);
	return missed;
}

/* ==== barrier ================================================================ */

#define MAX_IMPLS 3
#define SWEEP_STEPS 11			/* work of 0%, 10%, .., 100% of raw */
#define BASELINE "ptp"

struct bar_opts {
	int iters, warmup, sweep_iters;
	struct emunic_coll_attr ca;
	enum emunic_idle idle[2];	/* progress-core idle policies to run */
	int nidle;
	double tol;			/* fig. 7: allowed slowdown over raw */
	double quantum_us;		/* fig. 6 work quantum; 0: 2% of raw */
	int ptp_spin_us;		/* -2: auto (see --help) */
	int timeout_ms;
	int app_nice;			/* the app thread's nice while measuring */
	bool no_ptp;
	const char *csv;
};

struct impl {
	char name[24];			/* "ptp", "mq-sleep", "mq-spin" */
	bool ptp;
	enum emunic_idle want;
	struct emunic_dev *dev;
	struct emunic_coll *coll;
	struct emunic_ptp *p;
};

/* What the header reports, learnt while running. */
struct bar_info {
	char device[64];
	bool have_default;		/* an mq run used EMUNIC_IDLE_DEFAULT */
	int ptp_spin_us;
	int mq_qps, ptp_qps;
	double quantum_us[MAX_IMPLS];
};

static const char *idle_str(enum emunic_idle i)
{
	return i == EMUNIC_IDLE_SPIN ? "spin" : i == EMUNIC_IDLE_SLEEP ? "sleep" : "default";
}

/* ---- the two implementations behind one face -------------------------------- */

static int im_barrier(struct impl *im)
{
	return im->ptp ? emunic_ptp_barrier(im->p) : emunic_barrier(im->coll);
}

static int im_ibarrier(struct impl *im, void **req)
{
	if (im->ptp)
		return emunic_ptp_ibarrier(im->p, (struct emunic_ptp_req **)req);
	return emunic_ibarrier(im->coll, (struct emunic_coll_req **)req);
}

static int im_test(struct impl *im, void *req)
{
	return im->ptp ? emunic_ptp_test(req) : emunic_coll_test(req);
}

static int im_wait(struct impl *im, void *req, int timeout_ms)
{
	return im->ptp ? emunic_ptp_wait(req, timeout_ms) : emunic_coll_wait(req, timeout_ms);
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

	if (o->app_nice && (r = set_app_nice(b, im, im->ptp ? o->app_nice : 0)))
		return r;
	if (im->ptp) {
		struct emunic_ptp_attr pa;

		emunic_ptp_attr_init(&pa);
		pa.signal = o->ca.signal;
		pa.timeout_ms = o->timeout_ms;
		if (o->ptp_spin_us != -2)
			pa.spin_us = o->ptp_spin_us;
		else if (sysconf(_SC_NPROCESSORS_ONLN) >= local_ranks(b))
			pa.spin_us = -1;	/* a core each: poll, as seed 003's PTP did */
		info->ptp_spin_us = pa.spin_us;
		info->ptp_qps = b->size - 1;
		r = emunic_ptp_create(b->boot, &pa, &im->p);
		return r ? bench_err(b, r, "ptp: emunic_ptp_create") : 0;
	}
	struct emunic_dev_attr da;

	emunic_dev_attr_init(&da);
	da.idle = im->want;
	r = emunic_dev_open(b->boot, &da, &im->dev);
	if (r)
		return bench_err(b, r, "mq: emunic_dev_open (idle %s)", idle_str(im->want));
	if (o->app_nice && (r = set_app_nice(b, im, o->app_nice)))
		return r;
	snprintf(im->name, sizeof(im->name), "mq-%s", idle_str(emunic_dev_idle(im->dev)));
	snprintf(info->device, sizeof(info->device), "%s", emunic_dev_name(im->dev));
	if (im->want == EMUNIC_IDLE_DEFAULT)
		info->have_default = true;
	r = emunic_coll_create(im->dev, &o->ca, &im->coll);
	if (r)
		return bench_err(b, r, "%s: emunic_coll_create (%s, %s)", im->name,
				 emunic_coll_signal_str(o->ca.signal), emunic_coll_conn_str(o->ca.conn));
	info->mq_qps = emunic_coll_qp_count(im->coll);
	return 0;
}

static int im_close(struct bench *b, struct impl *im)
{
	int r = 0, t;

	if (im->coll && (t = emunic_coll_destroy(im->coll)))
		r = bench_err(b, t, "%s: emunic_coll_destroy", im->name);
	if (im->dev && (t = emunic_dev_close(im->dev)))
		r = r ? r : bench_err(b, t, "%s: emunic_dev_close", im->name);
	if (im->p && (t = emunic_ptp_destroy(im->p)))
		r = r ? r : bench_err(b, t, "ptp: emunic_ptp_destroy");
	im->coll = NULL;
	im->dev = NULL;
	im->p = NULL;
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

static double median(double *v, int n)
{
	if (n <= 0)
		return -1;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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
	t0 = t1 = mono_ns();
	for (int i = 0; i < o->iters; i++) {
		int64_t t = t1;

		if ((r = im_barrier(im)))
			return bench_err(b, r, "%s: barrier %d of %d", im->name, i, o->iters);
		t1 = mono_ns();
		samp[i] = (double)(t1 - t) - ck;
	}
	r = bench_add(b, im->name, "barrier_latency", ((double)(t1 - t0) / o->iters - ck) / 1e3, "us");
	r = r ? r : bench_add(b, im->name, "barrier_latency_p50", median(samp, o->iters) / 1e3, "us");
	r = r ? r : sync_ranks(b, im, "ibarrier latency");
	if (r)
		return r;
	c0 = cpu_ns();
	t0 = t1 = mono_ns();
	for (int i = 0; i < o->iters; i++) {
		int64_t t = t1;

		if ((r = one_ibarrier(b, o, im, "ibarrier", i)))
			return r;
		t1 = mono_ns();
		samp[i] = (double)(t1 - t) - ck;
	}
	c0 = cpu_ns() - c0;
	*raw_ns = median(samp, o->iters);
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
	q_it = work_iters(b, q_ns);
	*quantum_us = q_ns / 1e3;
	if ((r = sync_ranks(b, im, "the test loop")))
		return r;
	for (int i = 0; i < o->iters; i++) {
		int64_t t0 = mono_ns(), quanta = 0;
		void *req;
		int t;

		if ((r = im_ibarrier(im, &req)))
			return bench_err(b, r, "%s: test loop %d: ibarrier", im->name, i);
		do {
			nops(q_it);
			quanta++;
			t = im_test(im, req);
		} while (t == 0);
		r = im_wait(im, req, o->timeout_ms);
		if (t < 0 || r)
			return bench_err(b, t < 0 ? t : r, "%s: test loop %d: ibarrier %s", im->name, i,
					 t < 0 ? "test" : "wait");
		time[i] = (double)(mono_ns() - t0);
		samp[i] = 100.0 * (double)quanta * (double)q_it * b->ns_per_iter / time[i];
		if (samp[i] > 100)	/* calibration noise, not extra CPU */
			samp[i] = 100;
		tests[i] = (double)quanta;
	}
	avail = median(samp, o->iters);
	r = bench_add(b, im->name, "cpu_avail_test_loop", avail, "%");
	r = r ? r : bench_add(b, im->name, "test_loop_time_p50", median(time, o->iters) / 1e3, "us");
	r = r ? r : bench_add(b, im->name, "tests_per_call", median(tests, o->iters), "count");
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
		uint64_t it = work_iters(b, raw_ns * pct / 100.0);
		int64_t cpu_post = 0, cpu_wait = 0;
		char metric[40];
		double med;

		if ((r = sync_ranks(b, im, "a work-slice step")))
			return r;
		for (int i = 0; i < o->sweep_iters; i++) {
			int64_t t0 = mono_ns(), c0 = cpu_ns(), c1;
			void *req;

			if ((r = im_ibarrier(im, &req)))
				return bench_err(b, r, "%s: work slice %d%% %d: ibarrier", im->name, pct, i);
			c1 = cpu_ns();
			cpu_post += c1 - c0;
			nops(it);
			c0 = cpu_ns();
			if ((r = im_wait(im, req, o->timeout_ms)))
				return bench_err(b, r, "%s: work slice %d%% %d: ibarrier wait", im->name, pct, i);
			c1 = cpu_ns();
			cpu_wait += c1 - c0;
			samp[i] = (double)(mono_ns() - t0) / 1e3;
		}
		med = median(samp, o->sweep_iters);
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

/* ---- the report (rank 0) ----------------------------------------------------- */

static void cell(double v, int width, const char *fmt)
{
	char buf[32];

	if (v < 0)
		snprintf(buf, sizeof(buf), "-");
	else
		snprintf(buf, sizeof(buf), fmt, v);
	printf("%*s", width, buf);
}

static double ratio_of(const struct bench *b, const char *impl, const char *metric)
{
	const struct row *rw = bench_find(b, impl, metric);

	return rw ? bench_ratio(b, rw, BASELINE) : -1;
}

static void print_header(const struct bench *b, const struct bar_opts *o, const struct bar_info *info,
			 const struct impl *im, int n)
{
	const char *env = getenv("EMUNIC_IDLE"), *local = getenv("EMUNIC_LOCAL_SIZE");

	printf("\nemunic-bench barrier: recursive-doubling barrier, offloaded to the progress core (mq)\n"
	       "vs host-progressed point to point (ptp: moves only inside its test and wait calls)\n");
	printf("  device       %s, %d ranks, bootstrap %s, %ld CPUs online\n", info->device[0] ? info->device : "?",
	       b->size, emunic_boot_method(b->boot), sysconf(_SC_NPROCESSORS_ONLN));
	printf("  signal       %s; connections: mq %s (%d QPs on rank 0), ptp dense (%d QPs, dense only)\n",
	       emunic_coll_signal_str(o->ca.signal), emunic_coll_conn_str(o->ca.conn), info->mq_qps, info->ptp_qps);
	printf("  idle policy  progress core (emunic_dev_idle):");
	for (int k = 0; k < n; k++)
		if (!im[k].ptp)
			printf(" %s%s", k > 1 || (k == 1 && !im[0].ptp) ? "then " : "", im[k].name + 3);
	if (info->have_default) {
		if (env && *env)
			printf(" (default, from EMUNIC_IDLE=%s)", env);
		else
			printf(" (default, chosen by CPU count: spin needs 2 CPUs per local rank, %s local)",
			       local ? local : "1");
	}
	printf("\n");
	printf("               in the mq runs %d app threads and %d progress cores share %ld CPUs: a\n"
	       "               progress core competes with the application's work for a CPU%s\n", b->size, b->size,
	       sysconf(_SC_NPROCESSORS_ONLN), o->app_nice ? "" : " (on equal terms)");
	if (o->app_nice)
		printf("  app nice     %d while measuring (progress cores and calibration at 0)\n", o->app_nice);
	printf("  iterations   %d calls a loop after %d warm-up barriers and ibarriers; %d a work-slice\n"
	       "               step; latency: mean and median, less one clock read (%.2f us) a call;\n"
	       "               tables 2, 3: medians; all values are rank 0's\n", o->iters, o->warmup, o->sweep_iters,
	       b->clock_ns / 1e3);
	printf("  work loop    nop loop, %.3f CPU ns per iteration (thread CPU clock, median of 5 runs\n"
	       "               on all ranks at once, spread %.0f%%); work sized from rank 0's median\n"
	       "               ibarrier time; availability can reach %.0f%% at most (%ld CPUs, %d ranks)\n",
	       b->ns_per_iter, b->calib_spread * 100, cpu_ceiling(b), sysconf(_SC_NPROCESSORS_ONLN), local_ranks(b));
	if (!o->no_ptp) {
		const char *why = o->ptp_spin_us != -2 ? "--ptp-spin-us" :
				  info->ptp_spin_us < 0 ? "auto: a CPU per rank in the ptp runs" :
				  "auto: ranks share CPUs";

		if (info->ptp_spin_us < 0)
			printf("  ptp wait     busy-polls, never sleeps (%s)\n", why);
		else
			printf("  ptp wait     busy-polls %d us, then sleeps on its completion channel (%s)\n",
			       info->ptp_spin_us, why);
	}
	printf("  note         under QEMU TCG absolute times mean little: compare the ratios\n");
	if (b->size == 2)
		printf("  note         at 2 ranks the barrier is one exchange, started by the post itself: ptp\n"
		       "               needs no progress calls after it, so there is little to offload\n");
}

static void ratio_label(char *buf, size_t len, const struct impl *im)
{
	snprintf(buf, len, "%.23s/ptp", im->name);
}

static void print_latency(const struct bench *b, const struct bar_opts *o, const struct impl *im, int n)
{
	static const char *const m[4] = { "barrier_latency", "barrier_latency_p50", "ibarrier_latency",
					  "ibarrier_latency_p50" };

	printf("\n1. latency, us/call over %d calls (seed 003 figs. 4, 5)\n", o->iters);
	printf("   %-18s%12s%12s%12s%12s\n", "impl", "barrier", "median", "ibarrier", "median");
	for (int k = 0; k < n; k++) {
		printf("   %-18s", im[k].name);
		for (int j = 0; j < 4; j++)
			cell(bench_get(b, im[k].name, m[j]), 12, "%.1f");
		printf("\n");
	}
	for (int k = 0; k < n; k++) {
		char label[40];

		if (im[k].ptp || o->no_ptp)
			continue;
		ratio_label(label, sizeof(label), &im[k]);
		printf("   %-18s", label);
		for (int j = 0; j < 4; j++)
			cell(ratio_of(b, im[k].name, m[j]), 12, "%.2fx");
		printf("\n");
	}
}

static void print_test_loop(const struct bench *b, const struct bar_opts *o, const struct bar_info *info,
			    const struct impl *im, int n)
{
	bool slowed = false;

	printf("\n2. CPU availability, test loop (seed 003 fig. 6): post an ibarrier, then (work\n"
	       "   quantum, test) until it completes; availability = calibrated work / total time;\n"
	       "   medians over the calls; x raw = completion time / median ibarrier time\n");
	printf("   %-18s%12s%12s%12s%10s%12s\n", "impl", "quantum us", "avail %", "us/call", "x raw", "tests/call");
	for (int k = 0; k < n; k++) {
		double t = bench_get(b, im[k].name, "test_loop_time_p50");
		double raw = bench_get(b, im[k].name, "ibarrier_latency_p50");

		printf("   %-18s", im[k].name);
		cell(info->quantum_us[k], 12, "%.1f");
		cell(bench_get(b, im[k].name, "cpu_avail_test_loop"), 12, "%.1f");
		cell(t, 12, "%.1f");
		cell(t > 0 && raw > 0 ? t / raw : -1, 10, "%.2f");
		cell(bench_get(b, im[k].name, "tests_per_call"), 12, "%.1f");
		printf("\n");
		slowed = slowed || (t > 0 && raw > 0 && t > raw * (1 + o->tol));
	}
	if (slowed)
		printf("   note: x raw above %.2f: the work delayed the barrier itself (seed 003 keeps the\n"
		       "   quantum small enough that it does not), so read avail %% together with x raw\n",
		       1 + o->tol);
}

static void print_sweep(const struct bench *b, const struct bar_opts *o, const struct impl *im, int n)
{
	printf("\n3. CPU availability, one work slice (seed 003 fig. 7): post an ibarrier, work W%% of\n"
	       "   the raw (median) ibarrier time of table 1, wait.  Median completion time relative\n"
	       "   to W = 0 (the same loop without work); availability = the largest W up to which\n"
	       "   every step stays within %.2fx of W = 0 (a %.0f%% tolerance)\n", 1 + o->tol, o->tol * 100);
	printf("   %-12s%8s", "impl", "W=0 us");
	for (int s = 1; s < SWEEP_STEPS; s++)
		printf("%5d%%", s * 10);
	printf("%9s\n", "avail %");
	for (int k = 0; k < n; k++) {
		double raw = bench_get(b, im[k].name, "work_slice_time_w000");

		printf("   %-12s", im[k].name);
		cell(raw, 8, "%.1f");
		for (int s = 1; s < SWEEP_STEPS; s++) {
			char metric[40];
			double t;

			snprintf(metric, sizeof(metric), "work_slice_time_w%03d", s * 10);
			t = bench_get(b, im[k].name, metric);
			cell(t > 0 && raw > 0 ? t / raw : -1, 6, "%.2f");
		}
		cell(bench_get(b, im[k].name, "cpu_avail_work_slice"), 9, "%.0f");
		printf("\n");
	}
}

static void print_cpu(const struct bench *b, const struct bar_opts *o, const struct impl *im, int n)
{
	static const char *const m[3] = { "app_cpu_post_wait", "app_cpu_post_overlap", "app_cpu_wait_overlap" };

	printf("\n4. application thread CPU time (CLOCK_THREAD_CPUTIME_ID, user + kernel), us/call:\n"
	       "   post + wait in the tight ibarrier loop of table 1 (%% of its wall time), and\n"
	       "   post and wait apart around the 100%% work slice of table 3\n");
	printf("   %-18s%12s%11s%12s%12s\n", "impl", "post+wait", "% of wall", "post", "wait");
	for (int k = 0; k < n; k++) {
		double c = bench_get(b, im[k].name, m[0]), w = bench_get(b, im[k].name, "ibarrier_latency");

		printf("   %-18s", im[k].name);
		cell(c, 12, "%.1f");
		cell(c >= 0 && w > 0 ? 100 * c / w : -1, 11, "%.1f");
		cell(bench_get(b, im[k].name, m[1]), 12, "%.1f");
		cell(bench_get(b, im[k].name, m[2]), 12, "%.1f");
		printf("\n");
	}
	for (int k = 0; k < n; k++) {
		char label[40];

		if (im[k].ptp || o->no_ptp)
			continue;
		ratio_label(label, sizeof(label), &im[k]);
		printf("   %-18s", label);
		cell(ratio_of(b, im[k].name, m[0]), 12, "%.3fx");
		printf("%11s", "");
		cell(ratio_of(b, im[k].name, m[1]), 12, "%.3fx");
		cell(ratio_of(b, im[k].name, m[2]), 12, "%.3fx");
		printf("\n");
	}
}

static void print_targets(const struct bench *b, const struct bar_opts *o, const struct impl *im, int n)
{
	int missed = 0;

	printf("\ntargets (reported, never asserted; latency verdicts on the mean, as specified)\n");
	for (int k = 0; k < n; k++) {
		const char *name = im[k].name;
		char ctx[64];

		if (im[k].ptp)
			continue;
		if (!o->no_ptp) {
			snprintf(ctx, sizeof(ctx), "median %.2fx", ratio_of(b, name, "barrier_latency_p50"));
			missed += target_ratio("barrier latency mq/ptp <= 1.10x", name,
					       ratio_of(b, name, "barrier_latency"), 1.10, true, ctx);
			snprintf(ctx, sizeof(ctx), "median %.2fx", ratio_of(b, name, "ibarrier_latency_p50"));
			missed += target_ratio("ibarrier latency mq/ptp <= 1.10x", name,
					       ratio_of(b, name, "ibarrier_latency"), 1.10, true, ctx);
		}
		missed += target_pct_min("work-slice availability (fig. 7) >= 90%", name,
					 bench_get(b, name, "cpu_avail_work_slice"), 90);
		if (!o->no_ptp) {
			snprintf(ctx, sizeof(ctx), "%.1f vs %.1f us/call", bench_get(b, name, "app_cpu_post_wait"),
				 bench_get(b, BASELINE, "app_cpu_post_wait"));
			missed += target_ratio("app CPU in post+wait mq/ptp <= 0.10x", name,
					       ratio_of(b, name, "app_cpu_post_wait"), 0.10, true, ctx);
		}
	}
	printf("  info    test-loop availability (fig. 6) has no target: seed 003 saw 30-45%% at 8\n"
	       "          ranks, mq and ptp alike.  Fig. 7 on hardware: ConnectX-2 ~80%%, CPU ~30%%.\n");
	printf("  %d target(s) missed\n", missed);
}

static void report(struct bench *b, const struct bar_opts *o, const struct bar_info *info, const struct impl *im,
		   int n)
{
	if (b->rank != 0)
		return;
	print_header(b, o, info, im, n);
	print_latency(b, o, im, n);
	print_test_loop(b, o, info, im, n);
	print_sweep(b, o, im, n);
	print_cpu(b, o, im, n);
	print_targets(b, o, im, n);
	bench_write_csv(b, BASELINE);
	fflush(stdout);
}

/* ---- options ----------------------------------------------------------------- */

static const char barrier_help[] =
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

static const char main_help_head[] =
"NAME\n"
"    emunic-bench - emunic's offloads against host-progressed baselines\n"
"\n"
"SYNOPSIS\n"
"    emunic-run -n N [-t SECS] emunic-bench SUBCOMMAND [OPTIONS]\n"
"    emunic-bench [SUBCOMMAND] --help\n"
"\n"
"DESCRIPTION\n"
"    Every rank runs the same measurements; rank 0 prints the tables and\n"
"    writes the CSV.  Under QEMU's TCG (the emunic guest) absolute times mean\n"
"    little: the ratios to the baseline are the point.\n"
"\n"
"SUBCOMMANDS\n";

static const char main_help_tail[] =
"\n"
"CSV\n"
"    One header line, then one row a result:\n"
"        bench,impl,ranks,metric,value,unit,ratio_vs_BASE\n"
"    ratio_vs_BASE is value / the baseline impl's value of the same metric\n"
"    (1 for the baseline itself; empty where it has none or it is 0).\n"
"    barrier: BASE is ptp; impl is ptp, mq-sleep or mq-spin (ratio empty\n"
"    with --no-ptp).  Metrics, us unless said:\n"
"      barrier_latency, barrier_latency_p50, ibarrier_latency,\n"
"      ibarrier_latency_p50          table 1 (mean, median)\n"
"      cpu_avail_test_loop (%), test_loop_time_p50, tests_per_call\n"
"                                    table 2 (medians)\n"
"      work_slice_time_w000 .. work_slice_time_w100, cpu_avail_work_slice\n"
"      (%)                           table 3 (medians)\n"
"      app_cpu_post_wait, app_cpu_post_overlap, app_cpu_wait_overlap\n"
"                                    table 4 (means)\n"
"    trig: BASE is app-wait; impl is app-wait, trig-wait or trig-compute.\n"
"    Metrics, us a chain unless said:\n"
"      chain_wall (mean), chain_wall_p50, app_cpu (mean), app_cpu_p50\n"
"      app_cpu_post, app_cpu_wait    trig-wait: the posts, the wait\n"
"      app_cpu_post_p50              trig-*: the posts' median\n"
"      app_cpu_post, app_cpu_check,  trig-compute: the posts, the check,\n"
"      work, done_at_check (count)   the work slice, chains done by then\n"
"      app_cpu_post_ratio (x)        trig-wait's posts / app-wait's app_cpu\n"
"    rndv: BASE is single; impl is single or chunked-S/C.  Metrics, per\n"
"    size (4K, 1M, ...):\n"
"      throughput_SIZE (MB/s)        table 1 (medians of the rounds)\n"
"      sink_throughput_SIZE (MB/s), sink_max_inflight_SIZE (count)\n"
"                                    table 2, with a slow receiver\n"
"    p2p: BASE is host; impl is host, rtr-core, rtr-test, rtr-test-on-init,\n"
"    rtr-wait-on-send or chunked-core.  Metrics, rank 0's medians, per size\n"
"    (8, 4097, 64K, ...):\n"
"      isend_SIZE, irecv_SIZE, test_SIZE (us inside one call), tests_SIZE\n"
"      (count, test calls an iteration), latency_SIZE (us, half the round\n"
"      trip), latency_min_SIZE (us, the fastest), bandwidth_SIZE (MB/s;\n"
"      sizes above the eager limit)\n"
"    conn: BASE is static; impl is static or on-demand.  Metrics, per\n"
"    pattern (ring, barrier, allreduce, alltoall):\n"
"      PATTERN_qps_max, PATTERN_qps_mean (count, over ranks),\n"
"      PATTERN_peers_max (count), PATTERN_create_ms, PATTERN_first_ms,\n"
"      PATTERN_later_ms (the slowest rank's)\n"
"\n"
"ENVIRONMENT\n"
"    EMUNIC_IDLE=spin|sleep   the progress core's idle policy (--idle default)\n"
"    EMUNIC_SINK_MBPS=M       rndv: --sink-mbps M (its first pass stays\n"
"                             unthrottled)\n"
"    EMUNIC_DEVICE, EMUNIC_CPU  as for every emunic program\n"
"\n"
"EXIT STATUS\n"
"    0 done (whether or not targets were met); 2 bad usage (trig, rndv and\n"
"    p2p: also a job of other than 2 ranks; conn: of other than 2 to 16);\n"
"    3 a bootstrap, RDMA, barrier, timeout or wrong-data error, reported on\n"
"    stderr as\n"
"    \"emunic-bench: rank R: SUBCOMMAND IMPL: CALL: ERROR\".\n"
"\n"
"EXAMPLES\n"
"    emunic-run -n 2 -t 300 build/bin/emunic-bench barrier\n"
"    emunic-run -n 4 build/bin/emunic-bench barrier --iters 100 --idle both \\\n"
"        --csv build/bench/barrier-4.csv\n"
"    emunic-run -n 2 -t 120 build/bin/emunic-bench trig --len 100\n"
"    emunic-run -n 2 -t 600 build/bin/emunic-bench rndv --sink-mbps 50 \\\n"
"        --csv build/bench/rndv.csv\n"
"    emunic-run -n 2 -t 600 build/bin/emunic-bench p2p --sizes 8,4097,64K,1M \\\n"
"        --csv build/bench/p2p.csv\n"
"    emunic-run -n 8 -t 600 build/bin/emunic-bench conn --patterns ring,alltoall\n"
"\n"
"SEE ALSO\n"
"    emunic-run(1), emunic-barrier (tests/bin), shared/seeds/003 (CORE-Direct\n"
"    barrier), shared/seeds/000 (overhead and overlap, RTR rendezvous),\n"
"    shared/seeds/002 (connections on demand), shared/seeds/004 (triggered\n"
"    operations, chunked rendezvous)\n";

static void print_help(FILE *f, const char *only);

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	if (!speaks())
		return EXIT_USAGE;
	va_start(ap, fmt);
	fprintf(stderr, "emunic-bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	fprintf(stderr, "usage: emunic-run -n N emunic-bench %s [OPTIONS]; emunic-bench %s%s--help\n",
		cmd ? cmd : "SUBCOMMAND", cmd ? cmd : "", cmd ? " " : "");
	return EXIT_USAGE;
}

static bool parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = (int)v;
	return true;
}

static bool parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return false;
	*out = v;
	return true;
}

/* A subcommand's own options: on_opt(name, val, arg, ctx) takes each one
 * (name without "--") and returns 0 or EXIT_USAGE. */
typedef int (*opt_fn)(const char *cmd, const char *name, int val, const char *arg, void *ctx);

/* The options every subcommand has, ending its table; --quick where listed. */
#define OPTS_COMMON                                                                                \
	{ "timeout-ms", required_argument, NULL, 't' }, { "csv", required_argument, NULL, 'o' }, \
	{ "help", no_argument, NULL, 'h' }, { 0 }
#define OPT_QUICK { "quick", no_argument, NULL, 'Q' }

struct common_opts {
	int timeout_ms;
	const char *csv;
	bool quick;
};

static int opt_int(const char *cmd, const char *name, const char *arg, long lo, long hi, const char *wants,
		   int *out);

/* getopt_long over argv (argv[0] the subcommand): the common options,
 * --help, an unknown or incomplete option and a stray argument are handled
 * here, the rest by on_opt.  0, EXIT_USAGE, or -1 for --help (printed). */
static int parse_opts(const char *cmd, int argc, char **argv, const struct option *lo, opt_fn on_opt, void *ctx,
		      struct common_opts *com)
{
	int c, r;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
		const char *name = NULL;

		r = 0;
		if (c == 'h') {
			if (speaks())
				print_help(stdout, cmd);
			return -1;
		}
		if (c == ':')
			return usage_error(cmd, "%s needs a value", argv[optind - 1]);
		for (int i = 0; lo[i].name && !name; i++)
			name = lo[i].val == c ? lo[i].name : NULL;
		if (!name)
			return usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
		if (c == 't')
			r = opt_int(cmd, name, optarg, 1, 1000000000, "a time > 0", &com->timeout_ms);
		else if (c == 'o')
			com->csv = optarg;
		else if (c == 'Q')
			com->quick = true;
		else
			r = on_opt(cmd, name, c, optarg, ctx);
		if (r)
			return r;
	}
	if (optind != argc)
		return usage_error(cmd, "unexpected argument '%s'", argv[optind]);
	return 0;
}

/* --NAME N with lo <= N <= hi; what wants says it wants. */
static int opt_int(const char *cmd, const char *name, const char *arg, long lo, long hi, const char *wants, int *out)
{
	return parse_int(arg, lo, hi, out) ? 0 : usage_error(cmd, "--%s wants %s, not '%s'", name, wants, arg);
}

static int opt_double(const char *cmd, const char *name, const char *arg, double lo, double hi, const char *wants,
		      double *out)
{
	return parse_double(arg, lo, hi, out) ? 0 : usage_error(cmd, "--%s wants %s, not '%s'", name, wants, arg);
}

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
		return opt_int(cmd, name, arg, 1, 10000000, "a count >= 1", &o->iters);
	case 'w':
		return opt_int(cmd, name, arg, 0, 10000000, "a count >= 0", &p->warmup);
	case 'S':
		return opt_int(cmd, name, arg, 1, 10000000, "a count >= 1", &p->sweep);
	case 's':
		if ((v = emunic_coll_signal_parse(arg)) < 0)
			return usage_error(cmd, "--signal is send or write_imm, not '%s'", arg);
		o->ca.signal = (enum emunic_coll_signal)v;
		return 0;
	case 'c':
		if ((v = emunic_coll_conn_parse(arg)) < 0)
			return usage_error(cmd, "--conn is dense or sparse, not '%s'", arg);
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
			return usage_error(cmd, "--idle is default, spin, sleep or both, not '%s'", arg);
		return 0;
	case 'T':
		r = opt_double(cmd, name, arg, 0, 1000, "a percentage", &pct);
		o->tol = pct / 100;
		return r;
	case 'q':
		return opt_double(cmd, name, arg, 0.001, 1e9, "a time > 0", &o->quantum_us);
	case 'p':
		if (!strcmp(arg, "auto"))
			o->ptp_spin_us = -2;
		else if (!parse_int(arg, -1, 100000000, &o->ptp_spin_us))
			return usage_error(cmd, "--ptp-spin-us wants auto, -1 or a time in us, not '%s'", arg);
		return 0;
	case 'n':
		o->no_ptp = true;
		return 0;
	case 'N':
		return opt_int(cmd, name, arg, -20, 19, "-20..19", &o->app_nice);
	}
	return 0;
}

/* 0, EXIT_USAGE, or -1 for --help (printed). */
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
	int r = parse_opts("barrier", argc, argv, lo, barrier_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = o->ca.timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	o->warmup = p.warmup >= 0 ? p.warmup : (o->iters / 10 > 5 ? o->iters / 10 : 5);
	o->sweep_iters = p.sweep > 0 ? p.sweep : o->iters;
	return 0;
}

static int barrier_main(int argc, char **argv)
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
		return r < 0 ? 0 : r;
	if (!o.no_ptp) {
		im[n].ptp = true;
		snprintf(im[n++].name, sizeof(im[0].name), "ptp");
	}
	for (int k = 0; k < o.nidle; k++) {
		im[n].want = o.idle[k];
		snprintf(im[n++].name, sizeof(im[0].name), "mq-%s", idle_str(o.idle[k]));
	}
	r = bench_init(&b, "barrier", o.csv);
	r = r ? r : bench_calibrate(&b);
	if (!r)
		bench_progress(&b, "%d ranks, %d iterations, work loop %.3f ns/iteration", b.size, o.iters,
			       b.ns_per_iter);
	for (int k = 0; k < n && !r; k++)
		r = run_impl(&b, &o, &im[k], &info, &info.quantum_us[k]);
	if (!r)
		report(&b, &o, &info, im, n);
	return bench_fini(&b, r);
}

/* ==== shared by trig and rndv ================================================ */

/* One device for a measurement, opened by every rank (collective). */
static int open_dev(struct bench *b, const struct emunic_dev_attr *da, struct emunic_dev **dev, char *name,
		    size_t len)
{
	int r = emunic_dev_open(b->boot, da, dev);

	if (r)
		return bench_err(b, r, "emunic_dev_open");
	snprintf(name, len, "%s, progress core idle %s", emunic_dev_name(*dev), idle_str(emunic_dev_idle(*dev)));
	return 0;
}

static double mean(const double *v, int n)
{
	double s = 0;

	for (int i = 0; i < n; i++)
		s += v[i];
	return n > 0 ? s / n : -1;
}

/* ==== trig =================================================================== */

/*
 * trig: a chain of N puts of 8 bytes from rank 0 into a list entry of rank
 * 1, put i + 1 starting once put i completed, driven three ways:
 *   app-wait      the app posts put i + 1 after emunic_ct_wait on put i's
 *                 completion counter (the app-driven chain, the baseline);
 *   trig-wait     the app posts the whole chain as triggered puts (put i
 *                 fires on c[i], counts its completion on c[i + 1]), starts
 *                 it with emunic_ct_inc(c[0]) and waits on c[N];
 *   trig-compute  the same posts, then a work slice (the nop loop, no
 *                 emunic calls) of F x trig-wait's median chain time, then
 *                 one check of c[N]: the app's CPU is the posts and a check.
 * Counters are never reset: the k-th chain on them waits for k.  Rank 1 only
 * serves; at the end it checks that every put landed, and where.
 */

#define TRIG_BASELINE "app-wait"
#define TRIG_MAX_LEN 4096
#define TRIG_CPU_TARGET 0.05		/* the issue's: posts <= 5% of app-driven */
/* Idle between chains, untimed, for every kind alike: without it the
 * posts after trig-compute's work slice pay for the host taking back the
 * vCPU that just computed (a TCG guest has no steal-time accounting, so
 * that counts as the app thread's CPU). */
#define TRIG_PAUSE_US 2000

enum chain_kind { CHAIN_APP_WAIT, CHAIN_TRIG_WAIT, CHAIN_TRIG_COMPUTE, NCHAIN };

static const char *const chain_name[NCHAIN] = { "app-wait", "trig-wait", "trig-compute" };

struct trig_opts {
	int len, iters, warmup, timeout_ms;
	double work_factor;		/* trig-compute's work / trig-wait's median */
	const char *csv;
};

struct chain {
	struct emunic_dev *dev;
	char device[96];
	struct emunic_qp *qp;
	uint64_t *buf;			/* rank 0: the puts' sources; rank 1: the entry */
	struct emunic_mr *mr;
	struct emunic_le *le;		/* rank 1 */
	struct emunic_ct *arrived;	/* rank 1: puts that landed in the entry */
	struct emunic_ct **c;		/* rank 0: c[0..len] */
	struct emunic_op *ops;		/* rank 0: put i, counted on c[i + 1] */
	uint64_t gen0, gen;		/* chains started on c[0]; run on c[1..len] */
	double work_us;			/* trig-compute's work slice */
	int done_at_check;		/* trig-compute chains done when checked */
	uint64_t chains, landed, misplaced;	/* rank 0's chains; rank 1's check, shared */
};

static int chain_open(struct bench *b, const struct trig_opts *o, struct chain *ch)
{
	size_t bytes = (size_t)o->len * sizeof(uint64_t);
	struct emunic_target mine = { 0 }, all[2];
	struct emunic_dev_attr da;
	struct emunic_qp_attr qa;
	int r;

	emunic_dev_attr_init(&da);
	/* A chain's triggers, and its posts, fit at once (defaults: 4096). */
	da.trig_entries = (unsigned)o->len + 64 > 4096 ? (unsigned)o->len + 64 : 0;
	da.ring_entries = 2 * (unsigned)o->len + 64 > 4096 ? 2 * (unsigned)o->len + 64 : 0;
	if ((r = open_dev(b, &da, &ch->dev, ch->device, sizeof(ch->device))))
		return r;
	emunic_qp_attr_init(&qa);
	qa.flags = EMUNIC_QP_TRIGGERED;
	if ((r = emunic_qp_create(ch->dev, 1 - b->rank, &qa, &ch->qp)))
		return bench_err(b, r, "emunic_qp_create (triggered, to rank %d)", 1 - b->rank);
	ch->buf = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
	if (!ch->buf)
		return bench_err(b, -ENOMEM, "the chain's buffer");
	for (int i = 0; i < o->len; i++)
		ch->buf[i] = b->rank ? 0 : (uint64_t)i + 1;
	if ((r = emunic_mr_reg(ch->dev, ch->buf, bytes, &ch->mr)))
		return bench_err(b, r, "emunic_mr_reg (%zu bytes)", bytes);
	if (b->rank == 1) {
		struct emunic_le_attr la = { .mr = ch->mr, .addr = ch->buf, .len = bytes, .shift = 3 };

		if ((r = emunic_ct_alloc(ch->dev, &ch->arrived)))
			return bench_err(b, r, "emunic_ct_alloc (arrivals)");
		la.ct = ch->arrived;
		if ((r = emunic_le_create(ch->dev, &la, &ch->le)))
			return bench_err(b, r, "emunic_le_create (%zu bytes)", bytes);
		mine = emunic_le_target(ch->le);
	} else {
		ch->c = calloc((size_t)o->len + 1, sizeof(*ch->c));
		ch->ops = calloc((size_t)o->len, sizeof(*ch->ops));
		if (!ch->c || !ch->ops)
			return bench_err(b, -ENOMEM, "the chain's counters");
		for (int i = 0; i <= o->len; i++)
			if ((r = emunic_ct_alloc(ch->dev, &ch->c[i])))
				return bench_err(b, r, "emunic_ct_alloc (counter %d of %d)", i, o->len + 1);
	}
	if ((r = emunic_dev_allgather(ch->dev, &mine, sizeof(mine), all)))
		return bench_err(b, r, "emunic_dev_allgather (rank 1's list entry)");
	for (int i = 0; b->rank == 0 && i < o->len; i++)
		ch->ops[i] = (struct emunic_op){ .kind = EMUNIC_OP_PUT, .qp = ch->qp, .addr = &ch->buf[i],
						 .len = sizeof(uint64_t), .mr = ch->mr, .target = all[1],
						 .offset = (uint64_t)i * sizeof(uint64_t), .ct = ch->c[i + 1],
						 .user = (uint64_t)i };
	r = emunic_qp_wait_connected(ch->qp, o->timeout_ms);
	return r ? bench_err(b, r, "emunic_qp_wait_connected (rank %d)", 1 - b->rank) : 0;
}

static int chain_close(struct bench *b, const struct trig_opts *o, struct chain *ch)
{
	int r = 0, t;

	if (ch->le && (t = emunic_le_destroy(ch->le)))
		r = bench_err(b, t, "emunic_le_destroy");
	if (ch->arrived && (t = emunic_ct_free(ch->arrived)))
		r = r ? r : bench_err(b, t, "emunic_ct_free (arrivals)");
	for (int i = 0; ch->c && i <= o->len; i++)
		if (ch->c[i] && (t = emunic_ct_free(ch->c[i])))
			r = r ? r : bench_err(b, t, "emunic_ct_free (counter %d)", i);
	if (ch->mr && (t = emunic_mr_dereg(ch->mr)))
		r = r ? r : bench_err(b, t, "emunic_mr_dereg");
	if (ch->qp && (t = emunic_qp_destroy(ch->qp)))
		r = r ? r : bench_err(b, t, "emunic_qp_destroy");
	if (ch->dev && (t = emunic_dev_close(ch->dev)))
		r = r ? r : bench_err(b, t, "emunic_dev_close");
	free(ch->c);
	free(ch->ops);
	free(ch->buf);
	return r;
}

/* What one chain cost: wall and the app thread's CPU, split for the
 * triggered kinds into the posts and the wait (or the final check). */
struct chain_sample {
	double wall, cpu, post, wait;
};

static int chain_failed(struct bench *b, int kind, int r, const struct emunic_ct_val *v, int at)
{
	if (!r)
		r = -EIO;
	return bench_err(b, r, "%s: put %d: %s (counter success %llu, failure %llu)", chain_name[kind], at,
			 v->failure ? "failed" : "emunic_ct_wait", (unsigned long long)v->success,
			 (unsigned long long)v->failure);
}

static int run_app_chain(struct bench *b, const struct trig_opts *o, struct chain *ch, int kind)
{
	uint64_t t = ch->gen + 1;
	struct emunic_ct_val v = { 0, 0 };

	for (int i = 0; i < o->len; i++) {
		int r = emunic_op_post(ch->dev, &ch->ops[i]);

		if (r)
			return bench_err(b, r, "%s: emunic_op_post (put %d)", chain_name[kind], i);
		r = emunic_ct_wait(ch->c[i + 1], t, &v, o->timeout_ms);
		if (r || v.failure)
			return chain_failed(b, kind, r, &v, i);
	}
	return 0;
}

static int post_trig_chain(struct bench *b, const struct trig_opts *o, struct chain *ch, int kind)
{
	uint64_t *thr = malloc((size_t)o->len * sizeof(*thr));
	int r;

	if (!thr)
		return bench_err(b, -ENOMEM, "%s: thresholds", chain_name[kind]);
	for (int i = 0; i < o->len; i++)
		thr[i] = i ? ch->gen + 1 : ch->gen0 + 1;
	/* The whole chain in one post: one lock, one doorbell. */
	r = emunic_trig_post_n(ch->dev, ch->ops, ch->c, thr, (unsigned)o->len);
	free(thr);
	if (r)
		return bench_err(b, r, "%s: emunic_trig_post_n (%d puts)", chain_name[kind], o->len);
	r = emunic_ct_inc(ch->c[0], (struct emunic_ct_val){ 1, 0 });
	ch->gen0++;
	return r ? bench_err(b, r, "%s: emunic_ct_inc (the start)", chain_name[kind]) : 0;
}

static int run_chain(struct bench *b, const struct trig_opts *o, struct chain *ch, int kind, uint64_t work,
		     struct chain_sample *s)
{
	struct timespec pause = { 0, TRIG_PAUSE_US * 1000 };
	struct emunic_ct_val v = { 0, 0 };
	int64_t w0, c0, c1;
	int r;

	nanosleep(&pause, NULL);
	w0 = mono_ns();
	c0 = cpu_ns();
	if (kind == CHAIN_APP_WAIT) {
		r = run_app_chain(b, o, ch, kind);
		c1 = cpu_ns();
		*s = (struct chain_sample){ .wall = (double)(mono_ns() - w0), .cpu = (double)(c1 - c0), .post = -1,
					    .wait = -1 };
		ch->gen++;
		return r;
	}
	if ((r = post_trig_chain(b, o, ch, kind)))
		return r;
	c1 = cpu_ns();
	s->post = (double)(c1 - c0);
	if (kind == CHAIN_TRIG_COMPUTE) {
		nops(work);
		c1 = cpu_ns();
		/* The one look at the counter: done already, or wait for it. */
		if (!emunic_ct_get(ch->c[o->len], &v) && v.success + v.failure >= ch->gen + 1)
			ch->done_at_check++;
	}
	r = emunic_ct_wait(ch->c[o->len], ch->gen + 1, &v, o->timeout_ms);
	s->wait = (double)(cpu_ns() - c1);
	s->wall = (double)(mono_ns() - w0);
	s->cpu = s->post + s->wait;
	ch->gen++;
	return r || v.failure ? chain_failed(b, kind, r, &v, o->len - 1) : 0;
}

static int measure_chains(struct bench *b, const struct trig_opts *o, struct chain *ch, int kind, double *v)
{
	double *wall = v, *cpu = v + o->iters, *post = v + 2 * o->iters, *wait = v + 3 * o->iters;
	const char *name = chain_name[kind];
	uint64_t work = 0;
	struct chain_sample s;
	int r = 0;

	if (kind == CHAIN_TRIG_COMPUTE) {
		ch->work_us = o->work_factor * bench_get(b, chain_name[CHAIN_TRIG_WAIT], "chain_wall_p50");
		work = work_iters(b, ch->work_us * 1e3);
	}
	for (int i = 0; i < o->warmup && !r; i++)
		r = run_chain(b, o, ch, kind, work, &s);
	ch->done_at_check = 0;
	for (int i = 0; i < o->iters && !r; i++) {
		r = run_chain(b, o, ch, kind, work, &s);
		wall[i] = s.wall / 1e3;
		cpu[i] = s.cpu / 1e3;
		post[i] = s.post / 1e3;
		wait[i] = s.wait / 1e3;
	}
	if (r)
		return r;
	r = bench_add(b, name, "chain_wall", mean(wall, o->iters), "us");
	r = r ? r : bench_add(b, name, "app_cpu", mean(cpu, o->iters), "us");
	if (kind == CHAIN_TRIG_WAIT || kind == CHAIN_TRIG_COMPUTE) {
		r = r ? r : bench_add(b, name, "app_cpu_post", mean(post, o->iters), "us");
		r = r ? r : bench_add(b, name, kind == CHAIN_TRIG_WAIT ? "app_cpu_wait" : "app_cpu_check",
				      mean(wait, o->iters), "us");
	}
	if (kind == CHAIN_TRIG_COMPUTE) {
		r = r ? r : bench_add(b, name, "work", ch->work_us, "us");
		r = r ? r : bench_add(b, name, "done_at_check", ch->done_at_check, "count");
	}
	r = r ? r : bench_add(b, name, "chain_wall_p50", median(wall, o->iters), "us");
	r = r ? r : bench_add(b, name, "app_cpu_p50", median(cpu, o->iters), "us");
	if (kind == CHAIN_TRIG_WAIT || kind == CHAIN_TRIG_COMPUTE)
		r = r ? r : bench_add(b, name, "app_cpu_post_p50", median(post, o->iters), "us");
	bench_progress(b, "[%s] chain of %d: %.1f us (median %.1f), app CPU %.1f us", name, o->len,
		       bench_get(b, name, "chain_wall"), bench_get(b, name, "chain_wall_p50"),
		       bench_get(b, name, "app_cpu"));
	return r;
}

/* Rank 0 says how many chains it ran; rank 1 checks that every put landed
 * (its entry's counter) in its place, and says so. */
static int check_landed(struct bench *b, const struct trig_opts *o, struct chain *ch)
{
	uint64_t mine[2] = { ch->gen, 0 }, all[4];
	int r = emunic_boot_allgather(b->boot, mine, sizeof(mine), all);

	if (r)
		return bench_err(b, r, "the bootstrap allgather of chains run");
	if (b->rank == 1) {
		uint64_t want = all[0] * (uint64_t)o->len;
		struct emunic_ct_val v = { 0, 0 };

		r = emunic_ct_wait(ch->arrived, want, &v, o->timeout_ms);
		mine[0] = v.success;
		for (int i = 0; i < o->len; i++)
			mine[1] += ch->buf[i] != (uint64_t)i + 1;
		if (r || v.failure || v.success != want || mine[1])
			fprintf(stderr, "emunic-bench: rank 1: trig: %llu puts landed of %llu (%llu failed), %llu "
				"entry words wrong\n", (unsigned long long)v.success, (unsigned long long)want,
				(unsigned long long)v.failure, (unsigned long long)mine[1]);
	}
	if ((r = emunic_boot_allgather(b->boot, mine, sizeof(mine), all)))
		return bench_err(b, r, "the bootstrap allgather of rank 1's check");
	ch->chains = all[0];
	ch->landed = all[2];
	ch->misplaced = all[3];
	if (ch->landed == ch->chains * (uint64_t)o->len && !ch->misplaced)
		return 0;
	return b->rank ? -EIO : bench_err(b, -EIO, "rank 1 saw %llu of %llu puts land, %llu entry words wrong",
					  (unsigned long long)ch->landed,
					  (unsigned long long)(ch->chains * (uint64_t)o->len),
					  (unsigned long long)ch->misplaced);
}

static double trig_ratio(const struct bench *b, int kind, const char *metric, const char *base_metric)
{
	double v = bench_get(b, chain_name[kind], metric), base = bench_get(b, TRIG_BASELINE, base_metric);

	return v >= 0 && base > 0 ? v / base : -1;
}

static void trig_report(struct bench *b, const struct trig_opts *o, const struct chain *ch)
{
	int missed;
	char ctx[128];

	if (b->rank != 0)
		return;
	printf("\nemunic-bench trig: a chain of %d puts (8 bytes, rank 0 -> a list entry of rank 1), put\n"
	       "i + 1 started by put i's completion: driven by the app thread vs posted as triggered ops\n", o->len);
	printf("  device       %s; %d ranks, bootstrap %s, %ld CPUs online\n", ch->device, b->size,
	       emunic_boot_method(b->boot), sysconf(_SC_NPROCESSORS_ONLN));
	printf("  chains       %d timed per kind after %d warm-up, %d us idle before each (untimed);\n"
	       "               wall: the first post to the completion the app sees; CPU:\n"
	       "               CLOCK_THREAD_CPUTIME_ID of the app thread (user + kernel), means;\n"
	       "               all values are rank 0's\n", o->iters, o->warmup, TRIG_PAUSE_US);
	printf("  kinds        app-wait      emunic_op_post(put i + 1) after emunic_ct_wait on put i's counter\n"
	       "               trig-wait     emunic_trig_post_n of %d puts (put i on c[i]), emunic_ct_inc(c[0]),\n"
	       "                             emunic_ct_wait(c[%d])\n"
	       "               trig-compute  the same posts, then %.0f us of work (nop loop, no emunic call:\n"
	       "                             %.1f x trig-wait's median), then one check of c[%d]\n",
	       o->len, o->len, ch->work_us, o->work_factor, o->len);
	printf("  rank 1       serves only; %llu of %llu puts landed in its entry, %llu words wrong\n",
	       (unsigned long long)ch->landed, (unsigned long long)ch->chains * (unsigned long long)o->len,
	       (unsigned long long)ch->misplaced);
	printf("  note         under QEMU TCG absolute times mean little: compare the ratios\n");

	printf("\n1. chain of %d: wall time and the app thread's CPU time, us per chain\n", o->len);
	printf("   %-14s%11s%10s%11s%10s%12s%11s%11s\n", "kind", "wall mean", "median", "app CPU", "posts",
	       "wait/check", "x wall", "x CPU");
	for (int k = 0; k < NCHAIN; k++) {
		const char *n = chain_name[k];

		printf("   %-14s", n);
		cell(bench_get(b, n, "chain_wall"), 11, "%.1f");
		cell(bench_get(b, n, "chain_wall_p50"), 10, "%.1f");
		cell(bench_get(b, n, "app_cpu"), 11, "%.1f");
		cell(bench_get(b, n, "app_cpu_post"), 10, "%.1f");
		cell(bench_get(b, n, k == CHAIN_TRIG_COMPUTE ? "app_cpu_check" : "app_cpu_wait"), 12, "%.1f");
		cell(trig_ratio(b, k, "chain_wall_p50", "chain_wall_p50"), 11, "%.3fx");
		cell(trig_ratio(b, k, "app_cpu", "app_cpu"), 11, "%.3fx");
		printf("\n");
	}
	printf("   x wall, x CPU: over %s's (median wall, mean app CPU)\n", TRIG_BASELINE);
	printf("   trig-compute: %d of %d chains were done when the app checked\n", ch->done_at_check, o->iters);

	printf("\ntargets (reported, never asserted)\n");
	snprintf(ctx, sizeof(ctx), "%.1f vs %.1f us/chain; medians %.3fx; trig-compute posts + check %.3fx",
		 bench_get(b, "trig-wait", "app_cpu_post"), bench_get(b, TRIG_BASELINE, "app_cpu"),
		 trig_ratio(b, CHAIN_TRIG_WAIT, "app_cpu_post_p50", "app_cpu_p50"),
		 trig_ratio(b, CHAIN_TRIG_COMPUTE, "app_cpu", "app_cpu"));
	missed = target_ratio("app CPU, triggered posts / app-driven <= 0.05x", "trig-wait",
			      trig_ratio(b, CHAIN_TRIG_WAIT, "app_cpu_post", "app_cpu"), TRIG_CPU_TARGET, true, ctx);
	printf("  info    wall time triggered / app-driven (median): trig-wait %.3fx, no target\n",
	       trig_ratio(b, CHAIN_TRIG_WAIT, "chain_wall_p50", "chain_wall_p50"));
	printf("  %d target(s) missed\n", missed);
	bench_write_csv(b, TRIG_BASELINE);
	fflush(stdout);
}

static const char trig_help[] =
"  trig [OPTIONS]  (2 ranks)\n"
"    A chain of N puts of 8 bytes from rank 0 into a list entry of rank 1,\n"
"    put i + 1 started by put i's completion, driven three ways:\n"
"      app-wait      the app posts put i + 1 (emunic_op_post) after waiting\n"
"                    (emunic_ct_wait) on put i's completion counter;\n"
"      trig-wait     the app posts the chain as triggered puts (put i fires\n"
"                    on counter c[i], counts on c[i + 1]), starts it with\n"
"                    emunic_ct_inc(c[0]) and waits on c[N];\n"
"      trig-compute  the same posts, then work (a nop loop, no emunic calls)\n"
"                    of F x trig-wait's median chain time, then one check\n"
"                    of c[N]: the app thread's CPU is the posts only.\n"
"    Measures per chain the wall time (mean, median) and the app thread's\n"
"    CPU time (CLOCK_THREAD_CPUTIME_ID), for the triggered kinds split into\n"
"    the posts and the wait (or check); ratios to app-wait.  Target: the\n"
"    posts of a triggered chain cost the app <= 5% of the CPU of an\n"
"    app-driven chain.  Rank 1 only serves, then checks every put landed.\n"
"\n"
"    --len N            puts in the chain (default 100, at most 4096)\n"
"    --iters K          timed chains per kind (default 50)\n"
"    --warmup W         untimed chains per kind first (default 5)\n"
"    --work-factor F    trig-compute's work, x trig-wait's median chain\n"
"                       time (default 2)\n"
"    --timeout-ms MS    bound on every connect and wait (default 60000)\n"
"    --quick            a short run, for tests: 5 chains, 1 warm-up\n"
"    --csv FILE         rank 0 writes every result to FILE (see CSV)\n";

struct trig_parse {
	struct trig_opts *o;
	int iters, warmup;
};

static int trig_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct trig_parse *p = ctx;

	switch (val) {
	case 'l':
		return opt_int(cmd, name, arg, 1, TRIG_MAX_LEN, "1..4096", &p->o->len);
	case 'k':
		return opt_int(cmd, name, arg, 1, 1000000, "a count >= 1", &p->iters);
	case 'w':
		return opt_int(cmd, name, arg, 0, 1000000, "a count >= 0", &p->warmup);
	case 'f':
		return opt_double(cmd, name, arg, 0, 1000, "0..1000", &p->o->work_factor);
	}
	return 0;
}

/* 0, EXIT_USAGE, or -1 for --help (printed). */
static int trig_parse(int argc, char **argv, struct trig_opts *o)
{
	static const struct option lo[] = {
		{ "len", required_argument, NULL, 'l' }, { "iters", required_argument, NULL, 'k' },
		{ "warmup", required_argument, NULL, 'w' }, { "work-factor", required_argument, NULL, 'f' },
		OPT_QUICK, OPTS_COMMON
	};
	struct trig_parse p = { .o = o, .warmup = -1 };
	struct common_opts com = { .timeout_ms = o->timeout_ms };
	int r = parse_opts("trig", argc, argv, lo, trig_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	o->iters = p.iters ? p.iters : com.quick ? 5 : 50;
	o->warmup = p.warmup >= 0 ? p.warmup : com.quick ? 1 : 5;
	return 0;
}

static int trig_main(int argc, char **argv)
{
	struct trig_opts o = { .len = 100, .timeout_ms = 60000, .work_factor = 2 };
	struct chain ch = { 0 };
	struct bench b = { 0 };
	double *samp = NULL;
	int r = trig_parse(argc, argv, &o), t;

	if (r)
		return r < 0 ? 0 : r;
	r = bench_init(&b, "trig", o.csv);
	r = r ? r : bench_two_ranks(&b);
	r = r ? r : bench_calibrate(&b);
	if (r)
		return bench_fini(&b, r);
	bench_progress(&b, "chain of %d puts, %d chains per kind, work loop %.3f ns/iteration", o.len, o.iters,
		       b.ns_per_iter);
	samp = calloc(4 * (size_t)o.iters, sizeof(*samp));
	r = samp ? chain_open(&b, &o, &ch) : bench_err(&b, -ENOMEM, "samples");
	for (int k = 0; k < NCHAIN && !r && b.rank == 0; k++)
		r = measure_chains(&b, &o, &ch, k, samp);
	if (!r && b.rank == 0)
		r = bench_add(&b, "trig-wait", "app_cpu_post_ratio",
			      trig_ratio(&b, CHAIN_TRIG_WAIT, "app_cpu_post", "app_cpu"), "x");
	r = r ? r : check_landed(&b, &o, &ch);
	t = chain_close(&b, &o, &ch);
	r = r ? r : t;
	if (!r)
		trig_report(&b, &o, &ch);
	free(samp);
	return bench_fini(&b, r);
}

/* ==== rndv =================================================================== */

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

#define RV_BASELINE "single"
#define RV_MAX_SIZES 16
#define RV_MAX_VARIANTS 9		/* single + 8 chunked */
#define RV_MAX_SIZE ((size_t)256 << 20)
#define RV_MAX_ITERS 200		/* within the endpoint's max_sends */
#define RV_MAX_ROUNDS 50
#define RV_TARGET 0.9			/* chunked / single, sizes >= 1 MiB */
#define RV_TARGET_FROM ((size_t)1 << 20)
#define RV_TAG_CHECK 1
#define RV_TAG_TIMED 2

struct rv_variant {
	char name[40];			/* "single", "chunked-64K/4" */
	const char *label;		/* "single", "64K/4" */
	size_t chunk;			/* SIZE_MAX: one get */
	unsigned credits;
};

struct rv_opts {
	size_t sizes[RV_MAX_SIZES];
	int nsizes;
	struct rv_variant v[RV_MAX_VARIANTS];
	int nv;
	int iters;			/* 0: by size */
	int rounds;
	unsigned sink_mbps;		/* 0: no slow-receiver pass */
	const char *sink_from;		/* "--sink-mbps" or "EMUNIC_SINK_MBPS" */
	int timeout_ms;
	size_t first;			/* the endpoint's, for the number of gets */
	const char *csv;
};

/* What rank 1 saw at one point, shared with rank 0. */
struct rv_res {
	double mbps;
	int32_t max_inflight;		/* sink pass: the most gets of one message in flight */
	int32_t expected;		/* timed receives matched as expected */
	int32_t err;			/* 0, or rank 1 failed here (and said why) */
};

struct rv_info {
	char device[96];
	int expected, timed;		/* over every timed receive */
	bool trace_short;		/* the trace may have dropped records */
};

static void size_str(char *buf, size_t len, size_t v)
{
	if (v >= ((size_t)1 << 20) && !(v & (((size_t)1 << 20) - 1)))
		snprintf(buf, len, "%zuM", v >> 20);
	else if (v >= 1024 && !(v & 1023))
		snprintf(buf, len, "%zuK", v >> 10);
	else
		snprintf(buf, len, "%zu", v);
}

/* K for a size: about `budget` bytes a point, within [lo, hi]; in rounds
 * of *per messages (K rounded up to a multiple of the rounds). */
static int rv_iters(const struct rv_opts *o, size_t size, bool sink, int *rounds, int *per)
{
	size_t budget = sink ? (size_t)16 << 20 : (size_t)64 << 20, k = budget / size;
	int lo = sink ? 3 : 5, hi = sink ? 10 : 50, n;

	n = o->iters ? o->iters : k < (size_t)lo ? lo : k > (size_t)hi ? hi : (int)k;
	*rounds = o->rounds < n ? o->rounds : n;
	*per = (n + *rounds - 1) / *rounds;
	return *rounds * *per;
}

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

static unsigned char rv_pattern(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 8) * 7 + (i >> 16) * 3 + 1);
}

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
		bf->ref[i] = (char)rv_pattern(i);
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

	size_str(sz, sizeof(sz), size);
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
	t0 = mono_ns();
	r = r ? r : rv_batch(b, o, rv, v, bf, size, k, check ? RV_TAG_CHECK : RV_TAG_TIMED);
	if (!r && b->rank == 1) {
		mine.mbps = (double)size * k / ((double)(mono_ns() - t0) / 1e9) / 1e6;
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

static void rv_metric(char *buf, size_t len, const char *prefix, size_t size)
{
	char sz[24];

	size_str(sz, sizeof(sz), size);
	snprintf(buf, len, "%s_%s", prefix, sz);
}

/* A point: the median of its rounds (sorted here), and the most in flight. */
static int rv_record(struct bench *b, const struct rv_opts *o, const struct rv_variant *v, size_t size, bool sink,
		     double *rounds, int n, int inflight)
{
	double mbps = median(rounds, n);
	char m[64], sz[24];
	int r;

	rv_metric(m, sizeof(m), sink ? "sink_throughput" : "throughput", size);
	r = bench_add(b, v->name, m, mbps, "MB/s");
	if (!r && sink) {
		rv_metric(m, sizeof(m), "sink_max_inflight", size);
		r = bench_add(b, v->name, m, inflight, "count");
	}
	size_str(sz, sizeof(sz), size);
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
	if ((r = open_dev(b, &da, &dev, info->device, sizeof(info->device))))
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

/* ---- the report (rank 0) ------------------------------------------------------- */

static double rv_value(const struct bench *b, const struct rv_variant *v, const char *prefix, size_t size)
{
	char m[64];

	rv_metric(m, sizeof(m), prefix, size);
	return bench_get(b, v->name, m);
}

static double rv_ratio(const struct bench *b, const struct rv_opts *o, int i, size_t size)
{
	double x = rv_value(b, &o->v[i], "throughput", size), base = rv_value(b, &o->v[0], "throughput", size);

	return x >= 0 && base > 0 ? x / base : -1;
}

static void rv_size_cells(const struct rv_opts *o, size_t size, bool sink)
{
	char sz[24];

	size_str(sz, sizeof(sz), size);
	int rounds, per;

	printf("   %-6s%4d", sz, rv_iters(o, size, sink, &rounds, &per));
}

static void rv_print_throughput(const struct bench *b, const struct rv_opts *o)
{
	bool marked = false;

	printf("\n1. throughput, MB/s (10^6 bytes/s); x single: chunked / single\n");
	printf("   %-6s%4s%10s", "size", "K", "single");
	for (int i = 1; i < o->nv; i++)
		printf("%10s%10s", o->v[i].label, "x single");
	printf("\n");
	for (int s = 0; s < o->nsizes; s++) {
		size_t size = o->sizes[s];

		rv_size_cells(o, size, false);
		cell(rv_value(b, &o->v[0], "throughput", size), 10, "%.1f");
		for (int i = 1; i < o->nv; i++) {
			double x = rv_ratio(b, o, i, size);
			bool low = size >= RV_TARGET_FROM && x >= 0 && x < RV_TARGET;

			cell(rv_value(b, &o->v[i], "throughput", size), 10, "%.1f");
			cell(x, 9, "%.2fx");
			printf("%s", low ? "*" : i + 1 < o->nv ? " " : "");
			marked = marked || low;
		}
		printf("\n");
	}
	if (marked)
		printf("   *: below the %.1fx target (sizes >= 1M)\n", RV_TARGET);
}

static void rv_print_sink(const struct bench *b, const struct rv_opts *o)
{
	printf("\n2. slow receiver: rank 1's device drains fetched data at %u MB/s (emunic_dev_attr.sink_mbps,\n"
	       "   from %s); MB/s achieved, and the most gets of one message in flight at once\n"
	       "   (rank 1's trace: EMUNIC_TR_ISSUE to EMUNIC_TR_DONE, by request; checked messages\n"
	       "   too); K = 16 MiB / size within [3, 10] unless --iters\n", o->sink_mbps, o->sink_from);
	printf("   %-6s%4s", "size", "K");
	for (int i = 0; i < o->nv; i++)
		printf("%10s%10s", o->v[i].label, "in flight");
	printf("\n");
	for (int s = 0; s < o->nsizes; s++) {
		rv_size_cells(o, o->sizes[s], true);
		for (int i = 0; i < o->nv; i++) {
			cell(rv_value(b, &o->v[i], "sink_throughput", o->sizes[s]), 10, "%.1f");
			cell(rv_value(b, &o->v[i], "sink_max_inflight", o->sizes[s]), 10, "%.0f");
		}
		printf("\n");
	}
}

static void rv_print_targets(const struct bench *b, const struct rv_opts *o)
{
	int missed = 0;

	printf("\ntargets (reported, never asserted)\n");
	for (int i = 1; i < o->nv; i++) {
		double worst = -1;
		size_t at = 0;
		char ctx[64], sz[24];

		for (int s = 0; s < o->nsizes; s++) {
			double x = rv_ratio(b, o, i, o->sizes[s]);

			if (o->sizes[s] >= RV_TARGET_FROM && x >= 0 && (worst < 0 || x < worst)) {
				worst = x;
				at = o->sizes[s];
			}
		}
		size_str(sz, sizeof(sz), at);
		snprintf(ctx, sizeof(ctx), "the lowest, at %s", sz);
		missed += target_ratio("chunked / single >= 0.9x, sizes >= 1M", o->v[i].label, worst, RV_TARGET, false,
				       worst >= 0 ? ctx : NULL);
	}
	if (o->sink_mbps) {
		for (int i = 0; i < o->nv; i++) {
			unsigned limit = o->v[i].chunk == SIZE_MAX ? 1 : o->v[i].credits;
			int most = 0;

			for (int s = 0; s < o->nsizes; s++) {
				double x = rv_value(b, &o->v[i], "sink_max_inflight", o->sizes[s]);

				most = x > most ? (int)x : most;
			}
			printf("  %-7s %-42s %-9s %d (limit %u)\n", most <= (int)limit ? "ok" : "WRONG",
			       "gets in flight a message, slow receiver", o->v[i].label, most, limit);
		}
	}
	printf("  %d target(s) missed\n", missed);
}

static void rv_report(struct bench *b, const struct rv_opts *o, const struct rv_info *info)
{
	char first[24];

	if (b->rank != 0)
		return;
	size_str(first, sizeof(first), o->first);
	printf("\nemunic-bench rndv: chunked receiver-driven rendezvous (engines/rndv) vs one get a message\n");
	printf("  device       %s; %d ranks, bootstrap %s, %ld CPUs online\n", info->device, b->size,
	       emunic_boot_method(b->boot), sysconf(_SC_NPROCESSORS_ONLN));
	printf("  roles        rank 0 sends, rank 1 receives; the first %s bytes travel with the header,\n"
	       "               the rest is fetched by rank 1's gets\n", first);
	printf("  variants     single: one get (chunk SIZE_MAX, credits 1); s/c: chunked, gets of s bytes,\n"
	       "               at most c in flight; an endpoint each (emunic_rndv_create)\n");
	printf("  a size       each variant: one untimed message, its data checked; then %d rounds, each\n"
	       "               variant in turn: K / %d receives posted, one bootstrap barrier, the\n"
	       "               sends; a round's throughput = its bytes / rank 1's time from posting the\n"
	       "               first receive to the last completion; a point's: the median of its\n"
	       "               rounds; K = 64 MiB / size within [5, 50] unless --iters, rounded up to\n"
	       "               a multiple of the rounds; %d of %d timed receives matched expected\n",
	       o->rounds, o->rounds, info->expected, info->timed);
	if (info->trace_short)
		printf("  note         the trace ring is capped: in-flight counts may miss records\n");
	printf("  note         under QEMU TCG absolute rates mean little: compare the ratios\n");
	rv_print_throughput(b, o);
	if (o->sink_mbps)
		rv_print_sink(b, o);
	rv_print_targets(b, o);
	bench_write_csv(b, RV_BASELINE);
	fflush(stdout);
}

/* ---- options -------------------------------------------------------------------- */

static const char rndv_help[] =
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

/* bytes with an optional K, M or G; 0 when not a size in [1, RV_MAX_SIZE]. */
static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return 0;
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (*end || v == 0 || v > (RV_MAX_SIZE >> shift))
		return 0;
	return (size_t)v << shift;
}

static void rv_variant_set(struct rv_variant *v, size_t chunk, unsigned credits)
{
	char sz[24];

	v->chunk = chunk;
	v->credits = credits;
	if (chunk == SIZE_MAX) {
		snprintf(v->name, sizeof(v->name), "single");
	} else {
		size_str(sz, sizeof(sz), chunk);
		snprintf(v->name, sizeof(v->name), "chunked-%s/%u", sz, credits);
	}
	v->label = chunk == SIZE_MAX ? v->name : v->name + strlen("chunked-");
}

/* Calls item(ctx, piece) on each comma-separated piece of list; false at
 * the first it refuses (p2p and conn parse their lists with it too). */
static bool each_item(const char *list, bool (*item)(void *, const char *), void *o)
{
	char *copy = strdup(list), *save = NULL;
	bool ok = copy && *copy;

	for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; t && ok; t = strtok_r(NULL, ",", &save))
		ok = item(o, t);
	free(copy);
	return ok;
}

static bool add_size(void *ctx, const char *s)
{
	struct rv_opts *o = ctx;
	size_t v = parse_size(s);

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
	chunk = parse_size(sz);
	if (!chunk || (chunk & (chunk - 1)) || !parse_int(slash + 1, 1, 4096, &credits))
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
				return usage_error("rndv", "%s: a %zu-byte message would take more than 65536 gets",
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
		return opt_int(cmd, name, arg, 1, RV_MAX_ITERS, "1..200", &p->o->iters);
	case 'r':
		return opt_int(cmd, name, arg, 1, RV_MAX_ROUNDS, "1..50", &p->o->rounds);
	case 'S':
		return opt_int(cmd, name, arg, 1, 1000000, "a rate in MB/s >= 1", &p->mbps);
	}
	return 0;
}

/* 0, EXIT_USAGE, or -1 for --help (printed). */
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
	int r = parse_opts("rndv", argc, argv, lo, rndv_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	if (!each_item(p.sizes ? p.sizes : com.quick ? "64K,1M,4M" : "4K,16K,64K,256K,1M,4M,16M", add_size, o))
		return usage_error("rndv", "--sizes wants up to %d sizes (bytes, K, M or G; 1 .. 256M), not '%s'",
				   RV_MAX_SIZES, p.sizes);
	rv_variant_set(&o->v[o->nv++], SIZE_MAX, 1);
	if (!each_item(p.chunks ? p.chunks : com.quick ? "64K/4" : "64K/2,64K/4,256K/4,1M/2", add_variant, o))
		return usage_error("rndv", "--chunks wants up to %d s/c pairs (s a power of two, c 1..4096), not '%s'",
				   RV_MAX_VARIANTS - 1, p.chunks);
	if (!o->iters && com.quick)
		o->iters = 3;
	o->sink_from = "--sink-mbps";
	if (p.mbps < 0 && env && *env) {
		if (!parse_int(env, 0, 1000000, &p.mbps))
			return usage_error("rndv", "EMUNIC_SINK_MBPS wants a rate in MB/s, not '%s'", env);
		o->sink_from = "EMUNIC_SINK_MBPS";
	}
	o->sink_mbps = p.mbps > 0 ? (unsigned)p.mbps : 0;
	/* The first pass is unthrottled: the device must not take it from
	 * the environment. */
	unsetenv("EMUNIC_SINK_MBPS");
	return rv_check(o);
}

static int rndv_main(int argc, char **argv)
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
		return r < 0 ? 0 : r;
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

/* ==== p2p ==================================================================== */

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
 * host does the same with ibv_post_send / ibv_post_recv / one ibv_poll_cq a
 * test, except that rank 0 posts its receive before its send: a SEND that
 * finds no receive is an RNR NAK and a retry 0.64 ms later, which would
 * measure the retry timer, not the host.
 * A point (size, impl): W warm-up iterations (the first checks the data
 * both ways), K iterations with each call timed (the overhead: time inside
 * isend, irecv and test), K timed only as a whole (the latency: half the
 * round trip).  Rank 0's medians.  Sizes take turns impl by impl; the host
 * runs first, with no emunic device open (its progress core would compete).
 */

#define PP_BASELINE "host"
#define PP_MAX_SIZES 16
#define PP_MAX_IMPLS 6			/* host, 4 RTR progress schemes, chunked */
#define PP_MAX_SIZE ((size_t)64 << 20)
#define PP_MAX_EAGER 65536		/* 64 slots of it fit the engine's 4 MiB ring */
#define PP_BUDGET ((size_t)32 << 20)	/* default K: at most this many bytes a pass */
#define PP_TAG 9
#define PP_POLL_CHECK 256		/* test calls between looks at the clock */

struct pp_impl {
	char name[24];			/* CSV impl: host, rtr-core, .., chunked-core */
	bool host;
	unsigned proto, progress;
	struct emunic_rndv *rv;
};

struct pp_opts {
	size_t sizes[PP_MAX_SIZES];
	int nsizes;
	struct pp_impl im[PP_MAX_IMPLS];
	int nim;
	size_t eager;
	int iters;			/* 0: by size */
	int warmup;
	int timeout_ms;
	const char *csv;
};

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
	return timed ? mono_ns() : 0;
}

/* ns since t0, less the clock read the measurement itself costs. */
static double pp_since(const struct pp_run *x, int64_t t0, bool timed)
{
	double d;

	if (!timed)
		return 0;
	d = (double)(mono_ns() - t0) - x->b->clock_ns;
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
	int64_t deadline = mono_ns() + (int64_t)x->o->timeout_ms * 1000000;
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
		if (!r && ++n % PP_POLL_CHECK == 0 && mono_ns() > deadline)
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
	t1 = mono_ns();
	for (int i = 0; i < k && !r; i++) {
		struct pp_sample dummy, *si = s ? &s[i] : &dummy;
		int64_t t0 = t1;

		*si = (struct pp_sample){ 0 };
		x->check = check && i == 0;
		if (x->b->rank == 0)
			r = pp_iter_ping(x, si, s != NULL);
		else
			r = pp_iter_pong(x, &next, i + 1 < k, si, s != NULL);
		t1 = mono_ns();
		if (wall)
			wall[i] = (double)(t1 - t0) - x->b->clock_ns;
	}
	x->check = false;
	return r;
}

static int pp_iters(const struct pp_opts *o, size_t size)
{
	size_t k = PP_BUDGET / size;

	return o->iters ? o->iters : k < 10 ? 10 : k > 100 ? 100 : (int)k;
}

static void pp_metric(char *buf, size_t len, const char *prefix, size_t size)
{
	char sz[24];

	size_str(sz, sizeof(sz), size);
	snprintf(buf, len, "%s_%s", prefix, sz);
}

static int pp_add(struct bench *b, const char *impl, const char *prefix, size_t size, double v, const char *unit)
{
	char m[64];

	pp_metric(m, sizeof(m), prefix, size);
	return bench_add(b, impl, m, v, unit);
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
		med[j] = median(v, k);
		r = pp_add(b, im->name, name[j], size, med[j], j == 3 ? "count" : "us");
	}
	lat = median(wall, k) / 2 / 1e3;
	r = r ? r : pp_add(b, im->name, "latency", size, lat, "us");
	/* median() sorted wall: the fastest round trip, for when iterations
	 * fall into a fast and a slow mode (a vCPU waiting for a tick). */
	r = r ? r : pp_add(b, im->name, "latency_min", size, wall[0] / 2 / 1e3, "us");
	if (!r && size > o->eager)
		r = pp_add(b, im->name, "bandwidth", size, lat > 0 ? (double)size / lat : -1, "MB/s");
	free(v);
	size_str(sz, sizeof(sz), size);
	if (!r)
		bench_progress(b, "%-17s %6s: latency %.1f us; isend %.1f us, irecv %.1f us, %.0f tests of %.2f us", im->name,
			       sz, lat, med[0], med[1], med[3], med[2]);
	return r;
}

/* One point on both ranks: warm-up, overhead, latency; rank 0 records. */
static int pp_point(struct pp_run *x, size_t size)
{
	int k = pp_iters(x->o, size), r;
	struct pp_sample *s = calloc((size_t)k, sizeof(*s));
	double *wall = calloc((size_t)k, sizeof(*wall));

	x->size = size;
	r = s && wall ? 0 : bench_err(x->b, -ENOMEM, "samples");
	r = r ? r : pp_pass(x, x->o->warmup, NULL, NULL, true);
	r = r ? r : pp_pass(x, k, s, NULL, false);
	r = r ? r : pp_pass(x, k, NULL, wall, false);
	if (!r && x->b->rank == 0)
		r = pp_record(x->b, x->o, x->im, size, s, wall, k);
	free(s);
	free(wall);
	return r;
}

/* Every rank sends and checks the same pattern. */
static void pp_fill(char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)rv_pattern(i);
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
	if ((r = open_dev(b, &da, &dev, device, dlen)))
		return r;
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

static double pp_value(const struct bench *b, const struct pp_impl *im, const char *prefix, size_t size)
{
	char m[64];

	pp_metric(m, sizeof(m), prefix, size);
	return bench_get(b, im->name, m);
}

static void pp_print_table(const struct bench *b, const struct pp_opts *o)
{
	printf("\n1. ping-pong, rank 0's medians: us inside one isend, one irecv and one test call; test\n"
	       "   calls an iteration; latency = half the round trip, us; x host = latency / host's;\n"
	       "   min = the fastest half round trip; MB/s = size / latency (rendezvous sizes)\n");
	printf("   %-8s%-18s%5s%10s%10s%10s%8s%11s%9s%10s%9s\n", "size", "impl", "K", "isend", "irecv", "test", "tests",
	       "latency", "x host", "min", "MB/s");
	for (int s = 0; s < o->nsizes; s++) {
		size_t size = o->sizes[s];
		char sz[24];

		size_str(sz, sizeof(sz), size);
		for (int i = 0; i < o->nim; i++) {
			const struct pp_impl *im = &o->im[i];
			double lat = pp_value(b, im, "latency", size), base = pp_value(b, &o->im[0], "latency", size);

			printf("   %-8s%-18s%5d", sz, im->name, pp_iters(o, size));
			cell(pp_value(b, im, "isend", size), 10, "%.1f");
			cell(pp_value(b, im, "irecv", size), 10, "%.1f");
			cell(pp_value(b, im, "test", size), 10, "%.2f");
			cell(pp_value(b, im, "tests", size), 8, "%.0f");
			cell(lat, 11, "%.1f");
			cell(lat >= 0 && base > 0 ? lat / base : -1, 9, "%.2fx");
			cell(pp_value(b, im, "latency_min", size), 10, "%.1f");
			cell(pp_value(b, im, "bandwidth", size), 9, "%.1f");
			printf("\n");
		}
	}
}

static void pp_report(struct bench *b, const struct pp_opts *o, const char *device)
{
	char eager[24];

	if (b->rank != 0)
		return;
	size_str(eager, sizeof(eager), o->eager);
	printf("\nemunic-bench p2p: ping-pong through the point-to-point engine (engines/rndv) vs a\n"
	       "host-progressed ping-pong (host: SEND/RECV over the same verbs, posted and polled by the app)\n");
	printf("  device       %s; %d ranks, bootstrap %s, %ld CPUs online\n", device, b->size,
	       emunic_boot_method(b->boot), sysconf(_SC_NPROCESSORS_ONLN));
	printf("  protocols    eager up to %s bytes (attr.first), whole in a slot; longer: rtr-* the\n"
	       "               receiver-initiated rendezvous (seed 000) under progress core, test,\n"
	       "               test-on-init, wait-on-send; chunked-core the chunked receiver-driven\n"
	       "               one (seed 004) under the progress core; an endpoint each, one device\n", eager);
	printf("  iteration    rank 0: isend(ping), irecv(pong), emunic_test on each not done, in turn,\n"
	       "               until both are; rank 1: test its receive (posted an iteration ahead)\n"
	       "               until done, irecv(next), isend(pong), test until done.  host: the same\n"
	       "               with post send / post receive / one CQ poll a test, but rank 0 posts its\n"
	       "               receive first (a SEND with no receive waits for an RNR retry)\n");
	printf("  a point      %d warm-up iterations (the first checks the data both ways), K with each\n"
	       "               call timed, less one clock read (%.2f us) a call, K timed as a whole;\n"
	       "               K = 32 MiB / size within [10, 100] unless --iters; engine isend/irecv\n"
	       "               of a rendezvous size include registering the buffer\n", o->warmup, b->clock_ns / 1e3);
	printf("  note         under QEMU TCG absolute times mean little: compare the ratios\n");
	pp_print_table(b, o);
	bench_write_csv(b, PP_BASELINE);
	fflush(stdout);
}

/* ---- options -------------------------------------------------------------------- */

static const char p2p_help[] =
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
"    round trip and MB/s (size / latency, rendezvous sizes).  One table, a\n"
"    row per size and impl.\n"
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
	size_t v = parse_size(s);

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
		return opt_int(cmd, name, arg, 1, PP_MAX_EAGER, "1..65536", &p->eager);
	case 'k':
		return opt_int(cmd, name, arg, 1, 1000000, "a count >= 1", &p->o->iters);
	case 'w':
		/* At least 1: the first warm-up iteration checks the data. */
		return opt_int(cmd, name, arg, 1, 1000000, "a count >= 1", &p->warmup);
	}
	return 0;
}

/* 0, EXIT_USAGE, or -1 for --help (printed). */
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
	int r = parse_opts("p2p", argc, argv, lo, p2p_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	o->eager = (size_t)p.eager;
	snprintf(defaults, sizeof(defaults), "8,%zu,64K,1M", o->eager + 1);
	if (!each_item(p.sizes ? p.sizes : defaults, pp_add_size, o))
		return usage_error("p2p", "--sizes wants up to %d sizes (bytes, K, M or G; 1 .. 64M), not '%s'",
				   PP_MAX_SIZES, p.sizes);
	o->im[o->nim++] = (struct pp_impl){ .name = PP_BASELINE, .host = true };
	if (!each_item(p.variants ? p.variants : "core,test,test-on-init,wait-on-send,chunked", pp_add_variant, o))
		return usage_error("p2p", "--variants wants some of core, test, test-on-init, wait-on-send and "
				   "chunked, each once, not '%s'", p.variants);
	if (!o->iters && com.quick)
		o->iters = 5;
	o->warmup = p.warmup >= 0 ? p.warmup : com.quick ? 1 : 3;
	return 0;
}

static int p2p_main(int argc, char **argv)
{
	struct pp_opts o = { .timeout_ms = 60000 };
	char device[96] = "?", *ref = NULL;
	struct bench b = { 0 };
	int r = p2p_parse(argc, argv, &o);

	if (r)
		return r < 0 ? 0 : r;
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

/* ==== conn =================================================================== */

/*
 * conn: seed 002 table 2.  QPs per rank and start-up time of the point-to-
 * point engine with a static full mesh (every pair connected at create)
 * against connections on demand (EMUNIC_RNDV_ON_DEMAND: a QP at first use),
 * under four communication patterns:
 *   ring       send to rank + 1, receive from rank - 1 (8 bytes);
 *   barrier    dissemination: round k sends to rank + 2^k, receives from
 *              rank - 2^k (0 bytes);
 *   allreduce  recursive doubling, 8 bytes (partner rank ^ 2^k, the sum
 *              checked); for other than a power of two ranks dissemination
 *              partners as barrier's;
 *   alltoall   every rank sends 64 bytes to every other.
 * A run (pattern, mode) has a device of its own (an on-demand endpoint owns
 * its device's QPs, so emunic_dev_qps counts exactly its connections): time
 * emunic_rndv_create, the first iteration (first use: connecting, on
 * demand), the mean of the later ones; each iteration after a bootstrap
 * barrier; then the device's QPs and the endpoint's peers_connected.
 */

#define CN_MAX_RANKS 16
#define CN_MAX_ROUNDS 4			/* log2(16) */
#define CN_MSG 64			/* the largest message, alltoall's */

enum cn_pattern { CN_RING, CN_BARRIER, CN_ALLREDUCE, CN_ALLTOALL, CN_NPAT };
enum cn_mode { CN_STATIC, CN_ON_DEMAND, CN_NMODE };

static const char *const cn_pat_name[CN_NPAT] = { "ring", "barrier", "allreduce", "alltoall" };
static const size_t cn_pat_len[CN_NPAT] = { 8, 0, 8, CN_MSG };
static const char *const cn_mode_name[CN_NMODE] = { "static", "on-demand" };

struct cn_opts {
	int pat[CN_NPAT];		/* in the order given */
	int npat;
	int iters;
	int timeout_ms;
	const char *csv;
};

/* Messages posted together, then waited for together. */
struct cn_round {
	int to[CN_MAX_RANKS], from[CN_MAX_RANKS];
	int nto, nfrom;
};

struct cn_sched {
	struct cn_round round[CN_MAX_ROUNDS];
	int nround;
	size_t len;
	bool sum;			/* allreduce on a power of two: the sum is checked */
};

/* One rank's run, gathered by rank 0. */
struct cn_res {
	double create_ms, first_ms, later_ms;
	uint32_t qps, peers;
};

static void cn_pair(struct cn_round *rd, int to, int from)
{
	rd->to[rd->nto++] = to;
	rd->from[rd->nfrom++] = from;
}

static void cn_schedule(int pat, int rank, int n, struct cn_sched *s)
{
	bool pow2 = !(n & (n - 1));

	*s = (struct cn_sched){ .len = cn_pat_len[pat], .sum = pat == CN_ALLREDUCE && pow2 };
	if (pat == CN_RING) {
		cn_pair(&s->round[s->nround++], (rank + 1) % n, (rank + n - 1) % n);
	} else if (pat == CN_ALLTOALL) {
		/* Staggered, so not every rank sends to rank 0 first. */
		for (int d = 1; d < n; d++)
			cn_pair(&s->round[0], (rank + d) % n, (rank + n - d) % n);
		s->nround = 1;
	} else {
		for (int d = 1; d < n; d <<= 1) {
			struct cn_round *rd = &s->round[s->nround++];

			if (s->sum)
				cn_pair(rd, rank ^ d, rank ^ d);
			else
				cn_pair(rd, (rank + d) % n, (rank + n - d) % n);
		}
	}
}

/* Every request of a round, under one deadline: a peer that never comes
 * costs the timeout once, not once a request. */
static int cn_wait_all(struct bench *b, const struct cn_opts *o, struct emunic_req **q, const int *peer, int nrecv,
		       int n, size_t len, const char *what)
{
	int64_t deadline = mono_ns() + (int64_t)o->timeout_ms * 1000000;
	int r = 0;

	for (int i = 0; i < n; i++) {
		int64_t left = (deadline - mono_ns()) / 1000000;
		const char *dir = i < nrecv ? "a receive from" : "a send to";
		struct emunic_status st;
		int t = emunic_wait(q[i], &st, left > 0 ? (int)left : 0);

		if (t)
			r = r ? r : bench_err(b, t, "%s: %s rank %d: emunic_wait", what, dir, peer[i]);
		else if (st.error || st.len != len)
			r = r ? r : bench_err(b, st.error ? st.error : -EIO, "%s: %s rank %d completed with error %d, "
					      "%zu bytes (want %zu)", what, dir, peer[i], st.error, st.len, len);
		/* A request that did not complete stays: the run ends. */
		else if ((t = emunic_req_free(q[i])))
			r = r ? r : bench_err(b, t, "%s: emunic_req_free", what);
	}
	return r;
}

/* One round: receives first, then the sends, then all of them done. */
static int cn_round_run(struct bench *b, const struct cn_opts *o, struct emunic_rndv *rv, const struct cn_sched *s,
			int k, int tag, uint64_t *val, const char *what)
{
	const struct cn_round *rd = &s->round[k];
	struct emunic_req *q[2 * CN_MAX_RANKS];
	int peer[2 * CN_MAX_RANKS];
	uint64_t in[CN_MAX_RANKS][CN_MSG / 8] = { { 0 } }, out[CN_MSG / 8] = { *val };
	int n = 0, r = 0;

	for (int j = 0; j < rd->nfrom && !r; j++, n++)
		if ((r = emunic_irecv(rv, in[j], s->len, peer[n] = rd->from[j], tag, &q[n])))
			r = bench_err(b, r, "%s: round %d: emunic_irecv from rank %d", what, k, rd->from[j]);
	for (int j = 0; j < rd->nto && !r; j++, n++)
		if ((r = emunic_isend(rv, out, s->len, peer[n] = rd->to[j], tag, &q[n])))
			r = bench_err(b, r, "%s: round %d: emunic_isend to rank %d", what, k, rd->to[j]);
	if (r)
		return r;
	r = cn_wait_all(b, o, q, peer, rd->nfrom, n, s->len, what);
	if (!r && s->sum)
		*val += in[0][0];
	return r;
}

/* One iteration of the pattern on this rank. */
static int cn_iter(struct bench *b, const struct cn_opts *o, struct emunic_rndv *rv, const struct cn_sched *s,
		   int it, const char *what)
{
	uint64_t val = (uint64_t)b->rank + 1, want = (uint64_t)b->size * (b->size + 1) / 2;
	int r = 0;

	for (int k = 0; k < s->nround && !r; k++)
		r = cn_round_run(b, o, rv, s, k, (it % 100000) * CN_MAX_ROUNDS + k, &val, what);
	if (!r && s->sum && val != want)
		r = bench_err(b, -EIO, "%s: iteration %d: the sum is %llu, want %llu", what, it, (unsigned long long)val,
			      (unsigned long long)want);
	return r;
}

/* Out of band: every rank starts a timed step together. */
static int cn_sync(struct bench *b, struct emunic_dev *dev, const char *what)
{
	int r = emunic_dev_barrier(dev);

	return r ? bench_err(b, r, "%s: emunic_dev_barrier", what) : 0;
}

/* The timed part of a run, on an open device. */
static int cn_measure(struct bench *b, const struct cn_opts *o, struct emunic_dev *dev, int pat, int mode,
		      struct cn_res *res, const char *what)
{
	struct emunic_rndv *rv = NULL;
	struct emunic_rndv_attr ra;
	struct emunic_rndv_stats st;
	struct cn_sched s;
	double later = 0;
	int64_t t;
	int r, e;

	cn_schedule(pat, b->rank, b->size, &s);
	emunic_rndv_attr_init(&ra);
	ra.connect_timeout_ms = o->timeout_ms;
	ra.flags = mode == CN_ON_DEMAND ? EMUNIC_RNDV_ON_DEMAND : 0;
	if ((r = cn_sync(b, dev, what)))
		return r;
	t = mono_ns();
	if ((r = emunic_rndv_create(dev, &ra, &rv)))
		return bench_err(b, r, "%s: emunic_rndv_create", what);
	res->create_ms = (double)(mono_ns() - t) / 1e6;
	for (int it = 0; it < o->iters && !r; it++) {
		r = cn_sync(b, dev, what);
		t = mono_ns();
		r = r ? r : cn_iter(b, o, rv, &s, it, what);
		if (it == 0)
			res->first_ms = (double)(mono_ns() - t) / 1e6;
		else
			later += (double)(mono_ns() - t) / 1e6;
	}
	res->later_ms = o->iters > 1 ? later / (o->iters - 1) : -1;
	res->qps = emunic_dev_qps(dev);
	if (!r && (e = emunic_rndv_stats(rv, &st)))
		r = bench_err(b, e, "%s: emunic_rndv_stats", what);
	res->peers = r ? 0 : st.peers_connected;
	/* After a failure requests may be live: leave the endpoint. */
	if (!r && (e = emunic_rndv_destroy(rv)))
		r = bench_err(b, e, "%s: emunic_rndv_destroy", what);
	return r;
}

static void cn_metric(char *buf, size_t len, int pat, const char *what)
{
	snprintf(buf, len, "%s_%s", cn_pat_name[pat], what);
}

/* Rank 0: QPs max and mean over ranks, times the slowest rank's. */
static int cn_record(struct bench *b, int pat, int mode, const struct cn_res *all)
{
	double v[6] = { 0, 0, 0, 0, 0, 0 };	/* qps max, mean, peers max, create, first, later */
	static const char *const name[6] = { "qps_max", "qps_mean", "peers_max", "create_ms", "first_ms", "later_ms" };
	static const char *const unit[6] = { "count", "count", "count", "ms", "ms", "ms" };
	int r = 0;

	for (int i = 0; i < b->size; i++) {
		v[0] = all[i].qps > v[0] ? all[i].qps : v[0];
		v[1] += (double)all[i].qps / b->size;
		v[2] = all[i].peers > v[2] ? all[i].peers : v[2];
		v[3] = all[i].create_ms > v[3] ? all[i].create_ms : v[3];
		v[4] = all[i].first_ms > v[4] ? all[i].first_ms : v[4];
		v[5] = all[i].later_ms > v[5] || i == 0 ? all[i].later_ms : v[5];
	}
	for (int j = 0; j < 6 && !r; j++) {
		char m[40];

		cn_metric(m, sizeof(m), pat, name[j]);
		r = bench_add(b, cn_mode_name[mode], m, v[j], unit[j]);
	}
	bench_progress(b, "[%s %s] QPs/rank max %.0f mean %.1f; create %.1f ms, first %.1f ms, later %.2f ms",
		       cn_pat_name[pat], cn_mode_name[mode], v[0], v[1], v[3], v[4], v[5]);
	return r;
}

/* A run: a fresh device, the measurement, every rank's result to rank 0.
 * A rank that fails ends here, before the exchange: emunic-run then ends
 * the others (which would wait for it), and its error is the first line. */
static int cn_run(struct bench *b, const struct cn_opts *o, int pat, int mode, struct cn_res *all, char *device,
		  size_t dlen)
{
	struct cn_res mine = { .later_ms = -1 };
	struct emunic_dev_attr da;
	struct emunic_dev *dev = NULL;
	char what[48];
	int r;

	snprintf(what, sizeof(what), "%s %s", cn_pat_name[pat], cn_mode_name[mode]);
	emunic_dev_attr_init(&da);
	r = open_dev(b, &da, &dev, device, dlen);
	r = r ? r : cn_measure(b, o, dev, pat, mode, &mine, what);
	if (r)
		return r;
	if ((r = emunic_boot_allgather(b->boot, &mine, sizeof(mine), all)))
		return bench_err(b, r, "%s: the bootstrap allgather of the results", what);
	if ((r = emunic_dev_close(dev)))
		return bench_err(b, r, "%s: emunic_dev_close", what);
	return b->rank ? 0 : cn_record(b, pat, mode, all);
}

/* ---- the report (rank 0) ------------------------------------------------------- */

static double cn_value(const struct bench *b, int pat, int mode, const char *what)
{
	char m[40];

	cn_metric(m, sizeof(m), pat, what);
	return bench_get(b, cn_mode_name[mode], m);
}

static void cn_report(struct bench *b, const struct cn_opts *o, const char *device)
{
	if (b->rank != 0)
		return;
	printf("\nemunic-bench conn: point-to-point connections, static full mesh vs on demand (seed 002)\n");
	printf("  device       %s; %d ranks, bootstrap %s, %ld CPUs online\n", device, b->size,
	       emunic_boot_method(b->boot), sysconf(_SC_NPROCESSORS_ONLN));
	printf("  patterns     ring: to rank + 1, from rank - 1 (8 bytes); barrier: dissemination, round k\n"
	       "               to rank + 2^k, from rank - 2^k (0 bytes); allreduce: recursive doubling,\n"
	       "               8 bytes (not a power of two: dissemination partners); alltoall: 64 bytes\n"
	       "               to every other rank\n");
	printf("  modes        static: every pair connected at emunic_rndv_create; on-demand:\n"
	       "               EMUNIC_RNDV_ON_DEMAND, a QP at the first message to or from a peer\n");
	printf("  a run        (pattern, mode) on a device of its own: emunic_rndv_create, then %d\n"
	       "               iterations, each after a bootstrap barrier: the first (first use), the\n"
	       "               mean of the rest; QPs: emunic_dev_qps after them, max and mean over\n"
	       "               ranks; times: the slowest rank's\n"
	       "  peers        emunic_rndv_stats().peers_connected, max over ranks: the QPs the\n"
	       "               endpoint itself has used; on demand, a QP a peer connected for its\n"
	       "               messages is counted in QPs at once, in peers only once this rank sends\n"
	       "               to that peer (or acknowledges its slots explicitly)\n", o->iters);
	printf("  note         under QEMU TCG absolute times mean little: compare static with on-demand\n");
	printf("\n1. QPs per rank and start-up time, ms (seed 002 table 2)\n");
	printf("   %-11s%-11s%8s%7s%7s%11s%10s%10s%14s\n", "pattern", "mode", "QPs max", "mean", "peers", "create",
	       "first", "later", "create+first");
	for (int p = 0; p < o->npat; p++)
		for (int m = 0; m < CN_NMODE; m++) {
			int pat = o->pat[p];
			double c = cn_value(b, pat, m, "create_ms"), f = cn_value(b, pat, m, "first_ms");

			printf("   %-11s%-11s", cn_pat_name[pat], cn_mode_name[m]);
			cell(cn_value(b, pat, m, "qps_max"), 8, "%.0f");
			cell(cn_value(b, pat, m, "qps_mean"), 7, "%.1f");
			cell(cn_value(b, pat, m, "peers_max"), 7, "%.0f");
			cell(c, 11, "%.1f");
			cell(f, 10, "%.1f");
			cell(cn_value(b, pat, m, "later_ms"), 10, "%.2f");
			cell(c >= 0 && f >= 0 ? c + f : -1, 14, "%.1f");
			printf("\n");
		}
	printf("   a static mesh has %d QPs a rank\n", b->size - 1);
	bench_write_csv(b, cn_mode_name[CN_STATIC]);
	fflush(stdout);
}

/* ---- options -------------------------------------------------------------------- */

static const char conn_help[] =
"  conn [OPTIONS]  (2 to 16 ranks)\n"
"    Seed 002 table 2: QPs per rank and start-up time of the point-to-point\n"
"    engine, static full mesh (every pair connected at emunic_rndv_create)\n"
"    vs on demand (EMUNIC_RNDV_ON_DEMAND: a QP at the first message), under\n"
"    the patterns ring (to rank + 1, from rank - 1, 8 bytes), barrier\n"
"    (dissemination: round k to rank + 2^k, from rank - 2^k, 0 bytes),\n"
"    allreduce (recursive doubling, 8 bytes; not a power of two ranks:\n"
"    dissemination partners) and alltoall (64 bytes to every other rank).\n"
"    Each (pattern, mode) runs on a device of its own: time\n"
"    emunic_rndv_create, the first iteration (first use, connecting on\n"
"    demand) and the mean of the later ones, each after a bootstrap\n"
"    barrier; then the QPs the device has (emunic_dev_qps) and the\n"
"    endpoint's peers_connected.  Rank 0 prints one table: a row per\n"
"    pattern and mode, QPs a rank (max and mean over ranks), peers, and\n"
"    the slowest rank's create, first and later times in ms.\n"
"\n"
"    --patterns LIST    some of ring, barrier, allreduce, alltoall, each\n"
"                       once (default all four)\n"
"    --iters K          iterations a run, the first included (default 20,\n"
"                       at least 2)\n"
"    --timeout-ms MS    bound on every connect, and on the waits of each\n"
"                       round (default 60000; with --quick 20000)\n"
"    --quick            a short run, for tests: 3 iterations a run\n"
"    --csv FILE         rank 0 writes every result to FILE (see CSV)\n";

static bool cn_add_pattern(void *ctx, const char *s)
{
	struct cn_opts *o = ctx;

	for (int p = 0; p < CN_NPAT; p++) {
		if (strcmp(s, cn_pat_name[p]))
			continue;
		for (int i = 0; i < o->npat; i++)
			if (o->pat[i] == p)
				return false;
		o->pat[o->npat++] = p;
		return true;
	}
	return false;
}

struct conn_parse {
	struct cn_opts *o;
	const char *patterns;
};

static int conn_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct conn_parse *p = ctx;

	switch (val) {
	case 'p':
		p->patterns = arg;
		return 0;
	case 'k':
		return opt_int(cmd, name, arg, 2, 1000000, "a count >= 2", &p->o->iters);
	}
	return 0;
}

/* 0, EXIT_USAGE, or -1 for --help (printed). */
static int conn_parse(int argc, char **argv, struct cn_opts *o)
{
	static const struct option lo[] = {
		{ "patterns", required_argument, NULL, 'p' }, { "iters", required_argument, NULL, 'k' },
		OPT_QUICK, OPTS_COMMON
	};
	struct conn_parse p = { .o = o };
	struct common_opts com = { .timeout_ms = o->timeout_ms };
	int r = parse_opts("conn", argc, argv, lo, conn_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	if (!each_item(p.patterns ? p.patterns : "ring,barrier,allreduce,alltoall", cn_add_pattern, o))
		return usage_error("conn", "--patterns wants some of ring, barrier, allreduce and alltoall, each "
				   "once, not '%s'", p.patterns);
	if (!o->iters)
		o->iters = com.quick ? 3 : 20;
	/* A test run that hangs should fail soon (unless told otherwise). */
	if (com.quick && com.timeout_ms == 60000)
		o->timeout_ms = 20000;
	return 0;
}

static int conn_ranks(struct bench *b)
{
	if (b->size >= 2 && b->size <= CN_MAX_RANKS)
		return 0;
	if (b->rank == 0)
		fprintf(stderr, "emunic-bench: conn needs 2 to %d ranks (emunic-run -n N), not %d\n", CN_MAX_RANKS,
			b->size);
	b->usage = true;
	return -EINVAL;
}

static int conn_main(int argc, char **argv)
{
	struct cn_opts o = { .timeout_ms = 60000 };
	struct cn_res *all = NULL;
	char device[96] = "?";
	struct bench b = { 0 };
	int r = conn_parse(argc, argv, &o);

	if (r)
		return r < 0 ? 0 : r;
	r = bench_init(&b, "conn", o.csv);
	r = r ? r : conn_ranks(&b);
	if (!r && !(all = calloc((size_t)b.size, sizeof(*all))))
		r = bench_err(&b, -ENOMEM, "results");
	if (!r)
		bench_progress(&b, "%d ranks, %d patterns x 2 modes, %d iterations a run", b.size, o.npat, o.iters);
	for (int p = 0; p < o.npat && !r; p++)
		for (int m = 0; m < CN_NMODE && !r; m++)
			r = cn_run(&b, &o, o.pat[p], m, all, device, sizeof(device));
	if (!r)
		cn_report(&b, &o, device);
	free(all);
	return bench_fini(&b, r);
}

/* ==== dispatch ================================================================= */

struct subcmd {
	const char *name;
	const char *summary;
	const char *help;		/* its section of --help */
	int (*run)(int argc, char **argv);	/* argv[0] is the name; returns the exit status */
};

static const struct subcmd subcmds[] = {
	{ "barrier", "offloaded barrier/ibarrier vs the ptp baseline: latency, overlap, overhead",
	  barrier_help, barrier_main },
	{ "trig", "a chain of triggered puts vs the same chain driven by the app: time, app CPU",
	  trig_help, trig_main },
	{ "rndv", "chunked rendezvous vs one get a message: throughput by size, slow receiver",
	  rndv_help, rndv_main },
	{ "p2p", "ping-pong by protocol and progress scheme vs the host: overheads, latency",
	  p2p_help, p2p_main },
	{ "conn", "static mesh vs connections on demand: QPs per rank, start-up time",
	  conn_help, conn_main },
};

#define NSUBCMDS ((int)(sizeof(subcmds) / sizeof(subcmds[0])))

static void print_help(FILE *f, const char *only)
{
	fputs(main_help_head, f);
	for (int i = 0; i < NSUBCMDS; i++)
		fprintf(f, "    %-10s %s\n", subcmds[i].name, subcmds[i].summary);
	for (int i = 0; i < NSUBCMDS; i++) {
		if (only && strcmp(only, subcmds[i].name))
			continue;
		fprintf(f, "\n");
		fputs(subcmds[i].help, f);
	}
	fputs(main_help_tail, f);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_error(NULL, "no subcommand");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		if (speaks())
			print_help(stdout, argc > 2 ? argv[2] : NULL);
		return 0;
	}
	for (int i = 0; i < NSUBCMDS; i++)
		if (!strcmp(argv[1], subcmds[i].name))
			return subcmds[i].run(argc - 1, argv + 1);
	return usage_error(NULL, "unknown subcommand '%s'", argv[1]);
}
