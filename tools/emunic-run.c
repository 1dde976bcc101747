/* SPDX-License-Identifier: MIT */
/*
 * emunic-run: start the ranks of an emunic job and be their bootstrap server.
 *
 * Each rank gets EMUNIC_RANK, EMUNIC_SIZE and EMUNIC_BOOT_ADDR (a TCP channel
 * to this launcher) and exchanges its connection addresses through it (see
 * emunic/boot_wire.h).  A rank that fails makes the launcher kill the rest and
 * exit with that rank's status (--keep-going: let the rest finish).  Across
 * nodes (two guests, or hosts), one emunic-run a node is started with
 * --nodes/--node/--server; node 0's serves.  It also checks the fault spec
 * ($EMUNIC_FAULTS, --faults), sets netem up for a loss rule and reports the
 * device's hardware counters (--counters), undoing netem on every way out.
 */
#include "emunic/boot_wire.h"
#include <emunic/fault.h>
#include "emunic/verbs.h"
#include "emunic/base/timeline.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 4096
#define EXIT_LAUNCH 1		/* the launcher itself failed */
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_NOEXEC 126
#define EXIT_NOTFOUND 127
#define MAX_HW_COUNTERS 64

static const char usage_text[] =
"NAME\n"
"    emunic-run - start the ranks of an emunic job over RDMA\n"
"\n"
"SYNOPSIS\n"
"    emunic-run -n N [-d DEVICE] [-t SECONDS] [-f SPEC] [-c] [-k] [-v]\n"
"               [--trace FILE] [--] PROGRAM [ARG...]\n"
"    emunic-run -n N --nodes K --node I --server ADDR:PORT [...] PROGRAM [ARG...]\n"
"\n"
"DESCRIPTION\n"
"    Forks N ranks of PROGRAM on this node.  Each rank finds its rank and the\n"
"    job size in EMUNIC_RANK and EMUNIC_SIZE and exchanges connection\n"
"    addresses with the others through this launcher (EMUNIC_BOOT_ADDR); the\n"
"    ranks then connect RC queue pairs with librdmacm.  If a rank exits\n"
"    non-zero or is killed, emunic-run kills the others, names the rank and\n"
"    its status, and exits with that status; with --keep-going it lets the\n"
"    others run to their end instead.\n"
"\n"
"    Across K nodes, run one emunic-run a node with the same N, PROGRAM and\n"
"    --server; node I starts ranks I*N/K .. (I+1)*N/K-1.  Node 0 listens on\n"
"    ADDR:PORT (an address of its own) and serves the bootstrap of every rank.\n"
"    Under a PMIx launcher (prterun, Open MPI's mpirun, srun --mpi=pmix)\n"
"    emunic programs bootstrap through PMIx and need no emunic-run.\n"
"\n"
"    With --faults (or EMUNIC_FAULTS) the ranks inject faults: RNR and\n"
"    transport retry errors, synthetic completion errors, and packet loss and\n"
"    delay (the spec language is in include/emunic/fault.h).  emunic-run checks\n"
"    the spec before it starts anything.  For a loss rule it puts netem on the\n"
"    network interface under the job's RDMA device (tc qdisc replace dev IF\n"
"    root netem ...) before the ranks start, and deletes that root qdisc when\n"
"    the job ends, however it ends (a failed rank, a timeout, a signal; not\n"
"    SIGKILL).  That needs root and tc.  rxe's loopback between ranks of one\n"
"    node does not cross the interface: for loss to touch the job's traffic,\n"
"    spread the ranks over nodes with --nodes, and give every node's\n"
"    emunic-run the same --faults.\n"
"\n"
"OPTIONS\n"
"    -n, --np N           number of ranks (1..4096)\n"
"    -d, --device NAME    RDMA device for every rank (default: $EMUNIC_DEVICE,\n"
"                         else the first device with an ACTIVE port)\n"
"    -t, --timeout SECS   kill the job after SECS seconds (default: no limit;\n"
"                         applies with --keep-going too)\n"
"    -f, --faults SPEC    inject the faults SPEC describes: sets EMUNIC_FAULTS\n"
"                         for every rank (an empty SPEC: none); a loss rule\n"
"                         sets netem up for the job, as DESCRIPTION says\n"
"    -c, --counters       read the device's hardware counters (port 1; rxe:\n"
"                         RNR NAKs, retries, ...) before the ranks start and\n"
"                         after the job ends, and print those that changed\n"
"    -k, --keep-going     a rank that fails does not end the job: emunic-run\n"
"                         names it and waits for the others to end.  An\n"
"                         exchange that can no longer complete because a rank\n"
"                         left still fails the job\n"
"        --nodes K        the job spans K nodes (default 1)\n"
"        --node I         this is node I, 0..K-1\n"
"        --server A:P     node 0's bootstrap address (needed when K > 1)\n"
"        --trace FILE     write a timeline of the job to FILE: Chrome/Perfetto\n"
"                         trace-event JSON (open it in ui.perfetto.dev), one\n"
"                         process a rank, a track a thread and a queue; sets\n"
"                         EMUNIC_TRACE for every rank, each writes FILE.rankN\n"
"                         at exit, and emunic-run joins them into FILE once\n"
"                         the ranks ended (a rank's part that cannot be\n"
"                         written is said; the job's status is the ranks')\n"
"    -v, --verbose        report launches and exits, and the fault spec in\n"
"                         canonical form\n"
"    -h, --help           this text\n"
"\n"
"ENVIRONMENT\n"
"    Set for each rank: EMUNIC_RANK, EMUNIC_SIZE, EMUNIC_LOCAL_RANK,\n"
"    EMUNIC_LOCAL_SIZE, EMUNIC_BOOT_ADDR, EMUNIC_DEVICE when -d is given,\n"
"    EMUNIC_FAULTS when --faults is given, and EMUNIC_TRACE when --trace is.\n"
"\n"
"    Read by emunic-run:\n"
"    EMUNIC_DEVICE        the device when -d is not given\n"
"    EMUNIC_FAULTS        the fault spec when --faults is not given; it is\n"
"                         checked and acted on (netem) the same way\n"
"    EMUNIC_TRACE         the trace FILE when --trace is not given (a program\n"
"                         run alone with it writes FILE itself)\n"
"    PATH                 where tc is looked for (then /usr/sbin and /sbin)\n"
"\n"
"EXIT STATUS\n"
"    0 every rank exited 0; the status of the first rank that failed (128+n\n"
"    when killed by signal n; with --keep-going, once the others ended, and\n"
"    across nodes node 0 takes the first a node reported); 1 launcher error\n"
"    (no RDMA device, bootstrap failure, tc could not set netem up); 2 bad\n"
"    usage, or a malformed fault spec; 124 timeout; 126 PROGRAM not\n"
"    executable; 127 PROGRAM not found.\n"
"\n"
"EXAMPLES\n"
"    emunic-run -n 4 build/bin/emunic-datapath\n"
"    emunic-run -n 2 -d rxe0 -t 60 build/bin/emunic-datapath --size 1M\n"
"    emunic-run -n 2 -c -f 'rnr:peer=1' build/bin/emunic-faulttest send\n"
"    emunic-run -n 4 -k -c -f 'wc:status=RETRY_EXC,p=1%,seed=7' PROGRAM\n"
"    emunic-run -n 2 --nodes 2 --node 0 --server 10.0.2.1:7711 \\\n"
"        -f 'loss:p=1%,delay=2ms,jitter=500us' build/bin/emunic-datapath\n";

