/* coll_check.c - see coll_check.h.  Owns the references and checks the
 * collectives tests share, and the running of one case of each
 * collective: buffers laid out, inputs filled, the call posted and
 * awaited, every output, guard byte and kept input checked.
 *
 * Inputs are small integers, so every sum, product, minimum and maximum
 * is exact in every dtype and the reference is an exact integer; AVG is
 * the exact sum divided by the group size in the dtype (integers
 * truncate).  Collectives that only move data carry byte patterns. */
#include "tests/coll_check.h"
#include "collectives/reduction.h"

#include <setjmp.h>
#include <stdarg.h>
#include <string.h>

#include <cmocka.h>

/* ---- soft checks ---- */

int coll_failed_checks;

void coll_end_of_body(void)
{
    EXPECT(coll_failed_checks == 0, "%d checks failed (the first 40 are printed above)",
           coll_failed_checks);
}

/* ---- collectives, their algorithms and the cases ---- */

/* tide.h names no algorithms for reduce_scatterv; it is the v form of
 * reduce_scatter and selects among the same two. */
const struct family coll_families[C_COUNT] = {
    [C_ALLREDUCE] = {"allreduce", "TIDE_ALGO_ALLREDUCE",
                     {"ring", "recursive_doubling", "rabenseifner", "shm", "hier", "board",
                      "board_rsag"}, true},
    [C_BROADCAST] = {"broadcast", "TIDE_ALGO_BROADCAST",
                     {"binomial", "chain", NULL, "shm", NULL, "board", "stream"}, false},
    [C_REDUCE] = {"reduce", "TIDE_ALGO_REDUCE",
                  {"binomial", NULL, NULL, NULL, NULL, "board", "stream"}, true},
    [C_ALLGATHER] = {"allgather", "TIDE_ALGO_ALLGATHER",
                     {"ring", "bruck", "recursive_doubling", "shm", NULL, "board"}, false},
    [C_ALLGATHERV] = {"allgatherv", "TIDE_ALGO_ALLGATHERV", {"ring"}, false},
    [C_REDUCE_SCATTER] = {"reduce_scatter", "TIDE_ALGO_REDUCE_SCATTER",
                          {"ring", "recursive_halving", NULL, "shm", NULL, "board"}, true},
    [C_REDUCE_SCATTERV] = {"reduce_scatterv", "TIDE_ALGO_REDUCE_SCATTERV",
                           {"ring", "recursive_halving"}, true},
    [C_GATHER] = {"gather", "TIDE_ALGO_GATHER",
                  {"binomial", NULL, NULL, NULL, NULL, "board", "stream"}, false},
    [C_SCATTER] = {"scatter", "TIDE_ALGO_SCATTER",
                   {"binomial", NULL, NULL, NULL, NULL, "board", "stream"}, false},
    [C_ALLTOALL] = {"alltoall", "TIDE_ALGO_ALLTOALL",
                    {"pairwise", NULL, NULL, NULL, NULL, "board"}, false},
    [C_BARRIER] = {"barrier", "TIDE_ALGO_BARRIER",
                   {"dissemination", NULL, NULL, NULL, NULL, "board"}, false},
};

static const char *const layout_names[L_COUNT] = {"separate", "in_place", "aliased", "overlap"};

static char used_algo[64]; /* what the last request reported */

const char *coll_describe(const struct ccase *k, int n)
{
    static char s[320];
    const char *env = coll_families[k->coll].env ? getenv(coll_families[k->coll].env) : NULL;
    snprintf(s, sizeof s,
             "%s [TIDE_ALGO=%s, ran %s] n=%d count=%zu dtype=%s op=%s root=%d buffers=%s%s "
             "salt=%u",
             coll_families[k->coll].name, env ? env : "(none)", used_algo, n, k->count,
             tide_dtype_name(k->dtype), coll_families[k->coll].reduces ? tide_op_name(k->op) : "-",
             k->root, layout_names[k->layout], k->wrap ? " wrap" : "", k->salt);
    return s;
}

