/* SPDX-License-Identifier: MIT */
/*
 * The timeline's records as Chrome trace-event JSON (ui.perfetto.dev,
 * chrome://tracing): pid = rank, a track (tid) per thread and one per queue
 * (MQ, QP, counter), each event an instant ("ph":"i") on its queue's track
 * and again on its thread's.  One event a line, the separator leading, so
 * timeline_merge.c can join ranks' files line by line.
 */
#include "emunic/base/timeline.h"

#include <emunic.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Queue tracks' tids, apart from any thread's (pid_max is at most 2^22). */
#define TID_MQ 100000000
#define TID_QP 200000000
#define TID_CT 300000000

static const char *const kind_name[TL_KINDS] = {
	[TL_TASK_POSTED] = "task posted", [TL_ENABLED] = "enabled", [TL_WAIT_DONE] = "WAIT satisfied",
	[TL_WR_POSTED] = "WR posted", [TL_COMPLETION] = "completion", [TL_TRIG_FIRED] = "trigger fired",
	[TL_CT_CHANGE] = "counter change", [TL_FAULT] = "fault injected", [TL_RECONNECTING] = "reconnecting",
	[TL_RECONNECTED] = "reconnected",
};

static const char *const fault_name[] = {
	[TL_FAULT_RNR_HOLD] = "receives held (rnr)", [TL_FAULT_QP_RESET] = "qp reset (retry)",
	[TL_FAULT_QP_ERROR] = "qp to error", [TL_FAULT_WC] = "completion status (wc)",
};

struct out {
	FILE *f;
	int rank;
	bool first;
	uint64_t *seen;		/* queue tracks named so far: an open-addressing set */
	size_t cap, n;
};

static int tid_of(const struct emunic_tl_rec *r)
{
	static const int base[] = { [TL_TRACK_MQ] = TID_MQ, [TL_TRACK_QP] = TID_QP, [TL_TRACK_CT] = TID_CT };

	return base[r->track] + (int)r->id;
}

static void track_name(const struct emunic_tl_rec *r, char *s, size_t len)
{
	if (r->track == TL_TRACK_MQ)
		snprintf(s, len, "mq %u", r->id);
	else if (r->track == TL_TRACK_QP)
		snprintf(s, len, "qp %u -> peer %d", r->id, r->peer);
	else
		snprintf(s, len, "ct %u", r->id);
}

