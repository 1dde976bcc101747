/* SPDX-License-Identifier: MIT */
/*
 * What a connection's hello carries and how the work of a failed
 * connection is settled on the next one (the rules: reconnect.c): each side
 * says how many writes-with-immediate arrived on the latest connection
 * anything arrived on; the other completes that many of its held tasks as
 * done and replays the rest.  A leaf: connect.c, events.c and qpconn.c call it.
 */
#include "emunic/cm/cm.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

void rc_hello(const struct emunic_qp *qp, struct emunic_conn_hello *h)
{
	const struct qp_conn *c = conn_of(qp);

	h->conn = c->conn;
	h->last_up = c->up_conn;
	h->joined = c->joined;
	h->rx_conn = qp->rx_conn;
	h->rx_count = qp->rx_count;
	if (conn_down(c))
		h->flags |= EMUNIC_HELLO_RECONNECT | EMUNIC_HELLO_ON_DEMAND;
}

void rc_resolve(struct emunic_qp *qp, const struct emunic_conn_hello *h)
{
	struct qp_conn *c = conn_of(qp);
	/* What the peer counted of the connection my tasks went out on: the
	 * latest it got anything on is that one, or older (then: nothing). */
	uint64_t got = h && c->tx_conn && h->rx_conn == c->tx_conn ? h->rx_count : 0;

	/* Counted before the settlement, not when the connection is up: the
	 * app may see the work the settlement completes at once. */
	if (conn_down(c) && !c->settled) {
		c->settled = true;
		atomic_fetch_add_explicit(&qp->reconnects, 1, memory_order_release);
	}
	if (qp->sq.head != qp->sq.done)
		nic_qp_replay(qp, got, c->status);
	c->tx_conn = 0;
}

void rc_up(struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);

	c->up_conn = c->tx_conn = c->conn;
	qp->imm_sent = 0;
	c->since_ns = 0;
	if (conn_down(c)) {
		EMUNIC_TL(TL_RECONNECTED, TL_TRACK_QP, NIC_HANDLE_INDEX(qp->o.handle), qp->peer,
			  atomic_load(&qp->reconnects), atomic_load(&qp->qpn), 0);
		nic_notice(qp->o.dev, "peer %d qp %u: connected again (reconnection %u)", qp->peer,
			   atomic_load(&qp->qpn), atomic_load(&qp->reconnects));
	}
}
