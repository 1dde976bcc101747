/* SPDX-License-Identifier: MIT */
/*
 * Connections made by the progress core.  The k-th QP rank a makes to rank b
 * pairs with the k-th QP b makes to a.  Static QPs: the higher rank connects,
 * the lower accepts, so two QPs per pair are impossible.  A request that
 * arrives before its QP was created is parked until it is.
 *
 * On-demand QPs (seed 002): whoever needs the QP first connects; a request
 * for a QP the app has not made yet makes one (emunic_qp_accept_on_demand).
 * When both connect at once, the higher rank's connection wins: the higher
 * refuses the lower's request with YIELD, and the lower drops its own
 * attempt and accepts the higher's request on the same QP.
 */
#include "emunic/core/core.h"
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void qp_opts(const struct emunic_qp *qp, struct emunic_qp_opts *o)
{
	emunic_qp_opts_default(o);
	o->rnr_retry = (uint8_t)qp->attr.rnr_retry;
	o->retry_cnt = (uint8_t)qp->attr.retry_cnt;
	o->timeout = (uint8_t)qp->attr.timeout;
	emunic_fault_qp_opts(qp->o.dev, qp, o);
}

static void qp_up(struct emunic_dev *d, struct emunic_qp *qp)
{
	/* Fault rules act before the app can see the QP up: a peer's message
	 * must not slip in between. */
	bool failed = d->faults && emunic_fault_qp_up(d, qp);

	/* A rule that reset the QP before its first connection was up. */
	failed |= qp->flt.failed && !atomic_load(&qp->was_up);

	atomic_store(&qp->was_up, true);
	emunic_rc_up(qp);
	if (failed)
		emunic_qp_fail(d, qp, IBV_WC_RETRY_EXC_ERR, 0, "a fault rule reset it");
	else
		atomic_store(&qp->state, QP_UP);
}

void emunic_cm_disconnect(struct emunic_qp *qp)
{
	if (qp->id && !qp->disconnected) {
		qp->disconnected = true;
		rdma_disconnect(qp->id);
	}
}

/* The peer ended the connection (its process exited, or it destroyed the
 * QP): fail the QP now, rather than let work to it retry into the void.
 * rdma_disconnect moves the verbs QP to the error state, so what verbs
 * holds flushes and the rest fails in emunic_exec_push. */
