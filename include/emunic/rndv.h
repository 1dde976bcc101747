/* SPDX-License-Identifier: MIT */
/*
 * emunic/rndv.h — point-to-point messages with MPI matching, over the
 * triggered operations of the progress core (engines/rndv).
 *
 * Protocol: chunked receiver-driven rendezvous (seed 004, sections 3.2-3.3).
 * The sender puts the first `first` bytes with a header (match bits, total
 * size, rank, where the rest is) into a bounce slot at the receiver; the
 * receiver's progress core matches it against posted receives (MPI rules:
 * tags, ANY_TAG, ANY_SOURCE, non-overtaking between a pair), copies the first
 * chunk out and gets the rest in chunks of `chunk` bytes with at most
 * `credits` gets in flight: get c + i is triggered by the receive's counter
 * reaching i + 1.  The sender learns it is done from its own counter, which
 * the receiver's gets bump through target-side counting.  A message that
 * finds no receive is copied out of its slot (so slots return in order) and
 * matched when a receive comes.  Transfers complete with no test call.
 *
 * Sizes: 0 .. 4 GiB - 1 per message.  A message larger than the receive
 * buffer fills the buffer and completes the receive with -EMSGSIZE
 * (truncation); the sender completes normally.
 */
#ifndef EMUNIC_RNDV_H
#define EMUNIC_RNDV_H

#include <stddef.h>
#include <stdint.h>

struct emunic_dev;
struct emunic_rndv;
struct emunic_req;

#define EMUNIC_ANY_SOURCE (-1)
#define EMUNIC_ANY_TAG (-1)
#define EMUNIC_TAG_MAX 0x3fffffff

struct emunic_rndv_attr {
	size_t first;		/* bytes carried with the header (0: 4096) */
	size_t chunk;		/* s: bytes per get (0: 65536); SIZE_MAX: one get */
	unsigned credits;	/* c: gets in flight per receive (0: 4) */
	unsigned slots;		/* bounce slots per peer (0: 64) */
	unsigned max_sends;	/* sends in flight per endpoint (0: 256); more: -ENOSPC */
	uint32_t ctx;		/* communicator context: messages match only within it */
	int connect_timeout_ms;	/* 0: 30000 */
};
void emunic_rndv_attr_init(struct emunic_rndv_attr *a);

/* Collective over the device's ranks: connects to every peer. */
int emunic_rndv_create(struct emunic_dev *dev, const struct emunic_rndv_attr *attr, struct emunic_rndv **out);
/* Fails with -EBUSY while requests are not freed. */
int emunic_rndv_destroy(struct emunic_rndv *r);

struct emunic_status {
	int source;		/* sender's rank */
	int tag;
	int error;		/* 0, -EMSGSIZE (truncated), -EIO (a transfer failed), -ECANCELED */
	size_t len;		/* bytes delivered into the buffer */
	size_t total;		/* bytes the sender sent */
};

/* 0, or -EINVAL (dst not a peer, negative or too large tag; nothing sent),
 * -ENOSPC (max_sends in flight). */
int emunic_isend(struct emunic_rndv *r, const void *buf, size_t len, int dst, int tag, struct emunic_req **req);
/* src may be EMUNIC_ANY_SOURCE, tag EMUNIC_ANY_TAG. */
int emunic_irecv(struct emunic_rndv *r, void *buf, size_t len, int src, int tag, struct emunic_req **req);
/* *done = 1 once complete (st filled, if not NULL).  Never needed for
 * progress: the transfer moves without it. */
int emunic_test(struct emunic_req *req, int *done, struct emunic_status *st);
/* 0 when complete, -ETIMEDOUT after timeout_ms (< 0: no bound). */
int emunic_wait(struct emunic_req *req, struct emunic_status *st, int timeout_ms);
/* A receive that has not matched is withdrawn (0); one that has: -EBUSY. */
int emunic_cancel(struct emunic_req *req);
/* Frees a completed or canceled request: 0, or -EBUSY. */
int emunic_req_free(struct emunic_req *req);

struct emunic_rndv_stats {
	uint64_t sends, recvs;
	uint64_t expected, unexpected;	/* receives matched to arrivals by when they came */
	uint64_t gets;			/* chunk gets issued */
	size_t posted, queued;		/* receives waiting; messages waiting for a receive */
};
int emunic_rndv_stats(struct emunic_rndv *r, struct emunic_rndv_stats *st);

#endif /* EMUNIC_RNDV_H */
