/* SPDX-License-Identifier: MIT */
/*
 * An ordinary MPI program, with no emunic in it: nonblocking collectives
 * (MPI_Ibcast, Iallreduce, Ialltoall, Igather, Iallgather) and their
 * blocking forms, mixed with point-to-point, waited with every form of
 * MPI_Wait and MPI_Test, on MPI_COMM_WORLD, a dup of it, a split of it,
 * MPI_COMM_SELF and an intercommunicator.
 * Each result is checked against what MPI defines and printed as a digest,
 * so the same program run with and without LD_PRELOAD=libemunic-mpi.so must
 * print the same lines (tests/test_mpi.py compares them).  Floating inputs
 * are small integers, whose sums and products are exact in any order: MPI
 * fixes no reduction order, so only those can be compared bit for bit.
 *
 * Usage: emunic-mpi-colls [--many N]   (exit 0: every check passed)
 *        emunic-mpi-colls --missing    after one MPI_Ibcast on every rank,
 *                                      rank 0 waits on one from rank 1 that no
 *                                      other rank calls (an erroneous program:
 *                                      the wait must end, with an error)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failed, checks;

static uint64_t digest(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static void report(const char *name, const void *got, const void *want, size_t n)
{
	checks++;
	if (n && memcmp(got, want, n)) {
		size_t i = 0;

		while (((const unsigned char *)got)[i] == ((const unsigned char *)want)[i])
			i++;
		printf("emunic-mpi-colls: rank %d: %s: MISMATCH at byte %zu of %zu\n", rank, name, i, n);
		failed++;
		return;
	}
	printf("emunic-mpi-colls: rank %d: %s: ok %016llx\n", rank, name, (unsigned long long)digest(got, n));
}

static unsigned char pat(int r, size_t i, int salt)
{
	return (unsigned char)(r * 37 + i * 11 + salt * 101 + (i >> 8));
}

static void fill(unsigned char *b, size_t n, int r, int salt)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(r, i, salt);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		MPI_Abort(MPI_COMM_WORLD, 2);
	return p;
}

/* ---- bcast ---------------------------------------------------------------- */

