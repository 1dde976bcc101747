/* SPDX-License-Identifier: MIT */
/*
 * The timeline recorder (timeline.h): per-thread buffers of binary records,
 * registered once per thread under a lock and then appended to without one;
 * written as JSON at exit (timeline_json.c) and freed there when no device
 * is open any more.  The process's only state besides the log's rank: a
 * trace is the process's, whatever devices it opens.
 */
#include "emunic/base/timeline.h"
#include "emunic/base/base.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

bool emunic_tl_on;

static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emunic_tl_buf *tl_list, **tl_tail = &tl_list;
static bool tl_started;		/* EMUNIC_TRACE was read */
static int tl_devs;		/* devices open */
static int tl_rank;
static pid_t tl_pid;		/* the process that opened tl_file */
static FILE *tl_file;
static char tl_path[PATH_MAX + 32];

static _Thread_local struct emunic_tl_buf *tl_mine;
static _Thread_local char tl_name[24];

static struct emunic_tl_chunk *chunk_new(void)
{
	struct emunic_tl_chunk *c = malloc(sizeof(*c));

	if (c) {
		c->next = NULL;
		c->n = 0;
	}
	return c;
}

static struct emunic_tl_buf *tl_register(void)
{
	struct emunic_tl_buf *b = calloc(1, sizeof(*b));
	int tid = (int)syscall(SYS_gettid);

	if (!b || !(b->first = b->cur = chunk_new())) {
		free(b);
		return NULL;
	}
	b->chunks = 1;
	b->tid = tid;
	if (tl_name[0])
		snprintf(b->name, sizeof(b->name), "%s", tl_name);
	else if (tid == getpid())
		snprintf(b->name, sizeof(b->name), "app");
	else
		snprintf(b->name, sizeof(b->name), "thread %d", tid);
	pthread_mutex_lock(&tl_lock);
	*tl_tail = b;
	tl_tail = &b->next;
	pthread_mutex_unlock(&tl_lock);
	return tl_mine = b;
}

/* A full chunk: the next one, unless the thread reached its cap. */
static struct emunic_tl_chunk *tl_grow(struct emunic_tl_buf *b)
{
	struct emunic_tl_chunk *c;

	if (b->chunks >= EMUNIC_TL_MAX_CHUNKS || !(c = chunk_new()))
		return NULL;
	b->chunks++;
	__atomic_store_n(&b->cur->next, c, __ATOMIC_RELEASE);
	b->cur = c;
	return c;
}

void emunic_tl_record(unsigned kind, unsigned track, uint32_t id, int peer, uint64_t a, uint64_t b, uint64_t c)
{
	struct emunic_tl_buf *buf = tl_mine;
	struct emunic_tl_chunk *ch;

	if (!buf && !(buf = tl_register()))
		return;
	ch = buf->cur;
	if (ch->n == EMUNIC_TL_CHUNK && !(ch = tl_grow(buf))) {
		buf->dropped++;
		return;
	}
	ch->rec[ch->n] = (struct emunic_tl_rec){
		.ns = emunic_now_ns(), .kind = (uint8_t)kind, .track = (uint8_t)track, .peer = (int16_t)peer,
		.id = id, .a = a, .b = b, .c = c,
	};
	/* Whole before counted: a writer at exit reads only whole records. */
	__atomic_store_n(&ch->n, ch->n + 1, __ATOMIC_RELEASE);
}

void emunic_tl_thread_name(const char *name)
{
	snprintf(tl_name, sizeof(tl_name), "%s", name);
	if (tl_mine)
		snprintf(tl_mine->name, sizeof(tl_mine->name), "%s", name);
	else if (emunic_tl_on)
		tl_register();	/* its track shows even if it records nothing */
}

static void tl_free_all(void)
{
	while (tl_list) {
		struct emunic_tl_buf *b = tl_list;

		tl_list = b->next;
		while (b->first) {
			struct emunic_tl_chunk *c = b->first;

			b->first = c->next;
			free(c);
		}
		free(b);
	}
	tl_tail = &tl_list;
}

/* At exit: the JSON, once.  Buffers a device's core may still write to
 * (a device left open) stay; the process is ending anyway. */
static void tl_at_exit(void)
{
	int r;

	/* A child that forked from a traced rank and exits (emunic-bench
	 * instr re-runs itself) must not write, or close, the parent's file. */
	if (getpid() != tl_pid)
		return;
	pthread_mutex_lock(&tl_lock);
	__atomic_store_n(&emunic_tl_on, false, __ATOMIC_RELAXED);
	if (tl_file) {
		r = emunic_tl_write_json(tl_file, tl_rank, tl_list);
		if (fclose(tl_file) && !r)
			r = -errno;
		tl_file = NULL;
		if (r)
			emunic_err(r, "trace: writing %s failed: %s", tl_path, strerror(-r));
	}
	if (!tl_devs)
		tl_free_all();
	pthread_mutex_unlock(&tl_lock);
}

static void tl_start(int rank, int size)
{
	const char *path = getenv("EMUNIC_TRACE");

	tl_started = true;
	if (!path || !*path)
		return;
	if (size > 1)
		snprintf(tl_path, sizeof(tl_path), "%s.rank%d", path, rank);
	else
		snprintf(tl_path, sizeof(tl_path), "%s", path);
	/* Opened now, so a path that cannot be written is said at once; the
	 * job's work goes on untraced. */
	tl_file = fopen(tl_path, "we");
	if (!tl_file) {
		int e = errno;
		char who[32] = "";

		if (emunic_log_rank() != rank)	/* the prefix names the rank where it is set */
			snprintf(who, sizeof(who), "rank %d: ", rank);
		emunic_err(-e, "trace: %scannot write %s (EMUNIC_TRACE): %s; running untraced", who, tl_path,
			   strerror(e));
		return;
	}
	tl_rank = rank;
	tl_pid = getpid();
	atexit(tl_at_exit);
	__atomic_store_n(&emunic_tl_on, true, __ATOMIC_RELAXED);
}

void emunic_tl_dev_open(int rank, int size)
{
	pthread_mutex_lock(&tl_lock);
	tl_devs++;
	if (!tl_started)
		tl_start(rank, size);
	pthread_mutex_unlock(&tl_lock);
}

void emunic_tl_dev_close(void)
{
	pthread_mutex_lock(&tl_lock);
	tl_devs--;
	pthread_mutex_unlock(&tl_lock);
}
