/* SPDX-License-Identifier: MIT */
/*
 * emunic-trigtest: one conformance check of the triggered-operation rules
 * (DESIGN.md, "Triggered operations"; include/emunic/triggered.h) per name,
 * run by two ranks (emunic-run -n 2 emunic-trigtest NAME).  Rank 0 posts,
 * rank 1 owns the list entries its operations hit; each check prints PASS or
 * what it saw instead.  Every check is built so that an implementation
 * breaking its rule fails it (see the comment above each).
 */
#include "emunic.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HARNESS_RANK (T->rank)
#include "harness.h"

#define BUF_LEN (1u << 20)
#define WAIT_MS 10000			/* every wait is bounded */
#define NONE UINT64_MAX			/* a result slot not written yet */
#define S(x) ((unsigned long long)(x))

struct t {
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct emunic_mr *mr;
	char *buf;
	struct emunic_qp *qp;		/* TRIGGERED, to the other rank */
	int rank;
};

static struct t *T;

/* ---- helpers --------------------------------------------------------------------- */

static void ms(int n) { struct timespec ts = { n / 1000, (n % 1000) * 1000000L }; nanosleep(&ts, NULL); }
static void sync_ranks(void) { CHECK(!emunic_boot_barrier(T->boot), "barrier"); }
static char *at(size_t off) { return T->buf + off; }
static uint64_t *word(size_t off) { return (uint64_t *)(void *)at(off); }

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct emunic_qp *qp_new(unsigned flags)
{
	struct emunic_qp_attr a;
	struct emunic_qp *qp;

	emunic_qp_attr_init(&a);
	a.flags = flags;
	CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &qp), "qp_create (flags 0x%x)", flags);
	CHECK(!emunic_qp_wait_connected(qp, 30000), "connect (flags 0x%x)", flags);
	return qp;
}

static void setup(void) { T->qp = qp_new(EMUNIC_QP_TRIGGERED); }

static struct emunic_ct *ct_new(void)
{
	struct emunic_ct *ct;
	int r = emunic_ct_alloc(T->dev, &ct);

	CHECK(r == 0, "ct_alloc: %s", strerror(-r));
	return ct;
}

static struct emunic_eq *eq_new(void)
{
	struct emunic_eq *eq;
	int r = emunic_eq_create(T->dev, 256, NULL, NULL, &eq);

	CHECK(r == 0, "eq_create: %s", strerror(-r));
	return eq;
}

/* A list entry over buf[off, off + len), filled with `fill` first. */
static struct emunic_le *le_new(size_t off, size_t len, int fill, struct emunic_ct *ct, struct emunic_eq *eq,
				unsigned flags, unsigned shift)
{
	struct emunic_le_attr a = { .mr = T->mr, .addr = at(off), .len = len, .ct = ct, .eq = eq,
				    .flags = flags, .shift = shift };
	struct emunic_le *le;
	int r;

	memset(at(off), fill, len);
	r = emunic_le_create(T->dev, &a, &le);
	CHECK(r == 0, "le_create: %s", strerror(-r));
	return le;
}

/* Both ranks give len bytes (rank 0 zeros); both get what rank 1 gave. */
static void swap(const void *mine, void *rank1s, size_t len)
{
	char all[2 * 256];

	CHECK(len <= 256 && !emunic_boot_allgather(T->boot, mine, len, all), "allgather");
	memcpy(rank1s, all + len, len);
}

/* Rank 1's entry's target (rank 0 passes NULL), on both ranks. */
static struct emunic_target swap_target(const struct emunic_le *le)
{
	struct emunic_target mine = { 0 }, tg;

	if (le)
		mine = emunic_le_target(le);
	swap(&mine, &tg, sizeof(mine));
	return tg;
}

/* The usual set-up: a TRIGGERED QP; rank 1 exposes buf[0, len), filled with
 * fill, as a list entry counted on *lct (NULL on rank 0); both ranks get its
 * target. */
static struct emunic_target setup_entry(size_t len, int fill, struct emunic_ct **lct)
{
	struct emunic_le *le = NULL;

	setup();
	*lct = NULL;
	if (T->rank == 1) {
		*lct = ct_new();
		le = le_new(0, len, fill, *lct, NULL, 0, 0);
	}
	return swap_target(le);
}

static struct emunic_ct_val ct_now(struct emunic_ct *ct)
{
	struct emunic_ct_val v;
	int r = emunic_ct_get(ct, &v);

	CHECK(r == 0, "ct_get: %s", strerror(-r));
	return v;
}

static void ct_is(struct emunic_ct *ct, uint64_t success, uint64_t failure, const char *what)
{
	struct emunic_ct_val v = ct_now(ct);

	CHECK(v.success == success && v.failure == failure, "%s: counter is {%llu, %llu}, expected {%llu, %llu}",
	      what, S(v.success), S(v.failure), S(success), S(failure));
}

/* emunic_ct_wait, bounded: the counter reached test (or failed). */
static struct emunic_ct_val ct_await(struct emunic_ct *ct, uint64_t test, const char *what)
{
	struct emunic_ct_val v = { 0, 0 };
	int r = emunic_ct_wait(ct, test, &v, WAIT_MS);

	CHECK(r == 0, "%s: ct_wait(%llu) gave %s (counter {%llu, %llu})", what, S(test), strerror(-r),
	      S(v.success), S(v.failure));
	return v;
}

/* Polls until success + failure >= total: a wait would return at the first
 * failure, and some checks count several. */
static void ct_reach(struct emunic_ct *ct, uint64_t total, const char *what)
{
	struct emunic_ct_val v = ct_now(ct);

	for (int i = 0; i < WAIT_MS && v.success + v.failure < total; i++) {
		ms(1);
		v = ct_now(ct);
	}
	CHECK(v.success + v.failure >= total, "%s: counter {%llu, %llu} never reached %llu", what,
	      S(v.success), S(v.failure), S(total));
}

static void ct_bump(struct emunic_ct *ct, uint64_t success, uint64_t failure)
{
	int r = emunic_ct_inc(ct, (struct emunic_ct_val){ success, failure });

	CHECK(r == 0, "ct_inc: %s", strerror(-r));
}

static void ct_put_val(struct emunic_ct *ct, uint64_t success, uint64_t failure)
{
	int r = emunic_ct_set(ct, (struct emunic_ct_val){ success, failure });

	CHECK(r == 0, "ct_set: %s", strerror(-r));
}

static void pending_is(unsigned n, const char *what)
{
	unsigned p = emunic_trig_pending(T->dev);

	CHECK(p == n, "%s: %u trigger(s) pending, expected %u", what, p, n);
}

static struct emunic_op op_rma(int kind, void *local, size_t len, struct emunic_target tg, uint64_t off,
			       struct emunic_ct *done)
{
	return (struct emunic_op){ .kind = kind, .qp = T->qp, .addr = local, .len = len, .mr = T->mr,
				   .target = tg, .offset = off, .ct = done };
}

static struct emunic_op op_fadd(uint64_t *res, struct emunic_target tg, uint64_t add, struct emunic_ct *done)
{
	struct emunic_op op = op_rma(EMUNIC_OP_FETCH_ADD, res, 8, tg, 0, done);

	op.add = add;
	*res = NONE;
	return op;
}

static struct emunic_op op_ctinc(struct emunic_ct *which, uint64_t by)
{
	return (struct emunic_op){ .kind = EMUNIC_OP_CT_INC, .ct_target = which, .ct_value = { by, 0 } };
}

static void post_now(const struct emunic_op *op)
{
	int r = emunic_op_post(T->dev, op);

	CHECK(r == 0, "op_post of a %s (user %llu): %s", emunic_op_kind_str(op->kind), S(op->user), strerror(-r));
}

static void post_on(const struct emunic_op *op, struct emunic_ct *on, uint64_t threshold)
{
	int r = emunic_trig_post(T->dev, op, on, threshold);

	CHECK(r == 0, "trig_post of a %s at %llu (user %llu): %s", emunic_op_kind_str(op->kind), S(threshold),
	      S(op->user), strerror(-r));
}

static char pat(unsigned seed, size_t i) { return (char)(seed * 131u + i * 7u + (i >> 8) + 1u); }

