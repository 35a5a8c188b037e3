/* test_collectives_tcp.c - every collective over real loopback TCP rank
 * processes, through the public API only, against references computed
 * here.
 *
 * The matrix: collective x algorithm (forced with TIDE_ALGO_<COLL>, set
 * in the parent so the ranks inherit it, and with no override) x dtype x
 * op x count x buffer layout, on 1, 2, 3, 4, 5, 7 and 8 ranks.  Inputs
 * are small integers, so every sum, product, minimum and maximum is exact
 * in every dtype and the reference is an exact integer; AVG is the exact
 * sum divided by the group size in the dtype (integers truncate).  The
 * full dtype x op product runs on 1 to 4 ranks, a rotating fifth of it on
 * 5, 7 and 8 (which oversubscribe a small machine).
 *
 * Then: the seed's expectations, bitwise identity across ranks and runs,
 * thousands of requests in flight, subgroups, bad arguments, and both
 * progress modes.
 *
 * A wrong value is printed with the case that produced it and the run
 * goes on (CHECK); a call or wait that fails ends the rank (EXPECT),
 * since the communicator cannot be trusted after it.  Layouts assume a
 * little-endian host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/harness.h"

/* ---- soft checks: report and go on; the rank fails at the end ---- */

static int failed_checks;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond) && failed_checks++ < 40) {                                        \
            fprintf(stderr, "%s:%d: rank %d: ", __FILE__, __LINE__, harness_rank);    \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
        }                                                                             \
    } while (0)

static void end_of_body(void)
{
    EXPECT(failed_checks == 0, "%d checks failed (the first 40 are printed above)",
           failed_checks);
}

/* ---- collectives, their algorithms and the cases ---- */

enum coll {
    C_ALLREDUCE, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_ALLGATHERV, C_REDUCE_SCATTER,
    C_REDUCE_SCATTERV, C_GATHER, C_SCATTER, C_ALLTOALL, C_BARRIER, C_COUNT
};

struct family {
    const char *name;
    const char *env;       /* TIDE_ALGO_..., NULL: no choice */
    const char *algos[3];  /* the names tide.h lists */
    bool reduces;
};

/* tide.h names no algorithms for reduce_scatterv; it is the v form of
 * reduce_scatter and selects among the same two. */
static const struct family families[C_COUNT] = {
    [C_ALLREDUCE] = {"allreduce", "TIDE_ALGO_ALLREDUCE",
                     {"ring", "recursive_doubling", "rabenseifner"}, true},
    [C_BROADCAST] = {"broadcast", "TIDE_ALGO_BROADCAST", {"binomial", "chain"}, false},
    [C_REDUCE] = {"reduce", "TIDE_ALGO_REDUCE", {"binomial"}, true},
    [C_ALLGATHER] = {"allgather", "TIDE_ALGO_ALLGATHER",
                     {"ring", "bruck", "recursive_doubling"}, false},
    [C_ALLGATHERV] = {"allgatherv", "TIDE_ALGO_ALLGATHERV", {"ring"}, false},
    [C_REDUCE_SCATTER] = {"reduce_scatter", "TIDE_ALGO_REDUCE_SCATTER",
                          {"ring", "recursive_halving"}, true},
    [C_REDUCE_SCATTERV] = {"reduce_scatterv", "TIDE_ALGO_REDUCE_SCATTERV",
                           {"ring", "recursive_halving"}, true},
    [C_GATHER] = {"gather", "TIDE_ALGO_GATHER", {"binomial"}, false},
    [C_SCATTER] = {"scatter", "TIDE_ALGO_SCATTER", {"binomial"}, false},
    [C_ALLTOALL] = {"alltoall", "TIDE_ALGO_ALLTOALL", {"pairwise"}, false},
    [C_BARRIER] = {"barrier", NULL, {NULL}, false},
};

/* Where input and output live.  What "aliased" and "overlap" mean per
 * collective is drawn where the buffers are laid out. */
enum layout_kind { L_SEPARATE, L_IN_PLACE, L_ALIASED, L_OVERLAP, L_COUNT };
static const char *const layout_names[L_COUNT] = {"separate", "in_place", "aliased", "overlap"};

struct ccase {
    enum coll coll;
    tide_dtype dtype;
    tide_op op;
    size_t count;   /* the call's count argument (per block where blocks) */
    int root;
    enum layout_kind layout;
    bool wrap;      /* int8/uint8 sums that overflow on purpose */
    unsigned salt;  /* varies inputs, NULL-at-zero and layout details */
};

enum { MAXN = 64, GUARD = 64, FILL = 0xa5 };

static char used_algo[64]; /* what the last request reported */

static const char *describe(const struct ccase *k, int n)
{
    static char s[320];
    const char *env = families[k->coll].env ? getenv(families[k->coll].env) : NULL;
    snprintf(s, sizeof s,
             "%s [TIDE_ALGO=%s, ran %s] n=%d count=%zu dtype=%s op=%s root=%d buffers=%s%s "
             "salt=%u",
             families[k->coll].name, env ? env : "(none)", used_algo, n, k->count,
             tide_dtype_name(k->dtype), families[k->coll].reduces ? tide_op_name(k->op) : "-",
             k->root, layout_names[k->layout], k->wrap ? " wrap" : "", k->salt);
    return s;
}

static bool is_pow2(int n)
{
    return (n & (n - 1)) == 0;
}

/* The forced name, or one of the collective's names when there is no
 * override (or recursive doubling of an all-gather over a group that is
 * not a power of two gave way).  A group of one is exempt: it runs no
 * algorithm at all, and tide_req_algorithm names the one used. */
static void check_algorithm(const struct ccase *k, int n)
{
    const struct family *f = &families[k->coll];
    CHECK(used_algo[0], "%s: tide_req_algorithm is empty", describe(k, n));
    if (n == 1 || !f->env)
        return;
    const char *want = getenv(f->env);
    bool gave_way = want && k->coll == C_ALLGATHER && !strcmp(want, "recursive_doubling") &&
                    !is_pow2(n);
    if (want && !gave_way) {
        CHECK(!strcmp(used_algo, want), "%s: tide_req_algorithm is not %s", describe(k, n), want);
        return;
    }
    bool known = false;
    for (int i = 0; i < 3 && f->algos[i]; i++)
        known |= !strcmp(used_algo, f->algos[i]);
    CHECK(known && !(gave_way && !strcmp(used_algo, want)),
          "%s: tide_req_algorithm is not one of the collective's algorithms%s", describe(k, n),
          gave_way ? " other than recursive_doubling" : "");
}

static void posted(const struct ccase *k, int n, int rc)
{
    used_algo[0] = 0;
    EXPECT(rc == 0, "%s: the call returned %s", describe(k, n), tide_err_name(rc));
}

static void await(const struct ccase *k, int n, tide_req *req)
{
    int rc = tide_wait(req, -1);
    snprintf(used_algo, sizeof used_algo, "%s", tide_req_algorithm(req));
    EXPECT(rc == 0, "%s: tide_wait returned %s: %s", describe(k, n), tide_err_name(rc),
           tide_req_message(req));
    check_algorithm(k, n);
    tide_req_free(req);
}

/* ---- exact values in every dtype ---- */

static bool is_float(tide_dtype d)
{
    return d >= TIDE_FLOAT16;
}

static bool is_unsigned(tide_dtype d)
{
    return d == TIDE_UINT8 || d == TIDE_UINT32 || d == TIDE_UINT64;
}

/* binary32 -> binary16, round to nearest even; normal range only (the
 * test's values are small integers and their quotients by n <= 8). */
static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    if ((x & 0x7fffffffu) == 0)
        return (uint16_t)sign;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    EXPECT(exp >= 1 && exp <= 30, "f32_to_f16(%g): out of the test's range", (double)f);
    uint32_t mant = x & 0x7fffffu, rest = mant & 0x1fffu;
    uint32_t h = sign | (uint32_t)exp << 10 | mant >> 13;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++; /* a carry into the exponent is still right */
    return (uint16_t)h;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static uint64_t float_bits(tide_dtype d, double v)
{
    float f = (float)v;
    uint32_t b32;
    uint64_t b64;
    switch (d) {
    case TIDE_FLOAT16: return f32_to_f16(f);
    case TIDE_BFLOAT16: return f32_to_bf16(f);
    case TIDE_FLOAT32: memcpy(&b32, &f, sizeof b32); return b32;
    default: memcpy(&b64, &v, sizeof b64); return b64;
    }
}

