/* SPDX-License-Identifier: MIT */
/*
 * emunic-patterntest: the collective tests' data pattern (pattern.h) on the
 * host, against its definition, pattern_byte: pattern_gen writes exactly
 * those bytes, a word at a time or not, from every alignment and length;
 * pattern_bad finds nothing in a right buffer and, with any one byte of
 * [from, to) wrong, exactly that byte (and nothing outside [from, to)).
 * Those two are what every gather, allgather, all-to-all and bcast check
 * stands on, so a fast path that lost a byte must fail here.
 * Exit 0 and "emunic-patterntest: PASS", or 1 with what broke.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "pattern.h"

#define LEN 96

static void one(uint32_t seed, bool garbage)
{
	unsigned char buf[LEN + 8], ref[LEN + 8];

	for (size_t i = 0; i < sizeof(ref); i++)
		ref[i] = pattern_byte(seed, i, garbage);
	for (size_t from = 0; from < 8; from++)
		for (size_t n = 0; from + n <= LEN; n++) {
			memset(buf, 0xa5, sizeof(buf));
			pattern_gen(buf + from, from, n, seed, garbage);
			if (memcmp(buf + from, ref + from, n))
				FAIL("seed %#x%s: pattern_gen of bytes [%zu, %zu) differs from pattern_byte", seed,
				     garbage ? " (garbage)" : "", from, from + n);
			if (buf[from + n] != 0xa5 || (from && buf[from - 1] != 0xa5))
				FAIL("seed %#x: pattern_gen of [%zu, %zu) wrote outside it", seed, from, from + n);
			memcpy(buf, ref, sizeof(buf));
			if (pattern_bad(buf, from, from + n, seed, garbage) != -1)
				FAIL("seed %#x: pattern_bad finds a wrong byte in a right [%zu, %zu)", seed, from,
				     from + n);
			/* one wrong byte: inside it is found, outside it is not looked at */
			for (size_t at = from ? from - 1 : 0; at <= from + n && at < sizeof(buf); at++) {
				long got, want = at >= from && at < from + n ? (long)at : -1;

				buf[at] ^= 0x10;
				got = pattern_bad(buf, from, from + n, seed, garbage);
				buf[at] ^= 0x10;
				if (got != want)
					FAIL("seed %#x: byte %zu wrong in [%zu, %zu): pattern_bad says %ld, not %ld", seed,
					     at, from, from + n, got, want);
			}
		}
	/* a wrong byte after many right words, and the first of two */
	{
		static unsigned char big[1 << 16];

		pattern_gen(big, 0, sizeof(big), seed, garbage);
		big[40001] ^= 1;
		big[50000] ^= 1;
		if (pattern_bad(big, 3, sizeof(big), seed, garbage) != 40001)
			FAIL("seed %#x: pattern_bad missed the first wrong byte of 64 KiB", seed);
		/* from > to is an empty range: nothing read (ASan: nothing
		 * past the buffer), nothing found */
		if (pattern_bad(big, sizeof(big) - 2, 4, seed, garbage) != -1)
			FAIL("seed %#x: pattern_bad found a wrong byte in an empty range", seed);
	}
}

int main(int argc, char **argv)
{
	static const uint32_t seeds[] = { 0, 1, 0x9e3779b9u, 0xffffffffu };

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: emunic-patterntest\n");
		return TEST_USAGE;
	}
	for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		one(seeds[s], false);
		one(seeds[s], true);
	}
	if (!fails)
		printf("emunic-patterntest: PASS\n");
	return harness_status();
}
