/* test_reduction.c - the reduction kernels against references written
 * here, independently: float16/bfloat16 conversions (every pattern one
 * way, nearest-even by search over the patterns the other way), every
 * dtype x op on random vectors with every aliasing, integer wrap-around,
 * NaN and signed zeros in MIN/MAX, AVG's division, and names and sizes.
 * Needs no libm: powers of two and float neighbours are built from bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collectives/reduction.h"
#include "tide.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void) /* xorshift64*, fixed seed: failures replay */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static uint32_t bits_of_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t bits_of_double(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static double double_of_bits(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int is_nan(double x)
{
    return x != x;
}

/* 2^e for -1022 <= e <= 1023, built from the exponent field. */
static double pow2(int e)
{
    return double_of_bits((uint64_t)(e + 1023) << 52);
}

/* ---- reference float16 / bfloat16 ---- */

/* The two 16-bit formats, described by their fields. */
struct fmt16 {
    const char *name;
    int mant_bits;        /* 10 or 7 */
    int min_exp;          /* exponent of the least subnormal: -24 or -133 */
    uint16_t inf;         /* the +infinity pattern */
    float (*widen)(uint16_t);
    uint16_t (*narrow)(float);
};

static const struct fmt16 half_fmt = {"half", 10, -24, 0x7c00, tide__half_to_float,
                                      tide__float_to_half};
static const struct fmt16 bf16_fmt = {"bfloat16", 7, -133, 0x7f80, tide__bf16_to_float,
                                      tide__float_to_bf16};

static int fmt_is_nan(const struct fmt16 *f, uint16_t p)
{
    return (p & 0x7fff) > f->inf;
}

static int fmt_is_quiet_nan(const struct fmt16 *f, uint16_t p)
{
    return fmt_is_nan(f, p) && (p & (1u << (f->mant_bits - 1)));
}

/* Value of a positive pattern below inf; the inf pattern itself stands
 * for the next step up (2^16, 2^128), which makes rounding at the top of
 * the range an ordinary nearest-even choice between neighbours. */
static double fmt_step_value(const struct fmt16 *f, uint16_t p)
{
    uint16_t e = (uint16_t)(p >> f->mant_bits), m = (uint16_t)(p & ((1u << f->mant_bits) - 1));
    if (e == 0)
        return m * pow2(f->min_exp);
    return ((1u << f->mant_bits) + m) * pow2(f->min_exp + e - 1);
}

/* Any pattern (NaN and inf included) as a double, exactly. */
static double fmt_value(const struct fmt16 *f, uint16_t p)
{
    double sign = (p & 0x8000) ? -1.0 : 1.0;
    uint16_t mag = p & 0x7fff;
    if (mag > f->inf)
        return double_of_bits(UINT64_C(0x7ff8000000000000));
    if (mag == f->inf)
        return sign * double_of_bits(UINT64_C(0x7ff0000000000000));
    return sign * fmt_step_value(f, mag);
}

/* Nearest pattern to x, ties to the even pattern; x must not be NaN. */
static uint16_t fmt_round(const struct fmt16 *f, double x)
{
    uint16_t sign = (bits_of_double(x) >> 63) ? 0x8000 : 0;
    double ax = sign ? -x : x;
    if (ax >= fmt_step_value(f, f->inf))
        return sign | f->inf;
    uint16_t lo = 0, hi = f->inf; /* value(lo) <= ax < value(hi) */
    while (hi - lo > 1) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (fmt_step_value(f, mid) <= ax)
            lo = mid;
        else
            hi = mid;
    }
    double midpoint = (fmt_step_value(f, lo) + fmt_step_value(f, hi)) / 2;
    if (ax < midpoint)
        return sign | lo;
    if (ax > midpoint)
        return sign | hi;
    return sign | ((lo & 1) ? hi : lo);
}

/* ---- conversions ---- */

static void check_widen_every_pattern(const struct fmt16 *f)
{
    for (uint32_t p = 0; p <= 0xffff; p++) {
        uint16_t h = (uint16_t)p;
        float w = f->widen(h);
        uint32_t wb = bits_of_float(w);
        if (fmt_is_nan(f, h)) {
            assert_true(is_nan(w));
            assert_true(wb & 0x00400000u); /* quiet */
            assert_int_equal(wb >> 31, h >> 15);
            uint16_t back = f->narrow(w);
            assert_true(fmt_is_quiet_nan(f, back));
            assert_int_equal(back >> 15, h >> 15);
            continue;
        }
        double want = fmt_value(f, h);
        assert_true((double)w == want);
        assert_int_equal(wb >> 31, h >> 15); /* -0 stays -0 */
        assert_int_equal(f->narrow(w), h);
    }
}

/* Around each representable value and each midpoint between neighbours
 * (midpoints need 12 or 9 bits, so they are exact floats) try the point
 * and the float on either side, both signs, against fmt_round. */
static void check_narrow_near_patterns(const struct fmt16 *f)
{
    for (uint16_t p = 0; p < f->inf; p++) {
        double points[2] = {fmt_step_value(f, p),
                            (fmt_step_value(f, p) + fmt_step_value(f, (uint16_t)(p + 1))) / 2};
        for (int k = 0; k < 2; k++) {
            uint32_t c = bits_of_float((float)points[k]);
            assert_true((double)float_of_bits(c) == points[k]);
            for (uint32_t u = c == 0 ? c : c - 1; u <= c + 1; u++) {
                for (uint32_t s = 0; s <= 1; s++) {
                    float x = float_of_bits(u | s << 31);
                    uint16_t got = f->narrow(x), want = fmt_round(f, (double)x);
                    if (got != want)
                        print_error("%s: float 0x%08x -> 0x%04x, want 0x%04x\n", f->name,
                                    bits_of_float(x), got, want);
                    assert_int_equal(got, want);
                }
            }
        }
    }
}

/* About a million float patterns spread over all 2^32. */
static void check_narrow_strided(const struct fmt16 *f)
{
    for (uint64_t u = 0; u <= UINT32_MAX; u += 4099) {
        float x = float_of_bits((uint32_t)u);
        uint16_t got = f->narrow(x);
        if (is_nan(x)) {
            assert_true(fmt_is_quiet_nan(f, got));
            assert_int_equal(got >> 15, u >> 31);
            continue;
        }
        assert_int_equal(got, fmt_round(f, (double)x));
    }
}

struct narrow_case {
    const char *what;
    uint32_t in; /* float bits */
    uint16_t out;
};

static void check_narrow_cases(const struct fmt16 *f, const struct narrow_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t got = f->narrow(float_of_bits(c[i].in));
        if (got != c[i].out)
            print_error("%s %s: got 0x%04x want 0x%04x\n", f->name, c[i].what, got, c[i].out);
        assert_int_equal(got, c[i].out);
    }
}

