/* SPDX-License-Identifier: MIT */
/*
 * The host-progressed allreduce (see ptp.h): the offloaded allreduce's
 * algorithm (engines/coll/allreduce.c) run by the application thread over
 * plain verbs, so the benchmark compares two ways of running one algorithm.
 * The schedules are the offload's: below the threshold (rsag.h's
 * coll_rsag_bytes, the same for both) recursive doubling on schedule.c's
 * steps, from it reduce-scatter + allgather on rsag.c's, in place in the
 * slot's copy of sbuf; each pair reduces with emunic_calc, the lower rank's
 * operand first, as the offload's CALC tasks do.
 *
 * Data lands in a window of PTPA_WINDOW receive buffers per waited-for
 * peer: the k-th message from q lands in buffer (k - 1) % W, and its
 * receive is posted again once the allreduce that reads it has used it.
 * A partner sends allreduce k's first message only after it finished
 * k - 1, which needed this rank's last message for k - 1, sent only after
 * this rank used all but that partner's last for k - 1 (its gather, in
 * reduce-scatter + allgather): at most three unused, so W = 4 never meets
 * RNR.  Allreduces run one at a time, oldest first; at most PTPA_SLOTS - 1
 * are in flight, each with a slot (its copy of sbuf and a result per step)
 * reused only once the sends from it completed.
 */
#include "baseline/ptp.h"
#include "baseline/ptp_cq.h"
#include "engines/coll/rsag.h"
#include "engines/coll/schedule.h"
#include "emunic/base/log.h"
#include "emunic/verbs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define PTPA_WINDOW 4
#define PTPA_SLOTS 4
#define PTPA_PEER_BITS 24
#define PTPA_PEER_MASK ((1ull << PTPA_PEER_BITS) - 1)
#define PTPA_RECV_FLAG (1ull << 63)

struct ptpa_op {
	void *rbuf;
	size_t bytes, count;
	int type, op;
	bool rsag;			/* reduce-scatter + allgather */
	unsigned sends_out;		/* sends from its slot not yet complete */
};

struct emunic_ptp_ar {
	struct ptp_base b;		/* mem: the slots, then the landing windows */
	struct coll_step *step;
	int nstep;
	bool extra;			/* rank >= N */
	size_t rsag;			/* from this many bytes: reduce-scatter + allgather */
	size_t max;
	int *land_of;			/* by rank: its landing window, or -1 */
	uint64_t *arrived, *folded;	/* by rank: messages arrived, used */
	struct ptpa_op op[PTPA_SLOTS];
	struct ptp_ops ops;		/* allreduces, numbered from 1; the first failure */
	int cur;			/* the oldest allreduce's next step */
	bool cur_sent;
	const unsigned char *acc;	/* ... its running result */
	int pend;			/* ... the rank whose data waits to be folded (-1) */
	uint64_t plan_seq;		/* reduce-scatter + allgather: whose steps plan holds */
	int nplan;
	struct coll_rs_step plan[COLL_RS_MAX_STEPS];
};

struct emunic_ptp_ar_req {
	struct ptp_req r;
};

/* An allreduce call's arguments. */
struct ptpa_args {
	const void *sbuf;
	void *rbuf;
	size_t count;
	int type, op;
};

/* Slot seq % SLOTS: its copy of sbuf (b = 0) or step b - 1's result. */
static unsigned char *slot_buf(const struct emunic_ptp_ar *p, uint64_t seq, int b)
{
	return p->b.mem + ((seq % PTPA_SLOTS) * (1 + (size_t)p->nstep) + (size_t)b) * p->max;
}

/* Where the k-th message (from 1) of rank q lands. */
static unsigned char *land(const struct emunic_ptp_ar *p, int q, uint64_t k)
{
	size_t w = (size_t)p->land_of[q] * PTPA_WINDOW + (size_t)((k - 1) % PTPA_WINDOW);

	return p->b.mem + (PTPA_SLOTS * (1 + (size_t)p->nstep) + w) * p->max;
}

/* The receive for message k of rank q. */
static int post_recv(struct emunic_ptp_ar *p, int q, uint64_t k)
{
	struct ibv_sge sge = { .addr = (uintptr_t)land(p, q, k), .length = (uint32_t)p->max, .lkey = p->b.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = PTPA_RECV_FLAG | (uint64_t)q, .sg_list = &sge, .num_sge = 1 }, *bad;
	int r = emunic_shim_post_recv(&p->b.dev->shim, p->b.mesh->conn[q].qp, &wr, &bad);

	return r ? emunic_err(r, "ptp allreduce: peer %d: posting a receive failed: %s", q, strerror(-r)) : 0;
}