/* The bits of the exact integer v in dtype d: two's complement wrap for
 * integers, exact for floats (negative zero on request). */
static uint64_t value_bits(tide_dtype d, int64_t v, bool neg_zero)
{
    if (is_float(d))
        return float_bits(d, v == 0 && neg_zero ? -0.0 : (double)v);
    size_t bits = tide_dtype_size(d) * 8;
    return bits == 64 ? (uint64_t)v : (uint64_t)v & ((UINT64_C(1) << bits) - 1);
}

/* SUM then divide by n: integers wrap the sum, then truncate. */
static uint64_t avg_bits(tide_dtype d, int64_t sum, int n)
{
    switch (d) {
    case TIDE_INT8: return value_bits(d, (int8_t)sum / n, false);
    case TIDE_UINT8: return (uint8_t)sum / (unsigned)n;
    case TIDE_INT32: return value_bits(d, (int32_t)sum / n, false);
    case TIDE_UINT32: return (uint32_t)sum / (uint32_t)n;
    case TIDE_INT64: return value_bits(d, sum / n, false);
    case TIDE_UINT64: return (uint64_t)sum / (uint64_t)n;
    case TIDE_FLOAT64: return float_bits(d, (double)sum / n);
    default: { /* combined in float, rounded once to the dtype */
        float q = (float)sum / (float)n;
        return d == TIDE_FLOAT32 ? float_bits(d, q) : d == TIDE_FLOAT16 ? f32_to_f16(q)
                                                                         : f32_to_bf16(q);
    }
    }
}

/* Rank r's input at element i of a reducing case: in [-3, 3] ([0, 6]
 * unsigned); for PROD in {-2..2} so any partial product is a power of two
 * at most 2^8 (exact in bfloat16); wrap cases in [90, 127]. */
static int64_t input_of(const struct ccase *k, int r, size_t i)
{
    static const int prod_vals[11] = {1, -1, 2, 1, -2, -1, 1, 2, -1, 1, 0};
    unsigned h = (unsigned)r * 5u + (unsigned)(i % 1009) * 3u + k->salt;
    bool uns = is_unsigned(k->dtype);
    if (k->wrap)
        return 90 + (int64_t)(h % 38);
    if (k->op == TIDE_PROD) {
        int v = prod_vals[h % 11];
        return uns && v < 0 ? -v : v;
    }
    return uns ? (int64_t)(h % 7) : (int64_t)(h % 7) - 3;
}

