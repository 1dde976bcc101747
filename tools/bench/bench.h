/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench's shared declarations, for every file of tools/bench/:
 *  - the exit statuses;
 *  - struct bench (one run of a subcommand: bootstrap, results, the
 *    calibrated work loop, the CSV file) and struct row (one result);
 *  - the bench_ helpers of common.c: bootstrap and teardown, error and
 *    progress lines, results and the CSV, a device a measurement, the work
 *    loop and medians, table cells, target lines;
 *  - the option machinery of opts.c: the table entries every subcommand
 *    ends its options with, bench_parse_opts and the parsers of values;
 *  - coll.c's frame of the collective benchmarks (allreduce.c, bcast.c,
 *    alltoall.c, gather.c): struct coll_bench, what differs between them, and
 *    bench_coll_main, the options, the loop, the OSU overlap, the figures,
 *    the CSV rows, the table and the target lines they share;
 *  - each subcommand's entry point and --help section (barrier.c,
 *    allreduce.c, bcast.c, alltoall.c, gather.c, trig.c, rndv.c, p2p.c,
 *    conn.c, faults.c, idle.c, potato.c, instr.c), for the table in main.c;
 *  - potato.c's game, which instr.c plays under callgrind.
 * barrier and rndv keep their report apart (barrier_report.c,
 * rndv_report.c) with their own declarations (bar.h, rv.h).
 * main.c says what the subcommands are and how a new one is added.  Calls
 * point one way: main.c to the subcommands, they to coll.c, opts.c and
 * common.c, coll.c to opts.c and common.c; nothing calls main.c, which is
 * why --help comes back to it as BENCH_HELP; instr.c calls potato.c's game,
 * and nothing calls back but through the callbacks of the struct coll_bench
 * a collective subcommand hands bench_coll_main.
 */
#ifndef EMUNIC_BENCH_H
#define EMUNIC_BENCH_H

#include <emunic.h>
#include <emunic/coll.h>

#include "baseline/coll_ops.h"

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_USAGE 2
#define EXIT_RUN 3
/* Not an exit status: bench_parse_opts, and so a subcommand's main, return
 * it for --help; main.c, which holds the manual, prints it and exits 0. */
#define BENCH_HELP (-1)

/* ---- common.c ------------------------------------------------------------ */

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

