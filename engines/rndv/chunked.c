/* SPDX-License-Identifier: MIT */
/*
 * Messages through the slots: eager (seed 000, III.A: the whole message in
 * the slot) and the chunked receiver-driven rendezvous (seed 004, 3.2-3.3),
 * in one place:
 *   isend       header + first chunk staged and put into the receiver's slot
 *               for this sequence number, triggered on the receiver's credit
 *               counter (the slot is free once the receiver freed the one
 *               `slots` messages earlier), so a full ring waits on the core
 *               (flow control: slots.c); RTR-protocol sends go to rtr.c;
 *   arrival     (handler on the receiver's progress core) matched against
 *               posted receives; no match: the first chunk is copied out so
 *               the slot returns at once (or, with HOLD_SLOTS, stays in its
 *               slot until received); the free is reported to the sender;
 *   start_recv  first chunk copied, then gets of `chunk` bytes: the first c
 *               at once, get c + i triggered by the receive counter reaching
 *               i + 1; each get's completion notifies the sender's counting
 *               entry, so the sender is done when put + gets are counted;
 *   refill      long messages keep at most RNDV_TRIG_WINDOW triggers posted,
 *               more are posted (on the core) as gets complete.
 */
#include "engines/rndv/rndv_int.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sender and receiver count gets alike: by the sender's chunk size,
 * which travels in the header (so endpoints need not agree on it). */
static uint64_t ngets_of(uint64_t chunk, uint64_t total, uint64_t first)
{
	if (total <= first)
		return 0;
	if (chunk == SIZE_MAX)
		return 1;
	return (total - first + chunk - 1) / chunk;
}

static uint8_t chunk_shift(const struct emunic_rndv *r)
{
	uint8_t s = 0;

	if (r->attr.chunk == SIZE_MAX)
		return 0;
	while (s < 24 && (r->attr.chunk >> (s + 1)) << (s + 1) == r->attr.chunk)
		s++;
	return s;
}

/* ---- send ------------------------------------------------------------------------- */

static int send_check(struct emunic_rndv *r, const void *buf, size_t len, int dst, int tag)
{
	uint64_t units;

	if (match_check_send(&r->m, dst, tag) || dst == r->rank) {
		fprintf(stderr, "emunic: rank %d: isend to rank %d tag %d: %s\n", r->rank, dst, tag,
			dst == r->rank ? "sending to itself is not supported" :
			dst < 0 || dst >= r->size ? "no such rank" : "the tag is negative or above EMUNIC_TAG_MAX");
		return -EINVAL;
	}
	units = ngets_of(r->attr.chunk, len, r->attr.first) * (r->attr.chunk == SIZE_MAX ? 0 : r->attr.chunk >> chunk_shift(r));
	if ((len && !buf) || len > UINT32_MAX || units > 65536) {
		fprintf(stderr, "emunic: rank %d: isend of %zu bytes to rank %d: %s\n", r->rank, len, dst,
			len && !buf ? "no buffer" : "too large (4 GiB - 1, and 65536 chunks)");
		return -EINVAL;
	}
	return 0;
}

