/* SPDX-License-Identifier: MIT */
/*
 * Reconnection of a failed connection (emunic_qp_attr.reconnects), in one
 * place:
 *   - a connection that was up fails (an error completion, the peer's
 *     disconnect, a fault rule): if the QP has reconnections left it goes to
 *     TEARDOWN (QP_DOWN) and its work stays where it is; nothing completes
 *     with the error;
 *   - outside any CM event and the verbs poll, the failed verbs QP and its
 *     id are destroyed and the CQ drained (TEARDOWN -> RECONNECTING): every
 *     completion and arrival of the failed connection has been seen, so the
 *     count of arrivals on it is final;
 *   - either side connects again once it has work for the peer (or accepts
 *     the peer's request); both at once: the higher rank's request wins, as
 *     for on-demand QPs (events.c);
 *   - request and answer carry each side's arrivals on the latest connection
 *     anything arrived on; a side whose tasks verbs held went out on that
 *     connection completes the first that many writes-with-immediate as done
 *     and replays the rest (nic_qp_replay) before anything else goes out on
 *     the new connection.  RC executes in order, so the peer got exactly the
 *     first that many; so each lands exactly once;
 *   - a write-with-immediate that completes on the new connection refills the
 *     budget; a reconnection that does not come up within
 *     reconnect_timeout_ms (counted while work waits), or a peer whose QP is
 *     gone, makes the failure final (FAILED): everything fails with its status.
 */
#include "emunic/cm/cm.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <stdlib.h>

#define RETRY_NS (100 * EMUNIC_NS_PER_MS)	/* between attempts that failed */

static bool can_reconnect(const struct emunic_dev *d, const struct emunic_qp *qp)
{
	return qp->attr.reconnects && (qp->attr.flags & EMUNIC_QP_TRIGGERED) && conn_of(qp)->left &&
	       atomic_load(&qp->was_up) && !atomic_load(&d->stop) && !atomic_load(&qp->o.dead);
}

bool rc_fail(struct emunic_dev *d, struct emunic_qp *qp, int status, unsigned how, const char *why)
{
	struct qp_conn *c = conn_of(qp);

	if (!c) {
		nic_qp_set_state(qp, QP_ERROR);
		return false;
	}
	if (c->st == CONN_FAILED) {
		/* For good: a later error (a flushed arrival) changes
		 * nothing, but one that is news tells the peer, once. */
		if (how & NIC_QPF_DISCONNECT)
			conn_disconnect(qp);
		return false;
	}
	if (conn_down(c))
		return true;	/* already being made again */
	if (!can_reconnect(d, qp)) {
		if (qp->attr.reconnects && (qp->attr.flags & EMUNIC_QP_TRIGGERED) && atomic_load(&qp->was_up) &&
		    !c->left && c->st != CONN_FAILED)
			nic_notice(d, "peer %d qp %u: %s; %u reconnection(s) in a row did not help: the failure is final",
				   qp->peer, atomic_load(&qp->qpn), why, qp->attr.reconnects);
		conn_set(qp, CONN_FAILED);
		if (how & NIC_QPF_DISCONNECT)
			conn_disconnect(qp);
		return false;
	}
	c->left--;
	c->settled = false;
	c->status = status;
	c->since_ns = 0;
	c->next_try_ns = 0;
	conn_set(qp, CONN_TEARDOWN);
	EMUNIC_TL(TL_RECONNECTING, TL_TRACK_QP, NIC_HANDLE_INDEX(qp->o.handle), qp->peer, c->left, status, 0);
	/* A peer that closed while nothing was on its way is not news: the
	 * pair reconnects only if either side has work for the other. */
	if (!(how & NIC_QPF_QUIET_IDLE) || nic_qp_has_work(qp))
		nic_notice(d, "peer %d qp %u: %s; reconnecting (%u of %u left): what the peer did not get goes again",
			   qp->peer, atomic_load(&qp->qpn), why, c->left, qp->attr.reconnects);
	return true;
}

/* The failed connection's verbs QP and id go; what the CQ still holds of
 * them is taken now (completions before the failure count; arrivals are
 * counted), so nothing of them comes later. */
static void teardown(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);

	if (c->id && !c->disconnected)
		rdma_disconnect(c->id);		/* the peer learns at once */
	nic_qp_drop_verbs(d, qp);
	if (c->id)
		rdma_destroy_id(c->id);
	c->id = NULL;
	c->disconnected = false;
	conn_set(qp, CONN_RECONNECTING);
}

/* What the work of a QP that fails for good completes with: the failure's
 * status, or a flush where the application disconnected it (mq.h). */
static int final_status(const struct qp_conn *c, int status)
{
	return c->end_asked ? EMUNIC_WC_WR_FLUSH_ERR : status;
}

static void give_up(struct emunic_qp *qp, const char *why)
{
	struct qp_conn *c = conn_of(qp);
	struct emunic_dev *d = qp->o.dev;
	int st = final_status(c, c->status);

	nic_notice(d, "peer %d qp " NIC_QP_FMT ": reconnecting failed (%s): its work fails with %s", qp->peer,
		   NIC_QP_ARG(qp), why, emunic_wc_status_str(st));
	conn_fail_final(d, qp, st);
}

void rc_bury_id(struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);

	if (!c->id)
		return;
	if (c->dead_id)		/* an earlier one: its events are all acknowledged */
		rdma_destroy_id(c->dead_id);
	c->dead_id = c->id;
	c->id = NULL;
	conn_busy(qp->o.dev, qp);
}

