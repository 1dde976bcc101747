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
 *
 * Connecting, as a verbs program does it: ibv_modify_qp to INIT, to RTR
 * with the peer's QP number (exchanged out of band), to RTS.  A shim QP's
 * number carries its rank (rank << VEXP_QPN_INDEX_BITS | index), so RTR
 * knows the peer and makes the emunic QP to it, with a pair key made of
 * both QPs' indices (emunic_qp_attr.pair_key): the two QPs whose RTRs name
 * each other connect, in whatever order the two sides reach RTR, as verbs
 * connects the QPs the numbers name.  A QP whose RTR names a QP that does
 * not name it back never connects (its work waits, as an RC QP aimed at the
 * wrong number gets no answer).  RTR naming the QP itself (a loopback, as
 * management QPs were connected) makes no connection: such a QP never
 * touches the wire.  The transitions the kernel refuses (ib_modify_qp_is_ok: RESET to
 * RTR, RTR without a destination, ...) are EINVAL, as is a destination
 * whose rank field names no rank of the job (the index is not checked: the
 * peer's QPs are not known here); another QP of the same rank is
 * EOPNOTSUPP; ERR, SQD and RESET are not mapped (EOPNOTSUPP: destroy the
 * QP).  Receives are taken from INIT on, as verbs took them: those posted
 * before RTR wait in the shim and go to emunic at RTR, as one post in the
 * step that makes the emunic QP (ibv_modify_qp holds the shim's lock), so
 * nothing posted later gets ahead of them (at most the QP's depth of them,
 * and no more than emunic's command ring).  RTS's timeout and retry counts
 * are not applied: emunic's QP is made at RTR, with its defaults (14, 7, 7).
 * emunic_exp_connect(qp, peer) does RTR and RTS in one call.
 */
#include "shim/verbs_exp/vexp.h"

#include <errno.h>
#include <stdlib.h>

#define VEXP_QP_FLAGS (IBV_EXP_QP_CREATE_CROSS_CHANNEL | IBV_EXP_QP_CREATE_MANAGED_SEND | \
		       IBV_EXP_QP_CREATE_MANAGED_RECV | IBV_EXP_QP_CREATE_IGNORE_SQ_OVERFLOW | \
		       IBV_EXP_QP_CREATE_IGNORE_RQ_OVERFLOW)

#define VEXP_QPN_INDEX_BITS 12
#define VEXP_QPN_INDEX_MASK ((1u << VEXP_QPN_INDEX_BITS) - 1)

static uint32_t next_qp_index = 1;

static int check_attr(const struct ibv_exp_qp_init_attr *a)
{
	uint32_t flags = a->comp_mask & IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS ? a->exp_create_flags : 0;

	if (a->qp_type != IBV_QPT_RC || a->srq || (a->comp_mask & IBV_EXP_QP_INIT_ATTR_XRCD))
		return vexp_fail(EOPNOTSUPP, "ibv_exp_create_qp: only RC QPs without SRQ or XRC");
	if (!a->send_cq || !a->recv_cq || !vexp_ours(a->send_cq->context) || !vexp_ours(a->recv_cq->context))
		return vexp_fail(EINVAL, "ibv_exp_create_qp: send_cq and recv_cq must come from ibv_exp_create_cq");
	if (flags & ~(uint32_t)VEXP_QP_FLAGS)
		return vexp_fail(EINVAL, "ibv_exp_create_qp: exp_create_flags 0x%x", flags & ~(uint32_t)VEXP_QP_FLAGS);
	if (a->cap.max_send_sge > VEXP_MAX_SGE || a->cap.max_recv_sge > VEXP_MAX_SGE || a->cap.max_inline_data)
		return vexp_fail(EINVAL, "ibv_exp_create_qp: the shim's QPs take up to %d scatter/gather entries "
				 "and no inline data", VEXP_MAX_SGE);
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
	qp->depth = attr->cap.max_send_wr > attr->cap.max_recv_wr ? attr->cap.max_send_wr : attr->cap.max_recv_wr;
	qp->depth = qp->depth > 256 ? qp->depth : 256;
	qp->max_send_sge = attr->cap.max_send_sge ? attr->cap.max_send_sge : 1;
	qp->max_recv_sge = attr->cap.max_recv_sge ? attr->cap.max_recv_sge : 1;
	qp->scq = to_vcq(attr->send_cq);
	qp->rcq = to_vcq(attr->recv_cq);
	pthread_mutex_lock(&s->lock);
	r = vexp_open();
	if (!r && next_qp_index > VEXP_QPN_INDEX_MASK)
		r = vexp_fail(ENOMEM, "ibv_exp_create_qp: %u QPs made, no QP number left", VEXP_QPN_INDEX_MASK);
	if (!r && emunic_boot_rank(s->boot) >= 1 << (24 - VEXP_QPN_INDEX_BITS))
		r = vexp_fail(EOPNOTSUPP, "ibv_exp_create_qp: rank %d: a QP number (24 bits) carries the rank in %d "
			      "bits", emunic_boot_rank(s->boot), 24 - VEXP_QPN_INDEX_BITS);
	if (!r && (r = -emunic_mq_create(s->dev, qp->depth, &qp->mq)))
		vexp_fail(r, "ibv_exp_create_qp: emunic_mq_create");
	if (!r) {
		s->ctx.ops.post_send = vexp_post_send_legacy;
		s->ctx.ops.post_recv = vexp_post_recv;
		qp->ibv.qp_num = (uint32_t)emunic_boot_rank(s->boot) << VEXP_QPN_INDEX_BITS | next_qp_index++;
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
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_recv_sge = qp->max_recv_sge;
	return &qp->ibv;
}

/* The emunic QP to `peer` behind a shim QP (at RTR); key: emunic's pair
 * key (0: by order).  The caller holds state.lock, so no post sees the
 * emunic QP before the receives posted in INIT are on it. */
static int connect_peer(struct vexp_qp *qp, int peer, unsigned key, const char *who)
{
	struct vexp_state *s = vexp_get();
	struct emunic_qp_attr a;
	int r, e;

	if (qp->qp)
		return vexp_fail(EINVAL, "%s: QP %u is already connected", who, qp->ibv.qp_num);
	emunic_qp_attr_init(&a);
	a.flags = (qp->create_flags & IBV_EXP_QP_CREATE_MANAGED_SEND ? EMUNIC_QP_MANAGED_SEND : 0) |
		  (qp->create_flags & IBV_EXP_QP_CREATE_MANAGED_RECV ? EMUNIC_QP_MANAGED_RECV : 0);
	a.send_cq = qp->scq->cq;
	a.recv_cq = qp->rcq->cq;
	a.depth = qp->depth;
	a.pair_key = key;
	r = -emunic_qp_create(s->dev, peer, &a, &qp->qp);
	if (r)
		return vexp_fail(r, "%s: QP %u to rank %d", who, qp->ibv.qp_num, peer);
	/* The INIT receives fit the ring (wr.c) and a full ring is waited
	 * out, so this fails only out of memory; the QP is then taken back
	 * (its connection may already have begun: the peer's QP can fail). */
	if (qp->nearly && (r = vexp_post_early(qp))) {
		if ((e = emunic_qp_destroy(qp->qp)))
			vexp_fail(-e, "%s: QP %u: taking back its emunic QP", who, qp->ibv.qp_num);
		qp->qp = NULL;
	}
	return r;
}

int emunic_exp_connect(struct ibv_qp *ibqp, int peer)
{
	int r;

	if (!ibqp || !vexp_ours(ibqp->context))
		return vexp_fail(EINVAL, "emunic_exp_connect: not a QP of ibv_exp_create_qp");
	pthread_mutex_lock(&vexp_get()->lock);
	if (!(r = connect_peer(to_vqp(ibqp), peer, 0, "emunic_exp_connect")))
		ibqp->state = IBV_QPS_RTS;
	pthread_mutex_unlock(&vexp_get()->lock);
	return r;
}

static const char *state_str(int st)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return st >= 0 && st < (int)(sizeof(names) / sizeof(names[0])) ? names[st] : "UNKNOWN";
}

/* RTR: the peer from the destination QP number; the QP itself: none. */
static int to_rtr(struct vexp_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	struct vexp_state *s = vexp_get();
	uint32_t dest = attr->dest_qp_num, mine, theirs;
	int peer = (int)(dest >> VEXP_QPN_INDEX_BITS);
	unsigned key;

	if (!(mask & IBV_QP_DEST_QPN))
		return vexp_fail(EINVAL, "ibv_modify_qp on QP %u: RTR needs IBV_QP_DEST_QPN (the peer's QP number)",
				 qp->ibv.qp_num);
	if (dest == qp->ibv.qp_num && qp->nearly)
		return vexp_fail(EINVAL, "ibv_modify_qp on QP %u: RTR to itself (a loopback: the shim gives it no data "
				 "path) with %u receives posted in INIT", qp->ibv.qp_num, qp->nearly);
	if (dest == qp->ibv.qp_num)
		return 0;	/* loopback: a management QP, never on the wire */
	if (!(dest & VEXP_QPN_INDEX_MASK) || peer >= emunic_boot_size(s->boot))
		return vexp_fail(EINVAL, "ibv_modify_qp on QP %u: dest_qp_num %u is no shim QP of a rank of this job "
				 "(rank << %d | index, %d ranks)", qp->ibv.qp_num, dest, VEXP_QPN_INDEX_BITS,
				 emunic_boot_size(s->boot));
	if (peer == emunic_boot_rank(s->boot))
		return vexp_fail(EOPNOTSUPP, "ibv_modify_qp on QP %u: dest_qp_num %u is another QP of this rank: "
				 "emunic connects ranks, not a rank to itself", qp->ibv.qp_num, dest);
	/* The pair's key: both QPs' indices, the lower rank's first, so the
	 * two sides name the same key and connect these two QPs whatever the
	 * order they reach RTR in (as verbs connects the QPs the numbers name). */
	mine = qp->ibv.qp_num & VEXP_QPN_INDEX_MASK;
	theirs = dest & VEXP_QPN_INDEX_MASK;
	key = emunic_boot_rank(s->boot) < peer ? mine << VEXP_QPN_INDEX_BITS | theirs
					       : theirs << VEXP_QPN_INDEX_BITS | mine;
	return connect_peer(qp, peer, key, "ibv_modify_qp");
}

/* Under state.lock: a receive posted meanwhile sees the state before or
 * after, never between (to_rtr reads the INIT receives). */
static int modify_locked(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct vexp_qp *qp = to_vqp(ibqp);
	int cur = ibqp->state, want, r = 0;

	if (!attr || !(mask & IBV_QP_STATE))
		return vexp_fail(EINVAL, "ibv_modify_qp on QP %u: no IBV_QP_STATE", ibqp->qp_num);
	want = attr->qp_state;
	if ((mask & IBV_QP_CUR_STATE) && (int)attr->cur_qp_state != cur)
		return vexp_fail(EINVAL, "ibv_modify_qp on QP %u: cur_qp_state %s, but it is %s", ibqp->qp_num,
				 state_str(attr->cur_qp_state), state_str(cur));
	switch (want) {
	case IBV_QPS_INIT:
		if (cur != IBV_QPS_RESET && cur != IBV_QPS_INIT)
			goto bad;
		break;
	case IBV_QPS_RTR:
		if (cur != IBV_QPS_INIT)
			goto bad;
		r = to_rtr(qp, attr, mask);
		break;
	case IBV_QPS_RTS:
		if (cur != IBV_QPS_RTR && cur != IBV_QPS_RTS)
			goto bad;
		break;
	default:
		return vexp_fail(EOPNOTSUPP, "ibv_modify_qp on QP %u to %s: not mapped onto emunic (destroy the QP "
				 "instead)", ibqp->qp_num, state_str(want));
	}
	if (!r)
		ibqp->state = (enum ibv_qp_state)want;
	return r;
bad:
	return vexp_fail(EINVAL, "ibv_modify_qp on QP %u: %s to %s is not a transition verbs allows", ibqp->qp_num,
			 state_str(cur), state_str(want));
}

int vexp_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct vexp_state *s = vexp_get();
	int r;

	pthread_mutex_lock(&s->lock);
	r = modify_locked(ibqp, attr, mask);
	pthread_mutex_unlock(&s->lock);
	return r;
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
	free(qp->early);
	free(qp);
	return r ? vexp_fail(-r, "emunic_exp_destroy_qp: QP %u", num) : 0;
}
