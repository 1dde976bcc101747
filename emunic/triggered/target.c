/* SPDX-License-Identifier: MIT */
/*
 * The target side: a write-with-immediate that arrives on a TRIGGERED QP
 * names a list entry (and the kind and offset): it is counted on the
 * entry's counter and reported on its event queue, so the target counts
 * puts, and gets served from it (told by the getter's engine), that its CPU
 * never saw.
 */
#include "emunic/triggered/trig.h"
#include "emunic/base/log.h"

#include <arpa/inet.h>
#include <string.h>

void trig_arrival(struct emunic_dev *d, struct emunic_qp *qp, const struct ibv_wc *wc)
{
	static const int ev_kind[] = { [IMM_PUT] = EMUNIC_EV_PUT, [IMM_GET] = EMUNIC_EV_GET,
				       [IMM_ATOMIC] = EMUNIC_EV_ATOMIC };
	struct emunic_event ev = { .peer = qp->peer, .qp_num = wc->qp_num };
	struct emunic_le *le;
	uint32_t imm, kind, unit;

	if (wc->status != IBV_WC_SUCCESS)
		return;		/* the QP failed: its sends report it */
	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		nic_notice(d, "peer %d qp %u: a message without immediate data on a triggered QP: dropped", qp->peer,
			   wc->qp_num);
		return;
	}
	imm = ntohl(wc->imm_data);
	kind = imm >> IMM_KIND_SHIFT;
	ev.le = (imm >> IMM_ID_SHIFT) & IMM_ID_MAX;
	unit = imm & IMM_UNIT_MAX;
	le = atomic_load_explicit(&d->trig->les[ev.le], memory_order_acquire);
	if (!kind || !le || atomic_load_explicit(&le->o.gone, memory_order_relaxed)) {
		nic_notice(d, "peer %d qp %u: %s for list entry %u, which does not exist (destroyed?): not counted",
			   qp->peer, wc->qp_num, kind == IMM_PUT ? "a put" : "a get or atomic", ev.le);
		return;
	}
	ev.kind = ev_kind[kind];
	ev.offset = (uint64_t)unit << le->attr.shift;
	if (kind == IMM_PUT) {
		ev.length = wc->byte_len;
		if ((le->attr.flags & EMUNIC_LE_HDR) && wc->byte_len >= 16 && ev.offset + 16 <= le->attr.len) {
			const char *p = (const char *)le->attr.addr + ev.offset;

			memcpy(&ev.match_bits, p, 8);
			memcpy(&ev.hdr_data, p + 8, 8);
			ev.length -= 16;
		}
	}
	if (le->attr.eq && !atomic_load_explicit(&le->attr.eq->o.gone, memory_order_relaxed))
		trig_eq_push(d, le->attr.eq, &ev);
	if (le->attr.ct)
		trig_ct_add(d, le->attr.ct, 1, 0);
}
