/* SPDX-License-Identifier: MIT */
/* Private to engines/rndv: the endpoint, its peers, requests and the wire header. */
#ifndef EMUNIC_RNDV_INT_H
#define EMUNIC_RNDV_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include <emunic.h>
#include <emunic/rndv.h>

#include "engines/rndv/match.h"

/* Offsets into bounce regions travel in 64-byte units (LE shift). */
#define RNDV_UNIT_SHIFT 6
#define RNDV_UNIT (1u << RNDV_UNIT_SHIFT)
/* Triggered gets one receive keeps posted ahead; the rest are posted as
 * earlier ones complete (so one huge message cannot fill the table). */
#define RNDV_TRIG_WINDOW 256

/* At the start of every bounce slot.  The first 16 bytes are what the
 * list entry's events report (EMUNIC_LE_HDR): match bits and hdr_data. */
struct rndv_hdr {
	uint64_t match_bits;	/* ctx << 32 | tag */
	uint64_t seq;		/* hdr_data: per (sender, receiver) sequence */
	uint64_t total;		/* message length */
	uint64_t src_addr;	/* the rest of the message: [first, total) */
	uint32_t src_rkey;
	uint16_t src_le;	/* the sender's counting entry for gets */
	uint8_t src_shift;
	uint8_t pad;
	uint32_t first;		/* bytes of data after this header */
	int32_t src_rank;
	uint64_t chunk;		/* the sender's chunk size: it counts the gets */
	uint64_t acked;		/* piggybacked: slots of the receiver's messages
				 * the sender has freed, in order */
};
_Static_assert(sizeof(struct rndv_hdr) == 64, "the header is one unit");

/* A ready-to-receive record, written into the sender's RTR ring. */
struct rndv_rtr {
	uint64_t match_bits;	/* ctx << 32 | tag (tag may be ANY: 0xffffffff) */
	uint64_t seq;		/* RTRs from this receiver to this sender, from 0 */
	uint64_t addr;		/* the receive buffer */
	uint64_t len;
	uint32_t rkey;
	uint16_t landing;	/* the receiver's landing slot for the answer */
	uint16_t pad;
	int32_t rank;
	uint32_t pad2;
	uint64_t pad3[2];
};
_Static_assert(sizeof(struct rndv_rtr) == 64, "an RTR is one unit");

/* What the answering sender writes into the landing slot before the data. */
struct rndv_landing {
	uint64_t total;		/* the message's length */
	int32_t tag;
	uint32_t pad;
};
#define RNDV_LANDING_SHIFT 4

/* What a peer needs from this rank, exchanged at create. */
struct rndv_card {
	struct emunic_target bounce;	/* my slots for messages from that peer */
	struct emunic_target ack;	/* where that peer reports slots it freed of mine */
	struct emunic_target rtr;	/* my RTR ring for that peer's RTRs */
	struct emunic_target landing;	/* my landing slots for that peer's answers */
};

/* A counter with the value it had when taken: requests count from there
 * (no reset, so a stale value is never read as done). */
struct rndv_ct {
	struct emunic_ct *ct;
	uint64_t base;		/* success + failure at take */
	uint64_t base_fail;
};

/* A send's resources: header + first chunk staging (registered), the
 * counter of its put and of the gets served, and the entry naming it. */
struct rndv_stage {
	struct rndv_hdr *hdr;		/* in the staging region */
	struct emunic_le *le;		/* counts gets served (tiny buffer) */
	struct rndv_ct c;
	struct rndv_stage *next;	/* free list */
};

struct rndv_arrival {			/* a first chunk that found no receive yet */
	struct match_entry me;
	int peer;
	bool held;			/* data is still in its slot (HOLD_SLOTS) */
	struct rndv_hdr hdr;
	char *data;			/* copy of the first chunk (hdr.first bytes) */
};

struct rndv_rtr_in {			/* an RTR no send took yet (sender side) */
	struct match_entry me;
	int peer;
	struct rndv_rtr rtr;
};

