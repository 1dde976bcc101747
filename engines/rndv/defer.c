/* SPDX-License-Identifier: MIT */
/*
 * rndv's deferred work, in one place: what a full command ring refused
 * (acks, credits, RTRs, a send's answer, a receive's completion count; the
 * owed queue is peer.c's) goes again at the end of every call and handler
 * (rndv_flush), which then wakes whoever sleeps on a request still
 * posted.  It sits above slots.c and rtr.c, which it calls; they reach it
 * through r->flush.
 */
#include "engines/rndv/rndv_int.h"

#include <errno.h>

static void pay_owed(struct emunic_rndv *r)
{
	struct emunic_req *q;

	while ((q = r->owed)) {
		int e;

		r->owed = q->next_owed;
		if (!r->owed)
			r->owed_tail = NULL;
		q->next_owed = NULL;
		if (q->kind == REQ_RECV) {
			e = emunic_ct_inc(q->c.ct, (struct emunic_ct_val){ 1, 0 });
			if (e != -ENOSPC)
				q->wake_owed = false;
		} else {
			e = rndv_rtr_answer(r, q);
		}
		if (e == -ENOSPC) {	/* put back at the head, in order */
			q->next_owed = r->owed;
			r->owed = q;
			if (!r->owed_tail)
				r->owed_tail = q;
			return;
		}
	}
}

void rndv_flush(struct emunic_rndv *r)
{
	for (int p = 0; p < r->size; p++) {
		if (r->peer[p].ack_owed)
			rndv_send_ack(r, p);
		if (r->peer[p].acked_seen != r->peer[p].credit_applied)
			rndv_apply_credits(r, p);
	}
	rndv_rtr_pump_all(r);
	pay_owed(r);
	rndv_wake_posted(r);
}
