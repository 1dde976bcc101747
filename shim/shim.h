/* SPDX-License-Identifier: MIT */
/*
 * shim/: the one way the emulated NIC, its engines, the host-progressed
 * baselines and the tools reach a verbs device's data path and its objects
 * (CQs, QPs, memory regions, completion events).  A device is
 * opened with a backend (EMUNIC_BACKEND=auto|emulated|mlx5) whose ops table
 * is filled the way rdma-core's providers fill theirs (verbs_set_ops(): a
 * backend sets the entries it has, every other entry keeps a default that
 * returns -EOPNOTSUPP), and whose capabilities are queried once, at open,
 * so nobody asks verbs again on the data path.
 *
 * Backends:
 *  - emulated (shim/emulated/): generic verbs on any device (rxe, siw, a
 *    real HCA); WAIT / SEND_EN / RECV_EN and the trigger rules are the
 *    engine's, so the native cross-channel entries stay unsupported;
 *  - mlx5 (shim/mlx5/backend.c): the same generic verbs data path plus the
 *    DevX cross-channel capability; chosen only where that capability says
 *    the hardware can.  UNTESTED ON HARDWARE.
 *
 * Every op returns 0 (poll_cq: the completions it returned) or a negative
 * errno, whatever the provider underneath returns.
 */
#ifndef EMUNIC_SHIM_H
#define EMUNIC_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct emunic_shim_ops {
	/* The data path (ibv_post_send, ibv_post_recv, ibv_poll_cq). */
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	/*
	 * The control path: the CQs, QPs and memory regions the data path
	 * uses, and the completion events the progress core sleeps on.  A
	 * backend that builds its own queues (mlx5's cd QPs) takes them here.
	 */
	int (*create_cq)(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *ch, struct ibv_cq **out);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr, struct ibv_qp **out);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access, struct ibv_mr **out);
	int (*dereg_mr)(struct ibv_mr *mr);
	/* A backend sets both or neither: an event taken is acknowledged
	 * through the same backend (ibv_destroy_cq waits for it). */
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned n);
	/*
	 * Native cross-channel (CORE-Direct done by the HCA): a WAIT on `cq`
	 * reaching `count` completions, and SEND_EN / RECV_EN releasing
	 * `target`'s queue up to `upto`, each posted on the master QP `qp`.
	 * Unsupported (the default) means the engine emulates them, as it
	 * does on every device today.
	 */
	int (*cd_wait)(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t count, bool signaled);
	int (*cd_send_en)(struct ibv_qp *qp, struct ibv_qp *target, uint32_t upto, bool signaled);
	int (*cd_recv_en)(struct ibv_qp *qp, struct ibv_qp *target, uint32_t upto, bool signaled);
};

/* Capabilities, from ibv_query_device_ex and the transport, read at open. */
#define EMUNIC_SHIM_CAP_ATOMIC		(1u << 0)	/* fetch-and-add / compare-and-swap */
#define EMUNIC_SHIM_CAP_WRITE_IMM	(1u << 1)	/* RDMA write with immediate (not iWARP) */
#define EMUNIC_SHIM_CAP_RNR		(1u << 2)	/* RNR NAK and its retries (not iWARP) */
#define EMUNIC_SHIM_CAP_NATIVE_CD	(1u << 3)	/* the cd_* ops run on the HCA */

enum emunic_shim_backend {
	EMUNIC_SHIM_EMULATED = 0,	/* same values as shim/mlx5's EMUNIC_BACKEND_* */
	EMUNIC_SHIM_MLX5 = 1,
};

/* One opened device's backend: embedded in the verbs device (emunic/verbs.h). */
struct emunic_shim {
	struct emunic_shim_ops ops;	/* a copy: one load from the device, no pointer chase */
	uint32_t caps;			/* EMUNIC_SHIM_CAP_* */
	enum emunic_shim_backend backend;
	char why[320];			/* why this backend (EMUNIC_BACKEND and the query) */
};

/*
 * Chooses the backend for ctx from `env` (EMUNIC_BACKEND's value; NULL or
 * empty: auto), fills s->ops and s->caps (attr: ctx's ibv_query_device_ex
 * answer).  -ENOTSUP: mlx5 forced on a device that cannot (s->why names the
 * device and the reason); -EINVAL: a malformed value.
 */
