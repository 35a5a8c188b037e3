/* test_collectives_tcp.c - every collective over real loopback TCP rank
 * processes, through the public API only, against references computed
 * here (tests/coll_check.c).
 *
 * The matrix: collective x algorithm (forced with TIDE_ALGO_<COLL>, set
 * in the parent so the ranks inherit it, and with no override) x dtype x
 * op x count x buffer layout, on 1, 2, 3, 4, 5, 7 and 8 ranks, in both
 * progress modes; every group size runs the whole dtype x op product at
 * every count.  Then large vectors, NaN in MIN and MAX, bitwise identity
 * across ranks, calls and launches, and the seed's expectations.
 *
 * Many requests in flight, subgroups and bad arguments are
 * test_coll_usage_tcp.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "tests/coll_check.h"

/* ---- large vectors ---- */

/* Large enough for the ring's chunks and pipeline: 300000 float32
 * elements in the whole vector; on up to 4 ranks also 2000003, enough to
 * go round the ring's and the chain's windows of chunks many times (and,
 * on 2 ranks, blocks large enough for the ring's pacing). */
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
        coll_run_case(comm, &k);
    }
    static const enum coll huge[] = {C_ALLREDUCE, C_REDUCE_SCATTER, C_BROADCAST, C_ALLGATHER};
    for (size_t i = 0; n <= 4 && i < sizeof huge / sizeof huge[0]; i++) {
        bool per_rank = huge[i] == C_REDUCE_SCATTER || huge[i] == C_ALLGATHER;
        size_t count = per_rank ? 2000003 / (size_t)n : 2000003;
        struct ccase k = {huge[i], TIDE_FLOAT32, TIDE_SUM, count, n - 1,
                          (enum layout_kind)(i % L_COUNT), false, *salt};
        ++*salt;
        coll_run_case(comm, &k);
    }
}

/* Parts of 16 KiB to a board's 64 KiB slot, of odd lengths, in every
 * layout: where a board publication goes into its slot around the
 * caches (collectives/board.c, around_caches), and where the streaming
 * copy's last bytes fill no whole line.  A part is the vector (all-reduce,
 * broadcast, reduce), a block (all-gather, gather) or all n blocks
 * (reduce-scatter, scatter, all-to-all). */
static void run_slot_cases(tide_comm *comm, unsigned *salt)
{
    int n = tide_comm_size(comm);
    static const size_t part_bytes[] = {17003, 41017, 65500};
    static const tide_dtype dts[] = {TIDE_INT32, TIDE_FLOAT64, TIDE_UINT8};
    for (int c = 0; c < C_COUNT; c++) {
        if (c == C_BARRIER)
            continue;
        bool blocks = c == C_REDUCE_SCATTER || c == C_REDUCE_SCATTERV || c == C_SCATTER ||
                      c == C_ALLTOALL;
        for (size_t i = 0; i < sizeof part_bytes / sizeof part_bytes[0]; i++) {
            tide_dtype dt = dts[(i + (size_t)c) % 3];
            size_t count = part_bytes[i] / tide_dtype_size(dt) / (blocks ? (size_t)n : 1);
            struct ccase k = {(enum coll)c, dt, TIDE_SUM, count | 1, (int)(*salt % (unsigned)n),
                              (enum layout_kind)((i + (size_t)c) % L_COUNT), false, *salt};
            ++*salt;
            coll_run_case(comm, &k);
        }
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
            coll_fill_input(&k, r, in, 0, 13);
            for (size_t i = 0; i < 13; i += 3)
                if ((int)(i % (size_t)n) == r)
                    memcpy(in + i * es, &qnan[d - TIDE_FLOAT16], es);
            tide_req *req;
            coll_posted(&k, n, tide_iallreduce(comm, in, out, 13, k.dtype, k.op, &req));
            coll_await(&k, n, req);
            for (size_t i = 0; i < 13; i++) {
                uint64_t got = coll_load_bits(out, i, es);
                bool want_nan = i % 3 == 0;
                CHECK(want_nan ? is_nan_bits(k.dtype, got) : got == coll_ref_bits(&k, n, i),
                      "%s: element %zu is 0x%llx, want %s", coll_describe(&k, n), i,
                      (unsigned long long)got, want_nan ? "NaN" : "the reference");
            }
        }
}

/* ---- bitwise identity ---- */