enum req_kind { REQ_SEND = 1, REQ_RECV };
enum req_state { REQ_POSTED = 1, REQ_GETTING, REQ_DONE, REQ_CANCELED };

struct emunic_req {
	struct emunic_rndv *r;
	enum req_kind kind;
	_Atomic int state;		/* REQ_DONE set when nothing more will land */
	struct match_entry me;		/* receive: while posted */
	char *buf;
	size_t len;
	struct emunic_mr *mr;		/* the user buffer, when gets touch it */
	struct rndv_ct c;		/* send: put + gets served; recv: gets done */
	struct rndv_stage *stage;	/* send */
	uint64_t need;			/* events on c that mean done */
	/* receive, once matched */
	int peer;
	struct rndv_hdr hdr;
	uint64_t ngets, next_get;	/* gets of the message; posted so far */
	struct emunic_status st;
	/* eager/RTR */
	int tag;
	uint64_t seq;			/* send: slot sequence number (eager, chunked) */
	bool rtr;			/* RTR send or receive */
	bool started;			/* send: put posted / recv: RTR posted */
	bool rtr_matched;		/* send: has its RTR (in rtr_in) */
	struct rndv_rtr rtr_in;
	uint16_t landing;		/* recv: landing slot while announced */
	bool wake_owed;			/* recv: its answer landed, the count is owed */
	struct emunic_req *next_owed;	/* in the owed list or a peer's RTR list */
	struct emunic_req *next_host;	/* in the host list (not CORE progress) */
	bool on_host;
};

struct rndv_peer {
	struct emunic_qp *qp;		/* NULL until first use (ON_DEMAND) */
	char *bounce;			/* slots for messages from this peer */
	struct emunic_le *bounce_le;
	struct emunic_ct *credit_ct;	/* slots the peer freed of mine */
	char *ack_in, *ack_out;		/* 16 bytes each: the peer's report; mine */
	struct emunic_le *ack_le;
	char *rtr_ring;			/* the peer's RTRs to me */
	struct emunic_le *rtr_le;
	char *landing;			/* struct rndv_landing per landing slot */
	struct emunic_le *landing_le;
	struct rndv_card card;		/* the peer's, for sending to it */
	/* all under the endpoint lock */
	uint64_t send_seq;		/* slot sequence of my next message to it */
	uint64_t rtr_send_seq;		/* my rendezvous sends to it (RTR matching) */
	uint8_t *slot_done;		/* its slots freed out of order */
	uint64_t freed;			/* its slots freed, in order */
	uint64_t acked_sent;		/* of those, reported to it */
	bool ack_owed;			/* an explicit ack a full ring refused */
	uint64_t acked_seen;		/* my slots it reported freed */
	uint64_t credit_applied;	/* of those, added to credit_ct */
	uint64_t rtr_seq;		/* RTRs I announced to it */
	uint64_t rtr_seen;		/* its RTRs to me taken (they come in order) */
	struct emunic_req **landing_req;	/* by landing slot */
	uint16_t *landing_free;
	unsigned nlanding_free;
	struct emunic_req *rtr_wait, *rtr_wait_tail;	/* receives waiting for a landing slot */
};

