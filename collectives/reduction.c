/* reduction.c - the reduction kernels: dst = a op b elementwise for every
 * dtype x op, the final division of AVG and the float16/bfloat16
 * conversions.
 *
 * Speed: every dtype x op is one loop that gcc -O2 vectorizes (on plain
 * x86-64 all but 64-bit integer PROD/MIN/MAX, which SSE2 cannot do).  At
 * -O2 gcc uses its "very cheap" cost model, which vectorizes a loop only
 * when it needs neither a runtime alias check nor a scalar epilogue.  So
 * each loop walks fixed blocks of BLOCK elements marked "no loop-carried
 * dependence" (true: dst is a, b or disjoint from both, never shifted),
 * and finishes the last n % BLOCK elements in a scalar tail.  float16 and
 * bfloat16 are widened a block at a time into float arrays on the stack,
 * combined by the float32 loops and narrowed back.  (The dtypes' and ops'
 * names and sizes are the public API's: engine/dtypes.c.) */
#include "collectives/reduction.h"

#include <string.h>

/* Elements per vectorized block: a multiple of every vector width up to
 * 512 bits, even for bytes. */
enum { BLOCK = 64 };

/* float16/bfloat16 elements widened per pass (2 KiB of floats per operand). */
enum { WIDE_BLOCK = 256 };

#if defined(__GNUC__) && !defined(__clang__)
#define NO_CARRIED_DEPENDENCE _Pragma("GCC ivdep")
#else
#define NO_CARRIED_DEPENDENCE
#endif

/* ---- which ops apply ---- */

static bool is_bitwise(tide_op op)
{
    return op == TIDE_BAND || op == TIDE_BOR || op == TIDE_BXOR;
}

bool tide__op_fits(tide_op op, tide_dtype dtype)
{
    return !is_bitwise(op) || dtype <= TIDE_UINT64; /* the integer dtypes come first */
}

/* ---- float bits ---- */

#define F32_QUIET 0x00400000u
#define F64_QUIET UINT64_C(0x0008000000000000)

/* memcpy is the defined way to reinterpret; gcc turns it into a move. */
static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline double f64_from_bits(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- float16 and bfloat16 ----
 *
 * No branches: each result is selected from candidates computed for
 * every case, so that the block loops further down vectorize. */

/* c ? a : b by masks.  A ?: chain that picks among results of float
 * arithmetic becomes branches in gcc (which will not speculate float
 * operations that could trap), and branches do not vectorize. */
static inline uint32_t select_u32(bool c, uint32_t a, uint32_t b)
{
    uint32_t mask = 0u - (uint32_t)c;
    return (a & mask) | (b & ~mask);
}

static inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t em = (uint32_t)(h & 0x7fff) << 13; /* exponent, mantissa in float places */
    uint32_t exp = em & 0x0f800000u;
    /* normal: rebias the exponent from 15 to 127 */
    uint32_t normal = em + 0x38000000u;
    /* zero or subnormal: mant * 2^-24, exactly (1 + mant/1024) * 2^-14 - 2^-14 */
    uint32_t sub = f32_bits(f32_from_bits(em + 0x38800000u) - 0x1p-14f);
    /* infinity or NaN: all-ones exponent; a NaN made quiet */
    uint32_t special = em | 0x7f800000u | ((em & 0x7fffffu) ? F32_QUIET : 0);
    uint32_t r = select_u32(exp == 0x0f800000u, special, select_u32(exp == 0, sub, normal));
    return f32_from_bits(sign | r);
}

/* The subnormal case leans on the FPU's rounding, so it assumes the
 * default round-to-nearest mode, as all of tide's float arithmetic does. */
