/* SPDX-License-Identifier: MIT */
/*
 * shim/verbs_exp internals: the verbs_exp objects and the emunic objects
 * behind them.  Files, lowest first: dev.c (the emunic device, opened at the
 * first object, and the shim's ibv_context), mr.c (registrations emunic
 * needs for the program's buffers), wr.c (one work request -> one emunic
 * task, with libmlx5's checks and counters), post.c (ibv_exp_post_send,
 * ibv_exp_post_task, ibv_post_recv), cq.c, qp.c, query.c, compat.c (the
 * libibverbs calls verbs_exp.h renames for the shim's objects).
 */
#ifndef SHIM_VERBS_EXP_VEXP_H
#define SHIM_VERBS_EXP_VEXP_H

#include "infiniband/verbs_exp.h"

#include <emunic.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define vexp_container_of(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

struct vexp_qp;

struct vexp_cq {
	struct ibv_cq ibv;		/* what the program holds */
	struct emunic_cq *cq;
	uint32_t create_flags;		/* IBV_EXP_CQ_CREATE_* */
	uint32_t cap_flags;		/* IBV_EXP_CQ_IGNORE_OVERRUN */
	struct vexp_qp *mq_qps;		/* QPs whose MQ completes here (send_cq) */
	unsigned users;			/* QPs using it as send or receive CQ */
	struct vexp_cq *all_next;	/* on vexp_state.cqs */
};

/*
 * One work queue's libmlx5 counters (struct mlx5_wq head, struct
 * mlx5_wq_recv_send_enable head_en_index/head_en_count): head counts work
 * requests posted; an enable targets en_index + count (or head for count 0)
 * and WAIT_EN_LAST moves en_index by the largest count since the last move.
 * released is how far emunic has been told to release (emunic's enables
 * are incremental: "the next n").
 */
struct vexp_wq {
	uint64_t head, en_index, en_count, released;
};

/* Where a QP's calc sends put their 16-byte results (wr.c): one slot per
 * send the emunic QP holds at once, indexed by the QP's send count, so no
 * slot is written under a send in flight.  Registered with emunic; kept
 * until exit (state.rings) so the engine never reads a freed one. */
struct vexp_ring {
	unsigned char *slots;
	struct emunic_mr *mr;
	uint32_t cap;
	struct vexp_ring *next;		/* on vexp_state.rings */
};

/* Gather entries a shim QP takes (a calc's operands, or contiguous pieces
 * of one buffer). */
#define VEXP_MAX_SGE 16

struct vexp_qp {
	struct ibv_qp ibv;
	uint32_t create_flags;		/* IBV_EXP_QP_CREATE_* */
	int sq_sig_all;
	unsigned depth;
	unsigned max_send_sge, max_recv_sge;
	struct vexp_ring *ring;		/* calc results, made at the first calc */
	struct emunic_task *early;	/* receives posted in INIT, posted to emunic at RTR */
	unsigned nearly;
	struct vexp_cq *scq, *rcq;
	struct emunic_qp *qp;		/* once connected */
	struct emunic_mq *mq;		/* runs the control WRs posted to this QP */
	struct vexp_wq sq, rq;		/* committed */
	struct vexp_wq sq_tmp, rq_tmp;	/* while a post is checked */
	unsigned epoch;			/* the post that last copied sq/rq into *_tmp */
	struct vexp_qp *next_mq;	/* on scq->mq_qps */
	struct vexp_qp *all_next;	/* on vexp_state.qps */
};

static inline struct vexp_cq *to_vcq(struct ibv_cq *cq)
{
	return vexp_container_of(cq, struct vexp_cq, ibv);
}

static inline struct vexp_qp *to_vqp(struct ibv_qp *qp)
{
	return vexp_container_of(qp, struct vexp_qp, ibv);
}

/* dev.c.  The program's buffers, registered with emunic's device as sends
 * name them (its own ibv_reg_mr keys belong to another protection domain):
 * kept until exit, page-rounded, at most VEXP_MRS of them. */
#define VEXP_MRS 64
struct vexp_state {
	struct emunic_mr *mr[VEXP_MRS];
	uintptr_t mr_lo[VEXP_MRS], mr_hi[VEXP_MRS];
	unsigned nmr;
	pthread_mutex_t lock;		/* posts (as libmlx5's task_mutex), creates */
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct ibv_context ctx;		/* every shim object's context */
	unsigned epoch;
	struct vexp_qp *qps;		/* freed at exit if the program did not */
	struct vexp_cq *cqs;
	struct vexp_ring *rings;	/* every calc result ring, freed at exit */
};
struct vexp_state *vexp_get(void);
/* Opens emunic's device on first use (collective, as emunic_dev_open is):
 * 0 or a positive errno. */
int vexp_open(void);
/* Is this one of the shim's objects? */
int vexp_ours(const struct ibv_context *ctx);
int vexp_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* mr.c: an emunic registration covering [addr, addr + len) */
int vexp_mr_find(void *addr, uint32_t len, struct emunic_mr **out);

/* wr.c: one post's checking state (the caller holds state.lock) */
struct vexp_post {
	unsigned epoch;
	struct vexp_qp **touched;
	unsigned ntouched, cap;
};
/* A receive posted in INIT (vexp_recv_wr_task leaves its task's qp NULL):
 * kept aside and, once the post succeeded, added to the QP's early ones. */
struct vexp_early {
	struct vexp_qp *qp;
	struct emunic_task t;
};
struct vexp_wq *vexp_wq_tmp(struct vexp_post *p, struct vexp_qp *qp, int recv);
int vexp_send_wr_task(struct vexp_post *p, struct vexp_qp *qp, const struct ibv_exp_send_wr *wr,
		      struct emunic_task *t);
int vexp_recv_wr_task(struct vexp_post *p, struct vexp_qp *qp, const struct ibv_recv_wr *wr,
		      struct emunic_task *t);

/* post.c: the receives posted in INIT, to emunic as one unit once the QP
 * has its emunic QP (state.lock held; a full ring waited out, bounded): 0,
 * or an errno with nothing posted and the receives still the QP's. */
int vexp_post_early(struct vexp_qp *qp);
/* How many receives a QP takes in INIT: its depth, at most the ring's. */
static inline unsigned vexp_early_max(const struct vexp_qp *qp)
{
	unsigned ring = emunic_dev_ring_entries(vexp_get()->dev);

	return qp->depth < ring ? qp->depth : ring;
}

/* qp.c: ibv_modify_qp on a shim QP */
int vexp_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);

/* post.c */
int vexp_post_send_legacy(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int vexp_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

#endif /* SHIM_VERBS_EXP_VEXP_H */
