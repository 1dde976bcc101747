/* SPDX-License-Identifier: MIT */
/*
 * The intercepted collectives: MPI_Ibcast, MPI_Iallreduce, MPI_Ialltoall,
 * MPI_Igather, MPI_Iallgather, and with EMUNIC_MPI_BLOCKING=1 their
 * blocking forms.  Each resolves its arguments to emunic's (contiguous
 * bytes, CALC's type and op, MPI_IN_PLACE) or to the reason it cannot, and
 * then offloads or falls back to PMPI.  The decision uses only arguments
 * MPI requires to match on every rank (the type signature, root, op), so
 * every rank makes the same one (a program that passes different but
 * matching datatypes on different ranks should use EMUNIC_MPI=0).
 */
#include "mpi/mpi_int.h"

#include <ctype.h>
#include <stdio.h>

#define FALLBACK (-1)

static void say_fallback(enum mpi_kind k, bool blocking, MPI_Comm comm, const char *why)
{
	char name[MPI_MAX_OBJECT_NAME] = "";
	int len = 0;
	const char *n = mpi_kind_name(k);

	if (!mpi_g.verbose)
		return;
	if (comm != MPI_COMM_NULL)
		PMPI_Comm_get_name(comm, name, &len);
	/* "ibcast": MPI_Ibcast, or MPI_Bcast for the blocking form. */
	mpi_say("MPI_%c%s on %s falls back to MPI: %s", blocking ? toupper(n[1]) : 'I', n + (blocking ? 2 : 1),
		len ? name : "a communicator", why);
}

/* Posts a to emunic (MPI's error code) or says why not (FALLBACK). */
static int offload(struct mpi_args *a, bool blocking, MPI_Comm comm, const char *why, MPI_Request *req)
{
	struct mpi_comm *mc = NULL;
	char big[96];
	int e;

	if (!mpi_g.on)
		why = "emunic is off (EMUNIC_MPI=0, or no device: see the first lines)";
	if (!why && comm == MPI_COMM_NULL)
		why = "MPI_COMM_NULL";
	pthread_mutex_lock(&mpi_g.lock);
	if (!why && !(mc = mpi_comm_get(comm)))
		why = "no memory for the communicator's state";
	if (!why && mc->why)
		why = mc->why;
	if (!why) {
		size_t bytes = a->kind == MK_ALLREDUCE ? a->bytes * emunic_calc_size(a->type) : a->bytes;

		if (bytes > mpi_comm_limit(mc, a->kind)) {
			snprintf(big, sizeof(big), "%zu bytes, more than the %zu it offloads (EMUNIC_MPI_MAX_BYTES)",
				 bytes, mpi_comm_limit(mc, a->kind));
			why = big;
		}
	}
	if (!why && (a->root < 0 || a->root >= mc->size))
		why = "a root out of range";
	if (!why && !mpi_comm_coll(mc, a->kind))
		why = "it has no collective objects";
	if (why) {
		mpi_g.fellback[a->kind]++;
		pthread_mutex_unlock(&mpi_g.lock);
		say_fallback(a->kind, blocking, comm, why);
		return FALLBACK;
	}
	e = mpi_req_start(mc, a, req);
	mpi_g.offloaded[a->kind] += e == MPI_SUCCESS;
	pthread_mutex_unlock(&mpi_g.lock);
	return e;
}

/* The blocking forms: offloaded, then waited as MPI_Wait does. */
static int offload_wait(struct mpi_args *a, MPI_Comm comm, const char *why)
{
	MPI_Request req;
	int e = offload(a, true, comm, why, &req);

	if (e != MPI_SUCCESS)
		return e;
	mpi_req_wait_ours(1, &req);
	return PMPI_Wait(&req, MPI_STATUS_IGNORE);
}

/* ---- arguments -------------------------------------------------------------- */

static const char *bcast_args(void *buf, int count, MPI_Datatype type, int root, struct mpi_args *a)
{
	*a = (struct mpi_args){ .kind = MK_BCAST, .rbuf = buf, .root = root };
	return mpi_dtype_bytes(type, count, &a->bytes);
}

static const char *allreduce_args(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
				  struct mpi_args *a)
{
	*a = (struct mpi_args){ .kind = MK_ALLREDUCE, .sbuf = sbuf == MPI_IN_PLACE ? rbuf : sbuf, .rbuf = rbuf,
				.bytes = count < 0 ? 0 : (size_t)count };
	return count < 0 ? "a negative count" : mpi_dtype_calc(type, op, &a->type, &a->op);
}

/* A block sent and received: both contiguous, the same bytes.  in_place:
 * only the receive side describes it. */
