/* SPDX-License-Identifier: MIT */
/* Launching: finding PROGRAM, checking there is an RDMA device, and forking
 * this node's ranks with their environment. */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* PROGRAM's path: 0, EXIT_NOTFOUND or EXIT_NOEXEC (the exit statuses). */
int find_program(const char *prog, char *path, size_t len)
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

static int not_dot(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

/* The kernel's RDMA devices, from sysfs (names sorted): the ranks open
 * theirs through verbs anyway, and ibv_get_device_list() here loaded every
 * provider library and ran a netlink dump, ~0.3 s of each launch under TCG.
 * A device verbs cannot open (no provider, no ib_uverbs) passes here and
 * fails in each rank's emunic_dev_open, which names it. */
void check_device(const char *want)
{
	char names[512] = "";
	size_t off = 0;
	bool found = false;
	struct dirent **e = NULL;
	int n = scandir("/sys/class/infiniband", &e, not_dot, alphasort);

	for (int i = 0; i < n; i++) {
		found |= want && !strcmp(e[i]->d_name, want);
		if (off < sizeof(names))
			off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "", e[i]->d_name);
		free(e[i]);
	}
	free(e);
	if (n <= 0) {
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

/* The signals the launcher takes through its signalfd (blocked, so that
 * none is lost before it reads them); children get the old mask back. */
void job_signals(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGCHLD);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGHUP);
}

void start_rank(struct job *j, int r, const char *path, sigset_t *oldmask)
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
