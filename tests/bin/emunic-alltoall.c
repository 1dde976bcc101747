/* SPDX-License-Identifier: MIT */
/*
 * emunic-alltoall: the offloaded exchanges (emunic/coll.h, engines/coll/
 * exchange.c) — alltoall, allgather, gather — and their host-progressed
 * baseline (baseline/ptp.h), both through each one's ops table
 * (baseline/coll_ops.h).  Run by any number of ranks, with one or more
 * checks in one process:
 *
 *   emunic-run -n N emunic-alltoall CHECK [CHECK...]
 *     sizes     blocks of 0, 1, 8, 1000, 64 KiB + 7 bytes and the largest
 *               (max_bytes: 1 MiB / N rounded up, and 1 MiB / N rounded
 *               down), blocking, nonblocking + wait and nonblocking + test;
 *               then on an object of 4 KiB segments (max_bytes 128 KiB: the
 *               segment is at least max_bytes / 32), blocks that are and are
 *               not a multiple of the segment, up to 32 segments a block; a
 *               gather also at every root in turn
 *     inplace   sbuf == rbuf (allgather, gather: sbuf == rbuf + rank x
 *               block), the same sizes (fewer), every form
 *     inflight  three in flight, waited in reverse order; with the last
 *               rank posting only after the others tried a fourth, that
 *               fourth is -ENOSPC and test says not done where nothing can
 *               complete without that rank (every rank of an alltoall or
 *               allgather; a gather's root, rank 0)
 *     late      the last rank enters 1 s late under four largest calls, then
 *               under three in flight (the others' data is held by RNR,
 *               never lost), then 0.5 s late under three of 4 KiB segments
 *               (a gather's root is the late rank, then rank 0)
 *     limit     run under EMUNIC_LIST_TASKS=16: prints the device's limit,
 *               then the sizes and three in flight, every call split over
 *               several task lists
 *     invalid   NULL buffers, a block over max_bytes, a root out of range,
 *               the other kinds' calls and a bcast / allreduce / barrier
 *               call on the object, its kind's call on a bcast object: named
 *               errors, and both objects still work
 *     fault     under emunic-run -f SPEC: every rank fails (EIO or
 *               ETIMEDOUT), each call within 2 s of its bound (2 s), and
 *               every call after its first failure fails too; none hangs (a
 *               gather's root is rank 0)
 *     all       sizes inplace inflight
 *     ptp-sizes, ptp-inplace, ptp-all   the data checks on the baseline
 * A check runs the all-to-all; prefixed "allgather-" or "gather-" (as in
 * gather-sizes, gather-all) it runs that kind.
 *
 * Every byte has its own pattern, by source rank, destination rank (none
 * for an allgather's or gather's block: one for every receiver), a counter
 * every rank keeps alike and its index in the block.  Before each call the
 * receive buffer and 256 bytes past its end are filled with the pattern's
 * complement: a byte not copied, or one written past the end, shows; so
 * does a write to a gather's rbuf on a non-root (passed as NULL in every
 * test-mode gather).  A gather's root is the counter mod N unless a check
 * pins it.  A nonblocking call overwrites its send buffer right after
 * posting (it may reuse it at once): the others must still get the old
 * data, and the new bytes must stay.  A request waited by test calls is
 * checked when test says 1, before the wait.
 *
 * Every rank checks; after each check the failures of every rank are
 * gathered and rank 0 prints "emunic-alltoall: CHECK: PASS" (or FAIL).
 */
#include "emunic.h"
#include <emunic/coll.h>

#include "baseline/coll_ops.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HARNESS_RANK rank
#include "harness.h"
#include "pattern.h"

#define MIB (1 << 20)
#define SMALLB (128 << 10)		/* the 4 KiB-segment objects' max_bytes */
#define SMALLSEG 4096
#define GUARD 256
#define WAIT_MS 60000
#define FAULT_MS 2000			/* the fault check's bound */
#define FAULT_SLACK_MS 2000
#define FAULT_BLOCK 1000
#define NBUF 3
#define NKIND 3