static bool is_pow2(int n)
{
    return (n & (n - 1)) == 0;
}

bool coll_boards_run(int n)
{
    /* Test hosts of k ranks (harness.c): the world shares memory only
     * while it fits on the first. */
    const char *hosts = getenv("TIDE_TEST_HOST_SIZE");
    const char *tp = getenv("TIDE_TRANSPORT");
    int per_host = hosts ? atoi(hosts) : 0;
    bool shared = (per_host <= 0 || n <= per_host) && !(tp && !strcmp(tp, "tcp"));
    return shared && n >= 2;
}

/* Whether k fits a board (engine/board.h: 64 KiB slots; an
 * all-gather's slot holds one block) among ranks that share memory.  A
 * forced board that does not fit gives way. */
static bool board_fits(const struct ccase *k, int n)
{
    size_t use = k->count * tide_dtype_size(k->dtype);
    if (k->coll == C_REDUCE_SCATTER || k->coll == C_ALLTOALL || k->coll == C_SCATTER)
        use *= (size_t)n; /* count is a block's, and the slot holds them all */
    return coll_boards_run(n) && use <= (64u << 10);
}

/* Whether k may take the stream (collectives/board_stream.c), on 2
 * ranks that share memory: a broadcast or a reduce of up to 256 bytes,
 * a scatter or a gather of blocks of up to 256 (one of which streams). */
static bool stream_fits(const struct ccase *k, int n)
{
    size_t bytes = k->count * tide_dtype_size(k->dtype);
    bool rooted = k->coll == C_REDUCE || k->coll == C_BROADCAST || k->coll == C_SCATTER ||
                  k->coll == C_GATHER;
    bool fits = rooted && bytes <= 256;
    return fits && n == 2 && coll_boards_run(n);
}

/* The forced name, or one of the collective's names when there is no
 * override (or recursive doubling of an all-gather over a group that is
 * not a power of two gave way).  A group of one is exempt: it runs no
 * algorithm at all, and tide_req_algorithm names the one used. */
static void check_algorithm(const struct ccase *k, int n)
{
    const struct family *f = &coll_families[k->coll];
    CHECK(used_algo[0], "%s: tide_req_algorithm is empty", coll_describe(k, n));
    if (n == 1 || !f->env)
        return;
    const char *want = getenv(f->env);
    bool gave_way = want && k->coll == C_ALLGATHER && !strcmp(want, "recursive_doubling") &&
                    !is_pow2(n);
    gave_way |= want && !strncmp(want, "board", 5) && !board_fits(k, n);
    gave_way |= want && !strcmp(want, "stream") && !stream_fits(k, n);
    if (want && !gave_way) {
        CHECK(!strcmp(used_algo, want), "%s: tide_req_algorithm is not %s", coll_describe(k, n),
              want);
        return;
    }
    bool known = false;
    for (int i = 0; i < 7; i++)
        known |= f->algos[i] && !strcmp(used_algo, f->algos[i]);
    CHECK(known && !(gave_way && !strcmp(used_algo, want)),
          "%s: tide_req_algorithm is not one of the collective's algorithms%s", coll_describe(k, n),
          gave_way ? " other than recursive_doubling" : "");
}

void coll_posted(const struct ccase *k, int n, int rc)
{
    used_algo[0] = 0;
    EXPECT(rc == 0, "%s: the call returned %s", coll_describe(k, n), tide_err_name(rc));
}

