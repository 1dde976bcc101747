/* SPDX-License-Identifier: MIT */
/*
 * emunic.h — the public API of emunic, a software-emulated offloading NIC
 * over RDMA verbs.  Every function returns 0 (or a count) on success and a
 * negative errno on failure; none aborts on bad input.
 */
#ifndef EMUNIC_H
#define EMUNIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- bootstrap: rank, size and an out-of-band exchange ----------------- */

/*
 * A job's ranks find each other through the launcher: emunic-run (a TCP
 * channel named in EMUNIC_BOOT_ADDR) or, under a PMIx launcher (prterun,
 * Open MPI's mpirun, srun --mpi=pmix), the PMIx server.
 */
struct emunic_boot;

int  emunic_boot_init(struct emunic_boot **out);
int  emunic_boot_rank(const struct emunic_boot *b);
int  emunic_boot_size(const struct emunic_boot *b);
/* "emunic-run" or "pmix". */
const char *emunic_boot_method(const struct emunic_boot *b);
/* Every rank gives len bytes; out receives size * len bytes, by rank. */
int  emunic_boot_allgather(struct emunic_boot *b, const void *in, size_t len, void *out);
int  emunic_boot_barrier(struct emunic_boot *b);
/* Tells the launcher this rank finished its part of the exchange cleanly. */
void emunic_boot_fini(struct emunic_boot *b);

/*
 * The ranks on this node: where a device pins its progress core and how long
 * a waiter assists depend on them.  EMUNIC_LOCAL_RANK / EMUNIC_LOCAL_SIZE
 * (emunic-run sets them, a user may) win; else what a bootstrap (PMIx) or
 * libemunic-mpi (MPI_COMM_TYPE_SHARED) gave emunic_local_ranks_set().  Kept
 * here rather than put in the environment because setenv() races the
 * getenv() of the PMIx or MPI library threads already running then.
 * Unknown: rank 0, size 0.
 */
void emunic_local_ranks_set(int rank, int size);
int  emunic_local_rank(void);
int  emunic_local_size(void);

/*
 * A job started by a launcher emunic does not know, whose ranks already
 * share a channel (an MPI library's communicator, say): the caller gives
 * rank, size and the exchange.  fn must do what emunic_boot_allgather does
 * (every rank gives len bytes, out gets size x len, by rank; 0 or a negative
 * errno) and is called only from inside emunic_boot_allgather/barrier,
 * emunic_dev_open, emunic_dev_allgather and emunic_dev_barrier, on the
 * calling thread; never from the progress core.  Method "custom".  rank is
 * the device's (a process may open several, over different groups), so the
 * caller tags messages itself (emunic_log_set_rank).
 */
typedef int (*emunic_boot_allgather_fn)(void *ctx, const void *in, size_t len, void *out);
int  emunic_boot_init_custom(int rank, int size, emunic_boot_allgather_fn fn, void *ctx,
			     struct emunic_boot **out);

/* ---- the device and its progress core ----------------------------------- */

/*
 * A device is one verbs device driven by one progress core: a thread, pinned
 * to its own CPU, that drains the app's command rings, polls every CQ and
 * posts the work that became eligible.  App calls enqueue and return; nothing
 * needs a progress call to move.
 */
struct emunic_dev;

enum emunic_idle {
	EMUNIC_IDLE_DEFAULT = 0,	/* $EMUNIC_IDLE, else spin when a CPU is free */
	EMUNIC_IDLE_SPIN,		/* busy-poll (a dedicated core) */
	EMUNIC_IDLE_SLEEP,		/* block in io_uring when idle (laptops, VMs) */
};

struct emunic_dev_attr {
	const char *device;		/* NULL: $EMUNIC_DEVICE, else the first active */
	int cpu;			/* progress core CPU; -1: $EMUNIC_CPU (one CPU, or a
					 * list indexed by local rank), else unpinned */
	enum emunic_idle idle;
	unsigned ring_entries;		/* command ring (0: 4096) */
	int connect_timeout_ms;		/* 0: 30000 */
	unsigned trig_entries;		/* triggers pending at once (0: 4096); more: -ENOSPC */
	unsigned sink_mbps;		/* emulate a slow receiver: data fetched by gets
					 * drains into memory at this rate, in MB/s
					 * (0: $EMUNIC_SINK_MBPS, else unthrottled) */
	const char *faults;		/* fault spec (emunic/fault.h); NULL: $EMUNIC_FAULTS.
					 * A malformed one fails the open with -EINVAL. */
	unsigned list_tasks;		/* the longest task list emunic_mq_post takes, as an
					 * HCA bounds what one post may carry (0:
					 * $EMUNIC_LIST_TASKS, else 1024; at most the command
					 * ring's entries); a longer list is -E2BIG.  Engines
					 * read it (emunic_dev_list_tasks) to split their work,
					 * and tests lower it to make them. */
};
void emunic_dev_attr_init(struct emunic_dev_attr *a);

/* Opens the device and starts its progress core.  Collective: every rank of
 * the job calls it (connection addresses are exchanged through boot). */
int emunic_dev_open(struct emunic_boot *boot, const struct emunic_dev_attr *attr, struct emunic_dev **out);
/* Stops the core.  Work still in flight is canceled and reported (a line per
 * QP and MQ naming what was canceled); every handle of the device (QP, CQ,
 * MQ) is invalid afterwards.  Deregister memory regions first. */
