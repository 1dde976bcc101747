/* SPDX-License-Identifier: MIT */
/*
 * emunic-mlx5enc: shim/mlx5's encoders against bytes written out here by
 * hand from the public layouts (offsets, big-endian), and the EMUNIC_BACKEND
 * choice against fake capability results.  No RDMA device needed.
 *
 *   emunic-mlx5enc           the byte tests and the choice tests (host)
 *   emunic-mlx5enc --probe [DEV]   ask the first (or the named) verbs device:
 *                            its capability line and the choice for
 *                            EMUNIC_BACKEND (unset: auto)
 *
 * Exit: 0 pass (probe: a backend chosen), 1 fail (probe: the choice is an
 * error, printed), 77 skip (probe: no verbs device), 2 usage.
 */
#include "shim/mlx5/mlx5_cd.h"
#include "shim/mlx5/mlx5_dev.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

static int fails;

#define FAIL(...) do { fprintf(stderr, "emunic-mlx5enc: FAIL: "); fprintf(stderr, __VA_ARGS__); \
		       fputc('\n', stderr); fails++; } while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)

/* Compare byte by byte, naming the first few that differ. */
static void same(const char *what, const uint8_t *got, const uint8_t *want, size_t n)
{
	int shown = 0;

	for (size_t i = 0; i < n; i++) {
		if (got[i] == want[i])
			continue;
		if (shown++ < 4)
			FAIL("%s: byte %zu is 0x%02x, want 0x%02x", what, i, got[i], want[i]);
	}
}

/* The bytes past a WQE are not touched. */
static void untouched(const char *what, const uint8_t *p, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (p[i] != 0xcc) {
			FAIL("%s: wrote byte %zu past its end", what, i);
			return;
		}
}

/* ---- the control segment -------------------------------------------------- */

static void test_ctrl(void)
{
	struct emunic_mlx5_ctrl c = {
		.wqe_index = 0x1234, .opcode = EMUNIC_MLX5_OPCODE_SEND, .opmod = 0, .qpn = 0xabcdef,
		.ds = 3, .signature = 0x5a,
		.fm_ce_se = EMUNIC_MLX5_CTRL_CQ_UPDATE | EMUNIC_MLX5_CTRL_SOLICITED, .imm = 0xdeadbeef,
	};
	/* opmod | index 0x1234 | opcode; qpn << 8 | ds; signature, 2 x 0, fm_ce_se; imm */
	static const uint8_t want[16] = {
		0x00, 0x12, 0x34, 0x0a, 0xab, 0xcd, 0xef, 0x03,
		0x5a, 0x00, 0x00, 0x0a, 0xde, 0xad, 0xbe, 0xef,
	};
	uint8_t b[32], ref[16];

	memset(b, 0xcc, sizeof(b));
	CHECK(emunic_mlx5_ctrl_seg(b, sizeof(b), &c) == 16, "ctrl: not 16 bytes");
	same("ctrl", b, want, 16);
	untouched("ctrl", b, 16, 32);

	/* The same through rdma-core's own inline (imm goes in as given). */
	memset(ref, 0, sizeof(ref));
	mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)ref, 0x1234, MLX5_OPCODE_SEND, 0, 0xabcdef,
			    MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED, 3, 0x5a, htobe32(0xdeadbeef));
	same("ctrl vs mlx5dv_set_ctrl_seg", b, ref, 16);
	CHECK(sizeof(struct mlx5_wqe_ctrl_seg) == EMUNIC_MLX5_SEG_BYTES, "ctrl seg is not 16 bytes");
	CHECK(MLX5_SEND_WQE_BB == EMUNIC_MLX5_WQEBB_BYTES, "basic block is not 64 bytes");

	/* opmod in byte 0; the index wraps at 16 bits; fence bits 7:5. */
	c = (struct emunic_mlx5_ctrl){ .wqe_index = 0x2fffe, .opcode = 0x0f, .opmod = 0x01,
				       .qpn = 1, .ds = 63, .fm_ce_se = EMUNIC_MLX5_CTRL_FENCE };
	static const uint8_t want2[16] = {
		0x01, 0xff, 0xfe, 0x0f, 0x00, 0x00, 0x01, 0x3f,
		0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00,
	};
	CHECK(emunic_mlx5_ctrl_seg(b, 16, &c) == 16, "ctrl 2: not 16 bytes");
	same("ctrl opmod/wrap/fence", b, want2, 16);
	CHECK(MLX5_WQE_CTRL_FENCE == EMUNIC_MLX5_CTRL_FENCE &&
	      MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE == EMUNIC_MLX5_CTRL_SMALL_FENCE &&
	      MLX5_WQE_CTRL_CQ_UPDATE == EMUNIC_MLX5_CTRL_CQ_UPDATE &&
	      MLX5_WQE_CTRL_SOLICITED == EMUNIC_MLX5_CTRL_SOLICITED, "fm_ce_se bits differ from mlx5dv.h");

	/* What does not fit. */
	c.qpn = 0x1000000;
	CHECK(emunic_mlx5_ctrl_seg(b, 16, &c) == -EINVAL, "ctrl: a 25-bit qpn taken");
	c.qpn = 1, c.ds = 0;
	CHECK(emunic_mlx5_ctrl_seg(b, 16, &c) == -EINVAL, "ctrl: ds 0 taken");
	c.ds = 64;
	CHECK(emunic_mlx5_ctrl_seg(b, 16, &c) == -EINVAL, "ctrl: ds 64 taken");
	c.ds = 1;
	CHECK(emunic_mlx5_ctrl_seg(b, 15, &c) == -ENOSPC, "ctrl: a 15-byte buffer taken");
}

