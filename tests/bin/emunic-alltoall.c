/* SPDX-License-Identifier: MIT */
/*
 * emunic-alltoall: the offloaded all-to-all (emunic/coll.h, engines/coll/
 * alltoall.c) and its host-progressed baseline (baseline/ptp.h).  Run by any
 * number of ranks, with one or more checks in one process:
 *
 *   emunic-run -n N emunic-alltoall CHECK [CHECK...]
 *     sizes     blocks of 0, 1, 8, 1000, 64 KiB + 7 bytes and the largest
 *               (max_bytes: 1 MiB / N rounded up, and 1 MiB / N rounded
 *               down), blocking, ialltoall + wait and ialltoall + test; then
 *               on an object of 4 KiB segments (max_bytes 128 KiB: the
 *               segment is at least max_bytes / 32), blocks that are and are
 *               not a multiple of the segment, up to 32 segments a block
 *     inplace   sbuf == rbuf, the same sizes (fewer), every form
 *     inflight  three ialltoalls in flight, waited in reverse order; with
 *               the last rank 300 ms late a fourth post is -ENOSPC and test
 *               says not done (nothing can complete without that rank)
 *     late      the last rank enters 1 s late under four largest
 *               alltoalls, then under three in flight (the others' data is
 *               held by RNR, never lost), then 0.5 s late under three of
 *               4 KiB segments
 *     limit     run under EMUNIC_LIST_TASKS=16: prints the device's limit,
 *               then the sizes and three in flight, every alltoall split over
 *               several task lists
 *     invalid   NULL buffers, a block over max_bytes, a bcast / allreduce /
 *               barrier call on an alltoall object and an alltoall call on a
 *               bcast object: named errors, and both objects still work
 *     fault     under emunic-run -f SPEC: every rank fails (EIO or
 *               ETIMEDOUT), each call within 2 s of its bound (2 s), and
 *               every alltoall after its first failure fails too; none hangs
 *     all       sizes inplace inflight
 *     ptp-sizes, ptp-inplace, ptp-all   the data checks on the baseline
 *
 * Every byte has its own pattern, by source rank, destination rank, a
 * counter every rank keeps alike and its index in the block.  Before each
 * alltoall the receive buffer and 256 bytes past its end are filled with the
 * pattern's complement: a byte not copied, or one written past the end,
 * shows.  A nonblocking call overwrites its send buffer right after posting
 * (it may reuse it at once): the others must still get the old data, and the
 * new bytes must stay.  A request waited by test calls is checked when test
 * says 1, before the wait.
 *
 * Every rank checks; after each check the failures of every rank are
 * gathered and rank 0 prints "emunic-alltoall: CHECK: PASS" (or FAIL).
 */
#include "emunic.h"
#include <emunic/coll.h>

#include "baseline/ptp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB (1 << 20)
#define SMALLB (128 << 10)		/* the 4 KiB-segment objects' max_bytes */
#define SMALLSEG 4096
#define GUARD 256
#define WAIT_MS 60000
#define FAULT_MS 2000			/* the fault check's bound */
#define FAULT_SLACK_MS 2000
#define FAULT_BLOCK 1000
#define NBUF 3

static int rank = -1, size;
static int fails;
static struct emunic_boot *boot;
static struct emunic_dev *dev;
static unsigned iter;			/* alltoalls so far: the same on every rank */
static size_t maxb;			/* the main objects' max_bytes: 1 MiB / size, rounded up */
static size_t bufb;			/* each buffer: size x the largest block of any object */

/* One write a line, so that the ranks' lines do not mix. */
#define FAIL(...) do { char m_[512]; snprintf(m_, sizeof(m_), __VA_ARGS__); \
		       fprintf(stderr, "emunic-alltoall: rank %d: FAIL: %s\n", rank, m_); fails++; } while (0)
#define DIE(...) do { FAIL(__VA_ARGS__); exit(1); } while (0)

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- the offload and the baseline behind one face ------------------------ */

