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

static int no_create_cq(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *ch, struct ibv_cq **out)
{
	(void)ctx, (void)cqe, (void)ch;
	*out = NULL;
	return -EOPNOTSUPP;
}

static int no_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr, struct ibv_qp **out)
{
	(void)pd, (void)attr;
	*out = NULL;
	return -EOPNOTSUPP;
}

static int no_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	(void)qp, (void)attr, (void)mask;
	return -EOPNOTSUPP;
}

static int no_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access, struct ibv_mr **out)
{
	(void)pd, (void)addr, (void)len, (void)access;
	*out = NULL;
	return -EOPNOTSUPP;
}

/* Destroying what this backend could not have made. */
static int no_destroy(void *obj)
{
	(void)obj;
	return -EOPNOTSUPP;
}

static int no_destroy_cq(struct ibv_cq *cq) { return no_destroy(cq); }
static int no_destroy_qp(struct ibv_qp *qp) { return no_destroy(qp); }
static int no_dereg_mr(struct ibv_mr *mr) { return no_destroy(mr); }

static int no_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq)
{
	(void)ch;
	*cq = NULL;
	return -EOPNOTSUPP;
}

static void no_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	(void)cq, (void)n;
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
	.create_cq = no_create_cq,
	.destroy_cq = no_destroy_cq,
	.create_qp = no_create_qp,
	.modify_qp = no_modify_qp,
	.destroy_qp = no_destroy_qp,
	.reg_mr = no_reg_mr,
	.dereg_mr = no_dereg_mr,
	.get_cq_event = no_get_cq_event,
	.ack_cq_events = no_ack_cq_events,
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
	SET(create_cq);
	SET(destroy_cq);
	SET(create_qp);
	SET(modify_qp);
	SET(destroy_qp);
	SET(reg_mr);
	SET(dereg_mr);
	SET(get_cq_event);
	SET(ack_cq_events);
	SET(cd_wait);
	SET(cd_send_en);
	SET(cd_recv_en);
}

bool emunic_shim_has_cd(const struct emunic_shim *s)
{
	return s->ops.cd_wait != no_cd_wait && s->ops.cd_send_en != no_cd_enable &&
	       s->ops.cd_recv_en != no_cd_enable;
}

/* The capability bits, in the order of their values: a short name, the
 * thing in words, and why a device that lacks it does. */
static const struct {
	uint32_t bit;
	const char *name, *what, *lacking;
} caps_table[] = {
	{ EMUNIC_SHIM_CAP_ATOMIC, "atomic", "atomics",
	  "no atomics: the device reports atomic_cap ATOMIC_NONE (siw implements none)" },
	{ EMUNIC_SHIM_CAP_WRITE_IMM, "write-imm", "immediate data",
	  "no immediate data: iWARP's RDMAP carries none, so the device takes no RDMA WRITE or SEND with immediate" },
	{ EMUNIC_SHIM_CAP_RNR, "rnr", "RNR",
	  "no RNR on iWARP: a send that finds no receive posted ends the connection instead of being retried" },
	{ EMUNIC_SHIM_CAP_NATIVE_CD, "native-cd", "native cross-channel",
	  "no native cross-channel: the engine emulates WAIT, SEND_EN and RECV_EN" },
};
#define NCAPS (sizeof(caps_table) / sizeof(caps_table[0]))

const char *emunic_shim_lacks(uint32_t caps, uint32_t what)
{
	if (!(what & ~caps))
		return NULL;	/* the usual answer, at post time: no walk */
	for (unsigned i = 0; i < NCAPS; i++)
		if ((what & caps_table[i].bit) && !(caps & caps_table[i].bit))
			return caps_table[i].lacking;
	return NULL;
}

const char *emunic_shim_cap_what(uint32_t cap)
{
	for (unsigned i = 0; i < NCAPS; i++)
		if (cap == caps_table[i].bit)
			return caps_table[i].what;
	return NULL;
}

const char *emunic_shim_caps_str(uint32_t caps, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < NCAPS && off < len; i++)
		if (caps & caps_table[i].bit)
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? " " : "", caps_table[i].name);
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
