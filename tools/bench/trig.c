/* SPDX-License-Identifier: MIT */
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
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

static double mean(const double *v, int n)
{
	double s = 0;

	for (int i = 0; i < n; i++)
		s += v[i];
	return n > 0 ? s / n : -1;
}

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
	if ((r = bench_open_dev(b, &da, &ch->dev, ch->device, sizeof(ch->device))))
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
	w0 = bench_mono_ns();
	c0 = bench_cpu_ns();
	if (kind == CHAIN_APP_WAIT) {
		r = run_app_chain(b, o, ch, kind);
		c1 = bench_cpu_ns();
		*s = (struct chain_sample){ .wall = (double)(bench_mono_ns() - w0), .cpu = (double)(c1 - c0),
					    .post = -1, .wait = -1 };
		ch->gen++;
		return r;
	}
	if ((r = post_trig_chain(b, o, ch, kind)))
		return r;
	c1 = bench_cpu_ns();
	s->post = (double)(c1 - c0);
	if (kind == CHAIN_TRIG_COMPUTE) {
		bench_nops(work);
		c1 = bench_cpu_ns();
		/* The one look at the counter: done already, or wait for it. */
		if (!emunic_ct_get(ch->c[o->len], &v) && v.success + v.failure >= ch->gen + 1)
			ch->done_at_check++;
	}
	r = emunic_ct_wait(ch->c[o->len], ch->gen + 1, &v, o->timeout_ms);
	s->wait = (double)(bench_cpu_ns() - c1);
	s->wall = (double)(bench_mono_ns() - w0);
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
		work = bench_work_iters(b, ch->work_us * 1e3);
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
	r = r ? r : bench_add(b, name, "chain_wall_p50", bench_median(wall, o->iters), "us");
	r = r ? r : bench_add(b, name, "app_cpu_p50", bench_median(cpu, o->iters), "us");
	if (kind == CHAIN_TRIG_WAIT || kind == CHAIN_TRIG_COMPUTE)
		r = r ? r : bench_add(b, name, "app_cpu_post_p50", bench_median(post, o->iters), "us");
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
		bench_cell(bench_get(b, n, "chain_wall"), 11, "%.1f");
		bench_cell(bench_get(b, n, "chain_wall_p50"), 10, "%.1f");
		bench_cell(bench_get(b, n, "app_cpu"), 11, "%.1f");
		bench_cell(bench_get(b, n, "app_cpu_post"), 10, "%.1f");
		bench_cell(bench_get(b, n, k == CHAIN_TRIG_COMPUTE ? "app_cpu_check" : "app_cpu_wait"), 12, "%.1f");
		bench_cell(trig_ratio(b, k, "chain_wall_p50", "chain_wall_p50"), 11, "%.3fx");
		bench_cell(trig_ratio(b, k, "app_cpu", "app_cpu"), 11, "%.3fx");
		printf("\n");
	}
	printf("   x wall, x CPU: over %s's (median wall, mean app CPU)\n", TRIG_BASELINE);
	printf("   trig-compute: %d of %d chains were done when the app checked\n", ch->done_at_check, o->iters);

	printf("\ntargets (reported, never asserted)\n");
	snprintf(ctx, sizeof(ctx), "%.1f vs %.1f us/chain; medians %.3fx; trig-compute posts + check %.3fx",
		 bench_get(b, "trig-wait", "app_cpu_post"), bench_get(b, TRIG_BASELINE, "app_cpu"),
		 trig_ratio(b, CHAIN_TRIG_WAIT, "app_cpu_post_p50", "app_cpu_p50"),
		 trig_ratio(b, CHAIN_TRIG_COMPUTE, "app_cpu", "app_cpu"));
	missed = bench_target_ratio("app CPU, triggered posts / app-driven <= 0.05x", "trig-wait",
				    trig_ratio(b, CHAIN_TRIG_WAIT, "app_cpu_post", "app_cpu"), TRIG_CPU_TARGET,
				    true, ctx);
	printf("  info    wall time triggered / app-driven (median): trig-wait %.3fx, no target\n",
	       trig_ratio(b, CHAIN_TRIG_WAIT, "chain_wall_p50", "chain_wall_p50"));
	printf("  %d target(s) missed\n", missed);
	bench_write_csv(b, TRIG_BASELINE);
	fflush(stdout);
}

const char bench_trig_help[] =
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
		return bench_opt_int(cmd, name, arg, 1, TRIG_MAX_LEN, "1..4096", &p->o->len);
	case 'k':
		return bench_opt_int(cmd, name, arg, 1, 1000000, "a count >= 1", &p->iters);
	case 'w':
		return bench_opt_int(cmd, name, arg, 0, 1000000, "a count >= 0", &p->warmup);
	case 'f':
		return bench_opt_double(cmd, name, arg, 0, 1000, "0..1000", &p->o->work_factor);
	}
	return 0;
}

/* 0, EXIT_USAGE, or BENCH_HELP for --help. */
static int trig_parse(int argc, char **argv, struct trig_opts *o)
{
	static const struct option lo[] = {
		{ "len", required_argument, NULL, 'l' }, { "iters", required_argument, NULL, 'k' },
		{ "warmup", required_argument, NULL, 'w' }, { "work-factor", required_argument, NULL, 'f' },
		OPT_QUICK, OPTS_COMMON
	};
	struct trig_parse p = { .o = o, .warmup = -1 };
	struct common_opts com = { .timeout_ms = o->timeout_ms };
	int r = bench_parse_opts("trig", argc, argv, lo, trig_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	o->iters = p.iters ? p.iters : com.quick ? 5 : 50;
	o->warmup = p.warmup >= 0 ? p.warmup : com.quick ? 1 : 5;
	return 0;
}

int bench_trig_main(int argc, char **argv)
{
	struct trig_opts o = { .len = 100, .timeout_ms = 60000, .work_factor = 2 };
	struct chain ch = { 0 };
	struct bench b = { 0 };
	double *samp = NULL;
	int r = trig_parse(argc, argv, &o), t;

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
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
