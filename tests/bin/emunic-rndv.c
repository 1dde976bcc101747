/* SPDX-License-Identifier: MIT */
/*
 * emunic-rndv: checks of the point-to-point engine (eager, chunked and RTR
 * rendezvous, connections on demand) on a real device, one per name
 * (emunic-run -n N emunic-rndv NAME [options]).  Every
 * payload byte is a function of (sender, message, offset), so a receive that
 * matched the wrong message or lost a chunk is caught byte by byte.
 */
#include "emunic.h"
#include <emunic/rndv.h>

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define HARNESS_RANK (T.rank)
#include "harness.h"

static const char usage[] =
	"usage: emunic-run -n N emunic-rndv CHECK [options]\n"
	"\n"
	"Checks of the point-to-point engine (engines/rndv: eager, chunked and RTR\n"
	"rendezvous, connections on demand) over the progress core's triggered\n"
	"operations.  Prints 'emunic-rndv: CHECK: PASS'.\n"
	"\n"
	"CHECK:\n"
	"  table1     seed 004 Table 1: two sends (t1, t2), seven receive orderings,\n"
	"             each with receives posted before (expected) and after\n"
	"             (unexpected) the sends; the unmatched receive stays unmatched\n"
	"  sizes      random sizes 0 .. --max (default 16 MiB) from every rank to\n"
	"             every rank, ANY_SOURCE / ANY_TAG mixed in, byte-exact;\n"
	"             --rounds R repeats it (a soak: every message exactly once, in order)\n"
	"  edges      sizes at the first-chunk and chunk boundaries (k-1, k, k+1 ...)\n"
	"  notest     the receiver only computes (no emunic call) while a large\n"
	"             message lands; it is complete before the first test\n"
	"  credits    a traced large receive never has more than c gets in flight\n"
	"  truncate   a message larger than the receive buffer: -EMSGSIZE, the\n"
	"             prefix delivered, the sender completes\n"
	"  bad        bad destination, tag or source: -EINVAL, nothing else hurt\n"
	"  inorder    --count sends posted before the connection is up (on demand;\n"
	"             needs EMUNIC_ACCEPT_DELAY_MS) arrive in order, byte-exact\n"
	"  storm      every rank sends to every rank at once (on demand): exactly\n"
	"             one QP per pair, every message delivered\n"
	"  anysource  an ANY_SOURCE receive connects to every peer (on demand)\n"
	"  exhaust    with --hold, 4 x slots eager messages and no receive: only\n"
	"             `slots` arrive, the rest wait (none dropped) until received\n"
	"  acks       slot frees reported explicitly (one way) and piggybacked\n"
	"             (ping-pong)\n"
	"  startall   RTR sends progressed by emunic_startall: done when answered,\n"
	"             -ETIMEDOUT within its bound when no receive is posted\n"
	"  sleep      emunic_wait on a request whose peer posts 300 ms later (eager\n"
	"             receive, rendezvous receive, rendezvous send): it sleeps (at\n"
	"             most 60 voluntary context switches) and is woken by the move\n"
	"             (with a long --recheck-ms, nothing else would wake it before\n"
	"             its 20 s timeout; it must return within 10 s); then two\n"
	"             threads of rank 0 wait at once, answered 300 and 600 ms later\n"
	"             (at most 20 each: neither wakes the other)\n"
	"  inhandler  emunic_wait (no bound) from an event handler on a receive\n"
	"             nothing answers yet: -EDEADLK at once (an eager one, then one\n"
	"             past the eager limit, which under --proto rtr has sent its RTR\n"
	"             and completes after)\n"
	"\n"
	"Options: --first K  --chunk S (0: one get)  --credits C  --slots N\n"
	"         --count M (messages per pair, sizes)  --max BYTES  --seed X\n"
	"         --proto chunked|rtr  --progress core|test|test-on-init|wait-on-send\n"
	"         --on-demand  --hold  --max-sends N  --recheck-ms MS (emunic_wait)\n"
	"Exit: 0 pass, 1 a check failed, 2 usage.\n";

static struct {
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct emunic_rndv *r;
	struct emunic_rndv_attr a;
	int rank, size, count, rounds;
	size_t max;
	unsigned seed;
} T;

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