static void check_bcast(MPI_Comm comm, const char *cname, size_t n, int root, int blocking)
{
	int me, np;
	unsigned char *buf = xmalloc(n), *want = xmalloc(n);
	char name[96];
	MPI_Request q;

	MPI_Comm_rank(comm, &me);
	MPI_Comm_size(comm, &np);
	fill(want, n, root, 1);
	if (me == root)
		memcpy(buf, want, n);
	else
		memset(buf, 0xee, n);
	if (blocking) {
		MPI_Bcast(buf, (int)n, MPI_BYTE, root, comm);
	} else {
		MPI_Ibcast(buf, (int)n, MPI_BYTE, root, comm, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
	}
	snprintf(name, sizeof(name), "%sbcast %s %zuB root %d", blocking ? "" : "i", cname, n, root);
	report(name, buf, want, n);
	free(buf);
	free(want);
}

/* ---- allreduce: an op x type list, inputs every rank can recompute -------- */

struct pair_fi { float v; int i; };
struct pair_di { double v; int i; };
struct pair_li { long v; int i; };
struct pair_ii { int v; int i; };
struct pair_si { short v; int i; };

enum { T_I8, T_U8, T_I16, T_U16, T_I32, T_U32, T_I64, T_U64, T_FLT, T_DBL, T_FI, T_DI, T_LI, T_2I, T_SI };

static MPI_Datatype mpitype(int t)
{
	MPI_Datatype m[] = { MPI_INT8_T, MPI_UINT8_T, MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_INT, MPI_UNSIGNED,
			     MPI_LONG, MPI_UINT64_T, MPI_FLOAT, MPI_DOUBLE, MPI_FLOAT_INT, MPI_DOUBLE_INT,
			     MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT };
	return m[t];
}

static size_t tsize(int t)
{
	size_t s[] = { 1, 1, sizeof(short), sizeof(short), sizeof(int), sizeof(int), sizeof(long), 8, 4, 8,
		       sizeof(struct pair_fi), sizeof(struct pair_di), sizeof(struct pair_li),
		       sizeof(struct pair_ii), sizeof(struct pair_si) };
	return s[t];
}

/* Element i of rank r: small values, so sums and products stay exact. */
static long long val(int r, size_t i, int op)
{
	if (op == 1)		/* PROD: 1 or 2 */
		return 1 + (long long)((r + i) % 2);
	if (op >= 4 && op <= 6)	/* logical: 0 or 1 */
		return (long long)((r * 3 + i) % 3 == 0);
	return (long long)((r * 7 + i * 13) % 50);
}

static void put(int t, void *b, size_t i, long long v, int r)
{
	switch (t) {
	case T_I8: ((int8_t *)b)[i] = (int8_t)v; break;
	case T_U8: ((uint8_t *)b)[i] = (uint8_t)v; break;
	case T_I16: ((short *)b)[i] = (short)v; break;
	case T_U16: ((unsigned short *)b)[i] = (unsigned short)v; break;
	case T_I32: ((int *)b)[i] = (int)v; break;
	case T_U32: ((unsigned *)b)[i] = (unsigned)v; break;
	case T_I64: ((long *)b)[i] = (long)v; break;
	case T_U64: ((uint64_t *)b)[i] = (uint64_t)v; break;
	case T_FLT: ((float *)b)[i] = (float)v; break;
	case T_DBL: ((double *)b)[i] = (double)v; break;
	case T_FI: ((struct pair_fi *)b)[i] = (struct pair_fi){ (float)v, r }; break;
	case T_DI: memset(&((struct pair_di *)b)[i], 0, sizeof(struct pair_di));
		((struct pair_di *)b)[i].v = (double)v; ((struct pair_di *)b)[i].i = r; break;
	case T_LI: memset(&((struct pair_li *)b)[i], 0, sizeof(struct pair_li));
		((struct pair_li *)b)[i].v = v; ((struct pair_li *)b)[i].i = r; break;
	case T_2I: ((struct pair_ii *)b)[i] = (struct pair_ii){ (int)v, r }; break;
	case T_SI: memset(&((struct pair_si *)b)[i], 0, sizeof(struct pair_si));
		((struct pair_si *)b)[i].v = (short)v; ((struct pair_si *)b)[i].i = r; break;
	}
}

static const char *const opname[] = { "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor",
				      "minloc", "maxloc" };

static MPI_Op mpiop(int op)
{
	MPI_Op m[] = { MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR,
		       MPI_BXOR, MPI_MINLOC, MPI_MAXLOC };
	return m[op];
}

static long long combine(int op, long long a, long long b)
{
	switch (op) {
	case 0: return a + b;
	case 1: return a * b;
	case 2: return a < b ? a : b;
	case 3: return a > b ? a : b;
	case 4: return a && b;
	case 5: return a || b;
	case 6: return !a != !b;
	case 7: return a & b;
	case 8: return a | b;
	case 9: return a ^ b;
	}
	return 0;
}

/* The expected result: element by element over the ranks in order (exact,
 * so any order gives the same); the pairs' index is the lowest rank with
 * the extreme value, as MPI defines. */
static void expect(int t, int op, void *b, size_t count, int np)
{
	for (size_t i = 0; i < count; i++) {
		long long acc = val(0, i, op);
		int at = 0;

		for (int r = 1; r < np; r++) {
			long long v = val(r, i, op);

			if (op >= 10) {
				if (op == 10 ? v < acc : v > acc) {
					acc = v;
					at = r;
				}
			} else {
				acc = combine(op, acc, v);
			}
		}
		put(t, b, i, acc, at);
	}
}

static void check_allreduce(MPI_Comm comm, const char *cname, int op, int t, size_t count, int mode)
{
	int me, np;
	size_t n = count * tsize(t);
	unsigned char *s = xmalloc(n), *rb = xmalloc(n), *want = xmalloc(n);
	char name[96];
	MPI_Request q;

	MPI_Comm_rank(comm, &me);
	MPI_Comm_size(comm, &np);
	memset(s, 0, n);
	for (size_t i = 0; i < count; i++)
		put(t, s, i, val(me, i, op), me);
	memset(want, 0, n);
	expect(t, op, want, count, np);
	memset(rb, 0xee, n);
	if (mode == 2) {		/* in place */
		memcpy(rb, s, n);
		MPI_Iallreduce(MPI_IN_PLACE, rb, (int)count, mpitype(t), mpiop(op), comm, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
	} else if (mode == 1) {
		MPI_Allreduce(s, rb, (int)count, mpitype(t), mpiop(op), comm);
	} else {
		int flag = 0;

		MPI_Iallreduce(s, rb, (int)count, mpitype(t), mpiop(op), comm, &q);
		while (!flag)
			MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
	}
	/* Pairs: compare value and index only (the padding is MPI's to keep). */
	if (t >= T_FI)
		for (size_t i = 0; i < count; i++) {
			long long v = 0;
			int gi = 0, wi = 0;
			long long wv = 0;

			switch (t) {
			case T_FI: v = (long long)((struct pair_fi *)rb)[i].v; gi = ((struct pair_fi *)rb)[i].i;
				wv = (long long)((struct pair_fi *)want)[i].v; wi = ((struct pair_fi *)want)[i].i; break;
			case T_DI: v = (long long)((struct pair_di *)rb)[i].v; gi = ((struct pair_di *)rb)[i].i;
				wv = (long long)((struct pair_di *)want)[i].v; wi = ((struct pair_di *)want)[i].i; break;
			case T_LI: v = ((struct pair_li *)rb)[i].v; gi = ((struct pair_li *)rb)[i].i;
				wv = ((struct pair_li *)want)[i].v; wi = ((struct pair_li *)want)[i].i; break;
			case T_2I: v = ((struct pair_ii *)rb)[i].v; gi = ((struct pair_ii *)rb)[i].i;
				wv = ((struct pair_ii *)want)[i].v; wi = ((struct pair_ii *)want)[i].i; break;
			case T_SI: v = ((struct pair_si *)rb)[i].v; gi = ((struct pair_si *)rb)[i].i;
				wv = ((struct pair_si *)want)[i].v; wi = ((struct pair_si *)want)[i].i; break;
			}
			put(t, rb, i, v, gi);
			put(t, want, i, wv, wi);
		}
	snprintf(name, sizeof(name), "%sallreduce %s %s type %d x%zu", mode == 1 ? "" : "i", cname, opname[op],
		 t, count);
	report(name, rb, want, n);
	free(s);
	free(rb);
	free(want);
}

/* ---- alltoall, gather, allgather ------------------------------------------ */

static void check_alltoall(MPI_Comm comm, size_t block, int mode)
{
	size_t n = block * (size_t)size;
	unsigned char *s = xmalloc(n), *rb = xmalloc(n), *want = xmalloc(n);
	char name[96];
	MPI_Request q;

	for (int p = 0; p < size; p++) {
		fill(s + (size_t)p * block, block, rank * 16 + p, 3);
		fill(want + (size_t)p * block, block, p * 16 + rank, 3);
	}
	memset(rb, 0xee, n);
	if (mode == 2) {
		memcpy(rb, s, n);
		MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, (int)block, MPI_BYTE, comm, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
	} else if (mode == 1) {
		MPI_Alltoall(s, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, comm);
	} else {
		MPI_Ialltoall(s, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, comm, &q);
		MPI_Waitall(1, &q, MPI_STATUSES_IGNORE);
	}
	snprintf(name, sizeof(name), "%salltoall %zuB%s", mode == 1 ? "" : "i", block, mode == 2 ? " in place" : "");
	report(name, rb, want, n);
	free(s);
	free(rb);
	free(want);
}

static void check_gather(MPI_Comm comm, size_t block, int root, int mode)
{
	size_t n = block * (size_t)size;
	unsigned char *s = xmalloc(block), *rb = xmalloc(n), *want = xmalloc(n);
	char name[96];
	MPI_Request q;

	fill(s, block, rank, 4);
	for (int p = 0; p < size; p++)
		fill(want + (size_t)p * block, block, p, 4);
	memset(rb, 0xee, n);
	if (mode == 2 && rank == root) {
		memcpy(rb + (size_t)root * block, s, block);
		MPI_Igather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, (int)block, MPI_BYTE, root, comm, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
	} else if (mode == 1) {
		MPI_Gather(s, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, root, comm);
	} else {
		int idx;

		MPI_Igather(s, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, root, comm, &q);
		MPI_Waitany(1, &q, &idx, MPI_STATUS_IGNORE);
	}
	snprintf(name, sizeof(name), "%sgather %zuB root %d%s", mode == 1 ? "" : "i", block, root,
		 mode == 2 ? " in place" : "");
	report(name, rb, want, rank == root ? n : 0);
	free(s);
	free(rb);
	free(want);
}

static void check_allgather(MPI_Comm comm, size_t block, int mode)
{
	size_t n = block * (size_t)size;
	unsigned char *s = xmalloc(block), *rb = xmalloc(n), *want = xmalloc(n);
	char name[96];
	MPI_Request q;

	fill(s, block, rank, 5);
	for (int p = 0; p < size; p++)
		fill(want + (size_t)p * block, block, p, 5);
	memset(rb, 0xee, n);
	if (mode == 2) {
		memcpy(rb + (size_t)rank * block, s, block);
		MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, (int)block, MPI_BYTE, comm, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
	} else if (mode == 1) {
		MPI_Allgather(s, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, comm);
	} else {
		int out, idx;

		MPI_Iallgather(s, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, comm, &q);
		MPI_Waitsome(1, &q, &out, &idx, MPI_STATUSES_IGNORE);
	}
	snprintf(name, sizeof(name), "%sallgather %zuB%s", mode == 1 ? "" : "i", block, mode == 2 ? " in place" : "");
	report(name, rb, want, n);
	free(s);
	free(rb);
	free(want);
}

/* ---- mixed with point-to-point, many in flight, what falls back ------------ */

/* Non-byte datatypes: the bytes moved are count x the type's size. */
static void check_typed(void)
{
	enum { N = 300 };
	double d[N], dw[N];
	int *s = xmalloc(sizeof(int) * N * (size_t)size), *rb = xmalloc(sizeof(int) * N * (size_t)size),
	    *w = xmalloc(sizeof(int) * N * (size_t)size);
	MPI_Request q;

	for (int i = 0; i < N; i++)
		dw[i] = i * 0.5 + 1, d[i] = rank == size - 1 ? dw[i] : -1;
	MPI_Ibcast(d, N, MPI_DOUBLE, size - 1, MPI_COMM_WORLD, &q);
	MPI_Wait(&q, MPI_STATUS_IGNORE);
	report("ibcast doubles", d, dw, sizeof(d));
	for (int p = 0; p < size; p++)
		for (int i = 0; i < N; i++) {
			s[p * N + i] = rank * 100000 + p * 1000 + i;
			w[p * N + i] = p * 100000 + rank * 1000 + i;
			rb[p * N + i] = -1;
		}
	MPI_Ialltoall(s, N, MPI_INT, rb, N, MPI_INT, MPI_COMM_WORLD, &q);
	MPI_Wait(&q, MPI_STATUS_IGNORE);
	report("ialltoall ints", rb, w, sizeof(int) * N * (size_t)size);
	free(s);
	free(rb);
	free(w);
}

/* An Ibcast, an Iallreduce and a ring exchange (Isend/Irecv) in one
 * Waitall, then again completed by Waitany, Testsome, Testall, Testany and
 * MPI_Request_get_status loops. */
static void check_mixed(int round)
{
	enum { N = 4096 };
	static unsigned char bc[N], want[N], ring_in[N], ring_out[N], ring_want[N];
	int ar_in = rank + 1, ar_out = 0, left = (rank + size - 1) % size, right = (rank + 1) % size;
	MPI_Request q[4];
	char name[64];

	fill(want, N, round % size, 6);
	if (rank == round % size)
		memcpy(bc, want, N);
	else
		memset(bc, 0, N);
	fill(ring_out, N, rank, 7 + round);
	fill(ring_want, N, left, 7 + round);
	MPI_Irecv(ring_in, N, MPI_BYTE, left, 9, MPI_COMM_WORLD, &q[0]);
	MPI_Ibcast(bc, N, MPI_BYTE, round % size, MPI_COMM_WORLD, &q[1]);
	MPI_Isend(ring_out, N, MPI_BYTE, right, 9, MPI_COMM_WORLD, &q[2]);
	MPI_Iallreduce(&ar_in, &ar_out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[3]);
	if (round == 0) {
		MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
	} else if (round == 1) {
		for (int k = 0; k < 4; k++) {
			int idx;

			MPI_Waitany(4, q, &idx, MPI_STATUS_IGNORE);
		}
	} else if (round == 3) {
		int flag = 0;

		while (!flag)
			MPI_Testall(4, q, &flag, MPI_STATUSES_IGNORE);
	} else if (round == 4) {
		int done = 0;

		while (done < 4) {
			int idx, flag = 0;

			MPI_Testany(4, q, &idx, &flag, MPI_STATUS_IGNORE);
			done += flag && idx != MPI_UNDEFINED;
		}
	} else if (round == 5) {
		/* Polled with MPI_Request_get_status (which frees nothing), then waited. */
		for (int k = 0; k < 4; k++) {
			int flag = 0;

			while (!flag)
				MPI_Request_get_status(q[k], &flag, MPI_STATUS_IGNORE);
		}
		MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
	} else {
		int left_n = 4, out, idx[4];

		while (left_n > 0) {
			MPI_Testsome(4, q, &out, idx, MPI_STATUSES_IGNORE);
			if (out != MPI_UNDEFINED)
				left_n -= out;
		}
	}
	snprintf(name, sizeof(name), "mixed %d bcast", round);
	report(name, bc, want, N);
	snprintf(name, sizeof(name), "mixed %d ring", round);
	report(name, ring_in, ring_want, N);
	snprintf(name, sizeof(name), "mixed %d allreduce", round);
	{
		int w = size * (size + 1) / 2;

		report(name, &ar_out, &w, sizeof(w));
	}
}

/* Many allreduces in flight (more than emunic's three), waited newest first. */
static void check_many(int many)
{
	MPI_Request *q = xmalloc(sizeof(*q) * (size_t)many);
	long long *in = xmalloc(sizeof(long long) * (size_t)many), *out = xmalloc(sizeof(long long) * (size_t)many);
	long long want = 0;
	int bad = 0;

	for (int r = 0; r < size; r++)
		want += r;
	for (int k = 0; k < many; k++) {
		in[k] = rank + (long long)k * 1000;
		MPI_Iallreduce(&in[k], &out[k], 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD, &q[k]);
	}
	for (int k = many - 1; k >= 0; k--)
		MPI_Wait(&q[k], MPI_STATUS_IGNORE);
	for (int k = 0; k < many; k++)
		bad += out[k] != want + (long long)k * 1000 * size;
	report("many in flight", &bad, &(int){ 0 }, sizeof(bad));
	free(q);
	free(in);
	free(out);
}

/* --free-active, an erroneous program: MPI_Request_free on an allreduce in
 * flight (MPI-3.1 5.12: erroneous for a nonblocking collective).  Open MPI
 * and MPICH both refuse it (MPI_ERR_REQUEST, MPICH MPI_ERR_OTHER), the
 * request left as it was: under MPI_ERRORS_RETURN the program still waits
 * for it. */
static int check_freed(void)
{
	long long in, out, want = 0;
	int bad = 0, refused = 0;

	for (int r = 0; r < size; r++)
		want += r;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	for (int k = 0; k < 4; k++) {
		MPI_Request q;
		int e;

		in = rank + k;
		MPI_Iallreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD, &q);
		e = MPI_Request_free(&q);
		refused += e != MPI_SUCCESS;
		if (q != MPI_REQUEST_NULL)
			MPI_Wait(&q, MPI_STATUS_IGNORE);
		bad += out != want + (long long)k * size;
	}
	printf("emunic-mpi-colls: rank %d: MPI_Request_free on an iallreduce: refused %d of 4, "
	       "results %s\n", rank, refused, bad ? "WRONG" : "right");
	return bad;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *t)
{
	(void)t;
	for (int i = 0; i < *len; i++)
		((int *)inout)[i] += ((int *)in)[i];
}

/* Communicators other than MPI_COMM_WORLD's ranks: a split (its own
 * group: offloaded over a device of its own), MPI_COMM_SELF (one rank) and
 * an intercommunicator between the split's halves (both left to MPI). */
static void check_comms(void)
{
	MPI_Comm half, inter;
	int hr, buf[16], want[16];
	MPI_Request q;

	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);	/* reversed order */
	MPI_Comm_rank(half, &hr);
	check_bcast(half, "half", 1000, 0, 0);
	check_allreduce(half, "half", 0, T_I32, 100, 0);
	check_bcast(half, "half", 10, 0, 0);
	check_bcast(MPI_COMM_SELF, "self", 100, 0, 0);
	if (size >= 2) {
		/* Group 0 (even ranks) broadcasts from its rank 0 to group 1;
		 * each half's rank 0 (its leader) is its highest world rank. */
		int top = size - 1, last_even = top - top % 2, last_odd = top % 2 ? top : top - 1;

		MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? last_even : last_odd, 5, &inter);
		for (int i = 0; i < 16; i++)
			want[i] = 1000 + i, buf[i] = rank % 2 == 0 && hr == 0 ? want[i] : -1;
		MPI_Ibcast(buf, 16, MPI_INT, rank % 2 ? 0 : hr == 0 ? MPI_ROOT : MPI_PROC_NULL, inter, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
		report("intercomm bcast", buf, want, rank % 2 || hr == 0 ? sizeof(buf) : 0);
		MPI_Comm_free(&inter);
	}
	MPI_Comm_free(&half);
}

