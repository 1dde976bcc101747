/* SPDX-License-Identifier: MIT */
/*
 * Single-producer single-consumer ring of fixed-size entries, C11
 * release/acquire on the two indices (the shape of rdma-core's and
 * io_uring's shared rings).  Several app threads share a producer side by
 * holding the device's post lock; the progress core is the one consumer.
 */
#ifndef EMUNIC_BASE_RING_H
#define EMUNIC_BASE_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct emunic_ring {
	_Alignas(64) _Atomic uint32_t head;	/* consumer */
	_Alignas(64) _Atomic uint32_t tail;	/* producer */
	_Alignas(64) uint32_t mask;
	uint32_t esize;
	char *slots;
};

static inline int emunic_ring_init(struct emunic_ring *r, uint32_t entries, uint32_t esize)
{
	uint32_t n = 1;

	while (n < entries)
		n <<= 1;
	r->slots = calloc(n, esize);
	if (!r->slots)
		return -1;
	r->mask = n - 1;
	r->esize = esize;
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	return 0;
}

static inline void emunic_ring_fini(struct emunic_ring *r) { free(r->slots); r->slots = NULL; }

static inline uint32_t emunic_ring_space(struct emunic_ring *r)
{
	uint32_t h = atomic_load_explicit(&r->head, memory_order_acquire);
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);

	return r->mask + 1 - (t - h);
}

/* Producer: the i-th slot past the published tail, then publish k at once. */
static inline void *emunic_ring_slot(struct emunic_ring *r, uint32_t i)
{
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);

	return r->slots + (size_t)((t + i) & r->mask) * r->esize;
}

static inline void emunic_ring_publish(struct emunic_ring *r, uint32_t k)
{
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);

	atomic_store_explicit(&r->tail, t + k, memory_order_release);
}

static inline bool emunic_ring_push(struct emunic_ring *r, const void *e)
{
	if (!emunic_ring_space(r))
		return false;
	memcpy(emunic_ring_slot(r, 0), e, r->esize);
	emunic_ring_publish(r, 1);
	return true;
}

/* Consumer. */
static inline void *emunic_ring_peek(struct emunic_ring *r)
{
	uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(&r->tail, memory_order_acquire);

	return h == t ? NULL : r->slots + (size_t)(h & r->mask) * r->esize;
}

static inline void emunic_ring_pop(struct emunic_ring *r)
{
	uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);

	atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

static inline bool emunic_ring_empty(const struct emunic_ring *r)
{
	return atomic_load_explicit(&r->head, memory_order_acquire) ==
	       atomic_load_explicit(&r->tail, memory_order_acquire);
}

#endif
