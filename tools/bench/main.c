/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench: benchmarks of emunic's offloads against the host-progressed
 * baselines, run under emunic-run (or a PMIx launcher).
 *
 *   emunic-run -n N emunic-bench barrier [OPTIONS]
 *   emunic-run -n N emunic-bench allreduce [OPTIONS]
 *   emunic-run -n N emunic-bench bcast [OPTIONS]
 *   emunic-run -n N emunic-bench alltoall [OPTIONS]
 *   emunic-run -n N emunic-bench gather [OPTIONS]
 *   emunic-run -n N emunic-bench allgather [OPTIONS]
 *   emunic-run -n 2 emunic-bench trig [OPTIONS]
 *   emunic-run -n 2 emunic-bench rndv [OPTIONS]
 *   emunic-run -n 2 emunic-bench p2p [OPTIONS]
 *   emunic-run -n N emunic-bench conn [OPTIONS]      (2 <= N <= 16)
 *   emunic-run -n 2 emunic-bench faults [OPTIONS]
 *   emunic-run -n N emunic-bench idle [OPTIONS]
 *   emunic-run -n 2 emunic-bench potato [OPTIONS]
 *   emunic-run -n 2 emunic-bench instr [OPTIONS]
 *
 * Subcommands are rows of the table `subcmds` below: a name, a one-line
 * summary, a man-page section and a function that takes (argc, argv) with
 * argv[0] the subcommand's name and returns the exit status; each is a file
 * of tools/bench/.  The shared part (bootstrap, results, tables, CSV, the
 * calibrated work loop, target lines) is the bench_ helpers of common.c, the
 * option parsing is opts.c's, both declared in bench.h; a new subcommand
 * uses them, adds its file and one row.
 *
 * barrier (barrier.c): the offloaded barrier against the host-progressed
 * point-to-point one: latency, CPU availability with a test loop and with
 * one work slice, and the application thread's CPU time in post + wait.
 * allreduce: the offloaded allreduce against the host-progressed one
 * (baseline/ptp_allreduce.c): latency and OSU overlap (allreduce.c).
 * bcast: the offloaded broadcast against the host-progressed one
 * (baseline/ptp_bcast.c): latency and OSU overlap, root 0 (bcast.c).
 * alltoall: the offloaded all-to-all against the host-progressed one
 * (baseline/ptp_exchange.c): latency and OSU overlap (alltoall.c).
 * gather and allgather: the offloaded gather (root 0) and allgather against
 * the host-progressed ones (baseline/ptp_exchange.c): latency and OSU
 * overlap, both subcommands one file (gather.c).
 *
 * trig: a chain of triggered puts against the same chain driven by the app
 * thread: wall time and the app's CPU (trig.c).  rndv: chunked
 * receiver-driven rendezvous against one get a message, throughput by size,
 * and with a slow receiver the gets in flight from the trace (rndv.c).
 * p2p: a ping-pong by protocol and progress scheme against a host-progressed
 * one (baseline/ptp_pingpong.c): time inside isend, irecv and test, latency
 * (p2p.c).  conn: QPs per rank and start-up time, static mesh against
 * connections on demand, under four patterns (conn.c).  faults: a stream
 * under seeded connection failures against the same stream without: what
 * reconnecting and resending costs (faults.c).  idle: what an idle device
 * costs in CPU and core wake-ups, against no device at all (idle.c).
 * potato: puts triggered on each other bounce between two engines while the
 * apps sleep, against ib_write_lat's round trip (potato.c).  instr: the
 * instructions (callgrind) of posting a task list and of the engine's work a
 * task and a fired put, against absolute targets (instr.c).
 */
#include "bench.h"

