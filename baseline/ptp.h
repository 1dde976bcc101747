/* SPDX-License-Identifier: MIT */
/*
 * baseline/ptp.h — the host-progressed point-to-point barrier (seed 003's
 * "PTP"): the same recursive-doubling algorithm as the offloaded
 * emunic_barrier(), over the same verbs and the same kind of signal, but
 * driven by the application thread.  Nothing moves unless the application
 * is inside emunic_ptp_barrier(), _test() or _wait(): the baseline every
 * offload benchmark compares against.  At the end, host-progressed
 * messages of the same kind for the ping-pong baseline.
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

/*
 * The host-progressed messages of the ping-pong baseline (baseline/
 * ptp_pingpong.c, for emunic-bench p2p): plain RDMA SEND/RECV over the same
 * static full mesh, from one send buffer and into one receive buffer, both
 * registered once at create.  The application posts and polls: nothing
 * moves outside emunic_ptp_pp_test().  Receives must be posted before the
 * peer's send arrives (else the peer meets RNR and retries).
 */
struct emunic_ptp_pp;

/* Collective over every rank of boot: opens the device, connects the mesh
 * (timeout_ms: 0 is 30000, < 0 no bound), registers 2 x max_len bytes. */
int emunic_ptp_pp_create(struct emunic_boot *boot, size_t max_len, int timeout_ms, struct emunic_ptp_pp **out);
/* -EBUSY while a send is not complete; posted receives are dropped. */
int emunic_ptp_pp_destroy(struct emunic_ptp_pp *pp);
void *emunic_ptp_pp_sendbuf(struct emunic_ptp_pp *pp);
void *emunic_ptp_pp_recvbuf(struct emunic_ptp_pp *pp);
/* Bytes the last completed receive delivered. */
size_t emunic_ptp_pp_last_len(const struct emunic_ptp_pp *pp);
/* Posts a SEND of the first len bytes of the send buffer (inline when
 * small); never polls.  *ticket names it for test.  -ENOSPC: 64 in flight. */
int emunic_ptp_pp_isend(struct emunic_ptp_pp *pp, int peer, size_t len, uint64_t *ticket);
/* Posts a receive of up to max_len bytes into the receive buffer. */
int emunic_ptp_pp_irecv(struct emunic_ptp_pp *pp, int peer, uint64_t *ticket);
/* Polls the CQ once: 1 when the ticket's operation completed, 0 not yet,
 * < 0 a completion failed (every later call says so too). */
int emunic_ptp_pp_test(struct emunic_ptp_pp *pp, uint64_t ticket);

/*
 * The host-progressed allreduce (baseline/ptp_allreduce.c): the offloaded
 * allreduce's algorithm and operand order (emunic/coll.h) over its own full
 * mesh, run by the application thread: nothing moves outside its calls.
 * max_bytes: the largest message (0: 64 KiB); timeout_ms bounds every wait
 * (0: 30000, < 0: none); spin_us: how long a wait polls before it sleeps on
 * the completion channel (< 0: always polls).  At most three in flight.
 */
struct emunic_ptp_ar;
struct emunic_ptp_ar_req;
int emunic_ptp_ar_create(struct emunic_boot *boot, size_t max_bytes, int timeout_ms, int spin_us,
			 struct emunic_ptp_ar **out);
int emunic_ptp_ar_destroy(struct emunic_ptp_ar *p);
int emunic_ptp_allreduce(struct emunic_ptp_ar *p, const void *sbuf, void *rbuf, size_t count, int type, int op);
int emunic_ptp_iallreduce(struct emunic_ptp_ar *p, const void *sbuf, void *rbuf, size_t count, int type, int op,
			  struct emunic_ptp_ar_req **req);
/* Progresses once: 1 done, 0 not yet, < 0 failed; req stays valid. */
int emunic_ptp_ar_test(struct emunic_ptp_ar_req *req);
/* Progresses until done or timeout_ms; frees req whatever the result. */
int emunic_ptp_ar_wait(struct emunic_ptp_ar_req *req, int timeout_ms);

