/* test_shm.c - the shared-memory transport as users meet it: which
 * transport carries each pair (TIDE_TRANSPORT auto, shm, tcp; a job split
 * into two test hosts), that a rank killed while streaming a large
 * message through a ring fails its partner with TIDE_EPEER and leaves
 * nothing behind in /dev/shm (the segments are unnamed memfds), and the
 * staged collectives (collectives/stage.h): chosen exactly where every
 * pair shares memory, many in flight at once on several communicators,
 * their slots given back, the reduce-scatter's rounds, and a rank killed
 * in the middle of one; and that single copies (process_vm_readv) keep a
 * chain broadcast's receives posted ahead of its chunks. */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "engine/context.h"
#include "tests/coll_check.h"
#include "tests/harness.h"
#include "transports/rx.h"

/* TIDE_TEST_HOST_SIZE (harness.c) as this test set it: 0 = one host. */
static int host_size;
static const char *want_local; /* what carries pairs on one host */

static void transports_match(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    for (int p = 0; p < n; p++) {
        if (p == r)
            continue;
        bool same = !host_size || p / host_size == r / host_size;
        const char *want = same ? want_local : "tcp", *got = tide_comm_transport(comm, p);
        EXPECT(got && !strcmp(got, want), "rank %d: pair with %d on %s, want %s", r, p,
               got ? got : "(null)", want);
    }
    EXPECT(tide_comm_transport(comm, n) == NULL, "out of range");
    EXPECT(tide_comm_transport(NULL, 0) == NULL, "NULL comm");
    /* Both kinds of pair carry a collective whose every element is
     * checked; it runs staged exactly where every pair shares memory. */
    size_t count = 100000;
    int *v = malloc(count * sizeof *v);
    EXPECT(v, "malloc");
    for (size_t i = 0; i < count; i++)
        v[i] = r * 3 + (int)(i % 5);
    tide_req *req;
    EXPECT_OK(tide_iallreduce(comm, TIDE_IN_PLACE, v, count, TIDE_INT32, TIDE_SUM, &req));
    EXPECT_OK(tide_wait(req, -1));
    bool staged = !host_size && !strcmp(want_local, "shm");
    EXPECT(staged == !strcmp(tide_req_algorithm(req), "shm"), "rank %d: the allreduce ran %s",
           r, tide_req_algorithm(req));
    tide_req_free(req);
    for (size_t i = 0; i < count; i++)
        EXPECT(v[i] == 3 * n * (n - 1) / 2 + n * (int)(i % 5), "element %zu is %d", i, v[i]);
    free(v);
}

static void run_transports(const char *transport, int hosts_of, const char *local)
{
    struct harness_opts o;
    harness_defaults(&o);
    char k[16];
    snprintf(k, sizeof k, "%d", hosts_of);
    setenv("TIDE_TRANSPORT", transport, 1);
    setenv("TIDE_TEST_HOST_SIZE", k, 1);
    host_size = hosts_of;
    want_local = local;
    int failed = harness_run(4, &o, transports_match, NULL);
    unsetenv("TIDE_TEST_HOST_SIZE");
    unsetenv("TIDE_TRANSPORT");
    assert_int_equal(failed, 0);
}

static void auto_uses_shared_memory_on_one_host(void **state)
{
    run_transports("auto", 0, "shm");
}

static void two_hosts_use_tcp_between_them(void **state)
{
    run_transports("auto", 2, "shm");
    run_transports("shm", 2, "shm");
}

static void tcp_forced_everywhere(void **state)
{
    run_transports("tcp", 0, "tcp");
}

/* Entries of /dev/shm whose name mentions tide. */
static int tide_entries_in_dev_shm(void)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, "tide") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* Whether this process maps a tide shm segment (a memfd, so nameless). */
static bool maps_segment(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, "memfd:tide-shm") != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Rank 0 streams 64 MiB to rank 1 through their ring and is killed half
 * way: rank 1 fails with TIDE_EPEER naming rank 0, within the run limit
 * (a hang would be killed and counted). */
