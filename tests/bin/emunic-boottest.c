/* SPDX-License-Identifier: MIT */
/*
 * emunic-boottest: exercises the bootstrap (emunic-run's channel or PMIx).
 * Every rank gives its rank and pid in an allgather and checks what the
 * others gave.  The failure options make one rank misbehave so the
 * launcher's handling of it can be tested.
 */
#include "emunic.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct share {
	int32_t rank;
	int32_t pid;
};

static const char usage[] =
"usage: emunic-boottest [--rounds N] [--fail-rank R [--exit C | --signal S | --leave | --sleep SECS]]\n"
"  Allgathers (rank, pid) N times (default 3) and checks every share.\n"
"  Rank R, after the first round: exits with C, raises signal S, exits 0\n"
"  without taking part in later rounds (--leave), or sleeps SECS.\n";

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rounds", required_argument, NULL, 'n' }, { "fail-rank", required_argument, NULL, 'r' },
		{ "exit", required_argument, NULL, 'e' }, { "signal", required_argument, NULL, 's' },
		{ "leave", no_argument, NULL, 'l' }, { "sleep", required_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' }, { 0 }
	};
	int rounds = 3, fail_rank = -1, code = -1, sig = 0, leave = 0, nap = 0, c, r;
	struct emunic_boot *b;
	struct share me, *all;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': rounds = atoi(optarg); break;
		case 'r': fail_rank = atoi(optarg); break;
		case 'e': code = atoi(optarg); break;
		case 's': sig = atoi(optarg); break;
		case 'l': leave = 1; break;
		case 'z': nap = atoi(optarg); break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	r = emunic_boot_init(&b);
	if (r)
		return 3;
	memset(&me, 0, sizeof(me));
	me.rank = emunic_boot_rank(b);
	me.pid = (int32_t)getpid();
	all = calloc((size_t)emunic_boot_size(b), sizeof(*all));
	for (int i = 0; i < rounds; i++) {
		if (i == 1 && me.rank == fail_rank) {
			if (code >= 0)
				exit(code);
			if (sig)
				raise(sig);
			if (leave)
				exit(0);
			sleep((unsigned)nap);
		}
		r = emunic_boot_allgather(b, &me, sizeof(me), all);
		if (r)
			return 3;
		for (int q = 0; q < emunic_boot_size(b); q++)
			if (all[q].rank != q) {
				fprintf(stderr, "emunic-boottest: rank %d: share %d says rank %d\n", me.rank, q,
					all[q].rank);
				return 1;
			}
	}
	/* The launcher (emunic-run) or the bootstrap (PMIx) names the ranks on this node. */
	printf("emunic-boottest: rank %d of %d via %s: %d exchanges ok, local rank %d of %d\n", me.rank,
	       emunic_boot_size(b), emunic_boot_method(b), rounds, emunic_local_rank(), emunic_local_size());
	free(all);
	emunic_boot_fini(b);
	return 0;
}
