/* SPDX-License-Identifier: MIT */
/*
 * emunic-allreduce: the offloaded allreduce (emunic/coll.h) against a host
 * reference (rank 0's data op rank 1's op ..., by emunic_calc, whose kernels
 * emunic-calctest checks apart).  Run by any number of ranks:
 *
 *   emunic-run -n N emunic-allreduce CHECK [CHECK...]
 *     ops       every op x type MPI defines, 5 elements, blocking and not
 *     sizes     SUM of INT32 / DOUBLE, MAX of UINT8, from 0 bytes to 1 MiB
 *     inflight  three iallreduces in flight, waited in reverse order; a late
 *               rank makes a fourth post -ENOSPC
 *     late      the last rank enters 500 ms late; an in-place allreduce
 *     invalid   an undefined op x type, too many bytes, a barrier call on an
 *               allreduce object: named errors, and the object still works
 *     bits      random doubles, -0/+0 and NaNs: every rank gets the same bits
 *     fault     under emunic-run -f SPEC: every rank fails, within 3 s, and
 *               every allreduce after its first failure fails too
 *     rsag      ops, counts (0 to 2 x ranks + 1, and odd ones: blocks empty
 *               or uneven) and sizes; run with EMUNIC_RSAG_BYTES=0 it is
 *               all reduce-scatter + allgather
 *     order     random doubles summed below and above the threshold, and on
 *               objects whose attr.rsag_bytes says never and always: the
 *               bits must be those of the algorithm the threshold picks
 *               (recursive doubling adds at distance 1 first, the halving
 *               at N/2 first: at 4 ranks and more they differ)
 *     ptp-ops, ptp-sizes, ptp-bits, ptp-rsag, ptp-order   the same on the
 *               host-progressed baseline
 *
 *   emunic-allreduce plan     (on the host, no ranks) rsag.c's steps for
 *               1 to 64 ranks and many counts, run as messages between
 *               simulated ranks: every step's message matches its peer's,
 *               no element is reduced twice, every rank ends with all
 *
 * Every rank checks its result; rank 0 prints "emunic-allreduce: CHECK: PASS".
 * Several checks run one after the other on one object, in one process (a
 * launch at 8 ranks costs ~2.5 s under TCG): all of the offloaded or all of
 * the ptp- kind; fault runs alone.
 */
#include "emunic.h"
#include <emunic/coll.h>

#include "baseline/coll_ops.h"
#include "engines/coll/rsag.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HARNESS_RANK rank
#include "harness.h"

#define MAXB (1 << 20)

static int rank = -1, size;
static struct emunic_boot *boot;

static bool is_pair(int type) { return type >= EMUNIC_CALC_FLOAT_INT; }
static bool is_float(int type)
{
	return type == EMUNIC_CALC_FLOAT || type == EMUNIC_CALC_DOUBLE || type == EMUNIC_CALC_FLOAT_INT ||
	       type == EMUNIC_CALC_DOUBLE_INT;
}