static uint64_t ref_bits(const struct ccase *k, int n, size_t i)
{
    int64_t acc = input_of(k, 0, i);
    bool neg = acc < 0; /* the sign of a zero product */
    for (int r = 1; r < n; r++) {
        int64_t v = input_of(k, r, i);
        neg ^= v < 0;
        switch (k->op) {
        case TIDE_PROD: acc *= v; break;
        case TIDE_MIN: acc = v < acc ? v : acc; break;
        case TIDE_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (k->op == TIDE_AVG)
        return avg_bits(k->dtype, acc, n);
    return value_bits(k->dtype, acc, k->op == TIDE_PROD && neg);
}

static uint64_t load_bits(const uint8_t *p, size_t j, size_t es)
{
    uint64_t b = 0;
    memcpy(&b, p + j * es, es);
    return b;
}

static void fill_input(const struct ccase *k, int r, uint8_t *p, size_t first, size_t len)
{
    size_t es = tide_dtype_size(k->dtype);
    for (size_t j = 0; j < len; j++) {
        uint64_t b = value_bits(k->dtype, input_of(k, r, first + j), false);
        memcpy(p + j * es, &b, es);
    }
}

/* float16/bfloat16 AVG may be one unit in the last place off: a library
 * may divide in float or in double before the final rounding. */
static bool avg_half_close(const struct ccase *k, uint64_t got, uint64_t want)
{
    if (k->op != TIDE_AVG || (k->dtype != TIDE_FLOAT16 && k->dtype != TIDE_BFLOAT16))
        return false;
    return ((got ^ want) & 0x8000u) == 0 && (got > want ? got - want : want - got) <= 1;
}

/* out[0..len) against the reduction of elements first.. of the vector. */
static void check_reduced(const struct ccase *k, int n, const uint8_t *out, size_t first,
                          size_t len)
{
    size_t es = tide_dtype_size(k->dtype), bad = 0;
    for (size_t j = 0; j < len; j++) {
        uint64_t want = ref_bits(k, n, first + j), got = load_bits(out, j, es);
        if (got == want || avg_half_close(k, got, want))
            continue;
        if (bad++ < 3)
            CHECK(false, "%s: element %zu is 0x%llx, want 0x%llx", describe(k, n), first + j,
                  (unsigned long long)got, (unsigned long long)want);
    }
    CHECK(bad <= 3, "%s: %zu of %zu elements differ", describe(k, n), bad, len);
}

/* The input elements [from, to) at p are still this rank's input. */
static void check_input_kept(const struct ccase *k, int n, int r, const uint8_t *p, size_t from,
                             size_t to, const char *what)
{
    size_t es = tide_dtype_size(k->dtype);
    for (size_t j = from; j < to; j++) {
        uint64_t want = value_bits(k->dtype, input_of(k, r, j), false);
        if (load_bits(p, j, es) != want) {
            CHECK(false, "%s: %s changed at element %zu", describe(k, n), what, j);
            return;
        }
    }
}

/* ---- byte patterns for the collectives that move data ---- */

static uint8_t pat(unsigned who, size_t byte, unsigned salt)
{
    uint32_t h = who * 0x9e3779b1u ^ (uint32_t)byte * 0x85ebca77u ^ salt * 0xc2b2ae3du;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    return (uint8_t)(h ^ h >> 13);
}

static void fill_pat(uint8_t *p, size_t bytes, unsigned who, unsigned salt)
{
    for (size_t b = 0; b < bytes; b++)
        p[b] = pat(who, b, salt);
}

static void check_pat(const struct ccase *k, int n, const uint8_t *p, size_t bytes, unsigned who,
                      const char *what, int block)
{
    for (size_t b = 0; b < bytes; b++) {
        if (p[b] != pat(who, b, k->salt)) {
            CHECK(false, "%s: %s %d differs from byte %zu on (0x%02x, want 0x%02x)",
                  describe(k, n), what, block, b, p[b], pat(who, b, k->salt));
            return;
        }
    }
}

static uint8_t *alloc_guarded(size_t bytes)
{
    uint8_t *p = malloc(bytes + GUARD);
    EXPECT(p, "malloc(%zu)", bytes + GUARD);
    memset(p, FILL, bytes + GUARD);
    return p;
}

/* Nothing in p[from, to) was written. */
static void check_untouched(const struct ccase *k, int n, const uint8_t *p, size_t from,
                            size_t to, const char *what)
{
    for (size_t b = from; b < to; b++) {
        if (p[b] != FILL) {
            CHECK(false, "%s: %s was written at byte %zu", describe(k, n), what, b);
            return;
        }
    }
}

/* ---- the reducing collectives ---- */

/* Per-rank counts of the v forms: varied, some zero, the same on every
 * rank. */
static size_t vcount(const struct ccase *k, int p)
{
    return k->count ? (k->count + 7 * (size_t)p + k->salt) % (k->count + 1) : 0;
}

struct layout {
    uint8_t *mem;      /* recvbuf's allocation, guarded */
    size_t mem_len;    /* bytes before the guard */
    uint8_t *sendmem;  /* a separate sendbuf, or NULL */
    const void *send;  /* sendbuf as passed */
    uint8_t *in;       /* where this rank's input is written */
    uint8_t *out;      /* recvbuf as passed; the result is read here */
};

/* The vector has total elements and this rank's result is len of them
 * from own.  Separate: two buffers.  In place: TIDE_IN_PLACE, input and
 * result in recvbuf.  Aliased: sendbuf == recvbuf for allreduce/reduce,
 * NCCL-style recvbuf == sendbuf + own for reduce-scatter.  Overlap:
 *
 *     allreduce, reduce:  |<- shift ->|<------- count ------->|
 *                         [send ................]              (salt even)
 *                                     [recv ..................]
 *     reduce-scatter:     sendbuf == recvbuf, result at its start. */
static void lay_out(const struct ccase *k, bool root_side, size_t total, size_t own,
                    size_t len, struct layout *l)
{
    size_t es = tide_dtype_size(k->dtype);
    enum layout_kind m = root_side ? k->layout : L_SEPARATE;
    memset(l, 0, sizeof *l);
    if (m == L_SEPARATE) {
        l->sendmem = alloc_guarded(total * es);
        l->in = l->sendmem;
        l->send = l->in;
        l->mem_len = root_side ? len * es : total * es;
        l->mem = alloc_guarded(l->mem_len);
        l->out = root_side || (k->salt & 1) ? l->mem : NULL;
        return;
    }
    bool whole = k->coll == C_ALLREDUCE || k->coll == C_REDUCE;
    size_t shift = m == L_OVERLAP && whole ? len / 2 + 1 : 0;
    l->mem_len = (total + shift) * es;
    l->mem = alloc_guarded(l->mem_len);
    l->in = l->mem + (k->salt & 1 ? shift * es : 0);
    l->out = l->mem + (k->salt & 1 ? 0 : shift * es);
    if (m == L_ALIASED)
        l->out = l->mem + own * es;
    l->send = m == L_IN_PLACE ? TIDE_IN_PLACE : l->in;
}

static int post_reduction(tide_comm *comm, const struct ccase *k, const void *send, void *out,
                          const size_t *counts, tide_req **req)
{
    switch (k->coll) {
    case C_ALLREDUCE:
        return tide_iallreduce(comm, send, out, k->count, k->dtype, k->op, req);
    case C_REDUCE:
        return tide_ireduce(comm, send, out, k->count, k->dtype, k->op, k->root, req);
    case C_REDUCE_SCATTER:
        return tide_ireduce_scatter(comm, send, out, k->count, k->dtype, k->op, req);
    default:
        return tide_ireduce_scatterv(comm, send, out, counts, k->dtype, k->op, req);
    }
}

static void run_reduction(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t counts[MAXN], total = k->count, own = 0, len = k->count;
    if (k->coll == C_REDUCE_SCATTER) {
        total = k->count * (size_t)n;
        own = k->count * (size_t)r;
    } else if (k->coll == C_REDUCE_SCATTERV) {
        total = 0;
        for (int p = 0; p < n; p++) {
            counts[p] = vcount(k, p);
            own = p == r ? total : own;
            total += counts[p];
        }
        len = counts[r];
    }
    bool root_side = k->coll != C_REDUCE || r == k->root;
    struct layout l;
    lay_out(k, root_side, total, own, len, &l);
    fill_input(k, r, l.in, 0, total);
    const void *send = l.send;
    void *out = l.out;
    if (k->salt & 2) { /* NULL where the count is 0 */
        send = total == 0 && send != TIDE_IN_PLACE ? NULL : send;
        out = len == 0 && k->layout != L_IN_PLACE ? NULL : out;
    }
    tide_req *req;
    posted(k, n, post_reduction(comm, k, send, out, counts, &req));
    await(k, n, req);
    if (root_side)
        check_reduced(k, n, l.out, own, len);
    else if (l.out)
        check_untouched(k, n, l.mem, 0, l.mem_len, "a non-root's recvbuf");
    check_untouched(k, n, l.mem, l.mem_len, l.mem_len + GUARD, "the guard after recvbuf");
    if (l.sendmem)
        check_input_kept(k, n, r, l.sendmem, 0, total, "sendbuf");
    else if (root_side && k->layout == L_ALIASED && k->coll >= C_REDUCE_SCATTER) {
        check_input_kept(k, n, r, l.mem, 0, own, "sendbuf around recvbuf");
        check_input_kept(k, n, r, l.mem, own + len, total, "sendbuf around recvbuf");
    }
    free(l.sendmem);
    free(l.mem);
}

/* ---- the collectives that move data ---- */

static void run_broadcast(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t bytes = k->count * tide_dtype_size(k->dtype);
    uint8_t *buf = alloc_guarded(bytes);
    if (r == k->root)
        fill_pat(buf, bytes, 500 + (unsigned)k->root, k->salt);
    tide_req *req;
    posted(k, n, tide_ibroadcast(comm, bytes || !(k->salt & 2) ? buf : NULL, k->count, k->dtype,
                                 k->root, &req));
    await(k, n, req);
    check_pat(k, n, buf, bytes, 500 + (unsigned)k->root, "the buffer from root", k->root);
    check_untouched(k, n, buf, bytes, bytes + GUARD, "the guard after buf");
    free(buf);
}

/* Where an all-gather or gather input sits in recvbuf for the aliased
 * (its own place, NCCL-style) and overlap (the next rank's place)
 * layouts; NULL for a separate sendbuf. */
static uint8_t *input_in_recv(const struct ccase *k, uint8_t *recv, size_t blk, int r, int n)
{
    if (k->layout == L_ALIASED || k->layout == L_IN_PLACE)
        return recv + (size_t)r * blk;
    if (k->layout == L_OVERLAP)
        return recv + (size_t)((r + 1) % n) * blk;
    return NULL;
}

static void run_allgather(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t blk = k->count * tide_dtype_size(k->dtype), all = blk * (size_t)n;
    uint8_t *recv = alloc_guarded(all), *own = NULL, *at = input_in_recv(k, recv, blk, r, n);
    if (!at)
        at = own = alloc_guarded(blk);
    fill_pat(at, blk, (unsigned)r, k->salt);
    const void *send = k->layout == L_IN_PLACE ? TIDE_IN_PLACE : at;
    void *out = recv;
    if (all == 0 && (k->salt & 2)) {
        send = send == TIDE_IN_PLACE ? send : NULL;
        out = NULL;
    }
    tide_req *req;
    posted(k, n, tide_iallgather(comm, send, out, k->count, k->dtype, &req));
    await(k, n, req);
    for (int p = 0; p < n; p++)
        check_pat(k, n, recv + (size_t)p * blk, blk, (unsigned)p, "block", p);
    check_untouched(k, n, recv, all, all + GUARD, "the guard after recvbuf");
    if (own)
        check_pat(k, n, own, blk, (unsigned)r, "sendbuf (changed)", r);
    free(own);
    free(recv);
}

static void run_allgatherv(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t es = tide_dtype_size(k->dtype), counts[MAXN], offs[MAXN + 1] = {0};
    for (int p = 0; p < n; p++) {
        counts[p] = vcount(k, p);
        offs[p + 1] = offs[p] + counts[p];
    }
    size_t mine = counts[r] * es, all = offs[n] * es;
    uint8_t *recv = alloc_guarded(all), *own = NULL, *at = NULL;
    size_t next = offs[(r + 1) % n] * es;
    if (k->layout == L_ALIASED || k->layout == L_IN_PLACE)
        at = recv + offs[r] * es; /* its own place, NCCL-style */
    else if (k->layout == L_OVERLAP && next + mine <= all)
        at = recv + next;
    if (!at)
        at = own = alloc_guarded(mine);
    fill_pat(at, mine, (unsigned)r, k->salt);
    tide_req *req;
    posted(k, n, tide_iallgatherv(comm, at, recv, counts, k->dtype, &req));
    await(k, n, req);
    for (int p = 0; p < n; p++)
        check_pat(k, n, recv + offs[p] * es, counts[p] * es, (unsigned)p, "block", p);
    check_untouched(k, n, recv, all, all + GUARD, "the guard after recvbuf");
    free(own);
    free(recv);
}

static void run_gather(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    bool root = r == k->root;
    size_t blk = k->count * tide_dtype_size(k->dtype), all = blk * (size_t)n;
    uint8_t *recv = alloc_guarded(all), *own = NULL;
    uint8_t *at = root && k->layout != L_IN_PLACE ? input_in_recv(k, recv, blk, r, n) : NULL;
    if (!at)
        at = own = alloc_guarded(blk);
    fill_pat(at, blk, (unsigned)r, k->salt);
    void *out = root || (k->salt & 1) ? recv : NULL;
    tide_req *req;
    posted(k, n, tide_igather(comm, at, out, k->count, k->dtype, k->root, &req));
    await(k, n, req);
    for (int p = 0; root && p < n; p++)
        check_pat(k, n, recv + (size_t)p * blk, blk, (unsigned)p, "block", p);
    if (!root)
        check_untouched(k, n, recv, 0, all, "a non-root's recvbuf");
    check_untouched(k, n, recv, all, all + GUARD, "the guard after recvbuf");
    free(own);
    free(recv);
}

/* Root's block p is pattern 1000 + 64*root + p.  Aliased: root's recvbuf
 * is its own block of sendbuf; overlap: the next rank's block, which must
 * still go out as it was at the call. */
static void run_scatter(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    bool root = r == k->root;
    size_t blk = k->count * tide_dtype_size(k->dtype), all = blk * (size_t)n;
    uint8_t *send = alloc_guarded(all), *own = NULL, *out = NULL;
    unsigned base = 1000 + 64 * (unsigned)k->root;
    for (int p = 0; root && p < n; p++)
        fill_pat(send + (size_t)p * blk, blk, base + (unsigned)p, k->salt);
    if (root && k->layout == L_ALIASED)
        out = send + (size_t)r * blk;
    else if (root && k->layout == L_OVERLAP)
        out = send + (size_t)((r + 1) % n) * blk;
    else
        out = own = alloc_guarded(blk);
    tide_req *req;
    posted(k, n, tide_iscatter(comm, root || (k->salt & 1) ? send : NULL, out, k->count,
                               k->dtype, k->root, &req));
    await(k, n, req);
    check_pat(k, n, out, blk, base + (unsigned)r, "the block from root", k->root);
    if (own)
        check_untouched(k, n, own, blk, blk + GUARD, "the guard after recvbuf");
    for (int p = 0; root && own && p < n; p++)
        check_pat(k, n, send + (size_t)p * blk, blk, base + (unsigned)p, "sendbuf block", p);
    free(own);
    free(send);
}

static void run_alltoall(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t blk = k->count * tide_dtype_size(k->dtype), all = blk * (size_t)n;
    uint8_t *send = alloc_guarded(all), *recv = alloc_guarded(all);
    for (int p = 0; p < n; p++)
        fill_pat(send + (size_t)p * blk, blk, 10000 + 64 * (unsigned)r + (unsigned)p, k->salt);
    tide_req *req;
    posted(k, n, tide_ialltoall(comm, send, recv, k->count, k->dtype, &req));
    await(k, n, req);
    for (int p = 0; p < n; p++)
        check_pat(k, n, recv + (size_t)p * blk, blk, 10000 + 64 * (unsigned)p + (unsigned)r,
                  "block", p);
    check_untouched(k, n, recv, all, all + GUARD, "the guard after recvbuf");
    free(send);
    free(recv);
}

static void run_case(tide_comm *comm, const struct ccase *k)
{
    tide_req *req;
    switch (k->coll) {
    case C_BROADCAST: run_broadcast(comm, k); break;
    case C_ALLGATHER: run_allgather(comm, k); break;
    case C_ALLGATHERV: run_allgatherv(comm, k); break;
    case C_GATHER: run_gather(comm, k); break;
    case C_SCATTER: run_scatter(comm, k); break;
    case C_ALLTOALL: run_alltoall(comm, k); break;
    case C_BARRIER:
        posted(k, tide_comm_size(comm), tide_ibarrier(comm, &req));
        await(k, tide_comm_size(comm), req);
        break;
    default: run_reduction(comm, k); break;
    }
}

/* ---- the matrix ---- */

struct plan {
    int set;    /* which algorithm of each collective was forced (3: none) */
    bool full;  /* the whole dtype x op product, else a rotating fifth */
    bool big;   /* the 300000-element cases */
};

/* 0, 1, a prime, and a count the group size does not divide. */
static size_t small_count(int ci, int n)
{
    static const size_t fixed[3] = {0, 1, 13};
    return ci < 3 ? fixed[ci] : 11 * (size_t)n - 1;
}

static bool picked(const struct plan *pl, enum coll c, int n, int ci, int dt, int op)
{
    if (c == C_BARRIER)
        return dt == 0;
    if (pl->full)
        return true;
    return families[c].reduces ? (dt + 3 * op + ci + n) % 5 == 0 : (dt + ci + n) % 3 == 0;
}

static void run_small_cases(tide_comm *comm, const struct plan *pl, unsigned *salt)
{
    int n = tide_comm_size(comm);
    for (int c = 0; c < C_COUNT; c++)
        for (int ci = 0; ci < 4; ci++)
            for (int dt = 0; dt < TIDE_DTYPE_COUNT; dt++)
                for (int op = 0; op < (families[c].reduces ? TIDE_OP_COUNT : 1); op++) {
                    if (!picked(pl, (enum coll)c, n, ci, dt, op))
                        continue;
                    struct ccase k = {(enum coll)c, (tide_dtype)dt, (tide_op)op,
                                      small_count(ci, n), (int)(*salt % (unsigned)n),
                                      (enum layout_kind)((dt + op + ci + c) % L_COUNT), false,
                                      *salt};
                    ++*salt;
                    run_case(comm, &k);
                }
    /* int8/uint8 sums that wrap, on purpose */
    for (int c = 0; c < C_COUNT; c++)
        for (int dt = TIDE_INT8; families[c].reduces && dt <= TIDE_UINT8; dt++)
            for (int ci = 2; ci < 4; ci++) {
                struct ccase k = {(enum coll)c, (tide_dtype)dt, TIDE_SUM, small_count(ci, n),
                                  (int)(*salt % (unsigned)n), (enum layout_kind)(ci % L_COUNT),
                                  true, *salt};
                ++*salt;
                run_case(comm, &k);
            }
}

/* Large enough for the ring's chunks and pipeline: 300000 float32
 * elements in the whole vector; on up to 4 ranks also 2000003, enough to
 * go round the ring's and the chain's windows of chunks many times. */
static void run_big_cases(tide_comm *comm, unsigned *salt)
{
    int n = tide_comm_size(comm);
    static const struct {
        enum coll c;
        tide_dtype dt;
        tide_op op;
    } big[] = {
        {C_ALLREDUCE, TIDE_FLOAT32, TIDE_SUM},   {C_ALLREDUCE, TIDE_FLOAT32, TIDE_AVG},
        {C_ALLREDUCE, TIDE_BFLOAT16, TIDE_MIN},  {C_REDUCE, TIDE_FLOAT32, TIDE_SUM},
        {C_REDUCE_SCATTER, TIDE_FLOAT32, TIDE_SUM}, {C_REDUCE_SCATTERV, TIDE_FLOAT32, TIDE_SUM},
        {C_BROADCAST, TIDE_FLOAT32, TIDE_SUM},   {C_ALLGATHER, TIDE_FLOAT32, TIDE_SUM},
        {C_ALLGATHERV, TIDE_FLOAT32, TIDE_SUM},  {C_GATHER, TIDE_FLOAT32, TIDE_SUM},
        {C_SCATTER, TIDE_FLOAT32, TIDE_SUM},     {C_ALLTOALL, TIDE_FLOAT32, TIDE_SUM},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        enum coll c = big[i].c;
        bool whole = c == C_ALLREDUCE || c == C_REDUCE || c == C_BROADCAST;
        size_t count = whole ? 300000 : 300000 / (size_t)n + (c == C_REDUCE_SCATTER);
        struct ccase k = {c, big[i].dt, big[i].op, count, (int)(*salt % (unsigned)n),
                          (enum layout_kind)(i % L_COUNT), false, *salt};
        ++*salt;
        run_case(comm, &k);
    }
    static const enum coll huge[] = {C_ALLREDUCE, C_REDUCE_SCATTER, C_BROADCAST};
    for (size_t i = 0; n <= 4 && i < sizeof huge / sizeof huge[0]; i++) {
        size_t count = huge[i] == C_REDUCE_SCATTER ? 2000003 / (size_t)n : 2000003;
        struct ccase k = {huge[i], TIDE_FLOAT32, TIDE_SUM, count, n - 1,
                          (enum layout_kind)(i % L_COUNT), false, *salt};
        ++*salt;
        run_case(comm, &k);
    }
}

/* ---- NaN in MIN and MAX ---- */

static bool is_nan_bits(tide_dtype d, uint64_t b)
{
    switch (d) {
    case TIDE_FLOAT16: return (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu);
    case TIDE_BFLOAT16: return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu);
    case TIDE_FLOAT32: return (b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu);
    default: return (b >> 52 & 0x7ff) == 0x7ff && (b & ((UINT64_C(1) << 52) - 1));
    }
}

/* MIN and MAX return NaN when either operand is NaN: rank i % n puts a
 * quiet NaN at every third element i; the others are ordinary. */
static void nan_cases(tide_comm *comm, unsigned *salt)
{
    static const uint64_t qnan[4] = {0x7e00u, 0x7fc0u, 0x7fc00000u, 0x7ff8000000000000u};
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    uint8_t in[13 * 8], out[13 * 8];
    for (int d = TIDE_FLOAT16; d <= TIDE_FLOAT64; d++)
        for (int op = TIDE_MIN; op <= TIDE_MAX; op++) {
            struct ccase k = {C_ALLREDUCE, (tide_dtype)d, (tide_op)op, 13, 0, L_SEPARATE, false,
                              (*salt)++};
            size_t es = tide_dtype_size(k.dtype);
            fill_input(&k, r, in, 0, 13);
            for (size_t i = 0; i < 13; i += 3)
                if ((int)(i % (size_t)n) == r)
                    memcpy(in + i * es, &qnan[d - TIDE_FLOAT16], es);
            tide_req *req;
            posted(&k, n, tide_iallreduce(comm, in, out, 13, k.dtype, k.op, &req));
            await(&k, n, req);
            for (size_t i = 0; i < 13; i++) {
                uint64_t got = load_bits(out, i, es);
                bool want_nan = i % 3 == 0;
                CHECK(want_nan ? is_nan_bits(k.dtype, got) : got == ref_bits(&k, n, i),
                      "%s: element %zu is 0x%llx, want %s", describe(&k, n), i,
                      (unsigned long long)got, want_nan ? "NaN" : "the reference");
            }
        }
}

/* ---- bitwise identity ---- */

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t fnv1a(const uint8_t *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* Random values of mixed magnitude, so the order of additions shows in
 * the low bits. */
static void fill_random(uint8_t *p, size_t count, tide_dtype d, uint64_t *s)
{
    size_t es = tide_dtype_size(d);
    for (size_t i = 0; i < count; i++) {
        uint64_t x = next_rand(s);
        double v = ((double)(x % 2000001) - 1000000.0) / 1e6 * (double)(1 << (x >> 40) % 16);
        uint64_t b = d == TIDE_BFLOAT16 ? f32_to_bf16((float)v) : float_bits(d, v);
        memcpy(p + i * es, &b, es);
    }
}

static void one_identity_case(tide_comm *comm, tide_dtype d, size_t count, tide_op op,
                              unsigned salt)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    struct ccase k = {C_ALLREDUCE, d, op, count, 0, L_SEPARATE, false, salt};
    size_t bytes = count * tide_dtype_size(d);
    uint8_t *in = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes);
    EXPECT(in && a && b, "malloc");
    uint64_t s = 0x9e3779b97f4a7c15u ^ ((uint64_t)r << 32) ^ salt, hashes[MAXN], h;
    fill_random(in, count, d, &s);
    tide_req *req;
    posted(&k, n, tide_iallreduce(comm, in, a, count, d, op, &req));
    await(&k, n, req);
    posted(&k, n, tide_iallreduce(comm, in, b, count, d, op, &req));
    await(&k, n, req);
    CHECK(memcmp(a, b, bytes) == 0, "%s (random inputs): two runs differ", describe(&k, n));
    h = fnv1a(a, bytes);
    EXPECT_OK(tide_allgather(comm, &h, hashes, 1, TIDE_UINT64));
    for (int p = 0; p < n; p++)
        CHECK(hashes[p] == h, "%s (random inputs): rank %d's result hashes to %016llx, mine "
              "to %016llx", describe(&k, n), p, (unsigned long long)hashes[p],
              (unsigned long long)h);
    free(in);
    free(a);
    free(b);
}

