/* test_trees_tcp.c - the rooted collectives and all-to-all over real
 * loopback TCP between rank processes: broadcast (binomial and the
 * pipelined chain), reduce, gather, scatter and pairwise all-to-all.
 * Every body runs on 2, 3, 4 and 5 ranks (powers of two and not), in both
 * progress modes, for every root and for counts 0, 1, 7, a mid size and a
 * large one, and checks each result against values computed here from the
 * inputs alone.
 * A sentinel element after every output catches a write past its end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/harness.h"

#define SENTINEL 0xdeadbeefu

/* Counts every body runs; the last one is the body's own large count. */
static const size_t counts[] = {0, 1, 7, 40001, 0};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* 17 chunks of 256 KiB and 12 bytes more: the chain's window of 8 wraps
 * twice and the last chunk is short. */
#define BCAST_LARGE (((size_t)1 << 20) + 3)
#define TREE_LARGE ((size_t)100003)

static size_t count_at(size_t k, size_t large)
{
    return k == NCOUNTS - 1 ? large : counts[k];
}

/* A value that names its origin, so a block in the wrong place shows. */
static uint32_t tagged(int a, int b, size_t i)
{
    return ((uint32_t)a * 7919u + (uint32_t)b * 104729u) ^ (uint32_t)(i * 2654435761u);
}

/* n elements plus a sentinel; NULL for n == 0 (buffers may be NULL when
 * their count is 0, and the library must cope). */
static uint32_t *alloc_u32(size_t n)
{
    if (n == 0)
        return NULL;
    uint32_t *p = malloc((n + 1) * sizeof *p);
    EXPECT(p, "malloc of %zu elements", n + 1);
    p[n] = SENTINEL;
    return p;
}

static void check_sentinel(const uint32_t *p, size_t n, const char *what)
{
    if (p)
        EXPECT(p[n] == SENTINEL, "%s: written past its end (%zu elements)", what, n);
}

/* ---- broadcast ---- */

/* arg: the algorithm the run forces through TIDE_ALGO_BROADCAST. */
static void bcast_body(tide_comm *comm, void *arg)
{
    const char *want = arg;
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    for (size_t k = 0; k < NCOUNTS; k++) {
        size_t count = count_at(k, BCAST_LARGE);
        for (int root = 0; root < n; root++) {
            uint32_t *buf = alloc_u32(count);
            for (size_t i = 0; i < count; i++)
                buf[i] = r == root ? tagged(root, 1, i) : 0xffffffffu;
            tide_req *req;
            EXPECT_OK(tide_ibroadcast(comm, buf, count, TIDE_UINT32, root, &req));
            EXPECT(strcmp(tide_req_algorithm(req), want) == 0, "algorithm %s, want %s",
                   tide_req_algorithm(req), want);
            EXPECT_OK(tide_wait(req, -1));
            tide_req_free(req);
            for (size_t i = 0; i < count; i++)
                EXPECT(buf[i] == tagged(root, 1, i), "count %zu root %d: element %zu is %08x",
                       count, root, i, buf[i]);
            check_sentinel(buf, count, "broadcast buf");
            free(buf);
        }
    }
    EXPECT_OK(tide_barrier(comm));
}

/* ---- reduce ---- */

/* Small integers, in float too: every sum is exact, so the expected value
 * does not depend on the order the tree combines in. */
static int32_t ival(int rank, size_t i)
{
    return (int32_t)((i * 7 + (size_t)rank * 13) % 101) - 50;
}

static float fval(int rank, size_t i)
{
    return (float)((i * 3 + (size_t)rank * 5) % 41) - 20.0f;
}

struct reduce_case {
    tide_dtype dtype;
    tide_op op;
    bool in_place; /* the root passes TIDE_IN_PLACE */
};

static const struct reduce_case reduce_cases[] = {
    {TIDE_INT32, TIDE_SUM, false},   {TIDE_INT32, TIDE_MAX, false},
    {TIDE_INT32, TIDE_AVG, false},   {TIDE_FLOAT32, TIDE_SUM, false},
    {TIDE_FLOAT32, TIDE_MAX, false}, {TIDE_FLOAT32, TIDE_AVG, false},
    {TIDE_INT32, TIDE_SUM, true},    {TIDE_FLOAT32, TIDE_AVG, true},
};

/* The expected result of element i, as the bits of an int32 or float. */
static uint32_t reduce_expect(const struct reduce_case *rc, int n, size_t i)
{
    uint32_t bits;
    if (rc->dtype == TIDE_INT32) {
        int32_t acc = ival(0, i);
        for (int p = 1; p < n; p++)
            acc = rc->op == TIDE_MAX ? (ival(p, i) > acc ? ival(p, i) : acc) : acc + ival(p, i);
        if (rc->op == TIDE_AVG)
            acc /= n;
        memcpy(&bits, &acc, sizeof bits);
        return bits;
    }
    float acc = fval(0, i);
    for (int p = 1; p < n; p++)
        acc = rc->op == TIDE_MAX ? (fval(p, i) > acc ? fval(p, i) : acc) : acc + fval(p, i);
    if (rc->op == TIDE_AVG)
        acc /= (float)n;
    memcpy(&bits, &acc, sizeof bits);
    return bits;
}