static void half_widens_every_pattern_exactly(void **state)
{
    (void)state;
    check_widen_every_pattern(&half_fmt);
}

static void half_narrows_to_nearest_even(void **state)
{
    (void)state;
    /* Expected bits worked out by hand, not by fmt_round. */
    static const struct narrow_case cases[] = {
        {"1", 0x3f800000, 0x3c00},
        {"1 + 2^-11 ties down to even", 0x3f801000, 0x3c00},
        {"1 + 2^-11 + tiny rounds up", 0x3f801001, 0x3c01},
        {"1 + 3*2^-11 ties up to even", 0x3f803000, 0x3c02},
        {"65504 is the largest finite", 0x477fe000, 0x7bff},
        {"65519 rounds down", 0x477fef00, 0x7bff},
        {"65520 ties to inf", 0x477ff000, 0x7c00},
        {"-65520 ties to -inf", 0xc77ff000, 0xfc00},
        {"1e9 overflows", 0x4e6e6b28, 0x7c00},
        {"inf", 0x7f800000, 0x7c00},
        {"-inf", 0xff800000, 0xfc00},
        {"-0", 0x80000000, 0x8000},
        {"2^-24, the least subnormal", 0x33800000, 0x0001},
        {"2^-25 ties to zero", 0x33000000, 0x0000},
        {"-2^-25 ties to -0", 0xb3000000, 0x8000},
        {"just above 2^-25", 0x33000001, 0x0001},
        {"3*2^-25 ties up to 2", 0x33c00000, 0x0002},
        {"5*2^-25 ties down to 2", 0x34200000, 0x0002},
        {"1023.5*2^-24 ties up to the least normal", 0x387fe000, 0x0400},
        {"2^-14, the least normal", 0x38800000, 0x0400},
        {"float subnormal", 0x00000001, 0x0000},
        {"quiet NaN", 0x7fc00000, 0x7e00},
        {"signalling NaN, payload below the kept bits", 0x7f800001, 0x7e00},
        {"negative NaN", 0xffc00000, 0xfe00},
    };
    check_narrow_cases(&half_fmt, cases, sizeof cases / sizeof cases[0]);
    check_narrow_near_patterns(&half_fmt);
    check_narrow_strided(&half_fmt);
}

static void bf16_widens_every_pattern_exactly(void **state)
{
    (void)state;
    check_widen_every_pattern(&bf16_fmt);
}

