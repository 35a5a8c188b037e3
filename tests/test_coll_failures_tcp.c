/* test_coll_failures_tcp.c - collectives that go wrong across real rank
 * processes: ranks that call mismatched collectives (kind, count, dtype,
 * op, root) get TIDE_EMISMATCH with a message saying what differed, never
 * a hang or an overrun; a collective one rank never joins fails with
 * TIDE_ETIMEDOUT on every rank where it is pending; and the communicator
 * keeps working afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/harness.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* After a failure, the communicator still runs collectives correctly. */
static void still_works(tide_comm *comm)
{
    int n = tide_comm_size(comm), r = tide_comm_rank(comm);
    EXPECT_OK(tide_barrier(comm));
    int32_t in[5] = {r, r, r, r, r}, out[5];
    EXPECT_OK(tide_allreduce(comm, in, out, 5, TIDE_INT32, TIDE_SUM));
    for (int i = 0; i < 5; i++)
        EXPECT(out[i] == n * (n - 1) / 2, "after the failure, allreduce gave %d", out[i]);
}

/* The rank that differs is the last one; everyone must see a mismatch,
 * and the message must name what differed: the other side's call, which
 * this rank did not make.  DIFF_ROOTS: every rank broadcasts from its own
 * rank, so every rank only sends and none can fail the call itself. */
enum diff { DIFF_COUNT, DIFF_DTYPE, DIFF_OP, DIFF_KIND, DIFF_ROOT, DIFF_ROOTS, DIFF_VCOUNTS };

/* What rank r's message must name: what the others called. */
static bool names_the_other_call(enum diff d, int r, int n, const char *msg)
{
    bool odd = r == n - 1;
    char root[32];
    switch (d) {
    case DIFF_COUNT:
        return strstr(msg, odd ? "of 4096" : "of 1000") != NULL;
    case DIFF_DTYPE:
        return strstr(msg, odd ? "float" : "int32") != NULL;
    case DIFF_OP:
        return strstr(msg, odd ? "(sum)" : "(max)") != NULL;
    case DIFF_KIND:
        return strstr(msg, odd ? "allreduce" : "allgather") != NULL;
    case DIFF_ROOT:
        return strstr(msg, odd ? "root 0" : "root 1") != NULL;
    case DIFF_ROOTS:
        break;
    case DIFF_VCOUNTS: /* the signatures agree: only the lengths tell */
        return strstr(msg, "ranks passed different counts") != NULL;
    }
    /* Any root but this rank's own. */
    for (int k = 0; k < n; k++) {
        snprintf(root, sizeof root, "from root %d", k);
        if (k != r && strstr(msg, root))
            return true;
    }
    return false;
}

/* A rank whose part of the collective was sending only may succeed, and
 * then learns of the mismatch later: tide_comm_async_error shows it, and
 * the next collective call reports it (without running) and clears it. */
static void expect_late_report(tide_comm *comm, enum diff d)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    const char *msg = "";
    int err = 0;
    double t0 = now_s();
    while (!(err = tide_comm_async_error(comm, &msg)) && now_s() - t0 < 5.0)
        ;
    EXPECT(err == TIDE_EMISMATCH, "no late report within 5 s (got %s)", tide_err_name(err));
    EXPECT(names_the_other_call(d, r, n, msg), "the late report does not say what differed: %s",
           msg);
    tide_req *req = NULL;
    EXPECT_OK(tide_ibarrier(comm, &req));
    int rc = tide_wait(req, 5000);
    EXPECT(rc == TIDE_EMISMATCH, "the next call gave %s, not the late report", tide_err_name(rc));
    EXPECT(strstr(tide_req_message(req), "had succeeded here"), "its message: %s",
           tide_req_message(req));
    tide_req_free(req);
    EXPECT(tide_comm_async_error(comm, NULL) == 0, "the report was not cleared");
}

