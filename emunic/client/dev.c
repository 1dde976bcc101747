/* SPDX-License-Identifier: MIT */
/*
 * Opening and closing a device: the verbs context, the engine with its
 * units (faults, connections, management queues, triggered ops), and the
 * core thread.  The only file that names every unit.
 */
#include "emunic/nic/nic.h"
#include "emunic/nic/unit.h"
#include "emunic/mq/mq.h"
#include "emunic/triggered/trig.h"
#include "emunic/cm/cm.h"
#include "emunic/fault/fault.h"
#include "emunic/base/log.h"
#include "emunic/base/timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VCQ_DEPTH 16384

void emunic_dev_attr_init(struct emunic_dev_attr *a)
{
	*a = (struct emunic_dev_attr){ .cpu = -1, .idle = EMUNIC_IDLE_DEFAULT };
}

static int env_int(const char *name, int dflt)
{
	const char *s = getenv(name);

	return s && *s ? atoi(s) : dflt;
}

/* attr.list_tasks, else $EMUNIC_LIST_TASKS, else 1024; never more than the
 * ring holds (a list is published into the ring at once). */
static int pick_list_tasks(struct emunic_dev *d)
{
	const char *s = getenv("EMUNIC_LIST_TASKS");
	unsigned v = d->attr.list_tasks;
	char *end;

	if (!v && s && *s) {
		unsigned long x;

		errno = 0;
		x = strtoul(s, &end, 10);
		if (errno || *end || *s == '-' || x == 0 || x > UINT32_MAX)
			return emunic_err(-EINVAL, "EMUNIC_LIST_TASKS='%s' is not a task count from 1 to %u", s,
					  d->attr.ring_entries);
		v = (unsigned)x;
	}
	if (!v)
		v = d->attr.ring_entries < 1024 ? d->attr.ring_entries : 1024;
	if (v > d->attr.ring_entries)
		return emunic_err(-EINVAL, "a task-list limit of %u is more than the command ring's %u entries "
				  "(attr.ring_entries)", v, d->attr.ring_entries);
	d->attr.list_tasks = v;
	return 0;
}

/* EMUNIC_CPU is one CPU or a comma list; local rank i takes the i-th
 * (cycling), so ranks on one node pin their cores apart.  Without it the
 * core is pinned only where a CPU is free for it.  A rank free to run
 * anywhere, with at least two CPUs a local rank: local rank i's core takes
 * CPU (n - 1 - i).  A rank bound to some of the node's CPUs (Slurm's
 * task/affinity, mpirun --bind-to, a cpuset) keeps its core among them:
 * the i-th highest of its own (cycling), when it has two or more. */
static int pick_free_cpu(int local, int nlocal, long online)
{
	cpu_set_t mine;
	int n, k;

	if (sched_getaffinity(0, sizeof(mine), &mine) || (n = CPU_COUNT(&mine)) >= online)
		return online >= 2L * nlocal ? (int)(online - 1 - local) : -1;
	if (n < 2)
		return -1;
	k = local % n;		/* the k-th highest of this rank's CPUs */
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &mine) && k-- == 0)
			return c;
	return -1;
}

static int pick_cpu(void)
{
	const char *s = getenv("EMUNIC_CPU");
	int local = emunic_local_rank(), nlocal = emunic_local_size() ? emunic_local_size() : 1, n = 0, cpus[256];
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	char *end;

	if (!s || !*s)
		return pick_free_cpu(local, nlocal, online);
	while (*s && n < 256) {
		long v = strtol(s, &end, 10);

		if (end == s || v < 0) {
			emunic_info("EMUNIC_CPU='%s' is not a CPU list like 3 or 2,3; not pinning", getenv("EMUNIC_CPU"));
			return -1;
		}
		cpus[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			break;
	}
	return n ? cpus[local % n] : -1;
}

/* One idle policy: event-driven (a short spin, then sleep).  Pure spinning
 * stays as an explicit choice (a dedicated core, a benchmark). */
static enum emunic_idle pick_idle(enum emunic_idle want)
{
	const char *s = getenv("EMUNIC_IDLE");

	if (want != EMUNIC_IDLE_DEFAULT)
		return want;
	if (s && !strcmp(s, "spin"))
		return EMUNIC_IDLE_SPIN;
	if (s && *s && strcmp(s, "sleep"))
		emunic_info("EMUNIC_IDLE=%s is not spin or sleep; the core sleeps when idle", s);
	return EMUNIC_IDLE_SLEEP;
}

static int open_verbs(struct emunic_dev *d)
{
	int r = emunic_vdev_open(d->attr.device, &d->v);

	if (r)
		return r;
	d->chan = ibv_create_comp_channel(d->v->ctx);
	if (!d->chan)
		return emunic_err(-errno, "device %s: ibv_create_comp_channel failed", d->v->name);
	fcntl(d->chan->fd, F_SETFL, fcntl(d->chan->fd, F_GETFL) | O_NONBLOCK);
	r = emunic_shim_create_cq(&d->v->shim, d->v->ctx, VCQ_DEPTH, d->chan, &d->vcq);
	if (r)
		return emunic_err(r, "device %s: creating its CQ of %d entries failed (%s)", d->v->name, VCQ_DEPTH,
				  strerror(-r));
	return 0;
}

static void dev_free(struct emunic_dev *d)
{
	nic_core_stop(d);
	nic_free_objs(d);
	for (unsigned i = d->nunits; i-- > 0;)
		if (d->unit[i]->fini)
			d->unit[i]->fini(d);
	cm_fini(d);		/* a failed open may not have registered it */
	if (d->vcq)
		emunic_shim_destroy_cq(&d->v->shim, d->vcq);
	if (d->chan)
		ibv_destroy_comp_channel(d->chan);
	emunic_vdev_close(d->v);
	emunic_ring_fini(&d->cmd);
	nic_objtab_fini(&d->tab);
	free(d->qp_seq);
	emunic_tl_dev_close();
	pthread_mutex_destroy(&d->notice_lock);
	free(d);
}

static int open_units(struct emunic_dev *d)
{
	int r = emunic_fault_unit_init(d, d->attr.faults);

	r = r ? r : open_verbs(d);
	r = r ? r : emunic_cm_unit_init(d);
	r = r ? r : emunic_mq_unit_init(d);
	r = r ? r : emunic_trig_unit_init(d);
	return r ? r : nic_core_start(d);
}

int emunic_dev_open(struct emunic_boot *boot, const struct emunic_dev_attr *attr, struct emunic_dev **out)
{
	struct emunic_dev *d;
	int r;

	if (!boot || !out)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->notice_lock, NULL);
	nic_objtab_init(&d->tab);
	d->doorbell = d->wake_timer = d->cm_fd = -1;
	d->boot = boot;
	d->rank = emunic_boot_rank(boot);
	d->size = emunic_boot_size(boot);
	emunic_tl_dev_open(d->rank, d->size);	/* before the core starts: it records too */
	if (attr)
		d->attr = *attr;
	else
		emunic_dev_attr_init(&d->attr);
	if (d->attr.cpu < 0)
		d->attr.cpu = pick_cpu();
	if (!d->attr.connect_timeout_ms)
		d->attr.connect_timeout_ms = 30000;
	d->idle = pick_idle(d->attr.idle);
	if (!d->attr.sink_mbps)
		d->attr.sink_mbps = (unsigned)env_int("EMUNIC_SINK_MBPS", 0);
	if (!d->attr.ring_entries)
		d->attr.ring_entries = 4096;
	r = pick_list_tasks(d);
	if (r) {
		dev_free(d);
		return r;
	}
	d->qp_seq = calloc((size_t)d->size, sizeof(int));
	if (!d->qp_seq || emunic_ring_init(&d->cmd, d->attr.ring_entries, sizeof(struct nic_cmd))) {
		dev_free(d);
		return -ENOMEM;
	}
	nic_objs_init(d);
	r = open_units(d);
	if (r) {
		nic_notices_flush(d);
		dev_free(d);
		return r;
	}
	emunic_debug("device %s: progress core started (%s, cpu %d)", d->v->name,
		     d->idle == EMUNIC_IDLE_SPIN ? "spin" : "sleep", d->attr.cpu);
	*out = d;
	return 0;
}

