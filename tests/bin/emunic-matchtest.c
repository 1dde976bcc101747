/* SPDX-License-Identifier: MIT */
/*
 * emunic-matchtest: unit checks of the rendezvous engines' MPI matching layer
 * (engines/rndv/match.c), one per name, on the host (no RDMA).  Each prints
 * "emunic-matchtest: NAME: PASS", or what it saw instead and exits 1.
 */
#include "engines/rndv/match.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *check_name = "-";

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "emunic-matchtest: %s: FAIL: ", check_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

#define CHECK(c, ...) do { if (!(c)) fail(__VA_ARGS__); } while (0)

/* A test's request or message: the entry, and whom match paired it with. */
struct item {
	struct match_entry e;
	struct item *partner;
	int id;
};

/* Every pair made, as (receive id, message id), in the order made. */
#define LOG_MAX 4096
static struct { int r, msg; } plog[LOG_MAX];
static int nlog;

static void item_set(struct item *it, int id, int src, int tag, uint32_t ctx, uint64_t seq)
{
	*it = (struct item){ .e = { .src = src, .tag = tag, .ctx = ctx, .seq = seq, .owner = it }, .id = id };
}

static void pair(struct match_entry *r, struct match_entry *msg)
{
	struct item *ri = r->owner, *mi = msg->owner;

	CHECK(!ri->partner && !mi->partner, "receive %d or message %d matched twice", ri->id, mi->id);
	ri->partner = mi;
	mi->partner = ri;
	CHECK(nlog < LOG_MAX, "pair log full");
	plog[nlog].r = ri->id;
	plog[nlog++].msg = mi->id;
}

static void on_match(void *arg, struct match_entry *r, struct match_entry *msg)
{
	(void)arg;
	pair(r, msg);
}

static void setup(struct match_state *m, int nranks)
{
	int rc = match_init(m, nranks);

	CHECK(rc == 0, "match_init(%d): %s", nranks, strerror(-rc));
	nlog = 0;
}

static int post(struct match_state *m, struct item *r)
{
	struct match_entry *got = &r->e;	/* must be overwritten */
	int rc = match_post(m, &r->e, &got);

	if (rc == 1) {
		CHECK(got && got != &r->e, "match_post returned 1 without a message");
		pair(&r->e, got);
	} else if (rc == 0) {
		CHECK(!got, "match_post returned 0 but set *matched");
	}
	return rc;
}

static int arrive(struct match_state *m, struct item *msg)
{
	int before = nlog, rc = match_arrive(m, &msg->e, on_match, NULL);

	CHECK(rc < 0 ? nlog == before : nlog - before == rc,
	      "match_arrive returned %d but on_match ran %d times", rc, nlog - before);
	return rc;
}

static void post_ok(struct match_state *m, struct item *r, int want)
{
	int rc = post(m, r);

	CHECK(rc == want, "post of receive %d returned %d, want %d", r->id, rc, want);
}

static void arrive_ok(struct match_state *m, struct item *msg, int want)
{
	int rc = arrive(m, msg);

	CHECK(rc == want, "arrival of message %d (src %d seq %llu) returned %d, want %d", msg->id, msg->e.src,
	      (unsigned long long)msg->e.seq, rc, want);
}

/* What an item is, for tables of them and for the model's reference. */
struct spec {
	int src, tag;
	uint32_t ctx;
	uint64_t seq;
};

/* Messages arrive in table order, each finding no receive. */
static void arrive_unexpected(struct match_state *m, struct item *msg, const struct spec *s, int n)
{
	for (int i = 0; i < n; i++) {
		item_set(&msg[i], i, s[i].src, s[i].tag, s[i].ctx, s[i].seq);
		arrive_ok(m, &msg[i], 0);
	}
}

static void stats_are(const struct match_state *m, size_t p, size_t u, size_t h, const char *when)
{
	size_t gp, gu, gh;

	match_stats(m, &gp, &gu, &gh);
	CHECK(gp == p && gu == u && gh == h, "%s: posted/unexpected/held %zu/%zu/%zu, want %zu/%zu/%zu", when,
	      gp, gu, gh, p, u, h);
}

static void paired(const struct item *r, const struct item *msg)
{
	CHECK(r->partner == msg, "receive %d matched message %d, want %d", r->id, r->partner ? r->partner->id : -1,
	      msg ? msg->id : -1);
}

#define SPEC(...) ((struct spec){ __VA_ARGS__ })

/* Receive r[i] is posted as s and must take message want (NULL: none, it
 * stays posted). */
static void post_expect(struct match_state *m, struct item *r, int i, struct spec s, const struct item *want)
{
	item_set(&r[i], i, s.src, s.tag, s.ctx, 0);
	post_ok(m, &r[i], want != NULL);
	paired(&r[i], want);
}

