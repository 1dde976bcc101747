/* SPDX-License-Identifier: MIT */
/*
 * PRM command fields: bit offsets from the first byte's most significant bit
 * inside big-endian dwords -- what rdma-core's DEVX_SET/DEVX_GET
 * (providers/mlx5/mlx5dv.h) and DPDK's MLX5_SET/MLX5_GET
 * (drivers/common/mlx5/mlx5_prm.h) compute from the mlx5_ifc structs.
 */
#include "shim/mlx5/mlx5_cd.h"

#include <endian.h>
#include <string.h>

static uint32_t field_mask(unsigned width)
{
	return width >= 32 ? 0xffffffffu : (1u << width) - 1;
}

void emunic_mlx5_prm_set(void *buf, unsigned off, unsigned width, uint32_t v)
{
	uint8_t *dw = (uint8_t *)buf + off / 32 * 4;
	unsigned shift = 32 - off % 32 - width;
	uint32_t mask = field_mask(width) << shift, x;

	memcpy(&x, dw, 4);
	x = be32toh(x);
	x = (x & ~mask) | ((v << shift) & mask);
	x = htobe32(x);
	memcpy(dw, &x, 4);
}

uint32_t emunic_mlx5_prm_get(const void *buf, unsigned off, unsigned width)
{
	const uint8_t *dw = (const uint8_t *)buf + off / 32 * 4;
	unsigned shift = 32 - off % 32 - width;
	uint32_t x;

	memcpy(&x, dw, 4);
	return (be32toh(x) >> shift) & field_mask(width);
}
