/* SPDX-License-Identifier: MIT */
/*
 * infiniband/verbs_exp.h — the subset of MLNX_OFED's experimental verbs that
 * CORE-Direct (cross-channel) programs used, with the same names, values and
 * meanings, carried out by emunic's management queues.  Build a legacy
 * program with -Ishim/verbs_exp and link it with libemunic.
 *
 * Declared from the public verbs_exp.h of MLNX_OFED 4.x (libibverbs-41mlnx1,
 * as kept in erpc-io/eRPC drivers/4.2/ and microsoft/Freeflow
 * libraries/libibverbs-1.2.1mlnx1): the enum values are that header's, so a
 * program that stored them keeps its meaning.  Only the fields CORE-Direct
 * code read or wrote are here (no UMR, DC, TSO, masked atomics); the
 * structs are not ABI-compatible with MLNX_OFED's and need not be: a port
 * recompiles.
 *
 * What differs from MLNX_OFED (README, "Porting verbs_exp (CORE-Direct)
 * code to emunic"): QPs connect as before, ibv_modify_qp to INIT, RTR with
 * the peer's QP number (a shim QP number carries its rank), RTS; both ranks
 * move their QPs to each other to RTR in the same order (emunic pairs them
 * in that order).  ibv_poll_cq, ibv_post_send,
 * ibv_post_recv, ibv_destroy_qp and ibv_destroy_cq work on the shim's
 * objects as they did (the two destroys, and ibv_modify_qp, through the
 * renames at the end of this header, in the files that include it);
 * ibv_req_notify_cq is EOPNOTSUPP (no completion channels).
 */
#ifndef INFINIBAND_VERBS_EXP_H
#define INFINIBAND_VERBS_EXP_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Experimental flags start at bit 32, enums at 0x40 (as in verbs_exp.h). */
#define IBV_EXP_START_ENUM	0x40
#define IBV_EXP_START_FLAG	(1ULL << 32)

/* ---- device ---------------------------------------------------------------- */

/* exp_device_cap_flags: a 64-bit flag (IBV_EXP_START_FLAG << 28), so a
 * macro (an enum constant is an int in C11). */
#define IBV_EXP_DEVICE_CROSS_CHANNEL (IBV_EXP_START_FLAG << 28)

enum ibv_exp_device_attr_comp_mask {
	IBV_EXP_DEVICE_ATTR_CALC_CAP		= 1 << 0,
	IBV_EXP_DEVICE_ATTR_WITH_TIMESTAMP_MASK	= 1 << 1,
	IBV_EXP_DEVICE_ATTR_WITH_HCA_CORE_CLOCK	= 1 << 2,
	IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS	= 1 << 3,
};

struct ibv_exp_device_calc_cap {
	uint64_t data_types;
	uint64_t data_sizes;
	uint64_t int_ops;
	uint64_t uint_ops;
	uint64_t fp_ops;
};

/* The standard attributes (ibv_device_attr's, in its order), then the
 * experimental ones CORE-Direct code asked for.  comp_mask: in, the fields
 * wanted; out, the fields filled. */
struct ibv_exp_device_attr {
	char fw_ver[64];
	uint64_t node_guid, sys_image_guid, max_mr_size, page_size_cap;
	uint32_t vendor_id, vendor_part_id, hw_ver;
	int max_qp, max_qp_wr, reserved, max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd;
	int max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom;
	int exp_atomic_cap;
	int max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp;
	int max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah;
	int max_fmr, max_map_per_fmr, max_srq, max_srq_wr, max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay, phys_port_cnt;
	uint32_t comp_mask;
	struct ibv_exp_device_calc_cap calc_cap;
	uint64_t timestamp_mask;
	uint64_t hca_core_clock;
	uint64_t exp_device_cap_flags;	/* IBV_EXP_DEVICE_* */
};

/* ---- calc (fields of a send with IBV_EXP_SEND_WITH_CALC) ------------------- */

enum ibv_exp_calc_op {
	IBV_EXP_CALC_OP_ADD = 0,
	IBV_EXP_CALC_OP_MAXLOC,
	IBV_EXP_CALC_OP_BAND,
	IBV_EXP_CALC_OP_BXOR,
	IBV_EXP_CALC_OP_BOR,
	IBV_EXP_CALC_OP_NUMBER
};

enum ibv_exp_calc_data_type {
	IBV_EXP_CALC_DATA_TYPE_INT = 0,
	IBV_EXP_CALC_DATA_TYPE_UINT,
	IBV_EXP_CALC_DATA_TYPE_FLOAT,
	IBV_EXP_CALC_DATA_TYPE_NUMBER
};

enum ibv_exp_calc_data_size {
	IBV_EXP_CALC_DATA_SIZE_64_BIT = 0,
	IBV_EXP_CALC_DATA_SIZE_NUMBER
};

/* ---- work requests ----------------------------------------------------------- */

