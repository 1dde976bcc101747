/* SPDX-License-Identifier: MIT */
/*
 * rdma_cm events and connection requests.  A request that arrives before its
 * QP was created is parked until it is.  On-demand QPs (seed 002): a request
 * for a QP the app has not made yet makes one (emunic_qp_accept_on_demand);
 * when both sides connect at once the higher rank's connection wins: the
 * higher refuses the lower's request with YIELD, and the lower drops its own
 * attempt and accepts the higher's request on the same QP.
 */
#include "emunic/cm/cm.h"
#include "emunic/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define YIELD_RETRY_NS (1000 * EMUNIC_NS_PER_MS)	/* a reconnection that yielded: the peer's turn */

/* A QP the engine makes for a peer's on-demand request (the app's next
 * emunic_qp_create to that peer claims it). */
static struct emunic_qp *make_on_demand(struct emunic_dev *d, int peer, int index)
{
	struct emunic_qp *qp = NULL;

	emunic_lock(&d->post_lock);
	if (d->od_accept && index == d->qp_seq[peer]) {
		qp = nic_qp_new(d, peer, &d->od_attr);
		if (qp && (!(qp->conn = calloc(1, sizeof(*qp->conn))) || nic_obj_handle(&qp->o))) {
			free(qp->conn);
			nic_obj_free(&qp->o);
			atomic_fetch_sub(&d->nqps, 1);
			qp = NULL;
		}
		if (qp) {
			qp->conn->left = qp->attr.reconnects;
			qp->index = d->qp_seq[peer]++;
			qp->od_next = d->od_unclaimed;
			d->od_unclaimed = qp;
		}
	}
	emunic_unlock(&d->post_lock);
	if (qp)
		nic_obj_link(d, &qp->o);	/* its connection is made here, not by attach */
	return qp;
}

static struct emunic_qp *find_qp(struct emunic_dev *d, int peer, int index)
{
	for (struct obj *o = d->objs[OBJ_QP]; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (qp->peer == peer && qp->index == index && !atomic_load(&o->gone))
			return qp;
	}
	return NULL;
}

