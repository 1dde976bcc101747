/* SPDX-License-Identifier: MIT */
/*
 * EMUNIC_BACKEND=auto|emulated|mlx5: auto takes the HCA's own cross-channel
 * only where the capability query says it can; mlx5 forced on a device that
 * cannot is an error, not a silent fallback.
 */
#include "shim/mlx5/mlx5_dev.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#define ACCEPTED "accepted values are auto, emulated, mlx5"

const char *emunic_backend_str(int backend)
{
	switch (backend) {
	case EMUNIC_BACKEND_EMULATED: return "emulated";
	case EMUNIC_BACKEND_MLX5: return "mlx5";
	default: return "UNKNOWN";
	}
}

/* 1 auto, 2 mlx5, 0 emulated, -1 malformed. */
static int parse(const char *env)
{
	if (!env || !*env || !strcmp(env, "auto"))
		return 1;
	if (!strcmp(env, "mlx5"))
		return 2;
	if (!strcmp(env, "emulated"))
		return 0;
	return -1;
}

int emunic_mlx5_backend_pick(const char *env, const char *dev,
			     const struct emunic_mlx5_caps *caps, char *why, size_t len)
{
	int want = parse(env);

	if (want < 0) {
		snprintf(why, len, "EMUNIC_BACKEND='%s': " ACCEPTED, env);
		return -EINVAL;
	}
	if (want == 0) {
		snprintf(why, len, "EMUNIC_BACKEND=emulated");
		return EMUNIC_BACKEND_EMULATED;
	}
	if (caps && caps->cross_channel) {
		snprintf(why, len, "EMUNIC_BACKEND=%s: mlx5 (%s)", want == 2 ? "mlx5" : "auto",
			 caps->why);
		return EMUNIC_BACKEND_MLX5;
	}
	if (want == 2) {
		snprintf(why, len, "EMUNIC_BACKEND=mlx5 but %s has no native cross-channel: %s",
			 dev, caps ? caps->why : "not queried");
		return -ENOTSUP;
	}
	snprintf(why, len, "EMUNIC_BACKEND=auto: emulated (%s)", caps ? caps->why : "not queried");
	return EMUNIC_BACKEND_EMULATED;
}

int emunic_mlx5_backend_choice(const char *env, struct ibv_context *ctx, char *why, size_t len)
{
	struct emunic_mlx5_caps caps = { 0 };
	const char *dev = ctx && ctx->device ? ibv_get_device_name(ctx->device) : "(no device)";
	int ret;

	if (parse(env) <= 0)
		return emunic_mlx5_backend_pick(env, dev, NULL, why, len);
	ret = emunic_mlx5_query_caps(ctx, &caps);
	if (ret < 0)
		snprintf(caps.why, sizeof(caps.why), "%s: capability query failed: %s", dev,
			 strerror(-ret));
	return emunic_mlx5_backend_pick(env, dev, &caps, why, len);
}