/* Up to 6 s for n messages to arrive unexpected, or (if q) for q to
 * complete; how many are queued. */
static size_t queued_by(size_t n, struct emunic_req *q)
{
	struct emunic_rndv_stats st;
	int done = 0;

	for (int i = 0; i < 3000; i++) {
		emunic_rndv_stats(T.r, &st);
		if (st.queued >= n || (q && !emunic_test(q, &done, NULL) && done))
			break;
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	return st.queued;
}

static void wait_queued(size_t n)
{
	size_t got = queued_by(n, NULL);

	if (got < n)
		DIE("only %zu of %zu messages arrived unexpected within 6 s", got, n);
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

			/* s2 is here (not merely on its way), queued or (wrongly)
			 * matched: the checks below say which. */
			queued_by(1, q[i]);
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

		/* Send first, receive after: under RTR the RTR then reaches a
		 * posted send, and the sender's core (not its isend) answers. */
		q = isend(s, len, 1, 5);
		sync_ranks();
		/* The sender computes too: its completion comes from the counter. */
		for (uint64_t i = 0; i < 400000000ull; i++)
			x += i;
		wait_free(q, "send");
		free(s);
	} else {
		struct emunic_req *q;
		struct timespec t0, t1;
		int done = 0;
		size_t bad;

		sync_ranks();
		q = irecv(b, len, 0, 5);
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
		/* The data is in memory before the completion that says so
		 * (the last write's CQE, the engine's look at it): a test may
		 * come in between, so the request gets 5 s to say done. */
		for (int i = 0; i < 5000 && !done; i++) {
			CHECK(!emunic_test(q, &done, NULL), "emunic_test on the landed receive failed");
			if (!done)
				nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
		}
		CHECK(done, "all data landed but the request was not done 5 s later");
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
	if (T.a.proto == EMUNIC_RNDV_RTR) {
		static char big[1 << 16];

		CHECK(emunic_irecv(T.r, big, sizeof(big), EMUNIC_ANY_SOURCE, 0, &q) == -EINVAL,
		      "an RTR receive from ANY_SOURCE accepted");
	}
	/* Nothing else was hurt: a normal exchange still works. */
	T.count = 3;
	exchange(random_size, NULL, 3);
}

static void check_sizes(void)
{
	for (int i = 0; i < T.rounds; i++) {
		T.seed += (unsigned)i;	/* other sizes each round */
		exchange(random_size, NULL, T.count);
		if (T.rounds > 1 && T.rank == 0 && ((i + 1) % 10 == 0 || i + 1 == T.rounds))
			printf("emunic-rndv: sizes: round %d of %d: %llu messages delivered byte-exact so far\n", i + 1,
			       T.rounds, (unsigned long long)(i + 1) * (unsigned)T.count * (unsigned)T.size *
					 (unsigned)(T.size - 1));
	}
	/* Exactly once: every receive took its own message (checked byte by
	 * byte), and no second copy of any is left waiting for a receive. */
	struct emunic_rndv_stats st;

	sync_ranks();
	CHECK(!emunic_rndv_stats(T.r, &st), "rndv_stats failed");
	CHECK(!st.queued && !st.posted, "%zu message(s) arrived that no receive took (a duplicate?), %zu receive(s) "
	      "still posted", st.queued, st.posted);
	printf("emunic-rndv: sizes: rank %d: %llu reconnection(s), nothing left over\n", T.rank,
	       (unsigned long long)st.reconnects);
}

/* ---- eager, RTR and connections on demand ------------------------------------------------ */

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The accepting side learns "established" a moment after data may already
 * flow: poll (bounded) rather than read it once. */
static int connected(int p)
{
	for (int i = 0; i < 500; i++) {
		if (emunic_rndv_connected(T.r, p) == 1)
			return 1;
		nap_ms(10);
	}
	return 0;
}

static struct emunic_rndv_stats stats(void)
{
	struct emunic_rndv_stats st;

	CHECK(!emunic_rndv_stats(T.r, &st), "rndv_stats");
	return st;
}

/* Eager sizes 0 .. first, with a rendezvous one every fifth message. */
static size_t inorder_size(unsigned k)
{
	return k % 5 == 4 ? 3 * T.a.first + k : k % (T.a.first + 1);
}

static void check_inorder(void)
{
	unsigned n = (unsigned)T.count;
	struct emunic_req **q = calloc(n, sizeof(*q));
	char **b = calloc(n, sizeof(*b));

	CHECK(T.size == 2 && q && b, "inorder runs with 2 ranks");
	CHECK(T.a.flags & EMUNIC_RNDV_ON_DEMAND, "inorder needs --on-demand");
	sync_ranks();
	if (T.rank == 0) {
		CHECK(emunic_dev_qps(T.dev) == 0 && stats().peers_connected == 0,
		      "%u QPs before the first message (on demand: none)", emunic_dev_qps(T.dev));
		for (unsigned k = 0; k < n; k++) {
			b[k] = filled(0, k, inorder_size(k));
			q[k] = isend(b[k], inorder_size(k), 1, (int)(k % 5));
		}
		/* Every send was posted while the connection was not up. */
		CHECK(emunic_rndv_connected(T.r, 1) == 0, "the connection came up before the %u sends were posted "
		      "(run with EMUNIC_ACCEPT_DELAY_MS)", n);
		printf("emunic-rndv: %u sends posted before the connection was up\n", n);
		for (unsigned k = 0; k < n; k++) {
			wait_free(q[k], "send");
			free(b[k]);
		}
		CHECK(emunic_dev_qps(T.dev) == 1, "%u QPs after sending to one peer", emunic_dev_qps(T.dev));
	} else {
		for (unsigned k = 0; k < n; k++) {
			size_t len = inorder_size(k), bad;
			/* ANY_TAG on eager receives: only the order can pick the message. */
			int tag = k % 3 == 1 && len <= T.a.first ? EMUNIC_ANY_TAG : (int)(k % 5);
			struct emunic_status st;

			b[k] = calloc(1, len + 1);
			q[k] = irecv(b[k], len, 0, tag);
			st = wait_free(q[k], "receive");
			CHECK(st.tag == (int)(k % 5) && st.len == len && !st.error,
			      "receive %u: tag %d, %zu bytes, error %d; want tag %u, %zu bytes", k, st.tag, st.len,
			      st.error, k % 5, len);
			bad = first_bad(b[k], 0, k, len);
			CHECK(bad == len, "receive %u (%zu bytes): byte %zu differs: out of order", k, len, bad);
			free(b[k]);
		}
	}
	free(q);
	free(b);
	sync_ranks();
}

static void check_storm(void)
{
	int n = T.size, me = T.rank;
	struct emunic_req **sq = calloc((size_t)n, sizeof(*sq)), **rq = calloc((size_t)n, sizeof(*rq));
	char **sb = calloc((size_t)n, sizeof(*sb)), **rb = calloc((size_t)n, sizeof(*rb));
	unsigned mine, *all = calloc((size_t)n, sizeof(*all));
	size_t len = 256;

	CHECK(sq && rq && sb && rb && all, "out of memory");
	CHECK(T.a.flags & EMUNIC_RNDV_ON_DEMAND, "storm needs --on-demand");
	for (int round = 0; round < 2; round++) {
		sync_ranks();
		/* Everyone connects to everyone at the same moment. */
		for (int i = 1; i < n; i++) {
			int p = (me + i) % n;

			sb[p] = filled(me, (unsigned)round, len);
			sq[p] = isend(sb[p], len, p, round);
		}
		for (int p = 0; p < n; p++) {
			if (p == me)
				continue;
			rb[p] = calloc(1, len);
			rq[p] = irecv(rb[p], len, p, round);
		}
		for (int p = 0; p < n; p++) {
			struct emunic_status rs;

			if (p == me)
				continue;
			if (emunic_wait(rq[p], &rs, 30000)) {
				for (int x = 0; x < n; x++)
					if (x != me)
						fprintf(stderr, "emunic-rndv: rank %d: to rank %d: connected %d\n", me, x,
							emunic_rndv_connected(T.r, x));
				DIE("round %d: the message from rank %d did not arrive in 30 s (%u QPs)", round, p,
				     emunic_dev_qps(T.dev));
			}
			wait_free(rq[p], "receive");
			CHECK(first_bad(rb[p], p, (unsigned)round, len) == len, "message from %d differs", p);
			wait_free(sq[p], "send");
			free(rb[p]);
			free(sb[p]);
			CHECK(connected(p), "no connection to rank %d after the exchange", p);
		}
		mine = emunic_dev_qps(T.dev);
		CHECK(!emunic_dev_allgather(T.dev, &mine, sizeof(mine), all), "allgather");
		for (int p = 0; p < n; p++)
			CHECK(all[p] == (unsigned)n - 1, "round %d: rank %d has %u QPs; want %d (one per pair)", round, p,
			      all[p], n - 1);
		CHECK(stats().peers_connected == (unsigned)n - 1, "peers_connected %u", stats().peers_connected);
	}
	if (me == 0)
		printf("emunic-rndv: %d ranks: %d QPs each, %d pairs, one QP per pair\n", n, n - 1, n * (n - 1) / 2);
	free(sq);
	free(rq);
	free(sb);
	free(rb);
	free(all);
	sync_ranks();
}

static void check_anysource(void)
{
	int n = T.size;

	CHECK(n >= 3 && (T.a.flags & EMUNIC_RNDV_ON_DEMAND), "anysource runs with >= 3 ranks and --on-demand");
	sync_ranks();
	if (T.rank == 0) {
		struct emunic_req **q = calloc((size_t)n, sizeof(*q));
		uint64_t *b = calloc((size_t)n, sizeof(*b)), seen = 0;

		CHECK(emunic_dev_qps(T.dev) == 0, "QPs before any traffic");
		for (int i = 1; i < n; i++)
			q[i] = irecv(&b[i], sizeof(b[i]), EMUNIC_ANY_SOURCE, 77);
		/* seed 002: a receive from any source connects to every peer. */
		CHECK(emunic_dev_qps(T.dev) == (unsigned)n - 1, "%u QPs after an ANY_SOURCE receive; want %d",
		      emunic_dev_qps(T.dev), n - 1);
		sync_ranks();
		for (int i = 1; i < n; i++) {
			struct emunic_status st = wait_free(q[i], "receive");

			CHECK(st.source > 0 && st.source < n && b[i] == (uint64_t)st.source * 1000 + 7,
			      "ANY_SOURCE receive %d: source %d, value %llu", i, st.source, (unsigned long long)b[i]);
			seen |= 1ull << st.source;
		}
		CHECK(seen == ((1ull << n) - 2), "not every peer's message was received");
		for (int p = 1; p < n; p++)
			CHECK(connected(p), "no connection to rank %d", p);
		free(q);
		free(b);
	} else {
		uint64_t v = (uint64_t)T.rank * 1000 + 7;

		sync_ranks();
		wait_free(isend(&v, sizeof(v), 0, 77), "send");
		CHECK(emunic_dev_qps(T.dev) == 1, "rank %d has %u QPs; it talked to one peer", T.rank,
		      emunic_dev_qps(T.dev));
	}
	sync_ranks();
}

static void check_exhaust(void)
{
	unsigned slots = T.a.slots, n = 4 * slots;
	size_t len = T.a.first;
	struct emunic_req **q = calloc(n, sizeof(*q));
	char **b = calloc(n, sizeof(*b));

	CHECK(T.size == 2 && q && b && (T.a.flags & EMUNIC_RNDV_HOLD_SLOTS), "exhaust runs with 2 ranks and --hold");
	if (T.rank == 0) {
		unsigned done = 0;
		int d;

		for (unsigned k = 0; k < n; k++) {
			b[k] = filled(0, k, len);
			q[k] = isend(b[k], len, 1, (int)k);
		}
		sync_ranks();		/* the receiver saw the slots fill */
		for (unsigned k = 0; k < n; k++) {
			CHECK(!emunic_test(q[k], &d, NULL), "test");
			done += (unsigned)d;
		}
		CHECK(done <= slots, "%u of %u sends done with %u slots and no receive posted", done, n, slots);
		CHECK(stats().slot_waits >= n - slots, "only %llu sends waited for a slot",
		      (unsigned long long)stats().slot_waits);
		printf("emunic-rndv: %u sends, %u slots: %u done, %llu waited for a slot\n", n, slots, done,
		       (unsigned long long)stats().slot_waits);
		sync_ranks();
		for (unsigned k = 0; k < n; k++) {
			wait_free(q[k], "send");
			free(b[k]);
		}
	} else {
		wait_queued(slots);
		nap_ms(300);
		CHECK(stats().queued == slots, "%zu messages arrived with %u slots and no receive", stats().queued, slots);
		sync_ranks();
		sync_ranks();
		/* Receive newest first: slots are freed out of order, reported in order. */
		for (unsigned k = n; k-- > 0;) {
			b[k] = calloc(1, len);
			q[k] = irecv(b[k], len, 0, (int)k);
		}
		for (unsigned k = 0; k < n; k++) {
			struct emunic_status st = wait_free(q[k], "receive");

			CHECK(st.tag == (int)k && st.len == len && first_bad(b[k], 0, k, len) == len,
			      "message %u: tag %d, %zu bytes, or data differs", k, st.tag, st.len);
			free(b[k]);
		}
	}
	free(q);
	free(b);
	sync_ranks();
}

static void check_acks(void)
{
	unsigned n = (unsigned)T.count;
	char b[64] = { 0 };
	struct emunic_rndv_stats st;

	CHECK(T.size == 2, "acks runs with 2 ranks");
	sync_ranks();
	for (unsigned k = 0; k < n; k++) {	/* one way: only explicit acks can free slots */
		if (T.rank == 0)
			wait_free(isend(b, sizeof(b), 1, 1), "send");
		else
			wait_free(irecv(b, sizeof(b), 0, 1), "receive");
	}
	st = stats();
	CHECK(T.rank == 0 || st.acks_explicit > 0, "one-way traffic of %u messages, %u slots: no explicit ack", n,
	      T.a.slots);
	uint64_t explicit_before = 0;

	sync_ranks();
	for (unsigned k = 0; k < n; k++) {	/* ping-pong: frees ride on the replies */
		if (k == 2)	/* what the one-way phase left unreported is out */
			explicit_before = stats().acks_explicit;
		if (T.rank == 0) {
			wait_free(isend(b, sizeof(b), 1, 2), "ping");
			wait_free(irecv(b, sizeof(b), 1, 3), "pong");
		} else {
			wait_free(irecv(b, sizeof(b), 0, 2), "ping");
			wait_free(isend(b, sizeof(b), 0, 3), "pong");
		}
	}
	st = stats();
	CHECK(st.acks_piggybacked > 0, "ping-pong of %u messages: nothing piggybacked", n);
	/* Every free rode on a reply: were piggybacked acks ignored, the
	 * explicit ones would have had to keep the ping-pong going. */
	CHECK(st.acks_explicit == explicit_before, "ping-pong needed %llu explicit acks",
	      (unsigned long long)(st.acks_explicit - explicit_before));
	printf("emunic-rndv: rank %d: %llu frees reported in headers, %llu explicit acks\n", T.rank,
	       (unsigned long long)st.acks_piggybacked, (unsigned long long)st.acks_explicit);
	sync_ranks();
}

static void check_startall(void)
{
	enum { N = 8 };
	size_t len = 4 * T.a.first + 100;
	char *b[N];
	struct emunic_req *q[N];

	CHECK(T.size == 2 && T.a.proto == EMUNIC_RNDV_RTR, "startall runs with 2 ranks and --proto rtr");
	for (int round = 0; round < 2; round++) {
		if (T.rank == 0) {
			int e;

			if (round == 1)
				sync_ranks();	/* the receives are posted */
			for (int k = 0; k < N; k++) {
				b[k] = filled(0, (unsigned)k, len);
				q[k] = isend(b[k], len, 1, k);
			}
			e = emunic_startall(q, N, round ? 30000 : 300);
			CHECK(round ? !e : e == -ETIMEDOUT, "round %d: startall returned %d", round, e);
			if (!round)
				sync_ranks();	/* now let the receiver post */
			for (int k = 0; k < N; k++) {
				wait_free(q[k], "send");
				free(b[k]);
			}
		} else {
			if (!round)
				sync_ranks();
			for (int k = 0; k < N; k++) {
				b[k] = calloc(1, len);
				q[k] = irecv(b[k], len, 0, k);
			}
			if (round)
				sync_ranks();
			for (int k = 0; k < N; k++) {
				wait_free(q[k], "receive");
				CHECK(first_bad(b[k], 0, (unsigned)k, len) == len, "message %d differs", k);
				free(b[k]);
			}
		}
	}
	if (T.rank == 0)
		printf("emunic-rndv: startall: -ETIMEDOUT with no receive posted, 0 once all %d were answered\n", N);
	sync_ranks();
}

/* ---- sleep --------------------------------------------------------------------------- */

/* This thread's voluntary context switches so far: its sleeps. */
static long thread_sleeps(void)
{
	struct rusage u;

	CHECK(!getrusage(RUSAGE_THREAD, &u), "getrusage");
	return u.ru_nvcsw;
}

/* A wait on a request nothing moves for DELAY_MS, whose peer posts the
 * other side only then: the waiter must neither poll (a nap every 200 us
 * sleeps hundreds of times meanwhile) nor depend on its recheck to see the
 * move (run with a long --recheck-ms, it would time out). */
#define SLEEP_DELAY_MS 300
#define SLEEP_MAX 60		/* sleeps a waiter may take in that time */
#define SLEEP_MAX_TWO 20	/* the same, each of two waiters (0-3 seen; waking
				 * each other at every test: 52-55) */
