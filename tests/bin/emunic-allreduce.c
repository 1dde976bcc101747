/* SPDX-License-Identifier: MIT */
/*
 * emunic-allreduce: the offloaded allreduce (emunic/coll.h) against a host
 * reference (rank 0's data op rank 1's op ..., by emunic_calc, whose kernels
 * emunic-calctest checks apart).  Run by any number of ranks:
 *
 *   emunic-run -n N emunic-allreduce CHECK
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
 *     ptp-ops, ptp-sizes, ptp-bits   the same on the host-progressed baseline
 *
 * Every rank checks its result; rank 0 prints "emunic-allreduce: CHECK: PASS".
 */
#include "emunic.h"
#include <emunic/coll.h>

#include "baseline/ptp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXB (1 << 20)

static int rank = -1, size;
static int fails;
static struct emunic_boot *boot;

#define FAIL(...) do { fprintf(stderr, "emunic-allreduce: rank %d: FAIL: ", rank); \
		       fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); fails++; } while (0)
#define DIE(...) do { FAIL(__VA_ARGS__); exit(1); } while (0)

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
 * pairs, indices the ranks (as MPI's MINLOC users do). */
static void fill(int type, int r, unsigned char *buf, size_t count, int op)
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

static bool same(int type, const unsigned char *a, const unsigned char *b, size_t count)
{
	size_t es = emunic_calc_size(type);

	for (size_t i = 0; i < count; i++, a += es, b += es)
		if (is_pair(type) ? memcmp(a, b, vsize(type)) || memcmp(a + ioff(type), b + ioff(type), 4)
				  : memcmp(a, b, es))
			return false;
	return true;
}

static unsigned char *sbuf, *rbuf, *want, *tmp;
static struct emunic_ptp_ar *P;	/* ptp-*: the host-progressed baseline instead */

static int do_allreduce(struct emunic_coll *c, const void *s, void *r, size_t n, int type, int op)
{
	return P ? emunic_ptp_allreduce(P, s, r, n, type, op) : emunic_allreduce(c, s, r, n, type, op);
}

static void reference(int op, int type, size_t count)
{
	fill(type, 0, want, count, op);
	for (int r = 1; r < size; r++) {
		fill(type, r, tmp, count, op);
		emunic_calc(op, type, want, want, tmp, count);
	}
}

static void check(const char *how, int op, int type, size_t count, const unsigned char *got)
{
	reference(op, type, count);
	if (!same(type, got, want, count))
		FAIL("%s: %s on %s, %zu elements: not the reference", how, emunic_calc_op_str(op),
		     emunic_calc_type_str(type), count);
}

static void one(struct emunic_coll *c, int op, int type, size_t count, bool blocking)
{
	struct emunic_coll_req *req;
	int r;

	fill(type, rank, sbuf, count, op);
	memset(rbuf, 0xa5, count * emunic_calc_size(type));
	if (P && !blocking) {
		struct emunic_ptp_ar_req *preq;

		r = emunic_ptp_iallreduce(P, sbuf, rbuf, count, type, op, &preq);
		memset(sbuf, 0x5a, count * emunic_calc_size(type));
		r = r ? r : emunic_ptp_ar_wait(preq, 60000);
	} else if (blocking) {
		r = do_allreduce(c, sbuf, rbuf, count, type, op);
	} else {
		r = emunic_iallreduce(c, sbuf, rbuf, count, type, op, &req);
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
		/* Round 0: the last rank comes 300 ms late, so nothing can
		 * complete and a fourth post must find no room. */
		if (round == 0 && rank == size - 1) {
			struct timespec ts = { 0, 300000000L };

			nanosleep(&ts, NULL);
		}
		for (int k = 0; k < 3; k++) {
			fill(EMUNIC_CALC_INT64, rank + k + round, sbuf, 100, ops[k]);
			if (emunic_iallreduce(c, sbuf, out + k * 4096, 100, EMUNIC_CALC_INT64, ops[k], &req[k]))
				DIE("iallreduce %d of round %d", k, round);
		}
		if (round == 0 && rank != size - 1) {
			int r = emunic_iallreduce(c, sbuf, rbuf, 100, EMUNIC_CALC_INT64, EMUNIC_CALC_SUM, &extra);

			if (r != -ENOSPC)
				DIE("a fourth iallreduce in flight: %d, not -ENOSPC", r);
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

int main(int argc, char **argv)
{
	static const struct { const char *name; void (*fn)(struct emunic_coll *); } checks[] = {
		{ "ops", t_ops }, { "sizes", t_sizes }, { "inflight", t_inflight }, { "late", t_late },
		{ "invalid", t_invalid }, { "bits", t_bits }, { "fault", t_fault },
		{ "ptp-ops", t_ops }, { "ptp-sizes", t_sizes }, { "ptp-bits", t_bits },
	};
	struct emunic_coll_attr a;
	struct emunic_coll *c;
	struct emunic_dev *dev;
	size_t i;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: emunic-run -n N [-f SPEC] emunic-allreduce "
				"ops|sizes|inflight|late|invalid|bits|fault|ptp-ops|ptp-sizes|ptp-bits\n");
		return 2;
	}
	for (i = 0; i < sizeof(checks) / sizeof(checks[0]) && strcmp(checks[i].name, argv[1]); i++)
		;
	if (i == sizeof(checks) / sizeof(checks[0])) {
		fprintf(stderr, "emunic-allreduce: no check named %s\n", argv[1]);
		return 2;
	}
	if (emunic_boot_init(&boot))
		DIE("bootstrap");
	rank = emunic_boot_rank(boot);
	size = emunic_boot_size(boot);
	if (emunic_dev_open(boot, NULL, &dev))
		DIE("emunic_dev_open");
	emunic_coll_attr_init(&a);
	a.kind = EMUNIC_COLL_ALLREDUCE;
	a.max_bytes = MAXB;
	a.timeout_ms = strcmp(argv[1], "fault") ? 60000 : 3000;
	if (!strncmp(argv[1], "ptp-", 4)) {
		c = NULL;
		r = emunic_ptp_ar_create(boot, MAXB, 60000, 50, &P);
		if (r)
			DIE("emunic_ptp_ar_create: %s", strerror(-r));
	} else if ((r = emunic_coll_create(dev, &a, &c))) {
		DIE("emunic_coll_create: %s", strerror(-r));
	}
	sbuf = malloc(MAXB);
	rbuf = malloc(MAXB);
	want = malloc(MAXB);
	tmp = malloc(MAXB);
	checks[i].fn(c);
	r = P ? emunic_ptp_ar_destroy(P) : emunic_coll_destroy(c);
	if (r && strcmp(argv[1], "fault"))
		FAIL("destroying the allreduce object: %s", strerror(-r));
	emunic_boot_barrier(boot);
	if (rank == 0 && !fails)
		printf("emunic-allreduce: %s: PASS\n", argv[1]);
	emunic_dev_close(dev);
	free(sbuf);
	free(rbuf);
	free(want);
	free(tmp);
	emunic_boot_fini(boot);
	return fails ? 1 : 0;
}
