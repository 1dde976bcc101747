/* SPDX-License-Identifier: MIT */
/*
 * Requests: test, wait, cancel, free.  A request is done when its counter
 * has counted what it needs (send: the put and every get served; receive:
 * every get) or any failure; testing is never needed for progress.
 */
#include "engines/rndv/rndv_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>


static bool qp_failed(struct emunic_rndv *r, int peer)
{
	return peer >= 0 && peer < r->size && r->peer[peer].qp && emunic_qp_failed(r->peer[peer].qp);
}

/* A request still waiting for its peer (an RTR send for its RTR, a receive
 * from that one source) when the QP to the peer failed: nothing it waits
 * for can come, so it fails now rather than at its caller's timeout. */
static bool fail_orphan(struct emunic_req *q)
{
	struct emunic_rndv *r = q->r;
	int peer = q->kind == REQ_SEND ? q->peer : q->me.src, e = -ENOENT;

	if (!qp_failed(r, peer))
		return false;
	pthread_mutex_lock(&r->lock);
	if (atomic_load(&q->state) == REQ_POSTED) {
		if (q->kind == REQ_SEND && q->rtr && !q->rtr_matched)
			e = match_withdraw(&r->rtr_m, &q->me);
		else if (q->kind == REQ_RECV)
			e = q->rtr ? rndv_rtr_withdraw(r, q) : match_cancel(&r->m, &q->me);
	}
	if (!e) {
		rndv_req_fail(q, peer, "the QP to that rank failed");
		rndv_wake_posted(r);	/* another thread may wait on it */
	}
	pthread_mutex_unlock(&r->lock);
	return !e;
}

static bool check_done(struct emunic_req *q)
{
	int s = atomic_load(&q->state);
	bool failed = false;

	if (s == REQ_DONE || s == REQ_CANCELED)
		return true;
	if (s == REQ_POSTED)
		return fail_orphan(q);
	if (s != REQ_GETTING)
		return false;
	/* The peer's QP failed: its gets (or their notices, or the answer to
	 * an RTR) will not come. */
	struct emunic_qp *qp = q->r->peer[q->peer].qp;

	if ((q->kind == REQ_SEND || q->rtr) && qp && emunic_qp_failed(qp) && !q->wake_owed) {
		q->st.error = -EIO;
		atomic_store(&q->state, REQ_DONE);
		return true;
	}
	if (rndv_ct_events(&q->c, &failed) < q->need && !failed)
		return false;
	if (!failed) {
		atomic_store(&q->state, REQ_DONE);
		return true;
	}
	/* A failure: done once every op posted for it has been counted, so
	 * nothing lands in (or completes on) a freed request later. */
	pthread_mutex_lock(&q->r->lock);
	if (q->kind == REQ_RECV)
		q->ngets = q->need = q->next_get;
	if (!q->st.error)
		q->st.error = -EIO;
	failed = rndv_ct_events(&q->c, &failed) >= q->need;
	if (failed)
		atomic_store(&q->state, REQ_DONE);
	pthread_mutex_unlock(&q->r->lock);
	return failed;
}

/* Whether a test of q runs the engine (emunic_dev_progress): for a request
 * of at most `first` bytes (a receive: its buffer) or under the RTR
 * protocol, whose steps are single arrivals that a core would have to wake
 * for; not for a longer chunked request, whose gets the core moves best
 * alone (a 64 KiB ping-pong took 1.5x as long with its tests in the engine,
 * both ranks' app threads competing with rxe's own packet work for the
 * guest's two CPUs: README, "Eager, RTR rendezvous"). */
static bool lends(const struct emunic_req *q)
{
	return q->len <= q->r->attr.first || q->rtr;
}

int emunic_test(struct emunic_req *q, int *done, struct emunic_status *st)
{
	if (!q || !done)
		return -EINVAL;
	*done = check_done(q);
	/* Not yet: lend this thread to the engine (outside the lock: the
	 * pass may run this endpoint's handlers), so what has arrived is
	 * found now, not when the progress core wakes for it. */
	if (!*done && lends(q) && emunic_dev_progress(q->r->dev) > 0)
		*done = check_done(q);
	if (!*done) {
		pthread_mutex_lock(&q->r->lock);
		rndv_progress_req(q->r, q);
		pthread_mutex_unlock(&q->r->lock);
	} else if (st) {
		*st = q->st;
	}
	return 0;
}

