/* SPDX-License-Identifier: MIT */
/*
 * The device's objects' life cycle (their handles are in handles.c).  The
 * app makes an object and publishes it with a command; the engine links it
 * (units attach) and, on destroy, releases it (units let go) before the app
 * keeps it in the graveyard until close, so a stale pointer reads as dead
 * and a stale handle resolves to nothing.
 */
#include "emunic/nic/nic.h"
#include "emunic/nic/unit.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- life cycle ------------------------------------------------------------------ */

static void link_obj(struct emunic_dev *d, struct obj *o)
{
	struct obj **head = &d->objs[o->kind];

	o->prev = NULL;
	o->next = *head;
	if (*head)
		(*head)->prev = o;
	*head = o;
	o->linked = true;
}

void nic_obj_link(struct emunic_dev *d, struct obj *o)
{
	link_obj(d, o);
	for (unsigned i = 0; i < d->nunits; i++)
		if (d->unit[i]->attach)
			d->unit[i]->attach(d, o);
}

static void unlink_obj(struct emunic_dev *d, struct obj *o)
{
	if (!o->linked)
		return;
	if (o->prev)
		o->prev->next = o->next;
	else
		d->objs[o->kind] = o->next;
	if (o->next)
		o->next->prev = o->prev;
	o->linked = false;
}

/* Regions are the app's alone (no unit attaches, the engine never walks
 * them): linked and unlinked by the app under the post lock, so that close
 * finds and deregisters the ones never deregistered, before the PD goes. */
void nic_mr_link(struct emunic_dev *d, struct emunic_mr *m, bool live)
{
	if (live)
		link_obj(d, &m->o);
	else
		unlink_obj(d, &m->o);
}

/* Engine: the object goes; every unit lets go of it first. */
void nic_release_obj(struct emunic_dev *d, struct obj *o)
{
	for (unsigned i = d->nunits; i-- > 0;)
		if (d->unit[i]->release)
			d->unit[i]->release(d, o);
	/* Its verbs QP is gone: what it held will not complete there. */
	if (o->kind == OBJ_QP)
		nic_qp_cancel((struct emunic_qp *)o);
	unlink_obj(d, o);
	atomic_store_explicit(&o->gone, true, memory_order_release);
	if (o->kind == OBJ_QP)
		emunic_word_bump(&((struct emunic_qp *)o)->word);
}

static void on_create(struct emunic_dev *d, const struct nic_cmd *c)
{
	struct obj *o = nic_resolve(d, c->obj, (enum obj_kind)c->op);

	if (o && !o->linked && !atomic_load(&o->gone))
		nic_obj_link(d, o);
}

static void on_destroy(struct emunic_dev *d, const struct nic_cmd *c)
{
	struct obj *o = nic_resolve(d, c->obj, (enum obj_kind)c->op);

	if (o && !atomic_load(&o->gone))
		nic_release_obj(d, o);
}

/* The application ends a QP's connection for good: as a final completion
 * error would (its work flushes), and the peer is told. */
static void on_disconnect(struct emunic_dev *d, const struct nic_cmd *c)
{
	struct emunic_qp *qp = (struct emunic_qp *)nic_resolve(d, c->obj, OBJ_QP);
	int s;

	if (!qp || atomic_load(&qp->o.gone))
		return;
	s = atomic_load(&qp->state);
	if (s == QP_ERROR || s == QP_CLOSED)
		return;		/* failed already: the peer was told then */
	if (d->qp_hooks && d->qp_hooks->end) {
		d->qp_hooks->end(d, qp);
	} else {
		nic_qp_set_state(qp, QP_ERROR);
		nic_qp_ready(d, qp);
	}
}

void nic_objs_init(struct emunic_dev *d)
{
	d->on_cmd[NIC_CMD_OBJ_CREATE] = on_create;
	d->on_cmd[NIC_CMD_OBJ_DESTROY] = on_destroy;
	d->on_cmd[NIC_CMD_QP_DISCONNECT] = on_disconnect;
}

