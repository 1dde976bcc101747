/* SPDX-License-Identifier: MIT */
/*
 * The triggered-op trace: the engine records when each op fires, is handed
 * to verbs and is counted done, so a test can check what was on the wire at
 * once (e.g. never more than c gets in flight) instead of assuming.
 */
#include "emunic/triggered/trig.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <string.h>

int emunic_trace_start(struct emunic_dev *d, unsigned entries)
{
	struct trig_dev *t;
	int r = 0;

	if (!d || !entries)
		return -EINVAL;
	t = d->trig;
	pthread_mutex_lock(&t->trace_lock);
	if (atomic_load(&t->tracing))
		r = emunic_err(-EBUSY, "trace_start: already tracing");
	else if (emunic_ring_init(&t->trace, entries, sizeof(struct emunic_trace_rec)))
		r = -ENOMEM;
	else
		atomic_store_explicit(&t->tracing, true, memory_order_release);
	pthread_mutex_unlock(&t->trace_lock);
	return r;
}

int emunic_trace_read(struct emunic_dev *d, struct emunic_trace_rec *out, int n)
{
	struct trig_dev *t;
	int got = 0;
	void *e;

	if (!d || !out || n < 0 || !atomic_load_explicit(&d->trig->tracing, memory_order_acquire))
		return -EINVAL;
	t = d->trig;
	pthread_mutex_lock(&t->trace_lock);
	while (got < n && (e = emunic_ring_peek(&t->trace))) {
		memcpy(&out[got++], e, sizeof(*out));
		emunic_ring_pop(&t->trace);
	}
	pthread_mutex_unlock(&t->trace_lock);
	return got;
}

void trig_trace(struct emunic_dev *d, uint32_t what, const struct trig *x, int status)
{
	struct trig_dev *t = d->trig;
	struct emunic_trace_rec r;

	if (!atomic_load_explicit(&t->tracing, memory_order_acquire) || x->stage != STAGE_OP)
		return;
	r = (struct emunic_trace_rec){
		.ns = emunic_now_ns(), .what = what, .op = x->kind, .peer = x->peer, .status = status, .len = x->len,
		.user = x->user,
	};
	if (!emunic_ring_push(&t->trace, &r))	/* full: newer records are dropped, and counted */
		atomic_fetch_add_explicit(&t->trace_dropped, 1, memory_order_relaxed);
}

uint64_t emunic_trace_dropped(const struct emunic_dev *d)
{
	return d ? atomic_load(&d->trig->trace_dropped) : 0;
}
