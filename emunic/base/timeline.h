/* SPDX-License-Identifier: MIT */
/*
 * Timeline traces (EMUNIC_TRACE=FILE, emunic-run --trace FILE): what each
 * thread and queue did, as Chrome/Perfetto trace-event JSON.  Off, a trace
 * point costs one predicted branch on a flag: no clock read, no call.  On,
 * it appends a fixed-size binary record to the calling thread's own buffer
 * (no lock); the JSON is written once, at exit (timeline_json.c).
 *
 * Not the triggered unit's trace ring (triggered/trace.c, read by the app
 * through emunic_trace_read): this one is for people, in a viewer.
 */
#ifndef EMUNIC_BASE_TIMELINE_H
#define EMUNIC_BASE_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

/* What happened.  The names and argument names are in timeline_json.c. */
enum emunic_tl_kind {
	TL_TASK_POSTED = 1,	/* MQ: a task of a list (a: wr_id, b: op, c: index in the list) */
	TL_ENABLED,		/* MQ: SEND_EN / RECV_EN ran (a: qp, b: enabled up to, c: op) */
	TL_WAIT_DONE,		/* MQ: a WAIT was satisfied (a: cq, b: target, c: status) */
	TL_WR_POSTED,		/* QP: handed to verbs (a: wr_id, b: op, c: queue index) */
	TL_COMPLETION,		/* QP: a task finished (a: wr_id, b: op, c: status) */
	TL_TRIG_FIRED,		/* CT: its threshold was met (a: user, b: threshold, c: op kind) */
	TL_CT_CHANGE,		/* CT: it moved (a: success, b: failure, c: 1 for a set) */
	TL_FAULT,		/* QP: a fault rule acted (a: rule, b: what, c: status) */
	TL_RECONNECTING,	/* QP: a connection failed, made again (a: left, b: status) */
	TL_RECONNECTED,		/* QP: up again (a: reconnections, b: qpn) */
	TL_KINDS,
};

/* Which track an event goes on, besides its thread's. */
enum emunic_tl_track { TL_TRACK_NONE = 0, TL_TRACK_MQ, TL_TRACK_QP, TL_TRACK_CT };

/* TL_FAULT's b. */
enum { TL_FAULT_RNR_HOLD = 1, TL_FAULT_QP_RESET, TL_FAULT_QP_ERROR, TL_FAULT_WC };

struct emunic_tl_rec {
	uint64_t ns;		/* CLOCK_MONOTONIC: one clock for every process of a machine */
	uint8_t kind, track;
	int16_t peer;		/* QP tracks: the peer (names the track) */
	uint32_t id;		/* the track's object: its handle's index */
	uint64_t a, b, c;
};

/* Set once, at the first device open, from EMUNIC_TRACE. */
extern bool emunic_tl_on;

#define EMUNIC_TL(kind, track, id, peer, a, b, c)                                                     \
	do {                                                                                          \
		if (__builtin_expect(emunic_tl_on, 0))                                                \
			emunic_tl_record((kind), (track), (uint32_t)(id), (int)(peer), (uint64_t)(a), \
					 (uint64_t)(b), (uint64_t)(c));                               \
	} while (0)

void emunic_tl_record(unsigned kind, unsigned track, uint32_t id, int peer, uint64_t a, uint64_t b,
		      uint64_t c);
/* Names the calling thread's track ("core"), and makes it when tracing, so
 * it shows even empty; the process's first thread is "app", others
 * "thread TID". */
void emunic_tl_thread_name(const char *name);

/* A device opens: the first reads EMUNIC_TRACE and, if set, opens the file
 * (FILE for a job of one rank, FILE.rankN otherwise) and starts recording;
 * the file is written at exit.  A file that cannot be opened is said,
 * naming rank and path, and the job runs on untraced.  Closing: the
 * buffers are freed at exit only when no device is open any more. */
void emunic_tl_dev_open(int rank, int size);
void emunic_tl_dev_close(void);

/* ---- the buffers (timeline.c), read by timeline_json.c at exit -------------------------- */

#define EMUNIC_TL_CHUNK 4096u		/* records a chunk (160 KiB) */
#define EMUNIC_TL_MAX_CHUNKS 256u	/* a thread's cap: 1M records, 40 MiB */

struct emunic_tl_chunk {
	struct emunic_tl_chunk *next;
	unsigned n;
	struct emunic_tl_rec rec[EMUNIC_TL_CHUNK];
};

/* One a thread that recorded anything, kept after the thread ends. */
struct emunic_tl_buf {
	struct emunic_tl_buf *next;
	int tid;
	char name[24];
	struct emunic_tl_chunk *first, *cur;
	unsigned chunks;
	uint64_t dropped;		/* past the per-thread cap, or no memory */
};

/* Writes one JSON document for rank `rank` (the pid of its events) from
 * the buffers in list to f (a FILE *).  0 or -errno. */
int emunic_tl_write_json(void *f, int rank, const struct emunic_tl_buf *list);

/* ---- timeline_merge.c: for the launcher ----------------------------------------------- */

/* Joins the fragments PARTS.rankR of ranks first .. first + count - 1
 * that exist into one JSON document OUT and removes them.  Returns the
 * number of fragments merged or -errno; what it could not do is said on
 * stderr. */
int emunic_trace_merge(const char *parts, const char *out, int first, int count);

#endif