static void killed_mid_stream(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    size_t big = (size_t)64 << 20;
    char *buf = malloc(big);
    EXPECT(buf, "malloc");
    memset(buf, r == 0 ? 7 : 0, big);
    EXPECT(!strcmp(tide_comm_transport(comm, 1 - r), "shm"), "pair not on shm");
    EXPECT(maps_segment(), "no memfd:tide-shm mapping in /proc/self/maps");
    EXPECT_OK(tide_barrier(comm));
    if (r == 0) {
        tide_req *s;
        EXPECT_OK(tide_isend(comm, buf, big, 1, 1, &s));
        struct timespec pause = {0, 3 * 1000 * 1000};
        nanosleep(&pause, NULL);
        raise(SIGKILL);
    }
    /* Rank 1 reads a little at a time, so the sender is surely mid-way. */
    tide_req *rx, *never;
    int small;
    EXPECT_OK(tide_irecv(comm, &small, sizeof small, 0, 9, &never));
    EXPECT_OK(tide_irecv(comm, buf, big, 0, 1, &rx));
    int rc = tide_wait(never, 10000);
    EXPECT(rc == TIDE_EPEER, "receive from the dead rank returned %s", tide_err_name(rc));
    EXPECT(strstr(tide_req_message(never), "rank 0"), "message: %s", tide_req_message(never));
    rc = tide_wait(rx, 10000);
    EXPECT(rc == TIDE_EPEER || (rc == 0 && buf[0] == 7 && buf[big - 1] == 7),
           "the big receive returned %s", tide_err_name(rc));
    tide_req_free(never);
    tide_req_free(rx);
    free(buf);
}

/* ---- staged collectives ---- */

enum { INFLIGHT = 6, SEQUENTIAL = 150 };

static float expect_sum(int n, size_t i)
{
    return (float)(n * (n - 1) / 2) + (float)n * (float)(i % 7);
}

/* Rank r's input element i. */
static float input(int r, size_t i)
{
    return (float)r + (float)(i % 7);
}

/* INFLIGHT allreduces, broadcasts and all-gathers posted at once on the
 * world and on two halves split from it (so each rank holds many slots at
 * a time, on three communicators), every element checked; then
 * SEQUENTIAL more allreduces, far past the 64 slots a rank has: they
 * pass only if every finished one gave its slot back. */
static void staged_together(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    /* Past every staged threshold at 2 ranks, under the 2-rank
     * all-gather's ceiling (2 MiB in all; select.c), and not a multiple
     * of the group. */
    size_t count = ((size_t)1 << 17) + 1;
    tide_comm *half;
    EXPECT_OK(tide_comm_split(comm, r % 2, r, &half));
    int hn = tide_comm_size(half);
    float *buf[3 * INFLIGHT];
    tide_req *req[3 * INFLIGHT];
    for (int k = 0; k < 3 * INFLIGHT; k++) {
        size_t len = k % 3 == 2 ? count * (size_t)n : count;
        /* An in-place all-gather's input is this rank's block. */
        size_t at = k % 3 == 2 ? (size_t)tide_comm_rank(k % 2 ? half : comm) * count : 0;
        buf[k] = malloc(len * sizeof(float));
        EXPECT(buf[k], "malloc");
        for (size_t i = 0; i < count; i++)
            buf[k][at + i] = input(r, i);
    }
    for (int k = 0; k < 3 * INFLIGHT; k++) {
        tide_comm *c = k % 2 ? half : comm;
        if (k % 3 == 0)
            EXPECT_OK(tide_iallreduce(c, TIDE_IN_PLACE, buf[k], count, TIDE_FLOAT32, TIDE_SUM,
                                      &req[k]));
        else if (k % 3 == 1)
            EXPECT_OK(tide_ibroadcast(c, buf[k], count, TIDE_FLOAT32, k % tide_comm_size(c),
                                      &req[k]));
        else
            EXPECT_OK(tide_iallgather(c, TIDE_IN_PLACE, buf[k], count, TIDE_FLOAT32, &req[k]));
    }
    for (int k = 0; k < 3 * INFLIGHT; k++) {
        tide_comm *c = k % 2 ? half : comm;
        int cn = k % 2 ? hn : n, cr = tide_comm_rank(c);
        EXPECT_OK(tide_wait(req[k], 30000));
        EXPECT(!strcmp(tide_req_algorithm(req[k]), "shm"), "op %d ran %s", k,
               tide_req_algorithm(req[k]));
        tide_req_free(req[k]);
        /* world rank of comm rank q: halves are the even and odd ranks */
        for (size_t i = 0; i < count * (size_t)(k % 3 == 2 ? cn : 1); i++) {
            int q = (int)(i / count);
            int wq = k % 2 ? 2 * q + r % 2 : q;
            int root = k % 2 ? 2 * (k % hn) + r % 2 : k % n;
            float want = k % 3 == 0 ? (k % 2 ? (float)(r % 2) * (float)hn + (float)(hn * (hn - 1))
                                                 + (float)hn * (float)(i % 7)
                                             : expect_sum(n, i))
                       : k % 3 == 1 ? input(root, i)
                                    : input(wq, i % count);
            if (buf[k][i] != want) {
                EXPECT(0, "rank %d (%d of %d), op %d, element %zu: %g, want %g", r, cr, cn, k,
                       i, (double)buf[k][i], (double)want);
                break;
            }
        }
        free(buf[k]);
    }
    float *v = malloc(count * sizeof *v);
    EXPECT(v, "malloc");
    for (int k = 0; k < SEQUENTIAL; k++) {
        for (size_t i = 0; i < count; i++)
            v[i] = input(r, i);
        EXPECT_OK(tide_allreduce(comm, TIDE_IN_PLACE, v, count, TIDE_FLOAT32, TIDE_SUM));
        EXPECT(v[count - 1] == expect_sum(n, count - 1), "allreduce %d: %g", k,
               (double)v[count - 1]);
    }
    free(v);
    EXPECT_OK(tide_comm_free(half));
}