struct rank_slot {
	pid_t pid;		/* local ranks only */
	int fd;			/* bootstrap channel, -1 when not connected */
	bool joined, finalized, closed, contributed, exited;
	bool reported;		/* its exit was judged (rank_exit) */
	int status;		/* wait status, once exited */
	int code;		/* exit code it stands for, when it failed */
	double t_exit;		/* seconds into the job it exited */
	void *share;
	size_t share_len;
};

struct job {
	int n, nodes, node, first, count;
	const char *server;
	const char *device;
	int timeout_s;
	bool verbose, counters, keep_going;
	char **argv;
	sigset_t oldmask;		/* the mask children get back */

	/* Faults and counters. */
	struct emunic_fault_spec *faults;
	char hwdev[64];			/* the device counters and netem are about */
	struct emunic_hw_counter hw_before[MAX_HW_COUNTERS];
	int hw_n;			/* counters read before; -1: none */
	char netem_if[64];		/* interface with our netem on it, "" none */
	pid_t launcher;			/* cleanup runs in this process only */
	bool cleaned;

	/* --keep-going: the first failure, by this node's ranks or reported
	 * by another node. */
	int first_fail;
	char first_why[256];

	int lfd;			/* bootstrap server socket (node 0) */
	char addr[128];
	int sfd;			/* signalfd */
	int ctl;			/* node > 0: control link to node 0 */
	int node_fd[64];		/* node 0: control links by node */
	bool node_done[64];
	struct rank_slot *rank;
	int contributed;
	struct pollfd *pfd;		/* event_loop's, here to stay reachable when */
	int *who;			/* fail() exits from inside it (LeakSanitizer) */
	struct timespec start;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "emunic-run: %s\n", buf);
}

static double elapsed(const struct job *j)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - j->start.tv_sec) + (double)(t.tv_nsec - j->start.tv_nsec) / 1e9;
}

/* ---- ending the job ------------------------------------------------------ */

static bool any_local_alive(const struct job *j)
{
	for (int r = j->first; r < j->first + j->count; r++)
		if (j->rank[r].pid > 0 && !j->rank[r].exited)
			return true;
	return false;
}

static void reap(struct job *j, bool quiet);

static void kill_locals(struct job *j)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	int i;

	for (int r = j->first; r < j->first + j->count; r++)
		if (j->rank[r].pid > 0 && !j->rank[r].exited)
			kill(j->rank[r].pid, SIGTERM);
	for (i = 0; i < 100 && any_local_alive(j); i++) {	/* 2 s grace */
		nanosleep(&ts, NULL);
		reap(j, true);
	}
	for (int r = j->first; r < j->first + j->count; r++)
		if (j->rank[r].pid > 0 && !j->rank[r].exited) {
			kill(j->rank[r].pid, SIGKILL);
			waitpid(j->rank[r].pid, NULL, 0);
			j->rank[r].exited = true;
		}
}

