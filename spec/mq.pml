/*
 * emunic: the management-queue (CORE-Direct) rules.
 *
 * DESIGN.md, "Semantics to reproduce", management queues:
 *   - a QP created MANAGED_SEND holds its posted sends until enabled;
 *   - SEND_EN(qp, n) releases the next n posted sends, n = 0 everything
 *     posted so far; enabling more than was posted is EINVAL, not a clamp,
 *     and (include/emunic/mq.h:12-14, 23-25) changes nothing;
 *   - WAIT(cq, n) completes when the CQ has produced n completions counted
 *     from its wait base; the base advances by the largest count of the
 *     group on a WAIT flagged WAIT_EN_LAST; completions a WAIT consumes are
 *     not returned to the application's poll;
 *   - a task list is posted in order, with no interleaving between lists;
 *     tasks on each queue run in order as they become eligible.
 *
 * The code (post time: emunic/mq/post.c; run time: emunic/mq/exec.c and
 * emunic/nic/verbs.c):
 *   - a list is checked whole against copies of the counters it changes
 *     (check, post.c:207-256, shadow_of 41-51) and only a valid list changes
 *     them (commit_list, commit_shadows, post.c:266-316) and is published
 *     in one step under the post lock (post.c:366-383; several lists of
 *     emunic_mq_post_lists likewise, as one unit: one list is modelled);
 *   - SEND_EN carries an absolute target, the QP's claimed count after it
 *     (post.c:155-169); the engine raises the QP's released count to it
 *     (verbs.c:109-122) and hands sends below it to verbs (verbs.c:364-375);
 *   - WAIT carries target = base + n (post.c:181-195); the engine blocks the
 *     MQ until the CQ's count reaches it (exec.c:180-184), and a completion
 *     re-readies the MQs blocked on that CQ (exec.c:70-76);
 *   - `covered`, the highest WAIT target posted (post.c:281-287): a
 *     completion is queued for the app's poll only above it (exec.c:64-66),
 *     and the poll skips what a WAIT posted since covers (api.c:48-54).
 *
 * Modelled: one MQ, one QP created MANAGED_SEND, one CQ that counts the
 * completions WAITs wait for (MAXC arrivals, at any time), NT app threads
 * posting NL lists each, chosen from a menu, and polling the CQ after each
 * post, and the engine, one pass a step.
 *
 * The spec side is separate from the code side: ghost counts in release
 * deltas (spec_posted, spec_rel) and the WAIT history (hist_n, hist_last),
 * from which a WAIT's target is recomputed from scratch (spec_target).
 *
 * Properties (assertions, named by the variable they test):
 *   post_ok      a list is accepted exactly when the spec says it is valid
 *                (no enable beyond what was posted), and a refused list
 *                changes no counter and publishes nothing;
 *   enable_ok    an executed SEND_EN releases exactly what the spec says
 *                (its absolute target equals the spec's running release
 *                count), never beyond the sends the QP holds;
 *   send_ok      a send runs only when released by the enables run so far;
 *   wait_ok      a WAIT's target is the spec's (base = sum of the groups'
 *                largest counts), and it completes only once the CQ reached
 *                it;
 *   list_ok      the commands of one list reach the engine together, never
 *                interleaved with another list's;
 *   poll_ok      the app's poll never returns a completion a WAIT posted
 *                before the poll counts;
 *   idle_ok      in every end state nothing eligible is left: the ring is
 *                empty, the MQ is empty or blocked on a WAIT the CQ has not
 *                reached, every released send ran.
 *
 * Mutations (spin -DMUT_...; each must be found):
 *   MUT_CLAMP    enabling more than was posted is clamped to what was
 *                posted and accepted (post_ok);
 *   MUT_BASE     WAIT_EN_LAST advances the base by its own count, not the
 *                group's largest (wait_ok);
 *   MUT_ROLLBACK the checks change the live counters, not copies: a refused
 *                list still moves them (post_ok);
 *   MUT_SPLIT    a list is checked and committed whole, but its commands
 *                are published one at a time, each under its own hold of
 *                the post lock (list_ok);
 *   MUT_COVER    the poll returns every queued completion without looking
 *                at `covered` again (poll_ok);
 *   MUT_WAKE     a completion does not re-ready the MQ blocked on the CQ
 *                (idle_ok).
 */

#ifndef NT
#define NT 2		/* posting threads */
#endif
#ifndef NL
#define NL 2		/* lists each posts */
#endif
#ifndef MAXC
#define MAXC 2		/* completions the CQ will see */
#endif
#define NLISTS (NT * NL)
#define MAXW (2 * NLISTS)	/* WAITs posted at most (two a list) */

#define SEND 1
#define SEND_EN 2
#define WAIT 3

