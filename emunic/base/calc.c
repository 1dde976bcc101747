/* SPDX-License-Identifier: MIT */
/*
 * calc: the reductions the emulated NIC applies as it sends (CORE-Direct's
 * calc), one kernel per valid op x type, found through one table.  The
 * rules are MPI's for its predefined operations:
 *   - SUM, PROD, MIN, MAX on the integer and floating types;
 *   - LAND, LOR, LXOR, BAND, BOR, BXOR on the integer types;
 *   - MINLOC, MAXLOC on the (value, int index) pair types: the smaller
 *     (larger) value wins, a tie keeps the smaller index.
 * Integers wrap as two's complement (computed unsigned, so never undefined);
 * floats are IEEE arithmetic as the host does it.  The BE_ slot types are
 * CORE-Direct's calc format (emunic/mq.h): a 16-byte slot, big-endian value
 * then big-endian id, with the pairs libmlx5's calc table allowed.  Pure: no
 * device, no verbs.
 */
#include <emunic.h>

#include <endian.h>
#include <errno.h>
#include <string.h>

struct pair_float_int { float v; int i; };
struct pair_double_int { double v; int i; };
struct pair_long_int { long v; int i; };
struct pair_2int { int v; int i; };
struct pair_short_int { short v; int i; };

typedef void (*calc_fn)(void *dst, const void *a, const void *b, size_t n);

/* One kernel: dst[i] = the expression of x = a[i], y = b[i].  Elements are
 * loaded and stored with memcpy, so any alignment is fine, and dst may be a
 * or b. */
#define KERNEL(name, T, ...)                                                    \
	static void name(void *dst, const void *a, const void *b, size_t n)     \
	{                                                                       \
		unsigned char *d = dst;                                         \
		const unsigned char *p = a, *q = b;                             \
		for (size_t i = 0; i < n; i++) {                                \
			T x, y, z;                                              \
			memcpy(&x, p + i * sizeof(T), sizeof(T));               \
			memcpy(&y, q + i * sizeof(T), sizeof(T));               \
			z = __VA_ARGS__;                                        \
			memcpy(d + i * sizeof(T), &z, sizeof(T));               \
		}                                                               \
	}

/* Wrapping integer arithmetic: in uint64_t, then back to T (GCC and clang
 * define the narrowing as modulo 2^N). */
