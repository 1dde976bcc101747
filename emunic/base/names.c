/* SPDX-License-Identifier: MIT */
/* Names of the public enums, one table each, for messages and traces. */
#include <emunic.h>

#include <infiniband/verbs.h>

#define NAME_OF(table, v) \
	((v) >= 0 && (size_t)(v) < sizeof(table) / sizeof((table)[0]) && (table)[v] ? (table)[v] : "UNKNOWN")

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
	};

	return NAME_OF(names, op);
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