#include <string.h>

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
"    faults: BASE is p=0; impl is p=0 or p=R%.  Metrics: stream_ms (ms, the\n"
"      whole stream), reconnections (count)\n"
"    idle: BASE is closed; impl is closed or open.  Metrics: cpu_pct (%),\n"
"      core_wakes_per_s (count, open)\n"
"    potato: BASE is ib_write_lat; impl is ib_write_lat or triggered.\n"
"      Metric: round_trip (us)\n"
"\n"
"ENVIRONMENT\n"
"    EMUNIC_IDLE=spin|sleep   the progress core's idle policy (--idle default)\n"
"    EMUNIC_SINK_MBPS=M       rndv: --sink-mbps M (its first pass stays\n"
"                             unthrottled)\n"
"    EMUNIC_DEVICE, EMUNIC_CPU  as for every emunic program\n"
"\n"
"EXIT STATUS\n"
"    0 done (whether or not targets were met); 2 bad usage (trig, rndv,\n"
"    p2p, faults and potato: also a job of other than 2 ranks; conn: of\n"
"    other than 2 to 16);\n"
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
"    emunic-run -n 2 -t 600 build/bin/emunic-bench faults --rates 0.1,1\n"
"\n"
"SEE ALSO\n"
"    emunic-run(1), emunic-barrier (tests/bin), shared/seeds/003 (CORE-Direct\n"
"    barrier), shared/seeds/000 (overhead and overlap, RTR rendezvous),\n"
"    shared/seeds/002 (connections on demand), shared/seeds/004 (triggered\n"
"    operations, chunked rendezvous)\n";

struct subcmd {
	const char *name;
	const char *summary;
	const char *help;		/* its section of --help */
	int (*run)(int argc, char **argv);	/* argv[0] is the name; returns the exit status */
};

static const struct subcmd subcmds[] = {
	{ "barrier", "offloaded barrier/ibarrier vs the ptp baseline: latency, overlap, overhead",
	  bench_barrier_help, bench_barrier_main },
	{ "allreduce", "offloaded allreduce (CALC) vs the ptp baseline: latency, OSU overlap",
	  bench_allreduce_help, bench_allreduce_main },
	{ "bcast", "offloaded bcast (binomial tree) vs the ptp baseline: latency, OSU overlap",
	  bench_bcast_help, bench_bcast_main },
	{ "alltoall", "offloaded alltoall (pairwise) vs the ptp baseline: latency, OSU overlap",
	  bench_alltoall_help, bench_alltoall_main },
	{ "gather", "offloaded gather (linear, root 0) vs the ptp baseline: latency, OSU overlap",
	  bench_gather_help, bench_gather_main },
	{ "allgather", "offloaded allgather (pairwise) vs the ptp baseline: latency, OSU overlap",
	  bench_allgather_help, bench_allgather_main },
	{ "trig", "a chain of triggered puts vs the same chain driven by the app: time, app CPU",
	  bench_trig_help, bench_trig_main },
	{ "rndv", "chunked rendezvous vs one get a message: throughput by size, slow receiver",
	  bench_rndv_help, bench_rndv_main },
	{ "p2p", "ping-pong by protocol and progress scheme vs the host: overheads, latency",
	  bench_p2p_help, bench_p2p_main },
	{ "conn", "static mesh vs connections on demand: QPs per rank, start-up time",
	  bench_conn_help, bench_conn_main },
	{ "faults", "connection failures: what reconnecting and resending costs",
	  bench_faults_help, bench_faults_main },
	{ "idle", "an idle device (open, connected, nothing to do) vs none: CPU, core wake-ups",
	  bench_idle_help, bench_idle_main },
	{ "potato", "the triggered hot potato vs ib_write_lat: round trip with the app asleep",
	  bench_potato_help, bench_potato_main },
	{ "instr", "instructions (callgrind): posting a task list, the engine a task and a put",
	  bench_instr_help, bench_instr_main },
};

#define NSUBCMDS ((int)(sizeof(subcmds) / sizeof(subcmds[0])))

/* The manual to f: every subcommand's section, or only that of `only`. */
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
	/* Whole lines: results go to stdout, progress to stderr; a block-
	 * buffered stdout in a pipe would flush mid-line between them. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return bench_usage_error(NULL, "no subcommand");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		if (bench_speaks())
			print_help(stdout, argc > 2 ? argv[2] : NULL);
		return 0;
	}
	for (int i = 0; i < NSUBCMDS; i++) {
		int r;

		if (strcmp(argv[1], subcmds[i].name))
			continue;
		r = subcmds[i].run(argc - 1, argv + 1);
		/* `SUBCOMMAND --help`: the subcommand only parsed it; the
		 * manual is this file's, so opts.c never calls back here. */
		if (r == BENCH_HELP && bench_speaks())
			print_help(stdout, subcmds[i].name);
		return r == BENCH_HELP ? 0 : r;
	}
	return bench_usage_error(NULL, "unknown subcommand '%s'", argv[1]);
}