#define SLEEP_TIMEOUT_MS 20000

/* emunic_wait(q) with SLEEP_TIMEOUT_MS, and what it took: ms, sleeps. */
static int timed_wait(struct emunic_req *q, struct emunic_status *st, long *took, long *sleeps)
{
	struct timespec t0, t1;
	int e;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	*sleeps = thread_sleeps();
	e = emunic_wait(q, st, SLEEP_TIMEOUT_MS);
	*sleeps = thread_sleeps() - *sleeps;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*took = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	return e;
}

static void sleep_once(size_t len, bool receiver_waits, unsigned msg)
{
	int waiter = receiver_waits ? 0 : 1, other = 1 - waiter;
	const char *what = receiver_waits ? "receive posted before its message" : "send posted before its receive";
	char *sbuf = filled(1, msg, len), *rbuf = calloc(1, len + 1);
	struct emunic_req *q;

	CHECK(rbuf, "out of memory");
	if (T.rank == waiter) {
		struct emunic_status st;
		long before, took;
		int e;

		q = T.rank == 0 ? irecv(rbuf, len, 1, (int)msg) : isend(sbuf, len, 0, (int)msg);
		sync_ranks();
		e = timed_wait(q, &st, &took, &before);
		/* Liveness, not speed: a waiter no move wakes sees its request
		 * done only when its own timeout ends the sleep. */
		CHECK(!e && took < SLEEP_TIMEOUT_MS / 2,
		      "%zu bytes, %s: emunic_wait: %s after %ld ms (the move did not wake the waiter)", len, what,
		      e ? strerror(-e) : "done only", took);
		CHECK(!st.error, "%zu bytes, %s: status %s", len, what, strerror(-st.error));
		CHECK(!emunic_req_free(q), "req_free");
		printf("emunic-rndv: sleep: rank %d: %zu bytes, %s: done in %ld ms, %ld sleeps in the wait (at most "
		       "%d)\n", T.rank, len, what, took, before, SLEEP_MAX);
		CHECK(before <= SLEEP_MAX, "%zu bytes, %s: the waiter slept %ld times in %d ms: it polls", len, what,
		      before, SLEEP_DELAY_MS);
	} else {
		sync_ranks();
		nanosleep(&(struct timespec){ 0, SLEEP_DELAY_MS * 1000000L }, NULL);
		q = T.rank == 0 ? irecv(rbuf, len, 1, (int)msg) : isend(sbuf, len, 0, (int)msg);
		wait_free(q, other == 0 ? "receive" : "send");
	}
	if (T.rank == 0)
		CHECK(first_bad(rbuf, 1, msg, len) == len, "%zu bytes, %s: byte %zu wrong", len, what,
		      first_bad(rbuf, 1, msg, len));
	free(sbuf);
	free(rbuf);
	sync_ranks();
}