/* Run body(arg) on n ranks with TIDE_TRANSPORT=shm; how many ranks failed. */
static int run_on_shm(int n, harness_body body, void *arg)
{
    struct harness_opts o;
    harness_defaults(&o);
    setenv("TIDE_TRANSPORT", "shm", 1);
    int failed = harness_run(n, &o, body, arg);
    unsetenv("TIDE_TRANSPORT");
    return failed;
}

static void staged_collectives_together(void **state)
{
    /* 1 MiB broadcasts between the halves' 2 ranks go down the chain by
     * size (select.c): staged by choice here. */
    setenv("TIDE_ALGO_BROADCAST", "shm", 1);
    int failed = run_on_shm(4, staged_together, NULL);
    unsetenv("TIDE_ALGO_BROADCAST");
    assert_int_equal(failed, 0);
}

/* ---- the staged reduce-scatter ---- */

/* Element i of block b of rank r's input: small integers, exact in float. */
static float rs_input(int r, int b, size_t i)
{
    return (float)((r + 1) * (b + 2) + (int)(i % 11));
}

/* One reduce-scatter of `block` floats a rank on c, checked element by
 * element: out of place or in place, SUM or MAX; it must run `want`. */
static void rs_case(tide_comm *c, size_t block, bool in_place, tide_op op, const char *want)
{
    int r = tide_comm_rank(c), n = tide_comm_size(c);
    float *in = malloc(block * (size_t)n * sizeof *in), *out = malloc(block * sizeof *out);
    EXPECT(in && out, "malloc");
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < block; i++)
            in[(size_t)b * block + i] = rs_input(r, b, i);
    tide_req *req;
    EXPECT_OK(tide_ireduce_scatter(c, in_place ? TIDE_IN_PLACE : in, in_place ? in : out, block,
                                   TIDE_FLOAT32, op, &req));
    EXPECT_OK(tide_wait(req, 30000));
    EXPECT(!strcmp(tide_req_algorithm(req), want), "%zu floats a block on %d ranks ran %s, not %s",
           block, n, tide_req_algorithm(req), want);
    tide_req_free(req);
    const float *got = in_place ? in : out;
    for (size_t i = 0; i < block; i++) {
        float w = 0;
        for (int q = 0; q < n; q++) {
            float v = rs_input(q, r, i);
            w = op == TIDE_MAX ? (q == 0 || v > w ? v : w) : w + v;
        }
        if (got[i] != w) {
            EXPECT(0, "rank %d of %d, %zu a block, %s: element %zu is %g, want %g", r, n, block,
                   in_place ? "in place" : "out of place", i, (double)got[i], (double)w);
            break;
        }
    }
    free(in);
    free(out);
}

/* By size on 4 ranks and a group of 3: staged from where the boards end,
 * at every size up to 4 ranks (select.c); forced, blocks that take
 * several rounds of a staging half and end in a partial one (1 MiB
 * halves: 65536 floats a block a round on 4 ranks), in place and out. */