int rndv_start_send(struct emunic_rndv *r, struct emunic_req *q)
{
	struct rndv_peer *pe = &r->peer[q->peer];
	struct emunic_qp *qp = rndv_peer_qp(r, q->peer);
	size_t nfirst = q->len < r->attr.first ? q->len : r->attr.first;
	struct rndv_stage *s = q->stage;
	struct emunic_rkey rk = q->mr ? emunic_mr_rkey(q->mr) : (struct emunic_rkey){ 0 };
	/* Slot seq % slots is free once the receiver reported seq - slots freed. */
	bool goes_now = q->seq < r->attr.slots + pe->acked_seen;
	struct emunic_op op;
	int e;

	if (!qp)
		return -EIO;
	*s->hdr = (struct rndv_hdr){
		.match_bits = (uint64_t)r->attr.ctx << 32 | (uint32_t)q->tag, .seq = q->seq, .total = q->len,
		.src_addr = rk.addr + nfirst, .src_rkey = rk.rkey, .src_le = emunic_le_target(s->le).id,
		.src_shift = chunk_shift(r), .first = (uint32_t)nfirst, .src_rank = r->rank, .chunk = r->attr.chunk,
		.acked = pe->freed,
	};
	memcpy(s->hdr + 1, q->buf, nfirst);
	op = (struct emunic_op){
		.kind = EMUNIC_OP_PUT, .qp = qp, .addr = s->hdr, .len = sizeof(*s->hdr) + nfirst,
		.mr = r->staging_mr, .target = pe->card.bounce,
		.offset = (q->seq % r->attr.slots) * r->slot_size, .ct = s->c.ct, .user = (uintptr_t)q,
	};
	e = rndv_ct_rebase(&s->c);
	if (!e)
		e = emunic_trig_post(r->dev, &op, pe->credit_ct,
				     q->seq >= r->attr.slots ? q->seq - r->attr.slots + 1 : 0);
	if (e)
		return e;
	rndv_piggyback(r, q->peer, goes_now);
	q->c = s->c;
	q->started = true;
	r->stats.slot_waits += !goes_now;
	r->stats.eager += q->len <= r->attr.first;
	rndv_req_moved(q, REQ_GETTING);
	return 0;
}

int emunic_isend(struct emunic_rndv *r, const void *buf, size_t len, int dst, int tag, struct emunic_req **out)
{
	size_t nfirst;
	struct emunic_req *q;
	struct rndv_stage *s;
	int e;

	if (!r || !out)
		return -EINVAL;
	e = send_check(r, buf, len, dst, tag);
	if (e)
		return e;
	nfirst = len < r->attr.first ? len : r->attr.first;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->r = r;
	q->kind = REQ_SEND;
	q->peer = dst;
	q->tag = tag;
	q->buf = (char *)buf;
	q->len = len;
	q->st = (struct emunic_status){ .source = r->rank, .tag = tag, .len = len, .total = len };
	atomic_store(&q->state, REQ_POSTED);
	if (len > nfirst) {
		e = emunic_mr_reg(r->dev, (void *)buf, len, &q->mr);
		if (e) {
			free(q);
			return e;
		}
	}
	pthread_mutex_lock(&r->lock);
	rndv_flush(r);
	s = r->free_stages;
	if (!s) {
		pthread_mutex_unlock(&r->lock);
		fprintf(stderr, "emunic: rank %d: isend to rank %d: %u sends and RTR receives in flight (max_sends); "
			"test or wait some first\n", r->rank, dst, r->attr.max_sends);
		e = -ENOSPC;
		goto fail;
	}
	q->stage = s;
	q->c = s->c;
	if (rndv_is_rtr(r, len)) {
		e = rndv_rtr_isend(r, q);
	} else {
		q->seq = r->peer[dst].send_seq++;
		q->need = 1 + ngets_of(r->attr.chunk, len, nfirst);
		/* seed 000 without test-on-init: the first test starts it. */
		e = r->attr.progress == EMUNIC_PROGRESS_TEST ? 0 : rndv_start_send(r, q);
		if (!e && !q->started)
			rndv_host_add(r, q);
		if (e)
			r->peer[dst].send_seq--;	/* nothing went: the sequence has no gap */
		else
			rndv_peer_qp(r, dst);		/* the first message makes the connection */
	}
	if (e) {
		pthread_mutex_unlock(&r->lock);
		goto fail;
	}
	r->free_stages = s->next;
	r->live_reqs++;
	r->stats.sends++;
	rndv_wake_posted(r);		/* its start may have matched a waited RTR */
	pthread_mutex_unlock(&r->lock);
	if (q->rtr && r->attr.progress == EMUNIC_PROGRESS_WAIT_ON_SEND)
		rndv_wait_on_send(q);
	*out = q;
	return 0;
fail:
	if (q->mr)
		emunic_mr_dereg(q->mr);
	free(q);
	return e;
}

/* ---- receive ------------------------------------------------------------------------ */

