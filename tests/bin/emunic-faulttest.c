/* SPDX-License-Identifier: MIT */
/*
 * emunic-faulttest: one operation of one engine, run by two ranks under
 * whatever $EMUNIC_FAULTS says (emunic-run -n 2 -f SPEC emunic-faulttest OP).
 * Rank 0 starts the operation toward rank 1; each rank prints one line
 *
 *   faulttest: rank R: OP: RESULT (peer P, qp N, T ms)
 *
 * where RESULT is the completion status by name (SUCCESS, RNR_RETRY_EXC_ERR,
 * RETRY_EXC_ERR, WR_FLUSH_ERR, ...) for verbs-level operations, or the
 * errno name an engine returned (OK, EIO, ETIMEDOUT).  A rank that sees no
 * result within --timeout-ms prints NONE.  Exit 0 when every wait was
 * bounded; the test decides whether RESULT is the right one.
 *
 * OPs: send write write_imm read fetch_add (a task on a plain QP), mq (a
 * managed send released by SEND_EN and a signaled WAIT), trig-put trig-get
 * (triggered ops, status from their events), barrier and allreduce (emunic_coll), and
 * eager rtr chunked (emunic_rndv isend/irecv); barrier-dead runs on any
 * number of ranks: the last exits before a barrier the others enter;
 * others: rank 0 sends to every other rank at once (a fault on one pair must
 * not touch the rest).
 */
#include "emunic.h"
#include <emunic/coll.h>
#include <emunic/rndv.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"

struct t {
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct emunic_mr *mr;
	char *buf;
	struct emunic_cq *scq, *rcq;
	struct emunic_qp *qp;
	struct emunic_mq *mq;
	int rank, timeout_ms;
	int reconnects;		/* rndv ops: < 0: the engine's default */
	const char *op;
	struct timespec t0;
};

static struct t T_;
static struct t *const T = &T_;

#define BUF 4096
#define BIG (1u << 20)

static void die(const char *what, int r)
{
	fprintf(stderr, "emunic-faulttest: rank %d: %s failed: %s\n", T->rank, what, strerror(-r));
	exit(TEST_NORUN);
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static const char *status_name(int st)
{
	static const char *const n[] = {
		[0] = "SUCCESS", [1] = "LOC_LEN_ERR", [2] = "LOC_QP_OP_ERR", [4] = "LOC_PROT_ERR",
		[5] = "WR_FLUSH_ERR", [8] = "LOC_ACCESS_ERR", [9] = "REM_INV_REQ_ERR", [10] = "REM_ACCESS_ERR",
		[11] = "REM_OP_ERR", [12] = "RETRY_EXC_ERR", [13] = "RNR_RETRY_EXC_ERR", [16] = "REM_ABORT_ERR",
		[19] = "FATAL_ERR", [20] = "RESP_TIMEOUT_ERR", [21] = "GENERAL_ERR",
	};
	static char other[32];

	if (st == EMUNIC_WC_CANCELED)
		return "CANCELED";
	if (st >= 0 && st < (int)(sizeof(n) / sizeof(n[0])) && n[st])
		return n[st];
	snprintf(other, sizeof(other), "STATUS_%d", st);
	return other;
}

static const char *errno_name(int e)
{
	switch (-e) {
	case 0: return "OK";
	case EIO: return "EIO";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECANCELED: return "ECANCELED";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ENOTCONN: return "ENOTCONN";
	default: return strerror(-e);
	}
}

static void report(const char *what, const char *result, int peer, uint32_t qpn)
{
	printf("faulttest: rank %d: %s: %s (peer %d, qp %u, %ld ms)\n", T->rank, what, result, peer, qpn,
	       ms_since(&T->t0));
	fflush(stdout);
}

static void sync_ranks(void)
{
	int r = emunic_boot_barrier(T->boot);

	if (r)
		die("boot barrier", r);
}

/* ---- verbs-level operations on a plain or managed QP ---- */

static void qp_setup(unsigned flags)
{
	struct emunic_qp_attr a;
	int r;

	if ((r = emunic_cq_create(T->dev, 64, 0, &T->scq)) || (r = emunic_cq_create(T->dev, 64, 0, &T->rcq)) ||
	    (r = emunic_mq_create(T->dev, 0, &T->mq)))
		die("cq/mq create", r);
	emunic_qp_attr_init(&a);
	a.flags = flags;
	a.send_cq = T->scq;
	a.recv_cq = T->rcq;
	if ((r = emunic_qp_create(T->dev, 1 - T->rank, &a, &T->qp)))
		die("qp create", r);
	if ((r = emunic_qp_wait_connected(T->qp, 30000)))
		die("connect", r);
}

/* One completion from cq within the timeout: its status, or -1. */
static int one_wc(struct emunic_cq *cq, struct emunic_wc *wc, int timeout_ms)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (emunic_cq_poll(cq, wc, 1) == 1)
			return wc->status;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	} while (ms_since(&t0) < timeout_ms);
	return -1;
}

