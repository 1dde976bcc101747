/* SPDX-License-Identifier: MIT */
/*
 * QPs and memory regions as the application sees them.  A QP is made here,
 * published to the engine (which connects it, cm/), and read through its
 * status words; a region is registered directly with verbs.
 */
#include "emunic/nic/nic.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory ------------------------------------------------------------------- */

int emunic_mr_reg(struct emunic_dev *d, void *addr, size_t len, struct emunic_mr **out)
{
	struct emunic_mr *m;
	int r;

	if (!d || !out || (!addr && len))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	nic_obj_init(&m->o, d, OBJ_MR);
	r = emunic_shim_reg_mr(&d->v->shim, d->v->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, &m->mr);
	if (r) {
		free(m);
		return emunic_err(r, "device %s: registering %zu bytes failed (%s)", d->v->name, len, strerror(-r));
	}
	emunic_lock(&d->post_lock);
	nic_mr_link(d, m, true);
	emunic_unlock(&d->post_lock);
	*out = m;
	return 0;
}

int emunic_mr_dereg(struct emunic_mr *m)
{
	struct ibv_mr *vmr;
	struct emunic_dev *d;
	int r;

	if (!m || m->o.kind != OBJ_MR || !nic_obj_kill(&m->o))
		return -EINVAL;
	d = m->o.dev;
	vmr = m->mr;
	/* The handle stays readable (and dead) until the device closes: an
	 * op or entry still naming it is refused, never a use after free. */
	emunic_lock(&m->o.dev->post_lock);
	nic_mr_link(d, m, false);
	m->mr = NULL;
	m->o.grave = m->o.dev->graveyard;
	m->o.dev->graveyard = &m->o;
	emunic_unlock(&m->o.dev->post_lock);
	/* The handle is released either way; a region verbs kept is said,
	 * and deregistered again when the device closes (nic_obj_free). */
	r = emunic_shim_dereg_mr(&d->v->shim, vmr);
	if (!r)
		return 0;
	m->stuck = vmr;
	return emunic_err(r, "device %s: deregistering a region of %zu bytes failed (%s): peers may still reach it "
			  "until the device closes; keep its memory till then", d->v->name, vmr->length, strerror(-r));
}

struct emunic_rkey emunic_mr_rkey(const struct emunic_mr *m)
{
	if (!m || !m->mr)
		return (struct emunic_rkey){ 0 };
	return (struct emunic_rkey){ .addr = (uintptr_t)m->mr->addr, .rkey = m->mr->rkey };
}

/* ---- QPs ---------------------------------------------------------------------- */

void emunic_qp_attr_init(struct emunic_qp_attr *a)
{
	*a = (struct emunic_qp_attr){ .depth = 256, .rnr_retry = 7, .retry_cnt = 7, .timeout = 14 };
}

static bool qp_attr_ok(const struct emunic_dev *d, const struct emunic_qp_attr *a)
{
	unsigned trig = EMUNIC_QP_TRIGGERED | EMUNIC_QP_ON_DEMAND;

	return !(a->flags & ~(EMUNIC_QP_MANAGED_SEND | EMUNIC_QP_MANAGED_RECV | trig)) &&
	       !((a->flags & EMUNIC_QP_TRIGGERED) && (a->flags & ~trig)) &&
	       !(a->send_cq && ((struct obj *)a->send_cq)->dev != d) &&
	       !(a->recv_cq && ((struct obj *)a->recv_cq)->dev != d) &&
	       a->rnr_retry <= 7 && a->retry_cnt <= 7 && a->timeout <= 31 &&
	       (!a->reconnects || (a->flags & EMUNIC_QP_TRIGGERED)) && a->reconnect_timeout_ms >= 0 &&
	       a->pair_key < NIC_QP_KEYED && !(a->pair_key && (a->flags & EMUNIC_QP_ON_DEMAND));
}

/* A QP to peer made with this key that the engine still has (post_lock):
 * the key is free again only once a destroy took the QP out of the
 * engine's lists (gone), so the engine never finds two with one key. */
static bool key_in_use(const struct emunic_dev *d, int peer, int index)
{
	for (const struct emunic_qp *qp = d->keyed; qp; qp = qp->keyed_next)
		if (qp->peer == peer && qp->index == index && !atomic_load(&qp->o.gone))
			return true;
	return false;
}

/* The QP a peer connected on demand before this rank made one (post_lock). */
static struct emunic_qp *claim_on_demand(struct emunic_dev *d, int peer)
{
	for (struct emunic_qp **pp = &d->od_unclaimed; *pp; pp = &(*pp)->od_next) {
		struct emunic_qp *qp = *pp;

		if (qp->peer == peer) {
			*pp = qp->od_next;
			return qp;
		}
	}
	return NULL;
}

