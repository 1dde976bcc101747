/* SPDX-License-Identifier: MIT */
/* Fault rules as parsed (spec.c) and as the progress core applies them
 * (inject.c).  The public side is include/emunic/fault.h. */
#ifndef EMUNIC_FAULT_INT_H
#define EMUNIC_FAULT_INT_H

#include <emunic.h>

#include <stdbool.h>
#include <stdint.h>

struct emunic_dev;
struct emunic_qp;
struct emunic_qp_opts;
struct ibv_wc;

enum fault_kind { FAULT_RNR = 1, FAULT_RETRY, FAULT_LOSS, FAULT_WC };

struct fault_rule {
	enum fault_kind kind;
	int peer, from, rank;		/* -1: any */
	uint64_t after;			/* rnr: receives per QP; retry: arrivals per QP */
	int retries, timeout;		/* -1: the kind's default */
	uint64_t hold_us;		/* rnr: 0 = until the QP fails */
	uint32_t p_ppm;			/* loss, wc: probability, parts per million */
	uint64_t delay_us, jitter_us;	/* loss */
	int status, opcode;		/* wc; opcode 0 = any */
	uint64_t op, count, seed;	/* wc: op 0 = use p_ppm */
	/* run time, on the core */
	uint64_t seen, hits, rng;
};

struct emunic_fault_spec {
	int n;
	struct fault_rule r[EMUNIC_FAULT_MAX_RULES];
};

/* Per QP state of the rules (qp->flt, made when a rule first looks at it). */
struct fault_qp {
	uint64_t recvs;			/* receives handed to verbs */
	uint64_t arrivals;		/* messages that consumed one */
	uint64_t held_since_ns;		/* rnr: first receive held back (max: released) */
	uint64_t release_ns;		/* rnr with hold: when the hold ends (0: none) */
	bool failed;			/* a retry rule failed it */
};

/* inject.c: parses the spec for a device ($EMUNIC_FAULTS or its attr) and,
 * when it has rules, installs the hooks (nic.h) and a unit that lets held
 * receives go on time.  0, or -EINVAL after printing where it is wrong. */
int emunic_fault_unit_init(struct emunic_dev *d, const char *spec);

#endif
