/* SPDX-License-Identifier: MIT */
/*
 * emunic-datapath: every rank moves data to every other rank with RDMA WRITE,
 * WRITE_WITH_IMM, SEND/RECV, READ and FETCH_AND_ADD over RC QPs connected by
 * librdmacm, and verifies every byte and value it receives.  The foundation
 * test of the verbs layer; --corrupt proves the verification can fail.
 */
#include "emunic/verbs.h"
#include "emunic/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness.h"

enum op { OP_WRITE, OP_IMM, OP_SEND, OP_READ, OP_FAA, OP_COUNT };
static const char *const op_name[OP_COUNT] = { "write", "write_imm", "send", "read", "fetch_add" };

#define EXIT_VERIFY TEST_FAIL
#define EXIT_USAGE TEST_USAGE
#define EXIT_RDMA TEST_NORUN

struct remote {
	uint64_t addr;
	uint32_t rkey;
};

struct dp {
	struct emunic_boot *boot;
	struct emunic_vdev *dev;
	struct ibv_cq *cq;
	struct emunic_mesh *mesh;
	struct ibv_mr *mr;
	int rank, size, iters, corrupt;
	size_t len;
	char *buf;			/* one registered area, laid out below */
	size_t off[OP_COUNT];		/* inbox per op: size slots of len bytes */
	size_t src_off, export_off, counter_off, fetched_off;
	struct remote *peer;		/* by rank */
	long errors;
};

static uint8_t pattern(int src, int dst, int op, int iter, size_t i)
{
	uint32_t x = (uint32_t)(src * 7919 + dst * 104729 + op * 1299709 + iter * 15485863) ^ (uint32_t)i;

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	return (uint8_t)(x ^ (x >> 15));
}

static void fill(uint8_t *p, size_t len, int src, int dst, int op, int iter)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(src, dst, op, iter, i);
}

static void check(struct dp *d, const uint8_t *p, size_t len, int src, int op, int iter)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t want = pattern(src, op == OP_READ ? src : d->rank, op, iter, i);

		if (p[i] != want) {
			emunic_info("%s from peer %d, round %d: byte %zu of %zu is 0x%02x, expected 0x%02x",
				    op_name[op], src, iter, i, len, p[i], want);
			d->errors++;
			return;
		}
	}
}

static char *slot(struct dp *d, size_t base, int peer) { return d->buf + base + (size_t)peer * d->len; }

/* Waits for n completions; every one must succeed. */
static int reap(struct dp *d, int n, const char *what, struct ibv_wc *out)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		int r = emunic_shim_poll_cq(&d->dev->shim, d->cq, 1, &wc);

		if (r < 0)
			return emunic_err(r, "%s: polling the CQ failed: %s", what, strerror(-r));
		if (r == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 30)
				return emunic_err(-ETIMEDOUT, "%s: %d of %d completions after 30 s", what, got, n);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS)
			return emunic_err(-EIO, "%s: peer %d qp %u opcode %d: %s", what, (int)(wc.wr_id >> 8),
					  wc.qp_num, wc.opcode, ibv_wc_status_str(wc.status));
		if (out)
			out[got] = wc;
		got++;
	}
	return 0;
}

static struct ibv_qp *qp_of(struct dp *d, int p) { return d->mesh->conn[p].qp; }

static int post_send(struct dp *d, int p, enum ibv_wr_opcode opc, size_t local, uint64_t raddr, uint32_t imm,
		     uint64_t add)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(d->buf + local), .length = (uint32_t)d->len,
			       .lkey = d->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = (uint64_t)p << 8 | opc, .sg_list = &sge, .num_sge = 1,
				  .opcode = opc, .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (opc == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		sge.length = 8;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = d->peer[p].rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = d->peer[p].rkey;
		wr.imm_data = htonl(imm);
	}
	int r = emunic_shim_post_send(&d->dev->shim, qp_of(d, p), &wr, &bad);

	if (r)
		return emunic_err(r, "peer %d qp %u: posting a send (opcode %d) failed: %s", p,
				  qp_of(d, p)->qp_num, opc, strerror(-r));
	return 0;
}

