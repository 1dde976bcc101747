/* SPDX-License-Identifier: MIT */
/*
 * emunic-calctest: the CALC task (emunic/mq.h) against a reference written
 * here, apart from the library's kernels (64-bit arithmetic truncated to the
 * element's width; pair fields at fixed offsets).
 *
 *   emunic-calctest reference          every valid op x type on the host (no device)
 *   emunic-run -n 2 emunic-calctest all      every valid op x type sent by the NIC
 *                                            to the peer, and kept local
 *   emunic-run -n 2 emunic-calctest invalid  every other pair, a partial element and
 *                                            a missing operand: -EINVAL, MQ usable
 *   emunic-run -n 2 emunic-calctest order    a CALC reads its operands when it runs
 *                                            (after its WAIT and SEND_EN), not at post,
 *                                            and what the MQ runs after the SEND_EN sees
 *                                            its result
 *
 * Each prints "emunic-calctest: NAME: PASS" (rank 0) or FAIL lines naming
 * the op, the type and the element.
 */
#include "emunic.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HARNESS_RANK rank
#include "harness.h"

#define NOP 13			/* ops 1..12 and one past */
#define NTYPE 19		/* types 1..18 and one past */
#define COUNT 16		/* elements per operand */
#define SLOT (COUNT * 16)	/* bytes per operand, the largest element */

static int rank = -1;

/* ---- the reference ------------------------------------------------------------ */

enum kind { K_INT, K_UINT, K_FLT, K_DBL };

struct tinfo {
	int size;		/* element bytes */
	enum kind k;		/* the value's kind */
	int vsize;		/* the value's bytes */
	int ioff;		/* pairs: where the int index is (0: not a pair) */
	int be;			/* CORE-Direct's slot: BE value, then a BE 64-bit id */
};

static const struct tinfo ti[NTYPE] = {
	[EMUNIC_CALC_INT8] = { 1, K_INT, 1, 0 }, [EMUNIC_CALC_UINT8] = { 1, K_UINT, 1, 0 },
	[EMUNIC_CALC_INT16] = { 2, K_INT, 2, 0 }, [EMUNIC_CALC_UINT16] = { 2, K_UINT, 2, 0 },
	[EMUNIC_CALC_INT32] = { 4, K_INT, 4, 0 }, [EMUNIC_CALC_UINT32] = { 4, K_UINT, 4, 0 },
	[EMUNIC_CALC_INT64] = { 8, K_INT, 8, 0 }, [EMUNIC_CALC_UINT64] = { 8, K_UINT, 8, 0 },
	[EMUNIC_CALC_FLOAT] = { 4, K_FLT, 4, 0 }, [EMUNIC_CALC_DOUBLE] = { 8, K_DBL, 8, 0 },
	[EMUNIC_CALC_FLOAT_INT] = { 8, K_FLT, 4, 4 }, [EMUNIC_CALC_DOUBLE_INT] = { 16, K_DBL, 8, 8 },
	[EMUNIC_CALC_LONG_INT] = { 16, K_INT, 8, 8 }, [EMUNIC_CALC_2INT] = { 8, K_INT, 4, 4 },
	[EMUNIC_CALC_SHORT_INT] = { 8, K_INT, 2, 4 },
	[EMUNIC_CALC_BE_INT64] = { 16, K_INT, 8, 0, 1 }, [EMUNIC_CALC_BE_UINT64] = { 16, K_UINT, 8, 0, 1 },
	[EMUNIC_CALC_BE_DOUBLE] = { 16, K_DBL, 8, 0, 1 },
};

static bool is_int(int type) { return ti[type].k <= K_UINT; }

