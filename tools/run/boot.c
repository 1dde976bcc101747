/* SPDX-License-Identifier: MIT */
/* The bootstrap server (node 0): every rank's channel, the exchanges
 * (allgathers) over them, and what a rank's exit means for them. */
#include "run.h"

#include "emunic/boot_wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Node 0 listens where --server says (127.0.0.1 on one node). */
void boot_listen(struct job *j)
{
	j->lfd = emunic_wire_listen(j->server ? j->server : "127.0.0.1", j->addr, sizeof(j->addr));
	if (j->lfd < 0) {
		say("cannot listen for the bootstrap on %s: %s", j->server ? j->server : "127.0.0.1",
		    strerror(-j->lfd));
		exit(EXIT_LAUNCH);
	}
}

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
	if (!j->keep_going) {
		j->rank_failed = true;
		fail(j, s->code, "rank %d (pid %d) %s after %.1f s", r, (int)s->pid, how, s->t_exit);
	}
	say("rank %d (pid %d) %s after %.1f s; keeping the others (--keep-going)", r, (int)s->pid, how, s->t_exit);
	if (!j->first_fail) {
		j->first_fail = s->code;
		snprintf(j->first_why, sizeof(j->first_why), "rank %d (pid %d) %s after %.1f s", r, (int)s->pid,
			 how, s->t_exit);
	}
}

static void rank_gone(struct job *j, int r);

/* Collects exited children; the first failure ends the job (unless
 * --keep-going). */
void reap(struct job *j)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		int r = reap_one(j, pid, st);
		struct rank_slot *s;

		if (r < 0)
			continue;
		s = &j->rank[r];
		/* Read what it said before exiting (FINALIZE) before judging;
		 * if that finds its channel closed mid-exchange, rank_gone
		 * judges its exit status first. */
		while (s->fd >= 0 && poll(&(struct pollfd){ .fd = s->fd, .events = POLLIN }, 1, 0) > 0)
			on_rank_msg(j, r);
		rank_exit(j, r);
		rank_gone(j, r);
	}
}

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
		reap(j);
	}
	if (local && s->exited)
		rank_exit(j, r);
	/* Likewise a remote rank: its node's launcher says why, just after
	 * (up to 10 s on two loaded guests; a launcher that is gone closes
	 * the link, which ends the poll at once).  Under --keep-going it
	 * says nothing till the node is done, and this poll serves no other
	 * rank meanwhile: 2 s there. */
	if (!local) {
		int k = node_of(j, r);

		if (j->node_fd[k] >= 0 &&
		    poll(&(struct pollfd){ .fd = j->node_fd[k], .events = POLLIN }, 1,
			 j->keep_going ? 2000 : 10000) > 0)
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

void on_rank_msg(struct job *j, int r)
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

/* A new connection: a rank's channel, or another node's control link. */
void on_accept(struct job *j)
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
