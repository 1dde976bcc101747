/* SPDX-License-Identifier: MIT */
/*
 * emunic-exp-barrier: a recursive-doubling barrier written the way
 * CORE-Direct programs were, against MLNX_OFED's verbs_exp API, with no
 * emunic header: it builds with -Ishim/verbs_exp and links libemunic.
 *
 * Per rank: a management QP (IBV_EXP_QP_CREATE_CROSS_CHANNEL) and, for each
 * step k, a QP to rank ^ 2^k created CROSS_CHANNEL | MANAGED_SEND with its
 * own cross-channel receive CQ.  A barrier is one ibv_exp_post_task: per
 * step a zero-byte SEND (held by the managed QP) and a RECV that keeps the
 * receive window full, then on the management QP, per step,
 * SEND_ENABLE(qp_k, 1) and CQE_WAIT(rcq_k, 1), both WAIT_EN_LAST, the last
 * WAIT signaled (seed 003, tables I-IV).  The program waits for that one
 * completion on the management QP's CQ.
 *
 * QPs connect as the original's did: ibv_modify_qp to INIT, to RTR with
 * the partner's QP number, to RTS (the management QP through a loopback
 * RTR to itself).  With --enable-index the odd rank moves its two extra
 * QPs to its partner to RTR in the other order than the partner does.  QP numbers are exchanged out of band through the file
 * all ranks map (--shm; the original used a socket or MPI).  Rank and size
 * come from the launcher (EMUNIC_RANK, EMUNIC_SIZE, as set by emunic-run).
 *
 * The check: every round each rank sleeps 0..--skew-us, adds one to a
 * counter in a file all ranks map (--shm), enters the barrier, and on
 * leaving must find the counter at least rounds x size: no rank left
 * before every rank entered.  --no-barrier skips the barrier (the check
 * must then fail).  --errors first runs the bad flows, each of which must
 * fail as verbs_exp failed it (EINVAL, *bad_wr or *bad_task named) and leave
 * the QPs and CQs usable for the barriers that follow, then the standard
 * verbs calls on the shim's objects (verbs_calls): ibv_destroy_qp and
 * ibv_destroy_cq work on them (EBUSY for a CQ in use) and, with
 * ibv_modify_qp, on the program's own verbs objects; on the shim's,
 * ibv_modify_qp refuses RESET to RTR and a destination no rank has
 * (EINVAL), and ibv_req_notify_cq fails EOPNOTSUPP rather than crash.  --enable-index
 * first checks that a task list over two management QPs refused for room
 * posts nothing (span_overflow), that enable counts follow libmlx5's
 * index arithmetic (index_check), and that a receive on a MANAGED_RECV QP
 * waits for its RECV_ENABLE (recv_enable_check).  --allreduce ROUNDS runs
 * the barrier's schedule as an allreduce with IBV_EXP_SEND_WITH_CALC
 * (allreduce_once) for every op x type of libmlx5's calc table, and
 * MINLOC as cc_pingpong did MIN (MAXLOC on negated values), ROUNDS times
 * each, comparing the result with the host's fold; --errors then also
 * checks the calc refusals (calc_flows).
 *
 * Exit: 0 pass, 1 a violation or a bad flow not refused as expected,
 * 2 usage, 3 a verbs_exp call failed, 77 no cross-channel capability.
 */
#include <infiniband/verbs_exp.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_STEPS 16
#define SLOT_X MAX_STEPS		/* the QP-number table's slots: qp[k] at k, then */
#define SLOT_Y (MAX_STEPS + 1)		/* xqp and yqp, then */
#define SLOT_A (MAX_STEPS + 2)		/* aqp[k] at SLOT_A + k */
#define NSLOTS (2 * MAX_STEPS + 2)
#define RECV_WINDOW 16
#define OPND 16				/* a calc operand: BE value, BE id (cc_pingpong's packing) */
#define ASLOTS (1 + 2 * MAX_STEPS)	/* --allreduce: x, then per step what arrives, twice */

struct ctx {
	int rank, size, steps;
	struct ibv_context *ibctx;
	struct ibv_pd *pd;
	struct ibv_cq *mcq, *scq, *ncq, *rcq[MAX_STEPS];
	struct ibv_qp *mqp, *pqp, *qp[MAX_STEPS];
	struct ibv_cq *xcq;		/* --enable-index: its own pair, to rank ^ 1 */
	struct ibv_qp *xqp;
	struct ibv_qp *mqp2;		/* --enable-index: a second management QP */
	struct ibv_cq *ycq;		/* --enable-index: a MANAGED_RECV pair, to rank ^ 1 */
	struct ibv_qp *yqp;
	uint64_t xbuf[4];		/* [0]: what is sent; [1..3]: what arrives */
	struct ibv_mr *xmr;
	struct ibv_cq *arcq[MAX_STEPS];	/* --allreduce: a pair per step, 2 gather entries */
	struct ibv_qp *aqp[MAX_STEPS];
	unsigned char abuf[ASLOTS][OPND] __attribute__((aligned(16)));
	struct ibv_mr *amr;
	struct ibv_exp_device_calc_cap calc;
	_Atomic uint64_t *ctr;		/* --shm: the rounds' counter, then */
	_Atomic uint32_t *qpn;		/* every rank's QP numbers, NSLOTS a rank */
};

static int die(const struct ctx *c, const char *what, int err)
{
	fprintf(stderr, "emunic-exp-barrier: rank %d: %s: %s\n", c->rank, what, strerror(err));
	exit(3);
}

static struct ibv_cq *make_cq(struct ctx *c, int cross_channel, int ignore_overrun)
{
	struct ibv_exp_cq_init_attr ia = { .comp_mask = IBV_EXP_CQ_INIT_ATTR_FLAGS,
					   .flags = cross_channel ? IBV_EXP_CQ_CREATE_CROSS_CHANNEL : 0 };
	struct ibv_exp_cq_attr ma = { .comp_mask = IBV_EXP_CQ_ATTR_CQ_CAP_FLAGS,
				      .cq_cap_flags = IBV_EXP_CQ_IGNORE_OVERRUN };
	struct ibv_cq *cq = ibv_exp_create_cq(c->ibctx, 256, NULL, NULL, 0, &ia);

	if (!cq)
		die(c, "ibv_exp_create_cq", errno);
	if (ignore_overrun && ibv_exp_modify_cq(cq, &ma, IBV_EXP_CQ_CAP_FLAGS))
		die(c, "ibv_exp_modify_cq", errno);
	return cq;
}

