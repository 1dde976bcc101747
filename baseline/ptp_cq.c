/* SPDX-License-Identifier: MIT */
/* The CQ, completion channel, operation numbering, waits and requests of
 * the host-progressed baselines, and their objects' common set-up and
 * teardown (ptp_cq.h). */
#include "baseline/ptp_cq.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PTP_CQ_BATCH 16
#define PTP_CQ_SLICE_MS 100	/* bound on one sleep, so timeouts are noticed */

long long ptp_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void ptp_ops_fail(struct ptp_ops *o, uint64_t seq, int err)
{
	if (!o->err || seq < o->err_seq) {
		o->err = err;
		o->err_seq = seq;
	}
}

int ptp_ops_status(const struct ptp_ops *o, uint64_t seq)
{
	if (o->err && seq >= o->err_seq)
		return o->err;
	return seq <= o->done;
}

int ptp_cq_open(struct ptp_cq *c, struct emunic_vdev *dev, int depth, const char *who)
{
	int r;

	c->shim = &dev->shim;
	c->ch = ibv_create_comp_channel(dev->ctx);
	if (!c->ch)
		return emunic_err(-errno, "%s: ibv_create_comp_channel failed: %s", who, strerror(errno));
	fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK);
	r = emunic_shim_create_cq(c->shim, dev->ctx, depth, c->ch, &c->cq);
	return r ? emunic_err(r, "%s: creating a CQ of %d entries failed: %s", who, depth, strerror(-r)) : 0;
}

void ptp_cq_close(struct ptp_cq *c)
{
	if (c->unacked_events)
		emunic_shim_ack_cq_events(c->shim, c->cq, c->unacked_events);
	if (c->cq)
		emunic_shim_destroy_cq(c->shim, c->cq);
	if (c->ch)
		ibv_destroy_comp_channel(c->ch);
	*c = (struct ptp_cq){ 0 };
}

int ptp_cq_poll(struct ptp_cq *c, ptp_wc_fn fn, void *ctx, const char *who)
{
	struct ibv_wc wc[PTP_CQ_BATCH];
	int n;

	do {
		n = emunic_shim_poll_cq(c->shim, c->cq, PTP_CQ_BATCH, wc);
		if (n < 0)
			return emunic_err(n, "%s: polling the CQ failed: %s", who, strerror(-n));
		c->polled += (uint64_t)n;
		for (int i = 0; i < n; i++)
			fn(ctx, &wc[i]);
	} while (n == PTP_CQ_BATCH);
	return 0;
}

int ptp_cq_sleep(struct ptp_cq *c, ptp_progress_fn progress, void *ctx, int timeout_ms, const char *who)
{
	struct pollfd pf = { .fd = c->ch->fd, .events = POLLIN };
	uint64_t before = c->polled;
	struct ibv_cq *cq;
	int r;

	r = emunic_shim_req_notify_cq(c->shim, c->cq, 0);
	if (r)
		return emunic_err(r, "%s: arming the CQ failed: %s", who, strerror(-r));
	r = progress(ctx);
	if (r || c->polled != before)
		return r;
	if (poll(&pf, 1, timeout_ms) <= 0)
		return 0;
	if (!emunic_shim_get_cq_event(c->shim, c->ch, &cq) && ++c->unacked_events >= 64) {
		emunic_shim_ack_cq_events(c->shim, c->cq, c->unacked_events);
		c->unacked_events = 0;
	}
	return 0;
}

int ptp_cq_wait(struct ptp_cq *c, ptp_progress_fn progress, ptp_timeout_fn on_timeout, void *ctx,
		const struct ptp_ops *ops, uint64_t seq, int timeout_ms, int spin_us, const char *who)
{
	long long t0 = ptp_now_us();
	long long deadline = timeout_ms < 0 ? -1 : t0 + (long long)timeout_ms * 1000;

	for (;;) {
		long long now, left = PTP_CQ_SLICE_MS * 1000;
		int r = progress(ctx), s;

		if (r)
			return r;
		s = ptp_ops_status(ops, seq);
		if (s)
			return s < 0 ? s : 0;
		now = ptp_now_us();
		if (deadline >= 0) {
			left = deadline - now;
			if (left <= 0)
				return on_timeout(ctx, seq, timeout_ms);
		}
		if (spin_us < 0 || now - t0 < spin_us)
			continue;
		r = ptp_cq_sleep(c, progress, ctx,
				 (int)((left < PTP_CQ_SLICE_MS * 1000 ? left : PTP_CQ_SLICE_MS * 1000) / 1000 + 1), who);
		if (r)
			return r;
	}
}

