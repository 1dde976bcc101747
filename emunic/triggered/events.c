/* SPDX-License-Identifier: MIT */
/*
 * Event queues (full events, to a poller or to a handler) and list entries
 * (buffers exposed to peers, with the counter and event queue their
 * arrivals are reported to).  A handler is the part of an engine a
 * programmable NIC would run: it runs in the engine, on a thread that may
 * run handlers (the core thread, or a thread waiting in emunic); a thread
 * that only posts leaves its events queued for one that may, in order.
 */
#include "emunic/triggered/trig.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- event queues ------------------------------------------------------------ */

int emunic_eq_create(struct emunic_dev *d, unsigned depth, emunic_eq_handler handler, void *arg,
		     struct emunic_eq **out)
{
	struct emunic_eq *eq;
	int r;

	if (!d || !out)
		return -EINVAL;
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -ENOMEM;
	nic_obj_init(&eq->o, d, OBJ_EQ);
	eq->handler = handler;
	eq->arg = arg;
	if (emunic_ring_init(&eq->ev, depth ? depth : 1024, sizeof(struct emunic_event))) {
		free(eq);
		return -ENOMEM;
	}
	r = nic_obj_create(&eq->o);
	if (r) {
		emunic_ring_fini(&eq->ev);
		free(eq);
		return r;
	}
	*out = eq;
	return 0;
}

int emunic_eq_destroy(struct emunic_eq *eq)
{
	return nic_obj_destroy(eq ? &eq->o : NULL, "eq");
}

bool trig_eq_defers(const struct emunic_eq *eq)
{
	return eq->handler && (eq->deferred || !nic_handlers_ok());
}

static void queue_event(struct emunic_dev *d, struct emunic_eq *eq, const struct emunic_event *ev)
{
	if (!emunic_ring_push(&eq->ev, ev)) {
		if (atomic_fetch_add(&eq->dropped, 1) == 0)
			nic_notice(d, "eq %p full: %s event from peer %d (user %llu) lost; poll it faster or make it deeper "
				   "(further losses are only counted)", (void *)eq, emunic_ev_kind_str(ev->kind), ev->peer,
				   (unsigned long long)ev->user);
		return;
	}
	emunic_word_bump(&eq->word);
}

void trig_eq_push(struct emunic_dev *d, struct emunic_eq *eq, const struct emunic_event *ev)
{
	if (!eq->handler) {
		queue_event(d, eq, ev);
		return;
	}
	if (!trig_eq_defers(eq)) {
		eq->handler(eq->arg, ev);
		return;
	}
	queue_event(d, eq, ev);		/* for a thread that may run the handler */
	if (!eq->deferred) {
		eq->deferred = true;
		eq->deferred_next = d->trig->handler_eqs;
		d->trig->handler_eqs = eq;
	}
	atomic_store(&d->need_core, true);
}

int trig_eq_run_handlers(struct emunic_dev *d)
{
	int n = 0;

	if (!nic_handlers_ok())
		return 0;
	while (d->trig->handler_eqs) {
		struct emunic_eq *eq = d->trig->handler_eqs;
		const struct emunic_event *e;

		d->trig->handler_eqs = eq->deferred_next;
		while ((e = emunic_ring_peek(&eq->ev))) {
			struct emunic_event ev = *e;

			emunic_ring_pop(&eq->ev);
			if (!atomic_load_explicit(&eq->o.gone, memory_order_relaxed))
				eq->handler(eq->arg, &ev);
			n++;
		}
		eq->deferred = false;
	}
	return n;
}

int emunic_eq_poll(struct emunic_eq *eq, struct emunic_event *ev, int n)
{
	int got = 0;
	void *e;

	if (!nic_obj_alive(NULL, eq ? &eq->o : NULL, OBJ_EQ) || !ev || n < 0)
		return emunic_err(-EINVAL, "eq_poll: not a live event queue");
	if (eq->handler)
		return 0;		/* its events are the handler's */
	while (got < n && (e = emunic_ring_peek(&eq->ev))) {
		memcpy(&ev[got++], e, sizeof(*ev));
		emunic_ring_pop(&eq->ev);
	}
	return got;
}

