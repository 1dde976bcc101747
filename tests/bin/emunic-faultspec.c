/* SPDX-License-Identifier: MIT */
/*
 * emunic-faultspec: the fault spec parser on its own (no RDMA needed).
 *
 *   emunic-faultspec SPEC...      parse each: its canonical form, or the error
 *                                 (exit 1 if any is malformed)
 *   emunic-faultspec --fuzz N [SEED]
 *                                 N specs made by mutating good ones (bytes
 *                                 flipped, cut, spliced, tokens repeated):
 *                                 none may crash, every error must carry a
 *                                 caret, and every accepted spec must come
 *                                 back unchanged from format -> parse -> format
 */
#include "emunic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const seeds[] = {
	"rnr:peer=1,after=10", "retry:peer=2,after=5,retries=1,timeout=10", "loss:p=0.05,delay=2ms",
	"wc:status=RNR_RETRY_EXC,op=7,seed=42", "wc:status=12,p=5%,seed=3,peer=1,opcode=send;rnr:peer=0,hold=1s",
	"rnr:peer=3,from=1,retries=7,hold=500us;retry:peer=2", "wc:status=ibv_wc_rem_access_err,rank=1,count=0",
};

static const char *const tokens[] = { ";", ":", ",", "=", "%", "peer", "after", "p", "ms", "us", "s", "0",
				      "99999999999999999999", "-1", "1e9", "nan", ".", " ", "\t", "\xff", "wc",
				      "status=", "rnr", "loss" };

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void mutate(char *buf, size_t cap, uint64_t *s)
{
	size_t len = strlen(buf);

	switch (rnd(s) % 5) {
	case 0:	/* flip a byte */
		if (len)
			buf[rnd(s) % len] = (char)(rnd(s) % 255 + 1);
		break;
	case 1:	/* cut */
		buf[len ? rnd(s) % len : 0] = '\0';
		break;
	case 2: {	/* insert a token */
		const char *t = tokens[rnd(s) % (sizeof(tokens) / sizeof(tokens[0]))];
		size_t at = len ? rnd(s) % (len + 1) : 0, tl = strlen(t);

		if (len + tl + 1 < cap) {
			memmove(buf + at + tl, buf + at, len - at + 1);
			memcpy(buf + at, t, tl);
		}
		break;
	}
	case 3: {	/* splice another seed on */
		const char *o = seeds[rnd(s) % (sizeof(seeds) / sizeof(seeds[0]))];

		if (len + strlen(o) + 2 < cap)
			strcat(strcat(buf, rnd(s) % 2 ? ";" : ","), o);
		break;
	}
	default:	/* drop a byte */
		if (len) {
			size_t at = rnd(s) % len;

			memmove(buf + at, buf + at + 1, len - at);
		}
	}
}

static int fuzz(long n, uint64_t seed)
{
	long ok = 0, bad = 0, mismatch = 0, nocaret = 0;
	uint64_t s = seed ? seed : 1;

	for (long i = 0; i < n; i++) {
		char spec[512], err[1024], a[1024], b[1024];
		struct emunic_fault_spec *f, *g;
		int k = (int)(rnd(&s) % 4) + 1;

		snprintf(spec, sizeof(spec), "%s", seeds[rnd(&s) % (sizeof(seeds) / sizeof(seeds[0]))]);
		while (k--)
			mutate(spec, sizeof(spec), &s);
		/* A small error buffer must be cut short, never overrun (ASan). */
		size_t small = (size_t)(rnd(&s) % 80) + 1;
		char *tiny = malloc(small);

		if (tiny && emunic_fault_parse(spec, &f, tiny, small) == 0)
			emunic_fault_free(f);
		free(tiny);
		if (emunic_fault_parse(spec, &f, err, sizeof(err))) {
			bad++;
			if (!strchr(err, '^') || strncmp(err, "bad fault spec: ", 16)) {
				if (nocaret++ < 5)
					fprintf(stderr, "no caret for '%s': %s\n", spec, err);
			}
			continue;
		}
		ok++;
		if (emunic_fault_format(f, a, sizeof(a)) || emunic_fault_parse(a, &g, err, sizeof(err))) {
			if (mismatch++ < 5)
				fprintf(stderr, "canonical form of '%s' does not parse: '%s': %s\n", spec, a, err);
			emunic_fault_free(f);
			continue;
		}
		if (emunic_fault_format(g, b, sizeof(b)) || strcmp(a, b)) {
			if (mismatch++ < 5)
				fprintf(stderr, "'%s' -> '%s' -> '%s'\n", spec, a, b);
		}
		emunic_fault_free(f);
		emunic_fault_free(g);
	}
	printf("fuzz: %ld specs (seed %llu): %ld accepted, %ld rejected, %ld without a caret, %ld round-trip "
	       "mismatches\n", n, (unsigned long long)seed, ok, bad, nocaret, mismatch);
	return nocaret || mismatch ? 1 : 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(argc < 2 ? stderr : stdout, "usage: emunic-faultspec SPEC... | --fuzz N [SEED]\n");
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--fuzz"))
		return fuzz(argc > 2 ? atol(argv[2]) : 10000, argc > 3 ? strtoull(argv[3], NULL, 10) : 1);
	for (int i = 1; i < argc; i++) {
		struct emunic_fault_spec *f;
		char err[1024], canon[1024];
		int r = emunic_fault_parse(argv[i], &f, err, sizeof(err));

		if (r) {
			printf("%s\n", err);
			rc = 1;
			continue;
		}
		emunic_fault_format(f, canon, sizeof(canon));
		printf("ok (%d rule%s): %s\n", emunic_fault_rules(f), emunic_fault_rules(f) == 1 ? "" : "s", canon);
		emunic_fault_free(f);
	}
	return rc;
}
