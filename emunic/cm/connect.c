/* SPDX-License-Identifier: MIT */
/*
 * Making a QP's connection: connect (conn_start), or accept a request, the
 * one that just came or one parked until its QP was made.  Calls go down to
 * qpconn.c (the state), settle.c (what the hello carries), parked.c (the
 * requests waiting) and reconnect.c (an attempt that failed).
 */
#include "emunic/cm/cm.h"
#include "emunic/base/log.h"

#include <stdlib.h>

void conn_accept_on(struct emunic_dev *d, struct emunic_qp *qp, struct rdma_cm_id *id,
		    const struct emunic_conn_hello *rh)
{
	struct emunic_conn_hello h = { .magic = EMUNIC_CONN_MAGIC, .rank = d->rank, .index = qp->index };
	struct qp_conn *c = conn_of(qp);
	struct rdma_conn_param p;
	struct emunic_qp_opts o;

	if (!conn_down(c))
		conn_set(qp, CONN_CONNECTING);
	/* The work of a failed connection is settled before the new one. */
	rc_resolve(qp, rh);
	c->conn = c->joined = rh->conn;
	qp->conn_id = c->conn;
	c->passive = true;
	rc_hello(qp, &h);
	h.flags = 0;
	c->id = id;
	id->context = qp;
	conn_opts(qp, &o);
	if (conn_create_vqp(d, qp) || conn_move(d, id, qp, &o, IBV_QPS_INIT) ||
	    nic_qp_arrivals_init(d, qp) ||
	    conn_move(d, id, qp, &o, IBV_QPS_RTR) ||
	    conn_move(d, id, qp, &o, IBV_QPS_RTS)) {
		rdma_reject(id, NULL, 0);
		conn_qp_failed(qp, "cannot set up the QP");
		return;
	}
	emunic_cm_params(&o, qp->vqp->qp_num, &h, &p);
	if (rdma_accept(id, &p))
		conn_qp_failed(qp, "rdma_accept failed");
}

/* A QP the app created (or one being made again): connect it, or accept a
 * request parked for it. */
void conn_start(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct sockaddr_in src = d->v->addr;
	struct qp_conn *c = conn_of(qp);

	if (!conn_down(c))
		conn_set(qp, CONN_CONNECTING);
	if (cm_accept_parked(d, qp) || (qp->peer > d->rank && !conn_on_demand(qp) && !conn_down(c)))
		return;
	if (rdma_create_id(d->cm->ch, &c->id, qp, RDMA_PS_TCP)) {
		c->id = NULL;
		conn_qp_failed(qp, "rdma_create_id failed");
		return;
	}
	src.sin_port = 0;
	if (rdma_resolve_addr(c->id, (struct sockaddr *)&src, (struct sockaddr *)&d->cm->addr[qp->peer], 5000))
		conn_qp_failed(qp, "rdma_resolve_addr failed");
}

bool cm_accept_parked(struct emunic_dev *d, struct emunic_qp *qp)
{
	if (conn_of(qp)->st == CONN_TEARDOWN)
		return false;	/* the failed connection goes first */
	struct parked_req *r = cm_take_parked(d, qp);

	if (!r)
		return false;
	conn_accept_on(d, qp, r->id, &r->h);
	free(r);
	return true;
}
