/* SPDX-License-Identifier: MIT */
/*
 * The data pattern the collective test programs fill buffers with and
 * check them against: a hash a 4-byte word of a seed that names the
 * message (each program folds its root, source, destination and call into
 * one), or its complement for bytes that must not be written ("garbage").
 * A hash a word, not a byte, generated and compared a word at a time:
 * byte at a time, the checks of 1 MiB messages at 8 ranks took ~10-20% of
 * the guest's CPU.
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

/* The 4 bytes of word x in pattern order (byte k is bits 8k..8k+7): one
 * 32-bit store or compare where gcc merges them (little-endian targets). */
static inline void pattern_bytes4(unsigned char b[4], uint32_t x)
{
	b[0] = (unsigned char)x;
	b[1] = (unsigned char)(x >> 8);
	b[2] = (unsigned char)(x >> 16);
	b[3] = (unsigned char)(x >> 24);
}

/* out[0, n): bytes [from, from + n) of the pattern of seed, or of its
 * complement.  A word at a time between the ragged ends: byte at a time
 * it was a fifth of the guest's CPU in the 8-rank gather checks (perf). */
static inline void pattern_gen(unsigned char *out, size_t from, size_t n, uint32_t seed, bool garbage)
{
	uint32_t flip = garbage ? ~0u : 0;
	size_t i = 0;

	for (; i < n && (from + i) % 4; i++)
		out[i] = pattern_byte(seed, from + i, garbage);
	for (; n - i >= 4; i += 4)
		pattern_bytes4(out + i, pattern_word(seed, (from + i) / 4) ^ flip);
	for (; i < n; i++)
		out[i] = pattern_byte(seed, from + i, garbage);
}

/* The first byte of buf[from, to) that is not bytes [from, to) of the
 * pattern of seed (or of its complement), or -1.  Compared a word at a
 * time, as pattern_gen writes them. */
static inline long pattern_bad(const unsigned char *buf, size_t from, size_t to, uint32_t seed, bool garbage)
{
	uint32_t flip = garbage ? ~0u : 0;
	unsigned char want[4];
	size_t i = from;

	for (; i < to && i % 4; i++)
		if (buf[i] != pattern_byte(seed, i, garbage))
			return (long)i;
	for (; i < to && to - i >= 4; i += 4) {	/* i < to: from > to is an empty range */
		pattern_bytes4(want, pattern_word(seed, i / 4) ^ flip);
		if (memcmp(buf + i, want, 4))
			for (size_t j = 0;; j++)
				if (buf[i + j] != want[j])
					return (long)(i + j);
	}
	for (; i < to; i++)
		if (buf[i] != pattern_byte(seed, i, garbage))
			return (long)i;
	return -1;
}

#endif