static void bf16_narrows_to_nearest_even(void **state)
{
    (void)state;
    static const struct narrow_case cases[] = {
        {"1", 0x3f800000, 0x3f80},
        {"1 + 2^-8 ties down to even", 0x3f808000, 0x3f80},
        {"1 + 2^-8 + tiny rounds up", 0x3f808001, 0x3f81},
        {"1 + 3*2^-8 ties up to even", 0x3f818000, 0x3f82},
        {"below the top tie", 0x7f7f7fff, 0x7f7f},
        {"top tie goes to inf", 0x7f7f8000, 0x7f80},
        {"FLT_MAX overflows", 0x7f7fffff, 0x7f80},
        {"-FLT_MAX overflows", 0xff7fffff, 0xff80},
        {"inf", 0x7f800000, 0x7f80},
        {"-0", 0x80000000, 0x8000},
        {"float subnormal tie to even 0", 0x00008000, 0x0000},
        {"float subnormal tie up to even 2", 0x00018000, 0x0002},
        {"signalling NaN must not truncate to inf", 0x7f800001, 0x7fc0},
        {"NaN with carry-prone payload", 0x7fffffff, 0x7fff},
        {"negative quiet NaN", 0xffc00000, 0xffc0},
    };
    check_narrow_cases(&bf16_fmt, cases, sizeof cases / sizeof cases[0]);
    check_narrow_near_patterns(&bf16_fmt);
    check_narrow_strided(&bf16_fmt);
}

/* ---- reference reduction, one element ---- */

struct expect {
    uint64_t bits; /* the element's bits, zero-extended */
    int nan;       /* any (quiet) NaN will do; bits unused */
};

static int dtype_is_signed(tide_dtype dt)
{
    return dt == TIDE_INT8 || dt == TIDE_INT32 || dt == TIDE_INT64;
}

static int dtype_is_float(tide_dtype dt)
{
    return dt >= TIDE_FLOAT16;
}

static uint64_t load(const void *buf, size_t size, size_t i)
{
    const char *p = (const char *)buf + i * size;
    uint8_t v8;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;
    switch (size) {
    case 1:
        memcpy(&v8, p, 1);
        return v8;
    case 2:
        memcpy(&v16, p, 2);
        return v16;
    case 4:
        memcpy(&v32, p, 4);
        return v32;
    default:
        memcpy(&v64, p, 8);
        return v64;
    }
}

static void store(void *buf, size_t size, size_t i, uint64_t v)
{
    char *p = (char *)buf + i * size;
    uint8_t v8 = (uint8_t)v;
    uint16_t v16 = (uint16_t)v;
    uint32_t v32 = (uint32_t)v;
    switch (size) {
    case 1:
        memcpy(p, &v8, 1);
        break;
    case 2:
        memcpy(p, &v16, 2);
        break;
    case 4:
        memcpy(p, &v32, 4);
        break;
    default:
        memcpy(p, &v, 8);
        break;
    }
}

static uint64_t width_mask(size_t size)
{
    return size == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * size)) - 1;
}

/* Two's-complement value of the low 8*size bits. */
static int64_t sign_extend(uint64_t bits, size_t size)
{
    uint64_t top = UINT64_C(1) << (8 * size - 1);
    bits &= width_mask(size);
    if (!(bits & top))
        return (int64_t)bits;
    return -(int64_t)(width_mask(size) - bits) - 1;
}

/* Integers: compute in 64 bits, keep the low bits (that is wrap-around). */
static uint64_t ref_int(tide_dtype dt, tide_op op, uint64_t a, uint64_t b)
{
    size_t size = tide_dtype_size(dt);
    int64_t sa = sign_extend(a, size), sb = sign_extend(b, size);
    int less = dtype_is_signed(dt) ? sa < sb : a < b;
    switch (op) {
    case TIDE_SUM:
    case TIDE_AVG:
        return (a + b) & width_mask(size);
    case TIDE_PROD:
        return (a * b) & width_mask(size);
    case TIDE_MIN:
        return less ? a : b;
    case TIDE_BAND:
        return a & b;
    case TIDE_BOR:
        return a | b;
    case TIDE_BXOR:
        return a ^ b;
    default:
        return less ? b : a;
    }
}

static double decode(tide_dtype dt, uint64_t bits)
{
    switch (dt) {
    case TIDE_FLOAT16:
        return fmt_value(&half_fmt, (uint16_t)bits);
    case TIDE_BFLOAT16:
        return fmt_value(&bf16_fmt, (uint16_t)bits);
    case TIDE_FLOAT32:
        return (double)float_of_bits((uint32_t)bits);
    default:
        return double_of_bits(bits);
    }
}

/* Rounds a result computed in double to dt.  float16/bfloat16 pass
 * through float first: the documented "combine in float" semantics. */
static uint64_t encode(tide_dtype dt, double x)
{
    switch (dt) {
    case TIDE_FLOAT16:
        return fmt_round(&half_fmt, (double)(float)x);
    case TIDE_BFLOAT16:
        return fmt_round(&bf16_fmt, (double)(float)x);
    case TIDE_FLOAT32:
        return bits_of_float((float)x);
    default:
        return bits_of_double(x);
    }
}

static int negative(double x)
{
    return (int)(bits_of_double(x) >> 63);
}

