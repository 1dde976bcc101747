/* SPDX-License-Identifier: MIT */
/*
 * emunic-shimtest: the device interface's table without a device (host):
 * every entry starts as the not-supported default (-EOPNOTSUPP, and a post
 * names its first work request as the one refused); a backend's set entries
 * replace the defaults and nothing else; the emulated and mlx5 backends
 * leave the cross-channel entries unsupported; the capabilities read from a
 * device's answer (RoCE with atomics, iWARP without) and EMUNIC_BACKEND's
 * errors.  A fake ibv_context stands for the device: with
 * EMUNIC_BACKEND=emulated the open asks it nothing but its transport.
 */
#include "shim/backend.h"
#include "harness.h"

#include <string.h>

static int my_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)cq, (void)wc;
	return n;
}

static void test_defaults(void)
{
	struct emunic_shim s;
	struct ibv_send_wr swr = { 0 }, *sbad = NULL;
	struct ibv_recv_wr rwr = { 0 }, *rbad = NULL;

	memset(&s, 0, sizeof(s));
	emunic_shim_ops_init(&s);
	if (emunic_shim_post_send(&s, NULL, &swr, &sbad) != -EOPNOTSUPP || sbad != &swr)
		FAIL("default post_send: want -EOPNOTSUPP naming the first work request");
	if (emunic_shim_post_recv(&s, NULL, &rwr, &rbad) != -EOPNOTSUPP || rbad != &rwr)
		FAIL("default post_recv: want -EOPNOTSUPP naming the first work request");
	if (emunic_shim_poll_cq(&s, NULL, 4, NULL) != -EOPNOTSUPP)
		FAIL("default poll_cq: want -EOPNOTSUPP");
	if (emunic_shim_req_notify_cq(&s, NULL, 0) != -EOPNOTSUPP)
		FAIL("default req_notify_cq: want -EOPNOTSUPP");
	if (s.ops.cd_wait(NULL, NULL, 1, false) != -EOPNOTSUPP || s.ops.cd_send_en(NULL, NULL, 1, false) != -EOPNOTSUPP ||
	    s.ops.cd_recv_en(NULL, NULL, 1, false) != -EOPNOTSUPP)
		FAIL("default cross-channel entries: want -EOPNOTSUPP");
	if (emunic_shim_has_cd(&s))
		FAIL("the defaults count as native cross-channel");
}

static void test_set_ops(void)
{
	static const struct emunic_shim_ops mine = { .poll_cq = my_poll };
	struct emunic_shim s, d;

	emunic_shim_ops_init(&d);
	emunic_shim_ops_init(&s);
	emunic_shim_set_ops(&s, &mine);
	if (s.ops.poll_cq != my_poll || emunic_shim_poll_cq(&s, NULL, 7, NULL) != 7)
		FAIL("set_ops did not take the entry it was given");
	if (s.ops.post_send != d.ops.post_send || s.ops.post_recv != d.ops.post_recv ||
	    s.ops.req_notify_cq != d.ops.req_notify_cq || s.ops.cd_wait != d.ops.cd_wait)
		FAIL("set_ops changed an entry it was not given");
}

static void test_backends(void)
{
	struct emunic_shim e, m, d;

	emunic_shim_ops_init(&d);
	emunic_shim_ops_init(&e);
	emunic_shim_emulated_init(&e);
	emunic_shim_ops_init(&m);
	emunic_shim_mlx5_init(&m);
	if (e.ops.post_send == d.ops.post_send || e.ops.post_recv == d.ops.post_recv ||
	    e.ops.poll_cq == d.ops.poll_cq || e.ops.req_notify_cq == d.ops.req_notify_cq)
		FAIL("emulated: a data-path entry is still the default");
	if (emunic_shim_has_cd(&e) || emunic_shim_has_cd(&m))
		FAIL("a backend claims native cross-channel entries (none is built)");
	if (m.ops.post_send != e.ops.post_send || m.ops.poll_cq != e.ops.poll_cq)
		FAIL("mlx5: ordinary work requests should take the generic verbs entries");
}

/* A device answering only what the open reads with EMUNIC_BACKEND=emulated. */
static int open_fake(enum ibv_transport_type t, enum ibv_atomic_cap atomic, const char *env, struct emunic_shim *s)
{
	struct ibv_device dev = { .transport_type = t };
	struct ibv_context ctx = { .device = &dev };
	struct ibv_device_attr_ex attr = { .orig_attr = { .atomic_cap = atomic } };

	return emunic_shim_open(s, &ctx, &attr, env);
}

static void test_caps(void)
{
	struct emunic_shim s;
	char buf[64];
	int r;

	r = open_fake(IBV_TRANSPORT_IB, IBV_ATOMIC_HCA, "emulated", &s);
	if (r || s.backend != EMUNIC_SHIM_EMULATED ||
	    s.caps != (EMUNIC_SHIM_CAP_ATOMIC | EMUNIC_SHIM_CAP_WRITE_IMM | EMUNIC_SHIM_CAP_RNR))
		FAIL("RoCE with atomics: %d, backend %d, caps 0x%x", r, s.backend, s.caps);
	if (strcmp(emunic_shim_caps_str(s.caps, buf, sizeof(buf)), "atomic write-imm rnr"))
		FAIL("caps string: '%s'", buf);
	r = open_fake(IBV_TRANSPORT_IWARP, IBV_ATOMIC_NONE, "emulated", &s);
	if (r || s.caps != 0 || strcmp(emunic_shim_caps_str(s.caps, buf, sizeof(buf)), "none"))
		FAIL("iWARP without atomics: %d, caps 0x%x '%s'", r, s.caps, buf);
	r = open_fake(IBV_TRANSPORT_IB, IBV_ATOMIC_HCA, "fast", &s);
	if (r != -EINVAL || !strstr(s.why, "accepted values are auto, emulated, mlx5"))
		FAIL("EMUNIC_BACKEND=fast: %d '%s'", r, s.why);
	if (strcmp(emunic_shim_backend_str(EMUNIC_SHIM_EMULATED), "emulated") ||
	    strcmp(emunic_shim_backend_str(EMUNIC_SHIM_MLX5), "mlx5"))
		FAIL("backend names");
}

int main(void)
{
	test_defaults();
	test_set_ops();
	test_backends();
	test_caps();
	if (!fails)
		printf("emunic-shimtest: PASS (defaults, set_ops, backends, capabilities)\n");
	return harness_status();
}
