/* SPDX-License-Identifier: MIT */
/*
 * The rendezvous endpoint: a TRIGGERED QP to every peer (at create, or at
 * first use under ON_DEMAND); per peer, in one registered region: bounce
 * slots for its messages (a list entry whose events a handler on the progress
 * core takes), a ring for its RTRs, landing slots for its RTR answers and an
 * ack word; a credit counter per peer (slots it freed of ours); and a pool of
 * send stages (header + first chunk, registered once).
 */
#include "engines/rndv/rndv_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void emunic_rndv_attr_init(struct emunic_rndv_attr *a)
{
	*a = (struct emunic_rndv_attr){ .first = 4096, .chunk = 65536, .credits = 4, .slots = 64,
					 .max_sends = 256, .connect_timeout_ms = 30000, .wait_on_send_us = 200,
					 .reconnects = 4, .recheck_ms = 20 };
}

static const char *const proto_names[] = { [EMUNIC_RNDV_CHUNKED] = "chunked", [EMUNIC_RNDV_RTR] = "rtr" };
static const char *const progress_names[] = {
	[EMUNIC_PROGRESS_CORE] = "core", [EMUNIC_PROGRESS_TEST] = "test",
	[EMUNIC_PROGRESS_TEST_ON_INIT] = "test-on-init", [EMUNIC_PROGRESS_WAIT_ON_SEND] = "wait-on-send",
};

const char *emunic_rndv_proto_str(unsigned proto)
{
	return proto < 2 ? proto_names[proto] : "?";
}

const char *emunic_rndv_progress_str(unsigned progress)
{
	return progress < 4 ? progress_names[progress] : "?";
}

static int parse_name(const char *s, const char *const *names, unsigned n, unsigned *out)
{
	for (unsigned i = 0; s && i < n; i++)
		if (!strcmp(s, names[i])) {
			*out = i;
			return 0;
		}
	return -EINVAL;
}

int emunic_rndv_proto_parse(const char *s, unsigned *out)
{
	return parse_name(s, proto_names, 2, out);
}

int emunic_rndv_progress_parse(const char *s, unsigned *out)
{
	return parse_name(s, progress_names, 4, out);
}

static int fill_defaults(struct emunic_rndv_attr *a)
{
	struct emunic_rndv_attr d;

	emunic_rndv_attr_init(&d);
	if (!a->first)
		a->first = d.first;
	if (!a->chunk)
		a->chunk = d.chunk;
	if (!a->credits)
		a->credits = d.credits;
	if (!a->slots)
		a->slots = d.slots;
	if (!a->max_sends)
		a->max_sends = d.max_sends;
	if (!a->connect_timeout_ms)
		a->connect_timeout_ms = d.connect_timeout_ms;
	if (!a->wait_on_send_us)
		a->wait_on_send_us = d.wait_on_send_us;
	if (!a->recheck_ms)
		a->recheck_ms = d.recheck_ms;
	if (!a->ack_every)
		a->ack_every = a->slots / 2 ? a->slots / 2 : 1;
	if (a->proto > EMUNIC_RNDV_RTR || a->progress > EMUNIC_PROGRESS_WAIT_ON_SEND ||
	    (a->flags & ~(EMUNIC_RNDV_ON_DEMAND | EMUNIC_RNDV_HOLD_SLOTS)) || a->ack_every > a->slots ||
	    a->reconnect_timeout_ms < 0 || a->recheck_ms < 0) {
		fprintf(stderr, "emunic: rndv: proto %u, progress %u, flags %#x, ack_every %u (<= slots %u) or "
			"recheck_ms %d not valid\n", a->proto, a->progress, a->flags, a->ack_every, a->slots,
			a->recheck_ms);
		return -EINVAL;
	}
	/* A get's offset travels in 16 bits of the chunk's largest power of
	 * two; slot offsets in 16 bits of 64-byte units. */
	size_t slot = (64 + a->first + RNDV_UNIT - 1) & ~(size_t)(RNDV_UNIT - 1);

	if (a->first > (1u << 20) || a->slots > 4096 || a->max_sends > 65536 ||
	    (((size_t)a->slots - 1) * slot >> RNDV_UNIT_SHIFT) > 0xffff ||
	    (a->chunk != SIZE_MAX && (a->chunk & (a->chunk - 1))) || a->credits > 4096) {
		fprintf(stderr, "emunic: rndv: first %zu (<= 1 MiB), chunk %zu (a power of two or SIZE_MAX), credits %u "
			"(<= 4096), slots %u (<= 4096; slots x slot size <= 4 MiB) or max_sends %u not valid\n", a->first, a->chunk, a->credits,
			a->slots, a->max_sends);
		return -EINVAL;
	}
	return 0;
}