/* What to do next for a QP whose connection is being made again; the
 * caller (unit.c) connects or accepts, so the rules stay below connect.c. */
enum rc_next rc_step(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);
	int timeout = qp->attr.reconnect_timeout_ms > 0 ? qp->attr.reconnect_timeout_ms : 10000;
	uint64_t now;

	if (c->dead_id) {
		rdma_destroy_id(c->dead_id);
		c->dead_id = NULL;
	}
	if (c->st == CONN_TEARDOWN) {
		teardown(d, qp);
		if (c->end_asked)	/* before a request of the peer's is accepted */
			give_up(qp, "the application disconnected it");
		return RC_DID;
	}
	if (c->st != CONN_RECONNECTING)
		return RC_IDLE;
	if (c->end_asked && !c->id) {
		give_up(qp, "the application disconnected it");
		return RC_DID;
	}
	/* The clock runs only while work waits for the peer. */
	if (!nic_qp_has_work(qp)) {
		c->since_ns = 0;
		return c->id ? RC_IDLE : RC_ACCEPT;
	}
	now = emunic_now_ns();
	if (!c->since_ns)
		c->since_ns = now;
	if (now - c->since_ns > (uint64_t)timeout * EMUNIC_NS_PER_MS) {
		rc_bury_id(qp);		/* an attempt under way goes too */
		if (qp->vqp)
			emunic_shim_destroy_qp(&qp->o.dev->v->shim, qp->vqp);
		qp->vqp = NULL;
		give_up(qp, "not connected again in time");
		return RC_DID;
	}
	if (c->id || now < c->next_try_ns)
		return RC_IDLE;	/* an attempt is under way, or comes later */
	return RC_CONNECT;
}

bool rc_attempt_failed(struct emunic_qp *qp, bool gone, const char *why)
{
	struct qp_conn *c = conn_of(qp);

	if (!conn_down(c))
		return false;
	rc_bury_id(qp);		/* maybe inside its event: destroyed later */
	conn_set(qp, qp->vqp ? CONN_TEARDOWN : CONN_RECONNECTING);	/* its QP too, once drained */
	if (gone || c->end_asked) {
		give_up(qp, why);
		return true;
	}
	nic_notice(qp->o.dev, "peer %d qp " NIC_QP_FMT ": reconnecting: %s; trying again", qp->peer, NIC_QP_ARG(qp),
		   why);
	c->next_try_ns = emunic_now_ns() + RETRY_NS;
	return true;
}

int emunic_ev_duplicate(struct emunic_dev *d, const struct emunic_event *ev)
{
	if (!d || !ev || !nic_owned(d))
		return -EPERM;
	for (struct obj *o = d->objs[OBJ_QP]; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (qp->peer != ev->peer || atomic_load(&qp->qpn) != ev->qp_num)
			continue;
		if (qp->rx_conn != qp->conn_id || !qp->rx_count)
			return -ENOENT;
		qp->rx_count--;
		return 0;
	}
	return -ENOENT;
}

/* The peer ended the connection (its process exited, or it destroyed the
 * QP): fail the QP now, rather than let work to it retry into the void.
 * rdma_disconnect moves the verbs QP to the error state, so what verbs
 * holds flushes and the rest fails in the push.  A pass polls only a batch
 * of completions before the units step, so the successes of sends the
 * peer took before it left may still be in the CQ: they are read first, or
 * failing the QP would fail them too. */
void conn_peer_gone(struct emunic_qp *qp)
{
	struct emunic_dev *d = qp->o.dev;

	while (nic_verbs_poll(d) > 0)
		;

	if (rc_attempt_failed(qp, false, "the peer disconnected"))
		return;		/* a connection being made again: try again */
	if (conn_of(qp)->st == CONN_CONNECTING && !qp->attr.reconnects) {
		/* Its first connection, ended by the peer before it was up
		 * here (it disconnected right after its side came up).  One
		 * that reconnects waits for the peer's request to connect
		 * again (events.c on_request drains it then). */
		conn_qp_failed(qp, "the peer disconnected before the connection was up here");
		return;
	}
	if (conn_of(qp)->st != CONN_UP)
		return;
	/* At the end of a job peers close in any order: say it only when
	 * something was still on its way to the peer. */
	if (nic_qp_has_work(qp) && !qp->attr.reconnects)
		nic_notice(d, "peer %d qp %u: the peer disconnected (it exited or destroyed its QP) with %llu send(s) "
			   "outstanding: they fail", qp->peer, atomic_load(&qp->qpn),
			   (unsigned long long)(qp->sq.tail - qp->sq.done));
	nic_qp_failed(d, qp, IBV_WC_RETRY_EXC_ERR, NIC_QPF_DISCONNECT | NIC_QPF_QUIET_IDLE, "the peer disconnected");
}

/* A connection attempt failed: try again, or fail the QP. */
void conn_qp_failed(struct emunic_qp *qp, const char *why)
{
	struct emunic_dev *d = qp->o.dev;

	if (rc_attempt_failed(qp, false, why))
		return;
	if (conn_of(qp)->st == CONN_UP && qp->attr.reconnects) {
		nic_qp_failed(d, qp, IBV_WC_RETRY_EXC_ERR, NIC_QPF_DISCONNECT, why);
		return;
	}
	nic_notice(d, "peer %d qp " NIC_QP_FMT ": connection failed: %s", qp->peer, NIC_QP_ARG(qp), why);
	conn_set(qp, CONN_FAILED);
	nic_qp_flush_unposted(qp, final_status(conn_of(qp), EMUNIC_WC_RETRY_EXC_ERR));
}