static void pattern(char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

static void expect_pattern(const char *p, size_t n, unsigned seed, const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(p[i] == pat(seed, i), "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, n,
		      (unsigned char)p[i], (unsigned char)pat(seed, i));
}

static void expect_fill(const char *p, int c, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(p[i] == (char)c, "%s: byte %zu is 0x%02x, expected untouched 0x%02x", what, i,
		      (unsigned char)p[i], (unsigned char)c);
}

static struct emunic_event ev_next(struct emunic_eq *eq, const char *what)
{
	struct emunic_event ev;
	int r = emunic_eq_wait(eq, &ev, WAIT_MS);

	CHECK(r == 0, "%s: no event (%s)", what, strerror(-r));
	return ev;
}

static void eq_empty(struct emunic_eq *eq, const char *what)
{
	struct emunic_event ev;
	int n = emunic_eq_poll(eq, &ev, 1);

	CHECK(n == 0, "%s: an extra %s event (user %llu, offset %llu)", what, n > 0 ? emunic_ev_kind_str(ev.kind) : "?",
	      S(ev.user), S(ev.offset));
}

static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

/* ---- the checks ------------------------------------------------------------------- */

/* A put on ct at threshold 5: after 4 increments nothing has reached the
 * target (bytes and its counter); the 5th fires it, once (2 more do not fire
 * it again).  The op struct is scribbled over after posting: arguments are
 * copied at post. */
static void t_threshold(void)
{
	struct emunic_ct *trig = NULL, *done = NULL, *lct;
	struct emunic_target tg = setup_entry(8192, 0xEE, &lct);

	if (T->rank == 0) {
		struct emunic_op op;

		trig = ct_new();	/* kept across the phases below */
		done = ct_new();
		pattern(at(0), 4000, 5);
		op = op_rma(EMUNIC_OP_PUT, at(0), 4000, tg, 64, done);
		post_on(&op, trig, 5);
		memset(&op, 0xff, sizeof(op));
		for (int i = 0; i < 4; i++)
			ct_bump(trig, 1, 0);
		ct_await(trig, 4, "4 increments");
		ms(200);
		ct_is(trig, 4, 0, "the trigger counter after 4 increments");
		ct_is(done, 0, 0, "the put's own counter at 4 of 5");
		pending_is(1, "at 4 of 5");
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_is(lct, 0, 0, "the target's entry counter at 4 of 5");
		expect_fill(at(0), 0xEE, 8192, "the target's memory at 4 of 5");
	}
	sync_ranks();
	if (T->rank == 0) {
		ct_bump(trig, 1, 0);
		ct_await(done, 1, "the put after the 5th increment");
		ct_bump(trig, 2, 0);
		ct_await(trig, 7, "7 increments");
		ms(200);
		ct_is(done, 1, 0, "the put's own counter after 7 increments");
		pending_is(0, "after the put fired");
	}
	if (T->rank == 1)
		ct_await(lct, 1, "the put at the target");
	sync_ranks();
	if (T->rank == 1) {
		ct_is(lct, 1, 0, "the target's entry counter after 7 increments (fired more than once?)");
		expect_fill(at(0), 0xEE, 64, "the target before the put");
		expect_pattern(at(64), 4000, 5, "the put's data at the target");
		expect_fill(at(4064), 0xEE, 8192 - 4064, "the target after the put");
	}
}

/* Thresholds already met when posted (equal, below, and met by success +
 * failure) fire at once, with no further change to their counter. */
static void t_already_met(void)
{
	struct emunic_ct *lct;
	struct emunic_target tg = setup_entry(4096, 0xEE, &lct);

	if (T->rank == 0) {
		struct emunic_ct *a = ct_new(), *b = ct_new(), *done = ct_new();
		struct emunic_op op;

		ct_bump(a, 3, 0);
		ct_put_val(b, 1, 2);
		ct_await(a, 3, "counter a at 3");
		ct_reach(b, 3, "counter b at {1, 2}");
		for (unsigned i = 0; i < 3; i++)
			pattern(at(256 * i), 256, 20 + i);
		op = op_rma(EMUNIC_OP_PUT, at(0), 256, tg, 0, done);
		post_on(&op, a, 3);		/* equal */
		op = op_rma(EMUNIC_OP_PUT, at(256), 256, tg, 256, done);
		post_on(&op, a, 1);		/* below */
		op = op_rma(EMUNIC_OP_PUT, at(512), 256, tg, 512, done);
		post_on(&op, b, 3);		/* success 1 + failure 2 */
		ct_await(done, 3, "three triggers already met");
		ct_is(done, 3, 0, "the puts' counter");
		ct_is(a, 3, 0, "counter a (unchanged)");
		pending_is(0, "after the met triggers");
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(lct, 3, "the three puts at the target");
		for (unsigned i = 0; i < 3; i++)
			expect_pattern(at(256 * i), 256, 20 + i, "a put at the target");
		expect_fill(at(768), 0xEE, 4096 - 768, "the target after the puts");
	}
}

/* A chain of 100 ops, each triggered by the previous one's completion
 * counter: fetch-adds, puts and ct-incs in turn, posted LAST FIRST, so an
 * implementation that ignored thresholds would run them in the reverse
 * order.  The app thread then only computes until the last op's fetched
 * value lands in its memory: the progress core alone runs the chain. */
#define CHAIN 100
static void t_chain(void)
{
	struct { struct emunic_target a, b; } mine = { { 0 }, { 0 } }, tg;
	struct emunic_ct *la = NULL, *lb = NULL;
	struct emunic_eq *eqb = NULL;

	setup();
	if (T->rank == 1) {
		la = ct_new();
		lb = ct_new();
		eqb = eq_new();
		mine.a = emunic_le_target(le_new(0, 8, 0, la, NULL, 0, 0));
		mine.b = emunic_le_target(le_new(4096, 8 * CHAIN, 0, lb, eqb, 0, 3));
	}
	swap(&mine, &tg, sizeof(mine));
	if (T->rank == 0) {
		struct emunic_ct *c[CHAIN], *start = ct_new();
		uint64_t *res = word(0), *src = word(4096), acc = 1;
		volatile uint64_t *last = &res[CHAIN - 1];
		double t0;
		long spins = 0;

		for (unsigned i = 0; i < CHAIN; i++)
			c[i] = ct_new();
		for (unsigned i = CHAIN; i-- > 0;) {
			struct emunic_op op;

			if (i % 3 == 0) {
				op = op_fadd(&res[i], tg.a, 1, c[i]);
			} else if (i % 3 == 1) {
				src[i] = 1000 + i;
				op = op_rma(EMUNIC_OP_PUT, &src[i], 8, tg.b, 8 * i, c[i]);
			} else {
				op = op_ctinc(c[i], 1);
			}
			op.user = i;
			post_on(&op, i ? c[i - 1] : start, 1);
		}
		pending_is(CHAIN, "the chain posted");
		ms(100);
		CHECK(*last == NONE, "the chain's last op ran before the chain was started");
		ct_bump(start, 1, 0);
		/* Compute only: no emunic call until the last op's result lands. */
		t0 = now_s();
		while (__atomic_load_n(last, __ATOMIC_ACQUIRE) == NONE) {
			for (int k = 0; k < 10000; k++)
				acc = acc * 6364136223846793005ull + 1442695040888963407ull;
			if (++spins % 1000 == 0 && now_s() - t0 > 20)
				DIE("the chain did not finish in 20 s of app computation (result %llx)", S(acc));
		}
		printf("emunic-trigtest: chain of %d ran in %.1f ms while the app computed\n", CHAIN,
		       (now_s() - t0) * 1e3);
		ct_await(c[CHAIN - 1], 1, "the chain's last op");
		for (unsigned i = 0; i < CHAIN; i++) {
			struct emunic_ct_val v = ct_now(c[i]);

			CHECK(v.success == 1 && v.failure == 0, "chain op %u (%s): counter {%llu, %llu}", i,
			      i % 3 == 0 ? "fetch_add" : i % 3 == 1 ? "put" : "ct_inc", S(v.success), S(v.failure));
			if (i % 3 == 0)
				CHECK(res[i] == i / 3, "chain op %u, the %u-th fetch_add, fetched %llu: ran out of "
				      "order", i, i / 3, S(res[i]));
		}
		pending_is(0, "after the chain");
	}
	sync_ranks();
	if (T->rank == 1) {
		unsigned puts = 0;

		ct_await(la, (CHAIN + 2) / 3, "the chain's fetch_adds at the target");
		ct_await(lb, CHAIN / 3, "the chain's puts at the target");
		for (unsigned i = 1; i < CHAIN; i += 3) {
			struct emunic_event ev = ev_next(eqb, "a chain put's event");

			CHECK(ev.kind == EMUNIC_EV_PUT && ev.offset == 8 * i, "the %u-th event at the target is %s "
			      "at offset %llu, expected PUT at %u: out of order", puts, emunic_ev_kind_str(ev.kind),
			      S(ev.offset), 8 * i);
			CHECK(*word(4096 + 8 * i) == 1000 + i, "chain put %u wrote %llu", i, S(*word(4096 + 8 * i)));
			puts++;
		}
		ms(100);
		eq_empty(eqb, "the chain's puts");
		ct_is(la, (CHAIN + 2) / 3, 0, "the fetch_adds counted at the target");
		ct_is(lb, CHAIN / 3, 0, "the puts counted at the target");
		CHECK(*word(0) == (CHAIN + 2) / 3, "the target word is %llu after %d fetch_adds", S(*word(0)),
		      (CHAIN + 2) / 3);
	}
}

/* 64 fetch-adds on one counter, thresholds shuffled with ties, one bump
 * past them all: the values fetched from the one remote word give the
 * order they ran in, which must be threshold order, ties in posting order. */
#define ORDER_N 64
#define ORDER_MAX 16
static void t_order(void)
{
	struct emunic_ct *lct;
	struct emunic_target tg = setup_entry(8, 0, &lct);

	if (T->rank == 0) {
		struct emunic_ct *trig = ct_new(), *done = ct_new();
		uint64_t *res = word(0), thr[ORDER_N], want[ORDER_N];
		uint32_t seed = 20240607;
		unsigned bad = 0, ties = 0, inversions = 0;

		for (unsigned k = 0; k < ORDER_N; k++)
			thr[k] = 1 + lcg(&seed) % ORDER_MAX;
		for (unsigned k = 0; k < ORDER_N; k++) {
			want[k] = 0;
			for (unsigned j = 0; j < ORDER_N; j++) {
				want[k] += thr[j] < thr[k] || (thr[j] == thr[k] && j < k);
				ties += j < k && thr[j] == thr[k];
				inversions += j < k && thr[j] > thr[k];
			}
		}
		CHECK(ties && inversions, "the thresholds have no ties or are not shuffled");
		for (unsigned k = 0; k < ORDER_N; k++) {
			struct emunic_op op = op_fadd(&res[k], tg, 1, done);

			op.user = k;
			post_on(&op, trig, thr[k]);
		}
		ms(200);
		ct_is(done, 0, 0, "fetch_adds run before their counter moved");
		pending_is(ORDER_N, "before the bump");
		ct_bump(trig, ORDER_MAX, 0);
		ct_await(done, ORDER_N, "the fetch_adds after the bump");
		ct_is(done, ORDER_N, 0, "the fetch_adds' counter");
		for (unsigned k = 0; k < ORDER_N; k++) {
			if (res[k] == want[k])
				continue;
			if (bad++ < 8)
				fprintf(stderr, "emunic-trigtest: trigger %u (threshold %llu) ran %llu-th, expected "
					"%llu-th\n", k, S(thr[k]), S(res[k]), S(want[k]));
		}
		CHECK(!bad, "%u of %d triggers ran out of threshold/posting order", bad, ORDER_N);
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(lct, ORDER_N, "the fetch_adds at the target");
		CHECK(*word(0) == ORDER_N, "the target word is %llu", S(*word(0)));
	}
}

/* Posting into a full trigger table from another thread, so that a post
 * that blocks is reported instead of hanging the check. */
struct poster {
	const struct emunic_op *op;
	struct emunic_ct *on;
	uint64_t threshold;
	int r;
	double took;
};

static void *post_thread(void *arg)
{
	struct poster *p = arg;
	double t0 = now_s();

	p->r = emunic_trig_post(T->dev, p->op, p->on, p->threshold);
	p->took = now_s() - t0;
	return NULL;
}

/* Nothing can free a table entry meanwhile (the triggers wait on a counter
 * only this thread moves): a post that waits for room never returns. */
static int post_bounded(const struct emunic_op *op, struct emunic_ct *on, uint64_t threshold)
{
	struct poster p = { op, on, threshold, 1, 0 };
	struct timespec dl;
	pthread_t th;

	CHECK(!pthread_create(&th, NULL, post_thread, &p), "pthread_create");
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	CHECK(!pthread_timedjoin_np(th, NULL, &dl), "trig_post into a full table blocked for 5 s");
	CHECK(p.took < 1, "trig_post into a full table took %.0f ms", p.took * 1e3);
	return p.r;
}

/* trig_entries 8: 8 triggers that cannot fire fill the table; the 9th is
 * -ENOSPC at once; the core still runs untriggered work; once the 8 fire,
 * the table takes 8 again. */
#define TABLE 8
static void t_enospc(void)
{
	struct emunic_ct *lct;
	struct emunic_target tg = setup_entry(4096, 0xEE, &lct);

	if (T->rank == 0) {
		struct emunic_ct *hold = ct_new(), *done = ct_new(), *now = ct_new();
		struct emunic_op op;
		int r;

		for (unsigned round = 0; round < 2; round++) {
			for (unsigned i = 0; i < TABLE; i++) {
				pattern(at(64 * (i + TABLE * round)), 64, i + TABLE * round);
				op = op_rma(EMUNIC_OP_PUT, at(64 * (i + TABLE * round)), 64, tg,
					    64 * (i + TABLE * round), done);
				post_on(&op, hold, round + 1);
			}
			pending_is(TABLE, "a full table");
			op = op_rma(EMUNIC_OP_PUT, at(2048), 64, tg, 2048, done);
			r = post_bounded(&op, hold, round + 1);
			CHECK(r == -ENOSPC, "round %u: the %d-th trigger gave %d (%s), expected -ENOSPC", round,
			      TABLE + 1, r, r ? strerror(-r) : "posted");
			op = op_ctinc(now, 1);
			r = post_bounded(&op, hold, round + 1);
			CHECK(r == -ENOSPC, "round %u: a triggered ct_inc into a full table gave %d", round, r);
			pending_is(TABLE, "after the refused posts");
			if (round == 0) {	/* the core keeps running untriggered work */
				pattern(at(3072), 64, 99);
				op = op_rma(EMUNIC_OP_PUT, at(3072), 64, tg, 3072, now);
				post_now(&op);
				ct_await(now, 1, "an untriggered put with the table full");
				ct_is(now, 1, 0, "the untriggered put");
			}
			ms(100);
			ct_is(done, TABLE * round, 0, "the held puts before their counter moved");
			ct_bump(hold, 1, 0);
			ct_reach(done, TABLE * (round + 1), "the held puts once released");
			ct_is(done, TABLE * (round + 1), 0, "the released puts");
			pending_is(0, "after the table emptied");
		}
		ct_is(now, 1, 0, "the counter a refused ct_inc would have bumped");
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(lct, 2 * TABLE + 1, "the puts at the target");
		for (unsigned i = 0; i < 2 * TABLE; i++)
			expect_pattern(at(64 * i), 64, i, "a released put");
		expect_fill(at(2048), 0xEE, 64, "where the refused put would have written");
		expect_pattern(at(3072), 64, 99, "the untriggered put");
		ms(100);
		ct_is(lct, 2 * TABLE + 1, 0, "the target's entry counter");
	}
}

/* A get and, at once behind it on the same QP, a put: the get's counter
 * says done only once its data is there.  iWARP (siw) completes the put
 * as soon as it is sent, before the get whose response is still coming;
 * the put's completion must not complete the get with it (nic/verbs.c).
 * Odd rounds count only the put: its counter then says the get before it
 * is done too (completions in order, as RC's), so the uncounted get must
 * still be signaled. */
static void t_get_overtaken(void)
{
	enum { ROUNDS = 12, GET_LEN = 256 * 1024, INTO = 512 * 1024, PUT_OFF = 768 * 1024 };
	struct emunic_target mine = { 0 }, tg;

	setup();
	if (T->rank == 1)
		mine = emunic_mr_target(T->mr);
	swap(&mine, &tg, sizeof(mine));
	for (unsigned k = 0; k < ROUNDS; k++) {
		if (T->rank == 1)
			pattern(at(0), GET_LEN, 50 + k);
		sync_ranks();
		if (T->rank == 0) {
			struct emunic_ct *g = k % 2 ? NULL : ct_new(), *p = ct_new();
			struct emunic_op op = op_rma(EMUNIC_OP_GET, at(INTO), GET_LEN, tg, 0, g);

			memset(at(INTO), 0, GET_LEN);
			post_now(&op);
			pattern(at(0), 64, 90 + k);
			op = op_rma(EMUNIC_OP_PUT, at(0), 64, tg, PUT_OFF, p);
			post_now(&op);
			ct_await(g ? g : p, 1, g ? "the get" : "the put behind the uncounted get");
			expect_pattern(at(INTO), GET_LEN, 50 + k, g ? "the get's data once its counter said done"
								     : "the get's data once the put behind it was done");
			ct_await(p, 1, "the put");
			if (g)
				ct_is(g, 1, 0, "the get's counter");
		}
		sync_ranks();
		/* An iWARP write is done at its source once sent, not placed. */
		for (int i = 0; T->rank == 1 && i < WAIT_MS && at(PUT_OFF)[63] != pat(90 + k, 63); i++)
			ms(1);
		if (T->rank == 1)
			expect_pattern(at(PUT_OFF), 64, 90 + k, "the put behind the get, at the target");
	}
}

/* Puts into an entry are counted at the target and reported as PUT events
 * (peer, length, offset; with EMUNIC_LE_HDR, match bits and header data from
 * the first 16 bytes); a put into plain memory is not counted; gets from an
 * entry are counted at the target (GET events) once the getter's core says. */
static void t_target_count(void)
{
	static const struct { uint64_t off, len, match, hdr; } puts[] = {
		{ 0, 16 + 100, 0xA1A2A3A4A5A6A7A8ull, 0x1111 },
		{ 512, 16 + 1, 0x0102030405060708ull, 0x2222 },
		{ 1024, 16, 0xFFFFFFFF00000001ull, 0x3333 },
	};
	static const struct { uint64_t off, len; } gets[] = { { 0, 64 }, { 100, 200 } };
	struct { struct emunic_target p, g, plain; } mine = { { 0 }, { 0 }, { 0 } }, tg;
	struct emunic_ct *cp = NULL, *cg = NULL;
	struct emunic_eq *ep = NULL, *eg = NULL;

	setup();
	if (T->rank == 1) {
		cp = ct_new();
		cg = ct_new();
		ep = eq_new();
		eg = eq_new();
		mine.p = emunic_le_target(le_new(0, 4096, 0xEE, cp, ep, EMUNIC_LE_HDR, 3));
		mine.g = emunic_le_target(le_new(8192, 4096, 0, cg, eg, 0, 0));
		pattern(at(8192), 4096, 7);
		memset(at(16384), 0xEE, 4096);
		mine.plain = emunic_mr_target(T->mr);
	}
	swap(&mine, &tg, sizeof(mine));
	if (T->rank == 0) {
		struct emunic_ct *done = ct_new();
		struct emunic_eq *eq = eq_new();
		struct emunic_op op;

		for (unsigned k = 0; k < 3; k++) {
			char *p = at(4096 * k);

			pattern(p, puts[k].len, 30 + k);
			memcpy(p, &puts[k].match, 8);
			memcpy(p + 8, &puts[k].hdr, 8);
			op = op_rma(EMUNIC_OP_PUT, p, puts[k].len, tg.p, puts[k].off, done);
			op.eq = eq;
			op.user = 10 + k;
			post_now(&op);
		}
		pattern(at(12288), 64, 40);
		op = op_rma(EMUNIC_OP_PUT, at(12288), 64, tg.plain, 16384, done);
		op.eq = eq;
		op.user = 13;
		post_now(&op);
		ct_await(done, 4, "the puts' local completions");
		for (unsigned k = 0; k < 4; k++) {
			struct emunic_event ev = ev_next(eq, "a put's ACK");

			CHECK(ev.kind == EMUNIC_EV_ACK && ev.status == 0 && ev.peer == 1 && ev.user == 10 + k &&
			      ev.offset == (k < 3 ? puts[k].off : 16384) && ev.length == (k < 3 ? puts[k].len : 64) &&
			      ev.le == (k < 3 ? tg.p.id : 0u),
			      "initiator event %u: %s status %d peer %d user %llu offset %llu length %llu le %u", k,
			      emunic_ev_kind_str(ev.kind), ev.status, ev.peer, S(ev.user), S(ev.offset),
			      S(ev.length), ev.le);
		}
		ct_is(done, 4, 0, "the puts' counter");
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(cp, 3, "the puts counted at the target");
		for (unsigned k = 0; k < 3; k++) {
			struct emunic_event ev = ev_next(ep, "a PUT event at the target");

			CHECK(ev.kind == EMUNIC_EV_PUT && ev.status == 0 && ev.peer == 0 && ev.le == tg.p.id &&
			      ev.offset == puts[k].off && ev.length == puts[k].len - 16 &&
			      ev.match_bits == puts[k].match && ev.hdr_data == puts[k].hdr,
			      "target event %u: %s status %d peer %d le %u (want %u) offset %llu length %llu "
			      "match %llx hdr %llx; expected PUT from 0 at %llu, %llu bytes, match %llx hdr %llx", k,
			      emunic_ev_kind_str(ev.kind), ev.status, ev.peer, ev.le, tg.p.id, S(ev.offset),
			      S(ev.length), S(ev.match_bits), S(ev.hdr_data), S(puts[k].off), S(puts[k].len - 16),
			      S(puts[k].match), S(puts[k].hdr));
			CHECK(!memcmp(at(puts[k].off), &puts[k].match, 8) && !memcmp(at(puts[k].off + 8), &puts[k].hdr, 8),
			      "put %u's header is not at the start of its data", k);
			for (size_t i = 16; i < puts[k].len; i++)
				CHECK(at(puts[k].off)[i] == pat(30 + k, i), "put %u: byte %zu wrong at the target", k, i);
		}
		expect_pattern(at(16384), 64, 40, "the put into plain memory");
	}
	sync_ranks();
	if (T->rank == 0) {
		struct emunic_ct *done = ct_new();
		struct emunic_eq *eq = eq_new();

		for (unsigned k = 0; k < 2; k++) {
			struct emunic_op op = op_rma(EMUNIC_OP_GET, at(65536 + 4096 * k), gets[k].len, tg.g,
						     gets[k].off, done);

			op.eq = eq;
			op.user = 20 + k;
			post_now(&op);
		}
		ct_await(done, 2, "the gets' local completions");
		ct_is(done, 2, 0, "the gets' counter");
		for (unsigned k = 0; k < 2; k++) {
			struct emunic_event ev = ev_next(eq, "a get's REPLY");

			CHECK(ev.kind == EMUNIC_EV_REPLY && ev.status == 0 && ev.peer == 1 && ev.user == 20 + k &&
			      ev.offset == gets[k].off && ev.length == gets[k].len,
			      "initiator event %u: %s status %d user %llu offset %llu", k, emunic_ev_kind_str(ev.kind),
			      ev.status, S(ev.user), S(ev.offset));
			for (size_t i = 0; i < gets[k].len; i++)
				CHECK(at(65536 + 4096 * k)[i] == pat(7, gets[k].off + i), "get %u: byte %zu wrong", k, i);
		}
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(cg, 2, "the gets counted at the target");
		for (unsigned k = 0; k < 2; k++) {
			struct emunic_event ev = ev_next(eg, "a GET event at the target");

			CHECK(ev.kind == EMUNIC_EV_GET && ev.status == 0 && ev.peer == 0 && ev.le == tg.g.id &&
			      ev.offset == gets[k].off,
			      "target event %u: %s status %d peer %d le %u offset %llu; expected GET from 0 at %llu",
			      k, emunic_ev_kind_str(ev.kind), ev.status, ev.peer, ev.le, S(ev.offset), S(gets[k].off));
		}
		ms(200);
		ct_is(cg, 2, 0, "the gets counted at the target");
		ct_is(cp, 3, 0, "the put entry's counter (gets or plain puts counted there?)");
		eq_empty(ep, "the put entry");
		eq_empty(eg, "the get entry");
	}
}

/* A get from memory the peer deregistered fails (remote access error): its
 * counter's failure counts 1, and a wait for a success count it can never
 * reach returns on it; a trigger at 1 on that counter fires (success +
 * failure counts), one at 2 does not. */
/* The status a READ from a deregistered region completes with.  On iWARP
 * (the device has no RNR) the target answers with a TERMINATE that ends
 * the connection, and siw completes the READ it had outstanding as flushed
 * (siw_sq_flush: every ORQ entry gets WR_FLUSH_ERR); the remote access
 * error reaches no completion. */
static int read_access_err(void)
{
	return emunic_dev_caps(T->dev) & EMUNIC_DEV_CAP_RNR ? EMUNIC_WC_REM_ACCESS_ERR : EMUNIC_WC_WR_FLUSH_ERR;
}

static void t_failure(void)
{
	struct { struct emunic_target le, gone; } mine = { { 0 }, { 0 } }, tg;
	struct emunic_ct *lct = NULL;
	struct emunic_mr *mr2 = NULL;
	struct emunic_qp *qp2;

	setup();
	qp2 = qp_new(EMUNIC_QP_TRIGGERED);	/* for the triggered puts: T->qp fails */
	if (T->rank == 1) {
		lct = ct_new();
		mine.le = emunic_le_target(le_new(0, 4096, 0xEE, lct, NULL, 0, 0));
		CHECK(!emunic_mr_reg(T->dev, at(65536), 4096, &mr2), "mr_reg");
		mine.gone = emunic_mr_target(mr2);
	}
	swap(&mine, &tg, sizeof(mine));
	if (T->rank == 1)
		CHECK(!emunic_mr_dereg(mr2), "mr_dereg");
	sync_ranks();
	if (T->rank == 0) {
		struct emunic_ct *f = ct_new(), *done = ct_new();
		struct emunic_eq *eq = eq_new();
		struct emunic_ct_val v = { 0, 0 };
		struct emunic_event ev;
		struct emunic_op op;
		double t0;
		int r;

		pattern(at(0), 16, 50);
		op = op_rma(EMUNIC_OP_PUT, at(0), 8, tg.le, 0, done);
		op.qp = qp2;
		post_on(&op, f, 1);
		op = op_rma(EMUNIC_OP_PUT, at(8), 8, tg.le, 8, done);
		op.qp = qp2;
		post_on(&op, f, 2);
		op = op_rma(EMUNIC_OP_GET, at(4096), 64, tg.gone, 0, f);
		op.eq = eq;
		op.user = 7;
		post_now(&op);
		t0 = now_s();
		r = emunic_ct_wait(f, 1000, &v, WAIT_MS);
		CHECK(r == 0, "a wait for 1000 on a counter whose event failed gave %s after %.0f ms (counter {%llu, "
		      "%llu})", strerror(-r), (now_s() - t0) * 1e3, S(v.success), S(v.failure));
		CHECK(v.success == 0 && v.failure == 1, "the wait returned with {%llu, %llu}, expected {0, 1}",
		      S(v.success), S(v.failure));
		ev = ev_next(eq, "the failed get's REPLY");
		CHECK(ev.kind == EMUNIC_EV_REPLY && ev.status == read_access_err() && ev.user == 7 &&
		      ev.peer == 1, "the failed get's event: %s status %s (expected %s) user %llu peer %d",
		      emunic_ev_kind_str(ev.kind), emunic_wc_status_str(ev.status),
		      emunic_wc_status_str(read_access_err()), S(ev.user), ev.peer);
		ct_await(done, 1, "the put triggered at 1 on the failed counter");
		ms(200);
		ct_is(done, 1, 0, "the triggered puts (the one at 2 must not fire)");
		ct_is(f, 0, 1, "the failed get's counter");
		pending_is(1, "the trigger at 2");
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(lct, 1, "the triggered put at the target");
		expect_pattern(at(0), 8, 50, "the put triggered by the failure");
		expect_fill(at(8), 0xEE, 8, "where the trigger at 2 would have written");
		ct_is(lct, 1, 0, "the target's entry counter");
	}
}

/* Thresholds above 2^32: not fired at 2^32 + 4, fired at 2^32 + 5; the next
 * one (2^32 + 6) and 2^33 (0 if truncated to 32 bits) wait. */
static void t_threshold64(void)
{
	const uint64_t base = (1ull << 32) + 5;
	struct emunic_ct *lct;
	struct emunic_target tg = setup_entry(4096, 0xEE, &lct);

	if (T->rank == 0) {
		struct emunic_ct *trig = ct_new(), *done = ct_new();
		struct emunic_op op;

		ct_put_val(trig, base - 1, 0);
		ct_await(trig, base - 1, "the counter set to 2^32 + 4");
		ct_is(trig, base - 1, 0, "the counter set to 2^32 + 4");
		for (unsigned k = 0; k < 3; k++)
			pattern(at(64 * k), 64, 60 + k);
		op = op_rma(EMUNIC_OP_PUT, at(0), 64, tg, 0, done);
		post_on(&op, trig, base);
		op = op_rma(EMUNIC_OP_PUT, at(64), 64, tg, 64, done);
		post_on(&op, trig, base + 1);
		op = op_rma(EMUNIC_OP_PUT, at(128), 64, tg, 128, done);
		post_on(&op, trig, 1ull << 33);
		ms(200);
		ct_is(done, 0, 0, "puts at 2^32 + 5 and above with the counter at 2^32 + 4");
		pending_is(3, "at 2^32 + 4");
		ct_bump(trig, 1, 0);
		ct_await(done, 1, "the put at 2^32 + 5");
		ms(200);
		ct_is(trig, base, 0, "the counter after the increment");
		ct_is(done, 1, 0, "the puts at 2^32 + 5 (only)");
		pending_is(2, "at 2^32 + 5");
		ct_put_val(trig, 1ull << 33, 0);
		ct_reach(done, 3, "the puts at 2^32 + 6 and 2^33");
		ct_is(done, 3, 0, "the puts after setting 2^33");
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(lct, 3, "the puts at the target");
		for (unsigned k = 0; k < 3; k++)
			expect_pattern(at(64 * k), 64, 60 + k, "a put at the target");
	}
}

/* A thread waiting on a counter with no timeout */
struct waiter {
	struct emunic_ct *ct;
	struct emunic_ct_val v;
	_Atomic int returned;
	int r;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->r = emunic_ct_wait(w->ct, 10, &w->v, -1);
	atomic_store(&w->returned, 1);
	return NULL;
}

/* Freeing a counter with a waiter (no timeout) and three pending triggers
 * (put, ct_inc, get): the waiter returns -ECANCELED, each trigger's own
 * counter counts a failure and its EQ gets EMUNIC_WC_CANCELED, none of them
 * runs; then the device still runs ops and triggers. */
static void t_free_pending(void)
{
	static const int kinds[] = { EMUNIC_EV_ACK, EMUNIC_EV_CT_DONE, EMUNIC_EV_REPLY };
	struct emunic_ct *lct;
	struct emunic_target tg = setup_entry(4096, 0xEE, &lct);

	if (T->rank == 0) {
		struct emunic_ct *x = ct_new(), *done = ct_new(), *y = ct_new(), *later = ct_new(), *z = ct_new();
		struct emunic_eq *eq = eq_new();
		struct waiter w = { .ct = x };
		struct emunic_dev_stats st0 = { 0 }, st1 = { 0 };
		struct emunic_ct_val v;
		struct emunic_op op;
		struct timespec dl;
		pthread_t th;
		unsigned seen = 0;
		int r;

		memset(at(8192), 0x55, 64);
		pattern(at(0), 64, 70);
		op = op_rma(EMUNIC_OP_PUT, at(0), 64, tg, 0, done);
		op.eq = eq;
		op.user = 0;
		post_on(&op, x, 1);
		op = op_ctinc(y, 1);
		op.ct = done;
		op.eq = eq;
		op.user = 1;
		post_on(&op, x, 2);
		op = op_rma(EMUNIC_OP_GET, at(8192), 64, tg, 0, done);
		op.eq = eq;
		op.user = 2;
		post_on(&op, x, 5);
		pending_is(3, "three triggers on the counter");
		CHECK(!emunic_dev_stats(T->dev, &st0), "emunic_dev_stats");
		CHECK(!pthread_create(&th, NULL, wait_thread, &w), "pthread_create");
		/* Freed only once the waiter is in its wait (the device counts
		 * it), not merely started: a thread that had not reached
		 * ct_wait yet would find the counter freed (-EINVAL). */
		for (int i = 0; i < WAIT_MS && !emunic_dev_stats(T->dev, &st1) && st1.waits == st0.waits; i++)
			ms(1);
		CHECK(st1.waits > st0.waits, "the waiter was not in ct_wait after %d ms", WAIT_MS);
		ms(200);
		CHECK(!atomic_load(&w.returned), "ct_wait returned %d before the counter was freed", w.r);
		r = emunic_ct_free(x);
		CHECK(r == 0, "ct_free: %s", strerror(-r));
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += WAIT_MS / 1000;
		CHECK(!pthread_timedjoin_np(th, NULL, &dl), "a waiter (no timeout) on a freed counter was not woken "
		      "in %d s", WAIT_MS / 1000);
		CHECK(w.r == -ECANCELED, "the waiter on the freed counter got %d (%s), expected -ECANCELED", w.r,
		      strerror(-w.r));
		ct_reach(done, 3, "the canceled triggers' counter");
		ct_is(done, 0, 3, "the canceled triggers' counter");
		for (unsigned k = 0; k < 3; k++) {
			struct emunic_event ev = ev_next(eq, "a canceled trigger's event");

			CHECK(ev.user < 3 && !(seen & (1u << ev.user)), "an unexpected event (user %llu)", S(ev.user));
			seen |= 1u << ev.user;
			CHECK(ev.kind == kinds[ev.user] && ev.status == EMUNIC_WC_CANCELED, "canceled trigger %llu's "
			      "event: %s status %s, expected %s canceled", S(ev.user), emunic_ev_kind_str(ev.kind),
			      emunic_wc_status_str(ev.status), emunic_ev_kind_str(kinds[ev.user]));
		}
		eq_empty(eq, "the canceled triggers");
		pending_is(0, "after the free");
		ct_is(y, 0, 0, "the canceled ct_inc's target");
		expect_fill(at(8192), 0x55, 64, "the canceled get's buffer");
		CHECK(emunic_ct_get(x, &v) == -EINVAL, "ct_get on the freed counter accepted");
		/* The device still works: an op, and a trigger on a new counter. */
		pattern(at(64), 64, 71);
		op = op_rma(EMUNIC_OP_PUT, at(64), 64, tg, 64, later);
		post_now(&op);
		pattern(at(128), 64, 72);
		op = op_rma(EMUNIC_OP_PUT, at(128), 64, tg, 128, later);
		post_on(&op, z, 1);
		ct_bump(z, 1, 0);
		ct_reach(later, 2, "an op and a trigger after the free");
		ct_is(later, 2, 0, "an op and a trigger after the free");
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(lct, 2, "the puts after the free at the target");
		ms(100);
		ct_is(lct, 2, 0, "the target's entry counter (a canceled put ran?)");
		expect_fill(at(0), 0xEE, 64, "where the canceled put would have written");
		expect_pattern(at(64), 64, 71, "the op after the free");
		expect_pattern(at(128), 64, 72, "the trigger after the free");
	}
}

/* NULL and freed counters are -EINVAL everywhere; so are ops of an unknown
 * kind, on a QP not created TRIGGERED or with no QP, past the end of the
 * target, with a freed completion counter or ct_target, or a short
 * fetch-add.  Nothing is posted (nothing pending, no counter moved, nothing
 * at the target) and the counters around keep their values and work. */
static void t_invalid(void)
{
	struct emunic_ct *lct;
	struct emunic_target tg = setup_entry(64, 0xEE, &lct);
	struct emunic_qp *plain = qp_new(0);

	if (T->rank == 0) {
		struct emunic_ct *k = ct_new(), *l = ct_new(), *done = ct_new(), *freed = ct_new();
		struct emunic_ct *bads[2] = { NULL, freed }, *pair[2];
		struct emunic_ct_val v = { 0, 0 };
		uint64_t tests[2] = { 1, 1 };
		struct emunic_op base, op, bad[12];
		unsigned n = 0;

		ct_put_val(k, 7, 0);
		ct_await(k, 7, "counter k at 7");
		pattern(at(0), 64, 80);
		op = op_rma(EMUNIC_OP_PUT, at(0), 8, tg, 0, done);
		post_on(&op, l, 3);
		CHECK(!emunic_ct_free(freed), "ct_free");
		for (unsigned i = 0; i < 2; i++) {
			const char *what = i ? "a freed counter" : "a NULL counter";
			int r;

			CHECK((r = emunic_ct_get(bads[i], &v)) == -EINVAL, "ct_get on %s gave %d", what, r);
			CHECK((r = emunic_ct_set(bads[i], v)) == -EINVAL, "ct_set on %s gave %d", what, r);
			CHECK((r = emunic_ct_inc(bads[i], v)) == -EINVAL, "ct_inc on %s gave %d", what, r);
			CHECK((r = emunic_ct_wait(bads[i], 1, &v, 100)) == -EINVAL, "ct_wait on %s gave %d", what, r);
			CHECK((r = emunic_ct_free(bads[i])) == -EINVAL, "ct_free on %s gave %d", what, r);
			CHECK((r = emunic_trig_post(T->dev, &op, bads[i], 1)) == -EINVAL, "trig_post on %s gave %d",
			      what, r);
			pair[0] = k;
			pair[1] = bads[i];
			CHECK((r = emunic_ct_poll(pair, tests, 2, &v, 100)) == -EINVAL, "ct_poll over %s gave %d",
			      what, r);
		}
		/* Bad ops, each counted on k if it were (wrongly) run and failed. */
		base = op_rma(EMUNIC_OP_PUT, at(8), 8, tg, 8, k);
		bad[n] = base, bad[n++].kind = 0;
		bad[n] = base, bad[n++].kind = 99;
		bad[n] = base, bad[n++].qp = plain;			/* not TRIGGERED */
		bad[n] = base, bad[n++].qp = NULL;
		bad[n] = base, bad[n++].offset = tg.len;		/* starts at the end */
		bad[n] = base, bad[n++].offset = tg.len - 4;		/* runs past it */
		bad[n] = base, bad[n++].offset = UINT64_MAX - 3;	/* wraps */
		bad[n] = base, bad[n++].ct = freed;
		bad[n] = base, bad[n].kind = EMUNIC_OP_FETCH_ADD, bad[n++].len = 4;
		bad[n] = op_ctinc(freed, 1), bad[n++].ct = k;
		bad[n] = op_ctinc(NULL, 1), bad[n++].ct = k;
		bad[n] = base, bad[n].kind = EMUNIC_OP_GET, bad[n++].mr = NULL;	/* unregistered buffer */
		for (unsigned i = 0; i < n; i++) {
			int r1 = emunic_op_post(T->dev, &bad[i]), r2 = emunic_trig_post(T->dev, &bad[i], l, 1);

			CHECK(r1 == -EINVAL && r2 == -EINVAL, "bad op %u (%s) was accepted: op_post %d, trig_post %d",
			      i, emunic_op_kind_str(bad[i].kind), r1, r2);
		}
		CHECK(emunic_op_post(NULL, &base) == -EINVAL, "op_post with no device accepted");
		pending_is(1, "after the bad posts");
		ms(200);
		ct_is(k, 7, 0, "counter k after the bad posts");
		ct_is(l, 0, 0, "counter l after the bad posts");
		ct_is(done, 0, 0, "the pending trigger's counter");
		/* The live counters still work. */
		ct_bump(k, 1, 0);
		ct_await(k, 8, "counter k incremented");
		ct_bump(l, 2, 1);	/* reaches 3: fires the pending trigger */
		ct_reach(done, 1, "the pending trigger after l reached 3");
		ct_is(done, 1, 0, "the pending trigger's counter");
		ct_is(k, 8, 0, "counter k");
		ct_is(l, 2, 1, "counter l");
		pending_is(0, "at the end");
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(lct, 1, "the one valid put at the target");
		ms(100);
		ct_is(lct, 1, 0, "the target's entry counter (a bad op reached it?)");
		expect_pattern(at(0), 8, 80, "the valid put");
		expect_fill(at(8), 0xEE, 56, "the rest of the entry");
	}
}

/* The trace: three gets (two posted, one triggered) each leave FIRE, ISSUE
 * and DONE records, in that order, in time order, and nothing else. */
static void t_trace(void)
{
	static const struct { uint64_t off, len; } gets[] = { { 0, 100 }, { 512, 200 }, { 1024, 300 } };
	struct emunic_ct *lct;
	struct emunic_target tg = setup_entry(4096, 0, &lct);

	if (T->rank == 1)
		pattern(at(0), 4096, 90);
	sync_ranks();
	if (T->rank == 0) {
		struct emunic_ct *done = ct_new(), *go = ct_new();
		struct emunic_trace_rec recs[256];
		unsigned stage[3] = { 0, 0, 0 }, incs = 0;
		uint64_t last_ns = 0;
		int n, r;

		r = emunic_trace_start(T->dev, 256);
		CHECK(r == 0, "trace_start: %s", strerror(-r));
		for (unsigned k = 0; k < 3; k++) {
			struct emunic_op op = op_rma(EMUNIC_OP_GET, at(4096 * (k + 1)), gets[k].len, tg, gets[k].off,
						     done);

			op.user = 1 + k;
			if (k < 2)
				post_now(&op);
			else
				post_on(&op, go, 1);
		}
		ct_bump(go, 1, 0);
		ct_reach(done, 3, "the gets");
		ct_is(done, 3, 0, "the gets");
		n = emunic_trace_read(T->dev, recs, 256);
		CHECK(n >= 0, "trace_read: %s", strerror(-n));
		for (int i = 0; i < n; i++) {
			const struct emunic_trace_rec *rec = &recs[i];
			unsigned k;

			CHECK(rec->ns >= last_ns, "trace record %d is older than the one before it", i);
			last_ns = rec->ns;
			if (rec->op == EMUNIC_OP_CT_INC && rec->user == 0) {	/* the app's ct_inc, an op too */
				CHECK(rec->what != EMUNIC_TR_ISSUE, "trace record %d: a ct_inc was handed to verbs", i);
				incs += rec->what == EMUNIC_TR_FIRE;
				continue;
			}
			CHECK(rec->user != 3 || rec->what != EMUNIC_TR_FIRE || incs == 1, "trace record %d: the triggered get fired before the ct_inc "
			      "that triggers it", i);
			CHECK(rec->user >= 1 && rec->user <= 3, "trace record %d: unexpected user %llu", i, S(rec->user));
			k = (unsigned)rec->user - 1;
			CHECK(rec->what == stage[k] + 1, "trace record %d (get %u): what %u, expected %u "
			      "(FIRE, ISSUE, DONE in order)", i, k + 1, rec->what, stage[k] + 1);
			CHECK(rec->op == EMUNIC_OP_GET && rec->peer == 1 && rec->len == gets[k].len && rec->status == 0,
			      "trace record %d (get %u): op %u peer %d len %llu status %d", i, k + 1, rec->op,
			      rec->peer, S(rec->len), rec->status);
			stage[k]++;
		}
		for (unsigned k = 0; k < 3; k++)
			CHECK(stage[k] == EMUNIC_TR_DONE, "get %u left %u trace records, expected 3", k + 1, stage[k]);
		CHECK(emunic_trace_read(T->dev, recs, 256) == 0, "trace records left after reading them all");
		for (unsigned k = 0; k < 3; k++)
			for (size_t i = 0; i < gets[k].len; i++)
				CHECK(at(4096 * (k + 1))[i] == pat(90, gets[k].off + i), "get %u: byte %zu wrong", k + 1, i);
	}
	sync_ranks();
	if (T->rank == 1)
		ct_await(lct, 3, "the gets counted at the target");
}

#define ATOMIC EMUNIC_LACKS_ATOMIC

/*
 * The other side of `needs` below: on a device without atomics (siw), a
 * fetch_add is -EOPNOTSUPP at post, now or triggered, and posts nothing;
 * puts still run, now and when their trigger fires.  (A device without
 * immediate data refuses nothing here: the target is told by a SEND, and
 * every other check runs on it.)
 */
static void t_unsupported(void)
{
	struct emunic_target mine = { 0 }, plain, tg;
	struct emunic_ct *lct, *done, *on;
	struct emunic_op op;

	if (!emunic_dev_lacks(T->dev, ATOMIC))
		SKIP("unsupported on %s: it has atomics, nothing to refuse", emunic_dev_name(T->dev));
	tg = setup_entry(4096, 0, &lct);
	if (T->rank == 1)
		mine = emunic_mr_target(T->mr);
	swap(&mine, &plain, sizeof(mine));
	if (T->rank == 0) {
		done = ct_new();
		on = ct_new();
		op = op_fadd(word(16384), plain, 1, done);
		CHECK(emunic_op_post(T->dev, &op) == -EOPNOTSUPP, "a fetch_add was not refused");
		CHECK(emunic_trig_post(T->dev, &op, on, 1) == -EOPNOTSUPP, "a triggered fetch_add was not refused");
		op = op_fadd(word(16384), tg, 1, done);
		CHECK(emunic_op_post(T->dev, &op) == -EOPNOTSUPP, "a fetch_add its target counts was not refused");
		pending_is(0, "after the refused posts");
		ct_is(done, 0, 0, "nothing ran for the refused posts");
		pattern(at(8192), 64, 50);
		op = op_rma(EMUNIC_OP_PUT, at(8192), 64, plain, 8192, done);
		post_now(&op);
		pattern(at(12288), 64, 51);
		op = op_rma(EMUNIC_OP_PUT, at(12288), 64, plain, 12288, done);
		post_on(&op, on, 1);
		ct_reach(done, 1, "the plain put");
		ct_is(done, 1, 0, "the triggered plain put fired before its trigger");
		ct_bump(on, 1, 0);
		ct_reach(done, 2, "the triggered plain put");
		ct_is(done, 2, 0, "the two plain puts");
	}
	sync_ranks();
	if (T->rank == 1) {
		/* An iWARP write completes at its source once sent, not once
		 * placed (no ACK to wait for): the data may land just after. */
		for (int i = 0; i < WAIT_MS && (at(8192)[63] != pat(50, 63) || at(12288)[63] != pat(51, 63)); i++)
			ms(1);
		expect_pattern(at(8192), 64, 50, "the plain put");
		expect_pattern(at(12288), 64, 51, "the triggered plain put");
		ct_is(lct, 0, 0, "the target's counter, after the refused fetch_adds");
	}
}

/* Run with the check's env and faults (the table below): each rank holds
 * each connection request it gets ACCEPT_DELAY_MS (rank 0 the first
 * connection's, rank 1 the reconnection's: rank 0 has the work); rank 0's
 * first put completes, here, as a RETRY_EXC_ERR (it did arrive). */
#define ACCEPT_DELAY_MS 4000

/* A disconnect while the connection is being made again (reconnects 4):
 * the attempt under way is not cut short (it comes up, so the put the
 * failure caught is settled: it arrived once, so it completes, and is not
 * sent again), then the QP ends for good: it fails, does not come back,
 * and its peer's QP loses the connection. */
static void t_disconnect_reconnecting(void)
{
	struct emunic_ct *lct = NULL, *done = NULL;
	struct emunic_target tg;
	struct emunic_le *le = NULL;
	struct emunic_qp_attr a;
	struct emunic_op op;
	int i;

	emunic_qp_attr_init(&a);
	a.flags = EMUNIC_QP_TRIGGERED;
	a.reconnects = 4;
	CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &T->qp) && !emunic_qp_wait_connected(T->qp, 30000),
	      "a triggered QP with 4 reconnections");
	if (T->rank == 1) {
		lct = ct_new();
		le = le_new(0, 64, 0xEE, lct, NULL, 0, 0);
	}
	tg = swap_target(le);
	sync_ranks();
	if (T->rank == 0) {
		done = ct_new();
		pattern(at(4096), 64, 60);
		op = op_rma(EMUNIC_OP_PUT, at(4096), 64, tg, 0, done);
		post_now(&op);
		/* Its completion fails (the fault): the connection is made
		 * again, and rank 1 holds the request. */
		for (i = 0; i < 5000 && emunic_qp_connected(T->qp); i++)
			ms(1);
		CHECK(!emunic_qp_connected(T->qp) && !emunic_qp_failed(T->qp),
		      "the QP neither went to reconnecting nor failed after its put's fault (%d ms)", i);
		/* Torn down and its request out within a few passes and the
		 * CM's address and route resolution (a quarter of the hold
		 * here); held at rank 1 till ACCEPT_DELAY_MS
		 * after it came.  (No call tells an attempt under way from the
		 * gap between two; rank 1 answers none sooner, so none fails
		 * early and leaves a gap.) */
		ms(ACCEPT_DELAY_MS / 4);
		CHECK(!emunic_qp_connected(T->qp) && emunic_qp_reconnects(T->qp) == 0,
		      "the reconnection came up before the held request was answered");
		CHECK(emunic_qp_disconnect(T->qp) == 0, "a disconnect while reconnecting");
		for (i = 0; i < 2 * ACCEPT_DELAY_MS + 5000 && !emunic_qp_failed(T->qp); i++)
			ms(1);
		CHECK(emunic_qp_failed(T->qp), "the QP asked to disconnect while reconnecting did not fail within "
		      "%d ms", i);
		CHECK(emunic_qp_reconnects(T->qp) == 1, "the reconnection under way was cut short (%u made)",
		      emunic_qp_reconnects(T->qp));
		ct_reach(done, 1, "the put the failure caught");
		ct_is(done, 1, 0, "the put that arrived before the failure (settled at the reconnection)");
		ms(1000);
		CHECK(emunic_qp_failed(T->qp) && !emunic_qp_connected(T->qp) && emunic_qp_reconnects(T->qp) == 1,
		      "the disconnected QP came back (%u reconnections)", emunic_qp_reconnects(T->qp));
	}
	sync_ranks();
	if (T->rank == 1) {
		ct_await(lct, 1, "the put at the target");
		expect_pattern(at(0), 64, 60, "the put");
		ct_is(lct, 1, 0, "the target's counter (the put arrives once)");
		for (i = 0; i < 5000 && emunic_qp_connected(T->qp); i++)
			ms(1);
		CHECK(!emunic_qp_connected(T->qp), "the peer's disconnect left this rank's QP connected");
	}
}

