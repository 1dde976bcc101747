/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench rndv's report (rank 0): throughput by size and variant with
 * the chunked/single ratios, the slow-receiver pass (gets in flight), the
 * met/MISSED target lines, and the CSV.  rndv.c measures.
 */
#include "rv.h"

#include <unistd.h>

/* K for a size: about `budget` bytes a point, within [lo, hi]; in rounds
 * of *per messages (K rounded up to a multiple of the rounds). */
int rv_iters(const struct rv_opts *o, size_t size, bool sink, int *rounds, int *per)
{
	size_t budget = sink ? (size_t)16 << 20 : (size_t)64 << 20, k = budget / size;
	int lo = sink ? 3 : 5, hi = sink ? 10 : 50, n;

	n = o->iters ? o->iters : k < (size_t)lo ? lo : k > (size_t)hi ? hi : (int)k;
	*rounds = o->rounds < n ? o->rounds : n;
	*per = (n + *rounds - 1) / *rounds;
	return *rounds * *per;
}

void rv_metric(char *buf, size_t len, const char *prefix, size_t size)
{
	char sz[24];

	bench_size_str(sz, sizeof(sz), size);
	snprintf(buf, len, "%s_%s", prefix, sz);
}

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

	bench_size_str(sz, sizeof(sz), size);
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
		bench_cell(rv_value(b, &o->v[0], "throughput", size), 10, "%.1f");
		for (int i = 1; i < o->nv; i++) {
			double x = rv_ratio(b, o, i, size);
			bool low = size >= RV_TARGET_FROM && x >= 0 && x < RV_TARGET;

			bench_cell(rv_value(b, &o->v[i], "throughput", size), 10, "%.1f");
			bench_cell(x, 9, "%.2fx");
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
			bench_cell(rv_value(b, &o->v[i], "sink_throughput", o->sizes[s]), 10, "%.1f");
			bench_cell(rv_value(b, &o->v[i], "sink_max_inflight", o->sizes[s]), 10, "%.0f");
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
		bench_size_str(sz, sizeof(sz), at);
		snprintf(ctx, sizeof(ctx), "the lowest, at %s", sz);
		missed += bench_target_ratio("chunked / single >= 0.9x, sizes >= 1M", o->v[i].label, worst, RV_TARGET,
					     false, worst >= 0 ? ctx : NULL);
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

void rv_report(struct bench *b, const struct rv_opts *o, const struct rv_info *info)
{
	char first[24];

	if (b->rank != 0)
		return;
	bench_size_str(first, sizeof(first), o->first);
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
