/* SPDX-License-Identifier: MIT */
/*
 * Counters (CT): the app allocates, reads and waits on them; only the
 * progress core changes them (emunic_ct_set/inc are requests to the core, so
 * a trigger they satisfy fires on the core, in order with earlier posts).
 */
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

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
	emunic_obj_init(&ct->o, d, OBJ_CT);
	r = emunic_obj_create(&ct->o);
	if (r) {
		free(ct);
		return r;
	}
	*out = ct;
	return 0;
}

int emunic_ct_free(struct emunic_ct *ct)
{
	return emunic_obj_destroy(ct ? &ct->o : NULL, "ct");
}

static bool live(const struct emunic_ct *ct)
{
	return emunic_obj_alive(NULL, ct ? &ct->o : NULL, OBJ_CT);
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

/* Rechecked after announcing the wait: a change made before the core saw
 * the waiter did not wake anyone. */
static bool any_met(struct emunic_ct *const *cts, const uint64_t *tests, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (met(value(cts[i]), tests[i]) || atomic_load(&cts[i]->o.dead))
			return true;
	return false;
}

int emunic_ct_poll(struct emunic_ct *const *cts, const uint64_t *tests, unsigned n, struct emunic_ct_val *out,
		   int timeout_ms)
{
	struct timespec t0 = { 0, 0 };
	struct emunic_dev *d;

	if (!cts || !tests || !out || n == 0)
		return emunic_err(-EINVAL, "ct_poll: no counters");
	for (unsigned i = 0; i < n; i++)
		if (!live(cts[i]) || cts[i]->o.dev != cts[0]->o.dev)
			return emunic_err(-EINVAL, "ct_poll: counter %u is not a live counter of the device", i);
	d = cts[0]->o.dev;
	emunic_elapsed_ms(&t0);
	for (;;) {
		uint32_t seq = atomic_load_explicit(&d->ct_seq, memory_order_acquire);
		long left;

		for (unsigned i = 0; i < n; i++) {
			if (atomic_load(&cts[i]->o.dead))
				return -ECANCELED;	/* freed while we waited */
			*out = value(cts[i]);
			if (met(*out, tests[i]))
				return (int)i;
		}
		left = timeout_ms < 0 ? 50 : timeout_ms - emunic_elapsed_ms(&t0);
		if (left <= 0)
			return -ETIMEDOUT;
		/* Only changes to counters someone waits on wake the futex. */
		for (unsigned i = 0; i < n; i++)
			atomic_fetch_add(&cts[i]->waiters, 1);
		if (seq == atomic_load_explicit(&d->ct_seq, memory_order_acquire) && !any_met(cts, tests, n))
			emunic_futex_wait(&d->ct_seq, seq, left < 50 ? left : 50);
		for (unsigned i = 0; i < n; i++)
			atomic_fetch_sub(&cts[i]->waiters, 1);
	}
}

int emunic_ct_wait(struct emunic_ct *ct, uint64_t test, struct emunic_ct_val *out, int timeout_ms)
{
	struct emunic_ct_val v;
	int r = emunic_ct_poll(&ct, &test, 1, out ? out : &v, timeout_ms);

	return r < 0 ? r : 0;
}

/* ---- the core's side ---------------------------------------------------------- */

static void changed(struct emunic_dev *d, struct emunic_ct *ct)
{
	if (!ct->dirty) {
		ct->dirty = true;
		ct->dirty_next = d->dirty;
		d->dirty = ct;
	}
	/* Pairs with the waiter's increment before its last look (Dekker). */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&ct->waiters)) {
		atomic_fetch_add_explicit(&d->ct_seq, 1, memory_order_seq_cst);
		emunic_futex_wake(&d->ct_seq);
	}
}

void emunic_ct_add(struct emunic_dev *d, struct emunic_ct *ct, uint64_t success, uint64_t failure)
{
	if (!ct || atomic_load_explicit(&ct->o.gone, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&ct->success, success, memory_order_release);
	atomic_fetch_add_explicit(&ct->failure, failure, memory_order_release);
	changed(d, ct);
}

void emunic_ct_store(struct emunic_dev *d, struct emunic_ct *ct, struct emunic_ct_val v)
{
	if (!ct || atomic_load_explicit(&ct->o.gone, memory_order_relaxed))
		return;
	atomic_store_explicit(&ct->success, v.success, memory_order_release);
	atomic_store_explicit(&ct->failure, v.failure, memory_order_release);
	changed(d, ct);
}
