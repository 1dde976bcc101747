/* SPDX-License-Identifier: MIT */
/*
 * emunic-mqtest: one conformance check of the management-queue rules per
 * name, run by two ranks (emunic-run -n 2 emunic-mqtest NAME).  Rank 0
 * sends, rank 1 receives; each check prints PASS or what it saw instead.
 */
#include "emunic.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HARNESS_RANK (T->rank)
#include "harness.h"

struct t {
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct emunic_mr *mr;
	char *buf;
	struct emunic_cq *scq, *rcq;
	struct emunic_qp *qp;
	struct emunic_mq *mq;
	int rank;
};

static struct t *T;

static void ms(int n) { struct timespec ts = { n / 1000, (n % 1000) * 1000000L }; nanosleep(&ts, NULL); }
static void sync_ranks(void) { CHECK(!emunic_boot_barrier(T->boot), "barrier"); }

static struct emunic_task data(int op, unsigned i)
{
	return (struct emunic_task){ .op = op, .qp = T->qp, .addr = T->buf + 64 * i, .len = 8, .mr = T->mr,
				     .wr_id = i };
}

static struct emunic_task ctl(int op, uint32_t n, unsigned flags)
{
	return (struct emunic_task){ .op = op, .qp = T->qp, .cq = T->rcq, .count = n, .flags = flags,
				     .wr_id = 1000 + n };
}

static void post(struct emunic_task *ts, unsigned n)
{
	int r = emunic_mq_post(T->mq, ts, n);

	CHECK(r == 0, "emunic_mq_post of %u tasks: %s", n, strerror(-r));
}

static void post1(struct emunic_task t) { post(&t, 1); }

/* Waits up to 5 s for the receive CQ to reach n; returns what it reached. */
static uint64_t await(struct emunic_cq *cq, uint64_t n)
{
	for (int i = 0; i < 500 && emunic_cq_count(cq) < n; i++)
		ms(10);
	return emunic_cq_count(cq);
}

/* Exactly n arrive, and no more within wait_ms (what was refused never
 * went out). */
static void arrive_exactly(uint64_t n, int wait_ms, const char *what)
{
	CHECK(await(T->rcq, n) == n, "%s: %llu of %llu arrived", what, (unsigned long long)emunic_cq_count(T->rcq),
	      (unsigned long long)n);
	ms(wait_ms);
	CHECK(emunic_cq_count(T->rcq) == n, "%s: %llu arrived, not %llu", what,
	      (unsigned long long)emunic_cq_count(T->rcq), (unsigned long long)n);
}

static void recvs(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		post1(data(EMUNIC_TASK_RECV, i));
}

static void setup(unsigned flags, int rnr_retry)
{
	struct emunic_qp_attr a;

	CHECK(!emunic_cq_create(T->dev, 256, 0, &T->scq) && !emunic_cq_create(T->dev, 256, 0, &T->rcq), "cq");
	emunic_qp_attr_init(&a);
	a.flags = flags;
	a.send_cq = T->scq;
	a.recv_cq = T->rcq;
	a.rnr_retry = rnr_retry;
	CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &T->qp), "qp_create");
	CHECK(!emunic_mq_create(T->dev, 0, &T->mq), "mq_create");
	CHECK(!emunic_qp_wait_connected(T->qp, 30000), "connect");
}

static void t_held(void)
{
	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	if (T->rank == 1)
		recvs(1);
	sync_ranks();
	if (T->rank == 0)
		post1(data(EMUNIC_TASK_SEND, 0));
	ms(300);
	if (T->rank == 1)
		CHECK(emunic_cq_count(T->rcq) == 0, "a held send arrived before its enable");
	sync_ranks();
	if (T->rank == 0)
		post1(ctl(EMUNIC_TASK_SEND_EN, 1, 0));
	if (T->rank == 1)
		CHECK(await(T->rcq, 1) == 1, "the enabled send did not arrive");
}

static void t_enable_n(void)
{
	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	if (T->rank == 1)
		recvs(6);
	sync_ranks();
	if (T->rank == 0) {
		for (unsigned i = 0; i < 5; i++)
			post1(data(EMUNIC_TASK_SEND, i));
		post1(ctl(EMUNIC_TASK_SEND_EN, 3, 0));
	}
	if (T->rank == 1) {
		CHECK(await(T->rcq, 3) >= 3, "SEND_EN(3) released fewer than 3");
		ms(300);
		CHECK(emunic_cq_count(T->rcq) == 3, "SEND_EN(3) released %llu",
		      (unsigned long long)emunic_cq_count(T->rcq));
	}
	sync_ranks();
	if (T->rank == 0)
		post1(ctl(EMUNIC_TASK_SEND_EN, 0, 0));	/* the rest */
	if (T->rank == 1)
		CHECK(await(T->rcq, 5) == 5, "SEND_EN(0) did not release all posted");
	sync_ranks();
	/* "All posted so far", not "from now on": a later send stays held. */
	if (T->rank == 0)
		post1(data(EMUNIC_TASK_SEND, 5));
	ms(300);
	if (T->rank == 1)
		CHECK(emunic_cq_count(T->rcq) == 5, "a send posted after SEND_EN(0) ran without an enable");
}

static void t_enable_too_many(void)
{
	struct emunic_task list[2];

	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	if (T->rank == 1)
		recvs(2);
	sync_ranks();
	if (T->rank == 0) {
		post1(data(EMUNIC_TASK_SEND, 0));
		post1(data(EMUNIC_TASK_SEND, 1));
		list[0] = ctl(EMUNIC_TASK_SEND_EN, 3, 0);
		CHECK(emunic_mq_post(T->mq, list, 1) == -EINVAL, "SEND_EN(3) with 2 posted was accepted");
		/* A list whose last task is invalid posts nothing, not its first. */
		list[0] = ctl(EMUNIC_TASK_SEND_EN, 1, 0);
		list[1] = ctl(EMUNIC_TASK_SEND_EN, 2, 0);
		CHECK(emunic_mq_post(T->mq, list, 2) == -EINVAL, "SEND_EN 1 + 2 with 2 posted was accepted");
	}
	ms(300);
	if (T->rank == 1)
		CHECK(emunic_cq_count(T->rcq) == 0, "a rejected enable released work");
	sync_ranks();
	if (T->rank == 0)
		post1(ctl(EMUNIC_TASK_SEND_EN, 2, 0));	/* nothing was changed */
	if (T->rank == 1)
		CHECK(await(T->rcq, 2) == 2, "after the rejected enables, SEND_EN(2) did not release 2");
}

static int mq_count(int wait_ms)
{
	struct emunic_wc wc[8];
	int n = 0, r;

	ms(wait_ms);
	while ((r = emunic_mq_poll(T->mq, wc, 8)) > 0)
		n += r;
	return n;
}

static void sends(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		post1(data(EMUNIC_TASK_SEND, i));
}

static void t_wait_nth(void)
{
	setup(0, 7);
	if (T->rank == 1) {
		recvs(3);
		post1(ctl(EMUNIC_TASK_WAIT, 3, EMUNIC_TASK_SIGNAL));
	}
	sync_ranks();
	if (T->rank == 0)
		sends(2);
	if (T->rank == 1) {
		CHECK(await(T->rcq, 2) == 2, "2 sends did not arrive");
		CHECK(mq_count(300) == 0, "WAIT(3) completed at the 2nd completion");
	}
	sync_ranks();
	if (T->rank == 0)
		sends(1);
	if (T->rank == 1) {
		struct emunic_wc wc;

		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0, "WAIT(3) did not complete at the 3rd");
		CHECK(wc.op == EMUNIC_TASK_WAIT && wc.status == 0 && wc.wr_id == 1003, "wrong MQ completion");
	}
}

