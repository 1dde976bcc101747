/* SPDX-License-Identifier: MIT */
/*
 * The two ways to wake the core thread, a leaf below both the token
 * (owner.c, which hands work over) and the core's loop (thread.c, which
 * sleeps on them): the doorbell, an eventfd rung only while the core
 * sleeps, and the timer, a timerfd set to the next deadline.
 */
#include "emunic/nic/nic.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

int nic_wake_init(struct emunic_dev *d, bool timer)
{
	atomic_store(&d->wake_ns, UINT64_MAX);
	d->doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->doorbell < 0)
		return emunic_err(-errno, "progress core: eventfd failed (%s)", strerror(errno));
	if (!timer)
		return 0;	/* a spinning core never sleeps */
	d->wake_timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->wake_timer < 0)
		return emunic_err(-errno, "progress core: timerfd failed (%s); use EMUNIC_IDLE=spin", strerror(errno));
	return 0;
}

void nic_wake_fini(struct emunic_dev *d)
{
	if (d->doorbell >= 0)
		close(d->doorbell);
	if (d->wake_timer >= 0)
		close(d->wake_timer);
	d->doorbell = d->wake_timer = -1;
}

/* The timer fires at `when` (emunic_now_ns time).  Called under the token. */
void nic_set_wake(struct emunic_dev *d, uint64_t when)
{
	struct itimerspec it = { 0 };

	if (d->wake_timer < 0 || when == atomic_load(&d->wake_ns))
		return;
	if (when != UINT64_MAX) {
		it.it_value.tv_sec = (time_t)(when / 1000000000ull);
		it.it_value.tv_nsec = (long)(when % 1000000000ull);
		if (!it.it_value.tv_sec && !it.it_value.tv_nsec)
			it.it_value.tv_nsec = 1;
	}
	timerfd_settime(d->wake_timer, TFD_TIMER_ABSTIME, &it, NULL);
	atomic_store(&d->wake_ns, when);
	d->st.timer_sets++;
}

void nic_doorbell(struct emunic_dev *d)
{
	uint64_t one = 1;

	/* Pairs with the core's store to sleeping before its last look. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&d->sleeping, memory_order_relaxed) && d->doorbell >= 0)
		(void)!write(d->doorbell, &one, sizeof(one));
}