static struct expect ref_float(tide_dtype dt, tide_op op, uint64_t a, uint64_t b)
{
    double x = decode(dt, a), y = decode(dt, b), r;
    switch (op) {
    case TIDE_SUM:
    case TIDE_AVG:
        r = x + y;
        break;
    case TIDE_PROD:
        r = x * y;
        break;
    case TIDE_MIN: /* -0 beats +0 */
        r = (x < y || (x == y && negative(x))) ? x : y;
        break;
    default: /* MAX: +0 beats -0 */
        r = (x > y || (x == y && !negative(x))) ? x : y;
        break;
    }
    if (is_nan(x) || is_nan(y) || is_nan(r))
        return (struct expect){0, 1};
    return (struct expect){encode(dt, r), 0};
}

static struct expect ref_combine(tide_dtype dt, tide_op op, uint64_t a, uint64_t b)
{
    if (dtype_is_float(dt))
        return ref_float(dt, op, a, b);
    return (struct expect){ref_int(dt, op, a, b), 0};
}

static int elem_is_nan(tide_dtype dt, uint64_t bits, int *quiet)
{
    switch (dt) {
    case TIDE_FLOAT16:
        *quiet = fmt_is_quiet_nan(&half_fmt, (uint16_t)bits);
        return fmt_is_nan(&half_fmt, (uint16_t)bits);
    case TIDE_BFLOAT16:
        *quiet = fmt_is_quiet_nan(&bf16_fmt, (uint16_t)bits);
        return fmt_is_nan(&bf16_fmt, (uint16_t)bits);
    case TIDE_FLOAT32:
        *quiet = (bits & 0x00400000u) != 0;
        return (bits & 0x7fffffffu) > 0x7f800000u;
    default:
        *quiet = (bits & UINT64_C(0x0008000000000000)) != 0;
        return (bits & UINT64_C(0x7fffffffffffffff)) > UINT64_C(0x7ff0000000000000);
    }
}

static void check_elem(tide_dtype dt, tide_op op, uint64_t a, uint64_t b, uint64_t got,
                       const char *where, size_t i)
{
    struct expect want = ref_combine(dt, op, a, b);
    int quiet = 0;
    int got_nan = dtype_is_float(dt) && elem_is_nan(dt, got, &quiet);
    int ok = want.nan ? got_nan && quiet : got == want.bits;
    if (!ok)
        print_error("%s %s %s [%zu]: 0x%llx op 0x%llx = 0x%llx, want %s0x%llx\n",
                    tide_dtype_name(dt), tide_op_name(op), where, i, (unsigned long long)a,
                    (unsigned long long)b, (unsigned long long)got, want.nan ? "quiet NaN " : "",
                    (unsigned long long)want.bits);
    assert_true(ok);
}

/* ---- random vectors ---- */

/* Random bits, often replaced by edge values: zeros, ones, extremes, and
 * for floats infinities, NaNs (quiet and signalling) and subnormals. */
static uint64_t random_elem(tide_dtype dt)
{
    static const uint64_t f16_edges[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00,
                                         0x7e00, 0x7c01, 0x0001, 0x7bff, 0xfbff, 0x03ff};
    static const uint64_t bf16_edges[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80,
                                          0x7fc0, 0x7f81, 0x0001, 0x7f7f, 0xff7f, 0x007f};
    static const uint64_t f32_edges[] = {0x00000000, 0x80000000, 0x3f800000, 0xbf800000,
                                         0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
                                         0x00000001, 0x7f7fffff, 0xff7fffff, 0x00800000};
    static const uint64_t f64_edges[] = {
        0, UINT64_C(0x8000000000000000), UINT64_C(0x3ff0000000000000),
        UINT64_C(0xbff0000000000000), UINT64_C(0x7ff0000000000000),
        UINT64_C(0xfff0000000000000), UINT64_C(0x7ff8000000000000),
        UINT64_C(0x7ff0000000000001), 1, UINT64_C(0x7fefffffffffffff),
        UINT64_C(0xffefffffffffffff), UINT64_C(0x0010000000000000)};
    static const uint64_t int_edges[] = {0, 1, UINT64_MAX, UINT64_C(0x7fffffffffffffff),
                                         UINT64_C(0x8000000000000000), 2, 0x7f, 0x80,
                                         0xff, 0x7fffffff, 0x80000000, 0xffffffff};
    const uint64_t *edges = int_edges;
    switch (dt) {
    case TIDE_FLOAT16:
        edges = f16_edges;
        break;
    case TIDE_BFLOAT16:
        edges = bf16_edges;
        break;
    case TIDE_FLOAT32:
        edges = f32_edges;
        break;
    case TIDE_FLOAT64:
        edges = f64_edges;
        break;
    default:
        break;
    }
    uint64_t r = rng();
    size_t size = tide_dtype_size(dt);
    if (r % 8 == 0)
        return edges[(r >> 8) % 12] & width_mask(size);
    if (r % 8 == 1 && dtype_is_float(dt)) /* a small integer, so sums stay exact-ish */
        return encode(dt, (double)((int)((r >> 8) % 201) - 100));
    return rng() & width_mask(size);
}

