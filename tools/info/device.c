/* SPDX-License-Identifier: MIT */
/* The device as verbs sees it, as far as emunic cares: which driver, which
 * of emunic's offloads it has natively, and per port its state and GID
 * table, the GID emunic uses marked. */
#include "info.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Vendor ids the soft devices report (drivers/infiniband/sw/{rxe,siw}). */
#define RXE_VENDOR_ID	0xffffffu
#define SIW_VENDOR_ID	0x626d74u	/* "bmt" */

/*
 * Bit 27 of device_cap_flags was the kernel's IB_DEVICE_CROSS_CHANNEL.  mlx5
 * set it when the HCA has the CORE-Direct ("cd") capability, and uverbs
 * passed it to user space unfiltered until Linux 5.19 masked the flags to
 * the uverbs ones and dropped the kernel flag.  Only old kernels set it;
 * <rdma/ib_user_verbs.h> says so ("bits ... 27 ... may be set by old kernels").
 */
#define LEGACY_CROSS_CHANNEL	(1ULL << 27)

static const char *link_layer_str(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
	case IBV_LINK_LAYER_UNSPECIFIED: return "unspecified";
	}
	return "unknown";
}

/* ---- which driver is behind a device ---------------------------------- */

/* Reads a one-line sysfs attribute of the device, without the newline. */
static bool sysfs_read(const struct ibv_device *dev, const char *attr, char *buf, size_t len)
{
	char path[PATH_MAX];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", dev->ibdev_path, attr);
	f = fopen(path, "r");
	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok && buf[0];
}

/* The kernel driver bound to the device's parent (PCI HCAs), if any. */
static bool sysfs_driver(const struct ibv_device *dev, char *buf, size_t len)
{
	char path[PATH_MAX], target[PATH_MAX];
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/device/driver", dev->ibdev_path);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (strlen(base) >= len)
		return false;
	memcpy(buf, base, strlen(base) + 1);
	return true;
}

/*
 * libibverbs does not say which provider drives a device.  The soft devices
 * are told apart by the vendor id their kernel drivers report (they have no
 * parent device in sysfs); hardware by the driver its parent is bound to,
 * and, failing sysfs, mlx5 by its usual name.
 */
void driver_of(const struct ibv_device *dev, const struct ibv_device_attr *a,
		      struct driver *d)
{
	memset(d, 0, sizeof(*d));
	if (a->vendor_id == RXE_VENDOR_ID) {
		d->kind = DRV_RXE;
		snprintf(d->name, sizeof(d->name), "rdma_rxe");
	} else if (a->vendor_id == SIW_VENDOR_ID) {
		d->kind = DRV_SIW;
		snprintf(d->name, sizeof(d->name), "siw");
	} else if (sysfs_driver(dev, d->name, sizeof(d->name))) {
		if (!strncmp(d->name, "mlx5", 4))
			d->kind = DRV_MLX5;
	} else {
		snprintf(d->name, sizeof(d->name), "unknown");
		if (!strncmp(dev->name, "mlx5_", 5))
			d->kind = DRV_MLX5;
	}
	if (d->kind == DRV_RXE || d->kind == DRV_SIW)
		sysfs_read(dev, "parent", d->parent, sizeof(d->parent));
}

void show_driver(const struct driver *d)
{
	if (d->kind == DRV_RXE)
		kv(1, "driver", "rdma_rxe (Soft-RoCE%s%s)", d->parent[0] ? " over " : "", d->parent);
	else if (d->kind == DRV_SIW)
		kv(1, "driver", "siw (soft-iWARP%s%s)", d->parent[0] ? " over " : "", d->parent);
	else
		kv(1, "driver", "%s", d->name);
}

/*
 * What the device does natively of what emunic offers (management queues
 * with WAIT/SEND_EN/RECV_EN, counter-triggered operations).  Upstream
 * rdma-core has no verb for either: no MANAGED_SEND/RECV or CROSS_CHANNEL QP
 * create flag in libibverbs or mlx5dv, no cross-channel bit in
 * mlx5dv_query_device(); so only the legacy cap bit above can say anything
 * without DevX.
 */
void show_native_offloads(const struct driver *d, uint64_t cap_flags, bool verbose)
{
	switch (d->kind) {
	case DRV_RXE:
	case DRV_SIW:
		kv(1, "native offloads", "none (emulated by the emunic progress core)");
		return;
	case DRV_MLX5:
		if (cap_flags & LEGACY_CROSS_CHANNEL)
			kv(1, "native offloads", "cross-channel (CORE-Direct) reported by this kernel "
			   "(old cap bit 27), not usable through upstream verbs; "
			   "emulated by the emunic progress core");
		else
			kv(1, "native offloads", "unknown (mlx5: cross-channel not exposed by upstream "
			   "rdma-core); emulated by the emunic progress core");
		if (verbose)
			kv(1, "note", "the HCA's cross-channel ('cd') capability is readable only through "
			   "DevX (QUERY_HCA_CAP via mlx5dv_devx_general_cmd), which emunic-info does not use");
		return;
	case DRV_OTHER:
		break;
	}
	kv(1, "native offloads", "none exposed by upstream verbs (emulated by the emunic progress core)");
}