static void fill_input(const struct reduce_case *rc, uint32_t *buf, int r, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        int32_t iv = ival(r, i);
        float fv = fval(r, i);
        if (rc->dtype == TIDE_INT32)
            memcpy(&buf[i], &iv, sizeof buf[i]);
        else
            memcpy(&buf[i], &fv, sizeof buf[i]);
    }
}

static void reduce_one(tide_comm *comm, const struct reduce_case *rc, size_t count, int root)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    uint32_t *in = alloc_u32(count), *out = r == root ? alloc_u32(count) : NULL;
    const void *send = in;
    uint32_t *input = in;
    if (r == root && rc->in_place) {
        send = TIDE_IN_PLACE;
        input = out;
    }
    fill_input(rc, input, r, count);
    EXPECT_OK(tide_reduce(comm, send, out, count, rc->dtype, rc->op, root));
    for (size_t i = 0; out && i < count; i++)
        EXPECT(out[i] == reduce_expect(rc, n, i),
               "dtype %d op %d%s count %zu root %d: element %zu is %08x, want %08x",
               (int)rc->dtype, (int)rc->op, rc->in_place ? " in place" : "", count, root, i,
               out[i], reduce_expect(rc, n, i));
    check_sentinel(out, count, "reduce recvbuf");
    free(in);
    free(out);
}

/* Floats that do round: the same reduce twice gives the same bits. */
static void reduce_repeats(tide_comm *comm, int root)
{
    int r = tide_comm_rank(comm);
    enum { COUNT = 1000 };
    float in[COUNT], a[COUNT], b[COUNT];
    for (size_t i = 0; i < COUNT; i++)
        in[i] = 1.0f / (float)(i + 3) + (float)r * 0.1f;
    EXPECT_OK(tide_reduce(comm, in, a, COUNT, TIDE_FLOAT32, TIDE_SUM, root));
    EXPECT_OK(tide_reduce(comm, in, b, COUNT, TIDE_FLOAT32, TIDE_SUM, root));
    if (r == root)
        EXPECT(memcmp(a, b, sizeof a) == 0, "root %d: two runs differ", root);
}

static void reduce_body(tide_comm *comm, void *arg)
{
    int n = tide_comm_size(comm);
    for (size_t k = 0; k < NCOUNTS; k++)
        for (int root = 0; root < n; root++)
            for (size_t c = 0; c < sizeof reduce_cases / sizeof reduce_cases[0]; c++)
                reduce_one(comm, &reduce_cases[c], count_at(k, TREE_LARGE), root);
    for (int root = 0; root < n; root++)
        reduce_repeats(comm, root);
    EXPECT_OK(tide_barrier(comm));
}

/* ---- gather and scatter ---- */

/* overlap: the root's own block sits inside its n-block buffer, at block
 * (root + 1) % n: taken literally, the library must still get it right. */
static void gather_one(tide_comm *comm, size_t count, int root, bool overlap)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t all = (size_t)n * count;
    uint32_t *out = r == root ? alloc_u32(all) : NULL, *in = alloc_u32(count);
    const uint32_t *send = in;
    if (r == root && overlap && count)
        send = out + (size_t)((root + 1) % n) * count;
    for (size_t i = 0; i < count; i++)
        ((uint32_t *)send)[i] = tagged(r, root, i);
    EXPECT_OK(tide_gather(comm, send, out, count, TIDE_UINT32, root));
    for (int p = 0; out && p < n; p++)
        for (size_t i = 0; i < count; i++)
            EXPECT(out[(size_t)p * count + i] == tagged(p, root, i),
                   "count %zu root %d%s: block %d element %zu is %08x", count, root,
                   overlap ? " (overlapping)" : "", p, i, out[(size_t)p * count + i]);
    check_sentinel(out, all, "gather recvbuf");
    free(in);
    free(out);
}

static void gather_body(tide_comm *comm, void *arg)
{
    int n = tide_comm_size(comm);
    for (size_t k = 0; k < NCOUNTS; k++)
        for (int root = 0; root < n; root++) {
            gather_one(comm, count_at(k, TREE_LARGE), root, false);
            gather_one(comm, count_at(k, TREE_LARGE), root, true);
        }
    EXPECT_OK(tide_barrier(comm));
}

