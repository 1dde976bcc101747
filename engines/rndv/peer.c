/* SPDX-License-Identifier: MIT */
/*
 * The leaf every other file of engines/rndv uses: the QP to a peer (made at
 * first use under ON_DEMAND), counters taken and given back, the host's
 * list of sends it must act on, the queue of work the command ring refused
 * (run by defer.c), a request's failure, and the wake-up of threads asleep
 * on requests not yet started.  It calls nothing else of engines/rndv.
 */
#include "engines/rndv/rndv_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the QP to a peer --------------------------------------------------------- */

/* What every QP to a peer is, made here or accepted on demand by the core. */
void rndv_peer_qp_attr(const struct emunic_rndv *r, struct emunic_qp_attr *qa)
{
	emunic_qp_attr_init(qa);
	qa->flags = EMUNIC_QP_TRIGGERED | ((r->attr.flags & EMUNIC_RNDV_ON_DEMAND) ? EMUNIC_QP_ON_DEMAND : 0);
	qa->depth = 512;
	qa->reconnects = r->attr.reconnects;
	qa->reconnect_timeout_ms = r->attr.reconnect_timeout_ms;
}

/* The QP to p: made at create, or here at first use (ON_DEMAND), where a
 * peer that connected to us first has already made it (the core accepted). */
struct emunic_qp *rndv_peer_qp(struct emunic_rndv *r, int p)
{
	struct rndv_peer *pe = &r->peer[p];
	struct emunic_qp_attr qa;
	int e;

	if (pe->qp)
		return pe->qp;
	rndv_peer_qp_attr(r, &qa);
	e = emunic_qp_create(r->dev, p, &qa, &pe->qp);
	if (e) {
		fprintf(stderr, "emunic: rank %d: cannot make a QP to rank %d (%s)\n", r->rank, p, strerror(-e));
		pe->qp = NULL;
		return NULL;
	}
	r->stats.peers_connected++;
	return pe->qp;
}

/* ---- counters ---------------------------------------------------------------- */

int rndv_ct_rebase(struct rndv_ct *c)
{
	struct emunic_ct_val v;
	int e = emunic_ct_get(c->ct, &v);

	c->base = v.success + v.failure;
	c->base_fail = v.failure;
	return e;
}

/* Never called with r->lock held: allocating goes through the command
 * ring, which the core (maybe waiting for r->lock in a handler) drains. */
int rndv_ct_take(struct emunic_rndv *r, struct rndv_ct *c)
{
	int e;

	c->ct = NULL;
	pthread_mutex_lock(&r->lock);
	if (r->ncts)
		*c = r->cts[--r->ncts];
	pthread_mutex_unlock(&r->lock);
	if (!c->ct) {
		e = emunic_ct_alloc(r->dev, &c->ct);
		if (e)
			return e;
	}
	return rndv_ct_rebase(c);
}

/* Likewise without r->lock held. */
void rndv_ct_give(struct emunic_rndv *r, struct rndv_ct *c)
{
	bool kept = false;

	if (!c->ct)
		return;
	pthread_mutex_lock(&r->lock);
	if (r->ncts == r->cap_cts) {
		unsigned cap = r->cap_cts ? 2 * r->cap_cts : 64;
		struct rndv_ct *n = realloc(r->cts, cap * sizeof(*n));

		if (n) {
			r->cts = n;
			r->cap_cts = cap;
		}
	}
	if (r->ncts < r->cap_cts) {
		r->cts[r->ncts++] = *c;
		kept = true;
	}
	pthread_mutex_unlock(&r->lock);
	if (!kept)
		emunic_ct_free(c->ct);
	c->ct = NULL;
}

uint64_t rndv_ct_events(const struct rndv_ct *c, bool *failed)
{
	struct emunic_ct_val v;

	if (emunic_ct_get(c->ct, &v)) {
		*failed = true;
		return 0;
	}
	*failed = v.failure > c->base_fail;
	return v.success + v.failure - c->base;
}

/* ---- the host's sends, failures ------------------------------------------------ */

void rndv_host_add(struct emunic_rndv *r, struct emunic_req *q)
{
	if (q->on_host)
		return;
	q->on_host = true;
	rndv_list_append(&r->host, &r->host_tail, q, offsetof(struct emunic_req, next_host));
}

void rndv_host_remove(struct emunic_rndv *r, struct emunic_req *q)
{
	if (q->on_host)
		rndv_list_remove(&r->host, &r->host_tail, q, offsetof(struct emunic_req, next_host));
	q->on_host = false;
}

/* The host-progressed variants (seed 000): what the app's call does, in
 * posting order, for every request of the endpoint (as a host-progressed MPI
 * progresses everything on any call). */

void rndv_req_fail(struct emunic_req *q, int peer, const char *why)
{
	fprintf(stderr, "emunic: rank %d: %s%s of %zu bytes %s rank %d tag %d: %s\n", q->r->rank, q->rtr ? "rtr " : "",
		q->kind == REQ_SEND ? "send" : "receive", q->len, q->kind == REQ_SEND ? "to" : "from", peer, q->tag,
		why);
	q->st.error = -EIO;
	rndv_req_moved(q, REQ_DONE);
}

/* The owed queue (defer.c runs it): work a full command ring refused. */
void rndv_owe(struct emunic_rndv *r, struct emunic_req *q)
{
	rndv_list_append(&r->owed, &r->owed_tail, q, offsetof(struct emunic_req, next_owed));
}

void rndv_unowe(struct emunic_rndv *r, struct emunic_req *q)
{
	rndv_list_remove(&r->owed, &r->owed_tail, q, offsetof(struct emunic_req, next_owed));
}

/* After a move (rndv_note_move): wake the threads that sleep on a request
 * still REQ_POSTED (emunic_wait), which recheck.  Only then, so that a
 * test or an unrelated handler does not wake them, nor two waiters each
 * other.  A store then a load on each side (Dekker): the mover counts its
 * move in `moves`, then loads posted_waiters; the waiter counts itself in,
 * then reads the counter and `moves`; all sequentially consistent, so one
 * of them sees the other.  Called under the endpoint lock, so a bump for
 * moves up to `moves_woken` came after them.  A bump a full ring refuses
 * is owed to the next call (moves_woken stays). */
void rndv_wake_posted(struct emunic_rndv *r)
{
	uint64_t moves;

	if (!atomic_load(&r->posted_waiters) || (moves = atomic_load(&r->moves)) == r->moves_woken)
		return;
	if (!emunic_ct_inc(r->moved, (struct emunic_ct_val){ 1, 0 }))
		r->moves_woken = moves;
}
