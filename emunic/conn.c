/* SPDX-License-Identifier: MIT */
/*
 * RC connections between ranks through librdmacm (see emunic_mesh in
 * verbs.h).  rdma_cm resolves addresses and runs the CM handshake; the QP
 * state changes are done here from rdma_init_qp_attr() so that retry_cnt,
 * rnr_retry and the ACK timeout are the mesh's own.
 */
#include "emunic/verbs.h"
#include "emunic/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>



void emunic_qp_opts_default(struct emunic_qp_opts *o)
{
	*o = (struct emunic_qp_opts){
		.max_send_wr = 256, .max_recv_wr = 256, .max_sge = 1, .max_inline = 64,
		.retry_cnt = 7, .rnr_retry = 7, .timeout = 14, .min_rnr_timer = 12, .rd_atomic = 4,
	};
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int create_qp(struct emunic_mesh *m, struct emunic_conn *c)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = m->send_cq, .recv_cq = m->recv_cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = m->opts.max_send_wr, .max_recv_wr = m->opts.max_recv_wr,
			 .max_send_sge = m->opts.max_sge, .max_recv_sge = m->opts.max_sge,
			 .max_inline_data = m->opts.max_inline },
	};

	int r = emunic_shim_create_qp(&m->dev->shim, m->dev->pd, &ia, &c->qp);

	return r ? emunic_err(r, "peer %d: creating a QP failed (%s)", c->peer, strerror(-r)) : 0;
}

/* INIT, RTR, RTS as rdma_cm computes them, with our own retry settings. */
int emunic_cm_qp_move(const struct emunic_shim *s, struct rdma_cm_id *id, struct ibv_qp *qp,
		      const struct emunic_qp_opts *o, enum ibv_qp_state to, int peer)
{
	struct ibv_qp_attr a;
	int mask, r;

	memset(&a, 0, sizeof(a));
	a.qp_state = to;
	r = rdma_init_qp_attr(id, &a, &mask);
	if (r)
		return emunic_err(-errno, "peer %d qp %u: rdma_init_qp_attr(state %d) failed (%s)",
				  peer, qp->qp_num, to, strerror(errno));
	if (to == IBV_QPS_INIT) {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	} else if (to == IBV_QPS_RTR) {
		a.min_rnr_timer = o->min_rnr_timer;
		a.max_dest_rd_atomic = o->rd_atomic;
	} else if (to == IBV_QPS_RTS) {
		a.retry_cnt = o->retry_cnt;
		a.rnr_retry = o->rnr_retry;
		a.timeout = o->timeout;
		a.max_rd_atomic = o->rd_atomic;
	}
	r = emunic_shim_modify_qp(s, qp, &a, mask);
	if (r)
		return emunic_err(r, "peer %d qp %u: moving it to state %d failed (%s)", peer, qp->qp_num, to,
				  strerror(-r));
	return 0;
}

static int move_qp(struct emunic_mesh *m, struct emunic_conn *c, enum ibv_qp_state to)
{
	return emunic_cm_qp_move(&m->dev->shim, c->id, c->qp, &m->opts, to, c->peer);
}

void emunic_cm_params(const struct emunic_qp_opts *o, uint32_t qpn, struct emunic_conn_hello *h,
		      struct rdma_conn_param *p)
{
	*p = (struct rdma_conn_param){
		.private_data = h, .private_data_len = sizeof(*h),
		.responder_resources = o->rd_atomic, .initiator_depth = o->rd_atomic,
		.retry_count = o->retry_cnt, .rnr_retry_count = o->rnr_retry, .qp_num = qpn,
	};
}

static void conn_params(struct emunic_mesh *m, struct emunic_conn *c, struct rdma_conn_param *p,
			struct emunic_conn_hello *h)
{
	*h = (struct emunic_conn_hello){ .magic = EMUNIC_CONN_MAGIC, .rank = m->rank };
	emunic_cm_params(&m->opts, c->qp->qp_num, h, p);
}

static int start_connect(struct emunic_mesh *m, int peer)
{
	struct emunic_conn *c = &m->conn[peer];
	struct sockaddr_in src = m->dev->addr;

	if (rdma_create_id(m->ch, &c->id, c, RDMA_PS_TCP))
		return emunic_err(-errno, "peer %d: rdma_create_id failed (%s)", peer, strerror(errno));
	src.sin_port = 0;
	if (rdma_resolve_addr(c->id, (struct sockaddr *)&src, (struct sockaddr *)&m->addr[peer], 5000))
		return emunic_err(-errno, "peer %d: rdma_resolve_addr failed (%s)", peer, strerror(errno));
	return 0;
}

static int on_connect_request(struct emunic_mesh *m, struct rdma_cm_event *ev)
{
	const struct emunic_conn_hello *h = ev->param.conn.private_data;
	struct rdma_conn_param p;
	struct emunic_conn_hello mine;
	struct emunic_conn *c;

	if (!h || ev->param.conn.private_data_len < sizeof(*h) || h->magic != EMUNIC_CONN_MAGIC ||
	    h->rank <= m->rank || h->rank >= m->size || m->conn[h->rank].id) {
		emunic_info("rejecting a connection request (not from an expected peer)");
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		return 0;
	}
	c = &m->conn[h->rank];
	c->id = ev->id;
	c->id->context = c;
	if (create_qp(m, c) || move_qp(m, c, IBV_QPS_INIT) || move_qp(m, c, IBV_QPS_RTR) ||
	    move_qp(m, c, IBV_QPS_RTS))
		return -EIO;
	conn_params(m, c, &p, &mine);
	if (rdma_accept(c->id, &p))
		return emunic_err(-errno, "peer %d: rdma_accept failed (%s)", c->peer, strerror(errno));
	return 0;
}

