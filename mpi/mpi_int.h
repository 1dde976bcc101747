/* SPDX-License-Identifier: MIT */
/*
 * Private to libemunic-mpi.so, the PMPI interposer: an unmodified MPI
 * program run with LD_PRELOAD gets its nonblocking collectives offloaded to
 * emunic (<emunic/coll.h>) and everything else from its MPI library.
 *
 * Files, calls pointing down: colls.c (the intercepted collectives) and
 * wait.c (the intercepted Wait/Test family) use req.c (requests: generalized
 * MPI requests over emunic's, the queue of posts that found no room, the
 * pump), comm.c (a communicator's emunic collectives) and
 * dtype.c (which datatypes and ops emunic can take); init.c (MPI_Init,
 * MPI_Finalize) uses comm.c and req.c; commnew.c (the calls that make
 * communicators) uses comm.c; init.c and comm.c open devices with
 * dev.c (a device over a communicator, bootstrapped through PMPI); every
 * file uses common.c (the state, the error line, the clock).
 */
#ifndef EMUNIC_MPI_INT_H
#define EMUNIC_MPI_INT_H

#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <emunic.h>
#include <emunic/coll.h>

/* The collectives offloaded, each with its own emunic collective object per
 * communicator (an object runs one kind). */
enum mpi_kind { MK_BCAST, MK_ALLREDUCE, MK_ALLTOALL, MK_GATHER, MK_ALLGATHER, MK_NKIND };

/* An emunic device over a communicator's ranks (dev.c). */
struct mpi_dev {
	MPI_Comm comm;			/* a private dup: the bootstrap's channel */
	struct emunic_boot *boot;
	struct emunic_dev *dev;
};

/* A communicator's emunic side: made with the communicator (comm.c). */
struct mpi_comm {
	MPI_Comm comm;
	/* "communicator 0x..." (its Fortran handle, which Open MPI's pointers
	 * and MPICH's integers both have), for lines the pump thread says too,
	 * where no MPI call may be made. */
	char label[32];
	const char *why;		/* not NULL: it never offloads, because */
	int rank, size;
	struct emunic_dev *dev;		/* MPI_COMM_WORLD's, or own.dev */
	struct mpi_dev own;		/* other groups: a device of their own */
	struct emunic_coll *coll[MK_NKIND];	/* every kind's, or none (why) */
	bool counted;			/* in mpi_g.ncomms */
	unsigned queued[MK_NKIND];	/* posts waiting for room, in order */
	bool blocked[MK_NKIND];		/* scratch of one pump pass */
	int broken[MK_NKIND];		/* an operation failed or was dropped on
					 * this rank: every later one fails with it */
	struct mpi_comm *next;
};

/* What one offloaded call asked for, resolved to emunic's terms. */
struct mpi_args {
	enum mpi_kind kind;
	const void *sbuf;
	void *rbuf;			/* bcast: the buffer */
	size_t bytes;			/* bcast: all; allreduce: count; others: a block */
	int type, op;			/* allreduce: emunic_calc_type / _op */
	int root;
};

enum mpi_req_state { MR_QUEUED, MR_POSTED, MR_DONE };

/* An offloaded collective: the application holds mpi, a generalized request
 * (MPI_Grequest_start), so its request lists may mix emunic's and MPI's. */
struct mpi_req {
	MPI_Request mpi;
	struct mpi_comm *mc;
	struct mpi_args a;
	struct emunic_coll_req *er;	/* while posted */
	enum mpi_req_state state;
	int err;			/* once done: 0 or emunic's negative errno */
	bool told;			/* MPI_Grequest_complete called */
	bool fn_freed;			/* free_fn ran before it was complete (MPICH) */
	struct mpi_req *next;		/* live requests, in posting order */
};

struct mpi_state {
	pthread_mutex_t lock;		/* every emunic call and the lists below */
	bool on;			/* the device is open: offload */
	int rank;			/* in MPI_COMM_WORLD */
	struct mpi_dev world;
	bool verbose, blocking;
	bool concurrent;		/* MPI_THREAD_MULTIPLE on some rank: communicators
					 * may be made concurrently, so none gets objects */
	size_t max_bytes;		/* EMUNIC_MPI_MAX_BYTES */
	int timeout_ms;			/* EMUNIC_MPI_TIMEOUT_MS: bound on a wait */
	int keyval;			/* a communicator's struct mpi_comm */
	struct mpi_comm *comms;
	unsigned ncomms, max_comms;	/* with objects; EMUNIC_MPI_COMMS */
	bool world_out_of_step;		/* a create on the world's device failed
					 * on some rank: its QPs may pair wrongly */
	struct mpi_req *reqs, **reqs_tail;
	unsigned nqueued;
	pthread_t pump;			/* posts queued requests while the app computes */
	pthread_cond_t pump_cv;
	bool pump_started, pump_stop;
	unsigned long offloaded[MK_NKIND], fellback[MK_NKIND];
};
extern struct mpi_state mpi_g;

