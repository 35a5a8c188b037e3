/* test_board_shm.c - the board collectives (collectives/board.h) over
 * shared memory, beyond the collectives matrix (which forces them on 2,
 * 3, 4 and 8 ranks): many in flight on several communicators between
 * message collectives, more communicators made and freed than a rank has
 * boards, a rank killed while its peers wait on its flag, a late rank
 * (and the doorbell its publication rings), mismatched calls between
 * two boards and between a board and a message algorithm, the direct
 * path of blocking calls and its hand-overs (and the progress thread
 * taking over after it), collectives whose result
 * goes where a rank's input is, the choice of algorithm as the
 * environment changes, a broadcast's root that ends once published
 * (running ahead of its readers; mismatched roots told late; on 2
 * ranks up to six broadcasts ahead, mismatches found after), the
 * stream of 2-rank broadcasts, reduces, gathers and scatters (its ring
 * filled and held, reused, woken, and every kind of mismatch it finds),
 * and 16 ranks (oversubscribed here). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/context.h"
#include "tests/harness.h"

static int run_on_shm_with(int n, double timeout_s, tide_progress_mode progress,
                           harness_body body, void *arg)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.progress = progress;
    o.timeout_s = timeout_s;
    o.run_limit_s = 120;
    if (n > 2)
        o.spin_us = 0; /* more ranks than cores */
    setenv("TIDE_TRANSPORT", "shm", 1);
    int failed = harness_run(n, &o, body, arg);
    unsetenv("TIDE_TRANSPORT");
    return failed;
}

static int run_on_shm(int n, double timeout_s, harness_body body, void *arg)
{
    return run_on_shm_with(n, timeout_s, TIDE_PROGRESS_THREAD, body, arg);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void expect_algo(tide_req *req, const char *want)
{
    EXPECT(!strcmp(tide_req_algorithm(req), want), "ran %s, not %s", tide_req_algorithm(req),
           want);
}

/* ---- many in flight ---- */

#define FLIGHT 100

/* FLIGHT small all-reduces posted at once on world and on two halves,
 * with a large one (a message algorithm) between every tenth: each
 * board collective waits its turn on its communicator, and every result
 * is right. */
static void in_flight_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    tide_comm *half = NULL, *odd = NULL;
    EXPECT_OK(tide_comm_split(world, r % 2, r, &half));
    EXPECT_OK(tide_comm_split(world, r < n / 2, -r, &odd));
    tide_comm *comms[3] = {world, half, odd};
    static int32_t in[3][FLIGHT][5], out[3][FLIGHT][5];
    static float big_in[FLIGHT / 10][200000], big_out[FLIGHT / 10][200000];
    tide_req *req[3][FLIGHT], *big[FLIGHT / 10];
    for (int i = 0; i < FLIGHT; i++) {
        for (int c = 0; c < 3; c++) {
            for (int e = 0; e < 5; e++)
                in[c][i][e] = tide_comm_rank(comms[c]) * 1000 + i * 5 + e;
            EXPECT_OK(tide_iallreduce(comms[c], in[c][i], out[c][i], 5, TIDE_INT32, TIDE_SUM,
                                      &req[c][i]));
        }
        if (i % 10 == 0) {
            for (int e = 0; e < 200000; e++)
                big_in[i / 10][e] = (float)(r + e % 7);
            EXPECT_OK(tide_iallreduce(world, big_in[i / 10], big_out[i / 10], 200000,
                                      TIDE_FLOAT32, TIDE_SUM, &big[i / 10]));
        }
    }
    for (int c = 0; c < 3; c++) {
        int m = tide_comm_size(comms[c]);
        for (int i = 0; i < FLIGHT; i++) {
            EXPECT_OK(tide_wait(req[c][i], -1));
            expect_algo(req[c][i], "board");
            tide_req_free(req[c][i]);
            for (int e = 0; e < 5; e++)
                EXPECT(out[c][i][e] == 1000 * m * (m - 1) / 2 + m * (i * 5 + e),
                       "comm %d op %d element %d: %d", c, i, e, out[c][i][e]);
        }
    }
    for (int i = 0; i < FLIGHT / 10; i++) {
        EXPECT_OK(tide_wait(big[i], -1));
        EXPECT(strncmp(tide_req_algorithm(big[i]), "board", 5) != 0, "800 KB ran on a board");
        tide_req_free(big[i]);
        for (int e = 0; e < 200000; e += 999)
            EXPECT(big_out[i][e] == (float)(n * (n - 1) / 2 + n * (e % 7)), "big %d elem %d", i,
                   e);
    }
    EXPECT_OK(tide_comm_free(half));
    EXPECT_OK(tide_comm_free(odd));
}

static void many_in_flight_on_three_comms(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(4, 30, in_flight_body, NULL), 0);
}

/* ---- more communicators than boards ---- */

/* 600 communicators, each made, used for board collectives of all four
 * kinds and freed: boards of freed ones are reused (a rank has 256), and
 * never while a former peer may still read them. */
static void churn_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    for (int k = 0; k < 600; k++) {
        tide_comm *c = NULL;
        EXPECT_OK(tide_comm_split(world, 0, (r + k) % n, &c));
        int m = tide_comm_size(c), cr = tide_comm_rank(c);
        int64_t v = cr + k, sum = -1, all[8] = {0}, rs_in[8], rs = -1, b = cr == k % m ? k : -1;
        tide_req *req;
        EXPECT_OK(tide_iallreduce(c, &v, &sum, 1, TIDE_INT64, TIDE_SUM, &req));
        EXPECT_OK(tide_wait(req, -1));
        expect_algo(req, "board");
        tide_req_free(req);
        EXPECT(sum == (int64_t)m * (m - 1) / 2 + (int64_t)m * k, "comm %d: sum %lld", k,
               (long long)sum);
        EXPECT_OK(tide_allgather(c, &v, all, 1, TIDE_INT64));
        for (int q = 0; q < m; q++)
            EXPECT(all[q] == q + k, "comm %d: all-gather block %d is %lld", k, q,
                   (long long)all[q]);
        for (int q = 0; q < m; q++)
            rs_in[q] = q * 10 + cr;
        EXPECT_OK(tide_reduce_scatter(c, rs_in, &rs, 1, TIDE_INT64, TIDE_SUM));
        EXPECT(rs == (int64_t)cr * 10 * m + (int64_t)m * (m - 1) / 2, "comm %d: rs %lld", k,
               (long long)rs);
        setenv("TIDE_ALGO_BROADCAST", "board", 1);
        EXPECT_OK(tide_broadcast(c, &b, 1, TIDE_INT64, k % m));
        unsetenv("TIDE_ALGO_BROADCAST");
        EXPECT(b == k, "comm %d: broadcast gave %lld", k, (long long)b);
        EXPECT_OK(tide_comm_free(c));
    }
}

static void more_communicators_than_boards(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(3, 30, churn_body, NULL), 0);
}

/* ---- a rank killed while its peers wait on its flag ---- */

static void killed_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    int32_t v = r, s;
    EXPECT_OK(tide_allreduce(world, &v, &s, 1, TIDE_INT32, TIDE_SUM));
    if (r == 2) {
        raise(SIGKILL);
        return;
    }
    double t0 = now_s();
    tide_req *req;
    EXPECT_OK(tide_iallreduce(world, &v, &s, 1, TIDE_INT32, TIDE_SUM, &req));
    int rc = tide_wait(req, -1);
    EXPECT(rc == TIDE_EPEER, "the all-reduce with a dead peer returned %s (%s)",
           tide_err_name(rc), tide_req_message(req));
    expect_algo(req, "board");
    tide_req_free(req);
    EXPECT(now_s() - t0 < 5.0, "noticing the dead rank took %.1f s", now_s() - t0);
    rc = tide_allreduce(world, &v, &s, 1, TIDE_INT32, TIDE_SUM);
    EXPECT(rc != 0, "an all-reduce after the loss succeeded");
}

static void rank_killed_while_peers_wait(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(4, 30, killed_body, NULL), 1); /* the killed rank */
}

/* ---- peers that finished and left before we looked ---- */

/* Process pid's state letter from /proc (R, S, T, Z, ...); 'X' if it
 * is gone.  Plain system calls: the helper below calls it after fork. */
