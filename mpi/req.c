/* SPDX-License-Identifier: MIT */
/*
 * Offloaded collectives as MPI requests.  Each is a generalized request
 * (MPI_Grequest_start), so the application's lists may mix them with MPI's
 * own, and PMPI's Wait/Test family handles them once complete; this file
 * tells MPI they are complete (MPI_Grequest_complete) when emunic says so.
 *
 * An emunic collective object takes three operations in flight (-ENOSPC
 * beyond, or while earlier ones' buffers are still in use), but an MPI call
 * cannot fail for that: such a post is queued, in order behind any earlier
 * queued one of its object, and posted once there is room, by whichever
 * comes first: a Wait/Test, the next collective, or the pump thread, which
 * runs only while something is queued, so a program that computes, or
 * waits on something else, still gets its collectives posted.  The pump
 * calls emunic only (never MPI, which the program may not have initialised
 * for threads); completing to MPI is left to the application's own calls.
 */
#include "mpi/mpi_int.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int post(struct mpi_req *r)
{
	struct emunic_coll *c = r->mc->coll[r->a.kind];
	const struct mpi_args *a = &r->a;

	switch (a->kind) {
	case MK_BCAST:
		return emunic_ibcast(c, a->rbuf, a->bytes, a->root, &r->er);
	case MK_ALLREDUCE:
		return emunic_iallreduce(c, a->sbuf, a->rbuf, a->bytes, a->type, a->op, &r->er);
	case MK_ALLTOALL:
		return emunic_ialltoall(c, a->sbuf, a->rbuf, a->bytes, &r->er);
	case MK_GATHER:
		return emunic_igather(c, a->sbuf, a->rbuf, a->bytes, a->root, &r->er);
	case MK_ALLGATHER:
		return emunic_iallgather(c, a->sbuf, a->rbuf, a->bytes, &r->er);
	case MK_NKIND:
		break;
	}
	return -EINVAL;
}

static void finish(struct mpi_req *r, int err)
{
	if (err && r->mc && !r->mc->broken[r->a.kind])
		r->mc->broken[r->a.kind] = err;
	if (err && r->mc)
		mpi_say("%s on %s failed: %s (emunic's lines above name the peer): its MPI "
			"request completes with MPI_ERR_OTHER", mpi_kind_name(r->a.kind), r->mc->label,
			strerror(-err));
	r->state = MR_DONE;
	r->err = err;
	r->er = NULL;
}

/* Tries to post r; false when it must wait for room. */
static bool try_post(struct mpi_req *r)
{
	int e = post(r);

	if (e == -ENOSPC)
		return false;
	if (e) {
		finish(r, e);
	} else {
		r->state = MR_POSTED;
	}
	return true;
}

/* One pass over the live requests, in posting order: the queued posted where
 * there is room (never past an earlier queued one of the same object), the
 * posted tested.  Lock held. */
static void pump_locked(void)
{
	for (struct mpi_comm *mc = mpi_g.comms; mc; mc = mc->next)
		memset(mc->blocked, 0, sizeof(mc->blocked));
	for (struct mpi_req *r = mpi_g.reqs; r; r = r->next) {
		if (r->state == MR_QUEUED && !r->mc->blocked[r->a.kind]) {
			if (try_post(r)) {
				r->mc->queued[r->a.kind]--;
				mpi_g.nqueued--;
			} else {
				r->mc->blocked[r->a.kind] = true;
			}
		}
		if (r->state == MR_POSTED) {
			int t = emunic_coll_test(r->er);

			/* Done or failed, the wait returns at once, with the
			 * result, and frees emunic's request. */
			if (t)
				finish(r, emunic_coll_wait(r->er, 0));
		}
	}
}

static void *pump_main(void *arg)
{
	struct timespec nap = { 0, 100 * 1000 };

	(void)arg;
	pthread_mutex_lock(&mpi_g.lock);
	while (!mpi_g.pump_stop) {
		if (!mpi_g.nqueued) {
			pthread_cond_wait(&mpi_g.pump_cv, &mpi_g.lock);
			continue;
		}
		pump_locked();
		pthread_mutex_unlock(&mpi_g.lock);
		nanosleep(&nap, NULL);
		pthread_mutex_lock(&mpi_g.lock);
	}
	pthread_mutex_unlock(&mpi_g.lock);
	return NULL;
}