struct obj {
	const char *name;
	struct emunic_coll *c;		/* the offload, or */
	struct emunic_ptp_a2a *p;	/* the baseline */
	size_t max;
	int timeout_ms;
};

struct req {
	struct obj *o;
	struct emunic_coll_req *c;
	struct emunic_ptp_a2a_req *p;
};

static int o_alltoall(struct obj *o, const void *sb, void *rb, size_t block)
{
	return o->p ? emunic_ptp_alltoall(o->p, sb, rb, block) : emunic_alltoall(o->c, sb, rb, block);
}

static int o_ialltoall(struct obj *o, const void *sb, void *rb, size_t block, struct req *rq)
{
	*rq = (struct req){ .o = o };
	return o->p ? emunic_ptp_ialltoall(o->p, sb, rb, block, &rq->p) :
		      emunic_ialltoall(o->c, sb, rb, block, &rq->c);
}

static int o_test(struct req *rq)
{
	return rq->o->p ? emunic_ptp_a2a_test(rq->p) : emunic_coll_test(rq->c);
}

static int o_wait(struct req *rq, int ms)
{
	return rq->o->p ? emunic_ptp_a2a_wait(rq->p, ms) : emunic_coll_wait(rq->c, ms);
}

/* Posts, retrying -ENOSPC (within the bound): a nonblocking post may find
 * the copies or landing segments of earlier alltoalls not yet free even
 * when every earlier request was waited (include/emunic/coll.h); the
 * blocking form retries so too. */
static int o_post(struct obj *o, const void *sb, void *rb, size_t block, struct req *rq)
{
	long long deadline = now_ms() + WAIT_MS;
	int r;

	while ((r = o_ialltoall(o, sb, rb, block, rq)) == -ENOSPC && now_ms() < deadline)
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	return r;
}

static struct obj *off_main, *off_small, *ptp_main, *ptp_small;
static int main_timeout_ms = WAIT_MS;

/* Objects are made when a check first needs one: every rank runs the same
 * checks in the same order, so they are made in the same order too.  Every
 * pair of ranks exchanges data, so the offload's objects are dense. */
static struct obj *make(bool ptp, bool small)
{
	struct obj **slot = ptp ? (small ? &ptp_small : &ptp_main) : (small ? &off_small : &off_main);
	struct obj *o;
	int r;

	if (*slot)
		return *slot;
	o = calloc(1, sizeof(*o));
	if (!o)
		DIE("no memory");
	o->max = small ? SMALLB : maxb;
	o->timeout_ms = small ? WAIT_MS : main_timeout_ms;
	if (ptp) {
		o->name = small ? "ptp (4 KiB segments)" : "ptp";
		r = emunic_ptp_a2a_create(boot, o->max, small ? SMALLSEG : 0, o->timeout_ms, 50, &o->p);
		if (r)
			DIE("emunic_ptp_a2a_create (%s): %s", o->name, strerror(-r));
	} else {
		struct emunic_coll_attr a;

		emunic_coll_attr_init(&a);
		a.kind = EMUNIC_COLL_ALLTOALL;
		a.conn = EMUNIC_COLL_DENSE;
		a.max_bytes = o->max;
		a.segment = small ? SMALLSEG : 0;
		a.timeout_ms = o->timeout_ms;
		o->name = small ? "alltoall (4 KiB segments)" : "alltoall";
		r = emunic_coll_create(dev, &a, &o->c);
		if (r)
			DIE("emunic_coll_create (%s): %s", o->name, strerror(-r));
	}
	return *slot = o;
}

static void unmake(struct obj **slot, bool fault)
{
	struct obj *o = *slot;
	int r;

	if (!o)
		return;
	r = o->p ? emunic_ptp_a2a_destroy(o->p) : emunic_coll_destroy(o->c);
	if (r && !fault)
		FAIL("destroying the %s object: %s", o->name, strerror(-r));
	free(o);
	*slot = NULL;
}

