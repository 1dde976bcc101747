/* SPDX-License-Identifier: MIT */
/*
 * ibv_exp_query_device: the device's own attributes (ibv_query_device on
 * the program's context), plus IBV_EXP_DEVICE_CROSS_CHANNEL, which emunic
 * provides on any verbs device.  As verbs_exp's call did, comp_mask says on
 * the way in which experimental fields are wanted and on the way out which
 * were filled: the capability flags always; the calc capabilities as
 * libmlx5's mlx5_exp_query_device reported them on a cross-channel device
 * (ADD, BAND, BXOR, BOR on INT, UINT and FLOAT, 64-bit; it left MAXLOC out,
 * though its post path took MAXLOC on UINT, and so does wr.c); the clock
 * fields not at all.
 */
#include "shim/verbs_exp/vexp.h"

#include <string.h>

int ibv_exp_query_device(struct ibv_context *context, struct ibv_exp_device_attr *attr)
{
	struct ibv_device_attr d;
	uint32_t want;
	int r;

	if (!context || !attr)
		return vexp_fail(EINVAL, "ibv_exp_query_device: no context or attributes");
	if ((r = ibv_query_device(context, &d)))
		return vexp_fail(r, "ibv_exp_query_device: ibv_query_device");
	want = attr->comp_mask;
	memset(attr, 0, sizeof(*attr));
	memcpy(attr->fw_ver, d.fw_ver, sizeof(attr->fw_ver));
	attr->node_guid = d.node_guid;
	attr->sys_image_guid = d.sys_image_guid;
	attr->max_mr_size = d.max_mr_size;
	attr->page_size_cap = d.page_size_cap;
	attr->vendor_id = d.vendor_id;
	attr->vendor_part_id = d.vendor_part_id;
	attr->hw_ver = d.hw_ver;
	attr->max_qp = d.max_qp;
	attr->max_qp_wr = d.max_qp_wr;
	attr->max_sge = VEXP_MAX_SGE;	/* contiguous pieces, or a calc's operands (wr.c) */
	attr->max_sge_rd = 1;
	attr->max_cq = d.max_cq;
	attr->max_cqe = d.max_cqe;
	attr->max_mr = d.max_mr;
	attr->max_pd = d.max_pd;
	attr->max_qp_rd_atom = d.max_qp_rd_atom;
	attr->max_qp_init_rd_atom = d.max_qp_init_rd_atom;
	attr->max_srq = d.max_srq;
	attr->max_pkeys = d.max_pkeys;
	attr->local_ca_ack_delay = d.local_ca_ack_delay;
	attr->phys_port_cnt = d.phys_port_cnt;
	attr->exp_device_cap_flags = (uint64_t)(unsigned)d.device_cap_flags | IBV_EXP_DEVICE_CROSS_CHANNEL;
	attr->comp_mask = want & (IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS | IBV_EXP_DEVICE_ATTR_CALC_CAP);
	if (attr->comp_mask & IBV_EXP_DEVICE_ATTR_CALC_CAP) {
		attr->calc_cap.data_types = 1ull << IBV_EXP_CALC_DATA_TYPE_INT | 1ull << IBV_EXP_CALC_DATA_TYPE_UINT |
					    1ull << IBV_EXP_CALC_DATA_TYPE_FLOAT;
		attr->calc_cap.data_sizes = 1ull << IBV_EXP_CALC_DATA_SIZE_64_BIT;
		attr->calc_cap.int_ops = 1ull << IBV_EXP_CALC_OP_ADD | 1ull << IBV_EXP_CALC_OP_BAND |
					 1ull << IBV_EXP_CALC_OP_BXOR | 1ull << IBV_EXP_CALC_OP_BOR;
		attr->calc_cap.uint_ops = attr->calc_cap.int_ops;
		attr->calc_cap.fp_ops = attr->calc_cap.int_ops;
	}
	return 0;
}