void coll_await(const struct ccase *k, int n, tide_req *req)
{
    int rc = tide_wait(req, -1);
    snprintf(used_algo, sizeof used_algo, "%s", tide_req_algorithm(req));
    EXPECT(rc == 0, "%s: tide_wait returned %s: %s", coll_describe(k, n), tide_err_name(rc),
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

uint16_t coll_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

uint64_t coll_float_bits(tide_dtype d, double v)
{
    float f = (float)v;
    uint32_t b32;
    uint64_t b64;
    switch (d) {
    case TIDE_FLOAT16: return f32_to_f16(f);
    case TIDE_BFLOAT16: return coll_f32_to_bf16(f);
    case TIDE_FLOAT32: memcpy(&b32, &f, sizeof b32); return b32;
    default: memcpy(&b64, &v, sizeof b64); return b64;
    }
}

/* The bits of the exact integer v in dtype d: two's complement wrap for
 * integers, exact for floats (negative zero on request). */
static uint64_t value_bits(tide_dtype d, int64_t v, bool neg_zero)
{
    if (is_float(d))
        return coll_float_bits(d, v == 0 && neg_zero ? -0.0 : (double)v);
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
    case TIDE_FLOAT64: return coll_float_bits(d, (double)sum / n);
    default: { /* combined in float, rounded once to the dtype */
        float q = (float)sum / (float)n;
        return d == TIDE_FLOAT32 ? coll_float_bits(d, q) : d == TIDE_FLOAT16 ? f32_to_f16(q)
                                                                         : coll_f32_to_bf16(q);
    }
    }
}

/* A hash of three numbers, for inputs and byte patterns. */
static uint32_t mix(unsigned a, size_t b, unsigned c)
{
    uint32_t h = a * 0x9e3779b1u ^ (uint32_t)b * 0x85ebca77u ^ c * 0xc2b2ae3du;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    return h ^ h >> 13;
}

/* Rank r's input at element i of a reducing case: in [-3, 3] ([0, 6]
 * unsigned); for PROD in {-2..2} on ranks below 8 and +-1 from 8 on, so
 * that in a group of any size (the simulator's reach 64) any partial
 * product is a power of two at most 2^8, exact in bfloat16 and finite in
 * float16; wrap cases in [90, 127].  Hashed, not linear in r and i:
 * r * 5 + i * 3 modulo 7 gave the 7 ranks of a 7-rank group a
 * permutation of 0..6 at every element, so every SUM, AVG, MIN and MAX
 * came out the same at every element, and the inputs repeated every 7
 * elements: results at the wrong element could not show. */
static int64_t input_of(const struct ccase *k, int r, size_t i)
{
    static const int prod_vals[11] = {1, -1, 2, 1, -2, -1, 1, 2, -1, 1, 0};
    uint32_t h = mix((unsigned)r, i, k->salt);
    bool uns = is_unsigned(k->dtype);
    if (k->wrap)
        return 90 + (int64_t)(h % 38);
    if (k->op == TIDE_PROD) {
        int v = r < 8 ? prod_vals[h % 11] : h & 1 ? -1 : 1;
        return uns && v < 0 ? -v : v;
    }
    return uns ? (int64_t)(h % 7) : (int64_t)(h % 7) - 3;
}

uint64_t coll_ref_bits(const struct ccase *k, int n, size_t i)
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
        case TIDE_BAND: acc &= v; break;
        case TIDE_BOR: acc |= v; break;
        case TIDE_BXOR: acc ^= v; break;
        default: acc += v; break;
        }
    }
    if (k->op == TIDE_AVG)
        return avg_bits(k->dtype, acc, n);
    return value_bits(k->dtype, acc, k->op == TIDE_PROD && neg);
}

uint64_t coll_load_bits(const uint8_t *p, size_t j, size_t es)
{
    uint64_t b = 0;
    memcpy(&b, p + j * es, es);
    return b;
}

void coll_fill_input(const struct ccase *k, int r, uint8_t *p, size_t first, size_t len)
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
void coll_check_reduced(const struct ccase *k, int n, const uint8_t *out, size_t first,
                        size_t len)
{
    size_t es = tide_dtype_size(k->dtype), bad = 0;
    for (size_t j = 0; j < len; j++) {
        uint64_t want = coll_ref_bits(k, n, first + j), got = coll_load_bits(out, j, es);
        if (got == want || avg_half_close(k, got, want))
            continue;
        if (bad++ < 3)
            CHECK(false, "%s: element %zu is 0x%llx, want 0x%llx", coll_describe(k, n),
                  first + j, (unsigned long long)got, (unsigned long long)want);
    }
    CHECK(bad <= 3, "%s: %zu of %zu elements differ", coll_describe(k, n), bad, len);
}