#define W(T, e) ((T)(uint64_t)(e))
#define ARITH(sfx, T)                                                           \
	KERNEL(sum_##sfx, T, W(T, (uint64_t)x + (uint64_t)y))                   \
	KERNEL(prod_##sfx, T, W(T, (uint64_t)x * (uint64_t)y))                  \
	KERNEL(min_##sfx, T, y < x ? y : x)                                     \
	KERNEL(max_##sfx, T, y > x ? y : x)
#define LOGIC(sfx, T)                                                           \
	KERNEL(land_##sfx, T, (T)(x && y))                                      \
	KERNEL(lor_##sfx, T, (T)(x || y))                                       \
	KERNEL(lxor_##sfx, T, (T)(!x != !y))                                    \
	KERNEL(band_##sfx, T, (T)(x & y))                                       \
	KERNEL(bor_##sfx, T, (T)(x | y))                                        \
	KERNEL(bxor_##sfx, T, (T)(x ^ y))
#define FLOATING(sfx, T)                                                        \
	KERNEL(sum_##sfx, T, x + y)                                             \
	KERNEL(prod_##sfx, T, x * y)                                            \
	KERNEL(min_##sfx, T, y < x ? y : x)                                     \
	KERNEL(max_##sfx, T, y > x ? y : x)
/* The winner whole (its padding too, so the result's bytes come from the
 * operands); on a tie (or unordered values) x with the smaller index. */
static inline int min_index(int i, int j) { return j < i ? j : i; }
#define LOC(sfx, T)                                                             \
	KERNEL(minloc_##sfx, T, x.v < y.v ? x : y.v < x.v ? y : (x.i = min_index(x.i, y.i), x)) \
	KERNEL(maxloc_##sfx, T, x.v > y.v ? x : y.v > x.v ? y : (x.i = min_index(x.i, y.i), x))

/* CORE-Direct's slot: both words big-endian, as the HCA read them. */
struct be_slot { uint64_t v, id; };

static inline double be_dbl(uint64_t be)
{
	uint64_t u = be64toh(be);
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

static inline struct be_slot be_of_dbl(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return (struct be_slot){ htobe64(u), 0 };
}

/* The value's bits: byte order does not matter to AND, OR, XOR. */
#define BITS(sfx, T)                                                            \
	KERNEL(band_##sfx, T, ((T){ x.v & y.v, 0 }))                            \
	KERNEL(bor_##sfx, T, ((T){ x.v | y.v, 0 }))                             \
	KERNEL(bxor_##sfx, T, ((T){ x.v ^ y.v, 0 }))
/* The larger unsigned value with its id; a tie keeps the smaller id. */
#define BE_MAXLOC(x, y)                                                         \
	(be64toh((x).v) > be64toh((y).v) ? (x) : be64toh((y).v) > be64toh((x).v) ? (y) \
	 : be64toh((y).id) < be64toh((x).id) ? (y) : (x))
KERNEL(sum_bei, struct be_slot, ((struct be_slot){ htobe64(be64toh(x.v) + be64toh(y.v)), 0 }))
KERNEL(sum_bed, struct be_slot, be_of_dbl(be_dbl(x.v) + be_dbl(y.v)))
KERNEL(maxloc_beu, struct be_slot, BE_MAXLOC(x, y))
BITS(be, struct be_slot)

ARITH(i8, int8_t) ARITH(u8, uint8_t) ARITH(i16, int16_t) ARITH(u16, uint16_t)
ARITH(i32, int32_t) ARITH(u32, uint32_t) ARITH(i64, int64_t) ARITH(u64, uint64_t)
LOGIC(i8, int8_t) LOGIC(u8, uint8_t) LOGIC(i16, int16_t) LOGIC(u16, uint16_t)
LOGIC(i32, int32_t) LOGIC(u32, uint32_t) LOGIC(i64, int64_t) LOGIC(u64, uint64_t)
FLOATING(flt, float) FLOATING(dbl, double)
LOC(flt, struct pair_float_int) LOC(dbl, struct pair_double_int) LOC(lng, struct pair_long_int)
LOC(2int, struct pair_2int) LOC(sht, struct pair_short_int)

#define INTS(op)                                                                \
	[EMUNIC_CALC_INT8] = op##_i8, [EMUNIC_CALC_UINT8] = op##_u8,            \
	[EMUNIC_CALC_INT16] = op##_i16, [EMUNIC_CALC_UINT16] = op##_u16,        \
	[EMUNIC_CALC_INT32] = op##_i32, [EMUNIC_CALC_UINT32] = op##_u32,        \
	[EMUNIC_CALC_INT64] = op##_i64, [EMUNIC_CALC_UINT64] = op##_u64
#define NUMS(op) INTS(op), [EMUNIC_CALC_FLOAT] = op##_flt, [EMUNIC_CALC_DOUBLE] = op##_dbl
#define PAIRS(op)                                                               \
	[EMUNIC_CALC_FLOAT_INT] = op##_flt, [EMUNIC_CALC_DOUBLE_INT] = op##_dbl, \
	[EMUNIC_CALC_LONG_INT] = op##_lng, [EMUNIC_CALC_2INT] = op##_2int,      \
	[EMUNIC_CALC_SHORT_INT] = op##_sht

#define BES(op)                                                                 \
	[EMUNIC_CALC_BE_INT64] = op##_be, [EMUNIC_CALC_BE_UINT64] = op##_be,    \
	[EMUNIC_CALC_BE_DOUBLE] = op##_be

#define NOPS (EMUNIC_CALC_MAXLOC + 1)
#define NTYPES (EMUNIC_CALC_BE_DOUBLE + 1)

/* NULL: the pair is not defined (-EINVAL at post time). */
static const calc_fn kernels[NOPS][NTYPES] = {
	[EMUNIC_CALC_SUM] = { NUMS(sum), [EMUNIC_CALC_BE_INT64] = sum_bei, [EMUNIC_CALC_BE_UINT64] = sum_bei,
			      [EMUNIC_CALC_BE_DOUBLE] = sum_bed },
	[EMUNIC_CALC_PROD] = { NUMS(prod) },
	[EMUNIC_CALC_MIN] = { NUMS(min) },	[EMUNIC_CALC_MAX] = { NUMS(max) },
	[EMUNIC_CALC_LAND] = { INTS(land) },	[EMUNIC_CALC_LOR] = { INTS(lor) },
	[EMUNIC_CALC_LXOR] = { INTS(lxor) },	[EMUNIC_CALC_BAND] = { INTS(band), BES(band) },
	[EMUNIC_CALC_BOR] = { INTS(bor), BES(bor) }, [EMUNIC_CALC_BXOR] = { INTS(bxor), BES(bxor) },
	[EMUNIC_CALC_MINLOC] = { PAIRS(minloc) },
	[EMUNIC_CALC_MAXLOC] = { PAIRS(maxloc), [EMUNIC_CALC_BE_UINT64] = maxloc_beu },
};

static const size_t sizes[NTYPES] = {
	[EMUNIC_CALC_INT8] = 1, [EMUNIC_CALC_UINT8] = 1, [EMUNIC_CALC_INT16] = 2, [EMUNIC_CALC_UINT16] = 2,
	[EMUNIC_CALC_INT32] = 4, [EMUNIC_CALC_UINT32] = 4, [EMUNIC_CALC_INT64] = 8, [EMUNIC_CALC_UINT64] = 8,
	[EMUNIC_CALC_FLOAT] = sizeof(float), [EMUNIC_CALC_DOUBLE] = sizeof(double),
	[EMUNIC_CALC_FLOAT_INT] = sizeof(struct pair_float_int),
	[EMUNIC_CALC_DOUBLE_INT] = sizeof(struct pair_double_int),
	[EMUNIC_CALC_LONG_INT] = sizeof(struct pair_long_int), [EMUNIC_CALC_2INT] = sizeof(struct pair_2int),
	[EMUNIC_CALC_SHORT_INT] = sizeof(struct pair_short_int),
	[EMUNIC_CALC_BE_INT64] = 16, [EMUNIC_CALC_BE_UINT64] = 16, [EMUNIC_CALC_BE_DOUBLE] = 16,
};

static calc_fn kernel(int op, int type)
{
	return op > 0 && op < NOPS && type > 0 && type < NTYPES ? kernels[op][type] : NULL;
}

size_t emunic_calc_size(int type)
{
	return type > 0 && type < NTYPES ? sizes[type] : 0;
}

int emunic_calc_check(int op, int type)
{
	return kernel(op, type) ? 0 : -EINVAL;
}

int emunic_calc(int op, int type, void *dst, const void *a, const void *b, size_t count)
{
	calc_fn f = kernel(op, type);

	if (!f)
		return -EINVAL;
	if (count)
		f(dst, a, b, count);
	return 0;
}
