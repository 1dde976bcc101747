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
 *    RTS there): EINVAL.  More scatter/gather entries than the QP was
 *    created with (max_send_sge, max_recv_sge): ENOMEM ("max gs exceeded").
 *    emunic moves one buffer a work request, so the entries of a SEND or
 *    receive must lie end to end (EOPNOTSUPP otherwise).
 *  - IBV_EXP_SEND_WITH_CALC (calc_task): the op x type must be in libmlx5's
 *    mlx5_calc_ops_table (ADD, BAND, BOR, BXOR on INT, UINT, FLOAT; MAXLOC
 *    on UINT only; 64-bit), else EINVAL, as __mlx5_post_send_one_rc_dc.
 *    The gather list holds the operands, 16 bytes each, in the layout
 *    Mellanox's cc_pingpong packs (a big-endian value, then for MAXLOC a
 *    big-endian id); the HCA sent their reduction, one 16-byte slot.  Here
 *    the send becomes emunic's CALC on the BE_ slot types (emunic/mq.h),
 *    which reduces when the send is released, so it reads what earlier
 *    receives put in the operands, as the HCA's gather did.  Limits of the
 *    shim: at most 2 operands (what cc_pingpong's pp_query_calc_cap
 *    assumed; EINVAL beyond), entries of whole operands (EINVAL), SEND
 *    only (RDMA writes are not mapped, below).
 *  - WAIT on a CQ not created IBV_EXP_CQ_CREATE_CROSS_CHANNEL: EINVAL.  Not
 *    confirmed from libmlx5 (its post path does not look at the CQ's flags;
 *    the flag went to the kernel at creation): EINVAL is the errno libmlx5
 *    gave every other cross-channel misuse.
 *
 * Counters are updated on the post's scratch copies (vexp_wq_tmp) and
 * committed only when the whole post succeeded: a refused post changes
 * nothing (libmlx5 could leave a failed enable's count behind; emunic's rule
 * is stricter).  Two things a refused post may leave are resources, never
 * state a later post sees: a QP's calc result ring (made, and registered,
 * at its first calc work request) and its room for receives posted in INIT
 * (made at the first).
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

/* libmlx5's "max gs exceeded". */
static int sge_count(int num_sge, unsigned max)
{
	return num_sge > (int)max ? vexp_fail(ENOMEM, "%d scatter/gather entries; the QP was created with %u",
					      num_sge, max) : 0;
}

/* The scatter/gather entries as one buffer, registered with emunic (mr.c);
 * empty entries count for nothing. */
