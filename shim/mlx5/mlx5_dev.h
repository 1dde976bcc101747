/* SPDX-License-Identifier: MIT */
/*
 * shim/mlx5 towards a device: the cross-channel capability (DevX
 * QUERY_HCA_CAP), the EMUNIC_BACKEND choice, and the cd master/slave QPs
 * (DevX CREATE_QP).  What issue 20's device interface will call; nothing in
 * the engine calls it yet.
 *
 * UNTESTED ON HARDWARE: on rxe (all this machine has) the capability query
 * stops at mlx5dv_is_supported(), so the DevX commands never ran here; their
 * input layouts are checked byte by byte (tests/bin/emunic-mlx5enc.c).
 * Layout sources: mlx5_cd.h.
 */
#ifndef EMUNIC_SHIM_MLX5_DEV_H
#define EMUNIC_SHIM_MLX5_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ibv_context;
struct mlx5dv_devx_obj;

/* ---- the capability (caps.c) ---------------------------------------------- */

/* QUERY_HCA_CAP, general device caps, current values: the input mailbox is
 * 16 bytes, the output 16 bytes of header and 4096 of capability. */
#define EMUNIC_MLX5_CMD_QUERY_HCA_CAP	0x100u	/* [RC] [DPDK] */
#define EMUNIC_MLX5_HCA_CAP_GENERAL_CUR	0x0001u	/* op_mod: GENERAL_DEVICE (0 << 1) | GET_CUR (1) */
#define EMUNIC_MLX5_QUERY_CAP_IN_BYTES	16u
#define EMUNIC_MLX5_QUERY_CAP_OUT_BYTES	(16u + 4096u)

struct emunic_mlx5_caps {
	bool cross_channel;	/* cmd_hca_cap.cd */
	char why[160];		/* the reason, either way, naming the device */
};

/* Fill a QUERY_HCA_CAP input mailbox (pure). */
void emunic_mlx5_query_caps_in(void *in);

/* Read the answer (pure): -EPROTO for a nonzero command status (named in
 * caps->why), -EINVAL for a short buffer, else 0 with cross_channel set. */
int emunic_mlx5_caps_parse(const void *out, size_t len, const char *dev,
			   struct emunic_mlx5_caps *caps);

/* Ask the device.  0 with cross_channel false and the reason when the device
 * is not mlx5, DevX cannot be opened on it, the command fails, or the cd bit
 * is clear; 0 with cross_channel true when the bit is set. */
int emunic_mlx5_query_caps(struct ibv_context *ctx, struct emunic_mlx5_caps *caps);

/* ---- EMUNIC_BACKEND (choice.c) ------------------------------------------- */

enum emunic_backend {
	EMUNIC_BACKEND_EMULATED = 0,	/* the progress core's management queues */
	EMUNIC_BACKEND_MLX5 = 1,	/* the HCA's own cross-channel WQEs */
};

/* EMUNIC_BACKEND=auto|emulated|mlx5 (unset or empty: auto) against a known
 * capability (pure).  Returns the backend, with the reason in why; or
 * -ENOTSUP (mlx5 forced, the device cannot) or -EINVAL (a malformed value),
 * the error in why.  caps may be NULL when env is "emulated". */
int emunic_mlx5_backend_pick(const char *env, const char *dev,
			     const struct emunic_mlx5_caps *caps, char *why, size_t len);

/* The same, asking ctx's device (only when env is not "emulated"). */
int emunic_mlx5_backend_choice(const char *env, struct ibv_context *ctx, char *why, size_t len);

const char *emunic_backend_str(int backend);

/* ---- cd master / slave QPs (qp.c) ----------------------------------------- */

#define EMUNIC_MLX5_CMD_CREATE_QP	0x500u	/* [RC] [DPDK] */
#define EMUNIC_MLX5_CREATE_QP_IN_BYTES	272u	/* create_qp_in up to its PAS list */
#define EMUNIC_MLX5_CREATE_QP_OUT_BYTES	16u

/* Cross-channel roles, qpc bits [RC] [DPDK] mlx5_ifc qpc. */
#define EMUNIC_MLX5_CD_MASTER		0x1u	/* may post WAIT / SEND_EN / RECV_EN */
#define EMUNIC_MLX5_CD_SLAVE_SEND	0x2u	/* its SQ runs only as far as enabled */
#define EMUNIC_MLX5_CD_SLAVE_RECV	0x4u	/* its RQ likewise */

/* An RC QP whose queue and doorbell record live in DevX umems the caller
 * registered (mlx5dv_devx_umem_reg), its CQs and PD known by number
 * (mlx5dv_init_obj), its doorbell page a DevX UAR (mlx5dv_devx_alloc_uar). */
struct emunic_mlx5_qp_attr {
	uint32_t pdn;
	uint32_t cqn_snd, cqn_rcv;
	uint32_t uar_page;
	uint32_t log_sq_wqebbs;		/* 0 with no_sq: no send queue */
	uint32_t log_rq_wqes;		/* 0 with no RQ: zero-length RQ */
	uint32_t log_rq_stride;		/* log2 bytes of an RQ WQE, >= 4 */
	bool no_sq, no_rq;
	uint32_t log_page_size;		/* log2 bytes of the umem's pages, >= 12 */
	uint32_t wq_umem_id;
	uint64_t wq_umem_offset;
	uint32_t dbr_umem_id;
	uint64_t dbr_offset;		/* the doorbell record's offset in its umem */
	uint32_t cd;			/* EMUNIC_MLX5_CD_* */
};

/* Fill a CREATE_QP input mailbox (pure): -EINVAL for a value the layout
 * cannot hold. */
int emunic_mlx5_create_qp_in(void *in, size_t len, const struct emunic_mlx5_qp_attr *a);

/* Create it (DevX); the QP starts in RESET.  *qpn is its number.  Returns
 * 0, or the negative errno with the command's status and syndrome in why. */
int emunic_mlx5_qp_create(struct ibv_context *devx_ctx, const struct emunic_mlx5_qp_attr *a,
			  struct mlx5dv_devx_obj **qp, uint32_t *qpn, char *why, size_t len);
int emunic_mlx5_qp_destroy(struct mlx5dv_devx_obj *qp);

#endif
