/* SPDX-License-Identifier: MIT */
/*
 * Connections made by the progress core.  The k-th QP rank a makes to rank b
 * pairs with the k-th QP b makes to a; the higher rank connects, the lower
 * accepts, so two QPs per pair are impossible.  A request that arrives
 * before its QP was created is parked until it is.
 */
#include "emunic/core/core.h"
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static void qp_opts(const struct emunic_qp *qp, struct emunic_qp_opts *o)
{
	emunic_qp_opts_default(o);
	o->rnr_retry = (uint8_t)qp->attr.rnr_retry;
	o->retry_cnt = (uint8_t)qp->attr.retry_cnt;
	o->timeout = (uint8_t)qp->attr.timeout;
}

static int create_vqp(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->vcq, .recv_cq = d->vcq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = { .max_send_wr = qp->attr.depth, .max_recv_wr = qp->attr.depth,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0 },
	};

	qp->vqp = ibv_create_qp(d->v->pd, &ia);
	if (!qp->vqp)
		return emunic_err(-errno, "peer %d qp #%d: ibv_create_qp failed (%s)", qp->peer, qp->index,
				  strerror(errno));
	atomic_store(&qp->qpn, qp->vqp->qp_num);
	return 0;
}

static void qp_failed(struct emunic_qp *qp, const char *why)
{
	emunic_info("peer %d qp #%d: connection failed: %s", qp->peer, qp->index, why);
	atomic_store(&qp->state, QP_ERROR);
	emunic_exec_qp_error(qp, EMUNIC_WC_RETRY_EXC_ERR);
}

static void accept_on(struct emunic_dev *d, struct emunic_qp *qp, struct rdma_cm_id *id)
{
	struct emunic_conn_hello h = { .magic = EMUNIC_CONN_MAGIC, .rank = d->rank, .index = qp->index };
	struct rdma_conn_param p;
	struct emunic_qp_opts o;

	qp->id = id;
	id->context = qp;
	qp_opts(qp, &o);
	if (create_vqp(d, qp) || emunic_cm_qp_move(id, qp->vqp, &o, IBV_QPS_INIT, qp->peer) ||
	    emunic_trig_qp_init(d, qp) ||
	    emunic_cm_qp_move(id, qp->vqp, &o, IBV_QPS_RTR, qp->peer) ||
	    emunic_cm_qp_move(id, qp->vqp, &o, IBV_QPS_RTS, qp->peer)) {
		rdma_reject(id, NULL, 0);
		qp_failed(qp, "cannot set up the QP");
		return;
	}
	emunic_cm_params(&o, qp->vqp->qp_num, &h, &p);
	if (rdma_accept(id, &p))
		qp_failed(qp, "rdma_accept failed");
}

/* Core: a QP the app created; connect it, or accept a parked request for it. */
void emunic_cm_start(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct parked_req **pp, *r;
	struct sockaddr_in src = d->v->addr;

	atomic_store(&qp->state, QP_CONNECTING);
	if (qp->peer < d->rank) {
		if (rdma_create_id(d->cm, &qp->id, qp, RDMA_PS_TCP)) {
			qp_failed(qp, "rdma_create_id failed");
			return;
		}
		src.sin_port = 0;
		if (rdma_resolve_addr(qp->id, (struct sockaddr *)&src, (struct sockaddr *)&d->addr[qp->peer], 5000))
			qp_failed(qp, "rdma_resolve_addr failed");
		return;
	}
	for (pp = &d->parked; (r = *pp); pp = &r->next) {
		if (r->peer == qp->peer && r->index == qp->index) {
			*pp = r->next;
			accept_on(d, qp, r->id);
			free(r);
			return;
		}
	}
}

static struct emunic_qp *find_qp(struct emunic_dev *d, int peer, int index)
{
	for (struct obj *o = d->objs; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (o->kind == OBJ_QP && qp->peer == peer && qp->index == index && !qp->id &&
		    atomic_load(&qp->state) == QP_CONNECTING)
			return qp;
	}
	return NULL;
}

