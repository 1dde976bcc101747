/* SPDX-License-Identifier: MIT */
/*
 * emunic-info: the verbs devices and ports on this machine, in the style of
 * ibv_devinfo, plus what emunic makes of them: which GID it will use and
 * which offloads the device has natively (none that emunic can use today:
 * the progress core emulates them).
 *
 * It talks to libibverbs directly and never opens a device the way a rank
 * does (no PD, no librdmacm), so it works on ports that are down and on
 * devices emunic_vdev_open() would refuse.
 */
#include "emunic/verbs.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG		"emunic-info"
#define KEY_WIDTH	27	/* "key:" is padded to this many columns */
#define WRAP_COL	80

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

enum driver_kind { DRV_OTHER, DRV_RXE, DRV_SIW, DRV_MLX5 };

struct driver {
	enum driver_kind kind;
	char name[64];		/* kernel driver, or a guess from the vendor id */
	char parent[IF_NAMESIZE + 1];	/* netdev under rxe/siw, "" if none */
};

struct opts {
	const char *device;	/* NULL: all devices */
	const char *device_from;	/* "from -d" or "from EMUNIC_DEVICE", for messages */
	bool verbose;
};

struct flag_name {
	uint64_t bit;
	const char *name;
};

#define N_ELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- output helpers --------------------------------------------------- */

static int indent_cols(int lvl)
{
	return lvl * 8;
}

/* "<tabs>key:<pad>" and returns the column the value starts at. */
static int kv_key(int lvl, const char *key)
{
	int pad = KEY_WIDTH - (int)strlen(key) - 1;

	if (pad < 1)
		pad = 1;
	printf("%.*s%s:%*s", lvl, "\t\t\t\t\t\t", key, pad, "");
	return indent_cols(lvl) + (int)strlen(key) + 1 + pad;
}

