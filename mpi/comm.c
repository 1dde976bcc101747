/* SPDX-License-Identifier: MIT */
/*
 * A communicator's emunic side, made where MPI is already collective: at
 * MPI_Init for MPI_COMM_WORLD, and when a call that makes a communicator
 * returns (commnew.c) for the others.  Never later: creating an object
 * connects QPs, which blocks until every rank of the communicator creates
 * it too, and at a rank's first collective its peers may be blocked in
 * point-to-point waiting for this rank (rank 0 "Ibcast; Send", rank 1
 * "Recv; Ibcast" is legal MPI), or start collectives on two communicators
 * in another order (legal for nonblocking ones) while the QPs of a shared
 * device pair up in creation order.
 *
 * MPI_COMM_WORLD's device (opened at MPI_Init) serves it and every
 * communicator congruent to it (a dup: the same ranks in the same order);
 * any other intracommunicator of two or more ranks gets a device of its
 * own over its group (dev.c).  Each communicator has an object per kind,
 * so their operations never mix.  Every step is agreed over the
 * communicator's ranks, so they all offload it or all leave it to MPI.
 * The state hangs on the communicator as an attribute, so MPI_Comm_free
 * drains and destroys it.
 */
#include "mpi/mpi_int.h"

#include <stdio.h>
#include <stdlib.h>

static void destroy_colls(struct mpi_comm *mc)
{
	for (int k = 0; k < MK_NKIND; k++)
		if (mc->coll[k]) {
			int r = emunic_coll_destroy(mc->coll[k]);

			if (r)
				mpi_say("%s: destroying its collective object failed (%d)", mpi_kind_name(k), r);
			mc->coll[k] = NULL;
		}
}

