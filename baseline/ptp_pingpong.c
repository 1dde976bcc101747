/* SPDX-License-Identifier: MIT */
/*
 * The host-progressed point-to-point messages of the ping-pong baseline (see
 * ptp.h): plain RDMA SEND/RECV over the same static full mesh of RC QPs as
 * the ptp barrier (emunic_vdev_open, emunic_mesh_open, _connect_all), into
 * and out of two buffers registered once.  Nothing moves unless the
 * application posts or polls: this is what an MPI library without an
 * offload does for a message that fits its pre-registered buffers.
 *
 * Tickets: sends (and receives) complete in the order posted, on every QP
 * alike since one CQ takes them all, so the n-th send is done once n sends
 * have completed.  A ticket is that n, with the top bit saying receive.
 */
#include "baseline/ptp.h"
#include "emunic/base/log.h"
#include "emunic/verbs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PP_RECV_BIT (1ull << 63)
#define PP_DEPTH 64		/* sends (and receives) in flight; the mesh's queues hold 256 */
#define PP_POLL_BATCH 16
#define PP_PEER_BITS 24
#define PP_PEER_MASK ((1ull << PP_PEER_BITS) - 1)

struct emunic_ptp_pp {
	struct emunic_boot *boot;
	int rank, size;
	size_t max_len;
	struct emunic_vdev *dev;
	struct ibv_cq *cq;		/* sends and receives of every QP */
	struct emunic_mesh *mesh;
	char *sbuf, *rbuf;
	struct ibv_mr *smr, *rmr;
	uint32_t max_inline;
	uint64_t sends, recvs;		/* posted so far */
	uint64_t sent, received;	/* completed so far */
	size_t last_len;		/* bytes of the last receive */
	int err;			/* first failure: every later test returns it */
};

void *emunic_ptp_pp_sendbuf(struct emunic_ptp_pp *pp)
{
	return pp ? pp->sbuf : NULL;
}

void *emunic_ptp_pp_recvbuf(struct emunic_ptp_pp *pp)
{
	return pp ? pp->rbuf : NULL;
}

size_t emunic_ptp_pp_last_len(const struct emunic_ptp_pp *pp)
{
	return pp ? pp->last_len : 0;
}

static int pp_peer_ok(const struct emunic_ptp_pp *pp, int peer)
{
	return peer >= 0 && peer < pp->size && peer != pp->rank;
}

int emunic_ptp_pp_isend(struct emunic_ptp_pp *pp, int peer, size_t len, uint64_t *ticket)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	int r;

	if (!pp || !ticket || !pp_peer_ok(pp, peer) || len > pp->max_len)
		return -EINVAL;
	if (pp->err)
		return pp->err;
	if (pp->sends - pp->sent >= PP_DEPTH)
		return -ENOSPC;
	sge = (struct ibv_sge){ .addr = (uintptr_t)pp->sbuf, .length = (uint32_t)len, .lkey = pp->smr->lkey };
	wr.wr_id = (pp->sends + 1) << PP_PEER_BITS | (uint64_t)peer;
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	/* What a host library does for a small message: the CPU copies it
	 * into the work request, the HCA reads no memory for it. */
	if (len <= pp->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	r = emunic_shim_post_send(&pp->dev->shim, pp->mesh->conn[peer].qp, &wr, &bad);
	if (r)
		return emunic_err(r, "ptp pingpong: posting a send of %zu bytes to peer %d failed: %s", len, peer,
				  strerror(-r));
	*ticket = ++pp->sends;
	return 0;
}

int emunic_ptp_pp_irecv(struct emunic_ptp_pp *pp, int peer, uint64_t *ticket)
{
	struct ibv_sge sge;
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	int r;

	if (!pp || !ticket || !pp_peer_ok(pp, peer))
		return -EINVAL;
	if (pp->err)
		return pp->err;
	if (pp->recvs - pp->received >= PP_DEPTH)
		return -ENOSPC;
	sge = (struct ibv_sge){ .addr = (uintptr_t)pp->rbuf, .length = (uint32_t)pp->max_len, .lkey = pp->rmr->lkey };
	wr.wr_id = (pp->recvs + 1) << PP_PEER_BITS | (uint64_t)peer;
	r = emunic_shim_post_recv(&pp->dev->shim, pp->mesh->conn[peer].qp, &wr, &bad);
	if (r)
		return emunic_err(r, "ptp pingpong: posting a receive from peer %d failed: %s", peer, strerror(-r));
	*ticket = ++pp->recvs | PP_RECV_BIT;
	return 0;
}

static void pp_on_wc(struct emunic_ptp_pp *pp, const struct ibv_wc *wc)
{
	bool recv = wc->opcode & IBV_WC_RECV;

	if (wc->status != IBV_WC_SUCCESS) {
		emunic_err(-EIO, "ptp pingpong: %s peer %d (qp %u) failed: %s", recv ? "a receive from" : "a send to",
			   (int)(wc->wr_id & PP_PEER_MASK), wc->qp_num, ibv_wc_status_str(wc->status));
		if (!pp->err)
			pp->err = -EIO;
	}
	if (recv) {
		pp->received++;
		pp->last_len = wc->byte_len;
	} else {
		pp->sent++;
	}
}