static int on_event(struct emunic_mesh *m, struct rdma_cm_event *ev)
{
	struct emunic_conn *c = ev->id->context;
	struct rdma_conn_param p;
	struct emunic_conn_hello mine;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return on_connect_request(m, ev);
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(c->id, 5000))
			return emunic_err(-errno, "peer %d: rdma_resolve_route failed (%s)", c->peer, strerror(errno));
		return 0;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (create_qp(m, c) || move_qp(m, c, IBV_QPS_INIT))
			return -EIO;
		conn_params(m, c, &p, &mine);
		if (rdma_connect(c->id, &p))
			return emunic_err(-errno, "peer %d: rdma_connect failed (%s)", c->peer, strerror(errno));
		return 0;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		if (move_qp(m, c, IBV_QPS_RTR) || move_qp(m, c, IBV_QPS_RTS))
			return -EIO;
		if (rdma_establish(c->id))
			return emunic_err(-errno, "peer %d: rdma_establish failed (%s)", c->peer, strerror(errno));
		/* fall through: with rdma_establish no ESTABLISHED event follows */
		/* fallthrough */
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!c->up) {
			c->up = true;
			m->pending--;
			emunic_debug("peer %d: connected, qp %u", c->peer, c->qp->qp_num);
		}
		return 0;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (c)
			c->up = false;
		return 0;
	default:
		return emunic_err(-ECONNREFUSED, "peer %d: connection failed: %s (status %d)",
				  c ? c->peer : -1, rdma_event_str(ev->event), ev->status);
	}
}

int emunic_mesh_open(struct emunic_vdev *dev, struct emunic_boot *boot, const struct emunic_qp_opts *o,
		     struct ibv_cq *send_cq, struct ibv_cq *recv_cq, struct emunic_mesh **out)
{
	struct emunic_mesh *m = calloc(1, sizeof(*m));
	struct sockaddr_in sa = dev->addr;
	int i, r;

	if (!m)
		return -ENOMEM;
	m->dev = dev;
	m->rank = emunic_boot_rank(boot);
	m->size = emunic_boot_size(boot);
	m->send_cq = send_cq;
	m->recv_cq = recv_cq;
	if (o)
		m->opts = *o;
	else
		emunic_qp_opts_default(&m->opts);
	m->addr = calloc((size_t)m->size, sizeof(*m->addr));
	m->conn = calloc((size_t)m->size, sizeof(*m->conn));
	m->ch = rdma_create_event_channel();
	if (!m->addr || !m->conn || !m->ch) {
		r = -ENOMEM;
		goto fail;
	}
	fcntl(m->ch->fd, F_SETFL, fcntl(m->ch->fd, F_GETFL) | O_NONBLOCK);
	for (i = 0; i < m->size; i++)
		m->conn[i].peer = i;
	sa.sin_port = 0;
	if (rdma_create_id(m->ch, &m->listen, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(m->listen, (struct sockaddr *)&sa) || rdma_listen(m->listen, 1024)) {
		char a[INET_ADDRSTRLEN];

		r = emunic_err(-errno, "cannot listen for connections on %s (%s): %s", dev->name,
			       inet_ntop(AF_INET, &sa.sin_addr, a, sizeof(a)), strerror(errno));
		goto fail;
	}
	sa.sin_port = rdma_get_src_port(m->listen);
	r = emunic_boot_allgather(boot, &sa, sizeof(sa), m->addr);
	if (r)
		goto fail;
	*out = m;
	return 0;
fail:
	emunic_mesh_close(m);
	return r;
}

int emunic_mesh_connect_all(struct emunic_mesh *m, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	struct rdma_cm_event *ev;
	int p, r;

	m->pending = m->size - 1;
	for (p = 0; p < m->rank; p++) {
		r = start_connect(m, p);
		if (r)
			return r;
	}
	while (m->pending > 0) {
		struct pollfd pf = { .fd = m->ch->fd, .events = POLLIN };
		long long left = deadline - now_ms();

		if (left <= 0) {
			char missing[256] = "";
			size_t off = 0;

			for (p = 0; p < m->size; p++)
				if (p != m->rank && !m->conn[p].up && off < sizeof(missing))
					off += (size_t)snprintf(missing + off, sizeof(missing) - off, " %d", p);
			return emunic_err(-ETIMEDOUT, "connections not up after %d ms; waiting for peers:%s",
					  timeout_ms, missing);
		}
		if (poll(&pf, 1, (int)(left < 100 ? left : 100)) <= 0)
			continue;
		while (!rdma_get_cm_event(m->ch, &ev)) {
			r = on_event(m, ev);
			rdma_ack_cm_event(ev);
			if (r)
				return r;
		}
	}
	return 0;
}

void emunic_mesh_close(struct emunic_mesh *m)
{
	int p;

	if (!m)
		return;
	for (p = 0; m->conn && p < m->size; p++) {
		struct emunic_conn *c = &m->conn[p];

		if (c->id && c->up)
			rdma_disconnect(c->id);
		if (c->qp)
			emunic_shim_destroy_qp(&m->dev->shim, c->qp);
		if (c->id)
			rdma_destroy_id(c->id);
	}
	if (m->listen)
		rdma_destroy_id(m->listen);
	if (m->ch)
		rdma_destroy_event_channel(m->ch);
	free(m->conn);
	free(m->addr);
	free(m);
}
