/* SPDX-License-Identifier: MIT */
/*
 * PMIx bootstrap: under prterun, Open MPI's mpirun or srun --mpi=pmix the
 * launcher is a PMIx server.  An allgather is a Put of this rank's share under
 * a per-round key, a Fence that collects data, and a Get of every rank's key.
 *
 * libpmix is opened here, when a PMIx launcher is found, not linked in: with
 * what it brings (libevent, hwloc, munge, libudev) it cost every emunic
 * process ~0.06 s to start in the TCG guest and ~3 s under valgrind, and
 * only processes under a PMIx launcher use it.
 */
#include "emunic/boot.h"
#include "emunic/base/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pmix.h>

#ifndef EMUNIC_PMIX_LIB
#define EMUNIC_PMIX_LIB "libpmix.so.2"	/* the build's, from pkg-config (Makefile) */
#endif

struct pmix_boot {
	pmix_proc_t me;
};

/* The calls this file makes, from the library opened at init. */
static struct {
	__typeof__(PMIx_Init) *init;
	__typeof__(PMIx_Finalize) *finalize;
	__typeof__(PMIx_Put) *put;
	__typeof__(PMIx_Commit) *commit;
	__typeof__(PMIx_Fence) *fence;
	__typeof__(PMIx_Get) *get;
	__typeof__(PMIx_Error_string) *error_string;
	__typeof__(PMIx_Info_load) *info_load;
	__typeof__(PMIx_Value_destruct) *value_destruct;
} px;

/* EMUNIC_PMIX_LIB names another libpmix (a PMIx of a cluster's own, say). */
static int pmix_load(void)
{
	const char *env = getenv("EMUNIC_PMIX_LIB");
	const char *names[] = { env && *env ? env : EMUNIC_PMIX_LIB, "libpmix.so.2" };
	const char *err = "";
	void *h = NULL;

	if (px.init)
		return 0;
	for (unsigned i = 0; i < (env && *env ? 1u : 2u) && !h; i++) {
		/* GLOBAL: PMIx's own plugins (pmix_mca_*.so) bind to its symbols. */
		h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
		if (!h)
			err = dlerror();
	}
	if (!h)
		return emunic_err(-ENOENT, "bootstrap (pmix): a PMIx launcher started this process (PMIX_NAMESPACE=%s) "
				  "but libpmix cannot be opened: %s (make deps installs libpmix2; EMUNIC_PMIX_LIB names another)",
				  getenv("PMIX_NAMESPACE"), err);
#define PX_SYM(field, sym) (px.field = (__typeof__(px.field))dlsym(h, #sym))
	if (!PX_SYM(finalize, PMIx_Finalize) || !PX_SYM(put, PMIx_Put) || !PX_SYM(commit, PMIx_Commit) ||
	    !PX_SYM(fence, PMIx_Fence) || !PX_SYM(get, PMIx_Get) || !PX_SYM(error_string, PMIx_Error_string) ||
	    !PX_SYM(info_load, PMIx_Info_load) || !PX_SYM(value_destruct, PMIx_Value_destruct) ||
	    !PX_SYM(init, PMIx_Init)) {
		char why[256];	/* dlerror's text goes with the handle */

		err = dlerror();
		snprintf(why, sizeof(why), "%s", err ? err : "a NULL symbol");
		dlclose(h);
		px.init = NULL;
		return emunic_err(-ENOENT, "bootstrap (pmix): the libpmix opened lacks a call emunic needs: %s", why);
	}
#undef PX_SYM
	return 0;
}

/* PMIX_VALUE_RELEASE, through the opened library. */
static void value_release(pmix_value_t *v)
{
	px.value_destruct(v);
	free(v);
}

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
	/* PMIx 4's PMIX_VALUE_CONSTRUCT; later ones make the construct macros
	 * library calls, which nothing here may name (libpmix is not linked). */
	memset(&v, 0, sizeof(v));
	v.type = PMIX_BYTE_OBJECT;
	/* PMIx copies the value; an empty share is one byte so Get finds the key. */
	v.data.bo.bytes = len ? (char *)in : (char *)"";
	v.data.bo.size = len ? len : 1;
	st = px.put(PMIX_GLOBAL, key, &v);
	if (st == PMIX_SUCCESS)
		st = px.commit();
	if (st != PMIX_SUCCESS)
		return emunic_err(pmix_errno(st), "bootstrap (pmix): put %s failed: %s", key, px.error_string(st));
	px.info_load(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	px.info_load(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
	st = px.fence(NULL, 0, info, 2);
	px.value_destruct(&info[0].value);
	px.value_destruct(&info[1].value);
	if (st != PMIX_SUCCESS)
		return emunic_err(pmix_errno(st), "bootstrap (pmix): fence failed: %s", px.error_string(st));
	if (!len)
		return 0;
	memset(&peer, 0, sizeof(peer));
	memcpy(peer.nspace, p->me.nspace, sizeof(peer.nspace));
	for (r = 0; r < b->size; r++) {
		peer.rank = (pmix_rank_t)r;
		st = px.get(&peer, key, NULL, 0, &got);
		if (st != PMIX_SUCCESS)
			return emunic_err(pmix_errno(st), "bootstrap (pmix): get %s from rank %d failed: %s",
					  key, r, px.error_string(st));
		if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size != len) {
			value_release(got);
			return emunic_err(-EPROTO, "bootstrap (pmix): rank %d gave %s of another size",
					  r, key);
		}
		memcpy((char *)out + (size_t)r * len, got->data.bo.bytes, len);
		value_release(got);
	}
	return 0;
}

static void pmix_fini(struct emunic_boot *b)
{
	px.finalize(NULL, 0);
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
	if (px.get(me, PMIX_LOCAL_RANK, NULL, 0, &v) == PMIX_SUCCESS) {
		if (v->type == PMIX_UINT16)
			rank = v->data.uint16;
		value_release(v);
	}
	if (px.get(job, PMIX_LOCAL_SIZE, NULL, 0, &v) == PMIX_SUCCESS) {
		if (v->type == PMIX_UINT32 && v->data.uint32 <= INT_MAX)
			size = (int)v->data.uint32;
		value_release(v);
	}
	emunic_local_ranks_set(rank, size);
}

int emunic_boot_pmix_init(struct emunic_boot *b)
{
	struct pmix_boot *p = calloc(1, sizeof(*p));
	pmix_proc_t job;
	pmix_value_t *v;
	pmix_status_t st;
	int r = pmix_load();

	if (r || !p) {
		free(p);
		return r ? r : -ENOMEM;
	}
	st = px.init(&p->me, NULL, 0);
	if (st != PMIX_SUCCESS) {
		free(p);
		return emunic_err(-EPROTO, "bootstrap (pmix): PMIx_Init failed: %s", px.error_string(st));
	}
	memset(&job, 0, sizeof(job));
	memcpy(job.nspace, p->me.nspace, sizeof(job.nspace));
	job.rank = PMIX_RANK_WILDCARD;
	st = px.get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
	if (st != PMIX_SUCCESS) {
		px.finalize(NULL, 0);
		free(p);
		return emunic_err(-EPROTO, "bootstrap (pmix): job size unknown: %s", px.error_string(st));
	}
	b->size = (int)v->data.uint32;
	value_release(v);
	set_local_ranks(&p->me, &job);
	b->rank = (int)p->me.rank;
	b->priv = p;
	b->ops = &pmix_ops;
	emunic_log_set_rank(b->rank);
	return 0;
}