enum ibv_exp_wr_opcode {
	IBV_EXP_WR_RDMA_WRITE		= IBV_WR_RDMA_WRITE,
	IBV_EXP_WR_RDMA_WRITE_WITH_IMM	= IBV_WR_RDMA_WRITE_WITH_IMM,
	IBV_EXP_WR_SEND			= IBV_WR_SEND,
	IBV_EXP_WR_SEND_WITH_IMM	= IBV_WR_SEND_WITH_IMM,
	IBV_EXP_WR_RDMA_READ		= IBV_WR_RDMA_READ,
	IBV_EXP_WR_ATOMIC_CMP_AND_SWP	= IBV_WR_ATOMIC_CMP_AND_SWP,
	IBV_EXP_WR_ATOMIC_FETCH_AND_ADD	= IBV_WR_ATOMIC_FETCH_AND_ADD,
	IBV_EXP_WR_SEND_ENABLE		= 0x20 + IBV_EXP_START_ENUM,
	IBV_EXP_WR_RECV_ENABLE,
	IBV_EXP_WR_CQE_WAIT,
	IBV_EXP_WR_NOP			= IBV_EXP_WR_CQE_WAIT + 3,
};

/* 64-bit flags: macros over the verbs ones (exp_send_flags is uint64_t). */
#define IBV_EXP_SEND_FENCE		((uint64_t)IBV_SEND_FENCE)
#define IBV_EXP_SEND_SIGNALED		((uint64_t)IBV_SEND_SIGNALED)
#define IBV_EXP_SEND_SOLICITED		((uint64_t)IBV_SEND_SOLICITED)
#define IBV_EXP_SEND_INLINE		((uint64_t)IBV_SEND_INLINE)
#define IBV_EXP_SEND_IP_CSUM		(IBV_EXP_START_FLAG << 0)
#define IBV_EXP_SEND_WITH_CALC		(IBV_EXP_START_FLAG << 1)
#define IBV_EXP_SEND_WAIT_EN_LAST	(IBV_EXP_START_FLAG << 2)

struct ibv_exp_send_wr {
	uint64_t wr_id;
	struct ibv_exp_send_wr *next;
	struct ibv_sge *sg_list;
	int num_sge;
	enum ibv_exp_wr_opcode exp_opcode;
	int reserved;
	union {
		uint32_t imm_data;	/* network byte order */
		uint32_t invalidate_rkey;
	} ex;
	union {
		struct { uint64_t remote_addr; uint32_t rkey; } rdma;
		struct { uint64_t remote_addr; uint64_t compare_add; uint64_t swap; uint32_t rkey; } atomic;
	} wr;
	/* The cross-channel operands: CQE_WAIT's CQ and count, SEND_ENABLE's
	 * and RECV_ENABLE's QP and count (0: everything posted so far). */
	union {
		struct { uint64_t remote_addr; uint32_t rkey; } rdma;
		struct { uint64_t remote_addr; uint64_t compare_add; uint64_t swap; uint32_t rkey; } atomic;
		struct { struct ibv_cq *cq; int32_t cq_count; } cqe_wait;
		struct { struct ibv_qp *qp; int32_t wqe_count; } wqe_enable;
	} task;
	union {
		struct {
			enum ibv_exp_calc_op calc_op;
			enum ibv_exp_calc_data_type data_type;
			enum ibv_exp_calc_data_size data_size;
		} calc;
	} op;
	uint64_t exp_send_flags;	/* IBV_EXP_SEND_* */
	uint32_t comp_mask;		/* must be 0 */
};

/* ---- CQs ------------------------------------------------------------------- */

enum ibv_exp_cq_create_flags {
	IBV_EXP_CQ_CREATE_CROSS_CHANNEL	= 1 << 0,
	IBV_EXP_CQ_TIMESTAMP		= 1 << 1,
};

enum ibv_exp_cq_init_attr_mask {
	IBV_EXP_CQ_INIT_ATTR_FLAGS	= 1 << 0,
};

struct ibv_exp_cq_init_attr {
	uint32_t comp_mask;		/* IBV_EXP_CQ_INIT_ATTR_* */
	uint32_t flags;			/* IBV_EXP_CQ_CREATE_* */
	void *res_domain;		/* unused */
	void *peer_direct_attrs;	/* unused */
};

enum ibv_exp_cq_attr_mask {
	IBV_EXP_CQ_MODERATION	= 1 << 0,
	IBV_EXP_CQ_CAP_FLAGS	= 1 << 1,
};

enum ibv_exp_cq_cap_flags {
	IBV_EXP_CQ_IGNORE_OVERRUN	= 1 << 0,
};

enum ibv_exp_cq_attr_comp_mask {
	IBV_EXP_CQ_ATTR_MODERATION	= 1 << 0,
	IBV_EXP_CQ_ATTR_CQ_CAP_FLAGS	= 1 << 1,
};