/* Message msg[i] arrives as s and must be taken by receive want (NULL: none,
 * it waits or is held). */
static void arrive_expect(struct match_state *m, struct item *msg, int i, struct spec s, const struct item *want)
{
	item_set(&msg[i], i, s.src, s.tag, s.ctx, s.seq);
	arrive_ok(m, &msg[i], want != NULL);
	if (want)
		paired(want, &msg[i]);
}

/* ---- table1: seed 004, Table 1 ---- */

#define T1 1
#define T2 2

struct t1row {
	const char *recvs;
	int rtag[2];
	int want[2];		/* the send (1 or 2) each receive takes; 0: none */
};

/* The paper prints s1<->r1; s2<->r2 for recv(t2); recv(*) too, which no
 * matching can give (r1 = recv(t2) cannot take s1 = send(t1)); MPI's answer,
 * checked here, is s1<->r2; s2<->r1, as for recv(t2); recv(t1). */
static const struct t1row table1[] = {
	{ "recv(t1);recv(t2)", { T1, T2 }, { 1, 2 } },
	{ "recv(t2);recv(t1)", { T2, T1 }, { 2, 1 } },
	{ "recv(*);recv(*)", { MATCH_ANY, MATCH_ANY }, { 1, 2 } },
	{ "recv(*);recv(t2)", { MATCH_ANY, T2 }, { 1, 2 } },
	{ "recv(*);recv(t1)", { MATCH_ANY, T1 }, { 1, 0 } },
	{ "recv(t1);recv(*)", { T1, MATCH_ANY }, { 1, 2 } },
	{ "recv(t2);recv(*)", { T2, MATCH_ANY }, { 2, 1 } },
};

/* r = post the next receive, s = the next send arrives: receives all
 * expected, all unexpected, and the four interleavings. */
static const char *const schedules[] = { "rrss", "ssrr", "rssr", "rsrs", "srsr", "srrs" };

static void table1_run(const struct t1row *row, const char *sched)
{
	struct item r[2], s[2];
	struct match_state m;
	int nr = 0, ns = 0;

	setup(&m, 2);
	for (int i = 0; i < 2; i++) {
		item_set(&r[i], i + 1, 1, row->rtag[i], 0, 0);
		item_set(&s[i], i + 1, 1, i ? T2 : T1, 0, (uint64_t)i);
	}
	for (const char *c = sched; *c; c++)
		CHECK((*c == 'r' ? post(&m, &r[nr++]) : arrive(&m, &s[ns++])) >= 0, "%s %s: step %c failed",
		      row->recvs, sched, *c);
	for (int i = 0; i < 2; i++) {
		int got = r[i].partner ? r[i].partner->id : 0;

		CHECK(got == row->want[i], "%s, order %s: r%d matched s%d, want s%d", row->recvs, sched, i + 1,
		      got, row->want[i]);
	}
	if (row->want[1] == 0) {
		/* The deadlock case: r2 stays posted and s2 stays unexpected. */
		stats_are(&m, 1, 1, 0, row->recvs);
		CHECK(m.posted.head == &r[1].e && match_probe(&m, MATCH_ANY, MATCH_ANY, 0) == &s[1].e,
		      "%s, order %s: r2 is not posted or s2 not unexpected", row->recvs, sched);
	} else {
		stats_are(&m, 0, 0, 0, row->recvs);
	}
	match_fini(&m);
}

static void check_table1(void)
{
	for (size_t i = 0; i < sizeof(table1) / sizeof(table1[0]); i++)
		for (size_t j = 0; j < sizeof(schedules) / sizeof(schedules[0]); j++)
			table1_run(&table1[i], schedules[j]);
}

/* ---- any_source ---- */

