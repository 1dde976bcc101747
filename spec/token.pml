/*
 * emunic: the engine's ownership token and its hand-overs.
 *
 * DESIGN.md, "Data flow": one progress loop, run by whoever holds the
 * ownership token, the core thread or an app thread that is waiting anyway;
 * "the core thread guarantees progress"; a waiting thread runs the engine
 * while the token is free "until its condition holds or a budget runs out,
 * then releases the token and sleeps on that object's own wait word"; the
 * core thread spins briefly, "then it releases the token and blocks in
 * io_uring on the completion channels, rdma_cm and the doorbell".
 *
 * Who is modelled: NWAIT app threads that post a command and wait for its
 * completion (1 by default), NPOST app threads that only post one (1),
 * NTEST app threads that only look a few times (0: nic_progress, a test
 * loop's look), the core thread, verbs:
 *   - a waiter waits on its own object's wait word (nic_wait), assisting
 *     (taking the token and running passes) while its budget lasts;
 *   - a post that took the token leaves a kick of the core's to the core
 *     (nic_unown_posted, a triggered op's post), or with -DPOST_HAND_OVER
 *     runs it (nic_unown, an MQ post's);
 *   - an engine pass drains the command ring into verbs and polls the verbs
 *     CQ, completing commands and bumping their wait words;
 *   - verbs completes what it was given at any time, and raises the
 *     completion channel if the core armed it;
 *   - the core's timer fires while the core sleeps if it is set to a
 *     deadline the code uses to hand work over: SOON (hand_over's 50 us) or
 *     LAZY (10 ms; -DNO_LAZY leaves it out).  The 1 s safety nets (the
 *     core's SLEEP_MAX, the waiter's SLEEP_SLICE) never fire here: progress
 *     must not depend on them.
 *
 * Properties:
 *   - never two owners: assert(owners == 1) when a thread takes the token
 *     and when a pass runs;
 *   - no lost wake-up: in every end state every thread has finished (init's
 *     assert(finished == NAPP) runs only then).  A lost wake-up (a command
 *     left in the ring, a completion nobody polls, a waiter asleep on a word
 *     nobody bumps) ends with every thread blocked, which pan reports as an
 *     invalid end state (a waiter in word_sleep, the core in core_sleep).
 *     The same as LTL, ltl no_lost_wakeup, for a run under weak fairness
 *     (pan -a -f, `LTL=1 spec/check.sh token`: 10-20 s, not in the test).
 *
 * Where the code fell short of DESIGN.md (README.md here; fixed since).
 * This model follows DESIGN.md and the fixed code; spin -DAS_CODED_D1,
 * -DAS_CODED_D2 (or -DAS_CODED, both) model the code as it was, and spin
 * finds a waiter asleep while its
 * completion sits in the verbs CQ, the core asleep unarmed with only the 1 s
 * safety nets left:
 *   D1 thread.c:271-276: the core decides to sleep on what prepare_sleep saw;
 *      the passes nic_unown runs for a kick meanwhile (owner.c:106-109) are
 *      not counted, so the core sleeps unarmed, its timer at SLEEP_MAX, with
 *      new work just handed to verbs.  Modelled fix: after such a pass the
 *      core loops (one more idle pass, then prepare_sleep again).
 *   D2 assist.c:91-96, 104-108: a waiter that stops assisting while another
 *      app thread holds the token does not hand over; that holder's
 *      hand_over may have seen it still assisting (owner.c:66-67) and set
 *      no timer.  Modelled fix: the waiter kicks first, so the holder runs
 *      one more round and hands over with the waiter gone.
 *
 * Mutations (spin -DMUT_...; each must be found):
 *   MUT_OWN   nic_own tests `held`, then sets it (no exchange): two owners.
 *   MUT_KICK  nic_unown looks at `kick` before it clears `held`: a kick made
 *             in between is nobody's; a waiter sleeps forever.
 *   MUT_BUMP  emunic_word_bump looks at `sleepers` before it bumps `seq`: a
 *             waiter that announces itself in between sleeps forever.
 *   MUT_CK_CLEAR  a poster that leaves the core's kick to the core clears
 *             it first: a core that has not marked itself asleep yet then
 *             sleeps, and its doorbell never rings.
 *   MUT_TEST_IDLE  (with NTEST) a tester whose look ran a pass for a kick
 *             and found nothing leaves as idle, without the hand-over the
 *             kick asked for: the core sleeps unarmed, no timer.
 *
 * Granularity: memory is sequentially consistent (the code's seq_cst fences
 * make it so at these points).  Steps that touch only what the token holder
 * owns, or whose order against another thread's step cannot change what
 * either sees, are merged (each merge says why); the interleavings the
 * protocols are about (a kick against a release, a hand_over against a
 * waiter leaving, a bump against a sleeper) stay apart.  UNOWN_ROUNDS is 1,
 * not owner.c's 4 (any value takes the doorbell path); the assist budget is
 * "up to MAXTRY passes, or fewer" (time may pass at any point); the core's
 * idle spin (EMUNIC_SPIN_US) is zero.
 */

