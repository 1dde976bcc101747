/* SPDX-License-Identifier: MIT */
/* emunic-info's options, --help, the devices it shows and one device's
 * block (see info.h). */
#include "info.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opts {
	const char *device;	/* NULL: all devices */
	const char *device_from;	/* "from -d" or "from EMUNIC_DEVICE", for messages */
	bool verbose;
	bool start;		/* open a one-rank emulated NIC on each device */
};

/* Prints one device; 0 if it could be queried (and with --start, started),
 * 1 if not. */
static int show_device(struct ibv_device *dev, const struct opts *o)
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
	printf("hca_id: %s\n", dev->name);
	show_driver(&drv);
	show_native_offloads(&drv, cap_flags, o->verbose);
	show_verdict(ctx, &ax.orig_attr);
	show_backend(ctx, &ax);
	if (o->verbose)
		show_qp_limits(&ax.orig_attr);
	for (p = 1; p != 0 && p <= ax.orig_attr.phys_port_cnt; p++)	/* p wraps after 255 */
		ret |= show_port(ctx, p);
	ibv_close_device(ctx);
	if (o->start) {
		fflush(stdout);		/* the library's messages go to stderr */
		ret |= try_start(dev->name);
	}
	kv(1, "more", "ibv_devinfo -d %s -v", dev->name);
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
	show_accelerator();
	if (o->verbose)
		show_settings();
	for (i = 0; i < n; i++) {
		if (o->device && strcmp(ibv_get_device_name(list[i]), o->device))
			continue;
		putchar('\n');
		found = true;
		ret |= show_device(list[i], o);
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
"    emunic-info - what emunic makes of this machine's RDMA devices\n"
"\n"
"SYNOPSIS\n"
"    emunic-info [-v] [-s] [-d NAME]\n"
"    emunic-info -h\n"
"\n"
"DESCRIPTION\n"
"    Says what only emunic can say of the verbs devices here; ibv_devinfo(1)\n"
"    says the rest (firmware, GUIDs, every limit and capability flag), and\n"
"    each device block ends with the command that shows it ('more:').\n"
"\n"
"    First the accelerator the CPU runs under (KVM, QEMU's TCG, none), which\n"
"    decides what emunic's timings mean.  Per device: its driver (rxe and siw\n"
"    with the netdev under them), which of emunic's offloads (management\n"
"    queues with WAIT/SEND_EN/RECV_EN, counter-triggered operations) it has\n"
"    natively ('native offloads': rxe and siw have none, the emunic progress\n"
"    core emulates them; on mlx5 upstream rdma-core does not expose\n"
"    cross-channel, so the answer is 'unknown' unless an old kernel reports\n"
"    it), whether the emulated NIC can start on it ('emulated NIC': an ACTIVE\n"
"    port, a usable GID, emunic's QP sizes within the device's limits), and\n"
"    per port its state, active MTU, link layer and GID table (index, type,\n"
"    GID, netdev), the GID an emunic rank would use marked '<- emunic uses\n"
"    this' (RoCEv2 with an IPv4-mapped address on Ethernet, the port GID on\n"
"    InfiniBand).\n"
"\n"
"OPTIONS\n"
"    -d, --device NAME\n"
"        Show only device NAME (as in 'rdma link' or ibv_devices(1)).\n"
"    -v, --verbose\n"
"        Also show the settings the library reads from the environment\n"
"        (EMUNIC_LIST_TASKS, EMUNIC_IDLE, EMUNIC_CPU, ...) and, per device,\n"
"        the sizes of emunic's QPs against the device's limits.\n"
"    -s, --start\n"
"        Start the emulated NIC on each device shown, as a one-rank job\n"
"        would (emunic_dev_open: device, CQ, command ring, progress core),\n"
"        say how it went, and close it.\n"
"    -h, --help\n"
"        Show this text and exit.\n"
"\n"
"EXIT STATUS\n"
"    0   success.\n"
"    1   no RDMA device exists, the named device does not exist, a device\n"
"        or port could not be queried, or (--start) the emulated NIC did not\n"
"        start.\n"
"    2   bad usage.\n"
"\n"
"ENVIRONMENT\n"
"    EMUNIC_DEVICE\n"
"        Device to show when -d is not given (the device emunic ranks use).\n"
"\n"
"EXAMPLES\n"
"    emunic-info\n"
"        All devices; check that the port is PORT_ACTIVE and a GID is marked.\n"
"    emunic-info -d rxe0 -v -s\n"
"        Everything emunic says of rxe0, and a real start of its NIC.\n"
"    ibv_devinfo -d rxe0 -v\n"
"        Everything else about rxe0.\n"
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
		{ "start", no_argument, NULL, 's' },
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
	while ((c = getopt_long(argc, argv, ":d:vsh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o->device = optarg;
			o->device_from = "from -d";
			break;
		case 'v':
			o->verbose = true;
			break;
		case 's':
			o->start = true;
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