/* Posts the gets that may be posted now: the first `credits` untriggered,
 * later ones triggered, at most RNDV_TRIG_WINDOW ahead of completions. */
static void post_gets(struct emunic_rndv *r, struct emunic_req *q)
{
	const struct rndv_hdr *h = &q->hdr;
	uint64_t rest = h->total - h->first, chunk = h->chunk == SIZE_MAX ? rest : h->chunk;
	unsigned c = r->attr.credits;
	bool failed;
	uint64_t done = rndv_ct_events(&q->c, &failed);

	if (failed) {		/* stop: what was posted is what will be counted */
		q->ngets = q->need = q->next_get;
		return;
	}
	struct emunic_target t = { .addr = h->src_addr, .len = rest, .rkey = h->src_rkey, .id = h->src_le,
				   .shift = h->src_shift };

	while (q->next_get < q->ngets && q->next_get < done + c + RNDV_TRIG_WINDOW) {
		uint64_t i = q->next_get, off = i * chunk, rlen = rest - off < chunk ? rest - off : chunk;
		uint64_t at = h->first + off, llen = q->len > at ? (q->len - at < rlen ? q->len - at : rlen) : 0;
		struct emunic_op op = {
			.kind = EMUNIC_OP_GET, .qp = rndv_peer_qp(r, q->peer), .addr = q->buf + (llen ? at : 0),
			.len = llen, .mr = llen ? q->mr : NULL, .target = t, .offset = off, .ct = q->c.ct,
			/* Each completion may post what a full table refused. */
			.eq = r->refill, .user = (uintptr_t)q,
		};
		int e = i < c ? emunic_op_post(r->dev, &op)
			      : emunic_trig_post(r->dev, &op, q->c.ct, q->c.base + (i - c + 1));

		if (e == -ENOSPC)
			return;		/* again on the next completion or test */
		if (e) {
			/* Done when what was posted is counted; one failure
			 * counted on the receive wakes its waiters. */
			q->st.error = -EIO;
			q->ngets = q->need = q->next_get;
			emunic_ct_inc(q->c.ct, (struct emunic_ct_val){ 0, 1 });
			q->need++;
			return;
		}
		q->next_get++;
		r->stats.gets++;
	}
}

int rndv_start_recv(struct emunic_rndv *r, struct emunic_req *q, const struct rndv_hdr *h, int peer,
		    const char *data)
{
	q->peer = peer;
	q->hdr = *h;
	q->st.source = peer;
	q->st.tag = (int)(uint32_t)h->match_bits;
	q->st.total = h->total;
	q->st.len = h->total < q->len ? h->total : q->len;
	if (h->total > q->len)
		q->st.error = -EMSGSIZE;	/* what fits is delivered */
	memcpy(q->buf, data, h->first < q->len ? h->first : q->len);
	if (!h->chunk || (h->chunk != SIZE_MAX && (h->chunk & (h->chunk - 1)))) {
		fprintf(stderr, "emunic: rank %d: message from rank %d has chunk size %llu: not a power of two; "
			"its gets are not made\n", r->rank, peer, (unsigned long long)h->chunk);
		q->st.error = -EIO;
		rndv_req_moved(q, REQ_DONE);
		return 0;
	}
	q->ngets = ngets_of(h->chunk, h->total, h->first);
	q->need = q->ngets;
	if (!q->ngets) {
		rndv_req_moved(q, REQ_DONE);
		return 0;
	}
	rndv_req_moved(q, REQ_GETTING);
	post_gets(r, q);
	return 0;
}

/* A receive takes a message that waited for it; its slot (HOLD_SLOTS) or
 * its copy goes. */
static void take_arrival(struct emunic_rndv *r, struct emunic_req *q, struct rndv_arrival *a)
{
	rndv_start_recv(r, q, &a->hdr, a->peer, a->data);
	if (a->held)
		rndv_slot_free(r, a->peer, a->hdr.seq);
	else
		free(a->data);
	free(a);
}

