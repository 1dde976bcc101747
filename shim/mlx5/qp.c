/* SPDX-License-Identifier: MIT */
/*
 * The cd master / slave QPs through DevX CREATE_QP.  UNTESTED ON HARDWARE:
 * compiled and linked, never run (rxe has no DevX); only the input mailbox
 * is checked, byte by byte, by tests/bin/emunic-mlx5enc.c.
 *
 * Layout: create_qp_in and qpc in DPDK/dpdk drivers/common/mlx5/mlx5_prm.h
 * (offsets confirmed by its reserved_at_* names) and linux-rdma/rdma-core
 * providers/mlx5/mlx5_ifc.h (the same cd_slave_receive, cd_slave_send,
 * cd_master order); which fields an RC QP on umems needs as DPDK's
 * drivers/common/mlx5/mlx5_devx_cmds.c mlx5_devx_cmd_create_qp sets them.
 *
 * Not here (what a working master/slave pair still needs): registering the
 * WQ and doorbell umems, the UAR, CQs made to ignore overrun for WAIT (the
 * kernel's cross-channel patch does this for its CQs), the RST2INIT /
 * INIT2RTR / RTR2RTS commands with the address path, and the post path
 * (doorbell record, UAR/BlueFlame write) that would carry wqe.c's WQEs.
 */
#include "shim/mlx5/mlx5_dev.h"
#include "shim/mlx5/mlx5_cd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/mlx5dv.h>

#define QPC			0xc0u	/* create_qp_in.qpc */
#define IN_OPCODE		0x000u, 16u
#define QPC_ST			(QPC + 0x008u), 8u
#define QPC_PM_STATE		(QPC + 0x013u), 2u
#define QPC_PD			(QPC + 0x028u), 24u
#define QPC_LOG_RQ_SIZE		(QPC + 0x049u), 4u
#define QPC_LOG_RQ_STRIDE	(QPC + 0x04du), 3u
#define QPC_NO_SQ		(QPC + 0x050u), 1u
#define QPC_LOG_SQ_SIZE		(QPC + 0x051u), 4u
#define QPC_UAR_PAGE		(QPC + 0x068u), 24u
#define QPC_LOG_PAGE_SIZE	(QPC + 0x0a3u), 5u
#define QPC_CQN_SND		(QPC + 0x3e8u), 24u
#define QPC_CD_SLAVE_RECV	(QPC + 0x49du), 1u
#define QPC_CD_SLAVE_SEND	(QPC + 0x49eu), 1u
#define QPC_CD_MASTER		(QPC + 0x49fu), 1u
#define QPC_CQN_RCV		(QPC + 0x4e8u), 24u
#define QPC_DBR_ADDR_HI		(QPC + 0x500u), 32u
#define QPC_DBR_ADDR_LO		(QPC + 0x520u), 32u
#define QPC_RQ_TYPE		(QPC + 0x565u), 3u
#define QPC_DBR_UMEM_VALID	(QPC + 0x683u), 1u
#define QPC_DBR_UMEM_ID		(QPC + 0x720u), 32u
#define IN_WQ_UMEM_OFF_HI	0x800u, 32u
#define IN_WQ_UMEM_OFF_LO	0x820u, 32u
#define IN_WQ_UMEM_ID		0x840u, 32u
#define IN_WQ_UMEM_VALID	0x860u, 1u
#define OUT_STATUS		0x00u, 8u
#define OUT_SYNDROME		0x20u, 32u
#define OUT_QPN			0x48u, 24u

#define ST_RC			0x0u	/* MLX5_QP_ST_RC */
#define PM_MIGRATED		0x3u	/* MLX5_QP_PM_MIGRATED */
#define RQ_NON_ZERO		0x0u	/* MLX5_NON_ZERO_RQ */
#define RQ_ZERO_LEN		0x3u	/* MLX5_ZERO_LEN_RQ */
#define ADAPTER_PAGE_SHIFT	12u	/* MLX5_ADAPTER_PAGE_SHIFT */
#define RQ_STRIDE_SHIFT		4u	/* MLX5_LOG_RQ_STRIDE_SHIFT */

static bool fits(const struct emunic_mlx5_qp_attr *a)
{
	return a->pdn <= EMUNIC_MLX5_QPN_MASK && a->cqn_snd <= EMUNIC_MLX5_QPN_MASK &&
	       a->cqn_rcv <= EMUNIC_MLX5_QPN_MASK && a->uar_page <= EMUNIC_MLX5_QPN_MASK &&
	       a->log_sq_wqebbs <= 15 && a->log_rq_wqes <= 15 &&
	       (a->no_rq || (a->log_rq_stride >= RQ_STRIDE_SHIFT && a->log_rq_stride <= RQ_STRIDE_SHIFT + 7)) &&
	       a->log_page_size >= ADAPTER_PAGE_SHIFT && a->log_page_size <= ADAPTER_PAGE_SHIFT + 31 &&
	       !(a->cd & ~(uint32_t)(EMUNIC_MLX5_CD_MASTER | EMUNIC_MLX5_CD_SLAVE_SEND |
				     EMUNIC_MLX5_CD_SLAVE_RECV));
}

