/* SPDX-License-Identifier: MIT */
/*
 * emunic/coll.h — offloaded collectives, built on the management queues of
 * <emunic.h> (never on verbs): the progress core runs them, so a posted
 * collective completes while the application only computes.
 *
 * A struct emunic_coll spans every rank of a device (the whole job).  It
 * holds one management queue and RC QPs to the ranks it talks to, and is
 * used by one application thread at a time.  Creating one is collective:
 * every rank calls emunic_coll_create() with the same attributes, and all
 * ranks create their collectives (and any other QPs between the same
 * ranks) in the same order, since QPs pair up by creation order.
 *
 * Barrier: recursive doubling over the largest power of two N <= size ranks;
 * each rank r >= N first signals r - N and is released by it afterwards
 * (seed 003, tables I-IV).
 *
 * Failures: a barrier is done when its partners' signals came (the task
 * list's WAIT on the receives, as on the HCA); it does not wait for its own
 * signals' acknowledgements, which would add a round trip to every barrier.
 * So a SEND of this rank that failed after its partner's signal arrived is
 * reported by the next barrier (or wait, or test) at the latest: from the
 * first failed barrier on, every barrier fails with that error.
 */
#ifndef EMUNIC_COLL_H
#define EMUNIC_COLL_H

#include <emunic.h>

#ifdef __cplusplus
extern "C" {
#endif

enum emunic_coll_signal {
	EMUNIC_COLL_SEND = 0,		/* 0-byte SEND into a pre-posted receive */
	EMUNIC_COLL_WRITE_IMM,		/* 0-byte RDMA WRITE with immediate */
};

enum emunic_coll_conn {
	EMUNIC_COLL_DENSE = 0,		/* a QP to every other rank */
	EMUNIC_COLL_SPARSE,		/* QPs only to the log2 partners (and the extra rank's) */
};

struct emunic_coll_attr {
	enum emunic_coll_signal signal;
	enum emunic_coll_conn conn;
	/* Bound on connecting (create), on emunic_barrier() and on draining
	 * (destroy), in ms; 0: 30000; < 0: no bound. */
	int timeout_ms;
};
void emunic_coll_attr_init(struct emunic_coll_attr *a);

struct emunic_coll;
struct emunic_coll_req;

/* Collective over every rank of dev.  Returns once every QP is connected. */
int emunic_coll_create(struct emunic_dev *dev, const struct emunic_coll_attr *a, struct emunic_coll **out);
/* Waits (bounded by timeout_ms) for the signals this rank sent to be
 * delivered, then frees everything; -EBUSY while requests are not waited. */
int emunic_coll_destroy(struct emunic_coll *c);
/* QPs this rank holds (dense: size - 1; sparse: its partners only). */
int emunic_coll_qp_count(const struct emunic_coll *c);

/* Blocks until every rank has entered the barrier (bounded by timeout_ms). */
int emunic_barrier(struct emunic_coll *c);

/*
 * Posts a barrier to the progress core and returns; it completes with no
 * further call.  Barriers complete in the order posted.  -ENOSPC when too
 * many are in flight (wait for some first).
 */
int emunic_ibarrier(struct emunic_coll *c, struct emunic_coll_req **req);
/* 1 done, 0 not yet, < 0 the barrier failed.  Never blocks; req stays valid. */
int emunic_coll_test(struct emunic_coll_req *req);
/* Waits at most timeout_ms (< 0: no bound) and frees req, whatever the
 * result: 0 done, -ETIMEDOUT, or the error the barrier failed with.  A
 * barrier that timed out stays posted and still completes in order. */
int emunic_coll_wait(struct emunic_coll_req *req, int timeout_ms);

const char *emunic_coll_signal_str(enum emunic_coll_signal s);
const char *emunic_coll_conn_str(enum emunic_coll_conn c);
/* The inverse of the _str names ("send", "write_imm"; "dense", "sparse"):
 * the value, or -EINVAL for any other string. */
int emunic_coll_signal_parse(const char *s);
int emunic_coll_conn_parse(const char *s);

#ifdef __cplusplus
}
#endif

#endif /* EMUNIC_COLL_H */
