/* perf_check.c - the data of tide-perf's -c 1 (see perf_check.h).
 *
 * Every value is a small integer, so every dtype holds it, every partial
 * result of a reduction, in any order, is exact, and the expected output
 * can be computed in double and compared for equality:
 *   sum, min, max  (3*rank + i) % 5: a sum stays below 4n, exact in
 *                  bfloat16 (8 significant bits) up to 64 ranks;
 *   prod           2 where (rank + i) % 4 == 0, else 1: powers of two;
 *   avg            a base plus +s/-s on pairs of ranks, so the sum is
 *                  n * base and the mean is exact, even truncated;
 *   alltoall       (5*from + 3*to + j) % 7 (scatter: from the root);
 *   gather         the all-gather's blocks.
 * Integer results wrap as tide's do (two's complement), so overflow at
 * large n is still compared exactly.  Outputs are poisoned with 0xff
 * bytes (NaN in the float types) before the call.
 */
#include "tools/perf/perf_check.h"

#include <stdint.h>
#include <string.h>

/* -------------------------------------------------- elements of any dtype */

/* One element of any dtype, as it sits in memory. */
union elem {
    int8_t i8;
    uint8_t u8;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    uint16_t h; /* float16 and bfloat16 bits */
    float f;
    double d;
};

/* Exact for the values used here (normal numbers or zero), no rounding. */
static uint16_t half_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if ((x & 0x7fffffffu) == 0)
        return sign;
    uint32_t exp = ((x >> 23) & 0xffu) - 127 + 15;
    return (uint16_t)(sign | (exp << 10) | ((x >> 13) & 0x3ffu));
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) /* zero or subnormal: man * 2^-24 */
        return (sign ? -1.0f : 1.0f) * (float)man / 16777216.0f;
    uint32_t x = sign | (exp == 31 ? 0xffu << 23 : (exp - 15 + 127) << 23) | man << 13;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static double load(tide_dtype t, const void *buf, size_t i)
{
    const char *p = (const char *)buf + i * tide_dtype_size(t);
    union elem v;
    memcpy(&v, p, tide_dtype_size(t));
    switch (t) {
    case TIDE_INT8: return v.i8;
    case TIDE_UINT8: return v.u8;
    case TIDE_INT32: return v.i32;
    case TIDE_UINT32: return v.u32;
    case TIDE_INT64: return (double)v.i64;
    case TIDE_UINT64: return (double)v.u64;
    case TIDE_FLOAT16: return half_to_float(v.h);
    case TIDE_BFLOAT16: {
        uint32_t x = (uint32_t)v.h << 16;
        float f;
        memcpy(&f, &x, sizeof f);
        return f;
    }
    case TIDE_FLOAT32: return v.f;
    default: return v.d;
    }
}

/* What storing the integer v leaves in dtype t: integers wrap. */
static double as_dtype(tide_dtype t, double v)
{
    int64_t w = (int64_t)v;
    switch (t) {
    case TIDE_INT8: return (int8_t)w;
    case TIDE_UINT8: return (uint8_t)w;
    case TIDE_INT32: return (int32_t)w;
    case TIDE_UINT32: return (uint32_t)w;
    case TIDE_INT64: return (double)w;
    case TIDE_UINT64: return (double)(uint64_t)w;
    default: return v; /* small integers are exact in every float type */
    }
}

static void store(tide_dtype t, void *buf, size_t i, double v)
{
    char *p = (char *)buf + i * tide_dtype_size(t);
    union elem u;
    int64_t w = (int64_t)v;
    switch (t) {
    case TIDE_INT8: u.i8 = (int8_t)w; break;
    case TIDE_UINT8: u.u8 = (uint8_t)w; break;
    case TIDE_INT32: u.i32 = (int32_t)w; break;
    case TIDE_UINT32: u.u32 = (uint32_t)w; break;
    case TIDE_INT64: u.i64 = w; break;
    case TIDE_UINT64: u.u64 = (uint64_t)w; break;
    case TIDE_FLOAT16: u.h = half_from_float((float)v); break;
    case TIDE_BFLOAT16: {
        float f = (float)v;
        uint32_t x;
        memcpy(&x, &f, sizeof x);
        u.h = (uint16_t)(x >> 16); /* exact: small integers need 8 bits */
        break;
    }
    case TIDE_FLOAT32: u.f = (float)v; break;
    default: u.d = v; break;
    }
    memcpy(p, &u, tide_dtype_size(t));
}

/* ------------------------------------------------------------ the pattern */