/* ---- data ------------------------------------------------------------------ */

/* Byte i of the block src sends to dst in alltoall it. */
static unsigned char pat(int src, int dst, unsigned it, size_t i)
{
	uint32_t x = (uint32_t)i * 2654435761u + (uint32_t)src * 0x85ebca6bu + (uint32_t)dst * 0x27d4eb2fu +
		     it * 0xc2b2ae35u;

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	return (unsigned char)x;
}

/* Bytes [0, n) of b: the pattern of src -> dst, or its complement. */
static void fill(unsigned char *b, size_t n, int src, int dst, unsigned it, bool garbage)
{
	for (size_t i = 0; i < n; i++)
		b[i] = garbage ? (unsigned char)~pat(src, dst, it, i) : pat(src, dst, it, i);
}

/* The first byte in [0, n) that is not as filled, or -1. */
static long bad(const unsigned char *b, size_t n, int src, int dst, unsigned it, bool garbage)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (garbage ? (unsigned char)~pat(src, dst, it, i) : pat(src, dst, it, i)))
			return (long)i;
	return -1;
}

/* The guard past a buffer of size blocks: garbage of its own (source
 * "size", no rank). */
static void fill_guard(unsigned char *b, size_t block, unsigned it)
{
	fill(b + (size_t)size * block, GUARD, size, rank, it, true);
}

/* A send buffer: block q for rank q (or its complement: reused). */
static void fill_send(unsigned char *b, size_t block, unsigned it, bool garbage)
{
	for (int q = 0; q < size; q++)
		fill(b + (size_t)q * block, block, rank, q, it, garbage);
}

/* Before an alltoall: the send buffer's blocks; the receive buffer all
 * garbage (block q the complement of what q sends here), guard included.
 * In place: the send blocks and the guard. */
static void prepare(unsigned char *sb, unsigned char *rb, size_t block, unsigned it)
{
	fill_send(sb, block, it, false);
	if (rb != sb)
		for (int q = 0; q < size; q++)
			fill(rb + (size_t)q * block, block, q, rank, it, true);
	fill_guard(rb, block, it);
	if (rb != sb)
		fill_guard(sb, block, it);
}

/* After it: block q of the receive buffer is what q sent here, the guard
 * untouched; the send buffer (when apart) as it was, or as the caller
 * rewrote it after posting. */
static void verify(const char *what, const unsigned char *sb, const unsigned char *rb, size_t block, unsigned it,
		   bool reused)
{
	long at;

	for (int q = 0; q < size; q++) {
		at = bad(rb + (size_t)q * block, block, q, rank, it, false);
		if (at >= 0) {
			FAIL("%s: %zu-byte blocks (alltoall %u): byte %ld of the block from rank %d is 0x%02x, "
			     "not 0x%02x%s", what, block, it, at, q, rb[(size_t)q * block + (size_t)at],
			     pat(q, rank, it, (size_t)at),
			     rb[(size_t)q * block + (size_t)at] == (unsigned char)~pat(q, rank, it, (size_t)at) ?
			     " (never written)" : "");
			break;
		}
	}
	at = bad(rb + (size_t)size * block, GUARD, size, rank, it, true);
	if (at >= 0)
		FAIL("%s: %zu-byte blocks (alltoall %u): byte %ld past the receive buffer (%zu bytes) was written",
		     what, block, it, at, (size_t)size * block);
	if (sb == rb)
		return;
	for (int q = 0; q < size; q++) {
		at = bad(sb + (size_t)q * block, block, rank, q, it, reused);
		if (at >= 0) {
			FAIL("%s: %zu-byte blocks (alltoall %u): the send buffer's block for rank %d changed at "
			     "byte %ld%s", what, block, it, q, at, reused ? " (rewritten by the caller after posting)" : "");
			break;
		}
	}
	at = bad(sb + (size_t)size * block, GUARD, size, rank, it, true);
	if (at >= 0)
		FAIL("%s: %zu-byte blocks (alltoall %u): byte %ld past the send buffer was written", what, block, it,
		     at);
}