/* Orders MPI allows that a lazily connecting interposer would stall on:
 * rank 0 starts a collective and then sends to rank 1, which receives
 * before it starts that collective; and collectives started on two
 * communicators in different orders on different ranks (legal for
 * nonblocking ones).  The communicators are new (a dup, a Cartesian one,
 * made with MPI_Comm_create), so nothing of theirs exists before. */
static void check_orders(void)
{
	static const char *const cname[3] = { "dup-a", "cart", "created" };
	unsigned char b[3][64], want[3][64];
	MPI_Comm c[3];
	MPI_Request q[3];
	MPI_Group g;
	int dims = size, period = 0, token = 0;

	MPI_Comm_dup(MPI_COMM_WORLD, &c[0]);
	MPI_Cart_create(MPI_COMM_WORLD, 1, &dims, &period, 0, &c[1]);
	MPI_Comm_group(MPI_COMM_WORLD, &g);
	MPI_Comm_create(MPI_COMM_WORLD, g, &c[2]);
	MPI_Group_free(&g);
	for (int i = 0; i < 3; i++) {
		fill(want[i], sizeof(want[i]), i, 7);
		if (rank == i % size)
			memcpy(b[i], want[i], sizeof(b[i]));
		else
			memset(b[i], 0xee, sizeof(b[i]));
	}
	/* Rank 0: collective, then a send; rank 1: the receive first. */
	if (rank == 1)
		MPI_Recv(&token, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Ibcast(b[0], sizeof(b[0]), MPI_BYTE, 0, c[0], &q[0]);
	if (rank == 0)
		MPI_Send(&token, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
	/* The other two started in opposite orders on odd and even ranks. */
	for (int j = 0; j < 2; j++) {
		int i = rank % 2 ? 2 - j : 1 + j;

		MPI_Ibcast(b[i], sizeof(b[i]), MPI_BYTE, i % size, c[i], &q[i]);
	}
	MPI_Waitall(3, q, MPI_STATUSES_IGNORE);
	for (int i = 0; i < 3; i++) {
		char name[64];

		snprintf(name, sizeof(name), "ibcast %s in order %d", cname[i], i);
		report(name, b[i], want[i], sizeof(b[i]));
		MPI_Comm_free(&c[i]);
	}
}

/* What the interposer must leave to MPI: a user-defined op, a derived
 * datatype. */
static void check_fallbacks(void)
{
	MPI_Op op;
	MPI_Datatype vec;
	MPI_Request q;
	int in = rank + 1, out = 0, want = size * (size + 1) / 2;
	int buf[8], wbuf[8];

	MPI_Op_create(user_sum, 1, &op);
	MPI_Iallreduce(&in, &out, 1, MPI_INT, op, MPI_COMM_WORLD, &q);
	MPI_Wait(&q, MPI_STATUS_IGNORE);
	report("fallback user op", &out, &want, sizeof(out));
	MPI_Op_free(&op);

	MPI_Type_contiguous(8, MPI_INT, &vec);
	MPI_Type_commit(&vec);
	for (int i = 0; i < 8; i++)
		wbuf[i] = i * 3 + 1, buf[i] = rank == 0 ? wbuf[i] : -1;
	MPI_Ibcast(buf, 1, vec, 0, MPI_COMM_WORLD, &q);
	MPI_Wait(&q, MPI_STATUS_IGNORE);
	report("fallback derived type", buf, wbuf, sizeof(buf));
	MPI_Type_free(&vec);
}

int main(int argc, char **argv)
{
	static const size_t bsizes[] = { 0, 1, 8, 1000, 65536 };
	static const size_t blocks[] = { 0, 1, 8, 4096 };
	static const struct { int op, t; } pairs[] = {
		{ 0, T_I32 }, { 0, T_DBL }, { 0, T_U64 }, { 1, T_I64 }, { 1, T_FLT }, { 2, T_FLT }, { 2, T_I8 },
		{ 3, T_U16 }, { 3, T_DBL }, { 4, T_I8 }, { 5, T_I32 }, { 6, T_U32 }, { 7, T_U64 }, { 8, T_I16 },
		{ 9, T_U8 }, { 10, T_DI }, { 11, T_2I }, { 11, T_FI }, { 10, T_SI }, { 11, T_LI },
	};
	int many = 10, missing = argc == 2 && !strcmp(argv[1], "--missing");
	int multiple = argc == 2 && !strcmp(argv[1], "--thread-multiple"), level;
	int free_active = argc == 2 && !strcmp(argv[1], "--free-active");
	MPI_Comm dup;

	/* Whole lines: a block-buffered stdout flushes mid-line, and the
	 * launcher's interleaving with stderr (the interposer's verbose lines)
	 * then splits a result line in two. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "--many"))
		many = atoi(argv[2]);
	else if (argc != 1 && !missing && !multiple && !free_active) {
		fprintf(stderr, "usage: emunic-mpi-colls [--many N | --missing | --thread-multiple | --free-active]\n");
		return 2;
	}
	if (multiple)
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
	else
		MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (missing) {
		char b[64] = "";
		MPI_Request q;
		int e = MPI_SUCCESS;

		MPI_Ibcast(b, sizeof(b), MPI_BYTE, 0, MPI_COMM_WORLD, &q);
		MPI_Wait(&q, MPI_STATUS_IGNORE);
		if (rank == 0) {
			MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
			MPI_Ibcast(b, sizeof(b), MPI_BYTE, 1, MPI_COMM_WORLD, &q);
			e = MPI_Wait(&q, MPI_STATUS_IGNORE);
			printf("emunic-mpi-colls: rank 0: the wait returned %s\n", e == MPI_SUCCESS ? "MPI_SUCCESS" :
			       "an error");
		}
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Finalize();
		return e == MPI_SUCCESS ? 0 : 1;
	}
	if (free_active) {
		int bad = check_freed();

		MPI_Finalize();
		return bad ? 1 : 0;
	}
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);

	for (size_t i = 0; i < sizeof(bsizes) / sizeof(bsizes[0]); i++)
		for (int root = 0; root < size; root++)
			check_bcast(MPI_COMM_WORLD, "world", bsizes[i], root, 0);
	check_bcast(dup, "dup", 1000, size - 1, 0);
	check_bcast(MPI_COMM_WORLD, "world", 1000, 0, 1);
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		check_allreduce(MPI_COMM_WORLD, "world", pairs[i].op, pairs[i].t, 7, 0);
		check_allreduce(MPI_COMM_WORLD, "world", pairs[i].op, pairs[i].t, 1000, 0);
	}
	check_allreduce(MPI_COMM_WORLD, "world", 0, T_DBL, 1, 0);
	check_allreduce(MPI_COMM_WORLD, "world", 0, T_I32, 100, 2);
	check_allreduce(dup, "dup", 3, T_I64, 100, 0);
	MPI_Comm_free(&dup);
	check_allreduce(MPI_COMM_WORLD, "world", 0, T_I32, 100, 1);
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
		check_alltoall(MPI_COMM_WORLD, blocks[i], 0);
		check_allgather(MPI_COMM_WORLD, blocks[i], 0);
		for (int root = 0; root < size; root++)
			check_gather(MPI_COMM_WORLD, blocks[i], root, 0);
	}
	check_alltoall(MPI_COMM_WORLD, 100, 2);
	check_allgather(MPI_COMM_WORLD, 100, 2);
	check_gather(MPI_COMM_WORLD, 100, size - 1, 2);
	check_alltoall(MPI_COMM_WORLD, 100, 1);
	check_allgather(MPI_COMM_WORLD, 100, 1);
	check_gather(MPI_COMM_WORLD, 100, 0, 1);
	for (int round = 0; round < 6; round++)
		check_mixed(round);
	check_typed();
	check_many(many);
	check_fallbacks();
	check_orders();
	check_comms();

	printf("emunic-mpi-colls: rank %d: %d checks, %d failed\n", rank, checks, failed);
	MPI_Finalize();
	return failed ? 1 : 0;
}