static void fail(struct job *j, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
static void fail(struct job *j, int code, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	say("%s", why);
	if (j->ctl >= 0)
		emunic_wire_send(j->ctl, EMUNIC_BOOT_NODE_FAIL, j->node, why, strlen(why) + 1);
	for (int k = 1; k < j->nodes; k++)
		if (j->node_fd[k] >= 0)
			emunic_wire_send(j->node_fd[k], EMUNIC_BOOT_ABORT, 0, why, strlen(why) + 1);
	if (any_local_alive(j)) {
		say("killing the other ranks");
		kill_locals(j);
	}
	exit(code);	/* cleanup() (atexit): counters, netem off */
}

static int status_code(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void describe(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
	else
		snprintf(buf, len, "was killed by signal %d (%s)%s", WTERMSIG(st), strsignal(WTERMSIG(st)),
			 WCOREDUMP(st) ? ", core dumped" : "");
}

static void rank_gone(struct job *j, int r);
static void on_rank_msg(struct job *j, int r);

/* Judges an exited local rank, once: a failure ends the job, or with
 * --keep-going is named and remembered. */
static void rank_exit(struct job *j, int r)
{
	struct rank_slot *s = &j->rank[r];
	char how[128];

	if (s->reported)
		return;
	s->reported = true;
	describe(s->status, how, sizeof(how));
	if (!s->status) {
		if (j->verbose)
			say("rank %d (pid %d) %s after %.1f s", r, (int)s->pid, how, s->t_exit);
		return;
	}
	s->code = status_code(s->status) ? status_code(s->status) : EXIT_LAUNCH;
	if (!j->keep_going)
		fail(j, s->code, "rank %d (pid %d) %s after %.1f s", r, (int)s->pid, how, s->t_exit);
	say("rank %d (pid %d) %s after %.1f s; keeping the others (--keep-going)", r, (int)s->pid, how, s->t_exit);
	if (!j->first_fail) {
		j->first_fail = s->code;
		snprintf(j->first_why, sizeof(j->first_why), "rank %d (pid %d) %s after %.1f s", r, (int)s->pid,
			 how, s->t_exit);
	}
}

/* Collects exited children; the first failure ends the job (unless
 * --keep-going). */
static void reap(struct job *j, bool quiet)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (int r = j->first; r < j->first + j->count; r++) {
			struct rank_slot *s = &j->rank[r];

			if (s->pid != pid)
				continue;
			s->exited = true;
			s->status = st;
			s->t_exit = elapsed(j);
			if (quiet)
				break;
			/* Read what it said before exiting (FINALIZE) before judging;
			 * if that finds its channel closed mid-exchange, rank_gone
			 * judges its exit status first. */
			while (s->fd >= 0 && poll(&(struct pollfd){ .fd = s->fd, .events = POLLIN }, 1, 0) > 0)
				on_rank_msg(j, r);
			rank_exit(j, r);
			rank_gone(j, r);
			break;
		}
	}
}

/* ---- the bootstrap server ------------------------------------------------ */

/* code: the status of the rank whose leaving broke the exchange, if it
 * failed (--keep-going), else EXIT_LAUNCH. */