static int rank = -1, size;
static struct emunic_boot *boot;
static struct emunic_dev *dev;
static unsigned iter;			/* calls so far: the same on every rank */
static size_t maxb;			/* the main objects' max_bytes: 1 MiB / size, rounded up */
static size_t bufb;			/* each buffer: size x the largest block of any object */
static enum emunic_coll_kind kind = EMUNIC_COLL_ALLTOALL;	/* the running check's */
static const char *check;		/* ... and its name */
static int root_pin = -1;		/* a gather's root; -1: the counter mod size */

/* One write a line, so that the ranks' lines do not mix. */

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

/* ---- the kinds ----------------------------------------------------------- */

static const enum emunic_coll_kind kinds[NKIND] = { EMUNIC_COLL_ALLTOALL, EMUNIC_COLL_ALLGATHER,
						     EMUNIC_COLL_GATHER };
/* Their ops tables (baseline/coll_ops.h): name, offload, baseline. */
static const struct emunic_coll_ops *const ktabs[NKIND] = { &emunic_alltoall_ops, &emunic_allgather_ops,
							    &emunic_gather_ops };

static int kidx(enum emunic_coll_kind k)
{
	return k == EMUNIC_COLL_ALLTOALL ? 0 : k == EMUNIC_COLL_ALLGATHER ? 1 : 2;
}

static const char *kname(enum emunic_coll_kind k)
{
	return ktabs[kidx(k)]->name;
}

/* Blocks in a send buffer: one per rank for an alltoall, else one. */
static int nblk(void)
{
	return kind == EMUNIC_COLL_ALLTOALL ? size : 1;
}

/* The pattern's destination of a block sent to dst: an allgather's or a
 * gather's block is the same for every receiver. */
static int to(int dst)
{
	return kind == EMUNIC_COLL_ALLTOALL ? dst : -1;
}

static int root_of(unsigned it)
{
	return root_pin >= 0 ? root_pin : (int)(it % (unsigned)size);
}

/* Whether this rank's rbuf gets the data of a call with that root. */
static bool gets(int root)
{
	return kind != EMUNIC_COLL_GATHER || rank == root;
}

/* ---- the offload and the baseline behind one face ------------------------ */

/* The face is the kind's ops table: ops is its offload or its baseline, h
 * that one's handle. */
struct obj {
	const char *name;
	enum emunic_coll_kind kind;
	const struct emunic_coll_impl *ops;
	void *h;
	struct emunic_coll *c;		/* the offload's handle, for its own calls; NULL: the baseline */
	size_t max;
	int timeout_ms;
};

struct req {
	struct obj *o;
	void *r;
};

/* The object's call: blocking when rq is NULL. */
static int o_call(struct obj *o, const void *sb, void *rb, size_t block, int root, struct req *rq)
{
	struct emunic_coll_call k = { .sbuf = sb, .rbuf = rb, .count = block, .root = root };

	if (!rq)
		return o->ops->call(o->h, &k);
	*rq = (struct req){ .o = o };
	return o->ops->start(o->h, &k, &rq->r);
}

static int o_test(struct req *rq)
{
	return rq->o->ops->test(rq->r);
}

static int o_wait(struct req *rq, int ms)
{
	return rq->o->ops->wait(rq->r, ms);
}

/* Posts, retrying -ENOSPC (within the bound): a nonblocking post may find
 * the copies or landing segments of earlier calls not yet free even when
 * every earlier request was waited (include/emunic/coll.h); the blocking
 * form retries so too. */
static int o_post(struct obj *o, const void *sb, void *rb, size_t block, int root, struct req *rq)
{
	long long deadline = now_ms() + WAIT_MS;
	int r;

	while ((r = o_call(o, sb, rb, block, root, rq)) == -ENOSPC && now_ms() < deadline)
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	return r;
}

static struct obj *objs[NKIND][2][2];	/* by kind, baseline, 4 KiB segments */
static int main_timeout_ms = WAIT_MS;

/* Objects are made when a check first needs one: every rank runs the same
 * checks in the same order, so they are made in the same order too.  Every
 * pair of ranks exchanges data, so the offload's objects are dense (the
 * default, which the table's open keeps). */