static int post_send(struct emunic_ptp_ar *p, int q, uint64_t seq, const void *buf, size_t bytes)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = (uint32_t)bytes, .lkey = p->b.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = seq << PTPA_PEER_BITS | (uint64_t)q, .sg_list = &sge, .num_sge = bytes ? 1 : 0,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int r = emunic_shim_post_send(&p->b.dev->shim, p->b.mesh->conn[q].qp, &wr, &bad);

	if (r)
		return emunic_err(r, "ptp allreduce %llu: posting the send to peer %d failed: %s",
				  (unsigned long long)seq, q, strerror(-r));
	p->op[seq % PTPA_SLOTS].sends_out++;
	return 0;
}

static void on_wc(void *ctx, const struct ibv_wc *wc)
{
	struct emunic_ptp_ar *p = ctx;
	bool recv = wc->wr_id & PTPA_RECV_FLAG;
	int q = (int)(wc->wr_id & PTPA_PEER_MASK);
	uint64_t seq = recv ? p->ops.done + 1 : (wc->wr_id & ~PTPA_RECV_FLAG) >> PTPA_PEER_BITS;

	if (!recv)
		p->op[seq % PTPA_SLOTS].sends_out--;
	if (wc->status != IBV_WC_SUCCESS) {
		emunic_err(-EIO, "ptp allreduce %llu: %s peer %d (qp %u) failed: %s", (unsigned long long)seq,
			   recv ? "receive from" : "send to", q, wc->qp_num, ibv_wc_status_str(wc->status));
		ptp_ops_fail(&p->ops, seq, -EIO);
	} else if (recv) {
		p->arrived[q]++;
	}
}

static int poll_cq(struct emunic_ptp_ar *p)
{
	return ptp_cq_poll(&p->b.q, on_wc, p, "ptp allreduce");
}

/* The next message from q, landed. */
static const unsigned char *next_in(const struct emunic_ptp_ar *p, int q)
{
	return land(p, q, p->folded[q] + 1);
}

/* q's next message is used: its landing buffer's receive goes back up. */
static int consume(struct emunic_ptp_ar *p, int q)
{
	p->folded[q]++;
	return post_recv(p, q, p->folded[q] + PTPA_WINDOW);
}

/* dst = mine op in (count elements), the lower rank's operand first. */
static void reduce(const struct emunic_ptp_ar *p, const struct ptpa_op *o, void *dst, const void *mine,
		   const void *in, int q, size_t count)
{
	if (p->b.rank < q)
		emunic_calc(o->op, o->type, dst, mine, in, count);
	else
		emunic_calc(o->op, o->type, dst, in, mine, count);
}

/* dst = acc op (what came from q); the landing buffer is free again. */
static int fold(struct emunic_ptp_ar *p, const struct ptpa_op *o, void *dst, int q)
{
	reduce(p, o, dst, p->acc, next_in(p, q), q, o->count);
	p->acc = dst;
	return consume(p, q);
}

/* Reduce-scatter + allgather (rsag.h) of allreduce seq as far as what
 * arrived allows, in place in its copy of sbuf: 1 done, 0 not yet, or an
 * error. */
static int advance_rsag(struct emunic_ptp_ar *p, uint64_t seq, const struct ptpa_op *o)
{
	size_t es = emunic_calc_size(o->type);
	unsigned char *v = slot_buf(p, seq, 0);

	if (p->plan_seq != seq) {
		p->nplan = coll_rsag_plan(p->b.rank, p->b.size, o->count, p->plan);
		p->plan_seq = seq;
	}
	for (; p->cur < p->nplan; p->cur++, p->cur_sent = false) {
		const struct coll_rs_step *st = &p->plan[p->cur];
		int q = st->peer, r;

		if (coll_rs_sends(st->kind) && !p->cur_sent) {
			r = post_send(p, q, seq, v + st->soff * es, st->scnt * es);
			if (r)
				return r;
			p->cur_sent = true;
		}
		if (!coll_rs_waits(st->kind))
			continue;
		if (p->arrived[q] <= p->folded[q])
			return 0;
		switch (st->kind) {
		case COLL_RS_EXTRA:	/* the result itself */
			if (o->bytes)
				memcpy(o->rbuf, next_in(p, q), o->bytes);
			break;
		case COLL_RS_GATHER:
			memcpy(v + st->roff * es, next_in(p, q), st->rcnt * es);
			break;
		default:		/* IN, HALVE */
			reduce(p, o, v + st->roff * es, v + st->roff * es, next_in(p, q), q, st->rcnt);
		}
		r = consume(p, q);
		if (r)
			return r;
	}
	if (!p->extra && o->bytes)
		memcpy(o->rbuf, v, o->bytes);
	return 1;
}