static void check_any_source(void)
{
	struct item msg[6], r[6];
	struct match_state m;

	setup(&m, 3);
	/* Unexpected side: arrival order 2, 0, 1, all tag 5. */
	arrive_unexpected(&m, msg, (const struct spec[]){ { .src = 2, .tag = 5 }, { .src = 0, .tag = 5 },
							   { .src = 1, .tag = 5 } }, 3);
	post_expect(&m, r, 0, SPEC(.src = MATCH_ANY, .tag = 5), &msg[0]);	/* earliest, not lowest rank */
	post_expect(&m, r, 1, SPEC(.src = 1, .tag = 5), &msg[2]);		/* skips source 0's */
	post_expect(&m, r, 2, SPEC(.src = MATCH_ANY, .tag = MATCH_ANY), &msg[1]);
	stats_are(&m, 0, 0, 0, "unexpected side");

	/* Posted side: a specific receive for 2 is skipped by a message from 0;
	 * an ANY_SOURCE receive posted first wins over a specific one. */
	post_expect(&m, r, 3, SPEC(.src = 2, .tag = 7), NULL);
	post_expect(&m, r, 4, SPEC(.src = MATCH_ANY, .tag = 7), NULL);
	post_expect(&m, r, 5, SPEC(.src = 0, .tag = 7), NULL);
	arrive_expect(&m, msg, 3, SPEC(.src = 0, .tag = 7, .seq = 1), &r[4]);
	arrive_expect(&m, msg, 4, SPEC(.src = 2, .tag = 7, .seq = 1), &r[3]);
	arrive_expect(&m, msg, 5, SPEC(.src = 0, .tag = 7, .seq = 2), &r[5]);
	stats_are(&m, 0, 0, 0, "posted side");
	match_fini(&m);
}

/* ---- nonovertaking ---- */

#define NO_SRC 4
#define NO_PER 64

static uint64_t rng_state = 20240601;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

/* Arrival order of NO_PER messages from each source: sources interleaved at
 * random, and within a source neighbours swapped now and then (the network
 * reorders) so some arrive ahead of their seq.  Returns the count. */
static int interleave(struct item *msg, struct item **order)
{
	int next[NO_SRC] = { 0 }, n = 0;

	while (n < NO_SRC * NO_PER) {
		int s = (int)rnd(NO_SRC), k = next[s];

		if (k == NO_PER)
			continue;
		if (k + 1 < NO_PER && rnd(3) == 0) {
			order[n++] = &msg[s * NO_PER + k + 1];
			order[n++] = &msg[s * NO_PER + k];
			next[s] += 2;
		} else {
			order[n++] = &msg[s * NO_PER + k];
			next[s]++;
		}
	}
	return n;
}

static void nonovertaking_round(bool any)
{
	static struct item msg[NO_SRC * NO_PER], r[NO_SRC * NO_PER];
	struct item *order[NO_SRC * NO_PER];
	struct match_state m;
	int n;

	setup(&m, NO_SRC);
	for (int s = 0; s < NO_SRC; s++)
		for (int k = 0; k < NO_PER; k++)
			item_set(&msg[s * NO_PER + k], s * NO_PER + k, s, 9, 0, (uint64_t)k);
	n = interleave(msg, order);
	/* Receive k * NO_SRC + s is source s's k-th: half posted before any
	 * arrival, half after all of them. */
	for (int i = 0; i < n; i++)
		item_set(&r[i], i, any ? MATCH_ANY : i % NO_SRC, 9, 0, 0);
	for (int i = 0; i < n / 2; i++)
		CHECK(post(&m, &r[i]) == 0, "receive %d matched before any arrival", i);
	for (int i = 0; i < n; i++)
		CHECK(arrive(&m, order[i]) >= 0, "arrival %d failed", i);
	for (int i = n / 2; i < n; i++)
		CHECK(post(&m, &r[i]) == 1, "receive %d found nothing", i);
	stats_are(&m, 0, 0, 0, "after all");
	if (any) {
		/* Per source, later receives must get later seqs. */
		uint64_t last[NO_SRC];

		memset(last, 0xff, sizeof(last));
		for (int i = 0; i < n; i++) {
			const struct match_entry *e = &r[i].partner->e;

			CHECK(last[e->src] == UINT64_MAX ? e->seq == 0 : e->seq == last[e->src] + 1,
			      "ANY_SOURCE receive %d got source %d seq %llu after seq %llu", i, e->src,
			      (unsigned long long)e->seq, (unsigned long long)last[e->src]);
			last[e->src] = e->seq;
		}
	} else {
		for (int i = 0; i < n; i++)
			paired(&r[i], &msg[(i % NO_SRC) * NO_PER + i / NO_SRC]);
	}
	match_fini(&m);
}

static void check_nonovertaking(void)
{
	nonovertaking_round(false);
	nonovertaking_round(true);
}

/* ---- ctx ---- */

static void check_ctx(void)
{
	struct item r[3], msg[2];
	struct match_state m;

	setup(&m, 2);
	arrive_expect(&m, msg, 0, SPEC(.src = 1, .tag = 3, .ctx = 1), NULL);
	CHECK(!match_probe(&m, MATCH_ANY, MATCH_ANY, 2), "probe in context 2 found a context-1 message");
	post_expect(&m, r, 0, SPEC(.src = MATCH_ANY, .tag = MATCH_ANY, .ctx = 2), NULL);
	post_expect(&m, r, 1, SPEC(.src = 1, .tag = 3, .ctx = 1), &msg[0]);
	/* Posted side: the context-2 wildcard receive stays; context 0 waits. */
	arrive_expect(&m, msg, 1, SPEC(.src = 1, .tag = 3, .seq = 1), NULL);
	stats_are(&m, 1, 1, 0, "context 0 message, context 2 receive");
	post_expect(&m, r, 2, SPEC(.src = 1, .tag = 3), &msg[1]);
	paired(&r[0], NULL);
	match_fini(&m);
}