static struct obj *make(bool ptp, bool small)
{
	struct obj **slot = &objs[kidx(kind)][ptp][small];
	struct emunic_coll_impl_attr pa;
	char name[64];
	struct obj *o;
	int r;

	if (*slot)
		return *slot;
	o = calloc(1, sizeof(*o));
	if (!o)
		DIE("no memory");
	o->kind = kind;
	o->max = small ? SMALLB : maxb;
	o->timeout_ms = small ? WAIT_MS : main_timeout_ms;
	snprintf(name, sizeof(name), "%s%s%s", ptp ? "ptp " : "", kname(kind), small ? " (4 KiB segments)" : "");
	o->name = strdup(name);
	pa = (struct emunic_coll_impl_attr){ .max_bytes = o->max, .segment = small ? SMALLSEG : 0,
					     .timeout_ms = o->timeout_ms, .spin_us = 50 };
	o->ops = ptp ? &ktabs[kidx(kind)]->baseline : &ktabs[kidx(kind)]->offload;
	r = o->ops->open(kind, boot, dev, &pa, &o->h);
	if (r)
		DIE("%s (%s): %s", o->ops->create, o->name, strerror(-r));
	o->c = ptp ? NULL : o->h;
	return *slot = o;
}

static void unmake(struct obj **slot, bool fault)
{
	struct obj *o = *slot;
	int r;

	if (!o)
		return;
	r = o->ops->close(o->h);
	if (r && !fault)
		FAIL("destroying the %s object: %s", o->name, strerror(-r));
	free((void *)o->name);
	free(o);
	*slot = NULL;
}

/* ---- data ------------------------------------------------------------------ */

/* The pattern of the block src sends to dst (-1: to every rank) in call
 * it (pattern.h). */
static uint32_t seed(int src, int dst, unsigned it)
{
	return (uint32_t)src * 0x85ebca6bu + (uint32_t)dst * 0x27d4eb2fu + it * 0xc2b2ae35u;
}

/* Bytes [0, n) of b: the pattern of src -> dst, or its complement. */
static void fill(unsigned char *b, size_t n, int src, int dst, unsigned it, bool garbage)
{
	pattern_gen(b, 0, n, seed(src, dst, it), garbage);
}

/* The first byte in [0, n) that is not as filled, or -1. */
static long bad(const unsigned char *b, size_t n, int src, int dst, unsigned it, bool garbage)
{
	return pattern_bad(b, 0, n, seed(src, dst, it), garbage);
}

/* One call's buffers and what it is checked against. */
struct call {
	unsigned char *sb, *rb;		/* rb NULL: a non-root's gather without one */
	size_t block;
	unsigned it;
	int root;
	bool inplace;			/* sb inside rb */
	bool reused;			/* the caller rewrote sb after posting */
};

static struct call call_of(unsigned char *sb, unsigned char *rb, size_t block, bool inplace)
{
	struct call k = { .sb = sb, .rb = rb, .block = block, .it = ++iter, .inplace = inplace };

	k.root = root_of(k.it);
	if (inplace)
		k.sb = kind == EMUNIC_COLL_ALLTOALL ? rb : rb + (size_t)rank * block;
	return k;
}

/* The guard past a buffer: garbage of its own (source "size", no rank). */
static void fill_guard(unsigned char *end, unsigned it)
{
	fill(end, GUARD, size, rank, it, true);
}

/* A send buffer: block k for rank to(k) (or its complement: reused). */
static void fill_send(const struct call *k, bool garbage)
{
	for (int b = 0; b < nblk(); b++)
		fill(k->sb + (size_t)b * k->block, k->block, rank, to(b), k->it, garbage);
}

/* Before a call: the receive buffer all garbage (block q the complement
 * of what q sends here), then the send blocks (in place: inside it), a
 * guard past each buffer. */
static void prepare(const struct call *k)
{
	for (int q = 0; k->rb && q < size; q++)
		fill(k->rb + (size_t)q * k->block, k->block, q, to(rank), k->it, true);
	fill_send(k, false);
	if (k->rb)
		fill_guard(k->rb + (size_t)size * k->block, k->it);
	if (!k->inplace)
		fill_guard(k->sb + (size_t)nblk() * k->block, k->it);
}

