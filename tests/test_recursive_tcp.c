/* test_recursive_tcp.c - the recursive algorithms and Bruck's over real
 * loopback TCP rank processes: recursive doubling and Rabenseifner
 * all-reduce, recursive halving reduce-scatter (even and v forms),
 * recursive doubling and Bruck all-gather.  Each runs on 2, 3, 4, 5, 7
 * and 8 ranks (powers of two and not), over counts from 0 to past a
 * thousand, with separate, in-place and aliased buffers, against results
 * computed here from the inputs.  Random float inputs check that every
 * rank ends with the same bits.
 *
 * One harness run per group size runs every case in a loop: forking and
 * joining a job costs far more than a collective.  The body picks the
 * algorithm with TIDE_ALGO_* before each call (select reads it at the
 * call) and checks the request names the one that ran. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/coll_check.h"
#include "tests/harness.h"

/* ---- inputs and expected results ---- */

struct red_case {
    const char *name;
    tide_dtype dtype;
    tide_op op;
};

/* Small integers, so every float sum is exact and int products fit. */
static const struct red_case red_cases[] = {
    {"int32 sum", TIDE_INT32, TIDE_SUM},     {"int32 prod", TIDE_INT32, TIDE_PROD},
    {"int32 max", TIDE_INT32, TIDE_MAX},     {"int32 avg", TIDE_INT32, TIDE_AVG},
    {"float32 sum", TIDE_FLOAT32, TIDE_SUM},
};
#define NCASES (sizeof red_cases / sizeof red_cases[0])

static const size_t counts[] = {0, 1, 3, 7, 1000, 1027};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* How the buffers are passed. */
enum placement {
    SEPARATE, /* disjoint sendbuf and recvbuf */
    IN_PLACE, /* TIDE_IN_PLACE */
    ALIASED,  /* pointers into one buffer: sendbuf == recvbuf (allreduce),
               * recvbuf at the own block (NCCL-style reduce-scatter and
               * all-gather) */
    SHIFTED,  /* sendbuf and recvbuf overlap elsewhere */
    NPLACEMENTS
};
static const char *const placement_names[] = {"separate", "in place", "aliased", "shifted"};

/* Rank r's input element i (as an integer, stored as the case's dtype). */
static int32_t input(tide_op op, int r, size_t i)
{
    switch (op) {
    case TIDE_PROD: /* |product| <= 3^8 */
        return (int32_t)((r + i) % 3 + 1) * ((r * 3 + i) % 5 == 0 ? -1 : 1);
    case TIDE_MAX:
        return (int32_t)((r * 31 + i * 17) % 1001) - 500;
    default:
        return (int32_t)((r * 7919 + i * 104729) % 201) - 100;
    }
}

/* The reduction of element i over n ranks, computed the plain way. */
static int64_t expected(tide_op op, int n, size_t i)
{
    int64_t acc = input(op, 0, i);
    for (int r = 1; r < n; r++) {
        int64_t v = input(op, r, i);
        if (op == TIDE_PROD)
            acc *= v;
        else if (op == TIDE_MAX)
            acc = v > acc ? v : acc;
        else
            acc += v;
    }
    return op == TIDE_AVG ? acc / n : acc; /* C division truncates, as tide's */
}

/* Fill len elements of buf with rank r's input elements from first on. */
static void fill(const struct red_case *rc, int r, void *buf, size_t first, size_t len)
{
    for (size_t k = 0; k < len; k++) {
        int32_t v = input(rc->op, r, first + k);
        if (rc->dtype == TIDE_FLOAT32)
            ((float *)buf)[k] = (float)v;
        else
            ((int32_t *)buf)[k] = v;
    }
}

/* Check len elements of buf against the results for first on. */
static void check(const struct red_case *rc, int n, const void *buf, size_t first, size_t len,
                  const char *what)
{
    for (size_t k = 0; k < len; k++) {
        int64_t want = expected(rc->op, n, first + k);
        if (rc->dtype == TIDE_FLOAT32) {
            float got = ((const float *)buf)[k];
            EXPECT(got == (float)want, "%s: element %zu is %g, want %lld", what, first + k,
                   (double)got, (long long)want);
        } else {
            int32_t got = ((const int32_t *)buf)[k];
            EXPECT(got == (int32_t)want, "%s: element %zu is %d, want %d", what, first + k, got,
                   (int32_t)want);
        }
    }
}