static void on_request(struct emunic_dev *d, struct rdma_cm_event *ev)
{
	const struct emunic_conn_hello *h = ev->param.conn.private_data;
	struct emunic_qp *qp;
	struct parked_req *r;

	if (!h || ev->param.conn.private_data_len < sizeof(*h) || h->magic != EMUNIC_CONN_MAGIC ||
	    h->rank <= d->rank || h->rank >= d->size || h->index < 0) {
		emunic_info("rejecting a connection request that is not from a peer of this job");
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		return;
	}
	qp = find_qp(d, h->rank, h->index);
	if (qp) {
		accept_on(d, qp, ev->id);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		return;
	}
	*r = (struct parked_req){ .id = ev->id, .peer = h->rank, .index = h->index, .next = d->parked };
	d->parked = r;
}

static void on_event(struct emunic_dev *d, struct rdma_cm_event *ev)
{
	struct emunic_qp *qp = ev->id->context;
	struct emunic_conn_hello h = { .magic = EMUNIC_CONN_MAGIC, .rank = d->rank };
	struct rdma_conn_param p;
	struct emunic_qp_opts o;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		on_request(d, ev);
		return;
	}
	if (!qp)
		return;
	qp_opts(qp, &o);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(qp->id, 5000))
			qp_failed(qp, "rdma_resolve_route failed");
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (create_vqp(d, qp) || emunic_cm_qp_move(qp->id, qp->vqp, &o, IBV_QPS_INIT, qp->peer) ||
		    emunic_trig_qp_init(d, qp)) {
			qp_failed(qp, "cannot set up the QP");
			break;
		}
		h.index = qp->index;
		emunic_cm_params(&o, qp->vqp->qp_num, &h, &p);
		if (rdma_connect(qp->id, &p))
			qp_failed(qp, "rdma_connect failed");
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		if (emunic_cm_qp_move(qp->id, qp->vqp, &o, IBV_QPS_RTR, qp->peer) ||
		    emunic_cm_qp_move(qp->id, qp->vqp, &o, IBV_QPS_RTS, qp->peer) || rdma_establish(qp->id)) {
			qp_failed(qp, "cannot finish the connection");
			break;
		}
		atomic_store(&qp->state, QP_UP);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		atomic_store(&qp->state, QP_UP);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		break;
	default:
		qp_failed(qp, rdma_event_str(ev->event));
		break;
	}
}

int emunic_cm_events(struct emunic_dev *d)
{
	struct rdma_cm_event *ev;
	int n = 0;

	while (!rdma_get_cm_event(d->cm, &ev)) {
		on_event(d, ev);
		rdma_ack_cm_event(ev);
		n++;
	}
	return n;
}

int emunic_cm_listen(struct emunic_dev *d)
{
	struct sockaddr_in sa = d->v->addr;
	int r;

	d->cm = rdma_create_event_channel();
	if (!d->cm)
		return emunic_err(-errno, "rdma_create_event_channel failed (%s)", strerror(errno));
	fcntl(d->cm->fd, F_SETFL, fcntl(d->cm->fd, F_GETFL) | O_NONBLOCK);
	sa.sin_port = 0;
	if (rdma_create_id(d->cm, &d->listen, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(d->listen, (struct sockaddr *)&sa) || rdma_listen(d->listen, 1024))
		return emunic_err(-errno, "device %s: cannot listen for connections (%s)", d->v->name,
				  strerror(errno));
	sa.sin_port = rdma_get_src_port(d->listen);
	d->addr = calloc((size_t)d->size, sizeof(*d->addr));
	if (!d->addr)
		return -ENOMEM;
	r = emunic_boot_allgather(d->boot, &sa, sizeof(sa), d->addr);
	return r;
}

void emunic_cm_fini(struct emunic_dev *d)
{
	while (d->parked) {
		struct parked_req *r = d->parked;

		d->parked = r->next;
		rdma_reject(r->id, NULL, 0);
		rdma_destroy_id(r->id);
		free(r);
	}
	if (d->listen)
		rdma_destroy_id(d->listen);
	if (d->cm)
		rdma_destroy_event_channel(d->cm);
	free(d->addr);
}
