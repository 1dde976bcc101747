/* SPDX-License-Identifier: MIT */
/*
 * Reconnection of a failed connection (emunic_qp_attr.reconnects), on the
 * progress core, in one place:
 *   - a connection that was up fails (an error completion, the peer's
 *     disconnect, a fault rule): if the QP has reconnections left it goes
 *     back to CONNECTING (`down`) and its work stays where it is; nothing
 *     completes with the error;
 *   - outside any CM event and the verbs poll, the failed verbs QP and its
 *     id are destroyed and the CQ drained: every completion and arrival of
 *     the failed connection has been seen, so the count of arrivals on it is
 *     final;
 *   - either side connects again once it has work for the peer (or accepts
 *     the peer's request); both at once: the higher rank's request wins,
 *     as for on-demand QPs (cm.c);
 *   - request and answer carry each side's arrivals on the latest connection
 *     anything arrived on; a side whose tasks verbs held went out on that
 *     connection completes the first that many writes-with-immediate as done
 *     and replays the rest (exec.c, emunic_exec_replay) before anything else
 *     goes out on the new connection.  RC executes in order, so the peer got
 *     exactly the first that many; so each lands exactly once;
 *   - a write-with-immediate that completes on the new connection refills the
 *     budget; a reconnection that does not come up within
 *     reconnect_timeout_ms (counted while work waits), or a peer whose QP is
 *     gone, makes the failure final: everything fails with its status.
 */
#include "emunic/core/core.h"
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <errno.h>
#include <stdlib.h>

#define RETRY_NS (100 * 1000000ull)	/* between attempts that failed */

static bool can_reconnect(const struct emunic_dev *d, const struct emunic_qp *qp)
{
	return qp->attr.reconnects && (qp->attr.flags & EMUNIC_QP_TRIGGERED) && qp->rc.left &&
	       atomic_load(&qp->was_up) && !atomic_load(&d->stop) && !atomic_load(&qp->o.dead);
}

bool emunic_qp_fail(struct emunic_dev *d, struct emunic_qp *qp, int status, unsigned how, const char *why)
{
	if (qp->rc.down)
		return true;	/* already being made again */
	if (!can_reconnect(d, qp)) {
		if (qp->attr.reconnects && qp->attr.flags & EMUNIC_QP_TRIGGERED && atomic_load(&qp->was_up) &&
		    !qp->rc.left && atomic_load(&qp->state) != QP_ERROR)
			emunic_info("peer %d qp %u: %s; %u reconnection(s) in a row did not help: the failure is final",
				    qp->peer, atomic_load(&qp->qpn), why, qp->attr.reconnects);
		atomic_store(&qp->state, QP_ERROR);
		if (how & EMUNIC_QPF_DISCONNECT)
			emunic_cm_disconnect(qp);
		return false;
	}
	qp->rc.left--;
	qp->rc.down = true;
	qp->rc.settled = false;
	qp->rc.teardown = true;
	qp->rc.status = status;
	qp->rc.since_ns = 0;
	qp->rc.next_try_ns = 0;
	atomic_store(&qp->state, QP_CONNECTING);
	/* A peer that closed while nothing was on its way is not news: the
	 * pair reconnects only if either side has work for the other. */
	if (!(how & EMUNIC_QPF_QUIET_IDLE) || qp->sq.tail != qp->sq.done || qp->backlog)
		emunic_info("peer %d qp %u: %s; reconnecting (%u of %u left): what the peer did not get goes "
			    "again", qp->peer, atomic_load(&qp->qpn), why, qp->rc.left, qp->attr.reconnects);
	return true;
}

/* The failed connection's verbs QP and id go; what the CQ still holds of
 * them is taken now (completions before the failure count; arrivals are
 * counted), so nothing of them comes later. */
static void teardown(struct emunic_dev *d, struct emunic_qp *qp)
{
	if (qp->id && !qp->disconnected)
		rdma_disconnect(qp->id);	/* the peer learns at once */
	if (qp->vqp)
		ibv_destroy_qp(qp->vqp);
	qp->vqp = NULL;
	if (qp->id)
		rdma_destroy_id(qp->id);
	qp->id = NULL;
	while (emunic_exec_poll(d) == 32)
		;
	qp->recvs_posted = false;
	qp->flushing = false;
	qp->disconnected = false;
	qp->flt.owed = 0;	/* receives are the new verbs QP's own */
	qp->rc.teardown = false;
}

static void give_up(struct emunic_qp *qp, const char *why)
{
	emunic_info("peer %d qp #%d: reconnecting failed (%s): its work fails with %s", qp->peer, qp->index, why,
		    emunic_wc_status_str(qp->rc.status));
	qp->rc.down = false;
	qp->rc.left = 0;
	atomic_store(&qp->state, QP_ERROR);
	emunic_exec_give_up(qp, qp->rc.status);
	emunic_cm_refuse_parked(qp->o.dev, qp);
}

