/* SPDX-License-Identifier: MIT */
/* The verbs port's hardware counters, as the kernel driver exports them
 * (rxe counts RNR NAKs and retries there: what a fault run did on the wire). */
#include "emunic/fault/fault.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct emunic_hw_counter *)a)->name, ((const struct emunic_hw_counter *)b)->name);
}

int emunic_hw_counters(const char *name, struct emunic_hw_counter *out, int max)
{
	char dir[256], path[512];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (!name || !*name || strchr(name, '/') || !out || max < 0)
		return -EINVAL;
	snprintf(dir, sizeof(dir), "/sys/class/infiniband/%s/ports/1/hw_counters", name);
	d = opendir(dir);
	if (!d)
		return -ENOENT;
	while ((e = readdir(d)) && n < max) {
		unsigned long long v;
		FILE *f;

		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(out[n].name) || !strcmp(e->d_name, "lifespan"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &v) == 1) {
			strcpy(out[n].name, e->d_name);
			out[n++].value = v;
		}
		fclose(f);
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof(*out), by_name);
	return n;
}