/* After it: block q of the receive buffer is what q sent here (a gather's
 * non-root: untouched garbage, but for its own block in place), the guard
 * untouched; the send buffer (when apart) as it was, or as the caller
 * rewrote it after posting. */
static void verify(const char *what, const struct call *k)
{
	size_t block = k->block;
	long at;

	for (int q = 0; k->rb && q < size; q++) {
		bool want = gets(k->root) || (k->inplace && q == rank);
		const unsigned char *b = k->rb + (size_t)q * block;

		at = bad(b, block, q, to(rank), k->it, !want);
		if (at >= 0) {
			FAIL("%s: %zu-byte blocks (%s %u, root %d): byte %ld of the block from rank %d is 0x%02x, "
			     "not 0x%02x%s", what, block, kname(kind), k->it, k->root, at, q, b[at],
			     pattern_byte(seed(q, to(rank), k->it), (size_t)at, !want),
			     !want ? " (a non-root's rbuf was written)" :
			     b[at] == pattern_byte(seed(q, to(rank), k->it), (size_t)at, true) ? " (never written)" : "");
			break;
		}
	}
	at = k->rb ? bad(k->rb + (size_t)size * block, GUARD, size, rank, k->it, true) : -1;
	if (at >= 0)
		FAIL("%s: %zu-byte blocks (%s %u): byte %ld past the receive buffer (%zu bytes) was written",
		     what, block, kname(kind), k->it, at, (size_t)size * block);
	if (k->inplace)
		return;
	for (int b = 0; b < nblk(); b++) {
		at = bad(k->sb + (size_t)b * block, block, rank, to(b), k->it, k->reused);
		if (at >= 0) {
			FAIL("%s: %zu-byte blocks (%s %u): the send buffer's block %d changed at byte %ld%s", what,
			     block, kname(kind), k->it, b, at, k->reused ? " (rewritten by the caller after posting)" : "");
			break;
		}
	}
	at = bad(k->sb + (size_t)nblk() * block, GUARD, size, rank, k->it, true);
	if (at >= 0)
		FAIL("%s: %zu-byte blocks (%s %u): byte %ld past the send buffer was written", what, block,
		     kname(kind), k->it, at);
}

enum mode { BLOCKING, WAIT, TEST };
static const char *mode_str[] = { "blocking", "nonblocking + wait", "nonblocking + test" };

/* Waits by test calls; checks the data as soon as test says done. */
static int test_loop(struct req *rq, const char *what, const struct call *k)
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
		verify(what, k);	/* before the wait */
	else if (r < 0)
		FAIL("%s: test: %s", what, strerror(-r));
	return o_wait(rq, WAIT_MS);
}

static unsigned char *sbuf[NBUF], *rbuf[NBUF];