int emunic_mlx5_create_qp_in(void *in, size_t len, const struct emunic_mlx5_qp_attr *a)
{
	if (len < EMUNIC_MLX5_CREATE_QP_IN_BYTES)
		return -ENOSPC;
	if (!fits(a))
		return -EINVAL;
	memset(in, 0, EMUNIC_MLX5_CREATE_QP_IN_BYTES);
	emunic_mlx5_prm_set(in, IN_OPCODE, EMUNIC_MLX5_CMD_CREATE_QP);
	emunic_mlx5_prm_set(in, QPC_ST, ST_RC);
	emunic_mlx5_prm_set(in, QPC_PM_STATE, PM_MIGRATED);
	emunic_mlx5_prm_set(in, QPC_PD, a->pdn);
	emunic_mlx5_prm_set(in, QPC_UAR_PAGE, a->uar_page);
	emunic_mlx5_prm_set(in, QPC_LOG_PAGE_SIZE, a->log_page_size - ADAPTER_PAGE_SHIFT);
	if (a->no_sq) {
		emunic_mlx5_prm_set(in, QPC_NO_SQ, 1);
	} else {
		emunic_mlx5_prm_set(in, QPC_CQN_SND, a->cqn_snd);
		emunic_mlx5_prm_set(in, QPC_LOG_SQ_SIZE, a->log_sq_wqebbs);
	}
	if (a->no_rq) {
		emunic_mlx5_prm_set(in, QPC_RQ_TYPE, RQ_ZERO_LEN);
	} else {
		emunic_mlx5_prm_set(in, QPC_CQN_RCV, a->cqn_rcv);
		emunic_mlx5_prm_set(in, QPC_LOG_RQ_SIZE, a->log_rq_wqes);
		emunic_mlx5_prm_set(in, QPC_LOG_RQ_STRIDE, a->log_rq_stride - RQ_STRIDE_SHIFT);
		emunic_mlx5_prm_set(in, QPC_RQ_TYPE, RQ_NON_ZERO);
	}
	emunic_mlx5_prm_set(in, QPC_CD_MASTER, !!(a->cd & EMUNIC_MLX5_CD_MASTER));
	emunic_mlx5_prm_set(in, QPC_CD_SLAVE_SEND, !!(a->cd & EMUNIC_MLX5_CD_SLAVE_SEND));
	emunic_mlx5_prm_set(in, QPC_CD_SLAVE_RECV, !!(a->cd & EMUNIC_MLX5_CD_SLAVE_RECV));
	/* With dbr_umem_valid, dbr_addr is the record's offset in that umem. */
	emunic_mlx5_prm_set(in, QPC_DBR_UMEM_VALID, 1);
	emunic_mlx5_prm_set(in, QPC_DBR_UMEM_ID, a->dbr_umem_id);
	emunic_mlx5_prm_set(in, QPC_DBR_ADDR_HI, (uint32_t)(a->dbr_offset >> 32));
	emunic_mlx5_prm_set(in, QPC_DBR_ADDR_LO, (uint32_t)a->dbr_offset);
	emunic_mlx5_prm_set(in, IN_WQ_UMEM_OFF_HI, (uint32_t)(a->wq_umem_offset >> 32));
	emunic_mlx5_prm_set(in, IN_WQ_UMEM_OFF_LO, (uint32_t)a->wq_umem_offset);
	emunic_mlx5_prm_set(in, IN_WQ_UMEM_ID, a->wq_umem_id);
	emunic_mlx5_prm_set(in, IN_WQ_UMEM_VALID, 1);
	return (int)EMUNIC_MLX5_CREATE_QP_IN_BYTES;
}

int emunic_mlx5_qp_create(struct ibv_context *devx_ctx, const struct emunic_mlx5_qp_attr *a,
			  struct mlx5dv_devx_obj **qp, uint32_t *qpn, char *why, size_t len)
{
	uint8_t in[EMUNIC_MLX5_CREATE_QP_IN_BYTES], out[EMUNIC_MLX5_CREATE_QP_OUT_BYTES] = { 0 };
	int ret = emunic_mlx5_create_qp_in(in, sizeof(in), a);

	*qp = NULL;
	if (ret < 0) {
		snprintf(why, len, "CREATE_QP: an attribute does not fit the qpc layout");
		return ret;
	}
	*qp = mlx5dv_devx_obj_create(devx_ctx, in, sizeof(in), out, sizeof(out));
	if (!*qp) {
		ret = errno ? -errno : -EIO;
		snprintf(why, len, "CREATE_QP (DevX): %s, status 0x%x, syndrome 0x%x", strerror(-ret),
			 emunic_mlx5_prm_get(out, OUT_STATUS), emunic_mlx5_prm_get(out, OUT_SYNDROME));
		return ret;
	}
	*qpn = emunic_mlx5_prm_get(out, OUT_QPN);
	return 0;
}

int emunic_mlx5_qp_destroy(struct mlx5dv_devx_obj *qp)
{
	int ret = qp ? mlx5dv_devx_obj_destroy(qp) : 0;

	return ret > 0 ? -ret : ret;
}