#ifndef NWAIT
#define NWAIT 1		/* app threads that post, then wait */
#endif
#ifndef NPOST
#define NPOST 1		/* app threads that only post */
#endif
#ifndef NTEST
#define NTEST 0		/* app threads that test (emunic_dev_progress) MAXTEST times */
#endif
#ifndef MAXTEST
#define MAXTEST 2
#endif
#define NAPP (NWAIT + NPOST + NTEST)

#ifdef AS_CODED		/* the code as it is: D1 and D2 below */
#define AS_CODED_D1
#define AS_CODED_D2
#endif
#ifndef UNOWN_ROUNDS
#define UNOWN_ROUNDS 1
#endif
#ifndef MAXTRY
#define MAXTRY 1
#endif

/* the core's timer deadline (wake_ns), earliest first */
#define SOON 1		/* owner.c hand_over: now + handover_ns(), urgent */
#define LAZY 2		/* owner.c hand_over, thread.c prepare_sleep: now + LAZY_NS */
#define NEVER 3		/* UINT64_MAX, or prepare_sleep's SLEEP_MAX safety net */

#ifdef NO_LAZY
#define TIMER_DUE (wake == SOON)
#else
#define TIMER_DUE (wake == SOON || wake == LAZY)
#endif

/* the device (nic.h, struct emunic_dev) */
bit held, kick, core_kicked, sleeping, stop;
byte assisting;
byte nsleep;			/* d->sleepers: waiters asleep or going to sleep */
byte wake = NEVER;
bit wake_urgent;
bit armed;			/* d->armed and ibv_req_notify_cq in one */
bit bell, chanev;		/* the doorbell eventfd, the completion channel */
/* verbs */
byte inflight;			/* d->inflight: in verbs, not yet polled */
chan ring = [NAPP] of { byte };	/* the command ring: whose command */
chan vq = [NAPP] of { byte };	/* in verbs, not yet completed */
chan vcq = [NAPP] of { byte };	/* completed, not yet polled */
/* per app thread: its object's wait word (base/base.h:23-26), its condition */
byte seq[NAPP], sleepers[NAPP];
bit fut[NAPP];			/* blocked in futex_wait */
bit done[NAPP];
byte finished;
/* ghost */
byte owners;

/* engine.c nic_awaited: what the core asks a completion event for.  Work
 * merely in verbs is not (a collective's landing receive, a send nobody
 * waits for): the app's next poll or wait, or the LAZY timer, collects it.
 * The code also arms for work a unit's pending work waits on (an MQ's
 * WAIT, triggers); the model leaves that out, the least the code arms for,
 * so that no waiter's wake-up may depend on it (-DNO_LAZY: nor on LAZY). */
