/* SPDX-License-Identifier: MIT */
/*
 * Helpers every file of engines/coll uses: the error line, the timeout
 * bound, the clock, the recursive-doubling steps, building and posting
 * task lists, the registered buffers and destroy's fence.  A leaf (of the
 * engine it calls only schedule.c, which calls nothing), so the algorithms
 * and the collective object (coll.c) can both use it without calling into
 * each other.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int coll_err(const struct emunic_coll *c, int err, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* One write per line so ranks' messages do not interleave. */
	fprintf(stderr, "emunic: rank %d: coll: %s\n", c->rank, buf);
	return err < 0 ? err : -err;
}

long long coll_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int coll_timeout(const struct emunic_coll *c)
{
	return c->attr.timeout_ms ? c->attr.timeout_ms : 30000;
}

uint64_t coll_wr_id(uint64_t seq, int peer)
{
	return seq << COLL_PEER_BITS | ((uint64_t)peer & COLL_PEER_MASK);
}

int coll_rd_setup(struct emunic_coll *c)
{
	int n = coll_rd_schedule(c->rank, c->size, &c->step);

	if (n < 0)
		return n;
	c->nstep = n;
	for (int i = 0; i < c->nstep; i++)
		c->peer[c->step[i].peer].partner = true;
	return 0;
}

struct emunic_task *coll_task_add(struct emunic_coll *c, unsigned *n, int op, int peer, uint64_t seq,
				  struct emunic_mr *mr)
{
	struct emunic_task *t = &c->task[(*n)++];

	*t = (struct emunic_task){ .op = op, .wr_id = coll_wr_id(seq, peer), .qp = c->peer[peer].qp, .mr = mr };
	return t;
}

void coll_task_wait(struct emunic_coll *c, unsigned *n, int peer, uint64_t seq, uint32_t count)
{
	struct emunic_task *t = coll_task_add(c, n, EMUNIC_TASK_WAIT, peer, seq, NULL);

	t->qp = NULL;
	t->cq = c->peer[peer].rcq;
	t->count = count;
	t->flags = EMUNIC_TASK_WAIT_EN_LAST;
}

int coll_mem_alloc(struct emunic_coll *c, size_t bytes, size_t max_bytes, unsigned char **mem,
		   struct emunic_mr **mr)
{
	int r;

	*mem = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
	if (!*mem)
		return coll_err(c, -ENOMEM, "%s: no memory for %zu bytes of buffers (max_bytes %zu)", c->alg->name,
				bytes, max_bytes);
	memset(*mem, 0, bytes);
	r = emunic_mr_reg(c->dev, *mem, bytes, mr);
	if (r)
		return coll_err(c, r, "%s: registering %zu bytes of buffers failed (%d)", c->alg->name, bytes, r);
	return 0;
}

void coll_mem_free(unsigned char *mem, struct emunic_mr *mr)
{
	if (mr)
		emunic_mr_dereg(mr);
	free(mem);
}

const char *coll_kind_str(enum emunic_coll_kind k)
{
	return k == EMUNIC_COLL_BARRIER ? "barrier" : k == EMUNIC_COLL_ALLREDUCE ? "allreduce" :
	       k == EMUNIC_COLL_BCAST ? "bcast" : k == EMUNIC_COLL_ALLTOALL ? "alltoall" :
	       k == EMUNIC_COLL_ALLGATHER ? "allgather" : k == EMUNIC_COLL_GATHER ? "gather" : "?";
}

/* last: no list of the same operation follows, so a blocking call's wait
 * does (a refused later list must not leave the earlier ones without a
 * hand-over). */
static int mq_post(struct emunic_coll *c, const struct emunic_task *t, unsigned n, bool last)
{
	int r = emunic_mq_post_flags(c->mq, t, n, c->wait_next && last ? EMUNIC_POST_WAIT_NEXT : 0);

	return r == -ENOSPC ? coll_no_room(c, COLL_FULL_QUEUE) : r;
}

int coll_mq_post(struct emunic_coll *c, const struct emunic_task *t, unsigned n)
{
	return mq_post(c, t, n, true);
}

int coll_mq_start(struct emunic_coll *c, struct emunic_mq_prepared *pl, uint64_t seq)
{
	/* The list's wr_ids are coll_wr_id(0, peer): + this gives seq's. */
	int r = emunic_mq_start(pl, coll_wr_id(seq, 0), c->wait_next ? EMUNIC_POST_WAIT_NEXT : 0);

	return r == -ENOSPC ? coll_no_room(c, COLL_FULL_QUEUE) : r;
}

int coll_post_lists(struct emunic_coll *c, unsigned n, uint64_t seq)
{
	unsigned lim = emunic_dev_list_tasks(c->dev), at = 0;
	long long deadline = 0;

	while (at < n) {
		unsigned k = n - at < lim ? n - at : lim;
		int r = mq_post(c, c->task + at, k, at + k == n);

		if (r == -ENOSPC && at) {
			/* Part of it runs already: the rest must follow.  The
			 * ring drains as the engine runs, so wait for room. */
			if (!deadline)
				deadline = coll_now_ms() + coll_timeout(c);
			if (coll_timeout(c) >= 0 && coll_now_ms() > deadline)
				r = -EIO;
			else {
				sched_yield();
				continue;
			}
		}
		if (r && at) {
			coll_err(c, -EIO, "%s %llu: %u of its %u tasks were posted, the rest failed (%d): "
				 "it and every later one fail", c->alg->name, (unsigned long long)seq, at, n, r);
			coll_set_failed(c, seq, -EIO, true);	/* its posted part may reach peers */
			return -EIO;
		}
		if (r)
			return r;
		at += k;
	}
	return 0;
}

