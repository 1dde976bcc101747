/* SPDX-License-Identifier: MIT */
/*
 * The core thread: the NIC's own processor.  It guarantees progress when no
 * application thread is running the engine, and otherwise stays out of the
 * way.  It runs at real-time priority where allowed, so work that arrives
 * while the application computes preempts it as an interrupt would, and
 * only ever spins a little (spin.c: 20 us; on a CPU of its own, or after
 * it fired a trigger, about one of the device's round trips); then it
 * gives the token back and
 * sleeps in io_uring on the verbs completion channel (armed only when work
 * waits for a completion and no application thread is polling for it), the
 * rdma_cm channel, the doorbell and a timer.  An idle device costs nothing.
 *
 * When an application thread leaves the engine with work that needs the
 * core (owner.c, nic_hand_over), it sets the timer rather than waking the
 * core: if the application comes back within that time (it usually waits
 * right away) the core never wakes for it.
 */
#include "emunic/nic/nic.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#define SLEEP_MAX_NS (1000 * EMUNIC_NS_PER_MS)	/* a clock look now and then */
#define LAZY_NS (10 * EMUNIC_NS_PER_MS)		/* completions nobody waits for */
#define RT_PRIORITY 10

enum { FD_CHAN, FD_CM, FD_BELL, FD_TIMER, NFDS };

struct core_sleep {
	struct io_uring ring;
	bool use_poll;			/* under valgrind: see sleep_init */
	bool armed[NFDS];
	unsigned unacked;		/* completion events to acknowledge */
};

/* ---- priority and placement ------------------------------------------------------- */

static void go_realtime(struct emunic_dev *d)
{
	struct sched_param p = { .sched_priority = RT_PRIORITY };
	const char *env = getenv("EMUNIC_RT");
	int r;

	if (d->idle == EMUNIC_IDLE_SPIN || (env && !strcmp(env, "0")))
		return;		/* never spin at real-time priority */
	r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
	if (r) {
		nic_notice(d, "progress core: real-time priority not permitted (SCHED_FIFO: %s); running at normal "
			   "priority: a computing application thread delays it", strerror(r));
		return;
	}
	d->rt = true;
	d->st.realtime = 1;
	emunic_debug("device %s: progress core at real-time priority (SCHED_FIFO %d)", d->v->name, RT_PRIORITY);
}