/* the menu: list kind k, task j -> op, count, WAIT_EN_LAST */
inline task_of(k, j, op, cnt, last)
{
	op = 0; cnt = 0; last = 0;
	if
	:: k == 0 ->		/* send, then enable it */
		if
		:: j == 0 -> op = SEND
		:: j == 1 -> op = SEND_EN; cnt = 1
		:: else
		fi
	:: k == 1 ->		/* a barrier step: wait, send, enable all */
		if
		:: j == 0 -> op = WAIT; cnt = 1; last = 1
		:: j == 1 -> op = SEND
		:: j == 2 -> op = SEND_EN; cnt = 0
		:: else
		fi
	:: k == 2 ->		/* a group of two WAITs, the larger first */
		if
		:: j == 0 -> op = WAIT; cnt = 2
		:: j == 1 -> op = WAIT; cnt = 1; last = 1
		:: else
		fi
	:: k == 3 ->		/* a WAIT, then an enable of two: -EINVAL unless
				 * two sends are posted and not enabled */
		if
		:: j == 0 -> op = WAIT; cnt = 1; last = 1
		:: j == 1 -> op = SEND_EN; cnt = 2
		:: else
		fi
	fi
}

/* ---- the app side (post time), protected by the post lock ---- */
byte qp_posted, qp_claimed;		/* nic.h:157 */
byte wait_index, wait_count;		/* mq.h:22 */
byte covered;				/* mq.h:23 */
bit post_lock;

/* the command ring: op, target, list, ghost (SEND_EN: spec delta; WAIT:
 * history index) */
chan ring = [3 * NLISTS] of { byte, byte, byte, byte };	/* room for all: a full ring is -ENOSPC (post.c:369-377), not modelled */

/* ---- the engine side ---- */
chan mq = [3 * NLISTS] of { byte, byte, byte };	/* the MQ's queue: op, target, ghost */
bit mq_ready, mq_blocked;
byte sq_tail, sq_enabled, sq_exec;	/* the QP's send queue (nic.h:169) */
byte cq_count;				/* completions produced (mq.h:21) */
byte vcq;				/* arrived, not yet polled by the engine */
chan cq_app = [MAXC] of { byte };	/* queued for the app's poll: n */
byte arrived;

/* ---- the spec (ghost) ---- */
byte spec_posted, spec_rel;		/* sends posted, sends released */
byte hist_n[MAXW];
bit hist_last[MAXW];
byte spec_nw;				/* WAITs posted */
byte spec_cov;				/* highest spec target posted */
byte g_rel;				/* released, as the engine ran the enables */
byte published;				/* commands published */
byte cur_list = 255;			/* list_ok: the list last published */
short closed;				/* list_ok: lists published before it */
byte posters;				/* posting threads finished */

/* the spec's target of WAIT number w: its count above the base, the base
 * being the sum of the largest counts of the groups closed before it */
inline spec_target(w, t)
{
	t = 0; gi = 0; gmax = 0;
	do
	:: gi < w ->
		if
		:: hist_n[gi] > gmax -> gmax = hist_n[gi]
		:: else
		fi;
		if
		:: hist_last[gi] -> t = t + gmax; gmax = 0
		:: else
		fi;
		gi++
	:: else -> break
	od;
	t = t + hist_n[w];
	gi = 0; gmax = 0
}

/* check_enable / check_wait / check_data, post.c:89-196, for task j of
 * list kind k, against the shadow copies; tg[j]: the command's target */
inline check_task(k, j)
{
	task_of(k, j, op, cnt, last);
	if
	:: op == SEND ->			/* check_data, 70-73 */
		s_posted++
	:: op == SEND_EN ->			/* check_enable, 118-128 */
		if
		:: cnt == 0 -> s_claimed = s_posted
		:: cnt != 0 && s_claimed + cnt > s_posted ->
#ifdef MUT_CLAMP
			s_claimed = s_posted
#else
			err = 1
#endif
		:: else -> s_claimed = s_claimed + cnt
		fi;
		tg[j] = s_claimed
	:: op == WAIT ->			/* check_wait, 145-155 */
		tg[j] = s_wi + cnt;
		if
		:: cnt > s_wc -> s_wc = cnt
		:: else
		fi;
		if
		:: last ->
#ifdef MUT_BASE
			s_wi = s_wi + cnt;
#else
			s_wi = s_wi + s_wc;
#endif
			s_wc = 0
		:: else
		fi
	:: else
	fi
#ifdef MUT_ROLLBACK
	;
	qp_posted = s_posted; qp_claimed = s_claimed;
	wait_index = s_wi; wait_count = s_wc
#endif
}