/* The input elements [from, to) at p are still this rank's input. */
static void check_input_kept(const struct ccase *k, int n, int r, const uint8_t *p, size_t from,
                             size_t to, const char *what)
{
    size_t es = tide_dtype_size(k->dtype);
    for (size_t j = from; j < to; j++) {
        uint64_t want = value_bits(k->dtype, input_of(k, r, j), false);
        if (coll_load_bits(p, j, es) != want) {
            CHECK(false, "%s: %s changed at element %zu", coll_describe(k, n), what, j);
            return;
        }
    }
}

/* ---- byte patterns for the collectives that move data ---- */

static uint8_t pat(unsigned who, size_t byte, unsigned salt)
{
    return (uint8_t)mix(who, byte, salt);
}

void coll_fill_pat(uint8_t *p, size_t bytes, unsigned who, unsigned salt)
{
    for (size_t b = 0; b < bytes; b++)
        p[b] = pat(who, b, salt);
}

void coll_check_pat(const struct ccase *k, int n, const uint8_t *p, size_t bytes,
                    unsigned who, const char *what, int block)
{
    for (size_t b = 0; b < bytes; b++) {
        if (p[b] != pat(who, b, k->salt)) {
            CHECK(false, "%s: %s %d differs from byte %zu on (0x%02x, want 0x%02x)",
                  coll_describe(k, n), what, block, b, p[b], pat(who, b, k->salt));
            return;
        }
    }
}

uint8_t *coll_alloc_guarded(size_t bytes)
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
            CHECK(false, "%s: %s was written at byte %zu", coll_describe(k, n), what, b);
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
        l->sendmem = coll_alloc_guarded(total * es);
        l->in = l->sendmem;
        l->send = l->in;
        l->mem_len = root_side ? len * es : total * es;
        l->mem = coll_alloc_guarded(l->mem_len);
        l->out = root_side || (k->salt & 1) ? l->mem : NULL;
        return;
    }
    bool whole = k->coll == C_ALLREDUCE || k->coll == C_REDUCE;
    size_t shift = m == L_OVERLAP && whole ? len / 2 + 1 : 0;
    l->mem_len = (total + shift) * es;
    l->mem = coll_alloc_guarded(l->mem_len);
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
    coll_fill_input(k, r, l.in, 0, total);
    const void *send = l.send;
    void *out = l.out;
    if (k->salt & 2) { /* NULL where the count is 0 */
        send = total == 0 && send != TIDE_IN_PLACE ? NULL : send;
        out = len == 0 && k->layout != L_IN_PLACE ? NULL : out;
    }
    tide_req *req;
    coll_posted(k, n, post_reduction(comm, k, send, out, counts, &req));
    coll_await(k, n, req);
    if (root_side)
        coll_check_reduced(k, n, l.out, own, len);
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
    uint8_t *buf = coll_alloc_guarded(bytes);
    if (r == k->root)
        coll_fill_pat(buf, bytes, 500 + (unsigned)k->root, k->salt);
    tide_req *req;
    coll_posted(k, n, tide_ibroadcast(comm, bytes || !(k->salt & 2) ? buf : NULL, k->count,
                                      k->dtype, k->root, &req));
    coll_await(k, n, req);
    coll_check_pat(k, n, buf, bytes, 500 + (unsigned)k->root, "the buffer from root", k->root);
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
    uint8_t *recv = coll_alloc_guarded(all), *own = NULL, *at = input_in_recv(k, recv, blk, r, n);
    if (!at)
        at = own = coll_alloc_guarded(blk);
    coll_fill_pat(at, blk, (unsigned)r, k->salt);
    const void *send = k->layout == L_IN_PLACE ? TIDE_IN_PLACE : at;
    void *out = recv;
    if (all == 0 && (k->salt & 2)) {
        send = send == TIDE_IN_PLACE ? send : NULL;
        out = NULL;
    }
    tide_req *req;
    coll_posted(k, n, tide_iallgather(comm, send, out, k->count, k->dtype, &req));
    coll_await(k, n, req);
    for (int p = 0; p < n; p++)
        coll_check_pat(k, n, recv + (size_t)p * blk, blk, (unsigned)p, "block", p);
    check_untouched(k, n, recv, all, all + GUARD, "the guard after recvbuf");
    if (own)
        coll_check_pat(k, n, own, blk, (unsigned)r, "sendbuf (changed)", r);
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
    uint8_t *recv = coll_alloc_guarded(all), *own = NULL, *at = NULL;
    size_t next = offs[(r + 1) % n] * es;
    if (k->layout == L_ALIASED || k->layout == L_IN_PLACE)
        at = recv + offs[r] * es; /* its own place, NCCL-style */
    else if (k->layout == L_OVERLAP && next + mine <= all)
        at = recv + next;
    if (!at)
        at = own = coll_alloc_guarded(mine);
    coll_fill_pat(at, mine, (unsigned)r, k->salt);
    tide_req *req;
    coll_posted(k, n, tide_iallgatherv(comm, at, recv, counts, k->dtype, &req));
    coll_await(k, n, req);
    for (int p = 0; p < n; p++)
        coll_check_pat(k, n, recv + offs[p] * es, counts[p] * es, (unsigned)p, "block", p);
    check_untouched(k, n, recv, all, all + GUARD, "the guard after recvbuf");
    free(own);
    free(recv);
}

