/* SPDX-License-Identifier: MIT */
/*
 * instr: instructions, counted by callgrind, that posting and the engine
 * cost (issue 18's instruction targets).  Times under QEMU's TCG mean little;
 * instruction counts do not depend on it.
 *
 * Each rank forks a child that runs this subcommand again under
 * valgrind --tool=callgrind (the launcher's bootstrap goes with it through
 * the environment); the parent waits, passes on its exit status and removes
 * the callgrind files.  The child runs four workloads, with the counts zeroed
 * before and dumped after the measured part (CALLGRIND_ZERO_STATS,
 * CALLGRIND_DUMP_STATS_AT):
 *  1. N blocking MQ barriers at 2 ranks, each one 4-task list (RECV,
 *     WRITE_IMM, SEND_EN, WAIT) prepared once and started
 *     (emunic_mq_start, EMUNIC_POST_WAIT_NEXT, as a blocking barrier posts);
 *  2. one hot-potato game (potato.c): R triggered puts a rank, each fired
 *     by the other's arriving;
 *  3. workload 1 again with each list posted whole
 *     (EMUNIC_COLL_PREPARED=0: emunic_mq_post_flags, every check each time);
 *  4. workload 1 again as nonblocking barriers (emunic_ibarrier, then
 *     emunic_coll_wait): the start without EMUNIC_POST_WAIT_NEXT, which
 *     runs its pass and hands the engine over itself;
 *  after 1 and 2, on the same device once it is quiet (both ranks done), a few bounded
 *  waits that find nothing (emunic_mq_wait on an empty MQ): the cost of an
 *  engine pass that found nothing, so the figures can also be given net of
 *  such passes (a waiter's and the core's looks while the peer is on its
 *  way: the wait, not the operation; how many a run has swings with how
 *  the two ranks meet, and the gross figure with it);
 * and rank 0 reads its dumps (the callgrind format: fn=, cfn=, calls= and
 * cost lines; see parse()) for:
 *  - the app side of a post: emunic_mq_start's (emunic_mq_post_flags's) inclusive count less the
 *    engine passes it ran itself when the engine was free (nic_pass under
 *    nic_submitted_run, directly or in nic_unown's extra rounds; a
 *    blocking call's start, as here, leaves its commands to its wait and
 *    runs none), a list;
 *  - the engine: nic_pass's inclusive count in every thread (the core's and
 *    the waiting app's), with nic_verbs_poll's where a pass did not call it
 *    (the core's look before it sleeps, an app poll's), less the verbs calls that post (emulated_post_send,
 *    emulated_post_recv: the entries of the device's shim ops table,
 *    shim/emulated/verbs.c, each a function of its own that the engine
 *    calls through the table), a task or a fired put.
 * Targets: <= 300 instructions on the app side to post a 4-task list; the
 * engine <= 500 instructions a fired operation beyond the post itself.
 */
#include "bench.h"

#include <emunic/coll.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define INSTR_DIR_ENV "EMUNIC_INSTR_DIR"
#define POST_TARGET 300
#define ENGINE_TARGET 500
#define WARMUP 20

struct instr_opts {
	int lists, rounds, timeout_ms;
	bool keep;
	const char *csv;
};

/* ---- the callgrind file ---------------------------------------------------- */

enum { F_MQ_POST, F_MQ_START, F_SUBMITTED, F_PASS, F_POST_SEND, F_POST_RECV, F_POLL, F_VPOLL, F_N };
static const char *const fn_names[F_N] = {
	"emunic_mq_post_flags", "emunic_mq_start", "nic_submitted_run", "nic_pass", "emulated_post_send", "emulated_post_recv",
	"emulated_poll_cq", "nic_verbs_poll",
};

struct counts {
	uint64_t self[F_N], out[F_N];	/* own cost lines; the inclusive cost of its calls */
	uint64_t calls[F_N];		/* calls into it */
	uint64_t inline_pass;		/* passes under nic_submitted_run: the poster's own */
	uint64_t lone_poll;		/* engine polls outside a pass (the core's before it sleeps, a poller's) */
};