static void post(struct emunic_task t)
{
	int r = emunic_mq_post(T->mq, &t, 1);

	if (r)
		die("emunic_mq_post", r);
}

static int task_op(const char *op)
{
	static const struct { const char *name; int op; } ops[] = {
		{ "send", EMUNIC_TASK_SEND }, { "write", EMUNIC_TASK_WRITE }, { "write_imm", EMUNIC_TASK_WRITE_IMM },
		{ "read", EMUNIC_TASK_READ }, { "fetch_add", EMUNIC_TASK_FETCH_ADD }, { "mq", EMUNIC_TASK_SEND },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(op, ops[i].name))
			return ops[i].op;
	return 0;
}

static void run_verbs(int op, bool managed)
{
	struct emunic_rkey mine, all[2];
	struct emunic_wc wc;
	int r, st;

	qp_setup(managed && T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0);
	if ((r = emunic_mr_reg(T->dev, T->buf, BUF, &T->mr)))
		die("mr_reg", r);
	mine = emunic_mr_rkey(T->mr);
	if ((r = emunic_dev_allgather(T->dev, &mine, sizeof(mine), all)))
		die("allgather", r);
	if (T->rank == 1)
		post((struct emunic_task){ .op = EMUNIC_TASK_RECV, .qp = T->qp, .addr = T->buf, .len = 64,
					   .mr = T->mr, .wr_id = 1 });
	sync_ranks();
	clock_gettime(CLOCK_MONOTONIC, &T->t0);
	if (T->rank == 0) {
		struct emunic_task t = { .op = op, .qp = T->qp, .addr = T->buf, .len = op == EMUNIC_TASK_FETCH_ADD ? 8 : 64,
					 .mr = T->mr, .remote_addr = all[1].addr, .rkey = all[1].rkey, .imm = 7,
					 .add = 1, .wr_id = 2 };

		post(t);
		if (managed) {
			struct emunic_task l[2] = {
				{ .op = EMUNIC_TASK_SEND_EN, .qp = T->qp, .count = 1 },
				{ .op = EMUNIC_TASK_WAIT, .cq = T->scq, .count = 1, .flags = EMUNIC_TASK_SIGNAL, .wr_id = 3 },
			};

			if ((r = emunic_mq_post(T->mq, l, 2)))
				die("emunic_mq_post", r);
			r = emunic_mq_wait(T->mq, &wc, T->timeout_ms);
			if (r)
				report("mq WAIT", "NONE", 1, 0);
			else
				report("mq WAIT", status_name(wc.status), wc.peer, wc.qp_num);
		} else {
			st = one_wc(T->scq, &wc, T->timeout_ms);
			report(emunic_task_op_str(op), st < 0 ? "NONE" : status_name(st), 1, st < 0 ? 0 : wc.qp_num);
		}
	}
	sync_ranks();
	if (T->rank == 1) {
		/* Only SEND and WRITE_IMM consume the receive. */
		st = one_wc(T->rcq, &wc, op == EMUNIC_TASK_SEND || op == EMUNIC_TASK_WRITE_IMM ? 2000 : 300);
		report("RECV", st < 0 ? "NONE" : status_name(st), 0, st < 0 ? 0 : wc.qp_num);
	}
}

