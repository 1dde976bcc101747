/* SPDX-License-Identifier: MIT */
/*
 * The receiver-initiated rendezvous (seed 000, III.B-C), in one place:
 *   irecv     registers the buffer and queues the receive on its peer's RTR
 *             list; an RTR goes out (a put into the sender's RTR ring, slot
 *             rtr_seq % slots) once a landing slot is free, in posting order;
 *   on_rtr    (sender's progress core) matches the RTR against rendezvous
 *             sends to that peer with MPI rules (RTRs play the receives);
 *   answer    two puts on one QP, in order: the message's length and tag into
 *             the landing slot (plain write), then the data into the buffer
 *             (write with immediate naming the landing slot).  Under
 *             EMUNIC_PROGRESS_CORE the core answers; otherwise the sender's
 *             test, isend (wait-on-send) or emunic_startall does;
 *   on_landed (receiver's progress core) completes the receive: the length
 *             and tag are in memory before the immediate (RC order).
 * A landing slot stays with its receive until the answer lands, so at most
 * `slots` RTRs are out per peer, and ring slot k is reused only after the
 * sender handled the RTR `slots` earlier.
 */
#include "engines/rndv/rndv_int.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



/* ---- sender ------------------------------------------------------------------------ */

int rndv_rtr_answer(struct emunic_rndv *r, struct emunic_req *q)
{
	struct rndv_peer *pe = &r->peer[q->peer];
	const struct rndv_rtr *t = &q->rtr_in;
	uint64_t at = (uint64_t)t->landing << RNDV_LANDING_SHIFT;
	uint64_t n = q->len < t->len ? q->len : t->len;
	struct rndv_landing *lw = (struct rndv_landing *)q->stage->hdr;
	struct emunic_target plain = pe->card.landing;
	struct emunic_target data = { .addr = t->addr - at, .len = at + t->len, .rkey = t->rkey,
				      .id = pe->card.landing.id, .shift = RNDV_LANDING_SHIFT };
	struct emunic_op ops[2];
	struct emunic_qp *qp;
	int e;

	if (q->started || !q->rtr_matched)
		return 0;
	qp = rndv_peer_qp(r, q->peer);
	if (!qp) {
		rndv_req_fail(q, q->peer, "no connection");
		return 0;
	}
	*lw = (struct rndv_landing){ .total = q->len, .tag = q->tag };
	plain.id = 0;		/* the length is not an event: the data is */
	ops[0] = (struct emunic_op){ .kind = EMUNIC_OP_PUT, .qp = qp, .addr = lw, .len = sizeof(*lw),
				     .mr = r->staging_mr, .target = plain, .offset = at, .ct = q->c.ct };
	ops[1] = (struct emunic_op){ .kind = EMUNIC_OP_PUT, .qp = qp, .addr = q->buf, .len = n, .mr = q->mr,
				     .target = data, .offset = at, .ct = q->c.ct, .user = (uintptr_t)q };
	e = rndv_ct_rebase(&q->c);
	if (!e)
		e = emunic_trig_post_n(r->dev, ops, NULL, NULL, 2);
	if (e == -ENOSPC)
		return e;
	if (e) {
		rndv_req_fail(q, q->peer, "the answer to its RTR could not be posted");
		return 0;
	}
	q->started = true;
	q->need = 2;
	r->stats.rtrs_answered++;
	rndv_req_moved(q, REQ_GETTING);
	return 0;
}

static void on_rtr_match(void *arg, struct match_entry *rtr, struct match_entry *send)
{
	struct emunic_rndv *r = arg;
	struct rndv_rtr_in *in = rtr->owner;
	struct emunic_req *q = send->owner;

	q->rtr_in = in->rtr;
	q->rtr_matched = true;
	free(in);
	if (r->attr.progress != EMUNIC_PROGRESS_CORE) {
		rndv_host_add(r, q);		/* the sender's next call answers: */
		rndv_note_move(r);		/* wake it if it waits */
	} else if (rndv_rtr_answer(r, q) == -ENOSPC) {
		rndv_owe(r, q);
	}
}

int rndv_rtr_isend(struct emunic_rndv *r, struct emunic_req *q)
{
	struct rndv_peer *pe = &r->peer[q->peer];
	int e;

	q->rtr = true;
	q->me = (struct match_entry){ .src = q->peer, .tag = q->tag, .ctx = r->attr.ctx, .seq = pe->rtr_send_seq,
				      .owner = q };
	e = match_arrive(&r->rtr_m, &q->me, on_rtr_match, r);
	if (e < 0)
		return e;
	pe->rtr_send_seq++;
	return 0;
}

