/*
 * emunic: a blocking call's post whose wait never comes
 * (EMUNIC_POST_WAIT_NEXT, emunic/nic/nic.h nic_submitted).
 *
 * Such a post only kicks and leaves its command to the wait that follows;
 * if that wait never comes, the command is the core thread's, and the core
 * is asleep: only its timer can wake it.  So the post leaves the command
 * only while a timer is set (wake_ns != UINT64_MAX; prepare_sleep and
 * hand_over cap a set timer at 1 s) and otherwise runs it itself.  The
 * danger is a holder leaving at the same time whose hand-over switches the
 * timer off (owner.c hand_over: an urgent wake planned for work that is
 * gone is pushed out) after the post looked at it.  The post kicks first
 * and looks after: a holder that switched the timer off then either sees
 * the kick when it leaves (and runs one more pass) or switched it off
 * before the post looked (and the post runs the command itself).
 *
 * Who is modelled (token.pml has the whole protocol; this is the one
 * handshake, small enough to check in a moment):
 *   - D, an application thread holding the token and leaving (owner.c
 *     unown), NLEAVE (2) times: hand_over's look at what is left
 *     (engine.c nic_urgent: the ring) and its setting of the timer, two
 *     steps as in the code; then held cleared, a fence, a look at kick,
 *     and one more pass for a kick; then it takes the token again if free;
 *   - A, NPOST (2) blocking posts that never wait, each one command
 *     published, then nic_submitted; where no timer is set it takes the
 *     token if free and runs a pass, else the holder sees its kick;
 *   - the core, asleep on a timer planned for urgent work: the timer fires
 *     while it is set; then the core runs a pass when the token is free.
 *
 * Property: never stuck.  When D and the posts are done and the core is
 * asleep with no timer, the ring is empty.
 *
 * Mutation (spin -DMUT_NEXT_LOOK, must be found): the post looks at the
 * timer before it kicks: D switches the timer off and leaves between the
 * two, sees no kick, and the command stays in the ring with the core
 * asleep for good.
 */

#ifndef NPOST
#define NPOST 2
#endif
#ifndef NLEAVE
#define NLEAVE 2
#endif

#define OFF 0		/* wake_ns == UINT64_MAX */
#define SOON 1		/* hand_over: now + handover_ns, urgent */
#define LATER 2		/* any other set timer (LAZY, the 1 s caps) */

byte wake = SOON;
bit wake_urgent = 1;
bit held = 1;		/* D holds the token */
bit kick, asleep = 1;
byte ring;		/* commands in the ring */
bit d_done;
byte a_done;

/* an engine pass: takes the kick over (nic_take_kick), then the ring's
 * commands */
#define PASS	kick = 0; ring = 0

/* owner.c unown: held cleared, a fence, kick looked at; for a kick one
 * more pass if the token is still free (else its new holder sees the
 * kick) */
inline leave()
{
	atomic { held = 0; k = kick };
	if
	:: k -> atomic { if :: !held -> held = 1; PASS; held = 0 :: else fi }
	:: else
	fi
}

active proctype D()
{
	bit urgent, k;
	byte want, round;

again:
	/* hand_over: what is left (nic_urgent: the ring), then the timer */
	urgent = ring > 0;
	if
	:: urgent -> want = SOON
	:: else -> want = OFF
	fi;
	atomic {
		if
		:: urgent && (wake == OFF || want < wake) -> wake = want; wake_urgent = 1
		:: !urgent && wake_urgent && wake != OFF -> wake = want; wake_urgent = 0	/* pushed out */
		:: else
		fi
	};
	leave();
	round++;
	if
	:: round < NLEAVE -> atomic { !held -> held = 1 }; goto again	/* a later post or wait of its own */
	:: else
	fi;
	d_done = 1
}

active [NPOST] proctype A()
{
	bit set, ok, k;

	ring++;			/* published (emunic_ring_publish) */
#ifdef MUT_NEXT_LOOK
	set = wake != OFF;
	kick = 1;
#else
	kick = 1;		/* nic_kick: store, seq_cst fence */
	set = wake != OFF;
#endif
	if
	:: set -> skip		/* left to the timer (its wait never comes) */
	:: else ->		/* nic_submitted_run: own, pass, unown */
		atomic { ok = !held; if :: ok -> held = 1 :: else fi };
		if
		:: ok -> atomic { PASS }; leave()
		:: else		/* the holder sees the kick */
		fi
	fi;
	a_done++
}

/* The core: its timer fires while set; awake, it runs a pass if the token
 * is free, else kicks (the holder runs it); then core_sleep naps unless
 * work shows with the token free.  Its own sleeps set no timer here (the
 * code's prepare_sleep caps one at 1 s: left out, so that only timers set
 * on purpose count). */
active proctype core()
{
end:	do
	:: atomic { asleep && wake != OFF -> wake = OFF; asleep = 0 }
	:: atomic {
		!asleep ->
		if
		:: !held -> held = 1; PASS; held = 0
		:: else -> kick = 1
		fi;
		if
		:: held || !(kick || ring > 0) -> asleep = 1
		:: else
		fi
	   }
	od
}

active proctype check()
{
end:	atomic { d_done && a_done == NPOST && asleep && wake == OFF && !held -> assert(ring == 0) }
}
