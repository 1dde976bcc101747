/* SPDX-License-Identifier: MIT */
/*
 * Helpers every file of engines/coll uses: the error line, the timeout
 * bound and the clock.  A leaf (it calls nothing else of the engine), so the
 * algorithms (barrier.c, and the collectives to come) and the collective
 * object (coll.c) can both use it without calling into each other.
 */
#include "engines/coll/coll_int.h"

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
