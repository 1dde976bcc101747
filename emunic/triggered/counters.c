/* SPDX-License-Identifier: MIT */
/*
 * Counters (CT): the app allocates, reads and waits on them; only the
 * engine changes them (emunic_ct_set/inc are ops, so a trigger they satisfy
 * fires in the engine, in order with earlier posts).  Each counter has its
 * own wait word: a change wakes only the threads waiting on that counter.
 */
#include "emunic/triggered/trig.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <stdlib.h>

int emunic_ct_alloc(struct emunic_dev *d, struct emunic_ct **out)
{
	struct emunic_ct *ct;
	int r;

	if (!d || !out)
		return -EINVAL;
	ct = calloc(1, sizeof(*ct));
	if (!ct)
		return -ENOMEM;
	nic_obj_init(&ct->o, d, OBJ_CT);
	r = nic_obj_create(&ct->o);
	if (r) {
		free(ct);
		return r;
	}
	*out = ct;
	return 0;
}

int emunic_ct_free(struct emunic_ct *ct)
{
	return nic_obj_destroy(ct ? &ct->o : NULL, "ct");
}

static bool live(const struct emunic_ct *ct)
{
	return nic_obj_alive(NULL, ct ? &ct->o : NULL, OBJ_CT);
}

static struct emunic_ct_val value(const struct emunic_ct *ct)
{
	struct emunic_ct *c = (struct emunic_ct *)ct;

	return (struct emunic_ct_val){ atomic_load_explicit(&c->success, memory_order_acquire),
				       atomic_load_explicit(&c->failure, memory_order_acquire) };
}

int emunic_ct_get(struct emunic_ct *ct, struct emunic_ct_val *out)
{
	if (!live(ct) || !out)
		return emunic_err(-EINVAL, "ct_get: not a live counter");
	*out = value(ct);
	return 0;
}

static int ct_request(struct emunic_ct *ct, int kind, struct emunic_ct_val v)
{
	struct emunic_op op = { .kind = kind, .ct_target = ct, .ct_value = v };

	if (!live(ct))
		return emunic_err(-EINVAL, "ct_%s: not a live counter", kind == EMUNIC_OP_CT_SET ? "set" : "inc");
	return emunic_op_post(ct->o.dev, &op);
}

int emunic_ct_set(struct emunic_ct *ct, struct emunic_ct_val v) { return ct_request(ct, EMUNIC_OP_CT_SET, v); }
int emunic_ct_inc(struct emunic_ct *ct, struct emunic_ct_val by) { return ct_request(ct, EMUNIC_OP_CT_INC, by); }

static bool met(struct emunic_ct_val v, uint64_t test)
{
	/* Waits return on any failure: a counter that failed may never reach
	 * its test, and the waiter must learn that rather than spin. */
	return v.success + v.failure >= test || v.failure > 0;
}

struct ct_waiting {
	struct emunic_ct *const *cts;
	const uint64_t *tests;
	unsigned n;
};

static bool any_met(void *arg)
{
	const struct ct_waiting *w = arg;

	for (unsigned i = 0; i < w->n; i++)
		if (met(value(w->cts[i]), w->tests[i]) || atomic_load(&w->cts[i]->o.dead))
			return true;
	return false;
}

#define CT_POLL_MAX 128		/* counters one poll sleeps on */

int emunic_ct_poll(struct emunic_ct *const *cts, const uint64_t *tests, unsigned n, struct emunic_ct_val *out,
		   int timeout_ms)
{
	struct emunic_word *w[CT_POLL_MAX];
	struct ct_waiting cw = { cts, tests, n };
	int r;

	if (!cts || !tests || !out || n == 0)
		return emunic_err(-EINVAL, "ct_poll: no counters");
	for (unsigned i = 0; i < n; i++) {
		if (!live(cts[i]) || cts[i]->o.dev != cts[0]->o.dev)
			return emunic_err(-EINVAL, "ct_poll: counter %u is not a live counter of the device", i);
		if (i < CT_POLL_MAX)
			w[i] = &cts[i]->word;
	}
	r = any_met(&cw) ? 0 : nic_wait(cts[0]->o.dev, w, n < CT_POLL_MAX ? n : CT_POLL_MAX, any_met, &cw, timeout_ms);
	if (r)
		return r;
	for (unsigned i = 0; i < n; i++) {
		if (atomic_load(&cts[i]->o.dead))
			return -ECANCELED;	/* freed while we waited */
		*out = value(cts[i]);
		if (met(*out, tests[i]))
			return (int)i;
	}
	return -ETIMEDOUT;
}

int emunic_ct_wait(struct emunic_ct *ct, uint64_t test, struct emunic_ct_val *out, int timeout_ms)
{
	struct emunic_ct_val v;
	int r = emunic_ct_poll(&ct, &test, 1, out ? out : &v, timeout_ms);

	return r < 0 ? r : 0;
}

/* ---- the engine's side ----------------------------------------------------------- */

/* A counter that moved: settling (settle.c) walks its pending list. */
void trig_ct_changed(struct emunic_dev *d, struct emunic_ct *ct)
{
	if (ct->dirty)
		return;
	ct->dirty = true;
	ct->dirty_next = d->trig->dirty;
	d->trig->dirty = ct;
}

void trig_ct_add(struct emunic_dev *d, struct emunic_ct *ct, uint64_t success, uint64_t failure)
{
	if (!ct || atomic_load_explicit(&ct->o.gone, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&ct->success, success, memory_order_release);
	atomic_fetch_add_explicit(&ct->failure, failure, memory_order_release);
	EMUNIC_TL(TL_CT_CHANGE, TL_TRACK_CT, NIC_HANDLE_INDEX(ct->o.handle), -1, atomic_load(&ct->success),
		  atomic_load(&ct->failure), 0);
	trig_ct_changed(d, ct);
	emunic_word_bump(&ct->word);
}

void trig_ct_store(struct emunic_dev *d, struct emunic_ct *ct, struct emunic_ct_val v)
{
	if (!ct || atomic_load_explicit(&ct->o.gone, memory_order_relaxed))
		return;
	atomic_store_explicit(&ct->success, v.success, memory_order_release);
	atomic_store_explicit(&ct->failure, v.failure, memory_order_release);
	EMUNIC_TL(TL_CT_CHANGE, TL_TRACK_CT, NIC_HANDLE_INDEX(ct->o.handle), -1, v.success, v.failure, 1);
	trig_ct_changed(d, ct);
	emunic_word_bump(&ct->word);
}