enum mode { BLOCKING, WAIT, TEST };
static const char *mode_str[] = { "alltoall", "ialltoall + wait", "ialltoall + test" };

/* Waits by test calls; checks the data as soon as test says done. */
static int test_loop(struct req *rq, const char *what, const unsigned char *sb, const unsigned char *rb,
		     size_t block, unsigned it, bool reused)
{
	long long deadline = now_ms() + WAIT_MS;
	int r;

	while ((r = o_test(rq)) == 0) {
		if (now_ms() > deadline) {
			FAIL("%s: test not done after %d ms", what, WAIT_MS);
			break;
		}
		nanosleep(&(struct timespec){ 0, 20000 }, NULL);
	}
	if (r == 1)
		verify(what, sb, rb, block, it, reused);	/* before the wait */
	else if (r < 0)
		FAIL("%s: test: %s", what, strerror(-r));
	return o_wait(rq, WAIT_MS);
}

static unsigned char *sbuf[NBUF], *rbuf[NBUF];

/* One alltoall of block bytes a peer, checked on every rank. */
static void one(struct obj *o, size_t block, enum mode m, bool inplace)
{
	unsigned it = ++iter;
	unsigned char *sb = sbuf[0], *rb = inplace ? sbuf[0] : rbuf[0];
	bool reused = m != BLOCKING && !inplace;
	char what[128];
	struct req rq;
	int r;

	snprintf(what, sizeof(what), "%s %s%s", o->name, mode_str[m], inplace ? " in place" : "");
	prepare(sb, rb, block, it);
	if (m == BLOCKING) {
		r = o_alltoall(o, sb, rb, block);
	} else {
		r = o_post(o, sb, rb, block, &rq);
		if (!r && reused)
			fill_send(sb, block, it, true);	/* reused at once */
		if (!r)
			r = m == WAIT ? o_wait(&rq, WAIT_MS) : test_loop(&rq, what, sb, rb, block, it, reused);
	}
	if (r)
		DIE("%s: %zu-byte blocks (alltoall %u): %s", what, block, it, strerror(-r));
	verify(what, sb, rb, block, it, reused);
}

/* ---- the checks -------------------------------------------------------------- */

/* Each block blocking, then by wait or test in turn; the last one (the
 * largest) all three ways. */
static void sizes_on(struct obj *o, const size_t *blocks, size_t nb, bool inplace)
{
	int k = 0;

	for (size_t i = 0; i < nb; i++) {
		if (i && blocks[i] == blocks[i - 1])
			continue;
		one(o, blocks[i], BLOCKING, inplace);
		one(o, blocks[i], k++ % 2 ? TEST : WAIT, inplace);
		if (i == nb - 1)
			one(o, blocks[i], k++ % 2 ? TEST : WAIT, inplace);
	}
}

static void t_sizes(bool ptp)
{
	/* 1 MiB / size rounded down (block x size <= 1 MiB), then up. */
	size_t big[] = { 0, 1, 8, 1000, 65536 + 7, MIB / (size_t)size, maxb };
	/* 4 KiB segments: within one, exactly one, one byte more, 17 (not a
	 * multiple), one byte short of 32, 32 (the largest). */
	static const size_t small[] = { 0, 1, 8, SMALLSEG, SMALLSEG + 1, 65536 + 7, SMALLB - 1, SMALLB };

	sizes_on(make(ptp, false), big, sizeof(big) / sizeof(big[0]), false);
	sizes_on(make(ptp, true), small, sizeof(small) / sizeof(small[0]), false);
}

static void t_inplace(bool ptp)
{
	size_t big[] = { 0, 1, 1000, 65536 + 7, maxb };
	static const size_t small[] = { 8, SMALLSEG + 1, SMALLB };

	sizes_on(make(ptp, false), big, sizeof(big) / sizeof(big[0]), true);
	sizes_on(make(ptp, true), small, sizeof(small) / sizeof(small[0]), true);
}

