/* SPDX-License-Identifier: MIT */
/*
 * The offloaded allreduce's task lists (allreduce.c posts them), one list
 * an allreduce, every reduction a CALC task.  Below the threshold,
 * recursive doubling on the barrier's schedule (schedule.c); for rank r,
 * over its steps:
 *
 *   wait-only step (r < N, from r+N):   WAIT           the extra rank's data
 *   send+wait step (r^d):               CALC(qp) or SEND, SEND_EN, WAIT
 *   send-only step (r < N, to r+N):     CALC(local: rbuf), CALC(qp), SEND_EN*
 *   end (r < N, no extra rank):         CALC(local: rbuf)*
 *   extra rank r >= N:                  SEND(src), SEND_EN, WAIT*, then the
 *                                       app copies the result it received
 *   (* = SIGNAL: its MQ completion is the allreduce's)
 *
 * CALC(qp) sends cur op tmp, where tmp is what the last WAIT guarded: it
 * runs only once its SEND_EN is released, i.e. after that WAIT.  Each pair
 * reduces the same two operands in the same order (add_fold), so every rank
 * ends with the same bits.
 *
 * From the threshold on, reduce-scatter + allgather (Rabenseifner; rsag.c's
 * steps), in place in the allreduce's copy of sbuf (V), ranges in elements:
 *
 *   RECV(each partner's gather, straight into V), then the next's receives
 *   IN (r < N, from r+N):     WAIT
 *   HALVE (r^d, d = N/2..1):  CALC(qp: V[send] = V op tmp) or SEND(V[send]),
 *                             SEND_EN, CALC(local: V[keep] = V op tmp), WAIT
 *   GATHER (r^d, d = 1..N/2): CALC(qp: V[block r] = V op tmp) the first,
 *                             else SEND(V[mine]); SEND_EN, WAIT
 *   OUT (r < N, to r+N):      SEND(V), SEND_EN
 *   EXTRA (r >= N):           SEND(V), SEND_EN, WAIT (the result, in tmp)
 *   (the last task SIGNAL; the app copies V, or the extra rank's tmp, to
 *   rbuf at completion)
 *
 * Each block's result is reduced by one rank only and copied by the others,
 * so every rank has the same bits; the reductions keep the lower rank's
 * operand first all the same.  V is safe to write in place: a range sent at
 * a halving is overwritten only by a gather whose data left its peer after
 * that peer had this rank's data.  A partner's gather is released only by
 * its halving with this rank, which needs this rank's data, sent after this
 * list posted the gather's receive: no RNR either.  A step whose blocks are
 * empty (fewer elements than ranks) still sends its message, of 0 bytes,
 * so both sides count messages alike.
 */
#include "engines/coll/allreduce.h"

static struct emunic_task *add(struct emunic_coll *c, unsigned *n, int op, int peer, uint64_t seq)
{
	return coll_task_add(c, n, op, peer, seq, c->ar->mr);
}

void coll_ar_recvs(struct emunic_coll *c, unsigned *n, uint64_t seq)
{
	for (int i = 0; i < c->nstep; i++)
		if (c->step[i].wait) {
			struct emunic_task *t = add(c, n, EMUNIC_TASK_RECV, c->step[i].peer, seq);

			t->addr = coll_ar_buf(c, seq, AR_TMP, i);
			t->len = (uint32_t)c->ar->max;
		}
}

static void add_send(struct emunic_coll *c, unsigned *n, int peer, uint64_t seq, const void *addr, uint32_t len)
{
	struct emunic_task *t = add(c, n, EMUNIC_TASK_SEND, peer, seq);

	t->addr = (void *)addr;
	t->len = len;
}

/* Releases the send (or CALC) just added; one more send in *nsends. */
static void add_send_en(struct emunic_coll *c, unsigned *n, int peer, uint64_t seq, unsigned *nsends)
{
	add(c, n, EMUNIC_TASK_SEND_EN, peer, seq)->count = 1;
	++*nsends;
}

static void add_calc(struct emunic_coll *c, unsigned *n, const struct coll_args *a, int peer, uint64_t seq,
		     bool to_peer, void *dst, const void *x, const void *y, uint32_t bytes)
{
	struct emunic_task *t = add(c, n, EMUNIC_TASK_CALC, peer, seq);

	if (!to_peer)
		t->qp = NULL;	/* local: runs on the MQ, in order */
	t->addr = dst;
	t->len = bytes;
	t->calc_op = a->op;
	t->calc_type = a->type;
	t->calc_a = x;
	t->calc_b = y;
}

/*
 * A reduction of this rank's cur with what came from rank `from` (tmp):
 * always the lower rank's operand first, so both ranks of a pair compute
 * the same thing bit for bit even where op is not symmetric in its bits
 * (MIN of -0 and +0, MAX with a NaN, which NaN a SUM keeps).
 */
static void add_fold(struct emunic_coll *c, unsigned *n, const struct coll_args *a, int peer, uint64_t seq,
		     bool to_peer, void *dst, const void *cur, const void *tmp, int from, uint32_t bytes)
{
	bool mine_first = c->rank < from;

	add_calc(c, n, a, peer, seq, to_peer, dst, mine_first ? cur : tmp, mine_first ? tmp : cur, bytes);
}

