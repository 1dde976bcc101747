/* SPDX-License-Identifier: MIT */
/*
 * Opening a device's backend: EMUNIC_BACKEND through shim/mlx5's choice
 * (auto takes mlx5 only where its capability query says the HCA can run
 * cross-channel itself, and only once the backend can drive it), the
 * backend's ops, and the capabilities, queried
 * once here so the data path never asks verbs.
 */
#include "shim/backend.h"
#include "shim/mlx5/mlx5_dev.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

_Static_assert((int)EMUNIC_SHIM_EMULATED == (int)EMUNIC_BACKEND_EMULATED &&
	       (int)EMUNIC_SHIM_MLX5 == (int)EMUNIC_BACKEND_MLX5, "one numbering of the backends");

static uint32_t query_caps(const struct emunic_shim *s, struct ibv_context *ctx,
			   const struct ibv_device_attr_ex *attr)
{
	/* iWARP (siw) has neither immediate data on RDMA write nor RNR. */
	bool iwarp = ctx->device->transport_type == IBV_TRANSPORT_IWARP;
	uint32_t caps = 0;

	if (attr->orig_attr.atomic_cap != IBV_ATOMIC_NONE)
		caps |= EMUNIC_SHIM_CAP_ATOMIC;
	if (!iwarp)
		caps |= EMUNIC_SHIM_CAP_WRITE_IMM | EMUNIC_SHIM_CAP_RNR;
	if (s->backend == EMUNIC_SHIM_MLX5 && emunic_shim_has_cd(s))
		caps |= EMUNIC_SHIM_CAP_NATIVE_CD;
	return caps;
}

int emunic_shim_open(struct emunic_shim *s, struct ibv_context *ctx, const struct ibv_device_attr_ex *attr,
		     const char *env)
{
	int b;

	memset(s, 0, sizeof(*s));
	emunic_shim_ops_init(s);
	b = emunic_mlx5_backend_choice(env, ctx, s->why, sizeof(s->why));
	if (b < 0)
		return b;
	s->backend = (enum emunic_shim_backend)b;
	if (s->backend == EMUNIC_SHIM_MLX5) {
		emunic_shim_mlx5_init(s);
		/* The HCA can, but this backend cannot yet: its cd_* entries
		 * are not built (shim/mlx5 has no post path).  Never report
		 * mlx5 while the engine would emulate everything anyway. */
		if (!emunic_shim_has_cd(s)) {
			bool forced = env && !strcmp(env, "mlx5");
			size_t n = strlen(s->why);

			snprintf(s->why + n, sizeof(s->why) - n, "; but the mlx5 backend's cross-channel entries are "
				 "not built yet%s", forced ? "" : ": emulated");
			if (forced)
				return -ENOTSUP;
			emunic_shim_ops_init(s);
			s->backend = EMUNIC_SHIM_EMULATED;
			emunic_shim_emulated_init(s);
		}
	} else {
		emunic_shim_emulated_init(s);
	}
	s->caps = query_caps(s, ctx, attr);
	return 0;
}