/*
 * The host-progressed broadcast (baseline/ptp_bcast.c): the offloaded
 * bcast's binomial tree (schedule.c's coll_bin_tree) and segments, over its
 * own full mesh, run by the application thread: a rank forwards a segment
 * only when one of its calls polls and sees it arrived.  max_bytes: the
 * largest message (0: 64 KiB); segment: bytes per pipeline segment (0:
 * 32 KiB, raised and rounded as the offload's is); timeout_ms and
 * spin_us as for the allreduce.  The root copies buf when it starts; the
 * others' buf holds the data once the request completes.  At most three in
 * flight.
 */
struct emunic_ptp_bc;
struct emunic_ptp_bc_req;
int emunic_ptp_bc_create(struct emunic_boot *boot, size_t max_bytes, size_t segment, int timeout_ms, int spin_us,
			 struct emunic_ptp_bc **out);
int emunic_ptp_bc_destroy(struct emunic_ptp_bc *p);
int emunic_ptp_bcast(struct emunic_ptp_bc *p, void *buf, size_t bytes, int root);
int emunic_ptp_ibcast(struct emunic_ptp_bc *p, void *buf, size_t bytes, int root, struct emunic_ptp_bc_req **req);
/* Progresses once: 1 done, 0 not yet, < 0 failed; req stays valid. */
int emunic_ptp_bc_test(struct emunic_ptp_bc_req *req);
/* Progresses until done or timeout_ms; frees req whatever the result. */
int emunic_ptp_bc_wait(struct emunic_ptp_bc_req *req, int timeout_ms);

/*
 * The host-progressed all-to-all, allgather and gather (baseline/
 * ptp_exchange.c): the offloaded exchanges' schedules (emunic/coll.h;
 * engines/coll/schedule.h's coll_xchg_step) over their own full mesh, run
 * by the application thread: a step's sends go out only when one of its
 * calls polls and sees the previous step's block arrived.  One object
 * (struct emunic_ptp_a2a, whatever its kind) runs one kind: the calls of
 * another are -EINVAL.  max_block: the largest block (0: 64 KiB); segment:
 * bytes per segment (0: 32 KiB, raised and rounded as the offload's is);
 * timeout_ms and spin_us as for the allreduce.  sbuf is copied when it
 * starts; rbuf holds the data once the request completes (a gather's:
 * on the root only; a non-root's gather completes once its sends are
 * posted).  At most three in flight.
 */
struct emunic_ptp_a2a;
struct emunic_ptp_a2a_req;
/* kind: EMUNIC_COLL_ALLTOALL, _ALLGATHER or _GATHER (else -EINVAL). */
int emunic_ptp_xchg_create(struct emunic_boot *boot, enum emunic_coll_kind kind, size_t max_block, size_t segment,
			   int timeout_ms, int spin_us, struct emunic_ptp_a2a **out);
/* An alltoall object. */
int emunic_ptp_a2a_create(struct emunic_boot *boot, size_t max_block, size_t segment, int timeout_ms, int spin_us,
			  struct emunic_ptp_a2a **out);
int emunic_ptp_a2a_destroy(struct emunic_ptp_a2a *p);
int emunic_ptp_alltoall(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block);
int emunic_ptp_ialltoall(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block,
			 struct emunic_ptp_a2a_req **req);
int emunic_ptp_allgather(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block);
int emunic_ptp_iallgather(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block,
			  struct emunic_ptp_a2a_req **req);
int emunic_ptp_gather(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block, int root);
int emunic_ptp_igather(struct emunic_ptp_a2a *p, const void *sbuf, void *rbuf, size_t block, int root,
		       struct emunic_ptp_a2a_req **req);
/* Progresses once: 1 done, 0 not yet, < 0 failed; req stays valid. */
int emunic_ptp_a2a_test(struct emunic_ptp_a2a_req *req);
/* Progresses until done or timeout_ms; frees req whatever the result. */
int emunic_ptp_a2a_wait(struct emunic_ptp_a2a_req *req, int timeout_ms);

#endif