static inline uint16_t float_to_half(float f)
{
    uint32_t u = f32_bits(f), abs = u & 0x7fffffffu;
    uint32_t sign = (u >> 16) & 0x8000u;
    /* NaN: keep the top of the payload, set quiet */
    uint32_t nan = 0x7e00u | ((abs >> 13) & 0x3ffu);
    /* normal half (>= 2^-14): rebias 127 -> 15, round the low 13 bits away
     * with ties to even; a carry runs into the exponent, as it should */
    uint32_t normal = (abs - 0x38000000u + 0xfffu + ((abs >> 13) & 1)) >> 13;
    /* subnormal half: adding 0.5 leaves the value's units of 2^-24 in the
     * low mantissa bits of [0.5, 1), rounded to nearest-even by the add */
    uint32_t sub = f32_bits(f32_from_bits(abs) + 0.5f) - 0x3f000000u;
    /* 65520 lies halfway above 65504 and ties to infinity (even) */
    uint32_t finite = select_u32(abs >= 0x38800000u, normal, sub);
    finite = select_u32(abs >= 0x477ff000u, 0x7c00u, finite);
    uint32_t r = select_u32(abs > 0x7f800000u, nan, finite);
    return (uint16_t)(sign | r);
}

static inline float bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    uint32_t quiet = (u & 0x7fffffffu) > 0x7f800000u ? F32_QUIET : 0;
    return f32_from_bits(u | quiet);
}

static inline uint16_t float_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t nan = (u >> 16) | 0x40;
    /* Round the low 16 bits away, ties to even.  A carry runs into the
     * exponent, which is right, and past the largest finite to infinity. */
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

float tide__half_to_float(uint16_t h)
{
    return half_to_float(h);
}

uint16_t tide__float_to_half(float f)
{
    return float_to_half(f);
}

float tide__bf16_to_float(uint16_t b)
{
    return bf16_to_float(b);
}

uint16_t tide__float_to_bf16(float f)
{
    return float_to_bf16(f);
}

/* ---- one element ---- */

/* Integer SUM and PROD work on the unsigned type of the same width: the
 * bits of two's-complement wrap-around, with no signed overflow. */
static inline uint8_t sum_u8(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }
static inline uint8_t prod_u8(uint8_t a, uint8_t b) { return (uint8_t)(a * b); }
static inline uint32_t sum_u32(uint32_t a, uint32_t b) { return a + b; }
static inline uint32_t prod_u32(uint32_t a, uint32_t b) { return a * b; }
static inline uint64_t sum_u64(uint64_t a, uint64_t b) { return a + b; }
static inline uint64_t prod_u64(uint64_t a, uint64_t b) { return a * b; }

static inline int8_t min_i8(int8_t a, int8_t b) { return a < b ? a : b; }
static inline int8_t max_i8(int8_t a, int8_t b) { return a > b ? a : b; }
static inline uint8_t min_u8(uint8_t a, uint8_t b) { return a < b ? a : b; }
static inline uint8_t max_u8(uint8_t a, uint8_t b) { return a > b ? a : b; }
static inline int32_t min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t max_i32(int32_t a, int32_t b) { return a > b ? a : b; }
static inline uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }
static inline uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }
static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Bitwise ops: the same bits for signed and unsigned. */
static inline uint8_t and_u8(uint8_t a, uint8_t b) { return a & b; }
static inline uint8_t or_u8(uint8_t a, uint8_t b) { return a | b; }
static inline uint8_t xor_u8(uint8_t a, uint8_t b) { return a ^ b; }
static inline uint32_t and_u32(uint32_t a, uint32_t b) { return a & b; }
static inline uint32_t or_u32(uint32_t a, uint32_t b) { return a | b; }
static inline uint32_t xor_u32(uint32_t a, uint32_t b) { return a ^ b; }
static inline uint64_t and_u64(uint64_t a, uint64_t b) { return a & b; }
static inline uint64_t or_u64(uint64_t a, uint64_t b) { return a | b; }
static inline uint64_t xor_u64(uint64_t a, uint64_t b) { return a ^ b; }

