/* SPDX-License-Identifier: MIT */
/*
 * What every file of the interposer uses: its state, its error line, the
 * clock and the kinds' names.  A leaf: it calls nothing else of mpi/.
 */
#include "mpi/mpi_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

struct mpi_state mpi_g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.pump_cv = PTHREAD_COND_INITIALIZER,
	.max_bytes = 1 << 20,
	.timeout_ms = 300000,
};

const char *mpi_kind_name(enum mpi_kind k)
{
	static const char *const n[MK_NKIND] = {
		[MK_BCAST] = "ibcast", [MK_ALLREDUCE] = "iallreduce", [MK_ALLTOALL] = "ialltoall",
		[MK_GATHER] = "igather", [MK_ALLGATHER] = "iallgather",
	};

	return k < MK_NKIND ? n[k] : "?";
}

void mpi_say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "emunic-mpi: rank %d: %s\n", mpi_g.rank, buf);
}

long long mpi_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