/* One call of block bytes a rank, checked on every rank. */
static void one(struct obj *o, size_t block, enum mode m, bool inplace)
{
	struct call k = call_of(sbuf[0], rbuf[0], block, inplace);
	char what[128];
	struct req rq;
	int r;

	/* A non-root's rbuf is not used: NULL in every test-mode gather. */
	if (m == TEST && !inplace && !gets(k.root))
		k.rb = NULL;
	k.reused = m != BLOCKING && !inplace;
	snprintf(what, sizeof(what), "%s %s%s", o->name, mode_str[m], inplace ? " in place" : "");
	prepare(&k);
	if (m == BLOCKING) {
		r = o_call(o, k.sb, k.rb, block, k.root, NULL);
	} else {
		r = o_post(o, k.sb, k.rb, block, k.root, &rq);
		if (!r && k.reused)
			fill_send(&k, true);	/* reused at once */
		if (!r)
			r = m == WAIT ? o_wait(&rq, WAIT_MS) : test_loop(&rq, what, &k);
	}
	if (r)
		DIE("%s: %zu-byte blocks (%s %u): %s", what, block, kname(kind), k.it, strerror(-r));
	verify(what, &k);
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
	/* A gather at every root, by every form. */
	for (int r = 0; kind == EMUNIC_COLL_GATHER && r < size; r++) {
		root_pin = r;
		one(make(ptp, false), 8 + (size_t)r, (enum mode)(r % 3), false);
		one(make(ptp, true), 65536 + 7, (enum mode)((r + 1) % 3), false);
	}
	root_pin = -1;
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
	struct call k[3];
	int r;

	/* With a fourth to try, the late rank posts only once the others
	 * have tried it: the bootstrap's barrier, not a sleep (two guests on
	 * two host cores can stall a rank for longer than any sleep). */
	if (rank == late && fourth) {
		if (emunic_boot_barrier(boot))
			DIE("%s: the bootstrap barrier before posting", tag);
	} else if (rank == late) {
		sleep_ms(late_ms);
	}
	for (int j = 0; j < 3; j++) {
		k[j] = call_of(sbuf[j], rbuf[j], blocks[j], false);
		k[j].reused = true;
		prepare(&k[j]);
		r = o_post(o, k[j].sb, k[j].rb, blocks[j], k[j].root, &rq[j]);
		if (r)
			DIE("%s: %s %d of 3 (%zu-byte blocks): %s", tag, kname(kind), j, blocks[j], strerror(-r));
		fill_send(&k[j], true);	/* reused at once */
	}
	/* With a late rank nothing can complete where its block is needed:
	 * every rank of an alltoall or allgather, a gather's root (pinned
	 * apart from the late rank); only those post a fourth, which none
	 * of the others could match. */
	if (fourth && late >= 0 && rank != late && gets(k[0].root)) {
		r = o_call(o, sbuf[0], rbuf[0], 100, k[0].root, &extra);
		if (r != -ENOSPC)
			DIE("%s: a fourth %s in flight: %d, not -ENOSPC", tag, kname(kind), r);
		for (int j = 0; j < 3; j++)
			if ((r = o_test(&rq[j])) != 0)
				FAIL("%s: %s %d: test says %d before the late rank posted", tag, kname(kind), j, r);
	}
	if (fourth && late >= 0 && rank != late && emunic_boot_barrier(boot))
		DIE("%s: the bootstrap barrier after the fourth", tag);
	for (int j = 2; j >= 0; j--) {
		r = o_wait(&rq[j], WAIT_MS);
		if (r)
			DIE("%s: waiting for %s %d of 3 (%zu-byte blocks): %s", tag, kname(kind), j, blocks[j],
			    strerror(-r));
	}
	for (int j = 0; j < 3; j++) {
		char what[128];

		snprintf(what, sizeof(what), "%s, %s %d of 3 in flight", tag, kname(kind), j);
		verify(what, &k[j]);
	}
}

static void t_inflight(bool ptp)
{
	struct obj *o = make(ptp, false);

	for (int round = 0; round < 6; round++) {
		size_t blocks[3] = { 1000 + (size_t)round, 9000 + 7 + (size_t)round, 40000 + (size_t)round };
		char tag[64];

		snprintf(tag, sizeof(tag), "round %d%s", round, round ? "" : " (the last rank late)");
		/* Round 0: the last rank comes late, so nothing can
		 * complete where its block is needed: a fourth post must find
		 * no room, and test must say not done.  Later rounds: three
		 * roots in flight at once. */
		root_pin = round ? -1 : 0;
		three(o, blocks, round ? -1 : size - 1, 0, round == 0, tag);
	}
	root_pin = -1;
}

/* The last rank enters ms late; n calls of the largest block run, each
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
		printf("emunic-alltoall: %s: rank %d late %ld ms: %d x %zu-byte blocks in %lld ms on rank 0\n", check,
		       late, ms, n, o->max, now_ms() - t0);
	fflush(stdout);
}

static void t_late(bool ptp)
{
	struct obj *o = make(ptp, false), *s;
	size_t big[3] = { o->max, o->max - 1, o->max - 7 };
	size_t small[3] = { SMALLB, SMALLB - 1, SMALLSEG * 5 + 3 };
	long long t0;

	/* A gather's root late: the others run ahead into its ring. */
	root_pin = size - 1;
	late_seq(o, 4, 1000);
	/* Three in flight: the others run three calls ahead of it. */
	emunic_boot_barrier(boot);
	t0 = now_ms();
	three(o, big, size - 1, 1000, false, "three in flight, the last rank 1 s late");
	if (rank == 0)
		printf("emunic-alltoall: %s: rank %d late 1000 ms: 3 x %zu-byte blocks in flight in %lld ms on "
		       "rank 0\n", check, size - 1, o->max, now_ms() - t0);
	/* A gather's root waiting for a late rank. */
	root_pin = 0;
	s = make(ptp, true);
	emunic_boot_barrier(boot);
	three(s, small, size - 1, 500, false, "4 KiB segments, three in flight, the last rank 0.5 s late");
	root_pin = -1;
	one(o, 1000, BLOCKING, false);
	one(s, 65536 + 7, WAIT, false);
}

