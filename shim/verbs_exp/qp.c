/* SPDX-License-Identifier: MIT */
/*
 * ibv_exp_create_qp, emunic_exp_connect, emunic_exp_destroy_qp.
 *
 * A shim QP carries its creation flags (CROSS_CHANNEL: it may post CQE_WAIT
 * and enables; MANAGED_SEND/RECV: its sends/receives wait to be enabled) and
 * an emunic MQ on which the control work requests posted to it run, in
 * order, as a management QP's WQEs ran on the HCA.  The data path is an
 * emunic QP made when the program connects it to a peer rank; until then
 * data work requests are refused as libmlx5 refused them on a QP not yet in
 * RTS (EINVAL).  A management QP needs no connection: its WQEs never touch
 * the wire.
 *
 * IGNORE_SQ_OVERFLOW / IGNORE_RQ_OVERFLOW (libmlx5 skipped its "work queue
 * overflow" ENOMEM check with them) are accepted: emunic's queues hold work
 * until it can be posted, so overflow is never checked against cap.
 */
#include "shim/verbs_exp/vexp.h"

#include <errno.h>
#include <stdlib.h>

#define VEXP_QP_FLAGS (IBV_EXP_QP_CREATE_CROSS_CHANNEL | IBV_EXP_QP_CREATE_MANAGED_SEND | \
		       IBV_EXP_QP_CREATE_MANAGED_RECV | IBV_EXP_QP_CREATE_IGNORE_SQ_OVERFLOW | \
		       IBV_EXP_QP_CREATE_IGNORE_RQ_OVERFLOW)

static uint32_t next_qp_num = 1;

static int check_attr(const struct ibv_exp_qp_init_attr *a)
{
	uint32_t flags = a->comp_mask & IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS ? a->exp_create_flags : 0;

	if (a->qp_type != IBV_QPT_RC || a->srq || (a->comp_mask & IBV_EXP_QP_INIT_ATTR_XRCD))
		return vexp_fail(EOPNOTSUPP, "ibv_exp_create_qp: only RC QPs without SRQ or XRC");
	if (!a->send_cq || !a->recv_cq || !vexp_ours(a->send_cq->context) || !vexp_ours(a->recv_cq->context))
		return vexp_fail(EINVAL, "ibv_exp_create_qp: send_cq and recv_cq must come from ibv_exp_create_cq");
	if (flags & ~(uint32_t)VEXP_QP_FLAGS)
		return vexp_fail(EINVAL, "ibv_exp_create_qp: exp_create_flags 0x%x", flags & ~(uint32_t)VEXP_QP_FLAGS);
	if (a->cap.max_send_sge > 1 || a->cap.max_recv_sge > 1 || a->cap.max_inline_data)
		return vexp_fail(EINVAL, "ibv_exp_create_qp: the shim's QPs take one scatter/gather entry "
				 "and no inline data");
	return 0;
}

struct ibv_qp *ibv_exp_create_qp(struct ibv_context *context, struct ibv_exp_qp_init_attr *attr)
{
	struct vexp_state *s = vexp_get();
	struct vexp_qp *qp;
	int r;