int ptp_cq_drain(struct ptp_cq *c, ptp_progress_fn progress, ptp_count_fn outstanding, void *ctx,
		 const struct ptp_ops *ops, int bound_ms, const char *what, const char *who)
{
	long long deadline = ptp_now_us() + (long long)bound_ms * 1000;
	uint64_t n;
	int r;

	while (c->cq && !ops->err && (n = outstanding(ctx))) {
		if (bound_ms >= 0 && ptp_now_us() > deadline)
			return emunic_err(-ETIMEDOUT, "%s: %llu %s not delivered after %d ms", who,
					  (unsigned long long)n, what, bound_ms);
		/* Polls first; sleeps on the channel only if nothing came. */
		if ((r = ptp_cq_sleep(c, progress, ctx, PTP_CQ_SLICE_MS, who)))
			return r;
	}
	return 0;
}

int ptp_call(const struct ptp_kind *k, void *ctx, const void *args, int bound_ms)
{
	long long deadline = ptp_now_us() + (long long)bound_ms * 1000;
	uint64_t seq;
	int r;

	while ((r = k->start(ctx, args, &seq)) == -ENOSPC) {
		if ((r = k->progress(ctx)))
			return r;
		if (bound_ms >= 0 && ptp_now_us() > deadline)
			return emunic_err(-ETIMEDOUT, "%s: no room to start one for %d ms", k->who, bound_ms);
	}
	return r ? r : k->wait(ctx, seq, bound_ms);
}

int ptp_req_start(const struct ptp_kind *k, void *ctx, const struct ptp_ops *ops, int *nreq, const void *args,
		  void *out)
{
	struct ptp_req *req;
	int r;

	if (!out)
		return -EINVAL;
	req = calloc(1, sizeof(*req));
	if (!req)
		return -ENOMEM;
	*req = (struct ptp_req){ .kind = k, .ctx = ctx, .ops = ops, .nreq = nreq };
	if ((r = k->start(ctx, args, &req->seq))) {
		free(req);
		return r;
	}
	if (nreq)
		++*nreq;
	/* Every pointer to a struct has the same representation (C11 6.2.5). */
	memcpy(out, &req, sizeof(req));
	return 0;
}

int ptp_req_test(struct ptp_req *req)
{
	int r;

	if (!req)
		return -EINVAL;
	r = req->kind->progress(req->ctx);
	return r ? r : ptp_ops_status(req->ops, req->seq);
}

int ptp_req_wait(struct ptp_req *req, int timeout_ms)
{
	int r;

	if (!req)
		return -EINVAL;
	r = req->kind->wait(req->ctx, req->seq, timeout_ms);
	if (req->nreq)
		--*req->nreq;
	free(req);
	return r;
}

void ptp_base_init(struct ptp_base *b, struct emunic_boot *boot, int timeout_ms, int spin_us)
{
	*b = (struct ptp_base){ .boot = boot, .rank = emunic_boot_rank(boot), .size = emunic_boot_size(boot),
				.timeout_ms = timeout_ms, .spin_us = spin_us };
}

int ptp_base_bound(const struct ptp_base *b)
{
	return b->timeout_ms ? b->timeout_ms : 30000;
}

int ptp_base_alloc(struct ptp_base *b, size_t bytes)
{
	b->mem = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
	if (!b->mem)
		return -ENOMEM;
	memset(b->mem, 0, bytes);
	b->mem_bytes = bytes;
	return 0;
}

int ptp_base_connect(struct ptp_base *b, int depth, const struct emunic_qp_opts *qo,
		     int (*post_recvs)(void *ctx, int q), void *ctx, const char *who)
{
	int bound = ptp_base_bound(b), r;

	r = ptp_cq_open(&b->q, b->dev, depth, who);
	if (r)
		return r;
	if (b->mem) {
		r = emunic_shim_reg_mr(&b->dev->shim, b->dev->pd, b->mem, b->mem_bytes, IBV_ACCESS_LOCAL_WRITE, &b->mr);
		if (r)
			return emunic_err(r, "%s: registering %zu bytes failed: %s", who, b->mem_bytes, strerror(-r));
	}
	r = emunic_mesh_open(b->dev, b->boot, qo, b->q.cq, b->q.cq, &b->mesh);
	r = r ? r : emunic_mesh_connect_all(b->mesh, bound < 0 ? 1 << 30 : bound);
	for (int q = 0; !r && q < b->size; q++)
		r = q == b->rank ? 0 : post_recvs(ctx, q);
	return r ? r : emunic_boot_barrier(b->boot);
}

void ptp_base_fini(struct ptp_base *b)
{
	emunic_mesh_close(b->mesh);
	if (b->mr)
		emunic_shim_dereg_mr(&b->dev->shim, b->mr);
	ptp_cq_close(&b->q);
	if (b->dev)
		emunic_vdev_close(b->dev);
	free(b->mem);
}