static const char *block_args(const void *sbuf, int scount, MPI_Datatype stype, int rcount, MPI_Datatype rtype,
			      bool recv_side, size_t *block)
{
	size_t rb = 0;
	const char *why;

	if (sbuf == MPI_IN_PLACE)
		return mpi_dtype_bytes(rtype, rcount, block);
	why = mpi_dtype_bytes(stype, scount, block);
	if (!why && recv_side)
		why = mpi_dtype_bytes(rtype, rcount, &rb);
	if (!why && recv_side && rb != *block)
		why = "send and receive blocks of different sizes";
	return why;
}

static const char *alltoall_args(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
				 MPI_Datatype rtype, struct mpi_args *a)
{
	*a = (struct mpi_args){ .kind = MK_ALLTOALL, .sbuf = sbuf == MPI_IN_PLACE ? rbuf : sbuf, .rbuf = rbuf };
	return block_args(sbuf, scount, stype, rcount, rtype, true, &a->bytes);
}

static const char *gather_args(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
			       MPI_Datatype rtype, int root, MPI_Comm comm, struct mpi_args *a)
{
	int rank = -1;
	const char *why;

	PMPI_Comm_rank(comm, &rank);
	*a = (struct mpi_args){ .kind = MK_GATHER, .sbuf = sbuf, .rbuf = rank == root ? rbuf : NULL, .root = root };
	if (sbuf == MPI_IN_PLACE && rank != root)
		return "MPI_IN_PLACE on a rank that is not the root";
	why = block_args(sbuf, scount, stype, rcount, rtype, rank == root, &a->bytes);
	if (sbuf == MPI_IN_PLACE)
		a->sbuf = (const char *)rbuf + (size_t)root * a->bytes;
	return why;
}

static const char *allgather_args(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
				  MPI_Datatype rtype, MPI_Comm comm, struct mpi_args *a)
{
	int rank = 0;
	const char *why;

	PMPI_Comm_rank(comm, &rank);
	*a = (struct mpi_args){ .kind = MK_ALLGATHER, .sbuf = sbuf, .rbuf = rbuf };
	why = block_args(sbuf, scount, stype, rcount, rtype, true, &a->bytes);
	if (sbuf == MPI_IN_PLACE)
		a->sbuf = (const char *)rbuf + (size_t)rank * a->bytes;
	return why;
}

/* ---- the nonblocking collectives --------------------------------------------- */

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req)
{
	struct mpi_args a;
	const char *why = bcast_args(buf, count, type, root, &a);
	int e = offload(&a, false, comm, why, req);

	return e != FALLBACK ? e : PMPI_Ibcast(buf, count, type, root, comm, req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
		   MPI_Request *req)
{
	struct mpi_args a;
	const char *why = allreduce_args(sbuf, rbuf, count, type, op, &a);
	int e = offload(&a, false, comm, why, req);

	return e != FALLBACK ? e : PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req);
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
		  MPI_Comm comm, MPI_Request *req)
{
	struct mpi_args a;
	const char *why = alltoall_args(sbuf, scount, stype, rbuf, rcount, rtype, &a);
	int e = offload(&a, false, comm, why, req);

	return e != FALLBACK ? e : PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
		int root, MPI_Comm comm, MPI_Request *req)
{
	struct mpi_args a;
	const char *why = gather_args(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &a);
	int e = offload(&a, false, comm, why, req);

	return e != FALLBACK ? e : PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
		   MPI_Comm comm, MPI_Request *req)
{
	struct mpi_args a;
	const char *why = allgather_args(sbuf, scount, stype, rbuf, rcount, rtype, comm, &a);
	int e = offload(&a, false, comm, why, req);

	return e != FALLBACK ? e : PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

/* ---- the blocking ones: offloaded only with EMUNIC_MPI_BLOCKING=1 ------------ */

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
	struct mpi_args a;
	int e = FALLBACK;

	if (mpi_g.blocking)
		e = offload_wait(&a, comm, bcast_args(buf, count, type, root, &a));
	return e != FALLBACK ? e : PMPI_Bcast(buf, count, type, root, comm);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
	struct mpi_args a;
	int e = FALLBACK;

	if (mpi_g.blocking)
		e = offload_wait(&a, comm, allreduce_args(sbuf, rbuf, count, type, op, &a));
	return e != FALLBACK ? e : PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
		 MPI_Comm comm)
{
	struct mpi_args a;
	int e = FALLBACK;

	if (mpi_g.blocking)
		e = offload_wait(&a, comm, alltoall_args(sbuf, scount, stype, rbuf, rcount, rtype, &a));
	return e != FALLBACK ? e : PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
	       int root, MPI_Comm comm)
{
	struct mpi_args a;
	int e = FALLBACK;

	if (mpi_g.blocking)
		e = offload_wait(&a, comm, gather_args(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &a));
	return e != FALLBACK ? e : PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
		  MPI_Comm comm)
{
	struct mpi_args a;
	int e = FALLBACK;

	if (mpi_g.blocking)
		e = offload_wait(&a, comm, allgather_args(sbuf, scount, stype, rbuf, rcount, rtype, comm, &a));
	return e != FALLBACK ? e : PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}
