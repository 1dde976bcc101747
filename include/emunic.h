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

/* ---- diagnostics -------------------------------------------------------- */

/* Tags every message this process prints with its rank (-1: none yet). */
void emunic_log_set_rank(int rank);
int  emunic_log_rank(void);

#ifdef __cplusplus
}
#endif
#endif /* EMUNIC_H */