static char proc_state(pid_t pid)
{
    char path[64], stat[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 'X';
    ssize_t got = read(fd, stat, sizeof stat - 1);
    close(fd);
    stat[got > 0 ? got : 0] = 0;
    const char *end = strrchr(stat, ')'); /* the name may hold anything */
    return end && end[1] == ' ' ? end[2] : 'X';
}

static bool exited(pid_t pid)
{
    char c = proc_state(pid);
    return c == 'X' || c == 'Z';
}

/* Waits up to 20 s for done(pid) on every pid of pids[0..n). */
static bool await_all(const int32_t *pids, int n, bool (*done)(pid_t))
{
    double t0 = now_s();
    for (int q = 0; q < n; q++)
        while (!done((pid_t)pids[q]))
            if (now_s() - t0 > 20)
                return false;
            else
                usleep(2000);
    return true;
}

static bool stopped(pid_t pid)
{
    return proc_state(pid) == 'T';
}

/* The last rank posts its part and sleeps in its ring for its peers'
 * flags (inline progress, so nothing else looks).  A helper process
 * stops it there; the others then post, read its part, finish and exit;
 * the helper lets it go on.  It wakes to their doorbells and their
 * closed sockets at once, and their flags are up in its mapping: the
 * all-reduce must succeed, as a message a peer sent before it closed is
 * still received.  (A lost rank once failed every watch on it at once:
 * TIDE_EPEER here, and 3 % of tide-perf's 4-rank checks under load.) */
static void left_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    int32_t pid = (int32_t)getpid(), pids[8] = {0}, v = r + 1, s = 0;
    EXPECT_OK(tide_allgather(world, &pid, pids, 1, TIDE_INT32));
    tide_req *req;
    pid_t helper = -1;
    if (r == n - 1) {
        EXPECT_OK(tide_iallreduce(world, &v, &s, 1, TIDE_INT32, TIDE_SUM, &req));
        helper = fork();
        if (helper == 0) {
            usleep(300 * 1000); /* its wait is asleep in the ring by now */
            kill(getppid(), SIGSTOP);
            bool gone = await_all(pids, n - 1, exited);
            kill(getppid(), SIGCONT);
            _exit(gone ? 0 : 1);
        }
        EXPECT(helper > 0, "fork: %s", strerror(errno));
    } else {
        EXPECT(await_all(&pids[n - 1], 1, stopped), "rank %d was never stopped", n - 1);
        EXPECT_OK(tide_iallreduce(world, &v, &s, 1, TIDE_INT32, TIDE_SUM, &req));
    }
    int rc = tide_wait(req, -1);
    EXPECT(rc == 0, "the all-reduce returned %s (%s)", tide_err_name(rc), tide_req_message(req));
    expect_algo(req, "board");
    tide_req_free(req);
    EXPECT(s == n * (n + 1) / 2, "rank %d: sum %d, not %d", r, s, n * (n + 1) / 2);
    int status = 1;
    if (helper > 0)
        EXPECT(waitpid(helper, &status, 0) == helper && WIFEXITED(status) &&
                   WEXITSTATUS(status) == 0,
               "the helper saw the other ranks stay past 20 s");
}

static void peers_left_before_we_looked(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm_with(2, 30, TIDE_PROGRESS_INLINE, left_body, NULL), 0);
    /* Only one peer rings a sleeper (shm_ring_doorbell), so which socket
     * it reads first varies: three times. */
    for (int k = 0; k < 3; k++)
        assert_int_equal(run_on_shm_with(4, 30, TIDE_PROGRESS_INLINE, left_body, NULL), 0);
}

/* ---- a late rank: the deadline, then the communicator still works ---- */

static void late_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    int32_t v = r + 1, s = 0;
    if (r == 1) {
        usleep(3000 * 1000); /* past the others' 1 s deadline, on a loaded machine too */
    } else {
        tide_req *req;
        EXPECT_OK(tide_iallreduce(world, &v, &s, 1, TIDE_INT32, TIDE_SUM, &req));
        int rc = tide_wait(req, -1);
        EXPECT(rc == TIDE_ETIMEDOUT, "waiting for the late rank returned %s",
               tide_err_name(rc));
        EXPECT(strstr(tide_req_message(req), "board") && strstr(tide_req_message(req), "rank 1"),
               "the deadline's account names neither the board nor rank 1: %s",
               tide_req_message(req));
        tide_req_free(req);
        usleep(2800 * 1000); /* the late rank is on its way: meet it within a deadline */
    }
    /* The late rank skips the failed collective: its next is the
     * others' next too only after it calls the one they failed. */
    if (r == 1) {
        int rc = tide_allreduce(world, &v, &s, 1, TIDE_INT32, TIDE_SUM);
        EXPECT(rc != 0, "the collective its peers gave up on succeeded late");
    }
    EXPECT_OK(tide_barrier(world));
    for (int k = 0; k < 20; k++) {
        int32_t x = r + k, sum = 0;
        EXPECT_OK(tide_allreduce(world, &x, &sum, 1, TIDE_INT32, TIDE_SUM));
        EXPECT(sum == n * (n - 1) / 2 + n * k, "after the failure: %d", sum);
    }
}

static void late_rank_then_still_works(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(3, 1.0, late_body, NULL), 0);
}

/* ---- a late rank's publication wakes a sleeping peer ---- */

#define WAKE_ROUNDS 9
#define WAKE_LATE_US 20000
/* A peer asleep in its wait notices a publication nobody rang for at
 * its next look: medians of 2.0 ms here (11-12 ms under tide-run's
 * binding); rung, 0.1-0.2 ms. */
#define WAKE_MAX_US 1000.0

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rank 1 calls an all-reduce 20 ms after rank 0, which has gone to
 * sleep waiting for it by then; rank 1's call, blocking (it ends on the
 * direct path: its peer's part is there) or posted (arg: a bool, true),
 * must ring rank 0's doorbell on the way: rank 0 returns within
 * WAKE_MAX_US of rank 1's call (the median of WAKE_ROUNDS, so one stall
 * of this VM does not decide). */
static void wake_body(tide_comm *world, void *arg)
{
    bool posted = *(const bool *)arg;
    int r = tide_comm_rank(world);
    double late[WAKE_ROUNDS];
    int direct = 0;
    for (int k = 0; k < WAKE_ROUNDS; k++) {
        float x = 1, y = 0;
        EXPECT_OK(tide_barrier(world));
        double called = 0;
        if (r == 1) {
            usleep(WAKE_LATE_US);
            called = now_s();
        }
        uint64_t ended = world->ctx->board_direct_ended;
        tide_req *req = NULL;
        if (posted && r == 1) {
            EXPECT_OK(tide_iallreduce(world, &x, &y, 1, TIDE_FLOAT32, TIDE_SUM, &req));
            EXPECT_OK(tide_wait(req, -1));
            tide_req_free(req);
        } else {
            EXPECT_OK(tide_allreduce(world, &x, &y, 1, TIDE_FLOAT32, TIDE_SUM));
        }
        direct += world->ctx->board_direct_ended > ended;
        double returned = now_s();
        if (r == 1)
            usleep(WAKE_LATE_US); /* its next call rings too: not yet */
        EXPECT(y == 2.0f, "round %d: %g", k, (double)y);
        double t[2] = {called, r == 0 ? returned : 0}, m[2] = {0, 0};
        EXPECT_OK(tide_allreduce(world, t, m, 2, TIDE_FLOAT64, TIDE_MAX));
        late[k] = (m[1] - m[0]) * 1e6;
    }
    if (r == 1 && !posted)
        EXPECT(direct > WAKE_ROUNDS / 2, "%d of the %d late calls ended on the direct path",
               direct, WAKE_ROUNDS);
    qsort(late, WAKE_ROUNDS, sizeof late[0], by_value);
    EXPECT(late[WAKE_ROUNDS / 2] < WAKE_MAX_US, "rank 0 returned a median %.0f us after the "
           "late rank's %s call (%.0f-%.0f): its doorbell was not rung", late[WAKE_ROUNDS / 2],
           posted ? "posted" : "blocking", late[0], late[WAKE_ROUNDS - 1]);
}

/* A rank of wake_body on a CPU of its own, as tide-run binds: its
 * progress thread shares that CPU and sleeps soon, where one with a CPU
 * to itself keeps looking a while (progress.c) and would see the part
 * unrung. */
static int wake_rank(int rank, int port, void *arg)
{
    (void)arg;
    cpu_set_t mask, one;
    CPU_ZERO(&one);
    if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
        int want = rank % CPU_COUNT(&mask);
        for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &mask) && seen++ == want)
                CPU_SET(c, &one);
        EXPECT(sched_setaffinity(0, sizeof one, &one) == 0, "binding rank %d", rank);
    }
    struct harness_opts o;
    harness_defaults(&o);
    tide_config cfg;
    harness_config(&cfg, rank, 2, port, "0123456789abcdef0123456789abcdef", &o);
    snprintf(cfg.transport, sizeof cfg.transport, "shm");
    tide_comm *world;
    EXPECT_OK(tide_init_with(&world, &cfg));
    bool posted = false;
    wake_body(world, &posted);
    posted = true;
    wake_body(world, &posted);
    EXPECT_OK(tide_finalize(world));
    return 0;
}

static void late_publication_wakes_a_sleeper(void **state)
{
    (void)state;
    assert_int_equal(harness_run_raw(2, 60, wake_rank, NULL), 0);
}

/* ---- mismatched calls ---- */

/* arg: 0 two boards with different counts; 1 a board against a message
 * algorithm (the last rank's vector too large for a board); 2 a part
 * in its header's first line (8 B, engine/board.h) against one in the
 * slot's data (128 B); 3 one in the header's second line (64 B) against
 * one in the slot's data. */
static void mismatch_body(tide_comm *world, void *arg)
{
    int how = *(int *)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    static float in[100000], out[100000];
    static const size_t ours[] = {4, 4, 2, 16}, last[] = {8, 100000, 32, 32};
    size_t count = r != n - 1 ? ours[how] : last[how];
    int rc = tide_allreduce(world, in, out, count, TIDE_FLOAT32, TIDE_SUM);
    EXPECT(rc == TIDE_EMISMATCH, "a mismatched all-reduce returned %s", tide_err_name(rc));
    EXPECT_OK(tide_barrier(world));
    float x = 1, y = 0;
    EXPECT_OK(tide_allreduce(world, &x, &y, 1, TIDE_FLOAT32, TIDE_SUM));
    EXPECT(y == (float)n, "after the mismatch: %g", (double)y);
}

static void mismatch_between_boards(void **state)
{
    (void)state;
    int how = 0;
    assert_int_equal(run_on_shm(3, 10, mismatch_body, &how), 0);
}

static void mismatch_board_against_messages(void **state)
{
    (void)state;
    int how = 1;
    assert_int_equal(run_on_shm(3, 10, mismatch_body, &how), 0);
}