static void t_wait_base(void)
{
	setup(0, 7);
	if (T->rank == 1) {
		recvs(2);
		post1(ctl(EMUNIC_TASK_WAIT, 1, EMUNIC_TASK_SIGNAL | EMUNIC_TASK_WAIT_EN_LAST));
		post1(ctl(EMUNIC_TASK_WAIT, 1, EMUNIC_TASK_SIGNAL));	/* base moved: the 2nd */
	}
	sync_ranks();
	if (T->rank == 0)
		sends(1);
	if (T->rank == 1)
		CHECK(await(T->rcq, 1) == 1 && mq_count(300) == 1, "after 1 completion, not exactly 1 WAIT done");
	sync_ranks();
	if (T->rank == 0)
		sends(1);
	if (T->rank == 1)
		CHECK(await(T->rcq, 2) == 2 && mq_count(300) == 1, "the 2nd WAIT did not complete at the 2nd");
}

static void t_consumed(void)
{
	struct emunic_wc wc[8];

	setup(0, 7);
	if (T->rank == 1) {
		recvs(3);
		post1(ctl(EMUNIC_TASK_WAIT, 2, 0));
	}
	sync_ranks();
	if (T->rank == 0)
		sends(3);
	if (T->rank == 1) {
		int n;

		CHECK(await(T->rcq, 3) == 3, "3 sends did not arrive");
		n = emunic_cq_poll(T->rcq, wc, 8);
		CHECK(n == 1 && wc[0].wr_id == 2, "poll returned %d completions, expected only the 3rd", n);
	}
}

/* The same rule when the completions come first and the WAIT after them
 * (issue 18, item 6): what the app's poll sees must not depend on the order. */
static void t_consumed_after(void)
{
	struct emunic_wc wc[8];

	setup(0, 7);
	if (T->rank == 1)
		recvs(3);
	sync_ranks();
	if (T->rank == 0)
		sends(2);
	if (T->rank == 1) {
		int n;

		CHECK(await(T->rcq, 2) == 2, "2 sends did not arrive");
		post1(ctl(EMUNIC_TASK_WAIT, 2, EMUNIC_TASK_SIGNAL));
		CHECK(emunic_mq_wait(T->mq, &wc[0], 5000) == 0 && wc[0].wr_id == 1002,
		      "the WAIT(2) posted after 2 completions did not complete");
		n = emunic_cq_poll(T->rcq, wc, 8);
		CHECK(n == 0, "poll returned %d completion(s) the WAIT covered (first wr_id %llu)", n,
		      n > 0 ? (unsigned long long)wc[0].wr_id : 0ull);
	}
	sync_ranks();
	if (T->rank == 0)
		sends(1);
	if (T->rank == 1) {
		int n;

		CHECK(await(T->rcq, 3) == 3, "the 3rd send did not arrive");
		n = emunic_cq_poll(T->rcq, wc, 8);
		CHECK(n == 1 && wc[0].wr_id == 2, "poll returned %d completions, expected only the 3rd", n);
	}
}

static void t_signal_once(void)
{
	struct emunic_task l[3];
	struct emunic_wc wc;

	setup(0, 7);
	if (T->rank == 1)
		recvs(3);
	sync_ranks();
	if (T->rank == 0) {
		CHECK(emunic_mq_pending(T->mq) == 0, "emunic_mq_pending: 1 on an MQ with nothing posted");
		l[0] = data(EMUNIC_TASK_SEND, 0);
		l[1] = data(EMUNIC_TASK_SEND, 1);
		l[1].flags = EMUNIC_TASK_SIGNAL;
		l[2] = data(EMUNIC_TASK_SEND, 2);
		post(l, 3);
		/* The engine (the post's pass, then the core) queues it with
		 * nobody waiting; emunic_mq_pending sees it without taking it. */
		for (int i = 0; i < 5000 && !emunic_mq_pending(T->mq); i++)
			ms(1);
		CHECK(emunic_mq_pending(T->mq) == 1, "emunic_mq_pending: 0 for 5 s after the post");
		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.wr_id == 1, "no MQ completion for the SIGNAL task");
		CHECK(emunic_mq_pending(T->mq) == 0, "emunic_mq_pending: still 1 once the completion was taken");
		CHECK(mq_count(300) == 0, "more than one MQ completion");
	}
}

struct lister { unsigned base; };

static void *post_lists(void *arg)
{
	struct lister *l = arg;
	struct emunic_task ts[4];

	for (int round = 0; round < 50; round++) {
		for (unsigned i = 0; i < 4; i++) {
			ts[i] = data(EMUNIC_TASK_SEND, l->base + i);
			ts[i].wr_id = l->base * 1000 + (unsigned)round * 4 + i;
		}
		post(ts, 4);
	}
	return NULL;
}

static void t_no_interleave(void)
{
	setup(0, 7);
	if (T->rank == 1) {
		for (unsigned i = 0; i < 400; i++) {
			struct emunic_task t = data(EMUNIC_TASK_RECV, i);	/* slot i */

			post1(t);
		}
	}
	for (unsigned i = 0; T->rank == 0 && i < 8; i++)
		memset(T->buf + 64 * i, i < 4 ? 'A' : 'B', 8);
	sync_ranks();
	if (T->rank == 0) {
		pthread_t a, b;
		struct lister la = { 0 }, lb = { 4 };

		pthread_create(&a, NULL, post_lists, &la);
		pthread_create(&b, NULL, post_lists, &lb);
		pthread_join(a, NULL);
		pthread_join(b, NULL);
	}
	if (T->rank == 1) {
		int a = 0;

		/* One RC QP delivers in posting order: lists of 4 from two threads
		 * must arrive as whole groups of 4 of one letter. */
		CHECK(await(T->rcq, 400) == 400, "not all 400 sends arrived");
		for (unsigned i = 0; i < 400; i++) {
			char c = T->buf[64 * i], first = T->buf[64 * (i & ~3u)];

			a += c == 'A';
			CHECK(c == first && (c == 'A' || c == 'B'), "message %u is '%c' inside a list of '%c': lists "
			      "interleaved", i, c, first);
		}
		CHECK(a == 200, "%d messages from list A, expected 200", a);
	}
}

/* The receiver's receive is held (MANAGED_RECV, never enabled): the
 * sender's first send meets real RNR NAKs from rxe and, with rnr_retry 0,
 * fails with RNR_RETRY_EXC. */
static void rnr_setup(void)
{
	setup(T->rank == 1 ? EMUNIC_QP_MANAGED_RECV : 0, 0);
	if (T->rank == 1)
		recvs(1);
	sync_ranks();
}

static void t_rnr(void)
{
	struct emunic_wc wc;

	rnr_setup();
	if (T->rank == 0) {
		sends(1);
		CHECK(await(T->scq, 1) == 1, "the send never completed");
		CHECK(emunic_cq_poll(T->scq, &wc, 1) == 1, "no send completion to poll");
		CHECK(wc.status == EMUNIC_WC_RNR_RETRY_EXC_ERR, "send status %s, expected RNR retry exceeded",
		      emunic_wc_status_str(wc.status));
	}
	sync_ranks();
}