/* common.c.  "ibcast", "iallreduce", ... */
const char *mpi_kind_name(enum mpi_kind k);
/* "emunic-mpi: rank R: ..." on stderr (one write). */
void mpi_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
long long mpi_now_ms(void);

/* dev.c.  Opens a device over comm's ranks, bootstrapped through PMPI on
 * a private copy of comm: collective over comm; every rank agrees on the
 * result (0, or the failure, said), so none is left in an exchange, even
 * when a rank fails before its first.  !mine: this rank fails it. */
int mpi_dev_open(MPI_Comm comm, bool mine, struct mpi_dev *d);
void mpi_dev_close(struct mpi_dev *d);
/* True when mine is true on every rank of comm (collective). */
bool mpi_dev_agree(MPI_Comm comm, bool mine);
/* The lowest (lo) and highest (hi, unless NULL) of each of n <= MPI_MINMAX_N
 * values over comm's ranks, in one allreduce (collective); -EIO if it failed. */
enum { MPI_MINMAX_N = 8 };
int mpi_min_max(MPI_Comm comm, const long long *v, int n, long long *lo, long long *hi);

/* dtype.c.  NULL when count elements of type are contiguous bytes emunic can
 * move (a predefined type without gaps), else why not; *bytes their size. */
const char *mpi_dtype_bytes(MPI_Datatype type, int count, size_t *bytes);
/* NULL when emunic's CALC reduces (type, op), setting *et, *eo; else why not. */
const char *mpi_dtype_calc(MPI_Datatype type, MPI_Op op, int *et, int *eo);

/* comm.c.  Gives comm its objects, or a why: collective over comm, called
 * where MPI is (MPI_Init for MPI_COMM_WORLD, commnew.c for the others);
 * every rank agrees.  Takes the lock. */
void mpi_comm_setup(MPI_Comm comm);
/* Gives comm a why and no objects, without any collective.  Takes the lock. */
void mpi_comm_mark(MPI_Comm comm, const char *why);
/* The communicator's state (made at first sight for one not seen made,
 * with a why; NULL only without memory).  Lock held. */
struct mpi_comm *mpi_comm_get(MPI_Comm comm);
/* The largest message (bcast, allreduce) or block (the others) the kind
 * offloads on mc: EMUNIC_MPI_MAX_BYTES, a rank's whole send for the block
 * kinds (the objects register a few copies of it). */
size_t mpi_comm_limit(const struct mpi_comm *mc, enum mpi_kind k);
/* The kind's collective object (NULL: the communicator has a why). */
struct emunic_coll *mpi_comm_coll(struct mpi_comm *mc, enum mpi_kind k);
/* At MPI_Finalize: every communicator's objects destroyed. */
void mpi_comm_fini_all(void);
int mpi_comm_keyval_init(void);

/* req.c.  Starts an offloaded collective: *req becomes its MPI request.
 * Posted now, or queued behind earlier ones of its kind that found no room
 * (the pump posts it).  Lock held; returns an MPI error code. */
int mpi_req_start(struct mpi_comm *mc, const struct mpi_args *a, MPI_Request *req);
/* Posts what is queued and reads what completed; completes (to MPI) the
 * requests whose collectives are done.  Takes the lock. */
void mpi_progress(void);
/* Offloaded requests among reqs[0 .. n) not yet complete (to MPI); 0 for
 * a list with none of ours.  Takes the lock. */
int mpi_req_pending(int n, const MPI_Request *reqs);
/* Whether any offloaded request is live (cheap: no lock). */
bool mpi_req_any(void);
/* Waits (driving MPI's own progress too) until none of reqs[0 .. n) of ours
 * is pending, bounded by mpi_g.timeout_ms from the call. */
void mpi_req_wait_ours(int n, const MPI_Request *reqs);
/* One turn of such a wait between two tests: the bound (from since, the
 * call's start, in mpi_now_ms) checked, MPI's progress driven. */
void mpi_req_wait_step(int n, const MPI_Request *reqs, long long since);
/* The request of mc's that are live; at finalize and communicator free:
 * waited within the bound, the rest abandoned (named).  Lock held. */
void mpi_req_drain(struct mpi_comm *mc);
void mpi_req_fini(void);
/* MPI_Request_free on h: true (said) when h is one of ours: erroneous for a
 * nonblocking collective (MPI-3.1 5.12), refused as Open MPI and MPICH
 * refuse theirs.  Takes the lock. */
bool mpi_req_refuse_free(MPI_Request h);

#endif