static struct ibv_qp *make_qp_sge(struct ctx *c, struct ibv_cq *scq, struct ibv_cq *rcq, uint32_t flags, uint32_t sge)
{
	struct ibv_exp_qp_init_attr a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.cap.max_send_wr = a.cap.max_recv_wr = 256;
	a.cap.max_send_sge = sge;
	a.cap.max_recv_sge = 1;
	a.qp_type = IBV_QPT_RC;
	a.comp_mask = IBV_EXP_QP_INIT_ATTR_PD | IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS;
	a.pd = c->pd;
	a.exp_create_flags = flags;
	if (!(qp = ibv_exp_create_qp(c->ibctx, &a)))
		die(c, "ibv_exp_create_qp", errno);
	return qp;
}

static struct ibv_qp *make_qp(struct ctx *c, struct ibv_cq *scq, struct ibv_cq *rcq, uint32_t flags)
{
	return make_qp_sge(c, scq, rcq, flags, 1);
}

static void post_recvs(struct ctx *c, struct ibv_qp *qp, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_recv_wr wr = { .wr_id = 0x5245u, .num_sge = 0 }, *bad;
		int r = ibv_post_recv(qp, &wr, &bad);

		if (r)
			die(c, "ibv_post_recv", r);
	}
}

/* INIT, and the QP's number out for the partner (out of band, through
 * --shm), as an RC connection is begun with verbs. */