/* Random values with full mantissas and exponents spread over 2^-20 ..
 * 2^21 (float16: 2^-6 .. 2^10, so that sums over 8 ranks stay normal and
 * finite): almost every sum rounds, so adding in another order changes
 * the low bits. */
static void fill_random(uint8_t *p, size_t count, tide_dtype d, uint64_t *s)
{
    size_t es = tide_dtype_size(d);
    double unit = d == TIDE_FLOAT16 ? 0x1p-6 : 0x1p-20;
    unsigned span = d == TIDE_FLOAT16 ? 16 : 41;
    for (size_t i = 0; i < count; i++) {
        uint64_t x = coll_next_rand(s);
        unsigned e = (unsigned)(coll_next_rand(s) % span);
        double v = (1.0 + (double)(x >> 11) * 0x1p-53) * unit * (double)(UINT64_C(1) << e);
        uint64_t b = coll_float_bits(d, x & 1 ? -v : v);
        memcpy(p + i * es, &b, es);
    }
}

/* Rank r's random input to case salt: the same in every launch. */
static uint64_t random_seed(int r, unsigned salt)
{
    return 0x9e3779b97f4a7c15u ^ ((uint64_t)r << 32) ^ salt;
}

static void one_identity_case(tide_comm *comm, tide_dtype d, size_t count, tide_op op,
                              unsigned salt)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    struct ccase k = {C_ALLREDUCE, d, op, count, 0, L_SEPARATE, false, salt};
    size_t bytes = count * tide_dtype_size(d);
    uint8_t *in = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes);
    EXPECT(in && a && b, "malloc");
    uint64_t s = random_seed(r, salt), hashes[MAXN], h;
    fill_random(in, count, d, &s);
    tide_req *req;
    coll_posted(&k, n, tide_iallreduce(comm, in, a, count, d, op, &req));
    coll_await(&k, n, req);
    coll_posted(&k, n, tide_iallreduce(comm, in, b, count, d, op, &req));
    coll_await(&k, n, req);
    CHECK(memcmp(a, b, bytes) == 0, "%s (random inputs): two runs differ", coll_describe(&k, n));
    h = coll_hash(a, bytes);
    EXPECT_OK(tide_allgather(comm, &h, hashes, 1, TIDE_UINT64));
    for (int p = 0; p < n; p++)
        CHECK(hashes[p] == h, "%s (random inputs): rank %d's result hashes to %016llx, mine "
              "to %016llx", coll_describe(&k, n), p, (unsigned long long)hashes[p],
              (unsigned long long)h);
    free(in);
    free(a);
    free(b);
}

static void bitwise_identity(tide_comm *comm)
{
    static const tide_dtype types[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_BFLOAT16, TIDE_FLOAT16};
    static const size_t counts[] = {7, 1000, 70001};
    unsigned salt = 0;
    for (size_t t = 0; t < 4; t++)
        for (size_t c = 0; c < 3; c++) {
            one_identity_case(comm, types[t], counts[c], TIDE_SUM, salt++);
            one_identity_case(comm, types[t], counts[c], TIDE_AVG, salt++);
        }
}

/* ---- identity across launches ----
 *
 * The same random inputs reduced in two launches of a job (fresh
 * processes, port and connections) must give the same bits: each rank
 * hashes its results into memory it shares with the parent, which
 * compares the two launches.  The cases: allreduce, reduce-scatter and
 * reduce x float16, bfloat16, float32, float64 x 2 counts x SUM, AVG. */

enum { XL_COLLS = 3, XL_TYPES = 4, XL_COUNTS = 2, XL_OPS = 2 };
enum { XL_CASES = XL_COLLS * XL_TYPES * XL_COUNTS * XL_OPS };

/* What the ranks of one launch hashed; mapped shared before the fork. */
struct launch_hashes {
    uint64_t h[MAXN][XL_CASES];
    int done[MAXN];
};

/* Case i of XL_CASES.  count is the whole vector; a reduce-scatter's
 * recvcount is count / n + 1. */
