/* SPDX-License-Identifier: MIT */
/*
 * One QP's connection, made by the engine through rdma_cm.  The k-th QP rank
 * a makes to rank b pairs with the k-th QP b makes to a.  Static QPs: the
 * higher rank connects, the lower accepts, so two QPs per pair are
 * impossible.  On-demand QPs (seed 002): whoever needs the QP first
 * connects; when both connect at once the higher rank's connection wins
 * (events.c).  How a connection that failed is made again: reconnect.c.
 */
#include "emunic/cm/cm.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const conn_state_name[CONN_STATES] = {
	[CONN_IDLE] = "idle", [CONN_CONNECTING] = "connecting", [CONN_UP] = "up",
	[CONN_TEARDOWN] = "teardown", [CONN_RECONNECTING] = "reconnecting", [CONN_FAILED] = "failed",
};

static const enum qp_state qp_state_of[CONN_STATES] = {
	[CONN_IDLE] = QP_NEW, [CONN_CONNECTING] = QP_CONNECTING, [CONN_UP] = QP_UP,
	[CONN_TEARDOWN] = QP_DOWN, [CONN_RECONNECTING] = QP_DOWN, [CONN_FAILED] = QP_ERROR,
};

void conn_set(struct emunic_qp *qp, enum conn_state st)
{
	struct qp_conn *c = conn_of(qp);

	c->st = st;
	nic_qp_set_state(qp, qp_state_of[st]);
	if (st == CONN_UP || st == CONN_FAILED)
		nic_qp_ready(qp->o.dev, qp);	/* work flows, or flushes */
	if (conn_down(c) || c->dead_id)
		conn_busy(qp->o.dev, qp);
}

void conn_busy(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);

	if (c->busy)
		return;
	c->busy = true;
	c->busy_next = d->cm->busy;
	d->cm->busy = qp;
}

bool conn_on_demand(const struct emunic_qp *qp)
{
	return qp->attr.flags & EMUNIC_QP_ON_DEMAND;
}

void conn_opts(const struct emunic_qp *qp, struct emunic_qp_opts *o)
{
	struct emunic_dev *d = qp->o.dev;

	emunic_qp_opts_default(o);
	o->rnr_retry = (uint8_t)qp->attr.rnr_retry;
	o->retry_cnt = (uint8_t)qp->attr.retry_cnt;
	o->timeout = (uint8_t)qp->attr.timeout;
	if (d->fault)
		d->fault->qp_opts(d, qp, o);
}

void conn_up(struct emunic_dev *d, struct emunic_qp *qp)
{
	/* Fault rules act before the app can see the QP up: a peer's message
	 * must not slip in between. */
	bool failed = d->fault && d->fault->qp_up(d, qp);

	atomic_store(&qp->was_up, true);
	rc_up(qp);
	if (failed) {
		nic_qp_failed(d, qp, IBV_WC_RETRY_EXC_ERR, 0, "a fault rule reset it");
	} else {
		conn_set(qp, CONN_UP);
		if (conn_of(qp)->end_asked)
			conn_end(d, qp);	/* asked while it was being made */
	}
}

/* Fails qp for good with status: its work completes with it, and a request
 * the peer parked here is refused (a later one is too: the QP is FAILED).
 * For a connection with no attempt under way and no verbs QP connected:
 * one the reconnection rules give up (reconnect.c), or one the application
 * disconnects before it is up (conn_end). */
void conn_fail_final(struct emunic_dev *d, struct emunic_qp *qp, int status)
{
	conn_of(qp)->left = 0;
	conn_set(qp, CONN_FAILED);
	nic_qp_give_up(qp, status);
	cm_refuse_parked(d, qp);
}

/* The application ends the connection for good (emunic_qp_disconnect); its
 * work fails with WR_FLUSH_ERR, as the call says, whatever failed it before
 * (end_asked: give_up and conn_qp_failed pick it):
 *   - UP: the peer is told (rdma_disconnect) and the work fails as after a
 *     final failure;
 *   - no attempt under way (CONNECTING waiting for the peer's request,
 *     RECONNECTING waiting for work or for the next try): no event to race,
 *     so it fails now;
 *   - TEARDOWN: given up as soon as it is torn down (rc_step);
 *   - an attempt under way (the first connection, or one made again): not
 *     cut short, which would race its own events.  It ends when it comes
 *     up (conn_up); if it fails first, the QP fails for good: a first
 *     connection is not tried again (conn_qp_failed, connect_refused), one
 *     made again is given up (rc_attempt_failed).  (IDLE never gets here:
 *     a QP's connection starts at its create, a command before this one.) */
void conn_end(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);

	if (c->st == CONN_FAILED)
		return;
	c->left = 0;
	c->end_asked = true;
	if ((c->st == CONN_CONNECTING || c->st == CONN_RECONNECTING) && !c->id) {
		conn_fail_final(d, qp, EMUNIC_WC_WR_FLUSH_ERR);
		return;
	}
	if (c->st != CONN_UP) {
		if (conn_down(c))
			conn_busy(d, qp);	/* rc_step gives it up between attempts */
		return;
	}
	if (nic_qp_has_work(qp))	/* as for a peer's disconnect: news only with work on its way */
		nic_notice(d, "peer %d qp " NIC_QP_FMT ": disconnected by the application with %llu send(s) "
			   "outstanding: they fail", qp->peer, NIC_QP_ARG(qp),
			   (unsigned long long)(qp->sq.tail - qp->sq.done));
	conn_set(qp, CONN_FAILED);
	conn_disconnect(qp);
	cm_refuse_parked(d, qp);
}

void conn_disconnect(struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);

	if (c->id && !c->disconnected) {
		c->disconnected = true;
		rdma_disconnect(c->id);
	}
}

int conn_create_vqp(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->vcq, .recv_cq = d->vcq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
		.cap = { .max_send_wr = qp->attr.depth, .max_recv_wr = qp->attr.depth,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0 },
	};
	int r;

	if (qp->imm_by_send) {	/* a task may be WRITE + SEND, the SEND inline */
		ia.cap.max_send_wr *= 2;
		ia.cap.max_inline_data = sizeof(struct nic_imm_msg);
	}
	r = emunic_shim_create_qp(&d->v->shim, d->v->pd, &ia, &qp->vqp);
	if (r)
		return emunic_err(r, "peer %d qp " NIC_QP_FMT ": creating its verbs QP failed (%s)", qp->peer,
				  NIC_QP_ARG(qp), strerror(-r));
	atomic_store(&qp->qpn, qp->vqp->qp_num);
	return 0;
}

/* Returns the attempt's id for the caller to destroy: not while an event of
 * that id is unacknowledged (rdma_destroy_id would wait for it). */
struct rdma_cm_id *conn_drop_attempt(struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);
	struct rdma_cm_id *id = c->id;

	c->id = NULL;
	nic_qp_drop_unconnected(qp->o.dev, qp);
	return id;
}