/* Rank r's input element i (i counts over the whole input vector). */
static double pattern(tide_op op, int r, int n, size_t i)
{
    switch (op) {
    case TIDE_PROD:
        return (i + (size_t)r) % 4 == 0 ? 2 : 1;
    case TIDE_AVG: {
        double base = 2 + (double)(i % 3), s = 1 + (double)(i % 2);
        if (r >= n - n % 2)
            return base; /* an odd group's last rank has no partner */
        return r % 2 ? base - s : base + s;
    }
    default:
        return (double)((3 * (size_t)r + i) % 5);
    }
}

static double alltoall_value(int from, int to, size_t j)
{
    return (double)((5 * (size_t)from + 3 * (size_t)to + j) % 7);
}

/* op over every rank's element i, in double (exact here). */
static double reduced(tide_op op, int n, size_t i)
{
    double acc = pattern(op, 0, n, i);
    for (int r = 1; r < n; r++) {
        double v = pattern(op, r, n, i);
        switch (op) {
        case TIDE_PROD: acc *= v; break;
        case TIDE_MIN: acc = v < acc ? v : acc; break;
        case TIDE_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    return op == TIDE_AVG ? acc / n : acc;
}

/* The pattern non-reducing collectives carry: the sum pattern. */
static double plain(int r, int n, size_t i) { return pattern(TIDE_SUM, r, n, i); }

/* ------------------------------------------------------------ fill, count */

void perf_check_fill(struct bench *b, const struct bench_shape *s, bool inplace)
{
    const struct bench_opts *o = &b->opt;
    size_t c = s->count, n = (size_t)b->size, r = (size_t)b->rank;
    void *in = inplace ? b->recv : b->send;
    memset(b->recv, 0xff, b->cap);
    switch (o->coll) {
    case COLL_ALLREDUCE:
    case COLL_REDUCE:
        for (size_t i = 0; i < c; i++)
            store(o->dtype, in, i, pattern(o->redop, b->rank, b->size, i));
        break;
    case COLL_ALLGATHER: /* in place, the input sits at its block of recv */
    case COLL_GATHER:    /* (no in-place form) */
        for (size_t j = 0; j < c; j++)
            store(o->dtype, in, inplace ? r * c + j : j, plain(b->rank, b->size, r * c + j));
        break;
    case COLL_REDUCE_SCATTER:
        for (size_t i = 0; i < n * c; i++)
            store(o->dtype, in, i, pattern(o->redop, b->rank, b->size, i));
        break;
    case COLL_BROADCAST:
        for (size_t i = 0; b->rank == o->root && i < c; i++)
            store(o->dtype, b->recv, i, plain(o->root, b->size, i));
        break;
    case COLL_ALLTOALL:
        for (size_t i = 0; i < n * c; i++)
            store(o->dtype, b->send, i, alltoall_value(b->rank, (int)(i / c), i % c));
        break;
    case COLL_SCATTER: /* block q of the root's input goes to rank q */
        for (size_t i = 0; b->rank == o->root && i < n * c; i++)
            store(o->dtype, b->send, i, alltoall_value(o->root, (int)(i / c), i % c));
        break;
    default:
        break;
    }
}

/* Element i of this rank's output must be `want`. */
static long wrong(const struct bench *b, size_t i, double want)
{
    return load(b->opt.dtype, b->recv, i) != as_dtype(b->opt.dtype, want);
}

long perf_check_count(const struct bench *b, const struct bench_shape *s)
{
    const struct bench_opts *o = &b->opt;
    size_t c = s->count, n = (size_t)b->size, r = (size_t)b->rank;
    long bad = 0;
    switch (o->coll) {
    case COLL_REDUCE: /* the root's output is an allreduce's; others have none */
    case COLL_ALLREDUCE:
        for (size_t i = 0; i < c && (o->coll != COLL_REDUCE || b->rank == o->root); i++)
            bad += wrong(b, i, reduced(o->redop, b->size, i));
        break;
    case COLL_GATHER: /* the root's output is an all-gather's; others have none */
    case COLL_ALLGATHER:
        for (size_t i = 0; i < n * c && (o->coll != COLL_GATHER || b->rank == o->root); i++)
            bad += wrong(b, i, plain((int)(i / c), b->size, i));
        break;
    case COLL_REDUCE_SCATTER:
        for (size_t j = 0; j < c; j++)
            bad += wrong(b, j, reduced(o->redop, b->size, r * c + j));
        break;
    case COLL_BROADCAST:
        for (size_t i = 0; i < c; i++)
            bad += wrong(b, i, plain(o->root, b->size, i));
        break;
    case COLL_ALLTOALL:
        for (size_t i = 0; i < n * c; i++)
            bad += wrong(b, i, alltoall_value((int)(i / c), b->rank, i % c));
        break;
    case COLL_SCATTER:
        for (size_t j = 0; j < c; j++)
            bad += wrong(b, j, alltoall_value(o->root, b->rank, j));
        break;
    default:
        break;
    }
    return bad;
}