static void staged_reduce_scatter_body(tide_comm *world, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(world), n = tide_comm_size(world);
    tide_comm *three;
    EXPECT_OK(tide_comm_split(world, r < 3, r, &three));
    rs_case(world, 20000, false, TIDE_SUM, "shm");        /* 312 KiB in all */
    rs_case(world, 300000, false, TIDE_SUM, "shm");       /* 4.6 MiB, where the ring would pay */
    if (r < 3)
        rs_case(three, 30000, true, TIDE_MAX, "shm");
    setenv("TIDE_ALGO_REDUCE_SCATTER", "shm", 1);
    rs_case(world, 200001, false, TIDE_SUM, "shm");
    rs_case(world, 200001, true, TIDE_SUM, "shm");
    rs_case(world, 3, true, TIDE_MAX, "shm");
    if (r < 3)
        rs_case(three, 87381, false, TIDE_SUM, "shm"); /* exactly one round a block */
    unsetenv("TIDE_ALGO_REDUCE_SCATTER");
    EXPECT(n == 4, "run on 4 ranks");
    EXPECT_OK(tide_comm_free(three));
}

static void staged_reduce_scatter(void **state)
{
    (void)state;
    assert_int_equal(run_on_shm(4, staged_reduce_scatter_body, NULL), 0);
}

/* ---- single copies keep up with a pipeline ---- */

#define CHAIN_FLOATS ((size_t)4 << 20) /* 16 MiB: 64 chunks of the chain's 256 KiB */
#define CHAIN_ROUNDS 3
#define CHAIN_WINDOW 8 /* chain.c's WINDOW: receives posted ahead */

/* A chain broadcast on 2 ranks: the reader acks a single-copy chunk, the
 * root sends the next at once, and the receive for it is posted when the
 * chunk before is delivered.  Only the first window's chunks may beat
 * their receives (the root may start first; and one frame more, of
 * whatever comes next); the rest must find theirs posted.  A reader that read on through every frame in its ring before
 * delivering anything routed all of them to the unexpected pool (56 of
 * the 64 chunks each time) and took 10-20x as long. */
static void chain_single_copies(tide_comm *comm, void *arg)
{
    (void)arg;
    int r = tide_comm_rank(comm);
    float *v = malloc(CHAIN_FLOATS * sizeof *v);
    EXPECT(v, "malloc");
    for (int k = 0; k < CHAIN_ROUNDS; k++) {
        for (size_t i = 0; i < CHAIN_FLOATS; i++)
            v[i] = r == 0 ? input(k, i) : -1.0f;
        EXPECT_OK(tide_barrier(comm));
        uint64_t before = comm->ctx->frames_unexpected;
        tide_req *req;
        EXPECT_OK(tide_ibroadcast(comm, v, CHAIN_FLOATS, TIDE_FLOAT32, 0, &req));
        EXPECT_OK(tide_wait(req, 30000));
        EXPECT(!strcmp(tide_req_algorithm(req), "chain"), "ran %s", tide_req_algorithm(req));
        tide_req_free(req);
        uint64_t ux = comm->ctx->frames_unexpected - before;
        EXPECT(ux <= CHAIN_WINDOW + 1, "round %d: %llu frames came before their receive "
               "(%d chunks are posted ahead)", k, (unsigned long long)ux, CHAIN_WINDOW);
        for (size_t i = 0; i < CHAIN_FLOATS; i++)
            if (v[i] != input(k, i)) {
                EXPECT(0, "rank %d, round %d, element %zu: %g", r, k, i, (double)v[i]);
                break;
            }
    }
    free(v);
}

static void chain_broadcast_keeps_its_receives_posted(void **state)
{
    (void)state;
    static const char *cma[] = {"1", "auto"}; /* every frame single-copy; pulled ones */
    setenv("TIDE_ALGO_BROADCAST", "chain", 1);
    for (size_t i = 0; i < sizeof cma / sizeof cma[0]; i++) {
        setenv("TIDE_SHM_CMA", cma[i], 1);
        int failed = run_on_shm(2, chain_single_copies, NULL);
        if (failed)
            fail_msg("TIDE_SHM_CMA=%s: %d ranks failed", cma[i], failed);
    }
    unsetenv("TIDE_SHM_CMA");
    unsetenv("TIDE_ALGO_BROADCAST");
}

/* ---- exchanges whose blocks are pulled ---- */

/* Since an all-gather's and an all-to-all's blocks may be pulled in one
 * copy (coll.c, pullable), a peer reads our input, or our own block in
 * recvbuf, while we copy into the rest of recvbuf: every layout (apart,
 * in place, aliased, overlapping, where the call takes it), on 2 ranks
 * (an all-gather by recursive doubling, its first block sent from the
 * input where it lies apart), 3 (Bruck's rotations) and 4, at totals a
 * single copy takes (from 64 KiB a message, below 1 MiB) and by the
 * rings (TIDE_SHM_CMA=0). */