/* Rank 0 sends to every other rank at once over its own QPs: a fault on one
 * pair must leave the others' traffic alone. */
static void run_others(void)
{
	struct emunic_qp *q[64] = { 0 };
	struct emunic_qp_attr a;
	struct emunic_wc wc;
	int size = emunic_dev_size(T->dev), r, st;

	if (size > 64)
		die("others (at most 64 ranks)", -EINVAL);
	if ((r = emunic_cq_create(T->dev, 64, 0, &T->scq)) || (r = emunic_cq_create(T->dev, 64, 0, &T->rcq)) ||
	    (r = emunic_mq_create(T->dev, 0, &T->mq)) || (r = emunic_mr_reg(T->dev, T->buf, BUF, &T->mr)))
		die("cq/mq/mr", r);
	emunic_qp_attr_init(&a);
	a.send_cq = T->scq;
	a.recv_cq = T->rcq;
	for (int p = 0; p < size; p++)
		if (p != T->rank && (T->rank == 0 || p == 0) &&
		    ((r = emunic_qp_create(T->dev, p, &a, &q[p])) || (r = emunic_qp_wait_connected(q[p], 30000))))
			die("qp to a peer", r);
	if (T->rank != 0)
		post((struct emunic_task){ .op = EMUNIC_TASK_RECV, .qp = q[0], .addr = T->buf, .len = 64,
					   .mr = T->mr, .wr_id = 1 });
	sync_ranks();
	clock_gettime(CLOCK_MONOTONIC, &T->t0);
	if (T->rank == 0) {
		for (int p = 1; p < size; p++)
			post((struct emunic_task){ .op = EMUNIC_TASK_SEND, .qp = q[p], .addr = T->buf, .len = 64,
						   .mr = T->mr, .wr_id = (uint64_t)p });
		for (int n = 1; n < size; n++) {
			char what[32];

			if ((st = one_wc(T->scq, &wc, T->timeout_ms)) < 0) {
				report("SEND", "NONE", -1, 0);
				break;
			}
			snprintf(what, sizeof(what), "SEND to %d", wc.peer);
			report(what, status_name(st), wc.peer, wc.qp_num);
		}
	}
	sync_ranks();
	if (T->rank != 0) {
		st = one_wc(T->rcq, &wc, 2000);
		report("RECV", st < 0 ? "NONE" : status_name(st), 0, st < 0 ? 0 : wc.qp_num);
	}
}

/* ---- triggered put / get: the status of the initiator's event ---- */

static void run_trig(int kind)
{
	struct emunic_qp_attr a;
	struct emunic_target mine, all[2];
	struct emunic_le_attr la = { 0 };
	struct emunic_le *le;
	struct emunic_eq *eq;
	struct emunic_event ev;
	int r;

	emunic_qp_attr_init(&a);
	a.flags = EMUNIC_QP_TRIGGERED;
	if ((r = emunic_qp_create(T->dev, 1 - T->rank, &a, &T->qp)) || (r = emunic_qp_wait_connected(T->qp, 30000)))
		die("triggered qp", r);
	if ((r = emunic_mr_reg(T->dev, T->buf, BUF, &T->mr)) || (r = emunic_eq_create(T->dev, 64, NULL, NULL, &eq)))
		die("mr/eq", r);
	la.mr = T->mr;
	la.addr = T->buf;
	la.len = BUF;
	if ((r = emunic_le_create(T->dev, &la, &le)))
		die("le_create", r);
	mine = emunic_le_target(le);
	if ((r = emunic_dev_allgather(T->dev, &mine, sizeof(mine), all)))
		die("allgather", r);
	sync_ranks();
	clock_gettime(CLOCK_MONOTONIC, &T->t0);
	if (T->rank == 0) {
		struct emunic_op op = { .kind = kind, .qp = T->qp, .addr = T->buf, .len = 64, .mr = T->mr,
					.target = all[1], .eq = eq };

		if ((r = emunic_op_post(T->dev, &op)))
			die("emunic_op_post", r);
		r = emunic_eq_wait(eq, &ev, T->timeout_ms);
		report(emunic_op_kind_str(kind), r ? "NONE" : status_name(ev.status), r ? 1 : ev.peer,
		       r ? 0 : ev.qp_num);
	}
	sync_ranks();
	emunic_le_destroy(le);
	emunic_eq_destroy(eq);
}