static void peer_gone(struct emunic_qp *qp)
{
	if (emunic_rc_attempt_failed(qp, false, "the peer disconnected"))
		return;		/* a connection being made again: try again */
	if (atomic_load(&qp->state) != QP_UP)
		return;
	/* At the end of a job peers close in any order: say it only when
	 * something was still on its way to the peer. */
	if (qp->sq.tail != qp->sq.done && !qp->attr.reconnects)
		emunic_info("peer %d qp %u: the peer disconnected (it exited or destroyed its QP) with %llu "
			    "send(s) outstanding: they fail", qp->peer, atomic_load(&qp->qpn),
			    (unsigned long long)(qp->sq.tail - qp->sq.done));
	emunic_qp_fail(qp->o.dev, qp, IBV_WC_RETRY_EXC_ERR, EMUNIC_QPF_DISCONNECT | EMUNIC_QPF_QUIET_IDLE,
		       "the peer disconnected");
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

static bool on_demand(const struct emunic_qp *qp)
{
	return qp->attr.flags & EMUNIC_QP_ON_DEMAND;
}

static void qp_failed(struct emunic_qp *qp, const char *why)
{
	if (emunic_rc_attempt_failed(qp, false, why))
		return;
	if (atomic_load(&qp->state) == QP_UP && qp->attr.reconnects) {
		emunic_qp_fail(qp->o.dev, qp, IBV_WC_RETRY_EXC_ERR, EMUNIC_QPF_DISCONNECT, why);
		return;
	}
	emunic_info("peer %d qp #%d: connection failed: %s", qp->peer, qp->index, why);
	atomic_store(&qp->state, QP_ERROR);
	emunic_exec_qp_error(qp, EMUNIC_WC_RETRY_EXC_ERR);
}

static void accept_on(struct emunic_dev *d, struct emunic_qp *qp, struct rdma_cm_id *id,
		      const struct emunic_conn_hello *rh)
{
	struct emunic_conn_hello h = { .magic = EMUNIC_CONN_MAGIC, .rank = d->rank, .index = qp->index };
	struct rdma_conn_param p;
	struct emunic_qp_opts o;

	atomic_store(&qp->state, QP_CONNECTING);
	/* The work of a failed connection is settled before the new one. */
	emunic_rc_resolve(qp, rh);
	qp->rc.conn = qp->rc.joined = rh->conn;
	qp->rc.passive = true;
	emunic_rc_hello(qp, &h);
	h.flags = 0;
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

bool emunic_cm_accept_parked(struct emunic_dev *d, struct emunic_qp *qp)
{
	if (qp->rc.teardown)
		return false;	/* the failed connection goes first */
	for (struct parked_req **pp = &d->parked, *r; (r = *pp); pp = &r->next) {
		if (r->peer == qp->peer && r->index == qp->index) {
			*pp = r->next;
			accept_on(d, qp, r->id, &r->h);
			free(r);
			return true;
		}
	}
	return false;
}

/* Core: a QP the app created; connect it, or accept a parked request for it. */
void emunic_cm_start(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct sockaddr_in src = d->v->addr;

	atomic_store(&qp->state, QP_CONNECTING);
	if (emunic_cm_accept_parked(d, qp) || (qp->peer > d->rank && !on_demand(qp) && !qp->rc.down))
		return;
	if (rdma_create_id(d->cm, &qp->id, qp, RDMA_PS_TCP)) {
		qp->id = NULL;
		qp_failed(qp, "rdma_create_id failed");
		return;
	}
	src.sin_port = 0;
	if (rdma_resolve_addr(qp->id, (struct sockaddr *)&src, (struct sockaddr *)&d->addr[qp->peer], 5000))
		qp_failed(qp, "rdma_resolve_addr failed");
}

/* The lower rank of a pair that both connected: its own attempt goes.
 * Returns the attempt's id for the caller to destroy: not while an event
 * of that id is unacknowledged (rdma_destroy_id would wait for it). */
static struct rdma_cm_id *drop_attempt(struct emunic_qp *qp)
{
	struct rdma_cm_id *id = qp->id;

	qp->id = NULL;
	if (qp->vqp) {		/* never connected: no work was handed to it */
		ibv_destroy_qp(qp->vqp);
		qp->vqp = NULL;
		qp->recvs_posted = false;
	}
	return id;
}

static void refuse(struct rdma_cm_id *id, const struct emunic_dev *d, uint32_t flags)
{
	struct emunic_conn_hello h = { .magic = EMUNIC_CONN_MAGIC, .rank = d->rank, .flags = flags };

	rdma_reject(id, &h, sizeof(h));
	rdma_destroy_id(id);
}

void emunic_cm_refuse_parked(struct emunic_dev *d, const struct emunic_qp *qp)
{
	for (struct parked_req **pp = &d->parked, *r; (r = *pp);) {
		if (r->peer != qp->peer || r->index != qp->index) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		refuse(r->id, d, EMUNIC_HELLO_GONE);
		free(r);
	}
}

/* A QP the core makes for a peer's on-demand request (the app's next
 * emunic_qp_create to that peer claims it). */
static struct emunic_qp *make_on_demand(struct emunic_dev *d, int peer, int index)
{
	struct emunic_qp *qp = NULL;

	pthread_mutex_lock(&d->post_lock);
	if (d->od_accept && index == d->qp_seq[peer]) {
		qp = emunic_qp_new(d, peer, &d->od_attr);
		if (qp) {
			qp->index = d->qp_seq[peer]++;
			qp->od_next = d->od_unclaimed;
			d->od_unclaimed = qp;
		}
	}
	pthread_mutex_unlock(&d->post_lock);
	if (qp) {
		qp->o.next = d->objs;
		d->objs = &qp->o;
	}
	return qp;
}

static struct emunic_qp *find_qp(struct emunic_dev *d, int peer, int index)
{
	for (struct obj *o = d->objs; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (o->kind == OBJ_QP && qp->peer == peer && qp->index == index && !atomic_load(&o->gone))
			return qp;
	}
	return NULL;
}

static void on_request(struct emunic_dev *d, struct rdma_cm_id *id, const struct emunic_conn_hello *h)
{
	struct emunic_qp *qp;
	struct parked_req *r;
	bool od;

	if (!h || h->magic != EMUNIC_CONN_MAGIC ||
	    h->rank < 0 || h->rank == d->rank || h->rank >= d->size || h->index < 0 ||
	    (!(h->flags & EMUNIC_HELLO_ON_DEMAND) && h->rank < d->rank)) {
		emunic_info("rejecting a connection request that is not from a peer of this job");
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	od = h->flags & EMUNIC_HELLO_ON_DEMAND;
	qp = find_qp(d, h->rank, h->index);
	if ((h->flags & EMUNIC_HELLO_RECONNECT) && (!qp || atomic_load(&qp->state) == QP_ERROR)) {
		refuse(id, d, EMUNIC_HELLO_GONE);	/* gone here, or failed for good */
		return;
	}
	/* The peer left the connection we have up (it came up there, or it
	 * accepted it): it failed on its side. */
	if (qp && (h->flags & EMUNIC_HELLO_RECONNECT) && atomic_load(&qp->state) == QP_UP &&
	    (h->last_up == qp->rc.up_conn || h->joined == qp->rc.up_conn) &&
	    !emunic_qp_fail(d, qp, IBV_WC_RETRY_EXC_ERR, 0, "the peer reconnects (its side failed)")) {
		refuse(id, d, EMUNIC_HELLO_GONE);
		return;
	}
	/* A connection we accepted and the peer gave up on before it was up
	 * here (even the first): data may have come on it, so it is drained
	 * like a failed one before the next is accepted. */
	if (qp && (h->flags & EMUNIC_HELLO_RECONNECT) && qp->attr.reconnects && qp->id && qp->rc.passive &&
	    atomic_load(&qp->state) == QP_CONNECTING) {
		emunic_rc_bury_id(qp);
		qp->rc.teardown = qp->vqp != NULL;
		qp->rc.down = true;
		if (!qp->rc.status)
			qp->rc.status = IBV_WC_RETRY_EXC_ERR;
	}
	if (qp && qp->rc.teardown)
		goto park;	/* accepted once the failed connection is gone */
	if (qp && atomic_load(&qp->state) == QP_CONNECTING && !qp->id) {
		accept_on(d, qp, id, h);
		return;
	}
	if (qp && atomic_load(&qp->state) == QP_CONNECTING && od && (on_demand(qp) || qp->rc.down)) {
		if (d->rank > h->rank) {	/* both connect: mine wins */
			refuse(id, d, EMUNIC_HELLO_YIELD);
			return;
		}
		struct rdma_cm_id *mine = drop_attempt(qp);	/* theirs wins */

		if (mine)
			rdma_destroy_id(mine);	/* its events are all acknowledged */
		accept_on(d, qp, id, h);
		return;
	}
	if (qp) {			/* up, failed, or being accepted: a stale attempt */
		refuse(id, d, 0);
		return;
	}
	if (od && (qp = make_on_demand(d, h->rank, h->index))) {
		accept_on(d, qp, id, h);
		return;
	}
park:
	r = calloc(1, sizeof(*r));
	if (!r) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	*r = (struct parked_req){ .id = id, .peer = h->rank, .index = h->index, .h = *h, .next = d->parked };
	d->parked = r;
}

/* The peer refused our request: it connects to us instead (YIELD), or not at all. */
/* The peer refused our request: it connects to us instead (YIELD), or not
 * at all.  Returns an id to destroy once ev is acknowledged. */
static struct rdma_cm_id *on_rejected(struct emunic_dev *d, struct emunic_qp *qp, struct rdma_cm_event *ev)
{
	const struct emunic_conn_hello *h = ev->param.conn.private_data;
	struct rdma_cm_id *mine;

	bool ours = h && ev->param.conn.private_data_len >= sizeof(*h) && h->magic == EMUNIC_CONN_MAGIC;

	if ((on_demand(qp) || qp->rc.down) && ours && (h->flags & EMUNIC_HELLO_YIELD) && qp->peer > d->rank) {
		mine = drop_attempt(qp);
		/* Reconnecting: leave the peer time to connect before trying again. */
		qp->rc.next_try_ns = emunic_now_ns() + 1000 * 1000000ull;
		emunic_cm_accept_parked(d, qp);
		return mine;
	}
	if (emunic_rc_attempt_failed(qp, ours && (h->flags & EMUNIC_HELLO_GONE), "the peer refused"))
		return NULL;
	emunic_info("peer %d qp #%d: connection refused (reject status %d)", qp->peer, qp->index, ev->status);
	qp_failed(qp, "the peer refused the connection");
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* $EMUNIC_ACCEPT_DELAY_MS: a peer that is slow to answer (tests make sends
 * wait for a connection that is not up yet). */
static void delay_request(struct emunic_dev *d, struct rdma_cm_id *id, const struct emunic_conn_hello *h)
{
	struct parked_req *r = calloc(1, sizeof(*r)), **pp = &d->delayed;

	if (!r) {
		on_request(d, id, h);
		return;
	}
	*r = (struct parked_req){ .id = id, .h = *h, .due_ns = now_ns() + d->accept_delay_ms * 1000000ull };
	while (*pp)
		pp = &(*pp)->next;
	*pp = r;
}

static int run_delayed(struct emunic_dev *d)
{
	uint64_t now = d->delayed ? now_ns() : 0;
	int n = 0;

	while (d->delayed && d->delayed->due_ns <= now) {
		struct parked_req *r = d->delayed;

		d->delayed = r->next;
		on_request(d, r->id, &r->h);
		free(r);
		n++;
	}
	return n;
}

/* Returns an id to destroy after ev is acknowledged, or NULL. */
static struct rdma_cm_id *on_event(struct emunic_dev *d, struct rdma_cm_event *ev)
{
	struct emunic_qp *qp = ev->id->context;
	struct emunic_conn_hello h = { .magic = EMUNIC_CONN_MAGIC, .rank = d->rank };
	struct rdma_conn_param p;
	struct emunic_qp_opts o;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		const struct emunic_conn_hello *rh = ev->param.conn.private_data;

		if (!rh || ev->param.conn.private_data_len < sizeof(*rh))
			rh = NULL;
		if (d->accept_delay_ms && rh)
			delay_request(d, ev->id, rh);
		else
			on_request(d, ev->id, rh);
		return NULL;
	}
	if (!qp || ev->id != qp->id)
		return NULL;	/* an attempt dropped since */
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
		h.flags = on_demand(qp) ? EMUNIC_HELLO_ON_DEMAND : 0;
		qp->rc.conn = (uint64_t)(d->rank + 1) << 40 | ++qp->rc.seq;
		qp->rc.passive = false;
		emunic_rc_hello(qp, &h);
		emunic_cm_params(&o, qp->vqp->qp_num, &h, &p);
		if (rdma_connect(qp->id, &p))
			qp_failed(qp, "rdma_connect failed");
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		emunic_rc_resolve(qp, ev->param.conn.private_data_len >= sizeof(h) ? ev->param.conn.private_data
										      : NULL);
		qp->rc.joined = qp->rc.conn;
		if (emunic_cm_qp_move(qp->id, qp->vqp, &o, IBV_QPS_RTR, qp->peer) ||
		    emunic_cm_qp_move(qp->id, qp->vqp, &o, IBV_QPS_RTS, qp->peer) || rdma_establish(qp->id)) {
			qp_failed(qp, "cannot finish the connection");
			break;
		}
		qp_up(d, qp);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		qp_up(d, qp);
		break;
	case RDMA_CM_EVENT_REJECTED:
		return on_rejected(d, qp, ev);
	case RDMA_CM_EVENT_DISCONNECTED:
		peer_gone(qp);
		break;
	default:
		qp_failed(qp, rdma_event_str(ev->event));
		break;
	}
	return NULL;
}

int emunic_cm_events(struct emunic_dev *d)
{
	struct rdma_cm_event *ev;
	int n = 0;

	while (!rdma_get_cm_event(d->cm, &ev)) {
		struct rdma_cm_id *dead = on_event(d, ev);

		rdma_ack_cm_event(ev);
		if (dead)
			rdma_destroy_id(dead);
		n++;
	}
	return n + run_delayed(d);
}

int emunic_cm_listen(struct emunic_dev *d)
{
	struct sockaddr_in sa = d->v->addr;
	int r;

	d->cm = rdma_create_event_channel();
	if (!d->cm)
		return emunic_err(-errno, "rdma_create_event_channel failed (%s)", strerror(errno));
	fcntl(d->cm->fd, F_SETFL, fcntl(d->cm->fd, F_GETFL) | O_NONBLOCK);
	d->accept_delay_ms = (unsigned)strtoul(getenv("EMUNIC_ACCEPT_DELAY_MS") ? getenv("EMUNIC_ACCEPT_DELAY_MS") : "0",
					       NULL, 10);
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

void emunic_cm_fini(struct emunic_dev *d)
{
	reject_all(&d->delayed);
	reject_all(&d->parked);
	if (d->listen)
		rdma_destroy_id(d->listen);
	if (d->cm)
		rdma_destroy_event_channel(d->cm);
	free(d->addr);
}