static void line(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(struct out *o, const char *fmt, ...)
{
	va_list ap;

	fputs(o->first ? " " : ",", o->f);
	o->first = false;
	va_start(ap, fmt);
	vfprintf(o->f, fmt, ap);
	va_end(ap);
	fputc('\n', o->f);
}

static void name_track(struct out *o, int tid, const char *name, int sort)
{
	line(o, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", o->rank,
	     tid, name);
	line(o, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
	     o->rank, tid, sort);
}

/* A queue track is named the first time an event lands on it. */
static int seen(struct out *o, const struct emunic_tl_rec *r)
{
	uint64_t key = (uint64_t)r->track << 32 | r->id;
	size_t i;

	if (o->n * 2 >= o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 256;
		uint64_t *s = calloc(cap, sizeof(*s)), *old = o->seen;

		if (!s)
			return -ENOMEM;
		o->seen = s;
		o->cap = cap;
		o->n = 0;
		for (i = 0; old && i < cap / 2; i++)
			if (old[i]) {
				size_t j = (size_t)(old[i] * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);

				while (s[j])
					j = (j + 1) & (cap - 1);
				s[j] = old[i];
				o->n++;
			}
		free(old);
	}
	for (i = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (o->cap - 1); o->seen[i];
	     i = (i + 1) & (o->cap - 1))
		if (o->seen[i] == key)
			return 1;
	o->seen[i] = key;
	o->n++;
	return 0;
}

static const char *op_str(const struct emunic_tl_rec *r, uint64_t op)
{
	return r->kind == TL_TRIG_FIRED ? emunic_op_kind_str((int)op) : emunic_task_op_str((int)op);
}

/* The event's own args, by kind (timeline.h says what a, b and c are). */
static void args(const struct emunic_tl_rec *r, char *s, size_t len)
{
	unsigned long long a = r->a, b = r->b, c = r->c;
	int st = (int)(int64_t)r->c;

	switch (r->kind) {
	case TL_TASK_POSTED:
		snprintf(s, len, "\"wr_id\":%llu,\"op\":\"%s\",\"index\":%llu", a, op_str(r, b), c);
		break;
	case TL_ENABLED:
		snprintf(s, len, "\"qp\":%llu,\"peer\":%d,\"upto\":%llu,\"op\":\"%s\"", a, r->peer, b, op_str(r, c));
		break;
	case TL_WAIT_DONE:
		snprintf(s, len, "\"cq\":%llu,\"target\":%llu,\"status\":%d", a, b, st);
		break;
	case TL_WR_POSTED:
		snprintf(s, len, "\"wr_id\":%llu,\"op\":\"%s\",\"index\":%llu,\"peer\":%d", a, op_str(r, b), c,
			 r->peer);
		break;
	case TL_COMPLETION:
		snprintf(s, len, "\"wr_id\":%llu,\"op\":\"%s\",\"status\":%d,\"status_str\":\"%s\",\"peer\":%d", a,
			 op_str(r, b), st, emunic_wc_status_str(st), r->peer);
		break;
	case TL_TRIG_FIRED:
		snprintf(s, len, "\"user\":%llu,\"threshold\":%llu,\"op\":\"%s\",\"ct\":%u", a, b, op_str(r, c),
			 r->id);
		break;
	case TL_CT_CHANGE:
		snprintf(s, len, "\"ct\":%u,\"success\":%llu,\"failure\":%llu,\"how\":\"%s\"", r->id, a, b,
			 c ? "set" : "add");
		break;
	case TL_FAULT:
		snprintf(s, len, "\"rule\":%llu,\"what\":\"%s\",\"status\":%d,\"peer\":%d", a,
			 b < sizeof(fault_name) / sizeof(fault_name[0]) && fault_name[b] ? fault_name[b] : "?", st,
			 r->peer);
		break;
	case TL_RECONNECTING:
		snprintf(s, len, "\"left\":%llu,\"status\":%d,\"peer\":%d", a, (int)(int64_t)b, r->peer);
		break;
	default:	/* TL_RECONNECTED */
		snprintf(s, len, "\"reconnections\":%llu,\"qpn\":%llu,\"peer\":%d", a, b, r->peer);
		break;
	}
}

static int event(struct out *o, const struct emunic_tl_buf *t, const struct emunic_tl_rec *r)
{
	char a[320], track[48] = "";
	const char *name = r->kind < TL_KINDS && kind_name[r->kind] ? kind_name[r->kind] : "?";
	unsigned long long us = r->ns / 1000, ns = r->ns % 1000;

	args(r, a, sizeof(a));
	if (r->track != TL_TRACK_NONE && r->track <= TL_TRACK_CT) {
		int s = seen(o, r);

		if (s < 0)
			return s;
		track_name(r, track, sizeof(track));
		if (!s)
			name_track(o, tid_of(r), track, 1000 + tid_of(r) / 100000);
		line(o, "{\"name\":\"%s\",\"cat\":\"queue\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,"
		     "\"ts\":%llu.%03llu,\"args\":{%s,\"thread\":\"%s\"}}", name, o->rank, tid_of(r), us, ns, a, t->name);
	}
	line(o, "{\"name\":\"%s\",\"cat\":\"thread\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,"
	     "\"ts\":%llu.%03llu,\"args\":{%s,\"track\":\"%s\"}}", name, o->rank, t->tid, us, ns, a, track);
	return 0;
}

int emunic_tl_write_json(void *file, int rank, const struct emunic_tl_buf *list)
{
	struct out o = { .f = file, .rank = rank, .first = true };
	uint64_t dropped = 0;
	int r = 0, sort = 0;

	fputs("{\"traceEvents\":[\n", o.f);
	line(&o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}}", rank,
	     rank);
	line(&o, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
	     rank, rank);
	for (const struct emunic_tl_buf *t = list; t && !r; t = t->next) {
		name_track(&o, t->tid, t->name, sort++);
		dropped += t->dropped;
		for (const struct emunic_tl_chunk *c = t->first; c && !r;
		     c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE)) {
			unsigned n = __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);

			for (unsigned i = 0; i < n && !r; i++)
				r = event(&o, t, &c->rec[i]);
		}
	}
	free(o.seen);
	/* Past a thread's cap: said in the file, which is still whole. */
	fprintf(o.f, "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"emunic_rank\":\"%d\",\"dropped\":\"%llu\"}}\n",
		rank, (unsigned long long)dropped);
	if (!r && (fflush(o.f) || ferror(o.f)))
		r = errno ? -errno : -EIO;
	return r;
}