unsigned coll_ar_rd_list(struct emunic_coll *c, const struct coll_args *a, uint64_t seq, uint32_t bytes,
			 unsigned *nsends)
{
	const unsigned char *cur = coll_ar_buf(c, seq, AR_SRC, 0), *tmp = NULL;
	unsigned n = 0;
	int from = -1;		/* whose data tmp holds */

	*nsends = 0;
	coll_ar_recvs(c, &n, seq + 1);	/* the window: the next allreduce's */
	for (int i = 0; i < c->nstep; i++) {
		const struct coll_step *st = &c->step[i];
		unsigned char *acc = coll_ar_buf(c, seq, AR_ACC, i);

		if (st->send) {
			if (tmp && !st->wait && !c->ar->extra)	/* the last step: the result is known */
				add_fold(c, &n, a, st->peer, seq, false, a->rbuf, cur, tmp, from, bytes);
			if (tmp) {
				add_fold(c, &n, a, st->peer, seq, true, acc, cur, tmp, from, bytes);
				cur = acc;
				tmp = NULL;
			} else {
				add_send(c, &n, st->peer, seq, cur, bytes);
			}
			add_send_en(c, &n, st->peer, seq, nsends);
		}
		if (st->wait) {
			if (tmp) {	/* two waits in a row: fold the first here */
				add_fold(c, &n, a, st->peer, seq, false, acc, cur, tmp, from, bytes);
				cur = acc;
			}
			coll_task_wait(c, &n, st->peer, seq, 1);
			tmp = coll_ar_buf(c, seq, AR_TMP, i);
			from = st->peer;
		}
	}
	if (tmp && !c->ar->extra)
		add_fold(c, &n, a, from, seq, false, a->rbuf, cur, tmp, from, bytes);
	c->task[n - 1].flags |= EMUNIC_TASK_SIGNAL;
	return n;
}

/* The wait step of peer's messages (its first lands in that step's tmp). */
static int step_of(const struct emunic_coll *c, int peer)
{
	for (int i = 0; i < c->nstep; i++)
		if (c->step[i].wait && c->step[i].peer == peer)
			return i;
	return 0;
}

/* V[off, off + cnt) = V op tmp over those elements (tmp's first element is
 * element tmp_off), from rank from's data; to_peer: then sent to peer. */
static void fold_range(struct emunic_coll *c, unsigned *n, const struct coll_args *a, int peer, uint64_t seq,
		       bool to_peer, unsigned char *v, size_t off, size_t cnt, const unsigned char *tmp,
		       size_t tmp_off, int from)
{
	size_t es = emunic_calc_size(a->type);
	unsigned char *dst = v + off * es;

	add_fold(c, n, a, peer, seq, to_peer, dst, dst, tmp + (off - tmp_off) * es, from, (uint32_t)(cnt * es));
}

unsigned coll_ar_rsag_list(struct emunic_coll *c, const struct coll_args *a, uint64_t seq, unsigned *nsends)
{
	struct coll_ar *ar = c->ar;
	size_t es = emunic_calc_size(a->type), tmp_off = 0;
	unsigned char *v = coll_ar_buf(c, seq, AR_SRC, 0);
	const unsigned char *tmp = NULL;	/* a partial to reduce into V, from rank `from` */
	int ns = coll_rsag_plan(c->rank, c->size, a->count, ar->plan), from = -1;
	unsigned n = 0;

	*nsends = 0;
	/* A partner's second message (its gather) lands in place; its
	 * receive goes up before the next allreduce's first. */
	for (int i = 0; i < ns; i++)
		if (ar->plan[i].kind == COLL_RS_GATHER) {
			struct emunic_task *t = add(c, &n, EMUNIC_TASK_RECV, ar->plan[i].peer, seq);

			t->addr = v + ar->plan[i].roff * es;
			t->len = (uint32_t)(ar->plan[i].rcnt * es);
		}
	coll_ar_recvs(c, &n, seq + 1);
	for (int i = 0; i < ns; i++) {
		const struct coll_rs_step *st = &ar->plan[i];

		if (coll_rs_sends(st->kind)) {
			if (tmp)
				fold_range(c, &n, a, st->peer, seq, true, v, st->soff, st->scnt, tmp, tmp_off, from);
			else
				add_send(c, &n, st->peer, seq, v + st->soff * es, (uint32_t)(st->scnt * es));
			add_send_en(c, &n, st->peer, seq, nsends);
			if (tmp && st->kind == COLL_RS_HALVE && st->rcnt)	/* the half kept */
				fold_range(c, &n, a, st->peer, seq, false, v, st->roff, st->rcnt, tmp, tmp_off, from);
			tmp = NULL;
		}
		if (coll_rs_waits(st->kind)) {
			coll_task_wait(c, &n, st->peer, seq, 1);
			if (st->kind == COLL_RS_IN || st->kind == COLL_RS_HALVE) {
				tmp = coll_ar_buf(c, seq, AR_TMP, step_of(c, st->peer));
				tmp_off = st->roff;
				from = st->peer;
			}
		}
	}
	c->task[n - 1].flags |= EMUNIC_TASK_SIGNAL;
	return n;
}
