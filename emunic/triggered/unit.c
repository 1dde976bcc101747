/* SPDX-License-Identifier: MIT */
/*
 * The triggered unit as the engine sees it: ops arrive by command; each
 * step settles the counters that moved (firing what reached its
 * threshold), releases what the slow sink has drained, and runs the
 * finishes and handler events a posting thread had to leave to a thread
 * that may run handlers.  Arrivals on TRIGGERED QPs come through the
 * engine's arrival hook (target.c).
 */
#include "emunic/triggered/trig.h"
#include "emunic/nic/unit.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdlib.h>

/* Finishes the gets the slow sink has drained by now (all of them, with
 * `all`, at close); returns how many. */
static unsigned sink_finish(struct emunic_dev *d, bool all, int status)
{
	uint64_t now;
	unsigned n = 0;
	struct trig *x;

	if (!d->trig->sink)
		return 0;
	now = all ? UINT64_MAX : emunic_now_ns();
	while ((x = trig_sink_pop(d, now))) {
		trig_finish(d, x, status);
		n++;
	}
	return n;
}

static __attribute__((noinline)) int run_step(struct emunic_dev *d)
{
	int n = trig_settle(d);

	n += (int)sink_finish(d, false, EMUNIC_WC_SUCCESS);
	if (nic_handlers_ok()) {
		n += trig_run_deferred(d);
		n += trig_eq_run_handlers(d);
		n += trig_settle(d);	/* handlers post and count too */
		if (!d->trig->deferred && !d->trig->handler_eqs)
			atomic_store(&d->need_core, false);	/* this thread did it */
	}
	return n;
}

/* Most passes: no counter moved, nothing in the sink, no finish or handler
 * event left for a handler thread.  Then there is nothing to do, and every
 * pass of a device not using triggers pays only this look (not
 * run_step's frame). */
static int step(struct emunic_dev *d)
{
	const struct trig_dev *t = d->trig;

	return t->dirty || t->sink || t->deferred || t->handler_eqs ? run_step(d) : 0;
}

static uint64_t next_due(struct emunic_dev *d, uint64_t now)
{
	(void)now;
	return trig_sink_due(d);
}

static bool pending(struct emunic_dev *d)
{
	struct trig_dev *t = d->trig;

	return t->triggered_qps || atomic_load(&t->used) || t->sink || t->deferred || t->handler_eqs;
}

static void attach(struct emunic_dev *d, struct obj *o)
{
	if (o->kind == OBJ_QP && (((struct emunic_qp *)o)->attr.flags & EMUNIC_QP_TRIGGERED))
		d->trig->triggered_qps++;
}

static void release(struct emunic_dev *d, struct obj *o)
{
	struct trig_dev *t = d->trig;

	switch (o->kind) {
	case OBJ_CT:
		trig_ct_release(d, (struct emunic_ct *)o, false);
		break;
	case OBJ_LE: {
		struct emunic_le *le = (struct emunic_le *)o;

		emunic_lock(&d->post_lock);
		if (atomic_load(&t->les[le->id]) == le)
			atomic_store_explicit(&t->les[le->id], NULL, memory_order_release);
		emunic_unlock(&d->post_lock);
		break;
	}
	case OBJ_QP:
		if (((struct emunic_qp *)o)->attr.flags & EMUNIC_QP_TRIGGERED)
			t->triggered_qps--;
		break;
	default:
		break;
	}
}

static void cancel_all(struct emunic_dev *d)
{
	unsigned n;

	for (struct obj *o = d->objs[OBJ_CT]; o; o = o->next)
		trig_ct_release(d, (struct emunic_ct *)o, true);
	n = sink_finish(d, true, EMUNIC_WC_CANCELED);
	if (n)
		nic_notice(d, "device %s closing: %u get(s) held by the emulated slow sink canceled", d->v->name, n);
	trig_run_deferred(d);
	trig_eq_run_handlers(d);
}

static void fini(struct emunic_dev *d)
{
	struct trig_dev *t = d->trig;

	if (!t)
		return;
	trig_slots_fini(d);
	free((void *)t->les);
	emunic_ring_fini(&t->trace);
	pthread_mutex_destroy(&t->trace_lock);
	free(t);
	d->trig = NULL;
}

static void free_eq(struct obj *o)
{
	emunic_ring_fini(&((struct emunic_eq *)o)->ev);
}

static const struct nic_unit trig_unit = {
	.name = "triggered", .step = step, .next_due_ns = next_due, .pending = pending, .wake_core = true,
	.attach = attach, .release = release, .cancel_all = cancel_all, .fini = fini,
};

int emunic_trig_unit_init(struct emunic_dev *d)
{
	struct trig_dev *t = calloc(1, sizeof(*t));

	if (!t || !(t->les = calloc(IMM_ID_MAX + 1, sizeof(*t->les)))) {
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->trace_lock, NULL);
	t->max = d->attr.trig_entries ? d->attr.trig_entries : 4096;
	t->sink_bps = (uint64_t)d->attr.sink_mbps * 1000000;
	d->trig = t;
	d->on_arrival = trig_arrival;
	d->obj_free[OBJ_EQ] = free_eq;
	nic_on_cmd(d, NIC_CMD_TRIG, trig_on_cmd);
	return nic_register(d, &trig_unit);
}