static void run_gather(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    bool root = r == k->root;
    size_t blk = k->count * tide_dtype_size(k->dtype), all = blk * (size_t)n;
    uint8_t *recv = coll_alloc_guarded(all), *own = NULL;
    uint8_t *at = root && k->layout != L_IN_PLACE ? input_in_recv(k, recv, blk, r, n) : NULL;
    if (!at)
        at = own = coll_alloc_guarded(blk);
    coll_fill_pat(at, blk, (unsigned)r, k->salt);
    void *out = root || (k->salt & 1) ? recv : NULL;
    tide_req *req;
    coll_posted(k, n, tide_igather(comm, at, out, k->count, k->dtype, k->root, &req));
    coll_await(k, n, req);
    for (int p = 0; root && p < n; p++)
        coll_check_pat(k, n, recv + (size_t)p * blk, blk, (unsigned)p, "block", p);
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
    uint8_t *send = coll_alloc_guarded(all), *own = NULL, *out = NULL;
    unsigned base = 1000 + 64 * (unsigned)k->root;
    for (int p = 0; root && p < n; p++)
        coll_fill_pat(send + (size_t)p * blk, blk, base + (unsigned)p, k->salt);
    if (root && k->layout == L_ALIASED)
        out = send + (size_t)r * blk;
    else if (root && k->layout == L_OVERLAP)
        out = send + (size_t)((r + 1) % n) * blk;
    else
        out = own = coll_alloc_guarded(blk);
    tide_req *req;
    coll_posted(k, n, tide_iscatter(comm, root || (k->salt & 1) ? send : NULL, out, k->count,
                                    k->dtype, k->root, &req));
    coll_await(k, n, req);
    coll_check_pat(k, n, out, blk, base + (unsigned)r, "the block from root", k->root);
    if (own)
        check_untouched(k, n, own, blk, blk + GUARD, "the guard after recvbuf");
    for (int p = 0; root && own && p < n; p++)
        coll_check_pat(k, n, send + (size_t)p * blk, blk, base + (unsigned)p, "sendbuf block", p);
    free(own);
    free(send);
}