/* ---- WAIT, SEND_EN, RECV_EN ---------------------------------------------- */

static void test_wait(void)
{
	static const uint8_t want[32] = {
		0x00, 0x00, 0x07, 0x0f, 0x00, 0x01, 0x02, 0x02,	/* index 7, CQE_WAIT; qpn 0x102, ds 2 */
		0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00,	/* CQ update; imm 0 */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* reserved */
		0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x04, 0x56,	/* count 16; cqn 0x456 */
	};
	uint8_t b[64];

	memset(b, 0xcc, sizeof(b));
	CHECK(emunic_mlx5_wqe_wait(b, sizeof(b), 7, 0x102, EMUNIC_MLX5_CTRL_CQ_UPDATE, 0x456, 16) == 32,
	      "wait: not 32 bytes");
	same("wait", b, want, 32);
	untouched("wait", b, 32, 64);

	/* The count is a 24-bit CQ index: 0x1000001 wraps to 1. */
	CHECK(emunic_mlx5_wqe_wait(b, 32, 7, 0x102, EMUNIC_MLX5_CTRL_CQ_UPDATE, 0x456, 0x1000001) == 32,
	      "wait wrap: not 32 bytes");
	static const uint8_t count1[4] = { 0x00, 0x00, 0x00, 0x01 };
	same("wait count wrap", b + 24, count1, 4);

	CHECK(emunic_mlx5_wqe_wait(b, 31, 7, 0x102, 0, 0x456, 1) == -ENOSPC, "wait: 31 bytes taken");
	CHECK(emunic_mlx5_wqe_wait(b, 32, 7, 0x102, 0, 0x1000000, 1) == -EINVAL, "wait: 25-bit cqn taken");
	CHECK(emunic_mlx5_wqe_wait(b, 32, 7, 0x1000000, 0, 1, 1) == -EINVAL, "wait: 25-bit qpn taken");
}

static void test_enable(void)
{
	/* SEND_EN at index 0x1ffff (wraps to 0xffff), enabling 0xbeef's SQ up
	 * to 0x10005 (wraps to 5), no CQE. */
	static const uint8_t send_en[32] = {
		0x00, 0xff, 0xff, 0x17, 0x00, 0x01, 0x02, 0x02,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0xbe, 0xef,
	};
	/* RECV_EN at index 0x10000 (wraps to 0) from QP 0xffffff, fenced and
	 * signalled, enabling QP 1's RQ up to 3. */
	static const uint8_t recv_en[32] = {
		0x00, 0x00, 0x00, 0x16, 0xff, 0xff, 0xff, 0x02,
		0x00, 0x00, 0x00, 0x88, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01,
	};
	uint8_t b[64];

	memset(b, 0xcc, sizeof(b));
	CHECK(emunic_mlx5_wqe_send_en(b, sizeof(b), 0x1ffff, 0x102, 0, 0xbeef, 0x10005) == 32,
	      "send_en: not 32 bytes");
	same("send_en", b, send_en, 32);
	untouched("send_en", b, 32, 64);

	memset(b, 0xcc, sizeof(b));
	CHECK(emunic_mlx5_wqe_recv_en(b, sizeof(b), 0x10000, 0xffffff,
				      EMUNIC_MLX5_CTRL_FENCE | EMUNIC_MLX5_CTRL_CQ_UPDATE, 1, 3) == 32,
	      "recv_en: not 32 bytes");
	same("recv_en", b, recv_en, 32);
	untouched("recv_en", b, 32, 64);

	CHECK(emunic_mlx5_wqe_send_en(b, 16, 0, 1, 0, 2, 1) == -ENOSPC, "send_en: 16 bytes taken");
	CHECK(emunic_mlx5_wqe_recv_en(b, 32, 0, 1, 0, 0x1000000, 1) == -EINVAL,
	      "recv_en: 25-bit target taken");
}

