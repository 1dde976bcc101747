/* SPDX-License-Identifier: MIT */
/*
 * The calls that make communicators, intercepted so a new communicator gets
 * its objects (comm.c) while its ranks are in the same collective call,
 * never later at a first collective that its ranks may reach in different
 * orders.  A communicator made by any other call (MPI_Comm_idup, whose
 * completion no rank waits for together) leaves its collectives to MPI.
 */
#include "mpi/mpi_int.h"

/* After a call that made *out (MPI_COMM_NULL on a rank not in it).  Under
 * MPI_THREAD_MULTIPLE two threads may each be making one, in different
 * orders on different ranks, and setup's agreements (under the lock) would
 * wait for each other across ranks: such communicators stay MPI's. */
static int made(int e, const MPI_Comm *out)
{
	if (e != MPI_SUCCESS || !mpi_g.on || *out == MPI_COMM_NULL)
		return e;
	if (mpi_g.concurrent)
		mpi_comm_mark(*out, "made under MPI_THREAD_MULTIPLE, where communicators may be made concurrently");
	else
		mpi_comm_setup(*out);
	return e;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	return made(PMPI_Comm_dup(comm, newcomm), newcomm);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
	return made(PMPI_Comm_dup_with_info(comm, info, newcomm), newcomm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	return made(PMPI_Comm_split(comm, color, key, newcomm), newcomm);
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
	return made(PMPI_Comm_split_type(comm, split_type, key, info, newcomm), newcomm);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	return made(PMPI_Comm_create(comm, group, newcomm), newcomm);
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
	return made(PMPI_Comm_create_group(comm, group, tag, newcomm), newcomm);
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
	return made(PMPI_Intercomm_merge(intercomm, high, newintracomm), newintracomm);
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
		    MPI_Comm *comm_cart)
{
	return made(PMPI_Cart_create(comm_old, ndims, dims, periods, reorder, comm_cart), comm_cart);
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *new_comm)
{
	return made(PMPI_Cart_sub(comm, remain_dims, new_comm), new_comm);
}

int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[], int reorder,
		     MPI_Comm *comm_graph)
{
	return made(PMPI_Graph_create(comm_old, nnodes, index, edges, reorder, comm_graph), comm_graph);
}

int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int nodes[], const int degrees[], const int targets[],
			  const int weights[], MPI_Info info, int reorder, MPI_Comm *newcomm)
{
	return made(PMPI_Dist_graph_create(comm_old, n, nodes, degrees, targets, weights, info, reorder, newcomm),
		    newcomm);
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
				   const int sourceweights[], int outdegree, const int destinations[],
				   const int destweights[], MPI_Info info, int reorder, MPI_Comm *comm_dist_graph)
{
	return made(PMPI_Dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights, outdegree,
						    destinations, destweights, info, reorder, comm_dist_graph),
		    comm_dist_graph);
}