int emunic_shim_open(struct emunic_shim *s, struct ibv_context *ctx, const struct ibv_device_attr_ex *attr,
		     const char *env);

/* Copies every entry `ops` sets into s->ops (the rest stay as they were). */
void emunic_shim_set_ops(struct emunic_shim *s, const struct emunic_shim_ops *ops);
/* Every entry the not-supported default (-EOPNOTSUPP). */
void emunic_shim_ops_init(struct emunic_shim *s);
/* The cross-channel entries are a backend's own, not the defaults. */
bool emunic_shim_has_cd(const struct emunic_shim *s);
/* "atomic write-imm rnr" (or "none") into buf. */
const char *emunic_shim_caps_str(uint32_t caps, char *buf, size_t len);
/* Of the capabilities `what`, the first that caps lacks, as a reason to
 * print ("no atomics: ..."), or NULL: emunic_dev_lacks(). */
const char *emunic_shim_lacks(uint32_t caps, uint32_t what);
/* A capability bit in words ("atomics", "immediate data"), or NULL. */
const char *emunic_shim_cap_what(uint32_t cap);
const char *emunic_shim_backend_str(enum emunic_shim_backend b);

/* ---- the calls: one indirect call through the table, nothing else ------------ */

static inline int emunic_shim_post_send(const struct emunic_shim *s, struct ibv_qp *qp, struct ibv_send_wr *wr,
					struct ibv_send_wr **bad)
{
	return s->ops.post_send(qp, wr, bad);
}

static inline int emunic_shim_post_recv(const struct emunic_shim *s, struct ibv_qp *qp, struct ibv_recv_wr *wr,
					struct ibv_recv_wr **bad)
{
	return s->ops.post_recv(qp, wr, bad);
}

static inline int emunic_shim_poll_cq(const struct emunic_shim *s, struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return s->ops.poll_cq(cq, n, wc);
}

static inline int emunic_shim_req_notify_cq(const struct emunic_shim *s, struct ibv_cq *cq, int solicited_only)
{
	return s->ops.req_notify_cq(cq, solicited_only);
}

/* The control path's calls: 0 or a negative errno (the object in *out). */
static inline int emunic_shim_create_cq(const struct emunic_shim *s, struct ibv_context *ctx, int cqe,
					struct ibv_comp_channel *ch, struct ibv_cq **out)
{
	return s->ops.create_cq(ctx, cqe, ch, out);
}

static inline int emunic_shim_destroy_cq(const struct emunic_shim *s, struct ibv_cq *cq)
{
	return s->ops.destroy_cq(cq);
}

static inline int emunic_shim_create_qp(const struct emunic_shim *s, struct ibv_pd *pd,
					struct ibv_qp_init_attr *attr, struct ibv_qp **out)
{
	return s->ops.create_qp(pd, attr, out);
}

static inline int emunic_shim_modify_qp(const struct emunic_shim *s, struct ibv_qp *qp, struct ibv_qp_attr *attr,
					int mask)
{
	return s->ops.modify_qp(qp, attr, mask);
}

static inline int emunic_shim_destroy_qp(const struct emunic_shim *s, struct ibv_qp *qp)
{
	return s->ops.destroy_qp(qp);
}

static inline int emunic_shim_reg_mr(const struct emunic_shim *s, struct ibv_pd *pd, void *addr, size_t len,
				     int access, struct ibv_mr **out)
{
	return s->ops.reg_mr(pd, addr, len, access, out);
}

static inline int emunic_shim_dereg_mr(const struct emunic_shim *s, struct ibv_mr *mr)
{
	return s->ops.dereg_mr(mr);
}

/* 0 and the CQ that raised it, or a negative errno: -EAGAIN where a
 * non-blocking channel has none (callers stop at any error). */
static inline int emunic_shim_get_cq_event(const struct emunic_shim *s, struct ibv_comp_channel *ch,
					   struct ibv_cq **cq)
{
	return s->ops.get_cq_event(ch, cq);
}

static inline void emunic_shim_ack_cq_events(const struct emunic_shim *s, struct ibv_cq *cq, unsigned n)
{
	s->ops.ack_cq_events(cq, n);
}

#endif