int nic_obj_create(struct obj *o)
{
	struct emunic_dev *d = o->dev;
	int r = nic_obj_handle(o);

	if (r)
		return emunic_err(r, "no room for another object in the device's table");
	r = nic_send_cmd(d, NIC_CMD_OBJ_CREATE, (uint8_t)o->kind, o->handle, 0);
	if (r)
		nic_obj_unhandle(o);
	return r ? -EIO : 0;
}

static bool is_gone(void *arg)
{
	return atomic_load_explicit(&((struct obj *)arg)->gone, memory_order_acquire);
}

/* Destroy: the engine unlinks and releases; the app keeps it until close. */
int nic_obj_destroy(struct obj *o, const char *what)
{
	struct emunic_dev *d;
	struct emunic_word w = { 0 }, *wp = &w;
	int r;

	if (!o)
		return emunic_err(-EINVAL, "%s_destroy: not a live %s", what, what);
	d = o->dev;
	/* Before marking it dead: a refused destroy leaves the object live. */
	if (nic_owned(d))
		return emunic_err(-EINVAL, "%s_destroy: not from an event handler", what);
	if (!nic_obj_kill(o))
		return emunic_err(-EINVAL, "%s_destroy: not a live %s", what, what);
	if (nic_send_cmd(d, NIC_CMD_OBJ_DESTROY, (uint8_t)o->kind, o->handle, 0))
		return -EIO;
	if (o->kind == OBJ_QP)
		wp = &((struct emunic_qp *)o)->word;
	r = nic_wait(d, &wp, 1, is_gone, o, 10000);
	if (r)
		return emunic_err(-ETIMEDOUT, "%s_destroy: the engine did not release it in 10 s", what);
	nic_obj_unhandle(o);
	emunic_lock(&d->post_lock);
	o->grave = d->graveyard;
	d->graveyard = o;
	emunic_unlock(&d->post_lock);
	return 0;
}

/* ---- commands ---------------------------------------------------------------------- */

int nic_send_cmd(struct emunic_dev *d, uint16_t type, uint8_t op, uint32_t obj, uint32_t aux)
{
	struct nic_cmd c = { .type = type, .op = op, .obj = obj, .mq = aux };
	uint64_t t0 = 0;

	for (;;) {
		bool ok;

		emunic_lock(&d->post_lock);
		ok = emunic_ring_push(&d->cmd, &c);
		emunic_unlock(&d->post_lock);
		if (ok)
			break;
		if (nic_owned(d))
			return -ENOSPC;		/* the engine cannot wait for itself */
		if (!t0)
			t0 = emunic_now_ns();
		else if (emunic_now_ns() - t0 > 1000 * EMUNIC_NS_PER_MS)
			return emunic_err(-ENOSPC, "command ring full for 1 s: is the engine stuck?");
		nic_submitted(d, NIC_LEAVE_HAND_OVER);	/* drain it ourselves if we can */
	}
	nic_submitted(d, NIC_LEAVE_HAND_OVER);
	return 0;
}

void nic_submitted_run(struct emunic_dev *d, enum nic_leave how)
{
	if (nic_in_engine()) {
		/* Posted by a handler, inside an engine.  Inside d's, this
		 * thread's pass sees the kick.  Inside another device's, it
		 * must not run a second engine (owner.c keeps one owned
		 * device a thread): d's core takes it (a holder sees the
		 * kick, a core going to sleep sees it, a sleeping one the
		 * doorbell). */
		if (!nic_owned(d))
			nic_doorbell(d);
		return;
	}
	if (!nic_own(d))
		return;			/* the holder runs it (it sees the kick) */
	nic_take_kick(d);
	nic_pass(d);
	if (how == NIC_LEAVE_HAND_OVER) {
		nic_unown(d);		/* hands over to the core what is left */
	} else if (how == NIC_LEAVE_TO_CORE) {
		nic_unown_posted(d);
	} else {
		/* Leaves as an assisting waiter would: its wait is next, and
		 * hands over when it ends (assist.c). */
		atomic_fetch_add(&d->assisting, 1);
		nic_unown(d);
		atomic_fetch_sub(&d->assisting, 1);
	}
	nic_notices_out(d);
}