/* Writes value v (small: exact in every type) at p as type's value field. */
static void put(int type, unsigned char *p, int v)
{
	switch (type) {
	case EMUNIC_CALC_INT8: case EMUNIC_CALC_UINT8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
	case EMUNIC_CALC_INT16: case EMUNIC_CALC_UINT16: case EMUNIC_CALC_SHORT_INT:
		{ int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
	case EMUNIC_CALC_INT32: case EMUNIC_CALC_UINT32: case EMUNIC_CALC_2INT:
		{ int32_t x = v; memcpy(p, &x, 4); break; }
	case EMUNIC_CALC_INT64: case EMUNIC_CALC_UINT64: case EMUNIC_CALC_LONG_INT:
		{ int64_t x = v; memcpy(p, &x, 8); break; }
	case EMUNIC_CALC_FLOAT: case EMUNIC_CALC_FLOAT_INT: { float x = (float)v / 2; memcpy(p, &x, 4); break; }
	case EMUNIC_CALC_DOUBLE: case EMUNIC_CALC_DOUBLE_INT: { double x = (double)v / 2; memcpy(p, &x, 8); break; }
	}
}

/* Where a pair's index is. */
static size_t ioff(int type)
{
	return type == EMUNIC_CALC_DOUBLE_INT || type == EMUNIC_CALC_LONG_INT ? 8 : 4;
}
static size_t vsize(int type)
{
	return type == EMUNIC_CALC_DOUBLE_INT || type == EMUNIC_CALC_LONG_INT ? 8 :
	       type == EMUNIC_CALC_SHORT_INT ? 2 : 4;
}

/* Rank r's operand: values that stay exact in any order (floats are
 * halves of small integers; products of at most 8 of them), ties for the
 * pairs, indices the ranks (as MPI's MINLOC users do).  The values repeat
 * every FILL_PERIOD elements (the 11 and the 3 below), so one period is
 * computed and the rest copied: element by element, the references of
 * 1 MiB at 8 ranks took a quarter of the guest's CPU. */
#define FILL_PERIOD 33
static void fill_elems(int type, int r, unsigned char *buf, size_t count, int op)
{
	size_t es = emunic_calc_size(type);

	memset(buf, 0, count * es);
	for (size_t i = 0; i < count; i++) {
		unsigned char *e = buf + i * es;
		int v = (int)((unsigned)(r * 7 + (int)i * 3) % 11) - 5;

		if (op == EMUNIC_CALC_PROD)
			v = (int)((unsigned)(r + i) % 3) + 1 == 3 ? -2 : (int)((unsigned)(r + i) % 3) + 1;
		if (is_float(type) && op == EMUNIC_CALC_PROD)
			v *= 2;		/* put halves it: 1, 2, -2 */
		if (is_pair(type))
			v = (int)((unsigned)(r + i) % 3);
		put(type, e, v);
		if (is_pair(type)) {
			int idx = r;

			memcpy(e + ioff(type), &idx, 4);
		}
	}
}

/* buf[0, count): its first period repeated (doubling from one period: what
 * is done stays a whole number of periods). */
static void repeat_period(int type, unsigned char *buf, size_t count)
{
	size_t es = emunic_calc_size(type), n;

	for (size_t done = FILL_PERIOD; done < count; done += n) {
		n = count - done < done ? count - done : done;
		memcpy(buf + done * es, buf, n * es);
	}
}

static void fill(int type, int r, unsigned char *buf, size_t count, int op)
{
	fill_elems(type, r, buf, count < FILL_PERIOD ? count : FILL_PERIOD, op);
	repeat_period(type, buf, count);
}

static bool same(int type, const unsigned char *a, const unsigned char *b, size_t count)
{
	size_t es = emunic_calc_size(type);

	if (!is_pair(type))
		return !memcmp(a, b, count * es);
	/* the pairs' padding between value and index is nobody's */
	for (size_t i = 0; i < count; i++, a += es, b += es)
		if (memcmp(a, b, vsize(type)) || memcmp(a + ioff(type), b + ioff(type), 4))
			return false;
	return true;
}

static unsigned char *sbuf, *rbuf, *want, *tmp;
/* ptp-*: the host-progressed baseline instead, from the allreduce's table;
 * P its handle. */
static const struct emunic_coll_impl *const B = &emunic_allreduce_ops.baseline;
static void *P;
static struct emunic_dev *test_dev;

static int do_allreduce(struct emunic_coll *c, const void *s, void *r, size_t n, int type, int op)
{
	struct emunic_coll_call k = { .sbuf = s, .rbuf = r, .count = n, .type = type, .op = op };

	return P ? B->call(P, &k) : emunic_allreduce(c, s, r, n, type, op);
}

/* want: the reduction of every rank's operand.  Element-wise, of operands
 * with one period, so it has that period too: one period is reduced (with
 * emunic_calc, as the NIC does) and the rest copied. */
static void reference(int op, int type, size_t count)
{
	size_t n = count < FILL_PERIOD ? count : FILL_PERIOD;

	fill(type, 0, want, n, op);
	for (int r = 1; r < size; r++) {
		fill(type, r, tmp, n, op);
		emunic_calc(op, type, want, want, tmp, n);
	}
	repeat_period(type, want, count);
}

static void check(const char *how, int op, int type, size_t count, const unsigned char *got)
{
	reference(op, type, count);
	if (!same(type, got, want, count))
		FAIL("%s: %s on %s, %zu elements: not the reference", how, emunic_calc_op_str(op),
		     emunic_calc_type_str(type), count);
}

/* Posts, retrying -ENOSPC for up to 60 s: a post after every earlier
 * request was waited may still find no room while the sends of the one
 * four back are not acknowledged (include/emunic/coll.h; seen across two
 * guests), as the blocking form and the MPI layer retry. */
static int retried;	/* posts that found no room at first (said at the end of inflight) */

static int ipost(struct emunic_coll *c, const void *src, void *dst, size_t count, int type, int op,
		 struct emunic_coll_req **req)
{
	struct timespec t0, now, nap = { 0, 100000 };
	int r, tries = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((r = emunic_iallreduce(c, src, dst, count, type, op, req)) == -ENOSPC) {
		if (!tries++)
			retried++;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= 60)
			break;
		nanosleep(&nap, NULL);
	}
	return r;
}

