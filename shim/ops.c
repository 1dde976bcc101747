/* SPDX-License-Identifier: MIT */
/*
 * The ops table's defaults and how a backend fills it, after rdma-core's
 * libibverbs (dummy_ops.c: an entry for every op that returns EOPNOTSUPP;
 * verbs_set_ops(): a provider's set entries replace them, the others stay).
 * A caller never finds a NULL entry, so the data path needs no check.
 */
#include "shim/shim.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int no_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)qp;
	*bad = wr;		/* as a provider reports a work request it refused */
	return -EOPNOTSUPP;
}

static int no_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	*bad = wr;
	return -EOPNOTSUPP;
}

static int no_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)cq, (void)n, (void)wc;
	return -EOPNOTSUPP;
}

static int no_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq, (void)solicited_only;
	return -EOPNOTSUPP;
}

static int no_cd_wait(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t count, bool signaled)
{
	(void)qp, (void)cq, (void)count, (void)signaled;
	return -EOPNOTSUPP;
}

static int no_cd_enable(struct ibv_qp *qp, struct ibv_qp *target, uint32_t upto, bool signaled)
{
	(void)qp, (void)target, (void)upto, (void)signaled;
	return -EOPNOTSUPP;
}

static const struct emunic_shim_ops unsupported = {
	.post_send = no_post_send,
	.post_recv = no_post_recv,
	.poll_cq = no_poll_cq,
	.req_notify_cq = no_req_notify_cq,
	.cd_wait = no_cd_wait,
	.cd_send_en = no_cd_enable,
	.cd_recv_en = no_cd_enable,
};

void emunic_shim_ops_init(struct emunic_shim *s)
{
	s->ops = unsupported;
}

#define SET(name)                                       \
	do {                                            \
		if (ops->name)                          \
			s->ops.name = ops->name;        \
	} while (0)

void emunic_shim_set_ops(struct emunic_shim *s, const struct emunic_shim_ops *ops)
{
	SET(post_send);
	SET(post_recv);
	SET(poll_cq);
	SET(req_notify_cq);
	SET(cd_wait);
	SET(cd_send_en);
	SET(cd_recv_en);
}

bool emunic_shim_has_cd(const struct emunic_shim *s)
{
	return s->ops.cd_wait != no_cd_wait && s->ops.cd_send_en != no_cd_enable &&
	       s->ops.cd_recv_en != no_cd_enable;
}

const char *emunic_shim_caps_str(uint32_t caps, char *buf, size_t len)
{
	static const char *const names[] = { "atomic", "write-imm", "rnr", "native-cd" };
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]) && off < len; i++)
		if (caps & (1u << i))
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? " " : "", names[i]);
	if (!off)
		snprintf(buf, len, "none");
	return buf;
}

const char *emunic_shim_backend_str(enum emunic_shim_backend b)
{
	switch (b) {
	case EMUNIC_SHIM_EMULATED: return "emulated";
	case EMUNIC_SHIM_MLX5: return "mlx5";
	}
	return "?";
}