static struct ccase xl_case(int i, int n)
{
    static const enum coll colls[XL_COLLS] = {C_ALLREDUCE, C_REDUCE_SCATTER, C_REDUCE};
    static const tide_dtype types[XL_TYPES] = {TIDE_FLOAT16, TIDE_BFLOAT16, TIDE_FLOAT32,
                                               TIDE_FLOAT64};
    static const size_t counts[XL_COUNTS] = {1000, 70001};
    static const tide_op ops[XL_OPS] = {TIDE_SUM, TIDE_AVG};
    int o = i % XL_OPS, c = i / XL_OPS % XL_COUNTS, t = i / (XL_OPS * XL_COUNTS) % XL_TYPES;
    enum coll coll = colls[i / (XL_OPS * XL_COUNTS * XL_TYPES)];
    size_t count = coll == C_REDUCE_SCATTER ? counts[c] / (size_t)n + 1 : counts[c];
    struct ccase k = {coll, types[t], ops[o], count, n - 1, L_SEPARATE,
                      false, 1000u + (unsigned)i};
    return k;
}

/* Run case i on random inputs; the hash of this rank's result (0 for a
 * reduce's non-root, which has none). */
static uint64_t xl_run(tide_comm *comm, int i)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    struct ccase k = xl_case(i, n);
    size_t es = tide_dtype_size(k.dtype);
    size_t total = k.coll == C_REDUCE_SCATTER ? k.count * (size_t)n : k.count;
    uint8_t *in = malloc(total * es), *out = malloc(k.count * es);
    EXPECT(in && out, "malloc");
    uint64_t s = random_seed(r, k.salt);
    fill_random(in, total, k.dtype, &s);
    tide_req *req;
    int rc;
    if (k.coll == C_ALLREDUCE)
        rc = tide_iallreduce(comm, in, out, k.count, k.dtype, k.op, &req);
    else if (k.coll == C_REDUCE_SCATTER)
        rc = tide_ireduce_scatter(comm, in, out, k.count, k.dtype, k.op, &req);
    else
        rc = tide_ireduce(comm, in, out, k.count, k.dtype, k.op, k.root, &req);
    coll_posted(&k, n, rc);
    coll_await(&k, n, req);
    uint64_t h = k.coll == C_REDUCE && r != k.root ? 0 : coll_hash(out, k.count * es);
    free(in);
    free(out);
    return h;
}

/* Element j of the sum over n ranks' inputs at in (len elements each,
 * float32 or float64), added in rank order or in reverse. */
static double fold(const uint8_t *in, size_t len, size_t j, int n, bool reverse, tide_dtype d)
{
    double sum64 = 0;
    float sum32 = 0;
    size_t es = tide_dtype_size(d);
    for (int q = 0; q < n; q++) {
        const uint8_t *at = in + ((size_t)(reverse ? n - 1 - q : q) * len + j) * es;
        double v64;
        float v32;
        if (d == TIDE_FLOAT64) {
            memcpy(&v64, at, sizeof v64);
            sum64 += v64;
        } else {
            memcpy(&v32, at, sizeof v32);
            sum32 += v32;
        }
    }
    return d == TIDE_FLOAT64 ? sum64 : sum32;
}

/* How many elements of allreduce case i come out different when the
 * ranks' inputs are added in rank order and in reverse (about 15 % on 3
 * ranks, more on more): with few, the test could hardly see a change of
 * order.  Float32 and float64 only, which C adds; the half types share
 * the generator. */
static size_t order_sensitive(int i, int n)
{
    struct ccase k = xl_case(i, n);
    size_t es = tide_dtype_size(k.dtype), len = k.count, differ = 0;
    uint8_t *in = malloc((size_t)n * len * es);
    EXPECT(in, "malloc");
    for (int p = 0; p < n; p++) {
        uint64_t s = random_seed(p, k.salt);
        fill_random(in + (size_t)p * len * es, len, k.dtype, &s);
    }
    for (size_t j = 0; j < len; j++)
        differ += fold(in, len, j, n, false, k.dtype) != fold(in, len, j, n, true, k.dtype);
    free(in);
    return differ;
}

static void xl_body(tide_comm *comm, void *arg)
{
    struct launch_hashes *out = arg;
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    for (int i = 0; i < XL_CASES; i++) {
        struct ccase k = xl_case(i, n);
        out->h[r][i] = xl_run(comm, i);
        if (r == 0 && k.coll == C_ALLREDUCE && k.op == TIDE_SUM && k.dtype >= TIDE_FLOAT32)
            CHECK(order_sensitive(i, n) > k.count / 20,
                  "%s: the inputs hardly depend on the order of addition",
                  coll_describe(&k, n));
    }
    EXPECT_OK(tide_barrier(comm));
    out->done[r] = 1;
    coll_end_of_body();
}

/* Two launches of the cases on n ranks under algorithm set `set`; 0 when
 * every rank's every hash agrees. */
