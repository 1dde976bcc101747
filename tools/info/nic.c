/* SPDX-License-Identifier: MIT */
/* The emulated NIC: the accelerator the CPU runs under, the settings the
 * library reads, whether it can start on a device (and, --start, starting
 * it), and its QPs' sizes against the device's limits. */
#include "info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* ---- the machine: the accelerator the CPU runs under ------------------ */

/*
 * Where the progress core's CPU time comes from decides what emunic's timings
 * mean: under QEMU's TCG every instruction is emulated (see the README's
 * accelerator section).  The hypervisor says who it is in CPUID leaf
 * 0x40000000 when CPUID.1:ECX bit 31 says there is one.
 */
void show_accelerator(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	char sig[13];

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 31))) {
		kv(0, "accelerator", "none: no hypervisor (bare metal)");
		return;
	}
	__cpuid(0x40000000, a, b, c, d);
	memcpy(sig, &b, 4);
	memcpy(sig + 4, &c, 4);
	memcpy(sig + 8, &d, 4);
	sig[12] = '\0';
	if (!strcmp(sig, "KVMKVMKVM"))
		kv(0, "accelerator", "KVM (hypervisor signature '%s')", sig);
	else if (!strcmp(sig, "TCGTCGTCGTCG"))
		kv(0, "accelerator", "TCG: QEMU software emulation (hypervisor signature '%s'); "
		   "compare ratios, not times", sig);
	else if (sig[0])
		kv(0, "accelerator", "a hypervisor that signs '%s'", sig);
	else
		kv(0, "accelerator", "a hypervisor that gives no signature");
#else
	kv(0, "accelerator", "unknown (told only on x86)");
#endif
}

/* ---- whether the emulated NIC can start -------------------------------- */

/* The port emunic_vdev_open() takes: the first ACTIVE one, or 0. */
static uint8_t active_port(struct ibv_context *ctx, const struct ibv_device_attr *a, struct ibv_port_attr *pa)
{
	for (uint8_t p = 1; p != 0 && p <= a->phys_port_cnt; p++)	/* p wraps after 255 */
		if (!ibv_query_port(ctx, p, pa) && pa->state == IBV_PORT_ACTIVE)
			return p;
	return 0;
}

/* emunic_vdev_open()'s tests (an ACTIVE port, a usable GID, an address on
 * InfiniBand), then its QPs' sizes against the device's limits; "" when
 * everything passes, with the port and GID in *port, *gid. */
static void start_verdict(struct ibv_context *ctx, const struct ibv_device_attr *a, char *why, size_t len,
			  uint8_t *port, struct ibv_gid_entry *gid)
{
	struct emunic_qp_opts q;
	struct ibv_port_attr pa;
	struct in_addr in;
	uint8_t p = active_port(ctx, a, &pa);

	emunic_qp_opts_default(&q);
	why[0] = '\0';
	*port = p;
	if (!p)
		snprintf(why, len, "no ACTIVE port (check `rdma link` and the netdev)");
	else if (emunic_gid_pick(ctx, p, &pa, gid))
		snprintf(why, len, "port %u has no RoCEv2 GID with an IPv4-mapped address (give the netdev an "
			 "IPv4 address)", p);
	else if (emunic_ctx_is_iwarp(ctx) && !getenv("EMUNIC_ADDR") && emunic_iwarp_addr(&gid->gid, &in))
		snprintf(why, len, "port %u is iWARP and its netdev has no IPv4 address (or set EMUNIC_ADDR)", p);
	else if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND && !getenv("EMUNIC_ADDR"))
		snprintf(why, len, "port %u is InfiniBand: set EMUNIC_ADDR to this node's IPoIB address", p);
	else if ((uint32_t)a->max_qp_wr < q.max_send_wr || (uint32_t)a->max_qp_wr < q.max_recv_wr)
		snprintf(why, len, "its QPs take %u work requests a queue, the device %d", q.max_send_wr,
			 a->max_qp_wr);
	else if ((uint32_t)a->max_sge < q.max_sge)
		snprintf(why, len, "its QPs take %u SGEs, the device %d", q.max_sge, a->max_sge);
	else if ((uint32_t)a->max_qp_rd_atom < q.rd_atomic || (uint32_t)a->max_qp_init_rd_atom < q.rd_atomic)
		snprintf(why, len, "its QPs keep %u reads in flight, the device %d", q.rd_atomic, a->max_qp_rd_atom);
}

void show_verdict(struct ibv_context *ctx, const struct ibv_device_attr *a)
{
	struct ibv_gid_entry gid;
	char why[256];
	uint8_t port;

	start_verdict(ctx, a, why, sizeof(why), &port, &gid);
	if (why[0])
		kv(1, "emulated NIC", "cannot start: %s", why);
	else
		kv(1, "emulated NIC", "can start (port %u, GID [%u]; --start tries it)", port, gid.gid_index);
}