/* Runs the oldest allreduce as far as what arrived allows, then the next. */
static int advance(struct emunic_ptp_ar *p)
{
	while (p->ops.done < p->ops.posted && !p->ops.err) {
		uint64_t seq = p->ops.done + 1;
		struct ptpa_op *o = &p->op[seq % PTPA_SLOTS];
		int r = 0;

		if (o->rsag) {
			r = advance_rsag(p, seq, o);
			if (r <= 0) {
				if (r)
					ptp_ops_fail(&p->ops, seq, r);
				return r;
			}
			p->ops.done = seq;
			p->cur = 0;
			continue;
		}
		if (p->cur == 0 && !p->cur_sent && p->pend < 0)
			p->acc = slot_buf(p, seq, 0);
		for (; p->cur < p->nstep; p->cur++, p->cur_sent = false) {
			const struct coll_step *st = &p->step[p->cur];

			if (st->send && !p->cur_sent) {
				if (p->pend >= 0) {
					r = fold(p, o, slot_buf(p, seq, 1 + p->cur), p->pend);
					p->pend = -1;
				}
				r = r ? r : post_send(p, st->peer, seq, p->acc, o->bytes);
				if (r) {
					ptp_ops_fail(&p->ops, seq, r);
					return r;
				}
				p->cur_sent = true;
			}
			if (st->wait) {
				if (p->arrived[st->peer] <= p->folded[st->peer])
					return 0;
				p->pend = st->peer;
			}
		}
		if (p->pend >= 0 && p->extra) {		/* the result itself came */
			if (o->bytes)
				memcpy(o->rbuf, next_in(p, p->pend), o->bytes);
			r = consume(p, p->pend);
		} else if (p->pend >= 0) {
			r = fold(p, o, o->rbuf, p->pend);
		} else if (o->bytes && p->acc != o->rbuf) {
			memcpy(o->rbuf, p->acc, o->bytes);	/* sent to the extra rank last */
		}
		p->pend = -1;
		if (r) {
			ptp_ops_fail(&p->ops, seq, r);
			return r;
		}
		p->ops.done = seq;
		p->cur = 0;
	}
	return 0;
}

static int progress(void *ctx)
{
	struct emunic_ptp_ar *p = ctx;
	int r = p->b.q.cq ? poll_cq(p) : 0;

	return r ? r : advance(p);
}

static int report_timeout(void *ctx, uint64_t seq, int timeout_ms)
{
	(void)ctx;
	return emunic_err(-ETIMEDOUT, "ptp allreduce %llu not complete after %d ms", (unsigned long long)seq,
			  timeout_ms);
}

static int wait_seq(void *ctx, uint64_t seq, int timeout_ms)
{
	struct emunic_ptp_ar *p = ctx;

	return ptp_cq_wait(&p->b.q, progress, report_timeout, p, &p->ops, seq, timeout_ms, p->b.spin_us,
			   "ptp allreduce");
}

/* Starts an allreduce: copies sbuf into its slot and runs what it can. */
static int start(void *ctx, const void *args, uint64_t *seq)
{
	struct emunic_ptp_ar *p = ctx;
	const struct ptpa_args *a = args;
	const void *sbuf = a->sbuf;
	void *rbuf = a->rbuf;
	size_t count = a->count;
	int type = a->type, op = a->op;
	uint64_t s = p->ops.posted + 1;
	struct ptpa_op *o = &p->op[s % PTPA_SLOTS];
	size_t bytes = count * emunic_calc_size(type);
	int r;

	if (emunic_calc_check(op, type))
		return emunic_err(-EINVAL, "ptp allreduce: op %d is not defined on type %d", op, type);
	if (count > p->max / emunic_calc_size(type))
		return emunic_err(-EMSGSIZE, "ptp allreduce: %zu bytes, more than %zu", bytes, p->max);
	if (p->ops.err)
		return p->ops.err;
	r = p->b.q.cq ? poll_cq(p) : 0;
	if (r)
		return r;
	if (p->ops.posted - p->ops.done >= PTPA_SLOTS - 1 || o->sends_out)
		return -ENOSPC;
	*o = (struct ptpa_op){ .rbuf = rbuf, .bytes = bytes, .count = count, .type = type, .op = op,
			       .rsag = bytes >= p->rsag };
	if (p->b.size == 1 || !bytes) {
		if (bytes)
			memmove(rbuf, sbuf, bytes);
	} else {
		memcpy(slot_buf(p, s, 0), sbuf, bytes);
	}
	if (p->b.size == 1) {
		p->ops.posted = p->ops.done = s;
		*seq = s;
		return 0;
	}
	p->ops.posted = *seq = s;
	return advance(p);
}

static const struct ptp_kind kind = { "ptp allreduce", start, progress, wait_seq };