	(void)context;
	if (!attr || check_attr(attr))
		return NULL;
	if (!(qp = calloc(1, sizeof(*qp)))) {
		vexp_fail(ENOMEM, "ibv_exp_create_qp");
		return NULL;
	}
	qp->create_flags = attr->comp_mask & IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS ? attr->exp_create_flags : 0;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->depth = attr->cap.max_send_wr > 256 ? attr->cap.max_send_wr : 256;
	qp->scq = to_vcq(attr->send_cq);
	qp->rcq = to_vcq(attr->recv_cq);
	pthread_mutex_lock(&s->lock);
	r = vexp_open();
	if (!r && (r = -emunic_mq_create(s->dev, qp->depth, &qp->mq)))
		vexp_fail(r, "ibv_exp_create_qp: emunic_mq_create");
	if (!r) {
		s->ctx.ops.post_send = vexp_post_send_legacy;
		s->ctx.ops.post_recv = vexp_post_recv;
		qp->ibv.qp_num = next_qp_num++;
		qp->next_mq = qp->scq->mq_qps;
		qp->scq->mq_qps = qp;
		qp->scq->users++;
		qp->rcq->users++;
		qp->all_next = s->qps;
		s->qps = qp;
	}
	pthread_mutex_unlock(&s->lock);
	if (r) {
		free(qp);
		return NULL;
	}
	qp->ibv.context = &s->ctx;
	qp->ibv.qp_context = attr->qp_context;
	qp->ibv.pd = attr->pd;
	qp->ibv.send_cq = attr->send_cq;
	qp->ibv.recv_cq = attr->recv_cq;
	qp->ibv.qp_type = IBV_QPT_RC;
	qp->ibv.state = IBV_QPS_RESET;
	attr->cap.max_send_sge = attr->cap.max_recv_sge = 1;
	return &qp->ibv;
}

int emunic_exp_connect(struct ibv_qp *ibqp, int peer)
{
	struct vexp_state *s = vexp_get();
	struct emunic_qp_attr a;
	struct vexp_qp *qp;
	int r;

	if (!ibqp || !vexp_ours(ibqp->context))
		return vexp_fail(EINVAL, "emunic_exp_connect: not a QP of ibv_exp_create_qp");
	qp = to_vqp(ibqp);
	if (qp->qp)
		return vexp_fail(EINVAL, "emunic_exp_connect: QP %u is already connected", ibqp->qp_num);
	emunic_qp_attr_init(&a);
	a.flags = (qp->create_flags & IBV_EXP_QP_CREATE_MANAGED_SEND ? EMUNIC_QP_MANAGED_SEND : 0) |
		  (qp->create_flags & IBV_EXP_QP_CREATE_MANAGED_RECV ? EMUNIC_QP_MANAGED_RECV : 0);
	a.send_cq = qp->scq->cq;
	a.recv_cq = qp->rcq->cq;
	a.depth = qp->depth;
	pthread_mutex_lock(&s->lock);
	r = -emunic_qp_create(s->dev, peer, &a, &qp->qp);
	pthread_mutex_unlock(&s->lock);
	if (r)
		return vexp_fail(r, "emunic_exp_connect: QP %u to rank %d", ibqp->qp_num, peer);
	ibqp->state = IBV_QPS_RTS;
	return 0;
}

int emunic_exp_destroy_qp(struct ibv_qp *ibqp)
{
	struct vexp_state *s = vexp_get();
	struct vexp_qp *qp, **pp;
	uint32_t num;
	int r = 0, e;

	if (!ibqp || !vexp_ours(ibqp->context))
		return vexp_fail(EINVAL, "emunic_exp_destroy_qp: not a QP of ibv_exp_create_qp");
	qp = to_vqp(ibqp);
	pthread_mutex_lock(&s->lock);
	for (pp = &qp->scq->mq_qps; *pp && *pp != qp; pp = &(*pp)->next_mq)
		;
	if (*pp)
		*pp = qp->next_mq;
	for (pp = &s->qps; *pp && *pp != qp; pp = &(*pp)->all_next)
		;
	if (*pp)
		*pp = qp->all_next;
	qp->scq->users--;
	qp->rcq->users--;
	/* An emunic object whose destroy failed is dead all the same (it
	 * cannot be used or destroyed again; the device's close frees it),
	 * so the QP is gone either way: the error only says the engine did
	 * not confirm it. */
	if (s->dev) {
		r = emunic_mq_destroy(qp->mq);
		if (qp->qp && (e = emunic_qp_destroy(qp->qp)) && !r)
			r = e;
	}
	pthread_mutex_unlock(&s->lock);
	num = ibqp->qp_num;
	free(qp);
	return r ? vexp_fail(-r, "emunic_exp_destroy_qp: QP %u", num) : 0;
}