static void pulled_exchanges_body(tide_comm *comm, void *arg)
{
    (void)arg;
    int n = tide_comm_size(comm);
    static const size_t totals[] = {(size_t)256 << 10, (size_t)768 << 10};
    static const enum coll colls[] = {C_ALLGATHER, C_ALLTOALL};
    unsigned salt = 17;
    for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++)
        for (size_t t = 0; t < sizeof totals / sizeof totals[0]; t++)
            for (int layout = 0; layout < L_COUNT; layout++) {
                size_t count = totals[t] / sizeof(int32_t) / (size_t)n + (size_t)layout;
                struct ccase k = {colls[c], TIDE_INT32, TIDE_SUM, count, 0,
                                  (enum layout_kind)layout, false, salt++};
                coll_run_case(comm, &k);
            }
    coll_end_of_body();
}

static void exchanges_pulled_in_one_copy(void **state)
{
    (void)state;
    static const char *cma[] = {"auto", "0"};
    for (size_t i = 0; i < sizeof cma / sizeof cma[0]; i++) {
        setenv("TIDE_SHM_CMA", cma[i], 1);
        for (int n = 2; n <= 4; n++) {
            int failed = run_on_shm(n, pulled_exchanges_body, NULL);
            if (failed)
                fail_msg("TIDE_SHM_CMA=%s, %d ranks: %d ranks failed", cma[i], n, failed);
        }
    }
    unsetenv("TIDE_SHM_CMA");
}

/* ---- a rank running ahead waits ---- */

#define AHEAD_CALLS 200
#define AHEAD_FLOATS 2048 /* 8 KiB: through the ring, not a single copy */

/* Rank k's contribution to the k-th reduce. */
static float ahead_input(int rank, int k, size_t i)
{
    return (float)(rank * 1000 + k) + (float)(i % 5);
}

static void ahead_check(const float *sum, int k)
{
    for (size_t i = 0; i < AHEAD_FLOATS; i++)
        if (sum[i] != ahead_input(0, k, i) + ahead_input(1, k, i)) {
            EXPECT(0, "reduce %d, element %zu: %g", k, i, (double)sum[i]);
            return;
        }
}

/* The root's reduces, after it slept while rank 1 ran ahead. */
static void ahead_root(tide_comm *comm)
{
    float v[AHEAD_FLOATS], sum[AHEAD_FLOATS];
    for (int k = 0; k < AHEAD_CALLS; k++) {
        for (size_t i = 0; i < AHEAD_FLOATS; i++)
            v[i] = ahead_input(0, k, i);
        EXPECT_OK(tide_reduce(comm, v, sum, AHEAD_FLOATS, TIDE_FLOAT32, TIDE_SUM, 0));
        ahead_check(sum, k);
    }
}

static uint64_t unexpected_so_far(tide_comm *comm)
{
    return __atomic_load_n(&comm->ctx->frames_unexpected, __ATOMIC_RELAXED);
}

/* Rank 1 sends 200 reduces of 8 KiB while its root sleeps: the root
 * buffers TIDE_RX_AHEAD of them (transports/rx.c), not all 200 (1.6 MB),
 * and rank 1 waits; then every result is right. */
static void ahead_waits(tide_comm *comm, void *arg)
{
    (void)arg;
    float v[AHEAD_FLOATS];
    EXPECT_OK(tide_barrier(comm));
    if (tide_comm_rank(comm) == 1) {
        for (int k = 0; k < AHEAD_CALLS; k++) {
            for (size_t i = 0; i < AHEAD_FLOATS; i++)
                v[i] = ahead_input(1, k, i);
            EXPECT_OK(tide_reduce(comm, v, NULL, AHEAD_FLOATS, TIDE_FLOAT32, TIDE_SUM, 0));
        }
        return;
    }
    /* A receive from ourselves keeps our reactor reading while we
     * sleep (an idle one may read nothing until woken). */
    int keep = 0, one = 1;
    tide_req *busy;
    EXPECT_OK(tide_irecv(comm, &keep, sizeof keep, 0, 9, &busy));
    uint64_t before = unexpected_so_far(comm);
    harness_sleep_ms(300);
    uint64_t came = unexpected_so_far(comm) - before;
    EXPECT(came <= TIDE_RX_AHEAD + 1, "%llu of rank 1's reduces buffered while we slept (bound %d)",
           (unsigned long long)came, TIDE_RX_AHEAD);
    EXPECT_OK(tide_send(comm, &one, sizeof one, 0, 9));
    EXPECT_OK(tide_wait(busy, 20000));
    tide_req_free(busy);
    ahead_root(comm);
}