int emunic_ptp_pp_test(struct emunic_ptp_pp *pp, uint64_t ticket)
{
	struct ibv_wc wc[PP_POLL_BATCH];
	int n;

	if (!pp || !(ticket & ~PP_RECV_BIT))
		return -EINVAL;
	/* One poll a call: the application is the only progress there is. */
	n = emunic_shim_poll_cq(&pp->dev->shim, pp->cq, PP_POLL_BATCH, wc);
	if (n < 0)
		return emunic_err(n, "ptp pingpong: polling the CQ failed: %s", strerror(-n));
	for (int i = 0; i < n; i++)
		pp_on_wc(pp, &wc[i]);
	if (pp->err)
		return pp->err;
	if (ticket & PP_RECV_BIT)
		return pp->received >= (ticket & ~PP_RECV_BIT);
	return pp->sent >= ticket;
}

static void pp_free(struct emunic_ptp_pp *pp)
{
	emunic_mesh_close(pp->mesh);
	if (pp->smr)
		emunic_shim_dereg_mr(&pp->dev->shim, pp->smr);
	if (pp->rmr)
		emunic_shim_dereg_mr(&pp->dev->shim, pp->rmr);
	if (pp->cq)
		emunic_shim_destroy_cq(&pp->dev->shim, pp->cq);
	if (pp->dev)
		emunic_vdev_close(pp->dev);
	free(pp->sbuf);
	free(pp->rbuf);
	free(pp);
}

static int pp_open(struct emunic_ptp_pp *pp, int timeout_ms)
{
	size_t alloc = (pp->max_len + 4095) & ~(size_t)4095;
	int depth = 2 * PP_DEPTH * (pp->size - 1) + 64, r;
	struct emunic_qp_opts o;

	pp->sbuf = aligned_alloc(4096, alloc ? alloc : 4096);
	pp->rbuf = aligned_alloc(4096, alloc ? alloc : 4096);
	if (!pp->sbuf || !pp->rbuf)
		return -ENOMEM;
	memset(pp->sbuf, 0, alloc);
	memset(pp->rbuf, 0, alloc);
	r = emunic_vdev_open(NULL, &pp->dev);
	if (r)
		return r;
	r = emunic_shim_create_cq(&pp->dev->shim, pp->dev->ctx, depth, NULL, &pp->cq);
	if (r)
		return emunic_err(r, "ptp pingpong: creating a CQ of %d entries failed: %s", depth, strerror(-r));
	r = emunic_shim_reg_mr(&pp->dev->shim, pp->dev->pd, pp->sbuf, alloc ? alloc : 4096, IBV_ACCESS_LOCAL_WRITE,
			       &pp->smr);
	r = r ? r : emunic_shim_reg_mr(&pp->dev->shim, pp->dev->pd, pp->rbuf, alloc ? alloc : 4096,
				       IBV_ACCESS_LOCAL_WRITE, &pp->rmr);
	if (r)
		return emunic_err(r, "ptp pingpong: registering 2 x %zu bytes failed: %s", alloc, strerror(-r));
	emunic_qp_opts_default(&o);
	pp->max_inline = o.max_inline;
	r = emunic_mesh_open(pp->dev, pp->boot, &o, pp->cq, pp->cq, &pp->mesh);
	return r ? r : emunic_mesh_connect_all(pp->mesh, timeout_ms < 0 ? 1 << 30 : timeout_ms ? timeout_ms : 30000);
}

int emunic_ptp_pp_create(struct emunic_boot *boot, size_t max_len, int timeout_ms, struct emunic_ptp_pp **out)
{
	struct emunic_ptp_pp *pp;
	int r;

	if (!boot || !out || max_len > UINT32_MAX)
		return -EINVAL;
	pp = calloc(1, sizeof(*pp));
	if (!pp)
		return -ENOMEM;
	pp->boot = boot;
	pp->rank = emunic_boot_rank(boot);
	pp->size = emunic_boot_size(boot);
	pp->max_len = max_len;
	r = pp->size > 1 ? pp_open(pp, timeout_ms) : 0;
	if (r) {
		pp_free(pp);
		return r;
	}
	*out = pp;
	return 0;
}

int emunic_ptp_pp_destroy(struct emunic_ptp_pp *pp)
{
	if (!pp)
		return -EINVAL;
	if (pp->sends != pp->sent)
		return emunic_err(-EBUSY, "ptp pingpong: destroy with %llu send(s) not complete",
				  (unsigned long long)(pp->sends - pp->sent));
	/* Receives still posted are flushed with the QPs: nothing reads them. */
	pp_free(pp);
	return 0;
}