static void kv(int lvl, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void kv(int lvl, const char *key, const char *fmt, ...)
{
	va_list ap;

	kv_key(lvl, key);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* Prints a word, wrapping to the value column when the line would get too
 * long, so long flag lists stay readable in an 80-column terminal. */
static void put_word(const char *w, int *col, int value_col)
{
	int len = (int)strlen(w);

	if (*col > value_col && *col + 1 + len > WRAP_COL) {
		printf("\n%.*s%*s", value_col / 8, "\t\t\t\t\t\t", value_col % 8, "");
		*col = value_col;
	} else if (*col > value_col) {
		putchar(' ');
		(*col)++;
	}
	fputs(w, stdout);
	*col += len;
}

/* "key: 0x.. NAME NAME ..." with unnamed bits shown as one hex word. */
static void kv_flags(int lvl, const char *key, uint64_t v, const struct flag_name *t, size_t n)
{
	int value_col = kv_key(lvl, key);
	int col = value_col;
	uint64_t rest = v;
	char buf[40];
	size_t i;

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	put_word(buf, &col, value_col);
	for (i = 0; i < n; i++) {
		if (!(v & t[i].bit))
			continue;
		put_word(t[i].name, &col, value_col);
		rest &= ~t[i].bit;
	}
	if (rest) {
		snprintf(buf, sizeof(buf), "other:0x%" PRIx64, rest);
		put_word(buf, &col, value_col);
	}
	if (!v)
		put_word("(none)", &col, value_col);
	putchar('\n');
}

static void guid_str(__be64 be, char *buf, size_t len)
{
	uint64_t g = be64toh(be);

	snprintf(buf, len, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

/* ---- names for enum values -------------------------------------------- */

static const char *transport_str(enum ibv_transport_type t)
{
	switch (t) {
	case IBV_TRANSPORT_IB: return "InfiniBand";
	case IBV_TRANSPORT_IWARP: return "iWARP";
	case IBV_TRANSPORT_USNIC: return "usNIC";
	case IBV_TRANSPORT_USNIC_UDP: return "usNIC UDP";
	case IBV_TRANSPORT_UNSPECIFIED: return "unspecified";
	case IBV_TRANSPORT_UNKNOWN: break;
	}
	return "unknown";
}

static const char *link_layer_str(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
	case IBV_LINK_LAYER_UNSPECIFIED: return "unspecified";
	}
	return "unknown";
}

static const char *atomic_cap_str(enum ibv_atomic_cap a)
{
	switch (a) {
	case IBV_ATOMIC_NONE: return "ATOMIC_NONE";
	case IBV_ATOMIC_HCA: return "ATOMIC_HCA";
	case IBV_ATOMIC_GLOB: return "ATOMIC_GLOB";
	}
	return "?";
}

static const char *width_str(uint8_t w)
{
	switch (w) {
	case 1: return "1X";
	case 2: return "4X";
	case 4: return "8X";
	case 8: return "12X";
	case 16: return "2X";
	}
	return "?";
}

static const char *speed_str(uint8_t s)
{
	switch (s) {
	case 1: return "SDR 2.5 Gbps";
	case 2: return "DDR 5 Gbps";
	case 4: return "QDR 10 Gbps";
	case 8: return "FDR10 10.3125 Gbps";
	case 16: return "FDR 14.0625 Gbps";
	case 32: return "EDR 25.78125 Gbps";
	case 64: return "HDR 50 Gbps";
	case 128: return "NDR 100 Gbps";
	}
	return "?";
}

static const char *phys_state_str(uint8_t s)
{
	switch (s) {
	case 1: return "SLEEP";
	case 2: return "POLLING";
	case 3: return "DISABLED";
	case 4: return "PORT_CONFIGURATION_TRAINING";
	case 5: return "LINK_UP";
	case 6: return "LINK_ERROR_RECOVERY";
	case 7: return "PHY_TEST";
	}
	return "?";
}

/* ---- flag tables ------------------------------------------------------ */

static const struct flag_name dev_cap_names[] = {
	{ IBV_DEVICE_RESIZE_MAX_WR, "RESIZE_MAX_WR" },
	{ IBV_DEVICE_BAD_PKEY_CNTR, "BAD_PKEY_CNTR" },
	{ IBV_DEVICE_BAD_QKEY_CNTR, "BAD_QKEY_CNTR" },
	{ IBV_DEVICE_RAW_MULTI, "RAW_MULTI" },
	{ IBV_DEVICE_AUTO_PATH_MIG, "AUTO_PATH_MIG" },
	{ IBV_DEVICE_CHANGE_PHY_PORT, "CHANGE_PHY_PORT" },
	{ IBV_DEVICE_UD_AV_PORT_ENFORCE, "UD_AV_PORT_ENFORCE" },
	{ IBV_DEVICE_CURR_QP_STATE_MOD, "CURR_QP_STATE_MOD" },
	{ IBV_DEVICE_SHUTDOWN_PORT, "SHUTDOWN_PORT" },
	{ IBV_DEVICE_PORT_ACTIVE_EVENT, "PORT_ACTIVE_EVENT" },
	{ IBV_DEVICE_SYS_IMAGE_GUID, "SYS_IMAGE_GUID" },
	{ IBV_DEVICE_RC_RNR_NAK_GEN, "RC_RNR_NAK_GEN" },
	{ IBV_DEVICE_SRQ_RESIZE, "SRQ_RESIZE" },
	{ IBV_DEVICE_N_NOTIFY_CQ, "N_NOTIFY_CQ" },
	{ IBV_DEVICE_MEM_WINDOW, "MEM_WINDOW" },
	{ IBV_DEVICE_UD_IP_CSUM, "UD_IP_CSUM" },
	{ IBV_DEVICE_XRC, "XRC" },
	{ IBV_DEVICE_MEM_MGT_EXTENSIONS, "MEM_MGT_EXTENSIONS" },
	{ IBV_DEVICE_MEM_WINDOW_TYPE_2A, "MEM_WINDOW_TYPE_2A" },
	{ IBV_DEVICE_MEM_WINDOW_TYPE_2B, "MEM_WINDOW_TYPE_2B" },
	{ IBV_DEVICE_RC_IP_CSUM, "RC_IP_CSUM" },
	{ IBV_DEVICE_RAW_IP_CSUM, "RAW_IP_CSUM" },
	{ IBV_DEVICE_MANAGED_FLOW_STEERING, "MANAGED_FLOW_STEERING" },
	{ IBV_DEVICE_RAW_SCATTER_FCS, "RAW_SCATTER_FCS" },
	{ IBV_DEVICE_PCI_WRITE_END_PADDING, "PCI_WRITE_END_PADDING" },
	/* Kernel-internal flags that kernels before 5.19 leaked to user space. */
	{ 1ULL << 15, "LOCAL_DMA_LKEY(old-kernel)" },
	{ 1ULL << 19, "UD_TSO(old-kernel)" },
	{ 1ULL << 22, "BLOCK_MULTICAST_LOOPBACK(old-kernel)" },
	{ LEGACY_CROSS_CHANNEL, "CROSS_CHANNEL(old-kernel)" },
	{ 1ULL << 30, "INTEGRITY_HANDOVER(old-kernel)" },
	{ 1ULL << 31, "ON_DEMAND_PAGING(old-kernel)" },
	{ 1ULL << 32, "SG_GAPS_REG(old-kernel)" },
	{ 1ULL << 33, "VIRTUAL_FUNCTION(old-kernel)" },
};

static const struct flag_name odp_general_names[] = {
	{ IBV_ODP_SUPPORT, "ODP_SUPPORT" },
	{ IBV_ODP_SUPPORT_IMPLICIT, "ODP_SUPPORT_IMPLICIT" },
};

static const struct flag_name odp_transport_names[] = {
	{ IBV_ODP_SUPPORT_SEND, "SEND" },
	{ IBV_ODP_SUPPORT_RECV, "RECV" },
	{ IBV_ODP_SUPPORT_WRITE, "WRITE" },
	{ IBV_ODP_SUPPORT_READ, "READ" },
	{ IBV_ODP_SUPPORT_ATOMIC, "ATOMIC" },
	{ IBV_ODP_SUPPORT_SRQ_RECV, "SRQ_RECV" },
};

/* supported_qpts masks are indexed by enum ibv_qp_type. */
static const struct flag_name qpt_names[] = {
	{ 1ULL << IBV_QPT_RC, "RC" },
	{ 1ULL << IBV_QPT_UC, "UC" },
	{ 1ULL << IBV_QPT_UD, "UD" },
	{ 1ULL << IBV_QPT_RAW_PACKET, "RAW_PACKET" },
	{ 1ULL << IBV_QPT_XRC_SEND, "XRC_SEND" },
	{ 1ULL << IBV_QPT_XRC_RECV, "XRC_RECV" },
};

static const struct flag_name raw_packet_names[] = {
	{ IBV_RAW_PACKET_CAP_CVLAN_STRIPPING, "CVLAN_STRIPPING" },
	{ IBV_RAW_PACKET_CAP_SCATTER_FCS, "SCATTER_FCS" },
	{ IBV_RAW_PACKET_CAP_IP_CSUM, "IP_CSUM" },
	{ IBV_RAW_PACKET_CAP_DELAY_DROP, "DELAY_DROP" },
};

static const struct flag_name pci_atomic_names[] = {
	{ IBV_PCI_ATOMIC_OPERATION_4_BYTE_SIZE_SUP, "4B" },
	{ IBV_PCI_ATOMIC_OPERATION_8_BYTE_SIZE_SUP, "8B" },
	{ IBV_PCI_ATOMIC_OPERATION_16_BYTE_SIZE_SUP, "16B" },
};

static const struct flag_name port_cap_names[] = {
	{ IBV_PORT_SM, "SM" },
	{ IBV_PORT_NOTICE_SUP, "NOTICE_SUP" },
	{ IBV_PORT_TRAP_SUP, "TRAP_SUP" },
	{ IBV_PORT_OPT_IPD_SUP, "OPT_IPD_SUP" },
	{ IBV_PORT_AUTO_MIGR_SUP, "AUTO_MIGR_SUP" },
	{ IBV_PORT_SL_MAP_SUP, "SL_MAP_SUP" },
	{ IBV_PORT_MKEY_NVRAM, "MKEY_NVRAM" },
	{ IBV_PORT_PKEY_NVRAM, "PKEY_NVRAM" },
	{ IBV_PORT_LED_INFO_SUP, "LED_INFO_SUP" },
	{ IBV_PORT_SYS_IMAGE_GUID_SUP, "SYS_IMAGE_GUID_SUP" },
	{ IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP, "PKEY_SW_EXT_PORT_TRAP_SUP" },
	{ IBV_PORT_EXTENDED_SPEEDS_SUP, "EXTENDED_SPEEDS_SUP" },
	{ IBV_PORT_CAP_MASK2_SUP, "CAP_MASK2_SUP" },
	{ IBV_PORT_CM_SUP, "CM_SUP" },
	{ IBV_PORT_SNMP_TUNNEL_SUP, "SNMP_TUNNEL_SUP" },
	{ IBV_PORT_REINIT_SUP, "REINIT_SUP" },
	{ IBV_PORT_DEVICE_MGMT_SUP, "DEVICE_MGMT_SUP" },
	{ IBV_PORT_VENDOR_CLASS_SUP, "VENDOR_CLASS_SUP" },
	{ IBV_PORT_DR_NOTICE_SUP, "DR_NOTICE_SUP" },
	{ IBV_PORT_CAP_MASK_NOTICE_SUP, "CAP_MASK_NOTICE_SUP" },
	{ IBV_PORT_BOOT_MGMT_SUP, "BOOT_MGMT_SUP" },
	{ IBV_PORT_LINK_LATENCY_SUP, "LINK_LATENCY_SUP" },
	{ IBV_PORT_CLIENT_REG_SUP, "CLIENT_REG_SUP" },
	{ IBV_PORT_IP_BASED_GIDS, "IP_BASED_GIDS" },
};

static const struct flag_name port_cap2_names[] = {
	{ IBV_PORT_SET_NODE_DESC_SUP, "SET_NODE_DESC_SUP" },
	{ IBV_PORT_INFO_EXT_SUP, "INFO_EXT_SUP" },
	{ IBV_PORT_VIRT_SUP, "VIRT_SUP" },
	{ IBV_PORT_SWITCH_PORT_STATE_TABLE_SUP, "SWITCH_PORT_STATE_TABLE_SUP" },
	{ IBV_PORT_LINK_WIDTH_2X_SUP, "LINK_WIDTH_2X_SUP" },
	{ IBV_PORT_LINK_SPEED_HDR_SUP, "LINK_SPEED_HDR_SUP" },
	{ IBV_PORT_LINK_SPEED_NDR_SUP, "LINK_SPEED_NDR_SUP" },
};

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
static void driver_of(const struct ibv_device *dev, const struct ibv_device_attr *a,
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

static void show_driver(const struct driver *d)
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
static void show_native_offloads(const struct driver *d, uint64_t cap_flags, bool verbose)
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

/* ---- device ----------------------------------------------------------- */

static void show_device_header(const struct ibv_device *dev, const struct ibv_device_attr_ex *ax)
{
	const struct ibv_device_attr *a = &ax->orig_attr;
	char buf[64];

	printf("hca_id: %s\n", dev->name);
	kv(1, "transport", "%s (%d)", transport_str(dev->transport_type), (int)dev->transport_type);
	kv(1, "fw_ver", "%s", a->fw_ver[0] ? a->fw_ver : "(none)");
	guid_str(a->node_guid, buf, sizeof(buf));
	kv(1, "node_guid", "%s", buf);
	guid_str(a->sys_image_guid, buf, sizeof(buf));
	kv(1, "sys_image_guid", "%s", buf);
	kv(1, "vendor_id", "0x%04x", a->vendor_id);
	kv(1, "vendor_part_id", "%u", a->vendor_part_id);
	kv(1, "hw_ver", "0x%x", a->hw_ver);
	if (sysfs_read(dev, "board_id", buf, sizeof(buf)))
		kv(1, "board_id", "%s", buf);
	kv(1, "phys_port_cnt", "%u", a->phys_port_cnt);
}

static void show_odp(const struct ibv_device_attr_ex *ax)
{
	const struct ibv_odp_caps *o = &ax->odp_caps;

	kv_flags(1, "odp_caps", o->general_caps, odp_general_names, N_ELEM(odp_general_names));
	kv_flags(2, "rc_odp_caps", o->per_transport_caps.rc_odp_caps, odp_transport_names,
		 N_ELEM(odp_transport_names));
	kv_flags(2, "uc_odp_caps", o->per_transport_caps.uc_odp_caps, odp_transport_names,
		 N_ELEM(odp_transport_names));
	kv_flags(2, "ud_odp_caps", o->per_transport_caps.ud_odp_caps, odp_transport_names,
		 N_ELEM(odp_transport_names));
	kv_flags(2, "xrc_odp_caps", ax->xrc_odp_caps, odp_transport_names, N_ELEM(odp_transport_names));
}

static void show_device_limits(const struct ibv_device_attr *a)
{
	kv(1, "max_mr_size", "0x%" PRIx64, a->max_mr_size);
	kv(1, "page_size_cap", "0x%" PRIx64, a->page_size_cap);
	kv(1, "max_qp", "%d", a->max_qp);
	kv(1, "max_qp_wr", "%d", a->max_qp_wr);
	kv(1, "max_sge", "%d", a->max_sge);
	kv(1, "max_sge_rd", "%d", a->max_sge_rd);
	kv(1, "max_cq", "%d", a->max_cq);
	kv(1, "max_cqe", "%d", a->max_cqe);
	kv(1, "max_mr", "%d", a->max_mr);
	kv(1, "max_pd", "%d", a->max_pd);
	kv(1, "max_mw", "%d", a->max_mw);
	kv(1, "max_ah", "%d", a->max_ah);
	kv(1, "max_srq", "%d", a->max_srq);
	kv(1, "max_srq_wr", "%d", a->max_srq_wr);
	kv(1, "max_srq_sge", "%d", a->max_srq_sge);
	kv(1, "max_qp_rd_atom", "%d", a->max_qp_rd_atom);
	kv(1, "max_qp_init_rd_atom", "%d", a->max_qp_init_rd_atom);
	kv(1, "max_res_rd_atom", "%d", a->max_res_rd_atom);
	kv(1, "atomic_cap", "%s (%d)", atomic_cap_str(a->atomic_cap), (int)a->atomic_cap);
	kv(1, "max_mcast_grp", "%d", a->max_mcast_grp);
	kv(1, "max_mcast_qp_attach", "%d", a->max_mcast_qp_attach);
	kv(1, "max_total_mcast_qp_attach", "%d", a->max_total_mcast_qp_attach);
	kv(1, "max_raw_ipv6_qp", "%d", a->max_raw_ipv6_qp);
	kv(1, "max_raw_ethy_qp", "%d", a->max_raw_ethy_qp);
	kv(1, "max_pkeys", "%u", a->max_pkeys);
	kv(1, "local_ca_ack_delay", "%u", a->local_ca_ack_delay);
}

static void show_device_ex(const struct ibv_device_attr_ex *ax)
{
	kv(1, "completion_ts_mask", "0x%" PRIx64 "%s", ax->completion_timestamp_mask,
	   ax->completion_timestamp_mask ? "" : " (no completion timestamps)");
	kv(1, "hca_core_clock", "%" PRIu64 " kHz%s", ax->hca_core_clock,
	   ax->hca_core_clock ? "" : " (not reported)");
	kv(1, "max_tso", "%u", ax->tso_caps.max_tso);
	kv_flags(2, "tso qp types", ax->tso_caps.supported_qpts, qpt_names, N_ELEM(qpt_names));
	kv(1, "rss max_ind_tables", "%u", ax->rss_caps.max_rwq_indirection_tables);
	kv(1, "rss max_ind_tbl_size", "%u", ax->rss_caps.max_rwq_indirection_table_size);
	kv_flags(2, "rss qp types", ax->rss_caps.supported_qpts, qpt_names, N_ELEM(qpt_names));
	kv(1, "max_wq_type_rq", "%u", ax->max_wq_type_rq);
	kv(1, "qp_rate_limit", "%u..%u kbps", ax->packet_pacing_caps.qp_rate_limit_min,
	   ax->packet_pacing_caps.qp_rate_limit_max);
	kv_flags(1, "raw_packet_caps", ax->raw_packet_caps, raw_packet_names, N_ELEM(raw_packet_names));
	kv(1, "tag matching", "%s (max_num_tags %u, max_ops %u, max_sge %u, max_rndv_hdr %u)",
	   (ax->tm_caps.flags & IBV_TM_CAP_RC) ? "RC" : "none", ax->tm_caps.max_num_tags,
	   ax->tm_caps.max_ops, ax->tm_caps.max_sge, ax->tm_caps.max_rndv_hdr_size);
	kv(1, "cq moderation", "max_count %u, max_period %u us", ax->cq_mod_caps.max_cq_count,
	   ax->cq_mod_caps.max_cq_period);
	kv(1, "max_dm_size", "%" PRIu64, ax->max_dm_size);
	kv_flags(1, "pci fetch_add", ax->pci_atomic_caps.fetch_add, pci_atomic_names,
		 N_ELEM(pci_atomic_names));
	kv_flags(1, "pci swap", ax->pci_atomic_caps.swap, pci_atomic_names, N_ELEM(pci_atomic_names));
	kv_flags(1, "pci compare_swap", ax->pci_atomic_caps.compare_swap, pci_atomic_names,
		 N_ELEM(pci_atomic_names));
	if (ax->phys_port_cnt_ex)
		kv(1, "phys_port_cnt_ex", "%u", ax->phys_port_cnt_ex);
}

static void show_device_verbose(struct ibv_context *ctx, const struct ibv_device_attr_ex *ax,
				uint64_t cap_flags)
{
	kv(1, "node_type", "%s", ibv_node_type_str(ctx->device->node_type));
	kv(1, "num_comp_vectors", "%d", ctx->num_comp_vectors);
	show_device_limits(&ax->orig_attr);
	kv_flags(1, "device_cap_flags", cap_flags, dev_cap_names, N_ELEM(dev_cap_names));
	show_odp(ax);
	show_device_ex(ax);
}

/* ---- port ------------------------------------------------------------- */

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

static void show_port_verbose(const struct ibv_port_attr *pa)
{
	kv(2, "phys_state", "%s (%u)", phys_state_str(pa->phys_state), pa->phys_state);
	kv(2, "active_width", "%s (%u)", width_str(pa->active_width), pa->active_width);
	kv(2, "active_speed", "%s (%u)", speed_str(pa->active_speed), pa->active_speed);
	kv(2, "max_msg_sz", "0x%x", pa->max_msg_sz);
	kv(2, "gid_tbl_len", "%d", pa->gid_tbl_len);
	kv(2, "pkey_tbl_len", "%u", pa->pkey_tbl_len);
	kv(2, "port_lid", "%u", pa->lid);
	kv(2, "port_lmc", "0x%02x", pa->lmc);
	kv(2, "sm_lid", "%u", pa->sm_lid);
	kv(2, "sm_sl", "%u", pa->sm_sl);
	kv(2, "max_vl_num", "%u", pa->max_vl_num);
	kv(2, "subnet_timeout", "%u", pa->subnet_timeout);
	kv(2, "init_type_reply", "%u", pa->init_type_reply);
	kv(2, "bad_pkey_cntr", "%u", pa->bad_pkey_cntr);
	kv(2, "qkey_viol_cntr", "%u", pa->qkey_viol_cntr);
	kv_flags(2, "port_cap_flags", pa->port_cap_flags, port_cap_names, N_ELEM(port_cap_names));
	kv_flags(2, "port_cap_flags2", pa->port_cap_flags2, port_cap2_names, N_ELEM(port_cap2_names));
	kv(2, "grh_required", "%s", (pa->flags & IBV_QPF_GRH_REQUIRED) ? "yes" : "no");
}

static int show_port(struct ibv_context *ctx, uint8_t port, bool verbose)
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
	kv(2, "max_mtu", "%d (%d)", emunic_mtu_bytes(pa.max_mtu), (int)pa.max_mtu);
	kv(2, "active_mtu", "%d (%d)", emunic_mtu_bytes(pa.active_mtu), (int)pa.active_mtu);
	kv(2, "link_layer", "%s", link_layer_str(pa.link_layer));
	if (verbose)
		show_port_verbose(&pa);
	return show_gids(ctx, port, &pa);
}

/* Prints one device; 0 if it could be queried, 1 if not. */
static int show_device(struct ibv_device *dev, bool verbose)
{
	struct ibv_device_attr_ex ax;
	struct ibv_context *ctx;
	struct driver drv;
	uint64_t cap_flags;
	int ret = 0, err;
	uint8_t p;

	ctx = ibv_open_device(dev);
	if (!ctx) {
		fprintf(stderr, PROG ": %s: cannot open device: %s (check /dev/infiniband permissions)\n",
			ibv_get_device_name(dev), strerror(errno));
		return 1;
	}
	memset(&ax, 0, sizeof(ax));
	err = ibv_query_device_ex(ctx, NULL, &ax);
	if (err) {
		fprintf(stderr, PROG ": %s: ibv_query_device_ex: %s\n", ibv_get_device_name(dev), strerror(err));
		ibv_close_device(ctx);
		return 1;
	}
	/* The _ex flags hold all 64 bits; old kernels fill only the 32-bit ones. */
	cap_flags = ax.device_cap_flags_ex | ax.orig_attr.device_cap_flags;
	driver_of(dev, &ax.orig_attr, &drv);
	show_device_header(dev, &ax);
	show_driver(&drv);
	show_native_offloads(&drv, cap_flags, verbose);
	if (verbose)
		show_device_verbose(ctx, &ax, cap_flags);
	for (p = 1; p != 0 && p <= ax.orig_attr.phys_port_cnt; p++)	/* p wraps after 255 */
		ret |= show_port(ctx, p, verbose);
	ibv_close_device(ctx);
	return ret;
}

/* ---- device selection and options ------------------------------------- */

static void list_names(struct ibv_device **list, int n, char *buf, size_t len)
{
	size_t off = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
					ibv_get_device_name(list[i]));
}

static int show_devices(const struct opts *o)
{
	struct ibv_device **list;
	int n = 0, i, ret = 0;
	bool found = false;

	list = ibv_get_device_list(&n);
	if (!list && errno != ENOSYS) {
		fprintf(stderr, PROG ": ibv_get_device_list: %s\n", strerror(errno));
		return 1;
	}
	if (!list || n == 0) {
		fprintf(stderr, PROG ": no RDMA devices found: load rdma_rxe and run "
			"'rdma link add rxe0 type rxe netdev <if>', or run inside the emunic guest "
			"(guest-images/guest.py)\n");
		if (list)
			ibv_free_device_list(list);
		return 1;
	}
	for (i = 0; i < n; i++) {
		if (o->device && strcmp(ibv_get_device_name(list[i]), o->device))
			continue;
		if (found)
			putchar('\n');
		found = true;
		ret |= show_device(list[i], o->verbose);
	}
	if (!found) {
		char names[512];

		list_names(list, n, names, sizeof(names));
		fprintf(stderr, PROG ": no RDMA device named '%s' (%s); devices here: %s\n",
			o->device, o->device_from, names);
		ret = 1;
	}
	ibv_free_device_list(list);
	return ret;
}

static const char usage_text[] =
"NAME\n"
"    emunic-info - show RDMA devices, ports and GIDs, and what emunic will use\n"
"\n"
"SYNOPSIS\n"
"    emunic-info [-v] [-d NAME]\n"
"    emunic-info -h\n"
"\n"
"DESCRIPTION\n"
"    Lists the verbs devices on this machine in the style of ibv_devinfo(1):\n"
"    per device its transport, GUIDs, firmware, vendor ids and port count;\n"
"    per port its state, MTUs, link layer and GID table (index, type, GID,\n"
"    netdev).  The GID an emunic rank would use on the port (RoCEv2 with an\n"
"    IPv4-mapped address on Ethernet, the port GID on InfiniBand) is marked\n"
"    '<- emunic uses this'.\n"
"\n"
"    The 'native offloads' line says which of the offloads emunic provides\n"
"    (management queues with WAIT/SEND_EN/RECV_EN, counter-triggered\n"
"    operations) the device has natively.  rxe and siw have none; the emunic\n"
"    progress core emulates them.  On mlx5 upstream rdma-core does not expose\n"
"    cross-channel, so the answer is 'unknown' unless an old kernel reports it.\n"
"\n"
"OPTIONS\n"
"    -d, --device NAME\n"
"        Show only device NAME (as in 'rdma link' or ibv_devices(1)).\n"
"    -v, --verbose\n"
"        Also show device limits (max_qp, max_qp_wr, max_cq, max_cqe, max_mr,\n"
"        max_sge, max_qp_rd_atom, ...), decoded capability flags, ODP, TSO, RSS,\n"
"        tag-matching and PCI atomic capabilities, and per-port speed, width,\n"
"        LIDs, max_msg_sz and capability flags.\n"
"    -h, --help\n"
"        Show this text and exit.\n"
"\n"
"EXIT STATUS\n"
"    0   success.\n"
"    1   no RDMA device exists, the named device does not exist, or a device\n"
"        or port could not be queried.\n"
"    2   bad usage.\n"
"\n"
"ENVIRONMENT\n"
"    EMUNIC_DEVICE\n"
"        Device to show when -d is not given (the device emunic ranks use).\n"
"\n"
"EXAMPLES\n"
"    emunic-info\n"
"        All devices; check that the port is PORT_ACTIVE and a GID is marked.\n"
"    emunic-info -d rxe0 -v\n"
"        Everything about rxe0.\n"
"    sudo rdma link add rxe0 type rxe netdev eth0 && emunic-info\n"
"        Create a Soft-RoCE device on eth0, then look at it.\n"
"    guest-images/guest.py -- build/bin/emunic-info -v\n"
"        Run it in the emunic test guest, where rxe0 exists.\n";

static int usage_error(void)
{
	fprintf(stderr, "Try '" PROG " --help' for more information.\n");
	return 2;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env = getenv("EMUNIC_DEVICE");
	int c;

	memset(o, 0, sizeof(*o));
	if (env && *env) {
		o->device = env;
		o->device_from = "from EMUNIC_DEVICE";
	}
	opterr = 0;	/* our own messages, prefixed like every other one */
	while ((c = getopt_long(argc, argv, ":d:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o->device = optarg;
			o->device_from = "from -d";
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case ':':
			fprintf(stderr, PROG ": option '%s' needs an argument\n", argv[optind - 1]);
			return usage_error();
		default:
			if (optopt)
				fprintf(stderr, PROG ": unknown option '-%c'\n", optopt);
			else
				fprintf(stderr, PROG ": unknown option '%s'\n", argv[optind - 1]);
			return usage_error();
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
		return usage_error();
	}
	if (o->device && !*o->device) {
		fprintf(stderr, PROG ": empty device name\n");
		return usage_error();
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct opts o;
	int ret = parse_args(argc, argv, &o);

	if (ret >= 0)
		return ret;
	ret = show_devices(&o);
	if (fflush(stdout) == EOF) {
		perror(PROG ": stdout");
		ret = 1;
	}
	return ret;
}