/* ---- engines: barrier and point-to-point ---- */

/* One barrier, or one allreduce (a SUM of four INT64). */
static int coll_op(struct emunic_coll *c, bool allreduce)
{
	/* Static: an allreduce that timed out still writes its result later. */
	static int64_t in[4] = { 1, 2, 3, 4 }, out[4];

	return allreduce ? emunic_allreduce(c, in, out, 4, EMUNIC_CALC_INT64, EMUNIC_CALC_SUM) : emunic_barrier(c);
}

static void run_coll(bool allreduce)
{
	const char *what = allreduce ? "allreduce" : "barrier";
	struct emunic_coll_attr a;
	struct emunic_coll *c;
	char next[32];
	int r;

	emunic_coll_attr_init(&a);
	a.timeout_ms = T->timeout_ms;
	a.kind = allreduce ? EMUNIC_COLL_ALLREDUCE : EMUNIC_COLL_BARRIER;
	if ((r = emunic_coll_create(T->dev, &a, &c)))
		die("coll_create", r);
	sync_ranks();
	clock_gettime(CLOCK_MONOTONIC, &T->t0);
	r = coll_op(c, allreduce);
	report(what, errno_name(r), 1 - T->rank, 0);
	/* An operation is done once its partner's data came; its own SEND's
	 * failure may be seen only after that: the next one reports it. */
	snprintf(next, sizeof(next), "next %s", what);
	if (!r)
		report(next, errno_name(coll_op(c, allreduce)), 1 - T->rank, 0);
	sync_ranks();
	emunic_coll_destroy(c);
}

/* The last rank dies after connecting; every survivor's barrier must fail
 * (EIO from a failed QP, or ETIMEDOUT waiting on a partner that failed)
 * within the timeout.  No boot exchange after it: the dead cannot join. */
static void run_barrier_dead(void)
{
	struct emunic_coll_attr a;
	struct emunic_coll *c;
	int size = emunic_dev_size(T->dev), r;

	emunic_coll_attr_init(&a);
	a.timeout_ms = T->timeout_ms;
	if ((r = emunic_coll_create(T->dev, &a, &c)))
		die("coll_create", r);
	sync_ranks();
	if (T->rank == size - 1) {
		printf("faulttest: rank %d: exits now, without closing anything\n", T->rank);
		fflush(stdout);
		_exit(0);
	}
	clock_gettime(CLOCK_MONOTONIC, &T->t0);
	r = emunic_barrier(c);
	report("barrier", errno_name(r), size - 1, 0);
	emunic_coll_destroy(c);
}

static void run_rndv(unsigned proto, size_t len)
{
	struct emunic_rndv_attr a;
	struct emunic_rndv *rv;
	struct emunic_req *q;
	struct emunic_status st = { 0 };
	struct emunic_rndv_stats rs;
	char *m = calloc(1, len);
	int r;

	emunic_rndv_attr_init(&a);
	a.proto = proto;
	if (T->reconnects >= 0)
		a.reconnects = (unsigned)T->reconnects;
	if (!m || (r = emunic_rndv_create(T->dev, &a, &rv)))
		die("rndv_create", m ? r : -ENOMEM);
	sync_ranks();
	clock_gettime(CLOCK_MONOTONIC, &T->t0);
	r = T->rank == 0 ? emunic_isend(rv, m, len, 1, 5, &q) : emunic_irecv(rv, m, len, 0, 5, &q);
	if (r)
		die(T->rank == 0 ? "isend" : "irecv", r);
	r = emunic_wait(q, &st, T->timeout_ms);
	if (r == -ETIMEDOUT) {
		report(T->rank == 0 ? "isend" : "irecv", "ETIMEDOUT", 1 - T->rank, 0);
		emunic_cancel(q);
	} else {
		report(T->rank == 0 ? "isend" : "irecv", errno_name(st.error), 1 - T->rank, 0);
	}
	if (!emunic_rndv_stats(rv, &rs))
		printf("faulttest: rank %d: reconnections: %llu\n", T->rank, (unsigned long long)rs.reconnects);
	sync_ranks();
	/* Destroying is collective: only when every rank's request is gone. */
	int ok = !emunic_req_free(q), all[2];

	if ((r = emunic_dev_allgather(T->dev, &ok, sizeof(ok), all)))
		die("allgather", r);
	if (all[0] && all[1])
		emunic_rndv_destroy(rv);
	if (ok)
		free(m);	/* else still the request's */
}

