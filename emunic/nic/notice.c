/* SPDX-License-Identifier: MIT */
/*
 * The engine never writes to stderr itself (a write can block, and the
 * engine may be running on an application thread's post): it queues its
 * messages here, and whoever leaves the engine prints them — the core loop
 * after each pass, a wait after each of its passes, a poll, a post that ran
 * the engine, and close — so a failure is said before a peer it told (a
 * disconnect) can act on it.  A full queue counts
 * what it lost and says so with the next message.
 */
#include "emunic/nic/nic.h"
#include "emunic/base/log.h"

#include <stdarg.h>
#include <stdio.h>

void nic_notice(struct emunic_dev *d, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&d->notice_lock);
	if (d->notice_tail - d->notice_head < NIC_NOTICES) {
		va_start(ap, fmt);
		vsnprintf(d->notice[d->notice_tail % NIC_NOTICES], NIC_NOTICE_LEN, fmt, ap);
		va_end(ap);
		d->notice_tail++;
		atomic_fetch_add_explicit(&d->notices, 1, memory_order_release);
	} else {
		d->notices_lost++;
	}
	pthread_mutex_unlock(&d->notice_lock);
}

void nic_notices_flush(struct emunic_dev *d)
{
	char line[NIC_NOTICE_LEN];
	uint64_t lost;

	for (;;) {
		pthread_mutex_lock(&d->notice_lock);
		if (d->notice_head == d->notice_tail) {
			pthread_mutex_unlock(&d->notice_lock);
			return;
		}
		snprintf(line, sizeof(line), "%s", d->notice[d->notice_head++ % NIC_NOTICES]);
		lost = d->notices_lost;
		d->notices_lost = 0;
		atomic_fetch_sub_explicit(&d->notices, 1, memory_order_relaxed);
		pthread_mutex_unlock(&d->notice_lock);
		if (lost)
			emunic_info("(%llu engine message(s) lost: the queue was full)", (unsigned long long)lost);
		emunic_info("%s", line);
	}
}