static void one(struct emunic_coll *c, int op, int type, size_t count, bool blocking)
{
	struct emunic_coll_req *req;
	int r;

	fill(type, rank, sbuf, count, op);
	memset(rbuf, 0xa5, count * emunic_calc_size(type));
	if (P && !blocking) {
		struct emunic_coll_call k = { .sbuf = sbuf, .rbuf = rbuf, .count = count, .type = type, .op = op };
		void *preq;

		r = B->start(P, &k, &preq);
		memset(sbuf, 0x5a, count * emunic_calc_size(type));
		r = r ? r : B->wait(preq, 60000);
	} else if (blocking) {
		r = do_allreduce(c, sbuf, rbuf, count, type, op);
	} else {
		r = ipost(c, sbuf, rbuf, count, type, op, &req);
		memset(sbuf, 0x5a, count * emunic_calc_size(type));	/* sbuf is free once posted */
		r = r ? r : emunic_coll_wait(req, 60000);
	}
	if (r)
		DIE("%s %s on %s, %zu elements: %s", blocking ? "allreduce" : "iallreduce", emunic_calc_op_str(op),
		    emunic_calc_type_str(type), count, strerror(-r));
	check(blocking ? "allreduce" : "iallreduce", op, type, count, rbuf);
}

static void t_ops(struct emunic_coll *c)
{
	int n = 0;

	for (int op = EMUNIC_CALC_SUM; op <= EMUNIC_CALC_MAXLOC; op++)
		for (int type = EMUNIC_CALC_INT8; type <= EMUNIC_CALC_SHORT_INT; type++)
			if (!emunic_calc_check(op, type)) {
				one(c, op, type, 5, n % 2 == 0);
				n++;
			}
	if (rank == 0)
		printf("emunic-allreduce: %d ranks: %d op x type pairs\n", size, n);
}

static void t_sizes(struct emunic_coll *c)
{
	static const size_t bytes[] = { 0, 1, 8, 1000, 65536, MAXB };

	for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++) {
		one(c, EMUNIC_CALC_MAX, EMUNIC_CALC_UINT8, bytes[i], true);
		one(c, EMUNIC_CALC_SUM, EMUNIC_CALC_INT32, bytes[i] / 4, false);
		one(c, EMUNIC_CALC_SUM, EMUNIC_CALC_DOUBLE, bytes[i] / 8, true);
	}
}