/* Once an operation failed, every later one fails (coll_seq_status): the
 * object is of no more use.  Its peers would learn only at their timeout
 * (30 s by default), and their peers later still: a rank two hops from
 * the failure waits for data from a rank that gave up.  So it disconnects
 * every QP: each peer's QP fails, and with it the peer's operation in
 * flight (a WAIT on its signals or data fails), which disconnects the
 * peer's own QPs in turn: the whole group fails within a few hops' time,
 * each rank naming a failure.  As MPI's revoke (ULFM), and for the same
 * reason. */
void coll_leave_if_failed(struct emunic_coll *c)
{
	char peers[256];	/* set below: this runs after every completion */
	size_t off = 0;
	int n = 0;

	/* Not while an operation before the failed one, or a send of one, is
	 * in flight: the disconnect would fail it at a peer, where it was to
	 * succeed. */
	if (!c->leave_seq || c->left || c->done + 1 < c->leave_seq || !coll_sent_before(c, c->leave_seq))
		return;
	c->left = true;
	peers[0] = '\0';
	for (int p = 0; c->peer && p < c->size; p++) {
		struct emunic_qp *qp = c->peer[p].qp;
		int r;

		if (!qp || emunic_qp_failed(qp))
			continue;
		if ((r = emunic_qp_disconnect(qp))) {
			coll_err(c, r, "%s %llu failed; disconnecting from peer %d failed too (%d): it learns at "
				 "its timeout", c->alg->name, (unsigned long long)c->leave_seq, p, r);
			continue;
		}
		n++;
		if (off < sizeof(peers))
			off += (size_t)snprintf(peers + off, sizeof(peers) - off, " %d", p);
	}
	if (n)
		coll_err(c, 0, "%s %llu failed: disconnecting from peer%s%s, so that %s now, not at %s timeout",
			 c->alg->name, (unsigned long long)c->leave_seq, n == 1 ? "" : "s", peers,
			 n == 1 ? "it fails" : "they fail", n == 1 ? "its" : "their");
}

void coll_set_failed(struct emunic_coll *c, uint64_t seq, int err, bool tell)
{
	if (!c->err || seq < c->err_seq) {
		c->err = err;
		c->err_seq = seq;
	}
	if (tell && (!c->leave_seq || seq < c->leave_seq))
		c->leave_seq = seq;
	coll_leave_if_failed(c);
}

void coll_sends_add(struct emunic_coll *c, uint64_t seq, unsigned n)
{
	c->sent[seq % COLL_MAX_INFLIGHT] = (struct coll_sent){ .seq = seq, .posted = n };
	c->sends_posted += n;
}

void coll_send_completed(struct emunic_coll *c, uint64_t seq)
{
	struct coll_sent *e = &c->sent[seq % COLL_MAX_INFLIGHT];

	if (e->seq == seq)
		e->done++;
}

bool coll_sends_done(const struct emunic_coll *c, uint64_t seq)
{
	const struct coll_sent *e = &c->sent[seq % COLL_MAX_INFLIGHT];

	return e->seq != seq || e->done >= e->posted;
}

bool coll_sends_room(const struct emunic_coll *c, uint64_t seq)
{
	return coll_sends_done(c, c->sent[seq % COLL_MAX_INFLIGHT].seq);
}

/* Destroy's fence (a WAIT on c->scq) takes the completions it counts: a
 * send still out when it is posted is never seen here, so this stays
 * false; the QPs go with the object right after. */
bool coll_sent_before(const struct emunic_coll *c, uint64_t seq)
{
	for (const struct coll_sent *e = c->sent; e < c->sent + COLL_MAX_INFLIGHT; e++)
		if (e->seq && e->seq < seq && e->done < e->posted)
			return false;
	return true;
}

/* Destroy's fence: completes once every send this rank posted completed
 * (delivered, or failed), so no peer is left waiting for one. */
int coll_send_fence(struct emunic_coll *c, uint64_t *seq)
{
	uint64_t s = c->posted + 1;
	struct emunic_task t = {
		.op = EMUNIC_TASK_WAIT, .flags = EMUNIC_TASK_SIGNAL,
		.wr_id = coll_wr_id(s, (int)COLL_PEER_MASK), .cq = c->scq, .count = (uint32_t)c->sends_posted,
	};
	int r;

	if (c->size == 1 || !c->sends_posted) {
		*seq = 0;
		return 0;
	}
	r = coll_mq_post(c, &t, 1);
	if (r)
		return coll_err(c, r, "posting the teardown fence failed (%d)", r);
	c->posted = s;
	*seq = s;
	return 0;
}