static void test_ring(void)
{
	uint8_t sq[8 * 64];

	CHECK(emunic_mlx5_wqebbs(2) == 1 && emunic_mlx5_wqebbs(4) == 1 && emunic_mlx5_wqebbs(5) == 2 &&
	      emunic_mlx5_wqebbs(63) == 16, "wqebbs: ds to basic blocks wrong");
	CHECK(emunic_mlx5_sq_slot(sq, 8, 0) == sq && emunic_mlx5_sq_slot(sq, 8, 9) == sq + 64 &&
	      emunic_mlx5_sq_slot(sq, 8, 0x10007) == sq + 7 * 64, "sq_slot: wrong block");
}

/* ---- PRM command fields ---------------------------------------------------- */

static void test_prm(void)
{
	/* 4 bits at bit 0x0c: dword 0 bits 19:16; 24 bits at 0x28: dword 1 bits 23:0. */
	static const uint8_t want[8] = { 0x00, 0x0f, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56 };
	uint8_t b[8] = { 0 };

	emunic_mlx5_prm_set(b, 0x0c, 4, 0xf);
	emunic_mlx5_prm_set(b, 0x28, 24, 0x123456);
	same("prm_set", b, want, 8);
	CHECK(emunic_mlx5_prm_get(b, 0x0c, 4) == 0xf && emunic_mlx5_prm_get(b, 0x28, 24) == 0x123456,
	      "prm_get: not what was set");
	emunic_mlx5_prm_set(b, 0x0c, 4, 0x1f);	/* too wide: cut to the field */
	CHECK(b[0] == 0 && b[1] == 0x0f && b[2] == 0, "prm_set: spilled past its field");
}

static void test_caps(void)
{
	/* QUERY_HCA_CAP 0x100 in bits 0-15; op_mod GENERAL_DEVICE | GET_CUR = 1 in bits 0x30-0x3f. */
	static const uint8_t want_in[16] = { 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01 };
	uint8_t in[16];
	uint8_t *out = calloc(1, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES);
	struct emunic_mlx5_caps caps;

	if (!out) {
		FAIL("calloc");
		return;
	}
	memset(in, 0xcc, sizeof(in));
	emunic_mlx5_query_caps_in(in);
	same("query_hca_cap_in", in, want_in, 16);

	CHECK(emunic_mlx5_caps_parse(out, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES, "mlx5_0", &caps) == 0 &&
	      !caps.cross_channel && strstr(caps.why, "mlx5_0"), "caps: a zero answer is not 'no cd'");
	/* cd is bit 0x22c of cmd_hca_cap: byte 0x22c / 8 = 69, 0x80 >> 4 = 0x08,
	 * after the 16-byte header: byte 85. */
	memset(out + 16 + 69, 0xf7, 1);	/* every other bit of that byte */
	CHECK(emunic_mlx5_caps_parse(out, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES, "mlx5_0", &caps) == 0 &&
	      !caps.cross_channel, "caps: a neighbouring bit read as cd");
	out[85] = 0x08;
	CHECK(emunic_mlx5_caps_parse(out, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES, "mlx5_0", &caps) == 0 &&
	      caps.cross_channel, "caps: cd (byte 85, 0x08) not seen");
	out[0] = 0x03;	/* status */
	out[4] = 0x00, out[5] = 0xab, out[6] = 0xcd, out[7] = 0xef;	/* syndrome */
	CHECK(emunic_mlx5_caps_parse(out, EMUNIC_MLX5_QUERY_CAP_OUT_BYTES, "mlx5_0", &caps) == -EPROTO &&
	      !caps.cross_channel && strstr(caps.why, "status 0x3") && strstr(caps.why, "syndrome 0xabcdef"),
	      "caps: a failed command not named: %s", caps.why);
	CHECK(emunic_mlx5_caps_parse(out, 16, "mlx5_0", &caps) == -EINVAL, "caps: a short answer taken");
	free(out);
}

