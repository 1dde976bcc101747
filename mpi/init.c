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
 * -1: none).  The device's own variables (EMUNIC_DEVICE,
 * EMUNIC_CPU, EMUNIC_FAULTS, ...) apply as to any emunic program.
 */
#include "mpi/mpi_int.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void setup(void)
{
	PMPI_Comm_rank(MPI_COMM_WORLD, &mpi_g.rank);
	mpi_g.verbose = env_num("EMUNIC_MPI_VERBOSE", 0, 1, 0);
	mpi_g.blocking = env_num("EMUNIC_MPI_BLOCKING", 0, 1, 0);
	mpi_g.max_bytes = (size_t)env_num("EMUNIC_MPI_MAX_BYTES", 0, 1 << 30, 1 << 20);
	mpi_g.timeout_ms = (int)env_num("EMUNIC_MPI_TIMEOUT_MS", -1, 1 << 30, 300000);
	if (!env_num("EMUNIC_MPI", 0, 1, 1)) {
		if (mpi_g.verbose)
			mpi_say("EMUNIC_MPI=0: every collective stays MPI's");
		return;
	}
	emunic_log_set_rank(mpi_g.rank);
	if (mpi_comm_keyval_init() != MPI_SUCCESS) {
		mpi_say("cannot make its communicator attribute: every collective stays MPI's");
		return;
	}
	/* Every rank decides the same: one that failed alone would leave the
	 * others inside an exchange it never joins. */
	if (!mpi_dev_agree(MPI_COMM_WORLD, has_device())) {
		mpi_say("no RDMA device on %s: every collective stays MPI's (see emunic-info)",
			has_device() ? "some rank" : "this rank");
		return;
	}
	if (mpi_dev_open(MPI_COMM_WORLD, &mpi_g.world)) {
		mpi_say("every collective stays MPI's");
		return;
	}
	mpi_g.on = true;
	if (mpi_g.verbose)
		mpi_say("offloading collectives on %s (max %zu bytes, %s forms)", emunic_dev_name(mpi_g.world.dev),
			mpi_g.max_bytes, mpi_g.blocking ? "nonblocking and blocking" : "nonblocking");
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
