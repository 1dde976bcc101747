/* SPDX-License-Identifier: MIT */
/*
 * shim/mlx5: ConnectX cross-channel (CORE-Direct) in the hardware's own
 * encoding -- the layouts only, no device access.  Everything here writes
 * into the caller's buffer, big-endian where the PRM wants it.
 *
 * UNTESTED ON HARDWARE: no ConnectX was available; the bytes are checked
 * against the public layouts below (tests/bin/emunic-mlx5enc.c), not against
 * a device.
 *
 * Sources (public; read, not copied):
 *  [RC]   linux-rdma/rdma-core providers/mlx5/mlx5dv.h
 *         (/usr/include/infiniband/mlx5dv.h here): struct mlx5_wqe_ctrl_seg,
 *         mlx5dv_set_ctrl_seg, MLX5_WQE_CTRL_*, MLX5_SEND_WQE_BB;
 *         providers/mlx5/mlx5_ifc.h: cmd_hca_cap.cd, qpc.cd_*.
 *  [DPDK] DPDK/dpdk drivers/common/mlx5/mlx5_prm.h: MLX5_OPCODE_WAIT 0x0f,
 *         MLX5_OPCODE_SEND_EN 0x17, MLX5_OPC_MOD_WAIT_CQ_PI 0,
 *         struct mlx5_wqe_qseg (rsvd, rsvd, max_index, qpn_cqn),
 *         MLX5_COMP_MODE_OFFSET, MLX5_CQ/WQ_INDEX_WIDTH (24/16), the qpc and
 *         create_qp_in bit layouts; drivers/net/mlx5/mlx5_txpp.c and
 *         mlx5_tx.h: SEND_EN and WAIT WQEs built with ds = 2.
 *  [OFED] MLNX_OFED-era libmlx5 as kept in erpc-io/eRPC
 *         drivers/4.2/libmlx5-41mlnx1/src/{wqe.h,qp.c} and, for mlx5.h, its
 *         fork mbailleu/avocado-eRPC (same path): MLX5_OPCODE_CQE_WAIT 0x0f,
 *         _SEND_ENABLE 0x17, _RECV_ENABLE 0x16 (mlx5.h),
 *         struct mlx5_wqe_wait_en_seg (rsvd0[8], pi, obj_num) and what
 *         mlx5_post_send puts in it (CQ number + count for CQE_WAIT, QP
 *         number + producer index for SEND/RECV_ENABLE).
 *  [UCC]  openucx/ucc src/components/tl/mlx5/tl_mlx5_wqe.c: WAIT 0xF with
 *         opmod 1 (wait on data) -- the same opcode, another opmod.
 *
 * Not confirmed by a second source: RECV_ENABLE = 0x16 ([OFED] only; DPDK
 * never receives on a slave queue).
 */
#ifndef EMUNIC_SHIM_MLX5_CD_H
#define EMUNIC_SHIM_MLX5_CD_H

#include <stddef.h>
#include <stdint.h>

/* Sizes [RC] [DPDK]: 16-byte segments ("octowords"), 64-byte basic blocks. */
#define EMUNIC_MLX5_SEG_BYTES		16u
#define EMUNIC_MLX5_WQEBB_BYTES		64u
#define EMUNIC_MLX5_DS_MAX		63u	/* ds is 6 bits [DPDK] */
#define EMUNIC_MLX5_QPN_MASK		0xffffffu	/* 24-bit QP/CQ numbers */
#define EMUNIC_MLX5_WQ_INDEX_MASK	0xffffu	/* MLX5_WQ_INDEX_WIDTH 16 [DPDK] */
#define EMUNIC_MLX5_CQ_INDEX_MASK	0xffffffu	/* MLX5_CQ_INDEX_WIDTH 24 [DPDK] */

/* Opcodes (control segment byte 3). */
#define EMUNIC_MLX5_OPCODE_NOP		0x00u	/* [RC] */
#define EMUNIC_MLX5_OPCODE_SEND		0x0au	/* [RC] */
#define EMUNIC_MLX5_OPCODE_CQE_WAIT	0x0fu	/* [OFED] = MLX5_OPCODE_WAIT [DPDK] [UCC] */
#define EMUNIC_MLX5_OPCODE_RECV_ENABLE	0x16u	/* [OFED] only */
#define EMUNIC_MLX5_OPCODE_SEND_ENABLE	0x17u	/* [OFED] = MLX5_OPCODE_SEND_EN [DPDK] */
#define EMUNIC_MLX5_OPMOD_WAIT_CQ	0x00u	/* MLX5_OPC_MOD_WAIT_CQ_PI [DPDK] */