/* ---- QPs and freeing ------------------------------------------------------------------- */

struct emunic_qp *nic_qp_new(struct emunic_dev *d, int peer, const struct emunic_qp_attr *attr)
{
	struct emunic_qp *qp = calloc(1, sizeof(*qp));
	bool trig;

	if (!qp)
		return NULL;
	nic_obj_init(&qp->o, d, OBJ_QP);
	qp->peer = peer;
	qp->attr = *attr;
	if (!qp->attr.depth)
		qp->attr.depth = 256;
	if (qp->attr.rnr_retry < 0)
		qp->attr.rnr_retry = 7;
	if (qp->attr.retry_cnt < 0)
		qp->attr.retry_cnt = 7;
	if (qp->attr.timeout < 0)
		qp->attr.timeout = 14;
	atomic_init(&qp->state, QP_NEW);
	trig = qp->attr.flags & EMUNIC_QP_TRIGGERED;
	/* Arrivals are writes with immediate data; on a device that has none
	 * (siw) they are SENDs carrying it, into slots (imm_send.c). */
	qp->arrivals = trig;
	qp->imm_by_send = trig && emunic_vdev_lacks(d->v, EMUNIC_LACKS_IMM);
	/* Held (managed) work can run far ahead of verbs: queues are deeper.
	 * A triggered QP's queue is the engine's alone and grows: fired ops
	 * wait there for verbs room, never refused. */
	if (nic_fifo_init(&qp->sq, qp->attr.depth * (trig ? 2 : 16), trig) ||
	    nic_fifo_init(&qp->rq, trig ? 1 : qp->attr.depth * 16, false)) {
		nic_fifo_fini(&qp->sq);
		free(qp);
		return NULL;
	}
	atomic_fetch_add(&d->nqps, 1);
	return qp;
}

/* The memory goes only now (close): until then a stale pointer reads as
 * dead.  Each kind's unit says how to free its own parts. */
void nic_obj_free(struct obj *o)
{
	struct emunic_dev *d = o->dev;

	if (o->kind == OBJ_QP) {
		nic_fifo_fini(&((struct emunic_qp *)o)->sq);
		nic_fifo_fini(&((struct emunic_qp *)o)->rq);
		nic_imm_slots_fini((struct emunic_qp *)o);
	}
	if (o->kind == OBJ_MR) {
		struct emunic_mr *m = (struct emunic_mr *)o;

		if (m->mr)	/* never deregistered: it dies with the device */
			emunic_shim_dereg_mr(&d->v->shim, m->mr);
		if (m->stuck)
			emunic_shim_dereg_mr(&d->v->shim, m->stuck);
	}
	if (d->obj_free[o->kind])
		d->obj_free[o->kind](o);
	free(o);
}

/* Close: whatever is still linked goes, then the graveyard.  Regions go
 * last, after the QPs that reach them (verbs' teardown order): a peer's
 * operation still on its way meets a disconnect, not a missing region. */
void nic_free_objs(struct emunic_dev *d)
{
	static const enum obj_kind order[] = { OBJ_PREP, OBJ_LE, OBJ_EQ, OBJ_CT, OBJ_MQ, OBJ_QP, OBJ_CQ, OBJ_MR };

	_Static_assert(sizeof(order) / sizeof(order[0]) == OBJ_KINDS - 1, "every kind once");
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		while (d->objs[order[i]]) {
			struct obj *o = d->objs[order[i]];

			nic_release_obj(d, o);	/* unlinks it */
			nic_obj_free(o);	/* the app's handles die with the device */
		}
	while (d->graveyard) {
		struct obj *o = d->graveyard;

		d->graveyard = o->grave;
		nic_obj_free(o);
	}
}
