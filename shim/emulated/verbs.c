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

static const struct emunic_shim_ops emulated_ops = {
	.post_send = emulated_post_send,
	.post_recv = emulated_post_recv,
	.poll_cq = emulated_poll_cq,
	.req_notify_cq = emulated_req_notify_cq,
};

void emunic_shim_emulated_init(struct emunic_shim *s)
{
	emunic_shim_set_ops(s, &emulated_ops);
}