static void bitwise_identity(tide_comm *comm)
{
    static const tide_dtype types[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_BFLOAT16};
    static const size_t counts[] = {7, 1000, 70001};
    unsigned salt = 0;
    for (size_t t = 0; t < 3; t++)
        for (size_t c = 0; c < 3; c++) {
            one_identity_case(comm, types[t], counts[c], TIDE_SUM, salt++);
            one_identity_case(comm, types[t], counts[c], TIDE_AVG, salt++);
        }
}

static void matrix_body(tide_comm *comm, void *arg)
{
    const struct plan *pl = arg;
    unsigned salt = 0;
    run_small_cases(comm, pl, &salt);
    if (pl->big)
        run_big_cases(comm, &salt);
    nan_cases(comm, &salt);
    bitwise_identity(comm);
    EXPECT_OK(tide_barrier(comm));
    end_of_body();
}

/* ---- the seed's expectations (4 ranks, TIDE_ALGO_ALLREDUCE=ring) ---- */

static void seed_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    int32_t a[3] = {r, r, r}, s[3], g[8], want_g[8] = {0, 1, 10, 11, 20, 21, 30, 31};
    float f[3] = {(float)r, (float)r, (float)r}, fa[3];
    EXPECT_OK(tide_allreduce(comm, a, s, 3, TIDE_INT32, TIDE_SUM));
    EXPECT_OK(tide_allreduce(comm, f, fa, 3, TIDE_FLOAT32, TIDE_AVG));
    for (int i = 0; i < 3; i++)
        CHECK(s[i] == 6 && fa[i] == 1.5f, "[r, r, r]: sum %d (want 6), avg %g (want 1.5)", s[i],
              (double)fa[i]);
    EXPECT_OK(tide_allreduce(comm, f, fa, 3, TIDE_FLOAT32, TIDE_SUM));
    CHECK(fa[0] == 6.0f && fa[2] == 6.0f, "float sum %g", (double)fa[0]);
    int32_t mine[2] = {10 * r, 10 * r + 1};
    EXPECT_OK(tide_allgather(comm, mine, g, 2, TIDE_INT32));
    CHECK(!memcmp(g, want_g, sizeof g), "all-gather gave %d %d %d %d %d %d %d %d", g[0], g[1],
          g[2], g[3], g[4], g[5], g[6], g[7]);
    int32_t rs_in[4] = {1, 2, 3, 4}, rs_out = -1;
    EXPECT_OK(tide_reduce_scatter(comm, rs_in, &rs_out, 1, TIDE_INT32, TIDE_SUM));
    CHECK(rs_out == 4 * (r + 1), "reduce-scatter gave %d, want %d", rs_out, 4 * (r + 1));
    tide_req *req = NULL;
    int rc = tide_ibroadcast(comm, a, 3, TIDE_INT32, -1, &req);
    CHECK(rc == TIDE_EINVAL, "broadcast from root -1 returned %s", tide_err_name(rc));
    rc = tide_broadcast(comm, a, 3, TIDE_INT32, 4);
    CHECK(rc == TIDE_EINVAL, "broadcast from root 4 returned %s", tide_err_name(rc));
    /* the ring over 7 elements: each rank's share in its own byte, so an
     * element counted twice or missed shows */
    int64_t in7[7], out7[7];
    for (int i = 0; i < 7; i++)
        in7[i] = (int64_t)(i + 1) << (8 * r);
    EXPECT_OK(tide_iallreduce(comm, in7, out7, 7, TIDE_INT64, TIDE_SUM, &req));
    EXPECT_OK(tide_wait(req, -1));
    CHECK(!strcmp(tide_req_algorithm(req), "ring"), "7-element allreduce ran %s",
          tide_req_algorithm(req));
    tide_req_free(req);
    for (int i = 0; i < 7; i++)
        CHECK(out7[i] == (int64_t)(i + 1) * 0x01010101, "ring element %d: 0x%llx, want 0x%llx",
              i, (long long)out7[i], (long long)(i + 1) * 0x01010101);
    EXPECT_OK(tide_barrier(comm));
    end_of_body();
}