static inline float sum_f32(float a, float b) { return a + b; }
static inline float prod_f32(float a, float b) { return a * b; }
static inline double sum_f64(double a, double b) { return a + b; }
static inline double prod_f64(double a, double b) { return a * b; }

/* Float MIN/MAX.  Values that compare equal have equal bits except -0
 * and +0, where ORing the bits picks -0 (MIN) and ANDing picks +0 (MAX),
 * so a op b and b op a agree to the bit.  Unordered means a NaN: the OR
 * of the bits, made quiet, is a NaN.  Plain compares and selects, so the
 * loops vectorize. */
static inline float min_f32(float a, float b)
{
    uint32_t ua = f32_bits(a), ub = f32_bits(b);
    uint32_t tie = a == b ? ua | ub : ua | ub | F32_QUIET;
    return f32_from_bits(a < b ? ua : b < a ? ub : tie);
}

static inline float max_f32(float a, float b)
{
    uint32_t ua = f32_bits(a), ub = f32_bits(b);
    uint32_t tie = a == b ? ua & ub : ua | ub | F32_QUIET;
    return f32_from_bits(a > b ? ua : b > a ? ub : tie);
}

static inline double min_f64(double a, double b)
{
    uint64_t ua = f64_bits(a), ub = f64_bits(b);
    uint64_t tie = a == b ? ua | ub : ua | ub | F64_QUIET;
    return f64_from_bits(a < b ? ua : b < a ? ub : tie);
}

static inline double max_f64(double a, double b)
{
    uint64_t ua = f64_bits(a), ub = f64_bits(b);
    uint64_t tie = a == b ? ua & ub : ua | ub | F64_QUIET;
    return f64_from_bits(a > b ? ua : b > a ? ub : tie);
}

/* ---- one loop per dtype x op ---- */

/* Stamps out "static void name(type *d, const type *a, const type *b,
 * size_t n)": d[i] = combine(a[i], b[i]), vectorized blocks then a tail. */
#define DEFINE_LOOP(name, type, combine)                                \
    static void name(type *d, const type *a, const type *b, size_t n)   \
    {                                                                   \
        size_t i = 0;                                                   \
        for (; n - i >= BLOCK; i += BLOCK) {                            \
            NO_CARRIED_DEPENDENCE                                       \
            for (size_t j = 0; j < BLOCK; j++)                          \
                d[i + j] = combine(a[i + j], b[i + j]);                 \
        }                                                               \
        for (; i < n; i++)                                              \
            d[i] = combine(a[i], b[i]);                                 \
    }

DEFINE_LOOP(loop_sum_u8, uint8_t, sum_u8)
DEFINE_LOOP(loop_prod_u8, uint8_t, prod_u8)
DEFINE_LOOP(loop_min_i8, int8_t, min_i8)
DEFINE_LOOP(loop_max_i8, int8_t, max_i8)
DEFINE_LOOP(loop_min_u8, uint8_t, min_u8)
DEFINE_LOOP(loop_max_u8, uint8_t, max_u8)
DEFINE_LOOP(loop_sum_u32, uint32_t, sum_u32)
DEFINE_LOOP(loop_prod_u32, uint32_t, prod_u32)
DEFINE_LOOP(loop_min_i32, int32_t, min_i32)
DEFINE_LOOP(loop_max_i32, int32_t, max_i32)
DEFINE_LOOP(loop_min_u32, uint32_t, min_u32)
DEFINE_LOOP(loop_max_u32, uint32_t, max_u32)
DEFINE_LOOP(loop_sum_u64, uint64_t, sum_u64)
DEFINE_LOOP(loop_prod_u64, uint64_t, prod_u64)
DEFINE_LOOP(loop_min_i64, int64_t, min_i64)
DEFINE_LOOP(loop_max_i64, int64_t, max_i64)
DEFINE_LOOP(loop_min_u64, uint64_t, min_u64)
DEFINE_LOOP(loop_max_u64, uint64_t, max_u64)
DEFINE_LOOP(loop_and_u8, uint8_t, and_u8)
DEFINE_LOOP(loop_or_u8, uint8_t, or_u8)
DEFINE_LOOP(loop_xor_u8, uint8_t, xor_u8)
DEFINE_LOOP(loop_and_u32, uint32_t, and_u32)
DEFINE_LOOP(loop_or_u32, uint32_t, or_u32)
DEFINE_LOOP(loop_xor_u32, uint32_t, xor_u32)
DEFINE_LOOP(loop_and_u64, uint64_t, and_u64)
DEFINE_LOOP(loop_or_u64, uint64_t, or_u64)
DEFINE_LOOP(loop_xor_u64, uint64_t, xor_u64)
DEFINE_LOOP(loop_sum_f32, float, sum_f32)
DEFINE_LOOP(loop_prod_f32, float, prod_f32)
DEFINE_LOOP(loop_min_f32, float, min_f32)
DEFINE_LOOP(loop_max_f32, float, max_f32)
DEFINE_LOOP(loop_sum_f64, double, sum_f64)
DEFINE_LOOP(loop_prod_f64, double, prod_f64)
DEFINE_LOOP(loop_min_f64, double, min_f64)
DEFINE_LOOP(loop_max_f64, double, max_f64)