static void t_inflight(struct emunic_coll *c)
{
	static const int ops[3] = { EMUNIC_CALC_SUM, EMUNIC_CALC_MAX, EMUNIC_CALC_BXOR };
	struct emunic_coll_req *req[3], *extra;
	unsigned char *out = malloc(3 * 4096);

	for (int round = 0; round < 20; round++) {
		/* Round 0: the last rank posts only after the others have
		 * tried a fourth (the bootstrap's barrier, not a sleep: two
		 * guests on two host cores can stall a rank for longer than
		 * any sleep), so nothing can complete and that fourth post
		 * must find no room. */
		if (round == 0 && rank == size - 1 && emunic_boot_barrier(boot))
			DIE("the bootstrap barrier before round 0");
		for (int k = 0; k < 3; k++) {
			fill(EMUNIC_CALC_INT64, rank + k + round, sbuf, 100, ops[k]);
			int r = ipost(c, sbuf, out + k * 4096, 100, EMUNIC_CALC_INT64, ops[k], &req[k]);

			if (r)
				DIE("iallreduce %d of round %d: %s", k, round, strerror(-r));
		}
		if (round == 0 && rank != size - 1) {
			int r = emunic_iallreduce(c, sbuf, rbuf, 100, EMUNIC_CALC_INT64, EMUNIC_CALC_SUM, &extra);

			if (r != -ENOSPC)
				DIE("a fourth iallreduce in flight: %d, not -ENOSPC", r);
			if (emunic_boot_barrier(boot))
				DIE("the bootstrap barrier after the fourth iallreduce");
		}
		for (int k = 2; k >= 0; k--)
			if (emunic_coll_wait(req[k], 60000))
				DIE("waiting for iallreduce %d of round %d", k, round);
		for (int k = 0; k < 3; k++) {
			fill(EMUNIC_CALC_INT64, k + round, want, 100, ops[k]);
			for (int r = 1; r < size; r++) {
				fill(EMUNIC_CALC_INT64, r + k + round, tmp, 100, ops[k]);
				emunic_calc(ops[k], EMUNIC_CALC_INT64, want, want, tmp, 100);
			}
			if (!same(EMUNIC_CALC_INT64, out + k * 4096, want, 100))
				FAIL("round %d, iallreduce %d (%s): not the reference", round, k, emunic_calc_op_str(ops[k]));
		}
	}
	if (retried)
		fprintf(stderr, "emunic-allreduce: rank %d: %d of 60 posts found no room at first (sends of the "
			"allreduce four back not yet acknowledged) and were retried\n", rank, retried);
	free(out);
}

static void t_late(struct emunic_coll *c)
{
	if (rank == size - 1) {
		struct timespec ts = { 0, 500000000L };

		nanosleep(&ts, NULL);
	}
	one(c, EMUNIC_CALC_SUM, EMUNIC_CALC_INT32, 1000, false);
	one(c, EMUNIC_CALC_MINLOC, EMUNIC_CALC_DOUBLE_INT, 100, true);
	/* In place: sbuf is rbuf. */
	fill(EMUNIC_CALC_INT64, rank, rbuf, 50, EMUNIC_CALC_SUM);
	if (emunic_allreduce(c, rbuf, rbuf, 50, EMUNIC_CALC_INT64, EMUNIC_CALC_SUM))
		DIE("in-place allreduce");
	check("in place", EMUNIC_CALC_SUM, EMUNIC_CALC_INT64, 50, rbuf);
}

/* Values whose result depends on the order of the operands (random
 * doubles, -0 and +0, NaNs): every rank must still get the same bits. */
static void t_bits(struct emunic_coll *c)
{
	static const int ops[] = { EMUNIC_CALC_SUM, EMUNIC_CALC_PROD, EMUNIC_CALC_MIN, EMUNIC_CALC_MAX };
	const size_t count = 64;
	unsigned char *all = malloc((size_t)size * 64 * 16);
	unsigned seed = 12345u + 77u * (unsigned)rank;

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]) + 1; o++) {
		bool loc = o == sizeof(ops) / sizeof(ops[0]);
		int type = loc ? EMUNIC_CALC_DOUBLE_INT : EMUNIC_CALC_DOUBLE, op = loc ? EMUNIC_CALC_MINLOC : ops[o];
		size_t es = emunic_calc_size(type);

		memset(sbuf, 0, count * es);
		for (size_t i = 0; i < count; i++) {
			double v;

			seed = seed * 1103515245u + 12345u;
			v = (double)(seed >> 8) / 16777216.0 * 3.0 - 1.5;
			if (i % 8 == 1)
				v = (rank % 2) ? -0.0 : 0.0;
			if (i % 8 == 2)
				v = rank == 1 ? __builtin_nan("") : v;
			if (i % 8 == 3)
				v = rank % 2 ? __builtin_nan("1") : __builtin_nan("2");
			memcpy(sbuf + i * es, &v, 8);
			if (loc)
				memcpy(sbuf + i * es + 8, &rank, 4);
		}
		if (do_allreduce(c, sbuf, rbuf, count, type, op))
			DIE("allreduce %s on %s", emunic_calc_op_str(op), emunic_calc_type_str(type));
		if (emunic_boot_allgather(boot, rbuf, count * es, all))
			DIE("allgather");
		for (int r = 1; r < size; r++)
			if (!same(type, all, all + (size_t)r * count * es, count))
				FAIL("%s on %s: rank %d's result differs from rank 0's", emunic_calc_op_str(op),
				     emunic_calc_type_str(type), r);
	}
	free(all);
}

