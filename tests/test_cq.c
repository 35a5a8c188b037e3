/* test_cq.c - completion queues (tide.h, tide_cq_*): tags come back once
 * each, in completion order, only for requests that test done; failures
 * come back too; waits time out, interrupts wake them, and a queue with
 * attached requests refuses to be destroyed.  Over the simulated network
 * (deterministic: completions happen inside tide_sim_run), then over TCP
 * with the progress thread, where a waiter blocks until the reactor
 * completes the requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/harness.h"
#include "tide.h"
#include "tide_sim.h"

enum { N = 4, COUNT = 64 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void test_arguments(void **state)
{
    (void)state;
    tide_cq *cq = NULL;
    uint64_t tag;
    assert_int_equal(tide_cq_create(NULL), TIDE_EINVAL);
    assert_int_equal(tide_cq_create(&cq), 0);
    assert_int_equal(tide_cq_attach(cq, NULL, 1), TIDE_EINVAL);
    assert_int_equal(tide_cq_wait(cq, NULL, 1, 0), TIDE_EINVAL);
    assert_int_equal(tide_cq_wait(cq, &tag, 0, 0), TIDE_EINVAL);
    assert_int_equal(tide_cq_interrupt(NULL), TIDE_EINVAL);
    assert_int_equal(tide_cq_destroy(cq), 0);
    assert_int_equal(tide_cq_destroy(NULL), 0);
}

/* Every rank posts an allreduce; rank r's tag is 100 + r.  Nothing is
 * queued before the network runs, all four tags after, each once. */
static void test_sim_allreduce_tags(void **state)
{
    (void)state;
    tide_sim *sim;
    tide_comm *comms[N];
    float buf[N][COUNT];
    tide_req *req[N];
    tide_cq *cq;
    assert_int_equal(tide_sim_create(N, NULL, &sim, comms), 0);
    assert_int_equal(tide_cq_create(&cq), 0);
    for (int r = 0; r < N; r++) {
        for (int i = 0; i < COUNT; i++)
            buf[r][i] = (float)(r + 1);
        assert_int_equal(tide_iallreduce(comms[r], TIDE_IN_PLACE, buf[r], COUNT, TIDE_FLOAT32,
                                         TIDE_SUM, &req[r]), 0);
        assert_int_equal(tide_cq_attach(cq, req[r], 100 + (uint64_t)r), 0);
    }
    /* The callback slot is taken now. */
    assert_int_equal(tide_cq_attach(cq, req[0], 7), TIDE_EBUSY);
    uint64_t tags[2 * N];
    assert_int_equal(tide_cq_wait(cq, tags, 2 * N, 0), 0);
    assert_int_equal(tide_cq_destroy(cq), TIDE_EBUSY);
    assert_int_equal(tide_sim_run(sim), 0);

    /* max bounds each call: 3, then the last one, then none. */
    int got = tide_cq_wait(cq, tags, 3, 0);
    assert_int_equal(got, 3);
    assert_int_equal(tide_cq_wait(cq, tags + 3, 2 * N, 0), 1);
    assert_int_equal(tide_cq_wait(cq, tags, 1, 0), 0);
    unsigned seen = 0;
    for (int i = 0; i < N; i++) {
        uint64_t t = tags[i];
        assert_true(t >= 100 && t < 100 + N);
        seen |= 1u << (t - 100);
    }
    assert_int_equal(seen, (1u << N) - 1);
    for (int r = 0; r < N; r++) {
        int done = 0;
        assert_int_equal(tide_test(req[r], &done), 0);
        assert_int_equal(done, 1);
        assert_true(buf[r][COUNT - 1] == 10.0f);
        tide_req_free(req[r]);
    }
    assert_int_equal(tide_cq_destroy(cq), 0);
    tide_sim_destroy(sim);
}

/* A receive whose sender crashed fails, and its tag still comes back,
 * with the request's error to read. */