/* ---- thousands in flight ---- */

struct slot {
    int32_t in[3], out[16];
    tide_req *req;
};

static void check_slot(const struct slot *s, int i, int n, int kind)
{
    for (int j = 0; j < 3 && kind == 0; j++) {
        int32_t want = n * (i * 3 + j) + n * (n - 1) / 2;
        CHECK(s->out[j] == want, "allreduce %d element %d: %d, want %d", i, j, s->out[j], want);
    }
    for (int j = 0; j < 3 && kind == 1; j++) {
        int32_t want = j == 0 ? i : j == 1 ? -i : (n - 1) * i;
        CHECK(s->out[j] == want, "allreduce(max) %d element %d: %d, want %d", i, j, s->out[j],
              want);
    }
    for (int p = 0; p < n && kind == 2; p++)
        CHECK(s->out[2 * p] == i * 8 + p && s->out[2 * p + 1] == -p,
              "allgather %d block %d: %d %d", i, p, s->out[2 * p], s->out[2 * p + 1]);
    if (kind == 3)
        CHECK(s->out[0] == i && s->out[1] == i % n, "broadcast %d: %d %d", i, s->out[0],
              s->out[1]);
}

static void post_slot(tide_comm *comm, struct slot *s, int i, int kind)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    if (kind == 0) {
        for (int j = 0; j < 3; j++)
            s->in[j] = i * 3 + j + r;
        EXPECT_OK(tide_iallreduce(comm, s->in, s->out, 3, TIDE_INT32, TIDE_SUM, &s->req));
    } else if (kind == 1) {
        s->in[0] = i, s->in[1] = -i, s->in[2] = r * i;
        EXPECT_OK(tide_iallreduce(comm, s->in, s->out, 3, TIDE_INT32, TIDE_MAX, &s->req));
    } else if (kind == 2) {
        s->in[0] = i * 8 + r, s->in[1] = -r;
        EXPECT_OK(tide_iallgather(comm, s->in, s->out, 2, TIDE_INT32, &s->req));
    } else {
        s->out[0] = r == i % n ? i : -7;
        s->out[1] = r == i % n ? r : -7;
        EXPECT_OK(tide_ibroadcast(comm, s->out, 2, TIDE_INT32, i % n, &s->req));
    }
}