/* Two threads of rank 0 wait on receives that rank 1 answers 300 and 600
 * ms later: neither may wake the other (each one's test is a call of the
 * endpoint, but moves no request). */
static pthread_barrier_t sleepers_posted;

struct sleeper {
	pthread_t t;
	int tag;
	long sleeps, took;
	char buf[8];
};

static void *sleeper_main(void *arg)
{
	struct sleeper *z = arg;
	struct emunic_req *q = irecv(z->buf, sizeof(z->buf), 1, z->tag);
	struct emunic_status st;
	int e;

	pthread_barrier_wait(&sleepers_posted);	/* then the main thread meets rank 1 */
	e = timed_wait(q, &st, &z->took, &z->sleeps);
	CHECK(!e && !st.error, "two waiters: tag %d: emunic_wait: %s", z->tag, strerror(e ? -e : -st.error));
	CHECK(!emunic_req_free(q), "req_free");
	return NULL;
}

static void sleep_two(void)
{
	struct sleeper z[2] = { { .tag = 11 }, { .tag = 12 } };

	if (T.rank == 1) {
		sync_ranks();
		for (int i = 0; i < 2; i++) {
			char m[8] = { (char)i };

			nanosleep(&(struct timespec){ 0, SLEEP_DELAY_MS * 1000000L }, NULL);
			wait_free(isend(m, sizeof(m), 0, z[i].tag), "send");
		}
		sync_ranks();
		return;
	}
	CHECK(!pthread_barrier_init(&sleepers_posted, NULL, 3), "pthread_barrier_init");
	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&z[i].t, NULL, sleeper_main, &z[i]), "pthread_create");
	pthread_barrier_wait(&sleepers_posted);
	sync_ranks();
	for (int i = 0; i < 2; i++) {
		pthread_join(z[i].t, NULL);
		CHECK(z[i].buf[0] == i, "two waiters: tag %d received the wrong message", z[i].tag);
		printf("emunic-rndv: sleep: rank 0: two waiters: tag %d: done in %ld ms, %ld sleeps in the wait "
		       "(at most %d)\n", z[i].tag, z[i].took, z[i].sleeps, SLEEP_MAX_TWO);
		CHECK(z[i].took < SLEEP_TIMEOUT_MS / 2 && z[i].sleeps <= SLEEP_MAX_TWO,
		      "two waiters: tag %d: %ld ms, %ld sleeps: the waiters wake each other (or were not woken)",
		      z[i].tag, z[i].took, z[i].sleeps);
	}
	pthread_barrier_destroy(&sleepers_posted);
	sync_ranks();
}