static void usage(FILE *f)
{
	fprintf(f, "usage: emunic-run -n 2 [-f SPEC] emunic-faulttest OP [--timeout-ms N] [--reconnects N]\n"
		   "OP: send write write_imm read fetch_add mq trig-put trig-get barrier eager rtr chunked allreduce\n"
		   "    barrier-dead (any number of ranks: the last one exits before the barrier)\n"
		   "    others (any number: rank 0 sends to every other rank at once)\n"
		   "--reconnects N: eager/rtr/chunked: how often the engine makes a failed connection\n"
		   "    again and resends (default: the engine's; 0: a failure is final)\n");
}

int main(int argc, char **argv)
{
	struct emunic_dev_attr da;
	struct emunic_fault_stats fs;
	int r;

	T->timeout_ms = 10000;
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	T->op = argv[1];
	T->reconnects = -1;
	for (int i = 2; i < argc; i += 2) {
		if (i + 1 < argc && !strcmp(argv[i], "--timeout-ms")) {
			T->timeout_ms = atoi(argv[i + 1]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--reconnects")) {
			T->reconnects = atoi(argv[i + 1]);
		} else {
			usage(stderr);
			return TEST_USAGE;
		}
	}
	if ((r = emunic_boot_init(&T->boot)))
		die("boot", r);
	T->rank = emunic_boot_rank(T->boot);
	emunic_log_set_rank(T->rank);
	if (emunic_boot_size(T->boot) != 2 && strcmp(T->op, "barrier-dead") && strcmp(T->op, "others")) {
		fprintf(stderr, "emunic-faulttest: needs 2 ranks\n");
		return TEST_USAGE;
	}
	emunic_dev_attr_init(&da);
	if ((r = emunic_dev_open(T->boot, &da, &T->dev)))
		die("emunic_dev_open", r);
	T->buf = aligned_alloc(4096, BIG);
	memset(T->buf, 0, BIG);
	if (task_op(T->op))
		run_verbs(task_op(T->op), !strcmp(T->op, "mq"));
	else if (!strcmp(T->op, "trig-put") || !strcmp(T->op, "trig-get"))
		run_trig(!strcmp(T->op, "trig-put") ? EMUNIC_OP_PUT : EMUNIC_OP_GET);
	else if (!strcmp(T->op, "barrier") || !strcmp(T->op, "allreduce"))
		run_coll(!strcmp(T->op, "allreduce"));
	else if (!strcmp(T->op, "barrier-dead"))
		run_barrier_dead();
	else if (!strcmp(T->op, "others"))
		run_others();
	else if (!strcmp(T->op, "eager"))
		run_rndv(EMUNIC_RNDV_CHUNKED, 64);
	else if (!strcmp(T->op, "rtr"))
		run_rndv(EMUNIC_RNDV_RTR, 256 * 1024);
	else if (!strcmp(T->op, "chunked"))
		run_rndv(EMUNIC_RNDV_CHUNKED, 256 * 1024);
	else {
		usage(stderr);
		return TEST_USAGE;
	}
	emunic_fault_stats(T->dev, &fs);
	printf("faulttest: rank %d: injected: %llu wc, %llu QPs held, %llu QPs failed\n", T->rank,
	       (unsigned long long)fs.wc_injected, (unsigned long long)fs.qps_held,
	       (unsigned long long)fs.qps_failed);
	if (T->mr)
		emunic_mr_dereg(T->mr);
	emunic_dev_close(T->dev);
	emunic_boot_fini(T->boot);
	free(T->buf);
	return 0;
}