static void wake_pump(void)
{
	if (!mpi_g.pump_started) {
		if (pthread_create(&mpi_g.pump, NULL, pump_main, NULL)) {
			mpi_say("cannot start the pump thread: queued collectives post only from MPI calls");
			return;
		}
		mpi_g.pump_started = true;
	}
	pthread_cond_signal(&mpi_g.pump_cv);
}

/* ---- the generalized request's callbacks -------------------------------- */

static int query_fn(void *extra, MPI_Status *st)
{
	struct mpi_req *r = extra;

	PMPI_Status_set_elements(st, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(st, 0);
	st->MPI_SOURCE = MPI_UNDEFINED;
	st->MPI_TAG = MPI_UNDEFINED;
	return r->err ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static void unlink_req(struct mpi_req *r)
{
	for (struct mpi_req **p = &mpi_g.reqs; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			if (mpi_g.reqs_tail == &r->next)
				mpi_g.reqs_tail = p;
			return;
		}
}

/* Open MPI calls it once the request is complete and freed; MPICH at
 * MPI_Request_free, complete or not.  Not yet complete: the collective may
 * still write its buffers and its object expects it done, so r stays on the
 * list until it is, and mpi_progress frees it then. */
static int free_fn(void *extra)
{
	struct mpi_req *r = extra;
	bool now;

	pthread_mutex_lock(&mpi_g.lock);
	now = r->told;
	if (now)
		unlink_req(r);
	else
		r->fn_freed = true;
	pthread_mutex_unlock(&mpi_g.lock);
	if (now)
		free(r);
	return MPI_SUCCESS;
}

/* A collective cannot be cancelled (MPI-3.1 5.12): it completes as if not. */
static int cancel_fn(void *extra, int complete)
{
	(void)extra, (void)complete;
	return MPI_SUCCESS;
}

/* ---- the interface --------------------------------------------------------- */

int mpi_req_start(struct mpi_comm *mc, const struct mpi_args *a, MPI_Request *req)
{
	struct mpi_req *r = calloc(1, sizeof(*r));
	int e;

	if (!r)
		return MPI_ERR_NO_MEM;
	r->mc = mc;
	r->a = *a;
	e = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, &r->mpi);
	if (e != MPI_SUCCESS) {
		free(r);
		return e;
	}
	if (!mpi_g.reqs_tail)
		mpi_g.reqs_tail = &mpi_g.reqs;
	*mpi_g.reqs_tail = r;
	mpi_g.reqs_tail = &r->next;
	if (mc->broken[a->kind]) {
		/* An earlier one failed or was dropped here: this rank's
		 * operations no longer match the peers'. */
		finish(r, mc->broken[a->kind]);
	} else if (mc->queued[a->kind] || !try_post(r)) {
		r->state = MR_QUEUED;
		mc->queued[a->kind]++;
		mpi_g.nqueued++;
		wake_pump();
	}
	*req = r->mpi;
	return MPI_SUCCESS;
}

bool mpi_req_any(void)
{
	return __atomic_load_n(&mpi_g.reqs, __ATOMIC_RELAXED) != NULL;
}

void mpi_progress(void)
{
	MPI_Request done[64];
	struct mpi_req *gone[64];	/* free_fn ran already: ours to free */
	int n = 0, ngone = 0;

	pthread_mutex_lock(&mpi_g.lock);
	pump_locked();
	for (struct mpi_req *r = mpi_g.reqs; r && n < 64; r = r->next)
		if (r->state == MR_DONE && !r->told) {
			r->told = true;
			done[n++] = r->mpi;
			if (r->fn_freed)
				gone[ngone++] = r;
		}
	for (int i = 0; i < ngone; i++)
		unlink_req(gone[i]);
	pthread_mutex_unlock(&mpi_g.lock);
	/* Outside the lock: completing a freed request calls free_fn (Open
	 * MPI).  MPICH wants the completion even after its free_fn ran. */
	for (int i = 0; i < n; i++)
		PMPI_Grequest_complete(done[i]);
	for (int i = 0; i < ngone; i++)
		free(gone[i]);
}

/* A freed request's handle may be MPI's again (MPICH reuses them). */
static struct mpi_req *find(MPI_Request h)
{
	for (struct mpi_req *r = mpi_g.reqs; r && h != MPI_REQUEST_NULL; r = r->next)
		if (r->mpi == h && !r->fn_freed)
			return r;
	return NULL;
}

bool mpi_req_refuse_free(MPI_Request h)
{
	struct mpi_req *r;

	pthread_mutex_lock(&mpi_g.lock);
	r = find(h);
	if (r)
		mpi_say("MPI_Request_free on an %s's request: erroneous for a nonblocking collective (MPI-3.1 "
			"5.12); refused with MPI_ERR_REQUEST, the request left as it was", mpi_kind_name(r->a.kind));
	pthread_mutex_unlock(&mpi_g.lock);
	return r != NULL;
}

int mpi_req_pending(int n, const MPI_Request *reqs)
{
	int k = 0;

	if (!mpi_req_any())
		return 0;
	pthread_mutex_lock(&mpi_g.lock);
	for (int i = 0; i < n; i++) {
		struct mpi_req *r = find(reqs[i]);

		k += r && !r->told;
	}
	pthread_mutex_unlock(&mpi_g.lock);
	return k;
}

/* A wait on r that passed the bound: emunic's wait names what it waits for,
 * and the request fails with -ETIMEDOUT.  The operation is dropped on this
 * rank only (or stays posted, writing rbuf when it completes), so its
 * object's sequence no longer matches the peers': every later operation of
 * the kind on the communicator fails too (mc->broken). */
static void give_up(struct mpi_req *r)
{
	int e = r->state == MR_POSTED ? emunic_coll_wait(r->er, 0) : -ETIMEDOUT;

	if (r->state == MR_QUEUED) {
		r->mc->queued[r->a.kind]--;
		mpi_g.nqueued--;
	}
	if (!e) {		/* it completed just now */
		finish(r, 0);
		return;
	}
	mpi_say("%s on %s not complete after %d ms (EMUNIC_MPI_TIMEOUT_MS): it fails (%d)",
		mpi_kind_name(r->a.kind), r->mc->label, mpi_g.timeout_ms, e);
	finish(r, e);
}

static void check_bounds(int n, const MPI_Request *reqs, long long since)
{
	if (mpi_g.timeout_ms < 0 || mpi_now_ms() - since <= mpi_g.timeout_ms)
		return;
	pthread_mutex_lock(&mpi_g.lock);
	for (int i = 0; i < n; i++) {
		struct mpi_req *r = find(reqs[i]);

		if (r && r->state != MR_DONE)
			give_up(r);
	}
	pthread_mutex_unlock(&mpi_g.lock);
}

/* Lets MPI's own progress engine run (a probe on the private communicator
 * never matches), so point-to-point traffic the program has in flight moves
 * while it waits on an offloaded collective. */
static void drive_mpi(void)
{
	int flag;

	PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, mpi_g.world.comm, &flag, MPI_STATUS_IGNORE);
	sched_yield();
}