/* What the device cannot do of what emunic's engines use, in words, from
 * the capability bits the device interface read (the bits
 * emunic_dev_lacks() reads). */
static void show_lacks(uint32_t caps)
{
	static const uint32_t need[] = { EMUNIC_SHIM_CAP_ATOMIC, EMUNIC_SHIM_CAP_WRITE_IMM, EMUNIC_SHIM_CAP_RNR };
	char buf[96] = "";
	size_t off = 0;

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]) && off < sizeof(buf); i++)
		if (!(caps & need[i]))
			off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s", off ? ", " : "",
						emunic_shim_cap_what(need[i]));
	if (off)
		kv(1, "device lacks", "%s (the README's siw section: how each is handled)", buf);
}

/* The backend the device interface would take here ($EMUNIC_BACKEND, the
 * capability query) and the capabilities it reads, as emunic_vdev_open()
 * would see them. */
void show_backend(struct ibv_context *ctx, const struct ibv_device_attr_ex *ax)
{
	struct emunic_shim s;
	char caps[64];

	if (emunic_shim_open(&s, ctx, ax, getenv("EMUNIC_BACKEND")))
		kv(1, "device interface", "cannot open: %s", s.why);
	else {
		kv(1, "device interface", "backend %s (%s); capabilities %s", emunic_shim_backend_str(s.backend),
		   s.why, emunic_shim_caps_str(s.caps, caps, sizeof(caps)));
		show_lacks(s.caps);
	}
}

/* The sizes of emunic's QPs (emunic_qp_opts_default) against the device's. */
void show_qp_limits(const struct ibv_device_attr *a)
{
	struct emunic_qp_opts q;

	emunic_qp_opts_default(&q);
	kv(1, "emunic QPs", "RC, made by librdmacm; their sizes against the device's limits:");
	kv(2, "work requests", "%u send, %u receive a QP (max_qp_wr %d)", q.max_send_wr, q.max_recv_wr,
	   a->max_qp_wr);
	kv(2, "SGEs a request", "%u (max_sge %d)", q.max_sge, a->max_sge);
	kv(2, "reads in flight", "%u each way (max_qp_rd_atom %d, max_qp_init_rd_atom %d)", q.rd_atomic,
	   a->max_qp_rd_atom, a->max_qp_init_rd_atom);
	kv(2, "inline data", "%u bytes", q.max_inline);
	kv(2, "retries", "transport %u, RNR %u (7: for ever)", q.retry_cnt, q.rnr_retry);
}

/* --start: a one-rank job's emunic_dev_open() on this device (the verbs
 * device, its CQ, the command ring, the progress core), then the close. */
static int self_gather(void *ctx, const void *in, size_t len, void *out)
{
	(void)ctx;
	memcpy(out, in, len);
	return 0;
}

int try_start(const char *name)
{
	struct emunic_dev_attr attr;
	struct emunic_boot *boot;
	struct emunic_dev *dev;
	struct timespec t0, t1;
	int r = emunic_boot_init_custom(0, 1, self_gather, NULL, &boot);

	if (r) {
		kv(1, "started", "no: a one-rank bootstrap: %s", strerror(-r));
		return 1;
	}
	emunic_dev_attr_init(&attr);
	attr.device = name;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = emunic_dev_open(boot, &attr, &dev);
	if (r) {
		kv(1, "started", "no: emunic_dev_open: %s (the library says why on stderr)", strerror(-r));
		emunic_boot_fini(boot);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	kv(1, "started", "yes, in %.0f ms: a one-rank emulated NIC, longest task list %u, core %s when idle",
	   (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
	   emunic_dev_list_tasks(dev), emunic_dev_idle(dev) == EMUNIC_IDLE_SPIN ? "spins" : "sleeps");
	r = emunic_dev_close(dev);
	emunic_boot_fini(boot);
	if (r) {
		kv(1, "closed", "no: emunic_dev_close: %s", strerror(-r));
		return 1;
	}
	return 0;
}

/* ---- the settings the library reads from the environment --------------- */

static const struct setting {
	const char *name, *what;
} settings[] = {
	{ "EMUNIC_DEVICE", "the device a rank opens" },
	{ "EMUNIC_LIST_TASKS", "the longest task list an MQ post takes" },
	{ "EMUNIC_IDLE", "spin or sleep: the progress core when idle" },
	{ "EMUNIC_CPU", "the progress cores' CPUs, by local rank" },
	{ "EMUNIC_SINK_MBPS", "a slow receiver: fetched data drains at this rate" },
	{ "EMUNIC_FAULTS", "the fault spec every rank injects" },
	{ "EMUNIC_ADDR", "this node's IPoIB address (InfiniBand)" },
};

void show_settings(void)
{
	kv(0, "emunic settings", "from the environment; unset: the library's default");
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		const char *v = getenv(settings[i].name);

		kv(1, settings[i].name, "%s%s%s (%s)", v ? "'" : "unset", v ? v : "", v ? "'" : "", settings[i].what);
	}
}
