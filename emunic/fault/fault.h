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

/* Per QP state of the rules (in struct emunic_qp). */
struct fault_qp {
	uint64_t recvs;			/* receives handed to verbs */
	uint64_t arrivals;		/* messages that consumed one */
	uint64_t held_since_ns;		/* rnr: first receive held back (max: released) */
	unsigned owed;			/* triggered QPs: receives to post once released */
	bool failed;			/* a retry rule failed it */
};

/* inject.c, on the progress core. */
/* QP transport settings the rules ask for (QPs to an rnr/retry target). */
void emunic_fault_qp_opts(struct emunic_dev *d, const struct emunic_qp *qp, struct emunic_qp_opts *o);
/* May the core hand one more receive to verbs on qp?  Counts it if so. */
bool emunic_fault_recv_ok(struct emunic_dev *d, struct emunic_qp *qp);
/* The QP is up (retry rules with after=0 act now): true if a rule reset it now. */
bool emunic_fault_qp_up(struct emunic_dev *d, struct emunic_qp *qp);
/* A message consumed a receive on qp (retry rules count these). */
void emunic_fault_arrival(struct emunic_dev *d, struct emunic_qp *qp);
/* A verbs completion of work request op on qp: may turn it into an error. */
void emunic_fault_wc(struct emunic_dev *d, struct emunic_qp *qp, struct ibv_wc *wc, int op);
/* The spec for a device from its attr or $EMUNIC_FAULTS: 0, or -EINVAL after
 * printing where it is wrong. */
int emunic_fault_open(struct emunic_dev *d, const char *spec);
void emunic_fault_close(struct emunic_dev *d);

#endif
