/* SPDX-License-Identifier: MIT */
/* Ending the job: fail() names why, tells the other nodes, kills this
 * node's ranks and exits (cleanup() in main.c runs at exit). */
#include "run.h"

#include "emunic/boot_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

bool any_local_alive(const struct job *j)
{
	for (int r = j->first; r < j->first + j->count; r++)
		if (j->rank[r].pid > 0 && !j->rank[r].exited)
			return true;
	return false;
}

/* Records an exited child: the local rank it was, or -1. */
int reap_one(struct job *j, pid_t pid, int st)
{
	for (int r = j->first; r < j->first + j->count; r++) {
		struct rank_slot *s = &j->rank[r];

		if (s->pid != pid)
			continue;
		s->exited = true;
		s->status = st;
		s->t_exit = elapsed(j);
		return r;
	}
	return -1;
}

/* Collects exited children without judging them: the job is ending. */
static void reap_quiet(struct job *j)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		reap_one(j, pid, st);
}

/* Waits up to n x 20 ms for the local ranks to end; true if they did. */
static bool wait_locals(struct job *j, int n)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < n && any_local_alive(j); i++) {
		nanosleep(&ts, NULL);
		reap_quiet(j);
	}
	return !any_local_alive(j);
}

static void kill_locals(struct job *j)
{
	const char *trace = getenv("EMUNIC_TRACE");

	/* A traced job that a rank's failure ends: a rank writes its part as
	 * it exits, and SIGTERM would end it without.  The others usually
	 * fail on their own within milliseconds (their connections break);
	 * one waiting in the bootstrap is told by its channel closing.  They
	 * get 10 s to (2 s could run out on a loaded machine), and the
	 * failed job's trace is whole. */
	if (j->rank_failed && trace && *trace) {
		for (int r = j->first; r < j->first + j->count; r++)
			if (j->rank[r].fd >= 0)
				shutdown(j->rank[r].fd, SHUT_RDWR);
		if (wait_locals(j, 500))
			return;
	}
	for (int r = j->first; r < j->first + j->count; r++)
		if (j->rank[r].pid > 0 && !j->rank[r].exited)
			kill(j->rank[r].pid, SIGTERM);
	wait_locals(j, 100);	/* 2 s grace */
	for (int r = j->first; r < j->first + j->count; r++)
		if (j->rank[r].pid > 0 && !j->rank[r].exited) {
			kill(j->rank[r].pid, SIGKILL);
			waitpid(j->rank[r].pid, NULL, 0);
			j->rank[r].exited = true;
		}
}

void fail(struct job *j, int code, const char *fmt, ...)
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
