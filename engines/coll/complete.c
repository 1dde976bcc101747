/* SPDX-License-Identifier: MIT */
/*
 * The application side of completion: reading what the progress core
 * finished (MQ completions: an operation done or failed; send-CQ
 * completions: a signal delivered or failed), keeping the first failure,
 * and waiting for an operation with a bound that names the late peers.
 * The collectives themselves run on the progress core; nothing here posts.
 */
#include "engines/coll/coll_int.h"

#include <errno.h>
#include <stdio.h>

#define COLL_WAIT_SLICE_MS 100	/* how often a blocked wait looks at send errors */
#define COLL_POLL_BATCH 16

static int status_errno(int status)
{
	switch (status) {
	case EMUNIC_WC_CANCELED: return -ECANCELED;
	case EMUNIC_WC_TIMEOUT: return -ETIMEDOUT;
	default: return -EIO;
	}
}

/* Operations from seq on fail with status's error.  The group is told of
 * every failure but a flushed send of an operation done here, whose QP
 * failed under it, as when a peer left once it had what it needed (at the
 * end of a job): that peer fails on its own if it missed something.  A
 * send that failed (a fault) counts: an operation done here (a bcast's
 * forward, enabled) may not be done at its peers. */
static void set_err(struct emunic_coll *c, uint64_t seq, int status)
{
	coll_set_failed(c, seq, status_errno(status), seq > c->done || status != EMUNIC_WC_WR_FLUSH_ERR);
}

/* Work flushed because this rank disconnected after its first failure
 * (coll_leave_if_failed): that failure was named, this follows from it. */
static bool consequence(const struct emunic_coll *c, const struct emunic_wc *wc)
{
	return c->left && wc->status == EMUNIC_WC_WR_FLUSH_ERR;
}

static void on_send_wc(struct emunic_coll *c, const struct emunic_wc *wc)
{
	uint64_t seq = wc->wr_id >> COLL_PEER_BITS;

	coll_send_completed(c, seq);
	if (wc->status == EMUNIC_WC_SUCCESS) {
		coll_leave_if_failed(c);	/* waiting for this send, maybe */
		return;
	}
	if (!consequence(c, wc))
		coll_err(c, 0, "%s %llu: %s to peer %d failed: %s", c->alg->name, (unsigned long long)seq,
			 emunic_task_op_str(wc->op), wc->peer >= 0 ? wc->peer : (int)(wc->wr_id & COLL_PEER_MASK),
			 emunic_wc_status_str(wc->status));
	set_err(c, seq, wc->status);
}

static void on_mq_wc(struct emunic_coll *c, const struct emunic_wc *wc)
{
	uint64_t seq = wc->wr_id >> COLL_PEER_BITS;
	int peer = (int)(wc->wr_id & COLL_PEER_MASK);

	if (wc->status == EMUNIC_WC_SUCCESS) {
		/* Lists complete in order; each finishes on the app's side. */
		for (; c->done < seq; c->done++)
			if (c->alg->complete)
				c->alg->complete(c, c->done + 1);
		coll_leave_if_failed(c);
		return;
	}
	if (peer == (int)COLL_PEER_MASK) {
		if (!c->left)	/* else the failure it counts was named */
			coll_err(c, 0, "teardown fence (WAIT for %llu send completions) failed: %s",
				 (unsigned long long)c->sends_posted, emunic_wc_status_str(wc->status));
	} else if (!consequence(c, wc)) {
		coll_err(c, 0, "%s %llu: %s for peer %d failed: %s", c->alg->name, (unsigned long long)seq,
			 emunic_task_op_str(wc->op), peer, emunic_wc_status_str(wc->status));
	}
	set_err(c, seq, wc->status);
}

/* The send CQ is drained only when its count moved since the last drain
 * (a completion is queued before it is counted): an empty poll of it would
 * run a second engine assist beside the MQ poll's own. */
static int drain_sends(struct emunic_coll *c)
{
	struct emunic_wc wc[COLL_POLL_BATCH];
	uint64_t count = emunic_cq_count(c->scq);
	int n;

	if (count == c->scq_seen)
		return 0;
	do {
		n = emunic_cq_poll(c->scq, wc, COLL_POLL_BATCH);
		if (n < 0)
			return coll_err(c, n, "polling the send CQ failed (%d)", n);
		for (int i = 0; i < n; i++)
			on_send_wc(c, &wc[i]);
	} while (n == COLL_POLL_BATCH);
	c->scq_seen = count;
	return 0;
}

/* Reads whatever the progress core finished; never blocks.  until_empty:
 * it polls till a poll finds nothing, and that poll runs the engine (an
 * assist) if it is free, so what this thread left in the command ring for
 * its own wait to run (EMUNIC_POST_WAIT_NEXT) runs too, however much was
 * queued; else a poll that found some is the last (the common calls:
 * test, post, a done operation's look behind it). */