/* Three in flight, posted in order, waited in reverse; checked after. */
static void three(struct obj *o, const size_t *blocks, int late, long late_ms, bool fourth, const char *tag)
{
	struct req rq[3], extra;
	unsigned it[3];
	int r;

	if (rank == late)
		sleep_ms(late_ms);
	for (int k = 0; k < 3; k++) {
		it[k] = ++iter;
		prepare(sbuf[k], rbuf[k], blocks[k], it[k]);
		r = o_post(o, sbuf[k], rbuf[k], blocks[k], &rq[k]);
		if (r)
			DIE("%s: ialltoall %d of 3 (%zu-byte blocks): %s", tag, k, blocks[k], strerror(-r));
		fill_send(sbuf[k], blocks[k], it[k], true);	/* reused at once */
	}
	/* With a late rank nothing can complete elsewhere: every rank needs
	 * its block. */
	if (fourth && late >= 0 && rank != late) {
		r = o_ialltoall(o, sbuf[0], rbuf[0], 100, &extra);
		if (r != -ENOSPC)
			DIE("%s: a fourth ialltoall in flight: %d, not -ENOSPC", tag, r);
		for (int k = 0; k < 3; k++)
			if ((r = o_test(&rq[k])) != 0)
				FAIL("%s: ialltoall %d: test says %d before the late rank posted", tag, k, r);
	}
	for (int k = 2; k >= 0; k--) {
		r = o_wait(&rq[k], WAIT_MS);
		if (r)
			DIE("%s: waiting for ialltoall %d of 3 (%zu-byte blocks): %s", tag, k, blocks[k],
			    strerror(-r));
	}
	for (int k = 0; k < 3; k++) {
		char what[128];

		snprintf(what, sizeof(what), "%s, ialltoall %d of 3 in flight", tag, k);
		verify(what, sbuf[k], rbuf[k], blocks[k], it[k], true);
	}
}

static void t_inflight(bool ptp)
{
	struct obj *o = make(ptp, false);

	for (int round = 0; round < 6; round++) {
		size_t blocks[3] = { 1000 + (size_t)round, 9000 + 7 + (size_t)round, 40000 + (size_t)round };
		char tag[64];

		snprintf(tag, sizeof(tag), "round %d%s", round, round ? "" : " (the last rank 300 ms late)");
		/* Round 0: the last rank comes 300 ms late, so nothing can
		 * complete on the others: a fourth post must find no room,
		 * and test must say not done. */
		three(o, blocks, round ? -1 : size - 1, 300, round == 0, tag);
	}
}

/* The last rank enters ms late; n alltoalls of the largest block run, each
 * completed before the next: the others' sends to it wait for its receives
 * (RNR), and must never be lost. */
static void late_seq(struct obj *o, int n, long ms)
{
	int late = size - 1;
	long long t0;

	emunic_boot_barrier(boot);
	if (rank == late)
		sleep_ms(ms);
	t0 = now_ms();
	for (int k = 0; k < n; k++)
		one(o, o->max - (size_t)k, (enum mode)(k % 3), false);
	if (rank == 0)
		printf("emunic-alltoall: late: rank %d late %ld ms: %d x %zu-byte blocks in %lld ms on rank 0\n",
		       late, ms, n, o->max, now_ms() - t0);
	fflush(stdout);
}

