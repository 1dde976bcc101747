/* SPDX-License-Identifier: MIT */
/*
 * emunic-run: start the ranks of an emunic job and be their bootstrap server.
 *
 * Each rank gets EMUNIC_RANK, EMUNIC_SIZE and EMUNIC_BOOT_ADDR (a TCP channel
 * to this launcher) and exchanges its connection addresses through it (see
 * emunic/boot_wire.h).  A rank that fails makes the launcher kill the rest and
 * exit with that rank's status (--keep-going: let the rest finish).  Across
 * nodes (two guests, or hosts), one emunic-run a node is started with
 * --nodes/--node/--server; node 0's serves.  It also checks the fault spec
 * ($EMUNIC_FAULTS, --faults), sets netem up for a loss rule and reports the
 * device's hardware counters (--counters), undoing netem on every way out.
 *
 * One file a job, calls pointing down this list:
 *   main.c    the order of things, the event loop, the clean-up at exit
 *   opts.c    the option table, --help, the job's settings
 *   faults.c  the fault spec, netem for a loss rule
 *   launch.c  the program and device checks, forking the ranks
 *   boot.c    the bootstrap server: the ranks' channels and exchanges
 *   nodes.c   the hand-off between the nodes' launchers (node 0 serves)
 *   end.c     ending the job: fail(), killing the local ranks
 *   output.c  messages, exit descriptions, the hardware counters' report
 */
#ifndef EMUNIC_RUN_H
#define EMUNIC_RUN_H

#include <emunic/fault.h>

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#define MAX_RANKS 4096
#define MAX_NODES 64
#define EXIT_LAUNCH 1		/* the launcher itself failed */
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_NOEXEC 126
#define EXIT_NOTFOUND 127
#define MAX_HW_COUNTERS 64

struct rank_slot {
	pid_t pid;		/* local ranks only */
	int fd;			/* bootstrap channel, -1 when not connected */
	bool joined, finalized, closed, contributed, exited;
	bool reported;		/* its exit was judged (rank_exit) */
	int status;		/* wait status, once exited */
	int code;		/* exit code it stands for, when it failed */
	double t_exit;		/* seconds into the job it exited */
	void *share;
	size_t share_len;
};

struct job {
	int n, nodes, node, first, count;
	const char *server;
	const char *device;
	int timeout_s;
	bool verbose, counters, keep_going;
	bool rank_failed;		/* the job ends because a rank failed (rank_exit's fail()) */
	const char *join_trace;		/* --join-trace FILE: join, start nothing */
	char **argv;
	sigset_t oldmask;		/* the mask children get back */

	/* Faults and counters. */
	struct emunic_fault_spec *faults;
	char hwdev[64];			/* the device counters and netem are about */
	struct emunic_hw_counter hw_before[MAX_HW_COUNTERS];
	int hw_n;			/* counters read before; -1: none */
	char netem_if[64];		/* interface with our netem on it, "" none */
	pid_t launcher;			/* cleanup runs in this process only */
	bool cleaned;

	/* --keep-going: the first failure, by this node's ranks or reported
	 * by another node. */
	int first_fail;
	char first_why[256];

	int lfd;			/* bootstrap server socket (node 0) */
	char addr[128];
	int sfd;			/* signalfd */
	int ctl;			/* node > 0: control link to node 0 */
	int node_fd[MAX_NODES];		/* node 0: control links by node */
	bool node_done[MAX_NODES];
	struct rank_slot *rank;
	int contributed;
	struct pollfd *pfd;		/* event_loop's, here to stay reachable when */
	int *who;			/* fail() exits from inside it (LeakSanitizer) */
	struct timespec start;
};

/* opts.c */
void parse_args(struct job *j, int argc, char **argv);

/* faults.c */
void check_faults(struct job *j, bool from_option);
bool has_loss(const struct job *j);
void pick_device(struct job *j);
void netem_start(struct job *j);
void netem_stop(struct job *j);

/* launch.c */
int find_program(const char *prog, char *path, size_t len);
void check_device(const char *want);
void job_signals(sigset_t *mask);
void start_rank(struct job *j, int r, const char *path, sigset_t *oldmask);

/* boot.c */
void boot_listen(struct job *j);
void reap(struct job *j);
void on_rank_msg(struct job *j, int r);
void on_accept(struct job *j);

/* nodes.c */
int node_of(const struct job *j, int r);
void node_connect(struct job *j);
void on_node_msg(struct job *j, int k);
bool nodes_done(const struct job *j);
int follow_server(struct job *j);

/* end.c */
bool any_local_alive(const struct job *j);
int reap_one(struct job *j, pid_t pid, int st);
void fail(struct job *j, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));

/* output.c */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double elapsed(const struct job *j);
int status_code(int st);
void describe(int st, char *buf, size_t len);
void counters_start(struct job *j);
void counters_report(struct job *j);

#endif
