/* SPDX-License-Identifier: MIT */
/*
 * A communicator's emunic side.  emunic's collectives span every rank of a
 * device.  MPI_COMM_WORLD's device (opened at MPI_Init) serves it and every
 * communicator congruent to it (a dup: the same ranks in the same order);
 * any other intracommunicator of two or more ranks gets a device of its own
 * over its group (dev.c), opened at its first offloaded collective.  Each
 * communicator has objects of its own, so their operations never mix: an
 * object per kind, created at the kind's first offloaded call on it.
 * Opening and creating are collective, and so is that call (every rank
 * decides to offload from the same arguments).  The state hangs on the
 * communicator as an attribute, so MPI_Comm_free drains and destroys it.
 */
#include "mpi/mpi_int.h"

#include <stdlib.h>

static void comm_destroy(struct mpi_comm *mc)
{
	mpi_req_drain(mc);
	for (int k = 0; k < MK_NKIND; k++)
		if (mc->coll[k]) {
			int r = emunic_coll_destroy(mc->coll[k]);

			if (r)
				mpi_say("%s: destroying its collective object failed (%d)", mpi_kind_name(k), r);
			mc->coll[k] = NULL;
		}
	mpi_dev_close(&mc->own);
	mc->dev = NULL;
}

static void unlink_comm(struct mpi_comm *mc)
{
	for (struct mpi_comm **p = &mpi_g.comms; *p; p = &(*p)->next)
		if (*p == mc) {
			*p = mc->next;
			break;
		}
}

/* MPI_Comm_free (and MPI_Finalize for MPI_COMM_SELF's kind of cleanup). */
static int delete_fn(MPI_Comm comm, int keyval, void *val, void *extra)
{
	struct mpi_comm *mc = val;

	(void)comm, (void)keyval, (void)extra;
	pthread_mutex_lock(&mpi_g.lock);
	comm_destroy(mc);
	unlink_comm(mc);
	pthread_mutex_unlock(&mpi_g.lock);
	free(mc);
	return MPI_SUCCESS;
}

int mpi_comm_keyval_init(void)
{
	return PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, &mpi_g.keyval, NULL);
}

/* Why comm cannot offload (NULL: it can); congruent: it uses the world's device. */
static const char *why_not(const struct mpi_comm *mc, bool *congruent)
{
	int inter = 0, cmp = MPI_UNEQUAL;

	PMPI_Comm_test_inter(mc->comm, &inter);
	if (inter)
		return "an intercommunicator";
	PMPI_Comm_compare(mc->comm, MPI_COMM_WORLD, &cmp);
	*congruent = cmp == MPI_IDENT || cmp == MPI_CONGRUENT;
	if (!*congruent && mc->size < 2)
		return "a communicator of one rank";
	return NULL;
}

struct mpi_comm *mpi_comm_get(MPI_Comm comm)
{
	struct mpi_comm *mc;
	bool congruent = false;
	int found = 0;
	void *val;

	if (PMPI_Comm_get_attr(comm, mpi_g.keyval, &val, &found) == MPI_SUCCESS && found)
		return val;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return NULL;
	mc->comm = comm;
	mc->own.comm = MPI_COMM_NULL;
	PMPI_Comm_rank(comm, &mc->rank);
	PMPI_Comm_size(comm, &mc->size);
	mc->why = why_not(mc, &congruent);
	if (congruent)
		mc->dev = mpi_g.world.dev;
	if (PMPI_Comm_set_attr(comm, mpi_g.keyval, mc) != MPI_SUCCESS) {
		free(mc);
		return NULL;
	}
	mc->next = mpi_g.comms;
	mpi_g.comms = mc;
	return mc;
}

static enum emunic_coll_kind coll_kind(enum mpi_kind k)
{
	static const enum emunic_coll_kind map[MK_NKIND] = {
		[MK_BCAST] = EMUNIC_COLL_BCAST, [MK_ALLREDUCE] = EMUNIC_COLL_ALLREDUCE,
		[MK_ALLTOALL] = EMUNIC_COLL_ALLTOALL, [MK_GATHER] = EMUNIC_COLL_GATHER,
		[MK_ALLGATHER] = EMUNIC_COLL_ALLGATHER,
	};

	return map[k];
}

size_t mpi_comm_limit(const struct mpi_comm *mc, enum mpi_kind k)
{
	if (k == MK_BCAST || k == MK_ALLREDUCE)
		return mpi_g.max_bytes;
	return (mpi_g.max_bytes + (size_t)mc->size - 1) / (size_t)mc->size;
}

struct emunic_coll *mpi_comm_coll(struct mpi_comm *mc, enum mpi_kind k)
{
	struct emunic_coll_attr a;
	int r;

	if (mc->coll[k] || mc->create_failed[k] || mc->dev_failed)
		return mc->coll[k];
	if (!mc->dev) {
		if (mpi_dev_open(mc->comm, &mc->own)) {
			mpi_say("communicator %p: no device over its %d ranks: its collectives fall back to MPI",
				(void *)mc->comm, mc->size);
			mc->dev_failed = true;
			return NULL;
		}
		mc->dev = mc->own.dev;
	}
	emunic_coll_attr_init(&a);
	a.kind = coll_kind(k);
	a.conn = EMUNIC_COLL_DENSE;
	a.max_bytes = mpi_comm_limit(mc, k);
	/* Connecting and destroy's drain: emunic's 30 s, or the wait bound
	 * where that is shorter. */
	a.timeout_ms = mpi_g.timeout_ms > 0 && mpi_g.timeout_ms < 30000 ? mpi_g.timeout_ms : 0;
	r = emunic_coll_create(mc->dev, &a, &mc->coll[k]);
	if (r) {
		mpi_say("%s: creating its collective object failed (%d): it falls back to MPI from now on",
			mpi_kind_name(k), r);
		mc->create_failed[k] = true;
		mc->coll[k] = NULL;
	}
	return mc->coll[k];
}

void mpi_comm_fini_all(void)
{
	int found;
	void *val;

	/* Each is deleted from its communicator (delete_fn unlinks and frees
	 * it); MPI_COMM_WORLD's too, so nothing runs on it in PMPI_Finalize. */
	while (mpi_g.comms) {
		struct mpi_comm *mc = mpi_g.comms;

		if (PMPI_Comm_get_attr(mc->comm, mpi_g.keyval, &val, &found) == MPI_SUCCESS && found) {
			pthread_mutex_unlock(&mpi_g.lock);
			PMPI_Comm_delete_attr(mc->comm, mpi_g.keyval);
			pthread_mutex_lock(&mpi_g.lock);
		}
		if (mpi_g.comms == mc) {	/* not deleted: the attribute was gone */
			comm_destroy(mc);
			mpi_g.comms = mc->next;
			free(mc);
		}
	}
	PMPI_Comm_free_keyval(&mpi_g.keyval);
}