static int post_recv(struct dp *d, int p, size_t local)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(d->buf + local), .length = (uint32_t)d->len,
			       .lkey = d->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)p << 8, .sg_list = &sge, .num_sge = 1 }, *bad;

	int r = emunic_shim_post_recv(&d->dev->shim, qp_of(d, p), &wr, &bad);

	if (r)
		return emunic_err(r, "peer %d qp %u: posting a receive failed: %s", p, qp_of(d, p)->qp_num,
				  strerror(-r));
	return 0;
}

static int peer_of_qp(struct dp *d, uint32_t qpn)
{
	for (int p = 0; p < d->size; p++)
		if (p != d->rank && qp_of(d, p)->qp_num == qpn)
			return p;
	return -1;
}

/* Sources for this round; --corrupt spoils one byte of the chosen op's data. */
static void prepare(struct dp *d, int op, int iter, int p)
{
	uint8_t *src = (uint8_t *)(op == OP_READ ? d->buf + d->export_off : slot(d, d->src_off, p));

	fill(src, d->len, d->rank, op == OP_READ ? d->rank : p, op, iter);
	if (d->corrupt == op && d->len)
		src[d->len / 2] ^= 0x5a;
}

static int round_bytes(struct dp *d, int op, int iter)
{
	struct ibv_wc *wc = calloc(2 * (size_t)d->size, sizeof(*wc));
	int n = d->size - 1, r = 0, p;

	if (!wc)
		return -ENOMEM;
	for (p = 0; p < d->size && !r; p++)
		if (p != d->rank && (op == OP_IMM || op == OP_SEND))
			r = post_recv(d, p, d->off[op] + (size_t)p * d->len);
	if (op == OP_READ)
		prepare(d, op, iter, d->rank);
	r = r ? r : emunic_boot_barrier(d->boot);	/* receives posted, exports ready */
	for (p = 0; p < d->size && !r; p++) {
		uint64_t dst = d->peer[p].addr + d->off[op] + (size_t)d->rank * d->len;

		if (p == d->rank)
			continue;
		if (op == OP_READ) {
			r = post_send(d, p, IBV_WR_RDMA_READ, d->off[op] + (size_t)p * d->len,
				      d->peer[p].addr + d->export_off, 0, 0);
			continue;
		}
		prepare(d, op, iter, p);
		r = post_send(d, p, op == OP_WRITE ? IBV_WR_RDMA_WRITE : op == OP_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM
										    : IBV_WR_SEND,
			      d->src_off + (size_t)p * d->len, dst, (uint32_t)(d->rank << 16 | iter), 0);
	}
	r = r ? r : reap(d, (op == OP_IMM || op == OP_SEND) ? 2 * n : n, op_name[op], wc);
	r = r ? r : emunic_boot_barrier(d->boot);	/* every write has landed */
	for (p = 0; p < d->size && !r; p++)
		if (p != d->rank)
			check(d, (uint8_t *)slot(d, d->off[op], p), d->len, p, op, iter);
	for (int i = 0; i < 2 * n && !r && (op == OP_IMM || op == OP_SEND); i++) {
		int src = peer_of_qp(d, wc[i].qp_num);

		if (!(wc[i].opcode & IBV_WC_RECV))
			continue;
		if (wc[i].byte_len != d->len && op == OP_SEND) {
			emunic_info("send from peer %d: %u bytes arrived, %zu sent", src, wc[i].byte_len, d->len);
			d->errors++;
		}
		if (op == OP_IMM && (!(wc[i].wc_flags & IBV_WC_WITH_IMM) ||
				     ntohl(wc[i].imm_data) != (uint32_t)(src << 16 | iter))) {
			emunic_info("write_imm from peer %d: immediate 0x%x, expected 0x%x", src,
				    ntohl(wc[i].imm_data), (uint32_t)(src << 16 | iter));
			d->errors++;
		}
	}
	free(wc);
	return r;
}