static void t_late(bool ptp)
{
	struct obj *o = make(ptp, false), *s;
	size_t big[3] = { o->max, o->max - 1, o->max - 7 };
	size_t small[3] = { SMALLB, SMALLB - 1, SMALLSEG * 5 + 3 };
	long long t0;

	late_seq(o, 4, 1000);
	/* Three in flight: the others run three alltoalls ahead of it. */
	emunic_boot_barrier(boot);
	t0 = now_ms();
	three(o, big, size - 1, 1000, false, "three in flight, the last rank 1 s late");
	if (rank == 0)
		printf("emunic-alltoall: late: rank %d late 1000 ms: 3 x %zu-byte blocks in flight in %lld ms on "
		       "rank 0\n", size - 1, o->max, now_ms() - t0);
	s = make(ptp, true);
	emunic_boot_barrier(boot);
	three(s, small, size - 1, 500, false, "4 KiB segments, three in flight, the last rank 0.5 s late");
	one(o, 1000, BLOCKING, false);
	one(s, 65536 + 7, WAIT, false);
}

static void t_limit(bool ptp)
{
	size_t big[3] = { maxb, 65536 + 7, 1000 };

	(void)ptp;
	if (rank == 0)
		printf("emunic-alltoall: limit: the device's task lists hold at most %u tasks\n",
		       emunic_dev_list_tasks(dev));
	fflush(stdout);
	t_sizes(false);
	three(make(false, false), big, -1, 0, false, "under the list limit");
}

