/* SPDX-License-Identifier: MIT */
/*
 * The fault rules at run time, in the engine: every place a rule acts is
 * one hook here (nic.h, struct nic_fault_ops), called from the one place it
 * concerns (QP set-up in cm/, receives and completions in nic/verbs.c).
 * Without rules no hook is installed and nothing here runs.  Real faults are
 * made by the transport itself: held receives give real RNR NAKs, a QP in
 * the error or reset state drops what reaches it; only wc rules write a
 * status the transport did not produce.
 */
#include "emunic/nic/nic.h"
#include "emunic/nic/unit.h"
#include "emunic/fault/fault.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: small, and the same sequence everywhere for a seed. */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static struct fault_qp *flt_of(struct emunic_qp *qp)
{
	if (!qp->flt)
		qp->flt = calloc(1, sizeof(*qp->flt));
	return qp->flt;
}

/* A rule about the target's side of QPs to rank peer: does it cover this
 * rank's QP qp (this rank is the target, the QP goes to from)? */
static bool at_target(const struct emunic_dev *d, const struct fault_rule *f, const struct emunic_qp *qp)
{
	return f->peer == d->rank && (f->from < 0 || f->from == qp->peer);
}

/* ... or the sender's side (this rank sends to the target over qp)? */
static bool at_sender(const struct emunic_dev *d, const struct fault_rule *f, const struct emunic_qp *qp)
{
	return f->peer == qp->peer && (f->from < 0 || f->from == d->rank);
}

static void qp_opts(struct emunic_dev *d, const struct emunic_qp *qp, struct emunic_qp_opts *o)
{
	for (int i = 0; i < d->faults->n; i++) {
		const struct fault_rule *f = &d->faults->r[i];

		if (f->kind == FAULT_RNR && at_sender(d, f, qp)) {
			o->rnr_retry = (uint8_t)(f->retries >= 0 ? f->retries : 0);
		} else if (f->kind == FAULT_RETRY && at_sender(d, f, qp)) {
			o->retry_cnt = (uint8_t)(f->retries >= 0 ? f->retries : 1);
			o->timeout = (uint8_t)(f->timeout >= 0 ? f->timeout : 12);
		}
	}
}

/* When qp's held receives go (0: no deadline); the device counts the QPs
 * that have one, so a pass looks at QPs only while some do. */
static void set_release(struct emunic_dev *d, struct fault_qp *s, uint64_t ns)
{
	if (!s->release_ns != !ns)
		d->fault_timed += ns ? 1u : -1u;
	s->release_ns = ns;
}

static bool recv_ok(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct fault_qp *s = flt_of(qp);

	if (!s)
		return true;
	for (int i = 0; i < d->faults->n; i++) {
		const struct fault_rule *f = &d->faults->r[i];
		uint64_t now;

		if (f->kind != FAULT_RNR || !at_target(d, f, qp) || s->recvs < f->after ||
		    s->held_since_ns == UINT64_MAX)
			continue;
		now = emunic_now_ns();
		if (!s->held_since_ns) {
			s->held_since_ns = now;
			if (f->hold_us)
				set_release(d, s, now + f->hold_us * 1000);	/* the unit readies it then */
			atomic_fetch_add(&d->fault_held, 1);
			EMUNIC_TL(TL_FAULT, TL_TRACK_QP, NIC_HANDLE_INDEX(qp->o.handle), qp->peer, i + 1,
				  TL_FAULT_RNR_HOLD, 0);
			nic_notice(d, "fault injected (rnr rule %d): peer %d qp %u: receives held back after %llu%s: "
				   "the peer's sends meet RNR NAKs", i + 1, qp->peer, atomic_load(&qp->qpn),
				   (unsigned long long)s->recvs, f->hold_us ? " for a while" : "");
		}
		if (!f->hold_us || now - s->held_since_ns < f->hold_us * 1000)
			return false;
		s->held_since_ns = UINT64_MAX;	/* released for good */
		set_release(d, s, 0);
		nic_notice(d, "fault (rnr rule %d): peer %d qp %u: receives released", i + 1, qp->peer,
			   atomic_load(&qp->qpn));
	}
	s->recvs++;
	return true;
}