/* Every rank adds (rank + 1) to every other rank's counter once a round. */
static int round_faa(struct dp *d, int iter)
{
	uint64_t *counter = (uint64_t *)(d->buf + d->counter_off), want = 0;
	size_t saved = d->len;
	int r = 0, p;

	d->len = 8;
	for (p = 0; p < d->size && !r; p++)
		if (p != d->rank)
			r = post_send(d, p, IBV_WR_ATOMIC_FETCH_AND_ADD, d->fetched_off + (size_t)p * 8,
				      d->peer[p].addr + d->counter_off, 0,
				      (uint64_t)d->rank + 1 + (d->corrupt == OP_FAA));
	d->len = saved;
	r = r ? r : reap(d, d->size - 1, "fetch_add", NULL);
	r = r ? r : emunic_boot_barrier(d->boot);
	if (r)
		return r;
	for (p = 0; p < d->size; p++)
		if (p != d->rank)
			want += (uint64_t)(p + 1) * (uint64_t)(iter + 1);
	/* What I fetched at p lies between p's counter before this round and
	 * that plus every other rank's addend of this round. */
	for (p = 0; p < d->size; p++) {
		uint64_t f = *(uint64_t *)(d->buf + d->fetched_off + (size_t)p * 8);
		uint64_t sum = 0, lo;

		if (p == d->rank)
			continue;
		for (int q = 0; q < d->size; q++)
			sum += q != p ? (uint64_t)q + 1 : 0;
		lo = sum * (uint64_t)iter;
		if (f < lo || f > lo + sum - ((uint64_t)d->rank + 1)) {
			emunic_info("fetch_add at peer %d returned %llu, outside [%llu, %llu]", p,
				    (unsigned long long)f, (unsigned long long)lo,
				    (unsigned long long)(lo + sum - ((uint64_t)d->rank + 1)));
			d->errors++;
		}
	}
	if (*counter != want) {
		emunic_info("fetch_add: counter is %llu after round %d, expected %llu",
			    (unsigned long long)*counter, iter, (unsigned long long)want);
		d->errors++;
	}
	return 0;
}

static int setup(struct dp *d)
{
	struct remote mine;
	size_t total, o = 0;
	int r;

	r = emunic_boot_init(&d->boot);
	if (r)
		return r;
	d->rank = emunic_boot_rank(d->boot);
	d->size = emunic_boot_size(d->boot);
	if (d->size < 2)
		return emunic_err(-EINVAL, "needs at least 2 ranks (emunic-run -n 2 ...)");
	r = emunic_vdev_open(NULL, &d->dev);
	if (r)
		return r;
	for (int op = 0; op < OP_COUNT; op++, o += (size_t)d->size * d->len)
		d->off[op] = o;
	d->src_off = o;
	o += (size_t)d->size * d->len;
	d->export_off = o;
	o += d->len;
	o = (o + 7) & ~(size_t)7;
	d->counter_off = o;
	d->fetched_off = o + 8;
	total = o + 8 + (size_t)d->size * 8;
	d->buf = aligned_alloc(4096, (total + 4095) & ~(size_t)4095);
	if (!d->buf)
		return -ENOMEM;
	memset(d->buf, 0, total);
	r = emunic_shim_reg_mr(&d->dev->shim, d->dev->pd, d->buf, total, IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, &d->mr);
	if (r)
		return emunic_err(r, "registering %zu bytes failed: %s", total, strerror(-r));
	r = emunic_shim_create_cq(&d->dev->shim, d->dev->ctx, 4 * d->size + 64, NULL, &d->cq);
	if (r)
		return emunic_err(r, "creating the CQ failed: %s", strerror(-r));
	r = emunic_mesh_open(d->dev, d->boot, NULL, d->cq, d->cq, &d->mesh);
	if (r)
		return r;
	r = emunic_mesh_connect_all(d->mesh, 30000);
	if (r)
		return r;
	d->peer = calloc((size_t)d->size, sizeof(*d->peer));
	if (!d->peer)
		return -ENOMEM;
	memset(&mine, 0, sizeof(mine));	/* padding goes on the wire */
	mine.addr = (uintptr_t)d->buf;
	mine.rkey = d->mr->rkey;
	return emunic_boot_allgather(d->boot, &mine, sizeof(mine), d->peer);
}