static uint64_t incl(const struct counts *c, int f)
{
	return c->self[f] + c->out[f];
}

/* Which of fn_names a name is (callgrind may add 'caller contexts or a
 * compiler's .suffix), or -1. */
static int fn_id(const char *name)
{
	size_t n = strcspn(name, "'.\n");

	for (int i = 0; i < F_N; i++)
		if (strlen(fn_names[i]) == n && !strncmp(name, fn_names[i], n))
			return i;
	return -1;
}

/* The last number of a cost line "<position> <Ir>" (none: 0). */
static uint64_t cost_of(const char *line)
{
	const char *sp = strrchr(line, ' ');

	return sp ? strtoull(sp + 1, NULL, 10) : 0;
}

/* Reads one dump written with --compress-strings=no --compress-pos=no
 * --separate-callers=3: "fn=NAME'CALLER'CALLER2'CALLER3" starts a
 * function's lines; a cost line after "calls=N ..." is the inclusive cost of
 * those calls (to the last "cfn=..."); any other cost line is the function's
 * own.  A pass whose context names nic_submitted_run is one a poster ran
 * itself, directly (nic_pass'nic_submitted_run) or in nic_unown's extra rounds
 * (nic_pass'unown'nic_unown'nic_submitted_run: three callers deep, which a depth
 * of 2 cut off, so those passes, ~100 instructions a list, were counted as
 * the app's until 2026-11-26). */
static int parse(const char *path, struct counts *c)
{
	char line[4096];
	int cur = -1, callee = -1;
	bool call = false, by_poster = false, lone = false;
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	memset(c, 0, sizeof(*c));
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "fn=", 3)) {
			cur = fn_id(line + 3);
		} else if (!strncmp(line, "cfn=", 4)) {
			callee = fn_id(line + 4);
			by_poster = callee == F_PASS && strstr(line, "'nic_submitted_run");
			/* nic_verbs_poll's context: its callers follow the name */
			lone = callee == F_VPOLL && !strstr(line, "'nic_pass");
		} else if (!strncmp(line, "calls=", 6)) {
			if (callee >= 0)
				c->calls[callee] += strtoull(line + 6, NULL, 10);
			call = true;
		} else if ((line[0] >= '0' && line[0] <= '9') || line[0] == '+' || line[0] == '-' || line[0] == '*') {
			uint64_t v = cost_of(line);

			if (call) {
				if (cur >= 0)
					c->out[cur] += v;
				if (by_poster)	/* from nic_unown too */
					c->inline_pass += v;
				if (lone)
					c->lone_poll += v;
			} else if (cur >= 0) {
				c->self[cur] += v;
			}
			call = false;
		}
	}
	fclose(f);
	return 0;
}

/* ---- the workloads (in the child, under callgrind) ------------------------- */

/* Of the measured passes, those that found nothing (the device's count,
 * read inside the measured part, so never more than callgrind's count of
 * passes; the reads are the app's, not the engine's): the waiting
 * thread's and the spinning core's looks, which a longer wait for the peer
 * multiplies. */
static struct { uint64_t mq, pt; } idle;

static uint64_t idle_passes(struct emunic_dev *dev)
{
	struct emunic_dev_stats s;

	return emunic_dev_stats(dev, &s) ? 0 : s.idle_passes;
}

static int open_coll(struct bench *b, const struct instr_opts *o, struct emunic_dev **dev, struct emunic_coll **c,
		     char *device, size_t len)
{
	struct emunic_coll_attr ca;
	struct emunic_dev_attr da;
	int r;

	emunic_dev_attr_init(&da);
	if ((r = bench_open_dev(b, &da, dev, device, len)))
		return r;
	emunic_coll_attr_init(&ca);
	ca.signal = EMUNIC_COLL_WRITE_IMM;
	ca.timeout_ms = o->timeout_ms;
	r = emunic_coll_create(*dev, &ca, c);
	return r ? bench_err(b, r, "emunic_coll_create") : 0;
}

