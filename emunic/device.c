/* SPDX-License-Identifier: MIT */
/* Choosing and opening the verbs device, port and GID a rank uses. */
#include "emunic/verbs.h"
#include "emunic/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool emunic_gid_is_ipv4_mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

void emunic_gid_str(const union ibv_gid *gid, char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

const char *emunic_gid_type_str(enum ibv_gid_type t)
{
	switch (t) {
	case IBV_GID_TYPE_IB: return "IB";
	case IBV_GID_TYPE_ROCE_V1: return "RoCEv1";
	case IBV_GID_TYPE_ROCE_V2: return "RoCEv2";
	}
	return "?";
}

const char *emunic_port_state_str(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_NOP: return "NOP";
	case IBV_PORT_DOWN: return "DOWN";
	case IBV_PORT_INIT: return "INIT";
	case IBV_PORT_ARMED: return "ARMED";
	case IBV_PORT_ACTIVE: return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
	}
	return "?";
}

int emunic_mtu_bytes(enum ibv_mtu m)
{
	return (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128 << m : 0;
}

int emunic_gid_pick(struct ibv_context *ctx, uint8_t port, const struct ibv_port_attr *pa,
		    struct ibv_gid_entry *out)
{
	struct ibv_gid_entry e;
	int i;

	for (i = 0; i < pa->gid_tbl_len; i++) {
		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0))
			continue;
		if (pa->link_layer == IBV_LINK_LAYER_INFINIBAND || emunic_ctx_is_iwarp(ctx)) {
			*out = e;		/* IB: the port GID; iWARP: the MAC; both index 0 */
			return 0;
		}
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && emunic_gid_is_ipv4_mapped(&e.gid)) {
			*out = e;
			return 0;
		}
	}
	return -ENOENT;
}

static int first_active_port(struct ibv_context *ctx, const struct ibv_device_attr_ex *attr,
			     struct ibv_port_attr *pa)
{
	uint8_t p;

	for (p = 1; p <= attr->orig_attr.phys_port_cnt; p++)
		if (!ibv_query_port(ctx, p, pa) && pa->state == IBV_PORT_ACTIVE)
			return p;
	return -ENETDOWN;
}

/* iWARP: the GID is a MAC; rdma_cm needs the netdev's IPv4 address (or
 * EMUNIC_ADDR's, where the netdev has several). */
static int iwarp_addr(struct emunic_vdev *d)
{
	const char *a = getenv("EMUNIC_ADDR");

	if (a && inet_pton(AF_INET, a, &d->addr.sin_addr) != 1)
		return emunic_err(-EADDRNOTAVAIL, "device %s: EMUNIC_ADDR '%s' is not an IPv4 address",
				  d->name, a);
	if (!a && emunic_iwarp_addr(&d->gid.gid, &d->addr.sin_addr))
		return emunic_err(-EADDRNOTAVAIL, "device %s is iWARP: its netdev has no IPv4 address "
				  "(or set EMUNIC_ADDR)", d->name);
	return 0;
}

static int vdev_setup(struct emunic_vdev *d, struct ibv_context *ctx)
{
	int port, ret;

	d->ctx = ctx;
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(ctx->device));
	if (ibv_query_device_ex(ctx, NULL, &d->attr))
		return emunic_err(-EIO, "device %s: ibv_query_device_ex failed", d->name);
	port = first_active_port(ctx, &d->attr, &d->port_attr);
	if (port < 0)
		return emunic_err(port, "device %s: no ACTIVE port (check `rdma link` and the netdev)", d->name);
	d->port = (uint8_t)port;
	if (emunic_gid_pick(ctx, d->port, &d->port_attr, &d->gid))
		return emunic_err(-EADDRNOTAVAIL,
				  "device %s port %d: no RoCEv2 IPv4-mapped GID; give the netdev an IPv4 address",
				  d->name, port);
	d->addr.sin_family = AF_INET;
	memcpy(&d->addr.sin_addr, &d->gid.gid.raw[12], 4);
	if (emunic_ctx_is_iwarp(ctx) && iwarp_addr(d))
		return -EADDRNOTAVAIL;
	if (d->port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND) {
		/* IB: rdma_cm needs the IPoIB address, which the GID does not carry. */
		const char *a = getenv("EMUNIC_ADDR");

		if (!a || inet_pton(AF_INET, a, &d->addr.sin_addr) != 1)
			return emunic_err(-EADDRNOTAVAIL,
					  "device %s is InfiniBand: set EMUNIC_ADDR to this node's IPoIB address",
					  d->name);
	}
	ret = emunic_shim_open(&d->shim, ctx, &d->attr, getenv("EMUNIC_BACKEND"));
	if (ret)
		return emunic_err(ret, "device %s: %s", d->name, d->shim.why);
	emunic_siw_key_guard(&d->shim, ctx, &d->attr);
	d->pd = ibv_alloc_pd(ctx);
	if (!d->pd)
		return emunic_err(-ENOMEM, "device %s: ibv_alloc_pd failed", d->name);
	return 0;
}

