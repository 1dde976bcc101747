/* SPDX-License-Identifier: MIT */
/* The options: one table gives getopt its entries and --help its OPTIONS
 * section; parse_args() turns them into the job's settings. */
#include "run.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Long-only options' keys, above any short letter. */
enum { OPT_NODES = 256, OPT_NODE, OPT_SERVER, OPT_TRACE, OPT_JOIN };

/* A new option is a row here (in --help's order) and a case in
 * parse_args().  help: its lines, joined by '\n'. */
static const struct run_option {
	const char *name;
	int has_arg;
	int key;		/* the short letter, or an OPT_ code */
	const char *synopsis;	/* as --help shows it */
	const char *help;
} run_options[] = {
	{ "np", required_argument, 'n', "-n, --np N", "number of ranks (1..4096)" },
	{ "device", required_argument, 'd', "-d, --device NAME",
	  "RDMA device for every rank (default: $EMUNIC_DEVICE,\n"
	  "else the first device with an ACTIVE port)" },
	{ "timeout", required_argument, 't', "-t, --timeout SECS",
	  "kill the job after SECS seconds (default: no limit;\n"
	  "applies with --keep-going too)" },
	{ "faults", required_argument, 'f', "-f, --faults SPEC",
	  "inject the faults SPEC describes: sets EMUNIC_FAULTS\n"
	  "for every rank (an empty SPEC: none); a loss rule\n"
	  "sets netem up for the job, as DESCRIPTION says" },
	{ "counters", no_argument, 'c', "-c, --counters",
	  "read the device's hardware counters (port 1; rxe:\n"
	  "RNR NAKs, retries, ...) before the ranks start and\n"
	  "after the job ends, and print those that changed" },
	{ "keep-going", no_argument, 'k', "-k, --keep-going",
	  "a rank that fails does not end the job: emunic-run\n"
	  "names it and waits for the others to end.  An\n"
	  "exchange that can no longer complete because a rank\n"
	  "left still fails the job" },
	{ "nodes", required_argument, OPT_NODES, "    --nodes K", "the job spans K nodes (default 1)" },
	{ "node", required_argument, OPT_NODE, "    --node I", "this is node I, 0..K-1" },
	{ "server", required_argument, OPT_SERVER, "    --server A:P",
	  "node 0's bootstrap address (needed when K > 1)" },
	{ "trace", required_argument, OPT_TRACE, "    --trace FILE",
	  "write a timeline of the job to FILE: Chrome/Perfetto\n"
	  "trace-event JSON (open it in ui.perfetto.dev), one\n"
	  "process a rank, a track a thread and a queue; sets\n"
	  "EMUNIC_TRACE for every rank, each writes FILE.rankN\n"
	  "at exit, and emunic-run joins them into FILE once\n"
	  "the ranks ended, failed or not (across nodes, node\n"
	  "I's into FILE.nodeI); a part that cannot be written\n"
	  "is said; the job's status is the ranks'; when a rank\n"
	  "fails, the others get up to 10 s to end on their own,\n"
	  "writing their parts, before they are killed)" },
	{ "join-trace", required_argument, OPT_JOIN, "    --join-trace FILE",
	  "start nothing: join FILE.rank0 .. FILE.rank(N-1), the\n"
	  "parts EMUNIC_TRACE=FILE left under another launcher\n"
	  "(srun --mpi=pmix, mpirun), into FILE; exit 0 when all\n"
	  "N were joined, else 1 naming what was missing" },
	{ "verbose", no_argument, 'v', "-v, --verbose",
	  "report launches and exits, and the fault spec in\n"
	  "canonical form" },
	{ "help", no_argument, 'h', "-h, --help", "this text" },
};
#define N_OPTIONS (sizeof(run_options) / sizeof(run_options[0]))