static void test_create_qp(void)
{
	struct emunic_mlx5_qp_attr a = {
		.pdn = 0xa0b, .cqn_snd = 0x111, .cqn_rcv = 0x222, .uar_page = 0x33,
		.log_sq_wqebbs = 6, .log_rq_wqes = 5, .log_rq_stride = 6, .log_page_size = 12,
		.wq_umem_id = 0x44, .wq_umem_offset = 0x100000080ull, .dbr_umem_id = 0x55,
		.dbr_offset = 0x40, .cd = EMUNIC_MLX5_CD_MASTER | EMUNIC_MLX5_CD_SLAVE_SEND,
	};
	uint8_t in[EMUNIC_MLX5_CREATE_QP_IN_BYTES + 8], want[EMUNIC_MLX5_CREATE_QP_IN_BYTES];

	/* Worked by hand: the qpc starts at byte 24 (bit 0xc0). */
	memset(want, 0, sizeof(want));
	want[0] = 0x05;				/* opcode CREATE_QP 0x500 */
	want[26] = 0x18;			/* pm_state 3 at qpc bits 0x13-0x14 */
	want[30] = 0x0a, want[31] = 0x0b;	/* pd, qpc bytes 5-7 */
	want[33] = 0x2a, want[34] = 0x30;	/* log_rq_size 5 <<19 | stride 2 <<16 | log_sq_size 6 <<11 */
	want[39] = 0x33;			/* uar_page, qpc bytes 13-15 */
	want[150] = 0x01, want[151] = 0x11;	/* cqn_snd, qpc dword 31 */
	want[171] = 0x03;			/* cd_master | cd_slave_send, qpc byte 147 bits 0-1 */
	want[182] = 0x02, want[183] = 0x22;	/* cqn_rcv, qpc dword 39 */
	want[191] = 0x40;			/* dbr_addr (the umem offset), qpc bytes 160-167 */
	want[232] = 0x10;			/* dbr_umem_valid, qpc bit 0x683 */
	want[255] = 0x55;			/* dbr_umem_id, qpc bytes 228-231 */
	want[259] = 0x01, want[263] = 0x80;	/* wq_umem_offset, bytes 256-263 */
	want[267] = 0x44;			/* wq_umem_id, bytes 264-267 */
	want[268] = 0x80;			/* wq_umem_valid, bit 0x860 */
	memset(in, 0xcc, sizeof(in));
	CHECK(emunic_mlx5_create_qp_in(in, sizeof(in), &a) == EMUNIC_MLX5_CREATE_QP_IN_BYTES,
	      "create_qp_in: not 272 bytes");
	same("create_qp_in master", in, want, sizeof(want));
	untouched("create_qp_in", in, sizeof(want), sizeof(in));

	/* A receive slave with no SQ and a zero-length RQ. */
	a.no_sq = a.no_rq = true;
	a.cd = EMUNIC_MLX5_CD_SLAVE_RECV;
	want[33] = 0x00, want[34] = 0x80;	/* no_sq, qpc bit 0x50; no sizes */
	want[150] = want[151] = 0;		/* no cqn_snd */
	want[171] = 0x04;			/* cd_slave_receive, bit 2 */
	want[182] = want[183] = 0;		/* no cqn_rcv */
	want[196] = 0x03;			/* rq_type ZERO_LEN 3 at qpc bits 0x565-0x567 */
	CHECK(emunic_mlx5_create_qp_in(in, sizeof(in), &a) == EMUNIC_MLX5_CREATE_QP_IN_BYTES,
	      "create_qp_in slave: not 272 bytes");
	same("create_qp_in slave", in, want, sizeof(want));

	CHECK(emunic_mlx5_create_qp_in(in, EMUNIC_MLX5_CREATE_QP_IN_BYTES - 1, &a) == -ENOSPC,
	      "create_qp_in: a short buffer taken");
	a.cd = 8;
	CHECK(emunic_mlx5_create_qp_in(in, sizeof(in), &a) == -EINVAL, "create_qp_in: cd 8 taken");
	a.cd = 0, a.pdn = 0x1000000;
	CHECK(emunic_mlx5_create_qp_in(in, sizeof(in), &a) == -EINVAL, "create_qp_in: 25-bit pd taken");
	a.pdn = 1, a.no_rq = false, a.log_rq_stride = 3;
	CHECK(emunic_mlx5_create_qp_in(in, sizeof(in), &a) == -EINVAL, "create_qp_in: 8-byte RQ stride taken");
}

/* ---- the choice ------------------------------------------------------------ */