void rndv_on_rtr(void *arg, const struct emunic_event *ev)
{
	struct emunic_rndv *r = arg;
	struct match_entry *hit = NULL;
	struct rndv_rtr_in *in;
	uint32_t tag;

	if (ev->kind != EMUNIC_EV_PUT || ev->status || ev->peer < 0 || ev->peer >= r->size ||
	    ev->offset % sizeof(struct rndv_rtr) || ev->offset >= (uint64_t)r->attr.slots * sizeof(struct rndv_rtr)) {
		fprintf(stderr, "emunic: rank %d: a malformed RTR from rank %d (offset %llu): dropped\n", r->rank,
			ev->peer, (unsigned long long)ev->offset);
		return;
	}
	in = calloc(1, sizeof(*in));
	if (!in) {
		fprintf(stderr, "emunic: rank %d: out of memory for an RTR from rank %d: dropped\n", r->rank, ev->peer);
		return;
	}
	memcpy(&in->rtr, r->peer[ev->peer].rtr_ring + ev->offset, sizeof(in->rtr));
	tag = (uint32_t)in->rtr.match_bits;
	in->peer = ev->peer;
	in->me = (struct match_entry){ .src = ev->peer, .tag = tag == UINT32_MAX ? MATCH_ANY : (int)tag,
				       .ctx = (uint32_t)(in->rtr.match_bits >> 32), .owner = in };
	pthread_mutex_lock(&r->lock);
	if (in->rtr.seq < r->peer[ev->peer].rtr_seen) {
		/* RTRs from a peer come in order: this one came already. */
		fprintf(stderr, "emunic: rank %d: a second copy of RTR %llu from rank %d: dropped\n", r->rank,
			(unsigned long long)in->rtr.seq, ev->peer);
		emunic_ev_duplicate(r->dev, ev);
		free(in);
	} else if (in->rtr.landing >= r->attr.slots || match_post(&r->rtr_m, &in->me, &hit) < 0) {
		fprintf(stderr, "emunic: rank %d: an RTR from rank %d names landing slot %u or tag %d: dropped\n",
			r->rank, ev->peer, in->rtr.landing, in->me.tag);
		free(in);
	} else {
		r->peer[ev->peer].rtr_seen = in->rtr.seq + 1;
		if (hit)
			on_rtr_match(r, &in->me, hit);
	}
	r->flush(r);		/* defer.c, above this file */
	pthread_mutex_unlock(&r->lock);
}

/* ---- receiver ---------------------------------------------------------------------- */

/* Posts the RTR of the receive at the head of p's list: 0, -ENOSPC (ring
 * full: left at the head), or the receive failed (taken off, 0). */
static int post_rtr(struct emunic_rndv *r, int p, struct emunic_req *q)
{
	struct rndv_peer *pe = &r->peer[p];
	struct emunic_qp *qp = rndv_peer_qp(r, p);
	struct rndv_rtr *t = (struct rndv_rtr *)q->stage->hdr;
	uint16_t idx = pe->landing_free[pe->nlanding_free - 1];
	struct emunic_rkey rk = emunic_mr_rkey(q->mr);
	struct emunic_op op;
	int e;

	*t = (struct rndv_rtr){ .match_bits = (uint64_t)r->attr.ctx << 32 | (uint32_t)q->tag, .seq = pe->rtr_seq,
				.addr = rk.addr, .len = q->len, .rkey = rk.rkey, .landing = idx, .rank = r->rank };
	op = (struct emunic_op){ .kind = EMUNIC_OP_PUT, .qp = qp, .addr = t, .len = sizeof(*t),
				 .mr = r->staging_mr, .target = pe->card.rtr,
				 .offset = (pe->rtr_seq % r->attr.slots) * sizeof(*t) };
	e = qp ? emunic_op_post(r->dev, &op) : -EIO;
	if (e == -ENOSPC)
		return e;
	pe->rtr_wait = q->next_owed;
	if (!pe->rtr_wait)
		pe->rtr_wait_tail = NULL;
	q->next_owed = NULL;
	if (e) {
		rndv_req_fail(q, q->peer, "its RTR could not be posted");
		return 0;
	}
	pe->nlanding_free--;
	pe->landing_req[idx] = q;
	q->landing = idx;
	q->started = true;
	q->need = 1;
	pe->rtr_seq++;
	r->stats.rtrs_sent++;
	rndv_req_moved(q, REQ_GETTING);
	return 0;
}

/* RTRs go in posting order, while landing slots last; under
 * EMUNIC_PROGRESS_TEST only those a test allowed. */
static void pump(struct emunic_rndv *r, int p)
{
	struct rndv_peer *pe = &r->peer[p];

	while (pe->rtr_wait && pe->nlanding_free && pe->rtr_wait->rtr_matched)
		if (post_rtr(r, p, pe->rtr_wait))
			return;
}