static void t_invalid(bool ptp)
{
	struct obj *o = make(ptp, false);
	struct emunic_coll *c = o->c, *bc = NULL;
	struct emunic_coll_req *req = NULL;
	struct emunic_coll_attr a;
	unsigned char *sb = sbuf[0], *rb = rbuf[0];
	int r;

	emunic_coll_attr_init(&a);
	a.kind = EMUNIC_COLL_BCAST;
	a.max_bytes = 65536;
	r = emunic_coll_create(dev, &a, &bc);
	if (r)
		DIE("emunic_coll_create (bcast): %s", strerror(-r));
#define EXPECT(call, err, what) do { r = (call); if (r != (err)) \
		FAIL("%s: %d (%s), not %s", what, r, r < 0 ? strerror(-r) : "no error", #err); } while (0)
	EXPECT(emunic_alltoall(c, NULL, rb, 10), -EINVAL, "alltoall of 10-byte blocks from a NULL buffer");
	EXPECT(emunic_ialltoall(c, NULL, rb, 10, &req), -EINVAL, "ialltoall of 10-byte blocks from a NULL buffer");
	EXPECT(emunic_alltoall(c, sb, NULL, 10), -EINVAL, "alltoall of 10-byte blocks into a NULL buffer");
	EXPECT(emunic_ialltoall(c, sb, NULL, 10, &req), -EINVAL, "ialltoall of 10-byte blocks into a NULL buffer");
	EXPECT(emunic_alltoall(c, sb, rb, o->max + 1), -EMSGSIZE, "alltoall of max_bytes + 1");
	EXPECT(emunic_ialltoall(c, sb, rb, o->max + 1, &req), -EMSGSIZE, "ialltoall of max_bytes + 1");
	EXPECT(emunic_bcast(c, sb, 10, 0), -EINVAL, "a bcast on an alltoall object");
	EXPECT(emunic_ibcast(c, sb, 10, 0, &req), -EINVAL, "an ibcast on an alltoall object");
	EXPECT(emunic_allreduce(c, sb, rb, 4, EMUNIC_CALC_INT32, EMUNIC_CALC_SUM), -EINVAL,
	       "an allreduce on an alltoall object");
	EXPECT(emunic_barrier(c), -EINVAL, "a barrier on an alltoall object");
	EXPECT(emunic_ibarrier(c, &req), -EINVAL, "an ibarrier on an alltoall object");
	EXPECT(emunic_alltoall(bc, sb, rb, 10), -EINVAL, "an alltoall on a bcast object");
	EXPECT(emunic_ialltoall(bc, sb, rb, 10, &req), -EINVAL, "an ialltoall on a bcast object");
#undef EXPECT
	if (req)
		FAIL("a failed call handed out a request");
	/* Both still work; blocks of no bytes need no buffers. */
	one(o, 1000, BLOCKING, false);
	one(o, 65536 + 7, WAIT, false);
	one(o, o->max, TEST, false);
	r = emunic_alltoall(c, NULL, NULL, 0);
	if (r)
		FAIL("an alltoall of 0-byte blocks with NULL buffers: %s", strerror(-r));
	r = emunic_ialltoall(c, NULL, NULL, 0, &req);
	r = r ? r : emunic_coll_wait(req, WAIT_MS);
	if (r)
		FAIL("an ialltoall of 0-byte blocks with NULL buffers: %s", strerror(-r));
	one(o, 8, BLOCKING, true);
	for (size_t i = 0; i < 5000; i++)
		sb[i] = rank == 1 % size ? (unsigned char)(i * 7 + 3) : 0xa5;
	r = emunic_bcast(bc, sb, 5000, 1 % size);
	if (r)
		FAIL("the bcast object after the bad calls: %s", strerror(-r));
	for (size_t i = 0; !r && i < 5000; i++)
		if (sb[i] != (unsigned char)(i * 7 + 3)) {
			FAIL("the bcast object after the bad calls: byte %zu is 0x%02x, not 0x%02x", i, sb[i],
			     (unsigned char)(i * 7 + 3));
			break;
		}
	r = emunic_coll_destroy(bc);
	if (r)
		FAIL("destroying the bcast object: %s", strerror(-r));
}

/* Under a fault spec (emunic-run -f): every rank must end in an error, the
 * alltoalls after it too, each within the bound; none hangs.  Every rank
 * exchanges with every other, so every rank meets the failed QP. */
static void t_fault(bool ptp)
{
	struct obj *o = make(ptp, false);
	int first = 0, at = -1, nb = size + 2;
	long long first_ms = 0;

	for (int k = 0; k < nb; k++) {
		unsigned it = ++iter;
		long long t0 = now_ms(), ms;
		struct req rq;
		int r;

		prepare(sbuf[0], rbuf[0], FAULT_BLOCK, it);
		if (k % 2) {
			r = o_ialltoall(o, sbuf[0], rbuf[0], FAULT_BLOCK, &rq);
			r = r ? r : o_wait(&rq, FAULT_MS);
		} else {
			r = o_alltoall(o, sbuf[0], rbuf[0], FAULT_BLOCK);
		}
		ms = now_ms() - t0;
		if (ms > FAULT_MS + FAULT_SLACK_MS)
			FAIL("alltoall %d took %lld ms: its bound is %d ms", k + 1, ms, FAULT_MS);
		if (!r && first)
			FAIL("alltoall %d succeeded after alltoall %d failed", k + 1, at);
		if (!r)
			verify("before the fault", sbuf[0], rbuf[0], FAULT_BLOCK, it, false);
		if (r && !first && r != -EIO && r != -ETIMEDOUT)
			FAIL("alltoall %d, the first to fail: %s, not EIO or ETIMEDOUT", k + 1, strerror(-r));
		if (r && !first) {
			first = r;
			at = k + 1;
			first_ms = ms;
		}
	}
	printf("emunic-alltoall: rank %d: first failure: alltoall %d: %s (%lld ms)\n", rank, at,
	       first ? strerror(-first) : "none", first_ms);
	fflush(stdout);
	if (!first)
		FAIL("no alltoall failed under the fault");
}

static void t_sizes_off(void) { t_sizes(false); }
static void t_inplace_off(void) { t_inplace(false); }
static void t_inflight_off(void) { t_inflight(false); }
static void t_late_off(void) { t_late(false); }
static void t_limit_off(void) { t_limit(false); }
static void t_invalid_off(void) { t_invalid(false); }
static void t_fault_off(void) { t_fault(false); }
static void t_sizes_ptp(void) { t_sizes(true); }
static void t_inplace_ptp(void) { t_inplace(true); }

static const struct { const char *name; void (*fn)(void); } checks[] = {
	{ "sizes", t_sizes_off }, { "inplace", t_inplace_off }, { "inflight", t_inflight_off },
	{ "late", t_late_off }, { "limit", t_limit_off }, { "invalid", t_invalid_off }, { "fault", t_fault_off },
	{ "ptp-sizes", t_sizes_ptp }, { "ptp-inplace", t_inplace_ptp },
};
#define NCHECK (sizeof(checks) / sizeof(checks[0]))

static int find(const char *name)
{
	for (size_t i = 0; i < NCHECK; i++)
		if (!strcmp(checks[i].name, name))
			return (int)i;
	return -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: emunic-run -n N [-f SPEC] emunic-alltoall CHECK [CHECK...]\n"
			"  CHECK: sizes|inplace|inflight|late|limit|invalid|fault|ptp-sizes|ptp-inplace,\n"
			"         all (sizes inplace inflight), ptp-all (ptp-sizes ptp-inplace); fault alone\n");
}