#define IDLE_WAITS 10
#define IDLE_WAIT_MS 2
#define IDLE_SETTLE_US 20000	/* for the last completions to land first */

/* The idle windows' passes, from the device's counts: all, and those that
 * did some work (a late completion, say: then the cost is not an idle
 * pass's alone, and the report says so). */
struct window { uint64_t passes, busy; };
static struct window idle_win_mq, idle_win_pt;

/* The idle window: bounded waits on an MQ with nothing posted, each a run of
 * engine passes (the waiter's, and the core's if it looks) that find
 * nothing.  Its own dump.  Both ranks enter and leave it together, so
 * neither's traffic (the peer still measuring, or already tearing down)
 * falls in the other's window. */
static int idle_window(struct bench *b, struct emunic_dev *dev, const char *what, struct window *win)
{
	struct emunic_dev_stats s0, s1;
	struct emunic_mq *mq = NULL;
	struct emunic_wc wc;
	int r = bench_coll_sync(b, "before the idle window"), d;

	if (!r && (r = emunic_mq_create(dev, 16, &mq)))
		return bench_err(b, r, "emunic_mq_create (%s)", what);
	if (r)
		return r;
	usleep(IDLE_SETTLE_US);
	r = emunic_dev_stats(dev, &s0);
	CALLGRIND_ZERO_STATS;
	for (int i = 0; i < IDLE_WAITS && !r; i++)
		if ((r = emunic_mq_wait(mq, &wc, IDLE_WAIT_MS)) == -ETIMEDOUT)
			r = 0;
		else
			r = bench_err(b, r ? r : -EPROTO, "a wait on an empty MQ (%s) did not time out", what);
	CALLGRIND_DUMP_STATS_AT(what);
	r = r ? r : emunic_dev_stats(dev, &s1);
	if (!r) {
		win->passes = s1.passes - s0.passes;
		win->busy = win->passes - (s1.idle_passes - s0.idle_passes);
		if (!win->passes)
			r = bench_err(b, -ENODATA, "%s: %d waits of %d ms on an empty MQ ran no engine pass", what,
				      IDLE_WAITS, IDLE_WAIT_MS);
	}
	if ((d = emunic_mq_destroy(mq)) && !r)
		r = bench_err(b, d, "emunic_mq_destroy (%s)", what);
	return r ? r : bench_coll_sync(b, "after the idle window");
}

static int barriers(struct bench *b, struct emunic_coll *c, int n, const char *what)
{
	for (int i = 0; i < n; i++) {
		int r = emunic_barrier(c);

		if (r)
			return bench_err(b, r, "%s barrier %d of %d", what, i + 1, n);
	}
	return 0;
}

/* N nonblocking barriers, each waited for before the next. */
static int ibarriers(struct bench *b, struct emunic_coll *c, int n, int timeout_ms)
{
	for (int i = 0; i < n; i++) {
		struct emunic_coll_req *req = NULL;
		int r = emunic_ibarrier(c, &req);

		r = r ? r : emunic_coll_wait(req, timeout_ms);
		if (r)
			return bench_err(b, r, "measured ibarrier %d of %d", i + 1, n);
	}
	return 0;
}

/* oneshot: each barrier posts its list whole (EMUNIC_COLL_PREPARED=0,
 * read at create), not a start of the list prepared once; nonblocking:
 * emunic_ibarrier and a wait, not emunic_barrier. */
