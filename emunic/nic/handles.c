/* SPDX-License-Identifier: MIT */
/*
 * Handles: what crosses from the application to the engine names an object
 * by index + generation, so a stale handle resolves to nothing and a later
 * per-node engine can serve many processes.  A leaf: the table, the
 * object header and the per-QP FIFOs, nothing that runs the engine.
 */
#include "emunic/nic/nic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the handle table ----------------------------------------------------------- */

int nic_objtab_init(struct nic_objtab *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

void nic_objtab_fini(struct nic_objtab *t)
{
	for (unsigned i = 0; i < NIC_TAB_CHUNKS; i++)
		free(atomic_load(&t->chunk[i]));
	free(t->free);
	pthread_mutex_destroy(&t->lock);
}

static struct nic_tab_slot *slot(struct nic_objtab *t, uint32_t idx)
{
	struct nic_tab_slot *c = atomic_load_explicit(&t->chunk[idx / NIC_TAB_CHUNK], memory_order_acquire);

	return c ? &c[idx % NIC_TAB_CHUNK] : NULL;
}

static int take_index(struct nic_objtab *t, uint32_t *out)
{
	uint32_t idx;

	if (t->nfree) {
		*out = t->free[--t->nfree];
		return 0;
	}
	idx = t->next;
	if (idx >= NIC_TAB_CHUNK * NIC_TAB_CHUNKS)
		return -ENOSPC;
	if (!atomic_load(&t->chunk[idx / NIC_TAB_CHUNK])) {
		struct nic_tab_slot *c = calloc(NIC_TAB_CHUNK, sizeof(*c));

		if (!c)
			return -ENOMEM;
		atomic_store_explicit(&t->chunk[idx / NIC_TAB_CHUNK], c, memory_order_release);
	}
	t->next++;
	*out = idx;
	return 0;
}

int nic_obj_handle(struct obj *o)
{
	struct nic_objtab *t = &o->dev->tab;
	struct nic_tab_slot *s;
	uint32_t idx;
	int r;

	pthread_mutex_lock(&t->lock);
	r = take_index(t, &idx);
	if (!r) {
		s = slot(t, idx);
		s->gen = (s->gen + 1) & ((1u << (32 - NIC_HANDLE_INDEX_BITS)) - 1);
		if (!s->gen)
			s->gen = 1;	/* handle 0 is never valid */
		o->handle = idx | s->gen << NIC_HANDLE_INDEX_BITS;
		atomic_store_explicit(&s->o, o, memory_order_release);
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

void nic_obj_unhandle(struct obj *o)
{
	struct nic_objtab *t = &o->dev->tab;
	uint32_t idx = NIC_HANDLE_INDEX(o->handle);

	if (!o->handle)
		return;
	pthread_mutex_lock(&t->lock);
	atomic_store_explicit(&slot(t, idx)->o, NULL, memory_order_release);
	if (t->nfree == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 64, *f = realloc(t->free, cap * sizeof(*f));

		if (f) {
			t->free = f;
			t->cap = cap;
		}
	}
	if (t->nfree < t->cap)
		t->free[t->nfree++] = idx;	/* else the index is never reused */
	pthread_mutex_unlock(&t->lock);
	o->handle = 0;
}

struct obj *nic_resolve(struct emunic_dev *d, uint32_t h, enum obj_kind k)
{
	struct nic_tab_slot *s = h ? slot(&d->tab, NIC_HANDLE_INDEX(h)) : NULL;
	struct obj *o = s ? atomic_load_explicit(&s->o, memory_order_acquire) : NULL;

	return o && o->handle == h && o->kind == k ? o : NULL;
}

/* ---- the object header -------------------------------------------------------- */

void nic_obj_init(struct obj *o, struct emunic_dev *d, enum obj_kind k)
{
	o->kind = k;
	o->dev = d;
	atomic_init(&o->dead, false);
	atomic_init(&o->gone, false);
}

bool nic_obj_alive(struct emunic_dev *d, const struct obj *o, enum obj_kind k)
{
	return o && o->kind == k && (!d || o->dev == d) && !atomic_load(&((struct obj *)o)->dead);
}

/* Marks o dead once; false if it already was. The device's count of deaths
 * moves with it: a prepared list's start looks at its objects only then. */
bool nic_obj_kill(struct obj *o)
{
	if (atomic_exchange(&o->dead, true))
		return false;
	atomic_fetch_add(&o->dev->deaths, 1);
	return true;
}

/* ---- FIFOs ----------------------------------------------------------------------- */

int nic_fifo_init(struct nic_fifo *f, uint32_t entries, bool grows)
{
	uint32_t n = 1;

	while (n < entries)
		n <<= 1;
	memset(f, 0, sizeof(*f));
	f->q = calloc(n, sizeof(*f->q));
	f->mask = n - 1;
	f->grows = grows;
	return f->q ? 0 : -ENOMEM;
}

void nic_fifo_fini(struct nic_fifo *f)
{
	free(f->q);
	f->q = NULL;
}