int main(int argc, char **argv)
{
	int run[32], nrun = 0, total = 0, r;
	bool fault = false;

	for (int i = 1; i < argc; i++) {
		const char *alias[3] = { argv[i] };
		int na = 1;

		if (!strcmp(argv[i], "all")) {
			alias[0] = "sizes", alias[1] = "inplace", alias[2] = "inflight";
			na = 3;
		} else if (!strcmp(argv[i], "ptp-all")) {
			alias[0] = "ptp-sizes", alias[1] = "ptp-inplace";
			na = 2;
		}
		for (int j = 0; j < na; j++) {
			int k = find(alias[j]);

			if (k < 0) {
				fprintf(stderr, "emunic-alltoall: no check named %s\n", alias[j]);
				usage();
				return 2;
			}
			if (nrun == (int)(sizeof(run) / sizeof(run[0]))) {
				usage();
				return 2;
			}
			run[nrun++] = k;
			fault |= !strcmp(alias[j], "fault");
		}
	}
	if (!nrun || (fault && nrun > 1)) {
		usage();
		return 2;
	}
	if (fault)
		main_timeout_ms = FAULT_MS;
	if (emunic_boot_init(&boot))
		DIE("bootstrap");
	rank = emunic_boot_rank(boot);
	size = emunic_boot_size(boot);
	if ((r = emunic_dev_open(boot, NULL, &dev)))
		DIE("emunic_dev_open: %s", strerror(-r));
	maxb = (MIB + (size_t)size - 1) / (size_t)size;
	bufb = (size_t)size * (maxb > SMALLB ? maxb : SMALLB) + GUARD;
	for (int k = 0; k < NBUF; k++) {
		sbuf[k] = malloc(bufb);
		rbuf[k] = malloc(bufb);
		if (!sbuf[k] || !rbuf[k])
			DIE("no memory");
	}

	for (int i = 0; i < nrun; i++) {
		int before = fails, mine, *all = calloc((size_t)size, sizeof(int));
		long long t0 = now_ms();

		if (!all)
			DIE("no memory");
		checks[run[i]].fn();
		mine = fails - before;
		if (emunic_boot_allgather(boot, &mine, sizeof(mine), all))
			DIE("allgather");
		total = 0;
		for (int q = 0; q < size; q++)
			total += all[q];
		if (rank == 0) {
			if (total)
				printf("emunic-alltoall: %s: FAIL (%d failures over %d ranks)\n", checks[run[i]].name,
				       total, size);
			else
				printf("emunic-alltoall: %s: PASS (%d ranks, %lld ms)\n", checks[run[i]].name, size,
				       now_ms() - t0);
			fflush(stdout);
		}
		free(all);
	}
	unmake(&off_main, fault);
	unmake(&off_small, fault);
	unmake(&ptp_main, fault);
	unmake(&ptp_small, fault);
	emunic_boot_barrier(boot);
	emunic_dev_close(dev);
	for (int k = 0; k < NBUF; k++) {
		free(sbuf[k]);
		free(rbuf[k]);
	}
	emunic_boot_fini(boot);
	return fails ? 1 : 0;
}
