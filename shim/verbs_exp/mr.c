/* SPDX-License-Identifier: MIT */
/*
 * emunic registrations for the buffers a legacy program's work requests
 * name.  The program registered them with ibv_reg_mr on its own protection
 * domain, whose keys emunic's device cannot use; so the first work request
 * that names a range registers its pages with emunic and later ones reuse
 * that registration.  Kept until exit (dev.c deregisters them).
 */
#include "shim/verbs_exp/vexp.h"

#include <errno.h>
#include <unistd.h>

int vexp_mr_find(void *addr, uint32_t len, struct emunic_mr **out)
{
	struct vexp_state *s = vexp_get();
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	unsigned i = s->nmr;
	int r;

	for (unsigned k = 0; k < s->nmr; k++)
		if (s->mr_lo[k] <= lo && hi <= s->mr_hi[k]) {
			*out = s->mr[k];
			return 0;
		}
	if (i == VEXP_MRS)
		return vexp_fail(ENOMEM, "more than %d separate buffers in work requests", VEXP_MRS);
	lo &= ~(page - 1);
	hi = (hi + page - 1) & ~(page - 1);
	r = emunic_mr_reg(s->dev, (void *)lo, hi - lo, &s->mr[i]);
	if (r)
		return vexp_fail(-r, "registering %p (%u bytes) with emunic", addr, len);
	s->mr_lo[i] = lo;
	s->mr_hi[i] = hi;
	s->nmr = i + 1;
	*out = s->mr[i];
	return 0;
}