/* Wait for req, check it ran `algo` (NULL: any), and free it. */
static void finish(tide_req *req, const char *algo, const char *what)
{
    EXPECT_OK(tide_wait(req, -1));
    const char *ran = tide_req_algorithm(req);
    EXPECT(!algo || strcmp(ran, algo) == 0, "%s: ran %s, not %s", what, ran, algo);
    tide_req_free(req);
}

/* ---- all-reduce ---- */

static void one_allreduce(tide_comm *comm, const char *algo, const struct red_case *rc,
                          size_t count, enum placement pl)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    char what[160];
    snprintf(what, sizeof what, "allreduce %s, %s, count %zu, %s", algo, rc->name, count,
             placement_names[pl]);
    size_t bytes = count * 4;
    char *a = malloc(2 * bytes + 64), *b = malloc(bytes + 64);
    EXPECT(a && b, "malloc");
    const void *send = a;
    void *recv = b;
    fill(rc, r, a, 0, count);
    if (pl == IN_PLACE) {
        send = TIDE_IN_PLACE;
        recv = a;
    } else if (pl == ALIASED) {
        recv = a;
    } else if (pl == SHIFTED) { /* recvbuf starts 3 elements into sendbuf */
        recv = a + 12;
    }
    if (count == 0) { /* NULL is allowed for zero counts */
        recv = NULL;
        send = pl == IN_PLACE ? TIDE_IN_PLACE : NULL;
    }
    tide_req *req;
    EXPECT_OK(tide_iallreduce(comm, send, recv, count, rc->dtype, rc->op, &req));
    finish(req, algo, what);
    check(rc, n, recv, 0, count, what);
    free(a);
    free(b);
}

static void allreduce_all(tide_comm *comm, const char *algo)
{
    setenv("TIDE_ALGO_ALLREDUCE", algo, 1);
    for (size_t k = 0; k < NCASES; k++)
        for (size_t i = 0; i < NCOUNTS; i++)
            for (int pl = 0; pl < NPLACEMENTS; pl++)
                one_allreduce(comm, algo, &red_cases[k], counts[i], (enum placement)pl);
    unsetenv("TIDE_ALGO_ALLREDUCE");
}

/* ---- reduce-scatter ---- */

/* One reduce_scatterv with these counts (even: reduce_scatter with
 * counts[0] each). */
static void one_reduce_scatter(tide_comm *comm, const struct red_case *rc, const size_t *cnt,
                               bool even, enum placement pl)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t total = 0, own = 0;
    for (int b = 0; b < n; b++) {
        if (b == r)
            own = total;
        total += cnt[b];
    }
    char what[160];
    snprintf(what, sizeof what, "reduce_scatter%s, %s, %zu of %zu elements at %zu, %s",
             even ? "" : "v", rc->name, cnt[r], total, own, placement_names[pl]);
    char *a = malloc(2 * total * 4 + 64), *b = malloc(cnt[r] * 4 + 64);
    EXPECT(a && b, "malloc");
    fill(rc, r, a, 0, total);
    const void *send = a;
    void *recv = b;
    if (pl == IN_PLACE) {
        send = TIDE_IN_PLACE;
        recv = a;
    } else if (pl == ALIASED) {
        recv = a + own * 4;
    } else if (pl == SHIFTED) { /* output overlaps the input, not at the own block */
        recv = a + (own + 1) * 4;
    }
    if (total == 0) {
        recv = NULL;
        send = pl == IN_PLACE ? TIDE_IN_PLACE : NULL;
    }
    tide_req *req;
    if (even)
        EXPECT_OK(tide_ireduce_scatter(comm, send, recv, cnt[0], rc->dtype, rc->op, &req));
    else
        EXPECT_OK(tide_ireduce_scatterv(comm, send, recv, cnt, rc->dtype, rc->op, &req));
    finish(req, "recursive_halving", what);
    check(rc, n, recv, own, cnt[r], what);
    free(a);
    free(b);
}