static void mismatch_tiny_part_against_slot(void **state)
{
    (void)state;
    for (int how = 2; how <= 3; how++) {
        assert_int_equal(run_on_shm(3, 10, mismatch_body, &how), 0);
        assert_int_equal(run_on_shm_with(2, 10, TIDE_PROGRESS_INLINE, mismatch_body, &how), 0);
    }
}

/* ---- the direct path of blocking calls ---- */

enum { KINDS = 8 }; /* of collective in one_blocking */

/* What forces each rooted collective's algorithm. */
static const char *const rooted_env[] = {"TIDE_ALGO_BROADCAST", "TIDE_ALGO_REDUCE",
                                         "TIDE_ALGO_GATHER", "TIDE_ALGO_SCATTER"};

/* Reduce, gather or scatter to or from root, on boards (one_blocking's
 * last three kinds). */
static void one_rooted(tide_comm *world, int k, int32_t *in, int32_t *out, int count, int root)
{
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    int kind = k % KINDS - 5;
    const char *env = rooted_env[kind + 1];
    setenv(env, "board", 1);
    for (int i = 0; i < count * n; i++)
        out[i] = -1;
    if (kind == 0)
        EXPECT_OK(tide_reduce(world, in, out, (size_t)count, TIDE_INT32, TIDE_SUM, root));
    else if (kind == 1)
        EXPECT_OK(tide_gather(world, in, out, (size_t)count, TIDE_INT32, root));
    else
        EXPECT_OK(tide_scatter(world, in, out, (size_t)count, TIDE_INT32, root));
    unsetenv(env);
    for (int i = 0; i < count * n; i++) {
        int32_t want = -1; /* nothing else written */
        if (kind == 0 && r == root && i < count)
            want = 1000 * n * (n - 1) / 2 + n * (i + k);
        else if (kind == 1 && r == root)
            want = (i / count) * 1000 + i % count + k;
        else if (kind == 2 && i < count)
            want = root * 1000 + r * count + i + k;
        EXPECT(out[i] == want, "op %d: %s to/from %d [%d] %d, wanted %d", k, env + 10,
               root, i, out[i], want);
    }
}

/* One blocking board collective of each kind in turn, checked: allreduce
 * of 1-20 ints, allgather, reduce_scatter, alltoall, then broadcast,
 * reduce, gather and scatter to or from a moving root (forced onto
 * boards, which 4 ranks leave to trees by default but for broadcast).
 * Each kind meets every count, so parts of 8 bytes and fewer (the
 * header's first line), up to 72 (its second) and above (the slot's
 * data) all come by, on either side of each edge. */
static void one_blocking(tide_comm *world, int k)
{
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    int32_t in[20 * 8], out[20 * 8];
    int count = 1 + (k / KINDS) % 20, root = (k / KINDS) % n;
    for (int i = 0; i < count * n; i++)
        in[i] = r * 1000 + i + k;
    switch (k % KINDS) {
    case 0:
        EXPECT_OK(tide_allreduce(world, in, out, (size_t)count, TIDE_INT32, TIDE_SUM));
        for (int i = 0; i < count; i++)
            EXPECT(out[i] == 1000 * n * (n - 1) / 2 + n * (i + k), "op %d: allreduce [%d] %d", k,
                   i, out[i]);
        break;
    case 1:
        EXPECT_OK(tide_allgather(world, in, out, (size_t)count, TIDE_INT32));
        for (int q = 0; q < n; q++)
            for (int i = 0; i < count; i++)
                EXPECT(out[q * count + i] == q * 1000 + i + k, "op %d: allgather [%d][%d] %d", k,
                       q, i, out[q * count + i]);
        break;
    case 2:
        EXPECT_OK(tide_reduce_scatter(world, in, out, (size_t)count, TIDE_INT32, TIDE_SUM));
        for (int i = 0; i < count; i++)
            EXPECT(out[i] == 1000 * n * (n - 1) / 2 + n * (r * count + i + k),
                   "op %d: reduce_scatter [%d] %d", k, i, out[i]);
        break;
    case 3:
        EXPECT_OK(tide_alltoall(world, in, out, (size_t)count, TIDE_INT32));
        for (int q = 0; q < n; q++)
            for (int i = 0; i < count; i++)
                EXPECT(out[q * count + i] == q * 1000 + r * count + i + k,
                       "op %d: alltoall [%d][%d] %d", k, q, i, out[q * count + i]);
        break;
    case 4:
        setenv("TIDE_ALGO_BROADCAST", "board", 1);
        EXPECT_OK(tide_broadcast(world, in, (size_t)count, TIDE_INT32, root));
        unsetenv("TIDE_ALGO_BROADCAST");
        for (int i = 0; i < count; i++)
            EXPECT(in[i] == root * 1000 + i + k, "op %d: broadcast [%d] %d", k, i, in[i]);
        break;
    default:
        one_rooted(world, k, in, out, count, root);
    }
}

/* Blocking board collectives end on the caller's thread when their
 * peers are on time (board.h, the direct path), and hand over to a
 * request from wherever they stopped when not: here a rank in turn is
 * 300 us late (past the path's patience) every fifth call, a board
 * collective posted before is still pending every seventh (the path
 * declines), and a message collective runs between every eleventh.
 * Every result is checked; some calls must have ended directly, and
 * some not (the late ones). */
static void direct_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    enum { CALLS = 400 };
    static float big_in[40000], big_out[40000];
    for (int k = 0; k < CALLS; k++) {
        if (k % 5 == 1 && r == (k / 5) % n)
            usleep(300);
        tide_req *pending = NULL;
        int32_t v = r + k, sum = 0;
        if (k % 7 == 3)
            EXPECT_OK(tide_iallreduce(world, &v, &sum, 1, TIDE_INT32, TIDE_SUM, &pending));
        one_blocking(world, k);
        if (pending) {
            EXPECT_OK(tide_wait(pending, -1));
            expect_algo(pending, "board");
            tide_req_free(pending);
            EXPECT(sum == n * (n - 1) / 2 + n * k, "op %d: the pending one gave %d", k, sum);
        }
        if (k % 11 == 5) {
            big_in[7] = (float)(r + k);
            EXPECT_OK(tide_allreduce(world, big_in, big_out, 40000, TIDE_FLOAT32, TIDE_SUM));
            EXPECT(big_out[7] == (float)(n * (n - 1) / 2 + n * k), "op %d: big %g", k,
                   (double)big_out[7]);
        }
    }
    double ended = (double)world->ctx->board_direct_ended, all = ended;
    EXPECT_OK(tide_allreduce(world, TIDE_IN_PLACE, &all, 1, TIDE_FLOAT64, TIDE_SUM));
    EXPECT(all > 0, "no blocking board collective ended on its caller's thread");
    EXPECT(all < (double)CALLS * n, "every one did, late peers too (%g)", all);
}

static void direct_path_and_its_hand_overs(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(2, 20, direct_body, NULL), 0);
    assert_int_equal(run_on_shm_with(2, 20, TIDE_PROGRESS_INLINE, direct_body, NULL), 0);
    assert_int_equal(run_on_shm(4, 20, direct_body, NULL), 0);
}

/* ---- the progress thread takes over from direct calls ---- */

static void note_done(tide_req *req, void *arg)
{
    (void)req;
    atomic_store((_Atomic double *)arg, now_s());
}

#define TAKE_OVER_LATE_MS 30

/* A caller's direct calls leave the progress thread "a wait just ended"
 * rather than a time (progress.c, last_wait).  After 2,000 of them rank
 * 0 posts a 4 KiB all-reduce, which starts on its own thread, and calls
 * nothing more; rank 1 posts its own TAKE_OVER_LATE_MS later.  Rank 0's
 * progress thread must take over once its grace is out and finish it:
 * a stamp it never resolved would keep it out of the way for good. */
static void take_over_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    enum { N = 1024 };
    int32_t in[N], out[N];
    for (int trial = 0; trial < 4; trial++) {
        for (int k = 0; k < 2000; k++) {
            int64_t v = r == 0 ? k : -1;
            EXPECT_OK(tide_broadcast(world, &v, 1, TIDE_INT64, 0));
            EXPECT(v == k, "trial %d: broadcast %d gave %lld", trial, k, (long long)v);
        }
        for (int i = 0; i < N; i++)
            in[i] = r * 1000 + i + trial;
        if (r == 1)
            harness_sleep_ms(TAKE_OVER_LATE_MS);
        _Atomic double done = 0;
        double t0 = now_s();
        tide_req *req;
        EXPECT_OK(tide_iallreduce(world, in, out, N, TIDE_INT32, TIDE_SUM, &req));
        EXPECT_OK(tide_req_on_complete(req, note_done, (void *)&done));
        while (r == 0 && !atomic_load(&done) && now_s() - t0 < 2.0)
            harness_sleep_ms(1); /* no tide call: only the progress thread moves it */
        double at = atomic_load(&done);
        EXPECT(r == 1 || (at && at - t0 < 1.0), "trial %d: an all-reduce posted after direct "
               "calls was %s %.0f ms after its post", trial, at ? "done" : "not done",
               ((at ? at : now_s()) - t0) * 1e3);
        EXPECT_OK(tide_wait(req, -1));
        tide_req_free(req);
        for (int i = 0; i < N; i++)
            EXPECT(out[i] == 1000 + 2 * (i + trial), "trial %d: [%d] = %d", trial, i, out[i]);
    }
}

static void progress_takes_over_after_direct_calls(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(2, 20, take_over_body, NULL), 0);
}

/* ---- our own part, read from the caller's buffer (board.c, own_part) ---- */

#define OWN_MAX 300