/* commit_list, commit_shadows (post.c:266-316): `covered` for each WAIT, the counters */
inline commit(k)
{
	j = 0;
	do
	:: j < 3 ->
		task_of(k, j, op, cnt, last);
		if
		:: op == WAIT && tg[j] > covered -> covered = tg[j]
		:: else
		fi;
		j++
	:: else -> break
	od;
	qp_posted = s_posted; qp_claimed = s_claimed;
	wait_index = s_wi; wait_count = s_wc
}

/* the command into the ring (post.c:381); list_ok looks at the ring's
 * order, the order the engine drains it in */
inline publish_task(k, j)
{
	task_of(k, j, op, cnt, last);
	if
	:: op != 0 ->
		if
		:: lid != cur_list ->
			list_ok = !(closed & (1 << lid));
			assert(list_ok);
			if
			:: cur_list != 255 -> closed = closed | (1 << cur_list)
			:: else
			fi;
			cur_list = lid
		:: else
		fi;
		ring!op, tg[j], lid, gx[j]; published++
	:: else
	fi
}

/* the spec: a list is valid iff none of its enables goes beyond the sends
 * posted before it; each enable releases a delta (n, or for n = 0 all
 * posted and not yet released) */
inline spec_check(k)
{
	p = spec_posted; r = spec_rel; nw = 0; valid = 1; j = 0;
	do
	:: j < 3 ->
		task_of(k, j, op, cnt, last);
		if
		:: op == SEND -> p++
		:: op == SEND_EN ->
			if
			:: cnt == 0 -> d = p - r
			:: else -> d = cnt
			fi;
			if
			:: r + d > p -> valid = 0
			:: else -> r = r + d
			fi;
			gx[j] = d
		:: op == WAIT -> gx[j] = spec_nw + nw; nw++
		:: else
		fi;
		j++
	:: else -> break
	od
}

/* the spec takes a valid list: its WAITs join the history */
inline spec_take(k)
{
	spec_posted = p; spec_rel = r; j = 0;
	do
	:: j < 3 ->
		task_of(k, j, op, cnt, last);
		if
		:: op == WAIT ->
			hist_n[spec_nw] = cnt; hist_last[spec_nw] = last;
			spec_target(spec_nw, t);
			if
			:: t > spec_cov -> spec_cov = t
			:: else
			fi;
			spec_nw++
		:: else
		fi;
		j++
	:: else -> break
	od
}

/* the app polls the CQ (api.c:41-56), all that is queued */
inline poll_cq()
{
	do
	:: cq_app?n ->
#ifdef MUT_COVER
		poll_ok = (n > spec_cov);	/* returned */
		assert(poll_ok)
#else
		if
		:: n > covered ->		/* returned */
			poll_ok = (n > spec_cov);
			assert(poll_ok)
		:: else				/* a WAIT's */
		fi
#endif
	:: empty(cq_app) -> break
	od;
	n = 0; poll_ok = 0
}

/* post.c:351-389 (post, for emunic_mq_post): thread `me` posts NL lists, polling
 * the CQ after each */
proctype poster(byte me)
{
	byte l, k, j, op, cnt, last, lid;
	byte s_posted, s_claimed, s_wi, s_wc;	/* the shadow (post.c:22-27) */
	byte p, r, d, nw, t, gi, gmax;
	bit valid, err, post_ok, poll_ok, list_ok;
	byte n;
	byte tg[3], gx[3];
	byte b_posted, b_claimed, b_wi, b_wc, b_pub;

	do
	:: l < NL ->
		/* the app picks a list */
		if
		:: k = 0
		:: k = 1
		:: k = 2
		:: k = 3
		fi;
		lid = me * NL + l;
		/* under the post lock (post.c:366-383): checked whole against
		 * copies, then committed and published in one step, or
		 * nothing; then the app polls the CQ (in the same step: the
		 * property needs a completion queued before a WAIT's post and
		 * polled after it) */
		atomic {
			!post_lock -> post_lock = 1;
			spec_check(k);
			b_posted = qp_posted; b_claimed = qp_claimed;
			b_wi = wait_index; b_wc = wait_count; b_pub = published;
			s_posted = qp_posted; s_claimed = qp_claimed;	/* qp_shadow, 44-54 */
			s_wi = wait_index; s_wc = wait_count;		/* 140-144 */
			err = 0; j = 0;
			do
			:: j < 3 && !err -> check_task(k, j); j++
			:: else -> break
			od;
			if
			:: !err ->
				commit(k);
#ifndef MUT_SPLIT
				j = 0;
				do
				:: j < 3 -> publish_task(k, j); j++
				:: else -> break
				od
#endif
			:: else
			fi;
			post_ok = (valid == !err) &&
				  (!err || (qp_posted == b_posted && qp_claimed == b_claimed &&
					    wait_index == b_wi && wait_count == b_wc && published == b_pub));
			assert(post_ok);
			if
			:: !err -> spec_take(k)
			:: else
			fi;
			post_lock = 0;
#ifdef MUT_SPLIT
		};
		/* Mutation: the commands are published one at a time, each
		 * under its own hold of the lock */
		j = 0;
		do
		:: j < 3 && !err ->
			atomic { !post_lock -> post_lock = 1; publish_task(k, j); post_lock = 0 };
			j++
		:: else -> break
		od;
		atomic {
#endif
			poll_cq()
		};
		d_step {
			j = 0; op = 0; cnt = 0; last = 0; p = 0; r = 0; d = 0; nw = 0; t = 0;
			valid = 0; err = 0; post_ok = 0; list_ok = 0; s_posted = 0; s_claimed = 0; s_wi = 0; s_wc = 0;
			tg[0] = 0; tg[1] = 0; tg[2] = 0; gx[0] = 0; gx[1] = 0; gx[2] = 0;
			b_posted = 0; b_claimed = 0; b_wi = 0; b_wc = 0; b_pub = 0; k = 0; lid = 0;
			l++
		}
	:: else -> break
	od;
	posters++
}

