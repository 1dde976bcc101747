/* SPDX-License-Identifier: MIT */
/*
 * emunic-bench's shared part, the bench_ helpers every subcommand uses:
 * bootstrap and teardown (bench_init, bench_fini), error and progress lines,
 * results (rows) and the CSV, a device a measurement, the calibrated work
 * loop and medians, table cells, and target lines (met or MISSED).
 */
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t bench_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t bench_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Under emunic-run every rank parses the same arguments: only rank 0 (or a
 * program started by hand) explains what is wrong with them. */
bool bench_speaks(void)
{
	const char *r = getenv("EMUNIC_RANK");

	return !r || !*r || !strcmp(r, "0");
}

int bench_err(const struct bench *b, int err, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "emunic-bench: rank %d: %s %s: %s\n", b->rank, b->cmd, buf,
		strerror(err < 0 ? -err : err));
	return err < 0 ? err : -err;
}

/* One line a phase, from rank 0, so a long run shows where it is. */
void bench_progress(const struct bench *b, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (b->rank != 0)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "emunic-bench: [%6.1f s] %s %s\n", (bench_mono_ns() - b->t0) / 1e9, b->cmd, buf);
}

int bench_init(struct bench *b, const char *cmd, const char *csv_path)
{
	int r;

	b->cmd = cmd;
	b->rank = -1;
	b->t0 = bench_mono_ns();
	r = emunic_boot_init(&b->boot);
	if (r)
		return bench_err(b, r, "bootstrap (run me under emunic-run or a PMIx launcher)");
	b->rank = emunic_boot_rank(b->boot);
	b->size = emunic_boot_size(b->boot);
	emunic_log_set_rank(b->rank);
	b->csv_path = csv_path;
	/* Fail before measuring, not after. */
	if (csv_path && b->rank == 0 && !(b->csv = fopen(csv_path, "w")))
		return bench_err(b, -errno, "opening the CSV file %s", csv_path);
	return 0;
}

/* Every rank waits for rank 0 to have printed, then leaves. */
int bench_fini(struct bench *b, int status)
{
	if (b->csv && fclose(b->csv) && !status)
		status = bench_err(b, -errno, "writing the CSV file %s", b->csv_path);
	b->csv = NULL;
	fflush(stdout);
	if (b->boot && !status) {
		int r = emunic_boot_barrier(b->boot);

		if (r)
			status = bench_err(b, r, "the final bootstrap barrier");
	}
	if (b->boot)
		emunic_boot_fini(b->boot);
	free(b->rows);
	return status ? (b->usage ? EXIT_USAGE : EXIT_RUN) : 0;
}

/* For the subcommands that measure one pair of ranks. */
int bench_two_ranks(struct bench *b)
{
	if (b->size == 2)
		return 0;
	if (b->rank == 0)
		fprintf(stderr, "emunic-bench: %s needs exactly 2 ranks (emunic-run -n 2), not %d\n", b->cmd, b->size);
	b->usage = true;
	return -EINVAL;
}

int bench_add(struct bench *b, const char *impl, const char *metric, double value, const char *unit)
{
	struct row *rw;

	if (b->nrows == b->caprows) {
		int cap = b->caprows ? 2 * b->caprows : 64;
		struct row *n = realloc(b->rows, (size_t)cap * sizeof(*n));

		if (!n)
			return bench_err(b, -ENOMEM, "keeping results");
		b->rows = n;
		b->caprows = cap;
	}
	rw = &b->rows[b->nrows++];
	snprintf(rw->impl, sizeof(rw->impl), "%s", impl);
	snprintf(rw->metric, sizeof(rw->metric), "%s", metric);
	rw->value = value;
	rw->unit = unit;
	return 0;
}

const struct row *bench_find(const struct bench *b, const char *impl, const char *metric)
{
	for (int i = 0; i < b->nrows; i++)
		if (!strcmp(b->rows[i].impl, impl) && !strcmp(b->rows[i].metric, metric))
			return &b->rows[i];
	return NULL;
}

