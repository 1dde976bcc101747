/* SPDX-License-Identifier: MIT */
/*
 * emunic-bcast: the offloaded broadcast (emunic/coll.h, engines/coll/
 * bcast.c) and its host-progressed baseline (baseline/ptp.h), both through the
 * bcast's ops table (baseline/coll_ops.h).  Run by any
 * number of ranks, with one or more checks in one process:
 *
 *   emunic-run -n N emunic-bcast CHECK [CHECK...]
 *     sizes     0, 1, 8, 1000, 64 KiB + 7 and 1 MiB bytes, from root 0, the
 *               last rank and a middle one, blocking and not; then on a
 *               sparse object of 4 KiB segments (max_bytes 128 KiB: the
 *               segment is at least max_bytes / 32), sizes that are and are
 *               not a multiple of the segment, up to 32 segments
 *     roots     every root in turn, three sizes each, and a small bcast of
 *               the sparse object from every root
 *     inflight  three ibcasts in flight (different roots), waited in reverse
 *               order; with a late root (it posts after the others tried a
 *               fourth) a fourth post is -ENOSPC and test says not done
 *     late      the last rank enters late (1 s, 0.5 s), as a leaf under a rank
 *               that forwards to it, then as an inner rank (the root runs
 *               8 MiB and 3 MiB ahead of it), then as the root
 *     invalid   a root out of range, a NULL buffer, more than max_bytes, an
 *               allreduce / barrier on a bcast object, a bcast on a barrier
 *               object: named errors, and both objects still work
 *     fault     under emunic-run -f SPEC: every rank fails (EIO or
 *               ETIMEDOUT), each call within 2 s of its bound (2 s), and
 *               every bcast after its first failure fails too (a blocking
 *               one behind three timed-out ones: -ENOSPC); none hangs
 *     slots     root 0 runs blocking 1 MiB bcasts ahead of the others,
 *               held back until it is done: once its slots wait for sends
 *               held by RNR, its next must fail -ENOSPC at its bound (2 s;
 *               the library says why on stderr); then the others take them
 *     all       sizes roots inflight
 *     ptp-sizes, ptp-roots, ptp-all   the data checks on the baseline
 *
 * Every bcast has its own pattern (by root and by a counter every rank keeps
 * alike).  Before each, the non-roots fill their buffer and 256 bytes past
 * its end with the pattern's complement: a byte not copied, or one written
 * past the message, shows.  A nonblocking root overwrites its buffer right
 * after posting (it may reuse it at once): the others must still get the
 * old data and the root's new bytes must stay.  A request waited by test
 * calls is checked when test says 1, before the wait.
 *
 * Every rank checks; after each check the failures of every rank are
 * gathered and rank 0 prints "emunic-bcast: CHECK: PASS" (or FAIL).
 */
#include "emunic.h"
#include <emunic/coll.h>

#include "baseline/coll_ops.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HARNESS_RANK rank
#include "harness.h"
#include "pattern.h"

#define MAXB (1 << 20)			/* the main objects' max_bytes */
#define SMALLB (128 << 10)		/* the 4 KiB-segment objects' max_bytes */
#define SMALLSEG 4096
#define GUARD 256
#define WAIT_MS 60000
#define FAULT_MS 2000			/* the fault check's bound */
#define FAULT_SLACK_MS 2000

static int rank = -1, size;
static struct emunic_boot *boot;
static struct emunic_dev *dev;
static unsigned iter;			/* bcasts so far: the same on every rank */

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

/* ---- the offload and the baseline behind one face ------------------------ */

/* The face is the bcast's ops table (baseline/coll_ops.h): ops is its
 * offload or its baseline, h that one's handle. */
