/*
 * emunic: the trigger rules (Portals-4-style counters and counter-triggered
 * operations).
 *
 * DESIGN.md, "Semantics to reproduce", triggered operations:
 *   - a counter (CT) has a success and a failure count; events bound to it
 *     increment it;
 *   - a triggered op carries (ct, threshold) and fires once, when
 *     ct.success + ct.failure >= threshold; triggers on one counter fire in
 *     threshold order, ties in the order they were posted;
 *   - a failure on a counted event increments ct.failure; waits return on
 *     it, so a waiter never spins forever on a counter that will not reach
 *     its test value;
 *   - only the token holder runs the engine, and only the engine fires
 *     triggers, never inline in whatever call bumps a counter; per-counter
 *     pending lists are kept sorted by threshold.
 * A ct_set is an op like the others (counters.c:3-6, 60-70): it sets the
 * counter, in order with the posts around it, and a counter set below a
 * pending trigger's threshold does not fire it; set at or above, it does.
 *
 * The code (emunic/triggered/):
 *   - posting (post.c:146-203) copies the op into a slot and publishes it
 *     through the ring; posting order is ring order;
 *   - insert (settle.c:60-85): into the counter's pending list after every
 *     trigger with a threshold <= its own, mark the counter dirty, settle;
 *   - counters move only in the engine: trig_ct_add, trig_ct_store
 *     (counters.c:145-163), each marking the counter dirty;
 *   - settle (settle.c:37-58): for each dirty counter, fire the list's head
 *     while success + failure >= its threshold;
 *   - fire (ops.c:104-130): a put goes to its QP; a ct_inc / ct_set changes
 *     its counter at once; a put's completion counts on its own counter,
 *     success or failure (ops.c:134-161, finish_now: 152-153);
 *   - waits (counters.c:72-77, met): return when success + failure >= test,
 *     or on any failure.
 *
 * Modelled: counters ct0 and ct1; one app thread posting NOPS ops, each
 * picked from a menu (triggered puts on ct0 or ct1 counting on ct1,
 * triggered ct_inc of ct0, ct_set of ct0 below and above the thresholds,
 * and a triggered ct_set of ct0 back to 0);
 * MAXEV counted events on ct0 (each a success or a failure) at any time;
 * puts complete with success or failure; the engine, one pass a step; an
 * app thread waiting on ct1 for WAITTEST.
 *
 * Properties (assertions, named by the variable they test):
 *   fire_ok    a trigger fires only once, only when its counter's success +
 *              failure reached its threshold, and never while a trigger on
 *              the same counter with a lower threshold, or the same one and
 *              posted earlier, is pending;
 *   settle_ok  after every engine pass no pending trigger's threshold is
 *              met (what is due has fired, failures counted);
 *   wait_ok    in every end state the waiter on ct1 has returned if ct1
 *              met its test or counted a failure.
 *
 * Mutations (spin -DMUT_...; each must be found):
 *   MUT_TIE    insertion before the triggers with an equal threshold: ties
 *              fire in reverse posting order (fire_ok);
 *   MUT_FAIL   thresholds compare the success count only (settle_ok);
 *   MUT_SET    ct_set does not mark its counter dirty: a set at or above a
 *              pending threshold does not fire it (settle_ok);
 *   MUT_HIGH   thresholds compare the highest value the counter ever had:
 *              a trigger posted after a ct_set below it fires (fire_ok);
 *   MUT_WAIT   waits ignore failures (wait_ok).
 */

#ifndef NOPS
#define NOPS 3		/* ops the app posts */
#endif
#ifndef MAXEV
#define MAXEV 2		/* counted events on ct0 */
#endif
#define WAITTEST 2	/* the waiter's test on ct1 */
#define NONE 255

/* op kinds */
#define PUT 1		/* triggered put on `on`, its completion counted on ct1 */
#define INC 2		/* triggered ct_inc(ct0, 1) on ct0 */
#define SET 3		/* ct_set(ct0, arg): an app's call, or triggered on ct0 */

