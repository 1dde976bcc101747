/* SPDX-License-Identifier: MIT */
/*
 * The data pattern the collective test programs fill buffers with and
 * check them against: a hash a 4-byte word of a seed that names the
 * message (each program folds its root, source, destination and call into
 * one), or its complement for bytes that must not be written ("garbage").
 * A hash a word, not a byte, and memcmp against generated chunks: byte at
 * a time, the checks of 1 MiB messages at 8 ranks took ~10% of the guest's
 * CPU.
 */
#ifndef EMUNIC_TEST_PATTERN_H
#define EMUNIC_TEST_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Bytes 4w..4w+3 of the pattern of seed. */
static inline uint32_t pattern_word(uint32_t seed, size_t w)
{
	uint32_t x = (uint32_t)w * 2654435761u + seed;

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	return x;
}

/* Byte i of the pattern of seed, or of its complement (garbage). */
static inline unsigned char pattern_byte(uint32_t seed, size_t i, bool garbage)
{
	unsigned char b = (unsigned char)(pattern_word(seed, i / 4) >> (i % 4 * 8));

	return garbage ? (unsigned char)~b : b;
}

/* out[0, n): bytes [from, from + n) of the pattern of seed, or of its complement. */
static inline void pattern_gen(unsigned char *out, size_t from, size_t n, uint32_t seed, bool garbage)
{
	uint32_t flip = garbage ? ~0u : 0, x = 0;

	for (size_t i = 0; i < n; i++) {
		if (i == 0 || (from + i) % 4 == 0)
			x = pattern_word(seed, (from + i) / 4) ^ flip;
		out[i] = (unsigned char)(x >> ((from + i) % 4 * 8));
	}
}

/* The first byte of buf[from, to) that is not bytes [from, to) of the
 * pattern of seed (or of its complement), or -1. */
static inline long pattern_bad(const unsigned char *buf, size_t from, size_t to, uint32_t seed, bool garbage)
{
	unsigned char want[512];

	for (size_t i = from; i < to; i += sizeof(want)) {
		size_t n = to - i < sizeof(want) ? to - i : sizeof(want);

		pattern_gen(want, i, n, seed, garbage);
		if (memcmp(buf + i, want, n))
			for (size_t j = 0; j < n; j++)
				if (buf[i + j] != want[j])
					return (long)(i + j);
	}
	return -1;
}

#endif
