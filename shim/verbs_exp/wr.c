/* SPDX-License-Identifier: MIT */
/*
 * One verbs_exp work request -> one emunic task, checked as libmlx5 checked
 * it when it built the WQE.  The behaviours followed are MLNX_OFED 4.x
 * libmlx5's exp post path (libmlx5-41mlnx1 src/qp.c, as kept in
 * erpc-io/eRPC drivers/4.2/: __mlx5_post_send, __mlx5_post_send_one_rc_dc,
 * __mlx5_post_send_one_not_ready) and libibverbs' cross-channel tests
 * (tests/api/gtest_cd_tc3.cc, tc_verbs_post_send_en TI.2):
 *
 *  - CQE_WAIT, SEND_ENABLE, RECV_ENABLE or IBV_EXP_SEND_WITH_CALC on a QP not
 *    created IBV_EXP_QP_CREATE_CROSS_CHANNEL: EINVAL ("unsupported
 *    cross-channel functionality").
 *  - SEND_ENABLE (RECV_ENABLE) naming a QP not created MANAGED_SEND
 *    (MANAGED_RECV): EINVAL.
 *  - Enable counts are in work requests (libmlx5 compares against wq->head,
 *    which counts posted work requests, not WQE basic blocks): the target is
 *    head_en_index + wqe_count, or everything posted for wqe_count 0; a target
 *    past what was posted is EINVAL ("enable more than posted").
 *    WAIT_EN_LAST moves head_en_index by the largest count since the last move.
 *  - CQE_WAIT counts completions: target = wait_index + cq_count, and
 *    WAIT_EN_LAST moves wait_index by the largest count since the last move
 *    (emunic's WAIT does exactly this, emunic/mq/post.c check_wait).
 *  - A data work request on a QP that is not ready (not connected here; not
 *    RTS there): EINVAL.  More scatter/gather entries than the QP takes
 *    (here 1): ENOMEM.
 *  - WAIT on a CQ not created IBV_EXP_CQ_CREATE_CROSS_CHANNEL: EINVAL.  Not
 *    confirmed from libmlx5 (its post path does not look at the CQ's flags;
 *    the flag went to the kernel at creation): EINVAL is the errno libmlx5
 *    gave every other cross-channel misuse.
 *
 * Counters are updated on the post's scratch copies (vexp_wq_tmp) and
 * committed only when the whole post succeeded: a refused post changes
 * nothing (libmlx5 could leave a failed enable's count behind; emunic's rule
 * is stricter).
 */
#include "shim/verbs_exp/vexp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct vexp_wq *vexp_wq_tmp(struct vexp_post *p, struct vexp_qp *qp, int recv)
{
	if (qp->epoch != p->epoch) {
		if (p->ntouched == p->cap) {
			unsigned cap = p->cap ? 2 * p->cap : 8;
			struct vexp_qp **t = realloc(p->touched, cap * sizeof(*t));

			if (!t)
				return NULL;
			p->touched = t;
			p->cap = cap;
		}
		p->touched[p->ntouched++] = qp;
		qp->sq_tmp = qp->sq;
		qp->rq_tmp = qp->rq;
		qp->epoch = p->epoch;
	}
	return recv ? &qp->rq_tmp : &qp->sq_tmp;
}

static const char *opname(int op)
{
	switch (op) {
	case IBV_EXP_WR_SEND: return "SEND";
	case IBV_EXP_WR_SEND_ENABLE: return "SEND_ENABLE";
	case IBV_EXP_WR_RECV_ENABLE: return "RECV_ENABLE";
	case IBV_EXP_WR_CQE_WAIT: return "CQE_WAIT";
	default: return "opcode";
	}
}

/* The one scatter/gather entry, registered with emunic (mr.c). */
static int sge_of(int num_sge, const struct ibv_sge *sg, struct emunic_task *t)
{
	if (num_sge > 1)
		return vexp_fail(ENOMEM, "%d scatter/gather entries; the shim's QPs take 1", num_sge);
	if (num_sge < 1 || !sg || !sg->length)
		return 0;
	t->addr = (void *)(uintptr_t)sg->addr;
	t->len = sg->length;
	return vexp_mr_find(t->addr, t->len, &t->mr);
}