/* ---- order ---- */

static void check_order(void)
{
	struct item r[3], msg[7];
	struct match_state m;
	struct match_counters c;

	setup(&m, 3);
	for (int i = 0; i < 3; i++) {
		item_set(&r[i], i, MATCH_ANY, MATCH_ANY, 0, 0);
		post_ok(&m, &r[i], 0);
	}
	for (int i = 0; i < 4; i++)
		item_set(&msg[i], i, 1, 4, 0, (uint64_t)i);
	/* Seq 1, 3, 2 arrive before 0: all held, though receives wait. */
	arrive_ok(&m, &msg[1], 0);
	arrive_ok(&m, &msg[3], 0);
	arrive_ok(&m, &msg[2], 0);
	stats_are(&m, 3, 0, 3, "seq 1, 3, 2 before 0");
	CHECK(!match_probe(&m, 1, MATCH_ANY, 0), "a held message is visible to probe");
	/* Another source is not blocked by source 1's gap. */
	item_set(&msg[4], 4, 2, 4, 0, 0);
	arrive_ok(&m, &msg[4], 1);
	paired(&r[0], &msg[4]);
	nlog = 0;
	arrive_ok(&m, &msg[0], 2);
	CHECK(plog[0].msg == 0 && plog[1].msg == 1, "gap filled: matched messages %d, %d, want 0, 1", plog[0].msg,
	      plog[1].msg);
	paired(&r[1], &msg[0]);
	paired(&r[2], &msg[1]);
	/* Seq 2 and 3 were released too, unexpected now, in seq order. */
	stats_are(&m, 0, 2, 0, "gap filled");
	CHECK(m.unexpected.head == &msg[2].e && m.unexpected.tail == &msg[3].e,
	      "seq 2 and 3 not unexpected in seq order after the gap filled");

	/* Duplicates: below next expected, and equal to a held seq. */
	c = m.count;
	item_set(&msg[5], 5, 1, 4, 0, 1);
	arrive_ok(&m, &msg[5], -EALREADY);
	item_set(&msg[6], 6, 1, 4, 0, 7);
	arrive_ok(&m, &msg[6], 0);
	item_set(&msg[5], 5, 1, 4, 0, 7);
	arrive_ok(&m, &msg[5], -EALREADY);
	stats_are(&m, 0, 2, 1, "after duplicates");
	CHECK(m.early[1].head == &msg[6].e && m.early[1].len == 1, "the held list changed on a duplicate");
	CHECK(m.count.duplicates == c.duplicates + 2 && m.count.arrived == c.arrived + 1,
	      "counters: duplicates +%llu arrived +%llu, want +2 +1",
	      (unsigned long long)(m.count.duplicates - c.duplicates),
	      (unsigned long long)(m.count.arrived - c.arrived));
	match_fini(&m);
}

/* ---- cancel ---- */

static void check_cancel(void)
{
	struct item r[4], msg[2], never;
	struct match_state m;

	setup(&m, 2);
	for (int i = 0; i < 4; i++) {
		item_set(&r[i], i, 0, 1, 0, 0);
		post_ok(&m, &r[i], 0);
	}
	CHECK(match_cancel(&m, &r[1].e) == 0, "cancel of a posted receive failed");
	CHECK(match_cancel(&m, &r[1].e) == -ENOENT, "second cancel is not -ENOENT");
	CHECK(match_cancel(&m, &r[0].e) == 0 && match_cancel(&m, &r[3].e) == 0, "cancel of head or tail failed");
	item_set(&never, 9, 0, 1, 0, 0);
	CHECK(match_cancel(&m, &never.e) == -ENOENT, "cancel of a receive never posted is not -ENOENT");
	CHECK(match_cancel(&m, NULL) == -EINVAL && match_cancel(NULL, &r[2].e) == -EINVAL, "cancel NULL");
	stats_are(&m, 1, 0, 0, "after cancels");
	item_set(&msg[0], 0, 0, 1, 0, 0);
	arrive_ok(&m, &msg[0], 1);
	paired(&r[2], &msg[0]);
	CHECK(match_cancel(&m, &r[2].e) == -ENOENT, "cancel of a matched receive is not -ENOENT");
	/* A canceled receive no longer takes messages. */
	item_set(&msg[1], 1, 0, 1, 0, 1);
	arrive_ok(&m, &msg[1], 0);
	stats_are(&m, 0, 1, 0, "message after cancels");
	CHECK(m.count.canceled == 3, "canceled counter %llu, want 3", (unsigned long long)m.count.canceled);
	match_fini(&m);
}

