/* SPDX-License-Identifier: MIT */
/*
 * Can this device run cross-channel WQEs itself?  DevX QUERY_HCA_CAP
 * (general device caps, current) and its `cd` bit.  Untested on hardware:
 * rxe stops at mlx5dv_is_supported().
 *
 * Layouts: query_hca_cap_in/_out and cmd_hca_cap in linux-rdma/rdma-core
 * providers/mlx5/mlx5_ifc.h and DPDK/dpdk drivers/common/mlx5/mlx5_prm.h
 * (both: cd sits between cq_period_start_from_cqe and the next field at bit
 * 0x22c of cmd_hca_cap, DPDK's reserved_at_22d naming the next bit); the
 * query as rdma-core's providers/mlx5/dr_devx.c sends it.
 */
#include "shim/mlx5/mlx5_dev.h"
#include "shim/mlx5/mlx5_cd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

/* Bit offsets in the mailboxes. */
#define IN_OPCODE	0x00u, 16u	/* query_hca_cap_in.opcode */
#define IN_OP_MOD	0x30u, 16u	/* query_hca_cap_in.op_mod */
#define OUT_STATUS	0x00u, 8u	/* *_out.status */
#define OUT_SYNDROME	0x20u, 32u	/* *_out.syndrome */
#define OUT_CAP		0x80u		/* query_hca_cap_out.capability */
#define CAP_CD		(OUT_CAP + 0x22cu), 1u	/* cmd_hca_cap.cd */

void emunic_mlx5_query_caps_in(void *in)
{
	memset(in, 0, EMUNIC_MLX5_QUERY_CAP_IN_BYTES);
	emunic_mlx5_prm_set(in, IN_OPCODE, EMUNIC_MLX5_CMD_QUERY_HCA_CAP);
	emunic_mlx5_prm_set(in, IN_OP_MOD, EMUNIC_MLX5_HCA_CAP_GENERAL_CUR);
}

int emunic_mlx5_caps_parse(const void *out, size_t len, const char *dev,
			   struct emunic_mlx5_caps *caps)
{
	uint32_t status;

	caps->cross_channel = false;
	if (len < EMUNIC_MLX5_QUERY_CAP_OUT_BYTES) {
		snprintf(caps->why, sizeof(caps->why), "%s: QUERY_HCA_CAP answer of %zu bytes, "
			 "want %u", dev, len, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES);
		return -EINVAL;
	}
	status = emunic_mlx5_prm_get(out, OUT_STATUS);
	if (status) {
		snprintf(caps->why, sizeof(caps->why), "%s: QUERY_HCA_CAP failed: status 0x%x, "
			 "syndrome 0x%x", dev, status, emunic_mlx5_prm_get(out, OUT_SYNDROME));
		return -EPROTO;
	}
	caps->cross_channel = emunic_mlx5_prm_get(out, CAP_CD);
	snprintf(caps->why, sizeof(caps->why), "%s: cross-channel (HCA cap cd) %s", dev,
		 caps->cross_channel ? "supported" : "bit clear");
	return 0;
}

/* DevX commands need a context opened with DevX; the caller's may not be, so
 * the query opens its own on the same device and closes it. */
static int query_devx(struct ibv_device *d, struct emunic_mlx5_caps *caps)
{
	struct mlx5dv_context_attr attr = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
	uint8_t in[EMUNIC_MLX5_QUERY_CAP_IN_BYTES], *out;
	const char *dev = ibv_get_device_name(d);
	struct ibv_context *ctx;
	int err;

	ctx = mlx5dv_open_device(d, &attr);
	if (!ctx) {
		err = errno ? errno : EOPNOTSUPP;
		snprintf(caps->why, sizeof(caps->why), "%s: DevX cannot be opened: %s", dev,
			 strerror(err));
		return 0;
	}
	out = calloc(1, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES);	/* 4 KiB: not on the stack */
	if (!out) {
		ibv_close_device(ctx);
		return -ENOMEM;
	}
	emunic_mlx5_query_caps_in(in);
	err = mlx5dv_devx_general_cmd(ctx, in, sizeof(in), out, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES);
	if (err && !emunic_mlx5_prm_get(out, OUT_STATUS))
		snprintf(caps->why, sizeof(caps->why), "%s: QUERY_HCA_CAP failed: %s", dev,
			 strerror(err < 0 ? -err : err));
	else
		emunic_mlx5_caps_parse(out, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES, dev, caps);
	free(out);
	ibv_close_device(ctx);
	return 0;
}

int emunic_mlx5_query_caps(struct ibv_context *ctx, struct emunic_mlx5_caps *caps)
{
	const char *dev;

	caps->cross_channel = false;
	if (!ctx || !ctx->device)
		return -EINVAL;
	dev = ibv_get_device_name(ctx->device);
	if (!mlx5dv_is_supported(ctx->device)) {
		snprintf(caps->why, sizeof(caps->why), "%s: not an mlx5 device", dev);
		return 0;
	}
	return query_devx(ctx->device, caps);
}