/* fm_ce_se (control segment byte 11) [RC] MLX5_WQE_CTRL_*, [DPDK] comp mode. */
#define EMUNIC_MLX5_CTRL_SOLICITED	0x02u	/* se, bit 1 */
#define EMUNIC_MLX5_CTRL_CE_SHIFT	2	/* ce, bits 3:2 (MLX5_COMP_MODE_OFFSET) */
#define EMUNIC_MLX5_CTRL_CE_ONLY_ERR	(0u << 2)
#define EMUNIC_MLX5_CTRL_CE_FIRST_ERR	(1u << 2)
#define EMUNIC_MLX5_CTRL_CQ_UPDATE	(2u << 2)	/* a CQE always */
#define EMUNIC_MLX5_CTRL_CE_CQE_EQE	(3u << 2)
#define EMUNIC_MLX5_CTRL_SMALL_FENCE	(1u << 5)	/* fm, bits 7:5 */
#define EMUNIC_MLX5_CTRL_FENCE		(4u << 5)

/* The control segment, in host order; the encoder makes it big-endian. */
struct emunic_mlx5_ctrl {
	uint32_t wqe_index;	/* the SQ producer index; bits 15:0 are kept */
	uint8_t opcode;
	uint8_t opmod;
	uint32_t qpn;		/* 24 bits: the QP whose SQ holds this WQE */
	uint8_t ds;		/* 1..63 16-byte segments, this one included */
	uint8_t signature;	/* 0 unless the QP was made with wq_signature */
	uint8_t fm_ce_se;	/* EMUNIC_MLX5_CTRL_* */
	uint32_t imm;		/* written big-endian */
};

/* Each returns the bytes written (16, or 32 for a whole WQE) or -EINVAL for a
 * field that does not fit, -ENOSPC for a short buffer. */
int emunic_mlx5_ctrl_seg(void *buf, size_t len, const struct emunic_mlx5_ctrl *c);

/* WAIT: hold this SQ until CQ `cqn` has produced `count` CQEs (the CQ's
 * 24-bit producer index).  ctrl (ds = 2) + wait segment; 32 bytes. */
int emunic_mlx5_wqe_wait(void *buf, size_t len, uint32_t wqe_index, uint32_t my_qpn,
			 uint8_t fm_ce_se, uint32_t cqn, uint32_t count);

/* SEND_EN / RECV_EN: let QP `target_qpn` (made cd_slave_send/_receive) run
 * its SQ / RQ up to, not including, WQE index `upto` (16 bits).  32 bytes. */
int emunic_mlx5_wqe_send_en(void *buf, size_t len, uint32_t wqe_index, uint32_t my_qpn,
			    uint8_t fm_ce_se, uint32_t target_qpn, uint32_t upto);
int emunic_mlx5_wqe_recv_en(void *buf, size_t len, uint32_t wqe_index, uint32_t my_qpn,
			    uint8_t fm_ce_se, uint32_t target_qpn, uint32_t upto);

/* Where WQE `pi` goes in an SQ of `wqebbs` (a power of two) basic blocks. */
void *emunic_mlx5_sq_slot(void *sq, uint32_t wqebbs, uint32_t pi);

/* Basic blocks a WQE of `ds` segments takes (ceil(ds * 16 / 64)). */
unsigned emunic_mlx5_wqebbs(unsigned ds);

/* PRM command layouts (mlx5_ifc) are bit fields counted from the first
 * byte's most significant bit, in big-endian dwords ([RC] DEVX_SET/GET,
 * [DPDK] MLX5_SET/GET).  `off` and `width` in bits, width 1..32 and the field
 * inside one dword. */
void emunic_mlx5_prm_set(void *buf, unsigned off, unsigned width, uint32_t v);
uint32_t emunic_mlx5_prm_get(const void *buf, unsigned off, unsigned width);

#endif
