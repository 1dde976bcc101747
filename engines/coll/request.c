/* SPDX-License-Identifier: MIT */
/*
 * The calls of <emunic/coll.h>: the blocking forms (post, then wait within
 * the bound), the nonblocking ones (post only) and a request's test and
 * wait.  Posting goes through the algorithm's table (c->alg), completion
 * through complete.c.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* The one check that a call fits the object: each kind its own calls. */
static int check_kind(struct emunic_coll *c, const struct coll_args *a)
{
	const char *k = coll_kind_str(a->kind);

	if (a->kind == c->attr.kind)
		return 0;
	return coll_err(c, -EINVAL, "%s %s call on a collective created for %s", k[0] == 'a' ? "an" : "a", k,
			c->alg->name);
}

/* The algorithm's post.  From a failure on, every operation fails with it
 * (what the failure skipped never completes, so slots, ring entries and
 * sends never come back: waiting for room would only time out).  Else
 * once the next operation's entry for its sends is free (the one
 * COLL_MAX_INFLIGHT before it sent all: a barrier may complete before its
 * signals' ACKs come). */
static int alg_post(struct emunic_coll *c, const struct coll_args *a, uint64_t *seq)
{
	uint64_t s = c->posted + 1;

	if (c->err && s >= c->err_seq)
		return c->err;
	return coll_sends_room(c, s) ? c->alg->post(c, a, seq) : coll_no_room(c, COLL_FULL_SENDS);
}

/* A blocking post's bound ran out: why the last try found no room (each
 * -ENOSPC says, coll_no_room), and which operation holds it. */
static int no_room(struct emunic_coll *c)
{
	unsigned long long next = c->posted + 1, oldest = c->done + 1;
	const char *name = c->alg->name;
	int ms = coll_timeout(c);

	switch (c->full) {
	case COLL_FULL_INFLIGHT:
		return coll_err(c, -ENOSPC, "%s %llu: no room to post it for %d ms: %llu are in flight, the most "
				"it keeps, and %s %llu, the oldest, is not complete", name, next, ms,
				next - oldest, name, oldest);
	case COLL_FULL_SENDS:
		return coll_err(c, -ENOSPC, "%s %llu: no room to post it for %d ms: the sends of an earlier one "
				"have not completed (%llu of %llu sends counted on the send CQ)", name, next, ms,
				(unsigned long long)emunic_cq_count(c->scq), (unsigned long long)c->sends_posted);
	case COLL_FULL_SLOTS:
		if (oldest == next)	/* nothing in flight here */
			return coll_err(c, -ENOSPC, "%s %llu: no room to post it for %d ms: the buffers of earlier "
					"ones are not free yet (all %llu posted are complete here: a peer has not "
					"taken what it was sent)", name, next, ms, next - 1);
		return coll_err(c, -ENOSPC, "%s %llu: no room to post it for %d ms: the buffers of earlier ones "
				"are not free yet (%s %llu, the oldest in flight, is not complete, or a peer "
				"has not taken what it was sent)", name, next, ms, name, oldest);
	default:
		return coll_err(c, -ENOSPC, "%s %llu: no room to post it for %d ms: the management queue, a "
				"peer's send or receive queue, or the device's command ring (which the "
				"device's other queues share) stayed full", name, next, ms);
	}
}

/* A full queue (operations in flight, or other engines' lists ahead in the
 * command ring) only delays a blocking call: retry within the bound. */
static int post_blocking(struct emunic_coll *c, const struct coll_args *a, uint64_t *seq)
{
	long long deadline = coll_now_ms() + coll_timeout(c);
	struct timespec nap = { 0, 50 * 1000 };

	if (check_kind(c, a))
		return -EINVAL;
	for (bool first = true;; first = false) {
		/* A retry runs the engine itself: what holds the post up
		 * drains as the engine runs. */
		int r = first ? coll_progress_to_post(c) : coll_progress(c);

		r = r ? r : alg_post(c, a, seq);
		if (r != -ENOSPC)
			return r;
		if (coll_timeout(c) >= 0 && coll_now_ms() > deadline)
			return no_room(c);
		nanosleep(&nap, NULL);
	}
}

/* The blocking forms: posted, then waited within the bound. */
static int post_wait(struct emunic_coll *c, const struct coll_args *a)
{
	uint64_t seq;
	int r;

	c->wait_next = true;
	r = post_blocking(c, a, &seq);
	c->wait_next = false;
	if (r)
		return r;
	r = coll_wait_seq(c, seq, coll_timeout(c));
	/* Failed (an earlier send's failure may be seen before the wait ran
	 * the engine): the list it posted for the wait to run
	 * (EMUNIC_POST_WAIT_NEXT) runs now, not when the core's timer fires
	 * (up to 1 s later). */
	if (r && c->err)
		coll_progress_run(c);
	return r;
}

