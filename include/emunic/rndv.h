/* SPDX-License-Identifier: MIT */
/*
 * emunic/rndv.h — point-to-point messages with MPI matching, over the
 * triggered operations of the progress core (engines/rndv).
 *
 * Eager (seed 000, III.A): a message of at most `first` bytes (the eager
 * limit) travels whole in a per-peer pre-registered slot, with its tag, size
 * and protocol information in the slot's header.  A slot is freed when the
 * receiver is done with it; frees are acknowledged in the headers of
 * messages going the other way (piggybacked) or, past `ack_every` unreported
 * frees, by an explicit acknowledgement.  A sender with no free slot waits
 * (on its progress core), it never drops.
 *
 * Longer messages use one of two rendezvous protocols (`proto`):
 *
 * EMUNIC_RNDV_CHUNKED: chunked receiver-driven rendezvous (seed 004, 3.2-3.3).
 * The sender puts the first `first` bytes with a header (match bits, total
 * size, rank, where the rest is) into a bounce slot at the receiver; the
 * receiver's progress core matches it against posted receives (MPI rules:
 * tags, ANY_TAG, ANY_SOURCE, non-overtaking between a pair), copies the first
 * chunk out and gets the rest in chunks of `chunk` bytes with at most
 * `credits` gets in flight: get c + i is triggered by the receive's counter
 * reaching i + 1.  The sender learns it is done from its own counter, which
 * the receiver's gets bump through target-side counting.  A message that
 * finds no receive is copied out of its slot (so slots return in order) and
 * matched when a receive comes.  Transfers complete with no test call.
 *
 *
 * EMUNIC_RNDV_RTR: receiver-initiated rendezvous (seed 000, III.B).  The
 * receive registers its buffer and writes a ready-to-receive record (tag,
 * address, key, length) into the sender's RTR ring; the sender matches it
 * against its sends and answers with an RDMA write with immediate into the
 * buffer.  As in seed 000 the two sides pick the protocol by size: a receive
 * longer than `first` takes only messages longer than `first` (and names
 * its source: an RTR must go somewhere), a receive of at most `first` bytes
 * only eager ones.  Who answers an RTR is `progress`:
 *   EMUNIC_PROGRESS_CORE          the sender's progress core (no test call);
 *   EMUNIC_PROGRESS_TEST          the sender's emunic_test; isend and irecv
 *                                 only record, the first test starts them;
 *   EMUNIC_PROGRESS_TEST_ON_INIT  likewise, but isend/irecv start at once;
 *   EMUNIC_PROGRESS_WAIT_ON_SEND  test-on-init, and isend of a rendezvous
 *                                 message waits up to wait_on_send_us for
 *                                 its RTR; emunic_startall does it for many.
 *
 * Connections: with EMUNIC_RNDV_ON_DEMAND no QP exists until the first
 * message to or from a peer (seed 002); sends posted before the connection
 * is up wait in order; a receive from ANY_SOURCE connects to every peer.
 * Without it every pair is connected at create (static full mesh).  One
 * on-demand endpoint per device (it owns the QPs to its peers).
 *
 * Failures: a connection that fails (loss the transport gave up on, the
 * peer's QP reset, an injected error) is made again by the progress core and
 * every message the peer did not get goes again, so each is delivered once
 * (`reconnects`).  When that fails too, the requests waiting on the peer
 * complete with -EIO; no request waits past its caller's bound.
 *
 * Sizes: 0 .. 4 GiB - 1 per message.  A message larger than the receive
 * buffer fills the buffer and completes the receive with -EMSGSIZE
 * (truncation); the sender completes normally.
 */
#ifndef EMUNIC_RNDV_H
#define EMUNIC_RNDV_H

#include <stddef.h>
#include <stdint.h>

struct emunic_dev;
struct emunic_rndv;
struct emunic_req;

#define EMUNIC_ANY_SOURCE (-1)
#define EMUNIC_ANY_TAG (-1)
#define EMUNIC_TAG_MAX 0x3fffffff

enum emunic_rndv_proto {
	EMUNIC_RNDV_CHUNKED = 0,	/* seed 004 */
	EMUNIC_RNDV_RTR,		/* seed 000 */
};
enum emunic_rndv_progress {
	EMUNIC_PROGRESS_CORE = 0,
	EMUNIC_PROGRESS_TEST,
	EMUNIC_PROGRESS_TEST_ON_INIT,
	EMUNIC_PROGRESS_WAIT_ON_SEND,
};
#define EMUNIC_RNDV_ON_DEMAND (1u << 0)	/* connect at first use */
#define EMUNIC_RNDV_HOLD_SLOTS (1u << 1)	/* a message no receive took keeps its
						 * slot until received (seed 000), instead
						 * of being copied out at once */