/* ---- the GID table, and the GID emunic uses ---------------------------- */

static bool gid_is_zero(const union ibv_gid *g)
{
	static const union ibv_gid zero;

	return !memcmp(g, &zero, sizeof(zero));
}

/*
 * The valid entries of a port's GID table.  ibv_query_gid_ex() fails with
 * ENODATA on unused slots; rxe's table has 1024 slots and 2-3 in use.
 */
static int collect_gids(struct ibv_context *ctx, uint8_t port, int tbl_len,
			struct ibv_gid_entry **out)
{
	struct ibv_gid_entry *v;
	int i, n = 0;

	*out = NULL;
	if (tbl_len <= 0)
		return 0;
	v = calloc((size_t)tbl_len, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < tbl_len; i++) {
		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &v[n], 0) || gid_is_zero(&v[n].gid))
			continue;
		n++;
	}
	*out = v;
	return n;
}

static void netdev_name(uint32_t ifindex, char *buf)
{
	if (!ifindex)
		strcpy(buf, "-");		/* IB GIDs have no netdev */
	else if (!if_indextoname(ifindex, buf))
		snprintf(buf, IF_NAMESIZE, "if#%u", ifindex);
}

/* Why emunic picked this GID, as the marker at the end of its line. */
static void pick_reason(const struct ibv_gid_entry *e, const struct ibv_port_attr *pa,
			char *buf, size_t len)
{
	char v4[INET_ADDRSTRLEN];

	if (pa->link_layer == IBV_LINK_LAYER_INFINIBAND) {
		snprintf(buf, len, "IB port GID");
		return;
	}
	if (e->gid_type == IBV_GID_TYPE_IB) {	/* on Ethernet: iWARP, whose GID is the MAC */
		struct in_addr a;

		if (emunic_iwarp_addr(&e->gid, &a) || !inet_ntop(AF_INET, &a, v4, sizeof(v4)))
			snprintf(v4, sizeof(v4), "none");
		snprintf(buf, len, "iWARP, the MAC; IPv4 %s from its netdev", v4);
		return;
	}
	if (!inet_ntop(AF_INET, &e->gid.raw[12], v4, sizeof(v4)))
		snprintf(v4, sizeof(v4), "?");
	snprintf(buf, len, "%s, IPv4 %s", emunic_gid_type_str((enum ibv_gid_type)e->gid_type), v4);
}

static void show_gid_lines(const struct ibv_gid_entry *v, int n, const struct ibv_gid_entry *pick,
			   const struct ibv_port_attr *pa)
{
	char gid[INET6_ADDRSTRLEN], ifname[IF_NAMESIZE + 8], why[96], idx[16];
	int i, w = 0;

	for (i = 0; i < n; i++) {
		emunic_gid_str(&v[i].gid, gid, sizeof(gid));
		if ((int)strlen(gid) > w)
			w = (int)strlen(gid);
	}
	for (i = 0; i < n; i++) {
		emunic_gid_str(&v[i].gid, gid, sizeof(gid));
		netdev_name(v[i].ndev_ifindex, ifname);
		snprintf(idx, sizeof(idx), "[%u]", v[i].gid_index);
		printf("\t\t\t%-5s %-6s  %-*s  %s", idx,
		       emunic_gid_type_str((enum ibv_gid_type)v[i].gid_type), w, gid, ifname);
		if (pick && pick->gid_index == v[i].gid_index) {
			pick_reason(&v[i], pa, why, sizeof(why));
			printf("  <- emunic uses this (%s)", why);
		}
		putchar('\n');
	}
}

static int show_gids(struct ibv_context *ctx, uint8_t port, const struct ibv_port_attr *pa)
{
	struct ibv_gid_entry pick, *v;
	bool have_pick = emunic_gid_pick(ctx, port, pa, &pick) == 0;
	int n = collect_gids(ctx, port, pa->gid_tbl_len, &v);

	if (n < 0) {
		fprintf(stderr, PROG ": port %u: out of memory reading the GID table\n", port);
		return 1;
	}
	kv(2, "GID table", "%d in use of %d", n, pa->gid_tbl_len);
	show_gid_lines(v, n, have_pick ? &pick : NULL, pa);
	if (!have_pick)
		kv(2, "emunic GID", "none: no RoCEv2 GID with an IPv4-mapped address "
		   "(give the netdev an IPv4 address)");
	free(v);
	return 0;
}

int show_port(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr pa;
	int err;

	printf("\tport: %u\n", port);
	err = ibv_query_port(ctx, port, &pa);
	if (err) {
		fprintf(stderr, PROG ": %s port %u: ibv_query_port: %s\n",
			ibv_get_device_name(ctx->device), port, strerror(err));
		return 1;
	}
	kv(2, "state", "PORT_%s (%d)", emunic_port_state_str(pa.state), (int)pa.state);
	kv(2, "active_mtu", "%d (%d)", emunic_mtu_bytes(pa.active_mtu), (int)pa.active_mtu);
	kv(2, "link_layer", "%s", link_layer_str(pa.link_layer));
	return show_gids(ctx, port, &pa);
}