/* ---- create / destroy ----------------------------------------------------------- */

/* An entry that only counts (credits, gets served): what peers read or
 * write is elsewhere, so they all share one tiny buffer. */
static int counting_entry(struct emunic_rndv *r, struct emunic_ct *ct, struct emunic_le **out)
{
	struct emunic_le_attr la = { .mr = r->region_mr, .addr = r->region + r->region_len - RNDV_UNIT,
				     .len = RNDV_UNIT, .ct = ct };

	return emunic_le_create(r->dev, &la, out);
}

static int entry(struct emunic_rndv *r, void *addr, size_t len, unsigned flags, unsigned shift,
		 struct emunic_eq *eq, struct emunic_le **out)
{
	struct emunic_le_attr la = { .mr = r->region_mr, .addr = addr, .len = len, .flags = flags, .shift = shift,
				     .eq = eq };

	return emunic_le_create(r->dev, &la, out);
}

static int make_peer(struct emunic_rndv *r, int p, struct rndv_card *mine)
{
	struct rndv_peer *pe = &r->peer[p];
	unsigned n = r->attr.slots;
	char *base = r->region + (size_t)p * r->peer_len;
	int e;

	pe->bounce = base;
	pe->rtr_ring = pe->bounce + (size_t)n * r->slot_size;
	pe->landing = pe->rtr_ring + (size_t)n * sizeof(struct rndv_rtr);
	pe->ack_in = pe->landing + (((size_t)n * sizeof(struct rndv_landing) + RNDV_UNIT - 1) & ~(size_t)(RNDV_UNIT - 1));
	pe->ack_out = pe->ack_in + RNDV_UNIT;
	pe->slot_done = calloc(n, 1);
	pe->landing_req = calloc(n, sizeof(*pe->landing_req));
	pe->landing_free = calloc(n, sizeof(*pe->landing_free));
	if (!pe->slot_done || !pe->landing_req || !pe->landing_free)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		pe->landing_free[pe->nlanding_free++] = (uint16_t)(n - 1 - i);
	if (!(r->attr.flags & EMUNIC_RNDV_ON_DEMAND) && !rndv_peer_qp(r, p))
		return -EIO;
	e = entry(r, pe->bounce, (size_t)n * r->slot_size, EMUNIC_LE_HDR, RNDV_UNIT_SHIFT, r->arrivals,
		  &pe->bounce_le);
	if (!e)
		e = entry(r, pe->ack_in, 16, EMUNIC_LE_HDR, 0, r->acks, &pe->ack_le);
	if (!e)
		e = entry(r, pe->rtr_ring, (size_t)n * sizeof(struct rndv_rtr), 0, RNDV_UNIT_SHIFT, r->rtrs,
			  &pe->rtr_le);
	if (!e)
		e = entry(r, pe->landing, (size_t)n * sizeof(struct rndv_landing), 0, RNDV_LANDING_SHIFT,
			  r->landed, &pe->landing_le);
	if (!e)
		e = emunic_ct_alloc(r->dev, &pe->credit_ct);
	if (e)
		return e;
	mine->bounce = emunic_le_target(pe->bounce_le);
	mine->ack = emunic_le_target(pe->ack_le);
	mine->rtr = emunic_le_target(pe->rtr_le);
	mine->landing = emunic_le_target(pe->landing_le);
	return 0;
}

static int make_stages(struct emunic_rndv *r)
{
	size_t len = (size_t)r->attr.max_sends * r->slot_size;
	int e;

	r->staging = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	r->stages = calloc(r->attr.max_sends, sizeof(*r->stages));
	if (!r->staging || !r->stages)
		return -ENOMEM;
	memset(r->staging, 0, len);
	e = emunic_mr_reg(r->dev, r->staging, len, &r->staging_mr);
	for (unsigned i = 0; !e && i < r->attr.max_sends; i++) {
		struct rndv_stage *s = &r->stages[i];

		s->hdr = (struct rndv_hdr *)(r->staging + (size_t)i * r->slot_size);
		e = rndv_ct_take(r, &s->c);
		if (e)
			break;
		e = counting_entry(r, s->c.ct, &s->le);
		s->next = r->free_stages;
		r->free_stages = s;
	}
	return e;
}