void mpi_req_wait_step(int n, const MPI_Request *reqs, long long since)
{
	check_bounds(n, reqs, since);
	drive_mpi();
}

void mpi_req_wait_ours(int n, const MPI_Request *reqs)
{
	long long since = mpi_now_ms();

	for (;;) {
		mpi_progress();
		if (!mpi_req_pending(n, reqs))
			return;
		mpi_req_wait_step(n, reqs, since);
	}
}

void mpi_req_drain(struct mpi_comm *mc)
{
	long long start = mpi_now_ms();
	bool live = true;

	while (live) {
		live = false;
		pump_locked();
		for (struct mpi_req *r = mpi_g.reqs; r; r = r->next)
			if (r->mc == mc && r->state != MR_DONE) {
				if (mpi_g.timeout_ms >= 0 && mpi_now_ms() - start > mpi_g.timeout_ms)
					give_up(r);
				else
					live = true;
			}
		if (live) {
			pthread_mutex_unlock(&mpi_g.lock);
			sched_yield();
			pthread_mutex_lock(&mpi_g.lock);
		}
	}
	/* Nothing of mc's runs now; its requests still complete to MPI (the
	 * program may wait on them), but never post again. */
	for (struct mpi_req *r = mpi_g.reqs; r; r = r->next)
		if (r->mc == mc)
			r->mc = NULL;
}

void mpi_req_fini(void)
{
	pthread_mutex_lock(&mpi_g.lock);
	mpi_g.pump_stop = true;
	pthread_cond_signal(&mpi_g.pump_cv);
	pthread_mutex_unlock(&mpi_g.lock);
	if (mpi_g.pump_started)
		pthread_join(mpi_g.pump, NULL);
	mpi_g.pump_started = false;
}