static bool eq_has(void *arg)
{
	struct emunic_eq *eq = arg;

	return !emunic_ring_empty(&eq->ev) || atomic_load(&eq->o.dead);
}

int emunic_eq_wait(struct emunic_eq *eq, struct emunic_event *ev, int timeout_ms)
{
	struct emunic_word *w;
	int r;

	if (!nic_obj_alive(NULL, eq ? &eq->o : NULL, OBJ_EQ))
		return emunic_err(-EINVAL, "eq_wait: not a live event queue");
	w = &eq->word;
	for (;;) {
		r = emunic_eq_poll(eq, ev, 1);
		if (r)
			return r < 0 ? r : 0;
		r = nic_wait(eq->o.dev, &w, 1, eq_has, eq, timeout_ms);
		if (r)
			return r;
	}
}

uint64_t emunic_eq_dropped(const struct emunic_eq *eq)
{
	return eq ? atomic_load(&((struct emunic_eq *)eq)->dropped) : 0;
}

/* ---- list entries ------------------------------------------------------------- */

int emunic_le_create(struct emunic_dev *d, const struct emunic_le_attr *a, struct emunic_le **out)
{
	struct trig_dev *t;
	struct emunic_le *le;
	unsigned id = 0;
	int r;

	if (!d || !a || !out)
		return -EINVAL;
	t = d->trig;
	if (!nic_obj_alive(d, a->mr ? &a->mr->o : NULL, OBJ_MR) || !nic_mr_covers(a->mr, a->addr, a->len))
		return emunic_err(-EINVAL, "le_create: the buffer is not inside a live memory region of this device");
	if ((a->ct && !nic_obj_alive(d, &a->ct->o, OBJ_CT)) || (a->eq && !nic_obj_alive(d, &a->eq->o, OBJ_EQ)))
		return emunic_err(-EINVAL, "le_create: its counter or event queue is not live on this device");
	if (a->shift > 24 || (a->flags & ~EMUNIC_LE_HDR))
		return emunic_err(-EINVAL, "le_create: shift %u (0..24) or flags 0x%x not valid", a->shift, a->flags);
	le = calloc(1, sizeof(*le));
	if (!le)
		return -ENOMEM;
	nic_obj_init(&le->o, d, OBJ_LE);
	le->attr = *a;
	le->rkey = a->mr->mr->rkey;
	/* Ids are reused as late as possible: a put still in flight for a
	 * destroyed entry then finds no entry rather than a new one. */
	emunic_lock(&d->post_lock);
	for (unsigned i = 0; i < IMM_ID_MAX && !id; i++) {
		unsigned c = 1 + (t->le_next + i) % IMM_ID_MAX;

		if (!atomic_load(&t->les[c]))
			id = c;
	}
	if (id) {
		le->id = (uint16_t)id;
		t->le_next = (uint16_t)id;
		atomic_store_explicit(&t->les[id], le, memory_order_release);
	}
	emunic_unlock(&d->post_lock);
	if (!id) {
		free(le);
		return emunic_err(-ENOSPC, "le_create: all %d list entry ids are in use", IMM_ID_MAX);
	}
	r = nic_obj_create(&le->o);
	if (r) {
		emunic_lock(&d->post_lock);
		atomic_store(&t->les[id], NULL);
		emunic_unlock(&d->post_lock);
		free(le);
		return r;
	}
	*out = le;
	return 0;
}

int emunic_le_destroy(struct emunic_le *le)
{
	return nic_obj_destroy(le ? &le->o : NULL, "le");
}

struct emunic_target emunic_le_target(const struct emunic_le *le)
{
	return (struct emunic_target){ .addr = (uintptr_t)le->attr.addr, .len = le->attr.len, .rkey = le->rkey,
				       .id = le->id, .shift = (uint8_t)le->attr.shift };
}

struct emunic_target emunic_mr_target(const struct emunic_mr *mr)
{
	if (!mr || !mr->mr)
		return (struct emunic_target){ 0 };
	return (struct emunic_target){ .addr = (uintptr_t)mr->mr->addr, .len = mr->mr->length,
				       .rkey = mr->mr->rkey };
}