static int sge_of(int num_sge, const struct ibv_sge *sg, unsigned max, struct emunic_task *t)
{
	uint64_t start = 0, end = 0;
	int first = -1;

	if (sge_count(num_sge, max))
		return ENOMEM;
	for (int i = 0; sg && i < num_sge; i++) {
		if (!sg[i].length)
			continue;
		if (first >= 0 && sg[i].addr != end)
			return vexp_fail(EOPNOTSUPP, "scatter/gather entry %d does not start where entry %d ends: "
					 "emunic moves one buffer a work request", i, first);
		if (first < 0)
			start = end = sg[i].addr;
		first = i;
		end += sg[i].length;
		if (end - start > INT32_MAX)
			return vexp_fail(EINVAL, "scatter/gather entries of more than 2^31 bytes in all");
	}
	if (first < 0)
		return 0;
	t->addr = (void *)(uintptr_t)start;
	t->len = (uint32_t)(end - start);
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

/* ---- calc ------------------------------------------------------------------- */

#define CALC_SLOT 16		/* one operand, one result */
#define CALC_MAX_OPERANDS 2

/* libmlx5's mlx5_calc_ops_table, as emunic's op and BE_ slot type; 0: not
 * in the table. */
static int calc_map(const struct ibv_exp_send_wr *wr, int *op, int *type)
{
	static const int ops[IBV_EXP_CALC_OP_NUMBER] = {
		[IBV_EXP_CALC_OP_ADD] = EMUNIC_CALC_SUM, [IBV_EXP_CALC_OP_MAXLOC] = EMUNIC_CALC_MAXLOC,
		[IBV_EXP_CALC_OP_BAND] = EMUNIC_CALC_BAND, [IBV_EXP_CALC_OP_BXOR] = EMUNIC_CALC_BXOR,
		[IBV_EXP_CALC_OP_BOR] = EMUNIC_CALC_BOR,
	};
	static const int types[IBV_EXP_CALC_DATA_TYPE_NUMBER] = {
		[IBV_EXP_CALC_DATA_TYPE_INT] = EMUNIC_CALC_BE_INT64, [IBV_EXP_CALC_DATA_TYPE_UINT] = EMUNIC_CALC_BE_UINT64,
		[IBV_EXP_CALC_DATA_TYPE_FLOAT] = EMUNIC_CALC_BE_DOUBLE,
	};
	unsigned o = (unsigned)wr->op.calc.calc_op, ty = (unsigned)wr->op.calc.data_type;

	if (o >= IBV_EXP_CALC_OP_NUMBER || ty >= IBV_EXP_CALC_DATA_TYPE_NUMBER ||
	    (unsigned)wr->op.calc.data_size >= IBV_EXP_CALC_DATA_SIZE_NUMBER)
		return vexp_fail(EINVAL, "calc op %d, type %d, size %d out of range", wr->op.calc.calc_op,
				 wr->op.calc.data_type, wr->op.calc.data_size);
	*op = ops[o];
	*type = types[ty];
	/* emunic's table for the BE_ types is libmlx5's: MAXLOC on UINT only. */
	if (emunic_calc_check(*op, *type))
		return vexp_fail(EINVAL, "calc %s on %s is not in libmlx5's calc table (MAXLOC takes UINT only)",
				 emunic_calc_op_str(*op), ty == IBV_EXP_CALC_DATA_TYPE_INT ? "INT" : "FLOAT");
	return 0;
}

/* The QP's result ring, made at its first calc. */
static struct vexp_ring *calc_ring(struct vexp_qp *qp)
{
	struct vexp_state *s = vexp_get();
	struct vexp_ring *ring;
	uint32_t cap;
	int r;

	if (qp->ring)
		return qp->ring;
	cap = emunic_qp_send_capacity(qp->qp);
	if (!(ring = calloc(1, sizeof(*ring))) || !(ring->slots = aligned_alloc(64, (size_t)cap * CALC_SLOT))) {
		free(ring);
		vexp_fail(ENOMEM, "calc on QP %u: no memory for %u result slots", qp->ibv.qp_num, cap);
		return NULL;
	}
	memset(ring->slots, 0, (size_t)cap * CALC_SLOT);
	if ((r = emunic_mr_reg(s->dev, ring->slots, (size_t)cap * CALC_SLOT, &ring->mr))) {
		free(ring->slots);
		free(ring);
		vexp_fail(-r, "calc on QP %u: registering its result slots", qp->ibv.qp_num);
		return NULL;
	}
	ring->cap = cap;
	ring->next = s->rings;
	s->rings = ring;
	return qp->ring = ring;
}

/* A SEND with IBV_EXP_SEND_WITH_CALC: emunic's CALC over the operands in
 * the gather list, its result sent from the QP's ring. */
static int calc_task(struct vexp_qp *qp, const struct ibv_exp_send_wr *wr, struct vexp_wq *wq, struct emunic_task *t)
{
	/* The identities of SUM and BXOR: zero, and for doubles -0.0 (+0.0
	 * would turn a -0.0 operand into +0.0). */
	static const unsigned char zero[CALC_SLOT], neg_zero[CALC_SLOT] = { 0x80 };
	const unsigned char *operand[CALC_MAX_OPERANDS];
	struct vexp_ring *ring;
	unsigned n = 0;
	int r;

	/* libmlx5: the entry count (ENOMEM) before the calc table (EINVAL). */
	if ((r = sge_count(wr->num_sge, qp->max_send_sge)))
		return r;
	if ((r = calc_map(wr, &t->calc_op, &t->calc_type)))
		return r;
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *sg = &wr->sg_list[i];

		if (sg->length % CALC_SLOT)
			return vexp_fail(EINVAL, "calc: gather entry %d holds %u bytes, not whole 16-byte operands", i,
					 sg->length);
		for (uint32_t off = 0; off < sg->length; off += CALC_SLOT) {
			if (n == CALC_MAX_OPERANDS)
				return vexp_fail(EINVAL, "calc over more than %d operands: the shim reduces at most %d "
						 "(cc_pingpong's pp_query_calc_cap)", CALC_MAX_OPERANDS, CALC_MAX_OPERANDS);
			operand[n++] = (const unsigned char *)(uintptr_t)sg->addr + off;
		}
	}
	if (!n)
		return vexp_fail(EINVAL, "calc with no operand (an empty gather list)");
	if (!(ring = calc_ring(qp)))
		return errno;
	t->op = EMUNIC_TASK_CALC;
	t->qp = qp->qp;
	t->calc_a = operand[0];
	/* One operand reduces to itself: with the identity for SUM and BXOR,
	 * with itself for the others. */
	if (n == 2)
		t->calc_b = operand[1];
	else if (t->calc_op == EMUNIC_CALC_SUM && t->calc_type == EMUNIC_CALC_BE_DOUBLE)
		t->calc_b = neg_zero;
	else
		t->calc_b = t->calc_op == EMUNIC_CALC_SUM || t->calc_op == EMUNIC_CALC_BXOR ? zero : operand[0];
	t->addr = ring->slots + (wq->head % ring->cap) * CALC_SLOT;
	t->len = CALC_SLOT;
	t->mr = ring->mr;
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
	if (!(wq = vexp_wq_tmp(p, qp, 0)))
		return vexp_fail(ENOMEM, "no memory");
	if (wr->exp_send_flags & IBV_EXP_SEND_WITH_CALC) {
		r = calc_task(qp, wr, wq, t);
	} else if (!(r = sge_of(wr->num_sge, wr->sg_list, qp->max_send_sge, t))) {
		/* Inline data was copied into the WQE at post time; emunic
		 * reads the buffer when the send runs, possibly much later on
		 * a managed QP. */
		if ((wr->exp_send_flags & IBV_EXP_SEND_INLINE) && t->len)
			return vexp_fail(EOPNOTSUPP, "IBV_EXP_SEND_INLINE with data: emunic reads the buffer when "
					 "the send runs; post it without INLINE and keep the buffer until it completes");
		t->op = EMUNIC_TASK_SEND;
		t->qp = qp->qp;
	}
	if (!r)
		wq->head++;	/* the calc's result slot is taken */
	return r;
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
	if (calc && op != IBV_EXP_WR_SEND) {
		int cop, ctype, r = calc_map(wr, &cop, &ctype);	/* libmlx5 checked the table first */

		return r ? r : vexp_fail(EOPNOTSUPP, "calc on opcode %d: the shim maps calc on SEND only", op);
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
	/* Verbs takes receives from INIT on; the emunic QP is made at RTR, so
	 * one posted in INIT waits in the shim (t->qp NULL: post.c keeps it
	 * aside) and goes to emunic at RTR, before anything posted later. */
	if (!qp->qp && qp->ibv.state == IBV_QPS_RESET)
		return vexp_fail(EINVAL, "receive on QP %u in RESET (ibv_modify_qp to INIT first)", qp->ibv.qp_num);
	if (!qp->qp && qp->ibv.state != IBV_QPS_INIT)
		return vexp_fail(EINVAL, "receive on QP %u, connected to itself (a loopback: the shim gives it no data "
				 "path)", qp->ibv.qp_num);
	if ((r = sge_of(wr->num_sge, wr->sg_list, qp->max_recv_sge, t)))
		return r;
	if (!(wq = vexp_wq_tmp(p, qp, 1)))
		return vexp_fail(ENOMEM, "no memory");
	/* At RTR they go to emunic as one post: no more than its ring takes. */
	if (!qp->qp && wq->head >= vexp_early_max(qp))
		return vexp_fail(ENOMEM, "receive on QP %u: %u posted in INIT, as many as it takes before RTR (its "
				 "depth, at most emunic's command ring); post the rest after RTR", qp->ibv.qp_num,
				 vexp_early_max(qp));
	wq->head++;
	t->op = EMUNIC_TASK_RECV;
	t->qp = qp->qp;
	return 0;
}