/* ---- every dtype x op ---- */

enum alias { DISJOINT, DST_IS_A, DST_IS_B, ALL_SAME, ALIAS_COUNT };
static const char *const alias_names[] = {"disjoint", "dst==a", "dst==b", "dst==a==b"};

enum { CANARY = 80 }; /* bytes after dst that must stay untouched */

static void check_one(tide_dtype dt, tide_op op, size_t n, enum alias mode)
{
    size_t size = tide_dtype_size(dt), bytes = n * size;
    /* +size: misalign a by one element, to exercise unaligned vectors */
    unsigned char *abuf = malloc(bytes + size), *bbuf = malloc(bytes + 1);
    unsigned char *dbuf = malloc(bytes + CANARY), *orig_a = malloc(bytes + 1);
    unsigned char *orig_b = malloc(bytes + 1);
    assert_non_null(abuf);
    assert_non_null(bbuf);
    assert_non_null(dbuf);
    assert_non_null(orig_a);
    assert_non_null(orig_b);

    unsigned char *a = abuf + size, *b = bbuf, *d = dbuf;
    if (mode == DST_IS_A || mode == ALL_SAME)
        a = dbuf;
    if (mode == DST_IS_B || mode == ALL_SAME)
        b = dbuf;
    for (size_t i = 0; i < n; i++) {
        store(a, size, i, random_elem(dt));
        if (b != a)
            store(b, size, i, random_elem(dt));
    }
    memset(dbuf + bytes, 0xa5, CANARY);
    if (mode == DISJOINT)
        memset(dbuf, 0x5a, bytes);
    memcpy(orig_a, a, bytes);
    memcpy(orig_b, b, bytes);

    tide__reduce(dt, op, d, a, b, n);

    for (size_t i = 0; i < n; i++)
        check_elem(dt, op, load(orig_a, size, i), load(orig_b, size, i), load(d, size, i),
                   alias_names[mode], i);
    for (size_t i = 0; i < CANARY; i++)
        assert_int_equal(dbuf[bytes + i], 0xa5);
    if (mode == DISJOINT) { /* inputs are read-only */
        assert_memory_equal(a, orig_a, bytes);
        assert_memory_equal(b, orig_b, bytes);
    }
    free(abuf);
    free(bbuf);
    free(dbuf);
    free(orig_a);
    free(orig_b);
}

static void every_dtype_op_matches_reference(void **state)
{
    (void)state;
    static const size_t lengths[] = {0, 1, 7, 63, 64, 65, 1000, 1027};
    for (int dt = 0; dt < TIDE_DTYPE_COUNT; dt++)
        for (int op = 0; op < TIDE_OP_COUNT; op++)
            for (size_t l = 0; tide__op_fits((tide_op)op, (tide_dtype)dt) &&
                               l < sizeof lengths / sizeof lengths[0]; l++)
                for (int mode = 0; mode < ALIAS_COUNT; mode++)
                    check_one((tide_dtype)dt, (tide_op)op, lengths[l], (enum alias)mode);
}

/* ---- named cases ---- */

struct reduce_case {
    const char *what;
    tide_dtype dtype;
    tide_op op;
    uint64_t a, b, want; /* element bits */
    int want_nan;
};

