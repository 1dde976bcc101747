/* SPDX-License-Identifier: MIT */
/*
 * The ranks on this node (include/emunic.h, emunic_local_ranks_set): the
 * launcher's EMUNIC_LOCAL_RANK / EMUNIC_LOCAL_SIZE, else what PMIx or
 * libemunic-mpi found, kept here because setenv() would race the getenv()
 * of their threads.  A leaf: the bootstraps and the device call it.
 */
#include <emunic.h>
#include "emunic/base/base.h"

#include <limits.h>
#include <stdatomic.h>

static _Atomic int local_rank = -1, local_size = -1;

void emunic_local_ranks_set(int rank, int size)
{
	if (rank < 0 || size < 1 || rank >= size)
		return;
	atomic_store(&local_rank, rank);
	atomic_store(&local_size, size);
}

int emunic_local_rank(void)
{
	int v;

	if (emunic_env_int("EMUNIC_LOCAL_RANK", 0, INT_MAX, &v) == 0)
		return v;
	v = atomic_load(&local_rank);
	return v < 0 ? 0 : v;
}

int emunic_local_size(void)
{
	int v;

	if (emunic_env_int("EMUNIC_LOCAL_SIZE", 1, INT_MAX, &v) == 0)
		return v;
	v = atomic_load(&local_size);
	return v < 0 ? 0 : v;
}