struct emunic_rndv {
	struct emunic_dev *dev;
	struct emunic_rndv_attr attr;
	int rank, size;
	size_t slot_size;
	pthread_mutex_t lock;		/* matching and requests: app and core */
	/* rndv_flush (defer.c), for the files below it (slots.c, rtr.c):
	 * calls point one way, so they reach the deferred work through here. */
	void (*flush)(struct emunic_rndv *r);
	struct match_state m;
	struct rndv_peer *peer;		/* by rank */
	struct emunic_eq *arrivals;	/* bounce entries' events, handled on the core */
	struct emunic_eq *refill;	/* get completions of long messages, on the core */
	struct emunic_eq *acks;		/* explicit slot acks, on the core */
	struct emunic_eq *rtrs;		/* RTRs arriving (sender side), on the core */
	struct emunic_eq *landed;	/* RTR answers arriving (receiver side), on the core */
	struct match_state rtr_m;	/* sender side: RTRs (as receives) x rendezvous sends */
	struct emunic_req *owed, *owed_tail;	/* answers and counts a full ring refused */
	/* A waiter on a request nothing has touched yet (REQ_POSTED) has no
	 * counter of its own to sleep on: it sleeps on `moved`, which
	 * rndv_wake_posted (the end of rndv_flush, of every handler and call)
	 * bumps after a move (rndv_note_move) while posted_waiters says
	 * someone sleeps. */
	struct emunic_ct *moved;
	_Atomic unsigned posted_waiters;
	_Atomic uint64_t moves;		/* moves so far (rndv_note_move): a waiter
					 * sleeps only if none came since its test */
	uint64_t moves_woken;		/* `moves` at the last bump (under lock) */
	struct emunic_req *host, *host_tail;	/* sends waiting for the app's next call
						 * (progress other than CORE): to start, or
						 * to answer their RTR */
	size_t peer_len;		/* region bytes per peer */
	char *region;			/* per peer: slots, RTR ring, landing, acks; + tiny buffer */
	size_t region_len;
	struct emunic_mr *region_mr;
	char *staging;			/* max_sends send stages */
	struct emunic_mr *staging_mr;
	struct rndv_stage *stages, *free_stages;
	struct rndv_ct *cts;		/* free receive counters */
	unsigned ncts, cap_cts;
	unsigned live_reqs;
	struct emunic_rndv_stats stats;
};

/* Request lists are singly linked through one of the request's link
 * fields (at byte offset `link`): append and remove, O(n) removal is fine
 * for lists a handful long. */
#define RNDV_LINK(q, link) (*(struct emunic_req **)((char *)(q) + (link)))
static inline void rndv_list_append(struct emunic_req **head, struct emunic_req **tail, struct emunic_req *q,
				    size_t link)
{
	RNDV_LINK(q, link) = NULL;
	if (*tail)
		RNDV_LINK(*tail, link) = q;
	else
		*head = q;
	*tail = q;
}

static inline bool rndv_list_remove(struct emunic_req **head, struct emunic_req **tail, struct emunic_req *q,
				    size_t link)
{
	struct emunic_req *prev = NULL;

	for (struct emunic_req *w = *head; w; prev = w, w = RNDV_LINK(w, link)) {
		if (w != q)
			continue;
		if (prev)
			RNDV_LINK(prev, link) = RNDV_LINK(w, link);
		else
			*head = RNDV_LINK(w, link);
		if (*tail == w)
			*tail = prev;
		return true;
	}
	return false;
}

/* chunked.c: messages through the slots (eager, and chunked rendezvous) */
void rndv_on_arrival(void *arg, const struct emunic_event *ev);
void rndv_on_refill(void *arg, const struct emunic_event *ev);
int rndv_start_recv(struct emunic_rndv *r, struct emunic_req *q, const struct rndv_hdr *h, int peer,
		    const char *data);
/* Posts a send's header (+ first chunk) into its slot (lock held). */
int rndv_start_send(struct emunic_rndv *r, struct emunic_req *q);
/* What a test may still have to push: gets a full table refused, and (not
 * CORE) every send the host starts or answers, every RTR it announces. */
void rndv_progress_req(struct emunic_rndv *r, struct emunic_req *q);
static inline bool rndv_is_rtr(const struct emunic_rndv *r, size_t len)
{
	return r->attr.proto == EMUNIC_RNDV_RTR && len > r->attr.first;
}

