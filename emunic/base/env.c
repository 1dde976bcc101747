/* SPDX-License-Identifier: MIT */
/* Integers from the environment, checked: the bootstrap's and the local ranks'. */
#include "emunic/base/base.h"

#include <errno.h>
#include <stdlib.h>

int emunic_env_int(const char *name, int lo, int hi, int *out)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return -ENOENT;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}
