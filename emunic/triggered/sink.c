/* SPDX-License-Identifier: MIT */
/*
 * The slow-sink emulation (EMUNIC_SINK_MBPS): data a get fetches drains into
 * memory at sink_bps from when the get went out (the wire and the sink
 * overlap, for one big get as for chunks); its completion is counted once
 * both the wire and the sink are done.  A leaf queue: the unit finishes
 * what it pops (ops.c).
 */
#include "emunic/triggered/trig.h"

void trig_sink_hold(struct emunic_dev *d, struct trig *x)
{
	struct trig_dev *t = d->trig;
	uint64_t now = emunic_now_ns(), start = t->sink_free_ns > x->issue_ns ? t->sink_free_ns : x->issue_ns;

	t->sink_free_ns = start + x->len * 1000000000ull / t->sink_bps;
	x->due_ns = t->sink_free_ns > now ? t->sink_free_ns : now;
	x->next = NULL;
	if (t->sink_tail)
		t->sink_tail->next = x;
	else
		t->sink = x;
	t->sink_tail = x;
}

/* The next get whose data has drained by `now` (any, with now ==
 * UINT64_MAX), for the caller to finish: the sink only keeps the queue. */
struct trig *trig_sink_pop(struct emunic_dev *d, uint64_t now)
{
	struct trig_dev *t = d->trig;
	struct trig *x = t->sink;

	if (!x || x->due_ns > now)
		return NULL;
	t->sink = x->next;
	if (!t->sink)
		t->sink_tail = NULL;
	x->next = NULL;
	return x;
}

uint64_t trig_sink_due(struct emunic_dev *d)
{
	return d->trig->sink ? d->trig->sink->due_ns : UINT64_MAX;
}