/* Moves qp's verbs QP to state: ERR after an injected error (the rest
 * flushes, as after a real one); RESET for a QP that "goes away" (rxe drops
 * every packet for a QP not ready to receive, so the peer's requests go
 * unanswered until its retries run out; its own work ends here). */
static bool fail_qp(struct emunic_dev *d, struct emunic_qp *qp, int rule, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = { .qp_state = state };
	struct fault_qp *s = flt_of(qp);

	/* Once per QP: a connection made again after it is left alone. */
	if (!s || s->failed || !qp->vqp)
		return false;
	s->failed = true;
	atomic_fetch_add(&d->fault_failed, 1);
	EMUNIC_TL(TL_FAULT, TL_TRACK_QP, NIC_HANDLE_INDEX(qp->o.handle), qp->peer, rule,
		  state == IBV_QPS_RESET ? TL_FAULT_QP_RESET : TL_FAULT_QP_ERROR, 0);
	nic_notice(d, "fault injected (rule %d): peer %d qp %u %s", rule, qp->peer, atomic_load(&qp->qpn),
		   state == IBV_QPS_RESET ? "reset: the peer's packets are dropped from now on"
					  : "moved to the error state after the injected error");
	emunic_shim_modify_qp(&d->v->shim, qp->vqp, &a, IBV_QP_STATE);
	return true;
}

static bool reset_rules(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct fault_qp *s = flt_of(qp);
	bool failed = false;

	for (int i = 0; s && i < d->faults->n; i++) {
		const struct fault_rule *f = &d->faults->r[i];

		if (f->kind == FAULT_RETRY && at_target(d, f, qp) && s->arrivals >= f->after)
			failed |= fail_qp(d, qp, i + 1, IBV_QPS_RESET);
	}
	return failed;
}

/* The QP is up: retry rules with after=0 act now; and a rule that reset it
 * before its first connection was up makes that connection fail. */
static bool qp_up(struct emunic_dev *d, struct emunic_qp *qp)
{
	bool failed = reset_rules(d, qp);

	return failed || (qp->flt && qp->flt->failed && !atomic_load(&qp->was_up));
}

static void arrival(struct emunic_dev *d, struct emunic_qp *qp)
{
	struct fault_qp *s = flt_of(qp);

	if (!s)
		return;
	s->arrivals++;
	/* Gone: its own work fails (or the pair reconnects) from here; before
	 * the connection is up, qp_up says so. */
	if (reset_rules(d, qp) && atomic_load(&qp->was_up))
		nic_qp_failed(d, qp, IBV_WC_RETRY_EXC_ERR, 0, "a fault rule reset it");
}

static void wc(struct emunic_dev *d, struct emunic_qp *qp, struct ibv_wc *w, int op)
{
	if (w->status != IBV_WC_SUCCESS)
		return;
	for (int i = 0; i < d->faults->n; i++) {
		struct fault_rule *f = &d->faults->r[i];
		bool hit;

		if (f->kind != FAULT_WC || (f->rank >= 0 && f->rank != d->rank) ||
		    (f->peer >= 0 && f->peer != qp->peer) || (f->opcode && f->opcode != op))
			continue;
		f->seen++;
		if (f->count && f->hits >= f->count)
			continue;
		hit = f->op ? f->seen >= f->op : next_rand(&f->rng) % 1000000 < f->p_ppm;
		if (!hit)
			continue;
		f->hits++;
		w->status = (enum ibv_wc_status)f->status;
		atomic_fetch_add(&d->fault_wc, 1);
		EMUNIC_TL(TL_FAULT, TL_TRACK_QP, NIC_HANDLE_INDEX(qp->o.handle), qp->peer, i + 1, TL_FAULT_WC,
			  f->status);
		nic_notice(d, "fault injected (wc rule %d): peer %d qp %u: %s completion #%llu of the rule turned into %s",
			   i + 1, qp->peer, w->qp_num, emunic_task_op_str(op), (unsigned long long)f->seen,
			   emunic_wc_status_str(f->status));
		/* As after a real error: the QP's other work flushes. */
		fail_qp(d, qp, i + 1, IBV_QPS_ERR);
		return;
	}
}

