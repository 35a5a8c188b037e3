/* test_hier.c - the hierarchical all-reduce (collectives/hier.c) over
 * test hosts made on this machine (TIDE_TEST_HOST_SIZE: shared memory
 * inside a host, TCP between): chosen exactly where the ranks are spread
 * evenly over hosts and the vector is large enough, and staged inside a
 * one-host sub-communicator of a multi-host job; exact results at every
 * size, dtype and op when forced; many in flight beside other
 * collectives; a rank killed mid-way fails the others with TIDE_EPEER;
 * a rank that never calls fails the others at their deadline with an
 * account that names the part they were in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/harness.h"

/* Run body on n ranks in test hosts of host_size ranks (shm inside). */
static int run_hosts(int n, int host_size, double timeout_s, harness_body body, void *arg)
{
    struct harness_opts o;
    harness_defaults(&o);
    if (timeout_s > 0)
        o.timeout_s = timeout_s;
    char k[16];
    snprintf(k, sizeof k, "%d", host_size);
    setenv("TIDE_TRANSPORT", "shm", 1);
    setenv("TIDE_TEST_HOST_SIZE", k, 1);
    int failed = harness_run(n, &o, body, arg);
    unsetenv("TIDE_TEST_HOST_SIZE");
    unsetenv("TIDE_TRANSPORT");
    return failed;
}

/* An int32 all-reduce (sum) of count elements on comm; the algorithm
 * that ran, copied to algo.  Every element is checked. */
static void sum_and_check(tide_comm *comm, size_t count, char *algo, size_t len)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int32_t *v = malloc((count ? count : 1) * sizeof *v);
    EXPECT(v, "malloc");
    for (size_t i = 0; i < count; i++)
        v[i] = r + 1 + (int32_t)(i % 11);
    tide_req *req;
    EXPECT_OK(tide_iallreduce(comm, TIDE_IN_PLACE, v, count, TIDE_INT32, TIDE_SUM, &req));
    EXPECT_OK(tide_wait(req, 30000));
    snprintf(algo, len, "%s", tide_req_algorithm(req));
    tide_req_free(req);
    for (size_t i = 0; i < count; i++) {
        int32_t want = n * (n + 1) / 2 + n * (int32_t)(i % 11);
        if (v[i] != want) {
            EXPECT(0, "rank %d of %d: element %zu of %zu is %d, want %d (%s)", r, n, i, count,
                   v[i], want, algo);
            break;
        }
    }
    free(v);
}

static int host_size; /* as run_hosts was told, for the bodies */

/* world: hier from 64 KiB, not below; a host's ranks (split by host):
 * staged; one rank per host (split by place): neither. */
static void chooses(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    bool even = n % host_size == 0 && n / host_size >= 2 && host_size >= 2;
    char algo[32];
    sum_and_check(comm, 100, algo, sizeof algo);
    EXPECT(strcmp(algo, "hier"), "rank %d: 400 bytes ran hier", r);
    sum_and_check(comm, (size_t)1 << 18, algo, sizeof algo);
    EXPECT(even == !strcmp(algo, "hier"), "rank %d: 1 MiB over %d hosts of %d ranks ran %s", r,
           (n + host_size - 1) / host_size, host_size, algo);

    tide_comm *host, *place;
    EXPECT_OK(tide_comm_split(comm, r / host_size, r, &host));
    EXPECT_OK(tide_comm_split(comm, r % host_size, r, &place));
    sum_and_check(host, (size_t)1 << 18, algo, sizeof algo);
    bool alone = tide_comm_size(host) == 1;
    EXPECT(alone || !strcmp(algo, "shm"), "rank %d: 1 MiB inside a host ran %s", r, algo);
    sum_and_check(place, (size_t)1 << 18, algo, sizeof algo);
    EXPECT(strcmp(algo, "hier") && strcmp(algo, "shm"), "rank %d: one per host ran %s", r, algo);
    EXPECT_OK(tide_comm_free(host));
    EXPECT_OK(tide_comm_free(place));
}

static void chosen_where_hosts_are_even(void **state)
{
    host_size = 2;
    assert_int_equal(run_hosts(4, 2, 0, chooses, NULL), 0);
    assert_int_equal(run_hosts(6, 2, 0, chooses, NULL), 0);
    host_size = 3; /* 3 + 1: uneven, flat */
    assert_int_equal(run_hosts(4, 3, 0, chooses, NULL), 0);
}

/* Forced at every size, in every reducing op, float and integer, in
 * place and not: exact values (inputs are small integers). */