static int wait_task(const struct ibv_exp_send_wr *wr, struct emunic_task *t)
{
	struct ibv_cq *cq = wr->task.cqe_wait.cq;

	if (!cq || !vexp_ours(cq->context))
		return vexp_fail(EINVAL, "CQE_WAIT names no CQ of ibv_exp_create_cq");
	if (!(to_vcq(cq)->create_flags & IBV_EXP_CQ_CREATE_CROSS_CHANNEL))
		return vexp_fail(EINVAL, "CQE_WAIT on a CQ not created IBV_EXP_CQ_CREATE_CROSS_CHANNEL");
	if (wr->task.cqe_wait.cq_count < 0)
		return vexp_fail(EINVAL, "CQE_WAIT count %d", wr->task.cqe_wait.cq_count);
	t->op = EMUNIC_TASK_WAIT;
	t->cq = to_vcq(cq)->cq;
	t->count = (uint32_t)wr->task.cqe_wait.cq_count;
	if (wr->exp_send_flags & IBV_EXP_SEND_WAIT_EN_LAST)
		t->flags |= EMUNIC_TASK_WAIT_EN_LAST;
	return 0;
}

/* libmlx5's target index, then what emunic must be told: its enables
 * release "the next n", so n is how far the target passes what was
 * released.  A target already passed releases nothing: SEND_EN(0) when
 * everything posted is released, else a WAIT for nothing (count 0 on the
 * slave's send CQ, base unmoved), which completes in order like the enable. */
static int enable_task(struct vexp_post *p, const struct ibv_exp_send_wr *wr, struct emunic_task *t)
{
	int recv = wr->exp_opcode == IBV_EXP_WR_RECV_ENABLE;
	struct ibv_qp *q = wr->task.wqe_enable.qp;
	int32_t count = wr->task.wqe_enable.wqe_count;
	struct vexp_qp *slave;
	struct vexp_wq *wq;
	uint64_t target;

	if (!q || !vexp_ours(q->context))
		return vexp_fail(EINVAL, "%s names no QP of ibv_exp_create_qp", opname(wr->exp_opcode));
	slave = to_vqp(q);
	if (!(slave->create_flags & (recv ? IBV_EXP_QP_CREATE_MANAGED_RECV : IBV_EXP_QP_CREATE_MANAGED_SEND)))
		return vexp_fail(EINVAL, "%s on QP %u, not created %s", opname(wr->exp_opcode), q->qp_num,
				 recv ? "IBV_EXP_QP_CREATE_MANAGED_RECV" : "IBV_EXP_QP_CREATE_MANAGED_SEND");
	if (!slave->qp)
		return vexp_fail(EINVAL, "%s on QP %u, not connected", opname(wr->exp_opcode), q->qp_num);
	if (count < 0)
		return vexp_fail(EINVAL, "%s count %d", opname(wr->exp_opcode), count);
	if (!(wq = vexp_wq_tmp(p, slave, recv)))
		return vexp_fail(ENOMEM, "no memory");
	if (count) {
		target = wq->en_index + (uint64_t)count;
		if (target > wq->head)
			return vexp_fail(EINVAL, "%s(%d) on QP %u: enables past the %llu work requests posted",
					 opname(wr->exp_opcode), count, q->qp_num, (unsigned long long)wq->head);
		if ((uint64_t)count > wq->en_count)
			wq->en_count = (uint64_t)count;
	} else {
		target = wq->head;
		wq->en_count = wq->head - wq->en_index;
	}
	if (wr->exp_send_flags & IBV_EXP_SEND_WAIT_EN_LAST) {
		wq->en_index += wq->en_count;
		wq->en_count = 0;
	}
	if (target > wq->released) {
		t->op = recv ? EMUNIC_TASK_RECV_EN : EMUNIC_TASK_SEND_EN;
		t->qp = slave->qp;
		t->count = (uint32_t)(target - wq->released);
		wq->released = target;
	} else if (wq->released == wq->head) {
		t->op = recv ? EMUNIC_TASK_RECV_EN : EMUNIC_TASK_SEND_EN;
		t->qp = slave->qp;
		t->count = 0;
	} else {
		t->op = EMUNIC_TASK_WAIT;
		t->cq = slave->scq->cq;
		t->count = 0;
	}
	return 0;
}

static int send_task(struct vexp_post *p, struct vexp_qp *qp, const struct ibv_exp_send_wr *wr,
		     struct emunic_task *t)
{
	struct vexp_wq *wq;
	int r;

	if (!qp->qp)
		return vexp_fail(EINVAL, "SEND on QP %u, not at RTR yet (ibv_modify_qp to RTR, or emunic_exp_connect)",
				 qp->ibv.qp_num);
	if ((r = sge_of(wr->num_sge, wr->sg_list, t)))
		return r;
	/* Inline data was copied into the WQE at post time; emunic reads the
	 * buffer when the send runs, possibly much later on a managed QP. */
	if ((wr->exp_send_flags & IBV_EXP_SEND_INLINE) && t->len)
		return vexp_fail(EOPNOTSUPP, "IBV_EXP_SEND_INLINE with data: emunic reads the buffer when the "
				 "send runs; post it without INLINE and keep the buffer until it completes");
	if (!(wq = vexp_wq_tmp(p, qp, 0)))
		return vexp_fail(ENOMEM, "no memory");
	wq->head++;
	t->op = EMUNIC_TASK_SEND;
	t->qp = qp->qp;
	return 0;
}