/* overlap: the root's output is block (root + 1) % n of its own input. */
static void scatter_one(tide_comm *comm, size_t count, int root, bool overlap)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t all = (size_t)n * count;
    uint32_t *in = r == root ? alloc_u32(all) : NULL, *out = alloc_u32(count);
    for (int p = 0; in && p < n; p++)
        for (size_t i = 0; i < count; i++)
            in[(size_t)p * count + i] = tagged(p, root, i);
    uint32_t *recv = out;
    if (r == root && overlap && count)
        recv = in + (size_t)((root + 1) % n) * count;
    EXPECT_OK(tide_scatter(comm, in, recv, count, TIDE_UINT32, root));
    for (size_t i = 0; i < count; i++)
        EXPECT(recv[i] == tagged(r, root, i), "count %zu root %d%s: element %zu is %08x",
               count, root, overlap ? " (overlapping)" : "", i, recv[i]);
    check_sentinel(out, count, "scatter recvbuf");
    check_sentinel(in, all, "scatter sendbuf");
    free(in);
    free(out);
}

static void scatter_body(tide_comm *comm, void *arg)
{
    int n = tide_comm_size(comm);
    for (size_t k = 0; k < NCOUNTS; k++)
        for (int root = 0; root < n; root++) {
            scatter_one(comm, count_at(k, TREE_LARGE), root, false);
            scatter_one(comm, count_at(k, TREE_LARGE), root, true);
        }
    EXPECT_OK(tide_barrier(comm));
}

/* ---- all-to-all ---- */

static void alltoall_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    for (size_t k = 0; k < NCOUNTS; k++) {
        size_t count = count_at(k, TREE_LARGE), all = (size_t)n * count;
        uint32_t *in = alloc_u32(all), *out = alloc_u32(all);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++)
                in[(size_t)p * count + i] = tagged(r, p, i);
        tide_req *req;
        EXPECT_OK(tide_ialltoall(comm, in, out, count, TIDE_UINT32, &req));
        EXPECT(strcmp(tide_req_algorithm(req), "pairwise") == 0, "algorithm %s",
               tide_req_algorithm(req));
        EXPECT_OK(tide_wait(req, -1));
        tide_req_free(req);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++)
                EXPECT(out[(size_t)p * count + i] == tagged(p, r, i),
                       "count %zu: block %d element %zu is %08x", count, p, i,
                       out[(size_t)p * count + i]);
        check_sentinel(out, all, "alltoall recvbuf");
        free(in);
        free(out);
    }
    EXPECT_OK(tide_barrier(comm));
}

/* ---- the table: every body on 2..5 ranks, in both progress modes ---- */

struct scenario {
    const char *name;
    harness_body body;
    const char *bcast_algo; /* TIDE_ALGO_BROADCAST for the run; NULL: binomial */
};

static const struct scenario scenarios[] = {
    {"broadcast_binomial", bcast_body, "binomial"},
    {"broadcast_chain", bcast_body, "chain"},
    {"reduce", reduce_body, NULL},
    {"gather", gather_body, NULL},
    {"scatter", scatter_body, NULL},
    {"alltoall", alltoall_body, NULL},
};

static void run_scenario(void **state)
{
    const struct scenario *s = *state;
    struct harness_opts o;
    harness_defaults(&o);
    /* The children inherit the environment: this picks their algorithm.
     * The trees and the pairwise exchange, which ranks that share memory
     * leave to boards (test_board_shm) for small vectors by default. */
    setenv("TIDE_ALGO_BROADCAST", s->bcast_algo ? s->bcast_algo : "binomial", 1);
    setenv("TIDE_ALGO_REDUCE", "binomial", 1);
    setenv("TIDE_ALGO_GATHER", "binomial", 1);
    setenv("TIDE_ALGO_SCATTER", "binomial", 1);
    setenv("TIDE_ALGO_ALLTOALL", "pairwise", 1);
    tide_progress_mode modes[] = {TIDE_PROGRESS_THREAD, TIDE_PROGRESS_INLINE};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        o.progress = modes[m];
        for (int ranks = 2; ranks <= 5; ranks++) {
            int failed = harness_run(ranks, &o, s->body, (void *)s->bcast_algo);
            if (failed)
                fail_msg("%s on %d ranks (%s progress): %d ranks failed", s->name, ranks,
                         modes[m] == TIDE_PROGRESS_INLINE ? "inline" : "thread", failed);
        }
    }
}

#define NSCENARIOS (sizeof scenarios / sizeof scenarios[0])

int main(void)
{
    struct CMUnitTest tests[NSCENARIOS];
    for (size_t i = 0; i < NSCENARIOS; i++)
        tests[i] = (struct CMUnitTest){scenarios[i].name, run_scenario, NULL, NULL,
                                       (void *)&scenarios[i]};
    return cmocka_run_group_tests_name("rooted collectives and all-to-all over tcp", tests, NULL,
                                       NULL);
}