/* Large collectives of several kinds in flight together (their chunks
 * interleave on the same links), waited in reverse order. */
static void big_in_flight(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    enum { K = 5, COUNT = 300000 };
    struct ccase k[K] = {
        {C_ALLREDUCE, TIDE_FLOAT32, TIDE_SUM, COUNT, 0, L_SEPARATE, false, 1},
        {C_ALLREDUCE, TIDE_INT32, TIDE_MAX, COUNT, 0, L_SEPARATE, false, 2},
        {C_BROADCAST, TIDE_FLOAT32, TIDE_SUM, COUNT, n - 1, L_SEPARATE, false, 3},
        {C_ALLGATHER, TIDE_FLOAT32, TIDE_SUM, COUNT / 4, 0, L_SEPARATE, false, 4},
        {C_REDUCE_SCATTER, TIDE_INT8, TIDE_SUM, COUNT / 2, 0, L_SEPARATE, false, 5},
    };
    uint8_t *in[K], *out[K];
    tide_req *req[K];
    for (int i = 0; i < K; i++) {
        size_t blocks = k[i].coll == C_ALLGATHER || k[i].coll == C_REDUCE_SCATTER ? (size_t)n : 1;
        size_t bytes = k[i].count * blocks * tide_dtype_size(k[i].dtype);
        in[i] = alloc_guarded(bytes);
        out[i] = alloc_guarded(bytes);
        if (k[i].coll == C_BROADCAST && r == k[i].root)
            fill_pat(out[i], bytes, 500 + (unsigned)k[i].root, k[i].salt);
        else if (k[i].coll == C_ALLGATHER)
            fill_pat(in[i], k[i].count * 4, (unsigned)r, k[i].salt);
        else
            fill_input(&k[i], r, in[i], 0, k[i].count * blocks);
    }
    EXPECT_OK(tide_iallreduce(comm, in[0], out[0], COUNT, TIDE_FLOAT32, TIDE_SUM, &req[0]));
    EXPECT_OK(tide_iallreduce(comm, in[1], out[1], COUNT, TIDE_INT32, TIDE_MAX, &req[1]));
    EXPECT_OK(tide_ibroadcast(comm, out[2], COUNT, TIDE_FLOAT32, n - 1, &req[2]));
    EXPECT_OK(tide_iallgather(comm, in[3], out[3], COUNT / 4, TIDE_FLOAT32, &req[3]));
    EXPECT_OK(tide_ireduce_scatter(comm, in[4], out[4], COUNT / 2, TIDE_INT8, TIDE_SUM, &req[4]));
    for (int i = K - 1; i >= 0; i--) {
        await(&k[i], n, req[i]);
        if (k[i].coll == C_BROADCAST)
            check_pat(&k[i], n, out[i], COUNT * 4, 500 + (unsigned)k[i].root, "buffer", 0);
        for (int p = 0; k[i].coll == C_ALLGATHER && p < n; p++)
            check_pat(&k[i], n, out[i] + (size_t)p * k[i].count * 4, k[i].count * 4,
                      (unsigned)p, "block", p);
        if (families[k[i].coll].reduces)
            check_reduced(&k[i], n, out[i], k[i].coll == C_ALLREDUCE ? 0 : (size_t)r * k[i].count,
                          k[i].count);
        free(in[i]);
        free(out[i]);
    }
}

/* 2000 allreduces waited in reverse order, then 2000 of a mix waited in
 * an order of each rank's own; then a few large ones together. */
static void in_flight_body(tide_comm *comm, void *arg)
{
    enum { N = 2000 };
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), order[N];
    struct slot *s = calloc(N, sizeof *s);
    EXPECT(s, "calloc");
    for (int i = 0; i < N; i++)
        post_slot(comm, &s[i], i, 0);
    for (int i = N - 1; i >= 0; i--) {
        EXPECT_OK(tide_wait(s[i].req, -1));
        tide_req_free(s[i].req);
        check_slot(&s[i], i, n, 0);
    }
    uint64_t rng = 0x1234567u + (uint64_t)r * 7919u;
    for (int i = 0; i < N; i++) {
        order[i] = i;
        post_slot(comm, &s[i], i, 1 + i % 3);
    }
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(next_rand(&rng) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (int i = 0; i < N; i++) {
        int x = order[i];
        EXPECT_OK(tide_wait(s[x].req, -1));
        tide_req_free(s[x].req);
        check_slot(&s[x], x, n, 1 + x % 3);
    }
    free(s);
    big_in_flight(comm);
    EXPECT_OK(tide_barrier(comm));
    end_of_body();
}

/* ---- subgroups ---- */

static int32_t sum_allreduce(tide_comm *comm, int32_t v)
{
    int32_t out = 0;
    EXPECT_OK(tide_allreduce(comm, &v, &out, 1, TIDE_INT32, TIDE_SUM));
    return out;
}

/* Split by parity, key -r: the highest rank of each parity comes first. */
static tide_comm *split_by_parity(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), size = 0, rank = 0;
    tide_comm *sub = NULL;
    EXPECT_OK(tide_comm_split(comm, r % 2, -r, &sub));
    EXPECT(sub, "tide_comm_split gave NULL for color %d", r % 2);
    for (int p = r % 2; p < n; p += 2) {
        size++;
        rank += p > r;
    }
    EXPECT(tide_comm_size(sub) == size && tide_comm_rank(sub) == rank,
           "split by parity: rank %d of %d, want %d of %d", tide_comm_rank(sub),
           tide_comm_size(sub), rank, size);
    return sub;
}

/* Post on the subgroup and on the parent, in an order that differs by
 * rank, then wait both. */
static void sub_and_parent_in_flight(tide_comm *comm, tide_comm *sub)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int32_t in = r + 1, out_sub = 0, out_all = 0, want_sub = 0, b[2] = {0, 0};
    tide_req *rs, *ra, *rb;
    for (int p = r % 2; p < n; p += 2)
        want_sub += p + 1;
    if (tide_comm_rank(sub) == 0)
        b[0] = 77, b[1] = r;
    int top = r % 2 + ((n - 1 - r % 2) / 2) * 2; /* the sub's rank 0: its highest */
    for (int round = 0; round < 2; round++) {
        if ((r + round) % 2) {
            EXPECT_OK(tide_iallreduce(sub, &in, &out_sub, 1, TIDE_INT32, TIDE_SUM, &rs));
            EXPECT_OK(tide_ibroadcast(sub, b, 2, TIDE_INT32, 0, &rb));
            EXPECT_OK(tide_iallreduce(comm, &in, &out_all, 1, TIDE_INT32, TIDE_SUM, &ra));
        } else {
            EXPECT_OK(tide_iallreduce(comm, &in, &out_all, 1, TIDE_INT32, TIDE_SUM, &ra));
            EXPECT_OK(tide_iallreduce(sub, &in, &out_sub, 1, TIDE_INT32, TIDE_SUM, &rs));
            EXPECT_OK(tide_ibroadcast(sub, b, 2, TIDE_INT32, 0, &rb));
        }
        EXPECT_OK(tide_wait(ra, -1));
        EXPECT_OK(tide_wait(rb, -1));
        EXPECT_OK(tide_wait(rs, -1));
        tide_req_free(ra), tide_req_free(rb), tide_req_free(rs);
        CHECK(out_sub == want_sub && out_all == n * (n + 1) / 2,
              "in flight together: sub sum %d (want %d), parent sum %d (want %d)", out_sub,
              want_sub, out_all, n * (n + 1) / 2);
        CHECK(b[0] == 77 && b[1] == top, "sub broadcast from its rank 0: %d %d, want 77 %d", b[0],
              b[1], top);
    }
}