static void t_wait_error(void)
{
	struct emunic_task w;
	struct emunic_wc wc;

	/* A failed send (real RNR) is counted by an unsignaled WAIT on the send
	 * CQ: the failure must surface on the MQ, not pass as success. */
	rnr_setup();
	if (T->rank == 0) {
		struct emunic_task l[2];

		w = ctl(EMUNIC_TASK_WAIT, 1, 0);
		w.cq = T->scq;
		/* The failed WAIT ends its list: the second WAIT does not run
		 * (it would complete with the CQ's sticky error), it flushes. */
		l[0] = w;
		l[1] = w;
		l[1].flags = EMUNIC_TASK_SIGNAL;
		l[1].wr_id = 77;
		post(l, 2);
		sends(1);
		CHECK(emunic_mq_wait(T->mq, &wc, 20000) == 0, "no MQ completion for a WAIT over a failed send");
		CHECK(wc.op == EMUNIC_TASK_WAIT && wc.status == EMUNIC_WC_RNR_RETRY_EXC_ERR && wc.peer == 1 &&
		      wc.qp_num != 0,
		      "WAIT completed with %s for peer %d qp %u", emunic_wc_status_str(wc.status), wc.peer, wc.qp_num);
		CHECK(emunic_mq_wait(T->mq, &wc, 20000) == 0, "no MQ completion for the task after the failed WAIT");
		CHECK(wc.wr_id == 77 && wc.status == EMUNIC_WC_WR_FLUSH_ERR,
		      "the task after a failed WAIT of its list completed with %s (wr_id %llu), not flushed",
		      emunic_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
	}
	sync_ranks();
}

/* Waits up to 5 s for qp to fail. */
static bool fails_soon(struct emunic_qp *qp)
{
	for (int i = 0; i < 500 && !emunic_qp_failed(qp); i++)
		ms(10);
	return emunic_qp_failed(qp);
}

static void t_disconnect(void)
{
	struct emunic_qp_attr a;
	struct emunic_qp *other, *trig, *lone;
	struct emunic_task t;
	struct emunic_wc wc;

	/* Rank 0 holds a send (not enabled) and disconnects: its send flushes,
	 * rank 1's QP fails at once (its receives flush), and the pair's other
	 * QP still carries a send.  NULL is EINVAL; a second call leaves the
	 * failed QP as it is.  A triggered QP that would be connected again
	 * (reconnects 4) stays failed: the flushes that follow its own
	 * disconnect are not made good.  One still waiting to be connected
	 * fails at once. */
	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	emunic_qp_attr_init(&a);
	a.send_cq = T->scq;
	a.recv_cq = T->rcq;
	a.pair_key = 5;
	CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &other) && !emunic_qp_wait_connected(other, 30000),
	      "a second QP (pair key 5)");
	emunic_qp_attr_init(&a);
	a.flags = EMUNIC_QP_TRIGGERED;
	a.reconnects = 4;
	a.pair_key = 6;
	CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &trig) && !emunic_qp_wait_connected(trig, 30000),
	      "a triggered QP with reconnections (pair key 6)");
	if (T->rank == 1) {
		recvs(2);
		t = data(EMUNIC_TASK_RECV, 9);
		t.qp = other;
		post1(t);
	}
	sync_ranks();
	if (T->rank == 0) {
		sends(1);
		CHECK(emunic_qp_disconnect(NULL) == -EINVAL, "emunic_qp_disconnect(NULL) was accepted");
		CHECK(emunic_qp_disconnect(T->qp) == 0, "emunic_qp_disconnect failed");
		CHECK(fails_soon(T->qp), "the QP did not fail after emunic_qp_disconnect");
		CHECK(await(T->scq, 1) == 1 && emunic_cq_poll(T->scq, &wc, 1) == 1, "the held send did not complete");
		CHECK(wc.status == EMUNIC_WC_WR_FLUSH_ERR, "the held send completed with %s, not flushed",
		      emunic_wc_status_str(wc.status));
		CHECK(emunic_qp_disconnect(T->qp) == 0 && emunic_qp_failed(T->qp), "a second disconnect");
		CHECK(emunic_qp_disconnect(trig) == 0 && fails_soon(trig), "the triggered QP did not fail");
		ms(1000);
		CHECK(emunic_qp_failed(trig) && emunic_qp_reconnects(trig) == 0,
		      "the disconnected triggered QP came back (%u reconnections)", emunic_qp_reconnects(trig));
		/* A QP waiting for its peer's request (rank 0 waits for the
		 * higher rank's; rank 1 never makes this one): no attempt
		 * under way, so it fails at once. */
		emunic_qp_attr_init(&a);
		a.send_cq = T->scq;
		a.recv_cq = T->rcq;
		a.pair_key = 8;
		CHECK(!emunic_qp_create(T->dev, 1, &a, &lone), "a QP the peer never makes (pair key 8)");
		CHECK(!emunic_qp_connected(lone) && emunic_qp_disconnect(lone) == 0 && fails_soon(lone),
		      "a QP waiting for its peer's request did not fail at its disconnect");
		CHECK(emunic_qp_connected(other), "the other QP went down with the disconnected one");
		t = data(EMUNIC_TASK_SEND, 9);
		t.qp = other;
		post1(t);
	} else {
		/* Told, not left to find out at its next send's retries. */
		CHECK(fails_soon(T->qp), "the peer's disconnect did not fail this rank's QP within 5 s");
		CHECK(await(T->rcq, 3) == 3, "%llu of 3 receives completed: 2 flushed and the other QP's",
		      (unsigned long long)emunic_cq_count(T->rcq));
		CHECK(emunic_qp_connected(other), "the other QP went down with the disconnected one");
	}
	sync_ranks();
}

/* Runs with EMUNIC_ACCEPT_DELAY_MS (the check's env below): rank 0, the
 * lower rank, holds rank 1's connection request that long. */
#define ACCEPT_DELAY_MS 1500

static void t_disconnect_connecting(void)
{
	struct emunic_qp_attr a;
	struct emunic_qp *qp;
	struct timespec t0, t1;
	long waited;

	/* Rank 1 connects (the higher rank of a static pair) and asks for
	 * the disconnect while its attempt is under way: the attempt is not
	 * cut short; the QP ends when the connection comes up, and rank 0's
	 * QP fails (told once it is up, or before: either way). */
	CHECK(!emunic_cq_create(T->dev, 64, 0, &T->scq) && !emunic_cq_create(T->dev, 64, 0, &T->rcq), "cq");
	emunic_qp_attr_init(&a);
	a.send_cq = T->scq;
	a.recv_cq = T->rcq;
	sync_ranks();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &qp), "qp_create");
	if (T->rank == 1) {
		CHECK(!emunic_qp_connected(qp) && emunic_qp_disconnect(qp) == 0,
		      "a disconnect while the connection was being made");
	}
	for (int i = 0; i < 2 * ACCEPT_DELAY_MS / 10 + 500 && !emunic_qp_failed(qp); i++)
		ms(10);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	waited = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	CHECK(emunic_qp_failed(qp), "the QP %s within %ld ms", T->rank ? "asked to disconnect stayed up" :
	      "whose peer disconnected it did not fail", waited);
	/* Rank 1's clock starts before its request leaves; rank 0 holds it
	 * from when it comes. */
	CHECK(T->rank == 0 || waited >= ACCEPT_DELAY_MS, "the QP failed after %ld ms, before the held request "
	      "was answered (%d ms): the attempt under way was cut short", waited, ACCEPT_DELAY_MS);
	sync_ranks();
	emunic_qp_destroy(qp);
}

static void t_close_inflight(void)
{
	/* Work that can never finish (held sends, a WAIT that will not be
	 * met) when the device closes: close returns, says what it canceled,
	 * and frees everything (memcheck runs this check too), a region the
	 * app never deregistered included (else the PD cannot go: said). */
	static char left[64];
	struct emunic_mr *mr;

	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	CHECK(!emunic_mr_reg(T->dev, left, sizeof(left), &mr), "registering a region left for close");
	if (T->rank == 1)
		recvs(2);
	sync_ranks();
	if (T->rank == 0) {
		sends(2);
		post1(ctl(EMUNIC_TASK_WAIT, 5, EMUNIC_TASK_SIGNAL));
	}
	ms(200);
	sync_ranks();
}

/* On a device without atomics or immediate data (siw), a list with a
 * FETCH_ADD or a WRITE_IMM is refused whole at post (-EOPNOTSUPP): nothing
 * of it runs, counts or holds room, and the MQ and QP go on as before. */
#define UNSUPPORTED_MARK 0x756e737570706f72ull	/* what the one send that goes carries */