static void mismatch_body(tide_comm *comm, void *arg)
{
    enum diff d = *(enum diff *)arg;
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    bool odd = r == n - 1;
    float buf[4096] = {0}, out[4096 * 8];
    for (int i = 0; i < 2 * n; i++)
        out[i] = -1.0f;
    tide_req *req = NULL;
    double t0 = now_s();
    switch (d) {
    case DIFF_COUNT:
        EXPECT_OK(tide_iallreduce(comm, buf, out, odd ? 1000 : 4096, TIDE_FLOAT32, TIDE_SUM, &req));
        break;
    case DIFF_DTYPE:
        EXPECT_OK(tide_iallgather(comm, buf, out, 64, odd ? TIDE_INT32 : TIDE_FLOAT32, &req));
        break;
    case DIFF_OP:
        EXPECT_OK(tide_ireduce_scatter(comm, buf, out, 16, TIDE_FLOAT32, odd ? TIDE_MAX : TIDE_SUM,
                                       &req));
        break;
    case DIFF_KIND:
        if (odd)
            EXPECT_OK(tide_iallgather(comm, buf, out, 8, TIDE_FLOAT32, &req));
        else
            EXPECT_OK(tide_iallreduce(comm, buf, out, 8, TIDE_FLOAT32, TIDE_SUM, &req));
        break;
    case DIFF_ROOT:
        EXPECT_OK(tide_ireduce(comm, buf, out, 256, TIDE_FLOAT32, TIDE_SUM, odd ? 1 : 0, &req));
        break;
    case DIFF_ROOTS:
        EXPECT_OK(tide_ibroadcast(comm, buf, 64, TIDE_FLOAT32, r, &req));
        break;
    case DIFF_VCOUNTS: {
        /* The same total (the signature's count), split otherwise by the
         * last rank: before, every rank returned success with blocks of
         * `out` never written. */
        size_t counts[8];
        for (int q = 0; q < n; q++)
            counts[q] = (size_t)(odd ? (q % 2 ? 1 : 3) : 2);
        if (odd && n % 2)
            counts[n - 1] = 2;
        EXPECT_OK(tide_iallgatherv(comm, buf, out, counts, TIDE_FLOAT32, &req));
        break;
    }
    }
    int rc = tide_wait(req, 10000);
    double took = now_s() - t0;
    const char *msg = tide_req_message(req);
    bool sends_only = (d == DIFF_ROOT && r != 0) || d == DIFF_ROOTS;
    if (d == DIFF_VCOUNTS && rc == 0) {
        /* Every frame that reached it had the length its counts say (a
         * block that went round only through ranks that agree): a
         * success must then hold every block, none left unwritten. */
        for (int i = 0; i < 2 * n; i++)
            EXPECT(out[i] != -1.0f, "succeeded with element %d unwritten", i);
    } else if (sends_only) {
        /* A leaf's one-way send may complete before anything comes back,
         * so it may succeed; the root, which waits for data, must not. */
        EXPECT(rc == 0 || rc == TIDE_EMISMATCH, "a sender got %s: %s", tide_err_name(rc), msg);
    } else {
        EXPECT(rc == TIDE_EMISMATCH, "got %s: %s", tide_err_name(rc), msg);
    }
    EXPECT(took < 5.0, "the mismatch took %.2f s to surface (deadline is 20 s)", took);
    if (rc == TIDE_EMISMATCH)
        EXPECT(names_the_other_call(d, r, n, msg), "the message does not say what differed: %s",
               msg);
    tide_req_free(req);
    if (rc == 0)
        expect_late_report(comm, d);
    still_works(comm);
}

static void run_mismatch(int n, enum diff d, tide_progress_mode mode)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.progress = mode;
    assert_int_equal(harness_run(n, &o, mismatch_body, &d), 0);
}

static void mismatched_count(void **state)
{
    run_mismatch(4, DIFF_COUNT, TIDE_PROGRESS_THREAD);
    run_mismatch(2, DIFF_COUNT, TIDE_PROGRESS_INLINE);
}

static void mismatched_dtype(void **state) { run_mismatch(3, DIFF_DTYPE, TIDE_PROGRESS_THREAD); }
static void mismatched_op(void **state) { run_mismatch(4, DIFF_OP, TIDE_PROGRESS_THREAD); }
static void mismatched_kind(void **state)
{
    run_mismatch(4, DIFF_KIND, TIDE_PROGRESS_THREAD);
    run_mismatch(3, DIFF_KIND, TIDE_PROGRESS_INLINE);
}
static void mismatched_root(void **state) { run_mismatch(3, DIFF_ROOT, TIDE_PROGRESS_THREAD); }
static void mismatched_vcounts(void **state)
{
    run_mismatch(4, DIFF_VCOUNTS, TIDE_PROGRESS_THREAD);
    run_mismatch(3, DIFF_VCOUNTS, TIDE_PROGRESS_INLINE);
}

/* Every rank a broadcast's root: no rank receives, so every rank learns
 * of it late (before async errors, all of them succeeded silently). */
static void mismatched_roots_all_send(void **state)
{
    run_mismatch(2, DIFF_ROOTS, TIDE_PROGRESS_INLINE);
    run_mismatch(4, DIFF_ROOTS, TIDE_PROGRESS_THREAD);
}

/* A large allreduce whose counts differ: the ring's chunks must never be
 * written past the smaller rank's buffer (ASan watches). */
