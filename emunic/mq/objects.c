/* SPDX-License-Identifier: MIT */
/*
 * CQs, QPs, MQs and memory regions: made by the app thread, handed to the
 * progress core through the command ring (which links them and, for QPs,
 * connects them), and released by the core before the app frees them.
 */
#include "emunic/core/core.h"
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

bool emunic_on_core(const struct emunic_dev *d)
{
	return pthread_equal(pthread_self(), d->thread);
}

void emunic_futex_wait(_Atomic uint32_t *word, uint32_t val, long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

void emunic_futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

long emunic_elapsed_ms(struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!t0->tv_sec && !t0->tv_nsec)
		*t0 = now;
	return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Control commands wait (bounded) for ring room rather than fail; on the
 * progress core itself (an event handler) they cannot wait for themselves. */
int emunic_send_cmd(struct emunic_dev *d, uint32_t type, void *o)
{
	struct cmd c = { .type = type, .obj = o };
	bool ok = false;

	for (int i = 0; i < 10000 && !ok; i++) {
		pthread_mutex_lock(&d->post_lock);
		ok = emunic_ring_push(&d->cmd, &c);
		pthread_mutex_unlock(&d->post_lock);
		if (!ok && emunic_on_core(d))
			return -ENOSPC;
		if (!ok)
			nap_us(100);
	}
	if (!ok)
		return emunic_err(-ENOSPC, "command ring full for 1 s: is the progress core stuck?");
	emunic_core_doorbell(d);
	return 0;
}

bool emunic_obj_alive(struct emunic_dev *d, const struct obj *o, enum obj_kind k)
{
	return o && o->kind == k && (!d || o->dev == d) && !atomic_load(&((struct obj *)o)->dead);
}

int emunic_obj_create(struct obj *o)
{
	return emunic_send_cmd(o->dev, CMD_OBJ_CREATE, o) ? -EIO : 0;
}

void emunic_obj_init(struct obj *o, struct emunic_dev *d, enum obj_kind k)
{
	o->kind = k;
	o->dev = d;
	atomic_init(&o->dead, false);
	atomic_init(&o->gone, false);
}

/* Destroy: the core unlinks and releases; the app frees once it is gone. */
int emunic_obj_destroy(struct obj *o, const char *what)
{
	if (!o || atomic_exchange(&o->dead, true))
		return emunic_err(-EINVAL, "%s_destroy: not a live %s", what, what);
	if (emunic_on_core(o->dev))
		return emunic_err(-EINVAL, "%s_destroy: not from an event handler", what);
	if (emunic_send_cmd(o->dev, CMD_OBJ_DESTROY, o))
		return -EIO;
	for (int i = 0; i < 100000 && !atomic_load(&o->gone); i++)
		nap_us(100);
	if (!atomic_load(&o->gone))
		return emunic_err(-ETIMEDOUT, "%s_destroy: the progress core did not release it in 10 s", what);
	/* Kept until the device closes: a stale handle (in the app, or in
	 * work still queued) reads as dead instead of freed memory. */
	pthread_mutex_lock(&o->dev->post_lock);
	o->grave = o->dev->graveyard;
	o->dev->graveyard = o;
	pthread_mutex_unlock(&o->dev->post_lock);
	return 0;
}

void emunic_obj_free(struct obj *o)
{
	if (o->kind == OBJ_QP) {
		free(((struct emunic_qp *)o)->sq.q);
		free(((struct emunic_qp *)o)->rq.q);
	} else if (o->kind == OBJ_MQ) {
		free(((struct emunic_mq *)o)->q.q);
		emunic_ring_fini(&((struct emunic_mq *)o)->wc);
	} else if (o->kind == OBJ_CQ) {
		emunic_ring_fini(&((struct emunic_cq *)o)->wc);
	} else if (o->kind == OBJ_EQ) {
		emunic_ring_fini(&((struct emunic_eq *)o)->ev);
	}
	free(o);
}

int fifo_init(struct task_fifo *f, uint32_t entries)
{
	uint32_t n = 1;

	while (n < entries)
		n <<= 1;
	f->q = calloc(n, sizeof(*f->q));
	f->mask = n - 1;
	return f->q ? 0 : -ENOMEM;
}

/* Core: drop an object (its tasks were completed or canceled already). */
void emunic_obj_release(struct emunic_dev *d, struct obj *o)
{
	for (struct obj **pp = &d->objs; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	if (o->kind == OBJ_QP) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (qp->id && atomic_load(&qp->state) == QP_UP)
			rdma_disconnect(qp->id);
		if (qp->vqp)
			ibv_destroy_qp(qp->vqp);
		if (qp->id)
			rdma_destroy_id(qp->id);
		if (qp->rc.dead_id)
			rdma_destroy_id(qp->rc.dead_id);
		emunic_cm_refuse_parked(d, qp);
		qp->vqp = NULL;
		qp->id = qp->rc.dead_id = NULL;
	}
	emunic_trig_release(d, o);
	atomic_store_explicit(&o->gone, true, memory_order_release);
}

/* ---- memory ----------------------------------------------------------------- */

int emunic_mr_reg(struct emunic_dev *d, void *addr, size_t len, struct emunic_mr **out)
{
	struct emunic_mr *m;

	if (!d || !out || (!addr && len))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	emunic_obj_init(&m->o, d, OBJ_MR);
	m->mr = ibv_reg_mr(d->v->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!m->mr) {
		int e = errno;

		free(m);
		return emunic_err(-e, "ibv_reg_mr of %zu bytes failed (%s)", len, strerror(e));
	}
	*out = m;
	return 0;
}

int emunic_mr_dereg(struct emunic_mr *m)
{
	struct ibv_mr *vmr;

	if (!m || m->o.kind != OBJ_MR || atomic_exchange(&m->o.dead, true))
		return -EINVAL;
	vmr = m->mr;
	/* The handle stays readable (and dead) until the device closes: an
	 * op or entry still naming it is refused, never a use after free. */
	pthread_mutex_lock(&m->o.dev->post_lock);
	m->mr = NULL;
	m->o.grave = m->o.dev->graveyard;
	m->o.dev->graveyard = &m->o;
	pthread_mutex_unlock(&m->o.dev->post_lock);
	ibv_dereg_mr(vmr);
	return 0;
}

bool emunic_mr_covers(const struct emunic_mr *m, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, base = (uintptr_t)m->mr->addr;

	return a >= base && a + len <= base + m->mr->length;
}

struct emunic_rkey emunic_mr_rkey(const struct emunic_mr *m)
{
	if (!m || !m->mr)
		return (struct emunic_rkey){ 0 };
	return (struct emunic_rkey){ .addr = (uintptr_t)m->mr->addr, .rkey = m->mr->rkey };
}

/* ---- CQs ---------------------------------------------------------------------- */

int emunic_cq_create(struct emunic_dev *d, unsigned depth, unsigned flags, struct emunic_cq **out)
{
	struct emunic_cq *cq;

	if (!d || !out || (flags & ~EMUNIC_CQ_COUNT_ONLY))
		return -EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	emunic_obj_init(&cq->o, d, OBJ_CQ);
	cq->flags = flags;
	if (emunic_ring_init(&cq->wc, depth ? depth : 1024, sizeof(struct emunic_wc))) {
		free(cq);
		return -ENOMEM;
	}
	if (emunic_send_cmd(d, CMD_OBJ_CREATE, &cq->o)) {
		emunic_ring_fini(&cq->wc);
		free(cq);
		return -EIO;
	}
	*out = cq;
	return 0;
}

int emunic_cq_destroy(struct emunic_cq *cq)
{
	return emunic_obj_destroy(cq ? &cq->o : NULL, "cq");
}

/* The app's side of a completion ring (CQ or MQ): take up to n. */
static int take_wcs(struct emunic_ring *r, struct emunic_wc *wc, int n)
{
	int got = 0;
	void *e;

	while (got < n && (e = emunic_ring_peek(r))) {
		memcpy(&wc[got++], e, sizeof(*wc));
		emunic_ring_pop(r);
	}
	return got;
}

int emunic_cq_poll(struct emunic_cq *cq, struct emunic_wc *wc, int n)
{
	if (!cq || !wc || n < 0 || atomic_load(&cq->o.dead))
		return -EINVAL;
	return take_wcs(&cq->wc, wc, n);
}

uint64_t emunic_cq_count(const struct emunic_cq *cq)
{
	return atomic_load_explicit(&((struct emunic_cq *)cq)->count, memory_order_acquire);
}

/* ---- QPs ---------------------------------------------------------------------- */

void emunic_qp_attr_init(struct emunic_qp_attr *a)
{
	*a = (struct emunic_qp_attr){ .depth = 256, .rnr_retry = 7, .retry_cnt = 7, .timeout = 14 };
}

static bool qp_attr_ok(const struct emunic_dev *d, const struct emunic_qp_attr *a)
{
	unsigned trig = EMUNIC_QP_TRIGGERED | EMUNIC_QP_ON_DEMAND;

	return !(a->flags & ~(EMUNIC_QP_MANAGED_SEND | EMUNIC_QP_MANAGED_RECV | trig)) &&
	       !((a->flags & EMUNIC_QP_TRIGGERED) && (a->flags & ~trig)) &&
	       !(a->send_cq && a->send_cq->o.dev != d) && !(a->recv_cq && a->recv_cq->o.dev != d) &&
	       a->rnr_retry <= 7 && a->retry_cnt <= 7 && a->timeout <= 31 &&
	       (!a->reconnects || (a->flags & EMUNIC_QP_TRIGGERED)) && a->reconnect_timeout_ms >= 0;
}

struct emunic_qp *emunic_qp_new(struct emunic_dev *d, int peer, const struct emunic_qp_attr *attr)
{
	struct emunic_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	emunic_obj_init(&qp->o, d, OBJ_QP);
	qp->peer = peer;
	qp->attr = *attr;
	if (!qp->attr.depth)
		qp->attr.depth = 256;
	if (qp->attr.rnr_retry < 0)
		qp->attr.rnr_retry = 7;
	if (qp->attr.retry_cnt < 0)
		qp->attr.retry_cnt = 7;
	if (qp->attr.timeout < 0)
		qp->attr.timeout = 14;
	atomic_init(&qp->state, QP_NEW);
	qp->rc.left = qp->attr.reconnects;
	/* Held (managed) work can run far ahead of verbs: queues are deeper. */
	if (fifo_init(&qp->sq, qp->attr.depth * 16) || fifo_init(&qp->rq, qp->attr.depth * 16)) {
		free(qp->sq.q);
		free(qp);
		return NULL;
	}
	atomic_fetch_add(&d->nqps, 1);
	return qp;
}

/* The QP a peer connected on demand before this rank made one (post_lock). */
static struct emunic_qp *claim_on_demand(struct emunic_dev *d, int peer)
{
	for (struct emunic_qp **pp = &d->od_unclaimed; *pp; pp = &(*pp)->od_next) {
		struct emunic_qp *qp = *pp;

		if (qp->peer == peer) {
			*pp = qp->od_next;
			return qp;
		}
	}
	return NULL;
}

int emunic_qp_create(struct emunic_dev *d, int peer, const struct emunic_qp_attr *attr, struct emunic_qp **out)
{
	struct emunic_qp *qp;

	if (!d || !out || !attr)
		return -EINVAL;
	if (peer < 0 || peer >= d->size || peer == d->rank)
		return emunic_err(-EINVAL, "qp_create: peer %d is not another rank of this job (size %d)",
				  peer, d->size);
	if (!qp_attr_ok(d, attr))
		return emunic_err(-EINVAL, "qp_create to peer %d: bad attributes", peer);
	pthread_mutex_lock(&d->post_lock);
	qp = (attr->flags & EMUNIC_QP_ON_DEMAND) ? claim_on_demand(d, peer) : NULL;
	if (qp) {
		pthread_mutex_unlock(&d->post_lock);
		*out = qp;
		return 0;
	}
	qp = emunic_qp_new(d, peer, attr);
	if (qp)
		qp->index = d->qp_seq[peer]++;
	pthread_mutex_unlock(&d->post_lock);
	if (!qp)
		return -ENOMEM;
	if (emunic_send_cmd(d, CMD_OBJ_CREATE, &qp->o)) {
		atomic_fetch_sub(&d->nqps, 1);
		free(qp->sq.q);
		free(qp->rq.q);
		free(qp);
		return -EIO;
	}
	*out = qp;
	return 0;
}

int emunic_qp_accept_on_demand(struct emunic_dev *d, const struct emunic_qp_attr *attr)
{
	if (!d || !attr || !(attr->flags & EMUNIC_QP_ON_DEMAND) || !qp_attr_ok(d, attr) || attr->send_cq ||
	    attr->recv_cq)
		return emunic_err(-EINVAL, "qp_accept_on_demand: attributes must name EMUNIC_QP_ON_DEMAND and "
				  "no CQs");
	pthread_mutex_lock(&d->post_lock);
	d->od_attr = *attr;
	d->od_accept = true;
	pthread_mutex_unlock(&d->post_lock);
	return 0;
}

unsigned emunic_dev_qps(const struct emunic_dev *d)
{
	return atomic_load(&((struct emunic_dev *)d)->nqps);
}

int emunic_qp_destroy(struct emunic_qp *qp)
{
	int e = emunic_obj_destroy(qp ? &qp->o : NULL, "qp");

	if (!e)
		atomic_fetch_sub(&qp->o.dev->nqps, 1);
	return e;
}

int emunic_qp_connected(const struct emunic_qp *qp)
{
	return atomic_load(&((struct emunic_qp *)qp)->state) == QP_UP;
}

int emunic_qp_peer(const struct emunic_qp *qp) { return qp->peer; }

unsigned emunic_qp_reconnects(const struct emunic_qp *qp)
{
	return qp ? __atomic_load_n(&qp->rc.made, __ATOMIC_ACQUIRE) : 0;
}

int emunic_qp_failed(const struct emunic_qp *qp)
{
	int s = atomic_load(&((struct emunic_qp *)qp)->state);

	return s == QP_ERROR || s == QP_CLOSED || atomic_load(&((struct emunic_qp *)qp)->o.gone);
}

int emunic_qp_wait_connected(struct emunic_qp *qp, int timeout_ms)
{
	for (long waited = 0;; waited += 200) {
		int s = atomic_load(&qp->state);

		/* Up once is connected: a failure since shows on its work. */
		if (s == QP_UP || atomic_load(&qp->was_up))
			return 0;
		if (s == QP_ERROR)
			return emunic_err(-ECONNREFUSED, "peer %d qp #%d: connection failed", qp->peer, qp->index);
		if (timeout_ms >= 0 && waited / 1000 >= timeout_ms)
			return emunic_err(-ETIMEDOUT, "peer %d qp #%d: not connected after %d ms (is the peer "
					  "creating its QP to this rank?)", qp->peer, qp->index, timeout_ms);
		nap_us(200);
	}
}

/* ---- MQs ---------------------------------------------------------------------- */

int emunic_mq_create(struct emunic_dev *d, unsigned depth, struct emunic_mq **out)
{
	struct emunic_mq *mq;

	if (!d || !out)
		return -EINVAL;
	mq = calloc(1, sizeof(*mq));
	if (!mq)
		return -ENOMEM;
	emunic_obj_init(&mq->o, d, OBJ_MQ);
	if (!depth)
		depth = 4096;
	if (fifo_init(&mq->q, depth) || emunic_ring_init(&mq->wc, depth, sizeof(struct emunic_wc))) {
		free(mq->q.q);
		free(mq);
		return -ENOMEM;
	}
	if (emunic_send_cmd(d, CMD_OBJ_CREATE, &mq->o)) {
		free(mq->q.q);
		emunic_ring_fini(&mq->wc);
		free(mq);
		return -EIO;
	}
	*out = mq;
	return 0;
}

int emunic_mq_destroy(struct emunic_mq *mq)
{
	return emunic_obj_destroy(mq ? &mq->o : NULL, "mq");
}

int emunic_mq_poll(struct emunic_mq *mq, struct emunic_wc *wc, int n)
{
	if (!mq || !wc || n < 0 || atomic_load(&mq->o.dead))
		return -EINVAL;
	return take_wcs(&mq->wc, wc, n);
}

int emunic_wait_step(_Atomic uint32_t *word, uint32_t seq, _Atomic int *waiters, struct timespec *t0,
		     int timeout_ms)
{
	long left = timeout_ms < 0 ? 50 : timeout_ms - emunic_elapsed_ms(t0);

	if (left <= 0)
		return -ETIMEDOUT;
	atomic_fetch_add(waiters, 1);
	emunic_futex_wait(word, seq, left < 50 ? left : 50);
	atomic_fetch_sub(waiters, 1);
	return 0;
}

int emunic_mq_wait(struct emunic_mq *mq, struct emunic_wc *wc, int timeout_ms)
{
	struct timespec t0 = { 0, 0 };

	emunic_elapsed_ms(&t0);
	for (;;) {
		uint32_t seq = mq ? atomic_load_explicit(&mq->seq, memory_order_acquire) : 0;
		int r = emunic_mq_poll(mq, wc, 1);

		if (!r)	/* sleep on the completion counter; the core wakes waiters */
			r = emunic_wait_step(&mq->seq, seq, &mq->waiters, &t0, timeout_ms);
		if (r)
			return r < 0 ? r : 0;
	}
}