int emunic_barrier(struct emunic_coll *c)
{
	return c ? post_wait(c, &(struct coll_args){ .kind = EMUNIC_COLL_BARRIER }) : -EINVAL;
}

/* Requests are kept for the next post once waited (no allocation a call;
 * freed with c). */
static struct emunic_coll_req *req_get(struct emunic_coll *c)
{
	struct emunic_coll_req *req = c->spare;

	if (req)
		c->spare = req->next;
	else
		req = calloc(1, sizeof(*req));
	return req;
}

static void req_put(struct emunic_coll *c, struct emunic_coll_req *req)
{
	req->next = c->spare;
	c->spare = req;
}

/* Posts one operation and hands out its request. */
static int post_req(struct emunic_coll *c, const struct coll_args *a, struct emunic_coll_req **out)
{
	struct emunic_coll_req *req;
	int r;

	if (check_kind(c, a))
		return -EINVAL;
	r = coll_progress_to_post(c);
	if (r)
		return r;
	if (!(req = req_get(c)))
		return -ENOMEM;
	r = alg_post(c, a, &req->seq);
	if (r) {
		req_put(c, req);
		return r;
	}
	req->c = c;
	c->nreq++;
	*out = req;
	return 0;
}

int emunic_ibarrier(struct emunic_coll *c, struct emunic_coll_req **out)
{
	return c && out ? post_req(c, &(struct coll_args){ .kind = EMUNIC_COLL_BARRIER }, out) : -EINVAL;
}

int emunic_iallreduce(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t count, int type, int op,
		      struct emunic_coll_req **out)
{
	struct coll_args a = { .kind = EMUNIC_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
			       .type = type, .op = op };

	return c && out ? post_req(c, &a, out) : -EINVAL;
}

int emunic_allreduce(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t count, int type, int op)
{
	struct coll_args a = { .kind = EMUNIC_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
			       .type = type, .op = op };

	return c ? post_wait(c, &a) : -EINVAL;
}

int emunic_ibcast(struct emunic_coll *c, void *buf, size_t bytes, int root, struct emunic_coll_req **out)
{
	struct coll_args a = { .kind = EMUNIC_COLL_BCAST, .sbuf = buf, .rbuf = buf, .count = bytes, .root = root };

	return c && out ? post_req(c, &a, out) : -EINVAL;
}

int emunic_bcast(struct emunic_coll *c, void *buf, size_t bytes, int root)
{
	struct coll_args a = { .kind = EMUNIC_COLL_BCAST, .sbuf = buf, .rbuf = buf, .count = bytes, .root = root };

	return c ? post_wait(c, &a) : -EINVAL;
}

/* The exchanges' calls (alltoall, allgather, gather): blocking when out is
 * NULL. */
static int xg_call(struct emunic_coll *c, enum emunic_coll_kind kind, const void *sbuf, void *rbuf, size_t block,
		   int root, struct emunic_coll_req **out)
{
	struct coll_args a = { .kind = kind, .sbuf = sbuf, .rbuf = rbuf, .count = block, .root = root };

	if (!c)
		return -EINVAL;
	return out ? post_req(c, &a, out) : post_wait(c, &a);
}

int emunic_ialltoall(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block,
		     struct emunic_coll_req **out)
{
	return out ? xg_call(c, EMUNIC_COLL_ALLTOALL, sbuf, rbuf, block, 0, out) : -EINVAL;
}

int emunic_alltoall(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block)
{
	return xg_call(c, EMUNIC_COLL_ALLTOALL, sbuf, rbuf, block, 0, NULL);
}

int emunic_iallgather(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block,
		      struct emunic_coll_req **out)
{
	return out ? xg_call(c, EMUNIC_COLL_ALLGATHER, sbuf, rbuf, block, 0, out) : -EINVAL;
}

int emunic_allgather(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block)
{
	return xg_call(c, EMUNIC_COLL_ALLGATHER, sbuf, rbuf, block, 0, NULL);
}

int emunic_igather(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block, int root,
		   struct emunic_coll_req **out)
{
	return out ? xg_call(c, EMUNIC_COLL_GATHER, sbuf, rbuf, block, root, out) : -EINVAL;
}

int emunic_gather(struct emunic_coll *c, const void *sbuf, void *rbuf, size_t block, int root)
{
	return xg_call(c, EMUNIC_COLL_GATHER, sbuf, rbuf, block, root, NULL);
}

int emunic_coll_test(struct emunic_coll_req *req)
{
	int r;

	if (!req)
		return -EINVAL;
	r = coll_progress(req->c);
	return r ? r : coll_seq_status(req->c, req->seq);
}

int emunic_coll_wait(struct emunic_coll_req *req, int timeout_ms)
{
	struct emunic_coll *c;
	int r;

	if (!req)
		return -EINVAL;
	c = req->c;
	r = coll_wait_seq(c, req->seq, timeout_ms);
	c->nreq--;
	req_put(c, req);
	return r;
}