/* Rank r's element i of call k: distinct on every rank, so a part read
 * after the reduction wrote over it (a sum that counts one rank's
 * partial sum in place of another's input) shows. */
static int32_t own_value(int r, int i, int k)
{
    return (r + 1) * 100000 + i * 7 + k;
}

static int32_t own_sum(int n, int i, int k)
{
    int32_t sum = 0;
    for (int q = 0; q < n; q++)
        sum += own_value(q, i, k);
    return sum;
}

/* buf[i] = rank r's element i of call k, for i < len. */
static void own_fill(int32_t *buf, size_t len, int r, int k)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = own_value(r, (int)i, k);
}

/* Wait for req (if posted) and check it ran on boards. */
static void own_finish(int rc, tide_req *req, bool posted)
{
    EXPECT_OK(rc);
    if (!posted || rc)
        return;
    EXPECT_OK(tide_wait(req, -1));
    expect_algo(req, "board");
    tide_req_free(req);
}

/* Reduce-scatter of c elements a rank, from send (rank r's elements of
 * call k in buf) into out, blocking or posted; out checked. */
static void own_reduce_scatter(tide_comm *world, int k, size_t c, bool posted, const void *send,
                               int32_t *out, const char *what)
{
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    tide_req *req = NULL;
    int rc = posted ? tide_ireduce_scatter(world, send, out, c, TIDE_INT32, TIDE_SUM, &req)
                    : tide_reduce_scatter(world, send, out, c, TIDE_INT32, TIDE_SUM);
    own_finish(rc, req, posted);
    for (size_t i = 0; i < c; i++)
        EXPECT(out[i] == own_sum(n, (int)((size_t)r * c + i), k), "call %d: %s [%zu] %d", k, what,
               i, out[i]);
}

/* All-gather of c elements a rank into buf, blocking or posted; every
 * block checked. */
static void own_allgather(tide_comm *world, int k, size_t c, bool posted, const void *send,
                          int32_t *buf, const char *what)
{
    int n = tide_comm_size(world);
    tide_req *req = NULL;
    int rc = posted ? tide_iallgather(world, send, buf, c, TIDE_INT32, &req)
                    : tide_allgather(world, send, buf, c, TIDE_INT32);
    own_finish(rc, req, posted);
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < c; i++)
            EXPECT(buf[(size_t)q * c + i] == own_value(q, (int)i, k), "call %d: %s, block %d [%zu] %d",
                   k, what, q, i, buf[(size_t)q * c + i]);
}

/* All-reduce in place, reduce-scatter with recvbuf our block of sendbuf
 * and in place, all-gather in place: the layouts where a rank's input
 * is also where the result goes, on every rank (ranks 2 and up may not
 * read their input there), and an all-gather whose input is block 0 of
 * its output (the copy of rank 0's block lands on the others' input);
 * blocking (the direct path) and posted. */
static void own_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    static const size_t counts[] = {1, 2, 16, OWN_MAX};
    static int32_t buf[8 * OWN_MAX];
    for (int k = 0; k < 16; k++) {
        size_t c = counts[k % 4];
        bool posted = k >= 8;
        tide_req *req = NULL;
        own_fill(buf, c, r, k);
        int rc = posted ? tide_iallreduce(world, TIDE_IN_PLACE, buf, c, TIDE_INT32, TIDE_SUM, &req)
                        : tide_allreduce(world, TIDE_IN_PLACE, buf, c, TIDE_INT32, TIDE_SUM);
        own_finish(rc, req, posted);
        for (size_t i = 0; i < c; i++)
            EXPECT(buf[i] == own_sum(n, (int)i, k), "call %d: allreduce [%zu] %d", k, i, buf[i]);

        own_fill(buf, (size_t)n * c, r, k);
        own_reduce_scatter(world, k, c, posted, buf, buf + (size_t)r * c,
                           "reduce_scatter into our block");
        own_fill(buf, (size_t)n * c, r, k);
        own_reduce_scatter(world, k, c, posted, TIDE_IN_PLACE, buf, "reduce_scatter in place");

        own_fill(buf + (size_t)r * c, c, r, k);
        own_allgather(world, k, c, posted, TIDE_IN_PLACE, buf, "allgather in place");
        own_fill(buf, c, r, k);
        own_allgather(world, k, c, posted, buf, buf, "allgather from block 0");
    }
}

static void own_part_where_the_result_goes(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(4, 20, own_body, NULL), 0);
    assert_int_equal(run_on_shm(3, 20, own_body, NULL), 0);
    assert_int_equal(run_on_shm_with(2, 20, TIDE_PROGRESS_INLINE, own_body, NULL), 0);
}

/* ---- the choice follows the environment (select.c, tide__select_call) ---- */

/* The algorithm a 4-byte all-reduce on comm ran, after one blocking
 * call (the direct path chooses too) whose result is checked. */
static void expect_allreduce_on(tide_comm *comm, const char *want, const char *why)
{
    int n = tide_comm_size(comm);
    float x = 1, y = 0;
    EXPECT_OK(tide_allreduce(comm, &x, &y, 1, TIDE_FLOAT32, TIDE_SUM));
    EXPECT(y == (float)n, "%s: blocking all-reduce gave %g", why, (double)y);
    tide_req *req = NULL;
    EXPECT_OK(tide_iallreduce(comm, &x, &y, 1, TIDE_FLOAT32, TIDE_SUM, &req));
    if (!req)
        return;
    EXPECT_OK(tide_wait(req, -1));
    EXPECT(!strcmp(tide_req_algorithm(req), want), "%s: ran %s, not %s", why,
           tide_req_algorithm(req), want);
    tide_req_free(req);
}

/* The same call again and again, with TIDE_ALGO_ALLREDUCE and
 * TIDE_BOARDS set, replaced (in place: neither is the environment's
 * last entry then) and unset between calls, and other variables added:
 * each call runs what the environment says at that moment.  A step sets
 * name to value (NULL: unsets it), then, if want is not NULL, calls. */
static const struct env_step {
    const char *name, *value, *want;
} env_steps[] = {
    {"TIDE_BOARDS", "1", NULL},
    {"TIDE_TEST_AFTER_BOARDS", "1", "board"},
    {"TIDE_BOARDS", "0", "recursive_doubling"},
    {"TIDE_BOARDS", "1", "board"},
    {"TIDE_ALGO_ALLREDUCE", "ring", "ring"},
    {"TIDE_TEST_AFTER_ALGO", "1", "ring"},
    {"TIDE_ALGO_ALLREDUCE", "recursive_doubling", "recursive_doubling"},
    {"TIDE_ALGO_ALLREDUCE", NULL, "board"},
    {"TIDE_BOARDS", NULL, NULL},
    {"TIDE_TEST_AFTER_BOARDS", NULL, NULL},
    {"TIDE_TEST_AFTER_ALGO", NULL, "board"},
};

static void env_body(tide_comm *world, void *arg)
{
    (void)arg;
    expect_allreduce_on(world, "board", "at first");
    for (size_t i = 0; i < sizeof env_steps / sizeof env_steps[0]; i++) {
        const struct env_step *st = &env_steps[i];
        char why[96];
        snprintf(why, sizeof why, "step %zu: %s=%s", i, st->name, st->value ? st->value : "(unset)");
        if (st->value)
            setenv(st->name, st->value, 1);
        else
            unsetenv(st->name);
        if (st->want)
            expect_allreduce_on(world, st->want, why);
    }
}

static void choice_follows_the_environment(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(2, 20, env_body, NULL), 0);
}

/* ---- a broadcast's root ends once published (board.h, "unread") ---- */

/* Root 0 broadcasts back to back, changing its buffer the moment each
 * call returns (so a reader that copied late from anything but the
 * root's slot would see the next value), with a moving root and a
 * message collective now and then: every reader gets every value. */
static void runs_ahead_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    static float big_in[40000], big_out[40000];
    setenv("TIDE_ALGO_BROADCAST", "board", 1);
    for (int k = 0; k < 3000; k++) {
        int root = k % 97 == 0 ? k % n : 0;
        int count = 1 + k % 64;
        int32_t buf[64];
        for (int i = 0; i < count; i++)
            buf[i] = r == root ? k * 100 + i : -1;
        EXPECT_OK(tide_broadcast(world, buf, (size_t)count, TIDE_INT32, root));
        for (int i = 0; i < count; i++) {
            if (r == root)
                buf[i] = -2; /* the readers must not see this */
            else
                EXPECT(buf[i] == k * 100 + i, "broadcast %d [%d]: %d", k, i, buf[i]);
        }
        if (k % 500 == 250)
            EXPECT_OK(tide_allreduce(world, big_in, big_out, 40000, TIDE_FLOAT32, TIDE_SUM));
    }
    unsetenv("TIDE_ALGO_BROADCAST");
    const char *late = "";
    EXPECT(tide_comm_async_error(world, &late) == 0, "a late report: %s", late);
}

static void broadcast_root_runs_ahead(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(2, 20, runs_ahead_body, NULL), 0);
    assert_int_equal(run_on_shm_with(2, 20, TIDE_PROGRESS_INLINE, runs_ahead_body, NULL), 0);
    assert_int_equal(run_on_shm(3, 20, runs_ahead_body, NULL), 0);
}

/* 2 ranks, broadcasts of 8-80 bytes from rank 0: up to 72 its gate lets
 * it publish up to six ahead of its reader (board.c, runs_ahead), 80
 * bytes wait at the plain gate.  The reader stops now and then (arg: how
 * long, us) so that the root uses up that lead and must wait; a larger
 * broadcast, from either rank, and an all-reduce come between, which the
 * root may not pass early.  Every value arrives, in order, and nothing
 * is reported late. */
