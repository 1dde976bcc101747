/* SPDX-License-Identifier: MIT */
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
#include "bench.h"

#include <emunic/rndv.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	int64_t deadline = bench_mono_ns() + (int64_t)o->timeout_ms * 1000000;
	int r = 0;

	for (int i = 0; i < n; i++) {
		int64_t left = (deadline - bench_mono_ns()) / 1000000;
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
	t = bench_mono_ns();
	if ((r = emunic_rndv_create(dev, &ra, &rv)))
		return bench_err(b, r, "%s: emunic_rndv_create", what);
	res->create_ms = (double)(bench_mono_ns() - t) / 1e6;
	for (int it = 0; it < o->iters && !r; it++) {
		r = cn_sync(b, dev, what);
		t = bench_mono_ns();
		r = r ? r : cn_iter(b, o, rv, &s, it, what);
		if (it == 0)
			res->first_ms = (double)(bench_mono_ns() - t) / 1e6;
		else
			later += (double)(bench_mono_ns() - t) / 1e6;
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
	r = bench_open_dev(b, &da, &dev, device, dlen);
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
			bench_cell(cn_value(b, pat, m, "qps_max"), 8, "%.0f");
			bench_cell(cn_value(b, pat, m, "qps_mean"), 7, "%.1f");
			bench_cell(cn_value(b, pat, m, "peers_max"), 7, "%.0f");
			bench_cell(c, 11, "%.1f");
			bench_cell(f, 10, "%.1f");
			bench_cell(cn_value(b, pat, m, "later_ms"), 10, "%.2f");
			bench_cell(c >= 0 && f >= 0 ? c + f : -1, 14, "%.1f");
			printf("\n");
		}
	printf("   a static mesh has %d QPs a rank\n", b->size - 1);
	bench_write_csv(b, cn_mode_name[CN_STATIC]);
	fflush(stdout);
}

/* ---- options -------------------------------------------------------------------- */

const char bench_conn_help[] =
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
		return bench_opt_int(cmd, name, arg, 2, 1000000, "a count >= 2", &p->o->iters);
	}
	return 0;
}

/* 0, EXIT_USAGE, or BENCH_HELP for --help. */
static int conn_parse(int argc, char **argv, struct cn_opts *o)
{
	static const struct option lo[] = {
		{ "patterns", required_argument, NULL, 'p' }, { "iters", required_argument, NULL, 'k' },
		OPT_QUICK, OPTS_COMMON
	};
	struct conn_parse p = { .o = o };
	struct common_opts com = { .timeout_ms = o->timeout_ms };
	int r = bench_parse_opts("conn", argc, argv, lo, conn_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	if (!bench_each_item(p.patterns ? p.patterns : "ring,barrier,allreduce,alltoall", cn_add_pattern, o))
		return bench_usage_error("conn", "--patterns wants some of ring, barrier, allreduce and alltoall, each "
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

int bench_conn_main(int argc, char **argv)
{
	struct cn_opts o = { .timeout_ms = 60000 };
	struct cn_res *all = NULL;
	char device[96] = "?";
	struct bench b = { 0 };
	int r = conn_parse(argc, argv, &o);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
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