struct ibv_exp_cq_attr {
	uint32_t comp_mask;		/* IBV_EXP_CQ_ATTR_* */
	struct { uint16_t cq_count; uint16_t cq_period; } moderation;
	uint32_t cq_cap_flags;		/* IBV_EXP_CQ_IGNORE_OVERRUN */
};

/* ---- QPs ------------------------------------------------------------------- */

enum ibv_exp_qp_init_attr_comp_mask {
	IBV_EXP_QP_INIT_ATTR_PD			= 1 << 0,
	IBV_EXP_QP_INIT_ATTR_XRCD		= 1 << 1,
	IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS	= 1 << 2,
};

enum ibv_exp_qp_create_flags {
	IBV_EXP_QP_CREATE_CROSS_CHANNEL		= 1 << 2,
	IBV_EXP_QP_CREATE_MANAGED_SEND		= 1 << 3,
	IBV_EXP_QP_CREATE_MANAGED_RECV		= 1 << 4,
	IBV_EXP_QP_CREATE_IGNORE_SQ_OVERFLOW	= 1 << 6,
	IBV_EXP_QP_CREATE_IGNORE_RQ_OVERFLOW	= 1 << 7,
};

struct ibv_exp_qp_init_attr {
	void *qp_context;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;		/* must be NULL */
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;	/* IBV_QPT_RC */
	int sq_sig_all;
	uint32_t comp_mask;		/* IBV_EXP_QP_INIT_ATTR_* */
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;
	uint32_t exp_create_flags;	/* IBV_EXP_QP_CREATE_* */
	uint32_t max_inl_recv;
};

/* ---- task lists -------------------------------------------------------------- */

enum ibv_exp_task_type {
	IBV_EXP_TASK_SEND = 0,
	IBV_EXP_TASK_RECV = 1
};

struct ibv_exp_task {
	enum ibv_exp_task_type task_type;
	struct {
		struct ibv_qp *qp;
		union {
			struct ibv_exp_send_wr *send_wr;
			struct ibv_recv_wr *recv_wr;
		};
	} item;
	struct ibv_exp_task *next;
	uint32_t comp_mask;		/* must be 0 */
};

/* ---- calls: verbs_exp's conventions (0 or a positive errno; NULL + errno) -- */

int ibv_exp_query_device(struct ibv_context *context, struct ibv_exp_device_attr *attr);
struct ibv_cq *ibv_exp_create_cq(struct ibv_context *context, int cqe, void *cq_context,
				 struct ibv_comp_channel *channel, int comp_vector,
				 struct ibv_exp_cq_init_attr *attr);
int ibv_exp_modify_cq(struct ibv_cq *cq, struct ibv_exp_cq_attr *attr, int attr_mask);
struct ibv_qp *ibv_exp_create_qp(struct ibv_context *context, struct ibv_exp_qp_init_attr *attr);
int ibv_exp_post_send(struct ibv_qp *qp, struct ibv_exp_send_wr *wr, struct ibv_exp_send_wr **bad_wr);
int ibv_exp_post_task(struct ibv_context *context, struct ibv_exp_task *task,
		      struct ibv_exp_task **bad_task);

/* ---- emunic's additions: what a port changes ----------------------------------- */

/* Optional: connects qp to rank peer (emunic-run's or PMIx's ranks) in
 * one call, as ibv_modify_qp to INIT, RTR and RTS does with the peer's QP
 * number, without the exchange of QP numbers.  With no numbers to go by,
 * QPs connected this way pair by order: both ranks connect their QPs to
 * each other in the same order, and both this way (ibv_modify_qp pairs by
 * the numbers).  A cross-channel QP used only as a management QP needs no
 * connection. */
int emunic_exp_connect(struct ibv_qp *qp, int peer);
/* What ibv_destroy_qp / ibv_destroy_cq do on the shim's objects (at exit
 * the shim destroys what is left and closes its emunic device). */
int emunic_exp_destroy_qp(struct ibv_qp *qp);
int emunic_exp_destroy_cq(struct ibv_cq *cq);

/* libibverbs dispatches these to the provider that opened the context,
 * which the shim's objects do not have: the program's calls come here
 * (shim/verbs_exp/compat.c), which take the shim's objects and pass the
 * program's own verbs objects on to libibverbs. */
int emunic_exp_ibv_destroy_qp(struct ibv_qp *qp);
int emunic_exp_ibv_destroy_cq(struct ibv_cq *cq);
int emunic_exp_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
#ifndef EMUNIC_VEXP_NO_RENAME
#define ibv_destroy_qp emunic_exp_ibv_destroy_qp
#define ibv_destroy_cq emunic_exp_ibv_destroy_cq
#define ibv_modify_qp emunic_exp_ibv_modify_qp
#endif

#ifdef __cplusplus
}
#endif

#endif /* INFINIBAND_VERBS_EXP_H */