enum { SPIN_ROUNDS = 200, SPIN_GAP_US = 150 };
/* The spin checks' EMUNIC_SPIN_MAX_US: any gap shorter doubles the spin of
 * a core that adapts to it, however slowly a loaded guest runs the puts
 * (at the default 400 us a run beside other work saw every gap longer). */
#define SPIN_MAX_CHECK_US 20000

static void busy_us(int us)
{
	double end = now_s() + us / 1e6;

	while (now_s() < end)
		;
}

/* Rank 0 puts SPIN_ROUNDS times into rank 1's entry, SPIN_GAP_US apart (a
 * busy wait, then the next post); rank 1's application only reads its
 * counter and the device's stats, each 1 ms, so its core takes each
 * arrival (a TRIGGERED QP's completions are the core's to collect) after
 * sleeping through a gap within EMUNIC_SPIN_MAX_US (SPIN_MAX_CHECK_US
 * here).  On rank 1, `fire` triggers on its counter, one a put (a CT_INC
 * of another counter), else one that never fires (the device's close
 * cancels it).  Returns the longest spin rank 1
 * saw while they came, its spin before them in *before; skips where rank
 * 1's core has a CPU of its own (it adapts to any gap there). */
static uint64_t spin_rounds(bool fire, uint64_t *before)
{
	struct emunic_ct *lct, *other = NULL;
	struct emunic_target tg = setup_entry(4096, 0, &lct);
	struct emunic_dev_stats a, b;
	uint64_t most;
	int own;

	CHECK(!emunic_dev_stats(T->dev, &a), "stats");
	swap(&a.core_own_cpu, &own, sizeof(own));
	if (own)
		SKIP("rank 1's progress core has a CPU of its own here: its spin adapts to any gap (nic/spin.c)");
	*before = most = a.core_spin_ns;
	if (T->rank == 1) {
		struct emunic_op inc;

		other = ct_new();
		inc = op_ctinc(other, 1);
		if (fire)
			for (unsigned i = 1; i <= SPIN_ROUNDS; i++)
				post_on(&inc, lct, i);
		else
			post_on(&inc, lct, SPIN_ROUNDS + 1);
	}
	sync_ranks();
	if (T->rank == 0) {
		struct emunic_ct *done = ct_new();

		pattern(at(0), 64, 70);
		for (unsigned i = 0; i < SPIN_ROUNDS; i++) {
			struct emunic_op op = op_rma(EMUNIC_OP_PUT, at(0), 64, tg, 0, done);

			post_now(&op);
			busy_us(SPIN_GAP_US);
		}
		ct_await(done, SPIN_ROUNDS, "the puts' local completions");
	} else {
		struct emunic_ct_val v = ct_now(lct);

		for (int i = 0; i < WAIT_MS && v.success + v.failure < SPIN_ROUNDS; i++) {
			ms(1);
			CHECK(!emunic_dev_stats(T->dev, &b), "stats");
			most = b.core_spin_ns > most ? b.core_spin_ns : most;
			v = ct_now(lct);
		}
		CHECK(v.success == SPIN_ROUNDS && !v.failure, "the puts at the target: counter {%llu, %llu}, expected "
		      "{%d, 0}", S(v.success), S(v.failure), SPIN_ROUNDS);
		CHECK(!emunic_dev_stats(T->dev, &b), "stats");
		most = b.core_spin_ns > most ? b.core_spin_ns : most;
		printf("emunic-trigtest: rank 1: %llu core wake-ups for %d arrivals, %s; spin %llu us before, at most "
		       "%llu us\n", S(b.core_wakes - a.core_wakes), SPIN_ROUNDS,
		       fire ? "each firing a trigger" : "none firing one (one armed)", S(*before / 1000),
		       S(most / 1000));
		expect_pattern(at(0), 64, 70, "the last put");
		if (fire)
			ct_reach(other, SPIN_ROUNDS, "the triggered increments");
		pending_is(fire ? 0 : 1, "after the puts");
	}
	sync_ranks();
	return most;
}