int rndv_rtr_irecv(struct emunic_rndv *r, struct emunic_req *q)
{
	struct rndv_peer *pe = &r->peer[q->me.src];
	struct rndv_stage *s = r->free_stages;

	if (!s) {
		fprintf(stderr, "emunic: rank %d: irecv from rank %d: %u sends and RTR receives in flight "
			"(max_sends); test or wait some first\n", r->rank, q->me.src, r->attr.max_sends);
		return -ENOSPC;
	}
	r->free_stages = s->next;
	q->stage = s;
	q->rtr = true;
	q->peer = q->me.src;
	/* On a receive, rtr_matched means "may be announced". */
	q->rtr_matched = r->attr.progress != EMUNIC_PROGRESS_TEST;
	rndv_list_append(&pe->rtr_wait, &pe->rtr_wait_tail, q, offsetof(struct emunic_req, next_owed));
	pump(r, q->peer);
	return 0;
}

void rndv_rtr_pump_all(struct emunic_rndv *r)
{
	for (int p = 0; p < r->size; p++)
		if (r->peer[p].rtr_wait)
			pump(r, p);
}

/* Takes a receive off its peer's RTR list (cancel): 0, or -EBUSY (its RTR went). */
int rndv_rtr_withdraw(struct emunic_rndv *r, struct emunic_req *q)
{
	struct rndv_peer *pe = &r->peer[q->peer];

	return rndv_list_remove(&pe->rtr_wait, &pe->rtr_wait_tail, q, offsetof(struct emunic_req, next_owed)) ? 0
													       : -EBUSY;
}

void rndv_on_landed(void *arg, const struct emunic_event *ev)
{
	struct emunic_rndv *r = arg;
	uint64_t idx = ev->offset >> RNDV_LANDING_SHIFT;
	struct rndv_landing lw;
	struct rndv_peer *pe;
	struct emunic_req *q;

	if (ev->kind != EMUNIC_EV_PUT || ev->status || ev->peer < 0 || ev->peer >= r->size || idx >= r->attr.slots)
		return;
	pe = &r->peer[ev->peer];
	pthread_mutex_lock(&r->lock);
	q = pe->landing_req[idx];
	if (!q) {
		fprintf(stderr, "emunic: rank %d: an RTR answer from rank %d for landing slot %llu, which no "
			"receive holds: dropped\n", r->rank, ev->peer, (unsigned long long)idx);
		pthread_mutex_unlock(&r->lock);
		return;
	}
	memcpy(&lw, pe->landing + (idx << RNDV_LANDING_SHIFT), sizeof(lw));
	pe->landing_req[idx] = NULL;
	pe->landing_free[pe->nlanding_free++] = (uint16_t)idx;
	q->st.source = ev->peer;
	q->st.tag = lw.tag;
	q->st.total = lw.total;
	q->st.len = lw.total < q->len ? lw.total : q->len;
	if (lw.total > q->len)
		q->st.error = -EMSGSIZE;	/* what fits was delivered */
	/* Done when counted: the same path as every other request. */
	q->wake_owed = true;
	rndv_owe(r, q);
	pump(r, ev->peer);
	r->flush(r);		/* defer.c, above this file */
	pthread_mutex_unlock(&r->lock);
}

void rndv_wait_on_send(struct emunic_req *q)
{
	struct emunic_rndv *r = q->r;
	struct timespec t0, now, nap = { 0, 2000 };

	/* seed 000's wait-on-send: poll (bounded) for the RTR, then answer. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pthread_mutex_lock(&r->lock);
		rndv_rtr_answer(r, q);
		bool done = q->started || atomic_load(&q->state) == REQ_DONE;
		pthread_mutex_unlock(&r->lock);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (done || (now.tv_sec - t0.tv_sec) * 1000000 + (now.tv_nsec - t0.tv_nsec) / 1000 >=
				    r->attr.wait_on_send_us)
			return;
		nanosleep(&nap, NULL);
	}
}

int emunic_startall(struct emunic_req *const *reqs, unsigned n, int timeout_ms)
{
	struct timespec t0, now, nap = { 0, 2000 };

	if (!reqs && n)
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		unsigned waiting = 0;

		for (unsigned i = 0; i < n; i++) {
			struct emunic_req *q = reqs[i];

			if (!q || q->kind != REQ_SEND || !q->rtr)
				continue;
			pthread_mutex_lock(&q->r->lock);
			rndv_rtr_answer(q->r, q);
			waiting += !q->started && atomic_load(&q->state) != REQ_DONE;
			rndv_wake_posted(q->r);
			pthread_mutex_unlock(&q->r->lock);
		}
		if (!waiting)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (timeout_ms >= 0 &&
		    (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >= timeout_ms)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
}
