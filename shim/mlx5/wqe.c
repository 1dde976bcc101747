/* SPDX-License-Identifier: MIT */
/*
 * The cross-channel WQEs in ConnectX's encoding (sources: mlx5_cd.h).  Pure:
 * bytes into the caller's buffer.  Untested on hardware.
 */
#include "shim/mlx5/mlx5_cd.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

/* The wait/enable segment [OFED] mlx5_wqe_wait_en_seg = [DPDK] mlx5_wqe_qseg:
 * bytes 0-7 reserved, 8-11 index (BE32), 12-15 CQ or QP number (BE32). */
#define WAIT_EN_DS 2u		/* ctrl + one wait/enable segment [DPDK] */

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

/* [RC] mlx5_wqe_ctrl_seg / mlx5dv_set_ctrl_seg: bytes 0-3 opmod(8) |
 * wqe_index(16) | opcode(8); 4-7 qpn(24) | ds(8); 8 signature; 9-10
 * dci_stream_channel_id (0 here: RC, not DCI); 11 fm_ce_se; 12-15 imm. */
int emunic_mlx5_ctrl_seg(void *buf, size_t len, const struct emunic_mlx5_ctrl *c)
{
	uint8_t *p = buf;

	if (len < EMUNIC_MLX5_SEG_BYTES)
		return -ENOSPC;
	if (c->qpn > EMUNIC_MLX5_QPN_MASK || c->ds == 0 || c->ds > EMUNIC_MLX5_DS_MAX)
		return -EINVAL;
	put32(p, (uint32_t)c->opmod << 24 | (c->wqe_index & EMUNIC_MLX5_WQ_INDEX_MASK) << 8 | c->opcode);
	put32(p + 4, c->qpn << 8 | c->ds);
	p[8] = c->signature;
	p[9] = 0;
	p[10] = 0;
	p[11] = c->fm_ce_se;
	put32(p + 12, c->imm);
	return (int)EMUNIC_MLX5_SEG_BYTES;
}

static int wait_en(void *buf, size_t len, uint8_t opcode, uint32_t wqe_index, uint32_t my_qpn,
		   uint8_t fm_ce_se, uint32_t obj, uint32_t index)
{
	struct emunic_mlx5_ctrl c = {
		.wqe_index = wqe_index, .opcode = opcode, .opmod = EMUNIC_MLX5_OPMOD_WAIT_CQ,
		.qpn = my_qpn, .ds = WAIT_EN_DS, .fm_ce_se = fm_ce_se,
	};
	uint8_t *p = buf;
	int n;

	if (len < WAIT_EN_DS * EMUNIC_MLX5_SEG_BYTES)
		return -ENOSPC;
	if (obj > EMUNIC_MLX5_QPN_MASK)
		return -EINVAL;
	n = emunic_mlx5_ctrl_seg(p, len, &c);
	if (n < 0)
		return n;
	memset(p + 16, 0, 8);
	put32(p + 24, index);
	put32(p + 28, obj);
	return (int)(WAIT_EN_DS * EMUNIC_MLX5_SEG_BYTES);
}

/* WAIT's index is a CQ producer index: 24 bits, wrapping ([DPDK] masks it
 * with MLX5_CQ_INDEX_WIDTH; [OFED] passes the count as the index). */
int emunic_mlx5_wqe_wait(void *buf, size_t len, uint32_t wqe_index, uint32_t my_qpn,
			 uint8_t fm_ce_se, uint32_t cqn, uint32_t count)
{
	return wait_en(buf, len, EMUNIC_MLX5_OPCODE_CQE_WAIT, wqe_index, my_qpn, fm_ce_se, cqn,
		       count & EMUNIC_MLX5_CQ_INDEX_MASK);
}

/* An enable's index is a WQ index: 16 bits, wrapping ([DPDK] masks it with
 * MLX5_WQ_INDEX_WIDTH).  [OFED] enables the WQEs before it: it refuses an
 * index past the slave's head, so the index itself is not yet enabled. */
int emunic_mlx5_wqe_send_en(void *buf, size_t len, uint32_t wqe_index, uint32_t my_qpn,
			    uint8_t fm_ce_se, uint32_t target_qpn, uint32_t upto)
{
	return wait_en(buf, len, EMUNIC_MLX5_OPCODE_SEND_ENABLE, wqe_index, my_qpn, fm_ce_se,
		       target_qpn, upto & EMUNIC_MLX5_WQ_INDEX_MASK);
}

int emunic_mlx5_wqe_recv_en(void *buf, size_t len, uint32_t wqe_index, uint32_t my_qpn,
			    uint8_t fm_ce_se, uint32_t target_qpn, uint32_t upto)
{
	return wait_en(buf, len, EMUNIC_MLX5_OPCODE_RECV_ENABLE, wqe_index, my_qpn, fm_ce_se,
		       target_qpn, upto & EMUNIC_MLX5_WQ_INDEX_MASK);
}

void *emunic_mlx5_sq_slot(void *sq, uint32_t wqebbs, uint32_t pi)
{
	return (uint8_t *)sq + (size_t)(pi & (wqebbs - 1)) * EMUNIC_MLX5_WQEBB_BYTES;
}

unsigned emunic_mlx5_wqebbs(unsigned ds)
{
	return (ds * EMUNIC_MLX5_SEG_BYTES + EMUNIC_MLX5_WQEBB_BYTES - 1) / EMUNIC_MLX5_WQEBB_BYTES;
}