static void t_unsupported(void)
{
	static const struct { unsigned lacks; int op; } kinds[] = {
		{ EMUNIC_LACKS_ATOMIC, EMUNIC_TASK_FETCH_ADD }, { EMUNIC_LACKS_IMM, EMUNIC_TASK_WRITE_IMM },
	};
	struct emunic_wc wc;
	unsigned refused = 0;

	if (!emunic_dev_lacks(T->dev, EMUNIC_LACKS_ATOMIC) && !emunic_dev_lacks(T->dev, EMUNIC_LACKS_IMM))
		SKIP("unsupported on %s: it has atomics and immediate data, nothing to refuse",
		     emunic_dev_name(T->dev));
	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	if (T->rank == 1)
		recvs(1);
	sync_ranks();
	if (T->rank == 0) {
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			struct emunic_task list[3] = { data(EMUNIC_TASK_SEND, 0), data(kinds[k].op, 1),
						       ctl(EMUNIC_TASK_SEND_EN, 0, EMUNIC_TASK_SIGNAL) };

			if (!emunic_dev_lacks(T->dev, kinds[k].lacks))
				continue;
			list[1].remote_addr = 0x1000;
			list[1].rkey = 1;
			list[1].add = 1;
			CHECK(emunic_mq_post(T->mq, list, 3) == -EOPNOTSUPP, "a list with a %s was not refused",
			      emunic_task_op_str(kinds[k].op));
			refused++;
		}
		/* Nothing of the refused lists was posted: SEND_EN(1) finds
		 * exactly one send (this one) to enable, and the MQ's only
		 * completion is this list's. */
		CHECK(emunic_mq_post(T->mq, (struct emunic_task[]){ ctl(EMUNIC_TASK_SEND_EN, 1, 0) }, 1) == -EINVAL,
		      "a refused list left a send behind to enable");
		/* A send of its own payload: a refused list's send (of zeros)
		 * that leaked into the ring would arrive instead. */
		*(uint64_t *)(T->buf + 64 * 2) = UNSUPPORTED_MARK;
		post1(data(EMUNIC_TASK_SEND, 2));
		post1(ctl(EMUNIC_TASK_SEND_EN, 1, EMUNIC_TASK_SIGNAL));
		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.status == 0 && wc.wr_id == 1001,
		      "the MQ is not usable after the refused lists (wr_id %llu)", (unsigned long long)wc.wr_id);
		CHECK(emunic_mq_poll(T->mq, &wc, 1) == 0, "a refused list completed on the MQ");
		CHECK(refused > 0, "nothing was refused");
	}
	if (T->rank == 1)
		CHECK(await(T->rcq, 1) == 1 && emunic_cq_count(T->rcq) == 1 &&
		      *(volatile uint64_t *)T->buf == UNSUPPORTED_MARK, "the one send after the refusals did not "
		      "arrive alone (%llu arrived, payload 0x%llx)", (unsigned long long)emunic_cq_count(T->rcq),
		      (unsigned long long)*(volatile uint64_t *)T->buf);
	sync_ranks();
}

/* pair_key: QPs pair by key, not by order.  Rank 0 makes key 7, an
 * unkeyed QP, key 9; rank 1 makes an unkeyed QP, key 9, key 7.  What rank
 * 0 sends on each must arrive on rank 1's QP of the same key (the unkeyed
 * pair by order, keyed QPs not counted).  A key in use to that peer is
 * -EEXIST, and free again once its QP is destroyed; one of 2^30 or more,
 * or a key with EMUNIC_QP_ON_DEMAND, is -EINVAL. */
static void t_pair_key(void)
{
	static const unsigned keys[2][3] = { { 7, 0, 9 }, { 0, 9, 7 } };
	struct emunic_qp *qp[3], *dup;
	struct emunic_qp_attr a;
	struct emunic_wc wc;

	CHECK(!emunic_cq_create(T->dev, 256, 0, &T->scq) && !emunic_cq_create(T->dev, 256, 0, &T->rcq), "cq");
	CHECK(!emunic_mq_create(T->dev, 0, &T->mq), "mq_create");
	emunic_qp_attr_init(&a);
	a.send_cq = T->scq;
	a.recv_cq = T->rcq;
	for (int i = 0; i < 3; i++) {
		a.pair_key = keys[T->rank][i];
		CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &qp[i]), "qp_create with pair key %u", a.pair_key);
	}
	a.pair_key = 7;
	CHECK(emunic_qp_create(T->dev, 1 - T->rank, &a, &dup) == -EEXIST, "a pair key in use was accepted");
	a.pair_key = 11;	/* made and destroyed: 11 is free again */
	CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &dup) && !emunic_qp_destroy(dup), "pair key 11");
	CHECK(!emunic_qp_create(T->dev, 1 - T->rank, &a, &dup) && !emunic_qp_destroy(dup),
	      "pair key 11 again, after its QP was destroyed");
	a.pair_key = 1u << 30;
	CHECK(emunic_qp_create(T->dev, 1 - T->rank, &a, &dup) == -EINVAL, "pair key 2^30 was accepted");
	a.pair_key = 5;
	a.flags = EMUNIC_QP_ON_DEMAND;
	a.send_cq = a.recv_cq = NULL;
	CHECK(emunic_qp_create(T->dev, 1 - T->rank, &a, &dup) == -EINVAL, "a pair key with ON_DEMAND was accepted");
	for (int i = 0; i < 3; i++)
		CHECK(!emunic_qp_wait_connected(qp[i], 30000), "QP with pair key %u did not connect", keys[T->rank][i]);
	if (T->rank == 0)
		sync_ranks();	/* rank 1's receives are up */
	for (int i = 0; i < 3; i++) {
		struct emunic_task t = { .op = T->rank ? EMUNIC_TASK_RECV : EMUNIC_TASK_SEND, .qp = qp[i],
					 .addr = T->buf + 64 * i, .len = 8, .mr = T->mr, .wr_id = keys[T->rank][i] };

		if (!T->rank)
			memcpy(T->buf + 64 * i, &keys[0][i], sizeof(unsigned));
		post1(t);
	}
	if (T->rank == 1) {
		sync_ranks();
		CHECK(await(T->rcq, 3) == 3, "%llu of 3 sends arrived", (unsigned long long)emunic_cq_count(T->rcq));
		for (int i = 0; i < 3; i++) {
			unsigned got;
			int slot = 0;

			CHECK(emunic_cq_poll(T->rcq, &wc, 1) == 1 && !wc.status, "receive %d", i);
			while (keys[1][slot] != wc.wr_id)
				slot++;
			memcpy(&got, T->buf + 64 * slot, sizeof(got));
			CHECK(got == wc.wr_id, "the QP with pair key %llu received what rank 0 sent on key %u",
			      (unsigned long long)wc.wr_id, got);
		}
	}
	sync_ranks();
}

static void t_invalid(void)
{
	struct emunic_task bogus = { .op = 99 }, en_unmanaged, wait;
	struct emunic_cq *dead;
	struct emunic_wc wc;

	setup(0, 7);
	en_unmanaged = ctl(EMUNIC_TASK_SEND_EN, 0, 0);
	CHECK(emunic_mq_post(T->mq, &bogus, 1) == -EINVAL, "unknown opcode accepted");
	CHECK(emunic_mq_post(T->mq, &bogus, 0) == -EINVAL, "empty list accepted");
	CHECK(emunic_mq_post(T->mq, &en_unmanaged, 1) == -EINVAL, "SEND_EN on a QP not MANAGED_SEND accepted");
	CHECK(!emunic_cq_create(T->dev, 16, 0, &dead) && !emunic_cq_destroy(dead), "cq create/destroy");
	wait = ctl(EMUNIC_TASK_WAIT, 0, EMUNIC_TASK_SIGNAL);
	wait.cq = dead;
	CHECK(emunic_mq_post(T->mq, &wait, 1) == -EINVAL, "WAIT on a destroyed CQ accepted");
	/* A CQ of another device (a second emunic_dev on the same rank). */
	{
		struct emunic_dev *other;
		struct emunic_cq *foreign;

		CHECK(!emunic_dev_open(T->boot, NULL, &other), "second emunic_dev_open");
		CHECK(!emunic_cq_create(other, 16, 0, &foreign), "cq on the second device");
		wait = ctl(EMUNIC_TASK_WAIT, 0, EMUNIC_TASK_SIGNAL);
		wait.cq = foreign;
		CHECK(emunic_mq_post(T->mq, &wait, 1) == -EINVAL, "WAIT on another device's CQ accepted");
		CHECK(!emunic_dev_close(other), "closing the second device");
	}
	/* The MQ is still usable. */
	post1(ctl(EMUNIC_TASK_WAIT, 0, EMUNIC_TASK_SIGNAL));
	CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.status == 0, "the MQ is not usable after bad lists");
	sync_ranks();
}