static void ahead_body(tide_comm *world, void *arg)
{
    int pause_us = *(const int *)arg;
    int r = tide_comm_rank(world);
    setenv("TIDE_ALGO_BROADCAST", "board", 1);
    for (int k = 0; k < 4000; k++) {
        int64_t v[10];
        int count = 1 + k % 10;
        for (int i = 0; i < count; i++)
            v[i] = r == 0 ? 7 * k + i : -1;
        EXPECT_OK(tide_broadcast(world, v, (size_t)count, TIDE_INT64, 0));
        for (int i = 0; i < count; i++)
            EXPECT(v[i] == 7 * k + i, "broadcast %d [%d] gave %lld", k, i, (long long)v[i]);
        if (r == 1 && pause_us && k % 37 == 0)
            usleep((useconds_t)pause_us);
        if (k % 101 == 50) {
            int32_t big[64];
            for (int i = 0; i < 64; i++)
                big[i] = r == k % 2 ? k + i : -1;
            EXPECT_OK(tide_broadcast(world, big, 64, TIDE_INT32, k % 2));
            for (int i = 0; i < 64; i++)
                EXPECT(big[i] == k + i, "broadcast %d of 256 B [%d]: %d", k, i, big[i]);
        }
        if (k % 211 == 100) {
            int32_t in = r + k, out = 0;
            EXPECT_OK(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM));
            EXPECT(out == 1 + 2 * k, "all-reduce after broadcast %d: %d", k, out);
        }
    }
    unsetenv("TIDE_ALGO_BROADCAST");
    const char *late = "";
    EXPECT(tide_comm_async_error(world, &late) == 0, "a late report: %s", late);
}

/* The reader calls another broadcast (two elements, not one; arg
 * "stream16" or "stream32": as many, through the stream) at call 20 of a stream its
 * root runs ahead of: its own call fails, and the root, whose call of it
 * succeeded, learns of it late: from one of its next calls or, after the
 * last, by polling.  The call that tells it runs no collective
 * (async_error.c), so the root makes that one again and the two stay
 * paired. */
#define AHEAD_BAD_CALL 20
static void ahead_mismatch_body(tide_comm *world, void *arg)
{
    int r = tide_comm_rank(world);
    int told = 0;
    const char *msg = "", *algo = arg ? (const char *)arg : "board";
    int bad_count = 2;
    if (!strncmp(algo, "stream", 6) && algo[6]) { /* 64 or 128 bytes, in a slot, against 4 */
        bad_count = atoi(algo + 6);
        algo = "stream";
    }
    setenv("TIDE_ALGO_BROADCAST", algo, 1);
    for (int k = 0; k < 40; k++) {
        int32_t v[32] = {r == 0 ? k : -1, r == 0 ? k : -1};
        bool bad = r == 1 && k == AHEAD_BAD_CALL;
        int rc = tide_broadcast(world, v, bad ? (size_t)bad_count : 1, TIDE_INT32, 0);
        if (bad) {
            EXPECT(rc == TIDE_EMISMATCH, "the mismatched call: %s", tide_err_name(rc));
            continue;
        }
        if (r == 0 && rc == TIDE_EMISMATCH && k > AHEAD_BAD_CALL && !told) {
            told++;
            k--;
            continue;
        }
        EXPECT_OK(rc);
        EXPECT(v[0] == k, "broadcast %d gave %d", k, v[0]);
    }
    unsetenv("TIDE_ALGO_BROADCAST");
    if (r == 0 && !told) {
        int err = 0;
        double t0 = now_s();
        while (!(err = tide_comm_async_error(world, &msg)) && now_s() - t0 < 5.0)
            ;
        EXPECT(err == TIDE_EMISMATCH, "no late report within 5 s (got %s)", tide_err_name(err));
        EXPECT(strstr(msg, "had succeeded here"), "the report: %s", msg);
        told = err == TIDE_EMISMATCH;
        int32_t in = 1, out = 0;
        EXPECT(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM) == TIDE_EMISMATCH,
               "the call after the report");
    }
    EXPECT(r == 1 || told == 1, "the root was told %d times", told);
    int32_t in = 1, out = 0;
    EXPECT_OK(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM));
    EXPECT(out == 2, "after the report: %d", out);
}

static void two_rank_root_runs_ahead(void **state)
{
    (void)state;
    int none = 0, pause = 200;
    assert_int_equal(run_on_shm(2, 30, ahead_body, &none), 0);
    assert_int_equal(run_on_shm(2, 30, ahead_body, &pause), 0);
    assert_int_equal(run_on_shm_with(2, 30, TIDE_PROGRESS_INLINE, ahead_body, &pause), 0);
    assert_int_equal(run_on_shm(2, 10, ahead_mismatch_body, NULL), 0);
    assert_int_equal(run_on_shm_with(2, 10, TIDE_PROGRESS_INLINE, ahead_mismatch_body, NULL), 0);
}

/* A rooted collective on boards that no rank reads, every rank taking
 * itself (broadcast, scatter) or the next rank (reduce, gather) for the
 * root: each call succeeds, and one of the next two reports it. */
static int rooted_nobody_reads(tide_comm *world, int how)
{
    int r = tide_comm_rank(world), n = tide_comm_size(world), next = (r + 1) % n;
    static float v[16 * 4], w[16 * 4];
    if (how == 4) { /* through the stream (2 ranks, 8 bytes) */
        setenv("TIDE_ALGO_BROADCAST", "stream", 1);
        int rc = tide_broadcast(world, v, 2, TIDE_FLOAT32, r);
        unsetenv("TIDE_ALGO_BROADCAST");
        return rc;
    }
    setenv(rooted_env[how], "board", 1);
    int rc = how == 0   ? tide_broadcast(world, v, 16, TIDE_FLOAT32, r)
             : how == 1 ? tide_reduce(world, v, w, 16, TIDE_FLOAT32, TIDE_SUM, next)
             : how == 2 ? tide_gather(world, v, w, 16, TIDE_FLOAT32, next)
                        : tide_scatter(world, v, w, 16, TIDE_FLOAT32, r);
    unsetenv(rooted_env[how]);
    return rc;
}

/* No rank reads (arg: rooted_nobody_reads's `how`, NULL for broadcast):
 * each checks the others' headers at its next board collective, whose
 * call (or the one after, if a request ran that gate) reports the
 * mismatch as a late error; the calls stay paired and right. */
static void roots_next_call_body(tide_comm *world, void *arg)
{
    int how = arg ? *(int *)arg : 0;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    EXPECT_OK(rooted_nobody_reads(world, how));
    int reported = 0;
    for (int k = 0; k < 2; k++) {
        int32_t in = r + 1, out = 0;
        int rc = tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM);
        if (rc == TIDE_EMISMATCH) {
            reported++;
            continue;
        }
        EXPECT_OK(rc);
        EXPECT(out == n * (n + 1) / 2, "call %d after the collective gave %d", k, out);
    }
    EXPECT(reported == 1, "the mismatch was reported %d times in two calls", reported);
    EXPECT(tide_comm_async_error(world, NULL) == 0, "a report is still held");
    EXPECT_OK(tide_barrier(world));
}

/* Ranks 0 and 1 each think they are the root, rank 2 reads root 0's:
 * the roots' calls succeed, and polling tells them, naming the other
 * call; the next call reports it and clears it.  Rank 2's call fails
 * if the roots' news reaches it first, else it is told alike. */
static void two_roots_poll_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    float v[16] = {0};
    setenv("TIDE_ALGO_BROADCAST", "board", 1);
    int rc = tide_broadcast(world, v, 16, TIDE_FLOAT32, r == 1 ? 1 : 0);
    unsetenv("TIDE_ALGO_BROADCAST");
    EXPECT(rc == 0 || (r == 2 && rc == TIDE_EMISMATCH), "the broadcast: %s", tide_err_name(rc));
    int32_t in = 1, out = 0;
    if (rc) {
        EXPECT_OK(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM));
        EXPECT(out == 3, "after the failure: %d", out);
        return;
    }
    const char *msg = "";
    int err = 0;
    double t0 = now_s();
    while (!(err = tide_comm_async_error(world, &msg)) && now_s() - t0 < 5.0)
        ;
    EXPECT(err == TIDE_EMISMATCH, "no late report within 5 s (got %s)", tide_err_name(err));
    EXPECT(strstr(msg, r == 1 ? "from root 0" : "from root 1"), "the report: %s", msg);
    tide_req *req = NULL;
    EXPECT_OK(tide_ibarrier(world, &req));
    EXPECT(tide_wait(req, 5000) == TIDE_EMISMATCH, "the next call: %s", tide_req_message(req));
    EXPECT(strstr(tide_req_message(req), "had succeeded here"), "its message: %s",
           tide_req_message(req));
    tide_req_free(req);
    EXPECT_OK(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM));
    EXPECT(out == 3, "after the report: %d", out);
}

/* Roots that change hands on 2 ranks, with tiny broadcasts, whose roots
 * run ahead: rank 1 is the root of fourteen (it checks rank 0's headers
 * only as its lead runs out, at the eighth, so the last six or seven are
 * unchecked when it stops), then rank 0 of eight more while rank 1
 * sleeps, so rank 0 writes over its headers of rank 1's unchecked ones
 * before rank 1 looks (board.c, written_over).  Nothing is mismatched:
 * every call and the all-reduce after must succeed. */
