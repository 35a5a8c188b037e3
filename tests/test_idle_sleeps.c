/* test_idle_sleeps.c - a rank with nothing to do sleeps: after work that
 * went through the progress thread (large nonblocking posts wake it),
 * 300 ms of idling costs a few milliseconds of CPU at most, on every
 * reactor, in jobs of one and two ranks, in both progress modes.  And a
 * sleeping progress thread wakes for a post even after a caller slept in
 * the ring beside it (see the second test).
 *
 * Why it is a test: the epoll backend's sleeper waits on the epoll fd,
 * which stays readable while an edge waits unreaped; in a job of one rank
 * only the wake-up eventfd made edges, nobody reaped them, and the idle
 * progress thread spun a whole core (294 ms of CPU in 300 ms). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#include <cmocka.h>

#include "tests/harness.h"

#define IDLE_MS 300
#define IDLE_CPU_MAX_MS 30 /* a spinning thread takes most of the 300 */

static double cpu_ms(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

static void work_then_idle(tide_comm *comm, void *arg)
{
    (void)arg;
    size_t n = 256 << 10; /* 1 MiB of floats: a post big enough to hand over */
    float *buf = calloc(n, sizeof *buf);
    EXPECT(buf, "calloc");
    for (int i = 0; i < 5; i++) {
        tide_req *req;
        EXPECT_OK(tide_iallreduce(comm, TIDE_IN_PLACE, buf, n, TIDE_FLOAT32, TIDE_SUM, &req));
        struct timespec pause = {0, 1000 * 1000}; /* let the progress thread take it */
        nanosleep(&pause, NULL);
        EXPECT_OK(tide_wait(req, 10000));
        tide_req_free(req);
    }
    EXPECT_OK(tide_barrier(comm));
    double t0 = cpu_ms();
    struct timespec idle = {0, IDLE_MS * 1000 * 1000};
    nanosleep(&idle, NULL);
    double used = cpu_ms() - t0;
    EXPECT(used < IDLE_CPU_MAX_MS, "%.1f ms of CPU in %d ms of idling on %s", used, IDLE_MS,
           tide_comm_reactor(comm));
    EXPECT_OK(tide_barrier(comm));
    free(buf);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void note_done(tide_req *req, void *arg)
{
    (void)req;
    atomic_store((_Atomic uint64_t *)arg, now_ns());
}

#define LATE_MS 8 /* the progress thread's sleep is capped at 20 ms */

/* The progress thread sleeps in the ring (idle); a caller's tide_wait
 * times out sleeping in the ring beside it; then a post large enough to
 * be handed over must start at once, not when the progress thread's
 * sleep runs out.  (The caller used to clear the shared "sleeping" flag
 * on its way out, and the post then woke nobody.) */
static void post_after_timed_out_wait(tide_comm *comm, void *arg)
{
    (void)arg;
    size_t n = 256 << 10; /* 1 MiB of floats: handed over */
    float *buf = calloc(n, sizeof *buf);
    EXPECT(buf, "calloc");
    for (int trial = 0; trial < 3; trial++) {
        harness_sleep_ms(3); /* the idle progress thread goes to sleep in the ring */
        int never = 0;
        tide_req *rx, *req;
        EXPECT_OK(tide_irecv(comm, &never, sizeof never, 0, 5, &rx));
        int rc = tide_wait(rx, 2);
        EXPECT(rc == TIDE_ETIMEDOUT, "the wait returned %s", tide_err_name(rc));
        _Atomic uint64_t done = 0;
        uint64_t t0 = now_ns();
        EXPECT_OK(tide_iallreduce(comm, TIDE_IN_PLACE, buf, n, TIDE_FLOAT32, TIDE_SUM, &req));
        EXPECT_OK(tide_req_on_complete(req, note_done, (void *)&done));
        harness_sleep_ms(3 * LATE_MS); /* no tide call: only the progress thread moves it */
        uint64_t at = atomic_load(&done);
        EXPECT(at && at - t0 < (uint64_t)LATE_MS * 1000000u,
               "trial %d: a handed-over allreduce completed %.1f ms after its post", trial,
               at ? (double)(at - t0) / 1e6 : -1.0);
        EXPECT_OK(tide_wait(req, 10000));
        tide_req_free(req);
        EXPECT_OK(tide_send(comm, &never, sizeof never, 0, 5));
        EXPECT_OK(tide_wait(rx, 10000));
        tide_req_free(rx);
    }
    free(buf);
}

static void posts_wake_a_progress_thread_a_caller_slept_beside(void **state)
{
    (void)state;
    struct harness_opts o;
    harness_defaults(&o);
    o.progress = TIDE_PROGRESS_THREAD;
    assert_int_equal(harness_run(1, &o, post_after_timed_out_wait, NULL), 0);
}

static void idle_ranks_sleep(void **state)
{
    (void)state;
    static const struct {
        const char *reactor; /* TIDE_REACTOR, read by the harness */
        int ranks;
        tide_progress_mode mode;
    } cases[] = {
        {"auto", 1, TIDE_PROGRESS_THREAD},  {"epoll", 1, TIDE_PROGRESS_THREAD},
        {"auto", 2, TIDE_PROGRESS_THREAD},  {"epoll", 2, TIDE_PROGRESS_THREAD},
        {"epoll", 1, TIDE_PROGRESS_INLINE}, {"epoll", 2, TIDE_PROGRESS_INLINE},
    };
    const char *was = getenv("TIDE_REACTOR");
    char *saved = was ? strdup(was) : NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("TIDE_REACTOR", cases[i].reactor, 1);
        struct harness_opts o;
        harness_defaults(&o);
        o.progress = cases[i].mode;
        int failed = harness_run(cases[i].ranks, &o, work_then_idle, NULL);
        if (failed)
            fail_msg("%s, %d ranks, %s progress: %d ranks failed", cases[i].reactor,
                     cases[i].ranks, cases[i].mode == TIDE_PROGRESS_INLINE ? "inline" : "thread",
                     failed);
    }
    if (saved)
        setenv("TIDE_REACTOR", saved, 1);
    else
        unsetenv("TIDE_REACTOR");
    free(saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idle_ranks_sleep),
        cmocka_unit_test(posts_wake_a_progress_thread_a_caller_slept_beside),
    };
    return cmocka_run_group_tests_name("idle ranks sleep", tests, NULL, NULL);
}