/* MPI's table: which op is defined on which type. */
static bool valid(int op, int type)
{
	if (type < 1 || type >= NTYPE || op < 1 || op >= NOP)
		return false;
	if (ti[type].be)	/* libmlx5's calc table */
		return op == EMUNIC_CALC_SUM || op == EMUNIC_CALC_BAND || op == EMUNIC_CALC_BOR ||
		       op == EMUNIC_CALC_BXOR || (op == EMUNIC_CALC_MAXLOC && ti[type].k == K_UINT);
	if (ti[type].ioff)
		return op == EMUNIC_CALC_MINLOC || op == EMUNIC_CALC_MAXLOC;
	if (op == EMUNIC_CALC_MINLOC || op == EMUNIC_CALC_MAXLOC)
		return false;
	return op <= EMUNIC_CALC_MAX || is_int(type);
}

static int64_t get_i(const unsigned char *p, int n, bool sign)
{
	uint64_t u = 0;

	memcpy(&u, p, (size_t)n);	/* little endian */
	if (sign && n < 8 && (u >> (8 * n - 1)) & 1)
		u |= ~0ull << (8 * n);
	return (int64_t)u;
}

static void put_i(unsigned char *p, int n, uint64_t v) { memcpy(p, &v, (size_t)n); }

static double get_f(const unsigned char *p, enum kind k)
{
	float f;
	double d;

	if (k == K_FLT) {
		memcpy(&f, p, 4);
		return f;
	}
	memcpy(&d, p, 8);
	return d;
}

static void put_f(unsigned char *p, enum kind k, double v)
{
	float f = (float)v;

	if (k == K_FLT)
		memcpy(p, &f, 4);
	else
		memcpy(p, &v, 8);
}

/* -1, 0, 1: x against y. */
static int cmp(const unsigned char *x, const unsigned char *y, const struct tinfo *t)
{
	if (t->k == K_FLT || t->k == K_DBL) {
		double a = get_f(x, t->k), b = get_f(y, t->k);

		return a < b ? -1 : a > b;
	}
	if (t->k == K_UINT) {
		uint64_t a = (uint64_t)get_i(x, t->vsize, false), b = (uint64_t)get_i(y, t->vsize, false);

		return a < b ? -1 : a > b;
	}
	int64_t a = get_i(x, t->vsize, true), b = get_i(y, t->vsize, true);

	return a < b ? -1 : a > b;
}

