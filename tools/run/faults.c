/* SPDX-License-Identifier: MIT */
/* Faults: the spec is checked before anything starts; a loss rule puts
 * netem on the interface under the job's device, taken off at exit. */
#include "run.h"

#include "emunic/verbs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A malformed spec is bad usage: the parser's message (it names the token,
 * then shows the spec with a caret under it) and exit 2, before anything. */
void check_faults(struct job *j, bool from_option)
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

bool has_loss(const struct job *j)
{
	uint32_t p;
	uint64_t d, jt;

	return j->faults && !emunic_fault_loss(j->faults, &p, &d, &jt);
}

/* The device the ranks open: -d or $EMUNIC_DEVICE, else, as the library
 * picks it, the first device with an ACTIVE port. */
void pick_device(struct job *j)
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

void netem_start(struct job *j)
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

void netem_stop(struct job *j)
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