static int progress(struct emunic_coll *c, bool until_empty)
{
	struct emunic_wc wc[COLL_POLL_BATCH];
	int n, r;

	if (c->size == 1)
		return 0;
	do {
		/* The MQ poll runs the engine if it finds nothing; then the
		 * sends, so that a send that failed by the time these MQ
		 * completions were taken is seen before them. */
		n = emunic_mq_poll(c->mq, wc, COLL_POLL_BATCH);
		if (n < 0)
			return coll_err(c, n, "polling the management queue failed (%d)", n);
		r = drain_sends(c);
		for (int i = 0; i < n; i++)
			on_mq_wc(c, &wc[i]);	/* taken: never dropped */
		if (r)
			return r;
	} while (until_empty ? n > 0 : n == COLL_POLL_BATCH);
	return 0;
}

int coll_progress(struct emunic_coll *c)
{
	return progress(c, false);
}

int coll_progress_run(struct emunic_coll *c)
{
	return progress(c, true);
}

/* Before a post: what a post must see first (a failure, room) comes in
 * completions of operations or sends still outstanding.  With every
 * operation taken and every send completed (counted on the send CQ), none
 * is on its way, so the sends are read and no engine assist runs: a
 * connection that fails after shows in the new operation's own WAITs, as
 * it would have had the assist run (the post does not look at QPs).  Not
 * after a failure: a list post that failed part-way can leave sends
 * out that sends_posted does not count, so the equality would not mean
 * "none out". */
int coll_progress_to_post(struct emunic_coll *c)
{
	if (c->size > 1 && !c->err && c->done == c->posted && emunic_cq_count(c->scq) == c->sends_posted)
		return drain_sends(c);
	return coll_progress(c);
}

/* 1 done, 0 not yet, < 0 failed.  Lists complete in order on the MQ. */
int coll_seq_status(const struct emunic_coll *c, uint64_t seq)
{
	if (c->err && seq >= c->err_seq)
		return c->err;
	return seq <= c->done;
}

/* Names the partners whose signal (or data) for operation seq has not
 * arrived: each partner signals exactly once a barrier, so its receive CQ
 * count says; algorithms with data name their own (alg->late).  Lists run
 * in order, so one queued behind an unfinished one names that one's. */
static int report_timeout(const struct emunic_coll *c, uint64_t seq, int timeout_ms)
{
	uint64_t stuck = c->done + 1 < seq ? c->done + 1 : seq;
	char late[256] = "", behind[64] = "";
	size_t off = 0;

	if (stuck != seq)
		snprintf(behind, sizeof(behind), " (queued behind %s %llu)", c->alg->name, (unsigned long long)stuck);
	if (c->alg->late)
		off = (size_t)c->alg->late(c, stuck, late, sizeof(late));
	for (int i = 0; !c->alg->late && i < c->nstep; i++) {
		int p = c->step[i].peer;
		uint64_t got;

		if (!c->step[i].wait)
			continue;
		got = emunic_cq_count(c->peer[p].rcq);
		if (got < stuck && off < sizeof(late))
			off += (size_t)snprintf(late + off, sizeof(late) - off, " %d (%llu of %llu)", p,
						(unsigned long long)got, (unsigned long long)stuck);
	}
	return coll_err(c, -ETIMEDOUT, "%s %llu not complete after %d ms%s; %s missing from peer%s",
			c->alg->name, (unsigned long long)seq, timeout_ms, behind,
			c->alg->late ? "data" : "signals", off ? late : "s: none (the progress core is behind)");
}

/* The MQ wait runs the engine itself (nic_wait's assist), so nothing
 * here polls with an assist of its own but after a slice that timed out:
 * a completion the wait returns is read as coll_progress reads one (the
 * sends first), and the next look is at the operation's status.  (An
 * assist before the wait, and one after each completion, cost ~1,300
 * instructions a blocking barrier and found nothing the wait would not.)
 * Once seq is done, completions already queued behind it are read before
 * returning (no pass: they are there), so a later operation's failure is
 * named, and its peers told, now rather than at the next call. */
int coll_wait_seq(struct emunic_coll *c, uint64_t seq, int timeout_ms)
{
	long long deadline = timeout_ms < 0 ? -1 : coll_now_ms() + timeout_ms;
	int r = c->size > 1 ? drain_sends(c) : 0;

	for (;;) {
		struct emunic_wc wc;
		long long left = COLL_WAIT_SLICE_MS;
		int s;

		if (r)
			return r;
		s = coll_seq_status(c, seq);
		if (s > 0 && emunic_mq_pending(c->mq))
			coll_progress(c);	/* queued behind it (below); seq's result stands */
		if (s)
			return s < 0 ? s : 0;
		if (deadline >= 0) {
			left = deadline - coll_now_ms();
			if (left <= 0)
				return report_timeout(c, seq, timeout_ms);
		}
		/* Sliced so that a failed send (whose peer then never
		 * signals back) is seen before the whole bound runs out. */
		r = emunic_mq_wait(c->mq, &wc, (int)(left < COLL_WAIT_SLICE_MS ? left : COLL_WAIT_SLICE_MS));
		if (r >= 0) {
			r = drain_sends(c);
			on_mq_wc(c, &wc);	/* taken: never dropped */
		} else if (r == -ETIMEDOUT) {
			r = coll_progress(c);
		} else {
			return coll_err(c, r, "waiting on the management queue failed (%d)", r);
		}
	}
}