static void on_request(struct emunic_dev *d, struct rdma_cm_id *id, const struct emunic_conn_hello *h)
{
	struct emunic_qp *qp;
	struct qp_conn *c;
	bool od, rc;

	if (!h || h->magic != EMUNIC_CONN_MAGIC ||
	    h->rank < 0 || h->rank == d->rank || h->rank >= d->size || h->index < 0 ||
	    (!(h->flags & EMUNIC_HELLO_ON_DEMAND) && h->rank < d->rank)) {
		nic_notice(d, "rejecting a connection request that is not from a peer of this job");
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	od = h->flags & EMUNIC_HELLO_ON_DEMAND;
	rc = h->flags & EMUNIC_HELLO_RECONNECT;
	qp = find_qp(d, h->rank, h->index);
	c = qp ? conn_of(qp) : NULL;
	if (rc && (!qp || c->st == CONN_FAILED)) {
		cm_refuse(id, d, EMUNIC_HELLO_GONE);	/* gone here, or failed for good */
		return;
	}
	/* The peer left the connection we have up (it came up there, or it
	 * accepted it): it failed on its side. */
	if (qp && rc && c->st == CONN_UP && (h->last_up == c->up_conn || h->joined == c->up_conn) &&
	    !nic_qp_failed(d, qp, IBV_WC_RETRY_EXC_ERR, 0, "the peer reconnects (its side failed)")) {
		cm_refuse(id, d, EMUNIC_HELLO_GONE);
		return;
	}
	/* A connection we accepted and the peer gave up on before it was up
	 * here (even the first): data may have come on it, so it is drained
	 * like a failed one before the next is accepted. */
	if (qp && rc && qp->attr.reconnects && c->id && c->passive && (c->st == CONN_CONNECTING || conn_down(c))) {
		rc_bury_id(qp);
		if (!c->status)
			c->status = IBV_WC_RETRY_EXC_ERR;
		conn_set(qp, qp->vqp ? CONN_TEARDOWN : CONN_RECONNECTING);
	}
	if (qp && c->st == CONN_TEARDOWN) {
		cm_park(d, id, h);		/* accepted once the failed connection is gone */
		return;
	}
	if (qp && (c->st == CONN_CONNECTING || c->st == CONN_RECONNECTING) && !c->id) {
		conn_accept_on(d, qp, id, h);
		return;
	}
	if (qp && (c->st == CONN_CONNECTING || c->st == CONN_RECONNECTING) && od &&
	    (conn_on_demand(qp) || conn_down(c))) {
		struct rdma_cm_id *mine;

		if (d->rank > h->rank) {	/* both connect: mine wins */
			cm_refuse(id, d, EMUNIC_HELLO_YIELD);
			return;
		}
		mine = conn_drop_attempt(qp);	/* theirs wins */
		if (mine)
			rdma_destroy_id(mine);	/* its events are all acknowledged */
		conn_accept_on(d, qp, id, h);
		return;
	}
	if (qp) {			/* up, failed, or being accepted: a stale attempt */
		cm_refuse(id, d, 0);
		return;
	}
	if (od && (qp = make_on_demand(d, h->rank, h->index))) {
		conn_accept_on(d, qp, id, h);
		return;
	}
	cm_park(d, id, h);
}

/* The peer refused our request: it connects to us instead (YIELD), or not
 * at all.  Returns an id to destroy once ev is acknowledged. */
static struct rdma_cm_id *on_rejected(struct emunic_dev *d, struct emunic_qp *qp, struct rdma_cm_event *ev)
{
	const struct emunic_conn_hello *h = ev->param.conn.private_data;
	bool ours = h && ev->param.conn.private_data_len >= sizeof(*h) && h->magic == EMUNIC_CONN_MAGIC;
	struct qp_conn *c = conn_of(qp);
	struct rdma_cm_id *mine;

	if ((conn_on_demand(qp) || conn_down(c)) && ours && (h->flags & EMUNIC_HELLO_YIELD) && qp->peer > d->rank) {
		mine = conn_drop_attempt(qp);
		/* Reconnecting: leave the peer time to connect before trying again. */
		c->next_try_ns = emunic_now_ns() + YIELD_RETRY_NS;
		cm_accept_parked(d, qp);
		return mine;
	}
	if (rc_attempt_failed(qp, ours && (h->flags & EMUNIC_HELLO_GONE), "the peer refused"))
		return NULL;
	nic_notice(d, "peer %d qp " NIC_QP_FMT ": connection refused (reject status %d)", qp->peer, NIC_QP_ARG(qp),
		   ev->status);
	conn_qp_failed(qp, "the peer refused the connection");
	return NULL;
}

/* $EMUNIC_ACCEPT_DELAY_MS: a peer that is slow to answer (tests make sends
 * wait for a connection that is not up yet). */
static void delay_request(struct emunic_dev *d, struct rdma_cm_id *id, const struct emunic_conn_hello *h)
{
	struct parked_req *r = calloc(1, sizeof(*r)), **pp = &d->cm->delayed;

	if (!r) {
		on_request(d, id, h);
		return;
	}
	*r = (struct parked_req){ .id = id, .h = *h,
				  .due_ns = emunic_now_ns() + d->cm->accept_delay_ms * EMUNIC_NS_PER_MS };
	while (*pp)
		pp = &(*pp)->next;
	*pp = r;
}

int cm_run_delayed(struct emunic_dev *d)
{
	uint64_t now = d->cm->delayed ? emunic_now_ns() : 0;
	int n = 0;

	while (d->cm->delayed && d->cm->delayed->due_ns <= now) {
		struct parked_req *r = d->cm->delayed;

		d->cm->delayed = r->next;
		on_request(d, r->id, &r->h);
		free(r);
		n++;
	}
	return n;
}

/* rdma_connect refused at once.  On iWARP the kernel's CM binds a TCP
 * socket to the port rdma_cm chose (siw maps no ports: IW_F_NO_PORT_MAP),
 * and that port may be one a socket of the node's own holds: a first
 * connection tries again from a new id, so a new port, a few times.  (A
 * connection being made again has its own retries: reconnect.c.) */
#define FIRST_TRIES 3

static void connect_refused(struct emunic_dev *d, struct emunic_qp *qp, int e)
{
	struct qp_conn *c = conn_of(qp);
	char why[96];

	snprintf(why, sizeof(why), "rdma_connect failed (%s)", strerror(e));
	if (c->st != CONN_CONNECTING || c->end_asked || c->first_tries++ >= FIRST_TRIES) {
		conn_qp_failed(qp, why);
		return;
	}
	nic_notice(d, "peer %d qp " NIC_QP_FMT ": %s; connecting again from a new port (%u of %u)", qp->peer,
		   NIC_QP_ARG(qp), why, c->first_tries, FIRST_TRIES);
	rc_bury_id(qp);		/* inside its event: destroyed later */
	nic_qp_drop_unconnected(d, qp);
	conn_start(d, qp);
}

/* Returns an id to destroy after ev is acknowledged, or NULL. */
static struct rdma_cm_id *on_event(struct emunic_dev *d, struct rdma_cm_event *ev)
{
	struct emunic_qp *qp = ev->id->context;
	struct emunic_conn_hello h = { .magic = EMUNIC_CONN_MAGIC, .rank = d->rank };
	struct rdma_conn_param p;
	struct emunic_qp_opts o;
	struct qp_conn *c;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		const struct emunic_conn_hello *rh = ev->param.conn.private_data;

		if (!rh || ev->param.conn.private_data_len < sizeof(*rh))
			rh = NULL;
		if (d->cm->accept_delay_ms && rh)
			delay_request(d, ev->id, rh);
		else
			on_request(d, ev->id, rh);
		return NULL;
	}
	if (!qp || ev->id != conn_of(qp)->id)
		return NULL;	/* an attempt dropped since */
	c = conn_of(qp);
	conn_opts(qp, &o);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(c->id, 5000))
			conn_qp_failed(qp, "rdma_resolve_route failed");
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (conn_create_vqp(d, qp) || conn_move(d, c->id, qp, &o, IBV_QPS_INIT) ||
		    nic_qp_arrivals_init(d, qp)) {
			conn_qp_failed(qp, "cannot set up the QP");
			break;
		}
		h.index = qp->index;
		h.flags = conn_on_demand(qp) ? EMUNIC_HELLO_ON_DEMAND : 0;
		c->conn = (uint64_t)(d->rank + 1) << 40 | ++c->seq;
		qp->conn_id = c->conn;
		c->passive = false;
		rc_hello(qp, &h);
		emunic_cm_params(&o, qp->vqp->qp_num, &h, &p);
		if (rdma_connect(c->id, &p))
			connect_refused(d, qp, errno);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		rc_resolve(qp, ev->param.conn.private_data_len >= sizeof(h) ? ev->param.conn.private_data : NULL);
		c->joined = c->conn;
		if (conn_move(d, c->id, qp, &o, IBV_QPS_RTR) ||
		    conn_move(d, c->id, qp, &o, IBV_QPS_RTS) || rdma_establish(c->id)) {
			conn_qp_failed(qp, "cannot finish the connection");
			break;
		}
		conn_up(d, qp);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!c->passive && emunic_ctx_is_iwarp(d->v->ctx)) {
			/* iWARP has no CONNECT_RESPONSE: the iWARP CM moved the QP
			 * to RTS itself, and the reply's private data comes here. */
			rc_resolve(qp, ev->param.conn.private_data_len >= sizeof(h) ? ev->param.conn.private_data
										    : NULL);
			c->joined = c->conn;
		}
		conn_up(d, qp);
		break;
	case RDMA_CM_EVENT_REJECTED:
		return on_rejected(d, qp, ev);
	case RDMA_CM_EVENT_DISCONNECTED:
		conn_peer_gone(qp);
		break;
	default:
		conn_qp_failed(qp, rdma_event_str(ev->event));
		break;
	}
	return NULL;
}