static int run_mq(struct bench *b, const struct instr_opts *o, bool oneshot, bool nonblocking, char *device,
		  size_t len)
{
	struct emunic_dev *dev = NULL;
	struct emunic_coll *c = NULL;
	int r;

	/* Set either way: a value from the caller's environment would make
	 * both runs the same list. */
	setenv("EMUNIC_COLL_PREPARED", oneshot ? "0" : "1", 1);
	r = open_coll(b, o, &dev, &c, device, len);
	unsetenv("EMUNIC_COLL_PREPARED");
	r = r ? r : barriers(b, c, WARMUP, "warm-up");
	if (!r) {
		uint64_t idle0;

		CALLGRIND_ZERO_STATS;
		idle0 = idle_passes(dev);
		r = nonblocking ? ibarriers(b, c, o->lists, o->timeout_ms) : barriers(b, c, o->lists, "measured");
		if (!oneshot && !nonblocking)
			idle.mq = idle_passes(dev) - idle0;
		CALLGRIND_DUMP_STATS_AT(nonblocking ? "emunic-bench instr: mq ibarriers"
				       : oneshot    ? "emunic-bench instr: mq barriers, lists posted whole"
						    : "emunic-bench instr: mq barriers");
		if (!r && !oneshot && !nonblocking)
			r = idle_window(b, dev, "emunic-bench instr: mq device, idle passes", &idle_win_mq);
	}
	if (c) {
		int d = emunic_coll_destroy(c);

		r = r ? r : d ? bench_err(b, d, "emunic_coll_destroy") : 0;
	}
	if (dev)
		emunic_dev_close(dev);
	return r;
}

static int run_potato(struct bench *b, const struct instr_opts *o)
{
	struct potato *p = NULL;
	double us;
	int r = bench_potato_new(b, o->rounds, o->timeout_ms, &p);

	r = r ? r : bench_potato_play(b, p, 0, &us);	/* warm-up */
	if (!r) {
		uint64_t idle0;

		CALLGRIND_ZERO_STATS;
		idle0 = idle_passes(bench_potato_dev(p));
		r = bench_potato_play(b, p, 1, &us);
		idle.pt = idle_passes(bench_potato_dev(p)) - idle0;
		CALLGRIND_DUMP_STATS_AT("emunic-bench instr: hot potato");
		r = r ? r : idle_window(b, bench_potato_dev(p), "emunic-bench instr: potato device, idle passes",
					&idle_win_pt);
	}
	bench_potato_free(p);
	return r;
}

/* ---- the report (rank 0) --------------------------------------------------- */

static int read_dump(struct bench *b, const char *dir, int part, struct counts *c)
{
	char path[512];
	int r;

	snprintf(path, sizeof(path), "%s/callgrind.out.%d", dir, part);
	if ((r = parse(path, c)))
		return bench_err(b, r, "reading callgrind's dump %s", path);
	if (!c->calls[F_PASS])
		return bench_err(b, -ENODATA, "callgrind's dump %s counts no call of nic_pass (no symbols?)", path);
	return 0;
}

/* A post's instructions a list: with the engine passes the poster ran
 * itself (nic_submitted_run's), and without them (the app side). */
static int post_figures(struct bench *b, const struct instr_opts *o, const struct counts *c, int fn, double *app,
			double *all)
{
	double lists = (double)c->calls[fn];

	if (lists < o->lists)
		return bench_err(b, -ENODATA, "callgrind counted %.0f calls of %s for %d barriers", lists, fn_names[fn],
				 o->lists);
	if (c->inline_pass > incl(c, fn))
		return bench_err(b, -ENODATA, "callgrind's dump counts more passes under nic_submitted_run than in "
				 "%s: a poster other than it ran in the measured part", fn_names[fn]);
	*all = (double)incl(c, fn) / lists;
	*app = (double)(incl(c, fn) - c->inline_pass) / lists;
	return 0;
}