/* ---- dispatch on op, one function per width ---- */

/* Signed and unsigned share SUM/PROD (same bits) but not MIN/MAX. */
static void reduce_8(bool is_signed, tide_op op, void *d, const void *a, const void *b, size_t n)
{
    switch (op) {
    case TIDE_SUM:
    case TIDE_AVG:
        loop_sum_u8(d, a, b, n);
        break;
    case TIDE_PROD:
        loop_prod_u8(d, a, b, n);
        break;
    case TIDE_MIN:
        if (is_signed)
            loop_min_i8(d, a, b, n);
        else
            loop_min_u8(d, a, b, n);
        break;
    case TIDE_MAX:
        if (is_signed)
            loop_max_i8(d, a, b, n);
        else
            loop_max_u8(d, a, b, n);
        break;
    case TIDE_BAND:
        loop_and_u8(d, a, b, n);
        break;
    case TIDE_BOR:
        loop_or_u8(d, a, b, n);
        break;
    case TIDE_BXOR:
        loop_xor_u8(d, a, b, n);
        break;
    default:
        break;
    }
}

static void reduce_32(bool is_signed, tide_op op, void *d, const void *a, const void *b,
                      size_t n)
{
    switch (op) {
    case TIDE_SUM:
    case TIDE_AVG:
        loop_sum_u32(d, a, b, n);
        break;
    case TIDE_PROD:
        loop_prod_u32(d, a, b, n);
        break;
    case TIDE_MIN:
        if (is_signed)
            loop_min_i32(d, a, b, n);
        else
            loop_min_u32(d, a, b, n);
        break;
    case TIDE_MAX:
        if (is_signed)
            loop_max_i32(d, a, b, n);
        else
            loop_max_u32(d, a, b, n);
        break;
    case TIDE_BAND:
        loop_and_u32(d, a, b, n);
        break;
    case TIDE_BOR:
        loop_or_u32(d, a, b, n);
        break;
    case TIDE_BXOR:
        loop_xor_u32(d, a, b, n);
        break;
    default:
        break;
    }
}

static void reduce_64(bool is_signed, tide_op op, void *d, const void *a, const void *b,
                      size_t n)
{
    switch (op) {
    case TIDE_SUM:
    case TIDE_AVG:
        loop_sum_u64(d, a, b, n);
        break;
    case TIDE_PROD:
        loop_prod_u64(d, a, b, n);
        break;
    case TIDE_MIN:
        if (is_signed)
            loop_min_i64(d, a, b, n);
        else
            loop_min_u64(d, a, b, n);
        break;
    case TIDE_MAX:
        if (is_signed)
            loop_max_i64(d, a, b, n);
        else
            loop_max_u64(d, a, b, n);
        break;
    case TIDE_BAND:
        loop_and_u64(d, a, b, n);
        break;
    case TIDE_BOR:
        loop_or_u64(d, a, b, n);
        break;
    case TIDE_BXOR:
        loop_xor_u64(d, a, b, n);
        break;
    default:
        break;
    }
}

