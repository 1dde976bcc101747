/* SPDX-License-Identifier: MIT */
/* Opening and closing a device and its progress core. */
#include "emunic/core/core.h"
#include "emunic/triggered/trig.h"
#include "emunic/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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

/* EMUNIC_CPU is one CPU or a comma list; local rank i takes the i-th
 * (cycling), so ranks on one node pin their progress cores apart. */
static int pick_cpu(void)
{
	const char *s = getenv("EMUNIC_CPU");
	int local = env_int("EMUNIC_LOCAL_RANK", 0), n = 0, cpus[256];
	char *end;

	while (s && *s && n < 256) {
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

/* Spin only when every local rank can have a core for itself and one for
 * its progress core; otherwise spinning cores steal from the app. */
static enum emunic_idle pick_idle(enum emunic_idle want)
{
	const char *s = getenv("EMUNIC_IDLE");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int local = env_int("EMUNIC_LOCAL_SIZE", 1);

	if (want != EMUNIC_IDLE_DEFAULT)
		return want;
	if (s && !strcmp(s, "spin"))
		return EMUNIC_IDLE_SPIN;
	if (s && !strcmp(s, "sleep"))
		return EMUNIC_IDLE_SLEEP;
	if (s && *s)
		emunic_info("EMUNIC_IDLE=%s is not spin or sleep; choosing by CPU count", s);
	return cpus >= 2L * local ? EMUNIC_IDLE_SPIN : EMUNIC_IDLE_SLEEP;
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
	d->vcq = ibv_create_cq(d->v->ctx, VCQ_DEPTH, NULL, d->chan, 0);
	if (!d->vcq)
		return emunic_err(-errno, "device %s: ibv_create_cq(%d) failed", d->v->name, VCQ_DEPTH);
	d->doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->doorbell < 0)
		return -errno;
	return emunic_cm_listen(d);
}

static void free_objs(struct emunic_dev *d)
{
	while (d->objs) {
		struct obj *o = d->objs;

		emunic_obj_release(d, o);	/* unlinks it */
		emunic_obj_free(o);		/* the app's handles die with the device */
	}
	while (d->graveyard) {
		struct obj *o = d->graveyard;

		d->graveyard = o->grave;
		emunic_obj_free(o);
	}
}

static void dev_free(struct emunic_dev *d)
{
	free_objs(d);
	emunic_fault_close(d);
	emunic_cm_fini(d);
	emunic_idle_fini(d);
	if (d->vcq)
		ibv_destroy_cq(d->vcq);
	if (d->chan)
		ibv_destroy_comp_channel(d->chan);
	if (d->doorbell > 0)
		close(d->doorbell);
	emunic_vdev_close(d->v);
	emunic_ring_fini(&d->cmd);
	emunic_ring_fini(&d->trace);
	free(d->qp_seq);
	pthread_mutex_destroy(&d->post_lock);
	pthread_mutex_destroy(&d->trace_lock);
	free(d);
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
	pthread_mutex_init(&d->post_lock, NULL);
	pthread_mutex_init(&d->trace_lock, NULL);
	d->doorbell = -1;
	d->boot = boot;
	d->rank = emunic_boot_rank(boot);
	d->size = emunic_boot_size(boot);
	if (attr)
		d->attr = *attr;
	else
		emunic_dev_attr_init(&d->attr);
	if (d->attr.cpu < 0)
		d->attr.cpu = pick_cpu();
	if (!d->attr.connect_timeout_ms)
		d->attr.connect_timeout_ms = 30000;
	d->idle = pick_idle(d->attr.idle);
	d->trig_max = d->attr.trig_entries ? d->attr.trig_entries : 4096;
	if (!d->attr.sink_mbps)
		d->attr.sink_mbps = (unsigned)env_int("EMUNIC_SINK_MBPS", 0);
	d->sink_bps = (uint64_t)d->attr.sink_mbps * 1000000;
	d->qp_seq = calloc((size_t)d->size, sizeof(int));
	if (!d->qp_seq || emunic_ring_init(&d->cmd, d->attr.ring_entries ? d->attr.ring_entries : 4096,
					   sizeof(struct cmd))) {
		dev_free(d);
		return -ENOMEM;
	}
	r = emunic_fault_open(d, d->attr.faults);
	if (!r)
		r = open_verbs(d);
	if (!r && d->idle == EMUNIC_IDLE_SLEEP)
		r = emunic_idle_init(d);
	if (!r && (r = -pthread_create(&d->thread, NULL, emunic_core_main, d)))
		emunic_err(r, "cannot start the progress core thread");
	if (r) {
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
	if (!d)
		return -EINVAL;
	atomic_store(&d->stop, true);
	atomic_store(&d->sleeping, true);	/* make the doorbell ring */
	emunic_core_doorbell(d);
	pthread_join(d->thread, NULL);
	dev_free(d);
	return 0;
}

int emunic_dev_rank(const struct emunic_dev *d) { return d->rank; }
int emunic_dev_size(const struct emunic_dev *d) { return d->size; }
const char *emunic_dev_name(const struct emunic_dev *d) { return d->v->name; }
enum emunic_idle emunic_dev_idle(const struct emunic_dev *d) { return d->idle; }

int emunic_dev_allgather(struct emunic_dev *d, const void *in, size_t len, void *out)
{
	return d ? emunic_boot_allgather(d->boot, in, len, out) : -EINVAL;
}

int emunic_dev_barrier(struct emunic_dev *d)
{
	return d ? emunic_boot_barrier(d->boot) : -EINVAL;
}

const char *emunic_wc_status_str(int status)
{
	switch (status) {
	case EMUNIC_WC_CANCELED: return "canceled (device closed)";
	case EMUNIC_WC_TIMEOUT: return "timed out";
	default: return ibv_wc_status_str((enum ibv_wc_status)status);
	}
}

const char *emunic_task_op_str(int op)
{
	static const char *const names[] = {
		[EMUNIC_TASK_SEND] = "SEND", [EMUNIC_TASK_RECV] = "RECV", [EMUNIC_TASK_WRITE] = "WRITE",
		[EMUNIC_TASK_WRITE_IMM] = "WRITE_IMM", [EMUNIC_TASK_READ] = "READ",
		[EMUNIC_TASK_FETCH_ADD] = "FETCH_ADD", [EMUNIC_TASK_WAIT] = "WAIT",
		[EMUNIC_TASK_SEND_EN] = "SEND_EN", [EMUNIC_TASK_RECV_EN] = "RECV_EN",
	};

	return op > 0 && op <= EMUNIC_TASK_RECV_EN ? names[op] : "UNKNOWN";
}