int cm_events(struct emunic_dev *d)
{
	struct rdma_cm_event *ev;
	int n = 0;

	while (!rdma_get_cm_event(d->cm->ch, &ev)) {
		struct rdma_cm_id *dead = on_event(d, ev);

		rdma_ack_cm_event(ev);
		if (dead)
			rdma_destroy_id(dead);
		n++;
	}
	return n;
}

int cm_listen(struct emunic_dev *d)
{
	struct cm_dev *m = d->cm;
	struct sockaddr_in sa = d->v->addr;
	const char *delay = getenv("EMUNIC_ACCEPT_DELAY_MS");

	m->ch = rdma_create_event_channel();
	if (!m->ch)
		return emunic_err(-errno, "rdma_create_event_channel failed (%s)", strerror(errno));
	fcntl(m->ch->fd, F_SETFL, fcntl(m->ch->fd, F_GETFL) | O_NONBLOCK);
	d->cm_fd = m->ch->fd;
	m->accept_delay_ms = (unsigned)strtoul(delay ? delay : "0", NULL, 10);
	sa.sin_port = 0;
	if (rdma_create_id(m->ch, &m->listen, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(m->listen, (struct sockaddr *)&sa) || rdma_listen(m->listen, 1024))
		return emunic_err(-errno, "device %s: cannot listen for connections (%s)", d->v->name, strerror(errno));
	sa.sin_port = rdma_get_src_port(m->listen);
	m->addr = calloc((size_t)d->size, sizeof(*m->addr));
	if (!m->addr)
		return -ENOMEM;
	return emunic_boot_allgather(d->boot, &sa, sizeof(sa), m->addr);
}

static void reject_all(struct parked_req **list)
{
	while (*list) {
		struct parked_req *r = *list;

		*list = r->next;
		rdma_reject(r->id, NULL, 0);
		rdma_destroy_id(r->id);
		free(r);
	}
}

void cm_fini(struct emunic_dev *d)
{
	struct cm_dev *m = d->cm;

	if (!m)
		return;
	reject_all(&m->delayed);
	reject_all(&m->parked);
	if (m->listen)
		rdma_destroy_id(m->listen);
	if (m->ch)
		rdma_destroy_event_channel(m->ch);
	d->cm_fd = -1;
	free(m->addr);
	free(m);
	d->cm = NULL;
}