static void reduce_f32(tide_op op, float *d, const float *a, const float *b, size_t n)
{
    switch (op) {
    case TIDE_SUM:
    case TIDE_AVG:
        loop_sum_f32(d, a, b, n);
        break;
    case TIDE_PROD:
        loop_prod_f32(d, a, b, n);
        break;
    case TIDE_MIN:
        loop_min_f32(d, a, b, n);
        break;
    case TIDE_MAX:
        loop_max_f32(d, a, b, n);
        break;
    default:
        break;
    }
}

static void reduce_f64(tide_op op, double *d, const double *a, const double *b, size_t n)
{
    switch (op) {
    case TIDE_SUM:
    case TIDE_AVG:
        loop_sum_f64(d, a, b, n);
        break;
    case TIDE_PROD:
        loop_prod_f64(d, a, b, n);
        break;
    case TIDE_MIN:
        loop_min_f64(d, a, b, n);
        break;
    case TIDE_MAX:
        loop_max_f64(d, a, b, n);
        break;
    default:
        break;
    }
}

/* ---- float16 and bfloat16 through float ---- */

/* Whole blocks only: a fixed trip count is what lets gcc -O2 vectorize. */
static void widen_block(bool bf16, float *out, const uint16_t *in)
{
    if (bf16) {
        for (size_t j = 0; j < WIDE_BLOCK; j++)
            out[j] = bf16_to_float(in[j]);
    } else {
        for (size_t j = 0; j < WIDE_BLOCK; j++)
            out[j] = half_to_float(in[j]);
    }
}

static void narrow_block(bool bf16, uint16_t *out, const float *in)
{
    if (bf16) {
        for (size_t j = 0; j < WIDE_BLOCK; j++)
            out[j] = float_to_bf16(in[j]);
    } else {
        for (size_t j = 0; j < WIDE_BLOCK; j++)
            out[j] = float_to_half(in[j]);
    }
}

/* One block.  Both operands are widened before d is written, so d may be
 * a or b.  One rounding per element in effect: float's 24 bits hold
 * enough (>= 2p + 2 for p = 11 or 8) that rounding the float result of
 * +, * or / again to p bits gives the correctly rounded answer. */
static void reduce_16_block(bool bf16, tide_op op, uint16_t *d, const uint16_t *a,
                            const uint16_t *b)
{
    float fa[WIDE_BLOCK], fb[WIDE_BLOCK];

    widen_block(bf16, fa, a);
    widen_block(bf16, fb, b);
    reduce_f32(op, fa, fa, fb, WIDE_BLOCK);
    narrow_block(bf16, d, fa);
}

/* The last partial block goes through zero-padded copies. */
static void reduce_16(bool bf16, tide_op op, uint16_t *d, const uint16_t *a,
                      const uint16_t *b, size_t n)
{
    size_t i = 0;
    for (; n - i >= WIDE_BLOCK; i += WIDE_BLOCK)
        reduce_16_block(bf16, op, d + i, a + i, b + i);
    if (i == n)
        return;
    uint16_t ta[WIDE_BLOCK] = {0}, tb[WIDE_BLOCK] = {0}, td[WIDE_BLOCK];
    memcpy(ta, a + i, (n - i) * sizeof *a);
    memcpy(tb, b + i, (n - i) * sizeof *b);
    reduce_16_block(bf16, op, td, ta, tb);
    memcpy(d + i, td, (n - i) * sizeof *d);
}