static void round_fail(struct job *j, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
static void round_fail(struct job *j, int code, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	for (int r = 0; r < j->n; r++)
		if (j->rank[r].fd >= 0)
			emunic_wire_send(j->rank[r].fd, EMUNIC_BOOT_ERROR, -1, why, strlen(why) + 1);
	fail(j, code, "bootstrap: %s", why);
}

static int node_of(const struct job *j, int r)
{
	int k = 0;

	while (k + 1 < j->nodes && r >= (int)((long)(k + 1) * j->n / j->nodes))
		k++;
	return k;
}

static void on_node_msg(struct job *j, int k);

/* A rank that can no longer take part while others wait would hang them. */
static void rank_gone(struct job *j, int r)
{
	struct rank_slot *s = &j->rank[r];
	bool local = r >= j->first && r < j->first + j->count;

	if (s->finalized || !s->joined)
		return;
	/* A local rank's channel closes just before it exits: report its exit
	 * status (rank_exit fails the job on a non-zero one, or names it under
	 * --keep-going) rather than the EOF. */
	for (int i = 0; i < 500 && local && !s->exited; i++) {
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
		reap(j, false);
	}
	if (local && s->exited)
		rank_exit(j, r);
	/* Likewise a remote rank: its node's launcher says why, just after. */
	if (!local) {
		int k = node_of(j, r);

		if (j->node_fd[k] >= 0 &&
		    poll(&(struct pollfd){ .fd = j->node_fd[k], .events = POLLIN }, 1, 2000) > 0)
			on_node_msg(j, k);
	}
	if (j->contributed > 0 && !s->contributed)
		round_fail(j, s->code ? s->code : EXIT_LAUNCH,
			   "rank %d left while %d rank(s) wait for it in an exchange", r, j->contributed);
}

static void round_complete(struct job *j)
{
	size_t len = j->rank[0].share_len, total = len * (size_t)j->n;
	char *all = malloc(total ? total : 1);

	if (!all)
		round_fail(j, EXIT_LAUNCH, "out of memory for a %zu-byte exchange", total);
	for (int r = 0; r < j->n; r++) {
		memcpy(all + (size_t)r * len, j->rank[r].share, len);
		free(j->rank[r].share);
		j->rank[r].share = NULL;
		j->rank[r].contributed = false;
	}
	j->contributed = 0;
	for (int r = 0; r < j->n; r++)
		if (emunic_wire_send(j->rank[r].fd, EMUNIC_BOOT_RESULT, -1, all, total))
			say("rank %d: cannot send exchange result (%s)", r, strerror(errno));
	free(all);
}

static void on_allgather(struct job *j, int r, const struct emunic_boot_msg *m)
{
	struct rank_slot *s = &j->rank[r];

	s->share = malloc(m->len ? m->len : 1);
	if (!s->share || emunic_wire_recv_body(s->fd, s->share, m->len, 5000))
		round_fail(j, EXIT_LAUNCH, "rank %d: short exchange message", r);
	s->share_len = m->len;
	s->contributed = true;
	j->contributed++;
	for (int q = 0; q < j->n; q++) {
		if (j->rank[q].contributed && j->rank[q].share_len != s->share_len)
			round_fail(j, EXIT_LAUNCH, "ranks %d and %d gave %zu and %zu bytes to one exchange",
				   q, r, j->rank[q].share_len, s->share_len);
		if (j->rank[q].closed && !j->rank[q].finalized)
			round_fail(j, j->rank[q].code ? j->rank[q].code : EXIT_LAUNCH,
				   "rank %d left before an exchange rank %d began", q, r);
	}
	if (j->contributed == j->n)
		round_complete(j);
}

static void on_rank_msg(struct job *j, int r)
{
	struct rank_slot *s = &j->rank[r];
	struct emunic_boot_msg m;
	int ret = emunic_wire_recv_hdr(s->fd, &m, 5000);

	if (ret) {
		close(s->fd);
		s->fd = -1;
		s->closed = true;
		if (!s->finalized)
			rank_gone(j, r);
		return;
	}
	switch (m.type) {
	case EMUNIC_BOOT_ALLGATHER:
		if (s->contributed)
			round_fail(j, EXIT_LAUNCH, "rank %d joined one exchange twice", r);
		on_allgather(j, r, &m);
		break;
	case EMUNIC_BOOT_FINALIZE:
		s->finalized = true;
		break;
	default:
		round_fail(j, EXIT_LAUNCH, "rank %d sent an unknown message type %u", r, m.type);
	}
}

static void on_node_msg(struct job *j, int k)
{
	struct emunic_boot_msg m;
	char why[512] = "";

	if (emunic_wire_recv_hdr(j->node_fd[k], &m, 5000)) {
		close(j->node_fd[k]);
		j->node_fd[k] = -1;
		if (!j->node_done[k])
			fail(j, EXIT_LAUNCH, "node %d's emunic-run went away", k);
		return;
	}
	if (m.len)
		emunic_wire_recv_body(j->node_fd[k], why, m.len < sizeof(why) ? m.len : sizeof(why) - 1, 5000);
	if (m.type != EMUNIC_BOOT_NODE_DONE)
		fail(j, EXIT_LAUNCH, "node %d: %s", k, why);
	j->node_done[k] = true;
	/* Under --keep-going a node's ranks may have failed: "CODE WHY". */
	if (why[0]) {
		char *rest;
		long code = strtol(why, &rest, 10);

		if (code > 0 && code < 256) {
			say("node %d: %s (--keep-going)", k, rest + (*rest == ' '));
			if (!j->first_fail) {
				j->first_fail = (int)code;
				snprintf(j->first_why, sizeof(j->first_why), "node %d: %s", k, rest + (*rest == ' '));
			}
		}
	}
}

static void on_accept(struct job *j)
{
	struct emunic_boot_msg m;
	int fd = accept4(j->lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	if (emunic_wire_recv_hdr(fd, &m, 5000)) {
		close(fd);
		return;
	}
	if (m.type == EMUNIC_BOOT_NODE_HELLO && m.rank > 0 && m.rank < j->nodes && j->node_fd[m.rank] < 0) {
		j->node_fd[m.rank] = fd;
		return;
	}
	if (m.type != EMUNIC_BOOT_HELLO || m.rank < 0 || m.rank >= j->n || j->rank[m.rank].joined) {
		say("dropping a bootstrap connection (type %u, rank %d)", m.type, m.rank);
		close(fd);
		return;
	}
	j->rank[m.rank].fd = fd;
	j->rank[m.rank].joined = true;
}

/* ---- launching ------------------------------------------------------------ */

static int find_program(const char *prog, char *path, size_t len)
{
	const char *p = getenv("PATH");

	if (strchr(prog, '/')) {
		snprintf(path, len, "%s", prog);
		if (access(path, F_OK))
			return EXIT_NOTFOUND;
		return access(path, X_OK) ? EXIT_NOEXEC : 0;
	}
	for (p = p ? p : "/usr/bin:/bin"; *p;) {
		const char *c = strchrnul(p, ':');

		snprintf(path, len, "%.*s/%s", (int)(c - p), p, prog);
		if (!access(path, X_OK))
			return 0;
		p = *c ? c + 1 : c;
	}
	return EXIT_NOTFOUND;
}

static void check_device(const char *want)
{
	struct ibv_device **list;
	char names[512] = "";
	size_t off = 0;
	bool found = false;
	int n = 0;

	list = ibv_get_device_list(&n);
	for (int i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);

		found |= want && !strcmp(name, want);
		if (off < sizeof(names))
			off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "", name);
	}
	if (list)
		ibv_free_device_list(list);
	if (n == 0) {
		say("no RDMA device on this machine: load rdma_rxe and run "
		    "'rdma link add rxe0 type rxe netdev <if>', or run inside the emunic guest "
		    "(guest-images/guest.py)");
		exit(EXIT_LAUNCH);
	}
	if (want && !found) {
		say("no RDMA device named '%s' (devices here: %s)", want, names);
		exit(EXIT_LAUNCH);
	}
}

