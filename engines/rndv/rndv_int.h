/* SPDX-License-Identifier: MIT */
/* Private to engines/rndv: the endpoint, its peers, requests and the wire header. */
#ifndef EMUNIC_RNDV_INT_H
#define EMUNIC_RNDV_INT_H

#include <pthread.h>
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
	uint64_t pad2;
};
_Static_assert(sizeof(struct rndv_hdr) == 64, "the header is one unit");

/* What a peer needs from this rank, exchanged at create. */
struct rndv_card {
	struct emunic_target bounce;	/* my slots for messages from that peer */
	struct emunic_target credit;	/* counts slots that peer freed of mine */
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
	struct rndv_hdr hdr;
	char *data;			/* copy of the first chunk (hdr.first bytes) */
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
};

struct rndv_peer {
	struct emunic_qp *qp;
	char *bounce;			/* slots for messages from this peer */
	struct emunic_le *bounce_le;
	struct emunic_ct *credit_ct;	/* slots the peer freed of mine */
	struct emunic_le *credit_le;
	struct rndv_card card;		/* the peer's, for sending to it */
	uint64_t send_seq;		/* app (lock) */
	uint64_t freed;			/* core: slots of this peer consumed */
	uint64_t credits_owed;		/* credit puts that did not post yet */
};

struct emunic_rndv {
	struct emunic_dev *dev;
	struct emunic_rndv_attr attr;
	int rank, size;
	size_t slot_size;
	pthread_mutex_t lock;		/* matching and requests: app and core */
	struct match_state m;
	struct rndv_peer *peer;		/* by rank */
	struct emunic_eq *arrivals;	/* bounce entries' events, handled on the core */
	struct emunic_eq *refill;	/* get completions of long messages, on the core */
	char *region;			/* bounce slots of every peer + tiny credit buffer */
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

/* chunked.c: the protocol */
void rndv_on_arrival(void *arg, const struct emunic_event *ev);
void rndv_on_refill(void *arg, const struct emunic_event *ev);
int rndv_start_recv(struct emunic_rndv *r, struct emunic_req *q, const struct rndv_hdr *h, int peer,
		    const char *data);
void rndv_flush_credits(struct emunic_rndv *r);
/* What a test may still have to push: gets a full table refused, credits. */
void rndv_progress_req(struct emunic_rndv *r, struct emunic_req *q);

/* endpoint.c: counters taken and given back */
int rndv_ct_take(struct emunic_rndv *r, struct rndv_ct *c);
int rndv_ct_rebase(struct rndv_ct *c);
void rndv_ct_give(struct emunic_rndv *r, struct rndv_ct *c);
uint64_t rndv_ct_events(const struct rndv_ct *c, bool *failed);

#endif
