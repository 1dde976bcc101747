/* SPDX-License-Identifier: MIT */
/*
 * Helpers every file of engines/coll uses: the error line, the timeout
 * bound, the clock, the wr_id of a task and destroy's fence.  A leaf (it calls nothing else of the engine), so the
 * algorithms (barrier.c, and the collectives to come) and the collective
 * object (coll.c) can both use it without calling into each other.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
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
	       k == EMUNIC_COLL_BCAST ? "bcast" : "?";
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
