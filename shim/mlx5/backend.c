/* SPDX-License-Identifier: MIT */
/*
 * The mlx5 backend's ops.  UNTESTED ON HARDWARE.  Ordinary work requests go
 * through libmlx5's own verbs (the generic entries, registered first, as an
 * rdma-core provider layers its ops over the defaults).  The native
 * cross-channel entries (cd_wait, cd_send_en, cd_recv_en) would post
 * wqe.c's WQEs on a cd master QP (qp.c); what that still needs -- the WQ
 * and doorbell umems, the UAR, CQs that ignore overrun, the QP state
 * commands and the doorbell write -- is not built, so they stay the
 * not-supported defaults and the engine emulates WAIT / SEND_EN / RECV_EN
 * on this backend too.  The table below is where they go.
 */
#include "shim/backend.h"

static const struct emunic_shim_ops mlx5_ops = {
	.cd_wait = NULL,	/* not yet: see above */
};

void emunic_shim_mlx5_init(struct emunic_shim *s)
{
	emunic_shim_emulated_init(s);
	emunic_shim_set_ops(s, &mlx5_ops);
}
