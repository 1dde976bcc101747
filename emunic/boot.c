/* SPDX-License-Identifier: MIT */
/*
 * Rank side of the bootstrap: find out rank and size, and exchange small
 * blobs (connection addresses) with every other rank.  emunic-run passes
 * EMUNIC_RANK, EMUNIC_SIZE and EMUNIC_BOOT_ADDR; a PMIx launcher passes
 * PMIX_*; with neither, the process is a job of one.
 */
#include "emunic/boot.h"
#include "emunic/boot_wire.h"
#include "emunic/base/base.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int launcher_allgather(struct emunic_boot *b, const void *in, size_t len, void *out)
{
	struct emunic_boot_msg m;
	int r;

	r = emunic_wire_send(b->fd, EMUNIC_BOOT_ALLGATHER, b->rank, in, len);
	if (r)
		return emunic_err(r, "bootstrap: cannot reach emunic-run (%s)", strerror(-r));
	r = emunic_wire_recv_hdr(b->fd, &m, b->timeout_ms);
	if (r == -ETIMEDOUT)
		return emunic_err(r, "bootstrap: no answer from emunic-run within %d s (a rank did not join?)",
				  b->timeout_ms / 1000);
	if (r)
		return emunic_err(r, "bootstrap: emunic-run closed the channel (%s); the job is ending",
				  strerror(-r));
	if (m.type == EMUNIC_BOOT_ERROR) {
		char why[512] = "";
		size_t n = m.len < sizeof(why) - 1 ? m.len : sizeof(why) - 1;

		emunic_wire_recv_body(b->fd, why, n, b->timeout_ms);
		return emunic_err(-EPROTO, "bootstrap: emunic-run refused the exchange: %s", why);
	}
	if (m.type != EMUNIC_BOOT_RESULT || m.len != len * (size_t)b->size)
		return emunic_err(-EPROTO, "bootstrap: unexpected answer (type %u, %llu bytes)",
				  m.type, (unsigned long long)m.len);
	return emunic_wire_recv_body(b->fd, out, m.len, b->timeout_ms);
}

static void launcher_fini(struct emunic_boot *b)
{
	emunic_wire_send(b->fd, EMUNIC_BOOT_FINALIZE, b->rank, NULL, 0);
	close(b->fd);
}

static const struct emunic_boot_ops launcher_ops = {
	.name = "emunic-run",
	.allgather = launcher_allgather,
	.fini = launcher_fini,
};

static int single_allgather(struct emunic_boot *b, const void *in, size_t len, void *out)
{
	(void)b;
	if (len)
		memcpy(out, in, len);
	return 0;
}

static void single_fini(struct emunic_boot *b) { (void)b; }

static const struct emunic_boot_ops single_ops = {
	.name = "singleton",
	.allgather = single_allgather,
	.fini = single_fini,
};

static int custom_allgather(struct emunic_boot *b, const void *in, size_t len, void *out)
{
	int r = b->user_fn(b->user_ctx, in, len, out);

	if (r)
		return emunic_err(r < 0 ? r : -EIO, "bootstrap: the caller's exchange failed (%d)", r);
	return 0;
}

static const struct emunic_boot_ops custom_ops = {
	.name = "custom",
	.allgather = custom_allgather,
	.fini = single_fini,
};

int emunic_boot_init_custom(int rank, int size, emunic_boot_allgather_fn fn, void *ctx,
			    struct emunic_boot **out)
{
	struct emunic_boot *b;

	if (!fn || !out || size < 1 || size > (1 << 20) || rank < 0 || rank >= size)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->fd = -1;
	b->rank = rank;
	b->size = size;
	b->ops = &custom_ops;
	b->user_fn = fn;
	b->user_ctx = ctx;
	*out = b;
	return 0;
}

static int launcher_init(struct emunic_boot *b, const char *addr)
{
	int r;

	if (emunic_env_int("EMUNIC_SIZE", 1, 1 << 20, &b->size) ||
	    emunic_env_int("EMUNIC_RANK", 0, b->size - 1, &b->rank))
		return emunic_err(-EINVAL, "bootstrap: EMUNIC_BOOT_ADDR is set but EMUNIC_RANK/EMUNIC_SIZE "
				  "are missing or out of range; start ranks with emunic-run");
	emunic_log_set_rank(b->rank);
	r = emunic_wire_connect(addr, b->timeout_ms);
	if (r < 0)
		return emunic_err(r, "bootstrap: cannot connect to emunic-run at %s (%s)", addr, strerror(-r));
	b->fd = r;
	r = emunic_wire_send(b->fd, EMUNIC_BOOT_HELLO, b->rank, NULL, 0);
	if (r) {
		close(b->fd);
		return emunic_err(r, "bootstrap: hello to %s failed (%s)", addr, strerror(-r));
	}
	b->ops = &launcher_ops;
	return 0;
}

int emunic_boot_init(struct emunic_boot **out)
{
	struct emunic_boot *b = calloc(1, sizeof(*b));
	const char *addr = getenv("EMUNIC_BOOT_ADDR");
	int secs = 300, r;

	if (!b)
		return -ENOMEM;
	b->fd = -1;
	if (emunic_env_int("EMUNIC_BOOT_TIMEOUT", 1, INT_MAX / 1000, &secs) == -EINVAL)
		emunic_info("bootstrap: ignoring bad EMUNIC_BOOT_TIMEOUT (want whole seconds)");
	b->timeout_ms = secs * 1000;
	if (addr && *addr) {
		r = launcher_init(b, addr);
	} else if (emunic_boot_pmix_detect()) {
		r = emunic_boot_pmix_init(b);
	} else {
		b->size = 1;
		b->ops = &single_ops;
		r = 0;
	}
	if (r) {
		free(b);
		return r;
	}
	*out = b;
	return 0;
}

int emunic_boot_rank(const struct emunic_boot *b) { return b->rank; }
int emunic_boot_size(const struct emunic_boot *b) { return b->size; }
const char *emunic_boot_method(const struct emunic_boot *b) { return b->ops->name; }

int emunic_boot_allgather(struct emunic_boot *b, const void *in, size_t len, void *out)
{
	if (!b || (len && (!in || !out)))
		return -EINVAL;
	return b->ops->allgather(b, in, len, out);
}

int emunic_boot_barrier(struct emunic_boot *b)
{
	return emunic_boot_allgather(b, NULL, 0, NULL);
}

void emunic_boot_fini(struct emunic_boot *b)
{
	if (!b)
		return;
	b->ops->fini(b);
	free(b);
}
