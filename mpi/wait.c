/* SPDX-License-Identifier: MIT */
/*
 * MPI's Wait/Test family over lists that may mix offloaded collectives with
 * MPI's own requests.  Each first lets emunic's completions reach MPI
 * (mpi_progress: a finished offloaded collective's generalized request is
 * completed), then calls PMPI's own, so statuses, MPI_REQUEST_NULL entries,
 * errors and the freeing of requests stay MPI's.  The waits poll: they
 * cannot block in PMPI while an offloaded request is pending (MPI does not
 * know when emunic finishes it), so they alternate emunic's progress, MPI's
 * (mpi_req_wait_ours) and PMPI's test.  Lists with none of ours, in a
 * program with none live, go straight to PMPI.
 */
#include "mpi/mpi_int.h"

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
	if (mpi_req_any())
		mpi_req_wait_ours(1, req);
	return PMPI_Wait(req, st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status *sts)
{
	if (mpi_req_any())
		mpi_req_wait_ours(n, reqs);
	return PMPI_Waitall(n, reqs, sts);
}

/* Waitany/Waitsome end with the first to complete, ours or MPI's. */
int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st)
{
	long long since = mpi_now_ms();
	int flag = 0, e;

	if (!mpi_req_pending(n, reqs))
		return PMPI_Waitany(n, reqs, index, st);
	for (;;) {
		mpi_progress();
		e = PMPI_Testany(n, reqs, index, &flag, st);
		if (e != MPI_SUCCESS || flag)
			return e;
		if (!mpi_req_pending(n, reqs))
			return PMPI_Waitany(n, reqs, index, st);
		mpi_req_wait_step(n, reqs, since);
	}
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
	long long since = mpi_now_ms();
	int e;

	if (!mpi_req_pending(n, reqs))
		return PMPI_Waitsome(n, reqs, outcount, indices, sts);
	for (;;) {
		mpi_progress();
		e = PMPI_Testsome(n, reqs, outcount, indices, sts);
		if (e != MPI_SUCCESS || *outcount != 0)
			return e;
		if (!mpi_req_pending(n, reqs))
			return PMPI_Waitsome(n, reqs, outcount, indices, sts);
		mpi_req_wait_step(n, reqs, since);
	}
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
	if (mpi_req_any())
		mpi_progress();
	return PMPI_Test(req, flag, st);
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
	if (mpi_req_any())
		mpi_progress();
	return PMPI_Testall(n, reqs, flag, sts);
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
	if (mpi_req_any())
		mpi_progress();
	return PMPI_Testany(n, reqs, index, flag, st);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
	if (mpi_req_any())
		mpi_progress();
	return PMPI_Testsome(n, reqs, outcount, indices, sts);
}

/* A freed offloaded request still runs to its end (its buffers are in use
 * until then, as MPI says); MPI frees it once it is completed. */
int MPI_Request_free(MPI_Request *req)
{
	if (mpi_req_any() && req) {
		mpi_progress();
		/* On MPI_COMM_WORLD, as Open MPI raises its own. */
		if (mpi_req_refuse_free(*req)) {
			PMPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_REQUEST);
			return MPI_ERR_REQUEST;
		}
	}
	return PMPI_Request_free(req);
}

/* Open MPI's query_fn runs here too: let completions reach MPI first. */
int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *st)
{
	if (mpi_req_any())
		mpi_progress();
	return PMPI_Request_get_status(req, flag, st);
}

/* Cancelling a collective is erroneous in MPI; ours ignore it (cancel_fn),
 * MPI's get MPI's answer. */
int MPI_Cancel(MPI_Request *req)
{
	return PMPI_Cancel(req);
}