/* A WAIT met by the successes before a failure completes as usual; one
 * whose count reaches the failure completes with it.  Rank 0's first send
 * lands, its second meets RNR (one receive posted, rnr_retry 0). */
static void t_wait_before_failure(void)
{
	struct emunic_task w;
	struct emunic_wc wc;

	setup(0, 0);
	if (T->rank == 1)
		recvs(1);
	sync_ranks();
	if (T->rank == 0) {
		sends(2);
		CHECK(await(T->scq, 2) == 2, "the two sends did not both complete");
		w = ctl(EMUNIC_TASK_WAIT, 1, EMUNIC_TASK_SIGNAL);
		w.cq = T->scq;
		post1(w);
		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0, "no MQ completion for WAIT(1)");
		CHECK(wc.status == EMUNIC_WC_SUCCESS, "WAIT(1), met by the successful send, completed with %s",
		      emunic_wc_status_str(wc.status));
		w = ctl(EMUNIC_TASK_WAIT, 2, EMUNIC_TASK_SIGNAL);
		w.cq = T->scq;
		post1(w);
		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0, "no MQ completion for WAIT(2)");
		CHECK(wc.status == EMUNIC_WC_RNR_RETRY_EXC_ERR && wc.peer == 1,
		      "WAIT(2), which counts the failed send, completed with %s (peer %d)",
		      emunic_wc_status_str(wc.status), wc.peer);
	}
	sync_ranks();
}

/* Run with EMUNIC_LIST_TASKS=4: a list of five is -E2BIG and posts nothing
 * (not even its first sends); lists of four go through and the MQ, QP and
 * CQs work on. */
static void t_list_limit(void)
{
	struct emunic_task l[5];
	struct emunic_wc wc;

	CHECK(emunic_dev_list_tasks(T->dev) == 4, "the device's list limit is %u, not 4 (EMUNIC_LIST_TASKS)",
	      emunic_dev_list_tasks(T->dev));
	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	if (T->rank == 1) {
		for (unsigned i = 0; i < 4; i++)
			l[i] = data(EMUNIC_TASK_RECV, i);
		post(l, 4);
	}
	sync_ranks();
	if (T->rank == 0) {
		for (unsigned i = 0; i < 4; i++)
			l[i] = data(EMUNIC_TASK_SEND, i);
		l[4] = ctl(EMUNIC_TASK_SEND_EN, 0, EMUNIC_TASK_SIGNAL);
		CHECK(emunic_mq_post(T->mq, l, 5) == -E2BIG, "a list of 5 tasks was not -E2BIG under a limit of 4");
		/* Nothing of it was posted: a SEND_EN(1) now has nothing to
		 * release (-EINVAL), which it would if the sends had gone in. */
		l[0] = ctl(EMUNIC_TASK_SEND_EN, 1, 0);
		CHECK(emunic_mq_post(T->mq, l, 1) == -EINVAL, "the refused list's sends were posted");
		for (unsigned i = 0; i < 3; i++)
			l[i] = data(EMUNIC_TASK_SEND, i);
		l[3] = ctl(EMUNIC_TASK_SEND_EN, 0, EMUNIC_TASK_SIGNAL);
		post(l, 4);
		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.status == 0, "a list of 4 did not complete");
	}
	if (T->rank == 1) {
		arrive_exactly(3, 200, "the sends after the refused list, none of its own");
	}
	sync_ranks();
}

/* Rank 0 posts RECV, a held SEND, WAIT(rcq, 1) and SEND_EN with `flags`,
 * then only sleeps (no emunic call).  Its progress core must still see rank
 * 1's send arrive and enable the reply within bound_ms, well before rank 0
 * wakes (4 s): late, never stuck. */
static void posted_then_away(unsigned flags, long bound_ms)
{
	struct emunic_task l[4];
	struct timespec t0, t1;
	long el;

	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	if (T->rank == 0) {
		l[0] = data(EMUNIC_TASK_RECV, 0);
		if (flags)
			CHECK(emunic_mq_post_flags(T->mq, l, 1, 1u << 7) == -EINVAL, "an unknown post flag accepted");
		l[1] = data(EMUNIC_TASK_SEND, 1);
		l[2] = ctl(EMUNIC_TASK_WAIT, 1, 0);
		l[3] = ctl(EMUNIC_TASK_SEND_EN, 1, 0);
		CHECK(!emunic_mq_post_flags(T->mq, l, 4, flags), "post with flags 0x%x", flags);
	} else {
		recvs(1);
	}
	sync_ranks();
	if (T->rank == 0) {
		ms(4000);
		CHECK(emunic_cq_count(T->rcq) == 1, "rank 1's send not counted (the unknown-flag post posted?)");
	} else {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		post1(data(EMUNIC_TASK_SEND, 0));
		CHECK(await(T->rcq, 1) == 1, "rank 0's reply never came: a post (flags 0x%x) without its wait is stuck",
		      flags);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		el = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		printf("emunic-mqtest: rank 1: rank 0's reply (posted with flags 0x%x, rank 0 away) in %ld ms\n", flags,
		       el);
		CHECK(el < bound_ms, "rank 0's reply took %ld ms (bound %ld): its core did not move it", el, bound_ms);
	}
	sync_ranks();
}

/* EMUNIC_POST_WAIT_NEXT promises a wait that here never comes: the core
 * still moves the list (its safety look, 1 s, at worst).  An unknown flag
 * is EINVAL and posts nothing. */
static void t_wait_next(void)
{
	posted_then_away(EMUNIC_POST_WAIT_NEXT, 3000);
}

/* A start (no flag) whose application then computes and never polls: where
 * the core shares the CPUs its WAIT is not urgent (lazy_start), but work in
 * verbs sets the lazy hand-over (10 ms) and the core then arms for the
 * completion: the reply comes within half a second (the core's own 1 s
 * look, or rank 0's 4 s, would be too late). */
static void t_start_away(void)
{
	posted_then_away(0, 500);
}

enum { EXCHANGE_ROUNDS = 200 };

/* ROUNDS exchange rounds (SEND, WAIT for the peer's, posted with `flags`,
 * then emunic_mq_wait); the device's stats before and after, and the
 * core's timer sets a round, printed. */
static double exchange_rounds(unsigned flags, struct emunic_dev_stats *a, struct emunic_dev_stats *b)
{
	struct emunic_wc wc;
	double per;

	setup(0, 7);
	for (unsigned i = 0; i < EXCHANGE_ROUNDS; i++)
		post1(data(EMUNIC_TASK_RECV, i % 16));
	sync_ranks();
	CHECK(!emunic_dev_stats(T->dev, a), "stats");
	for (unsigned i = 0; i < EXCHANGE_ROUNDS; i++) {
		struct emunic_task l[2] = { data(EMUNIC_TASK_SEND, 16 + i % 16),
					    ctl(EMUNIC_TASK_WAIT, i + 1, EMUNIC_TASK_SIGNAL) };
		int r = emunic_mq_post_flags(T->mq, l, 2, flags);

		CHECK(!r, "round %u: post: %s", i, strerror(-r));
		r = emunic_mq_wait(T->mq, &wc, 10000);
		CHECK(!r && wc.status == 0, "round %u: wait: %s, status %d", i, strerror(-r), wc.status);
	}
	CHECK(!emunic_dev_stats(T->dev, b), "stats");
	per = (double)(b->timer_sets - a->timer_sets) / EXCHANGE_ROUNDS;
	printf("emunic-mqtest: rank %d: core on %s: %.2f timer sets, %.2f core wakes a round; spin %.0f us\n", T->rank,
	       b->core_own_cpu ? "a CPU of its own" : "shared CPUs", per,
	       (double)(b->core_wakes - a->core_wakes) / EXCHANGE_ROUNDS, (double)b->core_spin_ns / 1000);
	/* No trigger fires: a core that shares the CPUs keeps its least spin
	 * (nic/spin.c), whatever gaps it slept through. */
	if (!b->core_own_cpu)
		CHECK(b->core_spin_ns == a->core_spin_ns, "the core, sharing the CPUs, spins %llu ns after work, %llu "
		      "before the rounds: it adapted its spin with no trigger fired",
		      (unsigned long long)b->core_spin_ns, (unsigned long long)a->core_spin_ns);
	return per;
}