/* Under a fault spec (emunic-run -f): every rank must end in an error, the
 * allreduces after it too, each within the bound, none hangs. */
static void t_fault(struct emunic_coll *c)
{
	int first = 0, at = -1;

	for (int k = 0; k < 6; k++) {
		int r;

		fill(EMUNIC_CALC_INT64, rank, sbuf, 64, EMUNIC_CALC_SUM);
		r = emunic_allreduce(c, sbuf, rbuf, 64, EMUNIC_CALC_INT64, EMUNIC_CALC_SUM);
		if (!r && first)
			FAIL("allreduce %d succeeded after allreduce %d failed", k + 1, at);
		if (!r)
			check("before the fault", EMUNIC_CALC_SUM, EMUNIC_CALC_INT64, 64, rbuf);
		if (r && !first) {
			first = r;
			at = k + 1;
		}
	}
	printf("emunic-allreduce: rank %d: first failure: allreduce %d: %s\n", rank, at,
	       first ? strerror(-first) : "none");
	if (!first)
		FAIL("no allreduce failed under the fault");
}

static void t_invalid(struct emunic_coll *c)
{
	struct emunic_coll_req *req;

	if (emunic_allreduce(c, sbuf, rbuf, 4, EMUNIC_CALC_DOUBLE, EMUNIC_CALC_BXOR) != -EINVAL)
		FAIL("BXOR on DOUBLE accepted");
	if (emunic_iallreduce(c, sbuf, rbuf, 4, EMUNIC_CALC_INT32, EMUNIC_CALC_MAXLOC, &req) != -EINVAL)
		FAIL("MAXLOC on INT32 accepted");
	if (emunic_allreduce(c, sbuf, rbuf, MAXB + 1, EMUNIC_CALC_UINT8, EMUNIC_CALC_SUM) != -EMSGSIZE)
		FAIL("more than max_bytes accepted");
	if (emunic_barrier(c) != -EINVAL)
		FAIL("a barrier on an allreduce object accepted");
	one(c, EMUNIC_CALC_SUM, EMUNIC_CALC_INT16, 7, true);
}

/* Counts whose blocks are empty (fewer than the ranks) or uneven. */
static void t_counts(struct emunic_coll *c)
{
	const size_t odd[] = { 1000 + (size_t)size - 1, 4097, 65537 };

	for (size_t n = 0; n <= 2 * (size_t)size + 1; n++) {
		one(c, EMUNIC_CALC_SUM, EMUNIC_CALC_INT32, n, n % 2 == 0);
		one(c, EMUNIC_CALC_MINLOC, EMUNIC_CALC_DOUBLE_INT, n, n % 2 == 1);
	}
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		one(c, EMUNIC_CALC_SUM, EMUNIC_CALC_INT64, odd[i], i % 2 == 0);
		one(c, EMUNIC_CALC_MAXLOC, EMUNIC_CALC_2INT, odd[i] / 3, i % 2 == 1);
	}
}

static void t_rsag(struct emunic_coll *c)
{
	t_ops(c);
	t_counts(c);
	t_sizes(c);
}

/* Rank r's random doubles (any rank can make any rank's). */
static void rand_doubles(int r, double *v, size_t count)
{
	unsigned seed = 977u + 131u * (unsigned)r;

	for (size_t i = 0; i < count; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = (double)(seed >> 8) / 16777216.0 * 2e6 - 1e6 + 1.0 / (double)(seed % 1000 + 1);
	}
}

/* The SUM every rank must get: the extra ranks folded in, then pairs at
 * distance 1, 2, .. (recursive doubling) or N/2, .., 1 (the halving: each
 * block ends reduced in that order, the gathers copy it), the lower rank's
 * operand first. */
