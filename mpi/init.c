/* SPDX-License-Identifier: MIT */
/*
 * MPI_Init, MPI_Init_thread and MPI_Finalize: emunic's device opened over
 * MPI_COMM_WORLD after MPI's own start (dev.c: bootstrapped through PMPI,
 * no PMIx needed), and closed before MPI's own end, after every
 * communicator's collectives are drained and destroyed.
 *
 * Environment: EMUNIC_MPI=0 (offload nothing), EMUNIC_MPI_VERBOSE=1 (say
 * why each call falls back; counts at MPI_Finalize), EMUNIC_MPI_BLOCKING=1
 * (offload the blocking forms too), EMUNIC_MPI_MAX_BYTES (default 1 MiB),
 * EMUNIC_MPI_TIMEOUT_MS (bound on one wait call for an offloaded
 * collective, default 300000, as long as a slow rank may legitimately take;
 * -1: none), EMUNIC_MPI_COMMS (communicators with objects at a time,
 * MPI_COMM_WORLD included, default 4: each pins a few copies of
 * EMUNIC_MPI_MAX_BYTES per kind).  The device's own variables (EMUNIC_DEVICE,
 * EMUNIC_CPU, EMUNIC_FAULTS, ...) apply as to any emunic program.
 */
#include "mpi/mpi_int.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NSET = 5 };
_Static_assert((int)NSET <= (int)MPI_MINMAX_N, "the settings fit one mpi_min_max");

/* An integer variable in [lo, hi]; a bad one is named and the default kept. */
static long long env_num(const char *name, long long lo, long long hi, long long dflt)
{
	const char *s = getenv(name);
	char *end;
	long long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || *end || v < lo || v > hi) {
		mpi_say("ignoring %s=%s (want a number from %lld to %lld); using %lld", name, s, lo, hi, dflt);
		return dflt;
	}
	return v;
}

static int has_device(void)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	if (l)
		ibv_free_device_list(l);
	return n > 0;
}

/* The settings every rank must share (each decides alone whether a call
 * offloads): the lowest over the ranks, a difference said. */
static void agree_settings(long long *v, const char *const *name, int n)
{
	long long lo[NSET], hi[NSET];

	if (mpi_min_max(MPI_COMM_WORLD, v, n, lo, hi)) {
		v[0] = 0;		/* off */
		return;
	}
	for (int i = 0; i < n; i++) {
		if (lo[i] != hi[i] && v[i] != lo[i])
			mpi_say("%s differs between ranks: using the lowest, %lld", name[i], lo[i]);
		v[i] = lo[i];
	}
}

/* The ranks on this node (MPI_COMM_TYPE_SHARED), for where the device
 * pins its core and how long a waiter assists (emunic-run's environment
 * wins; not put in the environment: the MPI library's threads run). */
static void set_local_ranks(void)
{
	MPI_Comm node;
	int rank, size;

	if (emunic_local_size() ||
	    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
		return;
	PMPI_Comm_rank(node, &rank);
	PMPI_Comm_size(node, &size);
	PMPI_Comm_free(&node);
	emunic_local_ranks_set(rank, size);
}

static void setup(void)
{
	static const char *const name[NSET] = { "EMUNIC_MPI (or the attribute)", "EMUNIC_MPI_BLOCKING",
						"EMUNIC_MPI_MAX_BYTES", "EMUNIC_MPI_COMMS",
						"the thread level (1: below MPI_THREAD_MULTIPLE)" };
	long long v[NSET];
	int level = MPI_THREAD_SINGLE;
	bool keyval;

	PMPI_Comm_rank(MPI_COMM_WORLD, &mpi_g.rank);
	emunic_log_set_rank(mpi_g.rank);
	mpi_g.verbose = env_num("EMUNIC_MPI_VERBOSE", 0, 1, 0);
	mpi_g.timeout_ms = (int)env_num("EMUNIC_MPI_TIMEOUT_MS", -1, 1 << 30, 300000);
	v[0] = env_num("EMUNIC_MPI", 0, 1, 1);
	v[1] = env_num("EMUNIC_MPI_BLOCKING", 0, 1, 0);
	v[2] = env_num("EMUNIC_MPI_MAX_BYTES", 0, 1 << 30, 1 << 20);
	v[3] = env_num("EMUNIC_MPI_COMMS", 1, 1 << 20, 4);
	PMPI_Query_thread(&level);
	v[4] = level < MPI_THREAD_MULTIPLE;
	keyval = v[0] && mpi_comm_keyval_init() == MPI_SUCCESS;
	if (v[0] && !keyval) {
		mpi_say("cannot make its communicator attribute");
		v[0] = 0;
	}
	agree_settings(v, name, NSET);
	mpi_g.blocking = v[1];
	mpi_g.max_bytes = (size_t)v[2];
	mpi_g.max_comms = (unsigned)v[3];
	mpi_g.concurrent = !v[4];
	if (!v[0]) {
		if (keyval)
			PMPI_Comm_free_keyval(&mpi_g.keyval);
		if (mpi_g.verbose)
			mpi_say("EMUNIC_MPI=0: every collective stays MPI's");
		return;
	}
	set_local_ranks();
	/* Every rank takes part in the open, one without a device failing
	 * it at once, so none is left inside an exchange. */
	if (mpi_dev_open(MPI_COMM_WORLD, has_device(), &mpi_g.world)) {
		mpi_say("%severy collective stays MPI's%s", has_device() ? "" : "no RDMA device here: ",
			has_device() ? "" : " (see emunic-info)");
		PMPI_Comm_free_keyval(&mpi_g.keyval);
		return;
	}
	mpi_g.on = true;
	if (mpi_g.verbose)
		mpi_say("offloading collectives on %s (max %zu bytes, %s forms; local rank %d of %d)",
			emunic_dev_name(mpi_g.world.dev), mpi_g.max_bytes,
			mpi_g.blocking ? "nonblocking and blocking" : "nonblocking",
			emunic_local_rank(), emunic_local_size());
	mpi_comm_setup(MPI_COMM_WORLD);
}

int MPI_Init(int *argc, char ***argv)
{
	int e = PMPI_Init(argc, argv);

	if (e == MPI_SUCCESS)
		setup();
	return e;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int e = PMPI_Init_thread(argc, argv, required, provided);

	if (e == MPI_SUCCESS)
		setup();
	return e;
}

static void print_counts(void)
{
	for (int k = 0; k < MK_NKIND; k++)
		if (mpi_g.offloaded[k] || mpi_g.fellback[k])
			mpi_say("%s: %lu offloaded, %lu fell back", mpi_kind_name(k), mpi_g.offloaded[k],
				mpi_g.fellback[k]);
}

int MPI_Finalize(void)
{
	if (mpi_g.on) {
		mpi_progress();
		pthread_mutex_lock(&mpi_g.lock);
		mpi_comm_fini_all();
		pthread_mutex_unlock(&mpi_g.lock);
		mpi_progress();		/* what the drain finished reaches MPI */
		mpi_req_fini();
		mpi_dev_close(&mpi_g.world);
		mpi_g.on = false;
	}
	if (mpi_g.verbose)
		print_counts();
	return PMPI_Finalize();
}