/* A blocking exchange loop (posted EMUNIC_POST_WAIT_NEXT) leaves the
 * progress core's timer alone: work merely in verbs after a wait is
 * collected lazily, and a post whose wait follows hands nothing over, so
 * the timer is not set and pushed out again every round (it was, twice a
 * round, before). */
static void t_quiet_handover(void)
{
	struct emunic_dev_stats a, b;
	double per = exchange_rounds(EMUNIC_POST_WAIT_NEXT, &a, &b);

	CHECK(per < 0.5, "the core's timer was set %.2f times a round (%llu in %d rounds): hand-overs on the "
	      "blocking path", per, (unsigned long long)(b.timer_sets - a.timer_sets), EXCHANGE_ROUNDS);
	sync_ranks();
}

/* A nonblocking exchange loop (posted with no flag): where the progress
 * core shares the application's CPUs (not pinned), the WAIT a start leaves
 * behind sets no hand-over timer: the application's own wait collects it
 * (before, the core woke 50 us into the application's work, took its CPU,
 * and the start, work and wait took longer than the work and the wait one
 * after the other).  Where the core has a CPU of its own (EMUNIC_CPU pins
 * it), the start hands the WAIT over: the two ranks together set the timer
 * at least every other round (the rank that waits for the other sets it). */
static void t_lazy_start(void)
{
	struct emunic_dev_stats a, b;
	double per = exchange_rounds(0, &a, &b), all[2];

	CHECK(!emunic_dev_allgather(T->dev, &per, sizeof(per), all), "allgather");
	if (!b.core_own_cpu)
		CHECK(per < 0.5, "the core's timer was set %.2f times a round (%llu in %d rounds) by nonblocking starts, "
		      "on shared CPUs", per, (unsigned long long)(b.timer_sets - a.timer_sets), EXCHANGE_ROUNDS);
	else
		CHECK(all[0] + all[1] >= 0.5, "a start handed its WAIT over %.2f + %.2f times a round, with the core on "
		      "a CPU of its own", all[0], all[1]);
	sync_ranks();
}

/* emunic_mq_post_lists posts its lists as one unit.  Rank 0's QP holds its
 * sends; lists go to two MQs.  Refused, with nothing of lists[0] posted:
 * lists[1] enabling more than lists[0] posts (the enable sees those sends,
 * and no more), an unknown opcode in lists[1], and two lists on one MQ of
 * depth 2 whose control tasks fit alone (one is posted after) but not
 * together (-ENOSPC).  After them no send has gone and none is posted (a
 * lone SEND_EN(1) is -EINVAL), no refused task completed; then a valid pair
 * runs: lists[0]
 * posts two sends and enables one, lists[1] on the other MQ the second. */
static void t_post_lists(void)
{
	struct emunic_task a[3], b[2], bogus = { .op = 99 }, en;
	struct emunic_mq *mq2, *small;
	struct emunic_wc wc;

	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	CHECK(!emunic_mq_create(T->dev, 0, &mq2) && !emunic_mq_create(T->dev, 2, &small), "mq_create");
	if (T->rank == 1)
		recvs(2);
	sync_ranks();
	if (T->rank == 0) {
		struct emunic_mq_list l[2] = { { T->mq, a, 2 }, { mq2, b, 1 } };

		a[0] = data(EMUNIC_TASK_SEND, 0);
		a[1] = ctl(EMUNIC_TASK_SEND_EN, 1, EMUNIC_TASK_SIGNAL);
		b[0] = ctl(EMUNIC_TASK_SEND_EN, 1, EMUNIC_TASK_SIGNAL);	/* a second send: none */
		CHECK(emunic_mq_post_lists(l, 2, 0) == -EINVAL, "an enable past lists[0]'s sends was accepted");
		b[0] = bogus;
		CHECK(emunic_mq_post_lists(l, 2, 0) == -EINVAL, "an unknown opcode in lists[1] was accepted");
		/* Room: SEND_EN(0) twice a list, two lists on an MQ of depth 2. */
		en = ctl(EMUNIC_TASK_SEND_EN, 0, EMUNIC_TASK_SIGNAL);
		a[0] = a[1] = b[0] = b[1] = en;
		l[0].mq = l[1].mq = small;
		l[1].n = 2;
		CHECK(emunic_mq_post_lists(l, 2, 0) == -ENOSPC, "4 control tasks taken by an MQ of depth 2");
		/* Nothing went: no send to enable (asked before the list below,
		 * whose SEND_EN(0) would enable a leaked one). */
		en.count = 1;
		CHECK(emunic_mq_post(T->mq, &en, 1) == -EINVAL, "a refused post left a send posted");
		CHECK(emunic_mq_post_lists(l, 1, 0) == 0 && emunic_mq_wait(small, &wc, 5000) == 0 &&
		      emunic_mq_wait(small, &wc, 5000) == 0, "one list of 2 on an MQ of depth 2 did not run");
		/* ... and no completion on either MQ. */
		ms(300);
		CHECK(emunic_mq_poll(T->mq, &wc, 1) == 0 && emunic_mq_poll(mq2, &wc, 1) == 0 &&
		      emunic_mq_poll(small, &wc, 1) == 0, "a refused post completed a task");
	}
	ms(300);
	if (T->rank == 1)
		CHECK(emunic_cq_count(T->rcq) == 0, "a refused post released a send");
	sync_ranks();
	if (T->rank == 0) {
		struct emunic_mq_list l[2] = { { T->mq, a, 3 }, { mq2, b, 1 } };

		a[0] = data(EMUNIC_TASK_SEND, 0);
		a[1] = data(EMUNIC_TASK_SEND, 1);
		a[2] = ctl(EMUNIC_TASK_SEND_EN, 1, EMUNIC_TASK_SIGNAL);
		b[0] = ctl(EMUNIC_TASK_SEND_EN, 1, EMUNIC_TASK_SIGNAL);
		CHECK(emunic_mq_post_lists(l, 2, 0) == 0, "a valid pair of lists refused");
		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.status == 0 && wc.op == EMUNIC_TASK_SEND_EN,
		      "lists[0]'s enable did not complete");
		CHECK(emunic_mq_wait(mq2, &wc, 5000) == 0 && wc.status == 0 && wc.op == EMUNIC_TASK_SEND_EN,
		      "lists[1]'s enable did not complete");
		/* Both sends enabled: one more enable is past what was posted. */
		CHECK(emunic_mq_post(T->mq, &b[0], 1) == -EINVAL, "the pair's enables were not both counted");
	}
	if (T->rank == 1)
		CHECK(await(T->rcq, 2) == 2, "the valid pair's two sends did not arrive (%llu)",
		      (unsigned long long)emunic_cq_count(T->rcq));
	sync_ranks();
	CHECK(!emunic_mq_destroy(mq2) && !emunic_mq_destroy(small), "mq_destroy");
}

/* A prepared list (emunic_mq_prepare, emunic_mq_start): checked at
 * prepare only where the check does not depend on what was posted before;
 * the caller's array copied; each start is a post of the list with its
 * wr_ids moved; the counter rules and dead objects refuse a start, which
 * then posts nothing (its message names the wr_ids as moved), and the
 * other lists still start. */
