/* SPDX-License-Identifier: MIT */
/*
 * Joining the ranks' timeline files (OUT.rank0, OUT.rank1, ...) into one
 * trace-event document OUT, for the launcher once its ranks have exited.
 * Each fragment is one event a line between a header line and a footer
 * line (timeline_json.c), so joining is copying lines; the ranks' clocks
 * are one (CLOCK_MONOTONIC on one machine), so nothing is shifted.
 */
#include "emunic/base/timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADER "{\"traceEvents\":[\n"

static void frag_path(char *s, size_t len, const char *parts, int rank)
{
	snprintf(s, len, "%s.rank%d", parts, rank);
}

/* Copies fragment `path`'s events to o; *first: no event written yet. */
static int copy(FILE *o, const char *path, bool *first, unsigned long long *dropped)
{
	FILE *f = fopen(path, "re");
	char *ln = NULL;
	size_t cap = 0;
	ssize_t n;
	int r = 0;

	if (!f)
		return -errno;
	if (getline(&ln, &cap, f) <= 0) {
		r = -ENODATA;	/* opened at its first device open, never written: killed */
		goto out;
	}
	if (strcmp(ln, HEADER)) {
		r = -EPROTO;	/* not a timeline file of ours (or cut short) */
		goto out;
	}
	r = -EPROTO;
	while ((n = getline(&ln, &cap, f)) > 0) {
		const char *d;

		if (ln[n - 1] != '\n')
			break;		/* a line cut short (a full disk, a kill): not copied */
		if (ln[0] == ']') {	/* the footer */
			if ((d = strstr(ln, "\"dropped\":\"")))
				*dropped += strtoull(d + 11, NULL, 10);
			r = 0;
			break;
		}
		fputc(*first ? ' ' : ',', o);
		fwrite(ln + 1, 1, (size_t)n - 1, o);
		*first = false;
	}
out:
	free(ln);
	fclose(f);
	return r;
}

int emunic_trace_merge(const char *parts, const char *out, int first, int count)
{
	char path[4096];
	unsigned long long dropped = 0;
	bool none = true, *ok;
	int merged = 0, r;
	FILE *o;

	for (int k = first; k < first + count && none; k++) {
		frag_path(path, sizeof(path), parts, k);
		none = access(path, R_OK) != 0;
	}
	if (none) {
		fprintf(stderr, "emunic: trace: no rank wrote its part of %s (%s.rank%d ...): nothing to merge\n", out,
			parts, first);
		return -ENOENT;
	}
	ok = calloc((size_t)count, sizeof(*ok));
	o = ok ? fopen(out, "we") : NULL;
	if (!o) {
		r = ok ? -errno : -ENOMEM;
		fprintf(stderr, "emunic: trace: cannot write %s: %s; the ranks' parts stay in %s.rankN\n", out,
			strerror(-r), parts);
		free(ok);
		return r;
	}
	fputs(HEADER, o);
	none = true;
	for (int k = first; k < first + count; k++) {
		frag_path(path, sizeof(path), parts, k);
		r = copy(o, path, &none, &dropped);
		if (r) {
			fprintf(stderr, "emunic: trace: rank %d's part %s: %s; %s has the other ranks'%s\n", k, path,
				r == -EPROTO ? "not a whole trace file" :
				r == -ENODATA ? "empty (the rank ended without writing it: killed?)" : strerror(-r),
				out, r == -EPROTO ? " and its events up to where it ends" : "");
			continue;
		}
		ok[k - first] = true;
		merged++;
	}
	fprintf(o, "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"emunic_ranks\":\"%d\",\"dropped\":\"%llu\"}}\n",
		merged, dropped);
	if (fclose(o)) {
		r = -errno;
		fprintf(stderr, "emunic: trace: writing %s failed: %s; the ranks' parts stay in %s.rankN\n", out,
			strerror(-r), parts);
		free(ok);
		return r;
	}
	for (int k = first; k < first + count; k++) {
		frag_path(path, sizeof(path), parts, k);
		if (ok[k - first])
			unlink(path);	/* in OUT now */
	}
	free(ok);
	return merged;
}
