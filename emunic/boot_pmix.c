/* SPDX-License-Identifier: MIT */
/*
 * PMIx bootstrap: under prterun, Open MPI's mpirun or srun --mpi=pmix the
 * launcher is a PMIx server.  An allgather is a Put of this rank's share under
 * a per-round key, a Fence that collects data, and a Get of every rank's key.
 */
#include "emunic/boot.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pmix.h>

struct pmix_boot {
	pmix_proc_t me;
};

int emunic_boot_pmix_detect(void)
{
	return getenv("PMIX_NAMESPACE") && getenv("PMIX_RANK");
}

static int pmix_errno(pmix_status_t st)
{
	return st == PMIX_ERR_TIMEOUT ? -ETIMEDOUT : -EPROTO;
}

static int pmix_allgather(struct emunic_boot *b, const void *in, size_t len, void *out)
{
	struct pmix_boot *p = b->priv;
	pmix_info_t info[2];
	pmix_value_t v, *got;
	pmix_proc_t peer;
	pmix_status_t st;
	bool collect = true;
	int timeout = b->timeout_ms / 1000;
	char key[PMIX_MAX_KEYLEN + 1];
	int r;

	snprintf(key, sizeof(key), "emunic.ag.%u", b->round++);
	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_BYTE_OBJECT;
	/* PMIx copies the value; an empty share is one byte so Get finds the key. */
	v.data.bo.bytes = len ? (char *)in : (char *)"";
	v.data.bo.size = len ? len : 1;
	st = PMIx_Put(PMIX_GLOBAL, key, &v);
	if (st == PMIX_SUCCESS)
		st = PMIx_Commit();
	if (st != PMIX_SUCCESS)
		return emunic_err(pmix_errno(st), "bootstrap (pmix): put %s failed: %s", key, PMIx_Error_string(st));
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
	st = PMIx_Fence(NULL, 0, info, 2);
	PMIX_INFO_DESTRUCT(&info[0]);
	PMIX_INFO_DESTRUCT(&info[1]);
	if (st != PMIX_SUCCESS)
		return emunic_err(pmix_errno(st), "bootstrap (pmix): fence failed: %s", PMIx_Error_string(st));
	if (!len)
		return 0;
	PMIX_PROC_CONSTRUCT(&peer);
	memcpy(peer.nspace, p->me.nspace, sizeof(peer.nspace));
	for (r = 0; r < b->size; r++) {
		peer.rank = (pmix_rank_t)r;
		st = PMIx_Get(&peer, key, NULL, 0, &got);
		if (st != PMIX_SUCCESS)
			return emunic_err(pmix_errno(st), "bootstrap (pmix): get %s from rank %d failed: %s",
					  key, r, PMIx_Error_string(st));
		if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size != len) {
			PMIX_VALUE_RELEASE(got);
			return emunic_err(-EPROTO, "bootstrap (pmix): rank %d gave %s of another size",
					  r, key);
		}
		memcpy((char *)out + (size_t)r * len, got->data.bo.bytes, len);
		PMIX_VALUE_RELEASE(got);
	}
	return 0;
}

static void pmix_fini(struct emunic_boot *b)
{
	PMIx_Finalize(NULL, 0);
	free(b->priv);
}

static const struct emunic_boot_ops pmix_ops = {
	.name = "pmix",
	.allgather = pmix_allgather,
	.fini = pmix_fini,
};

/* PMIx knows the ranks on this node (emunic_local_ranks_set says why they
 * are not put in the environment: PMIx's own thread is running by now). */
static void set_local_ranks(const pmix_proc_t *me, const pmix_proc_t *job)
{
	pmix_value_t *v;
	int rank = -1, size = -1;

	/* The standard's types: uint16 for the rank, uint32 for the size. */
	if (PMIx_Get(me, PMIX_LOCAL_RANK, NULL, 0, &v) == PMIX_SUCCESS) {
		if (v->type == PMIX_UINT16)
			rank = v->data.uint16;
		PMIX_VALUE_RELEASE(v);
	}
	if (PMIx_Get(job, PMIX_LOCAL_SIZE, NULL, 0, &v) == PMIX_SUCCESS) {
		if (v->type == PMIX_UINT32 && v->data.uint32 <= INT_MAX)
			size = (int)v->data.uint32;
		PMIX_VALUE_RELEASE(v);
	}
	emunic_local_ranks_set(rank, size);
}

int emunic_boot_pmix_init(struct emunic_boot *b)
{
	struct pmix_boot *p = calloc(1, sizeof(*p));
	pmix_proc_t job;
	pmix_value_t *v;
	pmix_status_t st;

	if (!p)
		return -ENOMEM;
	st = PMIx_Init(&p->me, NULL, 0);
	if (st != PMIX_SUCCESS) {
		free(p);
		return emunic_err(-EPROTO, "bootstrap (pmix): PMIx_Init failed: %s", PMIx_Error_string(st));
	}
	PMIX_PROC_CONSTRUCT(&job);
	memcpy(job.nspace, p->me.nspace, sizeof(job.nspace));
	job.rank = PMIX_RANK_WILDCARD;
	st = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
	if (st != PMIX_SUCCESS) {
		PMIx_Finalize(NULL, 0);
		free(p);
		return emunic_err(-EPROTO, "bootstrap (pmix): job size unknown: %s", PMIx_Error_string(st));
	}
	b->size = (int)v->data.uint32;
	PMIX_VALUE_RELEASE(v);
	set_local_ranks(&p->me, &job);
	b->rank = (int)p->me.rank;
	b->priv = p;
	b->ops = &pmix_ops;
	emunic_log_set_rank(b->rank);
	return 0;
}