static void roots_change_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    int32_t v[4] = {0};
    setenv("TIDE_ALGO_BROADCAST", "board", 1);
    enum { FIRST = 14 };
    for (int k = 0; k < FIRST + 8; k++) {
        int root = k < FIRST ? 1 : 0;
        if (k == FIRST && r == 1)
            harness_sleep_ms(50);
        v[0] = root == r ? k : -1;
        EXPECT_OK(tide_broadcast(world, v, 4, TIDE_INT32, root));
        EXPECT(v[0] == k, "broadcast %d gave %d", k, v[0]);
    }
    unsetenv("TIDE_ALGO_BROADCAST");
    int32_t in = r + 1, out = 0;
    EXPECT_OK(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM));
    EXPECT(out == 3, "the all-reduce after gave %d", out);
    EXPECT(tide_comm_async_error(world, NULL) == 0, "a mismatch was reported");
}

static void rooted_roots_learn_late(void **state)
{
    (void)state;
    for (int how = 1; how < 4; how++) /* reduce, gather, scatter */
        assert_int_equal(run_on_shm(2, 10, roots_next_call_body, &how), 0);
    assert_int_equal(run_on_shm(2, 10, roots_change_body, NULL), 0);
    assert_int_equal(run_on_shm(2, 10, roots_next_call_body, NULL), 0);
    assert_int_equal(run_on_shm_with(2, 10, TIDE_PROGRESS_INLINE, roots_next_call_body, NULL), 0);
    assert_int_equal(run_on_shm(3, 10, roots_next_call_body, NULL), 0);
    assert_int_equal(run_on_shm(3, 10, two_roots_poll_body, NULL), 0);
    assert_int_equal(run_on_shm_with(3, 10, TIDE_PROGRESS_INLINE, two_roots_poll_body, NULL), 0);
}

/* ---- the stream: 2-rank broadcasts of up to 256 bytes ---- */

/* One broadcast of k's shape (its dtype and count vary with k, up to
 * 256 bytes: in the entry up to 24, else in its slot) from root, blocking
 * but every fourth; every element checked. */
static void stream_one(tide_comm *world, int k, int root)
{
    int r = tide_comm_rank(world);
    union {
        int8_t i8[256];
        int32_t i32[64];
        double f64[32];
    } v;
    memset(&v, 0xee, sizeof v);
    int shape = k % 3, count = shape == 0 ? 1 + k % 256 : shape == 1 ? 1 + k % 64 : 1 + k % 32;
    for (int i = 0; i < count && r == root; i++) {
        if (shape == 0)
            v.i8[i] = (int8_t)(k + i);
        else if (shape == 1)
            v.i32[i] = k * 3 + i;
        else
            v.f64[i] = k + 0.5 * i;
    }
    tide_dtype dt = shape == 0 ? TIDE_INT8 : shape == 1 ? TIDE_INT32 : TIDE_FLOAT64;
    if (k % 4) { /* blocking: the direct path, mostly */
        EXPECT_OK(tide_broadcast(world, &v, (size_t)count, dt, root));
    } else {
        tide_req *req = NULL;
        EXPECT_OK(tide_ibroadcast(world, &v, (size_t)count, dt, root, &req));
        int rc = tide_wait(req, -1);
        EXPECT(rc == 0, "stream broadcast %d: %s", k, tide_req_message(req));
        EXPECT(!strcmp(tide_req_algorithm(req), "stream"), "broadcast %d ran %s", k,
               tide_req_algorithm(req));
        tide_req_free(req);
    }
    for (int i = 0; i < count; i++) {
        bool ok = shape == 0   ? v.i8[i] == (int8_t)(k + i)
                  : shape == 1 ? v.i32[i] == k * 3 + i
                               : v.f64[i] == k + 0.5 * i;
        EXPECT(ok, "stream broadcast %d (shape %d) element %d is wrong", k, shape, i);
    }
    EXPECT(shape != 0 || count == 256 || v.i8[count] == (int8_t)0xee,
           "stream broadcast %d wrote past its %d bytes", k, count);
}

/* 3000 stream broadcasts whose root changes every 700, the reader
 * pausing (arg: ms, or none) in each stretch so that the root fills
 * half the ring and is held until it catches up; between them, bursts
 * of nonblocking ones (the request path), and board collectives of
 * other kinds, which pair with them in order.  Nothing is reported
 * late. */
static void stream_body(tide_comm *world, void *arg)
{
    int pause_ms = arg ? *(const int *)arg : 0;
    int r = tide_comm_rank(world);
    for (int k = 0; k < 3000; k++) {
        int root = k / 700 % 2;
        stream_one(world, k, root);
        if (pause_ms && r != root && k % 700 == 350)
            harness_sleep_ms(pause_ms);
        if (k % 97 == 0) {
            int64_t v[5];
            tide_req *req[5];
            for (int i = 0; i < 5; i++) {
                v[i] = r == root ? k + i : -1;
                EXPECT_OK(tide_ibroadcast(world, &v[i], 1, TIDE_INT64, root, &req[i]));
            }
            for (int i = 0; i < 5; i++) {
                EXPECT_OK(tide_wait(req[i], -1));
                expect_algo(req[i], "stream");
                tide_req_free(req[i]);
                EXPECT(v[i] == k + i, "nonblocking stream broadcast %d.%d gave %lld", k, i,
                       (long long)v[i]);
            }
        }
        if (k % 211 == 0) {
            int32_t in = r + k, out = 0;
            EXPECT_OK(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM));
            EXPECT(out == 1 + 2 * k, "all-reduce after stream broadcast %d: %d", k, out);
        }
        if (k % 313 == 0) {
            int32_t big[16];
            for (int i = 0; i < 16; i++)
                big[i] = r == 1 - root ? k + i : -1;
            EXPECT_OK(tide_broadcast(world, big, 16, TIDE_INT32, 1 - root));
            EXPECT(big[15] == k + 15, "board broadcast after %d: %d", k, big[15]);
        }
        if (k % 401 == 0)
            EXPECT_OK(tide_barrier(world));
    }
    const char *late = "";
    EXPECT(tide_comm_async_error(world, &late) == 0, "a late report: %s", late);
}

/* A rank whose call of a mismatched collective succeeded (it only sent)
 * is told in one of its next two calls, all-reduces here; the call that
 * tells it runs none (async_error.c), so the other one pairs with the
 * peer's one all-reduce. */
static void told_in_two_calls(tide_comm *world)
{
    int told = 0;
    for (int k = 0; k < 2; k++) {
        int32_t in = 1, out = 0;
        int rc = tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM);
        told += rc == TIDE_EMISMATCH;
        EXPECT(rc == 0 || rc == TIDE_EMISMATCH, "a call after: %s", tide_err_name(rc));
    }
    EXPECT(told == 1, "told %d times in two calls", told);
}

/* Rank 1 calls another collective where rank 0 streams a broadcast (arg
 * 0: an all-reduce; 1: rank 0 calls the all-reduce, rank 1 the
 * broadcast).  The rank that reads fails its call as a mismatch at
 * once, naming both; the other learns late (its call had succeeded) at
 * one of its next two calls.  Then both pair up again, on the stream
 * and off it. */
static void stream_other_body(tide_comm *world, void *arg)
{
    int how = *(const int *)arg;
    int r = tide_comm_rank(world);
    bool streams = r == how;
    int32_t v = r == 0 ? 5 : -1, in = 1, out = 0;
    tide_req *req = NULL;
    EXPECT_OK(streams ? tide_ibroadcast(world, &v, 1, TIDE_INT32, 0, &req)
                      : tide_iallreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM, &req));
    int rc = tide_wait(req, -1);
    bool reader = r == 1;
    if (reader) {
        const char *msg = tide_req_message(req);
        EXPECT(rc == TIDE_EMISMATCH, "the reader's call: %s", tide_err_name(rc));
        EXPECT(strstr(msg, "broadcast") && strstr(msg, "allreduce"), "its message: %s", msg);
    } else if (rc == 0) {
        told_in_two_calls(world);
    } else {
        EXPECT(rc == TIDE_EMISMATCH, "the root's call: %s", tide_err_name(rc));
    }
    tide_req_free(req);
    if (reader && how == 0) /* the one of rank 0's two calls that ran */
        EXPECT_OK(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM));
    for (int k = 0; k < 20; k++)
        stream_one(world, k, k % 2);
    EXPECT_OK(tide_allreduce(world, &in, &out, 1, TIDE_INT32, TIDE_SUM));
    EXPECT(out == 2, "the all-reduce after: %d", out);
}

/* The root runs on while its reader sleeps: half a ring of broadcasts
 * succeed, and the next waits for the reader until its deadline (1 s). */
static void stream_full_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    if (r == 1)
        harness_sleep_ms(2500);
    int64_t v = 0;
    for (int k = 0; k <= 512; k++) {
        v = r == 0 ? k : -1;
        int rc = tide_broadcast(world, &v, 1, TIDE_INT64, 0);
        if (k < 512) {
            EXPECT(rc == 0 && v == k, "stream broadcast %d: %s, %lld", k, tide_err_name(rc),
                   (long long)v);
            continue;
        }
        if (r == 0)
            EXPECT(rc == TIDE_ETIMEDOUT, "the root at a full ring: %s", tide_err_name(rc));
        else
            EXPECT(rc != 0, "the broadcast its root gave up on succeeded");
    }
}

/* The reader waits long enough to sleep; the root's entry wakes it. */
static void stream_wake_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    for (int k = 0; k < 4; k++) {
        if (r == 0)
            harness_sleep_ms(300);
        double t0 = now_s();
        stream_one(world, k, 0);
        EXPECT(now_s() - t0 < 2.0, "the reader woke after %.2f s", now_s() - t0);
    }
}

/* 300 communicators of the 2 ranks, more than a rank has boards, each
 * running stream broadcasts and freed: a reused board's stream starts
 * empty. */
