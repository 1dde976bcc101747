/* SPDX-License-Identifier: MIT */
/*
 * The shim's one emunic device and the ibv_context its objects carry.
 *
 * A legacy program opens its own verbs device (ibv_open_device) and hands
 * that context to ibv_exp_create_cq/_qp; the work itself runs on an emunic
 * device opened here at the first object, over the launcher's bootstrap
 * (emunic-run or PMIx), as every rank creates its first CQ or QP.  The
 * objects the program gets back carry the shim's context, whose ops table
 * holds what ibv_poll_cq, ibv_post_send and ibv_post_recv (inline in
 * <infiniband/verbs.h>) call; cq.c and qp.c fill those slots.
 */
#include "shim/verbs_exp/vexp.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct vexp_state state = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct vexp_state *vexp_get(void)
{
	return &state;
}

int vexp_ours(const struct ibv_context *ctx)
{
	return ctx == &state.ctx;
}

/* verbs_exp's surface reports a positive errno and sets errno (libmlx5's
 * post path: "errno = err; *bad_wr = wr"); the line names the rank. */
int vexp_fail(int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emunic_err(-err, "verbs_exp: %s: %s", msg, strerror(err));
	errno = err;
	return err;
}

/* At exit: the ranks meet (so no rank tears its connections down under a
 * peer's last message), then the registrations go and the device closes,
 * which destroys every QP, CQ and MQ left and ends the bootstrap cleanly. */
static void vexp_close(void)
{
	int r;

	if (!state.dev)
		return;
	if ((r = emunic_dev_barrier(state.dev)))
		emunic_err(r, "verbs_exp: the ranks' last meeting failed");
	for (unsigned i = 0; i < state.nmr; i++)
		emunic_mr_dereg(state.mr[i]);
	state.nmr = 0;
	if ((r = emunic_dev_close(state.dev)))
		emunic_err(r, "verbs_exp: closing the emunic device");
	state.dev = NULL;
	emunic_boot_fini(state.boot);
	state.boot = NULL;
	while (state.qps) {
		struct vexp_qp *qp = state.qps;

		state.qps = qp->all_next;
		free(qp->early);
		free(qp);
	}
	while (state.cqs) {
		struct vexp_cq *cq = state.cqs;

		state.cqs = cq->all_next;
		free(cq);
	}
	while (state.rings) {	/* their registrations went with the device */
		struct vexp_ring *ring = state.rings;

		state.rings = ring->next;
		free(ring->slots);
		free(ring);
	}
}

int vexp_open(void)
{
	struct emunic_dev_attr a;
	int r;

	if (state.dev)
		return 0;
	if ((r = emunic_boot_init(&state.boot)))
		return vexp_fail(-r, "no bootstrap (run under emunic-run or a PMIx launcher)");
	emunic_dev_attr_init(&a);
	if ((r = emunic_dev_open(state.boot, &a, &state.dev))) {
		emunic_boot_fini(state.boot);
		state.boot = NULL;
		return vexp_fail(-r, "opening the emunic device");
	}
	atexit(vexp_close);
	return 0;
}