struct emunic_rndv_attr {
	size_t first;		/* eager limit: bytes carried with the header (0: 4096) */
	size_t chunk;		/* s: bytes per get (0: 65536); SIZE_MAX: one get */
	unsigned credits;	/* c: gets in flight per receive (0: 4) */
	unsigned slots;		/* bounce slots per peer (0: 64) */
	unsigned max_sends;	/* sends in flight per endpoint (0: 256); more: -ENOSPC */
	uint32_t ctx;		/* communicator context: messages match only within it */
	int connect_timeout_ms;	/* 0: 30000 */
	unsigned proto;		/* enum emunic_rndv_proto */
	unsigned progress;	/* enum emunic_rndv_progress */
	unsigned flags;		/* EMUNIC_RNDV_* */
	unsigned ack_every;	/* explicit ack past this many unreported frees (0: slots / 2) */
	int wait_on_send_us;	/* EMUNIC_PROGRESS_WAIT_ON_SEND bound (0: 200) */
	/* A failed connection to a peer is made again and what the peer did
	 * not get is sent again, exactly once (emunic_qp_reconnects in
	 * emunic/mq.h): up to `reconnects` times in a row (attr_init: 4; 0:
	 * never, a failure fails the requests on it with -EIO), each within
	 * reconnect_timeout_ms (0: 10000). */
	unsigned reconnects;
	int reconnect_timeout_ms;
	/* emunic_wait sleeps until the request's counter or the endpoint
	 * moves, and looks at the request itself at least this often, for
	 * what moves neither: a QP that failed under a request, a wake-up a
	 * full command ring refused (owed to the endpoint's next call), and,
	 * under progress other than CORE, host work (an RTR to answer) for a
	 * thread waiting on a request already started.  0: 20. */
	int recheck_ms;
};
void emunic_rndv_attr_init(struct emunic_rndv_attr *a);

const char *emunic_rndv_proto_str(unsigned proto);
const char *emunic_rndv_progress_str(unsigned progress);
/* "chunked"/"rtr", "core"/"test"/"test-on-init"/"wait-on-send": 0 or -EINVAL. */
int emunic_rndv_proto_parse(const char *s, unsigned *out);
int emunic_rndv_progress_parse(const char *s, unsigned *out);

/* Collective over the device's ranks: exchanges buffer addresses and, unless
 * EMUNIC_RNDV_ON_DEMAND, connects to every peer. */
int emunic_rndv_create(struct emunic_dev *dev, const struct emunic_rndv_attr *attr, struct emunic_rndv **out);
/* Fails with -EBUSY while requests are not freed. */
int emunic_rndv_destroy(struct emunic_rndv *r);

struct emunic_status {
	int source;		/* sender's rank */
	int tag;
	int error;		/* 0, -EMSGSIZE (truncated), -EIO (a transfer failed), -ECANCELED */
	size_t len;		/* bytes delivered into the buffer */
	size_t total;		/* bytes the sender sent */
};

/* 0, or -EINVAL (dst not a peer, negative or too large tag; nothing sent),
 * -ENOSPC (max_sends sends and RTR receives in flight). */
int emunic_isend(struct emunic_rndv *r, const void *buf, size_t len, int dst, int tag, struct emunic_req **req);
/* src may be EMUNIC_ANY_SOURCE (not for an RTR receive), tag EMUNIC_ANY_TAG. */
int emunic_irecv(struct emunic_rndv *r, void *buf, size_t len, int src, int tag, struct emunic_req **req);
/* *done = 1 once complete (st filled, if not NULL).  Never needed for
 * progress: the transfer moves without it.  Not complete yet, the test of
 * an RTR request, or of one of at most `first` bytes (a receive: its
 * buffer), lends the calling thread to the engine for a look
 * (emunic_dev_progress), so a test loop finds its message itself rather
 * than wait for the progress core to wake for it; the endpoint's handlers
 * may run in it.  A longer chunked request's test leaves its gets to the
 * core. */
int emunic_test(struct emunic_req *req, int *done, struct emunic_status *st);
/* 0 when complete, -ETIMEDOUT after timeout_ms (< 0: no bound), -EDEADLK
 * when called, not complete, from an event handler of the endpoint's
 * device (the engine is the calling thread: nothing can move while it
 * waits; test instead).  Between tests it waits as every wait of emunic
 * does (running the engine while the token is free, then asleep): on the
 * request's counter once the transfer started, before that on the
 * endpoint's, which the handler or call that moved a request out of its
 * posted state (or matched an RTR for the host to answer) bumps while
 * someone waits; at most attr.recheck_ms asleep. */
int emunic_wait(struct emunic_req *req, struct emunic_status *st, int timeout_ms);
/* Progresses send requests until none waits for its RTR (seed 000's
 * OF_Startall) or timeout_ms passed: 0 or -ETIMEDOUT (they stay valid). */
int emunic_startall(struct emunic_req *const *reqs, unsigned n, int timeout_ms);
/* A receive that has not matched (or sent its RTR) is withdrawn (0); one
 * that has: -EBUSY. */
int emunic_cancel(struct emunic_req *req);
/* Frees a completed or canceled request: 0, or -EBUSY. */
int emunic_req_free(struct emunic_req *req);

struct emunic_rndv_stats {
	uint64_t sends, recvs;
	uint64_t expected, unexpected;	/* receives matched to arrivals by when they came */
	uint64_t gets;			/* chunk gets issued */
	uint64_t eager;			/* messages sent whole in a slot */
	uint64_t rtrs_sent, rtrs_answered;	/* RTR receives announced; RTRs this rank answered */
	uint64_t acks_piggybacked;	/* slot frees reported in message headers */
	uint64_t acks_explicit;		/* explicit acknowledgements sent */
	uint64_t slot_waits;		/* sends that had to wait for a free slot */
	uint64_t reconnects;		/* connections to peers made again after a failure */
	unsigned peers_connected;	/* peers with a QP */
	size_t posted, queued;		/* receives waiting; messages waiting for a receive */
};
int emunic_rndv_stats(struct emunic_rndv *r, struct emunic_rndv_stats *st);
/* 1 when this rank has a QP to peer and it is connected, else 0 (-EINVAL: not a peer). */
int emunic_rndv_connected(struct emunic_rndv *r, int peer);

#endif /* EMUNIC_RNDV_H */
