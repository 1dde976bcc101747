/* SPDX-License-Identifier: MIT */
/*
 * Sleep mode: with nothing to do, the progress core blocks in io_uring on
 * the verbs completion channel, the rdma_cm event channel and the doorbell
 * eventfd, so an idle emunic costs no CPU on a laptop or a crowded VM.
 */
#include "emunic/core/core.h"
#include "emunic/log.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#define SLEEP_MAX_MS 100	/* wake anyway: bounded waits need a clock */

struct idle {
	struct io_uring ring;
	bool armed[3];
};

int emunic_idle_init(struct emunic_dev *d)
{
	struct idle *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	r = io_uring_queue_init(8, &s->ring, 0);
	if (r) {
		free(s);
		return emunic_err(r, "io_uring_queue_init failed (%s); use EMUNIC_IDLE=spin", strerror(-r));
	}
	d->uring = s;
	return 0;
}

static void arm(struct idle *s, int i, int fd)
{
	struct io_uring_sqe *sqe;

	if (s->armed[i])
		return;
	sqe = io_uring_get_sqe(&s->ring);
	if (!sqe)
		return;
	io_uring_prep_poll_add(sqe, fd, POLLIN);
	io_uring_sqe_set_data64(sqe, (uint64_t)i);
	s->armed[i] = true;
}

static void drain_fds(struct emunic_dev *d)
{
	struct ibv_cq *cq;
	void *ctx;
	uint64_t v;

	while (!ibv_get_cq_event(d->chan, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
	while (read(d->doorbell, &v, sizeof(v)) == sizeof(v))
		;
}

void emunic_idle_sleep(struct emunic_dev *d, uint64_t max_ns)
{
	struct idle *s = d->uring;
	struct __kernel_timespec ts = { 0, SLEEP_MAX_MS * 1000000LL };

	if (max_ns < (uint64_t)ts.tv_nsec)
		ts.tv_nsec = (long long)max_ns;
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	if (!s)
		return;
	if (ibv_req_notify_cq(d->vcq, 0))
		return;
	atomic_store(&d->sleeping, true);
	atomic_thread_fence(memory_order_seq_cst);
	/* Anything that arrived before the notify was armed, or a command
	 * posted before the app saw sleeping: do not sleep on it. */
	if (!emunic_ring_empty(&d->cmd) || emunic_exec_poll(d) > 0) {
		atomic_store(&d->sleeping, false);
		return;
	}
	arm(s, 0, d->chan->fd);
	arm(s, 1, d->cm->fd);
	arm(s, 2, d->doorbell);
	io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, &ts, NULL);
	io_uring_for_each_cqe(&s->ring, head, cqe) {
		uint64_t i = io_uring_cqe_get_data64(cqe);

		if (i < 3)
			s->armed[i] = false;
		n++;
	}
	io_uring_cq_advance(&s->ring, n);
	atomic_store(&d->sleeping, false);
	d->sleeps++;
	drain_fds(d);
}

void emunic_idle_fini(struct emunic_dev *d)
{
	struct idle *s = d->uring;

	if (!s)
		return;
	io_uring_queue_exit(&s->ring);
	free(s);
	d->uring = NULL;
}