int emunic_dev_close(struct emunic_dev *d)
{
	bool handlers = nic_handlers_ok();

	if (!d)
		return -EINVAL;
	atomic_store(&d->stop, true);
	nic_core_stop(d);
	/* Closing: take what was posted, then fail what cannot finish. */
	while (!nic_own(d))
		sched_yield();
	nic_set_handlers_ok(true);
	nic_pass(d);
	for (struct obj *o = d->objs[OBJ_QP]; o; o = o->next) {
		struct emunic_qp *qp = (struct emunic_qp *)o;
		uint64_t n = nic_qp_cancel(qp);

		if (n)
			nic_notice(d, "device %s closing: peer %d qp %u: %llu unfinished work request(s) canceled",
				   d->v->name, qp->peer, atomic_load(&qp->qpn), (unsigned long long)n);
	}
	nic_cancel_all(d);
	nic_unown(d);
	nic_set_handlers_ok(handlers);
	nic_notices_flush(d);
	dev_free(d);
	return 0;
}

int emunic_dev_rank(const struct emunic_dev *d) { return d->rank; }
int emunic_dev_size(const struct emunic_dev *d) { return d->size; }
const char *emunic_dev_name(const struct emunic_dev *d) { return d->v->name; }
enum emunic_idle emunic_dev_idle(const struct emunic_dev *d) { return d->idle; }
unsigned emunic_dev_list_tasks(const struct emunic_dev *d) { return d->attr.list_tasks; }
unsigned emunic_dev_ring_entries(const struct emunic_dev *d) { return d->cmd.mask + 1u; }
const char *emunic_dev_lacks(const struct emunic_dev *d, unsigned what) { return emunic_vdev_lacks(d->v, what); }

_Static_assert(EMUNIC_DEV_CAP_ATOMIC == EMUNIC_SHIM_CAP_ATOMIC && EMUNIC_DEV_CAP_WRITE_IMM == EMUNIC_SHIM_CAP_WRITE_IMM &&
	       EMUNIC_DEV_CAP_RNR == EMUNIC_SHIM_CAP_RNR && EMUNIC_DEV_CAP_NATIVE_CD == EMUNIC_SHIM_CAP_NATIVE_CD,
	       "the public capability bits are the shim's");
uint32_t emunic_dev_caps(const struct emunic_dev *d) { return d->v->shim.caps; }
const char *emunic_dev_backend(const struct emunic_dev *d) { return emunic_shim_backend_str(d->v->shim.backend); }

int emunic_dev_stats(struct emunic_dev *d, struct emunic_dev_stats *out)
{
	if (!d || !out)
		return -EINVAL;
	*out = d->st;
	out->core_own_cpu = !atomic_load(&d->core_shares_cpu);	/* the engine's own flag, not a copy */
	return 0;
}

int emunic_dev_progress(struct emunic_dev *d)
{
	return d ? nic_progress(d) : -EINVAL;
}

int emunic_dev_allgather(struct emunic_dev *d, const void *in, size_t len, void *out)
{
	return d ? emunic_boot_allgather(d->boot, in, len, out) : -EINVAL;
}

int emunic_dev_barrier(struct emunic_dev *d)
{
	return d ? emunic_boot_barrier(d->boot) : -EINVAL;
}
