/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench idle: what an idle device costs.  Each rank sleeps S seconds
 * twice, first with no device open (the baseline: the process alone), then
 * with a device open and a connected QP to every other rank (the core
 * thread has nothing to do); the process CPU time (getrusage, all threads)
 * over each sleep, in percent of one CPU, and the core's wake-ups.  The
 * target: an idle device costs <= 1% of a CPU (issue 18).
 */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define IDLE_BASELINE "closed"

struct idle_opts {
	int seconds, timeout_ms;
	const char *csv;
};

static int64_t proc_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/* Percent of one CPU the process used while its main thread slept. */
static double sleep_cpu_pct(int seconds)
{
	struct timespec ts = { seconds, 0 };
	int64_t c0 = proc_cpu_ns(), t0 = bench_mono_ns();

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	return 100.0 * (double)(proc_cpu_ns() - c0) / (double)(bench_mono_ns() - t0);
}

static int idle_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct idle_opts *o = ctx;

	(void)val;
	return bench_opt_int(cmd, name, arg, 1, 3600, "seconds in 1..3600", &o->seconds);
}

static int open_idle(struct bench *b, const struct idle_opts *o, struct emunic_dev **dev, char *name, size_t len)
{
	int r = bench_open_dev(b, NULL, dev, name, len);

	for (int peer = 0; !r && peer < b->size; peer++) {
		struct emunic_qp_attr a;
		struct emunic_qp *qp;

		if (peer == b->rank)
			continue;
		emunic_qp_attr_init(&a);
		r = emunic_qp_create(*dev, peer, &a, &qp);
		r = r ? bench_err(b, r, "emunic_qp_create to rank %d", peer) : emunic_qp_wait_connected(qp, o->timeout_ms);
		if (r)
			r = bench_err(b, r, "the QP to rank %d did not connect", peer);
	}
	return r;
}

int bench_idle_main(int argc, char **argv)
{
	static const struct option lo[] = { { "seconds", required_argument, NULL, 's' }, OPTS_COMMON };
	struct idle_opts o = { .seconds = 10, .timeout_ms = 60000 };
	struct common_opts com = { .timeout_ms = o.timeout_ms };
	struct emunic_dev_stats st = { 0 };
	struct emunic_dev *dev = NULL;
	char device[96] = "?";
	double base = 0, idle = 0;
	struct bench b = { 0 };
	int r = bench_parse_opts("idle", argc, argv, lo, idle_opt, &o, &com);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	o.timeout_ms = com.timeout_ms;
	o.csv = com.csv;
	r = bench_init(&b, "idle", o.csv);
	if (!r) {
		bench_progress(&b, "[%s] %d s asleep with no device open", IDLE_BASELINE, o.seconds);
		base = sleep_cpu_pct(o.seconds);
		r = open_idle(&b, &o, &dev, device, sizeof(device));
	}
	if (!r) {
		emunic_dev_barrier(dev);	/* every rank connected: nothing left to do */
		emunic_dev_stats(dev, &st);
		bench_progress(&b, "[open] %d s asleep with the device open and connected", o.seconds);
		idle = sleep_cpu_pct(o.seconds);
		{
			struct emunic_dev_stats s2;

			emunic_dev_stats(dev, &s2);
			st.core_wakes = s2.core_wakes - st.core_wakes;
			st.core_passes = s2.core_passes - st.core_passes;
		}
		r = bench_add(&b, IDLE_BASELINE, "cpu_pct", base, "%");
		r = r ? r : bench_add(&b, "open", "cpu_pct", idle, "%");
		r = r ? r : bench_add(&b, "open", "core_wakes_per_s", (double)st.core_wakes / o.seconds, "count");
	}
	if (dev)
		emunic_dev_close(dev);
	if (!r && b.rank == 0) {
		printf("\nemunic-bench idle: what an idle device costs\n"
		       "  device       %s, %d rank(s), each with a connected QP to every other\n"
		       "  measurement  process CPU time (all threads) over %d s asleep, %% of one CPU\n\n",
		       device, b.size, o.seconds);
		printf("  %-10s %10s %16s\n", "impl", "CPU %", "core wakes/s");
		printf("  %-10s %10.3f %16s\n", IDLE_BASELINE, base, "-");
		printf("  %-10s %10.3f %16.1f\n", "open", idle, (double)st.core_wakes / o.seconds);
		printf("\ntargets (reported, never asserted)\n");
		printf("  %-7s %-42s %-9s %.3f%% (closed: %.3f%%)\n", idle <= 1.0 ? "met" : "MISSED",
		       "idle device CPU <= 1% of a CPU", "open", idle, base);
		bench_write_csv(&b, IDLE_BASELINE);
	}
	return bench_fini(&b, r);
}

const char bench_idle_help[] =
"  idle [OPTIONS]\n"
"    Each rank sleeps S seconds with no device open, then S seconds with a\n"
"    device open and a connected QP to every other rank, and measures the\n"
"    process CPU time (getrusage: every thread, so the progress core's) over\n"
"    each sleep, in percent of one CPU, and the core's wake-ups a second.\n"
"    Target: an idle device costs <= 1% of a CPU.  Any number of ranks.\n"
"\n"
"    --seconds S        seconds each sleep (default 10)\n"
"    --timeout-ms MS    bound on connecting (default 60000)\n"
"    --csv FILE         rank 0 writes the results to FILE: impl closed or\n"
"                       open; metrics cpu_pct (%), core_wakes_per_s\n";