void emunic_rc_bury_id(struct emunic_qp *qp)
{
	if (!qp->id)
		return;
	if (qp->rc.dead_id)	/* an earlier one: its events are all acknowledged */
		rdma_destroy_id(qp->rc.dead_id);
	qp->rc.dead_id = qp->id;
	qp->id = NULL;
}

int emunic_rc_step(struct emunic_dev *d, struct emunic_qp *qp)
{
	uint64_t now;
	int timeout = qp->attr.reconnect_timeout_ms > 0 ? qp->attr.reconnect_timeout_ms : 10000;

	if (qp->rc.dead_id) {
		rdma_destroy_id(qp->rc.dead_id);
		qp->rc.dead_id = NULL;
	}
	if (qp->rc.teardown) {
		teardown(d, qp);
		return 1;
	}
	if (!qp->rc.down)
		return 0;
	/* The clock runs only while work waits for the peer. */
	if (qp->sq.tail == qp->sq.done && !qp->backlog) {
		qp->rc.since_ns = 0;
		return qp->id ? 0 : emunic_cm_accept_parked(d, qp);
	}
	now = emunic_now_ns();
	if (!qp->rc.since_ns)
		qp->rc.since_ns = now;
	if (now - qp->rc.since_ns > (uint64_t)timeout * 1000000u) {
		emunic_rc_bury_id(qp);	/* an attempt under way goes too */
		if (qp->vqp)
			ibv_destroy_qp(qp->vqp);
		qp->vqp = NULL;
		give_up(qp, "not connected again in time");
		return 1;
	}
	if (qp->id || now < qp->rc.next_try_ns)
		return 0;	/* an attempt is under way, or comes later */
	emunic_cm_start(d, qp);
	return 1;
}

bool emunic_rc_attempt_failed(struct emunic_qp *qp, bool gone, const char *why)
{
	if (!qp->rc.down)
		return false;
	emunic_rc_bury_id(qp);		/* maybe inside its event: destroyed later */
	qp->rc.teardown = qp->vqp != NULL;	/* and its QP, once drained */
	if (gone) {
		give_up(qp, why);
		return true;
	}
	emunic_info("peer %d qp #%d: reconnecting: %s; trying again", qp->peer, qp->index, why);
	qp->rc.next_try_ns = emunic_now_ns() + RETRY_NS;
	return true;
}

void emunic_rc_hello(const struct emunic_qp *qp, struct emunic_conn_hello *h)
{
	h->conn = qp->rc.conn;
	h->last_up = qp->rc.up_conn;
	h->joined = qp->rc.joined;
	h->rx_conn = qp->rc.rx_conn;
	h->rx_count = qp->rc.rx_count;
	if (qp->rc.down)
		h->flags |= EMUNIC_HELLO_RECONNECT | EMUNIC_HELLO_ON_DEMAND;
}

void emunic_rc_resolve(struct emunic_qp *qp, const struct emunic_conn_hello *h)
{
	/* What the peer counted of the connection my tasks went out on: the
	 * latest it got anything on is that one, or older (then: nothing). */
	uint64_t got = h && qp->rc.tx_conn && h->rx_conn == qp->rc.tx_conn ? h->rx_count : 0;

	/* Counted before the settlement, not when the connection is up: the
	 * app may see the work the settlement completes at once. */
	if (qp->rc.down && !qp->rc.settled) {
		qp->rc.settled = true;
		__atomic_add_fetch(&qp->rc.made, 1, __ATOMIC_RELEASE);
	}
	if (qp->sq.head != qp->sq.done)
		emunic_exec_replay(qp, got, qp->rc.status);
	qp->rc.tx_conn = 0;
}

void emunic_rc_up(struct emunic_qp *qp)
{
	qp->rc.up_conn = qp->rc.tx_conn = qp->rc.conn;
	qp->rc.imm_sent = 0;
	qp->rc.since_ns = 0;
	if (qp->rc.down) {
		qp->rc.down = false;
		emunic_info("peer %d qp %u: connected again (reconnection %u)", qp->peer, atomic_load(&qp->qpn),
			    qp->rc.made);
	}
}

int emunic_ev_duplicate(struct emunic_dev *d, const struct emunic_event *ev)
{
	if (!d || !ev || !emunic_on_core(d))
		return -EPERM;
	for (struct obj *o = d->objs; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (o->kind != OBJ_QP || qp->peer != ev->peer || atomic_load(&qp->qpn) != ev->qp_num)
			continue;
		if (qp->rc.rx_conn != qp->rc.conn || !qp->rc.rx_count)
			return -ENOENT;
		qp->rc.rx_count--;
		return 0;
	}
	return -ENOENT;
}