static void known_answers(void **state)
{
    (void)state;
    static const struct reduce_case cases[] = {
        {"int8 127 + 1 wraps", TIDE_INT8, TIDE_SUM, 0x7f, 0x01, 0x80, 0},
        {"int8 avg combines as sum", TIDE_INT8, TIDE_AVG, 0x7f, 0x01, 0x80, 0},
        {"uint8 255 + 1 wraps", TIDE_UINT8, TIDE_SUM, 0xff, 0x01, 0x00, 0},
        {"int8 -128 * -1 wraps", TIDE_INT8, TIDE_PROD, 0x80, 0xff, 0x80, 0},
        {"uint8 16 * 16 wraps", TIDE_UINT8, TIDE_PROD, 16, 16, 0, 0},
        {"int8 min is signed", TIDE_INT8, TIDE_MIN, 0x80, 0x7f, 0x80, 0},
        {"uint8 min is unsigned", TIDE_UINT8, TIDE_MIN, 0x80, 0x7f, 0x7f, 0},
        {"int32 max is signed", TIDE_INT32, TIDE_MAX, 0xffffffff, 1, 1, 0},
        {"uint32 max is unsigned", TIDE_UINT32, TIDE_MAX, 0xffffffff, 1, 0xffffffff, 0},
        {"int32 INT32_MAX + 1 wraps", TIDE_INT32, TIDE_SUM, 0x7fffffff, 1, 0x80000000, 0},
        {"uint32 65536^2 wraps", TIDE_UINT32, TIDE_PROD, 0x10000, 0x10000, 0, 0},
        {"int64 INT64_MIN * -1 wraps", TIDE_INT64, TIDE_PROD, UINT64_C(1) << 63, UINT64_MAX,
         UINT64_C(1) << 63, 0},
        {"int64 min is signed", TIDE_INT64, TIDE_MIN, UINT64_MAX, 5, UINT64_MAX, 0},
        {"uint64 2^32 * 2^32 wraps", TIDE_UINT64, TIDE_PROD, UINT64_C(1) << 32,
         UINT64_C(1) << 32, 0, 0},
        {"uint64 (2^63+1) * 3 wraps", TIDE_UINT64, TIDE_PROD, (UINT64_C(1) << 63) + 1, 3,
         (UINT64_C(1) << 63) + 3, 0},
        {"uint64 max + 1 wraps", TIDE_UINT64, TIDE_SUM, UINT64_MAX, 1, 0, 0},
        {"float min NaN, 1", TIDE_FLOAT32, TIDE_MIN, 0x7fc00000, 0x3f800000, 0, 1},
        {"float min 1, NaN", TIDE_FLOAT32, TIDE_MIN, 0x3f800000, 0x7fc00000, 0, 1},
        {"float max -inf, NaN", TIDE_FLOAT32, TIDE_MAX, 0xff800000, 0xffc00000, 0, 1},
        {"float max sNaN, 1 is quiet", TIDE_FLOAT32, TIDE_MAX, 0x7f800001, 0x3f800000, 0, 1},
        {"float min -0, +0", TIDE_FLOAT32, TIDE_MIN, 0x80000000, 0x00000000, 0x80000000, 0},
        {"float min +0, -0", TIDE_FLOAT32, TIDE_MIN, 0x00000000, 0x80000000, 0x80000000, 0},
        {"float max -0, +0", TIDE_FLOAT32, TIDE_MAX, 0x80000000, 0x00000000, 0, 0},
        {"float max +0, -0", TIDE_FLOAT32, TIDE_MAX, 0x00000000, 0x80000000, 0, 0},
        {"float inf + -inf", TIDE_FLOAT32, TIDE_SUM, 0x7f800000, 0xff800000, 0, 1},
        {"double min NaN, -inf", TIDE_FLOAT64, TIDE_MIN, UINT64_C(0x7ff8000000000000),
         UINT64_C(0xfff0000000000000), 0, 1},
        {"double max 1, NaN", TIDE_FLOAT64, TIDE_MAX, UINT64_C(0x3ff0000000000000),
         UINT64_C(0xfff8000000000001), 0, 1},
        {"double min +0, -0", TIDE_FLOAT64, TIDE_MIN, 0, UINT64_C(0x8000000000000000),
         UINT64_C(0x8000000000000000), 0},
        {"double max -0, +0", TIDE_FLOAT64, TIDE_MAX, UINT64_C(0x8000000000000000), 0, 0, 0},
        {"half 1 + 1", TIDE_FLOAT16, TIDE_SUM, 0x3c00, 0x3c00, 0x4000, 0},
        {"half 65504 + 16 ties to inf", TIDE_FLOAT16, TIDE_SUM, 0x7bff, 0x4c00, 0x7c00, 0},
        {"half 2048 + 1 ties to even", TIDE_FLOAT16, TIDE_SUM, 0x6800, 0x3c00, 0x6800, 0},
        {"half 2048 + 3 ties to even", TIDE_FLOAT16, TIDE_SUM, 0x6800, 0x4200, 0x6802, 0},
        {"half min NaN, 1", TIDE_FLOAT16, TIDE_MIN, 0x7c01, 0x3c00, 0, 1},
        {"half max 1, NaN", TIDE_FLOAT16, TIDE_MAX, 0x3c00, 0xfe00, 0, 1},
        {"half min +0, -0", TIDE_FLOAT16, TIDE_MIN, 0x0000, 0x8000, 0x8000, 0},
        {"half least subnormal squared", TIDE_FLOAT16, TIDE_PROD, 0x0001, 0x0001, 0, 0},
        {"bf16 256 + 1 ties to even", TIDE_BFLOAT16, TIDE_SUM, 0x4380, 0x3f80, 0x4380, 0},
        {"bf16 max + max overflows", TIDE_BFLOAT16, TIDE_SUM, 0x7f7f, 0x7f7f, 0x7f80, 0},
        {"bf16 max 1, NaN", TIDE_BFLOAT16, TIDE_MAX, 0x3f80, 0x7f81, 0, 1},
        {"bf16 min -0, +0", TIDE_BFLOAT16, TIDE_MIN, 0x8000, 0x0000, 0x8000, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct reduce_case *c = &cases[i];
        size_t size = tide_dtype_size(c->dtype);
        unsigned char a[8], b[8], d[8];
        store(a, size, 0, c->a);
        store(b, size, 0, c->b);
        tide__reduce(c->dtype, c->op, d, a, b, 1);
        uint64_t got = load(d, size, 0);
        int quiet = 0;
        int got_nan = dtype_is_float(c->dtype) && elem_is_nan(c->dtype, got, &quiet);
        int ok = c->want_nan ? got_nan && quiet : got == c->want;
        if (!ok)
            print_error("%s: got 0x%llx, want 0x%llx%s\n", c->what, (unsigned long long)got,
                        (unsigned long long)c->want, c->want_nan ? " (a quiet NaN)" : "");
        assert_true(ok);
    }
}

/* ---- AVG's division ---- */

static struct expect ref_avg(tide_dtype dt, uint64_t v, int g)
{
    size_t size = tide_dtype_size(dt);
    if (!dtype_is_float(dt)) {
        if (dtype_is_signed(dt))
            return (struct expect){(uint64_t)(sign_extend(v, size) / g) & width_mask(size), 0};
        return (struct expect){v / (uint64_t)g, 0};
    }
    double x = decode(dt, v);
    if (is_nan(x))
        return (struct expect){0, 1};
    /* float16/bfloat16/float32 divide in float; the double quotient
     * rounds to the same float (53 >= 2 * 24 + 2 bits). */
    return (struct expect){encode(dt, x / g), 0};
}

static void avg_divides_like_c(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        tide_dtype dtype;
        uint64_t in, want;
        int group;
    } cases[] = {
        {"int8 -7 / 2 truncates to -3", TIDE_INT8, 0xf9, 0xfd, 2},
        {"int8 7 / 2 truncates to 3", TIDE_INT8, 7, 3, 2},
        {"int8 -128 / 3", TIDE_INT8, 0x80, 0xd6, 3}, /* -42 */
        {"uint8 255 / 2", TIDE_UINT8, 255, 127, 2},
        {"int32 -7 / 2", TIDE_INT32, 0xfffffff9, 0xfffffffd, 2},
        {"uint32 0xffffffff / 2 is unsigned", TIDE_UINT32, 0xffffffff, 0x7fffffff, 2},
        {"int64 -7 / 3", TIDE_INT64, (uint64_t)-7, (uint64_t)-2, 3},
        {"uint64 max / 2 is unsigned", TIDE_UINT64, UINT64_MAX, UINT64_MAX / 2, 2},
        {"float 1 / 3", TIDE_FLOAT32, 0x3f800000, 0x3eaaaaab, 3},
        {"double 1 / 4", TIDE_FLOAT64, UINT64_C(0x3ff0000000000000),
         UINT64_C(0x3fd0000000000000), 4},
        {"half 1 / 3", TIDE_FLOAT16, 0x3c00, 0x3555, 3},
        {"half least subnormal / 2 ties to 0", TIDE_FLOAT16, 0x0001, 0x0000, 2},
        {"bf16 1 / 3", TIDE_BFLOAT16, 0x3f80, 0x3eab, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size = tide_dtype_size(cases[i].dtype);
        unsigned char buf[8];
        store(buf, size, 0, cases[i].in);
        tide__reduce_avg(cases[i].dtype, buf, 1, cases[i].group);
        if (load(buf, size, 0) != cases[i].want)
            print_error("%s: got 0x%llx\n", cases[i].what,
                        (unsigned long long)load(buf, size, 0));
        assert_int_equal(load(buf, size, 0), cases[i].want);
    }

    static const int groups[] = {2, 3, 7, 64};
    for (int dt = 0; dt < TIDE_DTYPE_COUNT; dt++) {
        for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
            size_t size = tide_dtype_size((tide_dtype)dt), n = 1027;
            unsigned char *buf = malloc(n * size), *orig = malloc(n * size);
            assert_non_null(buf);
            assert_non_null(orig);
            for (size_t j = 0; j < n; j++)
                store(buf, size, j, random_elem((tide_dtype)dt));
            memcpy(orig, buf, n * size);
            tide__reduce_avg((tide_dtype)dt, buf, n, groups[gi]);
            for (size_t j = 0; j < n; j++) {
                struct expect want = ref_avg((tide_dtype)dt, load(orig, size, j), groups[gi]);
                uint64_t got = load(buf, size, j);
                int quiet = 0;
                int ok = want.nan ? elem_is_nan((tide_dtype)dt, got, &quiet) && quiet
                                  : got == want.bits;
                if (!ok)
                    print_error("avg %s / %d [%zu]: 0x%llx -> 0x%llx, want 0x%llx\n",
                                tide_dtype_name((tide_dtype)dt), groups[gi], j,
                                (unsigned long long)load(orig, size, j),
                                (unsigned long long)got, (unsigned long long)want.bits);
                assert_true(ok);
            }
            free(buf);
            free(orig);
        }
    }
}