void tide__reduce(tide_dtype dtype, tide_op op, void *dst, const void *a, const void *b,
                  size_t n)
{
    if (!tide__op_valid((int)op))
        return;
    switch (dtype) {
    case TIDE_INT8:
    case TIDE_UINT8:
        reduce_8(dtype == TIDE_INT8, op, dst, a, b, n);
        break;
    case TIDE_INT32:
    case TIDE_UINT32:
        reduce_32(dtype == TIDE_INT32, op, dst, a, b, n);
        break;
    case TIDE_INT64:
    case TIDE_UINT64:
        reduce_64(dtype == TIDE_INT64, op, dst, a, b, n);
        break;
    case TIDE_FLOAT16:
    case TIDE_BFLOAT16:
        reduce_16(dtype == TIDE_BFLOAT16, op, dst, a, b, n);
        break;
    case TIDE_FLOAT32:
        reduce_f32(op, dst, a, b, n);
        break;
    case TIDE_FLOAT64:
        reduce_f64(op, dst, a, b, n);
        break;
    default:
        break;
    }
}

/* ---- the division at the end of AVG ---- */

static void avg_16_block(bool bf16, uint16_t *buf, float group_size)
{
    float f[WIDE_BLOCK];

    widen_block(bf16, f, buf);
    for (size_t j = 0; j < WIDE_BLOCK; j++)
        f[j] /= group_size;
    narrow_block(bf16, buf, f);
}

static void avg_16(bool bf16, uint16_t *buf, size_t n, int group_size)
{
    size_t i = 0;
    for (; n - i >= WIDE_BLOCK; i += WIDE_BLOCK)
        avg_16_block(bf16, buf + i, (float)group_size);
    if (i == n)
        return;
    uint16_t t[WIDE_BLOCK] = {0};
    memcpy(t, buf + i, (n - i) * sizeof *buf);
    avg_16_block(bf16, t, (float)group_size);
    memcpy(buf + i, t, (n - i) * sizeof *buf);
}

/* Runs once per collective, so plain loops: integer division does not
 * vectorize anyway.  Each divisor has the element's own signedness. */
void tide__reduce_avg(tide_dtype dtype, void *buf, size_t n, int group_size)
{
    if (group_size < 2)
        return;
    int8_t *i8 = buf;
    uint8_t *u8 = buf;
    int32_t *i32 = buf;
    uint32_t *u32 = buf;
    int64_t *i64 = buf;
    uint64_t *u64 = buf;
    float *f32 = buf;
    double *f64 = buf;

    switch (dtype) {
    case TIDE_INT8:
        for (size_t i = 0; i < n; i++)
            i8[i] = (int8_t)(i8[i] / group_size);
        break;
    case TIDE_UINT8:
        for (size_t i = 0; i < n; i++)
            u8[i] = (uint8_t)(u8[i] / group_size);
        break;
    case TIDE_INT32:
        for (size_t i = 0; i < n; i++)
            i32[i] /= (int32_t)group_size;
        break;
    case TIDE_UINT32:
        for (size_t i = 0; i < n; i++)
            u32[i] /= (uint32_t)group_size;
        break;
    case TIDE_INT64:
        for (size_t i = 0; i < n; i++)
            i64[i] /= (int64_t)group_size;
        break;
    case TIDE_UINT64:
        for (size_t i = 0; i < n; i++)
            u64[i] /= (uint64_t)group_size;
        break;
    case TIDE_FLOAT16:
    case TIDE_BFLOAT16:
        avg_16(dtype == TIDE_BFLOAT16, buf, n, group_size);
        break;
    case TIDE_FLOAT32:
        for (size_t i = 0; i < n; i++)
            f32[i] /= (float)group_size;
        break;
    case TIDE_FLOAT64:
        for (size_t i = 0; i < n; i++)
            f64[i] /= (double)group_size;
        break;
    default:
        break;
    }
}
