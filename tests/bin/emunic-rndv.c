/* SPDX-License-Identifier: MIT */
/*
 * emunic-rndv: checks of the chunked receiver-driven rendezvous on a real
 * device, one per name (emunic-run -n N emunic-rndv NAME [options]).  Every
 * payload byte is a function of (sender, message, offset), so a receive that
 * matched the wrong message or lost a chunk is caught byte by byte.
 */
#include "emunic.h"
#include "emunic/rndv.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
	"usage: emunic-run -n N emunic-rndv CHECK [options]\n"
	"\n"
	"Checks of the chunked receiver-driven rendezvous (engines/rndv) over the\n"
	"progress core's triggered operations.  Prints 'emunic-rndv: CHECK: PASS'.\n"
	"\n"
	"CHECK:\n"
	"  table1     seed 004 Table 1: two sends (t1, t2), seven receive orderings,\n"
	"             each with receives posted before (expected) and after\n"
	"             (unexpected) the sends; the unmatched receive stays unmatched\n"
	"  sizes      random sizes 0 .. --max (default 16 MiB) from every rank to\n"
	"             every rank, ANY_SOURCE / ANY_TAG mixed in, byte-exact\n"
	"  edges      sizes at the first-chunk and chunk boundaries (k-1, k, k+1 ...)\n"
	"  notest     the receiver only computes (no emunic call) while a large\n"
	"             message lands; it is complete before the first test\n"
	"  credits    a traced large receive never has more than c gets in flight\n"
	"  truncate   a message larger than the receive buffer: -EMSGSIZE, the\n"
	"             prefix delivered, the sender completes\n"
	"  bad        bad destination, tag or source: -EINVAL, nothing else hurt\n"
	"\n"
	"Options: --first K  --chunk S (0: one get)  --credits C  --slots N\n"
	"         --count M (messages per pair, sizes)  --max BYTES  --seed X\n"
	"Exit: 0 pass, 1 a check failed, 2 usage.\n";

static struct {
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct emunic_rndv *r;
	struct emunic_rndv_attr a;
	int rank, size, count;
	size_t max;
	unsigned seed;
} T;

#define FAIL(...) do { fprintf(stderr, "emunic-rndv: rank %d: FAIL: ", T.rank); \
		       fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CHECK(c, ...) do { if (!(c)) FAIL(__VA_ARGS__); } while (0)

static void sync_ranks(void) { CHECK(!emunic_dev_barrier(T.dev), "barrier"); }

static uint8_t pat(int src, unsigned msg, size_t j)
{
	return (uint8_t)(T.seed ^ (unsigned)src * 131u ^ msg * 31u ^ j * 7u ^ (j >> 9));
}

static char *filled(int src, unsigned msg, size_t len)
{
	char *b = malloc(len ? len : 1);

	CHECK(b, "out of memory for %zu bytes", len);
	for (size_t j = 0; j < len; j++)
		b[j] = (char)pat(src, msg, j);
	return b;
}

/* First offset where buf differs from message (src, msg), or len. */
static size_t first_bad(const char *b, int src, unsigned msg, size_t len)
{
	for (size_t j = 0; j < len; j++)
		if ((uint8_t)b[j] != pat(src, msg, j))
			return j;
	return len;
}

static struct emunic_req *isend(const void *b, size_t len, int dst, int tag)
{
	struct emunic_req *q = NULL;
	int e = emunic_isend(T.r, b, len, dst, tag, &q);

	CHECK(!e, "isend %zu bytes to %d tag %d: %s", len, dst, tag, strerror(-e));
	return q;
}

static struct emunic_req *irecv(void *b, size_t len, int src, int tag)
{
	struct emunic_req *q = NULL;
	int e = emunic_irecv(T.r, b, len, src, tag, &q);

	CHECK(!e, "irecv %zu bytes from %d tag %d: %s", len, src, tag, strerror(-e));
	return q;
}

static struct emunic_status wait_free(struct emunic_req *q, const char *what)
{
	struct emunic_status st;
	int e = emunic_wait(q, &st, 60000);

	CHECK(!e, "%s: not complete after 60 s (%s)", what, strerror(-e));
	CHECK(!emunic_req_free(q), "%s: req_free", what);
	return st;
}