static void t_limit(bool ptp)
{
	size_t big[3] = { maxb, 65536 + 7, 1000 };

	(void)ptp;
	if (rank == 0)
		printf("emunic-alltoall: %s: the device's task lists hold at most %u tasks\n", check,
		       emunic_dev_list_tasks(dev));
	fflush(stdout);
	t_sizes(false);
	three(make(false, false), big, -1, 0, false, "under the list limit");
}

/* A bad call: err, not posted. */
static void expect(int r, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void expect(int r, int err, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	if (r == err)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	FAIL("%s: %d (%s), not %d (%s)", what, r, r < 0 ? strerror(-r) : "no error", err, strerror(-err));
}

/* The offload's call of kind k on c, from k's table (whatever c's own kind):
 * the nonblocking one when req is set. */
static int xcall(struct emunic_coll *c, enum emunic_coll_kind k, const void *sb, void *rb, size_t block, int root,
		 struct emunic_coll_req **req)
{
	const struct emunic_coll_impl *off = &ktabs[kidx(k)]->offload;
	struct emunic_coll_call a = { .sbuf = sb, .rbuf = rb, .count = block, .root = root };
	void *q;
	int r;

	if (!req)
		return off->call(c, &a);
	q = *req;	/* what a failed call must leave as it is (t_invalid) */
	r = off->start(c, &a, &q);
	*req = q;
	return r;
}

/* The calls that fail on any exchange object, blocking (req NULL) or not. */
static void bad_calls(struct obj *o, struct emunic_coll *bc, struct emunic_coll_req **req)
{
	struct emunic_coll *c = o->c;
	unsigned char *sb = sbuf[0], *rb = rbuf[0];
	const char *k = kname(kind), *form = req ? "nonblocking" : "blocking";

	expect(xcall(c, kind, NULL, rb, 10, 0, req), -EINVAL, "%s %s of 10-byte blocks from a NULL buffer", form, k);
	if (kind == EMUNIC_COLL_GATHER) {
		/* The root's rbuf NULL; the others' sbuf, so that no rank posts. */
		expect(xcall(c, kind, rank ? NULL : sb, rank ? rb : NULL, 10, 0, req), -EINVAL,
		       "%s gather of 10-byte blocks into a NULL buffer on the root", form);
		expect(xcall(c, kind, sb, rb, 10, -1, req), -EINVAL, "%s gather to root -1", form);
		expect(xcall(c, kind, sb, rb, 10, size, req), -EINVAL, "%s gather to root %d", form, size);
	} else {
		expect(xcall(c, kind, sb, NULL, 10, 0, req), -EINVAL, "%s %s of 10-byte blocks into a NULL buffer",
		       form, k);
	}
	expect(xcall(c, kind, sb, rb, o->max + 1, 0, req), -EMSGSIZE, "%s %s of max_bytes + 1", form, k);
	for (int j = 0; j < NKIND; j++)
		if (kinds[j] != kind)
			expect(xcall(c, kinds[j], sb, rb, 10, 0, req), -EINVAL, "%s %s on a %s object", form,
			       ktabs[j]->name, k);
	expect(xcall(bc, kind, sb, rb, 10, 0, req), -EINVAL, "%s %s on a bcast object", form, k);
}

static void t_invalid(bool ptp)
{
	struct obj *o = make(ptp, false);
	struct emunic_coll *c = o->c, *bc = NULL;
	struct emunic_coll_req *req = NULL;
	struct emunic_coll_attr a;
	unsigned char *sb = sbuf[0];
	int r;

	emunic_coll_attr_init(&a);
	a.kind = EMUNIC_COLL_BCAST;
	a.max_bytes = 65536;
	r = emunic_coll_create(dev, &a, &bc);
	if (r)
		DIE("emunic_coll_create (bcast): %s", strerror(-r));
	bad_calls(o, bc, NULL);
	bad_calls(o, bc, &req);
	expect(emunic_bcast(c, sb, 10, 0), -EINVAL, "a bcast on an %s object", o->name);
	expect(emunic_ibcast(c, sb, 10, 0, &req), -EINVAL, "an ibcast on an %s object", o->name);
	expect(emunic_allreduce(c, sb, rbuf[0], 4, EMUNIC_CALC_INT32, EMUNIC_CALC_SUM), -EINVAL,
	       "an allreduce on an %s object", o->name);
	expect(emunic_barrier(c), -EINVAL, "a barrier on an %s object", o->name);
	expect(emunic_ibarrier(c, &req), -EINVAL, "an ibarrier on an %s object", o->name);
	if (req)
		FAIL("a failed call handed out a request");
	/* Both still work; blocks of no bytes need no buffers. */
	one(o, 1000, BLOCKING, false);
	one(o, 65536 + 7, WAIT, false);
	one(o, o->max, TEST, false);
	r = xcall(c, kind, NULL, NULL, 0, 0, NULL);
	if (r)
		FAIL("a %s of 0-byte blocks with NULL buffers: %s", kname(kind), strerror(-r));
	r = xcall(c, kind, NULL, NULL, 0, size - 1, &req);
	r = r ? r : emunic_coll_wait(req, WAIT_MS);
	if (r)
		FAIL("a nonblocking %s of 0-byte blocks with NULL buffers: %s", kname(kind), strerror(-r));
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
 * calls after it too, each within the bound; none hangs.  The spec must
 * reach every rank: in an alltoall or allgather every rank exchanges with
 * every other, so every rank meets a failed QP; a gather's root is rank 0,
 * and a fault at it fails every sender. */
static void t_fault(bool ptp)
{
	struct obj *o = make(ptp, false);
	int first = 0, at = -1, nb = size + 2;
	long long first_ms = 0;
	const char *k = kname(kind);

	/* No data before every rank's receives are up: an rnr rule sets
	 * rnr_retry to 0, so a send racing the root's preposted receives
	 * would fail before the rule's "after" count (create does not wait
	 * for its receives to reach verbs; a moment for the core to). */
	emunic_boot_barrier(boot);
	sleep_ms(100);
	root_pin = 0;
	for (int j = 0; j < nb; j++) {
		struct call c = call_of(sbuf[0], rbuf[0], FAULT_BLOCK, false);
		long long t0 = now_ms(), ms;
		struct req rq;
		int r;

		prepare(&c);
		if (j % 2) {
			r = o_call(o, c.sb, c.rb, c.block, c.root, &rq);
			r = r ? r : o_wait(&rq, FAULT_MS);
		} else {
			r = o_call(o, c.sb, c.rb, c.block, c.root, NULL);
		}
		ms = now_ms() - t0;
		if (ms > FAULT_MS + FAULT_SLACK_MS)
			FAIL("%s %d took %lld ms: its bound is %d ms", k, j + 1, ms, FAULT_MS);
		if (!r && first)
			FAIL("%s %d succeeded after %s %d failed", k, j + 1, k, at);
		if (!r)
			verify("before the fault", &c);
		if (r && !first && r != -EIO && r != -ETIMEDOUT)
			FAIL("%s %d, the first to fail: %s, not EIO or ETIMEDOUT", k, j + 1, strerror(-r));
		if (r && !first) {
			first = r;
			at = j + 1;
			first_ms = ms;
		}
	}
	root_pin = -1;
	printf("emunic-alltoall: rank %d: first failure: %s %d: %s (%lld ms)\n", rank, k, at,
	       first ? strerror(-first) : "none", first_ms);
	fflush(stdout);
	if (!first)
		FAIL("no %s failed under the fault", k);
}

static const struct { const char *name; void (*fn)(bool ptp); bool ptp; } checks[] = {
	{ "sizes", t_sizes, false }, { "inplace", t_inplace, false }, { "inflight", t_inflight, false },
	{ "late", t_late, false }, { "limit", t_limit, false }, { "invalid", t_invalid, false },
	{ "fault", t_fault, false }, { "ptp-sizes", t_sizes, true }, { "ptp-inplace", t_inplace, true },
};
#define NCHECK (sizeof(checks) / sizeof(checks[0]))
#define MAXRUN 32

/* What to run: a check of a kind, by its full name. */
struct run {
	int check;
	enum emunic_coll_kind kind;
	char name[48];
};

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
			"  CHECK: [allgather-|gather-]NAME, NAME: sizes|inplace|inflight|late|limit|invalid|fault|\n"
			"         ptp-sizes|ptp-inplace, all (sizes inplace inflight), ptp-all (ptp-sizes\n"
			"         ptp-inplace); fault alone\n");
}