static void forced_everywhere(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    static const size_t counts[] = {0, 1, 2, 3, 5, 13, 1000, 65537};
    static const tide_op ops[] = {TIDE_SUM, TIDE_AVG, TIDE_MAX, TIDE_MIN, TIDE_PROD};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t count = counts[c];
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                double *in = malloc((count + 1) * sizeof *in), *out = malloc((count + 1) * sizeof *out);
                EXPECT(in && out, "malloc");
                for (size_t i = 0; i < count; i++)
                    in[i] = out[i] = (double)((r + (int)i) % 3 + 1);
                tide_req *req;
                EXPECT_OK(tide_iallreduce(comm, in_place ? TIDE_IN_PLACE : in, out, count,
                                          TIDE_FLOAT64, ops[o], &req));
                EXPECT_OK(tide_wait(req, 30000));
                EXPECT(!strcmp(tide_req_algorithm(req), "hier"), "ran %s",
                       tide_req_algorithm(req));
                tide_req_free(req);
                for (size_t i = 0; i < count; i++) {
                    double sum = 0, mx = 0, mn = 4, prod = 1;
                    for (int q = 0; q < n; q++) {
                        double x = (double)((q + (int)i) % 3 + 1);
                        sum += x, prod *= x;
                        mx = x > mx ? x : mx;
                        mn = x < mn ? x : mn;
                    }
                    double want = ops[o] == TIDE_SUM ? sum : ops[o] == TIDE_AVG ? sum / n
                                : ops[o] == TIDE_MAX ? mx : ops[o] == TIDE_MIN ? mn : prod;
                    if (out[i] != want) {
                        EXPECT(0, "rank %d: count %zu, %s, %s: element %zu is %g, want %g", r,
                               count, tide_op_name(ops[o]), in_place ? "in place" : "separate",
                               i, out[i], want);
                        break;
                    }
                }
                free(in);
                free(out);
            }
        }
    }
}

static void forced_at_every_size_and_op(void **state)
{
    setenv("TIDE_ALGO_ALLREDUCE", "hier", 1);
    assert_int_equal(run_hosts(4, 2, 0, forced_everywhere, NULL), 0);
    assert_int_equal(run_hosts(6, 3, 0, forced_everywhere, NULL), 0);
    unsetenv("TIDE_ALGO_ALLREDUCE");
}

#define INFLIGHT 12

/* Hierarchical all-reduces in flight beside broadcasts and all-gathers
 * on the world and on a host's communicator, waited for in reverse. */
static void together(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t count = ((size_t)1 << 17) + 3;
    tide_comm *host;
    EXPECT_OK(tide_comm_split(comm, r / 2, r, &host));
    float *buf[INFLIGHT];
    tide_req *req[INFLIGHT];
    for (int k = 0; k < INFLIGHT; k++) {
        buf[k] = malloc(count * (size_t)n * sizeof(float));
        EXPECT(buf[k], "malloc");
        size_t at = k % 4 == 3 ? (size_t)r * count : 0;
        for (size_t i = 0; i < count; i++)
            buf[k][at + i] = (float)(r * 7 + (int)(i % 13) + k);
    }
    for (int k = 0; k < INFLIGHT; k++) {
        if (k % 4 == 0 || k % 4 == 2)
            EXPECT_OK(tide_iallreduce(k % 4 ? host : comm, TIDE_IN_PLACE, buf[k], count,
                                      TIDE_FLOAT32, TIDE_SUM, &req[k]));
        else if (k % 4 == 1)
            EXPECT_OK(tide_ibroadcast(comm, buf[k], count, TIDE_FLOAT32, k % n, &req[k]));
        else
            EXPECT_OK(tide_iallgather(comm, TIDE_IN_PLACE, buf[k], count, TIDE_FLOAT32, &req[k]));
    }
    for (int k = INFLIGHT - 1; k >= 0; k--) {
        int rc = tide_wait(req[k], 30000);
        EXPECT(rc == 0, "rank %d: op %d: %s", r, k, tide_req_message(req[k]));
        if (k % 4 == 0)
            EXPECT(!strcmp(tide_req_algorithm(req[k]), "hier"), "op %d ran %s", k,
                   tide_req_algorithm(req[k]));
        tide_req_free(req[k]);
        int hn = tide_comm_size(host), h0 = r / 2 * 2;
        for (size_t i = 0; i < count * (size_t)(k % 4 == 3 ? n : 1); i++) {
            int q = (int)(i / count);
            size_t j = i % count;
            float base = (float)((int)(j % 13) + k);
            float want = k % 4 == 0   ? 7.0f * (float)(n * (n - 1) / 2) + (float)n * base
                       : k % 4 == 2   ? 7.0f * (float)(hn * h0 + hn * (hn - 1) / 2) + (float)hn * base
                       : k % 4 == 1   ? (float)((k % n) * 7) + base
                                      : (float)(q * 7) + base;
            if (buf[k][i] != want) {
                EXPECT(0, "rank %d, op %d, element %zu: %g, want %g", r, k, i,
                       (double)buf[k][i], (double)want);
                break;
            }
        }
        free(buf[k]);
    }
    EXPECT_OK(tide_comm_free(host));
}