/* the engine: one pass (engine.c:32-44) is one step here, as only the
 * engine touches its side and what others publish meanwhile is seen by
 * this pass or the next: drain the ring (engine.c:18-30, exec.c:104-143),
 * poll the completions (exec.c:49-77), run the MQ (exec.c:156-235), hand
 * released sends to verbs (verbs.c:361-375) */
#define WORK (nempty(ring) || vcq > 0 || mq_ready || (sq_exec < sq_tail && sq_exec < sq_enabled))

active proctype engine()
{
	byte op, tg, lid, gx, t, gi, gmax;
	bit wait_ok, enable_ok, send_ok;

end:	do
	:: atomic {
		WORK ->
		/* drain */
		do
		:: nempty(ring) ->
			ring?op, tg, lid, gx;
			if
			:: op == SEND -> sq_tail++			/* nic_qp_queue */
			:: else -> mq!op, tg, gx; mq_ready = 1	/* exec.c:132-136 */
			fi
		:: empty(ring) -> break
		od;
		/* poll: cq_complete */
		do
		:: vcq > 0 ->
			vcq--; cq_count++;
			if
			:: cq_count > covered -> cq_app!cq_count
			:: else
			fi;
#ifndef MUT_WAKE
			if
			:: mq_blocked -> mq_blocked = 0; mq_ready = 1
			:: else
			fi
#endif
		:: else -> break
		od;
		/* step: run_mq */
		if
		:: mq_ready ->
			mq_ready = 0;
			do
			:: nempty(mq) ->
				mq?<op, tg, gx>;
				if
				:: op == WAIT ->
					if
					:: cq_count < tg -> mq_blocked = 1; break
					:: else ->
						spec_target(gx, t);
						wait_ok = (tg == t && cq_count >= tg);
						assert(wait_ok)
					fi
				:: op == SEND_EN ->
					g_rel = g_rel + gx;
					if
					:: tg > sq_enabled -> sq_enabled = tg	/* nic_qp_enable */
					:: else
					fi;
					enable_ok = (tg == g_rel && sq_enabled <= sq_tail);
					assert(enable_ok)
				fi;
				mq?op, tg, gx
			:: empty(mq) -> break
			od
		:: else
		fi;
		/* push: push_queue */
		do
		:: sq_exec < sq_tail && sq_exec < sq_enabled ->
			send_ok = (sq_exec < g_rel);
			assert(send_ok);
			sq_exec++
		:: else -> break
		od;
		op = 0; tg = 0; lid = 0; gx = 0; t = 0;
		wait_ok = 0; enable_ok = 0; send_ok = 0
	   }
	od
}

/* the peer: MAXC completions arrive on the CQ, at any time */
active proctype wire()
{
	do
	:: arrived < MAXC -> atomic { vcq++; arrived++ }
	:: else -> break
	od
}

/* idle_ok: when nothing can move, nothing eligible is left */
active proctype watchdog()
{
	byte op, tg, gx;
	bit idle_ok;

	timeout ->
	atomic {
		idle_ok = (len(ring) == 0 && posters == NT && arrived == MAXC && vcq == 0);
		if
		:: nempty(mq) -> mq?<op, tg, gx>; idle_ok = idle_ok && op == WAIT && tg > cq_count
		:: empty(mq)
		fi;
		idle_ok = idle_ok && (sq_exec == sq_tail || sq_exec == sq_enabled);
		assert(idle_ok)
	}
}

init {
	byte a;
	atomic {
		for (a : 0 .. NT - 1) {
			run poster(a)
		}
	}
}