static int report(struct bench *b, const struct instr_opts *o, const char *dir, const char *device)
{
	struct counts mq, mq_idle, pt, pt_idle, one, nb;
	double lists, tasks, puts, post_app, post_all, one_app, one_all, nb_app, nb_all, mq_eng, mq_post, mq_poll,
	       pt_eng, pt_post, pt_poll, mq_idle_pass, pt_idle_pass, mq_net, pt_net;
	int r;

	if ((r = read_dump(b, dir, 1, &mq)) || (r = read_dump(b, dir, 2, &mq_idle)) || (r = read_dump(b, dir, 3, &pt)) ||
	    (r = read_dump(b, dir, 4, &pt_idle)) || (r = read_dump(b, dir, 5, &one)) || (r = read_dump(b, dir, 6, &nb)))
		return r;
	if ((r = post_figures(b, o, &mq, F_MQ_START, &post_app, &post_all)) ||
	    (r = post_figures(b, o, &one, F_MQ_POST, &one_app, &one_all)) ||
	    (r = post_figures(b, o, &nb, F_MQ_START, &nb_app, &nb_all)))
		return r;
	lists = (double)mq.calls[F_MQ_START];
	tasks = 4.0 * lists;
	puts = o->rounds;
	mq_post = (double)(incl(&mq, F_POST_SEND) + incl(&mq, F_POST_RECV)) / tasks;
	mq_poll = (double)incl(&mq, F_POLL) / tasks;
	mq_eng = (double)(incl(&mq, F_PASS) + mq.lone_poll) / tasks - mq_post;
	pt_post = (double)(incl(&pt, F_POST_SEND) + incl(&pt, F_POST_RECV)) / puts;
	pt_poll = (double)incl(&pt, F_POLL) / puts;
	pt_eng = (double)(incl(&pt, F_PASS) + pt.lone_poll) / puts - pt_post;
	/* An idle pass's cost on the same device; the measured parts' idle
	 * passes at that cost taken out. */
	mq_idle_pass = (double)incl(&mq_idle, F_PASS) / (double)mq_idle.calls[F_PASS];
	pt_idle_pass = (double)incl(&pt_idle, F_PASS) / (double)pt_idle.calls[F_PASS];
	mq_net = mq_eng - (double)idle.mq * mq_idle_pass / tasks;
	pt_net = pt_eng - (double)idle.pt * pt_idle_pass / puts;

	r = bench_add(b, "mq", "instr_post_app", post_app, "instr");
	r = r ? r : bench_add(b, "mq", "instr_post_with_pass", post_all, "instr");
	r = r ? r : bench_add(b, "mq", "instr_post_whole_app", one_app, "instr");
	r = r ? r : bench_add(b, "mq", "instr_post_whole_with_pass", one_all, "instr");
	r = r ? r : bench_add(b, "mq", "instr_start_nb_app", nb_app, "instr");
	r = r ? r : bench_add(b, "mq", "instr_start_nb_with_pass", nb_all, "instr");
	r = r ? r : bench_add(b, "mq", "instr_engine_task", mq_eng, "instr");
	r = r ? r : bench_add(b, "mq", "instr_verbs_post_task", mq_post, "instr");
	r = r ? r : bench_add(b, "mq", "instr_verbs_poll_task", mq_poll, "instr");
	r = r ? r : bench_add(b, "mq", "instr_idle_pass", mq_idle_pass, "instr");
	r = r ? r : bench_add(b, "mq", "instr_engine_task_net", mq_net, "instr");
	r = r ? r : bench_add(b, "triggered", "instr_engine_op", pt_eng, "instr");
	r = r ? r : bench_add(b, "triggered", "instr_verbs_post_op", pt_post, "instr");
	r = r ? r : bench_add(b, "triggered", "instr_verbs_poll_op", pt_poll, "instr");
	r = r ? r : bench_add(b, "triggered", "instr_idle_pass", pt_idle_pass, "instr");
	r = r ? r : bench_add(b, "triggered", "instr_engine_op_net", pt_net, "instr");
	if (r)
		return r;
	printf("\nemunic-bench instr: instructions counted by callgrind, rank 0, measured parts only\n"
	       "  device       %s, 2 ranks\n"
	       "  mq           %d blocking barriers, each one 4-task list (RECV, WRITE_IMM, SEND_EN,\n"
	       "               WAIT), prepared once, started (emunic_mq_start); %llu engine passes\n"
	       "               (%llu found nothing);\n"
	       "               and again with each list posted whole (emunic_mq_post_flags),\n"
	       "               and again as ibarriers (a start without EMUNIC_POST_WAIT_NEXT)\n"
	       "  triggered    one hot-potato game: %d puts a rank, each fired by the other's\n"
	       "               arriving; %llu engine passes (%llu found nothing)\n"
	       "  engine       nic_pass in every thread (core and waiting app) and verbs polls\n"
	       "               outside a pass (the core's before it sleeps, a poller's), less\n"
	       "               the verbs calls that post (the shim's emulated_post_send, _post_recv)\n"
	       "  net          the same less the passes that found nothing, at the cost of such a\n"
	       "               pass measured on the same device with nothing to do (%d waits of %d ms\n"
	       "               on an empty MQ: %llu passes, %llu of them did work, mq device;\n"
	       "               %llu, %llu, potato device)\n\n",
	       device, o->lists, (unsigned long long)mq.calls[F_PASS], (unsigned long long)idle.mq, o->rounds,
	       (unsigned long long)pt.calls[F_PASS], (unsigned long long)idle.pt, IDLE_WAITS, IDLE_WAIT_MS,
	       (unsigned long long)idle_win_mq.passes, (unsigned long long)idle_win_mq.busy,
	       (unsigned long long)idle_win_pt.passes, (unsigned long long)idle_win_pt.busy);
	printf("  %-54s %12s\n", "figure", "instructions");
	printf("  %-54s %12.0f\n", "mq: start a prepared list, app side (no engine pass)", post_app);
	printf("  %-54s %12.0f\n", "mq: start a prepared list, with the engine pass it ran", post_all);
	printf("  %-54s %12.0f\n", "mq: post a list whole, app side (no engine pass)", one_app);
	printf("  %-54s %12.0f\n", "mq: post a list whole, with the engine pass it ran", one_all);
	printf("  %-54s %12.0f\n", "mq: start an ibarrier's list, app side (no engine pass)", nb_app);
	printf("  %-54s %12.0f\n", "mq: start an ibarrier's list, with the engine pass it ran", nb_all);
	printf("  %-54s %12.0f\n", "mq: engine a task, beyond the shim's post_send/recv", mq_eng);
	printf("  %-54s %12.0f\n", "mq:   shim post_send/recv a task (not counted above)", mq_post);
	printf("  %-54s %12.0f\n", "mq:   of the engine's: shim poll_cq a task", mq_poll);
	printf("  %-54s %12.0f\n", "mq:   an engine pass that found nothing", mq_idle_pass);
	printf("  %-54s %12.0f\n", "mq: engine a task, net of the passes that found nothing", mq_net);
	printf("  %-54s %12.0f\n", "triggered: engine a fired put, beyond shim post_send/recv", pt_eng);
	printf("  %-54s %12.0f\n", "triggered:   shim post_send/recv a put (not counted above)", pt_post);
	printf("  %-54s %12.0f\n", "triggered:   of the engine's: shim poll_cq a put", pt_poll);
	printf("  %-54s %12.0f\n", "triggered:   an engine pass that found nothing", pt_idle_pass);
	printf("  %-54s %12.0f\n", "triggered: engine a put, net of the passes that found nothing", pt_net);
	printf("\ntargets (reported, never asserted)\n");
	bench_target_value("post a 4-task list, app side <= 300", "mq start", post_app, POST_TARGET, "instructions");
	bench_target_value("post a 4-task list, app side <= 300", "mq whole", one_app, POST_TARGET, "instructions");
	bench_target_value("post a 4-task list, app side <= 300", "mq start nb", nb_app, POST_TARGET, "instructions");
	bench_target_value("engine a fired op beyond post_send <= 500", "triggered", pt_eng, ENGINE_TARGET,
			   "instructions");
	bench_target_value("engine a task beyond post_send <= 500", "mq", mq_eng, ENGINE_TARGET, "instructions");
	bench_write_csv(b, "none");
	return 0;
}