static void run_alltoall(tide_comm *comm, const struct ccase *k)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t blk = k->count * tide_dtype_size(k->dtype), all = blk * (size_t)n;
    uint8_t *send = coll_alloc_guarded(all), *recv = coll_alloc_guarded(all);
    for (int p = 0; p < n; p++)
        coll_fill_pat(send + (size_t)p * blk, blk, 10000 + 64 * (unsigned)r + (unsigned)p, k->salt);
    tide_req *req;
    coll_posted(k, n, tide_ialltoall(comm, send, recv, k->count, k->dtype, &req));
    coll_await(k, n, req);
    for (int p = 0; p < n; p++)
        coll_check_pat(k, n, recv + (size_t)p * blk, blk,
                       10000 + 64 * (unsigned)p + (unsigned)r, "block", p);
    check_untouched(k, n, recv, all, all + GUARD, "the guard after recvbuf");
    free(send);
    free(recv);
}

void coll_run_case(tide_comm *comm, const struct ccase *k)
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
        coll_posted(k, tide_comm_size(comm), tide_ibarrier(comm, &req));
        coll_await(k, tide_comm_size(comm), req);
        break;
    default: run_reduction(comm, k); break;
    }
}

/* ---- the small cases, on any group ---- */

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
    if (!tide__op_fits((tide_op)op, (tide_dtype)dt)) /* refused: test_coll_usage_tcp */
        return false;
    if (pl->full)
        return true;
    return coll_families[c].reduces ? (dt + 3 * op + ci + n) % 5 == 0 : (dt + ci + n) % 3 == 0;
}

void coll_run_small_cases(tide_comm *comm, const struct plan *pl, unsigned *salt)
{
    int n = tide_comm_size(comm);
    for (int c = 0; c < C_COUNT; c++)
        for (int ci = 0; ci < 4; ci++)
            for (int dt = 0; dt < TIDE_DTYPE_COUNT; dt++)
                for (int op = 0; op < (coll_families[c].reduces ? TIDE_OP_COUNT : 1); op++) {
                    if (!picked(pl, (enum coll)c, n, ci, dt, op))
                        continue;
                    struct ccase k = {(enum coll)c, (tide_dtype)dt, (tide_op)op,
                                      small_count(ci, n), (int)(*salt % (unsigned)n),
                                      (enum layout_kind)((dt + op + ci + c) % L_COUNT), false,
                                      *salt};
                    ++*salt;
                    coll_run_case(comm, &k);
                }
    /* int8/uint8 sums that wrap, on purpose */
    for (int c = 0; c < C_COUNT; c++)
        for (int dt = TIDE_INT8; coll_families[c].reduces && dt <= TIDE_UINT8; dt++)
            for (int ci = 2; ci < 4; ci++) {
                struct ccase k = {(enum coll)c, (tide_dtype)dt, TIDE_SUM, small_count(ci, n),
                                  (int)(*salt % (unsigned)n), (enum layout_kind)(ci % L_COUNT),
                                  true, *salt};
                ++*salt;
                coll_run_case(comm, &k);
            }
}

/* ---- random inputs ---- */

uint64_t coll_next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

uint64_t coll_hash(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* ---- the parent: set the algorithms, run the ranks ---- */

static const char *const set_names[6] = {"first algorithms", "second algorithms",
                                         "third algorithms", "no override",
                                         "board algorithms",
                                         "second boards (two-phase, stream)"};

/* Force the set-th algorithm of every collective that has one (3, or a
 * collective with fewer: no override; -1: leave the environment alone). */
static void apply_set(int set)
{
    for (int c = 0; set >= 0 && c < C_COUNT; c++) {
        const struct family *f = &coll_families[c];
        if (!f->env)
            continue;
        const char *name = set < 3 ? f->algos[set] : NULL;
        if (set >= 4)
            name = set == 5 && f->algos[6] ? f->algos[6] : f->algos[5];
        if (name)
            setenv(f->env, name, 1);
        else
            unsetenv(f->env);
    }
}

int coll_run(const char *what, int n, tide_progress_mode mode, int set, harness_body body,
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