static void t_prepared(void)
{
	struct emunic_mq_prepared *pl = NULL, *en = NULL, *gone = NULL;
	struct emunic_task l[2];
	struct emunic_mr *mr2 = NULL;
	struct emunic_wc wc;
	int r;

	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	if (T->rank == 1)
		recvs(17);
	sync_ranks();
	if (T->rank == 0) {
		/* Invalid whatever was posted: refused at prepare. */
		l[0] = ctl(EMUNIC_TASK_RECV_EN, 1, 0);
		CHECK(emunic_mq_prepare(T->mq, l, 1, &pl) == -EINVAL && !pl,
		      "RECV_EN on a QP not created MANAGED_RECV was prepared");
		/* Valid or not by what was posted before: that is the start's. */
		l[0] = ctl(EMUNIC_TASK_SEND_EN, 1, EMUNIC_TASK_SIGNAL);
		CHECK(!emunic_mq_prepare(T->mq, l, 1, &en), "SEND_EN(1) with nothing posted was not prepared");
		CHECK(emunic_mq_start(en, 5, 0) == -EINVAL, "SEND_EN(1) with nothing posted was started");
		l[0] = data(EMUNIC_TASK_SEND, 0);
		l[1] = ctl(EMUNIC_TASK_SEND_EN, 1, EMUNIC_TASK_SIGNAL);
		CHECK(!emunic_mq_prepare(T->mq, l, 2, &pl), "SEND + SEND_EN(1) was not prepared");
		l[0].op = l[1].op = 99;		/* the list was copied: never read again */
		for (uint64_t k = 1; k <= 3; k++) {
			CHECK(!(r = emunic_mq_start(pl, 100 * k, 0)), "start %llu: %s", (unsigned long long)k,
			      strerror(-r));
			CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.wr_id == 1001 + 100 * k && !wc.status,
			      "start %llu: MQ completion wr_id %llu status %d, not %llu", (unsigned long long)k,
			      (unsigned long long)wc.wr_id, wc.status, (unsigned long long)(1001 + 100 * k));
		}
		/* The refused start changed nothing: one send posted alone, the
		 * enable alone now has something to enable. */
		post1(data(EMUNIC_TASK_SEND, 3));
		CHECK(!(r = emunic_mq_start(en, 7, 0)), "SEND_EN(1) with one posted: %s", strerror(-r));
		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.wr_id == 1008, "the enable's start: wr_id %llu",
		      (unsigned long long)wc.wr_id);
		/* An object it uses destroyed: refused, naming it; the others go on. */
		CHECK(!emunic_mr_reg(T->dev, T->buf + 4096, 64, &mr2), "mr_reg");
		l[0] = data(EMUNIC_TASK_SEND, 4);
		l[0].addr = T->buf + 4096;
		l[0].mr = mr2;
		l[1] = ctl(EMUNIC_TASK_SEND_EN, 1, 0);
		CHECK(!emunic_mq_prepare(T->mq, l, 2, &gone), "a list on a second MR was not prepared");
		CHECK(!emunic_mr_dereg(mr2), "mr_dereg");
		CHECK(emunic_mq_start(gone, 50, 0) == -EINVAL, "a list whose MR was destroyed was started");
		CHECK(!(r = emunic_mq_start(pl, 400, 0)), "start 4 after the refusal: %s", strerror(-r));
		CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.wr_id == 1401, "start 4: wr_id %llu",
		      (unsigned long long)wc.wr_id);
		/* Freed right after its start, before the engine took it: what
		 * the start posted still runs (a start reaches the engine as one
		 * command naming the list, whose commands the engine then reads;
		 * the free waits for that, and ASan sees any read after it). */
		for (uint64_t k = 1; k <= 4; k++) {
			struct emunic_mq_prepared *tmp = NULL;

			l[0] = data(EMUNIC_TASK_SEND, 5);
			l[1] = ctl(EMUNIC_TASK_SEND_EN, 1, EMUNIC_TASK_SIGNAL);
			CHECK(!emunic_mq_prepare(T->mq, l, 2, &tmp), "freed after its start %llu: not prepared",
			      (unsigned long long)k);
			/* WAIT_NEXT leaves the START in the ring for the wait. */
			CHECK(!(r = emunic_mq_start(tmp, 10000 * k, k % 2 ? EMUNIC_POST_WAIT_NEXT : 0)),
			      "freed after its start %llu: start: %s",
			      (unsigned long long)k, strerror(-r));
			emunic_mq_prepared_free(tmp);
			wc.wr_id = 0;
			CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.wr_id == 1001 + 10000 * k && !wc.status,
			      "freed after its start %llu: MQ completion wr_id %llu status %d", (unsigned long long)k,
			      (unsigned long long)wc.wr_id, wc.status);
		}
		/* More targets than one START command holds (7 enables): started
		 * as its commands, each with its target, all the same. */
		{
			struct emunic_mq_prepared *many = NULL;
			struct emunic_task m[14];

			for (unsigned i = 0; i < 7; i++) {
				m[2 * i] = data(EMUNIC_TASK_SEND, 6 + i);
				m[2 * i + 1] = ctl(EMUNIC_TASK_SEND_EN, 1, i == 6 ? EMUNIC_TASK_SIGNAL : 0);
			}
			CHECK(!emunic_mq_prepare(T->mq, m, 14, &many), "a list of 7 enables was not prepared");
			CHECK(!(r = emunic_mq_start(many, 90000, 0)), "a list of 7 enables: start: %s", strerror(-r));
			wc.wr_id = 0;
			CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && wc.wr_id == 91001 && !wc.status,
			      "a list of 7 enables: MQ completion wr_id %llu status %d", (unsigned long long)wc.wr_id,
			      wc.status);
			emunic_mq_prepared_free(many);
		}
		CHECK(emunic_mq_start(NULL, 0, 0) == -EINVAL && emunic_mq_start(pl, 0, 0x80) == -EINVAL,
		      "a start of no list or with unknown flags was taken");
		CHECK(mq_count(300) == 0, "a refused start made an MQ completion");
		emunic_mq_prepared_free(pl);
		emunic_mq_prepared_free(en);
		emunic_mq_prepared_free(gone);
		emunic_mq_prepared_free(NULL);
	}
	if (T->rank == 1) {
		arrive_exactly(16, 300, "the started lists' sends, none of the refused starts'");
	}
	sync_ranks();
}

/* The counter rules as a prepared start runs them (worked out at prepare,
 * post.c's prep_q) against whole posts moving the same counters: enables
 * of everything posted (count 0) and of a count, before and after each
 * other, one that needs a send posted earlier outside the list, and WAIT
 * groups on the send CQ with and without WAIT_EN_LAST (one after a count
 * carried over from a whole post's WAIT), round after round.
 * Every send arrives exactly once and every signaled WAIT completes; a
 * start of the enable with nothing left to enable is refused by name.  A
 * target too high hangs a round here (its 5 s wait fails); one too low (a
 * WAIT done early) only the sanitizer build finds: there
 * (EMUNIC_CHECK_RULES) each start is also run through the task-by-task
 * rules, and the program stops if they differ. */