static const struct nic_fault_ops fault_ops = {
	.qp_opts = qp_opts, .recv_ok = recv_ok, .qp_up = qp_up, .arrival = arrival, .wc = wc,
};

/* ---- the unit: held receives go when their hold ends ------------------------------------- */

static int step(struct emunic_dev *d)
{
	uint64_t now = 0;
	int n = 0;

	for (struct obj *o = d->fault_timed ? d->objs[OBJ_QP] : NULL; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (!qp->flt || !qp->flt->release_ns)
			continue;
		if (!now)
			now = emunic_now_ns();
		if (now >= qp->flt->release_ns) {
			set_release(d, qp->flt, 0);
			nic_qp_ready(d, qp);	/* recv_ok says yes now */
			n++;
		}
	}
	return n;
}

static uint64_t next_due(struct emunic_dev *d, uint64_t now)
{
	uint64_t due = UINT64_MAX;

	(void)now;
	for (struct obj *o = d->fault_timed ? d->objs[OBJ_QP] : NULL; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;

		if (qp->flt && qp->flt->release_ns && qp->flt->release_ns < due)
			due = qp->flt->release_ns;
	}
	return due;
}

static void release(struct emunic_dev *d, struct obj *o)
{
	struct emunic_qp *qp = (struct emunic_qp *)o;

	if (o->kind != OBJ_QP || !qp->flt)
		return;
	set_release(d, qp->flt, 0);
	free(qp->flt);
	qp->flt = NULL;
}

static void fini(struct emunic_dev *d)
{
	emunic_fault_free(d->faults);
	d->faults = NULL;
}

static const struct nic_unit fault_unit = {
	.name = "fault", .step = step, .next_due_ns = next_due, .release = release, .fini = fini,
};

static bool rank_ok(const struct emunic_dev *d, int r)
{
	return r < 0 || r < d->size;
}

int emunic_fault_unit_init(struct emunic_dev *d, const char *spec)
{
	const char *from = spec ? "emunic_dev_attr.faults" : "EMUNIC_FAULTS";
	char err[1024], canon[1024];
	int r;

	if (!spec)
		spec = getenv("EMUNIC_FAULTS");
	if (!spec || !*spec)
		return 0;
	r = emunic_fault_parse(spec, &d->faults, err, sizeof(err));
	if (r)
		return emunic_err(r, "%s: %s", from, err);
	for (int i = 0; i < d->faults->n; i++) {
		struct fault_rule *f = &d->faults->r[i];

		if (!rank_ok(d, f->peer) || !rank_ok(d, f->from) || !rank_ok(d, f->rank)) {
			r = emunic_err(-EINVAL, "%s: rule %d names a rank the job (%d ranks) does not have", from, i + 1,
				       d->size);
			emunic_fault_free(d->faults);
			d->faults = NULL;
			return r;
		}
		f->rng = f->seed * 0x100000001b3ull + (uint64_t)d->rank + 1;
	}
	emunic_fault_format(d->faults, canon, sizeof(canon));
	if (d->rank == 0)
		emunic_info("fault injection: %s", canon);
	d->fault = &fault_ops;
	return nic_register(d, &fault_unit);
}

int emunic_fault_stats(struct emunic_dev *d, struct emunic_fault_stats *out)
{
	if (!d || !out)
		return -EINVAL;
	*out = (struct emunic_fault_stats){
		.wc_injected = atomic_load(&d->fault_wc),
		.qps_held = atomic_load(&d->fault_held),
		.qps_failed = atomic_load(&d->fault_failed),
	};
	return 0;
}