/* Arrivals that fire no trigger (one is armed, at a threshold they never
 * reach) leave a core that shares the CPUs at its least spin: it adapts
 * only on gaps that end in a fired trigger (nic/spin.c).  Were it to adapt
 * to these gaps, within EMUNIC_SPIN_MAX_US, its spin would double. */
static void t_spin_no_fire(void)
{
	uint64_t before, most = spin_rounds(false, &before);

	if (T->rank == 1)
		CHECK(most == before, "the core, sharing the CPUs, adapted its spin to %llu ns (%llu before) on "
		      "arrivals that fired no trigger", S(most), S(before));
}

/* The same arrivals, each firing a trigger: the core, sharing the CPUs,
 * adapts its spin (the first gap within EMUNIC_SPIN_MAX_US doubles it), so
 * the answer to what a trigger sent finds it awake. */
static void t_spin_fire(void)
{
	uint64_t before, most = spin_rounds(true, &before);

	if (T->rank == 1)
		CHECK(most > before, "the core, sharing the CPUs, kept its least spin (%llu ns) through %d arrivals "
		      "that each fired a trigger", S(before), SPIN_ROUNDS);
}

/* emunic_dev_progress: a NULL device is -EINVAL; an application thread that
 * calls it in a loop runs an entry's handler itself (puts 2 ms apart, the
 * thread spinning on the call: it finds some before the core wakes for
 * them), counted in the device's progress_passes; from inside a handler
 * (inside the engine) the call runs nothing (0). */