int emunic_dev_close(struct emunic_dev *dev);
int emunic_dev_rank(const struct emunic_dev *dev);
int emunic_dev_size(const struct emunic_dev *dev);
const char *emunic_dev_name(const struct emunic_dev *dev);
enum emunic_idle emunic_dev_idle(const struct emunic_dev *dev);
/* The longest task list the device's MQs take (attr.list_tasks, resolved). */
unsigned emunic_dev_list_tasks(const struct emunic_dev *dev);
/* Entries of the command ring (attr.ring_entries, resolved): no post of
 * more tasks than this is ever taken. */
unsigned emunic_dev_ring_entries(const struct emunic_dev *dev);
/* What the verbs device underneath can do, read once when it was opened
 * (shim/shim.h, whose EMUNIC_SHIM_CAP_* are the same bits): an engine
 * picks a substitute where a bit is clear. */
#define EMUNIC_DEV_CAP_ATOMIC		(1u << 0)	/* fetch-and-add on the wire */
#define EMUNIC_DEV_CAP_WRITE_IMM	(1u << 1)	/* RDMA write with immediate (not iWARP) */
#define EMUNIC_DEV_CAP_RNR		(1u << 2)	/* RNR NAKs and their retries (not iWARP) */
#define EMUNIC_DEV_CAP_NATIVE_CD	(1u << 3)	/* the HCA runs WAIT / SEND_EN / RECV_EN itself */
uint32_t emunic_dev_caps(const struct emunic_dev *dev);
/*
 * Of the capabilities `what` (EMUNIC_DEV_CAP_*, or the names below, the
 * same bits), the first the device lacks, as a reason to print, or NULL
 * (siw, and iWARP in general, lack the three below; rxe none).  Posting an
 * operation that needs one fails with -EOPNOTSUPP; a test that needs one
 * skips with this reason (README, "siw").
 */
#define EMUNIC_LACKS_ATOMIC EMUNIC_DEV_CAP_ATOMIC	/* fetch_add: a verbs atomic */
#define EMUNIC_LACKS_IMM EMUNIC_DEV_CAP_WRITE_IMM	/* an MQ's WRITE_IMM (triggered ops' target
							 * counting goes by SEND instead: not refused) */
#define EMUNIC_LACKS_RNR EMUNIC_DEV_CAP_RNR		/* a send that finds no receive is retried
							 * (RNR), and fails at the sender when
							 * retries run out */
const char *emunic_dev_lacks(const struct emunic_dev *dev, unsigned what);
/* The backend that reaches the device: "emulated" or "mlx5" ($EMUNIC_BACKEND). */
const char *emunic_dev_backend(const struct emunic_dev *dev);

/*
 * What the engine did, for benchmarks and diagnosis: who ran its passes,
 * why the core thread woke, how often a wait had to sleep.  Counts since
 * open; read them racily (they are statistics, not state).
 */
struct emunic_dev_stats {
	uint64_t passes;		/* engine passes, by anyone */
	uint64_t idle_passes;		/* ... that found nothing to do (a waiter's or the
					 * spinning core's looks) */
	uint64_t core_passes;		/* ... by the core thread */
	uint64_t core_wakes;		/* times the core thread woke from sleep */
	uint64_t wake_cq, wake_cm, wake_doorbell, wake_timer;	/* ... because of */
	uint64_t arms;			/* completion events asked for */
	uint64_t timer_sets;		/* hand-over timer changes */
	uint64_t waits;			/* bounded waits */
	uint64_t wait_sleeps;		/* ... that slept (assisting did not finish them) */
	int realtime;			/* the core thread runs at real-time priority */
	int core_own_cpu;		/* ... on a CPU of its own (pinned): else an MQ's WAIT
					 * is left to the application's wait or poll */
	uint64_t core_spin_ns;		/* a current value, not a count: the spin the core
					 * adapted to, EMUNIC_SPIN_US..EMUNIC_SPIN_MAX_US; it
					 * spins that long after work on a CPU of its own, on
					 * shared CPUs only within that spin of firing a
					 * trigger, and never while an application thread
					 * waits in the engine (then EMUNIC_SPIN_US) */
	uint64_t progress_passes;	/* engine passes by emunic_dev_progress (a test loop's) */
};
int emunic_dev_stats(struct emunic_dev *dev, struct emunic_dev_stats *out);
/*
 * Lends the calling thread to the engine for one look, as a wait does while
 * it waits: if no other thread runs the engine, this one polls verbs and,
 * when that found something or work is waiting, runs a pass (event
 * handlers included), then hands the engine back.  Never needed for
 * progress (the progress core moves everything); a thread that tests for a
 * result in a loop (emunic_test) gets it without waiting for the core to
 * wake for it.  The event handlers of any event queue of the device may
 * run on the calling thread then (as in a wait), so it must hold no lock a
 * handler takes.  1: it did something (a pass that found work, or one
 * another thread's kick asked for); 0: nothing to do, or another thread
 * runs the engine; -EINVAL.  From a thread already inside some device's
 * engine (an event handler) it does nothing (0).
 */
int emunic_dev_progress(struct emunic_dev *dev);
/* Out-of-band exchange among the device's ranks (through its boot channel),
 * for engines that must swap addresses and keys: collective. */
int emunic_dev_allgather(struct emunic_dev *dev, const void *in, size_t len, void *out);
int emunic_dev_barrier(struct emunic_dev *dev);

/* ---- diagnostics -------------------------------------------------------- */

/* Tags every message this process prints with its rank (-1: none yet). */
void emunic_log_set_rank(int rank);
int  emunic_log_rank(void);

#ifdef __cplusplus
}
#endif

#include <emunic/mq.h>
#include <emunic/triggered.h>
#include <emunic/fault.h>

#endif /* EMUNIC_H */