/* ---- probe ---- */

static void check_probe(void)
{
	struct item msg[3], r;
	struct match_state m;

	setup(&m, 3);
	arrive_unexpected(&m, msg, (const struct spec[]){ { .src = 0, .tag = 1 }, { .src = 1, .tag = 2 },
							   { .src = 0, .tag = 2, .ctx = 5, .seq = 1 } }, 3);
	CHECK(match_probe(&m, MATCH_ANY, MATCH_ANY, 0) == &msg[0].e, "probe(*, *) is not the first arrival");
	CHECK(match_probe(&m, 1, MATCH_ANY, 0) == &msg[1].e, "probe(1, *) wrong");
	CHECK(match_probe(&m, MATCH_ANY, 2, 0) == &msg[1].e, "probe(*, 2) wrong");
	CHECK(match_probe(&m, 0, 2, 5) == &msg[2].e, "probe(0, 2) in context 5 wrong");
	CHECK(!match_probe(&m, 2, MATCH_ANY, 0), "probe(2, *) found a message");
	CHECK(!match_probe(&m, 0, 3, 0), "probe(0, 3) found a message");
	CHECK(!match_probe(&m, 5, 1, 0) && !match_probe(&m, 0, -5, 0) && !match_probe(NULL, 0, 1, 0),
	      "probe with bad arguments found a message");
	stats_are(&m, 0, 3, 0, "probe removed something");
	/* A probed message is still the one a receive takes. */
	item_set(&r, 0, MATCH_ANY, 2, 0, 0);
	CHECK(match_probe(&m, MATCH_ANY, 2, 0) == &msg[1].e, "probe changed");
	post_ok(&m, &r, 1);
	paired(&r, &msg[1]);
	match_fini(&m);
}

/* ---- invalid ---- */

static void check_invalid(void)
{
	static const int bad_src[] = { -2, 3, 1000 }, bad_tag[] = { -2, MATCH_TAG_MAX + 1, -1000 };
	struct match_entry *got;
	struct match_state m;
	struct item r, u, h, msg;

	CHECK(match_init(NULL, 2) == -EINVAL && match_init(&m, 0) == -EINVAL && match_init(&m, -1) == -EINVAL,
	      "match_init with bad arguments");
	match_fini(NULL);
	setup(&m, 3);
	CHECK(!match_check_recv(&m, MATCH_ANY, MATCH_ANY) && !match_check_recv(&m, 2, MATCH_TAG_MAX) &&
	      !match_check_recv(&m, 0, 0), "match_check_recv refused a good receive");
	CHECK(!match_check_send(&m, 2, MATCH_TAG_MAX) && !match_check_send(&m, 0, 0),
	      "match_check_send refused a good send");
	CHECK(match_check_send(&m, MATCH_ANY, 0) == -EINVAL && match_check_send(&m, 0, MATCH_ANY) == -EINVAL,
	      "match_check_send took a wildcard");
	CHECK(match_check_recv(NULL, 0, 0) == -EINVAL && match_check_send(NULL, 0, 0) == -EINVAL,
	      "checks with NULL state");
	/* Something in every queue, so "unchanged" means something. */
	item_set(&r, 0, 0, 1, 0, 0);
	post_ok(&m, &r, 0);
	item_set(&u, 0, 2, 1, 0, 0);
	arrive_ok(&m, &u, 0);
	item_set(&h, 1, 2, 1, 0, 2);
	arrive_ok(&m, &h, 0);
	for (int i = 0; i < 3; i++) {
		struct item bad;

		CHECK(match_check_recv(&m, bad_src[i], 0) == -EINVAL && match_check_recv(&m, 0, bad_tag[i]) == -EINVAL,
		      "match_check_recv took src %d or tag %d", bad_src[i], bad_tag[i]);
		CHECK(match_check_send(&m, bad_src[i], 0) == -EINVAL && match_check_send(&m, 0, bad_tag[i]) == -EINVAL,
		      "match_check_send took dst %d or tag %d", bad_src[i], bad_tag[i]);
		item_set(&bad, 7, bad_src[i], 1, 0, 0);
		CHECK(post(&m, &bad) == -EINVAL && arrive(&m, &bad) == -EINVAL, "src %d taken", bad_src[i]);
		item_set(&bad, 7, 0, bad_tag[i], 0, 0);
		CHECK(post(&m, &bad) == -EINVAL && arrive(&m, &bad) == -EINVAL, "tag %d taken", bad_tag[i]);
	}
	item_set(&msg, 2, MATCH_ANY, 1, 0, 0);
	CHECK(arrive(&m, &msg) == -EINVAL, "a message from ANY_SOURCE taken");
	item_set(&msg, 2, 0, MATCH_ANY, 0, 0);
	CHECK(arrive(&m, &msg) == -EINVAL, "a message with ANY_TAG taken");
	item_set(&msg, 2, 0, 1, 0, 0);
	CHECK(match_post(NULL, &r.e, &got) == -EINVAL && match_post(&m, NULL, &got) == -EINVAL &&
	      match_post(&m, &msg.e, NULL) == -EINVAL, "match_post with NULL");
	CHECK(match_arrive(NULL, &msg.e, on_match, NULL) == -EINVAL &&
	      match_arrive(&m, NULL, on_match, NULL) == -EINVAL && match_arrive(&m, &msg.e, NULL, NULL) == -EINVAL,
	      "match_arrive with NULL");
	stats_are(&m, 1, 1, 1, "after bad calls");
	CHECK(m.count.posted == 1 && m.count.arrived == 2 && m.count.duplicates == 0, "counters moved on bad calls");
	/* The refused message is still free to arrive properly. */
	arrive_ok(&m, &msg, 1);
	paired(&r, &msg);
	match_fini(&m);
	match_fini(&m);
	stats_are(&m, 0, 0, 0, "after fini");
	stats_are(NULL, 0, 0, 0, "NULL state");
	CHECK(arrive(&m, &msg) == -EINVAL, "match_arrive after fini");
}

