/* SPDX-License-Identifier: MIT */
/*
 * The one convention of the test programs in tests/bin (the pytest files
 * run them through conftest.run_ctest): exit 0 pass, 1 fail, 77 skip after
 * a "SKIP: reason" line on stdout.  2 (usage) and 3 (the check could not
 * run: the bootstrap or a verbs call failed) fail as 1 does, and say more.
 *
 * FAIL(fmt, ...) names a failure on stderr and counts it in `fails` (a
 * program that goes on after one ends with harness_status()); DIE names it
 * and exits 1 at once; CHECK(cond, fmt, ...) is DIE unless cond; SKIP(fmt,
 * ...) says why the test cannot run here and exits 77.  A failure reads
 * "PROGRAM: rank R: FAIL: what", R being HARNESS_RANK, an expression the
 * program may define before including this file (without it: no rank).
 *
 * harness_env_set/harness_env_restore give one check an environment
 * variable of its own (emunic reads its EMUNIC_* settings when a device
 * opens): set before the check's device opens, the caller's value (or
 * none) put back after it closes, so the next check's device is as the
 * caller made it.  STR(x) spells a macro's value, for such a setting.
 */
#ifndef EMUNIC_TEST_HARNESS_H
#define EMUNIC_TEST_HARNESS_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_PASS 0
#define TEST_FAIL 1		/* a check failed */
#define TEST_USAGE 2		/* bad arguments: failing too */
#define TEST_NORUN 3		/* could not run the check (bootstrap, verbs): failing too */
#define TEST_SKIP 77

#ifndef HARNESS_RANK
#define HARNESS_RANK (-1)
#endif

static int fails __attribute__((unused));	/* FAIL's count */

static void harness_fail(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void harness_fail(int rank, const char *fmt, ...)
{
	va_list ap;

	if (rank >= 0)
		fprintf(stderr, "%s: rank %d: FAIL: ", program_invocation_short_name, rank);
	else
		fprintf(stderr, "%s: FAIL: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fails++;
}

static void harness_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, unused));
static void harness_skip(const char *fmt, ...)
{
	va_list ap;

	fputs("SKIP: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	exit(TEST_SKIP);
}

/* One variable a check set, and what the caller had. */
struct harness_env {
	const char *name;
	char *was;		/* the caller's value; NULL: it had none */
};

/* 0, or -errno (nothing set). */
static int harness_env_set(struct harness_env *e, const char *name, const char *value) __attribute__((unused));
static int harness_env_set(struct harness_env *e, const char *name, const char *value)
{
	const char *was = getenv(name);
	char *keep = was ? strdup(was) : NULL;

	if ((was && !keep) || setenv(name, value, 1)) {
		free(keep);
		return -errno;
	}
	*e = (struct harness_env){ .name = name, .was = keep };
	return 0;
}

static void harness_env_restore(struct harness_env *e) __attribute__((unused));
static void harness_env_restore(struct harness_env *e)
{
	if (!e->name)
		return;
	if (e->was)
		setenv(e->name, e->was, 1);
	else
		unsetenv(e->name);
	free(e->was);
	*e = (struct harness_env){ 0 };
}

#define STR_(x) #x
#define STR(x) STR_(x)

#define FAIL(...) harness_fail(HARNESS_RANK, __VA_ARGS__)
#define DIE(...) do { FAIL(__VA_ARGS__); exit(TEST_FAIL); } while (0)
#define CHECK(c, ...) do { if (!(c)) DIE(__VA_ARGS__); } while (0)
#define SKIP(...) harness_skip(__VA_ARGS__)
#define harness_status() (fails ? TEST_FAIL : TEST_PASS)

#endif