/* ---- faults: the spec, netem for a loss rule, hardware counters ----------- */

/* A malformed spec is bad usage: the parser's message (it names the token,
 * then shows the spec with a caret under it) and exit 2, before anything. */
static void check_faults(struct job *j, bool from_option)
{
	const char *spec = getenv("EMUNIC_FAULTS");
	char err[2048], canon[1024];
	int r;

	if (!spec || !*spec)
		return;
	r = emunic_fault_parse(spec, &j->faults, err, sizeof(err));
	if (r) {
		if (!err[0])
			snprintf(err, sizeof(err), "cannot read the fault spec: %s", strerror(-r));
		fprintf(stderr, "emunic-run: %s\n", err);
		if (!from_option)
			say("(the spec is $EMUNIC_FAULTS, from the environment)");
		exit(EXIT_USAGE);
	}
	if (j->verbose)
		say("fault injection: %s", emunic_fault_format(j->faults, canon, sizeof(canon)) ? spec : canon);
}

static bool has_loss(const struct job *j)
{
	uint32_t p;
	uint64_t d, jt;

	return j->faults && !emunic_fault_loss(j->faults, &p, &d, &jt);
}

/* The device the ranks open: -d or $EMUNIC_DEVICE, else, as the library
 * picks it, the first device with an ACTIVE port. */
static void pick_device(struct job *j)
{
	if (j->device) {
		snprintf(j->hwdev, sizeof(j->hwdev), "%s", j->device);
		return;
	}
	if (emunic_vdev_pick(j->hwdev, sizeof(j->hwdev))) {
		say("no RDMA device has an ACTIVE port (check `rdma link`): %s needs the job's device",
		    j->counters ? "--counters" : "the loss rule");
		exit(EXIT_LAUNCH);
	}
}

/* The network interface under an RDMA device (rxe: the netdev it was
 * added on; a NIC: its PCI function's only interface). */
static int netdev_of(const char *dev, char *out, size_t len)
{
	char path[512], line[64];
	struct dirent *e;
	int found = 0;
	FILE *f;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", dev);
	f = fopen(path, "r");
	if (f) {
		bool ok = fgets(line, sizeof(line), f) != NULL;

		fclose(f);
		if (ok)
			line[strcspn(line, "\n")] = '\0';
		if (ok && line[0] && !strchr(line, '/')) {
			snprintf(out, len, "%s", line);
			return 0;
		}
	}
	out[0] = '\0';
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/net", dev);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);

		if (e->d_name[0] != '.' && found++ == 0 && l < len)
			memcpy(out, e->d_name, l + 1);
	}
	closedir(d);
	return found == 1 && out[0] ? 0 : -1;
}

/* Runs tc (PATH, then /usr/sbin, /sbin) with argv; 0, or -1 with what it
 * said (or why it could not run) in out, on one line. */
static int run_tc(const struct job *j, char *const argv[], char *out, size_t outlen)
{
	char path[PATH_MAX], chunk[256];
	size_t n = 0;
	int pfd[2], st = 0;
	ssize_t k;
	pid_t pid;

	out[0] = '\0';
	if (find_program("tc", path, sizeof(path))) {
		if (!access("/usr/sbin/tc", X_OK)) {
			snprintf(path, sizeof(path), "/usr/sbin/tc");
		} else if (!access("/sbin/tc", X_OK)) {
			snprintf(path, sizeof(path), "/sbin/tc");
		} else {
			snprintf(out, outlen, "tc not found in PATH, /usr/sbin or /sbin (install iproute2)");
			return -1;
		}
	}
	if (pipe2(pfd, O_CLOEXEC)) {
		snprintf(out, outlen, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(out, outlen, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &j->oldmask, NULL);
		dup2(pfd[1], STDOUT_FILENO);
		dup2(pfd[1], STDERR_FILENO);
		execv(path, argv);
		fprintf(stderr, "cannot execute %s: %s", path, strerror(errno));
		_exit(EXIT_NOEXEC);
	}
	close(pfd[1]);
	while ((k = read(pfd[0], chunk, sizeof(chunk))) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (ssize_t i = 0; i < k && n + 1 < outlen; i++)
			out[n++] = chunk[i] == '\n' ? ' ' : chunk[i];
	}
	close(pfd[0]);
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!st)
		return 0;
	if (n + 1 < outlen) {
		char how[128];

		describe(st, how, sizeof(how));
		snprintf(out + n, outlen - n, "%s(tc %s)", n ? " " : "", how);
	}
	return -1;
}

/* "1.5" for 15000 ppm: a percentage as netem takes it. */
static void ppm_percent(uint32_t ppm, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%u.%04u", ppm / 10000, ppm % 10000);

	while (n > 0 && n < len && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && n < len && buf[n - 1] == '.')
		buf[--n] = '\0';
}