#define PROGRESS_PUTS 20
static struct { _Atomic int calls, on_tester, inner; pthread_t tester; } prog;

static void progress_handler(void *dev, const struct emunic_event *ev)
{
	atomic_fetch_add(&prog.calls, ev->kind == EMUNIC_EV_PUT);
	atomic_fetch_add(&prog.on_tester, pthread_equal(pthread_self(), prog.tester) != 0);
	if (emunic_dev_progress(dev) != 0)
		atomic_fetch_add(&prog.inner, 1);
}

static void t_progress(void)
{
	struct emunic_le *le = NULL;
	struct emunic_target tg;
	int r = emunic_dev_progress(NULL);

	CHECK(r == -EINVAL, "emunic_dev_progress(NULL) gave %d, not -EINVAL", r);
	setup();
	prog.tester = pthread_self();
	if (T->rank == 1) {
		struct emunic_eq *eq;

		r = emunic_eq_create(T->dev, 256, progress_handler, T->dev, &eq);
		CHECK(r == 0, "eq_create with a handler: %s", strerror(-r));
		le = le_new(0, 64 * PROGRESS_PUTS, 0, NULL, eq, 0, 0);
	}
	tg = swap_target(le);
	sync_ranks();
	if (T->rank == 0) {
		struct emunic_ct *done = ct_new();

		for (unsigned k = 0; k < PROGRESS_PUTS; k++) {
			struct emunic_op op = op_rma(EMUNIC_OP_PUT, at(64 * k), 64, tg, 64 * k, done);

			pattern(at(64 * k), 64, 50 + k);
			post_now(&op);
			ms(2);
		}
		ct_await(done, PROGRESS_PUTS, "the puts' local completions");
	} else {
		struct emunic_dev_stats s0, s1;
		double t0 = now_s();

		CHECK(!emunic_dev_stats(T->dev, &s0), "dev_stats");
		do {
			r = emunic_dev_progress(T->dev);
			CHECK(r == 0 || r == 1, "emunic_dev_progress gave %d", r);
		} while (atomic_load(&prog.calls) < PROGRESS_PUTS && now_s() - t0 < WAIT_MS / 1e3);
		CHECK(!emunic_dev_stats(T->dev, &s1), "dev_stats");
		CHECK(atomic_load(&prog.calls) == PROGRESS_PUTS, "the handler saw %d of %d puts within %d ms",
		      atomic_load(&prog.calls), PROGRESS_PUTS, WAIT_MS);
		CHECK(atomic_load(&prog.on_tester) > 0 && s1.progress_passes > s0.progress_passes,
		      "of %d puts the handler took none on the thread calling emunic_dev_progress (%llu passes by it)",
		      PROGRESS_PUTS, S(s1.progress_passes - s0.progress_passes));
		CHECK(!atomic_load(&prog.inner), "emunic_dev_progress from inside a handler ran the engine %d time(s)",
		      atomic_load(&prog.inner));
		for (unsigned k = 0; k < PROGRESS_PUTS; k++)
			expect_pattern(at(64 * k), 64, 50 + k, "a put into the handler's entry");
		printf("emunic-trigtest: progress: %d of %d puts' events handled on the testing thread, %llu passes "
		       "by emunic_dev_progress\n", atomic_load(&prog.on_tester), PROGRESS_PUTS,
		       S(s1.progress_passes - s0.progress_passes));
	}
	sync_ranks();
}

