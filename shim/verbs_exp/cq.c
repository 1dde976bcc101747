/* SPDX-License-Identifier: MIT */
/*
 * ibv_exp_create_cq, ibv_exp_modify_cq, ibv_poll_cq on them, and their end.
 *
 * A shim CQ is an emunic CQ (it counts completions for CQE_WAIT and queues
 * them for polling), plus the completions of the control work requests of
 * every QP whose send CQ it is (their emunic MQs'): in libmlx5 a signaled
 * WAIT or enable WQE completes on the management QP's send CQ.
 *
 * Overrun: a ConnectX CQ that overran went to error (IBV_EVENT_CQ_ERR)
 * unless ibv_exp_modify_cq set IBV_EXP_CQ_IGNORE_OVERRUN, which CORE-Direct
 * code set on CQs it only WAITed on.  emunic never fails a CQ on overrun: it
 * keeps counting (so WAITs still see every completion) and drops what does
 * not fit for polling.  So every shim CQ behaves as one that ignores
 * overrun; the flag is accepted and recorded.  Moderation is accepted and
 * has no effect (emunic has no interrupts to moderate).
 */
#include "shim/verbs_exp/vexp.h"

#include <errno.h>
#include <stdlib.h>

static enum ibv_wc_opcode wc_opcode(int op)
{
	switch (op) {
	case EMUNIC_TASK_RECV: return IBV_WC_RECV;
	case EMUNIC_TASK_WRITE:
	case EMUNIC_TASK_WRITE_IMM: return IBV_WC_RDMA_WRITE;
	case EMUNIC_TASK_READ: return IBV_WC_RDMA_READ;
	case EMUNIC_TASK_FETCH_ADD: return IBV_WC_FETCH_ADD;
	default: return IBV_WC_SEND;	/* SEND, and the control WRs' completions */
	}
}

static void to_wc(const struct emunic_wc *e, struct ibv_wc *w)
{
	*w = (struct ibv_wc){
		.wr_id = e->wr_id,
		/* emunic's statuses are verbs' numbers, but for its own two */
		.status = e->status == EMUNIC_WC_CANCELED || e->status == EMUNIC_WC_TIMEOUT ?
			  IBV_WC_GENERAL_ERR : (enum ibv_wc_status)e->status,
		.opcode = wc_opcode(e->op),
		.byte_len = e->byte_len,
		.qp_num = e->qp_num,
	};
}

static int vexp_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct vexp_cq *cq = to_vcq(ibcq);
	struct emunic_wc e[16];
	int got = 0, err = 0;

	while (got < n) {
		int want = n - got < 16 ? n - got : 16, k = emunic_cq_poll(cq->cq, e, want);

		if (k < 0) {
			err = k;
			k = 0;
		}
		for (struct vexp_qp *qp = cq->mq_qps; k < want && qp; qp = qp->next_mq) {
			int m = emunic_mq_poll(qp->mq, e + k, want - k);

			if (m < 0)
				err = err ? err : m;
			for (int i = k; m > 0 && i < k + m; i++)
				e[i].qp_num = qp->ibv.qp_num;
			k += m > 0 ? m : 0;
		}
		if (k <= 0)
			break;
		for (int i = 0; i < k; i++)
			to_wc(&e[i], &wc[got + i]);
		got += k;
		if (k < want)
			break;
	}
	/* ibv_poll_cq: a negative value when polling failed (what was
	 * found before the failure is returned first, the failure next time). */
	return got ? got : err;
}

/* ibv_req_notify_cq: the shim's CQs have no completion channel (creating
 * one with a channel is refused), so there is no event to ask for. */
static int vexp_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	(void)solicited_only;
	return vexp_fail(EOPNOTSUPP, "ibv_req_notify_cq on CQ %p: the shim's CQs have no completion channel; "
			 "poll them (ibv_poll_cq)", (void *)ibcq);
}