static void t_prepared_rules(void)
{
	enum { ROUNDS = 12, SENDS = 7 };	/* sends a round: a 2, held 1, e 1, c 2, whole 1 */
	struct emunic_mq_prepared *a = NULL, *b = NULL, *c = NULL, *e = NULL;
	struct emunic_task l[7], w[3];
	struct emunic_wc wc;
	int r;

	setup(T->rank == 0 ? EMUNIC_QP_MANAGED_SEND : 0, 7);
	if (T->rank == 0) {
		l[0] = data(EMUNIC_TASK_SEND, 0);
		l[1] = data(EMUNIC_TASK_SEND, 1);
		l[2] = ctl(EMUNIC_TASK_SEND_EN, 0, 0);
		CHECK(!emunic_mq_prepare(T->mq, l, 3, &a), "prepare a");
		l[0] = ctl(EMUNIC_TASK_SEND_EN, 1, 0);
		CHECK(!emunic_mq_prepare(T->mq, l, 1, &b), "prepare b");
		l[0] = data(EMUNIC_TASK_SEND, 2);
		l[1] = ctl(EMUNIC_TASK_SEND_EN, 0, 0);
		l[2] = data(EMUNIC_TASK_SEND, 3);
		l[3] = ctl(EMUNIC_TASK_SEND_EN, 1, 0);
		l[4] = ctl(EMUNIC_TASK_WAIT, 1, EMUNIC_TASK_WAIT_EN_LAST);
		l[5] = ctl(EMUNIC_TASK_WAIT, 1, 0);
		l[6] = ctl(EMUNIC_TASK_WAIT, 1, EMUNIC_TASK_WAIT_EN_LAST | EMUNIC_TASK_SIGNAL);
		l[4].cq = l[5].cq = l[6].cq = T->scq;
		l[6].wr_id = 3000;
		CHECK(!emunic_mq_prepare(T->mq, l, 7, &c), "prepare c");
		l[0] = data(EMUNIC_TASK_SEND, 4);
		l[1] = ctl(EMUNIC_TASK_SEND_EN, 0, 0);
		l[2] = ctl(EMUNIC_TASK_WAIT, 1, EMUNIC_TASK_SIGNAL);	/* no EN_LAST: the count carries */
		l[2].cq = T->scq;
		l[2].wr_id = 4000;
		CHECK(!emunic_mq_prepare(T->mq, l, 3, &e), "prepare e");
	}
	for (uint64_t k = 0; k < ROUNDS; k++) {
		if (T->rank == 1)
			recvs(SENDS);
		sync_ranks();
		if (T->rank == 0) {
			CHECK(!(r = emunic_mq_start(a, k << 16, 0)), "round %llu: start a: %s", (unsigned long long)k,
			      strerror(-r));
			post1(data(EMUNIC_TASK_SEND, 5));		/* held: b enables it */
			CHECK(!(r = emunic_mq_start(b, k << 16, 0)), "round %llu: start b: %s", (unsigned long long)k,
			      strerror(-r));
			CHECK(emunic_mq_start(b, k << 16, 0) == -EINVAL, "round %llu: b enabled a send never posted",
			      (unsigned long long)k);
			CHECK(!(r = emunic_mq_start(e, k << 16, 0)), "round %llu: start e: %s", (unsigned long long)k,
			      strerror(-r));
			/* A count carried over (2, more than c's first group's 1)
			 * that c's first WAIT_EN_LAST moves the base by. */
			w[0] = ctl(EMUNIC_TASK_WAIT, 2, 0);
			w[0].cq = T->scq;
			post(w, 1);
			CHECK(!(r = emunic_mq_start(c, k << 16, 0)), "round %llu: start c: %s", (unsigned long long)k,
			      strerror(-r));
			w[0] = data(EMUNIC_TASK_SEND, 6);
			w[1] = ctl(EMUNIC_TASK_SEND_EN, 0, 0);
			w[2] = ctl(EMUNIC_TASK_WAIT, 1, EMUNIC_TASK_WAIT_EN_LAST);
			w[2].cq = T->scq;
			post(w, 3);
			for (int i = 0; i < 2; i++) {
				CHECK(emunic_mq_wait(T->mq, &wc, 5000) == 0 && !wc.status, "round %llu: WAIT %d did "
				      "not complete", (unsigned long long)k, i);
				CHECK(wc.wr_id == (i ? 3000 : 4000) + (k << 16), "round %llu: MQ completion wr_id %llu",
				      (unsigned long long)k, (unsigned long long)wc.wr_id);
			}
		}
		if (T->rank == 1)
			CHECK(await(T->rcq, SENDS * (k + 1)) == SENDS * (k + 1), "round %llu: %llu of %llu sends "
			      "arrived", (unsigned long long)k, (unsigned long long)emunic_cq_count(T->rcq),
			      (unsigned long long)(SENDS * (k + 1)));
		sync_ranks();
	}
	if (T->rank == 1)
		arrive_exactly(SENDS * ROUNDS, 300, "every round's sends, none twice");
	emunic_mq_prepared_free(a);
	emunic_mq_prepared_free(b);
	emunic_mq_prepared_free(c);
	emunic_mq_prepared_free(e);
	sync_ranks();
}

/* needs: what the device must carry (emunic_dev_lacks); a device that
 * lacks it (siw: no RNR, its untaken send ends the connection instead)
 * skips the check with the reason, rather than pass or fail it untested. */
static const struct { const char *name; void (*fn)(void); unsigned needs; } checks[] = {
	{ "held", t_held, 0 }, { "enable_n", t_enable_n, 0 }, { "enable_too_many", t_enable_too_many, 0 },
	{ "wait_nth", t_wait_nth, 0 }, { "wait_base", t_wait_base, 0 }, { "consumed", t_consumed, 0 },
	{ "consumed_after", t_consumed_after, 0 },
	{ "signal_once", t_signal_once, 0 }, { "no_interleave", t_no_interleave, 0 },
	{ "rnr", t_rnr, EMUNIC_LACKS_RNR },
	{ "wait_error", t_wait_error, EMUNIC_LACKS_RNR }, { "close_inflight", t_close_inflight, 0 },
	{ "invalid", t_invalid, 0 }, { "list_limit", t_list_limit, 0 },
	{ "wait_before_failure", t_wait_before_failure, EMUNIC_LACKS_RNR }, { "wait_next", t_wait_next, 0 },
	{ "start_away", t_start_away, 0 },
	{ "quiet_handover", t_quiet_handover, 0 }, { "lazy_start", t_lazy_start, 0 },
	{ "post_lists", t_post_lists, 0 }, { "unsupported", t_unsupported, 0 }, { "pair_key", t_pair_key, 0 },
	{ "prepared", t_prepared, 0 }, { "prepared_rules", t_prepared_rules, 0 }, { "disconnect", t_disconnect, 0 },
	{ "disconnect_connecting", t_disconnect_connecting, 0 },
};

/* What a check needs in the environment, set before the device opens
 * (the caller's value put back after it closes). */
static const struct { const char *name, *env, *value; } check_env[] = {
	{ "disconnect_connecting", "EMUNIC_ACCEPT_DELAY_MS", STR(ACCEPT_DELAY_MS) },
};

int main(int argc, char **argv)
{
	struct t t = { 0 };
	struct harness_env env = { 0 };
	size_t i;

	T = &t;
	if (argc != 2) {
		fprintf(stderr, "usage: emunic-run -n 2 emunic-mqtest CHECK\n");
		return 2;
	}
	for (i = 0; i < sizeof(checks) / sizeof(checks[0]) && strcmp(checks[i].name, argv[1]); i++)
		;
	if (i == sizeof(checks) / sizeof(checks[0])) {
		fprintf(stderr, "emunic-mqtest: no check named %s\n", argv[1]);
		return 2;
	}
	for (size_t e = 0; e < sizeof(check_env) / sizeof(check_env[0]); e++)
		if (!strcmp(check_env[e].name, argv[1]))
			CHECK(!harness_env_set(&env, check_env[e].env, check_env[e].value), "setting %s: %s",
			      check_env[e].env, strerror(errno));
	CHECK(!emunic_boot_init(&t.boot), "bootstrap");
	t.rank = emunic_boot_rank(t.boot);
	CHECK(emunic_boot_size(t.boot) == 2, "needs exactly 2 ranks");
	{
		int r = emunic_dev_open(t.boot, NULL, &t.dev);

		CHECK(!r, "emunic_dev_open: %s", strerror(-r));
	}
	if (emunic_dev_lacks(t.dev, checks[i].needs))	/* every rank, before any exchange */
		SKIP("%s on %s: %s", argv[1], emunic_dev_name(t.dev), emunic_dev_lacks(t.dev, checks[i].needs));
	t.buf = aligned_alloc(4096, 1 << 20);
	memset(t.buf, 0, 1 << 20);
	CHECK(!emunic_mr_reg(t.dev, t.buf, 1 << 20, &t.mr), "mr_reg");
	checks[i].fn();
	sync_ranks();
	if (t.rank == 0)
		printf("emunic-mqtest: %s: PASS\n", argv[1]);
	emunic_mr_dereg(t.mr);
	/* Rank 0 closes first: what its close cancels is what the checks
	 * expect, not what a peer that closed (and so disconnected) flushed. */
	if (t.rank == 0)
		emunic_dev_close(t.dev);
	sync_ranks();
	if (t.rank == 1)
		emunic_dev_close(t.dev);
	harness_env_restore(&env);
	free(t.buf);
	emunic_boot_fini(t.boot);
	return 0;
}
