/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench's option parsing, for every subcommand: getopt_long over a
 * subcommand's table with the common options (--timeout-ms, --csv, --help,
 * --quick) handled here, the usage error line, and the parsers of numbers,
 * sizes (K, M, G) and comma-separated lists the subcommands' options share.
 */
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int bench_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	if (!bench_speaks())
		return EXIT_USAGE;
	va_start(ap, fmt);
	fprintf(stderr, "emunic-bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	fprintf(stderr, "usage: emunic-run -n N emunic-bench %s [OPTIONS]; emunic-bench %s%s--help\n",
		cmd ? cmd : "SUBCOMMAND", cmd ? cmd : "", cmd ? " " : "");
	return EXIT_USAGE;
}

bool bench_parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = (int)v;
	return true;
}

static bool parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return false;
	*out = v;
	return true;
}

/* getopt_long over argv (argv[0] the subcommand): the common options,
 * --help, an unknown or incomplete option and a stray argument are handled
 * here, the rest by on_opt.  0, EXIT_USAGE, or BENCH_HELP for --help, which
 * the subcommand hands back to main.c to print. */
int bench_parse_opts(const char *cmd, int argc, char **argv, const struct option *lo, opt_fn on_opt, void *ctx,
		     struct common_opts *com)
{
	int c, r;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
		const char *name = NULL;

		r = 0;
		if (c == 'h')
			return BENCH_HELP;
		if (c == ':')
			return bench_usage_error(cmd, "%s needs a value", argv[optind - 1]);
		for (int i = 0; lo[i].name && !name; i++)
			name = lo[i].val == c ? lo[i].name : NULL;
		if (!name)
			return bench_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
		if (c == 't')
			r = bench_opt_int(cmd, name, optarg, 1, 1000000000, "a time > 0", &com->timeout_ms);
		else if (c == 'o')
			com->csv = optarg;
		else if (c == 'Q')
			com->quick = true;
		else
			r = on_opt(cmd, name, c, optarg, ctx);
		if (r)
			return r;
	}
	if (optind != argc)
		return bench_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
	return 0;
}

/* --NAME N with lo <= N <= hi; what wants says it wants. */
int bench_opt_int(const char *cmd, const char *name, const char *arg, long lo, long hi, const char *wants, int *out)
{
	return bench_parse_int(arg, lo, hi, out) ? 0 :
	       bench_usage_error(cmd, "--%s wants %s, not '%s'", name, wants, arg);
}

int bench_opt_double(const char *cmd, const char *name, const char *arg, double lo, double hi, const char *wants,
		     double *out)
{
	return parse_double(arg, lo, hi, out) ? 0 :
	       bench_usage_error(cmd, "--%s wants %s, not '%s'", name, wants, arg);
}

/* bytes with an optional K, M or G; 0 when not a size in [1, RV_MAX_SIZE]. */
size_t bench_parse_size(const char *s)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return 0;
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (*end || v == 0 || v > (RV_MAX_SIZE >> shift))
		return 0;
	return (size_t)v << shift;
}

/* Calls item(ctx, piece) on each comma-separated piece of list; false at
 * the first it refuses (rndv, p2p and conn parse their lists with it). */
bool bench_each_item(const char *list, bool (*item)(void *, const char *), void *o)
{
	char *copy = strdup(list), *save = NULL;
	bool ok = copy && *copy;

	for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; t && ok; t = strtok_r(NULL, ",", &save))
		ok = item(o, t);
	free(copy);
	return ok;
}
