/* SPDX-License-Identifier: MIT */
/*
 * faults: what reconnecting and resending costs.  Rank 0 streams messages to
 * rank 1 through the point-to-point engine (windows of FT_WINDOW sends and
 * receives) while the progress cores of both ranks turn completions into
 * IBV_WC_RETRY_EXC_ERR with probability p (a seeded wc rule, so a run is
 * repeatable): each such failure tears the connection down, makes it again
 * and resends what the peer did not get (emunic/cm/reconnect.c).  A rate
 * has a device of its own (one window untimed first); p = 0 is the baseline,
 * in the same run.  Rank 1
 * checks every message: its index (the first 8 bytes) and every byte after,
 * so a message lost, doubled or reordered fails the run.
 * Reported: failures injected, reconnections, the stream's wall time, its
 * ratio to the baseline and the time one reconnection cost
 * ((t - t_baseline) / reconnections).
 */
#include "bench.h"

#include <emunic/fault.h>
#include <emunic/rndv.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FT_MAX_RATES 8
#define FT_WINDOW 32
#define FT_BASELINE "p=0"

struct ft_opts {
	double rate[FT_MAX_RATES];	/* fractions */
	int nrates;
	int messages;
	size_t size;
	unsigned proto;
	int timeout_ms;
	const char *csv;
};

/* What a rate's run gives rank 0 (rank 1's counts come by allgather). */
struct ft_res {
	double ms;
	uint64_t injected, reconnects;
};

static void ft_fill(char *m, size_t len, uint64_t idx)
{
	for (size_t i = 8; i < len; i++)
		m[i] = (char)bench_pattern(i + idx);
	memcpy(m, &idx, len < 8 ? len : 8);
}

/* 0, or the first offset that is not what message idx carries. */
static size_t ft_check(const char *m, size_t len, uint64_t idx)
{
	uint64_t got = 0;

	memcpy(&got, m, len < 8 ? len : 8);
	if (len >= 8 && got != idx)
		return 1;
	for (size_t i = 8; i < len; i++)
		if (m[i] != (char)bench_pattern(i + idx))
			return i + 1;
	return 0;
}

/* One window: rank 0 sends messages [from, to), rank 1 receives and checks them. */
static int ft_window(struct bench *b, const struct ft_opts *o, struct emunic_rndv *rv, char *buf, int from, int to)
{
	struct emunic_req *q[FT_WINDOW];
	int n = to - from, r = 0, posted = 0;

	for (int i = 0; i < n && !r; i++, posted++) {
		char *m = buf + (size_t)i * o->size;

		if (b->rank == 0) {
			ft_fill(m, o->size, (uint64_t)(from + i));
			r = emunic_isend(rv, m, o->size, 1, 7, &q[i]);
		} else {
			r = emunic_irecv(rv, m, o->size, 0, 7, &q[i]);
		}
		if (r)
			posted--;
	}
	for (int i = 0; i < posted; i++) {
		struct emunic_status st;
		int w = emunic_wait(q[i], &st, o->timeout_ms);

		if (w) {
			r = r ? r : bench_err(b, w, "message %d: not done within %d ms", from + i, o->timeout_ms);
			emunic_cancel(q[i]);
		} else if (st.error) {
			r = r ? r : bench_err(b, st.error, "message %d failed", from + i);
		} else if (b->rank == 1 && ft_check(buf + (size_t)i * o->size, o->size, (uint64_t)(from + i))) {
			r = r ? r : bench_err(b, -EBADMSG, "message %d: not the message sent (lost, doubled or reordered)",
					      from + i);
		}
		if (emunic_req_free(q[i]))
			r = r ? r : bench_err(b, -EBUSY, "message %d: request not freed", from + i);
	}
	return r;
}

static void ft_spec(double p, char *spec, size_t len)
{
	if (p > 0)
		snprintf(spec, len, "wc:status=RETRY_EXC_ERR,p=%.6f,seed=42", p);
	else
		spec[0] = 0;
}