static int launches_differ(int n, int set, struct launch_hashes *two)
{
    memset(two, 0, 2 * sizeof *two);
    int bad = 0;
    for (int l = 0; l < 2; l++)
        bad += coll_run("identity across launches", n, TIDE_PROGRESS_THREAD, set, xl_body, &two[l]);
    if (bad)
        return bad;
    for (int r = 0; r < n; r++) {
        if (!two[0].done[r] || !two[1].done[r]) {
            print_error("identity across launches: rank %d of %d wrote no hashes\n", r, n);
            bad++;
        }
        for (int i = 0; i < XL_CASES; i++) {
            if (two[0].h[r][i] == two[1].h[r][i])
                continue;
            struct ccase k = xl_case(i, n);
            print_error("identity across launches: %s %s %s count %zu on %d ranks, algorithm "
                        "set %d: rank %d's result hashes to %016llx, then %016llx\n",
                        coll_families[k.coll].name, tide_dtype_name(k.dtype), tide_op_name(k.op),
                        k.count, n, set, r, (unsigned long long)two[0].h[r][i],
                        (unsigned long long)two[1].h[r][i]);
            bad++;
        }
    }
    return bad;
}

static void identity_across_launches(void **state)
{
    static const int sizes[] = {3, 4, 5};
    struct launch_hashes *two = mmap(NULL, 2 * sizeof *two, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(two != MAP_FAILED);
    int bad = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int set = 0; set < 4; set++)
            bad += launches_differ(sizes[s], set, two);
    munmap(two, 2 * sizeof *two);
    if (bad)
        fail_msg("%d results differ between launches (or launches failed)", bad);
}

static void matrix_body(tide_comm *comm, void *arg)
{
    const struct plan *pl = arg;
    unsigned salt = 0;
    coll_run_small_cases(comm, pl, &salt);
    run_slot_cases(comm, &salt);
    if (pl->big)
        run_big_cases(comm, &salt);
    nan_cases(comm, &salt);
    bitwise_identity(comm);
    EXPECT_OK(tide_barrier(comm));
    coll_end_of_body();
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
    coll_end_of_body();
}

/* ---- the parent: one run per algorithm set ---- */

static int run_matrix(int n, tide_progress_mode mode, int set)
{
    /* The 300000-element cases fit no board: under the board sets they
     * would only run the message algorithms again. */
    struct plan pl = {set, true, set < 4};
    return coll_run("the matrix", n, mode, set, matrix_body, &pl);
}

/* The sets to run: the first four, and the boards' (4, 5) where they
 * are exercised most (2 ranks, a group they divide unevenly, 4 and 8)
 * and run at all: where the ranks share no memory, every forced board
 * gives way to the default, and set 3 ran that already. */
static int sets_on(int n, bool boards_here)
{
    return boards_here && coll_boards_run(n) ? 6 : 4;
}

static void matrix_on(int n)
{
    int failed = 0, sets = sets_on(n, n == 2 || n == 3 || n == 4 || n == 8);
    for (int set = 0; set < sets; set++)
        failed += run_matrix(n, TIDE_PROGRESS_THREAD, set);
    if (failed)
        fail_msg("%d of %d algorithm sets failed on %d ranks", failed, sets, n);
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
    for (int set = 0; set < sets_on(3, true); set++)
        failed += run_matrix(3, TIDE_PROGRESS_INLINE, set);
    if (failed)
        fail_msg("%d inline runs failed", failed);
}

static void seed_expectations(void **state)
{
    setenv("TIDE_ALGO_ALLREDUCE", "ring", 1);
    int failed = coll_run("the seed's expectations", 4, TIDE_PROGRESS_THREAD, -1, seed_body, NULL);
    unsetenv("TIDE_ALGO_ALLREDUCE");
    if (failed)
        fail_msg("the seed's expectations failed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seed_expectations), cmocka_unit_test(matrix_1_rank),
        cmocka_unit_test(matrix_2_ranks),    cmocka_unit_test(matrix_3_ranks),
        cmocka_unit_test(matrix_4_ranks),    cmocka_unit_test(matrix_5_ranks),
        cmocka_unit_test(matrix_7_ranks),    cmocka_unit_test(matrix_8_ranks),
        cmocka_unit_test(matrix_inline),     cmocka_unit_test(identity_across_launches),
    };
    return cmocka_run_group_tests_name("collectives over tcp", tests, NULL, NULL);
}