static void stream_reuse_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    for (int k = 0; k < 300; k++) {
        tide_comm *c = NULL;
        EXPECT_OK(tide_comm_split(world, 0, (r + k) % 2, &c));
        for (int i = 0; i < 1 + k % 5; i++)
            stream_one(c, k + i, (k + i) % 2);
        EXPECT_OK(tide_comm_free(c));
    }
}

/* One reduce, gather or scatter of k's shape from root (kind k % 3), of
 * vectors of 1-16 int32s or blocks of 1-32 (the most that streams),
 * every element checked.  Every fifth gather's root has its input in
 * recvbuf, at the other rank's block, which rank 1 as root writes
 * first: it must read its part from a copy.  Its peer comes 2 ms late
 * then, past the direct path's patience, so the root's call goes on as
 * a request (board.c, tide__board_adopt), which makes that copy. */
static void stream_rooted_one(tide_comm *world, int k, int root)
{
    int r = tide_comm_rank(world), kind = k % 3, bc = 1 + k % 64;
    int count = bc; /* a reduce, like a block, streams up to 256 bytes (64 int32) */
    int32_t in[128], out[136];
    for (int i = 0; i < 128; i++)
        in[i] = r * 1000 + k + i;
    memset(out, 0xee, sizeof out);
    if (kind == 0) {
        EXPECT_OK(tide_reduce(world, in, out, (size_t)count, TIDE_INT32, TIDE_SUM, root));
        for (int i = 0; i < count && r == root; i++)
            EXPECT(out[i] == 1000 + 2 * (k + i), "stream reduce %d [%d]: %d", k, i, out[i]);
        EXPECT(out[count] == (int32_t)0xeeeeeeee, "stream reduce %d wrote past its vector", k);
    } else if (kind == 1) {
        const int32_t *send = in;
        if (r != root && k % 5 == 1)
            harness_sleep_ms(2);
        if (r == root && k % 5 == 1) {
            memcpy(out + (1 - r) * count, in, (size_t)count * sizeof *in);
            send = out + (1 - r) * count;
        }
        EXPECT_OK(tide_gather(world, send, out, (size_t)count, TIDE_INT32, root));
        for (int q = 0; q < 2 && r == root; q++)
            for (int i = 0; i < count; i++)
                EXPECT(out[q * count + i] == q * 1000 + k + i, "stream gather %d [%d][%d]: %d",
                       k, q, i, out[q * count + i]);
        EXPECT(r != root || out[2 * count] == (int32_t)0xeeeeeeee,
               "stream gather %d wrote past its blocks", k);
    } else {
        if (k % 4 == 2) { /* the request path; the direct path the other times */
            tide_req *req = NULL;
            EXPECT_OK(tide_iscatter(world, in, out, (size_t)bc, TIDE_INT32, root, &req));
            EXPECT_OK(tide_wait(req, -1));
            expect_algo(req, "stream");
            tide_req_free(req);
        } else {
            EXPECT_OK(tide_scatter(world, in, out, (size_t)bc, TIDE_INT32, root));
        }
        for (int i = 0; i < bc; i++)
            EXPECT(out[i] == root * 1000 + k + r * bc + i, "stream scatter %d [%d]: %d", k, i,
                   out[i]);
        EXPECT(out[bc] == (int32_t)0xeeeeeeee, "stream scatter %d wrote past its block", k);
    }
}

/* 1,800 stream reduces, gathers and scatters, the root changing every
 * 300, with stream broadcasts and a nonblocking burst of each kind (the
 * request path) between: every result right, nothing reported late. */
static void stream_rooted_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    for (int k = 0; k < 1800; k++) {
        int root = k / 300 % 2;
        stream_rooted_one(world, k, root);
        if (k % 7 == 0)
            stream_one(world, k, 1 - root);
        if (k % 50 == 0) {
            int32_t in[4] = {r + k, r + k, r + k, r + k}, red[2], all[4], one[2];
            tide_req *req[3];
            EXPECT_OK(tide_ireduce(world, in, red, 2, TIDE_INT32, TIDE_SUM, root, &req[0]));
            EXPECT_OK(tide_igather(world, in, all, 2, TIDE_INT32, root, &req[1]));
            EXPECT_OK(tide_iscatter(world, in, one, 2, TIDE_INT32, root, &req[2]));
            for (int i = 0; i < 3; i++) {
                EXPECT_OK(tide_wait(req[i], -1));
                expect_algo(req[i], "stream");
                tide_req_free(req[i]);
            }
            EXPECT(r != root || (red[1] == 1 + 2 * k && all[3] == 1 + k), "burst %d: %d %d", k,
                   red[1], all[3]);
            EXPECT(one[0] == root + k, "burst %d scatter: %d", k, one[0]);
        }
    }
    const char *late = "";
    EXPECT(tide_comm_async_error(world, &late) == 0, "a late report: %s", late);
}

/* Rank 0 reduces to itself where rank 1 gathers to it: the root, which
 * receives, fails at once naming both; rank 1, whose part went out, is
 * told within its next two calls.  Then they pair up again. */
static void stream_rooted_mismatch_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    int32_t in[2] = {r, r}, out[4], one = 1, sum = 0;
    tide_req *req = NULL;
    EXPECT_OK(r == 0 ? tide_ireduce(world, in, out, 1, TIDE_INT32, TIDE_SUM, 0, &req)
                     : tide_igather(world, in, out, 1, TIDE_INT32, 0, &req));
    int rc = tide_wait(req, -1);
    if (r == 0) {
        const char *msg = tide_req_message(req);
        EXPECT(rc == TIDE_EMISMATCH, "the root's call: %s", tide_err_name(rc));
        EXPECT(strstr(msg, "reduce") && strstr(msg, "gather"), "its message: %s", msg);
        EXPECT_OK(tide_allreduce(world, &one, &sum, 1, TIDE_INT32, TIDE_SUM));
    } else {
        EXPECT_OK(rc);
        told_in_two_calls(world);
    }
    tide_req_free(req);
    for (int k = 0; k < 30; k++)
        stream_rooted_one(world, k, k % 2);
    EXPECT_OK(tide_allreduce(world, &one, &sum, 1, TIDE_INT32, TIDE_SUM));
    EXPECT(sum == 2, "the all-reduce after: %d", sum);
}

/* 1,100 broadcasts after a mismatch, the root alternating, over a full
 * ring: every one must succeed and be right, and no late report stay
 * behind.  A rank that may yet be told of the mismatch (may_be_told)
 * makes the call that tells it again (that call runs no collective);
 * returns how often it was told. */
static int broadcasts_pair_up(tide_comm *world, bool may_be_told)
{
    int r = tide_comm_rank(world), told = 0;
    for (int k = 0; k < 1100; k++) {
        int64_t x = r == k % 2 ? k : -1;
        int rc = tide_broadcast(world, &x, 1, TIDE_INT64, k % 2);
        if (rc == TIDE_EMISMATCH && may_be_told && !told) {
            told++;
            k--;
            continue;
        }
        EXPECT(rc == 0, "broadcast %d after the mismatch: %s", k, tide_err_name(rc));
        EXPECT(x == k, "broadcast %d gave %lld", k, (long long)x);
    }
    const char *late = "";
    EXPECT(tide_comm_async_error(world, &late) == 0, "a late report: %s", late);
    return told;
}

/* Rank 0 gathers one byte where rank 1 gathers 128 (in the entry
 * against in a slot), right after five broadcasts that rank 0 rooted,
 * so that its look lags behind its stream (a root looks in batches).
 * Rank 0, which reads, fails at once and is told nothing more; rank 1 is
 * told late (the call that tells it runs no collective, so it makes that
 * one again).  Then 1,100 broadcasts, over a full ring, must pair up:
 * each rank's entry for the gather stays at its index. */
static void stream_lagging_mismatch_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    int8_t v[128] = {0}, all[256];
    for (int k = 0; k < 5; k++)
        EXPECT_OK(tide_broadcast(world, v, 8, TIDE_INT8, 0));
    int rc = tide_gather(world, v, all, r == 0 ? 1 : 128, TIDE_INT8, 0);
    EXPECT(r == 0 ? rc == TIDE_EMISMATCH : rc == 0, "the gather: %s", tide_err_name(rc));
    int told = broadcasts_pair_up(world, r == 1);
    EXPECT(r == 0 || told == 1, "rank 1 was told %d times", told);
}

/* Both ranks read: rank 0 broadcasts 128 bytes from rank 1, rank 1 one
 * byte from rank 0.  Each finds the other's acknowledgement where it
 * looks for a part and fails at once; both keep their entry, so that
 * 1,100 broadcasts after pair up. */
static void stream_two_readers_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    int8_t v[128] = {0};
    int rc = tide_broadcast(world, v, r == 0 ? 128 : 1, TIDE_INT8, 1 - r);
    EXPECT(rc == TIDE_EMISMATCH, "the broadcast both read: %s", tide_err_name(rc));
    broadcasts_pair_up(world, false);
}

/* Two readers as above, rank 1 late to look: it publishes its
 * acknowledgement (a nonblocking call), and looks only after rank 0
 * found it, failed, and sent its word on the mismatch.  That word can
 * end rank 1's call before its own look: its entry must still stay, so
 * that the broadcasts after pair up. */
static void stream_two_readers_late_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world);
    int8_t v[128] = {0};
    tide_req *req = NULL;
    EXPECT_OK(tide_ibroadcast(world, v, r == 0 ? 128 : 1, TIDE_INT8, 1 - r, &req));
    if (r == 1)
        harness_sleep_ms(100);
    int rc = tide_wait(req, 5000);
    EXPECT(rc == TIDE_EMISMATCH, "the broadcast both read: %s", tide_err_name(rc));
    tide_req_free(req);
    broadcasts_pair_up(world, false);
}

