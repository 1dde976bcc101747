/* SPDX-License-Identifier: MIT */
/*
 * The offloaded allreduce: recursive doubling on the barrier's schedule
 * (schedule.c), each allreduce one task list, every reduction a CALC task
 * the progress core runs when the data it needs has arrived (seed 001's
 * calc, as MVAPICH2 used CORE-Direct's).  For rank r, over its steps:
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
 * Buffers: AR_SLOTS slots, one registered region; a slot holds an
 * allreduce's copy of sbuf, a landing buffer per wait step (tmp) and a
 * result per step (acc), max_bytes each.  Allreduce k's list posts the
 * receives of allreduce k + 1 (a window of one, as the barrier's): a
 * partner's data for k + 1 is released only after its list for k ran, which
 * needed this rank's data for k, so those receives are up and from the
 * second allreduce on no data meets RNR (the first's receives are posted at
 * create, which a fast partner may beat: RNR retries then delay it).  So at
 * most AR_SLOTS - 1 are in flight, and a slot is reused only once the sends
 * from it completed.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define AR_SLOTS 4
#define AR_INFLIGHT (AR_SLOTS - 1)
#define AR_DEFAULT_MAX (64 * 1024)

struct ar_slot {
	uint64_t seq;			/* the allreduce using it */
	void *rbuf;
	size_t bytes;
	const void *copy_from;		/* extra rank: the result it received */
	uint64_t sends_posted, sends_done;
};

struct coll_ar {
	size_t limit;			/* max_bytes */
	size_t max;			/* ... rounded up: a buffer's size */
	size_t slot_bytes;
	unsigned char *mem;
	struct emunic_mr *mr;
	bool extra;			/* rank >= N: folded into rank - N */
	struct ar_slot slot[AR_SLOTS];
};

enum ar_buf { AR_SRC, AR_TMP, AR_ACC };

static unsigned char *buf(const struct emunic_coll *c, uint64_t seq, enum ar_buf b, int step)
{
	const struct coll_ar *ar = c->ar;
	size_t off = b == AR_SRC ? 0 : b == AR_TMP ? 1 + (size_t)step : 1 + (size_t)c->nstep + (size_t)step;

	return ar->mem + (seq % AR_SLOTS) * ar->slot_bytes + off * ar->max;
}

static int ar_setup(struct emunic_coll *c)
{
	struct coll_ar *ar;
	size_t total;
	int n = coll_rd_schedule(c->rank, c->size, &c->step), r;

	if (n < 0)
		return n;
	c->nstep = n;
	for (int i = 0; i < c->nstep; i++)
		c->peer[c->step[i].peer].partner = true;
	/* Per step at most: a receive, two CALCs (or a SEND), SEND_EN, WAIT. */
	c->ntask = 5 * (unsigned)c->nstep + 1;
	c->task = calloc(c->ntask, sizeof(*c->task));
	c->ar = ar = calloc(1, sizeof(*ar));
	if (!c->task || !ar)
		return -ENOMEM;
	ar->limit = c->attr.max_bytes ? c->attr.max_bytes : AR_DEFAULT_MAX;
	ar->max = (ar->limit + 63) & ~(size_t)63;
	ar->slot_bytes = (1 + 2 * (size_t)c->nstep) * ar->max;
	ar->extra = c->rank >= coll_rd_pow2(c->size);
	total = AR_SLOTS * ar->slot_bytes;
	ar->mem = aligned_alloc(4096, (total + 4095) & ~(size_t)4095);
	if (!ar->mem)
		return coll_err(c, -ENOMEM, "allreduce: no memory for %zu bytes of buffers (max_bytes %zu)", total,
				ar->max);
	memset(ar->mem, 0, total);
	r = emunic_mr_reg(c->dev, ar->mem, total, &ar->mr);
	if (r)
		return coll_err(c, r, "allreduce: registering %zu bytes of buffers failed (%d)", total, r);
	return 0;
}

static struct emunic_task *add(struct emunic_coll *c, unsigned *n, int op, int peer, uint64_t seq)
{
	struct emunic_task *t = &c->task[(*n)++];

	*t = (struct emunic_task){ .op = op, .wr_id = coll_wr_id(seq, peer), .qp = c->peer[peer].qp,
				   .mr = c->ar->mr };
	return t;
}

