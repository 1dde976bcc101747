/* SPDX-License-Identifier: MIT */
/*
 * baseline/ptp.h — the host-progressed point-to-point barrier (seed 003's
 * "PTP"): the same recursive-doubling algorithm as the offloaded
 * emunic_barrier(), over the same verbs and the same kind of signal, but
 * driven by the application thread.  Nothing moves unless the application
 * is inside emunic_ptp_barrier(), _test() or _wait(): the baseline every
 * offload benchmark compares against.
 *
 * It uses the private verbs layer (emunic/verbs.h) directly, with a static
 * full mesh of RC QPs (dense connections only), one CQ and a completion
 * channel so a waiting rank can sleep instead of spinning.
 */
#ifndef EMUNIC_BASELINE_PTP_H
#define EMUNIC_BASELINE_PTP_H

#include <emunic.h>
#include <emunic/coll.h>

struct emunic_ptp_attr {
	enum emunic_coll_signal signal;
	/* Bound on connecting (create), on emunic_ptp_barrier() and on
	 * draining (destroy), in ms; 0: 30000; < 0: no bound. */
	int timeout_ms;
	/* How long a wait busy-polls before sleeping on the completion
	 * channel, in us; < 0: spin always (benchmarks on dedicated cores). */
	int spin_us;
};
void emunic_ptp_attr_init(struct emunic_ptp_attr *a);

struct emunic_ptp;
struct emunic_ptp_req;

/* Collective over every rank of boot: opens the device ($EMUNIC_DEVICE or
 * the first active) and connects the full mesh. */
int emunic_ptp_create(struct emunic_boot *boot, const struct emunic_ptp_attr *a, struct emunic_ptp **out);
/* Waits (bounded) for this rank's signals to be delivered, then frees all;
 * -EBUSY while requests are not waited. */
int emunic_ptp_destroy(struct emunic_ptp *p);

int emunic_ptp_barrier(struct emunic_ptp *p);
/* Starts a barrier: posts its first signal if it is the oldest in flight,
 * never polls.  Barriers complete in the order started. */
int emunic_ptp_ibarrier(struct emunic_ptp *p, struct emunic_ptp_req **req);
/* Progresses once: 1 done, 0 not yet, < 0 failed; req stays valid. */
int emunic_ptp_test(struct emunic_ptp_req *req);
/* Progresses until done or timeout_ms (< 0: no bound); frees req whatever
 * the result: 0, -ETIMEDOUT or the barrier's error. */
int emunic_ptp_wait(struct emunic_ptp_req *req, int timeout_ms);

#endif