/* ---- inhandler --------------------------------------------------------------------- */

/* emunic_wait from an event handler, on a receive nothing will answer:
 * the engine is the handler's thread, so nothing could move while it
 * waited, even with no bound; -EDEADLK at once. */
static struct {
	struct emunic_req *q;
	_Atomic int done;
	int e;
} inh;

static void inhandler_on_event(void *arg, const struct emunic_event *ev)
{
	struct emunic_status st;

	(void)arg;
	(void)ev;
	inh.e = emunic_wait(inh.q, &st, -1);
	atomic_store(&inh.done, 1);
}

/* len: a receive nothing has touched (eager: canceled after) or, past
 * the eager limit under RTR, one whose RTR went (rank 1 sends it after). */
static void inhandler_once(size_t len, int tag)
{
	struct emunic_ct *trig = NULL, *other = NULL;
	struct emunic_eq *eq = NULL;
	char *b = calloc(1, len), *s = filled(1, (unsigned)tag, len);
	bool eager = len <= T.a.first;

	CHECK(b, "out of memory");
	if (T.rank == 0) {
		struct emunic_op op = { .kind = EMUNIC_OP_CT_INC, .ct_value = { 1, 0 } };

		atomic_store(&inh.done, 0);
		inh.q = irecv(b, len, 1, tag);
		CHECK(!emunic_eq_create(T.dev, 0, inhandler_on_event, NULL, &eq), "eq_create");
		CHECK(!emunic_ct_alloc(T.dev, &trig) && !emunic_ct_alloc(T.dev, &other), "ct_alloc");
		op.ct_target = other;
		op.eq = eq;
		CHECK(!emunic_trig_post(T.dev, &op, trig, 1), "trig_post");
		/* Freeing its counter fails the trigger: a CANCELED event,
		 * which runs the handler in the engine. */
		CHECK(!emunic_ct_free(trig), "ct_free");
		for (int i = 0; i < 10000 && !atomic_load(&inh.done); i++)
			nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
		CHECK(atomic_load(&inh.done), "the handler's emunic_wait (no bound) did not return within 10 s");
		CHECK(inh.e == -EDEADLK, "%zu bytes: emunic_wait in a handler: %s, want -EDEADLK", len,
		      strerror(-inh.e));
		printf("emunic-rndv: inhandler: %zu bytes (%s): emunic_wait from an event handler: -EDEADLK\n", len,
		       !eager && T.a.proto == EMUNIC_RNDV_RTR ? "started" : "not started");
		CHECK(!emunic_eq_destroy(eq) && !emunic_ct_free(other), "eq_destroy, ct_free");
		if (eager)
			CHECK(!emunic_cancel(inh.q) && !emunic_req_free(inh.q), "cancel the receive");
	}
	sync_ranks();
	if (!eager) {		/* the receive completes: nothing was hurt */
		if (T.rank == 1)
			wait_free(isend(s, len, 0, tag), "send");
		else
			wait_free(inh.q, "the receive waited on in the handler");
		if (T.rank == 0)
			CHECK(first_bad(b, 1, (unsigned)tag, len) == len, "%zu bytes: data wrong", len);
	}
	free(b);
	free(s);
	sync_ranks();
}

