/* SPDX-License-Identifier: MIT */
/*
 * The bootstrap channel between a rank and emunic-run: one TCP connection a
 * rank, framed messages of a fixed header and len payload bytes.  Both ends
 * are this build on one architecture, so fields are in host order.
 */
#ifndef EMUNIC_BOOT_WIRE_H
#define EMUNIC_BOOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

enum emunic_boot_msg_type {
	EMUNIC_BOOT_HELLO = 1,	/* rank -> launcher: rank joins */
	EMUNIC_BOOT_ALLGATHER,	/* rank -> launcher: this rank's share */
	EMUNIC_BOOT_RESULT,	/* launcher -> rank: every share, by rank */
	EMUNIC_BOOT_FINALIZE,	/* rank -> launcher: done with the channel */
	EMUNIC_BOOT_ERROR,	/* launcher -> rank: payload is the reason */
	EMUNIC_BOOT_NODE_HELLO,	/* node launcher -> server: node joins */
	EMUNIC_BOOT_NODE_FAIL,	/* node launcher -> server: payload is the reason */
	EMUNIC_BOOT_NODE_DONE,	/* node launcher -> server: all its ranks exited 0 */
	EMUNIC_BOOT_ABORT,	/* server -> node launcher: kill your ranks */
};

struct emunic_boot_msg {
	uint32_t type;
	int32_t rank;		/* the sender's rank, or node index */
	uint64_t len;		/* payload bytes that follow */
};

#define EMUNIC_BOOT_MAX_PAYLOAD (64u << 20)

/* Full-length I/O on a blocking socket; -errno or -ECONNRESET on EOF.
 * timeout_ms < 0 waits forever. */
int emunic_wire_send(int fd, uint32_t type, int32_t rank, const void *buf, size_t len);
int emunic_wire_recv_hdr(int fd, struct emunic_boot_msg *m, int timeout_ms);
int emunic_wire_recv_body(int fd, void *buf, size_t len, int timeout_ms);
/* "host:port" -> a connected (connect=1) or listening socket. */
int emunic_wire_connect(const char *hostport, int timeout_ms);
int emunic_wire_listen(const char *host, char *bound, size_t boundlen);

#endif