/* ---- model: random operations against a brute-force reference ---- */

#define MD_OPS 20000
#define MD_NRANKS 5		/* rank 4 never sends: receives naming it never match */
#define MD_NSRC 4
#define MD_WINDOW 4		/* messages a source may have in flight, reordered */

/* The reference: plain arrays, scanned from the front. */
struct ref {
	struct spec rs[MD_OPS], ms[MD_OPS];
	int posted[MD_OPS], nposted;
	int unexp[MD_OPS], nunexp;
	uint64_t next[MD_NSRC];
	int held[MD_NSRC][MD_OPS];	/* message id by seq, -1: none */
	int nheld;
	struct { int r, msg; } log[LOG_MAX];
	int nlog;
};

static bool spec_match(const struct spec *r, const struct spec *msg)
{
	return r->ctx == msg->ctx && (r->src == MATCH_ANY || r->src == msg->src) &&
	       (r->tag == MATCH_ANY || r->tag == msg->tag);
}

static int ref_find(const struct spec *key, const int *ids, int n, const struct spec *of, bool key_is_recv)
{
	for (int i = 0; i < n; i++)
		if (key_is_recv ? spec_match(key, &of[ids[i]]) : spec_match(&of[ids[i]], key))
			return i;
	return -1;
}

static int ref_take(int *ids, int *n, int i)
{
	int id = ids[i];

	memmove(&ids[i], &ids[i + 1], (size_t)(*n - i - 1) * sizeof(*ids));
	(*n)--;
	return id;
}

static void ref_pair(struct ref *f, int r, int msg)
{
	CHECK(f->nlog < LOG_MAX, "reference log full");
	f->log[f->nlog].r = r;
	f->log[f->nlog++].msg = msg;
}

static int ref_post(struct ref *f, int r)
{
	int i = ref_find(&f->rs[r], f->unexp, f->nunexp, f->ms, true);

	if (i < 0) {
		f->posted[f->nposted++] = r;
		return 0;
	}
	ref_pair(f, r, ref_take(f->unexp, &f->nunexp, i));
	return 1;
}

static int ref_deliver(struct ref *f, int msg)
{
	int i = ref_find(&f->ms[msg], f->posted, f->nposted, f->rs, false);

	f->next[f->ms[msg].src]++;
	if (i < 0) {
		f->unexp[f->nunexp++] = msg;
		return 0;
	}
	ref_pair(f, ref_take(f->posted, &f->nposted, i), msg);
	return 1;
}

static int ref_arrive(struct ref *f, int msg)
{
	const struct spec *s = &f->ms[msg];
	int n, *held = f->held[s->src];

	if (s->seq < f->next[s->src] || held[s->seq] >= 0)
		return -EALREADY;
	if (s->seq > f->next[s->src]) {
		held[s->seq] = msg;
		f->nheld++;
		return 0;
	}
	n = ref_deliver(f, msg);
	while (held[f->next[s->src]] >= 0) {
		int h = held[f->next[s->src]];

		held[f->next[s->src]] = -1;
		f->nheld--;
		n += ref_deliver(f, h);
	}
	return n;
}

