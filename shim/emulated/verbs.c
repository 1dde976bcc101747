/* SPDX-License-Identifier: MIT */
/*
 * The emulated backend: generic verbs, on any device (rxe, siw, a real HCA).
 * The management-queue and trigger rules are the engine's (emunic/mq,
 * emunic/triggered), so the native cross-channel entries keep their
 * not-supported defaults.
 *
 * Each entry is a function of its own, called through the table and so
 * never inlined into the engine: an instruction count (emunic-bench instr,
 * callgrind) tells verbs' cost from the engine's by these names.  The
 * provider's answer is turned into a negative errno: rdma-core documents a
 * positive errno for a failed post and a negative value for a failed poll,
 * and providers have not all followed it.
 */
#include "shim/backend.h"

#include <errno.h>

static int neg(int r)
{
	return r > 0 ? -r : r;
}

static int emulated_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return neg(ibv_post_send(qp, wr, bad));
}

static int emulated_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return neg(ibv_post_recv(qp, wr, bad));
}

static int emulated_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int r = ibv_poll_cq(cq, n, wc);

	return r >= 0 ? r : -EIO;	/* the value of a failed poll is not an errno */
}

static int emulated_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return neg(ibv_req_notify_cq(cq, solicited_only));
}

/* The control path: libibverbs' calls, their NULL-and-errno answers as a
 * negative errno (ENOMEM where a provider left errno unset). */
static int fail(void)
{
	return errno ? -errno : -ENOMEM;
}

static int emulated_create_cq(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *ch, struct ibv_cq **out)
{
	errno = 0;
	*out = ibv_create_cq(ctx, cqe, NULL, ch, 0);
	return *out ? 0 : fail();
}

static int emulated_destroy_cq(struct ibv_cq *cq)
{
	return neg(ibv_destroy_cq(cq));
}

static int emulated_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr, struct ibv_qp **out)
{
	errno = 0;
	*out = ibv_create_qp(pd, attr);
	return *out ? 0 : fail();
}

static int emulated_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	return neg(ibv_modify_qp(qp, attr, mask));
}

static int emulated_destroy_qp(struct ibv_qp *qp)
{
	return neg(ibv_destroy_qp(qp));
}

static int emulated_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access, struct ibv_mr **out)
{
	errno = 0;
	*out = ibv_reg_mr(pd, addr, len, access);
	return *out ? 0 : fail();
}

static int emulated_dereg_mr(struct ibv_mr *mr)
{
	return neg(ibv_dereg_mr(mr));
}

static int emulated_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq)
{
	void *ctx;

	errno = 0;
	return ibv_get_cq_event(ch, cq, &ctx) ? fail() : 0;
}

static void emulated_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	ibv_ack_cq_events(cq, n);
}

static const struct emunic_shim_ops emulated_ops = {
	.post_send = emulated_post_send,
	.post_recv = emulated_post_recv,
	.poll_cq = emulated_poll_cq,
	.req_notify_cq = emulated_req_notify_cq,
	.create_cq = emulated_create_cq,
	.destroy_cq = emulated_destroy_cq,
	.create_qp = emulated_create_qp,
	.modify_qp = emulated_modify_qp,
	.destroy_qp = emulated_destroy_qp,
	.reg_mr = emulated_reg_mr,
	.dereg_mr = emulated_dereg_mr,
	.get_cq_event = emulated_get_cq_event,
	.ack_cq_events = emulated_ack_cq_events,
};

void emunic_shim_emulated_init(struct emunic_shim *s)
{
	emunic_shim_set_ops(s, &emulated_ops);
}
