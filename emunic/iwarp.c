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

#include <errno.h>
#include <ifaddrs.h>
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
	uint32_t caps = d->shim.caps;

	if ((what & EMUNIC_LACKS_ATOMIC) && !(caps & EMUNIC_SHIM_CAP_ATOMIC))
		return "no atomics: the device reports atomic_cap ATOMIC_NONE (siw implements none)";
	if ((what & EMUNIC_LACKS_IMM) && !(caps & EMUNIC_SHIM_CAP_WRITE_IMM))
		return "no immediate data: iWARP's RDMAP carries none, so the device takes no "
		       "RDMA WRITE or SEND with immediate";
	if ((what & EMUNIC_LACKS_RNR) && !(caps & EMUNIC_SHIM_CAP_RNR))
		return "no RNR on iWARP: a send that finds no receive posted ends the connection "
		       "instead of being retried";
	return NULL;
}