/* One argument: its kind prefix, then a check or an alias of several. */
static int parse(const char *arg, struct run *run, int *nrun, bool *fault)
{
	static const char *const all[] = { "sizes", "inplace", "inflight" }, *const ptp_all[] = { "ptp-sizes",
												  "ptp-inplace" };
	const char *const *names;
	enum emunic_coll_kind k = EMUNIC_COLL_ALLTOALL;
	int na = 1;

	for (int j = 1; j < NKIND; j++)
		if (!strncmp(arg, ktabs[j]->name, strlen(ktabs[j]->name)) && arg[strlen(ktabs[j]->name)] == '-') {
			k = kinds[j];
			arg += strlen(ktabs[j]->name) + 1;
		}
	names = &arg;
	if (!strcmp(arg, "all"))
		names = all, na = 3;
	else if (!strcmp(arg, "ptp-all"))
		names = ptp_all, na = 2;
	for (int j = 0; j < na; j++) {
		int c = find(names[j]);

		if (c < 0 || *nrun == MAXRUN) {
			fprintf(stderr, "emunic-alltoall: no check named %s\n", names[j]);
			return -1;
		}
		run[*nrun] = (struct run){ .check = c, .kind = k };
		snprintf(run[*nrun].name, sizeof(run[*nrun].name), "%s%s%s", k == EMUNIC_COLL_ALLTOALL ? "" : kname(k),
			 k == EMUNIC_COLL_ALLTOALL ? "" : "-", names[j]);
		++*nrun;
		*fault |= !strcmp(names[j], "fault");
	}
	return 0;
}