static int ft_run(struct bench *b, const struct ft_opts *o, double p, struct ft_res *res, char *device, size_t len)
{
	struct emunic_dev_attr da;
	struct emunic_rndv_attr ra;
	struct emunic_rndv_stats st;
	struct emunic_fault_stats fs;
	struct emunic_dev *dev = NULL;
	struct emunic_rndv *rv = NULL;
	char spec[96], *buf = calloc(FT_WINDOW, o->size ? o->size : 1);
	uint64_t mine[2], all[4];
	int64_t t0;
	bool have;
	int r;

	if (!buf)
		return bench_err(b, -ENOMEM, "the message buffers");
	ft_spec(p, spec, sizeof(spec));
	emunic_dev_attr_init(&da);
	da.faults = spec[0] ? spec : NULL;
	r = bench_open_dev(b, &da, &dev, device, len);
	emunic_rndv_attr_init(&ra);
	ra.proto = o->proto;
	ra.connect_timeout_ms = o->timeout_ms;
	if (!r && (r = emunic_rndv_create(dev, &ra, &rv)))
		r = bench_err(b, r, "emunic_rndv_create");
	/* One window untimed first: connections, registrations, first touches. */
	r = r ? r : ft_window(b, o, rv, buf, 0, FT_WINDOW);
	r = r ? r : emunic_boot_barrier(b->boot);
	t0 = bench_mono_ns();
	for (int i = FT_WINDOW; !r && i < FT_WINDOW + o->messages; i += FT_WINDOW) {
		int end = FT_WINDOW + o->messages;

		r = ft_window(b, o, rv, buf, i, i + FT_WINDOW < end ? i + FT_WINDOW : end);
		if (!r && b->rank == 0 && (i / FT_WINDOW) % 64 == 0)
			bench_progress(b, "[p %g%%] %d of %d messages", p * 100, i, o->messages);
	}
	res->ms = (double)(bench_mono_ns() - t0) / 1e6;
	have = rv && !emunic_rndv_stats(rv, &st);
	if (!r && have && b->rank == 1 && st.queued)
		r = bench_err(b, -EBADMSG, "%zu message(s) left over that no receive took (doubled?)", st.queued);
	mine[0] = !emunic_fault_stats(dev, &fs) ? fs.wc_injected : 0;
	mine[1] = have ? st.reconnects : 0;
	/* Every rank takes part, failed or not, so none waits for another. */
	if (emunic_boot_allgather(b->boot, mine, sizeof(mine), all) && !r)
		r = bench_err(b, -EIO, "gathering the counts");
	res->injected = all[0] + all[2];
	res->reconnects = all[1] > all[3] ? all[1] : all[3];
	if (rv && emunic_rndv_destroy(rv) && !r)
		r = bench_err(b, -EBUSY, "emunic_rndv_destroy");
	if (dev && emunic_dev_close(dev) && !r)
		r = bench_err(b, -EIO, "emunic_dev_close");
	free(buf);
	return r;
}

static void ft_report(const struct ft_opts *o, const struct ft_res *res, const char *device)
{
	char sz[16];

	bench_size_str(sz, sizeof(sz), o->size);
	printf("\nemunic-bench faults: %d messages of %s rank 0 -> 1, %s protocol, windows of %d; wc rule\n"
	       "RETRY_EXC_ERR with probability p on both ranks (seed 42); %s\n\n", o->messages, sz,
	       emunic_rndv_proto_str(o->proto), FT_WINDOW, device);
	printf("%-9s %9s %13s %11s %11s %11s %15s\n", "p", "injected", "reconnections", "ms", "msgs/s", "x p=0",
	       "ms/reconnect");
	for (int i = 0; i < o->nrates; i++) {
		char name[24];
		double x = res[0].ms > 0 ? res[i].ms / res[0].ms : 0;

		snprintf(name, sizeof(name), "%g%%", o->rate[i] * 100);
		printf("%-9s %9llu %13llu %11.1f %11.0f %10.2fx ", name, (unsigned long long)res[i].injected,
		       (unsigned long long)res[i].reconnects, res[i].ms, o->messages / (res[i].ms / 1000), x);
		if (res[i].reconnects && i)
			printf("%15.1f\n", (res[i].ms - res[0].ms) / (double)res[i].reconnects);
		else
			printf("%15s\n", "-");
	}
	printf("\nEvery message arrived once, in order, byte-exact (checked on rank 1).\n");
}

const char bench_faults_help[] =
"  faults [OPTIONS]  (2 ranks)\n"
"    What reconnecting and resending costs: rank 0 streams messages to rank\n"
"    1 (windows of 32) while both progress cores turn completions into\n"
"    IBV_WC_RETRY_EXC_ERR with probability p (wc rule, seed 42); every such\n"
"    failure makes the connection again and resends what the peer did not\n"
"    get.  One device a rate, its first window untimed; p = 0 is the\n"
"    baseline.  Rank 1 checks every\n"
"    message (index and bytes): one lost, doubled or reordered fails the run\n"
"    (exit 3).  Rank 0 prints: failures injected, reconnections, wall time,\n"
"    messages/s, time x the baseline's, and ms one reconnection cost.\n"
"\n"
"    --rates LIST       probabilities in percent (default 0,0.1,0.3,1; 0 is\n"
"                       always run first)\n"
"    --messages N       messages a rate (default 4000)\n"
"    --size S           bytes a message, K or M allowed (default 1024; above\n"
"                       the eager limit 4096 the rendezvous runs)\n"
"    --proto P          chunked or rtr (default chunked)\n"
"    --timeout-ms MS    bound on every connect and on each message's wait\n"
"                       (default 60000)\n"
"    --quick            a short run, for tests: 500 messages, rates 0,0.5\n"
"    --csv FILE         rank 0 writes every result to FILE (see CSV)\n";

