/* SPDX-License-Identifier: MIT */
/*
 * Private to engines/rndv: MPI message matching shared by the chunked and the
 * eager/RTR rendezvous engines.  Pure bookkeeping: no RDMA, no locks (the
 * engine calls it under its own lock), no allocation after match_init (queue
 * links are embedded in the engine's records).
 *
 * Rule: receive (rs, rt, rctx) matches message (s, t, ctx) iff rctx == ctx
 * and rs is MATCH_ANY or s, and rt is MATCH_ANY or t.  Receives match in
 * posting order, messages in arrival order, and messages from one source in
 * their send order (non-overtaking): a message that arrives ahead of its
 * sequence number is held until the ones before it have arrived.
 */
#ifndef EMUNIC_RNDV_MATCH_H
#define EMUNIC_RNDV_MATCH_H

#include <stddef.h>
#include <stdint.h>

#define MATCH_ANY (-1)			/* src or tag wildcard (receives only) */
#define MATCH_TAG_MAX 0x3fffffff	/* tags are 0..MATCH_TAG_MAX */

/* Intrusive: embedded in an engine's request or arrival record.  The caller
 * fills src, tag, ctx, seq and owner; next and prev belong to match while the
 * entry is in one of its queues. */
struct match_entry {
	struct match_entry *next, *prev;
	int src, tag;			/* receive: may be MATCH_ANY; message: concrete */
	uint32_t ctx;			/* communicator context: must be equal to match */
	uint64_t seq;			/* message: per-source sequence number, from 0 */
	void *owner;			/* the engine's object; match never touches it */
};

/* FIFO, doubly linked and NULL-terminated, so removal is O(1). */
struct match_queue {
	struct match_entry *head, *tail;
	size_t len;
};

/* Totals since match_init, for the engines' stats.  Read them directly. */
struct match_counters {
	uint64_t posted;		/* receives accepted by match_post */
	uint64_t arrived;		/* messages accepted by match_arrive (not duplicates) */
	uint64_t matched_on_post;	/* a posted receive found an unexpected message */
	uint64_t matched_on_arrival;	/* a message found a posted receive */
	uint64_t held;			/* messages that arrived ahead of their seq */
	uint64_t duplicates;		/* arrivals refused with -EALREADY */
	uint64_t canceled;		/* receives removed by match_cancel */
};

struct match_state {
	int nranks;
	struct match_queue posted;	/* receives, in posting order */
	struct match_queue unexpected;	/* in-order messages no receive took yet */
	uint64_t *next_seq;		/* by source: the seq it may deliver next */
	struct match_queue *early;	/* by source: held messages, ascending seq */
	size_t nheld;			/* sum of early[].len */
	struct match_counters count;
};

/* 0, or -EINVAL (m NULL, nranks < 1), -ENOMEM. */
int match_init(struct match_state *m, int nranks);
/* Frees only what match_init allocated; entries still queued stay the
 * caller's.  m may be NULL or already finished. */
void match_fini(struct match_state *m);

/* 0, or -EINVAL: src not in [0, nranks) and not ANY; tag negative and not
 * ANY, or > MATCH_TAG_MAX. */
int match_check_recv(const struct match_state *m, int src, int tag);
/* 0, or -EINVAL: dst not in [0, nranks), tag not in [0, MATCH_TAG_MAX]. */
int match_check_send(const struct match_state *m, int dst, int tag);

/* A receive is posted (r must not be in any queue): searches the unexpected
 * queue in arrival order for the first message it matches.  Found: removes
 * it, *matched = it, returns 1.  Not found: appends r to the posted queue,
 * *matched = NULL, returns 0.  -EINVAL on bad args (nothing changes). */
int match_post(struct match_state *m, struct match_entry *r, struct match_entry **matched);

/* Called for each (receive, message) pair as it matches, both already out
 * of every queue.  It must not call back into the same match_state. */
typedef void match_fn(void *arg, struct match_entry *recv, struct match_entry *msg);

/* A message arrives from msg->src with msg->seq (msg must not be in any
 * queue).  seq == next expected: matched now against the posted queue in
 * posting order (first match wins), else queued as unexpected; then the held
 * messages from that source that are now in order are processed the same
 * way.  seq > next expected: held until the gap fills (returns 0).  seq <
 * next expected, or a seq already held: a duplicate, -EALREADY, nothing
 * changes.  on_match(arg, recv, msg) is called for every pair matched in this
 * call, in order.  Returns the number of matches made, or -EINVAL (NULL
 * m/msg/on_match, or msg's src/tag fails match_check_send). */
int match_arrive(struct match_state *m, struct match_entry *msg, match_fn *on_match, void *arg);

/* Removes a posted receive that has not matched: 0, -ENOENT if it is not in
 * the posted queue, -EINVAL on NULL. */
int match_cancel(struct match_state *m, struct match_entry *r);

/* Removes an unexpected message that no receive has taken (its sender gave
 * up on it): 0, -ENOENT if it is not in the unexpected queue, -EINVAL on NULL. */
int match_withdraw(struct match_state *m, struct match_entry *msg);

/* First unexpected message that a receive (src, tag, ctx) would match,
 * without removing it; NULL if none or if (src, tag) is invalid.  Held
 * messages are not visible: a receive could not take them yet either. */
struct match_entry *match_probe(const struct match_state *m, int src, int tag, uint32_t ctx);

/* Lengths of the two queues and the messages held for order; any pointer
 * may be NULL.  A NULL m reads as empty. */
void match_stats(const struct match_state *m, size_t *posted, size_t *unexpected, size_t *held);

#endif
