/* SPDX-License-Identifier: MIT */
/*
 * The triggered-op trace: the progress core records when each op fires, is
 * handed to verbs and is counted done, so a test can check what was on the
 * wire at once (e.g. never more than c gets in flight) instead of assuming.
 */
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <errno.h>
#include <string.h>
#include <time.h>

uint64_t emunic_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int emunic_trace_start(struct emunic_dev *d, unsigned entries)
{
	int r = 0;

	if (!d || !entries)
		return -EINVAL;
	pthread_mutex_lock(&d->trace_lock);
	if (atomic_load(&d->tracing))
		r = emunic_err(-EBUSY, "trace_start: already tracing");
	else if (emunic_ring_init(&d->trace, entries, sizeof(struct emunic_trace_rec)))
		r = -ENOMEM;
	else
		atomic_store_explicit(&d->tracing, true, memory_order_release);
	pthread_mutex_unlock(&d->trace_lock);
	return r;
}

int emunic_trace_read(struct emunic_dev *d, struct emunic_trace_rec *out, int n)
{
	int got = 0;
	void *e;

	if (!d || !out || n < 0 || !atomic_load_explicit(&d->tracing, memory_order_acquire))
		return -EINVAL;
	pthread_mutex_lock(&d->trace_lock);
	while (got < n && (e = emunic_ring_peek(&d->trace))) {
		memcpy(&out[got++], e, sizeof(*out));
		emunic_ring_pop(&d->trace);
	}
	pthread_mutex_unlock(&d->trace_lock);
	return got;
}

void emunic_trace_rec(struct emunic_dev *d, uint32_t what, const struct trig *x, int status)
{
	struct emunic_trace_rec r;

	if (!atomic_load_explicit(&d->tracing, memory_order_acquire) || x->stage != STAGE_OP)
		return;
	r = (struct emunic_trace_rec){
		.ns = emunic_now_ns(), .what = what, .op = (uint32_t)x->op.kind,
		.peer = x->op.qp ? x->op.qp->peer : -1, .status = status, .len = x->op.len, .user = x->op.user,
	};
	if (!emunic_ring_push(&d->trace, &r))	/* full: newer records are dropped, and counted */
		atomic_fetch_add_explicit(&d->trace_dropped, 1, memory_order_relaxed);
}

uint64_t emunic_trace_dropped(const struct emunic_dev *d)
{
	return d ? atomic_load(&((struct emunic_dev *)d)->trace_dropped) : 0;
}