/* needs: what the device must carry (emunic_dev_lacks): chain and order
 * fetch_add, which a device without atomics (siw) cannot; they skip there
 * with the reason.  Target counting runs everywhere (immediate data, or
 * the SEND that stands for it). */
static const struct check {
	const char *name;
	void (*fn)(void);
	unsigned trig_entries;
	unsigned needs;
	const char *what;
} checks[] = {
	{ "threshold", t_threshold, 0, 0, "fires at the threshold, not before, once" },
	{ "already_met", t_already_met, 0, 0, "a threshold already met fires at once" },
	{ "chain", t_chain, 0, ATOMIC, "a 100-op chain runs in order while the app only computes" },
	{ "order", t_order, 0, ATOMIC, "triggers on one counter run by threshold, ties in posting order" },
	{ "enospc", t_enospc, TABLE, 0, "a full trigger table is -ENOSPC at once; the core runs on" },
	{ "target_count", t_target_count, 0, 0, "puts and gets are counted and reported at the target" },
	{ "get_overtaken", t_get_overtaken, 0, 0, "a get's counter waits for its data, not a later put's send" },
	{ "failure", t_failure, 0, 0, "a failed event counts failure; waits return; triggers fire" },
	{ "threshold64", t_threshold64, 0, 0, "thresholds above 2^32" },
	{ "free_pending", t_free_pending, 0, 0, "freeing a counter wakes waiters and fails its triggers" },
	{ "invalid", t_invalid, 0, 0, "bad counters and ops are -EINVAL and change nothing" },
	{ "trace", t_trace, 0, 0, "FIRE, ISSUE, DONE trace records in time order" },
	{ "unsupported", t_unsupported, 0, 0, "without atomics (siw): a fetch_add is refused, not run; puts run" },
	{ "disconnect_reconnecting", t_disconnect_reconnecting, 0, 0,
	  "a disconnect while reconnecting: the attempt comes up, its put settles once, then the QP ends" },
	{ "spin_no_fire", t_spin_no_fire, 0, 0, "arrivals firing no trigger leave a core on shared CPUs at its least spin" },
	{ "spin_fire", t_spin_fire, 0, 0, "arrivals each firing a trigger let a core on shared CPUs adapt its spin" },
	{ "progress", t_progress, 0, 0, "emunic_dev_progress runs handlers on its caller, nothing inside one" },
};
#define NCHECKS (sizeof(checks) / sizeof(checks[0]))