static void test_choice(void)
{
	const struct emunic_mlx5_caps no = { false, "rxe0: not an mlx5 device" };
	const struct emunic_mlx5_caps yes = { true, "mlx5_0: cross-channel (HCA cap cd) supported" };
	static const char *const bad[] = { "MLX5", "bogus", "auto ", "emulate" };
	char why[256];
	int r;

	r = emunic_mlx5_backend_pick(NULL, "rxe0", &no, why, sizeof(why));
	CHECK(r == EMUNIC_BACKEND_EMULATED && strstr(why, "auto") && strstr(why, "not an mlx5 device"),
	      "unset without the cap: %d %s", r, why);
	r = emunic_mlx5_backend_pick("", "rxe0", &no, why, sizeof(why));
	CHECK(r == EMUNIC_BACKEND_EMULATED, "empty is not auto: %d %s", r, why);
	r = emunic_mlx5_backend_pick("auto", "mlx5_0", &yes, why, sizeof(why));
	CHECK(r == EMUNIC_BACKEND_MLX5 && strstr(why, "supported"), "auto with the cap: %d %s", r, why);
	r = emunic_mlx5_backend_pick("mlx5", "mlx5_0", &yes, why, sizeof(why));
	CHECK(r == EMUNIC_BACKEND_MLX5, "mlx5 with the cap: %d %s", r, why);
	r = emunic_mlx5_backend_pick("mlx5", "rxe0", &no, why, sizeof(why));
	CHECK(r == -ENOTSUP && strstr(why, "rxe0") && strstr(why, "not an mlx5 device"),
	      "mlx5 forced without the cap: %d %s", r, why);
	r = emunic_mlx5_backend_pick("emulated", "mlx5_0", &yes, why, sizeof(why));
	CHECK(r == EMUNIC_BACKEND_EMULATED, "emulated with the cap: %d %s", r, why);
	r = emunic_mlx5_backend_pick("emulated", "rxe0", NULL, why, sizeof(why));
	CHECK(r == EMUNIC_BACKEND_EMULATED, "emulated unqueried: %d %s", r, why);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = emunic_mlx5_backend_pick(bad[i], "rxe0", &yes, why, sizeof(why));
		CHECK(r == -EINVAL && strstr(why, bad[i]) &&
		      strstr(why, "accepted values are auto, emulated, mlx5"),
		      "'%s' not refused: %d %s", bad[i], r, why);
	}
	CHECK(!strcmp(emunic_backend_str(EMUNIC_BACKEND_MLX5), "mlx5") &&
	      !strcmp(emunic_backend_str(EMUNIC_BACKEND_EMULATED), "emulated"), "backend names");
}

/* ---- --probe: a real device ------------------------------------------------ */

static int probe(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL), *d = NULL;
	struct emunic_mlx5_caps caps;
	const char *env = getenv("EMUNIC_BACKEND");
	struct ibv_context *ctx;
	char why[320];
	int r;

	for (int i = 0; list && list[i] && !d; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]), name))
			d = list[i];
	if (!d) {
		printf("emunic-mlx5enc: probe: no verbs device%s%s: skip\n", name ? " named " : "",
		       name ? name : "");
		if (list)
			ibv_free_device_list(list);
		return 77;
	}
	ctx = ibv_open_device(d);
	if (!ctx) {
		printf("emunic-mlx5enc: probe: %s: cannot open: %s\n", ibv_get_device_name(d),
		       strerror(errno));
		ibv_free_device_list(list);
		return 1;
	}
	r = emunic_mlx5_query_caps(ctx, &caps);
	printf("emunic-mlx5enc: probe: %s: mlx5dv_is_supported %d, cross_channel %d (%s), ret %d\n",
	       ibv_get_device_name(d), mlx5dv_is_supported(d), caps.cross_channel, caps.why, r);
	r = emunic_mlx5_backend_choice(env, ctx, why, sizeof(why));
	if (r >= 0)
		printf("emunic-mlx5enc: probe: backend %s: %s\n", emunic_backend_str(r), why);
	else
		printf("emunic-mlx5enc: probe: error %d (%s): %s\n", r, strerror(-r), why);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return r >= 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--probe"))
		return probe(argc > 2 ? argv[2] : NULL);
	if (argc > 1) {
		fprintf(stderr, "usage: emunic-mlx5enc [--probe [DEV]]\n");
		return 2;
	}
	test_ctrl();
	test_wait();
	test_enable();
	test_ring();
	test_prm();
	test_caps();
	test_create_qp();
	test_choice();
	if (fails) {
		fprintf(stderr, "emunic-mlx5enc: %d failure(s)\n", fails);
		return 1;
	}
	printf("emunic-mlx5enc: PASS (control, WAIT, SEND_EN, RECV_EN, ring, PRM fields, "
	       "QUERY_HCA_CAP, CREATE_QP, EMUNIC_BACKEND)\n");
	return 0;
}