/* The receives of allreduce seq, one per wait step, into its slot. */
static void add_recvs(struct emunic_coll *c, unsigned *n, uint64_t seq)
{
	for (int i = 0; i < c->nstep; i++)
		if (c->step[i].wait) {
			struct emunic_task *t = add(c, n, EMUNIC_TASK_RECV, c->step[i].peer, seq);

			t->addr = buf(c, seq, AR_TMP, i);
			t->len = (uint32_t)c->ar->max;
		}
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

/* Allreduce seq's list; returns its length, *nsends the sends in it. */
static unsigned build_list(struct emunic_coll *c, const struct coll_args *a, uint64_t seq, uint32_t bytes,
			   unsigned *nsends)
{
	const unsigned char *cur = buf(c, seq, AR_SRC, 0), *tmp = NULL;
	unsigned n = 0;
	int from = -1;		/* whose data tmp holds */

	*nsends = 0;
	add_recvs(c, &n, seq + 1);	/* the window: the next allreduce's */
	for (int i = 0; i < c->nstep; i++) {
		const struct coll_step *st = &c->step[i];
		unsigned char *acc = buf(c, seq, AR_ACC, i);
		struct emunic_task *t;

		if (st->send) {
			if (tmp && !st->wait && !c->ar->extra)	/* the last step: the result is known */
				add_fold(c, &n, a, st->peer, seq, false, a->rbuf, cur, tmp, from, bytes);
			if (tmp) {
				add_fold(c, &n, a, st->peer, seq, true, acc, cur, tmp, from, bytes);
				cur = acc;
				tmp = NULL;
			} else {
				t = add(c, &n, EMUNIC_TASK_SEND, st->peer, seq);
				t->addr = (void *)cur;
				t->len = bytes;
			}
			t = add(c, &n, EMUNIC_TASK_SEND_EN, st->peer, seq);
			t->count = 1;
			++*nsends;
		}
		if (st->wait) {
			if (tmp) {	/* two waits in a row: fold the first here */
				add_fold(c, &n, a, st->peer, seq, false, acc, cur, tmp, from, bytes);
				cur = acc;
			}
			t = add(c, &n, EMUNIC_TASK_WAIT, st->peer, seq);
			t->qp = NULL;
			t->cq = c->peer[st->peer].rcq;
			t->count = 1;
			t->flags = EMUNIC_TASK_WAIT_EN_LAST;
			tmp = buf(c, seq, AR_TMP, i);
			from = st->peer;
		}
	}
	if (tmp && !c->ar->extra)
		add_fold(c, &n, a, from, seq, false, a->rbuf, cur, tmp, from, bytes);
	c->task[n - 1].flags |= EMUNIC_TASK_SIGNAL;
	return n;
}

static int ar_post(struct emunic_coll *c, const struct coll_args *a, uint64_t *seq)
{
	struct coll_ar *ar = c->ar;
	uint64_t s = c->posted + 1;
	struct ar_slot *sl = &ar->slot[s % AR_SLOTS];
	size_t esz, bytes;
	unsigned n, nsends;
	int r;

	/* From a failure on, every allreduce fails with it (its slot may
	 * never drain: what the failure skipped never completes). */
	if (c->err && s >= c->err_seq)
		return c->err;
	if (emunic_calc_check(a->op, a->type))
		return coll_err(c, -EINVAL, "allreduce %llu: %s is not defined on %s (op %d, type %d)",
				(unsigned long long)s, emunic_calc_op_str(a->op), emunic_calc_type_str(a->type), a->op,
				a->type);
	esz = emunic_calc_size(a->type);
	if (a->count && (!a->sbuf || !a->rbuf))
		return coll_err(c, -EINVAL, "allreduce %llu: a NULL buffer", (unsigned long long)s);
	if (a->count > ar->limit / esz)
		return coll_err(c, -EMSGSIZE, "allreduce %llu: %zu %s elements are more than max_bytes (%zu)",
				(unsigned long long)s, a->count, emunic_calc_type_str(a->type), ar->limit);
	bytes = a->count * esz;
	if (c->size == 1) {
		if (bytes)
			memmove(a->rbuf, a->sbuf, bytes);
		c->posted = c->done = s;
		*seq = s;
		return 0;
	}
	/* The slot must be free: its last allreduce done, its sends read. */
	if (c->posted - c->done >= AR_INFLIGHT || sl->sends_done < sl->sends_posted)
		return -ENOSPC;
	if (bytes)
		memcpy(buf(c, s, AR_SRC, 0), a->sbuf, bytes);
	n = build_list(c, a, s, (uint32_t)bytes, &nsends);
	r = emunic_mq_post(c->mq, c->task, n);
	if (r == -ENOSPC)
		return r;
	if (r)
		return coll_err(c, r, "allreduce %llu: posting its %u-task list failed (%d)", (unsigned long long)s,
				n, r);
	*sl = (struct ar_slot){ .seq = s, .rbuf = a->rbuf, .bytes = bytes, .sends_posted = nsends,
				.copy_from = ar->extra ? buf(c, s, AR_TMP, 0) : NULL };
	c->posted = s;
	c->sends_posted += nsends;
	*seq = s;
	return 0;
}

/* The receives of allreduce 1, before anything is posted. */
static int ar_prepost(struct emunic_coll *c)
{
	unsigned n = 0;
	int r;

	if (c->size == 1)
		return 0;
	add_recvs(c, &n, 1);
	r = emunic_mq_post(c->mq, c->task, n);
	return r ? coll_err(c, r, "allreduce: posting the %u initial receives failed (%d)", n, r) : 0;
}

static void ar_complete(struct emunic_coll *c, uint64_t seq)
{
	struct ar_slot *sl = &c->ar->slot[seq % AR_SLOTS];

	if (sl->seq == seq && sl->copy_from && sl->bytes)
		memcpy(sl->rbuf, sl->copy_from, sl->bytes);
}

static void ar_send_done(struct emunic_coll *c, uint64_t seq)
{
	struct ar_slot *sl = &c->ar->slot[seq % AR_SLOTS];

	if (sl->seq == seq)
		sl->sends_done++;
}

static void ar_fini(struct emunic_coll *c)
{
	if (!c->ar)
		return;
	if (c->ar->mr)
		emunic_mr_dereg(c->ar->mr);
	free(c->ar->mem);
	free(c->ar);
	c->ar = NULL;
}

const struct coll_alg coll_allreduce_alg = {
	.name = "allreduce",
	.setup = ar_setup,
	.prepost = ar_prepost,
	.post = ar_post,
	.fence = coll_send_fence,
	.complete = ar_complete,
	.send_done = ar_send_done,
	.fini = ar_fini,
};