/* Uneven block sizes, zeros among them, made from a pattern number. */
static void uneven_counts(size_t *cnt, int n, int pattern)
{
    for (int b = 0; b < n; b++) {
        switch (pattern) {
        case 0: /* every other block empty */
            cnt[b] = b % 2 ? 0 : (size_t)(b + 1) * 5;
            break;
        case 1: /* all in one block */
            cnt[b] = b == n / 2 ? 1027 : 0;
            break;
        case 2: /* ragged, one empty */
            cnt[b] = b == 1 ? 0 : (size_t)((b * 37 + 11) % 23) * 13 + 1;
            break;
        default: /* the first rank empty, the last large */
            cnt[b] = b == 0 ? 0 : b == n - 1 ? 700 : 3;
            break;
        }
    }
}

static void reduce_scatter_all(tide_comm *comm)
{
    int n = tide_comm_size(comm);
    size_t cnt[8];
    setenv("TIDE_ALGO_REDUCE_SCATTER", "recursive_halving", 1);
    setenv("TIDE_ALGO_REDUCE_SCATTERV", "recursive_halving", 1);
    for (size_t k = 0; k < NCASES; k++) {
        for (int pl = 0; pl < NPLACEMENTS; pl++) {
            for (size_t i = 0; i < NCOUNTS; i++) {
                for (int b = 0; b < n; b++)
                    cnt[b] = counts[i];
                one_reduce_scatter(comm, &red_cases[k], cnt, true, (enum placement)pl);
            }
            for (int pattern = 0; pattern < 4; pattern++) {
                uneven_counts(cnt, n, pattern);
                one_reduce_scatter(comm, &red_cases[k], cnt, false, (enum placement)pl);
            }
        }
    }
    unsetenv("TIDE_ALGO_REDUCE_SCATTER");
    unsetenv("TIDE_ALGO_REDUCE_SCATTERV");
}

/* ---- all-gather ---- */

static uint32_t gathered(int r, size_t i)
{
    return (uint32_t)r * 0x9e3779b9u ^ (uint32_t)(i * 2654435761u);
}

static void one_allgather(tide_comm *comm, const char *algo, size_t count, enum placement pl)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    char what[160];
    snprintf(what, sizeof what, "allgather %s, count %zu, %s", algo, count, placement_names[pl]);
    uint32_t *out = malloc((size_t)n * count * 4 + 64), *in = malloc(count * 4 + 64);
    EXPECT(out && in, "malloc");
    memset(out, 0xee, (size_t)n * count * 4);
    uint32_t *send = in;
    if (pl == IN_PLACE || pl == ALIASED)
        send = out + (size_t)r * count;
    else if (pl == SHIFTED) /* the input sits where another rank's block goes */
        send = out + (size_t)((r + 1) % n) * count + (count > 2);
    for (size_t i = 0; i < count; i++)
        send[i] = gathered(r, i);
    tide_req *req;
    if (count == 0)
        EXPECT_OK(tide_iallgather(comm, pl == IN_PLACE ? TIDE_IN_PLACE : NULL, NULL, 0,
                                  TIDE_UINT32, &req));
    else
        EXPECT_OK(tide_iallgather(comm, pl == IN_PLACE ? TIDE_IN_PLACE : send, out, count,
                                  TIDE_UINT32, &req));
    finish(req, algo, what);
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < count; i++)
            EXPECT(out[(size_t)p * count + i] == gathered(p, i), "%s: rank %d's element %zu",
                   what, p, i);
    free(out);
    free(in);
}

static void allgather_all(tide_comm *comm, const char *algo)
{
    setenv("TIDE_ALGO_ALLGATHER", algo, 1);
    for (size_t i = 0; i < NCOUNTS; i++)
        for (int pl = 0; pl < NPLACEMENTS; pl++)
            one_allgather(comm, algo, counts[i], (enum placement)pl);
    unsetenv("TIDE_ALGO_ALLGATHER");
}

/* ---- the same bits on every rank ---- */

