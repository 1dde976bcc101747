/* SPDX-License-Identifier: MIT */
/*
 * The fault spec language of emunic/fault.h: parsing, with errors that point
 * at the bad token, and the canonical form.  Pure logic, no verbs.
 */
#include "emunic/fault/fault.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANK 4095

enum vtype { V_RANK, V_U64, V_RETRIES, V_EXP, V_PROB, V_DUR, V_STATUS, V_OPCODE };

struct key {
	const char *name;
	enum vtype t;
	size_t off;
	unsigned kinds;		/* bit per enum fault_kind */
	unsigned required;	/* kinds that must give it */
};

#define K(kind) (1u << (kind))
#define F(field) offsetof(struct fault_rule, field)

static const struct key keys[] = {
	{ "peer", V_RANK, F(peer), K(FAULT_RNR) | K(FAULT_RETRY) | K(FAULT_WC), K(FAULT_RNR) | K(FAULT_RETRY) },
	{ "from", V_RANK, F(from), K(FAULT_RNR) | K(FAULT_RETRY), 0 },
	{ "after", V_U64, F(after), K(FAULT_RNR) | K(FAULT_RETRY), 0 },
	{ "retries", V_RETRIES, F(retries), K(FAULT_RNR) | K(FAULT_RETRY), 0 },
	{ "hold", V_DUR, F(hold_us), K(FAULT_RNR), 0 },
	{ "timeout", V_EXP, F(timeout), K(FAULT_RETRY), 0 },
	{ "p", V_PROB, F(p_ppm), K(FAULT_LOSS) | K(FAULT_WC), K(FAULT_LOSS) },
	{ "delay", V_DUR, F(delay_us), K(FAULT_LOSS), 0 },
	{ "jitter", V_DUR, F(jitter_us), K(FAULT_LOSS), 0 },
	{ "status", V_STATUS, F(status), K(FAULT_WC), K(FAULT_WC) },
	{ "op", V_U64, F(op), K(FAULT_WC), 0 },
	{ "count", V_U64, F(count), K(FAULT_WC), 0 },
	{ "seed", V_U64, F(seed), K(FAULT_WC), 0 },
	{ "rank", V_RANK, F(rank), K(FAULT_WC), 0 },
	{ "opcode", V_OPCODE, F(opcode), K(FAULT_WC), 0 },
};

static const char *const kind_names[] = { [FAULT_RNR] = "rnr", [FAULT_RETRY] = "retry", [FAULT_LOSS] = "loss",
					  [FAULT_WC] = "wc" };

/* ibv_wc_status names without IBV_WC_ and _ERR, by value. */
static const char *const status_names[] = {
	[1] = "LOC_LEN", [2] = "LOC_QP_OP", [3] = "LOC_EEC_OP", [4] = "LOC_PROT", [5] = "WR_FLUSH",
	[6] = "MW_BIND", [7] = "BAD_RESP", [8] = "LOC_ACCESS", [9] = "REM_INV_REQ", [10] = "REM_ACCESS",
	[11] = "REM_OP", [12] = "RETRY_EXC", [13] = "RNR_RETRY_EXC", [14] = "LOC_RDD_VIOL",
	[15] = "REM_INV_RD_REQ", [16] = "REM_ABORT", [17] = "INV_EECN", [18] = "INV_EEC_STATE", [19] = "FATAL",
	[20] = "RESP_TIMEOUT", [21] = "GENERAL",
};
#define NSTATUS ((int)(sizeof(status_names) / sizeof(status_names[0])))

static const char *const opcode_names[] = {
	[EMUNIC_TASK_SEND] = "send", [EMUNIC_TASK_RECV] = "recv", [EMUNIC_TASK_WRITE] = "write",
	[EMUNIC_TASK_WRITE_IMM] = "write_imm", [EMUNIC_TASK_READ] = "read", [EMUNIC_TASK_FETCH_ADD] = "fetch_add",
	[EMUNIC_TASK_CALC] = "calc",
};
#define NOPCODE ((int)(sizeof(opcode_names) / sizeof(opcode_names[0])))