static void order_reference(bool halving, size_t count, double *out)
{
	int n = 1;
	double *v, *t = malloc(count * sizeof(double) + 8);

	while (n * 2 <= size)
		n *= 2;
	v = malloc((size_t)n * count * sizeof(double) + 8);
	for (int r = 0; r < n; r++) {
		rand_doubles(r, v + (size_t)r * count, count);
		if (r + n < size) {
			rand_doubles(r + n, t, count);
			emunic_calc(EMUNIC_CALC_SUM, EMUNIC_CALC_DOUBLE, v + (size_t)r * count, v + (size_t)r * count, t,
				    count);
		}
	}
	for (int k = 0; (1 << k) < n; k++) {
		int d = halving ? n >> (k + 1) : 1 << k;

		for (int r = 0; r < n; r++)
			if (!(r & d)) {
				double *lo = v + (size_t)r * count, *hi = v + (size_t)(r + d) * count;

				emunic_calc(EMUNIC_CALC_SUM, EMUNIC_CALC_DOUBLE, lo, lo, hi, count);
				memcpy(hi, lo, count * sizeof(double));
			}
	}
	memcpy(out, v, count * sizeof(double));
	free(v);
	free(t);
}

/* One SUM of count random doubles on c: bits must be those of the algorithm
 * that threshold picks; returns whether the two algorithms' differ. */
static bool order_one(struct emunic_coll *c, size_t count, size_t threshold)
{
	double *got = (double *)rbuf, *rd = (double *)want, *hv = (double *)tmp;
	bool halving = count * sizeof(double) >= threshold;

	rand_doubles(rank, (double *)sbuf, count);
	if (do_allreduce(c, sbuf, rbuf, count, EMUNIC_CALC_DOUBLE, EMUNIC_CALC_SUM))
		DIE("allreduce of %zu random doubles", count);
	order_reference(false, count, rd);
	order_reference(true, count, hv);
	if (memcmp(got, halving ? hv : rd, count * sizeof(double)))
		FAIL("%zu doubles (threshold %zu): not the bits of %s", count, threshold,
		     halving ? "reduce-scatter + allgather" : "recursive doubling");
	return memcmp(rd, hv, count * sizeof(double)) != 0;
}

static void t_order(struct emunic_coll *c)
{
	static const size_t counts[] = { 3, 64, 1000, 16384, 65536 };
	struct emunic_coll_attr a;
	size_t threshold;
	bool differ = false;

	if (coll_rsag_bytes(0, size, &threshold))
		DIE("%s is malformed", COLL_RSAG_ENV);
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		differ |= order_one(c, counts[i], threshold);
	if (size >= 4 && !differ)
		FAIL("the two algorithms' sums do not differ: the check tells nothing");
	if (P)
		return;
	/* The attribute wins over the variable: never, and from 8 bytes. */
	for (int k = 0; k < 2; k++) {
		struct emunic_coll *o;
		size_t t = k ? 8 : SIZE_MAX;

		emunic_coll_attr_init(&a);
		a.kind = EMUNIC_COLL_ALLREDUCE;
		a.max_bytes = 65536 * sizeof(double);
		a.rsag_bytes = t;
		if (emunic_coll_create(test_dev, &a, &o))
			DIE("creating an allreduce object with rsag_bytes %zu", t);
		for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
			order_one(o, counts[i], t);
		if (emunic_coll_destroy(o))
			FAIL("destroying the object with rsag_bytes %zu", t);
	}
}

/* ---- plan: rsag.c's steps, simulated on the host ---------------------------- */

/* A simulated rank: its vector as masks of the ranks reduced in, where it
 * is in its steps, and per peer a queue of messages (masks) sent to it. */
struct sim_msg {
	uint64_t *m;
	size_t off, cnt;
	struct sim_msg *next;
};

static int plan_fails;

#define PLAN_FAIL(...) do { fprintf(stderr, "emunic-allreduce: plan: FAIL: "); fprintf(stderr, __VA_ARGS__); \
			    fputc('\n', stderr); plan_fails++; } while (0)