/* Both ranks send (each the root of its own broadcast), one of them one
 * byte (in the entry) and the other 128 (in the slot).  Both calls
 * succeed, and both are told late; each sent one entry, so the 1,100
 * broadcasts after pair up.  (When a part took an entry per 8 bytes the
 * two streams went apart here, by fifteen entries, and had to realign.)
 * arg: bit 0, the rank that sends 128; bit 1, rank 0 reads first (else
 * rank 1) a broadcast of 128 bytes, whose part must not be taken half
 * written; bit 2, both read the next one (each from the other), and
 * fail it as two readers do, and pair up after. */
static void stream_two_senders_body(tide_comm *world, void *arg)
{
    int r = tide_comm_rank(world), big = *(int *)arg & 1, told = 0;
    int8_t v[128] = {0};
    int rc = tide_broadcast(world, v, r == big ? 128 : 1, TIDE_INT8, r);
    EXPECT(rc == 0, "the broadcast both send: %s", tide_err_name(rc));
    while (*(int *)arg & 4) {
        int64_t x = -1;
        tide_req *req = NULL;
        EXPECT_OK(tide_ibroadcast(world, &x, 1, TIDE_INT64, 1 - r, &req));
        rc = tide_wait(req, 5000);
        bool late = strstr(tide_req_message(req), "had succeeded here") != NULL;
        tide_req_free(req);
        EXPECT(rc == TIDE_EMISMATCH, "the broadcast both read: %s", tide_err_name(rc));
        if (!late || told++)
            break; /* else the call that told us ran nothing: again */
    }
    if (*(int *)arg & 2) { /* a part in a slot */
        for (int i = 0; i < 128; i++)
            v[i] = (int8_t)(r == 1 ? i : -1);
        while ((rc = tide_broadcast(world, v, 128, TIDE_INT8, 1)) == TIDE_EMISMATCH && !told)
            told++; /* that call ran nothing: again */
        EXPECT(rc == 0, "the broadcast after: %s", tide_err_name(rc));
        for (int i = 0; i < 128; i++)
            EXPECT(v[i] == i, "the broadcast after gave %d at %d", v[i], i);
    }
    told += broadcasts_pair_up(world, told == 0);
    EXPECT(told == 1, "rank %d was told %d times", r, told);
}

static void stream_broadcasts(void **state)
{
    (void)state;
    int pause = 30;
    assert_int_equal(run_on_shm(2, 20, stream_body, NULL), 0);
    assert_int_equal(run_on_shm(2, 20, stream_body, &pause), 0);
    assert_int_equal(run_on_shm_with(2, 20, TIDE_PROGRESS_INLINE, stream_body, &pause), 0);
    assert_int_equal(run_on_shm(2, 20, stream_reuse_body, NULL), 0);
    assert_int_equal(run_on_shm(2, 20, stream_wake_body, NULL), 0);
    assert_int_equal(run_on_shm(2, 1, stream_full_body, NULL), 0);
    assert_int_equal(run_on_shm(2, 20, stream_rooted_body, NULL), 0);
    assert_int_equal(run_on_shm_with(2, 20, TIDE_PROGRESS_INLINE, stream_rooted_body, NULL), 0);
}

static void stream_mismatches(void **state)
{
    (void)state;
    int how[] = {0, 1, 4};
    const char *stream = "stream";
    assert_int_equal(run_on_shm(2, 10, stream_other_body, &how[0]), 0);
    assert_int_equal(run_on_shm(2, 10, stream_other_body, &how[1]), 0);
    assert_int_equal(run_on_shm(2, 10, roots_next_call_body, &how[2]), 0);
    assert_int_equal(run_on_shm(2, 10, ahead_mismatch_body, (void *)stream), 0);
    assert_int_equal(run_on_shm_with(2, 10, TIDE_PROGRESS_INLINE, ahead_mismatch_body,
                                     (void *)stream), 0);
    assert_int_equal(run_on_shm(2, 10, ahead_mismatch_body, (void *)"stream16"), 0);
    assert_int_equal(run_on_shm(2, 10, ahead_mismatch_body, (void *)"stream32"), 0);
    assert_int_equal(run_on_shm(2, 10, stream_rooted_mismatch_body, NULL), 0);
    assert_int_equal(run_on_shm(2, 10, stream_lagging_mismatch_body, NULL), 0);
    assert_int_equal(run_on_shm(2, 10, stream_two_readers_body, NULL), 0);
    assert_int_equal(run_on_shm(2, 10, stream_two_readers_late_body, NULL), 0);
    assert_int_equal(run_on_shm_with(2, 10, TIDE_PROGRESS_INLINE, stream_two_readers_late_body,
                                     NULL), 0);
    int apart[] = {0, 1, 2, 3, 4, 5};
    for (int i = 0; i < 6; i++)
        assert_int_equal(run_on_shm(2, 10, stream_two_senders_body, &apart[i]), 0);
}

/* ---- 16 ranks ---- */

static void sixteen_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    for (int k = 0; k < 10; k++) {
        double v = r * 0.5 + k, s = 0;
        tide_req *req;
        EXPECT_OK(tide_iallreduce(world, &v, &s, 1, TIDE_FLOAT64, TIDE_SUM, &req));
        EXPECT_OK(tide_wait(req, -1));
        expect_algo(req, "board");
        tide_req_free(req);
        EXPECT(s == 0.5 * n * (n - 1) / 2 + (double)n * k, "16 ranks: %g", s);
        int32_t blocks[16], mine = r * 3 + k;
        EXPECT_OK(tide_allgather(world, &mine, blocks, 1, TIDE_INT32));
        for (int q = 0; q < n; q++)
            EXPECT(blocks[q] == q * 3 + k, "16 ranks: block %d is %d", q, blocks[q]);
    }
}

static void sixteen_ranks(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(16, 60, sixteen_body, NULL), 0);
}

/* ---- the barrier ---- */

/* Rank r enters the barrier r * 40 ms late, four times: on boards by
 * default, and nobody leaves before the last one entered (the entry
 * times, on the host's one monotonic clock, all-gathered afterwards).
 * Then one forced by messages, and one on a split-off pair. */
static void barrier_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    double entered[16], left;
    EXPECT(n <= 16, "at most 16 ranks");
    for (int k = 0; k < 4; k++) {
        struct timespec late = {0, r * 40 * 1000000L};
        nanosleep(&late, NULL);
        double mine = now_s();
        tide_req *req;
        EXPECT_OK(tide_ibarrier(world, &req));
        EXPECT_OK(tide_wait(req, 5000));
        left = now_s();
        expect_algo(req, "board");
        tide_req_free(req);
        EXPECT_OK(tide_allgather(world, &mine, entered, 1, TIDE_FLOAT64));
        for (int q = 0; q < n; q++)
            EXPECT(left >= entered[q], "round %d: left at %.6f, before rank %d entered at %.6f",
                   k, left, q, entered[q]);
    }
    setenv("TIDE_ALGO_BARRIER", "dissemination", 1);
    tide_req *req;
    EXPECT_OK(tide_ibarrier(world, &req));
    EXPECT_OK(tide_wait(req, 5000));
    expect_algo(req, "dissemination");
    tide_req_free(req);
    unsetenv("TIDE_ALGO_BARRIER");
    tide_comm *pair;
    EXPECT_OK(tide_comm_split(world, r / 2, r, &pair));
    for (int k = 0; k < 100; k++)
        EXPECT_OK(tide_barrier(pair));
    EXPECT_OK(tide_comm_free(pair));
    EXPECT_OK(tide_barrier(world));
}

static void barrier_on_boards(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(2, 20, barrier_body, NULL), 0);
    assert_int_equal(run_on_shm(4, 20, barrier_body, NULL), 0);
    assert_int_equal(run_on_shm_with(3, 20, TIDE_PROGRESS_INLINE, barrier_body, NULL), 0);
}

int main(void)
{
    /* tools/test.sh's runs set these for the harness's own check (TCP
     * only, two test hosts); boards need one host's shared memory, which
     * this file asks for itself. */
    unsetenv("TIDE_EXPECT_TRANSPORT");
    unsetenv("TIDE_TEST_HOST_SIZE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_in_flight_on_three_comms),
        cmocka_unit_test(more_communicators_than_boards),
        cmocka_unit_test(rank_killed_while_peers_wait),
        cmocka_unit_test(peers_left_before_we_looked),
        cmocka_unit_test(late_rank_then_still_works),
        cmocka_unit_test(late_publication_wakes_a_sleeper),
        cmocka_unit_test(mismatch_between_boards),
        cmocka_unit_test(mismatch_board_against_messages),
        cmocka_unit_test(mismatch_tiny_part_against_slot),
        cmocka_unit_test(direct_path_and_its_hand_overs),
        cmocka_unit_test(progress_takes_over_after_direct_calls),
        cmocka_unit_test(own_part_where_the_result_goes),
        cmocka_unit_test(choice_follows_the_environment),
        cmocka_unit_test(broadcast_root_runs_ahead),
        cmocka_unit_test(rooted_roots_learn_late),
        cmocka_unit_test(two_rank_root_runs_ahead),
        cmocka_unit_test(barrier_on_boards),
        cmocka_unit_test(stream_broadcasts),
        cmocka_unit_test(stream_mismatches),
        cmocka_unit_test(sixteen_ranks),
    };
    return cmocka_run_group_tests_name("board collectives over shared memory", tests, NULL, NULL);
}