static int ref_cancel(struct ref *f, int r)
{
	for (int i = 0; i < f->nposted; i++)
		if (f->posted[i] == r) {
			ref_take(f->posted, &f->nposted, i);
			return 0;
		}
	return -ENOENT;
}

struct model {
	struct match_state m;
	struct ref f;
	struct item r[MD_OPS], msg[MD_OPS];
	int nr, nmsg;
	uint64_t sent[MD_NSRC];			/* messages each source has made */
	int pending[MD_NSRC][MD_WINDOW], npending[MD_NSRC];
	int delivered[MD_OPS], ndelivered;	/* message ids, for duplicates */
	bool posting;				/* see model_pick */
};

static int rnd_wild(int n)
{
	return rnd(4) == 0 ? MATCH_ANY : (int)rnd((uint32_t)n);
}

static uint32_t rnd_ctx(void)
{
	return rnd(10) == 0;
}

static int model_new_msg(struct model *md, struct spec s)
{
	int id = md->nmsg++;

	md->f.ms[id] = s;
	item_set(&md->msg[id], id, s.src, s.tag, s.ctx, s.seq);
	return id;
}

/* One arrival: a new or an in-flight message, or now and then a duplicate. */
static int model_arrive(struct model *md, int *id)
{
	int s = (int)rnd(MD_NSRC), k;

	if (md->ndelivered && rnd(20) == 0) {
		*id = model_new_msg(md, md->f.ms[md->delivered[rnd((uint32_t)md->ndelivered)]]);
	} else {
		while (md->npending[s] < MD_WINDOW && (md->npending[s] == 0 || rnd(2)))
			md->pending[s][md->npending[s]++] =
				model_new_msg(md, (struct spec){ .src = s, .tag = (int)rnd(4), .ctx = rnd_ctx(),
								 .seq = md->sent[s]++ });
		k = (int)rnd((uint32_t)md->npending[s]);
		*id = ref_take(md->pending[s], &md->npending[s], k);
		md->delivered[md->ndelivered++] = *id;
	}
	return arrive(&md->m, &md->msg[*id]);
}

static void model_compare_queue(const struct match_queue *q, const int *ids, int n, const struct item *pool,
				const char *what, int op)
{
	const struct match_entry *e = q->head;

	for (int i = 0; i < n; i++, e = e->next)
		CHECK(e == &pool[ids[i]].e, "op %d: %s queue differs from the reference at position %d", op, what, i);
	CHECK(!e && q->len == (size_t)n, "op %d: %s queue longer than the reference", op, what);
}

enum { OP_POST, OP_ARRIVE, OP_CANCEL, OP_PROBE };

/* Leans to posts until 40 receives wait, then to arrivals until 40 messages
 * wait, and so on: both queues fill and drain, and matches happen on both
 * sides, however the random receives and messages happen to fit. */
static int model_pick(struct model *md)
{
	uint32_t x = rnd(20), posts;

	if (md->posting ? md->f.nposted >= 40 : md->f.nunexp >= 40)
		md->posting = !md->posting;
	posts = md->posting ? 13 : 4;
	if (x < posts)
		return OP_POST;
	if (x < 17)
		return OP_ARRIVE;
	return x < 19 ? OP_CANCEL : OP_PROBE;
}

/* One random operation on both; every result and every pair must agree. */
static void model_step(struct model *md, int op)
{
	struct ref *f = &md->f;
	int want, got, id;

	nlog = 0;
	f->nlog = 0;
	switch (model_pick(md)) {
	case OP_POST:
		id = md->nr++;
		f->rs[id] = (struct spec){ .src = rnd(50) ? rnd_wild(MD_NSRC) : MD_NSRC, .tag = rnd_wild(4),
					   .ctx = rnd_ctx() };
		item_set(&md->r[id], id, f->rs[id].src, f->rs[id].tag, f->rs[id].ctx, 0);
		got = post(&md->m, &md->r[id]);
		want = ref_post(f, id);
		break;
	case OP_ARRIVE:
		got = model_arrive(md, &id);
		want = ref_arrive(f, id);
		break;
	case OP_CANCEL:
		if (!md->nr)
			return;
		id = f->nposted && rnd(2) ? f->posted[rnd((uint32_t)f->nposted)] : (int)rnd((uint32_t)md->nr);
		got = match_cancel(&md->m, &md->r[id].e);
		want = ref_cancel(f, id);
		break;
	default: {
		struct spec p = { .src = rnd_wild(MD_NRANKS), .tag = rnd_wild(4), .ctx = rnd_ctx() };
		struct match_entry *e = match_probe(&md->m, p.src, p.tag, p.ctx);
		int i = ref_find(&p, f->unexp, f->nunexp, f->ms, true);

		got = e ? ((struct item *)e->owner)->id : -1;
		want = i < 0 ? -1 : f->unexp[i];
		break;
	}
	}
	CHECK(got == want, "op %d: returned %d, reference %d", op, got, want);
	CHECK(nlog == f->nlog, "op %d: %d pairs, reference %d", op, nlog, f->nlog);
	for (int i = 0; i < nlog; i++)
		CHECK(plog[i].r == f->log[i].r && plog[i].msg == f->log[i].msg,
		      "op %d: pair %d is receive %d + message %d, reference %d + %d", op, i, plog[i].r, plog[i].msg,
		      f->log[i].r, f->log[i].msg);
	stats_are(&md->m, (size_t)f->nposted, (size_t)f->nunexp, (size_t)f->nheld, "model");
	if (op % 1000 == 0) {
		model_compare_queue(&md->m.posted, f->posted, f->nposted, md->r, "posted", op);
		model_compare_queue(&md->m.unexpected, f->unexp, f->nunexp, md->msg, "unexpected", op);
	}
}