static const char usage_head[] =
"NAME\n"
"    emunic-run - start the ranks of an emunic job over RDMA\n"
"\n"
"SYNOPSIS\n"
"    emunic-run -n N [-d DEVICE] [-t SECONDS] [-f SPEC] [-c] [-k] [-v]\n"
"               [--trace FILE] [--] PROGRAM [ARG...]\n"
"    emunic-run -n N --join-trace FILE\n"
"    emunic-run -n N --nodes K --node I --server ADDR:PORT [...] PROGRAM [ARG...]\n"
"\n"
"DESCRIPTION\n"
"    Forks N ranks of PROGRAM on this node.  Each rank finds its rank and the\n"
"    job size in EMUNIC_RANK and EMUNIC_SIZE and exchanges connection\n"
"    addresses with the others through this launcher (EMUNIC_BOOT_ADDR); the\n"
"    ranks then connect RC queue pairs with librdmacm.  If a rank exits\n"
"    non-zero or is killed, emunic-run kills the others, names the rank and\n"
"    its status, and exits with that status; with --keep-going it lets the\n"
"    others run to their end instead.\n"
"\n"
"    Across K nodes, run one emunic-run a node with the same N, PROGRAM and\n"
"    --server; node I starts ranks I*N/K .. (I+1)*N/K-1.  Node 0 listens on\n"
"    ADDR:PORT (an address of its own) and serves the bootstrap of every rank.\n"
"    Under a PMIx launcher (prterun, Open MPI's mpirun, srun --mpi=pmix)\n"
"    emunic programs bootstrap through PMIx and need no emunic-run; they open\n"
"    libpmix then (EMUNIC_PMIX_LIB=PATH names another than the build's).\n"
"\n"
"    With --faults (or EMUNIC_FAULTS) the ranks inject faults: RNR and\n"
"    transport retry errors, synthetic completion errors, and packet loss and\n"
"    delay (the spec language is in include/emunic/fault.h).  emunic-run checks\n"
"    the spec before it starts anything.  For a loss rule it puts netem on the\n"
"    network interface under the job's RDMA device (tc qdisc replace dev IF\n"
"    root netem ...) before the ranks start, and deletes that root qdisc when\n"
"    the job ends, however it ends (a failed rank, a timeout, a signal; not\n"
"    SIGKILL).  That needs root and tc.  rxe's loopback between ranks of one\n"
"    node does not cross the interface: for loss to touch the job's traffic,\n"
"    spread the ranks over nodes with --nodes, and give every node's\n"
"    emunic-run the same --faults.\n"
"\n"
"OPTIONS\n";

static const char usage_tail[] =
"\n"
"ENVIRONMENT\n"
"    Set for each rank: EMUNIC_RANK, EMUNIC_SIZE, EMUNIC_LOCAL_RANK,\n"
"    EMUNIC_LOCAL_SIZE, EMUNIC_BOOT_ADDR, EMUNIC_DEVICE when -d is given,\n"
"    EMUNIC_FAULTS when --faults is given, and EMUNIC_TRACE when --trace is.\n"
"\n"
"    Read by emunic-run:\n"
"    EMUNIC_DEVICE        the device when -d is not given\n"
"    EMUNIC_FAULTS        the fault spec when --faults is not given; it is\n"
"                         checked and acted on (netem) the same way\n"
"    EMUNIC_TRACE         the trace FILE when --trace is not given (a program\n"
"                         run alone with it writes FILE itself)\n"
"    PATH                 where tc is looked for (then /usr/sbin and /sbin)\n"
"\n"
"EXIT STATUS\n"
"    0 every rank exited 0; the status of the first rank that failed (128+n\n"
"    when killed by signal n; with --keep-going, once the others ended, and\n"
"    across nodes node 0 takes the first a node reported); 1 launcher error\n"
"    (no RDMA device, bootstrap failure, tc could not set netem up); 2 bad\n"
"    usage, or a malformed fault spec; 124 timeout; 126 PROGRAM not\n"
"    executable; 127 PROGRAM not found.\n"
"\n"
"EXAMPLES\n"
"    emunic-run -n 4 build/bin/emunic-datapath\n"
"    emunic-run -n 2 -d rxe0 -t 60 build/bin/emunic-datapath --size 1M\n"
"    emunic-run -n 2 -c -f 'rnr:peer=1' build/bin/emunic-faulttest send\n"
"    emunic-run -n 4 -k -c -f 'wc:status=RETRY_EXC,p=1%,seed=7' PROGRAM\n"
"    emunic-run -n 2 --nodes 2 --node 0 --server 10.0.2.1:7711 \\\n"
"        -f 'loss:p=1%,delay=2ms,jitter=500us' build/bin/emunic-datapath\n";

/* The synopsis in a 20-column field, then the help, its further lines
 * under its first. */