int vexp_send_wr_task(struct vexp_post *p, struct vexp_qp *qp, const struct ibv_exp_send_wr *wr,
		      struct emunic_task *t)
{
	int op = wr->exp_opcode;
	int managed = op == IBV_EXP_WR_SEND_ENABLE || op == IBV_EXP_WR_RECV_ENABLE || op == IBV_EXP_WR_CQE_WAIT;
	int calc = !!(wr->exp_send_flags & IBV_EXP_SEND_WITH_CALC);

	memset(t, 0, sizeof(*t));
	t->wr_id = wr->wr_id;
	if ((managed || calc) && !(qp->create_flags & IBV_EXP_QP_CREATE_CROSS_CHANNEL))
		return vexp_fail(EINVAL, "%s on QP %u: unsupported cross-channel functionality (the QP was not "
				 "created IBV_EXP_QP_CREATE_CROSS_CHANNEL)", calc ? "calc" : opname(op), qp->ibv.qp_num);
	if (calc) {
		/* libmlx5 checked the three fields against its calc table
		 * (EINVAL out of range); emunic's CALC (emunic/mq.h) reduces
		 * two operands into a result buffer, which the vector calc's
		 * gather layout does not map onto. */
		if ((unsigned)wr->op.calc.calc_op >= IBV_EXP_CALC_OP_NUMBER ||
		    (unsigned)wr->op.calc.data_type >= IBV_EXP_CALC_DATA_TYPE_NUMBER ||
		    (unsigned)wr->op.calc.data_size >= IBV_EXP_CALC_DATA_SIZE_NUMBER)
			return vexp_fail(EINVAL, "calc op %d, type %d, size %d out of range", wr->op.calc.calc_op,
					 wr->op.calc.data_type, wr->op.calc.data_size);
		return vexp_fail(EOPNOTSUPP, "IBV_EXP_SEND_WITH_CALC is not mapped onto emunic's CALC; use "
				 "emunic_mq_post with EMUNIC_TASK_CALC");
	}
	if (managed && (wr->exp_send_flags & IBV_EXP_SEND_SIGNALED || qp->sq_sig_all))
		t->flags |= EMUNIC_TASK_SIGNAL;
	switch (op) {
	case IBV_EXP_WR_CQE_WAIT:
		return wait_task(wr, t);
	case IBV_EXP_WR_SEND_ENABLE:
	case IBV_EXP_WR_RECV_ENABLE:
		return enable_task(p, wr, t);
	case IBV_EXP_WR_SEND:
		return send_task(p, qp, wr, t);
	case IBV_EXP_WR_RDMA_WRITE:
	case IBV_EXP_WR_RDMA_WRITE_WITH_IMM:
	case IBV_EXP_WR_RDMA_READ:
	case IBV_EXP_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_EXP_WR_ATOMIC_CMP_AND_SWP:
		/* The peer's rkey came from its own ibv_reg_mr, on a protection
		 * domain emunic's QPs are not in. */
		return vexp_fail(EOPNOTSUPP, "RDMA and atomic work requests: the peer's ibv_reg_mr keys are not "
				 "valid on emunic's device; use SEND");
	case IBV_EXP_WR_SEND_WITH_IMM:
	case IBV_EXP_WR_NOP:
		return vexp_fail(EOPNOTSUPP, "opcode %d is not mapped onto emunic", op);
	default:
		return vexp_fail(EINVAL, "bad opcode %d", op);
	}
}

int vexp_recv_wr_task(struct vexp_post *p, struct vexp_qp *qp, const struct ibv_recv_wr *wr,
		      struct emunic_task *t)
{
	struct vexp_wq *wq;
	int r;

	memset(t, 0, sizeof(*t));
	t->wr_id = wr->wr_id;
	if (!qp->qp)
		/* verbs took receives from INIT: here the emunic QP is made at
		 * RTR, so a port posts its first receives after RTR. */
		return vexp_fail(EINVAL, "receive on QP %u, not at RTR yet (ibv_modify_qp to RTR, or "
				 "emunic_exp_connect)", qp->ibv.qp_num);
	if ((r = sge_of(wr->num_sge, wr->sg_list, t)))
		return r;
	if (!(wq = vexp_wq_tmp(p, qp, 1)))
		return vexp_fail(ENOMEM, "no memory");
	wq->head++;
	t->op = EMUNIC_TASK_RECV;
	t->qp = qp->qp;
	return 0;
}
