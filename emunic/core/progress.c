/* SPDX-License-Identifier: MIT */
/*
 * The progress core's loop: the one place where the emulated NIC moves.
 * Each pass drains the command ring, polls the verbs CQ, fires the triggers
 * whose counters moved, runs the management queues and hands eligible work
 * to verbs; connection events are looked at
 * every CM_EVERY passes.  With nothing to do it spins (a dedicated core) or
 * sleeps in io_uring (idle.c) until a completion, a CM event or a doorbell.
 */
#include "emunic/core/core.h"
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <sched.h>
#include <stdint.h>
#include <unistd.h>

#define CM_EVERY 1024
#define IDLE_PASSES 64		/* empty passes before sleeping (sleep mode) */

static int drain_commands(struct emunic_dev *d)
{
	struct cmd *c;
	int n = 0;

	while ((c = emunic_ring_peek(&d->cmd))) {
		switch (c->type) {
		case CMD_TASK:
			emunic_exec_task(d, &c->task);
			break;
		case CMD_TRIG:
			emunic_trig_cmd(d, c->obj);
			break;
		case CMD_OBJ_CREATE: {
			struct obj *o = c->obj;

			o->next = d->objs;
			d->objs = o;
			if (o->kind == OBJ_QP)
				emunic_cm_start(d, (struct emunic_qp *)o);
			break;
		}
		case CMD_OBJ_DESTROY: {
			struct obj *o = c->obj;

			if (o->kind == OBJ_QP)
				emunic_exec_qp_error((struct emunic_qp *)o, EMUNIC_WC_CANCELED);
			emunic_obj_release(d, o);
			break;
		}
		}
		emunic_ring_pop(&d->cmd);
		n++;
	}
	return n;
}

static int one_pass(struct emunic_dev *d)
{
	int work = drain_commands(d);

	work += emunic_exec_poll(d);
	work += emunic_trig_run(d);
	work += emunic_exec_mqs(d);
	work += emunic_exec_push(d);
	if (++d->loops % CM_EVERY == 0)
		work += emunic_cm_events(d);
	return work;
}

static void pin(struct emunic_dev *d)
{
	cpu_set_t set;

	if (d->attr.cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(d->attr.cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		emunic_info("progress core: cannot pin to CPU %d; running unpinned", d->attr.cpu);
}

void *emunic_core_main(void *arg)
{
	struct emunic_dev *d = arg;
	int empty = 0;

	pin(d);
	while (!atomic_load_explicit(&d->stop, memory_order_acquire)) {
		if (one_pass(d)) {
			empty = 0;
			continue;
		}
		if (d->idle == EMUNIC_IDLE_SPIN || ++empty < IDLE_PASSES) {
			__builtin_ia32_pause();
			continue;
		}
		if (emunic_cm_events(d)) {	/* may have made work postable */
			empty = 0;
			continue;
		}
		/* Completions held by an emulated slow sink come due with no
		 * event to wake on: sleep only until the first is due. */
		emunic_idle_sleep(d, emunic_trig_next_due_ns(d));
		empty = 0;
	}
	/* Closing: take what was posted, then fail what cannot finish. */
	drain_commands(d);
	emunic_exec_cancel_all(d);
	emunic_trig_cancel_all(d);
	return NULL;
}

void emunic_core_doorbell(struct emunic_dev *d)
{
	uint64_t one = 1;

	/* Pairs with the core's store to sleeping before its last ring check. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&d->sleeping, memory_order_relaxed))
		(void)!write(d->doorbell, &one, sizeof(one));
}