static int measure(const struct instr_opts *o, const char *dir)
{
	struct bench b = { 0 };
	char device[96] = "?";
	int r = bench_init(&b, "instr", o->csv);

	r = r ? r : bench_two_ranks(&b);
	r = r ? r : run_mq(&b, o, false, false, device, sizeof(device));
	if (!r)
		bench_progress(&b, "[mq] %d barriers counted", o->lists);
	r = r ? r : run_potato(&b, o);
	if (!r)
		bench_progress(&b, "[triggered] a game of %d puts a rank counted", o->rounds);
	r = r ? r : run_mq(&b, o, true, false, device, sizeof(device));
	if (!r)
		bench_progress(&b, "[mq] %d barriers, lists posted whole, counted", o->lists);
	r = r ? r : run_mq(&b, o, false, true, device, sizeof(device));
	if (!r)
		bench_progress(&b, "[mq] %d ibarriers counted", o->lists);
	if (!r && b.rank == 0)
		r = report(&b, o, dir, device);
	return bench_fini(&b, r);
}

/* ---- the parent: callgrind around the child -------------------------------- */

static void rm_dir(const char *dir)
{
	char path[512];

	for (int part = 0; part <= 6; part++) {
		if (part)
			snprintf(path, sizeof(path), "%s/callgrind.out.%d", dir, part);
		else
			snprintf(path, sizeof(path), "%s/callgrind.out", dir);
		unlink(path);
	}
	rmdir(dir);
}

