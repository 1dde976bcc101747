/* SPDX-License-Identifier: MIT */
/*
 * What sets an iWARP device (siw, or an iWARP NIC) apart where emunic
 * notices it.  Its one GID is the netdev's MAC, not an address, so the IPv4
 * address rdma_cm listens on is the netdev's own, found here by that MAC.
 * Its verbs lack what RDMAP (RFC 5040) has no wire format for: immediate
 * data, and RNR (a send that finds no receive buffer is an error that ends
 * the connection); siw also implements no atomics (RFC 7306 added them to
 * iWARP as an extension).  emunic_vdev_lacks() names each so a test can skip
 * with the reason instead of passing without it.
 */
#include "emunic/verbs.h"
#include "emunic/base/log.h"

#include <errno.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

bool emunic_ctx_is_iwarp(struct ibv_context *ctx)
{
	return ctx->device->transport_type == IBV_TRANSPORT_IWARP;
}

/* The interface whose hardware address is the GID's first six bytes. */
static bool mac_is(const struct ifaddrs *a, const union ibv_gid *gid)
{
	const struct sockaddr_ll *ll = (const struct sockaddr_ll *)a->ifa_addr;

	return ll && ll->sll_family == AF_PACKET && ll->sll_halen == 6 && !memcmp(ll->sll_addr, gid->raw, 6);
}

int emunic_iwarp_addr(const union ibv_gid *gid, struct in_addr *out)
{
	char name[IF_NAMESIZE] = "";
	struct ifaddrs *list, *a;
	int ret = -EADDRNOTAVAIL;

	if (getifaddrs(&list))
		return -errno;
	for (a = list; a && !name[0]; a = a->ifa_next)
		if (mac_is(a, gid))
			snprintf(name, sizeof(name), "%s", a->ifa_name);
	for (a = list; a && name[0]; a = a->ifa_next) {
		if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && !strcmp(a->ifa_name, name)) {
			*out = ((const struct sockaddr_in *)a->ifa_addr)->sin_addr;
			ret = 0;
			break;
		}
	}
	freeifaddrs(list);
	return ret;
}

/* From the capabilities the device interface read once at open (shim/open.c):
 * one source of truth, no verbs call. */
const char *emunic_vdev_lacks(const struct emunic_vdev *d, unsigned what)
{
	return emunic_shim_lacks(d->shim.caps, what);
}

/*
 * siw's mmap keys.  Linux 6.1's siw hands a queue's mmap key out as its
 * first page offset in the context, first fit from 0 with no upper bound,
 * and libsiw takes the key 0x90000 (SIW_INVAL_UOBJ_KEY, which is
 * SIW_UOBJ_MAX_KEY + 1) as "no mapping": the CQ or QP whose queue starts
 * at page 0x90 fails to create (errno left stale), whatever its size.  All
 * of a process's emunic devices on one siw share librdmacm's context, so
 * the 0x90th page comes up with the second QP of a triggered test, or a
 * second device's CQ.  One guard CQ per context, made before anything
 * else of emunic's and kept for the process's life, takes pages 0 to 0x100
 * (32768 entries: 1 MiB, with 4 KiB pages), so no queue of emunic's starts
 * at 0x90.  (It guards only if the context had used fewer than 0x90 pages
 * before: emunic opens it first in its processes.)
 */
#define SIW_VENDOR_ID 0x626d74		/* "bmt": the kernel's siw.h */
#define SIW_GUARD_CQE 32768
#define SIW_GUARDS 16

void emunic_siw_key_guard(const struct emunic_shim *s, struct ibv_context *ctx,
			  const struct ibv_device_attr_ex *attr)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct {
		struct ibv_context *ctx;
		struct ibv_cq *cq;
	} guard[SIW_GUARDS];

	if (attr->orig_attr.vendor_id != SIW_VENDOR_ID)
		return;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < SIW_GUARDS; i++) {
		if (guard[i].ctx == ctx)
			break;
		if (!guard[i].ctx) {
			guard[i].ctx = ctx;
			int r = emunic_shim_create_cq(s, ctx, SIW_GUARD_CQE, NULL, &guard[i].cq);

			/* It fails if 0x90 was the first free page (the context was
			 * used before emunic opened it), or for want of memory. */
			if (r)
				emunic_debug("device %s: siw's mmap-key guard CQ could not be made (%s): a queue "
					     "that starts at page 0x90 will fail", ibv_get_device_name(ctx->device),
					     strerror(-r));
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}
