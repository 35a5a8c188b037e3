/* test_idle_sleeps.c - a rank with nothing to do sleeps: after work that
 * went through the progress thread (large nonblocking posts wake it),
 * 300 ms of idling costs a few milliseconds of CPU at most, on every
 * reactor, in jobs of one and two ranks, in both progress modes.
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
    };
    return cmocka_run_group_tests_name("idle ranks sleep", tests, NULL, NULL);
}
