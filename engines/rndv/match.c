/* SPDX-License-Identifier: MIT */
/*
 * MPI message matching for the rendezvous engines: the posted-receive and
 * unexpected-message queues, and per-source ordering of arrivals (see
 * match.h for the rule).  Searches are linear; every removal is O(1).
 */
#include "engines/rndv/match.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void q_insert_before(struct match_queue *q, struct match_entry *pos, struct match_entry *e)
{
	e->next = pos;
	e->prev = pos ? pos->prev : q->tail;
	if (e->prev)
		e->prev->next = e;
	else
		q->head = e;
	if (pos)
		pos->prev = e;
	else
		q->tail = e;
	q->len++;
}

static void q_append(struct match_queue *q, struct match_entry *e)
{
	q_insert_before(q, NULL, e);
}

static void q_remove(struct match_queue *q, struct match_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		q->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		q->tail = e->prev;
	e->next = e->prev = NULL;
	q->len--;
}

static bool matches(const struct match_entry *r, const struct match_entry *msg)
{
	return r->ctx == msg->ctx && (r->src == MATCH_ANY || r->src == msg->src) &&
	       (r->tag == MATCH_ANY || r->tag == msg->tag);
}

int match_init(struct match_state *m, int nranks)
{
	if (!m || nranks < 1)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	m->next_seq = calloc((size_t)nranks, sizeof(*m->next_seq));
	m->early = calloc((size_t)nranks, sizeof(*m->early));
	if (!m->next_seq || !m->early) {
		match_fini(m);
		return -ENOMEM;
	}
	m->nranks = nranks;
	return 0;
}

void match_fini(struct match_state *m)
{
	if (!m)
		return;
	free(m->next_seq);
	free(m->early);
	/* Zeroed, so a second fini is harmless and any later call sees nranks 0
	 * and fails with -EINVAL instead of touching freed arrays. */
	memset(m, 0, sizeof(*m));
}

static bool tag_ok(int tag)
{
	return tag >= 0 && tag <= MATCH_TAG_MAX;
}

int match_check_recv(const struct match_state *m, int src, int tag)
{
	if (!m || (src != MATCH_ANY && (src < 0 || src >= m->nranks)) || (tag != MATCH_ANY && !tag_ok(tag)))
		return -EINVAL;
	return 0;
}

int match_check_send(const struct match_state *m, int dst, int tag)
{
	if (!m || dst < 0 || dst >= m->nranks || !tag_ok(tag))
		return -EINVAL;
	return 0;
}

static struct match_entry *find_unexpected(const struct match_state *m, const struct match_entry *r)
{
	struct match_entry *e;

	for (e = m->unexpected.head; e && !matches(r, e); e = e->next)
		;
	return e;
}

int match_post(struct match_state *m, struct match_entry *r, struct match_entry **matched)
{
	struct match_entry *msg;

	if (!r || !matched || match_check_recv(m, r->src, r->tag))
		return -EINVAL;
	m->count.posted++;
	msg = find_unexpected(m, r);
	*matched = msg;
	if (msg) {
		q_remove(&m->unexpected, msg);
		m->count.matched_on_post++;
		return 1;
	}
	q_append(&m->posted, r);
	return 0;
}

/* An in-order message: the first posted receive takes it, else it waits. */
static int deliver(struct match_state *m, struct match_entry *msg, match_fn *on_match, void *arg)
{
	struct match_entry *r;

	m->next_seq[msg->src]++;
	for (r = m->posted.head; r && !matches(r, msg); r = r->next)
		;
	if (!r) {
		q_append(&m->unexpected, msg);
		return 0;
	}
	q_remove(&m->posted, r);
	m->count.matched_on_arrival++;
	on_match(arg, r, msg);
	return 1;
}

/* Where msg goes in its source's held list (ascending seq), or NULL with
 * *dup set when that seq is held already. */
static struct match_entry *held_slot(const struct match_queue *q, uint64_t seq, bool *dup)
{
	struct match_entry *e;

	for (e = q->head; e && e->seq < seq; e = e->next)
		;
	*dup = e && e->seq == seq;
	return e;
}

int match_arrive(struct match_state *m, struct match_entry *msg, match_fn *on_match, void *arg)
{
	struct match_queue *early;
	struct match_entry *pos;
	uint64_t *next;
	bool dup;
	int n;

	if (!msg || !on_match || match_check_send(m, msg->src, msg->tag))
		return -EINVAL;
	next = &m->next_seq[msg->src];
	early = &m->early[msg->src];
	if (msg->seq < *next) {
		m->count.duplicates++;
		return -EALREADY;
	}
	if (msg->seq > *next) {
		pos = held_slot(early, msg->seq, &dup);
		if (dup) {
			m->count.duplicates++;
			return -EALREADY;
		}
		q_insert_before(early, pos, msg);
		m->nheld++;
		m->count.arrived++;
		m->count.held++;
		return 0;
	}
	m->count.arrived++;
	n = deliver(m, msg, on_match, arg);
	/* The gap msg filled may release a run of held messages behind it. */
	while (early->head && early->head->seq == *next) {
		pos = early->head;
		q_remove(early, pos);
		m->nheld--;
		n += deliver(m, pos, on_match, arg);
	}
	return n;
}

/* Removes e from q if it is there: looked up rather than trusting its
 * links, so an entry matched already or never queued gives -ENOENT instead
 * of corrupting the queue. */
static int q_take(struct match_queue *q, struct match_entry *e)
{
	struct match_entry *x;

	for (x = q->head; x && x != e; x = x->next)
		;
	if (!x)
		return -ENOENT;
	q_remove(q, e);
	return 0;
}

int match_cancel(struct match_state *m, struct match_entry *r)
{
	if (!m || !r)
		return -EINVAL;
	if (q_take(&m->posted, r))
		return -ENOENT;
	m->count.canceled++;
	return 0;
}

int match_withdraw(struct match_state *m, struct match_entry *msg)
{
	return m && msg ? q_take(&m->unexpected, msg) : -EINVAL;
}

struct match_entry *match_probe(const struct match_state *m, int src, int tag, uint32_t ctx)
{
	struct match_entry r = { .src = src, .tag = tag, .ctx = ctx };

	if (match_check_recv(m, src, tag))
		return NULL;
	return find_unexpected(m, &r);
}

void match_stats(const struct match_state *m, size_t *posted, size_t *unexpected, size_t *held)
{
	if (posted)
		*posted = m ? m->posted.len : 0;
	if (unexpected)
		*unexpected = m ? m->unexpected.len : 0;
	if (held)
		*held = m ? m->nheld : 0;
}
