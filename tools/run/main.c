/* SPDX-License-Identifier: MIT */
/* emunic-run's order of things (see run.h): check, launch, serve the
 * bootstrap until every rank has ended, and clean up on every way out. */
#include "run.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

/* Every way out of the launcher once ranks may run ends here (atexit):
 * fail() and the end of main exit; the ranks are gone by then. */
static struct job *cleanup_job;

/* --trace: the ranks' parts, into one file, however the job ended (a
 * failed job's trace is the one most wanted).  Across nodes each node joins
 * its own ranks into FILE.nodeI: with a shared file system one FILE would
 * be written by every node; `emunic-run -n N --join-trace` joins the rest. */
static const char *trace_parts(const struct job *j)
{
	const char *p = getenv("EMUNIC_TRACE");

	return j->n > 1 && p && *p ? p : NULL;
}

static void trace_join(const struct job *j)
{
	const char *p = trace_parts(j);
	char out[PATH_MAX];

	if (!p)
		return;
	if (j->nodes > 1)
		snprintf(out, sizeof(out), "%s.node%d", p, j->node);
	else
		snprintf(out, sizeof(out), "%s", p);
	emunic_trace_merge(p, out, j->first, j->count);
}

/* A part a rank of an earlier job left would be joined as this job's. */
static void trace_clear(const struct job *j)
{
	const char *p = trace_parts(j);
	char part[PATH_MAX];

	for (int r = j->first; p && r < j->first + j->count; r++) {
		snprintf(part, sizeof(part), "%s.rank%d", p, r);
		unlink(part);
	}
}

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
	trace_join(j);
}

/* The signalfd, and the bootstrap: node 0 listens, the others connect. */
static void setup_channels(struct job *j)
{
	sigset_t mask;

	job_signals(&mask);
	j->sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	j->lfd = -1;
	j->ctl = -1;
	for (int k = 0; k < MAX_NODES; k++)
		j->node_fd[k] = -1;
	if (j->node == 0)
		boot_listen(j);
	else
		node_connect(j);
}

static bool job_done(const struct job *j)
{
	return !any_local_alive(j) && nodes_done(j);
}

static void check_timeout(struct job *j)
{
	char alive[256] = "";
	size_t off = 0;

	if (!j->timeout_s || elapsed(j) <= j->timeout_s)
		return;
	for (int r = j->first; r < j->first + j->count; r++)
		if (!j->rank[r].exited && off < sizeof(alive))
			off += (size_t)snprintf(alive + off, sizeof(alive) - off, " %d", r);
	fail(j, EXIT_TIMEOUT, "timeout after %d s; ranks still running:%s", j->timeout_s, alive);
}

/* who[] tags each polled fd: these, a node's link (-100 - k) or a rank. */
enum { WHO_SIGNAL = -1, WHO_LISTEN = -2, WHO_CTL = -3, WHO_NODE = -100 };

static void event_loop(struct job *j)
{
	struct pollfd *p = j->pfd = calloc((size_t)j->n + 70, sizeof(*p));
	int *who = j->who = calloc((size_t)j->n + 70, sizeof(int));

	if (!p || !who)
		fail(j, EXIT_LAUNCH, "out of memory");
	while (!job_done(j)) {
		int np = 0, wait_ms = 1000;

		p[np] = (struct pollfd){ .fd = j->sfd, .events = POLLIN }; who[np++] = WHO_SIGNAL;
		if (j->lfd >= 0) { p[np] = (struct pollfd){ .fd = j->lfd, .events = POLLIN }; who[np++] = WHO_LISTEN; }
		if (j->ctl >= 0) { p[np] = (struct pollfd){ .fd = j->ctl, .events = POLLIN }; who[np++] = WHO_CTL; }
		for (int k = 1; k < j->nodes; k++)
			if (j->node_fd[k] >= 0) {
				p[np] = (struct pollfd){ .fd = j->node_fd[k], .events = POLLIN };
				who[np++] = WHO_NODE - k;
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
			if (who[i] == WHO_SIGNAL) {
				struct signalfd_siginfo si;

				if (read(j->sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo != SIGCHLD)
					fail(j, 128 + (int)si.ssi_signo, "got signal %d (%s)", (int)si.ssi_signo,
					     strsignal((int)si.ssi_signo));
				reap(j);
			} else if (who[i] == WHO_LISTEN) {
				on_accept(j);
			} else if (who[i] == WHO_CTL) {
				fail(j, EXIT_LAUNCH, "node 0 aborted the job or went away");
			} else if (who[i] <= WHO_NODE) {
				on_node_msg(j, WHO_NODE - who[i]);
			} else if (j->rank[who[i]].fd >= 0) {
				on_rank_msg(j, who[i]);
			}
		}
		reap(j);
		check_timeout(j);
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
	if (j.join_trace)	/* what ranks started elsewhere left */
		return emunic_trace_merge(j.join_trace, j.join_trace, 0, j.n) == j.n ? 0 : EXIT_LAUNCH;
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
	job_signals(&mask);
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
	trace_clear(&j);
	for (r = j.first; r < j.first + j.count; r++)
		start_rank(&j, r, path, &old);
	if (j.verbose)
		say("node %d/%d: started ranks %d..%d of %d (%s), bootstrap at %s", j.node, j.nodes, j.first,
		    j.first + j.count - 1, j.n, path, j.addr);
	event_loop(&j);
	if (j.first_fail)
		say("%s ended after %.1f s; exiting with status %d, the first failure's: %s",
		    j.node > 0 ? "this node's ranks" : "the job", elapsed(&j), j.first_fail, j.first_why);
	else if (j.verbose)
		say("all %d local rank(s) exited 0 after %.1f s", j.count, elapsed(&j));
	r = j.ctl >= 0 ? follow_server(&j) : 0;
	return r ? r : j.first_fail;
}