/* ---- the ops: arguments copied at post (post.c:128-140) ---- */
byte kind[NOPS], on[NOPS], thr[NOPS], arg[NOPS];
bit fired[NOPS];		/* ghost */
bit inserted[NOPS];		/* ghost: in a pending list */

/* ---- counters (trig.h:53-61) ---- */
byte succ[2], fail[2];
bit dirty[2];
#ifdef MUT_HIGH
byte hi[2];			/* the highest success + failure ever */
#define HIGH(c) if :: succ[c] + fail[c] > hi[c] -> hi[c] = succ[c] + fail[c] :: else fi
#else
#define HIGH(c) skip
#endif
/* pending lists, by threshold, ties in posting order: op ids */
byte plist[2 * NOPS];		/* counter c's list: plist[c * NOPS ...] */
byte plen[2];

chan ring = [NOPS] of { byte };		/* op ids, in posting order */
chan inflight = [NOPS] of { byte };	/* puts handed to verbs */
chan done = [NOPS] of { byte, bit };	/* their completions: op, success */
byte events;			/* counted events on ct0 so far */
byte ev_seen;			/* ... and counted by the engine */
byte x_w;			/* the wire's: a put it completes */
byte posted;			/* ops posted so far */
bit waited;			/* the waiter returned */

#if defined(MUT_FAIL)
#define TOTAL(c) (succ[c])
#elif defined(MUT_HIGH)
#define TOTAL(c) (hi[c])
#else
#define TOTAL(c) (succ[c] + fail[c])		/* settle.c:28-32 */
#endif

#ifdef MUT_WAIT
#define MET(c, test) (succ[c] + fail[c] >= test)
#else
#define MET(c, test) (succ[c] + fail[c] >= test || fail[c] > 0)	/* counters.c:72-77 */
#endif

/* the spec's order of triggers: (threshold, posting order) */
#define BEFORE(y, x) (thr[y] < thr[x] || (thr[y] == thr[x] && y < x))

/* trig_ct_changed, counters.c:136-143 */
inline changed(c)
{
	dirty[c] = 1
}

/* trig_ct_add, counters.c:145-153 */
inline ct_add(c, s, f)
{
	succ[c] = succ[c] + s; fail[c] = fail[c] + f;
	HIGH(c);
	changed(c)
}

/* trig_ct_store, counters.c:155-163 */
inline ct_store(c, v)
{
	succ[c] = v; fail[c] = 0;
	HIGH(c);
#ifndef MUT_SET
	changed(c)
#endif
}

/* trig_fire, ops.c:104-130 */
inline fire(x)
{
	/* fire_ok: once, at its threshold, after all that come before it */
	fire_ok = !fired[x] && (on[x] == NONE || succ[on[x]] + fail[on[x]] >= thr[x]);
	if
	:: on[x] != NONE ->
		q = 0;
		do
		:: q < NOPS ->
			if
			:: q != x && inserted[q] && on[q] == on[x] && BEFORE(q, x) -> fire_ok = 0
			:: else
			fi;
			q++
		:: else -> break
		od;
		inserted[x] = 0
	:: else
	fi;
	assert(fire_ok);
	fired[x] = 1;
	if
	:: kind[x] == PUT -> inflight!x		/* enqueue, ops.c:91-102 */
	:: kind[x] == INC -> ct_add(0, 1, 0)
	:: kind[x] == SET -> ct_store(0, arg[x])
	fi;
	q = 0; fire_ok = 0
}

/* trig_settle, settle.c:37-58 (counters in no promised order: ct0 first) */
inline settle()
{
	do
	:: dirty[0] || dirty[1] ->
		if
		:: dirty[0] -> c = 0
		:: else -> c = 1
		fi;
		dirty[c] = 0;
		do
		:: plen[c] > 0 && TOTAL(c) >= thr[plist[c * NOPS]] ->
			x = plist[c * NOPS];
			/* pop the head */
			p = 0;
			do
			:: p + 1 < plen[c] -> plist[c * NOPS + p] = plist[c * NOPS + p + 1]; p++
			:: else -> break
			od;
			plen[c]--;
			plist[c * NOPS + plen[c]] = 0;
			fire(x)
		:: else -> break
		od
	:: else -> break
	od;
	c = 0; x = 0; p = 0
}