/* The one of list's n devices named name (if given), else the first with
 * an ACTIVE port, iWARP ones last (they lack the atomics and immediate data
 * emunic's usual paths take, see iwarp.c; a guest has rxe0 and siw0, and
 * rxe0 is meant): its index, or -1. */
static int pick_device(struct ibv_context **list, int n, const char *name)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n; i++) {
			struct ibv_port_attr pa;
			struct ibv_device_attr_ex da;

			if (name && *name) {
				if (!strcmp(ibv_get_device_name(list[i]->device), name))
					return i;
				continue;
			}
			if (emunic_ctx_is_iwarp(list[i]) != (pass == 1))
				continue;
			if (!ibv_query_device_ex(list[i], NULL, &da) && first_active_port(list[i], &da, &pa) > 0)
				return i;
		}
	}
	return -1;
}

int emunic_vdev_pick(char *out, size_t len)
{
	const char *name = getenv("EMUNIC_DEVICE");
	struct ibv_context **list;
	int n = 0, i;

	list = rdma_get_devices(&n);
	i = list ? pick_device(list, n, name) : -1;
	if (i >= 0)
		snprintf(out, len, "%s", ibv_get_device_name(list[i]->device));
	if (list)
		rdma_free_devices(list);
	return i >= 0 ? 0 : n ? -ENETDOWN : -ENODEV;
}

int emunic_vdev_open(const char *name, struct emunic_vdev **out)
{
	struct ibv_context **list, *pick = NULL;
	struct emunic_vdev *d;
	int n = 0, i, ret;

	if (!name || !*name)
		name = getenv("EMUNIC_DEVICE");
	list = rdma_get_devices(&n);
	if (!list || n == 0) {
		if (list)
			rdma_free_devices(list);
		return emunic_err(-ENODEV, "no RDMA device; load rdma_rxe and run "
				  "`rdma link add rxe0 type rxe netdev <if>`, or use the guest (make test)");
	}
	i = pick_device(list, n, name);
	pick = i >= 0 ? list[i] : NULL;
	if (!pick) {
		char names[256] = "";
		size_t off = 0;

		for (i = 0; i < n && off < sizeof(names); i++)
			off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "",
						ibv_get_device_name(list[i]->device));
		rdma_free_devices(list);
		if (name && *name)
			return emunic_err(-ENODEV, "no RDMA device named '%s' (devices: %s)", name, names);
		return emunic_err(-ENETDOWN, "no RDMA device has an ACTIVE port (devices: %s)", names);
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		rdma_free_devices(list);
		return -ENOMEM;
	}
	ret = vdev_setup(d, pick);
	rdma_free_devices(list);	/* librdmacm keeps the context open */
	if (ret) {
		free(d);
		return ret;
	}
	*out = d;
	return 0;
}

void emunic_vdev_close(struct emunic_vdev *d)
{
	int r;

	if (!d)
		return;
	/* Everything of emunic's on the PD is gone by now: a failure is a leak
	 * of ours (a region or QP left registered), said, not hidden. */
	if (d->pd && (r = ibv_dealloc_pd(d->pd)))
		emunic_err(-r, "device %s: deallocating its protection domain failed (%s): something registered on "
			   "it was left behind", d->name, strerror(r));
	free(d);
}
