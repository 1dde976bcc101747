/* SPDX-License-Identifier: MIT */
/*
 * Slot flow control between a pair (seed 000, III.A), in one place:
 *   - the sender may put message seq into slot seq % slots once the
 *     receiver reported slot seq - slots freed: the put is triggered on the
 *     sender's credit counter, which counts the receiver's reported frees;
 *   - the receiver frees slots as it is done with them (at arrival, or when
 *     a held message is received), but reports them in order only, so a
 *     count of frees names exactly which slots are free;
 *   - reports ride in the headers of messages going the other way
 *     (piggybacked) and go explicitly once ack_every frees are unreported;
 *   - a report reaches the credit counter through ct_inc on the progress
 *     core; what a full command ring refuses is retried by rndv_flush.
 * All under the endpoint lock.
 */
#include "engines/rndv/rndv_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void rndv_send_ack(struct emunic_rndv *r, int p)
{
	struct rndv_peer *pe = &r->peer[p];
	struct emunic_qp *qp = rndv_peer_qp(r, p);
	uint64_t hdr[2] = { 0, pe->freed };
	struct emunic_op op = { .kind = EMUNIC_OP_PUT, .qp = qp, .addr = pe->ack_out, .len = 16,
				.mr = r->region_mr, .target = pe->card.ack };

	/* The put reads ack_out when it goes: a later, larger count there is
	 * as good (reports only grow). */
	memcpy(pe->ack_out, hdr, sizeof(hdr));
	pe->ack_owed = !qp || emunic_op_post(r->dev, &op);
	if (!pe->ack_owed) {
		pe->acked_sent = pe->freed;
		r->stats.acks_explicit++;
	}
}

void rndv_slot_free(struct emunic_rndv *r, int p, uint64_t seq)
{
	struct rndv_peer *pe = &r->peer[p];
	unsigned n = r->attr.slots;

	if (seq < pe->freed || seq >= pe->freed + n)
		return;		/* not a slot in use: never double-count */
	pe->slot_done[seq % n] = 1;
	while (pe->slot_done[pe->freed % n]) {
		pe->slot_done[pe->freed % n] = 0;
		pe->freed++;
	}
	if (pe->freed - pe->acked_sent >= r->attr.ack_every)
		rndv_send_ack(r, p);
}

void rndv_apply_credits(struct emunic_rndv *r, int p)
{
	struct rndv_peer *pe = &r->peer[p];
	uint64_t add = pe->acked_seen - pe->credit_applied;

	if (add && !emunic_ct_inc(pe->credit_ct, (struct emunic_ct_val){ add, 0 }))
		pe->credit_applied = pe->acked_seen;
}

void rndv_acked(struct emunic_rndv *r, int p, uint64_t acked)
{
	struct rndv_peer *pe = &r->peer[p];

	/* Never more than were sent: a bad report must not free a slot in use. */
	if (acked <= pe->acked_seen || acked > pe->send_seq)
		return;
	pe->acked_seen = acked;
	rndv_apply_credits(r, p);
}

uint64_t rndv_piggyback(struct emunic_rndv *r, int p, bool goes_now)
{
	struct rndv_peer *pe = &r->peer[p];

	/* A header that waits for a slot carries the count, but cannot stand
	 * in for an explicit ack: both sides could wait for each other. */
	if (goes_now && pe->freed > pe->acked_sent) {
		r->stats.acks_piggybacked += pe->freed - pe->acked_sent;
		pe->acked_sent = pe->freed;
	}
	return pe->freed;
}

void rndv_on_ack(void *arg, const struct emunic_event *ev)
{
	struct emunic_rndv *r = arg;

	if (ev->kind != EMUNIC_EV_PUT || ev->status || ev->peer < 0 || ev->peer >= r->size)
		return;
	pthread_mutex_lock(&r->lock);
	rndv_acked(r, ev->peer, ev->hdr_data);
	r->flush(r);		/* defer.c, above this file */
	pthread_mutex_unlock(&r->lock);
}