static void many_in_flight_beside_other_collectives(void **state)
{
    assert_int_equal(run_hosts(4, 2, 0, together, NULL), 0);
}

/* Large and small hierarchical all-reduces in flight: a small one's
 * parts become ready before the large one's before it, and must still
 * start in number order on every communicator of the hierarchy (a frame
 * for a part not yet started would otherwise be taken for a mismatch). */
static void sizes_in_flight(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    enum { OPS = 16 };
    size_t count[OPS];
    int32_t *buf[OPS];
    tide_req *req[OPS];
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < OPS; k++) {
            count[k] = k % 2 ? (size_t)16 << 10 : (size_t)512 << 10; /* 64 KiB, 2 MiB */
            buf[k] = malloc(count[k] * sizeof *buf[k]);
            EXPECT(buf[k], "malloc");
            for (size_t i = 0; i < count[k]; i++)
                buf[k][i] = r + k + (int32_t)(i % 5);
            EXPECT_OK(tide_iallreduce(comm, TIDE_IN_PLACE, buf[k], count[k], TIDE_INT32, TIDE_SUM,
                                      &req[k]));
        }
        for (int k = 0; k < OPS; k++) {
            int rc = tide_wait(req[k], 30000);
            EXPECT(rc == 0, "rank %d: op %d: %s", r, k, tide_req_message(req[k]));
            EXPECT(!strcmp(tide_req_algorithm(req[k]), "hier"), "op %d ran %s", k,
                   tide_req_algorithm(req[k]));
            tide_req_free(req[k]);
            for (size_t i = 0; i < count[k]; i++) {
                int32_t want = n * (n - 1) / 2 + n * (k + (int32_t)(i % 5));
                if (buf[k][i] != want) {
                    EXPECT(0, "rank %d, op %d, element %zu: %d, want %d", r, k, i, buf[k][i], want);
                    break;
                }
            }
            free(buf[k]);
        }
    }
}

static void large_and_small_in_flight(void **state)
{
    assert_int_equal(run_hosts(4, 2, 0, sizes_in_flight, NULL), 0);
}

/* Rank 3 dies while a 64 MiB hierarchical all-reduce runs: every other
 * rank fails with TIDE_EPEER (those on the other host too, whose parts
 * never met rank 3), and the next call on the communicator fails. */
static void rank_killed_mid_hierarchical_allreduce(void **state)
{
    struct harness_kill k = {3, 5, "hier"};
    assert_int_equal(run_hosts(4, 2, 0, harness_killed_mid_allreduce, &k), 1); /* the killed rank */
}

/* Rank 0 never calls: the others fail at their deadline (one second
 * here), saying which part they were in. */
static void one_never_calls(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    size_t count = (size_t)1 << 18;
    float *v = calloc(count, sizeof *v);
    EXPECT(v, "calloc");
    if (r == 0) {
        struct timespec pause = {3, 0}; /* past the others' deadline */
        nanosleep(&pause, NULL);
    } else {
        tide_req *req;
        EXPECT_OK(tide_iallreduce(comm, TIDE_IN_PLACE, v, count, TIDE_FLOAT32, TIDE_SUM, &req));
        int rc = tide_wait(req, 20000);
        EXPECT(rc == TIDE_ETIMEDOUT, "rank %d: returned %s: %s", r, tide_err_name(rc),
               tide_req_message(req));
        EXPECT(strstr(tide_req_message(req), "inside the host") ||
                   strstr(tide_req_message(req), "across hosts"),
               "rank %d: the account names no part: %s", r, tide_req_message(req));
        tide_req_free(req);
    }
    free(v);
}

static void a_rank_that_never_calls_times_the_others_out(void **state)
{
    assert_int_equal(run_hosts(4, 2, 1.0, one_never_calls, NULL), 0);
}

int main(void)
{
    /* tools/test.sh's runs set these for the harness's own check; this
     * file sets the hosts itself. */
    unsetenv("TIDE_EXPECT_TRANSPORT");
    unsetenv("TIDE_TEST_HOST_SIZE");
    unsetenv("TIDE_ALGO_ALLREDUCE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chosen_where_hosts_are_even),
        cmocka_unit_test(forced_at_every_size_and_op),
        cmocka_unit_test(many_in_flight_beside_other_collectives),
        cmocka_unit_test(large_and_small_in_flight),
        cmocka_unit_test(rank_killed_mid_hierarchical_allreduce),
        cmocka_unit_test(a_rank_that_never_calls_times_the_others_out),
    };
    return cmocka_run_group_tests_name("hierarchical collectives", tests, NULL, NULL);
}
