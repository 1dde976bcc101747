/* SPDX-License-Identifier: MIT */
/* emunic-info's lines: "key:" padded so that values line up, as
 * ibv_devinfo's do. */
#include "info.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define KEY_WIDTH	27	/* "key:" is padded to this many columns */

/* "<tabs>key:<pad>" */
static void kv_key(int lvl, const char *key)
{
	int pad = KEY_WIDTH - (int)strlen(key) - 1;

	if (pad < 1)
		pad = 1;
	printf("%.*s%s:%*s", lvl, "\t\t\t\t\t\t", key, pad, "");
}

void kv(int lvl, const char *key, const char *fmt, ...)
{
	va_list ap;

	kv_key(lvl, key);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}