#define awaited (len(ring) > 0 || (inflight > 0 && nsleep > 0))

/* owner.c nic_own (the relaxed pre-load is a shortcut: the exchange decides) */
inline own(ok)
{
	ok = 1 - held; held = 1;
	if
	:: ok -> owners++; assert(owners == 1)
	:: else
	fi
}

/* Mutation MUT_OWN: test held, then set it, in two steps */
inline own_split(ok)
{
	if
	:: held -> ok = 0
	:: else -> atomic { ok = 1; held = 1; owners++; assert(owners == 1) }
	fi
}

/* engine.c:32-44: drain the ring, poll verbs, (units), push to verbs; each
 * completion bumps its waiter's word (wait.c:35-40: seq, then sleepers) */
inline engine(n)
{
	assert(owners == 1);
	n = 0;
	do
	:: len(ring) > 0 -> ring?id; vq!id; inflight++; n++
	:: else -> break
	od;
	poll(n)
}

/* verbs.c nic_verbs_poll: completions to their waiters (the second half of
 * a pass; alone, the core's look after arming) */
inline poll(n)
{
	do
	:: len(vcq) > 0 -> vcq?id; inflight--; done[id] = 1; n++;
#ifdef MUT_BUMP
		/* Mutation: look at sleepers, and bump seq only in a later step */
		if
		:: sleepers[id] > 0 -> fut[id] = 0
		:: else
		fi;
		late = late | (1 << id)
#else
		seq[id]++;
		if
		:: sleepers[id] > 0 -> fut[id] = 0	/* FUTEX_WAKE */
		:: else
		fi
#endif
	:: else -> break
	od;
	id = 0
}

inline engine_late()
{
#ifdef MUT_BUMP
	atomic {
		do
		:: late & (1 << id) -> seq[id]++; late = late & ~(1 << id)
		:: late == 0 -> break
		:: else -> id++
		od;
		id = 0
	}
#else
	skip
#endif
}

/* nic_own, then a pass if it got the token (clearing kick first where the
 * caller does, nic_take_kick: objs.c nic_submitted, owner.c unown).  One
 * step: what happens between the exchange and the pass's reads is seen by
 * the pass or after it either way, and everything the pass writes is the
 * holder's. */
inline take_and_run(ok, n, clear)
{
#ifdef MUT_OWN
	own_split(ok);
	if
	:: ok -> atomic {
			if
			:: clear -> kick = 0; core_kicked = 0
			:: else
			fi;
			engine(n)
		}
	:: else
	fi;
#else
	atomic {
		own(ok);
		if
		:: ok ->
			if
			:: clear -> kick = 0; core_kicked = 0	/* nic_take_kick */
			:: else
			fi;
			engine(n)
		:: else
		fi
	};
#endif
	engine_late()
}

/* wait.c:47-57 (emunic_word_sleep_any with one word, wait.c:66-68):
 * announce, then futex_wait, which compares and sleeps in one step in the
 * kernel; both are one step here, as a bumper's two steps may still fall
 * on either side of it */
inline word_sleep(i, snap)
{
	atomic {
		sleepers[i]++;
		if
		:: seq[i] == snap -> fut[i] = 1
		:: else
		fi
	};
	atomic { fut[i] == 0 -> sleepers[i]-- }
}

/* wake.c:58-66 */
inline doorbell()
{
	if
	:: sleeping -> bell = 1
	:: else
	fi
}

/* owner.c hand_over, under the token (need_core is never set here: no event
 * handlers; no unit deadlines) */