struct ibv_cq *ibv_exp_create_cq(struct ibv_context *context, int cqe, void *cq_context,
				 struct ibv_comp_channel *channel, int comp_vector,
				 struct ibv_exp_cq_init_attr *attr)
{
	struct vexp_state *s = vexp_get();
	uint32_t flags = attr && (attr->comp_mask & IBV_EXP_CQ_INIT_ATTR_FLAGS) ? attr->flags : 0;
	struct vexp_cq *cq;
	int r;

	(void)context;
	(void)comp_vector;
	if (cqe < 1 || (attr && (attr->comp_mask & ~(uint32_t)IBV_EXP_CQ_INIT_ATTR_FLAGS))) {
		vexp_fail(EINVAL, "ibv_exp_create_cq: %d entries, comp_mask 0x%x", cqe, attr ? attr->comp_mask : 0);
		return NULL;
	}
	if (channel || (flags & ~(uint32_t)IBV_EXP_CQ_CREATE_CROSS_CHANNEL)) {
		vexp_fail(EOPNOTSUPP, "ibv_exp_create_cq: completion channels and flags 0x%x are not emulated",
			  flags & ~(uint32_t)IBV_EXP_CQ_CREATE_CROSS_CHANNEL);
		return NULL;
	}
	if (!(cq = calloc(1, sizeof(*cq)))) {
		vexp_fail(ENOMEM, "ibv_exp_create_cq");
		return NULL;
	}
	pthread_mutex_lock(&s->lock);
	r = vexp_open();
	if (!r && (r = -emunic_cq_create(s->dev, (unsigned)cqe, 0, &cq->cq)))
		vexp_fail(r, "ibv_exp_create_cq: emunic_cq_create");
	s->ctx.ops.poll_cq = vexp_poll_cq;
	s->ctx.ops.req_notify_cq = vexp_req_notify_cq;
	if (!r) {
		cq->all_next = s->cqs;
		s->cqs = cq;
	}
	pthread_mutex_unlock(&s->lock);
	if (r) {
		free(cq);
		return NULL;
	}
	cq->create_flags = flags;
	cq->ibv.context = &s->ctx;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = cqe;
	return &cq->ibv;
}

int ibv_exp_modify_cq(struct ibv_cq *ibcq, struct ibv_exp_cq_attr *attr, int attr_mask)
{
	int known = IBV_EXP_CQ_MODERATION | IBV_EXP_CQ_CAP_FLAGS;

	if (!ibcq || !vexp_ours(ibcq->context) || !attr || (attr_mask & ~known))
		return vexp_fail(EINVAL, "ibv_exp_modify_cq: not a shim CQ, or attr_mask 0x%x", attr_mask);
	if ((attr_mask & IBV_EXP_CQ_CAP_FLAGS) && (attr->cq_cap_flags & ~(uint32_t)IBV_EXP_CQ_IGNORE_OVERRUN))
		return vexp_fail(EINVAL, "ibv_exp_modify_cq: cq_cap_flags 0x%x", attr->cq_cap_flags);
	if (attr_mask & IBV_EXP_CQ_CAP_FLAGS)
		to_vcq(ibcq)->cap_flags = attr->cq_cap_flags;
	return 0;
}

int emunic_exp_destroy_cq(struct ibv_cq *ibcq)
{
	struct vexp_state *s = vexp_get();
	struct vexp_cq *cq;
	int r;

	if (!ibcq || !vexp_ours(ibcq->context))
		return vexp_fail(EINVAL, "emunic_exp_destroy_cq: not a shim CQ");
	cq = to_vcq(ibcq);
	pthread_mutex_lock(&s->lock);
	if (cq->users) {
		unsigned n = cq->users;

		pthread_mutex_unlock(&s->lock);
		return vexp_fail(EBUSY, "emunic_exp_destroy_cq: still the send or receive CQ of QPs (%u uses)", n);
	}
	r = s->dev ? -emunic_cq_destroy(cq->cq) : 0;
	for (struct vexp_cq **pp = &s->cqs; !r && *pp; pp = &(*pp)->all_next)
		if (*pp == cq) {
			*pp = cq->all_next;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	if (r)
		return vexp_fail(r, "emunic_exp_destroy_cq");
	free(cq);
	return 0;
}
