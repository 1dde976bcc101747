/* SPDX-License-Identifier: MIT */
/*
 * Private to emunic/mq: CQs and management queues.  The rules are in two
 * files: post.c (checked when a list is posted, on the app's thread) and
 * exec.c (run by the engine).
 */
#ifndef EMUNIC_MQ_INT_H
#define EMUNIC_MQ_INT_H

#include "emunic/nic/nic.h"

/* A completion as the CQ queues it: the n-th the CQ produced. */
struct cq_entry {
	struct emunic_wc wc;
	uint64_t n;
};

struct emunic_cq {
	struct obj o;
	unsigned flags;
	_Atomic uint64_t count;		/* status: completions produced */
	uint64_t wait_index, wait_count;	/* app: WAIT base (post time) */
	_Atomic uint64_t covered;	/* app: highest WAIT target posted */
	struct emunic_ring wc;		/* engine -> app: struct cq_entry */
	_Atomic uint64_t overrun;
	/* engine */
	int err_status, err_peer;	/* the first failed completion (sticky) */
	uint32_t err_qpn;
	uint64_t err_n;			/* ... its place in count */
	struct emunic_mq *blocked;	/* MQs whose next WAIT counts on this CQ */
};

struct emunic_mq {
	struct obj o;
	struct nic_fifo q;		/* WAIT / SEND_EN / RECV_EN */
	struct emunic_ring wc;		/* engine -> app: SIGNAL completions */
	struct emunic_word word;	/* bumped per completion */
	/* engine */
	bool skipping;			/* a WAIT failed: the rest of its list flushes */
	bool ready;
	struct emunic_mq *ready_next;
	struct emunic_mq *blocked_next;	/* on its CQ's blocked list */
	struct emunic_cq *blocked_on;
};

/* The MQ unit's per-device state. */
struct mq_dev {
	struct emunic_mq *ready, *ready_tail;
	uint64_t queued;		/* control tasks not yet run, all MQs */
};

/* exec.c: registers the unit. */
int emunic_mq_unit_init(struct emunic_dev *d);

#endif
