/* SPDX-License-Identifier: MIT */
/*
 * The connection unit as the engine sees it: rdma_cm events when the core
 * saw its channel stir (or every CM_EVERY passes), delayed requests, and
 * the connections that have work of their own (tearing down, reconnecting);
 * a QP the app made starts connecting when the engine links it.
 */
#include "emunic/cm/cm.h"
#include "emunic/nic/unit.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>

#define CM_EVERY 256			/* passes between looks when nothing says so */
#define RECONNECT_LOOK_NS (10 * EMUNIC_NS_PER_MS)

static __attribute__((noinline)) int run_step(struct emunic_dev *d, bool look)
{
	struct cm_dev *m = d->cm;
	int n = 0;

	if (atomic_exchange(&d->cm_ready, false)) {
		n += cm_events(d);
		/* The core stopped polling the channel when it saw these
		 * events: if it sleeps, it must poll it again. */
		if (!nic_is_core_thread())
			nic_doorbell(d);
	} else if (look) {
		n += cm_events(d);
	}
	if (m->delayed)
		n += cm_run_delayed(d);
	for (struct emunic_qp **pp = &m->busy; *pp;) {
		struct emunic_qp *qp = *pp;
		struct qp_conn *c = conn_of(qp);

		switch (rc_step(d, qp)) {
		case RC_IDLE:
			break;
		case RC_DID:
			n++;
			break;
		case RC_ACCEPT:
			n += cm_accept_parked(d, qp);
			break;
		case RC_CONNECT:
			conn_start(d, qp);
			n++;
			break;
		}
		if (!conn_down(c) && !c->dead_id) {
			*pp = c->busy_next;	/* nothing left to do for it */
			c->busy = false;
		} else {
			pp = &c->busy_next;
		}
	}
	return n;
}

/* Most passes: no event seen, no look due, nothing delayed or busy.  They
 * pay this, not run_step's frame. */
static int step(struct emunic_dev *d)
{
	struct cm_dev *m = d->cm;
	bool events = atomic_load_explicit(&d->cm_ready, memory_order_relaxed);
	bool look = !events && ++m->passes % CM_EVERY == 0;

	return events || look || m->delayed || m->busy ? run_step(d, look) : 0;
}

static uint64_t next_due(struct emunic_dev *d, uint64_t now)
{
	struct cm_dev *m = d->cm;
	uint64_t due = m->delayed ? m->delayed->due_ns : UINT64_MAX;

	for (struct emunic_qp *qp = m->busy; qp; qp = conn_of(qp)->busy_next) {
		const struct qp_conn *c = conn_of(qp);
		uint64_t t = c->st == CONN_TEARDOWN || c->dead_id ? now : now + RECONNECT_LOOK_NS;

		if (c->next_try_ns > t)
			t = c->next_try_ns;
		if (t < due)
			due = t;
	}
	return due;
}

static void attach(struct emunic_dev *d, struct obj *o)
{
	struct emunic_qp *qp = (struct emunic_qp *)o;

	if (o->kind != OBJ_QP || qp->conn)
		return;		/* not a QP, or one made for a request (events.c) */
	qp->conn = calloc(1, sizeof(*qp->conn));
	if (!qp->conn) {
		nic_notice(d, "peer %d qp " NIC_QP_FMT ": no memory for its connection", qp->peer, NIC_QP_ARG(qp));
		nic_qp_set_state(qp, QP_ERROR);
		return;
	}
	qp->conn->left = qp->attr.reconnects;
	conn_start(d, qp);
}

static void release(struct emunic_dev *d, struct obj *o)
{
	struct emunic_qp *qp = (struct emunic_qp *)o;
	struct qp_conn *c;

	if (o->kind != OBJ_QP || !(c = conn_of(qp)))
		return;
	if (c->id && c->st == CONN_UP)
		rdma_disconnect(c->id);
	if (qp->vqp)
		emunic_shim_destroy_qp(&qp->o.dev->v->shim, qp->vqp);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->dead_id)
		rdma_destroy_id(c->dead_id);
	qp->vqp = NULL;
	cm_refuse_parked(d, qp);
	for (struct emunic_qp **pp = &d->cm->busy; *pp; pp = &conn_of(*pp)->busy_next)
		if (*pp == qp) {
			*pp = c->busy_next;
			break;
		}
	free(c);
	qp->conn = NULL;
	atomic_store(&qp->state, QP_CLOSED);
}

static void delivered(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct qp_conn *c = conn_of(qp);

	(void)d;
	if (c && c->st != CONN_FAILED && !c->end_asked && c->left < qp->attr.reconnects)
		c->left = qp->attr.reconnects;		/* the peer takes writes again */
}

static void fini(struct emunic_dev *d)
{
	cm_fini(d);
}

static const struct nic_unit cm_unit = {
	.name = "cm", .step = step, .next_due_ns = next_due, .attach = attach, .release = release, .fini = fini,
};

static const struct nic_qp_hooks cm_hooks = { .failed = rc_fail, .delivered = delivered, .end = conn_end };

int emunic_cm_unit_init(struct emunic_dev *d)
{
	int r;

	d->cm = calloc(1, sizeof(*d->cm));
	if (!d->cm)
		return -ENOMEM;
	d->qp_hooks = &cm_hooks;
	r = cm_listen(d);
	return r ? r : nic_register(d, &cm_unit);
}
