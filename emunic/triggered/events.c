/* SPDX-License-Identifier: MIT */
/*
 * Event queues (full events, to a poller or to a handler on the progress
 * core) and list entries (buffers exposed to peers, with the counter and
 * event queue their arrivals are reported to).
 */
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *emunic_ev_kind_str(int kind)
{
	static const char *const names[] = {
		[EMUNIC_EV_PUT] = "PUT", [EMUNIC_EV_GET] = "GET", [EMUNIC_EV_ATOMIC] = "ATOMIC",
		[EMUNIC_EV_ACK] = "ACK", [EMUNIC_EV_REPLY] = "REPLY", [EMUNIC_EV_FETCH] = "FETCH",
		[EMUNIC_EV_CT_DONE] = "CT_DONE",
	};

	return kind >= EMUNIC_EV_PUT && kind <= EMUNIC_EV_CT_DONE ? names[kind] : "UNKNOWN";
}

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
	emunic_obj_init(&eq->o, d, OBJ_EQ);
	eq->handler = handler;
	eq->arg = arg;
	if (emunic_ring_init(&eq->ev, depth ? depth : 1024, sizeof(struct emunic_event))) {
		free(eq);
		return -ENOMEM;
	}
	r = emunic_obj_create(&eq->o);
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
	return emunic_obj_destroy(eq ? &eq->o : NULL, "eq");
}

void emunic_eq_push(struct emunic_eq *eq, const struct emunic_event *ev)
{
	if (eq->handler) {
		eq->handler(eq->arg, ev);
		return;
	}
	if (!emunic_ring_push(&eq->ev, ev)) {
		if (atomic_fetch_add(&eq->dropped, 1) == 0)
			emunic_info("eq %p full: %s event from peer %d (user %llu) lost; poll it faster or make it "
				    "deeper (further losses are only counted)", (void *)eq, emunic_ev_kind_str(ev->kind),
				    ev->peer, (unsigned long long)ev->user);
		return;
	}
	atomic_fetch_add_explicit(&eq->seq, 1, memory_order_release);
	if (atomic_load(&eq->waiters))
		emunic_futex_wake(&eq->seq);
}

int emunic_eq_poll(struct emunic_eq *eq, struct emunic_event *ev, int n)
{
	int got = 0;
	void *e;

	if (!emunic_obj_alive(NULL, eq ? &eq->o : NULL, OBJ_EQ) || !ev || n < 0)
		return emunic_err(-EINVAL, "eq_poll: not a live event queue");
	while (got < n && (e = emunic_ring_peek(&eq->ev))) {
		memcpy(&ev[got++], e, sizeof(*ev));
		emunic_ring_pop(&eq->ev);
	}
	return got;
}

int emunic_eq_wait(struct emunic_eq *eq, struct emunic_event *ev, int timeout_ms)
{
	struct timespec t0 = { 0, 0 };

	emunic_elapsed_ms(&t0);
	for (;;) {
		uint32_t seq = eq ? atomic_load_explicit(&eq->seq, memory_order_acquire) : 0;
		int r = emunic_eq_poll(eq, ev, 1);

		if (!r)
			r = emunic_wait_step(&eq->seq, seq, &eq->waiters, &t0, timeout_ms);
		if (r)
			return r < 0 ? r : 0;
	}
}

uint64_t emunic_eq_dropped(const struct emunic_eq *eq)
{
	return eq ? atomic_load(&((struct emunic_eq *)eq)->dropped) : 0;
}

/* ---- list entries ------------------------------------------------------------- */

int emunic_le_create(struct emunic_dev *d, const struct emunic_le_attr *a, struct emunic_le **out)
{
	struct emunic_le *le;
	unsigned id = 0;
	int r;

	if (!d || !a || !out)
		return -EINVAL;
	if (!emunic_obj_alive(d, a->mr ? &a->mr->o : NULL, OBJ_MR) || !emunic_mr_covers(a->mr, a->addr, a->len))
		return emunic_err(-EINVAL, "le_create: the buffer is not inside a live memory region of this device");
	if ((a->ct && !emunic_obj_alive(d, &a->ct->o, OBJ_CT)) || (a->eq && !emunic_obj_alive(d, &a->eq->o, OBJ_EQ)))
		return emunic_err(-EINVAL, "le_create: its counter or event queue is not live on this device");
	if (a->shift > 24 || (a->flags & ~EMUNIC_LE_HDR))
		return emunic_err(-EINVAL, "le_create: shift %u (0..24) or flags 0x%x not valid", a->shift, a->flags);
	le = calloc(1, sizeof(*le));
	if (!le)
		return -ENOMEM;
	emunic_obj_init(&le->o, d, OBJ_LE);
	le->attr = *a;
	le->rkey = a->mr->mr->rkey;
	/* Ids are reused as late as possible: a put still in flight for a
	 * destroyed entry then finds no entry rather than a new one. */
	pthread_mutex_lock(&d->post_lock);
	for (unsigned i = 0; i < IMM_ID_MAX && !id; i++) {
		unsigned c = 1 + (d->le_next + i) % IMM_ID_MAX;

		if (!d->les[c])
			id = c;
	}
	if (id) {
		le->id = (uint16_t)id;
		d->le_next = (uint16_t)id;
		__atomic_store_n(&d->les[id], le, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&d->post_lock);
	if (!id) {
		free(le);
		return emunic_err(-ENOSPC, "le_create: all %d list entry ids are in use", IMM_ID_MAX);
	}
	r = emunic_obj_create(&le->o);
	if (r) {
		pthread_mutex_lock(&d->post_lock);
		d->les[id] = NULL;
		pthread_mutex_unlock(&d->post_lock);
		free(le);
		return r;
	}
	*out = le;
	return 0;
}

int emunic_le_destroy(struct emunic_le *le)
{
	return emunic_obj_destroy(le ? &le->o : NULL, "le");
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