inline hand_over()
{
    atomic {
	assisted = (assisting > 0);
	if
	:: assisted && !wake_urgent -> skip
	:: else ->
		if
		/* owner.c, engine.c nic_urgent: only work a completion must
		 * move is urgent (the ring's, here), and work in verbs while a
		 * waiter sleeps; otherwise that is collected lazily */
		:: !assisted && (len(ring) > 0 || (inflight > 0 && nsleep > 0)) -> want = SOON; urgent = 1
		:: else ->
			urgent = 0;
			if
			:: inflight > 0 -> want = LAZY
			:: else -> want = NEVER
			fi
		fi;
		if
		:: want < wake || (wake_urgent && !urgent && want > wake) ->
			wake = want; wake_urgent = urgent
		:: else
		fi
	fi;
	assisted = 0; urgent = 0; want = 0
    }
}

/* owner.c unown; `worked`: it ran a pass for a kick (D1).  posted: an app
 * thread that posted and goes back to its work (nic_unown_posted) leaves a
 * kick of the core's to the core: the doorbell, the kick left set.  idle:
 * the holder changed nothing, so the hand-over whoever left the work made
 * still stands (a look that found nothing: nic_progress, nic_poll_assist);
 * a kick's extra round hands over. */
inline unown(is_core, posted, idle)
{
	do
	::
		if
		:: !is_core && !(idle && round == 0) -> hand_over()
		:: else
		fi;
#ifdef MUT_KICK
		/* Mutation: look at kick, then clear held */
		k = kick;
		atomic { owners--; held = 0 };
#else
		/* clear held, fence, look at kick (owner.c unown) */
		atomic { owners--; held = 0; k = kick };
#endif
		ck = posted && core_kicked;
		if
		:: !k -> break
#ifdef MUT_CK_CLEAR
		/* Mutation: take the core's kick away as it is left to the core */
		:: k && ck -> kick = 0; doorbell(); break
		:: k && round == UNOWN_ROUNDS && !ck -> doorbell(); break
#else
		:: k && (round == UNOWN_ROUNDS || ck) -> doorbell(); break
#endif
		:: k && round < UNOWN_ROUNDS && !ck ->
			take_and_run(uok, un, 1);
			if
			:: !uok -> break
			:: else -> worked = 1; round++
			fi
		fi
	od;
	skip;
	d_step { round = 0; k = 0; ck = 0; uok = 0; un = 0 }
}

/* drain_fds, thread.c: what fired is read (the timerfd: wake_ns
 * back to UINT64_MAX) */
inline drain_fds()
{
	sleeping = 0;
	if
	:: chanev -> chanev = 0; armed = 0
	:: else
	fi;
	bell = 0;
	if
	:: nap && TIMER_DUE -> wake = NEVER
	:: else
	fi;
	nap = 0
}

/* thread.c core_sleep: announce the sleep, then look for work (the stores
 * and loads after `sleeping = 1` in one step: the doorbell's look at
 * `sleeping` and a requester's kick fall on either side of it) */
inline core_sleep()
{
	atomic {
		sleeping = 1;
		nap = !stop && (held || !(kick || len(ring) > 0));
		if
		:: !nap -> drain_fds()
		:: else
		fi
	};
	if
	:: nap -> atomic { (bell || chanev || TIMER_DUE) -> drain_fds() }
	:: else
	fi
}

/* thread.c prepare_sleep, under the token: arm the completion channel if work
 * waits for a completion and no app thread polls, poll for what came
 * before the arming (a command posted meanwhile kicked: unown runs it),
 * set the timer.  One step: what others do meanwhile (a
 * post, a waiter leaving) acts as if done just after it. */
inline prepare_sleep(n)
{
	atomic {
		n = 0;
		if
		:: !armed && assisting == 0 && awaited -> armed = 1; poll(n)
		:: else
		fi;
		if
		:: inflight > 0 -> wake = LAZY
		:: else -> wake = NEVER
		fi;
		wake_urgent = 0
	};
	engine_late()
}