static void netem_start(struct job *j)
{
	char ifn[64], pct[32], dl[32], jt[32], loss[40], cmd[256], err[512];
	char *argv[16];
	uint32_t ppm;
	uint64_t delay, jitter;
	size_t off = 0;
	int a = 0;

	if (!j->faults || emunic_fault_loss(j->faults, &ppm, &delay, &jitter))
		return;
	if (netdev_of(j->hwdev, ifn, sizeof(ifn))) {
		say("the loss rule needs the network interface under %s, but neither "
		    "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0 nor /sys/class/infiniband/%s/device/net/ "
		    "names one", j->hwdev, j->hwdev, j->hwdev);
		exit(EXIT_LAUNCH);
	}
	ppm_percent(ppm, pct, sizeof(pct));
	snprintf(loss, sizeof(loss), "%s%%", pct);
	snprintf(dl, sizeof(dl), "%lluus", (unsigned long long)delay);
	snprintf(jt, sizeof(jt), "%lluus", (unsigned long long)jitter);
	argv[a++] = "tc";
	argv[a++] = "qdisc";
	argv[a++] = "replace";
	argv[a++] = "dev";
	argv[a++] = ifn;
	argv[a++] = "root";
	argv[a++] = "netem";
	argv[a++] = "loss";
	argv[a++] = loss;
	if (delay || jitter) {
		argv[a++] = "delay";
		argv[a++] = dl;
		if (jitter)
			argv[a++] = jt;
	}
	argv[a] = NULL;
	for (int i = 0; i < a && off < sizeof(cmd); i++)
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, "%s%s", i ? " " : "", argv[i]);
	if (run_tc(j, argv, err, sizeof(err))) {
		say("cannot set up netem on %s (device %s) for the loss rule: '%s' failed: %s", ifn, j->hwdev, cmd,
		    err);
		exit(EXIT_LAUNCH);
	}
	snprintf(j->netem_if, sizeof(j->netem_if), "%s", ifn);
	say("netem on %s: loss %s%s%s%s%s%s", ifn, loss, delay || jitter ? " delay " : "", delay || jitter ? dl : "",
	    jitter ? " jitter " : "", jitter ? jt : "",
	    j->nodes == 1 ? " (one node: rxe loopback between its ranks bypasses it; loss needs --nodes)" : "");
}

static void netem_stop(struct job *j)
{
	char *argv[] = { "tc", "qdisc", "del", "dev", j->netem_if, "root", NULL };
	char err[512];

	if (run_tc(j, argv, err, sizeof(err)))
		say("could not remove netem from %s: %s; remove it with 'tc qdisc del dev %s root'", j->netem_if, err,
		    j->netem_if);
	else if (j->verbose)
		say("netem on %s removed", j->netem_if);
	j->netem_if[0] = '\0';
}

static void counters_start(struct job *j)
{
	int n = emunic_hw_counters(j->hwdev, j->hw_before, MAX_HW_COUNTERS);

	if (n < 0) {
		say("%s has no hw counters (/sys/class/infiniband/%s/ports/1/hw_counters): nothing for --counters "
		    "to show", j->hwdev, j->hwdev);
		return;
	}
	j->hw_n = n;
}

static void counters_report(struct job *j)
{
	struct emunic_hw_counter after[MAX_HW_COUNTERS];
	char line[MAX_HW_COUNTERS * 80];
	size_t off = 0;
	int n;

	if (j->hw_n < 0)
		return;
	n = emunic_hw_counters(j->hwdev, after, MAX_HW_COUNTERS);
	if (n < 0) {
		say("cannot read the hw counters of %s after the job", j->hwdev);
		return;
	}
	for (int i = 0; i < n; i++) {
		uint64_t before = 0;

		for (int b = 0; b < j->hw_n; b++)
			if (!strcmp(j->hw_before[b].name, after[i].name))
				before = j->hw_before[b].value;
		if (after[i].value != before && off < sizeof(line))
			off += (size_t)snprintf(line + off, sizeof(line) - off, "%s%s %+lld", off ? ", " : "",
						after[i].name, (long long)(after[i].value - before));
	}
	fprintf(stderr, "emunic-run: hw counters of %s (port 1), change over the job: %s\n", j->hwdev,
		off ? line : "no change");
}

/* Every way out of the launcher once ranks may run ends here (atexit):
 * fail() and the end of main exit; the ranks are gone by then. */
static struct job *cleanup_job;

static void cleanup(void)
{
	struct job *j = cleanup_job;

	if (!j || j->cleaned || getpid() != j->launcher)
		return;
	j->cleaned = true;
	if (j->counters)
		counters_report(j);
	if (j->netem_if[0])
		netem_stop(j);
}

