/* SPDX-License-Identifier: MIT */
/*
 * p2p's report (rank 0): the header, table 1 (the ping-pong: overheads,
 * test calls, latency, x host, MB/s) and table 2 (who ran the engine: test
 * calls' passes, the core's passes and wake-ups), and the CSV.
 */
#include "pp.h"

#include <stdio.h>
#include <unistd.h>

static void pp_metric(char *buf, size_t len, const char *prefix, size_t size)
{
	char sz[24];

	bench_size_str(sz, sizeof(sz), size);
	snprintf(buf, len, "%s_%s", prefix, sz);
}

int pp_add(struct bench *b, const char *impl, const char *prefix, size_t size, double v, const char *unit)
{
	char m[64];

	pp_metric(m, sizeof(m), prefix, size);
	return bench_add(b, impl, m, v, unit);
}

static double pp_value(const struct bench *b, const struct pp_impl *im, const char *prefix, size_t size)
{
	char m[64];

	pp_metric(m, sizeof(m), prefix, size);
	return bench_get(b, im->name, m);
}

typedef void pp_row_fn(const struct bench *b, const struct pp_opts *o, const struct pp_impl *im, size_t size);

/* A table's rows, a size and impl each (engines: not the host's). */
static void pp_rows(const struct bench *b, const struct pp_opts *o, bool engines, pp_row_fn *row)
{
	for (int s = 0; s < o->nsizes; s++) {
		char sz[24];

		bench_size_str(sz, sizeof(sz), o->sizes[s]);
		for (int i = 0; i < o->nim; i++) {
			if (engines && o->im[i].host)
				continue;
			printf("   %-8s%-18s", sz, o->im[i].name);
			row(b, o, &o->im[i], o->sizes[s]);
			printf("\n");
		}
	}
}

static void pp_latency_row(const struct bench *b, const struct pp_opts *o, const struct pp_impl *im, size_t size)
{
	double lat = pp_value(b, im, "latency", size), base = pp_value(b, &o->im[0], "latency", size);

	printf("%5d", pp_iters(o, size));
	bench_cell(pp_value(b, im, "isend", size), 10, "%.1f");
	bench_cell(pp_value(b, im, "irecv", size), 10, "%.1f");
	bench_cell(pp_value(b, im, "test", size), 10, "%.2f");
	bench_cell(pp_value(b, im, "tests", size), 8, "%.0f");
	bench_cell(lat, 11, "%.1f");
	bench_cell(lat >= 0 && base > 0 ? lat / base : -1, 9, "%.2fx");
	bench_cell(pp_value(b, im, "latency_min", size), 10, "%.1f");
	bench_cell(pp_value(b, im, "bandwidth", size), 9, "%.1f");
}

static void pp_engine_row(const struct bench *b, const struct pp_opts *o, const struct pp_impl *im, size_t size)
{
	(void)o;
	bench_cell(pp_value(b, im, "test_passes", size), 12, "%.1f");
	bench_cell(pp_value(b, im, "core_passes", size), 12, "%.1f");
	bench_cell(pp_value(b, im, "core_wakes", size), 12, "%.2f");
}

static void pp_print_table(const struct bench *b, const struct pp_opts *o)
{
	printf("\n1. ping-pong, rank 0's medians: us inside one isend, one irecv and one test call; test\n"
	       "   calls an iteration; latency = half the round trip, us; x host = latency / host's;\n"
	       "   min = the fastest half round trip; MB/s = size / latency (rendezvous sizes)\n");
	printf("   %-8s%-18s%5s%10s%10s%10s%8s%11s%9s%10s%9s\n", "size", "impl", "K", "isend", "irecv", "test", "tests",
	       "latency", "x host", "min", "MB/s");
	pp_rows(b, o, false, pp_latency_row);
	printf("\n2. who ran rank 0's engine in the latency pass, an iteration: passes by test calls\n"
	       "   (emunic_test lends its thread to the engine: emunic_dev_progress), passes by the\n"
	       "   progress core, and the core's wake-ups\n");
	printf("   %-8s%-18s%12s%12s%12s\n", "size", "impl", "test passes", "core passes", "core wakes");
	pp_rows(b, o, true, pp_engine_row);
}

void pp_report(struct bench *b, const struct pp_opts *o, const char *device)
{
	char eager[24];

	if (b->rank != 0)
		return;
	bench_size_str(eager, sizeof(eager), o->eager);
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