/* trig_on_cmd, settle.c:60-85 */
inline on_cmd(x)
{
	if
	:: on[x] == NONE -> fire(x)
	:: else ->
		c = on[x];
		/* the first place whose threshold is above x's (<=: after ties) */
		p = 0;
		do
#ifdef MUT_TIE
		:: p < plen[c] && thr[plist[c * NOPS + p]] < thr[x] -> p++
#else
		:: p < plen[c] && thr[plist[c * NOPS + p]] <= thr[x] -> p++
#endif
		:: else -> break
		od;
		q = plen[c];
		do
		:: q > p -> plist[c * NOPS + q] = plist[c * NOPS + q - 1]; q--
		:: else -> break
		od;
		plist[c * NOPS + p] = x;
		plen[c]++;
		inserted[x] = 1;
		changed(c);		/* a threshold already met fires at once */
		settle()
	fi
}

/* the app posts NOPS ops, each picked from the menu (post.c:146-221) */
active proctype app()
{
	byte i;

	do
	:: i < NOPS ->
		atomic {
			if
			:: kind[i] = PUT; on[i] = 0; thr[i] = 1
			:: kind[i] = PUT; on[i] = 0; thr[i] = 2
			:: kind[i] = PUT; on[i] = 1; thr[i] = 1	/* chained on a put's completion */
			:: kind[i] = INC; on[i] = 0; thr[i] = 1
			:: kind[i] = SET; on[i] = NONE; arg[i] = 0	/* below every threshold */
			:: kind[i] = SET; on[i] = NONE; arg[i] = 2	/* at or above every threshold */
			:: kind[i] = SET; on[i] = 0; thr[i] = 2; arg[i] = 0	/* triggered: a reset */
			fi;
			ring!i;
			posted++;
			i++
		}
	:: else -> break
	od
}

/* counted events on ct0 (a put's local completion, an arrival into a
 * bound buffer), each a success or a failure */
active proctype wire()
{
end:	do
	:: atomic { events < MAXEV -> events++ }	/* counted by the next pass */
	:: atomic { nempty(inflight) -> inflight?x_w;
		if
		:: done!x_w, 1
		:: done!x_w, 0		/* the put failed (retry exceeded, flushed) */
		fi;
		x_w = 0
	   }
	od
}

/* the engine: one pass a step (engine.c:32-44): drain the ring, count
 * events and completions, settle (unit.c:35-54) */
active proctype engine()
{
	byte x, c, p, q;
	bit s, fire_ok, settle_ok;

end:	do
	:: atomic {
		(nempty(ring) || nempty(done) || ev_seen < events) ->
		do
		:: ring?x -> on_cmd(x)
		:: empty(ring) -> break
		od;
		do
		:: ev_seen < events ->		/* a counted event on ct0 */
			if
			:: ct_add(0, 1, 0)
			:: ct_add(0, 0, 1)
			fi;
			ev_seen++
		:: else -> break
		od;
		do
		:: done?x, s ->			/* finish_now, ops.c:152-153 */
			ct_add(1, s, 1 - s)
		:: empty(done) -> break
		od;
		settle();
		/* settle_ok: no pending trigger is due (success + failure) */
		settle_ok = 1; q = 0;
		do
		:: q < NOPS ->
			if
			:: inserted[q] && succ[on[q]] + fail[on[q]] >= thr[q] -> settle_ok = 0
			:: else
			fi;
			q++
		:: else -> break
		od;
		assert(settle_ok);
		x = 0; s = 0; q = 0; settle_ok = 0
	   }
	od
}

/* an app thread waiting on ct1 (emunic_ct_wait, counters.c:97-131) */
active proctype waiter()
{
end:	atomic { MET(1, WAITTEST) -> waited = 1 }	/* (may wait forever: the watchdog judges) */
}

/* wait_ok: when nothing can move, a waiter whose counter met its test or
 * failed has returned */
active proctype watchdog()
{
	bit wait_ok;

	timeout ->
	atomic {
		wait_ok = waited || !(succ[1] + fail[1] >= WAITTEST || fail[1] > 0);
		assert(wait_ok)
	}
}