int emunic_ptp_allreduce(struct emunic_ptp_ar *p, const void *sbuf, void *rbuf, size_t count, int type, int op)
{
	const struct ptpa_args a = { sbuf, rbuf, count, type, op };

	return p ? ptp_call(&kind, p, &a, ptp_base_bound(&p->b)) : -EINVAL;
}

int emunic_ptp_iallreduce(struct emunic_ptp_ar *p, const void *sbuf, void *rbuf, size_t count, int type, int op,
			  struct emunic_ptp_ar_req **out)
{
	const struct ptpa_args a = { sbuf, rbuf, count, type, op };

	return p ? ptp_req_start(&kind, p, &p->ops, NULL, &a, out) : -EINVAL;
}

int emunic_ptp_ar_test(struct emunic_ptp_ar_req *req)
{
	return ptp_req_test((struct ptp_req *)req);
}

int emunic_ptp_ar_wait(struct emunic_ptp_ar_req *req, int timeout_ms)
{
	return ptp_req_wait((struct ptp_req *)req, timeout_ms);
}

/* ---- create / destroy ---------------------------------------------------- */

static int setup(struct emunic_ptp_ar *p)
{
	int n = coll_rd_schedule(p->b.rank, p->b.size, &p->step), nland = 0;

	if (n < 0)
		return n;
	p->nstep = n;
	p->extra = p->b.rank >= coll_rd_pow2(p->b.size);
	p->land_of = malloc((size_t)p->b.size * sizeof(*p->land_of));
	p->arrived = calloc((size_t)p->b.size, sizeof(*p->arrived));
	p->folded = calloc((size_t)p->b.size, sizeof(*p->folded));
	if (!p->land_of || !p->arrived || !p->folded)
		return -ENOMEM;
	for (int q = 0; q < p->b.size; q++)
		p->land_of[q] = -1;
	for (int i = 0; i < p->nstep; i++)
		if (p->step[i].wait)
			p->land_of[p->step[i].peer] = nland++;
	return ptp_base_alloc(&p->b, (PTPA_SLOTS * (1 + (size_t)p->nstep) + (size_t)nland * PTPA_WINDOW) * p->max);
}

/* q's landing window's receives, if it has one. */
static int post_window(void *ctx, int q)
{
	struct emunic_ptp_ar *p = ctx;
	int r = 0;

	for (uint64_t k = 1; !r && p->land_of[q] >= 0 && k <= PTPA_WINDOW; k++)
		r = post_recv(p, q, k);
	return r;
}

static int open_verbs(struct emunic_ptp_ar *p)
{
	int depth = 4 * PTPA_SLOTS * p->nstep + PTPA_WINDOW * p->nstep + 64;
	int r = emunic_vdev_open(NULL, &p->b.dev);

	return r ? r : ptp_base_connect(&p->b, depth, NULL, post_window, p, "ptp allreduce");
}

static void ptp_ar_free(struct emunic_ptp_ar *p)
{
	ptp_base_fini(&p->b);
	free(p->land_of);
	free(p->arrived);
	free(p->folded);
	free(p->step);
	free(p);
}

int emunic_ptp_ar_create(struct emunic_boot *boot, size_t max_bytes, int timeout_ms, int spin_us,
			 struct emunic_ptp_ar **out)
{
	struct emunic_ptp_ar *p;
	int r;

	if (!boot || !out || max_bytes > (1u << 30))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	ptp_base_init(&p->b, boot, timeout_ms, spin_us);
	p->pend = -1;
	p->max = ((max_bytes ? max_bytes : 64 * 1024) + 63) & ~(size_t)63;
	r = coll_rsag_bytes(0, p->b.size, &p->rsag);
	if (r)
		r = emunic_err(-EINVAL, "ptp allreduce: %s='%s' is not %s", COLL_RSAG_ENV, getenv(COLL_RSAG_ENV),
			       COLL_RSAG_WANTS);
	r = r ? r : setup(p);
	if (!r && p->b.size > 1)
		r = open_verbs(p);
	if (r) {
		ptp_ar_free(p);
		return r;
	}
	*out = p;
	return 0;
}

static uint64_t sends_out(void *ctx)
{
	const struct emunic_ptp_ar *p = ctx;
	uint64_t out = 0;

	for (int i = 0; i < PTPA_SLOTS; i++)
		out += p->op[i].sends_out;
	return out;
}

/* Every send must be delivered before the QPs go (the extra rank waits for
 * its result last). */
int emunic_ptp_ar_destroy(struct emunic_ptp_ar *p)
{
	int r;

	if (!p)
		return -EINVAL;
	r = ptp_cq_drain(&p->b.q, progress, sends_out, p, &p->ops, ptp_base_bound(&p->b), "send(s)", "ptp allreduce");
	ptp_ar_free(p);
	return r;
}