static void rc_publish(struct ctx *c, struct ibv_qp *qp, int peer, int slot)
{
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1 };
	int r;

	if ((r = ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		die(c, "ibv_modify_qp to INIT", r);
	if (peer >= 0)
		atomic_store(&c->qpn[c->rank * NSLOTS + slot], qp->qp_num);
}

/* The partner's QP number, then RTR and RTS.  peer < 0: a management QP,
 * connected to itself. */
static void rc_finish(struct ctx *c, struct ibv_qp *qp, int peer, int slot)
{
	struct ibv_qp_attr rtr = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .max_dest_rd_atomic = 1,
				   .min_rnr_timer = 12, .ah_attr = { .port_num = 1 } };
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				   .max_rd_atomic = 1 };
	time_t t0 = time(NULL);
	int r;

	if (peer < 0) {
		rtr.dest_qp_num = qp->qp_num;
	} else {
		while (!(rtr.dest_qp_num = atomic_load(&c->qpn[peer * NSLOTS + slot])) && time(NULL) - t0 < 30)
			usleep(1000);
		if (!rtr.dest_qp_num)
			die(c, "the partner's QP number (--shm) in 30 s", ETIMEDOUT);
	}
	if ((r = ibv_modify_qp(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		die(c, "ibv_modify_qp to RTR", r);
	if ((r = ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
		die(c, "ibv_modify_qp to RTS", r);
}

static void rc_connect(struct ctx *c, struct ibv_qp *qp, int peer, int slot)
{
	rc_publish(c, qp, peer, slot);
	rc_finish(c, qp, peer, slot);
}

static void setup(struct ctx *c, int index_check, int allreduce)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	const char *want = getenv("EMUNIC_DEVICE");
	struct ibv_exp_device_attr da = { .comp_mask = IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS |
							IBV_EXP_DEVICE_ATTR_CALC_CAP };
	int i = 0;

	if (!devs || !devs[0])
		die(c, "no RDMA device", ENODEV);
	while (want && devs[i] && strcmp(ibv_get_device_name(devs[i]), want))
		i++;
	if (!(c->ibctx = ibv_open_device(devs[devs[i] ? i : 0])) || !(c->pd = ibv_alloc_pd(c->ibctx)))
		die(c, "opening the device", errno);
	ibv_free_device_list(devs);
	if (ibv_exp_query_device(c->ibctx, &da))
		die(c, "ibv_exp_query_device", errno);
	if (!(da.comp_mask & IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS) ||
	    !(da.exp_device_cap_flags & IBV_EXP_DEVICE_CROSS_CHANNEL)) {
		printf("emunic-exp-barrier: rank %d: no cross-channel capability\n", c->rank);
		exit(77);
	}
	if (da.comp_mask & IBV_EXP_DEVICE_ATTR_CALC_CAP)
		c->calc = da.calc_cap;
	if (allreduce && !(c->calc.int_ops & 1ull << IBV_EXP_CALC_OP_ADD)) {
		printf("emunic-exp-barrier: rank %d: no calc capability\n", c->rank);
		exit(77);
	}
	c->mcq = make_cq(c, 1, 0);
	c->scq = make_cq(c, 0, 1);
	c->ncq = make_cq(c, 0, 1);
	c->mqp = make_qp(c, c->mcq, c->mcq, IBV_EXP_QP_CREATE_CROSS_CHANNEL);
	rc_connect(c, c->mqp, -1, 0);
	c->pqp = make_qp(c, c->scq, c->ncq, 0);
	for (int k = 0; k < c->steps; k++) {
		c->rcq[k] = make_cq(c, 1, 1);
		c->qp[k] = make_qp(c, c->scq, c->rcq[k],
				   IBV_EXP_QP_CREATE_CROSS_CHANNEL | IBV_EXP_QP_CREATE_MANAGED_SEND);
		/* Receives posted in INIT, before the partner can send. */
		rc_publish(c, c->qp[k], c->rank ^ (1 << k), k);
		post_recvs(c, c->qp[k], RECV_WINDOW);
		rc_finish(c, c->qp[k], c->rank ^ (1 << k), k);
	}
	if (index_check && c->steps) {
		c->xcq = make_cq(c, 1, 0);
		c->xqp = make_qp(c, c->scq, c->xcq, IBV_EXP_QP_CREATE_CROSS_CHANNEL | IBV_EXP_QP_CREATE_MANAGED_SEND);
		c->mqp2 = make_qp(c, c->mcq, c->mcq, IBV_EXP_QP_CREATE_CROSS_CHANNEL);
		c->ycq = make_cq(c, 1, 0);
		c->yqp = make_qp(c, c->scq, c->ycq, IBV_EXP_QP_CREATE_CROSS_CHANNEL | IBV_EXP_QP_CREATE_MANAGED_RECV);
		rc_publish(c, c->xqp, c->rank ^ 1, SLOT_X);
		rc_publish(c, c->yqp, c->rank ^ 1, SLOT_Y);
		/* The odd rank moves its two QPs to RTR in the other order:
		 * verbs connects the QPs the numbers name, whatever the order,
		 * and so must the shim (a pairing by order would cross them:
		 * index_check's sends would meet the MANAGED_RECV QP). */
		rc_finish(c, c->rank & 1 ? c->yqp : c->xqp, c->rank ^ 1, c->rank & 1 ? SLOT_Y : SLOT_X);
		rc_finish(c, c->rank & 1 ? c->xqp : c->yqp, c->rank ^ 1, c->rank & 1 ? SLOT_X : SLOT_Y);
		if (c->rank & 1)
			printf("emunic-exp-barrier: rank %d: QPs %u and %u moved to RTR in the order opposite to rank "
			       "%d's\n", c->rank, c->yqp->qp_num, c->xqp->qp_num, c->rank ^ 1);
		if (!(c->xmr = ibv_reg_mr(c->pd, c->xbuf, sizeof(c->xbuf), IBV_ACCESS_LOCAL_WRITE)))
			die(c, "ibv_reg_mr", errno);
		for (int j = 1; j <= 3; j++) {
			struct ibv_sge sg = { (uintptr_t)&c->xbuf[j], sizeof(uint64_t), c->xmr->lkey };
			struct ibv_recv_wr wr = { .wr_id = (uint64_t)j, .sg_list = &sg, .num_sge = 1 }, *bad;

			if (ibv_post_recv(c->xqp, &wr, &bad))
				die(c, "ibv_post_recv", errno);
		}
	}
	/* --allreduce: per step a pair whose sends may gather two operands
	 * (one per entry, as cc_pingpong's), their buffer registered. */
	for (int k = 0; allreduce && k < c->steps; k++) {
		c->arcq[k] = make_cq(c, 1, 1);
		c->aqp[k] = make_qp_sge(c, c->scq, c->arcq[k],
					IBV_EXP_QP_CREATE_CROSS_CHANNEL | IBV_EXP_QP_CREATE_MANAGED_SEND, 2);
		rc_connect(c, c->aqp[k], c->rank ^ (1 << k), SLOT_A + k);
	}
	if (allreduce && !(c->amr = ibv_reg_mr(c->pd, c->abuf, sizeof(c->abuf), IBV_ACCESS_LOCAL_WRITE)))
		die(c, "ibv_reg_mr", errno);
}

/* ---- the barrier ------------------------------------------------------------- */

struct barrier_list {
	struct ibv_exp_task task[2 * MAX_STEPS + 1];
	struct ibv_exp_send_wr send[MAX_STEPS], mwr[2 * MAX_STEPS];
	struct ibv_recv_wr recv[MAX_STEPS];
};

static void task_of(struct ibv_exp_task *t, struct ibv_qp *qp, struct ibv_exp_send_wr *wr, struct ibv_exp_task *next)
{
	memset(t, 0, sizeof(*t));
	t->task_type = IBV_EXP_TASK_SEND;
	t->item.qp = qp;
	t->item.send_wr = wr;
	t->next = next;
}

static void build(const struct ctx *c, struct barrier_list *b)
{
	int nt = 0;

	memset(b, 0, sizeof(*b));
	for (int k = 0; k < c->steps; k++) {
		b->send[k].wr_id = (uint64_t)k;
		b->send[k].exp_opcode = IBV_EXP_WR_SEND;
		task_of(&b->task[nt++], c->qp[k], &b->send[k], NULL);
		b->recv[k].wr_id = 0x5245u;
		b->task[nt].task_type = IBV_EXP_TASK_RECV;
		b->task[nt].item.qp = c->qp[k];
		b->task[nt++].item.recv_wr = &b->recv[k];

		b->mwr[2 * k].exp_opcode = IBV_EXP_WR_SEND_ENABLE;
		b->mwr[2 * k].exp_send_flags = IBV_EXP_SEND_WAIT_EN_LAST;
		b->mwr[2 * k].task.wqe_enable.qp = c->qp[k];
		b->mwr[2 * k].task.wqe_enable.wqe_count = 1;
		b->mwr[2 * k].next = &b->mwr[2 * k + 1];
		b->mwr[2 * k + 1].exp_opcode = IBV_EXP_WR_CQE_WAIT;
		b->mwr[2 * k + 1].exp_send_flags = IBV_EXP_SEND_WAIT_EN_LAST;
		b->mwr[2 * k + 1].task.cqe_wait.cq = c->rcq[k];
		b->mwr[2 * k + 1].task.cqe_wait.cq_count = 1;
		b->mwr[2 * k + 1].next = k + 1 < c->steps ? &b->mwr[2 * k + 2] : NULL;
	}
	b->mwr[2 * c->steps - 1].wr_id = 0xba77u;
	b->mwr[2 * c->steps - 1].exp_send_flags |= IBV_EXP_SEND_SIGNALED;
	task_of(&b->task[nt], c->mqp, &b->mwr[0], NULL);
	for (int i = 0; i < nt; i++)
		b->task[i].next = &b->task[i + 1];
}

/* Posts a task list and waits (60 s at most) for its one signaled
 * completion on the management QP's CQ, wr_id `id`. */
static void run_list(const struct ctx *c, struct ibv_exp_task *task, uint64_t id, const char *what)
{
	struct ibv_exp_task *bad = NULL;
	struct ibv_wc wc;
	time_t t0 = time(NULL);
	int r, n;

	if ((r = ibv_exp_post_task(c->ibctx, task, &bad)))
		die(c, what, r);
	while ((n = ibv_poll_cq(c->mcq, 1, &wc)) == 0)
		if (time(NULL) - t0 > 60)
			die(c, what, ETIMEDOUT);
	if (n < 0 || wc.status != IBV_WC_SUCCESS || wc.wr_id != id) {
		fprintf(stderr, "emunic-exp-barrier: rank %d: %s completed with %s (wr_id 0x%llx)\n", c->rank, what,
			ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
		exit(3);
	}
}

static void barrier(const struct ctx *c)
{
	struct barrier_list b;

	if (c->steps == 0)
		return;
	build(c, &b);
	run_list(c, b.task, 0xba77u, "the barrier");
}

/* ---- allreduce: the barrier's list carrying calc --------------------------------- */

/* An enable of `count` work requests of `qp`, as a work request. */
static struct ibv_exp_send_wr enable_wr(int opcode, struct ibv_qp *qp, int count)
{
	struct ibv_exp_send_wr w;

	memset(&w, 0, sizeof(w));
	w.exp_opcode = opcode;
	w.task.wqe_enable.qp = qp;
	w.task.wqe_enable.wqe_count = count;
	return w;
}


/* The cases: libmlx5's calc table, and MINLOC as cc_pingpong did MIN
 * (MAXLOC on negated values). */
enum { AR_MINLOC = IBV_EXP_CALC_OP_NUMBER };
static const struct ar_case { int op, type; const char *name; } ar_cases[] = {
	{ IBV_EXP_CALC_OP_ADD, IBV_EXP_CALC_DATA_TYPE_INT, "ADD INT" },
	{ IBV_EXP_CALC_OP_ADD, IBV_EXP_CALC_DATA_TYPE_UINT, "ADD UINT" },
	{ IBV_EXP_CALC_OP_ADD, IBV_EXP_CALC_DATA_TYPE_FLOAT, "ADD FLOAT" },
	{ IBV_EXP_CALC_OP_BAND, IBV_EXP_CALC_DATA_TYPE_INT, "BAND INT" },
	{ IBV_EXP_CALC_OP_BAND, IBV_EXP_CALC_DATA_TYPE_UINT, "BAND UINT" },
	{ IBV_EXP_CALC_OP_BAND, IBV_EXP_CALC_DATA_TYPE_FLOAT, "BAND FLOAT" },
	{ IBV_EXP_CALC_OP_BOR, IBV_EXP_CALC_DATA_TYPE_INT, "BOR INT" },
	{ IBV_EXP_CALC_OP_BOR, IBV_EXP_CALC_DATA_TYPE_UINT, "BOR UINT" },
	{ IBV_EXP_CALC_OP_BOR, IBV_EXP_CALC_DATA_TYPE_FLOAT, "BOR FLOAT" },
	{ IBV_EXP_CALC_OP_BXOR, IBV_EXP_CALC_DATA_TYPE_INT, "BXOR INT" },
	{ IBV_EXP_CALC_OP_BXOR, IBV_EXP_CALC_DATA_TYPE_UINT, "BXOR UINT" },
	{ IBV_EXP_CALC_OP_BXOR, IBV_EXP_CALC_DATA_TYPE_FLOAT, "BXOR FLOAT" },
	{ IBV_EXP_CALC_OP_MAXLOC, IBV_EXP_CALC_DATA_TYPE_UINT, "MAXLOC UINT" },
	{ AR_MINLOC, IBV_EXP_CALC_DATA_TYPE_UINT, "MINLOC UINT (negated MAXLOC)" },
};
#define AR_CASES (int)(sizeof(ar_cases) / sizeof(ar_cases[0]))

static uint64_t be64(uint64_t v) { return htobe64(v); }

/* Rank r's value in case k, round i, as the host holds it (doubles as
 * their bits); MAXLOC and MINLOC give ties across ranks. */
static uint64_t ar_value(int k, int r, int i)
{
	const struct ar_case *a = &ar_cases[k];
	double d;
	uint64_t u;

	if (a->op == IBV_EXP_CALC_OP_MAXLOC)
		return (uint64_t)((r * 37 + i) % 3);
	if (a->op == AR_MINLOC)
		return (uint64_t)((r * 13 + i) % 3 + 1);
	if (a->op != IBV_EXP_CALC_OP_ADD)		/* bit patterns */
		return 0x0123456789abcdefull * (uint64_t)(2 * r + 1) ^ (uint64_t)i << (r * 8 % 64);
	if (a->type == IBV_EXP_CALC_DATA_TYPE_INT)
		return (uint64_t)((int64_t)(r + 1) * 1000003 * (i + 1) * (r % 2 ? -1 : 1));
	if (a->type == IBV_EXP_CALC_DATA_TYPE_UINT)
		return UINT64_MAX - (uint64_t)r * 7 - (uint64_t)i;	/* wraps */
	d = (r + 1) * 0.5 + i;					/* sums exactly */
	memcpy(&u, &d, sizeof(u));
	return u;
}

/* The host's fold over every rank, as the job should find it: value, and
 * for MAXLOC/MINLOC the smallest rank holding it. */
static void ar_expect(int k, int size, int i, uint64_t *v, uint64_t *id)
{
	const struct ar_case *a = &ar_cases[k];
	double sum = 0, d;

	*v = ar_value(k, 0, i);
	*id = 0;
	for (int r = 1; r < size; r++) {
		uint64_t x = ar_value(k, r, i);

		switch (a->op) {
		case IBV_EXP_CALC_OP_ADD: *v += x; break;	/* FLOAT: below */
		case IBV_EXP_CALC_OP_BAND: *v &= x; break;
		case IBV_EXP_CALC_OP_BOR: *v |= x; break;
		case IBV_EXP_CALC_OP_BXOR: *v ^= x; break;
		case IBV_EXP_CALC_OP_MAXLOC: if (x > *v) { *v = x; *id = (uint64_t)r; } break;
		case AR_MINLOC: if (x < *v) { *v = x; *id = (uint64_t)r; } break;
		}
	}
	if (a->op == IBV_EXP_CALC_OP_ADD && a->type == IBV_EXP_CALC_DATA_TYPE_FLOAT) {
		for (int r = 0; r < size; r++) {
			uint64_t x = ar_value(k, r, i);

			memcpy(&d, &x, sizeof(d));
			sum += d;
		}
		memcpy(v, &sum, sizeof(*v));
	}
	if (a->op != IBV_EXP_CALC_OP_MAXLOC && a->op != AR_MINLOC)
		*id = 0;
}

static void sge_at(struct ibv_sge *sg, const struct ctx *c, int slot)
{
	*sg = (struct ibv_sge){ (uintptr_t)c->abuf[slot], OPND, c->amr->lkey };
}

/*
 * One allreduce: the barrier's schedule, each step twice.  Step k sends
 * the rank's partial a_k (16 bytes) to rank ^ 2^k, then, once the
 * partner's a_k is in, a SEND WITH_CALC over [a_k, partner's a_k]: the
 * HCA reduces as it sends, so the partner receives a_(k+1) and this rank
 * receives its own a_(k+1) from the partner's calc.  Every reduction is
 * done by the NIC; the last step's arrival is the result.  a_0 is x (slot
 * 0); step k's arrivals go to slots 1 + 2k and 2 + 2k (= a_(k+1)).
 */
static void allreduce_once(const struct ctx *c, const struct ar_case *a)
{
	struct ibv_exp_task task[4 * MAX_STEPS + 1];
	struct ibv_exp_send_wr snd[2 * MAX_STEPS], mwr[4 * MAX_STEPS];
	struct ibv_recv_wr rcv[2 * MAX_STEPS];
	struct ibv_sge sg[5 * MAX_STEPS];	/* per step: the SEND, the calc's two, two receives */
	int nt = 0, nm = 0;

	memset(snd, 0, sizeof(snd));
	memset(mwr, 0, sizeof(mwr));
	memset(rcv, 0, sizeof(rcv));
	for (int k = 0; k < c->steps; k++) {
		int acc = k ? 2 * k : 0;	/* a_k: x, or what step k-1's calc brought */
		struct ibv_sge *g = &sg[5 * k];

		sge_at(&g[0], c, acc);
		snd[2 * k] = (struct ibv_exp_send_wr){ .wr_id = 0x100u + (uint64_t)k, .sg_list = &g[0],
						       .num_sge = 1, .exp_opcode = IBV_EXP_WR_SEND };
		sge_at(&g[1], c, acc);
		sge_at(&g[2], c, 1 + 2 * k);
		snd[2 * k + 1] = (struct ibv_exp_send_wr){ .wr_id = 0x200u + (uint64_t)k, .sg_list = &g[1],
							   .num_sge = 2, .exp_opcode = IBV_EXP_WR_SEND,
							   .exp_send_flags = IBV_EXP_SEND_WITH_CALC };
		snd[2 * k + 1].op.calc.calc_op = a->op == AR_MINLOC ? IBV_EXP_CALC_OP_MAXLOC : a->op;
		snd[2 * k + 1].op.calc.data_type = a->type;
		snd[2 * k + 1].op.calc.data_size = IBV_EXP_CALC_DATA_SIZE_64_BIT;
		snd[2 * k].next = &snd[2 * k + 1];
		task_of(&task[nt++], c->aqp[k], &snd[2 * k], NULL);
		/* The partner's a_k lands in slot 1 + 2k, the calc's second
		 * operand; then a_(k+1) from the partner's calc in 2 + 2k. */
		for (int j = 0; j < 2; j++) {
			sge_at(&g[3 + j], c, 1 + 2 * k + j);
			rcv[2 * k + j] = (struct ibv_recv_wr){ .wr_id = 0x300u + (uint64_t)(2 * k + j),
							       .sg_list = &g[3 + j], .num_sge = 1 };
		}
		rcv[2 * k].next = &rcv[2 * k + 1];
		task[nt].task_type = IBV_EXP_TASK_RECV;
		task[nt].item.qp = c->aqp[k];
		task[nt++].item.recv_wr = &rcv[2 * k];
		for (int j = 0; j < 2; j++) {
			mwr[nm] = enable_wr(IBV_EXP_WR_SEND_ENABLE, c->aqp[k], 1);
			mwr[nm].exp_send_flags = IBV_EXP_SEND_WAIT_EN_LAST;
			mwr[nm].next = &mwr[nm + 1];
			nm++;
			mwr[nm].exp_opcode = IBV_EXP_WR_CQE_WAIT;
			mwr[nm].exp_send_flags = IBV_EXP_SEND_WAIT_EN_LAST;
			mwr[nm].task.cqe_wait.cq = c->arcq[k];
			mwr[nm].task.cqe_wait.cq_count = 1;
			mwr[nm].next = &mwr[nm + 1];
			nm++;
		}
	}
	mwr[nm - 1].next = NULL;
	mwr[nm - 1].wr_id = 0xa11u;
	mwr[nm - 1].exp_send_flags |= IBV_EXP_SEND_SIGNALED;
	task_of(&task[nt], c->mqp, &mwr[0], NULL);
	for (int i = 0; i < nt; i++)
		task[i].next = &task[i + 1];
	run_list(c, task, 0xa11u, "the allreduce");
}

/* Every case, `rounds` times: packed as cc_pingpong packs (big-endian;
 * MINLOC negated, unpacked negated back), reduced by the job's NICs, and
 * compared bit for bit with the host's fold.  Returns the wrong ones. */
static int allreduce_check(struct ctx *c, int rounds)
{
	int wrong = 0;

	for (int i = 0; i < rounds; i++)
		for (int k = 0; k < AR_CASES; k++) {
			const struct ar_case *a = &ar_cases[k];
			uint64_t x = ar_value(k, c->rank, i), v, id, want, want_id;
			unsigned char mine[OPND];

			memset(c->abuf, 0xee, sizeof(c->abuf));	/* stale operands would show */
			v = a->op == AR_MINLOC ? (uint64_t)0 - x : x;
			memcpy(c->abuf[0], &(uint64_t){ be64(v) }, 8);
			memcpy(c->abuf[0] + 8, &(uint64_t){ be64((uint64_t)c->rank) }, 8);
			memcpy(mine, c->abuf[0], OPND);
			allreduce_once(c, a);
			/* The HCA gathered its operands; it never wrote them. */
			if (memcmp(mine, c->abuf[0], OPND) && wrong++ < 5)
				printf("emunic-exp-barrier: rank %d: allreduce %s, round %d: its own operand was "
				       "overwritten\n", c->rank, a->name, i);
			memcpy(&v, c->abuf[2 * c->steps], 8);
			memcpy(&id, c->abuf[2 * c->steps] + 8, 8);
			v = be64toh(v);
			id = be64toh(id);
			if (a->op == AR_MINLOC)
				v = (uint64_t)0 - v;
			ar_expect(k, c->size, i, &want, &want_id);
			if (v != want || id != want_id) {
				if (wrong++ < 5)
					printf("emunic-exp-barrier: rank %d: allreduce %s, round %d: got %016llx id %llu, "
					       "want %016llx id %llu\n", c->rank, a->name, i, (unsigned long long)v,
					       (unsigned long long)id, (unsigned long long)want,
					       (unsigned long long)want_id);
			}
		}
	printf("emunic-exp-barrier: rank %d: allreduce: %d calc cases x %d rounds, %d wrong; calc caps int 0x%llx "
	       "uint 0x%llx fp 0x%llx\n", c->rank, AR_CASES, rounds, wrong, (unsigned long long)c->calc.int_ops,
	       (unsigned long long)c->calc.uint_ops, (unsigned long long)c->calc.fp_ops);
	return wrong ? 1 : 0;
}

/* ---- bad flows: the errors verbs_exp gave ---------------------------------------- */

static int expect(const struct ctx *c, const char *flow, int r, int ok_ptr)
{
	int good = r == EINVAL && errno == EINVAL && ok_ptr;

	printf("emunic-exp-barrier: rank %d: bad flow %s: %s%s\n", c->rank, flow, r ? strerror(r) : "accepted",
	       good ? ", as verbs_exp" : ", NOT as verbs_exp (EINVAL and the bad work request)");
	return good ? 0 : 1;
}

/* One work request posted on `on` that verbs_exp refused. */
static int bad_post(const struct ctx *c, const char *flow, struct ibv_qp *on, struct ibv_exp_send_wr *w)
{
	struct ibv_exp_send_wr *bad_wr = NULL;
	int r = ibv_exp_post_send(on, w, &bad_wr);

	return expect(c, flow, r, bad_wr == w);
}

/* A refusal the shim documents beyond what libmlx5 checked. */
static int expect_shim(const struct ctx *c, const char *flow, int r, int ok_ptr)
{
	int good = r == EINVAL && errno == EINVAL && ok_ptr;

	printf("emunic-exp-barrier: rank %d: bad flow %s: %s%s\n", c->rank, flow, r ? strerror(r) : "accepted",
	       good ? ", as the shim documents" : ", NOT as the shim documents (EINVAL and the bad work request)");
	return good ? 0 : 1;
}

/* A SEND WITH_CALC on `on` over `len` bytes of operands: EINVAL. */
static int bad_calc(const struct ctx *c, const char *flow, struct ibv_qp *on, int op, int type, uint32_t len,
		    int libmlx5)
{
	static unsigned char opnd[4 * OPND] __attribute__((aligned(16)));
	struct ibv_sge sg = { (uintptr_t)opnd, len, 0 };
	struct ibv_exp_send_wr w = { .sg_list = &sg, .num_sge = 1, .exp_opcode = IBV_EXP_WR_SEND,
				     .exp_send_flags = IBV_EXP_SEND_WITH_CALC }, *bad_wr = NULL;
	int r;

	w.op.calc.calc_op = op;
	w.op.calc.data_type = type;
	w.op.calc.data_size = IBV_EXP_CALC_DATA_SIZE_64_BIT;
	r = ibv_exp_post_send(on, &w, &bad_wr);
	return libmlx5 ? expect(c, flow, r, bad_wr == &w) : expect_shim(c, flow, r, bad_wr == &w);
}

/* calc: what libmlx5 refused (MAXLOC on INT is not in its table; calc on a
 * QP not created CROSS_CHANNEL), and the shim's own limits (whole 16-byte
 * operands, at most two). */
static int calc_flows(const struct ctx *c)
{
	int fails = 0;

	fails += bad_calc(c, "calc-maxloc-on-int", c->qp[0], IBV_EXP_CALC_OP_MAXLOC, IBV_EXP_CALC_DATA_TYPE_INT,
			  OPND, 1);
	fails += bad_calc(c, "calc-on-non-cross-channel-qp", c->pqp, IBV_EXP_CALC_OP_ADD,
			  IBV_EXP_CALC_DATA_TYPE_INT, OPND, 1);
	fails += bad_calc(c, "calc-partial-operand", c->qp[0], IBV_EXP_CALC_OP_ADD, IBV_EXP_CALC_DATA_TYPE_INT,
			  OPND + 8, 0);
	fails += bad_calc(c, "calc-three-operands", c->qp[0], IBV_EXP_CALC_OP_ADD, IBV_EXP_CALC_DATA_TYPE_INT,
			  3 * OPND, 0);
	return fails;
}

static int bad_flows(const struct ctx *c)
{
	struct ibv_exp_send_wr w;
	struct ibv_exp_send_wr snd = { .exp_opcode = IBV_EXP_WR_SEND }, en = { .exp_opcode = IBV_EXP_WR_SEND_ENABLE };
	struct ibv_exp_task t[2], *bad_task;
	int fails = 0, r;

	/* A task on a QP not created managed: SEND_ENABLE naming the
	 * management QP (no MANAGED_SEND), posted as a task. */
	w = enable_wr(IBV_EXP_WR_SEND_ENABLE, c->mqp, 1);
	task_of(&t[0], c->mqp, &w, NULL);
	bad_task = NULL;
	r = ibv_exp_post_task(c->ibctx, t, &bad_task);
	fails += expect(c, "enable-on-unmanaged-qp", r, bad_task == &t[0]);

	/* A cross-channel WR on a QP not created CROSS_CHANNEL (libibverbs'
	 * tc_verbs_post_send_en TI.2). */
	memset(&w, 0, sizeof(w));
	w.exp_opcode = IBV_EXP_WR_CQE_WAIT;
	w.task.cqe_wait.cq = c->rcq[0];
	w.task.cqe_wait.cq_count = 1;
	fails += bad_post(c, "wait-on-non-cross-channel-qp", c->pqp, &w);

	/* WAIT on a CQ not created cross-channel. */
	w.task.cqe_wait.cq = c->ncq;
	fails += bad_post(c, "wait-on-non-cross-channel-cq", c->mqp, &w);

	/* Enable more than posted: one SEND, SEND_ENABLE(2), as one task
	 * list; refused whole, so the SEND is not left posted either. */
	en.task.wqe_enable.qp = c->qp[0];
	en.task.wqe_enable.wqe_count = 2;
	en.exp_send_flags = IBV_EXP_SEND_WAIT_EN_LAST;
	task_of(&t[0], c->qp[0], &snd, &t[1]);
	task_of(&t[1], c->mqp, &en, NULL);
	bad_task = NULL;
	r = ibv_exp_post_task(c->ibctx, t, &bad_task);
	fails += expect(c, "enable-more-than-posted", r, bad_task == &t[1]);

	/* RECV_ENABLE naming a QP created MANAGED_SEND but not MANAGED_RECV. */
	w = enable_wr(IBV_EXP_WR_RECV_ENABLE, c->qp[0], 1);
	fails += bad_post(c, "recv-enable-on-unmanaged-recv", c->mqp, &w);
	return fails + calc_flows(c);
}

/* A standard verbs call on the shim's objects ends as the shim documents
 * (README, "Porting verbs_exp"): done (0), or that error, never a crash. */
static int expect_call(const struct ctx *c, const char *call, int r, int want)
{
	int good = r == want && (!want || errno == want);

	printf("emunic-exp-barrier: rank %d: verbs call %s: %s%s\n", c->rank, call, r ? strerror(r) : "done",
	       good ? ", as the shim documents" : ", NOT as the shim documents");
	return good ? 0 : 1;
}

static int verbs_calls(struct ctx *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .dest_qp_num = 1 };
	struct ibv_cq *cq = make_cq(c, 0, 1), *own;
	struct ibv_qp *qp = make_qp(c, cq, cq, 0);
	int fails = 0;

	/* RESET to RTR: the kernel's ib_modify_qp_is_ok refused it. */
	fails += expect_call(c, "ibv_modify_qp", ibv_modify_qp(c->pqp, &a, IBV_QP_STATE | IBV_QP_DEST_QPN), EINVAL);
	fails += expect_call(c, "ibv_req_notify_cq", ibv_req_notify_cq(c->ncq, 0), EOPNOTSUPP);
	/* A receive in RESET (verbs takes them from INIT on). */
	{
		struct ibv_recv_wr rwr = { .wr_id = 1 }, *rbad = NULL;

		fails += expect_call(c, "ibv_post_recv-in-reset", ibv_post_recv(qp, &rwr, &rbad), EINVAL);
		/* The management QP went to RTR through a loopback: no data path. */
		fails += expect_call(c, "ibv_post_recv-on-loopback", ibv_post_recv(c->mqp, &rwr, &rbad), EINVAL);
	}
	/* RTR naming a QP number no rank of the job has. */
	{
		struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
		struct ibv_qp_attr rtr = { .qp_state = IBV_QPS_RTR, .dest_qp_num = (uint32_t)c->size << 12 | 1 };

		if (ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die(c, "ibv_modify_qp to INIT", errno);
		fails += expect_call(c, "ibv_modify_qp-no-such-qp", ibv_modify_qp(qp, &rtr, IBV_QP_STATE |
											  IBV_QP_DEST_QPN), EINVAL);
	}
	/* Receives posted in INIT: RTR to itself (no data path) refuses them;
	 * destroying the QP frees them. */
	{
		struct ibv_qp *lqp = make_qp(c, cq, cq, IBV_EXP_QP_CREATE_CROSS_CHANNEL);
		struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
		struct ibv_qp_attr rtr = { .qp_state = IBV_QPS_RTR, .dest_qp_num = lqp->qp_num };
		struct ibv_recv_wr rwr = { .wr_id = 2 }, *rbad = NULL;

		if (ibv_modify_qp(lqp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
		    ibv_post_recv(lqp, &rwr, &rbad))
			die(c, "a receive in INIT", errno);
		fails += expect_call(c, "ibv_modify_qp-loopback-with-receives",
				     ibv_modify_qp(lqp, &rtr, IBV_QP_STATE | IBV_QP_DEST_QPN), EINVAL);
		fails += expect_call(c, "ibv_destroy_qp-with-receives-in-init", ibv_destroy_qp(lqp), 0);
	}
	fails += expect_call(c, "ibv_destroy_cq-in-use", ibv_destroy_cq(cq), EBUSY);
	fails += expect_call(c, "ibv_destroy_qp", ibv_destroy_qp(qp), 0);
	fails += expect_call(c, "ibv_destroy_cq", ibv_destroy_cq(cq), 0);
	/* The program's own verbs objects still reach libibverbs. */
	if (!(own = ibv_create_cq(c->ibctx, 4, NULL, NULL, 0)))
		die(c, "ibv_create_cq", errno);
	{
		struct ibv_qp_init_attr ia = { .send_cq = own, .recv_cq = own, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
							.max_recv_sge = 1 } };
		struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
		struct ibv_qp *oqp = ibv_create_qp(c->pd, &ia);

		if (!oqp)
			die(c, "ibv_create_qp", errno);
		fails += expect_call(c, "ibv_modify_qp-own", ibv_modify_qp(oqp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
									IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
		fails += expect_call(c, "ibv_destroy_qp-own", ibv_destroy_qp(oqp), 0);
	}
	fails += expect_call(c, "ibv_destroy_cq-own", ibv_destroy_cq(own), 0);
	return fails;
}

/* ---- enable counts: libmlx5's index, in work requests ----------------------------- */

static void enable(const struct ctx *c, int count, uint64_t flags)
{
	struct ibv_exp_send_wr w = enable_wr(IBV_EXP_WR_SEND_ENABLE, c->xqp, count), *bad;
	int r;

	w.exp_send_flags = flags;
	if ((r = ibv_exp_post_send(c->mqp, &w, &bad)))
		die(c, "SEND_ENABLE", r);
}

/* Receives from the partner so far, once at least `least` came and 200 ms
 * passed with no more expected. */
static int take(const struct ctx *c)
{
	struct ibv_wc wc[4];
	int n = ibv_poll_cq(c->xcq, 4, wc);

	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != sizeof(uint64_t) ||
		    c->xbuf[wc[i].wr_id] != 0x1000u + (uint64_t)(c->rank ^ 1))
			return 100;	/* never 1, 2 or 3: the check fails */
	return n;
}

static int arrived(const struct ctx *c, int *seen, int least)
{
	time_t t0 = time(NULL);

	while (*seen < least && time(NULL) - t0 < 30)
		*seen += take(c);
	usleep(200000);
	*seen += take(c);
	return *seen;
}

/* A task list over two management QPs whose second stretch does not fit:
 * a held SEND and SEND_ENABLE(1) for it on the management QP, then more
 * CQE_WAITs on the second management QP than its queue holds (256, as
 * max_send_wr).  ENOMEM ("work queue overflow"), *bad_task the first task
 * (the first not posted), and nothing of the first stretch posted either:
 * the send does not go (the partner counts no arrival), and index_check,
 * run next, finds the enable index where it was. */
#define SPAN_WAITS 257

static int span_overflow(struct ctx *c)
{
	static struct ibv_exp_send_wr w[SPAN_WAITS];
	struct ibv_exp_send_wr snd = { .exp_opcode = IBV_EXP_WR_SEND }, en = { .exp_opcode = IBV_EXP_WR_SEND_ENABLE };
	struct ibv_sge sg = { (uintptr_t)&c->xbuf[0], sizeof(uint64_t), c->xmr->lkey };
	struct ibv_exp_task t[3], *bad_task = NULL;
	int seen = 0, r, good;

	c->xbuf[0] = 0x1000u + (uint64_t)c->rank;
	snd.sg_list = &sg;
	snd.num_sge = 1;
	en.task.wqe_enable.qp = c->xqp;
	en.task.wqe_enable.wqe_count = 1;
	memset(w, 0, sizeof(w));
	for (int i = 0; i < SPAN_WAITS; i++) {
		w[i].exp_opcode = IBV_EXP_WR_CQE_WAIT;
		w[i].task.cqe_wait.cq = c->xcq;
		w[i].task.cqe_wait.cq_count = 1;
		w[i].next = i + 1 < SPAN_WAITS ? &w[i + 1] : NULL;
	}
	task_of(&t[0], c->xqp, &snd, &t[1]);
	task_of(&t[1], c->mqp, &en, &t[2]);
	task_of(&t[2], c->mqp2, &w[0], NULL);
	r = ibv_exp_post_task(c->ibctx, t, &bad_task);
	good = r == ENOMEM && errno == ENOMEM && bad_task == &t[0];
	barrier(c);	/* the partner posted its list too: a send it let go is on its way */
	arrived(c, &seen, 0);
	barrier(c);	/* and counted, before index_check's sends can come */
	printf("emunic-exp-barrier: rank %d: bad flow span-overflow: %s, %d sends arrived%s\n", c->rank,
	       r ? strerror(r) : "accepted", seen,
	       good && !seen ? ", nothing posted, as the shim promises"
			     : ", NOT as the shim promises (ENOMEM, the first task, nothing posted)");
	return !good || seen;
}

/* Three SENDs held on a managed QP.  SEND_ENABLE(1) twice without
 * WAIT_EN_LAST targets the same index (base + 1): one send goes, not two.
 * SEND_ENABLE(2) with WAIT_EN_LAST: base + 2, a second one; SEND_ENABLE(0):
 * everything posted, the third.  The partner counts what arrives. */
static int index_check(struct ctx *c)
{
	struct ibv_exp_send_wr snd = { .exp_opcode = IBV_EXP_WR_SEND }, *bad;
	struct ibv_sge sg = { (uintptr_t)&c->xbuf[0], sizeof(uint64_t), c->xmr->lkey };
	int seen = 0, got[3], r;

	c->xbuf[0] = 0x1000u + (uint64_t)c->rank;	/* 8 bytes each, checked on arrival */
	snd.sg_list = &sg;
	snd.num_sge = 1;
	for (int i = 0; i < 3; i++)
		if ((r = ibv_exp_post_send(c->xqp, &snd, &bad)))
			die(c, "SEND", r);
	enable(c, 1, 0);
	enable(c, 1, 0);
	got[0] = arrived(c, &seen, 1);
	barrier(c);
	enable(c, 2, IBV_EXP_SEND_WAIT_EN_LAST);
	got[1] = arrived(c, &seen, 2);
	barrier(c);
	enable(c, 0, 0);
	got[2] = arrived(c, &seen, 3);
	printf("emunic-exp-barrier: rank %d: enable index: %d, %d, %d sends arrived (libmlx5: 1, 2, 3)\n", c->rank,
	       got[0], got[1], got[2]);
	return got[0] != 1 || got[1] != 2 || got[2] != 3;
}

/* ---- MANAGED_RECV: receives held until RECV_ENABLE ------------------------------- */

/* A receive posted on a MANAGED_RECV QP waits for a RECV_ENABLE naming it:
 * the partner's send finds no receive (RNR, retried: rnr_retry 7) and
 * arrives only once the enable let the receive go. */
static int recv_enable_check(struct ctx *c)
{
	struct ibv_exp_send_wr snd = { .exp_opcode = IBV_EXP_WR_SEND }, en = enable_wr(IBV_EXP_WR_RECV_ENABLE, c->yqp, 1);
	struct ibv_exp_send_wr *bad;
	struct ibv_recv_wr rwr = { .wr_id = 7, .num_sge = 0 }, *rbad;
	struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };
	int before, after = 0, good, r;
	time_t t0;

	if ((r = ibv_post_recv(c->yqp, &rwr, &rbad)))
		die(c, "ibv_post_recv on the MANAGED_RECV QP", r);
	barrier(c);	/* both receives posted (and held) before either send */
	if ((r = ibv_exp_post_send(c->yqp, &snd, &bad)))
		die(c, "SEND to a held receive", r);
	usleep(300000);
	before = ibv_poll_cq(c->ycq, 1, &wc);
	barrier(c);
	if ((r = ibv_exp_post_send(c->mqp, &en, &bad)))
		die(c, "RECV_ENABLE", r);
	for (t0 = time(NULL); after == 0 && time(NULL) - t0 < 30;)
		after = ibv_poll_cq(c->ycq, 1, &wc);
	good = before == 0 && after == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7;
	printf("emunic-exp-barrier: rank %d: recv enable: %d arrived before RECV_ENABLE, %d after%s\n", c->rank,
	       before, after, good ? ", as libmlx5" : ", NOT as libmlx5 (0 before, then 1)");
	barrier(c);	/* the partner's send completed too */
	return !good;
}

/* ---- the check ------------------------------------------------------------------- */

/* The file all ranks map (--shm): the rounds' counter, then the QP-number
 * table (a rank's numbers at rank x NSLOTS), zero until written. */
static void shared_map(struct ctx *c, const char *path)
{
	size_t len = sizeof(uint64_t) + (size_t)c->size * NSLOTS * sizeof(uint32_t);
	int fd = open(path, O_RDWR | O_CREAT, 0600);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)len))
		die(c, path, errno);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die(c, "mmap", errno);
	close(fd);
	c->ctr = p;
	c->qpn = (_Atomic uint32_t *)((char *)p + sizeof(uint64_t));
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "rounds", required_argument, 0, 'r' }, { "skew-us", required_argument, 0, 's' },
		{ "shm", required_argument, 0, 'm' }, { "errors", no_argument, 0, 'e' },
		{ "no-barrier", no_argument, 0, 'n' }, { "enable-index", no_argument, 0, 'i' },
		{ "allreduce", required_argument, 0, 'a' }, { 0, 0, 0, 0 } };
	static struct ctx c = { .rank = -1 };
	int rounds = 300, skew = 100, errors = 0, nobar = 0, index = 0, fails = 0, allreduce = 0, opt;
	uint64_t violations = 0;
	const char *shm = NULL;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'r': rounds = atoi(optarg); break;
		case 's': skew = atoi(optarg); break;
		case 'm': shm = optarg; break;
		case 'e': errors = 1; break;
		case 'n': nobar = 1; break;
		case 'i': index = 1; break;
		case 'a': allreduce = atoi(optarg); break;
		default: return 2;
		}
	}
	if (!shm || !getenv("EMUNIC_RANK") || !getenv("EMUNIC_SIZE")) {
		fprintf(stderr, "usage: emunic-run -n N emunic-exp-barrier --shm FILE [--rounds N] [--skew-us N] "
			"[--errors] [--enable-index] [--allreduce ROUNDS] [--no-barrier]\n  FILE: new and empty (mktemp), mapped by every "
			"rank: the rounds' counter and the QP numbers\n");
		return 2;
	}
	c.rank = atoi(getenv("EMUNIC_RANK"));
	c.size = atoi(getenv("EMUNIC_SIZE"));
	while ((1 << c.steps) < c.size)
		c.steps++;
	if (c.size < 1 || (1 << c.steps) != c.size || c.steps > MAX_STEPS) {
		fprintf(stderr, "emunic-exp-barrier: %d ranks: a power of two, please\n", c.size);
		return 2;
	}
	shared_map(&c, shm);
	setup(&c, index, allreduce > 0);
	if (errors) {
		fails = bad_flows(&c);
		fails += verbs_calls(&c);
	}
	if (index && c.steps) {
		fails += span_overflow(&c);
		fails += index_check(&c);
		fails += recv_enable_check(&c);
	}
	if (allreduce > 0 && c.steps)
		fails += allreduce_check(&c, allreduce);
	srand((unsigned)(c.rank * 7919 + 1));
	barrier(&c);	/* every rank is set up */
	for (int i = 0; i < rounds; i++) {
		if (skew > 0)
			usleep((useconds_t)(rand() % (skew + 1)));
		atomic_fetch_add(c.ctr, 1);
		if (!nobar)
			barrier(&c);
		if (atomic_load(c.ctr) < (uint64_t)(i + 1) * (uint64_t)c.size)
			violations++;
	}
	barrier(&c);
	printf("emunic-exp-barrier: rank %d: %d ranks, %d rounds, %llu violations, %d bad flows not as verbs_exp\n",
	       c.rank, c.size, rounds, (unsigned long long)violations, fails);
	/* The shim's QPs and CQs go at exit, after the ranks meet (so no rank
	 * destroys a QP under its partner's last message); the program's own
	 * verbs objects go here. */
	munmap((void *)c.ctr, sizeof(uint64_t) + (size_t)c.size * NSLOTS * sizeof(uint32_t));
	if (c.xmr)
		ibv_dereg_mr(c.xmr);
	ibv_dealloc_pd(c.pd);
	ibv_close_device(c.ibctx);
	return violations || fails ? 1 : 0;
}