static void mismatch_large(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    size_t count = r == 0 ? 300000 : 200000;
    float *in = calloc(count, sizeof *in), *out = calloc(count, sizeof *out);
    EXPECT(in && out, "memory");
    int rc = tide_allreduce(comm, in, out, count, TIDE_FLOAT32, TIDE_SUM);
    EXPECT(rc == TIDE_EMISMATCH, "got %s", tide_err_name(rc));
    free(in);
    free(out);
    still_works(comm);
}

static void mismatched_large_ring(void **state)
{
    setenv("TIDE_ALGO_ALLREDUCE", "ring", 1);
    assert_int_equal(harness_run(3, NULL, mismatch_large, NULL), 0);
    unsetenv("TIDE_ALGO_ALLREDUCE");
}

/* The barrier has one algorithm, but a misspelt TIDE_ALGO_BARRIER is
 * refused at the call like any other collective's, and nothing is sent:
 * the barrier after it, with the name fixed, pairs up as the first. */
static void barrier_bad_name(tide_comm *comm, void *arg)
{
    (void)arg;
    static char junk;
    tide_req *req = (tide_req *)&junk; /* not NULL: the call must clear it */
    int rc = tide_ibarrier(comm, &req);
    EXPECT(rc == TIDE_EINVAL && req == NULL, "a misspelt barrier gave %s", tide_err_name(rc));
    EXPECT(tide_barrier(comm) == TIDE_EINVAL, "the blocking form too");
    setenv("TIDE_ALGO_BARRIER", "dissemination", 1);
    EXPECT_OK(tide_ibarrier(comm, &req));
    EXPECT_OK(tide_wait(req, 10000));
    EXPECT(strcmp(tide_req_algorithm(req), "dissemination") == 0, "ran %s",
           tide_req_algorithm(req));
    tide_req_free(req);
    still_works(comm);
}

static void barrier_algorithm_name(void **state)
{
    setenv("TIDE_ALGO_BARRIER", "disemination", 1);
    assert_int_equal(harness_run(3, NULL, barrier_bad_name, NULL), 0);
    unsetenv("TIDE_ALGO_BARRIER");
}

/* Ranks configured with different algorithms would pair frames of
 * different patterns: it is a mismatch, named as such. */
static void algo_differs(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    setenv("TIDE_ALGO_ALLREDUCE", r == 0 ? "ring" : "recursive_doubling", 1);
    float in[1000] = {0}, out[1000];
    tide_req *req;
    EXPECT_OK(tide_iallreduce(comm, in, out, 1000, TIDE_FLOAT32, TIDE_SUM, &req));
    int rc = tide_wait(req, 10000);
    EXPECT(rc == TIDE_EMISMATCH, "got %s: %s", tide_err_name(rc), tide_req_message(req));
    EXPECT(strstr(tide_req_message(req), "[ring]") && strstr(tide_req_message(req), "[recursive_doubling]"),
           "the message should name both algorithms: %s", tide_req_message(req));
    tide_req_free(req);
    unsetenv("TIDE_ALGO_ALLREDUCE");
    still_works(comm);
}

static void mismatched_algorithm(void **state)
{
    assert_int_equal(harness_run(3, NULL, algo_differs, NULL), 0);
}

/* Rank 1 joins the allreduce only after the others' deadline (1 s): they
 * fail with TIDE_ETIMEDOUT, and so does rank 1 when it finally calls. */
static void late_rank(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    double t0 = now_s();
    if (r == 1) {
        struct timespec ts = {1, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int32_t in[16] = {0}, out[16];
    tide_req *req;
    EXPECT_OK(tide_iallreduce(comm, in, out, 16, TIDE_INT32, TIDE_SUM, &req));
    int rc = tide_wait(req, 10000);
    double took = now_s() - t0;
    EXPECT(rc == TIDE_ETIMEDOUT, "got %s: %s", tide_err_name(rc), tide_req_message(req));
    EXPECT(took < 4.0, "took %.2f s", took);
    tide_req_free(req);
}

static void deadline_everywhere(void **state)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.timeout_s = 1.0;
    assert_int_equal(harness_run(3, &o, late_rank, NULL), 0);
}

static int setup(void **state)
{
    setenv("TIDE_LOG_LEVEL", "0", 1);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mismatched_count), cmocka_unit_test(mismatched_dtype),
        cmocka_unit_test(mismatched_op),    cmocka_unit_test(mismatched_kind),
        cmocka_unit_test(mismatched_root),
        cmocka_unit_test(mismatched_vcounts),  cmocka_unit_test(mismatched_roots_all_send),
        cmocka_unit_test(mismatched_large_ring), cmocka_unit_test(barrier_algorithm_name),
        cmocka_unit_test(mismatched_algorithm), cmocka_unit_test(deadline_everywhere),
    };
    return cmocka_run_group_tests_name("collective failures over tcp", tests, setup, NULL);
}
