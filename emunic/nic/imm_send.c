/* SPDX-License-Identifier: MIT */
/*
 * Immediate data on a device that has none (iWARP: RDMAP, RFC 5040, has no
 * wire format for it; siw).  A TRIGGERED QP's write-with-immediate goes as
 * the RDMA WRITE (when it carries data) followed on the same QP by a SEND
 * whose 8-byte payload is the immediate and the write's length (struct
 * nic_imm_msg, sent inline: nothing to register at the source).  Its
 * arrival lands in one of the QP's receive slots (one registered array,
 * the receive queue's depth of them), and the poll turns it back into what
 * a write-with-immediate's completion says (imm_data, byte_len,
 * IBV_WC_WITH_IMM) before the arrival is counted and handed to the
 * arrival hook, so the target's counting, reconnection's and the trace see
 * one write-with-immediate either way (the fault unit, which looks first,
 * goes by the operation alone).  The verbs QP's send queue is twice the
 * depth: a task may be two work requests.
 *
 * Order: the SEND is delivered only after the WRITE before it is placed
 * (RFC 5040 section 5.5: a Send's completion at the data sink implies the
 * prior RDMA Writes on the stream were placed), as a write-with-immediate's
 * completion implies its own data.  MQ WRITE_IMM tasks stay refused on such
 * a device: their receive is the application's buffer, which the payload
 * would overwrite.
 *
 * Slots: RC completes receives in posting order and at most `depth` are
 * posted, so the receive posted now reuses the slot of one that completed
 * at least `depth` receives ago, whose payload was read (the poll reads an
 * arrival before it posts its replacement).
 */
#include "emunic/nic/nic.h"
#include "emunic/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int nic_imm_slots_init(struct emunic_dev *d, struct emunic_qp *qp)
{
	size_t len = (size_t)qp->attr.depth * sizeof(*qp->imm_slots);
	int r;

	if (!qp->imm_by_send || qp->imm_mr)
		return 0;
	qp->imm_slots = calloc(qp->attr.depth, sizeof(*qp->imm_slots));
	if (!qp->imm_slots)
		return emunic_err(-ENOMEM, "peer %d qp " NIC_QP_FMT ": no memory for %zu bytes of immediate-data slots",
				  qp->peer, NIC_QP_ARG(qp), len);
	r = emunic_shim_reg_mr(&d->v->shim, d->v->pd, qp->imm_slots, len, IBV_ACCESS_LOCAL_WRITE, &qp->imm_mr);
	if (r) {
		free(qp->imm_slots);
		qp->imm_slots = NULL;
		return emunic_err(r, "peer %d qp " NIC_QP_FMT ": registering its %zu bytes of immediate-data slots "
				  "on %s failed (%s)", qp->peer, NIC_QP_ARG(qp), len, d->v->name, strerror(-r));
	}
	return 0;
}

void nic_imm_slots_fini(struct emunic_qp *qp)
{
	if (qp->imm_mr)
		emunic_shim_dereg_mr(&qp->o.dev->v->shim, qp->imm_mr);
	free(qp->imm_slots);
	qp->imm_mr = NULL;
	qp->imm_slots = NULL;
}

uint32_t nic_imm_recv_slot(struct emunic_qp *qp, struct ibv_sge *sge)
{
	uint32_t slot = (uint32_t)(qp->imm_next++ % qp->attr.depth);

	*sge = (struct ibv_sge){ .addr = (uintptr_t)&qp->imm_slots[slot], .length = sizeof(qp->imm_slots[slot]),
				 .lkey = qp->imm_mr->lkey };
	return slot;
}

unsigned nic_imm_build_send(struct ibv_send_wr *wr, struct ibv_sge *sge, struct nic_imm_msg *msg,
			    const struct nic_task *t, uint64_t wr_id)
{
	unsigned n = 0;

	if (t->len) {		/* the data: unsignaled, done when the SEND is */
		sge[n] = (struct ibv_sge){ .addr = t->addr, .length = t->len, .lkey = t->lkey };
		wr[n] = (struct ibv_send_wr){ .wr_id = wr_id, .next = &wr[n + 1], .sg_list = &sge[n], .num_sge = 1,
					      .opcode = IBV_WR_RDMA_WRITE };
		wr[n].wr.rdma.remote_addr = t->remote_addr;
		wr[n].wr.rdma.rkey = t->rkey;
		n++;
	}
	*msg = (struct nic_imm_msg){ .imm = htonl(t->imm), .len = htonl(t->len) };
	sge[n] = (struct ibv_sge){ .addr = (uintptr_t)msg, .length = sizeof(*msg) };
	wr[n] = (struct ibv_send_wr){ .wr_id = wr_id, .next = &wr[n + 1], .sg_list = &sge[n], .num_sge = 1,
				      .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_INLINE };
	return n + 1;
}

void nic_imm_from_send(struct emunic_qp *qp, struct ibv_wc *wc, uint32_t slot)
{
	const struct nic_imm_msg *m;

	if (wc->status != IBV_WC_SUCCESS || slot >= qp->attr.depth || wc->byte_len != sizeof(*m))
		return;		/* not ours: the arrival hook drops it, saying so */
	m = &qp->imm_slots[slot];
	wc->imm_data = m->imm;	/* network order, as verbs gives it */
	wc->byte_len = ntohl(m->len);
	wc->wc_flags |= IBV_WC_WITH_IMM;
}
