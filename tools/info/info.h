/* SPDX-License-Identifier: MIT */
/*
 * emunic-info: what emunic makes of this machine's verbs devices, and only
 * that; ibv_devinfo(1) says the rest (every device's attributes, limits and
 * flags), and each device block ends with the command that shows it.  First
 * the machine's accelerator (and with -v the settings the library reads
 * from the environment); per device the driver (rxe and siw with the netdev
 * under them), which of emunic's offloads it has natively, whether the
 * emulated NIC can start there (with -v emunic's QP sizes against the
 * device's limits; with --start a real one-rank start), and per port its
 * state and GID table with the GID emunic will use marked.
 *
 * Without --start it talks to libibverbs directly and never opens a device
 * the way a rank does (no PD, no librdmacm), so it works on ports that are
 * down and on devices emunic_vdev_open() would refuse.
 *
 * One file a job, calls pointing down this list:
 *   main.c    options, --help, the devices shown, one device's block
 *   device.c  the device as verbs sees it: driver, native offloads, ports, GIDs
 *   nic.c     the emulated NIC: accelerator, settings, can it start, QP sizes
 *   print.c   the "key:   value" lines
 */
#ifndef EMUNIC_INFO_H
#define EMUNIC_INFO_H

#include "emunic/verbs.h"

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#define PROG		"emunic-info"

struct driver {
	enum driver_kind { DRV_OTHER, DRV_RXE, DRV_SIW, DRV_MLX5 } kind;
	char name[64];		/* kernel driver, or a guess from the vendor id */
	char parent[IF_NAMESIZE + 1];	/* netdev under rxe/siw, "" if none */
};

/* print.c: "<tabs>key:<pad>value" lines, the value at one column. */
void kv(int lvl, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* device.c */
void driver_of(const struct ibv_device *dev, const struct ibv_device_attr *a, struct driver *d);
void show_driver(const struct driver *d);
void show_native_offloads(const struct driver *d, uint64_t cap_flags, bool verbose);
int show_port(struct ibv_context *ctx, uint8_t port);

/* nic.c */
void show_accelerator(void);
void show_settings(void);
void show_verdict(struct ibv_context *ctx, const struct ibv_device_attr *a);
void show_backend(struct ibv_context *ctx, const struct ibv_device_attr_ex *ax);
void show_qp_limits(const struct ibv_device_attr *a);
int try_start(const char *name);

#endif