int emunic_qp_create(struct emunic_dev *d, int peer, const struct emunic_qp_attr *attr, struct emunic_qp **out)
{
	struct emunic_qp *qp;

	if (!d || !out || !attr)
		return -EINVAL;
	if (peer < 0 || peer >= d->size || peer == d->rank)
		return emunic_err(-EINVAL, "qp_create: peer %d is not another rank of this job (size %d)", peer,
				  d->size);
	if (!qp_attr_ok(d, attr))
		return emunic_err(-EINVAL, "qp_create to peer %d: bad attributes", peer);
	emunic_lock(&d->post_lock);
	qp = (attr->flags & EMUNIC_QP_ON_DEMAND) ? claim_on_demand(d, peer) : NULL;
	if (qp) {
		emunic_unlock(&d->post_lock);
		*out = qp;
		return 0;
	}
	if (attr->pair_key && key_in_use(d, peer, NIC_QP_KEYED | (int)attr->pair_key)) {
		emunic_unlock(&d->post_lock);
		return emunic_err(-EEXIST, "qp_create to peer %d: pair key %u is in use by a live QP to that peer",
				  peer, attr->pair_key);
	}
	qp = nic_qp_new(d, peer, attr);
	if (qp && attr->pair_key) {
		qp->index = NIC_QP_KEYED | (int)attr->pair_key;
		qp->keyed_next = d->keyed;
		d->keyed = qp;
	} else if (qp) {
		qp->index = d->qp_seq[peer]++;
	}
	emunic_unlock(&d->post_lock);
	if (!qp)
		return -ENOMEM;
	if (nic_obj_create(&qp->o)) {
		emunic_lock(&d->post_lock);
		for (struct emunic_qp **pp = &d->keyed; *pp; pp = &(*pp)->keyed_next)
			if (*pp == qp) {
				*pp = qp->keyed_next;
				break;
			}
		emunic_unlock(&d->post_lock);
		atomic_fetch_sub(&d->nqps, 1);
		nic_obj_free(&qp->o);
		return -EIO;
	}
	*out = qp;
	return 0;
}

int emunic_qp_accept_on_demand(struct emunic_dev *d, const struct emunic_qp_attr *attr)
{
	if (!d || !attr || !(attr->flags & EMUNIC_QP_ON_DEMAND) || !qp_attr_ok(d, attr) || attr->send_cq ||
	    attr->recv_cq)
		return emunic_err(-EINVAL, "qp_accept_on_demand: attributes must name EMUNIC_QP_ON_DEMAND and no CQs");
	emunic_lock(&d->post_lock);
	d->od_attr = *attr;
	d->od_accept = true;
	emunic_unlock(&d->post_lock);
	return 0;
}

unsigned emunic_dev_qps(const struct emunic_dev *d)
{
	return atomic_load(&((struct emunic_dev *)d)->nqps);
}

int emunic_qp_destroy(struct emunic_qp *qp)
{
	int e = nic_obj_destroy(qp ? &qp->o : NULL, "qp");

	if (!e)
		atomic_fetch_sub(&qp->o.dev->nqps, 1);
	return e;
}

int emunic_qp_disconnect(struct emunic_qp *qp)
{
	if (!qp || atomic_load(&qp->o.dead))
		return emunic_err(-EINVAL, "qp_disconnect: not a live qp");
	if (nic_owned(qp->o.dev))
		return emunic_err(-EINVAL, "qp_disconnect: peer %d qp " NIC_QP_FMT ": not from an event handler",
				  qp->peer, NIC_QP_ARG(qp));
	return nic_send_cmd(qp->o.dev, NIC_CMD_QP_DISCONNECT, OBJ_QP, qp->o.handle, 0) ? -EIO : 0;
}

int emunic_qp_connected(const struct emunic_qp *qp)
{
	return atomic_load(&((struct emunic_qp *)qp)->state) == QP_UP;
}

int emunic_qp_peer(const struct emunic_qp *qp) { return qp->peer; }

unsigned emunic_qp_send_capacity(const struct emunic_qp *qp) { return qp->sq.mask + 1; }

unsigned emunic_qp_reconnects(const struct emunic_qp *qp)
{
	return qp ? atomic_load_explicit(&((struct emunic_qp *)qp)->reconnects, memory_order_acquire) : 0;
}

int emunic_qp_failed(const struct emunic_qp *qp)
{
	int s = atomic_load(&((struct emunic_qp *)qp)->state);

	return s == QP_ERROR || s == QP_CLOSED || atomic_load(&((struct emunic_qp *)qp)->o.gone);
}

static bool settled(void *arg)
{
	struct emunic_qp *qp = arg;
	int s = atomic_load(&qp->state);

	/* Up once is connected: a failure since shows on its work. */
	return s == QP_UP || s == QP_ERROR || atomic_load(&qp->was_up);
}

int emunic_qp_wait_connected(struct emunic_qp *qp, int timeout_ms)
{
	struct emunic_word *w = &qp->word;

	if (nic_wait(qp->o.dev, &w, 1, settled, qp, timeout_ms))
		return emunic_err(-ETIMEDOUT, "peer %d qp " NIC_QP_FMT ": not connected after %d ms (is the peer "
				  "creating its QP to this rank?)", qp->peer, NIC_QP_ARG(qp), timeout_ms);
	if (atomic_load(&qp->state) == QP_ERROR && !atomic_load(&qp->was_up))
		return emunic_err(-ECONNREFUSED, "peer %d qp " NIC_QP_FMT ": connection failed", qp->peer,
				  NIC_QP_ARG(qp));
	return 0;
}