/* A big-endian 64-bit word, byte by byte (apart from the library's be64toh). */
static uint64_t get_be(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_be(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static double dbl_of(uint64_t u)
{
	double d;

	memcpy(&d, &u, 8);
	return d;
}

/* One CORE-Direct slot: the value op'd, +8 the winner's id (MAXLOC: the
 * larger unsigned value; a tie, the smaller id) or zero. */
static void ref_be(int op, int type, unsigned char *out, const unsigned char *x, const unsigned char *y)
{
	uint64_t a = get_be(x), b = get_be(y), id = 0, r = 0;
	double d;

	switch (op) {
	case EMUNIC_CALC_SUM:
		if (ti[type].k == K_DBL) {
			d = dbl_of(a) + dbl_of(b);
			memcpy(&r, &d, 8);
		} else {
			r = a + b;
		}
		break;
	case EMUNIC_CALC_BAND: r = a & b; break;
	case EMUNIC_CALC_BOR: r = a | b; break;
	case EMUNIC_CALC_BXOR: r = a ^ b; break;
	case EMUNIC_CALC_MAXLOC: {
		uint64_t xi = get_be(x + 8), yi = get_be(y + 8);

		r = a > b ? a : b;
		id = a > b ? xi : b > a ? yi : (xi < yi ? xi : yi);
		break;
	}
	}
	put_be(out, r);
	put_be(out + 8, id);
}

/* One element: out = x op y. */
static void ref1(int op, int type, unsigned char *out, const unsigned char *x, const unsigned char *y)
{
	const struct tinfo *t = &ti[type];
	int c = cmp(x, y, t);

	if (t->be) {
		ref_be(op, type, out, x, y);
		return;
	}
	if (t->ioff) {		/* MINLOC / MAXLOC */
		int xi, yi;
		bool xwins = op == EMUNIC_CALC_MINLOC ? c < 0 : c > 0;
		bool ywins = op == EMUNIC_CALC_MINLOC ? c > 0 : c < 0;

		memcpy(&xi, x + t->ioff, 4);
		memcpy(&yi, y + t->ioff, 4);
		memcpy(out, ywins ? y : x, (size_t)t->vsize);
		xi = xwins ? xi : ywins ? yi : (xi < yi ? xi : yi);
		memcpy(out + t->ioff, &xi, 4);
		return;
	}
	if (op == EMUNIC_CALC_MIN || op == EMUNIC_CALC_MAX) {
		memcpy(out, (op == EMUNIC_CALC_MIN ? c > 0 : c < 0) ? y : x, (size_t)t->size);
		return;
	}
	if (!is_int(type)) {
		double a = get_f(x, t->k), b = get_f(y, t->k);

		put_f(out, t->k, op == EMUNIC_CALC_SUM ? a + b : a * b);
		return;
	}
	uint64_t a = (uint64_t)get_i(x, t->size, t->k == K_INT), b = (uint64_t)get_i(y, t->size, t->k == K_INT);
	uint64_t r = 0;

	switch (op) {
	case EMUNIC_CALC_SUM: r = a + b; break;
	case EMUNIC_CALC_PROD: r = a * b; break;
	case EMUNIC_CALC_LAND: r = a && b; break;
	case EMUNIC_CALC_LOR: r = a || b; break;
	case EMUNIC_CALC_LXOR: r = (a != 0) != (b != 0); break;
	case EMUNIC_CALC_BAND: r = a & b; break;
	case EMUNIC_CALC_BOR: r = a | b; break;
	case EMUNIC_CALC_BXOR: r = a ^ b; break;
	}
	put_i(out, t->size, r);
}

/* The bytes that carry meaning (a pair's padding does not). */
static bool same(int type, const unsigned char *a, const unsigned char *b)
{
	const struct tinfo *t = &ti[type];

	if (!t->ioff)	/* a CORE-Direct slot: its id or zero at +8 counts too */
		return !memcmp(a, b, (size_t)t->size);
	return !memcmp(a, b, (size_t)t->vsize) && !memcmp(a + t->ioff, b + t->ioff, 4);
}

/* ---- operands: edge values, ties, zeros ------------------------------------------- */

static const int64_t ints[] = { 0, 1, -1, 2, 3, -7, 127, -128, 255, 0x7fff, -0x8000, 0xffff,
				0x7fffffff, -0x7fffffff - 1, 0x55555555, INT64_MAX, INT64_MIN, 12345 };
static const double flts[] = { 0.0, 1.0, -1.0, 2.5, -3.25, 1024.0, 0.5, 7.0, -0.125, 100.0 };
#define NINTS (sizeof(ints) / sizeof(ints[0]))
#define NFLTS (sizeof(flts) / sizeof(flts[0]))

/* Operand `which` (0: a, 1: b) of `who` (a rank), element i. */
static void fill(int type, int who, int which, unsigned char *buf)
{
	const struct tinfo *t = &ti[type];

	memset(buf, 0, SLOT);
	for (int i = 0; i < COUNT; i++) {
		unsigned char *e = buf + i * t->size;
		unsigned j = (unsigned)(i * (which ? 5 : 7) + 3 * which + 11 * who);

		if (t->be) {
			/* Even elements tie; of those, b holds the smaller id
			 * in every other one.  Every slot has an id. */
			unsigned v = (unsigned)(i + who + which * (i & 1)) % 3;
			uint64_t id = !which ? (uint64_t)(i + who) : i & 1 ? (uint64_t)(100 - i)
					     : i % 4 ? (uint64_t)(i + who + 50) : (uint64_t)(i / 2);
			double f = flts[v + 1];
			uint64_t u;

			memcpy(&u, &f, 8);
			put_be(e, t->k == K_DBL ? u : (uint64_t)ints[v + 1]);
			put_be(e + 8, id);
			continue;
		}
		if (t->k == K_FLT || t->k == K_DBL)
			put_f(e, t->k, flts[j % (t->ioff ? 3 : NFLTS)]);	/* pairs: many ties */
		else
			put_i(e, t->vsize, (uint64_t)ints[j % (t->ioff ? 4 : NINTS)]);
		if (t->ioff) {
			/* On a tie either side may hold the smaller index. */
			int idx = which ? (i & 1 ? 100 - i : -i - 1) : i + who;

			memcpy(e + t->ioff, &idx, 4);
		}
	}
}

static void reference(int op, int type, unsigned char *out, const unsigned char *a, const unsigned char *b)
{
	for (int i = 0; i < COUNT; i++)
		ref1(op, type, out + i * ti[type].size, a + i * ti[type].size, b + i * ti[type].size);
}

/* Compares got with x op y; names the first difference. */
static void expect(const char *where, int op, int type, const unsigned char *got, const unsigned char *a,
		   const unsigned char *b)
{
	unsigned char want[SLOT];
	int sz = ti[type].size;

	reference(op, type, want, a, b);
	for (int i = 0; i < COUNT; i++)
		if (!same(type, got + i * sz, want + i * sz)) {
			if (ti[type].be) {
				FAIL("%s: %s on %s, element %d: got value %016llx id %016llx, want %016llx id %016llx",
				     where, emunic_calc_op_str(op), emunic_calc_type_str(type), i,
				     (unsigned long long)get_be(got + i * sz), (unsigned long long)get_be(got + i * sz + 8),
				     (unsigned long long)get_be(want + i * sz), (unsigned long long)get_be(want + i * sz + 8));
				return;
			}
			FAIL("%s: %s on %s, element %d: got %016llx, want %016llx", where, emunic_calc_op_str(op),
			     emunic_calc_type_str(type), i, (unsigned long long)get_i(got + i * sz, sz < 8 ? sz : 8, false),
			     (unsigned long long)get_i(want + i * sz, sz < 8 ? sz : 8, false));
			return;
		}
}

/* ---- checks ------------------------------------------------------------------- */

static void t_reference(void)
{
	unsigned char a[SLOT], b[SLOT], got[SLOT];
	int n = 0;

	for (int op = 0; op <= NOP; op++)
		for (int type = 0; type <= NTYPE; type++) {
			int r = emunic_calc_check(op, type);
			bool ok = op < NOP && type < NTYPE && valid(op, type);

			if (ok != (r == 0)) {
				FAIL("emunic_calc_check(%s, %s) = %d", emunic_calc_op_str(op), emunic_calc_type_str(type), r);
				continue;
			}
			if (!ok) {
				if (emunic_calc(op, type, got, a, b, 1) != -EINVAL)
					FAIL("emunic_calc accepted %d x %d", op, type);
				continue;
			}
			if (emunic_calc_size(type) != (size_t)ti[type].size)
				FAIL("emunic_calc_size(%s) = %zu", emunic_calc_type_str(type), emunic_calc_size(type));
			fill(type, 0, 0, a);
			fill(type, 0, 1, b);
			emunic_calc(op, type, got, a, b, COUNT);
			expect("host", op, type, got, a, b);
			memcpy(got, a, SLOT);	/* in place: dst is a */
			emunic_calc(op, type, got, got, b, COUNT);
			expect("host, in place", op, type, got, a, b);
			n++;
		}
	if (n != 111)
		FAIL("%d valid pairs, want 111 (MPI's 98, CORE-Direct's 13)", n);
	/* Any alignment: operands and result one byte off (UBSan would see a
	 * misaligned access). */
	{
		unsigned char ua[SLOT + 1], ub[SLOT + 1], ug[SLOT + 1];

		fill(EMUNIC_CALC_DOUBLE_INT, 0, 0, a);
		fill(EMUNIC_CALC_DOUBLE_INT, 0, 1, b);
		memcpy(ua + 1, a, SLOT);
		memcpy(ub + 1, b, SLOT);
		emunic_calc(EMUNIC_CALC_MINLOC, EMUNIC_CALC_DOUBLE_INT, ug + 1, ua + 1, ub + 1, COUNT);
		expect("host, misaligned", EMUNIC_CALC_MINLOC, EMUNIC_CALC_DOUBLE_INT, ug + 1, a, b);
	}
}

struct net {
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct emunic_mr *mr;
	unsigned char *buf;
	struct emunic_cq *scq, *rcq;
	struct emunic_qp *qp;
	struct emunic_mq *mq;
};

static void sync_ranks(struct net *n) { if (emunic_boot_barrier(n->boot)) DIE("barrier"); }

static void post(struct net *n, struct emunic_task *t, unsigned k)
{
	int r = emunic_mq_post(n->mq, t, k);

	if (r)
		DIE("emunic_mq_post of %u task(s): %s", k, strerror(-r));
}

static uint64_t await(struct emunic_cq *cq, uint64_t want, int ms)
{
	struct timespec ts = { 0, 10000000L };

	for (int i = 0; i < ms / 10 && emunic_cq_count(cq) < want; i++)
		nanosleep(&ts, NULL);
	return emunic_cq_count(cq);
}

static void net_open(struct net *n, unsigned qpflags)
{
	struct emunic_qp_attr a;

	if (emunic_dev_open(n->boot, NULL, &n->dev))
		DIE("emunic_dev_open");
	n->buf = aligned_alloc(4096, 1 << 20);
	memset(n->buf, 0, 1 << 20);
	if (emunic_mr_reg(n->dev, n->buf, 1 << 20, &n->mr) || emunic_cq_create(n->dev, 512, 0, &n->scq) ||
	    emunic_cq_create(n->dev, 512, 0, &n->rcq) || emunic_mq_create(n->dev, 512, &n->mq))
		DIE("mr, cq or mq");
	emunic_qp_attr_init(&a);
	a.flags = qpflags;
	a.send_cq = n->scq;
	a.recv_cq = n->rcq;
	a.depth = 512;
	if (emunic_qp_create(n->dev, 1 - rank, &a, &n->qp) || emunic_qp_wait_connected(n->qp, 30000))
		DIE("qp to rank %d", 1 - rank);
}

/* Region k of the registered buffer. */
static unsigned char *slot(struct net *n, int k) { return n->buf + (size_t)k * SLOT; }

/* Every valid pair: each rank sends a_r op b_r to the other (CALC on the
 * QP) and keeps a copy (CALC with no QP); each checks both. */
static void t_all(struct net *n)
{
	struct emunic_task *t = calloc(4 * NOP * NTYPE, sizeof(*t));
	int pairs = 0, k = 0;
	struct emunic_wc wc;

	/* slots: [0, 98) received, then per pair a, b, sent, local */
	for (int op = 1; op < NOP; op++)
		for (int type = 1; type < NTYPE; type++)
			if (valid(op, type)) {
				t[k++] = (struct emunic_task){ .op = EMUNIC_TASK_RECV, .qp = n->qp, .addr = slot(n, pairs),
							       .len = SLOT, .mr = n->mr, .wr_id = (uint64_t)pairs };
				pairs++;
			}
	post(n, t, (unsigned)k);
	sync_ranks(n);		/* receives are up on both sides */
	k = 0;
	for (int op = 1, p = 0; op < NOP; op++)
		for (int type = 1; type < NTYPE; type++) {
			unsigned char *a, *b;
			uint32_t len = (uint32_t)(COUNT * ti[type].size);

			if (!valid(op, type))
				continue;
			a = slot(n, pairs + 4 * p);
			b = a + SLOT;
			fill(type, rank, 0, a);
			fill(type, rank, 1, b);
			t[k++] = (struct emunic_task){ .op = EMUNIC_TASK_CALC, .qp = n->qp, .addr = b + SLOT,
						       .len = len, .mr = n->mr, .calc_op = op, .calc_type = type,
						       .calc_a = a, .calc_b = b, .wr_id = (uint64_t)p };
			t[k++] = (struct emunic_task){ .op = EMUNIC_TASK_CALC, .addr = b + 2 * SLOT, .len = len,
						       .calc_op = op, .calc_type = type, .calc_a = a, .calc_b = b,
						       .wr_id = (uint64_t)p, .flags = EMUNIC_TASK_SIGNAL };
			p++;
		}
	post(n, t, (unsigned)k);
	for (int i = 0; i < pairs; i++) {
		int r = emunic_mq_wait(n->mq, &wc, 10000);

		if (r || wc.status || wc.op != EMUNIC_TASK_CALC)
			DIE("local CALC %d: r %d, status %s, op %s", i, r, emunic_wc_status_str(wc.status),
			    emunic_task_op_str(wc.op));
	}
	if (await(n->rcq, (uint64_t)pairs, 20000) != (uint64_t)pairs || await(n->scq, (uint64_t)pairs, 20000) !=
	    (uint64_t)pairs)
		DIE("%llu of %d results arrived, %llu of %d sent", (unsigned long long)emunic_cq_count(n->rcq), pairs,
		    (unsigned long long)emunic_cq_count(n->scq), pairs);
	for (int i = 0; i < 2 * pairs; i++) {
		struct emunic_cq *cq = i < pairs ? n->rcq : n->scq;

		if (emunic_cq_poll(cq, &wc, 1) != 1 || wc.status)
			DIE("completion %d: %s", i, emunic_wc_status_str(wc.status));
		if (i >= pairs && wc.op != EMUNIC_TASK_CALC)
			DIE("a send completion of op %s, not CALC", emunic_task_op_str(wc.op));
	}
	for (int op = 1, p = 0; op < NOP; op++)
		for (int type = 1; type < NTYPE; type++) {
			unsigned char pa[SLOT], pb[SLOT], *a, *b;

			if (!valid(op, type))
				continue;
			a = slot(n, pairs + 4 * p);
			b = a + SLOT;
			expect("kept local (no QP)", op, type, b + 2 * SLOT, a, b);
			fill(type, 1 - rank, 0, pa);
			fill(type, 1 - rank, 1, pb);
			expect("received from the peer's NIC", op, type, slot(n, p), pa, pb);
			p++;
		}
	if (rank == 0)
		printf("emunic-calctest: %d op x type pairs checked, sent and local\n", pairs);
	free(t);
}

static void t_invalid(struct net *n)
{
	unsigned char *a = slot(n, 0), *b = slot(n, 1), *d = slot(n, 2);
	struct emunic_task t = { .op = EMUNIC_TASK_CALC, .addr = d, .len = 8, .calc_a = a, .calc_b = b };
	struct emunic_task two[2];
	struct emunic_wc wc;
	int rejected = 0;
	uint64_t posted;

	for (int op = 0; op <= NOP; op++)
		for (int type = 0; type <= NTYPE; type++) {
			if (valid(op, type))
				continue;
			t.calc_op = op;
			t.calc_type = type;
			t.qp = (op + type) % 2 ? n->qp : NULL;	/* both kinds of CALC */
			t.mr = n->mr;
			if (emunic_mq_post(n->mq, &t, 1) != -EINVAL)
				FAIL("CALC %s on %s was accepted", emunic_calc_op_str(op), emunic_calc_type_str(type));
			rejected++;
		}
	t = (struct emunic_task){ .op = EMUNIC_TASK_CALC, .qp = n->qp, .mr = n->mr, .addr = d, .len = 6,
				  .calc_op = EMUNIC_CALC_SUM, .calc_type = EMUNIC_CALC_INT32, .calc_a = a, .calc_b = b };
	if (emunic_mq_post(n->mq, &t, 1) != -EINVAL)
		FAIL("6 bytes of INT32 accepted");
	t.len = 8;
	t.calc_b = NULL;
	if (emunic_mq_post(n->mq, &t, 1) != -EINVAL)
		FAIL("a CALC without its second operand accepted");
	/* A bad CALC in a list posts nothing of the list. */
	posted = emunic_cq_count(n->scq);
	two[0] = (struct emunic_task){ .op = EMUNIC_TASK_SEND, .qp = n->qp, .addr = d, .len = 8, .mr = n->mr };
	two[1] = t;
	if (emunic_mq_post(n->mq, two, 2) != -EINVAL)
		FAIL("a list with a bad CALC accepted");
	/* The MQ and the QP still work. */
	t.calc_b = b;
	t.qp = NULL;
	t.flags = EMUNIC_TASK_SIGNAL;
	post(n, &t, 1);
	if (emunic_mq_wait(n->mq, &wc, 5000) || wc.status)
		FAIL("the MQ does not work after the rejected lists");
	if (await(n->scq, posted + 1, 300) != posted)
		FAIL("the SEND before a bad CALC ran");
	if (rank == 0)
		printf("emunic-calctest: %d invalid op x type pairs rejected\n", rejected);
	sync_ranks(n);
}

/* Rank 0: RECV(x) CALC(qp: res = mine + x) WAIT(recv 1) SEND_EN(1)
 * CALC(local: res3 = res + mine), and RECV(y) WAIT(recv 2) CALC(local: res2 =
 * mine * y).  Rank 1 sends x and y only after a pause: a CALC that read its
 * operands at post time sees zeros; a local CALC after the SEND_EN that ran
 * before the released CALC reduced sees zeros in res. */
static void t_order(struct net *n)
{
	int64_t *mine = (int64_t *)slot(n, 0), *x = (int64_t *)slot(n, 1), *y = (int64_t *)slot(n, 2);
	int64_t *res = (int64_t *)slot(n, 3), *res2 = (int64_t *)slot(n, 4), *got = (int64_t *)slot(n, 5);
	int64_t *res3 = (int64_t *)slot(n, 6);
	struct emunic_wc wc;

	for (int i = 0; i < COUNT; i++) {
		mine[i] = 10 + i;
		x[i] = rank == 1 ? 1000 * (i + 1) : 0;
		y[i] = rank == 1 ? -(i + 2) : 0;
	}
	if (rank == 0) {
		struct emunic_task l[] = {
			{ .op = EMUNIC_TASK_RECV, .qp = n->qp, .addr = x, .len = 8 * COUNT, .mr = n->mr },
			{ .op = EMUNIC_TASK_CALC, .qp = n->qp, .addr = res, .len = 8 * COUNT, .mr = n->mr,
			  .calc_op = EMUNIC_CALC_SUM, .calc_type = EMUNIC_CALC_INT64, .calc_a = mine, .calc_b = x },
			{ .op = EMUNIC_TASK_WAIT, .cq = n->rcq, .count = 1 },
			{ .op = EMUNIC_TASK_SEND_EN, .qp = n->qp, .count = 1 },
			/* Runs right after the enable: sees the released CALC's result. */
			{ .op = EMUNIC_TASK_CALC, .addr = res3, .len = 8 * COUNT, .calc_op = EMUNIC_CALC_SUM,
			  .calc_type = EMUNIC_CALC_INT64, .calc_a = res, .calc_b = mine },
			{ .op = EMUNIC_TASK_RECV, .qp = n->qp, .addr = y, .len = 8 * COUNT, .mr = n->mr },
			{ .op = EMUNIC_TASK_WAIT, .cq = n->rcq, .count = 2 },
			{ .op = EMUNIC_TASK_CALC, .addr = res2, .len = 8 * COUNT, .calc_op = EMUNIC_CALC_PROD,
			  .calc_type = EMUNIC_CALC_INT64, .calc_a = mine, .calc_b = y, .flags = EMUNIC_TASK_SIGNAL },
		};

		post(n, l, sizeof(l) / sizeof(l[0]));
	} else {
		struct emunic_task r = { .op = EMUNIC_TASK_RECV, .qp = n->qp, .addr = got, .len = 8 * COUNT,
					 .mr = n->mr };

		post(n, &r, 1);
	}
	sync_ranks(n);
	if (rank == 1) {
		struct timespec ts = { 0, 300000000L };
		struct emunic_task s = { .op = EMUNIC_TASK_SEND, .qp = n->qp, .addr = x, .len = 8 * COUNT, .mr = n->mr };

		nanosleep(&ts, NULL);
		if (emunic_cq_count(n->rcq) != 0)
			FAIL("the CALC went before the WAIT and SEND_EN that guard it");
		post(n, &s, 1);
		if (await(n->rcq, 1, 10000) != 1)
			DIE("the CALC's result never came");
		for (int i = 0; i < COUNT; i++)
			if (got[i] != 10 + i + 1000 * (i + 1))
				FAIL("element %d: %lld, want %lld (the operand read before it arrived?)", i,
				     (long long)got[i], (long long)(10 + i + 1000 * (i + 1)));
		s.addr = y;
		post(n, &s, 1);
	} else {
		if (emunic_mq_wait(n->mq, &wc, 20000) || wc.status || wc.op != EMUNIC_TASK_CALC)
			DIE("the local CALC did not complete");
		for (int i = 0; i < COUNT; i++)
			if (res3[i] != 2 * (10 + i) + 1000 * (i + 1))
				FAIL("element %d of the local CALC after SEND_EN: %lld, want %lld (the released CALC "
				     "had not run)", i, (long long)res3[i], (long long)(2 * (10 + i) + 1000 * (i + 1)));
		for (int i = 0; i < COUNT; i++)
			if (res2[i] != (10 + i) * -(i + 2))
				FAIL("local element %d: %lld, want %lld", i, (long long)res2[i],
				     (long long)((10 + i) * -(i + 2)));
	}
	sync_ranks(n);
}

int main(int argc, char **argv)
{
	static const struct { const char *name; void (*fn)(struct net *); unsigned qpflags; } checks[] = {
		{ "all", t_all, 0 }, { "invalid", t_invalid, 0 }, { "order", t_order, EMUNIC_QP_MANAGED_SEND },
	};
	struct net n = { 0 };
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: emunic-calctest reference\n"
				"       emunic-run -n 2 emunic-calctest all|invalid|order\n");
		return 2;
	}
	if (!strcmp(argv[1], "reference")) {
		rank = 0;
		t_reference();
		if (!fails)
			printf("emunic-calctest: reference: PASS\n");
		return harness_status();
	}
	for (i = 0; i < sizeof(checks) / sizeof(checks[0]) && strcmp(checks[i].name, argv[1]); i++)
		;
	if (i == sizeof(checks) / sizeof(checks[0])) {
		fprintf(stderr, "emunic-calctest: no check named %s\n", argv[1]);
		return 2;
	}
	if (emunic_boot_init(&n.boot))
		DIE("bootstrap");
	rank = emunic_boot_rank(n.boot);
	if (emunic_boot_size(n.boot) != 2)
		DIE("needs exactly 2 ranks");
	/* order: only rank 0's sends are held. */
	net_open(&n, rank == 0 ? checks[i].qpflags : 0);
	checks[i].fn(&n);
	sync_ranks(&n);
	if (rank == 0 && !fails)
		printf("emunic-calctest: %s: PASS\n", argv[1]);
	emunic_mr_dereg(n.mr);
	emunic_dev_close(n.dev);
	free(n.buf);
	emunic_boot_fini(n.boot);
	return harness_status();
}