static void check_model(void)
{
	struct model *md = calloc(1, sizeof(*md));
	uint64_t matches = 0;

	CHECK(md, "out of memory");
	setup(&md->m, MD_NRANKS);
	memset(md->f.held, 0xff, sizeof(md->f.held));
	rng_state = 20000;
	for (int op = 0; op < MD_OPS; op++) {
		model_step(md, op);
		matches += (uint64_t)nlog;
	}
	/* A model that never matches, holds or refuses proves little. */
	CHECK(matches > MD_OPS / 4 && md->m.count.held > 100 && md->m.count.duplicates > 50 &&
	      md->m.count.canceled > 100 && md->m.count.matched_on_post > 1000 &&
	      md->m.count.matched_on_arrival > 1000,
	      "too little exercised: %llu matches, %llu held, %llu duplicates, %llu canceled, %llu on arrival",
	      (unsigned long long)matches, (unsigned long long)md->m.count.held,
	      (unsigned long long)md->m.count.duplicates, (unsigned long long)md->m.count.canceled,
	      (unsigned long long)md->m.count.matched_on_arrival);
	printf("emunic-matchtest: model: %d operations: %llu matches (%llu on post), %llu held, %llu duplicates, "
	       "%llu canceled\n", MD_OPS, (unsigned long long)matches, (unsigned long long)md->m.count.matched_on_post,
	       (unsigned long long)md->m.count.held, (unsigned long long)md->m.count.duplicates,
	       (unsigned long long)md->m.count.canceled);
	match_fini(&md->m);
	free(md);
}

static const struct {
	const char *name;
	void (*run)(void);
	const char *what;
} checks[] = {
	{ "table1", check_table1, "seed 004 Table 1, each ordering expected, unexpected and interleaved" },
	{ "any_source", check_any_source, "ANY_SOURCE takes the earliest arrival; specific sources skip others" },
	{ "nonovertaking", check_nonovertaking, "messages from one source match in send order" },
	{ "ctx", check_ctx, "different contexts never match" },
	{ "order", check_order, "early messages are held until the gap fills; duplicates are refused" },
	{ "cancel", check_cancel, "cancel removes only posted, unmatched receives" },
	{ "probe", check_probe, "probe finds the first match and removes nothing" },
	{ "invalid", check_invalid, "bad arguments are -EINVAL and change nothing" },
	{ "model", check_model, "20000 random operations against a brute-force reference" },
};
#define NCHECKS (sizeof(checks) / sizeof(checks[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: emunic-matchtest all|CHECK...\n");
	for (size_t i = 0; i < NCHECKS; i++)
		fprintf(f, "  %-14s %s\n", checks[i].name, checks[i].what);
}

static void run(size_t i)
{
	check_name = checks[i].name;
	checks[i].run();
	printf("emunic-matchtest: %s: PASS\n", check_name);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	/* Validate every name first, so a typo runs nothing. */
	for (int a = 1; a < argc; a++) {
		size_t i = 0;

		while (i < NCHECKS && strcmp(argv[a], checks[i].name))
			i++;
		if (i == NCHECKS && strcmp(argv[a], "all")) {
			fprintf(stderr, "emunic-matchtest: unknown check '%s'\n", argv[a]);
			usage(stderr);
			return 2;
		}
	}
	for (int a = 1; a < argc; a++)
		for (size_t i = 0; i < NCHECKS; i++)
			if (!strcmp(argv[a], "all") || !strcmp(argv[a], checks[i].name))
				run(i);
	return 0;
}