static void plan_one(int m, size_t count)
{
	struct coll_rs_step (*st)[COLL_RS_MAX_STEPS] = calloc((size_t)m, sizeof(*st));
	int *ns = calloc((size_t)m, sizeof(int)), *at = calloc((size_t)m, sizeof(int));
	uint64_t **v = calloc((size_t)m, sizeof(*v));
	struct sim_msg **q = calloc((size_t)m * (size_t)m, sizeof(*q));	/* q[to * m + from] */
	bool *sent = calloc((size_t)m, sizeof(bool)), moved = true;
	uint64_t all = m == 64 ? ~0ull : (1ull << m) - 1;

	for (int r = 0; r < m; r++) {
		ns[r] = coll_rsag_plan(r, m, count, st[r]);
		v[r] = calloc(count + 1, sizeof(uint64_t));
		for (size_t i = 0; i < count; i++)
			v[r][i] = 1ull << r;
	}
	while (moved) {
		moved = false;
		for (int r = 0; r < m; r++) {
			const struct coll_rs_step *s;
			struct sim_msg **head, *g;

			if (at[r] == ns[r])
				continue;
			s = &st[r][at[r]];
			if (s->soff + s->scnt > count || s->roff + s->rcnt > count || s->peer < 0 || s->peer >= m ||
			    s->peer == r) {
				PLAN_FAIL("%d ranks, %zu elements: rank %d step %d out of range", m, count, r, at[r]);
				goto out;
			}
			if (coll_rs_sends(s->kind) && !sent[r]) {
				struct sim_msg *nm = calloc(1, sizeof(*nm)), **tail = &q[(size_t)s->peer * (size_t)m + (size_t)r];

				nm->m = malloc((s->scnt + 1) * sizeof(uint64_t));
				memcpy(nm->m, v[r] + s->soff, s->scnt * sizeof(uint64_t));
				nm->off = s->soff;
				nm->cnt = s->scnt;
				while (*tail)
					tail = &(*tail)->next;
				*tail = nm;
				sent[r] = moved = true;
			}
			if (coll_rs_waits(s->kind)) {
				head = &q[(size_t)r * (size_t)m + (size_t)s->peer];
				if (!*head)
					continue;
				g = *head;
				*head = g->next;
				if (g->off != s->roff || g->cnt != s->rcnt)
					PLAN_FAIL("%d ranks, %zu elements: rank %d step %d waits for [%zu, +%zu), peer %d "
						  "sent [%zu, +%zu)", m, count, r, at[r], s->roff, s->rcnt, s->peer, g->off,
						  g->cnt);
				for (size_t i = 0; i < g->cnt && i < s->rcnt; i++) {
					uint64_t *e = &v[r][s->roff + i];

					if (s->kind == COLL_RS_IN || s->kind == COLL_RS_HALVE) {
						if (*e & g->m[i])
							PLAN_FAIL("%d ranks, %zu elements: rank %d reduces element %zu twice",
								  m, count, r, s->roff + i);
						*e |= g->m[i];
					} else {
						*e = g->m[i];
					}
				}
				free(g->m);
				free(g);
			}
			at[r]++;
			sent[r] = false;
			moved = true;
		}
	}
	for (int r = 0; r < m; r++) {
		if (at[r] != ns[r])
			PLAN_FAIL("%d ranks, %zu elements: rank %d stuck at step %d of %d", m, count, r, at[r], ns[r]);
		for (size_t i = 0; at[r] == ns[r] && i < count; i++)
			if (v[r][i] != all) {
				PLAN_FAIL("%d ranks, %zu elements: rank %d ends without every rank in element %zu", m,
					  count, r, i);
				break;
			}
		for (int p = 0; p < m; p++)
			if (q[(size_t)r * (size_t)m + (size_t)p])
				PLAN_FAIL("%d ranks, %zu elements: a message from %d to %d left over", m, count, p, r);
	}
out:
	for (int r = 0; r < m; r++)
		free(v[r]);
	for (size_t i = 0; i < (size_t)m * (size_t)m; i++)
		while (q[i]) {
			struct sim_msg *g = q[i];

			q[i] = g->next;
			free(g->m);
			free(g);
		}
	free(st);
	free(ns);
	free(at);
	free(v);
	free(q);
	free(sent);
}

static int t_plan(void)
{
	int cases = 0;

	for (int m = 1; m <= 64; m++)
		for (size_t count = 0; count <= 3 * (size_t)m + 1; count += m > 16 ? 5 : 1, cases++)
			plan_one(m, count);
	for (int m = 2; m <= 64; m += 7, cases++)
		plan_one(m, 100003);
	if (plan_fails)
		return 1;
	printf("emunic-allreduce: plan: %d cases: PASS\n", cases);
	return 0;
}