/* Runs one check on every rank; rank 0 says whether all passed. */
static void run_one(const struct run *ru)
{
	int before = fails, mine, total = 0, *all = calloc((size_t)size, sizeof(int));
	long long t0 = now_ms();

	if (!all)
		DIE("no memory");
	kind = ru->kind;
	check = ru->name;
	checks[ru->check].fn(checks[ru->check].ptp);
	mine = fails - before;
	if (emunic_boot_allgather(boot, &mine, sizeof(mine), all))
		DIE("allgather");
	for (int q = 0; q < size; q++)
		total += all[q];
	if (rank == 0) {
		if (total)
			printf("emunic-alltoall: %s: FAIL (%d failures over %d ranks)\n", ru->name, total, size);
		else
			printf("emunic-alltoall: %s: PASS (%d ranks, %lld ms)\n", ru->name, size, now_ms() - t0);
		fflush(stdout);
	}
	free(all);
}

int main(int argc, char **argv)
{
	struct run run[MAXRUN];
	int nrun = 0, r;
	bool fault = false;

	for (int i = 1; i < argc; i++)
		if (parse(argv[i], run, &nrun, &fault)) {
			usage();
			return 2;
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
	for (int i = 0; i < nrun; i++)
		run_one(&run[i]);
	for (int k = 0; k < NKIND * 4; k++)
		unmake(&objs[k / 4][k / 2 % 2][k % 2], fault);
	emunic_boot_barrier(boot);
	emunic_dev_close(dev);
	for (int k = 0; k < NBUF; k++) {
		free(sbuf[k]);
		free(rbuf[k]);
	}
	emunic_boot_fini(boot);
	return harness_status();
}