/* A receive for the peer that runs ahead lifts the wait: rank 1 posts
 * 200 reduces, then sends a message; the sleeping root receives that
 * message first, from behind the reduces' frames, then reduces. */
static void ahead_lifted(tide_comm *comm, void *arg)
{
    (void)arg;
    EXPECT_OK(tide_barrier(comm));
    int token = -1;
    if (tide_comm_rank(comm) == 0) {
        harness_sleep_ms(200);
        EXPECT_OK(tide_recv(comm, &token, sizeof token, 1, 5));
        EXPECT(token == 77, "token %d", token);
        ahead_root(comm);
        return;
    }
    float *v = malloc((size_t)AHEAD_CALLS * AHEAD_FLOATS * sizeof *v);
    tide_req *req[AHEAD_CALLS];
    EXPECT(v, "malloc");
    for (int k = 0; k < AHEAD_CALLS; k++) {
        float *mine = v + (size_t)k * AHEAD_FLOATS;
        for (size_t i = 0; i < AHEAD_FLOATS; i++)
            mine[i] = ahead_input(1, k, i);
        EXPECT_OK(tide_ireduce(comm, mine, NULL, AHEAD_FLOATS, TIDE_FLOAT32, TIDE_SUM, 0,
                               &req[k]));
    }
    token = 77;
    EXPECT_OK(tide_send(comm, &token, sizeof token, 0, 5));
    for (int k = 0; k < AHEAD_CALLS; k++) {
        EXPECT_OK(tide_wait(req[k], 20000));
        tide_req_free(req[k]);
    }
    free(v);
}

static void rank_running_ahead_waits(void **state)
{
    (void)state;
    static const char *transports[] = {"shm", "tcp"};
    struct harness_opts o;
    harness_defaults(&o);
    setenv("TIDE_ALGO_REDUCE", "binomial", 1);
    for (size_t t = 0; t < 2; t++) {
        setenv("TIDE_TRANSPORT", transports[t], 1);
        int failed = harness_run(2, &o, ahead_waits, NULL);
        if (!failed)
            failed = harness_run(2, &o, ahead_lifted, NULL);
        if (failed)
            fail_msg("TIDE_TRANSPORT=%s: %d ranks failed", transports[t], failed);
    }
    unsetenv("TIDE_TRANSPORT");
    unsetenv("TIDE_ALGO_REDUCE");
}

/* Rank 2 dies while a 64 MiB staged allreduce runs: every other rank
 * fails with TIDE_EPEER within the run limit, and the next staged call
 * on the broken communicator fails too rather than hang. */
static void rank_killed_mid_staged_collective(void **state)
{
    struct harness_kill k = {2, 2, "shm"};
    assert_int_equal(run_on_shm(4, harness_killed_mid_allreduce, &k), 1); /* the killed rank */
}

static void killed_rank_leaves_nothing_behind(void **state)
{
    int before = tide_entries_in_dev_shm();
    assert_int_equal(run_on_shm(2, killed_mid_stream, NULL), 1); /* the killed rank, and only it */
    assert_int_equal(tide_entries_in_dev_shm(), before);
}

int main(void)
{
    /* tools/test.sh's runs set these for the harness's own check; this
     * file sets and checks the transports itself. */
    unsetenv("TIDE_EXPECT_TRANSPORT");
    unsetenv("TIDE_TEST_HOST_SIZE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_uses_shared_memory_on_one_host),
        cmocka_unit_test(two_hosts_use_tcp_between_them),
        cmocka_unit_test(tcp_forced_everywhere),
        cmocka_unit_test(killed_rank_leaves_nothing_behind),
        cmocka_unit_test(staged_collectives_together),
        cmocka_unit_test(staged_reduce_scatter),
        cmocka_unit_test(rank_killed_mid_staged_collective),
        cmocka_unit_test(chain_broadcast_keeps_its_receives_posted),
        cmocka_unit_test(exchanges_pulled_in_one_copy),
        cmocka_unit_test(rank_running_ahead_waits),
    };
    return cmocka_run_group_tests_name("shm transport", tests, NULL, NULL);
}