static const struct check {
	const char *name;
	void (*fn)(struct emunic_coll *);
} checks[] = {
	{ "ops", t_ops }, { "sizes", t_sizes }, { "inflight", t_inflight }, { "late", t_late },
	{ "invalid", t_invalid }, { "bits", t_bits }, { "fault", t_fault },
	{ "rsag", t_rsag }, { "order", t_order },
	{ "ptp-ops", t_ops }, { "ptp-sizes", t_sizes }, { "ptp-bits", t_bits }, { "ptp-rsag", t_rsag },
	{ "ptp-order", t_order },
};

static const struct check *find_check(const char *name)
{
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		if (!strcmp(checks[i].name, name))
			return &checks[i];
	return NULL;
}

int main(int argc, char **argv)
{
	struct emunic_coll_attr a;
	struct emunic_coll *c;
	struct emunic_dev *dev;
	int r;

	if (argc < 2) {
		fprintf(stderr, "usage: emunic-run -n N [-f SPEC] emunic-allreduce CHECK [CHECK...]\n"
				"  CHECK: ops|sizes|inflight|late|invalid|bits|fault|rsag|order|ptp-ops|ptp-sizes|ptp-bits|"
				"ptp-rsag|ptp-order\n"
				"         all of one kind (ptp- or not); fault alone\n"
				"       emunic-allreduce plan\n");
		return 2;
	}
	if (!strcmp(argv[1], "plan"))
		return t_plan();
	for (int k = 1; k < argc; k++) {
		if (!find_check(argv[k])) {
			fprintf(stderr, "emunic-allreduce: no check named %s\n", argv[k]);
			return 2;
		}
		if (argc > 2 && !strcmp(argv[k], "fault")) {
			fprintf(stderr, "emunic-allreduce: fault runs alone, not with other checks\n");
			return 2;
		}
		if (!strncmp(argv[k], "ptp-", 4) != !strncmp(argv[1], "ptp-", 4)) {
			fprintf(stderr, "emunic-allreduce: %s cannot run with %s: checks of one kind only\n", argv[k],
				argv[1]);
			return 2;
		}
	}
	if (emunic_boot_init(&boot))
		DIE("bootstrap");
	rank = emunic_boot_rank(boot);
	size = emunic_boot_size(boot);
	if (emunic_dev_open(boot, NULL, &dev))
		DIE("emunic_dev_open");
	test_dev = dev;
	emunic_coll_attr_init(&a);
	a.kind = EMUNIC_COLL_ALLREDUCE;
	a.max_bytes = MAXB;
	a.timeout_ms = strcmp(argv[1], "fault") ? 60000 : 3000;
	if (!strncmp(argv[1], "ptp-", 4)) {
		struct emunic_coll_impl_attr pa = { .max_bytes = MAXB, .timeout_ms = 60000, .spin_us = 50 };

		c = NULL;
		r = B->open(EMUNIC_COLL_ALLREDUCE, boot, dev, &pa, &P);
		if (r)
			DIE("%s: %s", B->create, strerror(-r));
	} else if ((r = emunic_coll_create(dev, &a, &c))) {
		DIE("emunic_coll_create: %s", strerror(-r));
	}
	sbuf = malloc(MAXB);
	rbuf = malloc(MAXB);
	want = malloc(MAXB);
	tmp = malloc(MAXB);
	for (int k = 1; k < argc; k++) {
		int before = fails;

		find_check(argv[k])->fn(c);
		if (k == argc - 1)
			break;
		emunic_boot_barrier(boot);
		if (rank == 0 && fails == before)
			printf("emunic-allreduce: %s: PASS\n", argv[k]);
	}
	r = P ? B->close(P) : emunic_coll_destroy(c);
	if (r && strcmp(argv[1], "fault"))
		FAIL("destroying the allreduce object: %s", strerror(-r));
	emunic_boot_barrier(boot);
	/* The last check's PASS includes the object's destroy. */
	if (rank == 0 && !fails)
		printf("emunic-allreduce: %s: PASS\n", argv[argc - 1]);
	emunic_dev_close(dev);
	free(sbuf);
	free(rbuf);
	free(want);
	free(tmp);
	emunic_boot_fini(boot);
	return harness_status();
}
