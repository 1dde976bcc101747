/* SPDX-License-Identifier: MIT */
/* Names of the public enums, one table each, for messages and traces. */
#include <emunic.h>

#include <infiniband/verbs.h>

#define NAME_OF(table, v) \
	((v) >= 0 && (size_t)(v) < sizeof(table) / sizeof((table)[0]) && (table)[v] ? (table)[v] : "UNKNOWN")

/* The engine passes verbs' statuses through as emunic's: the same numbers. */
_Static_assert((int)EMUNIC_WC_SUCCESS == (int)IBV_WC_SUCCESS &&
	       (int)EMUNIC_WC_LOC_LEN_ERR == (int)IBV_WC_LOC_LEN_ERR &&
	       (int)EMUNIC_WC_LOC_QP_OP_ERR == (int)IBV_WC_LOC_QP_OP_ERR &&
	       (int)EMUNIC_WC_LOC_PROT_ERR == (int)IBV_WC_LOC_PROT_ERR &&
	       (int)EMUNIC_WC_WR_FLUSH_ERR == (int)IBV_WC_WR_FLUSH_ERR &&
	       (int)EMUNIC_WC_REM_ACCESS_ERR == (int)IBV_WC_REM_ACCESS_ERR &&
	       (int)EMUNIC_WC_REM_OP_ERR == (int)IBV_WC_REM_OP_ERR &&
	       (int)EMUNIC_WC_RETRY_EXC_ERR == (int)IBV_WC_RETRY_EXC_ERR &&
	       (int)EMUNIC_WC_RNR_RETRY_EXC_ERR == (int)IBV_WC_RNR_RETRY_EXC_ERR &&
	       (int)EMUNIC_WC_GENERAL_ERR == (int)IBV_WC_GENERAL_ERR,
	       "emunic_wc_status numbers verbs' statuses as libibverbs does");

const char *emunic_wc_status_str(int status)
{
	switch (status) {
	case EMUNIC_WC_CANCELED: return "canceled (device closed)";
	case EMUNIC_WC_TIMEOUT: return "timed out";
	default: return ibv_wc_status_str((enum ibv_wc_status)status);
	}
}

const char *emunic_task_op_str(int op)
{
	static const char *const names[] = {
		[EMUNIC_TASK_SEND] = "SEND", [EMUNIC_TASK_RECV] = "RECV", [EMUNIC_TASK_WRITE] = "WRITE",
		[EMUNIC_TASK_WRITE_IMM] = "WRITE_IMM", [EMUNIC_TASK_READ] = "READ",
		[EMUNIC_TASK_FETCH_ADD] = "FETCH_ADD", [EMUNIC_TASK_WAIT] = "WAIT",
		[EMUNIC_TASK_SEND_EN] = "SEND_EN", [EMUNIC_TASK_RECV_EN] = "RECV_EN",
		[EMUNIC_TASK_CALC] = "CALC",
	};

	return NAME_OF(names, op);
}

const char *emunic_calc_op_str(int op)
{
	static const char *const names[] = {
		[EMUNIC_CALC_SUM] = "SUM", [EMUNIC_CALC_PROD] = "PROD", [EMUNIC_CALC_MIN] = "MIN",
		[EMUNIC_CALC_MAX] = "MAX", [EMUNIC_CALC_LAND] = "LAND", [EMUNIC_CALC_LOR] = "LOR",
		[EMUNIC_CALC_LXOR] = "LXOR", [EMUNIC_CALC_BAND] = "BAND", [EMUNIC_CALC_BOR] = "BOR",
		[EMUNIC_CALC_BXOR] = "BXOR", [EMUNIC_CALC_MINLOC] = "MINLOC", [EMUNIC_CALC_MAXLOC] = "MAXLOC",
	};

	return NAME_OF(names, op);
}

const char *emunic_calc_type_str(int type)
{
	static const char *const names[] = {
		[EMUNIC_CALC_INT8] = "INT8", [EMUNIC_CALC_UINT8] = "UINT8", [EMUNIC_CALC_INT16] = "INT16",
		[EMUNIC_CALC_UINT16] = "UINT16", [EMUNIC_CALC_INT32] = "INT32", [EMUNIC_CALC_UINT32] = "UINT32",
		[EMUNIC_CALC_INT64] = "INT64", [EMUNIC_CALC_UINT64] = "UINT64", [EMUNIC_CALC_FLOAT] = "FLOAT",
		[EMUNIC_CALC_DOUBLE] = "DOUBLE", [EMUNIC_CALC_FLOAT_INT] = "FLOAT_INT",
		[EMUNIC_CALC_DOUBLE_INT] = "DOUBLE_INT", [EMUNIC_CALC_LONG_INT] = "LONG_INT",
		[EMUNIC_CALC_2INT] = "2INT", [EMUNIC_CALC_SHORT_INT] = "SHORT_INT",
		[EMUNIC_CALC_BE_INT64] = "BE_INT64", [EMUNIC_CALC_BE_UINT64] = "BE_UINT64",
		[EMUNIC_CALC_BE_DOUBLE] = "BE_DOUBLE",
	};

	return NAME_OF(names, type);
}

const char *emunic_op_kind_str(int kind)
{
	static const char *const names[] = {
		[EMUNIC_OP_PUT] = "put", [EMUNIC_OP_GET] = "get", [EMUNIC_OP_FETCH_ADD] = "fetch_add",
		[EMUNIC_OP_CT_INC] = "ct_inc", [EMUNIC_OP_CT_SET] = "ct_set",
	};
	const char *s = NAME_OF(names, kind);

	return s[0] == 'U' ? "unknown" : s;
}

const char *emunic_ev_kind_str(int kind)
{
	static const char *const names[] = {
		[EMUNIC_EV_PUT] = "PUT", [EMUNIC_EV_GET] = "GET", [EMUNIC_EV_ATOMIC] = "ATOMIC",
		[EMUNIC_EV_ACK] = "ACK", [EMUNIC_EV_REPLY] = "REPLY", [EMUNIC_EV_FETCH] = "FETCH",
		[EMUNIC_EV_CT_DONE] = "CT_DONE",
	};

	return NAME_OF(names, kind);
}
