/* test_coll_usage_tcp.c - the collectives used the way a program uses
 * them, over real loopback TCP rank processes, through the public API
 * only: thousands of requests in flight waited out of order, large ones
 * interleaved on the same links, subgroups (split, create_group, free
 * with a request pending) beside their parent, and bad arguments rejected
 * at the call with nothing sent.  Each runs in both progress modes.
 *
 * Results are checked against the references of tests/coll_check.c; the
 * collective x algorithm x dtype matrix is test_collectives_tcp.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/coll_check.h"

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
        in[i] = coll_alloc_guarded(bytes);
        out[i] = coll_alloc_guarded(bytes);
        if (k[i].coll == C_BROADCAST && r == k[i].root)
            coll_fill_pat(out[i], bytes, 500 + (unsigned)k[i].root, k[i].salt);
        else if (k[i].coll == C_ALLGATHER)
            coll_fill_pat(in[i], k[i].count * 4, (unsigned)r, k[i].salt);
        else
            coll_fill_input(&k[i], r, in[i], 0, k[i].count * blocks);
    }
    EXPECT_OK(tide_iallreduce(comm, in[0], out[0], COUNT, TIDE_FLOAT32, TIDE_SUM, &req[0]));
    EXPECT_OK(tide_iallreduce(comm, in[1], out[1], COUNT, TIDE_INT32, TIDE_MAX, &req[1]));
    EXPECT_OK(tide_ibroadcast(comm, out[2], COUNT, TIDE_FLOAT32, n - 1, &req[2]));
    EXPECT_OK(tide_iallgather(comm, in[3], out[3], COUNT / 4, TIDE_FLOAT32, &req[3]));
    EXPECT_OK(tide_ireduce_scatter(comm, in[4], out[4], COUNT / 2, TIDE_INT8, TIDE_SUM, &req[4]));
    for (int i = K - 1; i >= 0; i--) {
        coll_await(&k[i], n, req[i]);
        if (k[i].coll == C_BROADCAST)
            coll_check_pat(&k[i], n, out[i], COUNT * 4, 500 + (unsigned)k[i].root, "buffer", 0);
        for (int p = 0; k[i].coll == C_ALLGATHER && p < n; p++)
            coll_check_pat(&k[i], n, out[i] + (size_t)p * k[i].count * 4, k[i].count * 4,
                           (unsigned)p, "block", p);
        if (coll_families[k[i].coll].reduces)
            coll_check_reduced(&k[i], n, out[i],
                               k[i].coll == C_ALLREDUCE ? 0 : (size_t)r * k[i].count,
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
        int j = (int)(coll_next_rand(&rng) % (uint64_t)(i + 1)), t = order[i];
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
    coll_end_of_body();
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
    coll_run_small_cases(sub, &pl, &salt); /* roots and blocks in sub's ranks */
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
    coll_end_of_body();
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
    coll_end_of_body();
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
    coll_end_of_body();
}

/* ---- the parent ---- */

static void many_in_flight(void **state)
{
    int failed = 0;
    for (int n = 3; n <= 4; n++) {
        failed += coll_run("2000 in flight", n, TIDE_PROGRESS_THREAD, 3, in_flight_body, NULL);
        failed += coll_run("2000 in flight", n, TIDE_PROGRESS_INLINE, 3, in_flight_body, NULL);
    }
    if (failed)
        fail_msg("%d runs failed", failed);
}

static void subgroups(void **state)
{
    int failed = 0;
    for (int n = 2; n <= 5; n++)
        failed += coll_run("subgroups", n, TIDE_PROGRESS_THREAD, 3, subgroup_body, NULL);
    failed += coll_run("subgroups", 5, TIDE_PROGRESS_THREAD, 0, subgroup_body, NULL);
    failed += coll_run("subgroups", 4, TIDE_PROGRESS_INLINE, 3, subgroup_body, NULL);
    if (failed)
        fail_msg("%d runs failed", failed);
}

static void bad_arguments(void **state)
{
    int failed = 0;
    for (int n = 1; n <= 3; n++)
        failed += coll_run("bad arguments", n, TIDE_PROGRESS_THREAD, 3, bad_arguments_body, NULL);
    failed += coll_run("bad arguments", 2, TIDE_PROGRESS_INLINE, 3, bad_arguments_body, NULL);
    for (int n = 2; n <= 3; n++) {
        setenv("TIDE_ALGO_ALLREDUCE", "no_such_algorithm", 1);
        failed += coll_run("an unknown algorithm", n, TIDE_PROGRESS_THREAD, -1,
                           unknown_algorithm_body, NULL);
    }
    unsetenv("TIDE_ALGO_ALLREDUCE");
    if (failed)
        fail_msg("%d runs failed", failed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(many_in_flight),
        cmocka_unit_test(subgroups),
    };
    return cmocka_run_group_tests_name("collectives in use over tcp", tests, NULL, NULL);
}