/* Floats of mixed sign and magnitude, so the order of additions shows. */
static void random_floats(float *v, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0 - 0.5; /* [-0.5, 0.5) */
        for (int e = (int)(x % 41) - 20; e > 0; e--)
            u *= 2;
        for (int e = (int)(x % 41) - 20; e < 0; e++)
            u /= 2;
        v[i] = (float)u;
    }
}

/* Every rank hashes its result; all-gathered, the hashes must agree. */
static void expect_same_everywhere(tide_comm *comm, const void *buf, size_t bytes,
                                   const char *what)
{
    int n = tide_comm_size(comm);
    uint64_t mine = coll_hash(buf, bytes), all[8];
    EXPECT_OK(tide_allgather(comm, &mine, all, 1, TIDE_UINT64));
    for (int p = 0; p < n; p++)
        EXPECT(all[p] == mine, "%s: rank %d's result differs", what, p);
}

static void identical_bits(tide_comm *comm)
{
    static const char *const algos[] = {"recursive_doubling", "rabenseifner"};
    static const tide_op ops[] = {TIDE_SUM, TIDE_AVG};
    int r = tide_comm_rank(comm);
    size_t count = 1027;
    float *in = malloc(count * 4), *out[2] = {malloc(count * 4), malloc(count * 4)};
    EXPECT(in && out[0] && out[1], "malloc");
    random_floats(in, count, (uint64_t)r + 1);
    for (int o = 0; o < 2; o++) {
        for (int k = 0; k < 2; k++) {
            char what[100];
            snprintf(what, sizeof what, "random float32 %s by %s", o ? "avg" : "sum", algos[k]);
            setenv("TIDE_ALGO_ALLREDUCE", algos[k], 1);
            EXPECT_OK(tide_allreduce(comm, in, out[k], count, TIDE_FLOAT32, ops[o]));
            expect_same_everywhere(comm, out[k], count * 4, what);
        }
        /* Both combine lower ranks first in the same pairs: same tree. */
        EXPECT(memcmp(out[0], out[1], count * 4) == 0, "random float32 %s: the algorithms differ",
               o ? "avg" : "sum");
    }
    unsetenv("TIDE_ALGO_ALLREDUCE");
    free(in);
    free(out[0]);
    free(out[1]);
}

/* ---- the runs ---- */

static bool is_pow2(int n)
{
    return (n & (n - 1)) == 0;
}

static void everything(tide_comm *comm, void *arg)
{
    int n = tide_comm_size(comm);
    allreduce_all(comm, "recursive_doubling");
    allreduce_all(comm, "rabenseifner");
    reduce_scatter_all(comm);
    allgather_all(comm, "bruck");
    if (is_pow2(n))
        allgather_all(comm, "recursive_doubling");
    identical_bits(comm);
    EXPECT_OK(tide_barrier(comm));
}

static void run(int ranks, tide_progress_mode mode)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.progress = mode;
    o.run_limit_s = 120;
    int failed = harness_run(ranks, &o, everything, NULL);
    if (failed)
        fail_msg("%d ranks (%s progress): %d ranks failed", ranks,
                 mode == TIDE_PROGRESS_INLINE ? "inline" : "thread", failed);
}

static void ranks_2(void **state) { run(2, TIDE_PROGRESS_THREAD); }
static void ranks_3(void **state) { run(3, TIDE_PROGRESS_THREAD); }
static void ranks_4(void **state) { run(4, TIDE_PROGRESS_THREAD); }
static void ranks_5(void **state) { run(5, TIDE_PROGRESS_THREAD); }
static void ranks_7(void **state) { run(7, TIDE_PROGRESS_THREAD); }
static void ranks_8(void **state) { run(8, TIDE_PROGRESS_THREAD); }
static void ranks_6_inline(void **state) { run(6, TIDE_PROGRESS_INLINE); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ranks_2), cmocka_unit_test(ranks_3), cmocka_unit_test(ranks_4),
        cmocka_unit_test(ranks_5), cmocka_unit_test(ranks_7), cmocka_unit_test(ranks_8),
        cmocka_unit_test(ranks_6_inline),
    };
    return cmocka_run_group_tests_name("recursive and bruck over tcp", tests, NULL, NULL);
}