/* Unsorted with duplicates; a non-member and a rank outside get EINVAL. */
static void create_group_cases(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int ranks[] = {n - 1, 0, n - 1, 1 % n, 0}, bad1[] = {0, n}, bad2[] = {-1, 0};
    bool member = r == 0 || r == 1 || r == n - 1;
    int size = 1 + (n > 1) + (n > 2), rank = r == 0 ? 0 : r == 1 ? 1 : size - 1;
    tide_comm *g = NULL;
    int rc = tide_comm_create_group(comm, ranks, 5, &g);
    if (!member) {
        CHECK(rc == TIDE_EINVAL && !g, "create_group as a non-member returned %s",
              tide_err_name(rc));
    } else {
        EXPECT(rc == 0 && g, "create_group returned %s", tide_err_name(rc));
        EXPECT(tide_comm_size(g) == size && tide_comm_rank(g) == rank,
               "create_group: rank %d of %d, want %d of %d", tide_comm_rank(g),
               tide_comm_size(g), rank, size);
        int32_t want = 1 + (n > 1 ? 2 : 0) + (n > 2 ? n : 0);
        CHECK(sum_allreduce(g, r + 1) == want, "sum over the created group");
        EXPECT_OK(tide_comm_free(g));
    }
    g = NULL;
    rc = tide_comm_create_group(comm, bad1, 2, &g);
    CHECK(rc == TIDE_EINVAL && !g, "create_group with rank %d returned %s", n, tide_err_name(rc));
    rc = tide_comm_create_group(comm, bad2, 2, &g);
    CHECK(rc == TIDE_EINVAL && !g, "create_group with rank -1 returned %s", tide_err_name(rc));
}

static void subgroup_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    /* the split follows a collective still pending on comm */
    int32_t pin = r + 1, pout = 0;
    tide_req *pending;
    EXPECT_OK(tide_iallreduce(comm, &pin, &pout, 1, TIDE_INT32, TIDE_SUM, &pending));
    tide_comm *sub = split_by_parity(comm);
    EXPECT_OK(tide_wait(pending, -1));
    tide_req_free(pending);
    CHECK(pout == n * (n + 1) / 2, "allreduce pending across the split: %d", pout);
    struct plan pl = {3, false, false};
    unsigned salt = 7;
    run_small_cases(sub, &pl, &salt); /* roots and blocks in sub's ranks */
    sub_and_parent_in_flight(comm, sub);
    /* TIDE_UNDEFINED joins none */
    tide_comm *rest = (tide_comm *)&salt;
    EXPECT_OK(tide_comm_split(comm, r == n - 1 ? TIDE_UNDEFINED : 5, r, &rest));
    if (r == n - 1)
        CHECK(rest == NULL, "TIDE_UNDEFINED gave a communicator");
    else {
        EXPECT(rest && tide_comm_size(rest) == n - 1 && tide_comm_rank(rest) == r, "rest");
        CHECK(sum_allreduce(rest, 1) == n - 1, "sum over the rest");
        EXPECT_OK(tide_comm_free(rest));
    }
    create_group_cases(comm);
    /* freed with a request pending: it still completes */
    size_t count = 100000;
    int32_t *in = malloc(count * 4), *out = malloc(count * 4);
    EXPECT(in && out, "malloc");
    for (size_t i = 0; i < count; i++)
        in[i] = (int32_t)i + r;
    tide_req *req;
    int m = tide_comm_size(sub);
    EXPECT_OK(tide_iallreduce(sub, in, out, count, TIDE_INT32, TIDE_MAX, &req));
    EXPECT_OK(tide_comm_free(sub));
    EXPECT_OK(tide_wait(req, -1));
    tide_req_free(req);
    int top = r % 2 + ((n - 1 - r % 2) / 2) * 2;
    for (size_t i = 0; i < count; i++)
        if (out[i] != (int32_t)i + top) {
            CHECK(false, "allreduce pending at tide_comm_free (sub of %d): element %zu is %d", m,
                  i, out[i]);
            break;
        }
    free(in);
    free(out);
    EXPECT_OK(tide_barrier(comm));
    end_of_body();
}

/* ---- bad arguments: EINVAL at the call, nothing sent ---- */

#define BAD(call)                                                                       \
    do {                                                                                \
        int rc_ = (call);                                                               \
        CHECK(rc_ == TIDE_EINVAL, "%s returned %s, want TIDE_EINVAL", #call,            \
              tide_err_name(rc_));                                                      \
    } while (0)

/* NULL buffers with a count, and an unknown dtype, for every collective. */
static void bad_buffers_and_dtypes(tide_comm *comm, const size_t *counts)
{
    int r = tide_comm_rank(comm);
    int32_t a[64] = {0}, b[64] = {0};
    const tide_dtype dt = (tide_dtype)99, i32 = TIDE_INT32;
    const tide_op sum = TIDE_SUM;
    tide_req *q;
    BAD(tide_iallreduce(comm, NULL, b, 4, i32, sum, &q));
    BAD(tide_iallreduce(comm, a, NULL, 4, i32, sum, &q));
    BAD(tide_allreduce(comm, NULL, b, 4, i32, sum));
    BAD(tide_ibroadcast(comm, NULL, 4, i32, 0, &q));
    BAD(tide_ireduce(comm, NULL, b, 4, i32, sum, 0, &q));
    if (r == 0)
        BAD(tide_ireduce(comm, a, NULL, 4, i32, sum, 0, &q));
    BAD(tide_iallgather(comm, NULL, b, 4, i32, &q));
    BAD(tide_iallgather(comm, a, NULL, 4, i32, &q));
    BAD(tide_iallgatherv(comm, NULL, b, counts, i32, &q));
    BAD(tide_ireduce_scatter(comm, NULL, b, 4, i32, sum, &q));
    BAD(tide_ireduce_scatterv(comm, a, NULL, counts, i32, sum, &q));
    BAD(tide_igather(comm, NULL, b, 4, i32, 0, &q));
    BAD(tide_iscatter(comm, a, NULL, 4, i32, 0, &q));
    BAD(tide_ialltoall(comm, NULL, b, 4, i32, &q));
    /* unknown dtype */
    BAD(tide_iallreduce(comm, a, b, 4, dt, sum, &q));
    BAD(tide_ibroadcast(comm, a, 4, dt, 0, &q));
    BAD(tide_ireduce(comm, a, b, 4, dt, sum, 0, &q));
    BAD(tide_iallgather(comm, a, b, 4, dt, &q));
    BAD(tide_iallgatherv(comm, a, b, counts, dt, &q));
    BAD(tide_ireduce_scatter(comm, a, b, 1, dt, sum, &q));
    BAD(tide_ireduce_scatterv(comm, a, b, counts, dt, sum, &q));
    BAD(tide_igather(comm, a, b, 4, dt, 0, &q));
    BAD(tide_iscatter(comm, a, b, 4, dt, 0, &q));
    BAD(tide_ialltoall(comm, a, b, 4, dt, &q));
    BAD(tide_iallreduce(comm, a, b, 4, (tide_dtype)-1, sum, &q));
}

