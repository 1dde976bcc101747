/* SPDX-License-Identifier: MIT */
#include "emunic/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one piece of process-wide state: which rank this process is, for
 * message prefixes only.  Set once at bootstrap. */
static int log_rank = -1;

void emunic_log_set_rank(int rank) { log_rank = rank; }
int emunic_log_rank(void) { return log_rank; }

static void vlog(const char *level, const char *fmt, va_list ap)
{
	char buf[1024];
	int n = 0;

	if (log_rank >= 0)
		n = snprintf(buf, sizeof(buf), "emunic: rank %d: %s", log_rank, level);
	else
		n = snprintf(buf, sizeof(buf), "emunic: %s", level);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = 0;
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	/* One write per message so ranks' lines do not interleave mid-line. */
	fprintf(stderr, "%s\n", buf);
}

int emunic_err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
	return err < 0 ? err : -err;
}

void emunic_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}

void emunic_debug(const char *fmt, ...)
{
	static int on = -1;
	va_list ap;

	if (on < 0)
		on = getenv("EMUNIC_DEBUG") != NULL;
	if (!on)
		return;
	va_start(ap, fmt);
	vlog("debug: ", fmt, ap);
	va_end(ap);
}
