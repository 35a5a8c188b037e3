/* test_shrink_tcp.c - recovery on real rank processes: 4 ranks run
 * collectives in the ULFM loop of tide.h (agree after each step; on a
 * failure revoke, shrink, redo the step) while one rank is killed at a
 * random step after a random delay.  Every survivor must finish, with
 * right results, the same member list (the three survivors) and the
 * same number of shrinks.  A stopped rank is not detected: the
 * survivors' agreement fails at its deadline instead of hanging.
 *
 * TIDE_SHRINK_TRIALS sets the number of kill trials (default 20). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#include "harness.h"
#include "ulfm_step.h"

enum { N = 4, STEPS = 40 };

struct shared {
    int victim, kill_step, kill_delay_us;
    int stop; /* SIGSTOP the victim instead of killing it */
    double kill_time;
    struct {
        int done, rc, shrinks, nmembers, members[N];
        double recovered; /* when the shrink that dropped the victim returned */
    } out[N];
};

static struct shared *shm;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One step: an allreduce, a broadcast or an allgather (by step), with
 * its result checked against comm's members (world ranks in members). */
static int run_step(tide_comm *comm, int step, int wr, int *members, int *n)
{
    int32_t me = wr, all[N];
    int rc = tide_allgather(comm, &me, all, 1, TIDE_INT32);
    if (rc)
        return rc;
    *n = tide_comm_size(comm);
    int32_t sum = 0, v = (wr + 1) * (step + 1);
    for (int i = 0; i < *n; i++) {
        members[i] = all[i];
        sum += (all[i] + 1) * (step + 1);
    }
    if (step % 2 == 0) {
        rc = tide_allreduce(comm, TIDE_IN_PLACE, &v, 1, TIDE_INT32, TIDE_SUM);
        EXPECT(rc || v == sum, "step %d: allreduce %d, not %d", step, v, sum);
    } else {
        int root = step % *n;
        rc = tide_broadcast(comm, &v, 1, TIDE_INT32, root);
        EXPECT(rc || v == (all[root] + 1) * (step + 1), "step %d: broadcast gave %d", step, v);
    }
    return rc;
}

static void body(tide_comm *world, void *arg)
{
    (void)arg;
    int wr = tide_comm_rank(world), members[N], n = 0, shrinks = 0;
    tide_comm *comm = world;
    for (int step = 0; step < STEPS;) {
        if (wr == shm->victim && step == shm->kill_step) {
            struct timespec d = {0, shm->kill_delay_us * 1000L};
            nanosleep(&d, NULL);
            shm->kill_time = now_s();
            raise(shm->stop ? SIGSTOP : SIGKILL);
        }
        int rc = run_step(comm, step, wr, members, &n);
        if ((rc = ulfm_after_step(&comm, world, rc)) == 1) {
            step++;
            continue;
        }
        if (rc) {
            shm->out[wr].rc = rc;
            return; /* the stopped case: checked by the parent */
        }
        shm->out[wr].recovered = now_s();
        shrinks++;
    }
    shm->out[wr].shrinks = shrinks;
    shm->out[wr].nmembers = n;
    memcpy(shm->out[wr].members, members, sizeof members);
    shm->out[wr].done = 1;
    if (comm != world)
        EXPECT_OK(tide_comm_free(comm));
}

static void kill_trials(void **state)
{
    (void)state;
    const char *env = getenv("TIDE_SHRINK_TRIALS");
    int trials = env ? atoi(env) : 20;
    double worst = 0, total = 0;
    srand((unsigned)time(NULL));
    for (int t = 0; t < trials; t++) {
        memset(shm, 0, sizeof *shm);
        shm->victim = rand() % N;
        shm->kill_step = rand() % STEPS;
        shm->kill_delay_us = rand() % 2000;
        struct harness_opts o;
        harness_defaults(&o);
        o.timeout_s = 10;
        int failed = harness_run(N, &o, body, NULL);
        assert_int_equal(failed, 1); /* the victim, killed */
        int expect[N - 1], k = 0;
        for (int r = 0; r < N; r++)
            if (r != shm->victim)
                expect[k++] = r;
        double slowest = 0;
        for (int r = 0; r < N; r++) {
            if (r == shm->victim)
                continue;
            if (!shm->out[r].done)
                fail_msg("trial %d: rank %d did not finish (%s)", t, r,
                         tide_err_name(shm->out[r].rc));
            assert_int_equal(shm->out[r].nmembers, N - 1);
            assert_memory_equal(shm->out[r].members, expect, sizeof expect);
            assert_int_equal(shm->out[r].shrinks, 1);
            double lag = shm->out[r].recovered - shm->kill_time;
            slowest = lag > slowest ? lag : slowest;
        }
        worst = slowest > worst ? slowest : worst;
        total += slowest;
    }
    printf("%d kill trials: recovery (kill to the last survivor's shrink) mean %.1f ms, "
           "worst %.1f ms\n", trials, 1e3 * total / (trials ? trials : 1), 1e3 * worst);
}

/* A stopped rank answers nothing and keeps its connections: the
 * survivors' agreement must end at its deadline, with TIDE_ETIMEDOUT. */
static void stopped_rank_times_out(void **state)
{
    (void)state;
    memset(shm, 0, sizeof *shm);
    shm->victim = 2;
    shm->kill_step = 3;
    shm->stop = 1;
    struct harness_opts o;
    harness_defaults(&o);
    o.timeout_s = 1;
    o.run_limit_s = 6; /* then the stopped rank is killed */
    /* The stopped rank, and the run limit that killed it. */
    assert_int_equal(harness_run(N, &o, body, NULL), 2);
    for (int r = 0; r < N; r++)
        if (r != shm->victim)
            assert_int_equal(shm->out[r].rc, TIDE_ETIMEDOUT);
}

int main(void)
{
    shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kill_trials),
        cmocka_unit_test(stopped_rank_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