double bench_get(const struct bench *b, const char *impl, const char *metric)
{
	const struct row *rw = bench_find(b, impl, metric);

	return rw ? rw->value : -1;
}

/* value / the baseline's value of the same metric; < 0 when there is none. */
double bench_ratio(const struct bench *b, const struct row *rw, const char *baseline)
{
	const struct row *base = bench_find(b, baseline, rw->metric);

	if (!base || base->value <= 0 || rw->value < 0)
		return -1;
	return rw->value / base->value;
}

/* bench,impl,ranks,metric,value,unit,ratio_vs_<baseline>; says where on stdout. */
void bench_write_csv(const struct bench *b, const char *baseline)
{
	if (!b->csv)
		return;
	fprintf(b->csv, "bench,impl,ranks,metric,value,unit,ratio_vs_%s\n", baseline);
	for (int i = 0; i < b->nrows; i++) {
		const struct row *rw = &b->rows[i];
		double ratio = bench_ratio(b, rw, baseline);

		fprintf(b->csv, "%s,%s,%d,%s,%.3f,%s,", b->cmd, rw->impl, b->size, rw->metric, rw->value, rw->unit);
		if (ratio >= 0)
			fprintf(b->csv, "%.4f", ratio);
		fputc('\n', b->csv);
	}
	fflush(b->csv);
	printf("\nCSV: %d rows in %s\n", b->nrows, b->csv_path);
}

/* ---- devices ------------------------------------------------------------- */

const char *bench_idle_str(enum emunic_idle i)
{
	return i == EMUNIC_IDLE_SPIN ? "spin" : i == EMUNIC_IDLE_SLEEP ? "sleep" : "default";
}

/* One device for a measurement, opened by every rank (collective). */
int bench_open_dev(struct bench *b, const struct emunic_dev_attr *da, struct emunic_dev **dev, char *name,
		   size_t len)
{
	int r = emunic_dev_open(b->boot, da, dev);

	if (r)
		return bench_err(b, r, "emunic_dev_open");
	snprintf(name, len, "%s, progress core idle %s", emunic_dev_name(*dev), bench_idle_str(emunic_dev_idle(*dev)));
	return 0;
}

/* ---- the work loop ------------------------------------------------------- */

int bench_local_ranks(const struct bench *b)
{
	int n = emunic_local_size();

	return n > 0 ? n : b->size > 0 ? b->size : 1;
}

void bench_nops(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		__asm__ __volatile__("nop");
}

uint64_t bench_work_iters(const struct bench *b, double ns)
{
	return ns > 0 ? (uint64_t)(ns / b->ns_per_iter + 0.5) : 0;
}

static int cmp_double(const void *a, const void *b_)
{
	double x = *(const double *)a, y = *(const double *)b_;

	return x < y ? -1 : x > y;
}

/*
 * CPU ns per nop iteration, timed by the thread's own CPU clock: the work
 * the loop does while it has a CPU, whatever else shares the CPUs (other
 * ranks, a vCPU the host preempts).  A work slice of T ns is then T ns of
 * CPU, and a rank that gets less than a whole CPU while it computes shows
 * it as lost availability.  All ranks at once, before any progress core
 * runs; runs of at least 20 ms, the median of five.
 */
