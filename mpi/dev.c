/* SPDX-License-Identifier: MIT */
/*
 * An emunic device over a communicator's ranks: a custom emunic_boot whose
 * exchange is PMPI_Allgather on a private copy of the communicator (no PMIx
 * needed, and never in the way of the program's own traffic), then
 * emunic_dev_open.  MPI_COMM_WORLD gets one at MPI_Init; any other group,
 * when the call that makes its communicator returns (comm.c).
 *
 * A rank whose open fails (no such device, no memory) stops calling the
 * exchange, possibly before its first one, while the others are inside an
 * exchange or about to enter one.  So every exchange, and the end of every
 * open, is a round: an allreduce of each rank's state (in an exchange, done,
 * failed).  An exchange goes ahead only when every rank is in one; else it
 * fails here too.  The end repeats rounds until no rank is in an exchange,
 * so every rank leaves after the same round, knowing whether all opened.
 */
#include "mpi/mpi_int.h"

#include <errno.h>

enum { R_FAILED = -1, R_DONE = 0, R_EXCHANGE = 1 };

int mpi_min_max(MPI_Comm comm, const long long *v, int n, long long *lo, long long *hi)
{
	long long in[2 * MPI_MINMAX_N], out[2 * MPI_MINMAX_N];

	if (n < 1 || n > MPI_MINMAX_N)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		in[i] = v[i], in[n + i] = -v[i];	/* the highest is minus the lowest negative */
	if (PMPI_Allreduce(in, out, 2 * n, MPI_LONG_LONG, MPI_MIN, comm) != MPI_SUCCESS)
		return -EIO;
	for (int i = 0; i < n; i++) {
		lo[i] = out[i];
		if (hi)
			hi[i] = -out[n + i];
	}
	return 0;
}

/* One round: the lowest and highest state over the ranks. */
static int round_states(MPI_Comm comm, int state, int *lo, int *hi)
{
	long long v = state, l, h;

	if (mpi_min_max(comm, &v, 1, &l, &h))
		return -EIO;
	*lo = (int)l;
	*hi = (int)h;
	return 0;
}

static int boot_allgather(void *ctx, const void *in, size_t len, void *out)
{
	MPI_Comm comm = *(MPI_Comm *)ctx;
	int lo, hi;

	if (round_states(comm, R_EXCHANGE, &lo, &hi) || lo != R_EXCHANGE)
		return -ECONNABORTED;	/* a rank's open ended: this one's fails too */
	if (!len)
		return 0;		/* a barrier: the round was one */
	if (len > (size_t)1 << 30)
		return -EMSGSIZE;
	return PMPI_Allgather(in, (int)len, MPI_BYTE, out, (int)len, MPI_BYTE, comm) == MPI_SUCCESS ? 0 : -EIO;
}

/* After this rank's open (r: its result): true when every rank opened. */
static bool open_agreed(MPI_Comm comm, int r)
{
	int lo = R_FAILED, hi = R_EXCHANGE;

	while (hi == R_EXCHANGE)
		if (round_states(comm, r ? R_FAILED : R_DONE, &lo, &hi))
			return false;
	return lo == R_DONE;
}

bool mpi_dev_agree(MPI_Comm comm, bool mine)
{
	long long v = mine, all = 0;

	return !mpi_min_max(comm, &v, 1, &all, NULL) && all;
}

int mpi_dev_open(MPI_Comm comm, bool mine, struct mpi_dev *d)
{
	int rank = 0, size = 1, r = mine ? 0 : -ECANCELED;

	*d = (struct mpi_dev){ .comm = MPI_COMM_NULL };
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	/* A split, not a dup: a dup would run the program's attribute copy
	 * callbacks (and its free their delete ones) under our lock.  Errors
	 * on it end the job: a rank that returned from a round early would
	 * leave the others in it. */
	if (PMPI_Comm_split(comm, 0, rank, &d->comm) != MPI_SUCCESS)
		return -ENOMEM;
	PMPI_Comm_set_errhandler(d->comm, MPI_ERRORS_ARE_FATAL);
	PMPI_Comm_set_name(d->comm, "emunic-mpi");
	if (!r)
		r = emunic_boot_init_custom(rank, size, boot_allgather, &d->comm, &d->boot);
	if (!r)
		r = emunic_dev_open(d->boot, NULL, &d->dev);
	if (!open_agreed(d->comm, r)) {
		if (mine)
			mpi_say("emunic's device %s (%d)", r ? "did not open here" : "did not open on some rank", r);
		mpi_dev_close(d);
		return r ? r : -EIO;
	}
	return 0;
}

void mpi_dev_close(struct mpi_dev *d)
{
	if (d->dev)
		emunic_dev_close(d->dev);
	if (d->boot)
		emunic_boot_fini(d->boot);
	if (d->comm != MPI_COMM_NULL)
		PMPI_Comm_free(&d->comm);
	*d = (struct mpi_dev){ .comm = MPI_COMM_NULL };
}
