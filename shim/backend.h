/* SPDX-License-Identifier: MIT */
/*
 * Inside shim/: how open.c registers a backend.  Each one calls
 * emunic_shim_set_ops() with its own table over the defaults; a backend may
 * layer over another (mlx5 over the generic verbs entries), as an rdma-core
 * provider's ops go over libibverbs' dummy ones.
 */
#ifndef EMUNIC_SHIM_BACKEND_H
#define EMUNIC_SHIM_BACKEND_H

#include "shim/shim.h"

void emunic_shim_emulated_init(struct emunic_shim *s);	/* shim/emulated/verbs.c */
void emunic_shim_mlx5_init(struct emunic_shim *s);	/* shim/mlx5/backend.c */

#endif
