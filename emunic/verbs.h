/* SPDX-License-Identifier: MIT */
/*
 * The verbs layer under the progress core: the device a rank uses (context,
 * PD, port, GID) and RC connections to peers made through librdmacm.
 * Private to emunic/, its tools and its transport tests; engines never
 * include it (they use emunic.h).
 */
#ifndef EMUNIC_VERBS_H
#define EMUNIC_VERBS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "emunic.h"
#include "shim/shim.h"

/* The RoCEv2 GID whose address is an IPv4-mapped IPv6 address (::ffff:a.b.c.d)
 * is the one rdma_cm and rxe use (index 1 on rxe). */
bool emunic_gid_is_ipv4_mapped(const union ibv_gid *gid);
void emunic_gid_str(const union ibv_gid *gid, char *buf, size_t len);
const char *emunic_gid_type_str(enum ibv_gid_type t);
/* Chooses the GID to use on a port: RoCEv2 IPv4-mapped on Ethernet, 0 on IB
 * and on iWARP (its only one, the MAC).  -ENOENT when the port has none. */
int emunic_gid_pick(struct ibv_context *ctx, uint8_t port, const struct ibv_port_attr *pa,
		    struct ibv_gid_entry *out);
const char *emunic_port_state_str(enum ibv_port_state s);
int emunic_mtu_bytes(enum ibv_mtu m);

struct emunic_vdev {
	struct ibv_context *ctx;	/* librdmacm's context for this device */
	struct ibv_pd *pd;
	uint8_t port;
	struct ibv_port_attr port_attr;
	struct ibv_device_attr_ex attr;
	struct ibv_gid_entry gid;
	struct sockaddr_in addr;	/* IPv4 address behind the GID */
	char name[IBV_SYSFS_NAME_MAX];
	/* The data path and the capabilities (shim/shim.h): every post and
	 * poll on this device goes through shim's ops, never verbs directly. */
	struct emunic_shim shim;
};

/*
 * Opens a device by name; NULL means $EMUNIC_DEVICE, else the first device
 * with an ACTIVE port.  Takes the context from librdmacm so that QPs made
 * by rdma_cm share this PD.  -ENODEV (no RDMA device, or no such device),
 * -ENETDOWN (no active port), -EADDRNOTAVAIL (no usable GID); the backend
 * is chosen here ($EMUNIC_BACKEND): -ENOTSUP (mlx5 forced on a device that
 * cannot), -EINVAL (a malformed value).
 */
int emunic_vdev_open(const char *name, struct emunic_vdev **out);
/* The name of the device emunic_vdev_open(NULL) would open, without opening
 * it: 0, -ENODEV (no RDMA device), -ENETDOWN (none with an ACTIVE port). */
int emunic_vdev_pick(char *out, size_t len);
void emunic_vdev_close(struct emunic_vdev *dev);

/* ---- iWARP (emunic/iwarp.c) -------------------------------------------- */

/* siw and iWARP NICs: the GID is the netdev's MAC, the iWARP CM moves the
 * QP to RTS itself on connect and accept. */
bool emunic_ctx_is_iwarp(struct ibv_context *ctx);
/* The IPv4 address of the interface whose MAC is the first six bytes of an
 * iWARP GID: 0, or -EADDRNOTAVAIL. */
int emunic_iwarp_addr(const union ibv_gid *gid, struct in_addr *out);
/* On siw, once per context: keeps any queue of emunic's from the one mmap
 * key libsiw cannot take (iwarp.c says why). */
void emunic_siw_key_guard(const struct emunic_shim *s, struct ibv_context *ctx,
			  const struct ibv_device_attr_ex *attr);
/* emunic_dev_lacks() (emunic.h, EMUNIC_LACKS_*) of the verbs device. */
const char *emunic_vdev_lacks(const struct emunic_vdev *d, unsigned what);

/* ---- RC connections through librdmacm ---------------------------------- */

/* Transport settings of every QP a mesh makes. */
struct emunic_qp_opts {
	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_sge, max_inline;
	uint8_t retry_cnt;	/* transport retries; 7 = forever on rxe */
	uint8_t rnr_retry;	/* RNR NAK retries; 7 = forever */
	uint8_t timeout;	/* local ACK timeout, 4.096 us * 2^timeout */
	uint8_t min_rnr_timer;
	uint8_t rd_atomic;	/* outstanding READ/atomic, each direction */
};
void emunic_qp_opts_default(struct emunic_qp_opts *o);

/* Private data of a connection request: who asks, for which of its QPs. */
#define EMUNIC_CONN_MAGIC 0x656d6e63u	/* "emnc" */
struct emunic_conn_hello {
	uint32_t magic;
	int32_t rank;
	int32_t index;		/* the k-th QP between the two ranks, or 1 << 30 | its pair key */
	uint32_t flags;		/* EMUNIC_HELLO_* */
	/* Reconnection (emunic/cm/reconnect.c): the connection being made,
	 * the sender's last ones that came up and that it joined, and how many
	 * writes-with-immediate arrived on the latest connection anything
	 * arrived on. */
	uint64_t conn;
	uint64_t last_up;
	uint64_t joined;	/* the sender's last connection accepted or answered */
	uint64_t rx_conn, rx_count;
};
/* rdma_cm carries 56 bytes of private data in a request (RC, TCP port space). */
_Static_assert(sizeof(struct emunic_conn_hello) <= 56, "the hello fits a connection request");
#define EMUNIC_HELLO_ON_DEMAND (1u << 0)	/* request: either side may connect */
#define EMUNIC_HELLO_YIELD (1u << 1)		/* reject: connect to me, my request is coming */
#define EMUNIC_HELLO_RECONNECT (1u << 2)	/* request: the pair's connection failed, again */
#define EMUNIC_HELLO_GONE (1u << 3)		/* reject: that QP is gone or failed for good */
/* Moves qp to INIT, RTR or RTS from rdma_init_qp_attr() with o's settings,
 * through the device interface s. */
int emunic_cm_qp_move(const struct emunic_shim *s, struct rdma_cm_id *id, struct ibv_qp *qp,
		      const struct emunic_qp_opts *o, enum ibv_qp_state to, int peer);
void emunic_cm_params(const struct emunic_qp_opts *o, uint32_t qpn, struct emunic_conn_hello *h,
		      struct rdma_conn_param *p);

struct emunic_conn {
	int peer;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	bool up;
};

/*
 * Connections from one rank to the others.  The mesh listens on the device's
 * address; emunic_mesh_open() exchanges every rank's (address, port) through
 * the bootstrap.  The lower rank of a pair accepts, the higher one connects,
 * so both sides connecting at once cannot make two QPs.  QPs are made here
 * (not by rdma_create_qp) so their retry and timeout settings are ours.
 */
struct emunic_mesh {
	struct emunic_vdev *dev;
	int rank, size;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	struct sockaddr_in *addr;	/* by rank */
	struct emunic_conn *conn;	/* by rank; conn[rank] unused */
	struct ibv_cq *send_cq, *recv_cq;
	struct emunic_qp_opts opts;
	int pending;			/* connections not yet up */
};

int emunic_mesh_open(struct emunic_vdev *dev, struct emunic_boot *boot, const struct emunic_qp_opts *o,
		     struct ibv_cq *send_cq, struct ibv_cq *recv_cq, struct emunic_mesh **out);
/* Static full mesh: connects every pair; -ETIMEDOUT names the missing peers. */
int emunic_mesh_connect_all(struct emunic_mesh *m, int timeout_ms);
void emunic_mesh_close(struct emunic_mesh *m);

#endif