int bench_calibrate(struct bench *b)
{
	double run[5];
	uint64_t n = 1 << 14;
	int r = emunic_boot_barrier(b->boot);

	if (r)
		return bench_err(b, r, "the bootstrap barrier before calibrating");
	for (;;) {
		int64_t t = bench_cpu_ns();

		bench_nops(n);
		t = bench_cpu_ns() - t;
		if (t >= 20000000 || n >= (1ull << 40))
			break;
		n *= t < 2000000 ? 8 : 2;
	}
	for (int i = 0; i < 5; i++) {
		int64_t t = bench_cpu_ns();

		bench_nops(n);
		run[i] = (double)(bench_cpu_ns() - t) / (double)n;
	}
	qsort(run, 5, sizeof(run[0]), cmp_double);
	b->ns_per_iter = run[2] > 0 ? run[2] : 1e-3;
	b->calib_spread = (run[4] - run[0]) / b->ns_per_iter;
	/* A clock read is a syscall where the clocksource has no vDSO (hpet
	 * in the TCG guest): what timing each call adds, to subtract. */
	for (int i = 0; i < 5; i++) {
		int64_t t = bench_mono_ns();

		for (int j = 0; j < 999; j++)
			(void)bench_mono_ns();
		run[i] = (double)(bench_mono_ns() - t) / 1000;
	}
	qsort(run, 5, sizeof(run[0]), cmp_double);
	b->clock_ns = run[2];
	return 0;
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return -1;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- report cells -------------------------------------------------------- */

void bench_cell(double v, int width, const char *fmt)
{
	char buf[32];

	if (v < 0)
		snprintf(buf, sizeof(buf), "-");
	else
		snprintf(buf, sizeof(buf), fmt, v);
	/* A value as wide as its column still gets a space before it, so
	 * columns never run together (145.09104.19). */
	printf("%s%*s", (int)strlen(buf) >= width ? " " : "", width, buf);
}

void bench_size_str(char *buf, size_t len, size_t v)
{
	if (v >= ((size_t)1 << 20) && !(v & (((size_t)1 << 20) - 1)))
		snprintf(buf, len, "%zuM", v >> 20);
	else if (v >= 1024 && !(v & 1023))
		snprintf(buf, len, "%zuK", v >> 10);
	else
		snprintf(buf, len, "%zu", v);
}

/* The bytes every message of rndv and p2p carries, at offset i. */
unsigned char bench_pattern(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 8) * 7 + (i >> 16) * 3 + 1);
}

/* ---- targets --------------------------------------------------------------- */

/* "met" or "MISSED", and by how much; ctx adds context (may be NULL).
 * at_most: the ratio may not exceed limit; else it may not fall below it.
 * Returns 1 when missed. */
int bench_target_ratio(const char *what, const char *impl, double ratio, double limit, bool at_most,
		       const char *ctx)
{
	const char *fmt = limit < 0.1 ? "%.3fx" : "%.2fx";
	char v[96], r[24], l[24];
	int missed = ratio >= 0 && (at_most ? ratio > limit : ratio < limit);

	snprintf(r, sizeof(r), fmt, ratio);
	snprintf(l, sizeof(l), fmt, limit);
	if (ratio < 0)
		snprintf(v, sizeof(v), "no value");
	else if (!missed)
		snprintf(v, sizeof(v), "%s", r);
	else
		snprintf(v, sizeof(v), "%s, %.0f%% %s the %s target", r, (at_most ? ratio / limit - 1 : 1 - ratio / limit) * 100,
			 at_most ? "above" : "below", l);
	printf("  %-7s %-42s %-9s %s%s%s\n", ratio < 0 ? "n/a" : missed ? "MISSED" : "met", what, impl, v,
	       ctx ? "; " : "", ctx ? ctx : "");
	return missed;
}

/* A target on an absolute figure (instructions, % of a CPU): the line says
 * met or MISSED with the figure, the limit and its unit. */
int bench_target_value(const char *what, const char *impl, double v, double limit, const char *unit)
{
	int missed = v >= 0 && v > limit;
	char fig[96];

	if (v < 0)
		snprintf(fig, sizeof(fig), "no value");
	else if (!missed)
		snprintf(fig, sizeof(fig), "%.0f %s", v, unit);
	else
		snprintf(fig, sizeof(fig), "%.0f %s, %.0f%% above the %.0f target", v, unit, (v / limit - 1) * 100, limit);
	printf("  %-7s %-42s %-9s %s\n", v < 0 ? "n/a" : missed ? "MISSED" : "met", what, impl, fig);
	return missed;
}