/* slots.c: slot frees, acknowledgements and credits (lock held) */
void rndv_slot_free(struct emunic_rndv *r, int p, uint64_t seq);
/* p reported `acked` of my slots freed (header or explicit ack). */
void rndv_acked(struct emunic_rndv *r, int p, uint64_t acked);
/* The ack to carry in a header to p; counted as reported if it goes now. */
uint64_t rndv_piggyback(struct emunic_rndv *r, int p, bool goes_now);
void rndv_on_ack(void *arg, const struct emunic_event *ev);
void rndv_send_ack(struct emunic_rndv *r, int p);
void rndv_apply_credits(struct emunic_rndv *r, int p);

/* defer.c: retries whatever a full command ring refused (acks, credits,
 * RTRs, answers), then wakes the sleepers on POSTED requests; slots.c and
 * rtr.c, below it, call it as r->flush. */
void rndv_flush(struct emunic_rndv *r);
/* peer.c: wakes the threads asleep on requests not yet started if one
 * moved (emunic_wait). */
void rndv_wake_posted(struct emunic_rndv *r);

/* Every move of a request out of REQ_POSTED, and every change that gives
 * a test of one something to do (an RTR matched to a send the host
 * answers), is counted here, so that a thread asleep on a request not yet
 * started (emunic_wait) is woken by the next rndv_wake_posted.  All
 * sequentially consistent: see rndv_wake_posted. */
static inline void rndv_note_move(struct emunic_rndv *r)
{
	atomic_fetch_add(&r->moves, 1);
}

static inline void rndv_req_moved(struct emunic_req *q, int state)
{
	atomic_store(&q->state, state);
	rndv_note_move(q->r);
}

/* rtr.c: the receiver-initiated rendezvous */
int rndv_rtr_isend(struct emunic_rndv *r, struct emunic_req *q);
int rndv_rtr_irecv(struct emunic_rndv *r, struct emunic_req *q);
/* Receiver: posts the RTRs that may go (landing slots free, allowed). */
void rndv_rtr_pump_all(struct emunic_rndv *r);
/* Cancel: 0 (taken off its peer's RTR list), -EBUSY (its RTR went). */
int rndv_rtr_withdraw(struct emunic_rndv *r, struct emunic_req *q);
/* Sender: answers a matched RTR now (0) or leaves it (-ENOSPC). */
int rndv_rtr_answer(struct emunic_rndv *r, struct emunic_req *q);
/* Not under the lock: EMUNIC_PROGRESS_WAIT_ON_SEND's bounded poll in isend. */
void rndv_wait_on_send(struct emunic_req *q);
void rndv_on_rtr(void *arg, const struct emunic_event *ev);
void rndv_on_landed(void *arg, const struct emunic_event *ev);
/* peer.c (the leaf): the QP to a peer, made at first use under ON_DEMAND
 * (lock held), with the attributes every QP to a peer has */
struct emunic_qp *rndv_peer_qp(struct emunic_rndv *r, int p);
void rndv_peer_qp_attr(const struct emunic_rndv *r, struct emunic_qp_attr *qa);
/* A send the host must act on (start it, answer its RTR) at its next call. */
void rndv_host_add(struct emunic_rndv *r, struct emunic_req *q);
void rndv_host_remove(struct emunic_rndv *r, struct emunic_req *q);
/* The request fails with -EIO, saying why on stderr (rank, kind, size,
 * peer, tag). */
void rndv_req_fail(struct emunic_req *q, int peer, const char *why);
/* Work a full command ring refused, for rndv_flush: a send's answer, a
 * receive's completion count (wake_owed). */
void rndv_owe(struct emunic_rndv *r, struct emunic_req *q);
void rndv_unowe(struct emunic_rndv *r, struct emunic_req *q);
/* counters taken and given back */
int rndv_ct_take(struct emunic_rndv *r, struct rndv_ct *c);
int rndv_ct_rebase(struct rndv_ct *c);
void rndv_ct_give(struct emunic_rndv *r, struct rndv_ct *c);
uint64_t rndv_ct_events(const struct rndv_ct *c, bool *failed);

#endif