/* thread.c core_main */
proctype core()
{
	bit ok, uok, k, ck, nap, assisted, urgent;
	byte n, un, id, round, want, worked, late;

	do
	:: stop -> break
	:: else ->
		/* nic_own; if held, nic_kick and nic_own again (core_main's
		 * first lines): one step, as the second try can only fail too
		 * unless the holder let go in between, which is the same as
		 * letting go before the first */
#ifdef MUT_OWN
		take_and_run(ok, n, 1);
		if
		:: !ok -> core_kicked = 1; kick = 1
		:: else
		fi;
#else
		atomic {
			own(ok);
			if
			:: ok -> kick = 0; core_kicked = 0; engine(n)
			:: else -> core_kicked = 1; kick = 1
			fi
		};
		engine_late();
#endif
		if
		:: !ok -> core_sleep()
		:: ok && n == 0 ->
			/* idle: prepare, hand back, sleep */
			prepare_sleep(n);
			unown(1, 0, 0);
#ifndef AS_CODED_D1
			n = n + worked;		/* D1 */
#endif
			if
			:: n == 0 -> core_sleep()
			:: else
			fi
		:: ok && n > 0 -> unown(1, 0, 0)
		fi;
		d_step { ok = 0; n = 0; worked = 0 }
	od
}

/* verbs and the wire: complete what they were given; the completion event
 * fires for the first completion after ibv_req_notify_cq */
proctype hw()
{
	byte id;
end:	do
	:: atomic {
		vq?id -> vcq!id;
		if
		:: armed && !chanev -> chanev = 1
		:: else
		fi;
		id = 0
	   }
	od
}

/* assist.c leave(): a waiter stops assisting (its budget ran out, or its
 * condition holds) and hands the engine over.  One step up to the
 * exchange: a holder's hand_over or kick look falls on either side.  A
 * waiter that holds the token (mine: it kept it from look to look) hands
 * over from it. */
inline leave()
{
	if
#ifndef MUT_KEEP
	:: mine -> atomic { assisting--; ok = 1; mine = 0 }
#else
	/* broken: a waiter that kept the token leaves without giving it back */
	:: mine -> atomic { assisting--; ok = 0; mine = 0 }
#endif
	:: else ->
		atomic {
			assisting--;
#ifndef MUT_OWN
			own(ok)
#endif
		};
#ifdef MUT_OWN
		own_split(ok);
#endif
#ifndef AS_CODED_D2
		/* D2, assist.c leave(): the token was held, so kick (the
		 * holder may have seen this waiter assisting) and try once
		 * more. */
		if
		:: !ok -> atomic { kick = 1; own(ok) }
		:: else
		fi;
#endif
		skip
	fi;
	if
	:: ok -> unown(0, 0, 0)
	:: else
	fi;
	d_step { ok = 0; worked = 0 }
}

proctype app(byte i)
{
	bit ok, uok, k, ck, assisted, urgent, mine;
	byte n, un, id, round, want, snap, tries, worked, late;

	if
	:: i >= NWAIT + NPOST -> goto test	/* a tester posts nothing */
	:: else
	fi;

	/* post: publish the command (mq/post.c:381), then nic_submitted
	 * (nic.h, objs.c nic_submitted_run): kick, take the token, run a
	 * pass.  One step: a holder that looks at kick, or the core that
	 * looks at the ring and kick, sees both or neither.  A waiter's post
	 * may also be a blocking call's (EMUNIC_POST_WAIT_NEXT) that leaves
	 * its command to the wait that follows, with only the kick: the code
	 * does so whenever the core's timer is set, which includes the 1 s
	 * SLEEP_MAX this model calls NEVER, so here it is a free choice.  (A
	 * poster whose wait never comes: post_next.pml.) */
	atomic {
		ring!i;
		kick = 1;
#ifdef MUT_OWN
	};
	take_and_run(ok, n, 1);
#else
		if
		:: true ->
			own(ok);
			if
			:: ok -> kick = 0; core_kicked = 0; engine(n)
			:: else
			fi
		:: i < NWAIT -> ok = 0	/* EMUNIC_POST_WAIT_NEXT: left to the wait */
		fi
	};
	engine_late();
