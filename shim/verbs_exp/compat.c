/* SPDX-License-Identifier: MIT */
/*
 * The standard verbs calls a CORE-Direct program makes on the shim's
 * objects, so that its teardown and its mistakes stay what they were.
 * ibv_poll_cq, ibv_post_send, ibv_post_recv and ibv_req_notify_cq are
 * inline in <infiniband/verbs.h> and go through the context's ops table
 * (cq.c, qp.c fill it).  ibv_destroy_qp, ibv_destroy_cq and ibv_modify_qp
 * are libibverbs functions that dispatch to the provider's private ops,
 * which a context libibverbs did not open has none of (the call would
 * crash): <infiniband/verbs_exp.h> renames them to these, which take the
 * shim's objects and pass every other object on to libibverbs unchanged.
 */
#define EMUNIC_VEXP_NO_RENAME	/* here the names are libibverbs' own */
#include "shim/verbs_exp/vexp.h"

#include <errno.h>

int emunic_exp_ibv_destroy_qp(struct ibv_qp *qp)
{
	return qp && vexp_ours(qp->context) ? emunic_exp_destroy_qp(qp) : ibv_destroy_qp(qp);
}

int emunic_exp_ibv_destroy_cq(struct ibv_cq *cq)
{
	/* EBUSY while a QP uses it, as libmlx5's destroy_cq (the kernel's
	 * usecnt check) refused. */
	return cq && vexp_ours(cq->context) ? emunic_exp_destroy_cq(cq) : ibv_destroy_cq(cq);
}

int emunic_exp_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	/* The shim's QPs: INIT, RTR (the peer's QP number names its rank),
	 * RTS (qp.c). */
	return qp && vexp_ours(qp->context) ? vexp_modify_qp(qp, attr, attr_mask) : ibv_modify_qp(qp, attr, attr_mask);
}
