/* SPDX-License-Identifier: MIT */
/* Bootstrap backends behind emunic_boot_*: emunic-run's channel, PMIx, the caller's
 * own (custom), singleton. */
#ifndef EMUNIC_BOOT_H
#define EMUNIC_BOOT_H

#include "emunic.h"

struct emunic_boot_ops {
	const char *name;
	int (*allgather)(struct emunic_boot *b, const void *in, size_t len, void *out);
	void (*fini)(struct emunic_boot *b);
};

struct emunic_boot {
	int rank;
	int size;
	int fd;			/* emunic-run channel */
	int timeout_ms;		/* bound on every exchange */
	unsigned round;		/* PMIx: exchanges so far, keys are per round */
	const struct emunic_boot_ops *ops;
	void *priv;
	emunic_boot_allgather_fn user_fn;	/* custom: the caller's exchange */
	void *user_ctx;
};

/* PMIx: 1 when the environment says a PMIx server launched us. */
int emunic_boot_pmix_detect(void);
int emunic_boot_pmix_init(struct emunic_boot *b);

#endif