/* Messages that came and were never received. */
static void drop_unreceived(struct emunic_rndv *r)
{
	struct match_entry *e;

	while ((e = r->m.unexpected.head)) {
		struct rndv_arrival *a = e->owner;

		r->m.unexpected.head = e->next;
		if (!a->held)
			free(a->data);
		free(a);
	}
	for (int p = 0; r->m.early && p < r->size; p++)
		while ((e = r->m.early[p].head)) {
			struct rndv_arrival *a = e->owner;

			r->m.early[p].head = e->next;
			if (!a->held)
				free(a->data);
			free(a);
		}
	/* RTRs no send took: the receiver gave up on them (or they were
	 * for sends never made). */
	for (struct match_entry *x = r->rtr_m.posted.head, *nx; x; x = nx) {
		nx = x->next;
		free(x->owner);
	}
}

static void teardown(struct emunic_rndv *r)
{
	for (unsigned i = 0; r->stages && i < r->attr.max_sends; i++) {
		if (r->stages[i].le)
			emunic_le_destroy(r->stages[i].le);
		if (r->stages[i].c.ct)
			emunic_ct_free(r->stages[i].c.ct);
	}
	for (int p = 0; r->peer && p < r->size; p++) {
		struct rndv_peer *pe = &r->peer[p];

		struct emunic_le *les[] = { pe->bounce_le, pe->ack_le, pe->rtr_le, pe->landing_le };

		for (unsigned i = 0; i < sizeof(les) / sizeof(les[0]); i++)
			if (les[i])
				emunic_le_destroy(les[i]);
		if (pe->credit_ct)
			emunic_ct_free(pe->credit_ct);
		if (pe->qp)
			emunic_qp_destroy(pe->qp);
		free(pe->slot_done);
		free(pe->landing_req);
		free(pe->landing_free);
	}
	while (r->ncts)
		emunic_ct_free(r->cts[--r->ncts].ct);
	if (r->arrivals)
		emunic_eq_destroy(r->arrivals);
	struct emunic_eq *eqs[] = { r->refill, r->acks, r->rtrs, r->landed };

	for (unsigned i = 0; i < sizeof(eqs) / sizeof(eqs[0]); i++)
		if (eqs[i])
			emunic_eq_destroy(eqs[i]);
	if (r->moved)			/* after the handlers that bump it */
		emunic_ct_free(r->moved);
	if (r->staging_mr)
		emunic_mr_dereg(r->staging_mr);
	if (r->region_mr)
		emunic_mr_dereg(r->region_mr);
	drop_unreceived(r);
	match_fini(&r->m);
	match_fini(&r->rtr_m);
	free(r->cts);
	free(r->stages);
	free(r->staging);
	free(r->region);
	free(r->peer);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

int emunic_rndv_create(struct emunic_dev *dev, const struct emunic_rndv_attr *attr, struct emunic_rndv **out)
{
	struct emunic_rndv *r;
	struct rndv_card *mine = NULL, *all = NULL;
	int e;

	if (!dev || !out)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	r->flush = rndv_flush;
	r->dev = dev;
	r->rank = emunic_dev_rank(dev);
	r->size = emunic_dev_size(dev);
	if (attr)
		r->attr = *attr;
	else
		emunic_rndv_attr_init(&r->attr);
	e = fill_defaults(&r->attr);
	if (e) {
		free(r);
		return e;
	}
	r->slot_size = (sizeof(struct rndv_hdr) + r->attr.first + RNDV_UNIT - 1) & ~(size_t)(RNDV_UNIT - 1);
	r->peer_len = (size_t)r->attr.slots * (r->slot_size + sizeof(struct rndv_rtr)) +
		      (((size_t)r->attr.slots * sizeof(struct rndv_landing) + RNDV_UNIT - 1) & ~(size_t)(RNDV_UNIT - 1)) +
		      2 * RNDV_UNIT;
	r->region_len = (size_t)r->size * r->peer_len + RNDV_UNIT;
	r->region = aligned_alloc(4096, (r->region_len + 4095) & ~(size_t)4095);
	r->peer = calloc((size_t)r->size, sizeof(*r->peer));
	mine = calloc((size_t)r->size, sizeof(*mine));
	all = calloc((size_t)r->size * r->size, sizeof(*all));
	e = !r->region || !r->peer || !mine || !all ? -ENOMEM : match_init(&r->m, r->size);
	if (!e)
		e = match_init(&r->rtr_m, r->size);
	/* Peers' RDMA writes land here unseen by memcheck: start defined. */
	if (r->region)
		memset(r->region, 0, r->region_len);
	if (!e)
		e = emunic_mr_reg(dev, r->region, r->region_len, &r->region_mr);
	if (!e)
		e = emunic_ct_alloc(dev, &r->moved);
	if (!e)
		e = emunic_eq_create(dev, 0, rndv_on_arrival, r, &r->arrivals);
	if (!e)
		e = emunic_eq_create(dev, 0, rndv_on_refill, r, &r->refill);
	if (!e)
		e = emunic_eq_create(dev, 0, rndv_on_ack, r, &r->acks);
	if (!e)
		e = emunic_eq_create(dev, 0, rndv_on_rtr, r, &r->rtrs);
	if (!e)
		e = emunic_eq_create(dev, 0, rndv_on_landed, r, &r->landed);
	if (!e && (r->attr.flags & EMUNIC_RNDV_ON_DEMAND)) {
		struct emunic_qp_attr qa;

		rndv_peer_qp_attr(r, &qa);
		e = emunic_qp_accept_on_demand(dev, &qa);
	}
	for (int p = 0; !e && p < r->size; p++)
		if (p != r->rank)
			e = make_peer(r, p, &mine[p]);
	if (!e)
		e = make_stages(r);
	/* Everyone takes part in the exchange, failed or not, so no rank
	 * waits forever for one that gave up. */
	if (emunic_dev_allgather(dev, mine, (size_t)r->size * sizeof(*mine), all) && !e)
		e = -EIO;
	for (int p = 0; !e && p < r->size; p++) {
		if (p == r->rank)
			continue;
		r->peer[p].card = all[(size_t)p * r->size + r->rank];
		if (!r->peer[p].card.bounce.id)
			e = -EIO;	/* that rank failed to set up */
		else if (r->peer[p].qp)
			e = emunic_qp_wait_connected(r->peer[p].qp, r->attr.connect_timeout_ms);
	}
	free(mine);
	free(all);
	if (e) {
		fprintf(stderr, "emunic: rank %d: rndv_create failed (%s)\n", r->rank, strerror(-e));
		teardown(r);
		return e;
	}
	*out = r;
	return 0;
}

int emunic_rndv_destroy(struct emunic_rndv *r)
{
	if (!r)
		return -EINVAL;
	pthread_mutex_lock(&r->lock);
	if (r->live_reqs) {
		pthread_mutex_unlock(&r->lock);
		fprintf(stderr, "emunic: rank %d: rndv_destroy: %u request(s) not freed\n", r->rank, r->live_reqs);
		return -EBUSY;
	}
	pthread_mutex_unlock(&r->lock);
	/* No peer may still be sending to slots we are about to free. */
	emunic_dev_barrier(r->dev);
	teardown(r);
	return 0;
}

int emunic_rndv_stats(struct emunic_rndv *r, struct emunic_rndv_stats *st)
{
	if (!r || !st)
		return -EINVAL;
	pthread_mutex_lock(&r->lock);
	*st = r->stats;
	st->reconnects = 0;
	for (int p = 0; p < r->size; p++)
		if (r->peer[p].qp)
			st->reconnects += emunic_qp_reconnects(r->peer[p].qp);
	match_stats(&r->m, &st->posted, &st->queued, NULL);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

int emunic_rndv_connected(struct emunic_rndv *r, int peer)
{
	int up;

	if (!r || peer < 0 || peer >= r->size || peer == r->rank)
		return -EINVAL;
	pthread_mutex_lock(&r->lock);
	up = r->peer[peer].qp && emunic_qp_connected(r->peer[peer].qp);
	pthread_mutex_unlock(&r->lock);
	return up;
}