static int under_callgrind(int argc, char **argv, const struct instr_opts *o)
{
	char dir[] = "/tmp/emunic-instr.XXXXXX", out[64], self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid, parent = getpid();
	int status;

	if (n <= 0)
		return fprintf(stderr, "emunic-bench: instr: cannot find my own executable (%s)\n", strerror(errno)),
		       EXIT_RUN;
	self[n] = '\0';
	if (!mkdtemp(dir))
		return fprintf(stderr, "emunic-bench: instr: mkdtemp %s: %s\n", dir, strerror(errno)), EXIT_RUN;
	snprintf(out, sizeof(out), "--callgrind-out-file=%s/callgrind.out", dir);
	pid = fork();
	if (pid == 0) {
		char **av = calloc((size_t)argc + 9, sizeof(*av));
		int k = 0;

		prctl(PR_SET_PDEATHSIG, SIGKILL);	/* no orphan if the launcher kills us */
		if (getppid() != parent)
			_exit(EXIT_RUN);		/* it did, before the line above */
		setenv(INSTR_DIR_ENV, dir, 1);
		if (!av)
			_exit(EXIT_RUN);
		av[k++] = "valgrind";
		av[k++] = "--tool=callgrind";
		av[k++] = "-q";
		av[k++] = out;
		av[k++] = "--compress-strings=no";
		av[k++] = "--compress-pos=no";
		av[k++] = "--separate-callers=3";
		av[k++] = self;
		for (int i = 0; i < argc; i++)
			av[k++] = argv[i];	/* argv[0] is "instr" */
		execvp(av[0], av);
		fprintf(stderr, "emunic-bench: instr: cannot run valgrind (%s): it counts the instructions; "
			"apt-get install valgrind\n", strerror(errno));
		_exit(EXIT_RUN);
	}
	if (pid < 0) {
		fprintf(stderr, "emunic-bench: instr: fork: %s\n", strerror(errno));
		rm_dir(dir);
		return EXIT_RUN;
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "emunic-bench: instr: waitpid: %s\n", strerror(errno));
			status = EXIT_RUN << 8;
			break;
		}
	}
	if (o->keep)
		fprintf(stderr, "emunic-bench: instr: callgrind's files kept in %s\n", dir);
	else
		rm_dir(dir);
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "emunic-bench: instr: the counted run died of signal %d\n", WTERMSIG(status));
		return EXIT_RUN;
	}
	return WEXITSTATUS(status);
}