struct parse {
	const char *spec;
	char *err;
	size_t errlen;
};

/* A token: [b, e) of the spec. */
struct tok {
	const char *b, *e;
};

static int tlen(struct tok t) { return (int)(t.e - t.b); }

static bool teq(struct tok t, const char *s) { return strlen(s) == (size_t)tlen(t) && !memcmp(t.b, s, strlen(s)); }

static struct tok trim(struct tok t)
{
	while (t.b < t.e && isspace((unsigned char)*t.b))
		t.b++;
	while (t.e > t.b && isspace((unsigned char)t.e[-1]))
		t.e--;
	return t;
}

/* "bad fault spec: <why> (column C)", the spec, a caret line under t. */
static int __attribute__((format(printf, 3, 4))) fail(struct parse *ps, struct tok t, const char *fmt, ...)
{
	size_t col = (size_t)(t.b - ps->spec), len = strlen(ps->spec), w = t.e > t.b ? (size_t)tlen(t) : 1, o;
	va_list ap;
	int n;

	if (!ps->errlen)
		return -EINVAL;
	n = snprintf(ps->err, ps->errlen, "bad fault spec: ");
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < ps->errlen)
		n += vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= ps->errlen)
		return -EINVAL;
	n += snprintf(ps->err + n, ps->errlen - (size_t)n, " (column %zu)\n  ", col + 1);
	if ((size_t)n >= ps->errlen)
		return -EINVAL;		/* truncated, and terminated, by snprintf */
	/* The spec, unprintable bytes shown as '?' so the caret lines up. */
	for (o = 0; o < len && (size_t)n + 2 < ps->errlen; o++)
		ps->err[n++] = isprint((unsigned char)ps->spec[o]) ? ps->spec[o] : '?';
	for (o = 0; o < 3 + col + w && (size_t)n + 2 < ps->errlen; o++)
		ps->err[n++] = o == 0 ? '\n' : o < 3 ? ' ' : o == 3 + col ? '^' : o > 3 + col ? '~' : ' ';
	ps->err[n] = '\0';
	return -EINVAL;
}

/* A token in a message: at most 32 bytes, unprintable ones as '?'. */
static const char *shown(struct tok t, char buf[40])
{
	int n = tlen(t) > 32 ? 32 : tlen(t), i;

	for (i = 0; i < n; i++)
		buf[i] = isprint((unsigned char)t.b[i]) ? t.b[i] : '?';
	strcpy(buf + i, tlen(t) > 32 ? "..." : "");
	return buf;
}

static bool all_in(struct tok t, const char *set)
{
	for (const char *c = t.b; c < t.e; c++)
		if (!*c || !strchr(set, *c))
			return false;
	return t.e > t.b;
}

static int parse_u64(struct tok t, uint64_t max, uint64_t *v)
{
	char buf[24];

	if (!all_in(t, "0123456789") || tlen(t) > 20)
		return -EINVAL;
	memcpy(buf, t.b, (size_t)tlen(t));
	buf[tlen(t)] = '\0';
	errno = 0;
	*v = strtoull(buf, NULL, 10);
	return errno || *v > max ? -ERANGE : 0;
}

/* Digits with at most one '.', no sign or exponent (strtod would take
 * "inf", "0x1p3", " 1"). */
static int parse_decimal(struct tok num, double *v)
{
	char buf[32];

	if (!all_in(num, "0123456789.") || tlen(num) > 30 || memchr(num.b, '.', (size_t)tlen(num)) !=
	    memrchr(num.b, '.', (size_t)tlen(num)))
		return -EINVAL;
	memcpy(buf, num.b, (size_t)tlen(num));
	buf[tlen(num)] = '\0';
	if (!strcmp(buf, "."))
		return -EINVAL;
	*v = strtod(buf, NULL);
	return 0;
}