static void start_rank(struct job *j, int r, const char *path, sigset_t *oldmask)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	char v[32];

	if (pid < 0)
		fail(j, EXIT_LAUNCH, "fork for rank %d failed: %s", r, strerror(errno));
	if (pid > 0) {
		j->rank[r].pid = pid;
		return;
	}
	/* Die with the launcher: no orphaned rank spins on a core. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(EXIT_LAUNCH);
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	snprintf(v, sizeof(v), "%d", r);
	setenv("EMUNIC_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", j->n);
	setenv("EMUNIC_SIZE", v, 1);
	snprintf(v, sizeof(v), "%d", r - j->first);
	setenv("EMUNIC_LOCAL_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", j->count);
	setenv("EMUNIC_LOCAL_SIZE", v, 1);
	setenv("EMUNIC_BOOT_ADDR", j->addr, 1);
	if (j->device)
		setenv("EMUNIC_DEVICE", j->device, 1);
	execv(path, j->argv);
	fprintf(stderr, "emunic-run: rank %d: cannot execute %s: %s\n", r, path, strerror(errno));
	_exit(EXIT_NOEXEC);
}

static int parse_int(const char *s, int lo, int hi, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		say("%s must be a whole number from %d to %d, not '%s' (see emunic-run --help)", what, lo, hi, s);
		exit(EXIT_USAGE);
	}
	return (int)v;
}

static void parse_args(struct job *j, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "np", required_argument, NULL, 'n' },
		{ "device", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 't' },
		{ "nodes", required_argument, NULL, 'K' },
		{ "node", required_argument, NULL, 'I' },
		{ "server", required_argument, NULL, 'S' },
		{ "faults", required_argument, NULL, 'f' },
		{ "trace", required_argument, NULL, 'T' },
		{ "counters", no_argument, NULL, 'c' },
		{ "keep-going", no_argument, NULL, 'k' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *faults = NULL;
	int c;

	j->n = -1;
	j->nodes = 1;
	opterr = 0;	/* one message of ours, not getopt's and ours */
	while ((c = getopt_long(argc, argv, "+:n:d:t:f:ckvh", opts, NULL)) != -1) {
		switch (c) {
		case 'n': j->n = parse_int(optarg, 1, MAX_RANKS, "-n"); break;
		case 'd': j->device = optarg; break;
		case 't': j->timeout_s = parse_int(optarg, 1, INT_MAX, "--timeout"); break;
		case 'K': j->nodes = parse_int(optarg, 1, 64, "--nodes"); break;
		case 'I': j->node = parse_int(optarg, 0, 63, "--node"); break;
		case 'S': j->server = optarg; break;
		case 'f': faults = optarg; break;
		case 'T': setenv("EMUNIC_TRACE", optarg, 1); break;	/* the ranks inherit it */
		case 'c': j->counters = true; break;
		case 'k': j->keep_going = true; break;
		case 'v': j->verbose = true; break;
		case 'h': fputs(usage_text, stdout); exit(0);
		case ':': say("option '%s' needs a value (see emunic-run --help)", argv[optind - 1]); exit(EXIT_USAGE);
		default: say("unknown option '%s' (see emunic-run --help)", argv[optind - 1]); exit(EXIT_USAGE);
		}
	}
	if (j->n < 0) {
		say("missing -n N: how many ranks to start (see emunic-run --help)");
		exit(EXIT_USAGE);
	}
	if (optind >= argc) {
		say("missing PROGRAM: what each rank runs (see emunic-run --help)");
		exit(EXIT_USAGE);
	}
	if (j->nodes > 1 && (!j->server || j->node >= j->nodes || j->n < j->nodes)) {
		say("--nodes %d needs --server ADDR:PORT, --node 0..%d and -n >= %d", j->nodes, j->nodes - 1, j->nodes);
		exit(EXIT_USAGE);
	}
	j->argv = argv + optind;
	if (faults)
		setenv("EMUNIC_FAULTS", faults, 1);	/* the ranks inherit it */
	check_faults(j, faults != NULL);
	if (!j->device)
		j->device = getenv("EMUNIC_DEVICE");
	if (j->device && !*j->device)
		j->device = NULL;
	j->first = (int)((long)j->node * j->n / j->nodes);
	j->count = (int)((long)(j->node + 1) * j->n / j->nodes) - j->first;
}

static void setup_channels(struct job *j)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	j->sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	j->lfd = -1;
	j->ctl = -1;
	for (int k = 0; k < 64; k++)
		j->node_fd[k] = -1;
	if (j->node == 0) {
		j->lfd = emunic_wire_listen(j->server ? j->server : "127.0.0.1", j->addr, sizeof(j->addr));
		if (j->lfd < 0) {
			say("cannot listen for the bootstrap on %s: %s", j->server ? j->server : "127.0.0.1",
			    strerror(-j->lfd));
			exit(EXIT_LAUNCH);
		}
	} else {
		snprintf(j->addr, sizeof(j->addr), "%s", j->server);
		j->ctl = emunic_wire_connect(j->server, 60 * 1000);
		if (j->ctl < 0 || emunic_wire_send(j->ctl, EMUNIC_BOOT_NODE_HELLO, j->node, NULL, 0)) {
			say("node %d: cannot reach node 0's emunic-run at %s", j->node, j->server);
			exit(EXIT_LAUNCH);
		}
	}
}

static bool job_done(const struct job *j)
{
	if (any_local_alive(j))
		return false;
	for (int k = 1; k < j->nodes && j->node == 0; k++)
		if (!j->node_done[k])
			return false;
	return true;
}

/* Node > 0 after its ranks finished: wait for node 0 to end the job. */
static int follow_server(struct job *j)
{
	struct emunic_boot_msg m;
	char why[512] = "";

	if (j->first_fail) {	/* --keep-going: tell node 0 which status the job ends with */
		char done[300];

		snprintf(done, sizeof(done), "%d %s", j->first_fail, j->first_why);
		emunic_wire_send(j->ctl, EMUNIC_BOOT_NODE_DONE, j->node, done, strlen(done) + 1);
	} else {
		emunic_wire_send(j->ctl, EMUNIC_BOOT_NODE_DONE, j->node, NULL, 0);
	}
	if (emunic_wire_recv_hdr(j->ctl, &m, -1))
		return 0;	/* node 0 closed: the job ended well */
	if (m.len)
		emunic_wire_recv_body(j->ctl, why, m.len < sizeof(why) ? m.len : sizeof(why) - 1, 5000);
	say("node 0 aborted the job: %s", why);
	return EXIT_LAUNCH;
}