static int instr_opt(const char *cmd, const char *name, int val, const char *arg, void *ctx)
{
	struct instr_opts *o = ctx;

	if (val == 'k') {
		o->keep = true;
		return 0;
	}
	if (val == 'n')
		return bench_opt_int(cmd, name, arg, 1, 100000, "a count in 1..100000", &o->lists);
	return bench_opt_int(cmd, name, arg, 1, 100000, "a count in 1..100000", &o->rounds);
}

int bench_instr_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "barriers", required_argument, NULL, 'n' }, { "rounds", required_argument, NULL, 'r' },
		{ "keep", no_argument, NULL, 'k' }, OPT_QUICK, OPTS_COMMON
	};
	struct instr_opts o = { .timeout_ms = 60000 };
	struct common_opts com = { .timeout_ms = o.timeout_ms };
	const char *dir = getenv(INSTR_DIR_ENV);
	int r = bench_parse_opts("instr", argc, argv, lo, instr_opt, &o, &com);

	if (r)
		return r;	/* EXIT_USAGE, or BENCH_HELP: main.c prints the manual */
	o.timeout_ms = com.timeout_ms;
	o.csv = com.csv;
	if (!o.lists)
		o.lists = com.quick ? 100 : 500;
	if (!o.rounds)
		o.rounds = com.quick ? 100 : 500;
	if (!RUNNING_ON_VALGRIND)
		return under_callgrind(argc, argv, &o);
	if (!dir) {
		fprintf(stderr, "emunic-bench: instr: run it as 'emunic-bench instr': it starts callgrind itself\n");
		return EXIT_USAGE;
	}
	return measure(&o, dir);
}

const char bench_instr_help[] =
"    emunic-run -n 2 emunic-bench instr [--barriers N] [--rounds R] [--keep] [--quick]\n"
"    Instructions, counted by callgrind (each rank runs itself again under\n"
"    valgrind --tool=callgrind), in the measured part of N blocking MQ\n"
"    barriers (each one 4-task list) and of one hot-potato game of R\n"
"    triggered puts a rank: the app's side of posting a list (without the\n"
"    engine pass it may run itself), and the engine's work (nic_pass, every\n"
"    thread) a task and a fired put beyond the verbs calls that post.\n"
"    Targets: a 4-task list <= 300 instructions on the app side; the engine\n"
"    <= 500 instructions a fired operation beyond the post itself.\n"
"    --barriers N       measured barriers (default 500; --quick 100)\n"
"    --rounds R         puts a rank in the measured game (default 500; --quick 100)\n"
"    --keep             keep callgrind's files (the directory is printed)\n"
"    The barriers run three times: their lists prepared once and started\n"
"    (emunic_mq_start, the barrier's way), posted whole each time\n"
"    (emunic_mq_post_flags, EMUNIC_COLL_PREPARED=0), and started as\n"
"    nonblocking barriers (emunic_ibarrier).\n"
"    CSV: impl mq (metrics instr_post_app, instr_post_with_pass: the start;\n"
"    instr_post_whole_app, instr_post_whole_with_pass: the post whole;\n"
"    instr_start_nb_app, instr_start_nb_with_pass: the nonblocking start;\n"
"    instr_engine_task, instr_verbs_post_task, instr_verbs_poll_task,\n"
"    instr_idle_pass, instr_engine_task_net) and triggered (instr_engine_op,\n"
"    instr_verbs_post_op, instr_verbs_poll_op, instr_idle_pass,\n"
"    instr_engine_op_net), instructions; no baseline (the targets are\n"
"    absolute).  The _net figures leave out the engine passes that found\n"
"    nothing (a waiting thread's and the core's looks while the peer is on\n"
"    its way), at the cost of such a pass measured on the same device after\n"
"    the blocking barriers and after the game (waits on an empty MQ, both\n"
"    ranks between bootstrap barriers); the targets are judged on the gross\n"
"    figures.\n";
