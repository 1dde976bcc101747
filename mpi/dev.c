/* SPDX-License-Identifier: MIT */
/*
 * An emunic device over a communicator's ranks: a custom emunic_boot whose
 * exchange is PMPI_Allgather on a private dup of the communicator (no PMIx
 * needed, and never in the way of the program's own traffic), then
 * emunic_dev_open.  MPI_COMM_WORLD gets one at MPI_Init; any other group,
 * at its first offloaded collective.
 */
#include "mpi/mpi_int.h"

#include <errno.h>

static int boot_allgather(void *ctx, const void *in, size_t len, void *out)
{
	MPI_Comm comm = *(MPI_Comm *)ctx;

	if (!len)
		return PMPI_Barrier(comm) == MPI_SUCCESS ? 0 : -EIO;
	if (len > (size_t)1 << 30)
		return -EMSGSIZE;
	return PMPI_Allgather(in, (int)len, MPI_BYTE, out, (int)len, MPI_BYTE, comm) == MPI_SUCCESS ? 0 : -EIO;
}

bool mpi_dev_agree(MPI_Comm comm, bool mine)
{
	int in = mine, all = 0;

	return PMPI_Allreduce(&in, &all, 1, MPI_INT, MPI_MIN, comm) == MPI_SUCCESS && all;
}

int mpi_dev_open(MPI_Comm comm, struct mpi_dev *d)
{
	int rank = 0, size = 1, r;

	*d = (struct mpi_dev){ .comm = MPI_COMM_NULL };
	if (PMPI_Comm_dup(comm, &d->comm) != MPI_SUCCESS)
		return -ENOMEM;
	PMPI_Comm_set_name(d->comm, "emunic-mpi");
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	r = emunic_boot_init_custom(rank, size, boot_allgather, &d->comm, &d->boot);
	if (!r)
		r = emunic_dev_open(d->boot, NULL, &d->dev);
	if (!mpi_dev_agree(d->comm, !r)) {
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