/* ---- names, sizes, invalid values ---- */

static void names_sizes_and_invalid_values(void **state)
{
    (void)state;
    static const struct {
        tide_dtype dtype;
        const char *name;
        size_t size;
    } dtypes[] = {
        {TIDE_INT8, "int8", 1},       {TIDE_UINT8, "uint8", 1},   {TIDE_INT32, "int32", 4},
        {TIDE_UINT32, "uint32", 4},   {TIDE_INT64, "int64", 8},   {TIDE_UINT64, "uint64", 8},
        {TIDE_FLOAT16, "half", 2},    {TIDE_BFLOAT16, "bfloat16", 2},
        {TIDE_FLOAT32, "float", 4},   {TIDE_FLOAT64, "double", 8},
    };
    assert_int_equal(sizeof dtypes / sizeof dtypes[0], TIDE_DTYPE_COUNT);
    for (size_t i = 0; i < TIDE_DTYPE_COUNT; i++) {
        assert_string_equal(tide_dtype_name(dtypes[i].dtype), dtypes[i].name);
        assert_int_equal(tide_dtype_size(dtypes[i].dtype), dtypes[i].size);
        assert_true(tide__dtype_valid((int)dtypes[i].dtype));
    }
    static const struct {
        tide_op op;
        const char *name;
    } ops[] = {{TIDE_SUM, "sum"},   {TIDE_PROD, "prod"}, {TIDE_MIN, "min"},
               {TIDE_MAX, "max"},   {TIDE_AVG, "avg"},   {TIDE_BAND, "band"},
               {TIDE_BOR, "bor"},   {TIDE_BXOR, "bxor"}};
    assert_int_equal(sizeof ops / sizeof ops[0], TIDE_OP_COUNT);
    for (size_t i = 0; i < TIDE_OP_COUNT; i++) {
        assert_string_equal(tide_op_name(ops[i].op), ops[i].name);
        assert_true(tide__op_valid((int)ops[i].op));
    }

    static const int bad[] = {-1, -100, 99, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(tide__dtype_valid(bad[i]));
        assert_false(tide__op_valid(bad[i]));
    }
    assert_false(tide__dtype_valid(TIDE_DTYPE_COUNT));
    assert_false(tide__op_valid(TIDE_OP_COUNT));
    /* Bitwise ops: the integer dtypes only. */
    for (int dt = 0; dt < TIDE_DTYPE_COUNT; dt++) {
        bool integer = dt <= TIDE_UINT64;
        assert_int_equal(tide__op_fits(TIDE_BXOR, (tide_dtype)dt), integer);
        assert_true(tide__op_fits(TIDE_SUM, (tide_dtype)dt));
    }
    assert_int_equal(tide_dtype_size(TIDE_DTYPE_COUNT), 0);
    assert_int_equal(tide_dtype_size((tide_dtype)-1), 0);
    assert_string_equal(tide_dtype_name(TIDE_DTYPE_COUNT), "?");
    assert_string_equal(tide_dtype_name((tide_dtype)-1), "?");
    assert_string_equal(tide_op_name(TIDE_OP_COUNT), "?");
    assert_string_equal(tide_op_name((tide_op)-1), "?");

    /* Invalid dtype or op, or a group of one: the buffer is untouched. */
    uint32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, d[4] = {9, 9, 9, 9};
    tide__reduce(TIDE_DTYPE_COUNT, TIDE_SUM, d, a, b, 4);
    tide__reduce((tide_dtype)-1, TIDE_SUM, d, a, b, 4);
    tide__reduce(TIDE_UINT32, TIDE_OP_COUNT, d, a, b, 4);
    tide__reduce(TIDE_UINT32, (tide_op)-1, d, a, b, 4);
    tide__reduce_avg(TIDE_UINT32, d, 4, 1);
    tide__reduce_avg(TIDE_UINT32, d, 4, 0);
    tide__reduce_avg(TIDE_DTYPE_COUNT, d, 4, 2);
    for (int i = 0; i < 4; i++)
        assert_int_equal(d[i], 9);
    /* n = 0 touches nothing, even through NULL */
    tide__reduce(TIDE_FLOAT32, TIDE_SUM, NULL, NULL, NULL, 0);
    tide__reduce(TIDE_FLOAT16, TIDE_SUM, NULL, NULL, NULL, 0);
    tide__reduce_avg(TIDE_FLOAT16, NULL, 0, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(half_widens_every_pattern_exactly),
        cmocka_unit_test(half_narrows_to_nearest_even),
        cmocka_unit_test(bf16_widens_every_pattern_exactly),
        cmocka_unit_test(bf16_narrows_to_nearest_even),
        cmocka_unit_test(every_dtype_op_matches_reference),
        cmocka_unit_test(known_answers),
        cmocka_unit_test(avg_divides_like_c),
        cmocka_unit_test(names_sizes_and_invalid_values),
    };
    return cmocka_run_group_tests_name("reduction", tests, NULL, NULL);
}
