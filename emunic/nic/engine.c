/* SPDX-License-Identifier: MIT */
/*
 * One pass of the engine, the one place the emulated NIC moves: drain the
 * command ring, poll verbs (completions go to their tasks' owners, arrivals
 * to the arrival hook), step every registered unit (management queues,
 * triggers, connections, faults), then hand every QP's eligible work to
 * verbs, chained.  Whoever holds the token runs it (owner.c); the core
 * thread (thread.c) and waiting application threads (assist.c) do.
 */
#include "emunic/nic/nic.h"
#include "emunic/nic/unit.h"
#include "emunic/base/log.h"

#include <errno.h>

#define DRAIN_MAX 4096		/* commands a pass takes, so it ends */

static int drain_ring(struct emunic_dev *d)
{
	const struct nic_cmd *c;
	int n = 0;

	while (n < DRAIN_MAX && (c = emunic_ring_peek(&d->cmd))) {
		if (c->type < NIC_CMD_TYPES && d->on_cmd[c->type])
			d->on_cmd[c->type](d, c);
		emunic_ring_pop(&d->cmd);
		n++;
	}
	return n;
}

int nic_pass(struct emunic_dev *d)
{
	int n = drain_ring(d);

	n += nic_verbs_poll(d);
	for (unsigned i = 0; i < d->nsteps; i++)
		n += d->step[i](d);
	if (d->ready)
		n += nic_verbs_push(d);
	d->st.passes++;
	d->st.idle_passes += !n;
	return n;
}

uint64_t nic_next_due_ns(struct emunic_dev *d, uint64_t now)
{
	uint64_t due = UINT64_MAX;

	for (unsigned i = 0; i < d->nunits; i++)
		if (d->unit[i]->next_due_ns) {
			uint64_t t = d->unit[i]->next_due_ns(d, now);

			if (t < due)
				due = t;
		}
	return due;
}

bool nic_runnable(struct emunic_dev *d)
{
	if (d->stalled || d->ready || !emunic_ring_empty(&d->cmd))
		return true;
	for (unsigned i = 0; i < d->nunits; i++)
		if (d->unit[i]->runnable && d->unit[i]->runnable(d))
			return true;
	return false;
}

bool nic_urgent(struct emunic_dev *d)
{
	if (nic_runnable(d) || (d->inflight && atomic_load_explicit(&d->sleepers, memory_order_relaxed)))
		return true;
	for (unsigned i = 0; i < d->nunits; i++) {
		const struct nic_unit *u = d->unit[i];

		if (u->pending && (u->wake_core || !atomic_load_explicit(&d->core_shares_cpu, memory_order_relaxed)) &&
		    u->pending(d))
			return true;
	}
	return false;
}

bool nic_awaited(struct emunic_dev *d)
{
	if (nic_urgent(d))
		return true;
	for (unsigned i = 0; d->inflight && i < d->nunits; i++)
		if (d->unit[i]->pending && d->unit[i]->pending(d))
			return true;
	return false;
}

void nic_cancel_all(struct emunic_dev *d)
{
	for (unsigned i = 0; i < d->nunits; i++)
		if (d->unit[i]->cancel_all)
			d->unit[i]->cancel_all(d);
}

int nic_register(struct emunic_dev *d, const struct nic_unit *u)
{
	if (d->nunits == NIC_MAX_UNITS)
		return emunic_err(-ENOSPC, "engine: no room for unit %s", u->name);
	d->unit[d->nunits++] = u;
	if (u->step)
		d->step[d->nsteps++] = u->step;
	return 0;
}

void nic_on_cmd(struct emunic_dev *d, enum nic_cmd_type type, nic_cmd_fn fn)
{
	d->on_cmd[type] = fn;
}
