/* SPDX-License-Identifier: MIT */
/*
 * Helpers every file of engines/coll uses: the error line, the timeout
 * bound, the clock, the wr_id of a task and destroy's fence.  A leaf (it calls nothing else of the engine), so the
 * algorithms (barrier.c, and the collectives to come) and the collective
 * object (coll.c) can both use it without calling into each other.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
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

const char *coll_kind_str(enum emunic_coll_kind k)
{
	return k == EMUNIC_COLL_BARRIER ? "barrier" : k == EMUNIC_COLL_ALLREDUCE ? "allreduce" :
	       k == EMUNIC_COLL_BCAST ? "bcast" : k == EMUNIC_COLL_ALLTOALL ? "alltoall" :
	       k == EMUNIC_COLL_ALLGATHER ? "allgather" : k == EMUNIC_COLL_GATHER ? "gather" : "?";
}

int coll_post_lists(struct emunic_coll *c, unsigned n, uint64_t seq)
{
	unsigned lim = emunic_dev_list_tasks(c->dev), at = 0;
	long long deadline = 0;

	while (at < n) {
		unsigned k = n - at < lim ? n - at : lim;
		int r = emunic_mq_post(c->mq, c->task + at, k);

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
			if (!c->err || seq < c->err_seq) {
				c->err = -EIO;
				c->err_seq = seq;
			}
			return coll_err(c, -EIO, "%s %llu: %u of its %u tasks were posted, the rest failed (%d): "
					"it and every later one fail", c->alg->name, (unsigned long long)seq, at, n, r);
		}
		if (r)
			return r;
		at += k;
	}
	return 0;
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
	r = emunic_mq_post(c->mq, &t, 1);
	if (r)
		return coll_err(c, r, "posting the teardown fence failed (%d)", r);
	c->posted = s;
	*seq = s;
	return 0;
}