static void event_loop(struct job *j)
{
	struct pollfd *p = j->pfd = calloc((size_t)j->n + 70, sizeof(*p));
	int *who = j->who = calloc((size_t)j->n + 70, sizeof(int));

	if (!p || !who)
		fail(j, EXIT_LAUNCH, "out of memory");
	while (!job_done(j)) {
		int np = 0, wait_ms = 1000;

		p[np] = (struct pollfd){ .fd = j->sfd, .events = POLLIN }; who[np++] = -1;
		if (j->lfd >= 0) { p[np] = (struct pollfd){ .fd = j->lfd, .events = POLLIN }; who[np++] = -2; }
		if (j->ctl >= 0) { p[np] = (struct pollfd){ .fd = j->ctl, .events = POLLIN }; who[np++] = -3; }
		for (int k = 1; k < j->nodes; k++)
			if (j->node_fd[k] >= 0) {
				p[np] = (struct pollfd){ .fd = j->node_fd[k], .events = POLLIN };
				who[np++] = -100 - k;
			}
		for (int r = 0; r < j->n; r++)
			if (j->rank[r].fd >= 0) {
				p[np] = (struct pollfd){ .fd = j->rank[r].fd, .events = POLLIN };
				who[np++] = r;
			}
		if (poll(p, (nfds_t)np, wait_ms) < 0 && errno != EINTR)
			fail(j, EXIT_LAUNCH, "poll: %s", strerror(errno));
		for (int i = 0; i < np; i++) {
			if (!p[i].revents)
				continue;
			if (who[i] == -1) {
				struct signalfd_siginfo si;

				if (read(j->sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo != SIGCHLD)
					fail(j, 128 + (int)si.ssi_signo, "got signal %d (%s)", (int)si.ssi_signo,
					     strsignal((int)si.ssi_signo));
				reap(j, false);
			} else if (who[i] == -2) {
				on_accept(j);
			} else if (who[i] == -3) {
				fail(j, EXIT_LAUNCH, "node 0 aborted the job or went away");
			} else if (who[i] <= -100) {
				on_node_msg(j, -100 - who[i]);
			} else if (j->rank[who[i]].fd >= 0) {
				on_rank_msg(j, who[i]);
			}
		}
		reap(j, false);
		if (j->timeout_s && elapsed(j) > j->timeout_s) {
			char alive[256] = "";
			size_t off = 0;

			for (int r = j->first; r < j->first + j->count; r++)
				if (!j->rank[r].exited && off < sizeof(alive))
					off += (size_t)snprintf(alive + off, sizeof(alive) - off, " %d", r);
			fail(j, EXIT_TIMEOUT, "timeout after %d s; ranks still running:%s", j->timeout_s, alive);
		}
	}
	free(p);
	free(who);
	j->pfd = NULL;
	j->who = NULL;
}

int main(int argc, char **argv)
{
	static struct job j;	/* static: cleanup() reads it after main returns */
	sigset_t mask, old;
	char path[PATH_MAX];
	int r;

	clock_gettime(CLOCK_MONOTONIC, &j.start);
	j.launcher = getpid();
	j.hw_n = -1;
	parse_args(&j, argc, argv);
	r = find_program(j.argv[0], path, sizeof(path));
	if (r) {
		say("'%s': %s", j.argv[0], r == EXIT_NOTFOUND ? "program not found (give a path, or put it in PATH)"
							       : "program is not executable");
		return r;
	}
	check_device(j.device);
	if (j.counters || has_loss(&j))
		pick_device(&j);
	j.rank = calloc((size_t)j.n, sizeof(*j.rank));
	if (!j.rank)
		return EXIT_LAUNCH;
	for (r = 0; r < j.n; r++)
		j.rank[r].fd = -1;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &old);
	j.oldmask = old;
	setup_channels(&j);
	/* From here every exit (fail(), a signal or timeout through fail(), the
	 * end of main) reports the counters and takes netem off. */
	cleanup_job = &j;
	atexit(cleanup);
	netem_start(&j);
	if (j.counters)
		counters_start(&j);
	for (r = j.first; r < j.first + j.count; r++)
		start_rank(&j, r, path, &old);
	if (j.verbose)
		say("node %d/%d: started ranks %d..%d of %d (%s), bootstrap at %s", j.node, j.nodes, j.first,
		    j.first + j.count - 1, j.n, path, j.addr);
	event_loop(&j);
	if (j.n > 1 && getenv("EMUNIC_TRACE") && *getenv("EMUNIC_TRACE"))	/* the ranks' parts, into one */
		emunic_trace_merge(getenv("EMUNIC_TRACE"), j.first, j.count);
	if (j.first_fail)
		say("%s ended after %.1f s; exiting with status %d, the first failure's: %s",
		    j.node > 0 ? "this node's ranks" : "the job", elapsed(&j), j.first_fail, j.first_why);
	else if (j.verbose)
		say("all %d local rank(s) exited 0 after %.1f s", j.count, elapsed(&j));
	r = j.ctl >= 0 ? follow_server(&j) : 0;
	return r ? r : j.first_fail;
}