static void teardown(struct dp *d)
{
	emunic_mesh_close(d->mesh);
	if (d->cq)
		emunic_shim_destroy_cq(&d->dev->shim, d->cq);
	if (d->mr)
		emunic_shim_dereg_mr(&d->dev->shim, d->mr);
	free(d->buf);
	free(d->peer);
	emunic_vdev_close(d->dev);
	if (d->boot)
		emunic_boot_fini(d->boot);
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		return 0;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	}
	return *end ? 0 : (size_t)v;
}

static const char usage[] =
"usage: emunic-run -n N emunic-datapath [--size BYTES[K|M]] [--iters N] [--corrupt OP]\n"
"  Moves data between every pair of ranks with write, write_imm, send, read and\n"
"  fetch_add, verifying every byte and value.  --corrupt OP spoils one byte (or\n"
"  one addend) of OP's data on every rank, so verification must fail.\n"
"  Exit: 0 verified, 1 verification failed, 2 usage, 3 RDMA or bootstrap error.\n";

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' }, { "iters", required_argument, NULL, 'i' },
		{ "corrupt", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, { 0 }
	};
	struct dp d = { .len = 65536, .iters = 3, .corrupt = -1 };
	long total_err = 0;
	long *all_err;
	int c, r;

	while ((c = getopt_long(argc, argv, "s:i:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': d.len = parse_size(optarg); if (!d.len || d.len > (64u << 20)) goto bad; break;
		case 'i': d.iters = atoi(optarg); if (d.iters < 1) goto bad; break;
		case 'c':
			for (d.corrupt = 0; d.corrupt < OP_COUNT && strcmp(optarg, op_name[d.corrupt]); d.corrupt++)
				;
			if (d.corrupt == OP_COUNT)
				goto bad;
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: goto bad;
		}
	}
	r = setup(&d);
	for (int it = 0; it < d.iters && !r; it++) {
		for (int op = OP_WRITE; op <= OP_READ && !r; op++)
			r = round_bytes(&d, op, it);
		r = r ? r : round_faa(&d, it);
	}
	all_err = d.boot && !r ? calloc((size_t)d.size, sizeof(long)) : NULL;
	if (all_err && !emunic_boot_allgather(d.boot, &d.errors, sizeof(long), all_err))
		for (int p = 0; p < d.size; p++)
			total_err += all_err[p];
	if (!r && d.rank == 0) {
		printf("emunic-datapath: %d ranks on %s, %d rounds of %zu bytes: write, write_imm, send, read, "
		       "fetch_add %s (%ld mismatches)\n", d.size, d.dev->name, d.iters, d.len,
		       total_err ? "FAILED verification" : "verified", total_err);
		fflush(stdout);
	}
	/* Only once rank 0 has printed the verdict may a rank exit with it:
	 * emunic-run kills the others when one exits non-zero (a rank that
	 * found a mismatch used to, before rank 0 printed). */
	if (all_err && emunic_boot_barrier(d.boot))
		r = r ? r : -EIO;
	free(all_err);
	teardown(&d);
	if (r)
		return EXIT_RDMA;
	return d.errors || total_err ? EXIT_VERIFY : 0;
bad:
	fputs(usage, stderr);
	return EXIT_USAGE;
}