#endif
	/* A post leaves as a triggered op's does (NIC_LEAVE_TO_CORE: a kick
	 * of the core's is the core's); -DPOST_HAND_OVER, as an MQ post's
	 * (NIC_LEAVE_HAND_OVER: nic_unown; NIC_LEAVE_WAIT_NEXT's count in
	 * `assisting` is not modelled). */
	if
#ifdef POST_HAND_OVER
	:: ok -> unown(0, 0, 0)
#else
	:: ok -> unown(0, 1, 0)
#endif
	:: else
	fi;
	if
	:: i >= NWAIT -> finished++; goto out	/* a poster: done */
	:: else
	fi;
	atomic { assisting++; ok = 0; n = 0; worked = 0 };	/* assist.c:78 */
	/* nic_wait, assist.c:63-137 */
	do
	:: atomic {
		snap = seq[i];		/* 81-82 */
		if
		:: done[i] -> break	/* cond(arg), 83 */
		:: else
		fi
	   };
		if
		:: tries < MAXTRY ->	/* now < until: assist (92-113) */
			tries++;
			if
			:: mine ->	/* kept from the last look: a pass for any kick */
				atomic { kick = 0; core_kicked = 0; engine(n) };
				engine_late()
			:: else ->
				take_and_run(ok, n, 1);
				mine = ok;
				ok = 0
			fi;
			/* a pass queued a notice: the token goes back before it
			 * is printed (98-102) */
			if
			:: mine -> unown(0, 0, 0); mine = 0
			:: true
			fi;
			d_step { n = 0; worked = 0 }
		:: true ->		/* the budget ran out (115-130) */
			nsleep++;	/* before leave: its hand-over sees it */
			leave();
			word_sleep(i, snap);
			atomic { nsleep--; assisting++; tries = 0; snap = 0 }
		fi
	od;
	leave();	/* 132-133 */
	finished++;
	goto out;
	/* A tester (owner.c nic_progress, which rndv's emunic_test calls): a
	 * thread that looks a few times (up to MAXTEST), then goes back to its
	 * own work.  A look takes the token if it is free, polls verbs, and
	 * runs a pass when that found something or work waits (the ring, a
	 * kick); then it gives the token back, handing over unless the poll
	 * found nothing and no pass ran (MUT_TEST_IDLE: unless it found
	 * nothing, as first written: a kick's empty pass then skipped the
	 * hand-over the kick asked for).  One step up to the release: what
	 * others do meanwhile falls before or after it. */
test:	do
	:: snap == MAXTEST -> break
	:: snap < MAXTEST -> snap++;
		atomic {
			own(ok);
			if
			:: ok ->
				n = 0;
				poll(n);
				if
				:: n > 0 || len(ring) > 0 || kick ->
					kick = 0; core_kicked = 0; engine(n); worked = 1
				:: else
				fi
			:: else
			fi
		};
		engine_late();
		if
#ifdef MUT_TEST_IDLE
		:: ok -> tries = worked; worked = 0; unown(0, 0, n == 0)
#else
		:: ok -> tries = worked; worked = 0; unown(0, 0, n == 0 && !tries)
#endif
		:: else
		fi;
		d_step { ok = 0; n = 0; tries = 0; worked = 0 }
	:: snap < MAXTEST -> snap = MAXTEST	/* it stops looking sooner */
	od;
	finished++;
out:	skip
}

init {
	byte a;
	atomic {
		run core(); run hw();
		for (a : 0 .. NAPP - 1) {
			run app(a)
		}
	};
	finished == NAPP;
	assert(finished == NAPP);
	/* Every posted command ran, a poster's too (one left in the ring
	 * blocks here: an invalid end state). */
	len(ring) == 0;
	/* nic_core_stop, thread.c */
	stop = 1;
	sleeping = 1;
	doorbell()
}

ltl no_lost_wakeup { <> (finished == NAPP) }
