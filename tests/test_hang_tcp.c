/* test_hang_tcp.c - what the survivors of a hang or a loss are told, on
 * real rank processes: with one random rank stopped (SIGSTOP) before a
 * collective, every survivor's deadline error says what it waits for,
 * and the ranks that wait on the stopped one name it; with one random
 * rank killed, every survivor's error names the killed rank first, even
 * when the news reached it through a third rank. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#include "tests/harness.h"

#define RANKS 4
#define ROUNDS 40 /* collectives before the victim stops or dies */

/* Shared between the rank processes (mapped before the fork). */
struct shared {
    volatile int victim;
    int answered; /* survivors that have their error */
    volatile int named[RANKS]; /* survivor r's message named the victim as awaited */
    char message[RANKS][600];
};
static struct shared *shm;

/* Until every survivor has its error (at most 15 s).  A rank that leaves
 * first closes its connections, and a survivor still waiting would see
 * that close rather than the fault under test. */
static void wait_for_survivors(void)
{
    for (int i = 0; i < 1500 && __atomic_load_n(&shm->answered, __ATOMIC_SEQ_CST) < RANKS - 1;
         i++)
        harness_sleep_ms(10);
}

/* The stopped victim cannot end itself: a watchdog process kills it once
 * the survivors have answered, even if one of them failed its checks. */
static void stop_with_watchdog(void)
{
    pid_t victim = getpid();
    if (fork() == 0) {
        wait_for_survivors();
        kill(victim, SIGKILL);
        _exit(0);
    }
    raise(SIGSTOP);
}

/* The victim's part: some collectives, then stop or die before the next. */
static void run_until(tide_comm *comm, int sig)
{
    int r = tide_comm_rank(comm);
    for (int i = 0; i < ROUNDS; i++) {
        int32_t in[8] = {r}, out[8];
        EXPECT_OK(tide_allreduce(comm, in, out, 8, TIDE_INT32, TIDE_SUM));
    }
    if (r != shm->victim)
        return;
    if (sig == SIGSTOP)
        stop_with_watchdog();
    raise(SIGKILL);
}

/* Survivor: the collective the victim is missing fails; return its
 * message, once all survivors have theirs. */
static int missing_collective(tide_comm *comm, const char **msg)
{
    int r = tide_comm_rank(comm);
    int32_t in[8] = {r}, out[8];
    tide_req *req;
    EXPECT_OK(tide_iallreduce(comm, in, out, 8, TIDE_INT32, TIDE_SUM, &req));
    int rc = tide_wait(req, 20000);
    snprintf(shm->message[r], sizeof shm->message[r], "%s", tide_req_message(req));
    *msg = shm->message[r];
    tide_req_free(req);
    __atomic_add_fetch(&shm->answered, 1, __ATOMIC_SEQ_CST);
    wait_for_survivors();
    return rc;
}

static void stopped_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), v = shm->victim;
    run_until(comm, SIGSTOP);
    const char *msg;
    int rc = missing_collective(comm, &msg);
    fprintf(stderr, "rank %d: %s\n", r, msg);
    EXPECT(rc == TIDE_ETIMEDOUT, "got %s: %s", tide_err_name(rc), msg);
    /* Its own account or a peer's, each says what the rank waits for. */
    EXPECT(strstr(msg, "no data yet from rank") || strstr(msg, "sends not taken by rank"),
           "the error does not say what it waits for: %s", msg);
    EXPECT(strstr(msg, "allreduce of 8 int32 (sum)") && strstr(msg, "on comm 1, 32 bytes") &&
               (strstr(msg, " round ") || strstr(msg, "algorithm board at its ")) &&
               strstr(msg, "algorithm "),
           "the error does not describe the operation: %s", msg);
    char want[40];
    snprintf(want, sizeof want, "no data yet from rank %d", v);
    const char *here = strstr(msg, "here: ");
    shm->named[r] = strstr(here ? here : msg, want) != NULL;
    EXPECT_OK(tide_comm_abort(comm)); /* finalize would wait on the stopped rank */
}

/* Each survivor that talks to the victim directly in the collective's
 * first round (recursive doubling's partner, or the ring's neighbour)
 * must name it; which algorithm runs does not matter: at least one
 * survivor waits on the victim directly in any of them. */
static void stopped_rank_is_named(void **state)
{
    for (int trial = 0; trial < 3; trial++) {
        memset(shm, 0, sizeof *shm);
        shm->victim = rand() % RANKS;
        struct harness_opts o;
        harness_defaults(&o);
        o.timeout_s = 2;
        o.run_limit_s = 40;
        int failed = harness_run(RANKS, &o, stopped_body, NULL);
        assert_int_equal(failed, 1); /* the stopped rank, killed */
        int named = 0;
        for (int r = 0; r < RANKS; r++)
            named += shm->named[r];
        if (named == 0)
            fail_msg("victim %d named by no survivor; rank %d said: %s", shm->victim,
                     (shm->victim + 1) % RANKS, shm->message[(shm->victim + 1) % RANKS]);
    }
}

/* After "rank R: allreduce (seq N): ", the first rank a loss names. */
static int first_rank_named(const char *msg)
{
    const char *p = strstr(msg, "): ");
    int k;
    if (!p)
        return -1;
    p += 3;
    if (sscanf(p, "rank %d was lost", &k) == 1)
        return k;
    if (sscanf(p, "send to rank %d", &k) == 1 || sscanf(p, "receive from rank %d", &k) == 1 ||
        sscanf(p, "waiting for the board flag from rank %d", &k) == 1)
        return k;
    return -1;
}

static void killed_body(tide_comm *comm, void *arg)
{
    int v = shm->victim;
    run_until(comm, SIGKILL);
    const char *msg;
    int rc = missing_collective(comm, &msg);
    EXPECT(rc == TIDE_EPEER, "got %s: %s", tide_err_name(rc), msg);
    EXPECT(first_rank_named(msg) == v, "rank %d was killed, but the error says: %s", v, msg);
}

static void killed_rank_is_named_first(void **state)
{
    for (int trial = 0; trial < 6; trial++) {
        memset(shm, 0, sizeof *shm);
        shm->victim = rand() % RANKS;
        struct harness_opts o;
        harness_defaults(&o);
        o.timeout_s = 10;
        o.run_limit_s = 40;
        assert_int_equal(harness_run(RANKS, &o, killed_body, NULL), 1);
    }
}

int main(void)
{
    shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED)
        return 1;
    srand((unsigned)time(NULL));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stopped_rank_is_named),
        cmocka_unit_test(killed_rank_is_named_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