static void test_sim_failure_is_queued(void **state)
{
    (void)state;
    tide_sim *sim;
    tide_comm *comms[2];
    tide_cq *cq;
    char byte;
    tide_req *rx;
    assert_int_equal(tide_sim_create(2, NULL, &sim, comms), 0);
    assert_int_equal(tide_cq_create(&cq), 0);
    assert_int_equal(tide_irecv(comms[0], &byte, 1, 1, 0, &rx), 0);
    assert_int_equal(tide_cq_attach(cq, rx, 42), 0);
    assert_int_equal(tide_sim_crash(sim, 1, 0), 0);
    assert_int_equal(tide_sim_run(sim), 0);
    uint64_t tag = 0;
    assert_int_equal(tide_cq_wait(cq, &tag, 1, 0), 1);
    assert_int_equal(tag, 42);
    int done = 0;
    assert_int_equal(tide_test(rx, &done), TIDE_EPEER);
    assert_int_equal(done, 1);
    assert_true(strlen(tide_req_message(rx)) > 0);
    tide_req_free(rx);
    assert_int_equal(tide_cq_destroy(cq), 0);
    tide_sim_destroy(sim);
}

static void test_timeout_and_interrupt(void **state)
{
    (void)state;
    tide_cq *cq;
    uint64_t tag;
    assert_int_equal(tide_cq_create(&cq), 0);
    double t0 = now_s();
    assert_int_equal(tide_cq_wait(cq, &tag, 1, 50), 0);
    double waited = now_s() - t0;
    assert_true(waited >= 0.045);
    assert_true(waited < 5.0);
    /* An interrupt before the wait makes it return at once, even with no
     * limit, and is consumed by it. */
    assert_int_equal(tide_cq_interrupt(cq), 0);
    assert_int_equal(tide_cq_wait(cq, &tag, 1, -1), 0);
    t0 = now_s();
    assert_int_equal(tide_cq_wait(cq, &tag, 1, 20), 0);
    assert_true(now_s() - t0 >= 0.015);
    assert_int_equal(tide_cq_destroy(cq), 0);
}

/* Thread progress over TCP: many collectives in flight on every rank,
 * one waiter collects all their tags, blocking in between. */
enum { INFLIGHT = 32 };

static void tcp_body(tide_comm *comm, void *arg)
{
    (void)arg;
    static int32_t buf[INFLIGHT][COUNT];
    tide_req *req[INFLIGHT];
    tide_cq *cq;
    int n = tide_comm_size(comm);
    EXPECT_OK(tide_cq_create(&cq));
    for (int k = 0; k < INFLIGHT; k++) {
        for (int i = 0; i < COUNT; i++)
            buf[k][i] = k + i;
        EXPECT_OK(tide_iallreduce(comm, TIDE_IN_PLACE, buf[k], COUNT, TIDE_INT32, TIDE_SUM,
                                  &req[k]));
        EXPECT_OK(tide_cq_attach(cq, req[k], (uint64_t)k));
    }
    int seen[INFLIGHT] = {0}, total = 0;
    double give_up = now_s() + 30;
    while (total < INFLIGHT && now_s() < give_up) {
        uint64_t tags[8];
        int got = tide_cq_wait(cq, tags, 8, 1000);
        EXPECT(got >= 0, "tide_cq_wait returned %d", got);
        for (int i = 0; i < got; i++) {
            EXPECT(tags[i] < INFLIGHT && !seen[tags[i]], "tag %llu twice or unknown",
                   (unsigned long long)tags[i]);
            seen[tags[i]] = 1;
            int done = 0;
            EXPECT_OK(tide_test(req[tags[i]], &done));
            EXPECT(done == 1, "tag %d returned before its request tests done", (int)tags[i]);
            EXPECT(buf[tags[i]][1] == n * ((int)tags[i] + 1), "wrong sum");
            total++;
        }
    }
    EXPECT(total == INFLIGHT, "only %d of %d tags came back", total, INFLIGHT);
    for (int k = 0; k < INFLIGHT; k++)
        tide_req_free(req[k]);
    EXPECT_OK(tide_cq_destroy(cq));
}

static void test_tcp_thread_progress(void **state)
{
    (void)state;
    struct harness_opts o;
    harness_defaults(&o);
    o.progress = TIDE_PROGRESS_THREAD;
    assert_int_equal(harness_run(3, &o, tcp_body, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_sim_allreduce_tags),
        cmocka_unit_test(test_sim_failure_is_queued),
        cmocka_unit_test(test_timeout_and_interrupt),
        cmocka_unit_test(test_tcp_thread_progress),
    };
    return cmocka_run_group_tests_name("cq", tests, NULL, NULL);
}