static void comm_destroy(struct mpi_comm *mc)
{
	mpi_req_drain(mc);
	destroy_colls(mc);
	mpi_dev_close(&mc->own);
	mc->dev = NULL;
	if (mc->counted)
		mpi_g.ncomms--;
	mc->counted = false;
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

/* Whether every rank of comm is in this MPI_COMM_WORLD: the settings and
 * the device were agreed within it only.  Each rank finds the same. */
static bool within_world(MPI_Comm comm, int size)
{
	MPI_Group g, w;
	int *in = malloc(2 * (size_t)size * sizeof(int)), ok = in != NULL;

	if (!ok || PMPI_Comm_group(comm, &g) != MPI_SUCCESS) {
		free(in);
		return false;
	}
	PMPI_Comm_group(MPI_COMM_WORLD, &w);
	for (int i = 0; i < size; i++)
		in[i] = i;
	PMPI_Group_translate_ranks(g, size, in, w, in + size);
	for (int i = 0; i < size; i++)
		ok = ok && in[size + i] != MPI_UNDEFINED;
	PMPI_Group_free(&g);
	PMPI_Group_free(&w);
	free(in);
	return ok;
}

/* Why comm cannot offload whatever the ranks agree (NULL: it may);
 * congruent: it would use the world's device.  The same on every rank. */
static const char *why_not(MPI_Comm comm, bool *congruent)
{
	int inter = 0, cmp = MPI_UNEQUAL, size = 0;

	*congruent = false;
	PMPI_Comm_test_inter(comm, &inter);
	if (inter)
		return "an intercommunicator";
	PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
	*congruent = cmp == MPI_IDENT || cmp == MPI_CONGRUENT;
	PMPI_Comm_size(comm, &size);
	if (!*congruent && size < 2)
		return "a communicator of one rank";
	if (!*congruent && !within_world(comm, size))
		return "it spans more than one MPI_COMM_WORLD (spawned or connected processes)";
	return NULL;
}

/* comm's state, new, without objects (why: why it never has any); lock held. */
static struct mpi_comm *comm_new(MPI_Comm comm, const char *why)
{
	struct mpi_comm *mc = calloc(1, sizeof(*mc));

	if (!mc)
		return NULL;
	mc->comm = comm;
	snprintf(mc->label, sizeof(mc->label), "communicator 0x%x", (unsigned)PMPI_Comm_c2f(comm));
	mc->own.comm = MPI_COMM_NULL;
	mc->why = why;
	PMPI_Comm_rank(comm, &mc->rank);
	PMPI_Comm_size(comm, &mc->size);
	if (PMPI_Comm_set_attr(comm, mpi_g.keyval, mc) != MPI_SUCCESS) {
		free(mc);
		return NULL;
	}
	mc->next = mpi_g.comms;
	mpi_g.comms = mc;
	return mc;
}

struct mpi_comm *mpi_comm_get(MPI_Comm comm)
{
	const char *why;
	bool congruent;
	int found = 0;
	void *val;

	if (PMPI_Comm_get_attr(comm, mpi_g.keyval, &val, &found) == MPI_SUCCESS && found)
		return val;
	/* Not seen made: its ranks never agreed on objects for it. */
	why = why_not(comm, &congruent);
	return comm_new(comm, why ? why : "made by a call the interposer does not see (MPI_Comm_idup, say)");
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

/* Every kind's object, in the same order on every rank; stops at the first
 * failure (the peers' create of that kind then fails too, connecting). */
static int create_colls(struct mpi_comm *mc)
{
	struct emunic_coll_attr a;
	int r = 0;

	for (int k = 0; k < MK_NKIND && !r; k++) {
		emunic_coll_attr_init(&a);
		a.kind = coll_kind(k);
		a.conn = EMUNIC_COLL_DENSE;
		a.max_bytes = mpi_comm_limit(mc, k);
		/* Connecting and destroy's drain: emunic's 30 s, or the wait
		 * bound where that is shorter. */
		a.timeout_ms = mpi_g.timeout_ms > 0 && mpi_g.timeout_ms < 30000 ? mpi_g.timeout_ms : 0;
		r = emunic_coll_create(mc->dev, &a, &mc->coll[k]);
		if (r) {
			mpi_say("%s: creating its collective object failed (%d)", mpi_kind_name(k), r);
			mc->coll[k] = NULL;
		}
	}
	return r;
}

/* Whether this rank has room for one more communicator with objects (the
 * ranks then agree). */
static bool room(bool congruent)
{
	return mpi_g.ncomms < mpi_g.max_comms && !(congruent && mpi_g.world_out_of_step);
}

void mpi_comm_setup(MPI_Comm comm)
{
	struct mpi_comm *mc;
	struct mpi_dev scratch;		/* where this rank has no state: it still takes part */
	bool congruent, mine;
	const char *why = why_not(comm, &congruent);

	pthread_mutex_lock(&mpi_g.lock);
	mc = comm_new(comm, why);
	if (why)
		goto out;		/* every rank knows that alone */
	mine = mc && room(congruent);
	if (congruent) {
		if (!mpi_dev_agree(comm, mine)) {
			why = mpi_g.world_out_of_step ? "an earlier communicator's objects failed on some rank "
				"(the shared device's QPs could pair wrongly)" : "no room for it on some rank "
				"(EMUNIC_MPI_COMMS communicators offload already, or no memory)";
			goto out;
		}
		mc->dev = mpi_g.world.dev;
	} else {
		/* Agreed inside; a rank without room fails its open at once.
		 * Opened in place: the boot keeps the channel's address. */
		if (mpi_dev_open(comm, mine, mc ? &mc->own : &scratch)) {
			why = "no device over its ranks (see the lines above), or no room on some rank "
				"(EMUNIC_MPI_COMMS communicators offload already, or no memory)";
			goto out;
		}
		mc->dev = mc->own.dev;
	}
	if (!mpi_dev_agree(comm, !create_colls(mc))) {
		destroy_colls(mc);
		mpi_dev_close(&mc->own);
		mc->dev = NULL;
		/* The world's device paired some QPs on one rank and not on
		 * another: no later communicator may use it. */
		if (congruent)
			mpi_g.world_out_of_step = true;
		why = "its collective objects could not be created on every rank (see the lines above)";
		goto out;
	}
	mc->counted = true;
	mpi_g.ncomms++;
out:
	if (mc && why)
		mc->why = why;
	pthread_mutex_unlock(&mpi_g.lock);
}

void mpi_comm_mark(MPI_Comm comm, const char *why)
{
	pthread_mutex_lock(&mpi_g.lock);
	comm_new(comm, why);
	pthread_mutex_unlock(&mpi_g.lock);
}

struct emunic_coll *mpi_comm_coll(struct mpi_comm *mc, enum mpi_kind k)
{
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