static void usage(void)
{
	fputs(usage_head, stdout);
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const char *h = run_options[i].help;
		int len = (int)strcspn(h, "\n");

		printf("    %-20s %.*s\n", run_options[i].synopsis, len, h);
		for (h += len; *h; h += len) {
			h++;
			len = (int)strcspn(h, "\n");
			printf("%25s%.*s\n", "", len, h);
		}
	}
	fputs(usage_tail, stdout);
}

/* getopt_long's tables from run_options: "+:" (stop at PROGRAM, report a
 * missing value as ':') and each short letter. */
static void getopt_tables(struct option *longopts, char *shortopts)
{
	size_t s = 0;

	shortopts[s++] = '+';
	shortopts[s++] = ':';
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct run_option *o = &run_options[i];

		longopts[i] = (struct option){ o->name, o->has_arg, NULL, o->key };
		if (o->key < 256) {
			shortopts[s++] = (char)o->key;
			if (o->has_arg == required_argument)
				shortopts[s++] = ':';
		}
	}
	longopts[N_OPTIONS] = (struct option){ 0 };
	shortopts[s] = '\0';
}

static int parse_int(const char *s, int lo, int hi, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		say("%s must be a whole number from %d to %d, not '%s' (see emunic-run --help)", what, lo, hi, s);
		exit(EXIT_USAGE);
	}
	return (int)v;
}

void parse_args(struct job *j, int argc, char **argv)
{
	struct option longopts[N_OPTIONS + 1];
	char shortopts[2 * N_OPTIONS + 3];
	const char *faults = NULL;
	int c;

	getopt_tables(longopts, shortopts);
	j->n = -1;
	j->nodes = 1;
	opterr = 0;	/* one message of ours, not getopt's and ours */
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'n': j->n = parse_int(optarg, 1, MAX_RANKS, "-n"); break;
		case 'd': j->device = optarg; break;
		case 't': j->timeout_s = parse_int(optarg, 1, INT_MAX, "--timeout"); break;
		case OPT_NODES: j->nodes = parse_int(optarg, 1, MAX_NODES, "--nodes"); break;
		case OPT_NODE: j->node = parse_int(optarg, 0, MAX_NODES - 1, "--node"); break;
		case OPT_SERVER: j->server = optarg; break;
		case OPT_TRACE: setenv("EMUNIC_TRACE", optarg, 1); break;	/* the ranks inherit it */
		case OPT_JOIN: j->join_trace = optarg; break;
		case 'f': faults = optarg; break;
		case 'c': j->counters = true; break;
		case 'k': j->keep_going = true; break;
		case 'v': j->verbose = true; break;
		case 'h': usage(); exit(0);
		case ':': say("option '%s' needs a value (see emunic-run --help)", argv[optind - 1]); exit(EXIT_USAGE);
		default: say("unknown option '%s' (see emunic-run --help)", argv[optind - 1]); exit(EXIT_USAGE);
		}
	}
	if (j->n < 0) {
		say("missing -n N: how many ranks to start (see emunic-run --help)");
		exit(EXIT_USAGE);
	}
	if (j->join_trace && optind < argc) {
		say("--join-trace starts nothing: no PROGRAM after it (see emunic-run --help)");
		exit(EXIT_USAGE);
	}
	if (j->join_trace)
		return;
	if (optind >= argc) {
		say("missing PROGRAM: what each rank runs (see emunic-run --help)");
		exit(EXIT_USAGE);
	}
	if (j->nodes > 1 && (!j->server || j->node >= j->nodes || j->n < j->nodes)) {
		say("--nodes %d needs --server ADDR:PORT, --node 0..%d and -n >= %d", j->nodes, j->nodes - 1, j->nodes);
		exit(EXIT_USAGE);
	}
	j->argv = argv + optind;
	if (faults)
		setenv("EMUNIC_FAULTS", faults, 1);	/* the ranks inherit it */
	check_faults(j, faults != NULL);
	if (!j->device)
		j->device = getenv("EMUNIC_DEVICE");
	if (j->device && !*j->device)
		j->device = NULL;
	j->first = (int)((long)j->node * j->n / j->nodes);
	j->count = (int)((long)(j->node + 1) * j->n / j->nodes) - j->first;
}