/* 0.05 or 5% -> parts per million. */
static int parse_prob(struct tok t, uint32_t *ppm)
{
	bool pct = tlen(t) > 0 && t.e[-1] == '%';
	struct tok num = { t.b, pct ? t.e - 1 : t.e };
	double v;

	if (parse_decimal(num, &v))
		return -EINVAL;
	v /= pct ? 100.0 : 1.0;
	if (!isfinite(v) || v < 0 || v > 1)
		return -ERANGE;
	*ppm = (uint32_t)(v * 1e6 + 0.5);	/* no libm for lround */
	return 0;
}

/* 2ms, 500us, 1s, 1.5s; a bare number is ms.  At most an hour. */
static int parse_dur(struct tok t, uint64_t *us)
{
	static const struct { const char *unit; double us; } units[] = { { "us", 1 }, { "ms", 1e3 }, { "s", 1e6 } };
	struct tok num = t;
	double mul = 1e3, v;

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t ul = strlen(units[i].unit);

		if ((size_t)tlen(t) > ul && !memcmp(t.e - ul, units[i].unit, ul) &&
		    strchr("0123456789.", t.e[-(int)ul - 1])) {
			num.e = t.e - ul;
			mul = units[i].us;
			break;
		}
	}
	if (parse_decimal(num, &v))
		return -EINVAL;
	v *= mul;
	if (!isfinite(v) || v > 3600e6)
		return -ERANGE;
	*us = (uint64_t)(v + 0.5);
	return 0;
}

static int parse_status(struct tok t, int *st)
{
	uint64_t v;
	char name[40];
	int n = 0;

	if (!parse_u64(t, NSTATUS - 1, &v)) {
		*st = (int)v;
		return v ? 0 : -ERANGE;
	}
	if (tlen(t) >= 7 && !strncasecmp(t.b, "IBV_WC_", 7))
		t.b += 7;
	if (tlen(t) >= 4 && !strncasecmp(t.e - 4, "_ERR", 4))
		t.e -= 4;
	if (tlen(t) >= (int)sizeof(name))
		return -EINVAL;
	for (const char *c = t.b; c < t.e; c++)
		name[n++] = (char)toupper((unsigned char)*c);
	name[n] = '\0';
	for (int i = 1; i < NSTATUS; i++)
		if (!strcmp(name, status_names[i])) {
			*st = i;
			return 0;
		}
	return -EINVAL;
}

static int parse_opcode(struct tok t, int *op)
{
	for (int i = 1; i < NOPCODE; i++)
		if (opcode_names[i] && teq(t, opcode_names[i])) {
			*op = i;
			return 0;
		}
	return -EINVAL;
}

static const char *expected(enum vtype t)
{
	switch (t) {
	case V_RANK: return "a rank, 0..4095";
	case V_U64: return "a non-negative integer";
	case V_RETRIES: return "a retry count, 0..7 (7: forever)";
	case V_EXP: return "an ACK timeout exponent, 0..31";
	case V_PROB: return "a probability, like 0.05 or 5%";
	case V_DUR: return "a duration, like 2ms, 500us or 1s";
	case V_STATUS: return "an error status, like RNR_RETRY_EXC_ERR, RETRY_EXC or 12";
	case V_OPCODE: return "send, recv, write, write_imm, read, fetch_add or calc";
	}
	return "?";
}

static int set_value(const struct key *k, struct tok v, struct fault_rule *r)
{
	char *f = (char *)r + k->off;
	uint64_t u = 0;
	int ret;

	switch (k->t) {
	case V_RANK:
	case V_RETRIES:
	case V_EXP:
		ret = parse_u64(v, k->t == V_RANK ? MAX_RANK : k->t == V_RETRIES ? 7 : 31, &u);
		*(int *)(void *)f = (int)u;
		return ret;
	case V_U64:
		return parse_u64(v, UINT64_MAX, (uint64_t *)(void *)f);
	case V_PROB:
		return parse_prob(v, (uint32_t *)(void *)f);
	case V_DUR:
		return parse_dur(v, (uint64_t *)(void *)f);
	case V_STATUS:
		return parse_status(v, (int *)(void *)f);
	case V_OPCODE:
		return parse_opcode(v, (int *)(void *)f);
	}
	return -EINVAL;
}