/* What a check's device is opened with besides: an environment variable
 * (the caller's value put back after the check) and a fault spec. */
static const struct { const char *name, *env, *value, *faults; } check_setup[] = {
	{ "disconnect_reconnecting", "EMUNIC_ACCEPT_DELAY_MS", STR(ACCEPT_DELAY_MS),
	  "wc:status=RETRY_EXC_ERR,rank=0,op=1,opcode=write_imm" },
	{ "spin_no_fire", "EMUNIC_SPIN_MAX_US", STR(SPIN_MAX_CHECK_US), NULL },
	{ "spin_fire", "EMUNIC_SPIN_MAX_US", STR(SPIN_MAX_CHECK_US), NULL },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: emunic-run -n 2 emunic-trigtest CHECK...\n"
		   "  runs each CHECK in turn, each on a device of its own\n");
	for (size_t i = 0; i < NCHECKS; i++)
		fprintf(f, "  %-24s %s\n", checks[i].name, checks[i].what);
}

static int find_check(const char *name)
{
	for (int i = 0; i < (int)NCHECKS; i++)
		if (!strcmp(checks[i].name, name))
			return i;
	return -1;
}

/* One check on a device of its own (its trig_entries), then closed, so
 * several can share one run: one valgrind start-up instead of several. */
static void run_check(int i)
{
	struct emunic_dev_attr attr;
	struct harness_env env = { 0 };

	emunic_dev_attr_init(&attr);
	attr.trig_entries = checks[i].trig_entries;
	for (size_t e = 0; e < sizeof(check_setup) / sizeof(check_setup[0]); e++)
		if (!strcmp(check_setup[e].name, checks[i].name)) {
			CHECK(!harness_env_set(&env, check_setup[e].env, check_setup[e].value), "setting %s: %s",
			      check_setup[e].env, strerror(errno));
			attr.faults = check_setup[e].faults;
		}
	CHECK(!emunic_dev_open(T->boot, &attr, &T->dev), "emunic_dev_open");
	if (emunic_dev_lacks(T->dev, checks[i].needs))	/* every rank, before any exchange */
		SKIP("%s on %s: %s", checks[i].name, emunic_dev_name(T->dev),
		     emunic_dev_lacks(T->dev, checks[i].needs));
	memset(T->buf, 0, BUF_LEN);
	CHECK(!emunic_mr_reg(T->dev, T->buf, BUF_LEN, &T->mr), "mr_reg");
	checks[i].fn();
	sync_ranks();
	if (T->rank == 0)
		printf("emunic-trigtest: %s: PASS\n", checks[i].name);
	emunic_mr_dereg(T->mr);
	emunic_dev_close(T->dev);
	harness_env_restore(&env);	/* the next check's device gets what the caller set */
	T->dev = NULL;
	T->mr = NULL;
	T->qp = NULL;		/* closed with its device */
}

int main(int argc, char **argv)
{
	struct t t = { 0 };

	T = &t;
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	for (int a = 1; a < argc; a++)
		if (find_check(argv[a]) < 0) {
			fprintf(stderr, "emunic-trigtest: unknown check '%s'\n", argv[a]);
			usage(stderr);
			return 2;
		}
	t.rank = -1;
	CHECK(!emunic_boot_init(&t.boot), "bootstrap");
	t.rank = emunic_boot_rank(t.boot);
	CHECK(emunic_boot_size(t.boot) == 2, "needs exactly 2 ranks");
	t.buf = aligned_alloc(4096, BUF_LEN);
	CHECK(t.buf, "out of memory");
	for (int a = 1; a < argc; a++)
		run_check(find_check(argv[a]));
	free(t.buf);
	emunic_boot_fini(t.boot);
	return 0;
}