static void wait_queued(size_t n)
{
	struct emunic_rndv_stats st;

	for (int i = 0; i < 3000; i++) {
		emunic_rndv_stats(T.r, &st);
		if (st.queued >= n)
			return;
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	FAIL("only %zu of %zu messages arrived unexpected within 6 s", st.queued, n);
}

/* ---- table1 ------------------------------------------------------------------------ */

/* Rows of seed 004 Table 1: the receives' tags (-1 = ANY) and which send
 * each receive gets (0: none).  Row 7 is MPI's answer: recv(t2) can only
 * take s2 (the printed table repeats row 6's matching there). */
static const struct { int tag[2]; int match[2]; } rows[7] = {
	{ { 1, 2 }, { 1, 2 } },   { { 2, 1 }, { 2, 1 } },   { { -1, -1 }, { 1, 2 } }, { { -1, 2 }, { 1, 2 } },
	{ { -1, 1 }, { 1, 0 } },  { { 1, -1 }, { 1, 2 } },  { { 2, -1 }, { 2, 1 } },
};

static void table1_row(int row, bool expected, size_t len)
{
	char *b[2] = { calloc(1, len + 1), calloc(1, len + 1) };
	struct emunic_req *q[2] = { 0 };

	if (T.rank == 1) {
		char *s1 = filled(1, 1, len), *s2 = filled(1, 2, len);
		struct emunic_req *a, *c;

		sync_ranks();		/* receives posted (expected) or not yet */
		a = isend(s1, len, 0, 1);
		c = isend(s2, len, 0, 2);
		sync_ranks();		/* sends posted */
		wait_free(a, "send t1");
		if (rows[row].match[1] || rows[row].match[0] == 2)
			wait_free(c, "send t2");
		sync_ranks();		/* row done */
		if (!(rows[row].match[1] || rows[row].match[0] == 2))
			wait_free(c, "send t2 (drained)");
		free(s1);
		free(s2);
		free(b[0]);
		free(b[1]);
		return;
	}
	if (expected)
		for (int i = 0; i < 2; i++)
			q[i] = irecv(b[i], len + 1, 1, rows[row].tag[i] < 0 ? EMUNIC_ANY_TAG : rows[row].tag[i]);
	sync_ranks();
	sync_ranks();
	if (!expected) {
		wait_queued(2);
		for (int i = 0; i < 2; i++)
			q[i] = irecv(b[i], len + 1, 1, rows[row].tag[i] < 0 ? EMUNIC_ANY_TAG : rows[row].tag[i]);
	}
	for (int i = 0; i < 2; i++) {
		int want = rows[row].match[i];

		if (!want) {
			int done = 1;
			struct emunic_rndv_stats st;

			struct timespec ts = { 0, 300 * 1000000L };
			nanosleep(&ts, NULL);
			CHECK(!emunic_test(q[i], &done, NULL) && !done, "row %d: receive %d matched but must not", row + 1,
			      i + 1);
			emunic_rndv_stats(T.r, &st);
			CHECK(st.queued == 1 && st.posted == 1, "row %d: %zu queued, %zu posted; want s2 unexpected "
			      "and r2 posted", row + 1, st.queued, st.posted);
			CHECK(!emunic_cancel(q[i]) && !emunic_req_free(q[i]), "row %d: cancel the unmatched receive",
			      row + 1);
			continue;
		}
		struct emunic_status st = wait_free(q[i], "receive");
		CHECK(st.tag == want && st.source == 1 && st.len == len && !st.error,
		      "row %d (%s): r%d got tag %d from %d, %zu bytes, error %d; want s%d", row + 1,
		      expected ? "expected" : "unexpected", i + 1, st.tag, st.source, st.len, st.error, want);
		CHECK(first_bad(b[i], 1, (unsigned)want, len) == len, "row %d: r%d data differs from s%d at byte %zu",
		      row + 1, i + 1, want, first_bad(b[i], 1, (unsigned)want, len));
	}
	sync_ranks();
	if (!rows[row].match[1] && rows[row].match[0] != 2) {	/* drain s2 */
		struct emunic_req *d = irecv(b[1], len + 1, 1, 2);

		wait_free(d, "drain s2");
	}
	free(b[0]);
	free(b[1]);
}

static void check_table1(void)
{
	const size_t lens[] = { 100, 300 * 1024 };

	CHECK(T.size == 2, "table1 runs with 2 ranks");
	for (unsigned l = 0; l < 2; l++)
		for (int row = 0; row < 7; row++)
			for (int e = 0; e < 2; e++)
				table1_row(row, e, lens[l]);
}

/* ---- sizes, edges ---------------------------------------------------------------- */

static size_t rnd_size(unsigned *s)
{
	/* Spread over orders of magnitude: 0 .. max. */
	unsigned bits = (unsigned)(rand_r(s) % 25);
	size_t v = bits ? ((size_t)rand_r(s) << 16 ^ (size_t)rand_r(s)) % ((size_t)1 << bits) : 0;

	return v > T.max ? T.max : v;
}

/* Every rank sends `count` messages to every other rank with sizes from
 * sizes(); receivers use ANY_SOURCE / ANY_TAG for some. */
static void exchange(size_t (*size_of)(int src, int dst, unsigned k, void *arg), void *arg, int count)
{
	int n = T.size, me = T.rank;
	struct emunic_req **sq = calloc((size_t)n * count, sizeof(*sq)), **rq = calloc((size_t)n * count, sizeof(*rq));
	char **sb = calloc((size_t)n * count, sizeof(*sb)), **rb = calloc((size_t)n * count, sizeof(*rb));

	CHECK(sq && rq && sb && rb, "out of memory");
	for (int p = 0; p < n; p++)
		for (int k = 0; p != me && k < count; k++) {
			size_t len = size_of(p, me, (unsigned)k, arg);
			/* ANY_TAG keeps per-source order, so receive k still gets
			 * message k from p (non-overtaking). */
			int tag = k % 3 == 1 ? EMUNIC_ANY_TAG : k;

			rb[p * count + k] = calloc(1, len + 1);	/* RDMA writes are unseen by memcheck */
			rq[p * count + k] = irecv(rb[p * count + k], len, p, tag);
		}
	sync_ranks();
	for (int k = 0; k < count; k++)
		for (int p = 0; p < n; p++) {
			size_t len;

			if (p == me)
				continue;
			len = size_of(me, p, (unsigned)k, arg);
			sb[p * count + k] = filled(me, (unsigned)k, len);
			sq[p * count + k] = isend(sb[p * count + k], len, p, k);
		}
	for (int p = 0; p < n; p++)
		for (int k = 0; p != me && k < count; k++) {
			size_t len = size_of(p, me, (unsigned)k, arg), bad;
			struct emunic_status st = wait_free(rq[p * count + k], "receive");

			CHECK(st.source == p && st.tag == k && st.len == len && !st.error,
			      "message %d from %d: got tag %d, %zu bytes, error %d; want %zu bytes", k, p, st.tag, st.len,
			      st.error, len);
			bad = first_bad(rb[p * count + k], p, (unsigned)k, len);
			CHECK(bad == len, "message %d from %d (%zu bytes): byte %zu differs", k, p, len, bad);
			wait_free(sq[me * 0 + p * count + k], "send");
			free(rb[p * count + k]);
			free(sb[p * count + k]);
		}
	free(sq);
	free(rq);
	free(sb);
	free(rb);
	sync_ranks();
}

static size_t random_size(int src, int dst, unsigned k, void *arg)
{
	unsigned s = T.seed ^ (unsigned)src * 7919u ^ (unsigned)dst * 104729u ^ k * 15485863u;

	(void)arg;
	return rnd_size(&s);
}

static size_t edge_size(int src, int dst, unsigned k, void *arg)
{
	const size_t *e = arg;

	(void)src;
	(void)dst;
	return e[k];
}

static void check_edges(void)
{
	size_t k = T.a.first, s = T.a.chunk == SIZE_MAX ? 65536 : T.a.chunk;
	size_t e[] = { 0, 1, k - 1, k, k + 1, k + s - 1, k + s, k + s + 1, k + 3 * s, k + 3 * s + 1, 16u << 20 };

	exchange(edge_size, e, (int)(sizeof(e) / sizeof(e[0])));
}

/* ---- notest, credits, truncate, bad ------------------------------------------------ */

static void check_notest(void)
{
	size_t len = 8u << 20;
	char *b = calloc(1, len);
	volatile uint64_t x = 0;

	CHECK(T.size == 2 && b, "notest runs with 2 ranks");
	if (T.rank == 0) {
		char *s = filled(0, 5, len);
		struct emunic_req *q;

		sync_ranks();
		q = isend(s, len, 1, 5);
		/* The sender computes too: its completion comes from the counter. */
		for (uint64_t i = 0; i < 400000000ull; i++)
			x += i;
		wait_free(q, "send");
		free(s);
	} else {
		struct emunic_req *q = irecv(b, len, 0, 5);
		struct timespec t0, t1;
		int done = 0;
		size_t bad;

		sync_ranks();
		clock_gettime(CLOCK_MONOTONIC, &t0);
		/* Compute (no emunic call at all) until the data is there or 60 s. */
		do {
			for (uint64_t i = 0; i < 20000000ull; i++)
				x += i;
			clock_gettime(CLOCK_MONOTONIC, &t1);
			bad = first_bad(b, 0, 5, len);
		} while (bad != len && t1.tv_sec - t0.tv_sec < 60);
		CHECK(bad == len, "after %ld s of computing, byte %zu of 8 MiB has not arrived", (long)(t1.tv_sec - t0.tv_sec),
		      bad);
		CHECK(!emunic_test(q, &done, NULL) && done, "all data landed but the first test says not done");
		wait_free(q, "receive");
		printf("emunic-rndv: 8 MiB landed in %.2f s with no test call\n",
		       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	}
	free(b);
	sync_ranks();
}

static void check_credits(void)
{
	size_t len = 6u << 20;
	char *b = calloc(1, len);
	static struct emunic_trace_rec tr[1 << 16];
	unsigned c = T.a.credits, inflight = 0, most = 0, gets = 0;
	int n;

	CHECK(T.size == 2 && b, "credits runs with 2 ranks");
	if (T.rank == 0) {
		char *s = filled(0, 9, len);

		sync_ranks();
		wait_free(isend(s, len, 1, 9), "send");
		free(s);
	} else {
		struct emunic_req *q;

		CHECK(!emunic_trace_start(T.dev, 1 << 16), "trace_start");
		q = irecv(b, len, 0, 9);
		sync_ranks();
		wait_free(q, "receive");
		CHECK(first_bad(b, 0, 9, len) == len, "data differs");
		n = emunic_trace_read(T.dev, tr, 1 << 16);
		CHECK(n < (1 << 16), "the trace filled its %d records", 1 << 16);
		for (int i = 0; i < n; i++) {
			if (tr[i].op != EMUNIC_OP_GET)
				continue;
			if (tr[i].what == EMUNIC_TR_ISSUE) {
				gets++;
				if (++inflight > most)
					most = inflight;
			} else if (tr[i].what == EMUNIC_TR_DONE) {
				CHECK(inflight > 0, "trace: a get done that was never issued");
				inflight--;
			}
		}
		CHECK(!emunic_trace_dropped(T.dev), "the trace lost %llu records", (unsigned long long)emunic_trace_dropped(T.dev));
		CHECK(gets > c, "only %u gets traced: the check needs more than c = %u", gets, c);
		CHECK(most <= c, "%u gets in flight at once; credits c = %u", most, c);
		printf("emunic-rndv: %u gets, at most %u in flight (c = %u)\n", gets, most, c);
	}
	free(b);
	sync_ranks();
}

static void check_truncate(void)
{
	const size_t lens[] = { 100, 1u << 20 };

	CHECK(T.size == 2, "truncate runs with 2 ranks");
	for (int i = 0; i < 2; i++) {
		size_t len = lens[i], have = len / 2 + 3;

		if (T.rank == 0) {
			char *s = filled(0, 3, len);
			struct emunic_status st;

			sync_ranks();
			st = wait_free(isend(s, len, 1, 3), "send");
			CHECK(!st.error, "the sender of a truncated message sees error %d", st.error);
			free(s);
		} else {
			char *b = calloc(1, len);
			struct emunic_req *q = irecv(b, have, 0, 3);
			struct emunic_status st;

			memset(b + have, 0x5a, len - have);
			sync_ranks();
			st = wait_free(q, "receive");
			CHECK(st.error == -EMSGSIZE && st.len == have && st.total == len,
			      "truncated receive: error %d, %zu of %zu bytes; want -EMSGSIZE, %zu", st.error, st.len,
			      st.total, have);
			CHECK(first_bad(b, 0, 3, have) == have, "the delivered prefix differs");
			for (size_t j = have; j < len; j++)
				CHECK(b[j] == 0x5a, "byte %zu past the receive buffer was written", j);
			free(b);
		}
		sync_ranks();
	}
}

static void check_bad(void)
{
	struct emunic_req *q = NULL;
	char b[16] = "x";

	CHECK(emunic_isend(T.r, b, 1, T.size, 0, &q) == -EINVAL, "send to rank %d (no such rank) accepted", T.size);
	CHECK(emunic_isend(T.r, b, 1, -1, 0, &q) == -EINVAL, "send to rank -1 accepted");
	CHECK(emunic_isend(T.r, b, 1, (T.rank + 1) % T.size, -5, &q) == -EINVAL, "negative tag accepted");
	CHECK(emunic_isend(T.r, b, 1, (T.rank + 1) % T.size, EMUNIC_TAG_MAX + 1, &q) == -EINVAL, "huge tag accepted");
	CHECK(emunic_irecv(T.r, b, 1, T.size + 3, 0, &q) == -EINVAL, "receive from a rank that does not exist accepted");
	CHECK(emunic_irecv(T.r, b, 1, 0, -7, &q) == -EINVAL, "receive with tag -7 accepted");
	/* Nothing else was hurt: a normal exchange still works. */
	T.count = 3;
	exchange(random_size, NULL, 3);
}

static void check_sizes(void)
{
	exchange(random_size, NULL, T.count);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "first", 1, 0, 'k' }, { "chunk", 1, 0, 's' }, { "credits", 1, 0, 'c' }, { "slots", 1, 0, 'S' },
		{ "count", 1, 0, 'n' }, { "max", 1, 0, 'm' }, { "seed", 1, 0, 'x' }, { "help", 0, 0, 'h' }, { 0 },
	};
	static const struct { const char *name; void (*fn)(void); } checks[] = {
		{ "table1", check_table1 }, { "sizes", check_sizes }, { "edges", check_edges },
		{ "notest", check_notest }, { "credits", check_credits }, { "truncate", check_truncate },
		{ "bad", check_bad },
	};
	const char *name;
	int o, e;

	emunic_rndv_attr_init(&T.a);
	T.count = 8;
	T.max = 16u << 20;
	T.seed = 42;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'k': T.a.first = strtoul(optarg, NULL, 0); break;
		case 's': T.a.chunk = strtoul(optarg, NULL, 0) ? strtoul(optarg, NULL, 0) : SIZE_MAX; break;
		case 'c': T.a.credits = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'S': T.a.slots = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'n': T.count = atoi(optarg); break;
		case 'm': T.max = strtoul(optarg, NULL, 0); break;
		case 'x': T.seed = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fputs(usage, stderr);
		return 2;
	}
	name = argv[optind];
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		if (strcmp(name, checks[i].name))
			continue;
		if ((e = emunic_boot_init(&T.boot)) || (e = emunic_dev_open(T.boot, NULL, &T.dev))) {
			fprintf(stderr, "emunic-rndv: cannot open the device: %s\n", strerror(-e));
			return 1;
		}
		T.rank = emunic_dev_rank(T.dev);
		T.size = emunic_dev_size(T.dev);
		emunic_log_set_rank(T.rank);
		e = emunic_rndv_create(T.dev, &T.a, &T.r);
		CHECK(!e, "rndv_create: %s", strerror(-e));
		checks[i].fn();
		CHECK(!emunic_rndv_destroy(T.r), "rndv_destroy");
		emunic_dev_close(T.dev);
		emunic_boot_fini(T.boot);
		if (T.rank == 0)
			printf("emunic-rndv: %s: PASS\n", name);
		return 0;
	}
	fprintf(stderr, "emunic-rndv: unknown check '%s'\n%s", name, usage);
	return 2;
}