int emunic_irecv(struct emunic_rndv *r, void *buf, size_t len, int src, int tag, struct emunic_req **out)
{
	struct match_entry *hit = NULL;
	struct emunic_req *q;
	bool rtr;
	int e;

	if (!r || !out)
		return -EINVAL;
	rtr = rndv_is_rtr(r, len);
	if (match_check_recv(&r->m, src, tag) || (len && !buf) || (rtr && src == MATCH_ANY)) {
		fprintf(stderr, "emunic: rank %d: irecv of %zu bytes from rank %d tag %d: %s\n", r->rank, len, src, tag,
			len && !buf ? "no buffer" : src != MATCH_ANY && (src < 0 || src >= r->size) ? "no such rank"
			: rtr && src == MATCH_ANY ? "an RTR receive (longer than the eager limit) must name its source"
			: "the tag is negative (other than EMUNIC_ANY_TAG) or above EMUNIC_TAG_MAX");
		return -EINVAL;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->r = r;
	q->kind = REQ_RECV;
	q->buf = buf;
	q->len = len;
	q->tag = tag;
	q->me = (struct match_entry){ .src = src, .tag = tag, .ctx = r->attr.ctx, .owner = q };
	atomic_store(&q->state, REQ_POSTED);
	e = len > r->attr.first ? emunic_mr_reg(r->dev, buf, len, &q->mr) : 0;
	if (!e)
		e = rndv_ct_take(r, &q->c);
	pthread_mutex_lock(&r->lock);
	if (!e && rtr)
		e = rndv_rtr_irecv(r, q);
	else if (!e)
		e = match_post(&r->m, &q->me, &hit);
	if (e < 0) {
		pthread_mutex_unlock(&r->lock);
		rndv_ct_give(r, &q->c);
		if (q->mr)
			emunic_mr_dereg(q->mr);
		free(q);
		return e;
	}
	r->live_reqs++;
	r->stats.recvs++;
	if (hit) {		/* it came first: its first chunk waits in memory */
		r->stats.unexpected++;
		take_arrival(r, q, hit->owner);
	}
	/* seed 002: a receive from any source connects to every peer. */
	for (int p = 0; src == MATCH_ANY && p < r->size; p++)
		if (p != r->rank)
			rndv_peer_qp(r, p);
	rndv_flush(r);
	pthread_mutex_unlock(&r->lock);
	*out = q;
	return 0;
}

/* ---- on the progress core ---------------------------------------------------------- */

struct arrival_ctx {
	struct emunic_rndv *r;
	struct rndv_arrival *cur;
	bool cur_matched;
};

static void on_match(void *arg, struct match_entry *recv, struct match_entry *msg)
{
	struct arrival_ctx *x = arg;
	struct rndv_arrival *a = msg->owner;

	x->r->stats.expected += a == x->cur;
	x->r->stats.unexpected += a != x->cur;
	if (a != x->cur) {
		take_arrival(x->r, recv->owner, a);
		return;
	}
	rndv_start_recv(x->r, recv->owner, &a->hdr, a->peer, a->data);
	x->cur_matched = true;	/* its slot is freed by the caller */
}

void rndv_on_arrival(void *arg, const struct emunic_event *ev)
{
	struct emunic_rndv *r = arg;
	struct arrival_ctx x = { .r = r };
	struct rndv_arrival *a;
	const char *slot;
	int e;

	if (ev->kind != EMUNIC_EV_PUT || ev->status || ev->peer < 0 || ev->peer >= r->size ||
	    ev->offset % r->slot_size || ev->offset >= (uint64_t)r->attr.slots * r->slot_size ||
	    ev->length < sizeof(struct rndv_hdr) - 16 ||
	    ev->hdr_data % r->attr.slots != ev->offset / r->slot_size) {
		fprintf(stderr, "emunic: rank %d: a malformed first chunk from rank %d (offset %llu, %llu bytes): "
			"dropped\n", r->rank, ev->peer, (unsigned long long)ev->offset, (unsigned long long)ev->length);
		return;
	}
	slot = r->peer[ev->peer].bounce + ev->offset;
	a = calloc(1, sizeof(*a));
	if (!a) {
		fprintf(stderr, "emunic: rank %d: out of memory for a message from rank %d: dropped\n", r->rank,
			ev->peer);
		return;
	}
	memcpy(&a->hdr, slot, sizeof(a->hdr));
	if (a->hdr.first > r->attr.first || a->hdr.first > a->hdr.total)
		a->hdr.first = 0;	/* a peer with other attributes: never read past the slot */
	a->peer = ev->peer;
	a->data = (char *)slot + sizeof(a->hdr);
	a->me = (struct match_entry){ .src = ev->peer, .tag = (int)(uint32_t)a->hdr.match_bits,
				      .ctx = (uint32_t)(a->hdr.match_bits >> 32), .seq = a->hdr.seq, .owner = a };
	x.cur = a;
	pthread_mutex_lock(&r->lock);
	rndv_acked(r, ev->peer, a->hdr.acked);
	e = match_arrive(&r->m, &a->me, on_match, &x);
	if (e == -EALREADY) {
		/* The transport delivered it twice: the first copy stands. */
		fprintf(stderr, "emunic: rank %d: a second copy of message seq %llu from rank %d: dropped\n", r->rank,
			(unsigned long long)a->hdr.seq, ev->peer);
		emunic_ev_duplicate(r->dev, ev);
		free(a);
	} else if (e < 0) {
		fprintf(stderr, "emunic: rank %d: message seq %llu from rank %d refused by matching (%s)\n", r->rank,
			(unsigned long long)a->hdr.seq, ev->peer, strerror(-e));
		free(a);
	} else if (x.cur_matched) {
		rndv_slot_free(r, ev->peer, a->hdr.seq);
		free(a);
	} else if (r->attr.flags & EMUNIC_RNDV_HOLD_SLOTS) {
		a->held = true;		/* the slot is its buffer until a receive takes it */
	} else {		/* waits for a receive: keep the data, free the slot */
		char *copy = malloc(a->hdr.first ? a->hdr.first : 1);

		if (copy) {
			memcpy(copy, a->data, a->hdr.first);
		} else {
			fprintf(stderr, "emunic: rank %d: out of memory keeping the first %u bytes of a message from "
				"rank %d: the receive will get them as zeros\n", r->rank, a->hdr.first, ev->peer);
			a->hdr.first = 0;
		}
		a->data = copy;
		rndv_slot_free(r, ev->peer, a->hdr.seq);
	}
	rndv_flush(r);
	pthread_mutex_unlock(&r->lock);
}

void rndv_on_refill(void *arg, const struct emunic_event *ev)
{
	struct emunic_rndv *r = arg;
	struct emunic_req *q = (struct emunic_req *)(uintptr_t)ev->user;

	pthread_mutex_lock(&r->lock);
	if (atomic_load(&q->state) == REQ_GETTING && q->next_get < q->ngets)
		post_gets(r, q);
	rndv_flush(r);
	pthread_mutex_unlock(&r->lock);
}

static void host_progress(struct emunic_rndv *r)
{
	for (struct emunic_req *q = r->host, *nx; q; q = nx) {
		nx = q->next_host;
		if (!q->rtr)
			rndv_start_send(r, q);
		else
			rndv_rtr_answer(r, q);
		if (q->started || atomic_load(&q->state) == REQ_DONE)
			rndv_host_remove(r, q);
	}
	for (int p = 0; p < r->size; p++)
		for (struct emunic_req *w = r->peer[p].rtr_wait; w; w = w->next_owed)
			w->rtr_matched = true;	/* on a receive: may be announced */
}

void rndv_progress_req(struct emunic_rndv *r, struct emunic_req *q)
{
	if (r->attr.progress != EMUNIC_PROGRESS_CORE)
		host_progress(r);
	if (q->kind == REQ_RECV && atomic_load(&q->state) == REQ_GETTING && q->next_get < q->ngets)
		post_gets(r, q);
	rndv_flush(r);
}