/* Waits (running the engine meanwhile, as every wait of emunic does) until
 * a request of the endpoint moved, for one that nothing has touched yet:
 * the endpoint's `moved` counter, bumped by rndv_wake_posted while
 * posted_waiters is set.  Counted first, so a mover that misses the count
 * noted its move before, and `moves` here differs from what it was before
 * the caller's test (both sequentially consistent: peer.c); a move that
 * changed no state (an RTR matched for the host to answer) counts too. */
static int wait_posted(struct emunic_req *q, uint64_t moves, int slice)
{
	struct emunic_rndv *r = q->r;
	struct emunic_ct_val v;
	int e = 0;

	atomic_fetch_add(&r->posted_waiters, 1);
	if (!emunic_ct_get(r->moved, &v) && atomic_load(&r->moves) == moves)
		e = emunic_ct_wait(r->moved, v.success + v.failure + 1, &v, slice);
	atomic_fetch_sub(&r->posted_waiters, 1);
	return e;
}

int emunic_wait(struct emunic_req *q, struct emunic_status *st, int timeout_ms)
{
	struct timespec t0, now;
	struct emunic_ct_val v;
	int done = 0, slice;

	if (!q)
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		uint64_t moves = atomic_load(&q->r->moves);	/* before the test looks */
		long ms;
		int e = emunic_test(q, &done, st);

		if (e || done)
			return e;
		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (timeout_ms >= 0 && ms >= timeout_ms)
			return -ETIMEDOUT;
		/* At most attr.recheck_ms asleep before looking again: what
		 * wakes a waiter not (rndv.h) is seen within it. */
		slice = q->r->attr.recheck_ms;
		if (timeout_ms >= 0 && timeout_ms - ms < slice)
			slice = (int)(timeout_ms - ms);
		if (atomic_load(&q->state) == REQ_GETTING)
			/* Sleep on the counter until it may say done. */
			e = emunic_ct_wait(q->c.ct, q->c.base + q->need, &v, slice);
		else
			e = wait_posted(q, moves, slice);
		/* In an event handler the engine is this thread: nothing
		 * moves while it waits, so it must not (a handler is a step
		 * of the engine: it tests). */
		if (e == -EDEADLK)
			return e;
	}
}

int emunic_cancel(struct emunic_req *q)
{
	int e;

	if (!q)
		return -EINVAL;
	if (q->kind != REQ_RECV)
		return -EBUSY;
	pthread_mutex_lock(&q->r->lock);
	if (atomic_load(&q->state) != REQ_POSTED)
		e = -ENOENT;
	else
		e = q->rtr ? rndv_rtr_withdraw(q->r, q) : match_cancel(&q->r->m, &q->me);
	if (!e) {
		q->st.error = -ECANCELED;
		rndv_req_moved(q, REQ_CANCELED);
		rndv_wake_posted(q->r);		/* another thread may wait on it */
	}
	pthread_mutex_unlock(&q->r->lock);
	return e ? -EBUSY : 0;
}

int emunic_req_free(struct emunic_req *q)
{
	struct emunic_rndv *r;
	bool give = false;

	if (!q)
		return -EINVAL;
	if (!check_done(q))
		return -EBUSY;
	r = q->r;
	pthread_mutex_lock(&r->lock);
	rndv_unowe(r, q);
	rndv_host_remove(r, q);
	if (q->kind == REQ_RECV && q->rtr && q->started && r->peer[q->peer].landing_req[q->landing] == q)
		r->peer[q->peer].landing_req[q->landing] = NULL;	/* failed: the slot is not reused */
	give = !q->st.error || q->st.error == -EMSGSIZE || q->st.error == -ECANCELED;
	if (q->stage && give) {
		/* A failed send's counter (or a failed RTR's stage) may still
		 * be in use: do not reuse them. */
		if (q->kind == REQ_SEND)
			q->stage->c = q->c;
		q->stage->next = r->free_stages;
		r->free_stages = q->stage;
	}
	give = give && q->kind == REQ_RECV;
	r->live_reqs--;
	pthread_mutex_unlock(&r->lock);
	if (give)
		rndv_ct_give(r, &q->c);
	if (q->mr)
		emunic_mr_dereg(q->mr);
	free(q);
	return 0;
}
