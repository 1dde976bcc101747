/* SPDX-License-Identifier: MIT */
/* emunic-run's output: its messages, how a rank ended, and how the device's
 * hardware counters moved over the job (--counters). */
#include "run.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

void say(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "emunic-run: %s\n", buf);
}

double elapsed(const struct job *j)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - j->start.tv_sec) + (double)(t.tv_nsec - j->start.tv_nsec) / 1e9;
}

int status_code(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void describe(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
	else
		snprintf(buf, len, "was killed by signal %d (%s)%s", WTERMSIG(st), strsignal(WTERMSIG(st)),
			 WCOREDUMP(st) ? ", core dumped" : "");
}

void counters_start(struct job *j)
{
	int n = emunic_hw_counters(j->hwdev, j->hw_before, MAX_HW_COUNTERS);

	if (n < 0) {
		say("%s has no hw counters (/sys/class/infiniband/%s/ports/1/hw_counters): nothing for --counters "
		    "to show", j->hwdev, j->hwdev);
		return;
	}
	j->hw_n = n;
}

void counters_report(struct job *j)
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
