/* SPDX-License-Identifier: MIT */
/*
 * Private to emunic/cm, the connection unit: rdma_cm events and requests
 * (events.c), and each QP's connection as a state machine (qpconn.c), with
 * the reconnection rules in one place (reconnect.c).
 */
#ifndef EMUNIC_CM_H
#define EMUNIC_CM_H

#include "emunic/nic/nic.h"

/*
 * A QP's connection.  The states, as rxe's completer names its own:
 *   IDLE         not started
 *   CONNECTING   the first connection is being made (or a request awaited)
 *   UP           connected
 *   TEARDOWN     failed, to be made again; the failed verbs QP and id still
 *                exist (they go outside any CM event and the verbs poll)
 *   RECONNECTING failed and torn down; connecting again once there is work
 *                for the peer, or accepting the peer's request
 *   FAILED       failed for good: its work completes with the status
 * TEARDOWN and RECONNECTING are QP_DOWN to the rest of the engine.
 */
enum conn_state {
	CONN_IDLE,
	CONN_CONNECTING,
	CONN_UP,
	CONN_TEARDOWN,
	CONN_RECONNECTING,
	CONN_FAILED,
	CONN_STATES,
};

extern const char *const conn_state_name[CONN_STATES];

/* Connection ids are (connecting rank + 1) << 40 | its count, so both sides
 * name one alike. */
struct qp_conn {
	enum conn_state st;
	struct rdma_cm_id *id;
	struct rdma_cm_id *dead_id;	/* a failed attempt's id, destroyed outside its event */
	bool disconnected;		/* rdma_disconnect was called */
	bool passive;			/* id is a request we accepted */
	bool settled;			/* this reconnection's work was settled */
	unsigned left;			/* reconnections left before a failure is final */
	bool end_asked;			/* emunic_qp_disconnect: ends once up, never made again */
	unsigned first_tries;		/* first connection: rdma_connect refusals so far */
	int status;			/* what failed it */
	uint64_t seq;			/* connections this side started */
	uint64_t conn;			/* the current (or being made) connection */
	uint64_t up_conn;		/* the last one that came up here */
	uint64_t joined;		/* the last one accepted here or answered to us */
	uint64_t tx_conn;		/* where the tasks verbs holds went */
	uint64_t since_ns;		/* reconnecting with work waiting since */
	uint64_t next_try_ns;		/* after a failed attempt */
	bool busy;			/* in the unit's list of connections with work */
	struct emunic_qp *busy_next;
};

/* A connection request that came before the QP it is for was created. */
struct parked_req {
	struct rdma_cm_id *id;
	int peer, index;
	struct emunic_conn_hello h;	/* what it said */
	uint64_t due_ns;		/* delayed requests: when to look at it */
	struct parked_req *next;
};

struct cm_dev {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	struct sockaddr_in *addr;	/* every rank's listener */
	struct parked_req *parked;
	struct parked_req *delayed;	/* $EMUNIC_ACCEPT_DELAY_MS: requests held back */
	unsigned accept_delay_ms;
	struct emunic_qp *busy;		/* QPs whose connection has work to do */
	uint64_t passes;
};

static inline struct qp_conn *conn_of(const struct emunic_qp *qp) { return qp->conn; }
static inline bool conn_down(const struct qp_conn *c)
{
	return c->st == CONN_TEARDOWN || c->st == CONN_RECONNECTING;
}

/* qpconn.c */
void conn_set(struct emunic_qp *qp, enum conn_state st);
void conn_busy(struct emunic_dev *d, struct emunic_qp *qp);
void conn_up(struct emunic_dev *d, struct emunic_qp *qp);
void conn_end(struct emunic_dev *d, struct emunic_qp *qp);
void conn_fail_final(struct emunic_dev *d, struct emunic_qp *qp, int status);
void conn_disconnect(struct emunic_qp *qp);
int conn_create_vqp(struct emunic_dev *d, struct emunic_qp *qp);
/* qp's verbs QP to INIT, RTR or RTS on id, through the device interface. */
static inline int conn_move(struct emunic_dev *d, struct rdma_cm_id *id, struct emunic_qp *qp,
			    const struct emunic_qp_opts *o, enum ibv_qp_state to)
{
	return emunic_cm_qp_move(&d->v->shim, id, qp->vqp, o, to, qp->peer);
}
void conn_opts(const struct emunic_qp *qp, struct emunic_qp_opts *o);
bool conn_on_demand(const struct emunic_qp *qp);
/* The lower rank of a pair that both connected: its own attempt goes. */
struct rdma_cm_id *conn_drop_attempt(struct emunic_qp *qp);

/* connect.c: connect, or accept a request (parked until its QP exists) */
void conn_start(struct emunic_dev *d, struct emunic_qp *qp);
void conn_accept_on(struct emunic_dev *d, struct emunic_qp *qp, struct rdma_cm_id *id,
		    const struct emunic_conn_hello *rh);
bool cm_accept_parked(struct emunic_dev *d, struct emunic_qp *qp);

/* parked.c: requests waiting for their QP */
void cm_park(struct emunic_dev *d, struct rdma_cm_id *id, const struct emunic_conn_hello *h);
struct parked_req *cm_take_parked(struct emunic_dev *d, const struct emunic_qp *qp);
void cm_refuse_parked(struct emunic_dev *d, const struct emunic_qp *qp);
void cm_refuse(struct rdma_cm_id *id, const struct emunic_dev *d, uint32_t flags);

/* settle.c: the hello, and settling a failed connection's work */
void rc_hello(const struct emunic_qp *qp, struct emunic_conn_hello *h);
void rc_resolve(struct emunic_qp *qp, const struct emunic_conn_hello *h);
void rc_up(struct emunic_qp *qp);

/* events.c */
int cm_listen(struct emunic_dev *d);
int cm_events(struct emunic_dev *d);
int cm_run_delayed(struct emunic_dev *d);
void cm_fini(struct emunic_dev *d);

/* reconnect.c: the reconnection rules */
bool rc_fail(struct emunic_dev *d, struct emunic_qp *qp, int status, unsigned how, const char *why);
enum rc_next { RC_IDLE, RC_DID, RC_ACCEPT, RC_CONNECT };
enum rc_next rc_step(struct emunic_dev *d, struct emunic_qp *qp);
void conn_qp_failed(struct emunic_qp *qp, const char *why);
void conn_peer_gone(struct emunic_qp *qp);
bool rc_attempt_failed(struct emunic_qp *qp, bool gone, const char *why);
void rc_bury_id(struct emunic_qp *qp);

/* unit.c */
int emunic_cm_unit_init(struct emunic_dev *d);

#endif