static void check_inhandler(void)
{
	CHECK(T.size == 2, "inhandler runs with 2 ranks");
	inhandler_once(8, 77);
	inhandler_once(4 * T.a.first + 1, 78);
}

static void check_sleep(void)
{
	CHECK(T.size == 2, "sleep runs with 2 ranks");
	sleep_once(8, true, 1);				/* eager */
	sleep_once(4 * T.a.first + 1, true, 2);		/* rendezvous, receiver waits */
	sleep_once(4 * T.a.first + 1, false, 3);		/* rendezvous, sender waits (RTR: for its RTR) */
	sleep_two();
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "first", 1, 0, 'k' }, { "chunk", 1, 0, 's' }, { "credits", 1, 0, 'c' }, { "slots", 1, 0, 'S' },
		{ "count", 1, 0, 'n' }, { "max", 1, 0, 'm' }, { "seed", 1, 0, 'x' }, { "help", 0, 0, 'h' },
		{ "proto", 1, 0, 'P' }, { "progress", 1, 0, 'G' }, { "on-demand", 0, 0, 'D' }, { "hold", 0, 0, 'H' },
		{ "max-sends", 1, 0, 'M' }, { "rounds", 1, 0, 'R' }, { "recheck-ms", 1, 0, 'W' }, { 0 },
	};
	static const struct { const char *name; void (*fn)(void); } checks[] = {
		{ "table1", check_table1 }, { "sizes", check_sizes }, { "edges", check_edges },
		{ "notest", check_notest }, { "credits", check_credits }, { "truncate", check_truncate },
		{ "bad", check_bad }, { "inorder", check_inorder }, { "storm", check_storm },
		{ "anysource", check_anysource }, { "exhaust", check_exhaust }, { "acks", check_acks },
		{ "startall", check_startall }, { "sleep", check_sleep }, { "inhandler", check_inhandler },
	};
	const char *name;
	int o, e;

	emunic_rndv_attr_init(&T.a);
	T.count = 8;
	T.rounds = 1;
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
		case 'P':
			if (emunic_rndv_proto_parse(optarg, &T.a.proto)) {
				fprintf(stderr, "emunic-rndv: --proto %s: want chunked or rtr\n", optarg);
				return 2;
			}
			break;
		case 'G':
			if (emunic_rndv_progress_parse(optarg, &T.a.progress)) {
				fprintf(stderr, "emunic-rndv: --progress %s: want core, test, test-on-init or "
					"wait-on-send\n", optarg);
				return 2;
			}
			break;
		case 'D': T.a.flags |= EMUNIC_RNDV_ON_DEMAND; break;
		case 'H': T.a.flags |= EMUNIC_RNDV_HOLD_SLOTS; break;
		case 'M': T.a.max_sends = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'R': T.rounds = atoi(optarg) > 0 ? atoi(optarg) : 1; break;
		case 'W': T.a.recheck_ms = atoi(optarg); break;
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
