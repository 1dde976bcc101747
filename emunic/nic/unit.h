/* SPDX-License-Identifier: MIT */
/*
 * The one interface through which a subsystem plugs into the engine.  The
 * engine names no unit: it calls each registered unit's step in every pass
 * and asks them about deadlines, pending work, objects and closing.  Units
 * reach the data path only through nic.h (tasks with their own done op, the
 * QP hooks), never each other.  As rxe's tasks do, a step returns whether it
 * did something (> 0) or found nothing to do (0).
 */
#ifndef EMUNIC_NIC_UNIT_H
#define EMUNIC_NIC_UNIT_H

#include "emunic/nic/nic.h"

struct nic_unit {
	const char *name;
	/* Runs what became eligible; > 0 did work, 0 idle. */
	int (*step)(struct emunic_dev *d);
	/* When (emunic_now_ns() time) the unit must run again with no event
	 * (UINT64_MAX: not before an event). */
	uint64_t (*next_due_ns)(struct emunic_dev *d, uint64_t now);
	/* Holds work that only a completion or an arrival can move. */
	bool (*pending)(struct emunic_dev *d);
	/* That work is the NIC's alone (triggers fire with the application
	 * away): the core is handed it even where it shares a CPU with the
	 * application.  Else (an MQ's WAITs) there the application's own wait
	 * or poll collects it, or the lazy hand-over: waking the core would
	 * take the CPU from the application's work (owner.c). */
	bool wake_core;
	/* Has work its next step would do now, with no event (optional: a
	 * unit whose pending work wakes the core anyway needs none). */
	bool (*runnable)(struct emunic_dev *d);
	/* The engine linked a new object of the device. */
	void (*attach)(struct emunic_dev *d, struct obj *o);
	/* An object goes: the unit lets go of it (its work was completed or
	 * canceled already). */
	void (*release)(struct emunic_dev *d, struct obj *o);
	/* The device closes: fail what cannot finish, say what was lost. */
	void (*cancel_all)(struct emunic_dev *d);
	/* The device is freed: the unit frees its own state. */
	void (*fini)(struct emunic_dev *d);
};

#endif