static void key_list(enum fault_kind kind, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (keys[i].kinds & K(kind))
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? ", " : "", keys[i].name);
}

/* Whether the key called name is among those given (a bit per keys[] row). */
static bool has(unsigned given, const char *name)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(keys[i].name, name))
			return given & (1u << i);
	return false;
}

static int parse_rule(struct parse *ps, struct tok rt, struct fault_rule *r)
{
	struct tok kt, body;
	const char *colon;
	unsigned given = 0;
	char a[40], list[128];

	rt = trim(rt);
	if (tlen(rt) == 0)
		return fail(ps, rt, "empty rule (two ';' in a row?)");
	colon = memchr(rt.b, ':', (size_t)tlen(rt));
	kt = trim((struct tok){ rt.b, colon ? colon : rt.e });
	*r = (struct fault_rule){ .peer = -1, .from = -1, .rank = -1, .retries = -1, .timeout = -1 };
	for (int k = FAULT_RNR; k <= FAULT_WC; k++)
		if (teq(kt, kind_names[k]))
			r->kind = (enum fault_kind)k;
	if (!r->kind)
		return fail(ps, kt, "unknown fault kind '%s' (kinds: rnr, retry, loss, wc)", shown(kt, a));
	body = (struct tok){ colon ? colon + 1 : rt.e, rt.e };
	while (colon && body.b <= body.e) {
		const char *comma = memchr(body.b, ',', (size_t)tlen(body));
		struct tok item = trim((struct tok){ body.b, comma ? comma : body.e }), kn, v;
		const char *eq = memchr(item.b, '=', (size_t)tlen(item));
		const struct key *k = NULL;
		int ret;

		if (tlen(item) == 0)
			return fail(ps, item, "empty KEY=VALUE in a %s rule", kind_names[r->kind]);
		if (!eq)
			return fail(ps, item, "'%s' is not KEY=VALUE", shown(item, a));
		kn = trim((struct tok){ item.b, eq });
		v = trim((struct tok){ eq + 1, item.e });
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if ((keys[i].kinds & K(r->kind)) && teq(kn, keys[i].name))
				k = &keys[i];
		if (!k) {
			key_list(r->kind, list, sizeof(list));
			return fail(ps, kn, "unknown key '%s' for a %s rule (keys: %s)", shown(kn, a),
				    kind_names[r->kind], list);
		}
		if (given & (1u << (k - keys)))
			return fail(ps, kn, "%s given twice", k->name);
		given |= 1u << (k - keys);
		if (tlen(v) == 0)
			return fail(ps, v, "no value for %s (expected %s)", k->name, expected(k->t));
		ret = set_value(k, v, r);
		if (ret)
			return fail(ps, v, "%s value '%s' for %s (expected %s)", ret == -ERANGE ? "out-of-range" : "bad",
				    shown(v, a), k->name, expected(k->t));
		if (!comma)
			break;
		body.b = comma + 1;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if ((keys[i].required & K(r->kind)) && !(given & (1u << i)))
			return fail(ps, kt, "a %s rule needs %s=", kind_names[r->kind], keys[i].name);
	if (r->kind == FAULT_WC) {
		bool has_op = has(given, "op"), has_p = has(given, "p");

		if (has_op && has_p)
			return fail(ps, rt, "a wc rule takes op= (one completion) or p= (a random share), not both");
		if (has_op && !r->op)
			return fail(ps, rt, "op counts from 1 (op=1: the first matching completion)");
		if (!has_p && !r->op)
			r->op = 1;
		if (!has(given, "count"))
			r->count = has_p ? 0 : 1;	/* 0: no limit */
		if (r->status == EMUNIC_WC_WR_FLUSH_ERR)
			return fail(ps, rt, "WR_FLUSH_ERR is what follows a failure, not one to inject");
	}
	if ((r->kind == FAULT_RNR || r->kind == FAULT_RETRY) && r->peer == r->from)
		return fail(ps, rt, "peer and from are the same rank: no rank has a QP to itself");
	return 0;
}

int emunic_fault_parse(const char *spec, struct emunic_fault_spec **out, char *err, size_t errlen)
{
	struct parse ps = { .spec = spec, .err = err, .errlen = errlen };
	struct emunic_fault_spec *s;
	const char *p = spec;

	if (errlen)
		err[0] = '\0';
	if (!spec || !out)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	while (*p) {
		const char *end = p + strcspn(p, ";");
		int r;

		if (s->n == EMUNIC_FAULT_MAX_RULES) {
			fail(&ps, (struct tok){ p, end }, "more than %d rules", EMUNIC_FAULT_MAX_RULES);
			free(s);
			return -EINVAL;
		}
		r = parse_rule(&ps, (struct tok){ p, end }, &s->r[s->n]);
		if (r) {
			free(s);
			return r;
		}
		s->n++;
		p = *end ? end + 1 : end;
	}
	*out = s;
	return 0;
}

void emunic_fault_free(struct emunic_fault_spec *s)
{
	free(s);
}

int emunic_fault_rules(const struct emunic_fault_spec *s)
{
	return s ? s->n : 0;
}

static size_t put_dur(char *buf, size_t len, const char *key, uint64_t us)
{
	if (us % 1000)
		return (size_t)snprintf(buf, len, ",%s=%lluus", key, (unsigned long long)us);
	return (size_t)snprintf(buf, len, ",%s=%llums", key, (unsigned long long)(us / 1000));
}

int emunic_fault_format(const struct emunic_fault_spec *s, char *buf, size_t len)
{
	size_t n = 0;

#define PUT(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
#define PUTD(key, us) (n += put_dur(buf + n, n < len ? len - n : 0, key, us))
	if (!s || !buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	for (int i = 0; i < s->n; i++) {
		const struct fault_rule *r = &s->r[i];

		PUT("%s%s:", i ? ";" : "", kind_names[r->kind]);
		switch (r->kind) {
		case FAULT_RNR:
		case FAULT_RETRY:
			PUT("peer=%d", r->peer);
			if (r->from >= 0)
				PUT(",from=%d", r->from);
			PUT(",after=%llu", (unsigned long long)r->after);
			if (r->retries >= 0)
				PUT(",retries=%d", r->retries);
			if (r->kind == FAULT_RNR && r->hold_us)
				PUTD("hold", r->hold_us);
			if (r->kind == FAULT_RETRY && r->timeout >= 0)
				PUT(",timeout=%d", r->timeout);
			break;
		case FAULT_LOSS:
			PUT("p=%u.%06u", r->p_ppm / 1000000, r->p_ppm % 1000000);
			if (r->delay_us)
				PUTD("delay", r->delay_us);
			if (r->jitter_us)
				PUTD("jitter", r->jitter_us);
			break;
		case FAULT_WC:
			PUT("status=%s_ERR", status_names[r->status]);
			if (r->op)
				PUT(",op=%llu", (unsigned long long)r->op);
			else
				PUT(",p=%u.%06u", r->p_ppm / 1000000, r->p_ppm % 1000000);
			PUT(",count=%llu,seed=%llu", (unsigned long long)r->count, (unsigned long long)r->seed);
			if (r->rank >= 0)
				PUT(",rank=%d", r->rank);
			if (r->peer >= 0)
				PUT(",peer=%d", r->peer);
			if (r->opcode)
				PUT(",opcode=%s", opcode_names[r->opcode]);
			break;
		}
	}
#undef PUT
#undef PUTD
	return n < len ? 0 : -ENOSPC;
}

int emunic_fault_loss(const struct emunic_fault_spec *s, uint32_t *p_ppm, uint64_t *delay_us, uint64_t *jitter_us)
{
	for (int i = 0; s && i < s->n; i++)
		if (s->r[i].kind == FAULT_LOSS) {
			*p_ppm = s->r[i].p_ppm;
			*delay_us = s->r[i].delay_us;
			*jitter_us = s->r[i].jitter_us;
			return 0;
		}
	return -ENOENT;
}