int64_t bench_mono_ns(void);
int64_t bench_cpu_ns(void);
bool bench_speaks(void);
int bench_err(const struct bench *b, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void bench_progress(const struct bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int bench_init(struct bench *b, const char *cmd, const char *csv_path);
int bench_fini(struct bench *b, int status);
int bench_two_ranks(struct bench *b);

/* results */
int bench_add(struct bench *b, const char *impl, const char *metric, double value, const char *unit);
const struct row *bench_find(const struct bench *b, const char *impl, const char *metric);
double bench_get(const struct bench *b, const char *impl, const char *metric);
double bench_ratio(const struct bench *b, const struct row *rw, const char *baseline);
void bench_write_csv(const struct bench *b, const char *baseline);

/* devices */
const char *bench_idle_str(enum emunic_idle i);
int bench_open_dev(struct bench *b, const struct emunic_dev_attr *da, struct emunic_dev **dev, char *name,
		   size_t len);

/* Ranks on this node (emunic-run sets EMUNIC_LOCAL_SIZE; else the job's). */
int bench_local_ranks(const struct bench *b);
/* the work loop */
void bench_nops(uint64_t n);
uint64_t bench_work_iters(const struct bench *b, double ns);
int bench_calibrate(struct bench *b);
double bench_median(double *v, int n);

/* report cells, sizes, the data pattern, targets */
void bench_cell(double v, int width, const char *fmt);
void bench_size_str(char *buf, size_t len, size_t v);
unsigned char bench_pattern(size_t i);
int bench_target_ratio(const char *what, const char *impl, double ratio, double limit, bool at_most,
		       const char *ctx);
int bench_target_value(const char *what, const char *impl, double v, double limit, const char *unit);

/* ---- opts.c -------------------------------------------------------------- */

/* The largest size bench_parse_size takes (rndv's largest message). */
#define RV_MAX_SIZE ((size_t)256 << 20)

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

int bench_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int bench_parse_opts(const char *cmd, int argc, char **argv, const struct option *lo, opt_fn on_opt, void *ctx,
		     struct common_opts *com);
bool bench_parse_int(const char *s, long lo, long hi, int *out);
int bench_opt_int(const char *cmd, const char *name, const char *arg, long lo, long hi, const char *wants,
		  int *out);
int bench_opt_double(const char *cmd, const char *name, const char *arg, double lo, double hi, const char *wants,
		     double *out);
size_t bench_parse_size(const char *s);
bool bench_each_item(const char *list, bool (*item)(void *, const char *), void *o);

/* ---- coll.c: the collective benchmarks' frame ----------------------------- */

#define COLL_MAX_SIZES 6

struct coll_opts {
	int iters, warmup, timeout_ms;
	size_t segment;			/* --segment; 0: the default */
	size_t sizes[COLL_MAX_SIZES];	/* bytes (alltoall: a peer's block) */
	int nsizes;
};

/* One of the two implementations of the collective's ops table: ptp (its
 * baseline) or mq (its offload); the subcommands call it through ops. */
struct coll_impl {
	const char *name;		/* "ptp", "mq" */
	const struct emunic_coll_impl *ops;
	struct emunic_dev *dev;		/* mq's */
	void *h;			/* the handle ops->open made */
};

/* A collective subcommand: what differs.  The callbacks return 0 or a
 * negative errno, having said why (bench_err). */
struct coll_bench {
	/* The collective's one table: its name (the subcommand's, in the
	 * table, targets, metrics), the offload (mq) and the baseline (ptp). */
	const struct emunic_coll_ops *ops;
	const char *max_what;		/* mq's create error: "(CMD, MAX_WHAT N bytes)" */
	int iters;			/* --iters' default */
	const char *sizes;		/* --sizes' default */
	const char *sizes_wants;	/* the --sizes error: "wants up to 6 SIZES_WANTS" */
	size_t max_size;		/* of --sizes and --segment */
	size_t align;			/* --sizes are multiples of it */
	bool zero;			/* --sizes may hold 0 */
	bool segment;			/* there is --segment (ptp's and mq's) */
	bool means;			/* figures are means over the ranks, else rank 0's */
	bool slowest;			/* the slowest rank's mean: a column, a metric */
	size_t overlap_size;		/* the size of the overlap targets (2 ranks) */
	/* the data check before timing (NULL: none), every rank */
	int (*check)(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t bytes);
	/* o->warmup blocking calls */
	int (*warmup)(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t bytes);
	/* Mean time of o->iters calls, ns; samp (each call's) only when
	 * blocking calls are timed; else post, bench_nops(work), wait. */
	int (*timed)(struct bench *b, const struct coll_opts *o, struct coll_impl *im, size_t bytes, uint64_t work,
		     double *samp, double *mean_ns);
	/* The report's first lines, up to the table (rank 0). */
	void (*report_head)(const struct bench *b, const struct coll_opts *o, const char *device);
};

/* What the block collectives' struct coll_bench share (gather.c's two and
 * alltoall.c's): sizes are a rank's block, 0 to 4M
 * bytes (default 8,8K,64K), with --segment; 100 calls a loop; figures are
 * means over the ranks; the overlap targets at 64 KiB.  An initializer
 * starts with it. */
#define COLL_BLOCK_BENCH                                                                          \
	.max_what = "blocks up to", .iters = 100, .sizes = "8,8K,64K",                              \
	.sizes_wants = "block sizes, each 0 to 4M bytes (0, 8, 8K, 64K)", .max_size = (size_t)4 << 20, \
	.align = 1, .zero = true, .segment = true, .means = true, .overlap_size = 65536

/* Parses argv, measures, reports; the exit status, or BENCH_HELP. */
int bench_coll_main(const struct coll_bench *cb, int argc, char **argv);
size_t bench_coll_max_size(const struct coll_opts *o);
/* im's nonblocking start of c, retried on -ENOSPC until timeout_ms: a post
 * may find earlier calls' sends, copies or landing segments not yet free
 * even when every earlier request was waited (include/emunic/coll.h). */
int bench_coll_start(struct coll_impl *im, const struct emunic_coll_call *c, void **q, int timeout_ms);
/* A bootstrap barrier; where: "between loops", in its error. */
int bench_coll_sync(struct bench *b, const char *where);
/* Every rank learns whether any failed (r != 0): all stop together. */
int bench_coll_agree(struct bench *b, int r);

/* ---- potato.c's game, for instr.c ---------------------------------------- */

struct potato;
/* Opens a device and sets up the game (collective, 2 ranks). */
int bench_potato_new(struct bench *b, int rounds, int timeout_ms, struct potato **out);
/* Game number `game` (0, 1, ...): `rounds` puts a rank, each triggered by
 * the other's arriving; rank 0 gets its wall time in *us. */
int bench_potato_play(struct bench *b, struct potato *p, int game, double *us);
void bench_potato_free(struct potato *p);
struct emunic_dev *bench_potato_dev(struct potato *p);

/* ---- the subcommands, for main.c ------------------------------------------ */

/* argv[0] is the subcommand's name; each returns the exit status, or
 * BENCH_HELP. */
int bench_barrier_main(int argc, char **argv);
int bench_trig_main(int argc, char **argv);
int bench_rndv_main(int argc, char **argv);
int bench_p2p_main(int argc, char **argv);
int bench_conn_main(int argc, char **argv);
int bench_faults_main(int argc, char **argv);
int bench_idle_main(int argc, char **argv);
int bench_allreduce_main(int argc, char **argv);
int bench_bcast_main(int argc, char **argv);
int bench_alltoall_main(int argc, char **argv);
int bench_gather_main(int argc, char **argv);
int bench_allgather_main(int argc, char **argv);
int bench_potato_main(int argc, char **argv);
int bench_instr_main(int argc, char **argv);

/* Their sections of --help. */
extern const char bench_barrier_help[];
extern const char bench_trig_help[];
extern const char bench_rndv_help[];
extern const char bench_p2p_help[];
extern const char bench_conn_help[];
extern const char bench_faults_help[];
extern const char bench_idle_help[];
extern const char bench_allreduce_help[];
extern const char bench_bcast_help[];
extern const char bench_alltoall_help[];
extern const char bench_gather_help[];
extern const char bench_allgather_help[];
extern const char bench_potato_help[];
extern const char bench_instr_help[];

#endif