struct ft_parse {
	struct ft_opts *o;
	const char *rates;
};

static bool ft_add_rate(void *ctx, const char *s)
{
	struct ft_opts *o = ctx;
	char *end;
	double v = strtod(s, &end);

	if (*end || v < 0 || v > 20 || o->nrates == FT_MAX_RATES || (v == 0 && o->nrates > 1))
		return false;
	if (v > 0)
		o->rate[o->nrates++] = v / 100;
	return true;
}

static int ft_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct ft_parse *p = ctx;

	switch (val) {
	case 'r':
		p->rates = arg;
		return 0;
	case 'm':
		return bench_opt_int(cmd, name, arg, 1, 10000000, "a count >= 1", &p->o->messages);
	case 's':
		p->o->size = bench_parse_size(arg);
		if (!p->o->size || p->o->size > RV_MAX_SIZE)
			return bench_usage_error(cmd, "--size wants 1 .. 256M bytes (K, M allowed), not '%s'", arg);
		return 0;
	case 'p':
		if (emunic_rndv_proto_parse(arg, &p->o->proto))
			return bench_usage_error(cmd, "--proto wants chunked or rtr, not '%s'", arg);
		return 0;
	}
	return 0;
}

static int ft_parse(int argc, char **argv, struct ft_opts *o)
{
	static const struct option lo[] = {
		{ "rates", required_argument, NULL, 'r' }, { "messages", required_argument, NULL, 'm' },
		{ "size", required_argument, NULL, 's' }, { "proto", required_argument, NULL, 'p' },
		OPT_QUICK, OPTS_COMMON
	};
	struct ft_parse p = { .o = o };
	struct common_opts com = { .timeout_ms = o->timeout_ms };
	int r = bench_parse_opts("faults", argc, argv, lo, ft_opt, &p, &com);

	if (r)
		return r;
	o->timeout_ms = com.timeout_ms;
	o->csv = com.csv;
	o->rate[o->nrates++] = 0;	/* the baseline, first */
	if (!bench_each_item(p.rates ? p.rates : com.quick ? "0.5" : "0.1,0.3,1", ft_add_rate, o))
		return bench_usage_error("faults", "--rates wants up to %d percentages in 0..20 (0 only first), "
					 "not '%s'", FT_MAX_RATES - 1, p.rates);
	if (!o->messages)
		o->messages = com.quick ? 500 : 4000;
	return 0;
}

int bench_faults_main(int argc, char **argv)
{
	struct ft_opts o = { .size = 1024, .timeout_ms = 60000 };
	struct ft_res res[FT_MAX_RATES] = { 0 };
	char device[96] = "?";
	struct bench b = { 0 };
	int r = ft_parse(argc, argv, &o);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	r = bench_init(&b, "faults", o.csv);
	r = r ? r : bench_two_ranks(&b);
	if (!r)
		bench_progress(&b, "%d rates x %d messages of %zu bytes", o.nrates, o.messages, o.size);
	for (int i = 0; !r && i < o.nrates; i++) {
		char name[24];

		r = ft_run(&b, &o, o.rate[i], &res[i], device, sizeof(device));
		snprintf(name, sizeof(name), i ? "p=%g%%" : FT_BASELINE, o.rate[i] * 100);
		if (!r)
			r = bench_add(&b, name, "stream_ms", res[i].ms, "ms");
		if (!r)
			r = bench_add(&b, name, "reconnections", (double)res[i].reconnects, "count");
		if (!r && b.rank == 0)
			bench_progress(&b, "[p %g%%] %.1f ms, %llu injected, %llu reconnections", o.rate[i] * 100,
				       res[i].ms, (unsigned long long)res[i].injected,
				       (unsigned long long)res[i].reconnects);
	}
	if (!r && b.rank == 0) {
		ft_report(&o, res, device);
		bench_write_csv(&b, FT_BASELINE);
	}
	return bench_fini(&b, r);
}