static void bad_arguments_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int32_t a[64] = {0}, b[64] = {0};
    size_t counts[MAXN];
    const tide_dtype i32 = TIDE_INT32;
    const tide_op op = (tide_op)99, sum = TIDE_SUM;
    tide_req *q;
    for (int p = 0; p < n; p++)
        counts[p] = 1;
    bad_buffers_and_dtypes(comm, counts);
    /* unknown op */
    BAD(tide_iallreduce(comm, a, b, 4, i32, op, &q));
    BAD(tide_iallreduce(comm, a, b, 4, i32, (tide_op)-1, &q));
    BAD(tide_ireduce(comm, a, b, 4, i32, op, 0, &q));
    BAD(tide_ireduce_scatter(comm, a, b, 1, i32, op, &q));
    BAD(tide_ireduce_scatterv(comm, a, b, counts, i32, op, &q));
    /* root outside the group */
    BAD(tide_ibroadcast(comm, a, 4, i32, -1, &q));
    BAD(tide_ibroadcast(comm, a, 4, i32, n, &q));
    BAD(tide_ireduce(comm, a, b, 4, i32, sum, n, &q));
    BAD(tide_igather(comm, a, b, 4, i32, -1, &q));
    BAD(tide_iscatter(comm, a, b, 4, i32, n, &q));
    /* NULL req, NULL comm, NULL counts */
    BAD(tide_iallreduce(comm, a, b, 4, i32, sum, NULL));
    BAD(tide_ibroadcast(comm, a, 4, i32, 0, NULL));
    BAD(tide_iallgather(comm, a, b, 1, i32, NULL));
    BAD(tide_ibarrier(comm, NULL));
    BAD(tide_iallreduce(NULL, a, b, 4, i32, sum, &q));
    BAD(tide_iallgatherv(comm, a, b, NULL, i32, &q));
    BAD(tide_ireduce_scatterv(comm, a, b, NULL, i32, sum, &q));
    /* all-to-all buffers that overlap */
    BAD(tide_ialltoall(comm, a, a, 1, i32, &q));
    BAD(tide_ialltoall(comm, a, a + 1, 2, i32, &q)); /* 2n elements each: overlap at any n */
    BAD(tide_ialltoall(comm, a + 1, a, 2, i32, &q));
    /* TIDE_IN_PLACE is for the root of a reduce only */
    if (r != 0)
        BAD(tide_ireduce(comm, TIDE_IN_PLACE, b, 4, i32, sum, 0, &q));
    /* nothing went out: the next collectives match up */
    EXPECT_OK(tide_barrier(comm));
    CHECK(sum_allreduce(comm, r + 1) == n * (n + 1) / 2, "sum after the rejected calls");
    EXPECT_OK(tide_allreduce(comm, NULL, NULL, 0, i32, sum)); /* NULL is fine at count 0 */
    EXPECT_OK(tide_allgather(comm, NULL, NULL, 0, i32));
    EXPECT_OK(tide_barrier(comm));
    end_of_body();
}

/* TIDE_ALGO_ALLREDUCE names no algorithm (set by the parent). */
static void unknown_algorithm_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int32_t a[4] = {r, r, r, r}, b[4];
    tide_req *q;
    BAD(tide_iallreduce(comm, a, b, 4, TIDE_INT32, TIDE_SUM, &q));
    BAD(tide_allreduce(comm, a, b, 4, TIDE_INT32, TIDE_SUM));
    EXPECT_OK(tide_barrier(comm));
    a[0] = r == n - 1 ? 1234 : 0;
    EXPECT_OK(tide_broadcast(comm, a, 1, TIDE_INT32, n - 1));
    CHECK(a[0] == 1234, "broadcast after the rejected allreduce: %d", a[0]);
    end_of_body();
}

/* ---- the parent: set the algorithms, run the ranks ---- */

static const char *const set_names[4] = {"first algorithms", "second algorithms",
                                         "third algorithms", "no override"};

/* Force the set-th algorithm of every collective that has one (3, or a
 * collective with fewer: no override; -1: leave the environment alone). */
static void apply_set(int set)
{
    for (int c = 0; set >= 0 && c < C_COUNT; c++) {
        const struct family *f = &families[c];
        if (!f->env)
            continue;
        if (set < 3 && f->algos[set])
            setenv(f->env, f->algos[set], 1);
        else
            unsetenv(f->env);
    }
}

static int run(const char *what, int n, tide_progress_mode mode, int set, harness_body body,
               void *arg)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.progress = mode;
    o.run_limit_s = 240;
    o.timeout_s = 60;
    if (n > 4)
        o.spin_us = 0; /* more ranks than cores: spinning only steals the peers' turn */
    apply_set(set);
    int failed = harness_run(n, &o, body, arg);
    apply_set(set < 0 ? -1 : 3);
    if (failed)
        print_error("FAILED: %s on %d ranks, %s progress, %s: %d ranks failed\n", what, n,
                    mode == TIDE_PROGRESS_INLINE ? "inline" : "thread",
                    set < 0 ? "environment as set" : set_names[set], failed);
    return failed ? 1 : 0;
}

static int run_matrix(int n, tide_progress_mode mode, int set)
{
    struct plan pl = {set, n <= 4, true};
    return run("the matrix", n, mode, set, matrix_body, &pl);
}

static void matrix_on(int n)
{
    int failed = 0;
    for (int set = 0; set < 4; set++)
        failed += run_matrix(n, TIDE_PROGRESS_THREAD, set);
    if (failed)
        fail_msg("%d of 4 algorithm sets failed on %d ranks", failed, n);
}

static void matrix_1_rank(void **state) { matrix_on(1); }
static void matrix_2_ranks(void **state) { matrix_on(2); }
static void matrix_3_ranks(void **state) { matrix_on(3); }
static void matrix_4_ranks(void **state) { matrix_on(4); }
static void matrix_5_ranks(void **state) { matrix_on(5); }
static void matrix_7_ranks(void **state) { matrix_on(7); }
static void matrix_8_ranks(void **state) { matrix_on(8); }

static void matrix_inline(void **state)
{
    int failed = run_matrix(2, TIDE_PROGRESS_INLINE, 3) + run_matrix(4, TIDE_PROGRESS_INLINE, 0);
    for (int set = 0; set < 4; set++)
        failed += run_matrix(3, TIDE_PROGRESS_INLINE, set);
    if (failed)
        fail_msg("%d inline runs failed", failed);
}

static void seed_expectations(void **state)
{
    setenv("TIDE_ALGO_ALLREDUCE", "ring", 1);
    int failed = run("the seed's expectations", 4, TIDE_PROGRESS_THREAD, -1, seed_body, NULL);
    unsetenv("TIDE_ALGO_ALLREDUCE");
    if (failed)
        fail_msg("the seed's expectations failed");
}

static void many_in_flight(void **state)
{
    int failed = 0;
    for (int n = 3; n <= 4; n++) {
        failed += run("2000 in flight", n, TIDE_PROGRESS_THREAD, 3, in_flight_body, NULL);
        failed += run("2000 in flight", n, TIDE_PROGRESS_INLINE, 3, in_flight_body, NULL);
    }
    if (failed)
        fail_msg("%d runs failed", failed);
}

static void subgroups(void **state)
{
    int failed = 0;
    for (int n = 2; n <= 5; n++)
        failed += run("subgroups", n, TIDE_PROGRESS_THREAD, 3, subgroup_body, NULL);
    failed += run("subgroups", 5, TIDE_PROGRESS_THREAD, 0, subgroup_body, NULL);
    failed += run("subgroups", 4, TIDE_PROGRESS_INLINE, 3, subgroup_body, NULL);
    if (failed)
        fail_msg("%d runs failed", failed);
}

static void bad_arguments(void **state)
{
    int failed = 0;
    for (int n = 1; n <= 3; n++)
        failed += run("bad arguments", n, TIDE_PROGRESS_THREAD, 3, bad_arguments_body, NULL);
    failed += run("bad arguments", 2, TIDE_PROGRESS_INLINE, 3, bad_arguments_body, NULL);
    for (int n = 2; n <= 3; n++) {
        setenv("TIDE_ALGO_ALLREDUCE", "no_such_algorithm", 1);
        failed += run("an unknown algorithm", n, TIDE_PROGRESS_THREAD, -1,
                      unknown_algorithm_body, NULL);
    }
    unsetenv("TIDE_ALGO_ALLREDUCE");
    if (failed)
        fail_msg("%d runs failed", failed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seed_expectations), cmocka_unit_test(bad_arguments),
        cmocka_unit_test(matrix_1_rank),     cmocka_unit_test(matrix_2_ranks),
        cmocka_unit_test(matrix_3_ranks),    cmocka_unit_test(matrix_4_ranks),
        cmocka_unit_test(matrix_5_ranks),    cmocka_unit_test(matrix_7_ranks),
        cmocka_unit_test(matrix_8_ranks),    cmocka_unit_test(matrix_inline),
        cmocka_unit_test(many_in_flight),    cmocka_unit_test(subgroups),
    };
    return cmocka_run_group_tests_name("collectives over tcp", tests, NULL, NULL);
}
