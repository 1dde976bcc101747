/* SPDX-License-Identifier: MIT */
/*
 * emunic/fault.h — fault injection: the errors real fabrics produce (RNR NAK
 * retry exceeded, transport retry exceeded, loss), made on purpose, plus
 * synthetic completion errors chosen deterministically.  Include <emunic.h>,
 * which includes this.
 *
 * A spec is rules separated by ';', each KIND:KEY=VALUE,KEY=VALUE...  It is
 * given in emunic_dev_attr.faults or $EMUNIC_FAULTS; every rank of a job
 * reads the same spec and plays its own part in each rule.
 *
 *   rnr:peer=R[,from=S][,after=N][,retries=K][,hold=T]
 *       Real RNR.  Rank R's progress core stops handing receives to verbs
 *       once N (default 0) went to each of its QPs (from rank S only, if
 *       given): messages that need a receive (SEND, WRITE_IMM) meet RNR NAKs
 *       from the transport.  The senders' QPs to R get rnr_retry K (default
 *       0), so their work request ends in RNR_RETRY_EXC_ERR.  hold=T releases
 *       the receives after T (with retries=7 the sender just waits).
 *   retry:peer=R[,from=S][,after=N][,retries=K][,timeout=E]
 *       Real transport retry exceeded.  Rank R's QP (from rank S only, if
 *       given) is reset once N (default 0) messages arrived on it (its own
 *       work fails with WR_FLUSH_ERR): the transport drops what reaches a QP
 *       that is not ready, so the sender's work
 *       request ends in RETRY_EXC_ERR after K retries (default 1) of the ACK
 *       timeout 4.096 us * 2^E (default 12, 17 ms).
 *   loss:p=P[,delay=T][,jitter=T]
 *       Packet loss and delay on the wire, by netem on the RDMA device's
 *       network interface (emunic-run sets it up and removes it; needs root
 *       and tc).  rxe's loopback between ranks of one node bypasses the
 *       interface: loss needs ranks on two nodes.
 *   wc:status=S[,op=N|,p=P][,count=C][,seed=X][,rank=R][,peer=Q][,opcode=O]
 *       Synthetic.  Rank R's core (every rank's, if not given) turns the
 *       N-th successful completion that matches (QP to peer Q, work request
 *       opcode O) into status S, and C-1 more matches after it (count:
 *       default 1; 0 no limit); or, with p, each match with probability P
 *       drawn from a generator seeded with X and the rank, so a run repeats
 *       exactly (count: default no limit).  The QP is then
 *       moved to the error state, as a real failure would: the rest of its
 *       work flushes.
 *
 * Values: R, S, Q ranks; N, C, K, X non-negative integers; P a probability
 * (0.05 or 5%); T a duration (2ms, 500us, 1s; a bare number is ms); E 0..31;
 * S a completion status (RNR_RETRY_EXC_ERR, RETRY_EXC_ERR, REM_ACCESS_ERR,
 * ..., with or without IBV_WC_ and _ERR, any case, or its number); O one of
 * send, recv, write, write_imm, read, fetch_add, calc.
 */
#ifndef EMUNIC_FAULT_H
#define EMUNIC_FAULT_H

#include <stddef.h>
#include <stdint.h>

struct emunic_dev;
struct emunic_fault_spec;

/*
 * Parses spec.  On -EINVAL, err (if errlen > 0) holds a message naming the
 * bad token, then the spec, then a line with a caret under the token (cut
 * short, still terminated, when errlen is small); more than
 * EMUNIC_FAULT_MAX_RULES rules is -EINVAL too.  An empty spec has no rules.
 * The launcher acts on a loss rule (emunic-run: netem); a device ignores it.
 */
#define EMUNIC_FAULT_MAX_RULES 16
int emunic_fault_parse(const char *spec, struct emunic_fault_spec **out, char *err, size_t errlen);
void emunic_fault_free(struct emunic_fault_spec *spec);
/* Number of rules; the rules in canonical form, ';'-separated (-ENOSPC when
 * buf is too small). */
int emunic_fault_rules(const struct emunic_fault_spec *spec);
int emunic_fault_format(const struct emunic_fault_spec *spec, char *buf, size_t len);
/* The loss rule, for the launcher that sets up netem: 0 and *p_ppm etc.,
 * or -ENOENT when the spec has none. */
int emunic_fault_loss(const struct emunic_fault_spec *spec, uint32_t *p_ppm, uint64_t *delay_us,
		      uint64_t *jitter_us);

/* What a device injected so far (its part of every rule). */
struct emunic_fault_stats {
	uint64_t wc_injected;		/* completions turned into errors */
	uint64_t qps_held;		/* QPs whose receives an rnr rule held back */
	uint64_t qps_failed;		/* QPs a retry rule moved to the error state */
};
int emunic_fault_stats(struct emunic_dev *dev, struct emunic_fault_stats *out);

/* ---- hardware counters of the verbs port (/sys/class/infiniband) ---- */

struct emunic_hw_counter {
	char name[48];
	uint64_t value;
};
/* Reads up to max counters of port 1 of device name (rxe: rcvd_rnr_err,
 * send_rnr_err, retry_exceeded_err, retry_rnr_exceeded_err, ...); returns
 * how many, or -ENOENT (no such device, or it has no hw_counters). */
int emunic_hw_counters(const char *name, struct emunic_hw_counter *out, int max);

#endif