static void pin(struct emunic_dev *d)
{
	cpu_set_t set;

	if (d->attr.cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(d->attr.cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		nic_notice(d, "progress core: cannot pin to CPU %d; running unpinned", d->attr.cpu);
		atomic_store(&d->core_shares_cpu, true);	/* no CPU of its own after all */
	}
}

/* ---- sleeping ------------------------------------------------------------------------- */

static int sleep_init(struct emunic_dev *d)
{
	struct core_sleep *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	/* Valgrind 3.19 does not know io_uring_enter can block: the core
	 * would sleep holding valgrind's thread lock and freeze the process.
	 * There, and only there, the same sleep is a poll(2). */
	s->use_poll = RUNNING_ON_VALGRIND;
	r = s->use_poll ? 0 : io_uring_queue_init(8, &s->ring, 0);
	if (r) {
		free(s);
		return emunic_err(r, "progress core: cannot set up its sleep (%s); use EMUNIC_IDLE=spin", strerror(-r));
	}
	d->uring = s;
	return 0;
}

static void sleep_fini(struct emunic_dev *d)
{
	struct core_sleep *s = d->uring;

	if (!s)
		return;
	if (s->unacked)
		emunic_shim_ack_cq_events(&d->v->shim, d->vcq, s->unacked);
	if (!s->use_poll)
		io_uring_queue_exit(&s->ring);
	free(s);
	d->uring = NULL;
}

static void arm(struct core_sleep *s, int i, int fd)
{
	struct io_uring_sqe *sqe;

	if (s->armed[i] || !(sqe = io_uring_get_sqe(&s->ring)))
		return;
	io_uring_prep_poll_add(sqe, fd, POLLIN);
	io_uring_sqe_set_data64(sqe, (uint64_t)i);
	s->armed[i] = true;
}

static void drain_fds(struct emunic_dev *d, struct core_sleep *s, const bool *fired)
{
	struct ibv_cq *cq;
	uint64_t v;

	if (fired[FD_CHAN])
		while (!emunic_shim_get_cq_event(&d->v->shim, d->chan, &cq)) {
			atomic_store(&d->armed, false);
			if (++s->unacked >= 64) {
				emunic_shim_ack_cq_events(&d->v->shim, d->vcq, s->unacked);
				s->unacked = 0;
			}
		}
	if (fired[FD_BELL])
		while (read(d->doorbell, &v, sizeof(v)) == sizeof(v))
			;
	if (fired[FD_TIMER]) {
		while (read(d->wake_timer, &v, sizeof(v)) == sizeof(v))
			;
		atomic_store(&d->wake_ns, UINT64_MAX);
	}
	if (fired[FD_CM])
		atomic_store(&d->cm_ready, true);
}

/* Under the token, before sleeping: arm the completion event if work waits
 * for one (nic_awaited) and no application thread polls for it; set the
 * timer to the next deadline, at most LAZY while anything is in verbs (what
 * nobody waits for: a collective's landing receives, sends whose slots the
 * next call polls for).  Arming for those too woke the core, at real-time
 * priority, on every arrival and every ACK of the guest's 2-rank
 * collectives timed alone (OSU): an 8 KiB gather took 2.2x the
 * host-progressed one, against 1.1x armed only when awaited (README).
 * Returns work found meanwhile (then do not sleep). */
static int prepare_sleep(struct emunic_dev *d)
{
	uint64_t now = emunic_now_ns(), due = nic_next_due_ns(d, now), cap;
	int n = 0;

	if (!atomic_load(&d->armed) && !atomic_load(&d->assisting) && nic_awaited(d) &&
	    !emunic_shim_req_notify_cq(&d->v->shim, d->vcq, 0)) {
		atomic_store(&d->armed, true);
		d->st.arms++;
		/* What completed before the arming raises no event: a poll
		 * finds it (then the loop runs a whole pass, not a sleep). */
		n = nic_verbs_poll(d);
	}
	cap = now + (d->inflight ? LAZY_NS : SLEEP_MAX_NS);
	nic_set_wake(d, due < cap ? due : cap);
	d->wake_urgent = false;
	return n;
}

static void core_sleep(struct emunic_dev *d)
{
	struct core_sleep *s = d->uring;
	struct io_uring_cqe *cqe;
	bool fired[NFDS] = { false };
	unsigned head, n = 0;

	bool cm = d->cm_fd >= 0 && !atomic_load(&d->cm_ready);	/* events seen, not yet taken: do not wake again for them */
	bool nap;

	if (!s->use_poll) {
		arm(s, FD_CHAN, d->chan->fd);
		if (cm)
			arm(s, FD_CM, d->cm_fd);
		arm(s, FD_BELL, d->doorbell);
		arm(s, FD_TIMER, d->wake_timer);
	}
	atomic_store(&d->sleeping, true);
	atomic_thread_fence(memory_order_seq_cst);
	/* Asked for work since the last look, or closing: do not sleep.  A
	 * kick while another thread holds the token is that thread's. */
	nap = !atomic_load(&d->stop) && (atomic_load(&d->held) || !(atomic_load(&d->kick) || atomic_load(&d->need_core) ||
								     !emunic_ring_empty(&d->cmd)));
	if (s->use_poll) {
		struct pollfd p[NFDS] = {
			[FD_CHAN] = { d->chan->fd, POLLIN, 0 }, [FD_CM] = { cm ? d->cm_fd : -1, POLLIN, 0 },
			[FD_BELL] = { d->doorbell, POLLIN, 0 }, [FD_TIMER] = { d->wake_timer, POLLIN, 0 },
		};

		if (poll(p, NFDS, nap ? -1 : 0) > 0)
			for (int i = 0; i < NFDS; i++)
				fired[i] = p[i].revents != 0;
	} else if (nap) {
		io_uring_submit_and_wait(&s->ring, 1);
	} else {
		io_uring_submit(&s->ring);
	}
	atomic_store(&d->sleeping, false);
	if (!s->use_poll) {
		io_uring_for_each_cqe(&s->ring, head, cqe) {
			uint64_t i = io_uring_cqe_get_data64(cqe);

			if (i < NFDS) {
				s->armed[i] = false;
				fired[i] = true;
			}
			n++;
		}
		io_uring_cq_advance(&s->ring, n);
	}
	d->st.core_wakes++;
	d->st.wake_cq += fired[FD_CHAN];
	d->st.wake_cm += fired[FD_CM];
	d->st.wake_doorbell += fired[FD_BELL];
	d->st.wake_timer += fired[FD_TIMER];
	drain_fds(d, s, fired);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void *core_main(void *arg)
{
	struct emunic_dev *d = arg;
	struct nic_spin spin;
	uint64_t last_work = 0;

	nic_spin_init(d, &spin);
	go_realtime(d);
	pin(d);
	nic_set_core_thread();
	emunic_tl_thread_name("core");
	while (!atomic_load_explicit(&d->stop, memory_order_acquire)) {
		uint64_t now, fired;
		int n;

		/* An application thread runs the engine: never spin on what
		 * only it can do (at real-time priority that could starve it);
		 * it hands over (sets the timer) when it leaves. */
		if (!nic_own(d)) {
			/* Whatever woke the core (its timer, say) is now the
			 * holder's to see: it runs one more pass and hands over
			 * again when it leaves (or the token is free by now). */
			atomic_store(&d->core_kicked, true);
			nic_kick(d);
			if (!nic_own(d)) {
				if (d->uring) {
					nic_spin_slept(&spin, false);
					core_sleep(d);
				} else {
					sched_yield();	/* spinning: never sleeps */
				}
				last_work = 0;
				continue;
			}
		}
		nic_take_kick(d);
		atomic_store(&d->need_core, false);
		fired = d->fired;
		n = nic_pass(d);
		d->st.core_passes++;
		now = emunic_now_ns();
		nic_spin_pass(d, &spin, n, now, d->fired != fired);
		/* The spin is timed from the last work (or the wake), so a
		 * pass that found work and took the whole spin is followed by
		 * one empty look, not two. */
		if (n || !last_work)
			last_work = now;
		if (!n && d->idle != EMUNIC_IDLE_SPIN && now - last_work >= nic_spin_ns(d, &spin)) {
			n = prepare_sleep(d);
			/* A pass run in leaving (for a kick) may have handed
			 * work to verbs after the arming looked: then look
			 * again rather than sleep unarmed (spec/token.pml, D1). */
			if (nic_unown(d))
				n = 1;
			nic_notices_out(d);
			if (!n) {
				nic_spin_slept(&spin, true);
				core_sleep(d);
			}
			last_work = 0;
			continue;
		}
		nic_unown(d);
		nic_notices_out(d);
		if (!n)
			__builtin_ia32_pause();
	}
	return NULL;
}

int nic_core_start(struct emunic_dev *d)
{
	int r;

	/* The core has a CPU of its own exactly when it is pinned (pin() says
	 * if that fails): the open pins it only to a free CPU, or to one of the
	 * rank's own when it has two or more, or where $EMUNIC_CPU says (the
	 * user's word for it).  Where it has none, waking it while the
	 * application computes only takes the CPU from that work (owner.c,
	 * engine.c nic_urgent). */
	atomic_store(&d->core_shares_cpu, d->attr.cpu < 0);

	if ((r = nic_wake_init(d, d->idle != EMUNIC_IDLE_SPIN)))
		return r;
	if (d->idle != EMUNIC_IDLE_SPIN && (r = sleep_init(d)))
		return r;
	r = -pthread_create(&d->thread, NULL, core_main, d);
	if (r)
		return emunic_err(r, "cannot start the progress core thread");
	d->thread_started = true;
	return 0;
}

void nic_core_stop(struct emunic_dev *d)
{
	if (d->thread_started) {
		atomic_store(&d->stop, true);
		atomic_store(&d->sleeping, true);	/* make the doorbell ring */
		nic_doorbell(d);
		pthread_join(d->thread, NULL);
		d->thread_started = false;
	}
	sleep_fini(d);
	nic_wake_fini(d);
}