struct obj {
	const char *name;
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

static int o_bcast(struct obj *o, void *buf, size_t n, int root)
{
	struct emunic_coll_call k = { .rbuf = buf, .count = n, .root = root };

	return o->ops->call(o->h, &k);
}

static int o_ibcast(struct obj *o, void *buf, size_t n, int root, struct req *rq)
{
	struct emunic_coll_call k = { .rbuf = buf, .count = n, .root = root };

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
 * the segments of earlier bcasts not yet free (their forwards to a slow
 * child, or the root's sends, not yet complete) even when every earlier
 * request was waited (include/emunic/coll.h); the blocking form retries so
 * too. */
static int o_post(struct obj *o, void *b, size_t n, int root, struct req *rq)
{
	long long deadline = now_ms() + WAIT_MS;
	int r;

	while ((r = o_ibcast(o, b, n, root, rq)) == -ENOSPC && now_ms() < deadline)
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	return r;
}

static struct obj *off_main, *off_small, *ptp_main, *ptp_small;
static struct emunic_coll *barrier_obj;
static int main_timeout_ms = WAIT_MS;

/* Objects are made when a check first needs one: every rank runs the same
 * checks in the same order, so they are made in the same order too. */
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
	o->max = small ? SMALLB : MAXB;
	o->timeout_ms = small ? WAIT_MS : main_timeout_ms;
	if (ptp) {
		struct emunic_coll_impl_attr pa = { .max_bytes = o->max, .segment = small ? SMALLSEG : 0,
						    .timeout_ms = o->timeout_ms, .spin_us = 50 };

		o->name = small ? "ptp (4 KiB segments)" : "ptp";
		o->ops = &emunic_bcast_ops.baseline;
		r = o->ops->open(emunic_bcast_ops.kind, boot, dev, &pa, &o->h);
		if (r)
			DIE("%s (%s): %s", o->ops->create, o->name, strerror(-r));
	} else {
		struct emunic_coll_attr a;

		emunic_coll_attr_init(&a);
		a.kind = EMUNIC_COLL_BCAST;
		a.max_bytes = o->max;
		/* The small one is sparse too: only pairs a power of two apart
		 * are connected, which every tree must do with. */
		a.segment = small ? SMALLSEG : 0;
		a.conn = small ? EMUNIC_COLL_SPARSE : EMUNIC_COLL_DENSE;
		a.timeout_ms = o->timeout_ms;
		o->name = small ? "bcast (sparse, 4 KiB segments)" : "bcast";
		/* Made here, not by the table's open: the sparse connections
		 * are an attribute the table does not carry. */
		r = emunic_coll_create(dev, &a, &o->c);
		if (r)
			DIE("emunic_coll_create (%s): %s", o->name, strerror(-r));
		o->ops = &emunic_bcast_ops.offload;
		o->h = o->c;
	}
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
	free(o);
	*slot = NULL;
}

/* ---- data ------------------------------------------------------------------ */

/* The pattern of the message of `root` in call `it` (pattern.h). */
static uint32_t seed(int root, unsigned it)
{
	return (uint32_t)root * 0x85ebca6bu + it * 0xc2b2ae35u;
}

/* Bytes [from, to) of buf: the pattern, or its complement (garbage). */
static void fill(unsigned char *buf, size_t from, size_t to, int root, unsigned it, bool garbage)
{
	pattern_gen(buf + from, from, to - from, seed(root, it), garbage);
}

/* Before a bcast: the root's message and garbage past it; garbage on the
 * others, message and guard alike. */
static void prepare(unsigned char *buf, size_t bytes, int root, unsigned it)
{
	fill(buf, 0, bytes, root, it, rank != root);
	fill(buf, bytes, bytes + GUARD, root, it, true);
}

/* After it: the message on every rank (on a root that overwrote its buffer
 * after posting, its own new bytes), the guard untouched. */
static void verify(const char *what, const unsigned char *buf, size_t bytes, int root, unsigned it, bool reused)
{
	bool garbage = rank == root && reused;
	long at = pattern_bad(buf, 0, bytes, seed(root, it), garbage);

	if (at >= 0)
		FAIL("%s: %zu bytes from root %d (bcast %u): byte %ld is 0x%02x, not 0x%02x%s", what, bytes, root, it,
		     at, buf[at], pattern_byte(seed(root, it), (size_t)at, garbage),
		     garbage ? " (the root's buffer, reused after posting, was written)" :
		     rank == root ? " (the root's buffer changed)" : "");
	at = pattern_bad(buf, bytes, bytes + GUARD, seed(root, it), true);
	if (at >= 0)
		FAIL("%s: %zu bytes from root %d (bcast %u): byte %ld, past the message, was written", what, bytes,
		     root, it, at);
}

enum mode { BLOCKING, WAIT, TEST };
static const char *mode_str[] = { "bcast", "ibcast + wait", "ibcast + test" };

/* Waits by test calls; checks the data as soon as test says done. */
static int test_loop(struct req *rq, const char *what, const unsigned char *buf, size_t bytes, int root,
		     unsigned it, bool reused)
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
		verify(what, buf, bytes, root, it, reused);	/* before the wait */
	else if (r < 0)
		FAIL("%s: test: %s", what, strerror(-r));
	r = o_wait(rq, WAIT_MS);
	return r;
}

static unsigned char *buf, *ibuf[3];

/* One bcast of bytes from root, checked on every rank. */
static void one(struct obj *o, size_t bytes, int root, enum mode m)
{
	unsigned it = ++iter;
	char what[128];
	struct req rq;
	int r;

	snprintf(what, sizeof(what), "%s %s", o->name, mode_str[m]);
	prepare(buf, bytes, root, it);
	if (m == BLOCKING) {
		r = o_bcast(o, buf, bytes, root);
	} else {
		r = o_post(o, buf, bytes, root, &rq);
		if (!r && rank == root)
			fill(buf, 0, bytes, root, it, true);	/* reused at once */
		if (!r)
			r = m == WAIT ? o_wait(&rq, WAIT_MS) : test_loop(&rq, what, buf, bytes, root, it, true);
	}
	if (r)
		DIE("%s: %zu bytes from root %d (bcast %u): %s", what, bytes, root, it, strerror(-r));
	verify(what, buf, bytes, root, it, m != BLOCKING);
}

/* Root 0, the last rank and a middle one, each once. */
static int three_roots(int *roots)
{
	int cand[3] = { 0, size - 1, size / 2 }, n = 0;

	for (int i = 0; i < 3; i++) {
		bool seen = false;

		for (int j = 0; j < n; j++)
			seen |= roots[j] == cand[i];
		if (!seen)
			roots[n++] = cand[i];
	}
	return n;
}

/* ---- the checks -------------------------------------------------------------- */

static void sizes_on(struct obj *o, const size_t *bytes, size_t nb)
{
	int roots[3], nr = three_roots(roots), k = 0;

	for (size_t i = 0; i < nb; i++)
		for (int j = 0; j < nr; j++) {
			one(o, bytes[i], roots[j], BLOCKING);
			one(o, bytes[i], roots[j], k++ % 2 ? TEST : WAIT);
		}
}

static void t_sizes(bool ptp)
{
	static const size_t big[] = { 0, 1, 8, 1000, 65536 + 7, MAXB };
	/* 4 KiB segments: within one, exactly one, one byte more, 17 (not a
	 * multiple), 32 (every segment of the largest), one byte short. */
	static const size_t small[] = { 0, 1, 8, SMALLSEG, SMALLSEG + 1, 65536 + 7, SMALLB, SMALLB - 1 };

	sizes_on(make(ptp, false), big, sizeof(big) / sizeof(big[0]));
	sizes_on(make(ptp, true), small, sizeof(small) / sizeof(small[0]));
}

static void t_roots(bool ptp)
{
	static const size_t bytes[] = { 7, 32768 + 1000, 300000 };
	struct obj *o = make(ptp, false), *s = make(ptp, true);

	for (int root = 0; root < size; root++) {
		for (int k = 0; k < 3; k++)
			one(o, bytes[k] + (size_t)root, root, (enum mode)((root + k) % 3));
		one(s, 5000 + (size_t)root, root, (enum mode)(root % 3));
	}
}

static void t_inflight(bool ptp)
{
	static const size_t bytes[3] = { 1000, 65536 + 7, 200000 };
	struct obj *o = make(ptp, false);
	int late = size - 1;

	(void)ptp;
	for (int round = 0; round < 12; round++) {
		struct req rq[3], extra;
		unsigned it[3];
		int root[3];

		/* Round 0: the last rank is every bcast's root and posts only
		 * after the others tried a fourth (the bootstrap's barrier, not
		 * a sleep: two guests on two host cores can stall a rank for
		 * longer than any sleep), so nothing can complete on the
		 * others: that fourth post must find no room, and test must
		 * say not done.  (A bcast that does not go through the late
		 * rank may complete without it, so the other rounds cannot
		 * tell.) */
		if (round == 0 && rank == late && emunic_boot_barrier(boot))
			DIE("the bootstrap barrier before round 0");
		for (int k = 0; k < 3; k++) {
			size_t n = bytes[k] + (size_t)round;
			int r;

			root[k] = round == 0 ? late : (round + k) % size;
			it[k] = ++iter;
			prepare(ibuf[k], n, root[k], it[k]);
			r = o_post(o, ibuf[k], n, root[k], &rq[k]);
			if (r)
				DIE("ibcast %d of round %d (root %d): %s", k, round, root[k], strerror(-r));
			if (rank == root[k])
				fill(ibuf[k], 0, n, root[k], it[k], true);
		}
		if (round == 0 && rank != late) {
			int r = o_ibcast(o, buf, 100, 0, &extra);

			if (r != -ENOSPC)
				DIE("a fourth ibcast in flight: %d, not -ENOSPC", r);
			for (int k = 0; k < 3; k++)
				if ((r = o_test(&rq[k])) != 0)
					FAIL("ibcast %d from the late root: test says %d before the root posted", k, r);
			if (emunic_boot_barrier(boot))
				DIE("the bootstrap barrier after the fourth ibcast");
		}
		for (int k = 2; k >= 0; k--) {
			int r = o_wait(&rq[k], WAIT_MS);

			if (r)
				DIE("waiting for ibcast %d of round %d (root %d): %s", k, round, root[k], strerror(-r));
		}
		for (int k = 0; k < 3; k++) {
			char what[96];

			snprintf(what, sizeof(what), "round %d, ibcast %d of 3 in flight", round, k);
			verify(what, ibuf[k], bytes[k] + (size_t)round, root[k], it[k], true);
		}
	}
}

/* The last rank enters ms late, at relative rank v of root's tree;
 * n bcasts of about 1 MiB run ahead of it.  The first few fill its ring of
 * receive segments: the rest must be held (RNR) until it posts, never
 * dropped, and a rank that forwards to it must keep the segments it
 * forwards from until those sends completed, however many more arrive
 * behind them (8 x 1 MiB: with rings of three messages, the 7th lands
 * where the held 4th's segments were; the late rank's parent must get
 * that far ahead first, so 1 s). */
static void late_at(struct obj *o, int v, int n, long ms, size_t small)
{
	int late = size - 1, root = (late - v + size) % size;
	long long t0;

	emunic_boot_barrier(boot);
	if (rank == late)
		sleep_ms(ms);
	t0 = now_ms();
	for (int k = 0; k < n; k++)
		one(o, small ? small + (size_t)k : MAXB - (size_t)k, root, rank == root ? WAIT : (enum mode)(k % 3));
	if (rank == 0)
		printf("emunic-bcast: late: rank %d late (relative rank %d), root %d: %d x %s in %lld ms on "
		       "rank 0\n", late, v, root, n, small ? "~1 KiB" : "1 MiB", now_ms() - t0);
}

static void t_late(bool ptp)
{
	struct obj *o = make(ptp, false);
	int late = size - 1;

	if (size >= 4) {
		late_at(o, 3, 8, 1000, 0);	/* a leaf: its parent (2) forwards to it */
		late_at(o, 2, 3, 500, 0);	/* inner: its child (3) waits for it */
	} else {
		late_at(o, size - 1, 8, 1000, 0);
	}
	/* Many one-segment bcasts (more than a ring's 98 entries and the
	 * root's 4 slots) run ahead of a late child of the root, then of a
	 * late leaf under a forwarder: the ring fills, the sends meet RNR, and
	 * neither a slot nor an entry may be reused before they complete. */
	late_at(o, 1, 120, 700, 1000);
	if (size >= 4)
		late_at(o, 3, 120, 700, 1000);
	/* The late rank is the root: the others wait for it. */
	emunic_boot_barrier(boot);
	if (rank == late)
		sleep_ms(500);
	one(o, 65536 + 7, late, rank == late ? WAIT : TEST);
	one(o, 1000, 0, BLOCKING);
}

static void t_invalid(bool ptp)
{
	struct obj *o = make(ptp, false);
	struct emunic_coll *c = o->c;
	struct emunic_coll_req *req = NULL;
	struct emunic_coll_attr a;
	int r;

	emunic_coll_attr_init(&a);
	a.kind = EMUNIC_COLL_BARRIER;
	r = emunic_coll_create(dev, &a, &barrier_obj);
	if (r)
		DIE("emunic_coll_create (barrier): %s", strerror(-r));
#define EXPECT(call, err, what) do { r = (call); if (r != (err)) \
		FAIL("%s: %d (%s), not %s", what, r, r < 0 ? strerror(-r) : "no error", #err); } while (0)
	EXPECT(emunic_bcast(c, buf, 10, -1), -EINVAL, "bcast from root -1");
	EXPECT(emunic_ibcast(c, buf, 10, -1, &req), -EINVAL, "ibcast from root -1");
	EXPECT(emunic_bcast(c, buf, 10, size), -EINVAL, "bcast from root == size");
	EXPECT(emunic_ibcast(c, buf, 10, size, &req), -EINVAL, "ibcast from root == size");
	EXPECT(emunic_bcast(c, NULL, 10, 0), -EINVAL, "bcast of 10 bytes from a NULL buffer");
	EXPECT(emunic_ibcast(c, NULL, 10, 0, &req), -EINVAL, "ibcast of 10 bytes from a NULL buffer");
	EXPECT(emunic_bcast(c, buf, MAXB + 1, 0), -EMSGSIZE, "bcast of max_bytes + 1");
	EXPECT(emunic_ibcast(c, buf, MAXB + 1, 0, &req), -EMSGSIZE, "ibcast of max_bytes + 1");
	EXPECT(emunic_allreduce(c, buf, buf + 64, 4, EMUNIC_CALC_INT32, EMUNIC_CALC_SUM), -EINVAL,
	       "an allreduce on a bcast object");
	EXPECT(emunic_iallreduce(c, buf, buf + 64, 4, EMUNIC_CALC_INT32, EMUNIC_CALC_SUM, &req), -EINVAL,
	       "an iallreduce on a bcast object");
	EXPECT(emunic_barrier(c), -EINVAL, "a barrier on a bcast object");
	EXPECT(emunic_ibarrier(c, &req), -EINVAL, "an ibarrier on a bcast object");
	EXPECT(emunic_bcast(barrier_obj, buf, 10, 0), -EINVAL, "a bcast on a barrier object");
	EXPECT(emunic_ibcast(barrier_obj, buf, 10, 0, &req), -EINVAL, "an ibcast on a barrier object");
#undef EXPECT
	if (req)
		FAIL("a failed call handed out a request");
	/* Both still work; no bytes need no buffer. */
	one(o, 1000, 0, BLOCKING);
	one(o, 65536 + 7, size - 1, WAIT);
	one(o, MAXB, size / 2, TEST);
	r = emunic_bcast(c, NULL, 0, size - 1);
	if (r)
		FAIL("a bcast of 0 bytes from a NULL buffer: %s", strerror(-r));
	r = emunic_barrier(barrier_obj);
	if (r)
		FAIL("the barrier object after the bad calls: %s", strerror(-r));
	r = emunic_coll_destroy(barrier_obj);
	if (r)
		FAIL("destroying the barrier object: %s", strerror(-r));
	barrier_obj = NULL;
}

/* Under a fault spec (emunic-run -f): every rank must end in an error, the
 * bcasts after it too, each within the bound; none hangs.  Roots go round,
 * so every rank's data at some point comes through a failed rank. */
static void t_fault(bool ptp)
{
	struct obj *o = make(ptp, false);
	int first = 0, at = -1, nb = size + 2;
	long long first_ms = 0;

	for (int k = 0; k < nb; k++) {
		int root = k % size, r;
		unsigned it = ++iter;
		long long t0 = now_ms(), ms;
		struct req rq;

		prepare(buf, 1000, root, it);
		if (k % 2) {
			r = o_ibcast(o, buf, 1000, root, &rq);
			r = r ? r : o_wait(&rq, FAULT_MS);
		} else {
			r = o_bcast(o, buf, 1000, root);
		}
		ms = now_ms() - t0;
		if (ms > FAULT_MS + FAULT_SLACK_MS)
			FAIL("bcast %d (root %d) took %lld ms: its bound is %d ms", k + 1, root, ms, FAULT_MS);
		if (!r && first)
			FAIL("bcast %d (root %d) succeeded after bcast %d failed", k + 1, root, at);
		if (!r)
			verify("before the fault", buf, 1000, root, it, false);
		if (r && !first && r != -EIO && r != -ETIMEDOUT)
			FAIL("bcast %d (root %d), the first to fail: %s, not EIO or ETIMEDOUT", k + 1, root,
			     strerror(-r));
		if (r && !first) {
			first = r;
			at = k + 1;
			first_ms = ms;
		}
	}
	printf("emunic-bcast: rank %d: first failure: bcast %d: %s (%lld ms)\n", rank, at,
	       first ? strerror(-first) : "none", first_ms);
	fflush(stdout);
	if (!first)
		FAIL("no bcast failed under the fault");
}

/* The root runs ahead of a child held back in the bootstrap's allgather
 * (which the root joins only after its failure): its blocking bcasts go
 * on until the child's landing ring is full and its slots wait for sends
 * that meet RNR; the next must fail -ENOSPC at its bound, and the library
 * names why (the slots: engines/coll/request.c no_room).  Then the child
 * takes every bcast the root posted (their number from that allgather),
 * checked. */
#define SLOTS_MS 2000
static void t_slots(void)
{
	struct emunic_coll_attr a;
	struct emunic_coll *c;
	int n = 0, r = 0, all[256];
	long long t0 = now_ms();

	if (size > 256)
		DIE("slots: at most 256 ranks");
	emunic_coll_attr_init(&a);
	a.kind = EMUNIC_COLL_BCAST;
	a.max_bytes = MAXB;
	a.timeout_ms = SLOTS_MS;
	if ((r = emunic_coll_create(dev, &a, &c)))
		DIE("emunic_coll_create (slots): %s", strerror(-r));
	if (rank == 0) {
		for (; n < 64; n++) {
			prepare(buf, MAXB, 0, iter + 1 + (unsigned)n);
			t0 = now_ms();
			if ((r = emunic_bcast(c, buf, MAXB, 0)))
				break;
		}
		printf("emunic-bcast: slots: root 0 ran %d bcasts ahead, then a blocking bcast: %s after %lld ms\n", n,
		       r ? strerror(-r) : "none failed", now_ms() - t0);
		fflush(stdout);
		if (r != -ENOSPC)
			FAIL("slots: the bcast after %d found %s, not -ENOSPC", n, r ? strerror(-r) : "room");
	}
	if (emunic_boot_allgather(boot, &n, sizeof(n), all))
		DIE("slots: the bootstrap's allgather");
	n = all[0];
	for (int k = 0; rank != 0 && k < n; k++) {
		unsigned it = iter + 1 + (unsigned)k;

		prepare(buf, MAXB, 0, it);
		if ((r = emunic_bcast(c, buf, MAXB, 0))) {
			FAIL("slots: bcast %d of the %d the root ran ahead: %s", k + 1, n, strerror(-r));
			break;
		}
		verify("slots", buf, MAXB, 0, it, false);
	}
	iter += (unsigned)n;
	emunic_boot_barrier(boot);
	if ((r = emunic_coll_destroy(c)))
		FAIL("slots: destroying the object: %s", strerror(-r));
}

static void t_sizes_off(void) { t_sizes(false); }
static void t_roots_off(void) { t_roots(false); }
static void t_inflight_off(void) { t_inflight(false); }
static void t_late_off(void) { t_late(false); }
static void t_invalid_off(void) { t_invalid(false); }
static void t_fault_off(void) { t_fault(false); }
static void t_sizes_ptp(void) { t_sizes(true); }
static void t_roots_ptp(void) { t_roots(true); }

static const struct { const char *name; void (*fn)(void); } checks[] = {
	{ "sizes", t_sizes_off }, { "roots", t_roots_off }, { "inflight", t_inflight_off },
	{ "late", t_late_off }, { "invalid", t_invalid_off }, { "fault", t_fault_off },
	{ "slots", t_slots }, { "ptp-sizes", t_sizes_ptp }, { "ptp-roots", t_roots_ptp },
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
	fprintf(stderr, "usage: emunic-run -n N [-f SPEC] emunic-bcast CHECK [CHECK...]\n"
			"  CHECK: sizes|roots|inflight|late|invalid|fault|slots|ptp-sizes|ptp-roots,\n"
			"         all (sizes roots inflight), ptp-all (ptp-sizes ptp-roots); fault alone\n");
}

int main(int argc, char **argv)
{
	int run[32], nrun = 0, total = 0, r;
	bool fault = false;

	for (int i = 1; i < argc; i++) {
		const char *alias[3] = { argv[i] };
		int na = 1;

		if (!strcmp(argv[i], "all")) {
			alias[0] = "sizes", alias[1] = "roots", alias[2] = "inflight";
			na = 3;
		} else if (!strcmp(argv[i], "ptp-all")) {
			alias[0] = "ptp-sizes", alias[1] = "ptp-roots";
			na = 2;
		}
		for (int j = 0; j < na; j++) {
			int k = find(alias[j]);

			if (k < 0) {
				fprintf(stderr, "emunic-bcast: no check named %s\n", alias[j]);
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
	buf = malloc(MAXB + GUARD);
	for (int k = 0; k < 3; k++)
		ibuf[k] = malloc(256 * 1024 + GUARD);
	if (!buf || !ibuf[0] || !ibuf[1] || !ibuf[2])
		DIE("no memory");

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
				printf("emunic-bcast: %s: FAIL (%d failures over %d ranks)\n", checks[run[i]].name,
				       total, size);
			else
				printf("emunic-bcast: %s: PASS (%d ranks, %lld ms)\n", checks[run[i]].name, size,
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
	free(buf);
	for (int k = 0; k < 3; k++)
		free(ibuf[k]);
	emunic_boot_fini(boot);
	return harness_status();
}
