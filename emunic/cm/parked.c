/* SPDX-License-Identifier: MIT */
/*
 * Connection requests waiting for their QP: one that arrives before the app
 * made the QP, or while the failed connection of a QP is still torn down,
 * is parked; connect.c accepts it when it can, a QP that gives up or goes
 * refuses it.  A leaf: the list and the refusal.
 */
#include "emunic/cm/cm.h"

#include <stdlib.h>

void cm_park(struct emunic_dev *d, struct rdma_cm_id *id, const struct emunic_conn_hello *h)
{
	struct parked_req *r = calloc(1, sizeof(*r));

	if (!r) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	*r = (struct parked_req){ .id = id, .peer = h->rank, .index = h->index, .h = *h, .next = d->cm->parked };
	d->cm->parked = r;
}

/* The request parked for this QP, taken off the list (the caller accepts
 * it and frees it), or NULL. */
struct parked_req *cm_take_parked(struct emunic_dev *d, const struct emunic_qp *qp)
{
	for (struct parked_req **pp = &d->cm->parked, *r; (r = *pp); pp = &r->next) {
		if (r->peer == qp->peer && r->index == qp->index) {
			*pp = r->next;
			return r;
		}
	}
	return NULL;
}

void cm_refuse(struct rdma_cm_id *id, const struct emunic_dev *d, uint32_t flags)
{
	struct emunic_conn_hello h = { .magic = EMUNIC_CONN_MAGIC, .rank = d->rank, .flags = flags };

	rdma_reject(id, &h, sizeof(h));
	rdma_destroy_id(id);
}

void cm_refuse_parked(struct emunic_dev *d, const struct emunic_qp *qp)
{
	for (struct parked_req **pp = &d->cm->parked, *r; (r = *pp);) {
		if (r->peer != qp->peer || r->index != qp->index) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		cm_refuse(r->id, d, EMUNIC_HELLO_GONE);
		free(r);
	}
}
