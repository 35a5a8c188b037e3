/* test_failures_tcp.c - what happens when things go wrong, across real
 * rank processes: a peer killed mid-receive, deadlines, waits that time
 * out and are resumed, abort, a wrong job token, a stranger knocking
 * during a running job, and completion callbacks. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include <cmocka.h>

#include "tests/harness.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Shared between the rank processes (mapped before the fork). */
struct shared {
    volatile double kill_time;
    _Atomic int any_checked; /* survivors past their any-source check */
};
static struct shared *shm;

/* ---- a peer killed mid-receive ---- */

/* Rank 0 starts a 256 MiB send to rank 1, then kills itself.  Rank 1
 * also waits on a tag rank 0 never sends (from rank 0, and from any
 * rank), so those receives are surely pending at the kill (the big one
 * may, on a slow moment, have arrived whole first): they must fail with
 * TIDE_EPEER within a second, naming rank 0; the big one must fail the
 * same way or be complete and intact; and the surviving ranks can still
 * talk to each other. */
static void peer_killed(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t big = 256u << 20;
    char *buf = malloc(big);
    EXPECT(buf, "malloc");
    memset(buf, r == 0 ? 1 : 0, big);
    EXPECT_OK(tide_barrier(comm));
    if (r == 0) {
        tide_req *s;
        EXPECT_OK(tide_isend(comm, buf, big, 1, 1, &s));
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL); /* let the transfer get under way */
        shm->kill_time = now_s();
        raise(SIGKILL);
    }
    tide_req *never, *any, *bulk = NULL, *other = NULL;
    int small, small_any;
    EXPECT_OK(tide_irecv(comm, &small, sizeof small, 0, 7, &never));
    EXPECT_OK(tide_irecv(comm, &small_any, sizeof small_any, TIDE_ANY_SOURCE, 7, &any));
    if (r == 1)
        EXPECT_OK(tide_irecv(comm, buf, big, 0, 1, &bulk));
    int rc = tide_wait(never, 10000);
    double lag = now_s() - shm->kill_time;
    EXPECT(rc == TIDE_EPEER, "receive from the dead rank returned %s", tide_err_name(rc));
    EXPECT(lag < 1.0, "failure noticed %.3f s after the kill", lag);
    EXPECT(strstr(tide_req_message(never), "rank 0") != NULL, "message: %s",
           tide_req_message(never));
    tide_req_free(never);
    /* the lost rank might have been an any-source receive's sender: it
     * fails too (MPI's ULFM rule), naming it */
    rc = tide_wait(any, 10000);
    EXPECT(rc == TIDE_EPEER && strstr(tide_req_message(any), "rank 0 was lost"),
           "any-source receive returned %s: %s", tide_err_name(rc), tide_req_message(any));
    tide_req_free(any);
    /* No survivor goes on (and exits) before every survivor has checked
     * its any-source receive: a survivor's exit is a loss too, and one
     * seen before rank 0's (rank 1 reads rank 0's last bulk bytes before
     * its end) would fail the receive naming that survivor instead. */
    atomic_fetch_add(&shm->any_checked, 1);
    double give_up = now_s() + 10;
    while (atomic_load(&shm->any_checked) < n - 1 && now_s() < give_up)
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    EXPECT(atomic_load(&shm->any_checked) == n - 1, "%d of %d survivors checked in 10 s",
           atomic_load(&shm->any_checked), n - 1);
    if (bulk) {
        rc = tide_wait(bulk, 10000);
        EXPECT(rc == TIDE_EPEER || rc == 0, "big receive returned %s", tide_err_name(rc));
        if (rc == 0)
            EXPECT(tide_req_bytes(bulk) == big && buf[0] == 1 && buf[big - 1] == 1,
                   "a big receive that succeeded must be whole");
        tide_req_free(bulk);
    }
    /* a receive posted after the loss fails at once */
    EXPECT(tide_recv(comm, &small, sizeof small, 0, 2) == TIDE_EPEER, "late receive");
    /* survivors still work: ranks 1..n-1 pass a value around */
    if (n > 2) {
        int v = r, got = -1, to = r % (n - 1) + 1, from = (r + n - 3) % (n - 1) + 1;
        EXPECT_OK(tide_irecv(comm, &got, sizeof got, from, 3, &other));
        EXPECT_OK(tide_send(comm, &v, sizeof v, to, 3));
        EXPECT_OK(tide_wait(other, 5000));
        EXPECT(got == from, "survivor exchange got %d", got);
        tide_req_free(other);
    }
    free(buf);
}

static void run_peer_killed(int ranks, tide_progress_mode mode)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.progress = mode;
    atomic_store(&shm->any_checked, 0);
    int failed = harness_run(ranks, &o, peer_killed, NULL);
    /* exactly the killed rank 0 counts as failed */
    assert_int_equal(failed, 1);
}

static void peer_killed_2_ranks(void **state) { run_peer_killed(2, TIDE_PROGRESS_THREAD); }
static void peer_killed_4_ranks(void **state) { run_peer_killed(4, TIDE_PROGRESS_THREAD); }
static void peer_killed_inline(void **state) { run_peer_killed(3, TIDE_PROGRESS_INLINE); }

/* A rank that simply exits (no finalize) while a peer waits on it. */
static void peer_exits(tide_comm *comm, void *arg)
{
    if (tide_comm_rank(comm) == 1)
        _exit(0);
    int v;
    int rc = tide_recv(comm, &v, sizeof v, 1, 0);
    EXPECT(rc == TIDE_EPEER, "got %s", tide_err_name(rc));
}

static void peer_exits_without_finalize(void **state)
{
    assert_int_equal(harness_run(2, NULL, peer_exits, NULL), 0);
}

/* ---- deadlines and wait timeouts ---- */

static void deadlines(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    int v = 0, got = 0;
    if (r == 0) {
        /* a short wait times out and leaves the request pending */
        tide_req *req;
        EXPECT_OK(tide_irecv(comm, &got, sizeof got, 1, 5, &req));
        EXPECT(tide_wait(req, 50) == TIDE_ETIMEDOUT, "short wait");
        int done = 1;
        EXPECT_OK(tide_test(req, &done));
        EXPECT(done == 0, "still pending after a timed-out wait");
        EXPECT_OK(tide_send(comm, &v, sizeof v, 1, 6)); /* "go ahead" */
        EXPECT_OK(tide_wait(req, 5000));
        EXPECT(got == 77, "resumed wait got %d", got);
        tide_req_free(req);
    } else {
        EXPECT_OK(tide_recv(comm, &v, sizeof v, 0, 6));
        v = 77;
        EXPECT_OK(tide_send(comm, &v, sizeof v, 0, 5));
    }
    EXPECT_OK(tide_barrier(comm));
    /* a receive nobody answers (from ourselves, so no peer's exit can
     * end it first) fails at the operation's deadline of 1 s */
    double t0 = now_s();
    int rc = tide_recv(comm, &got, sizeof got, r, 99);
    double took = now_s() - t0;
    EXPECT(rc == TIDE_ETIMEDOUT, "got %s", tide_err_name(rc));
    EXPECT(took > 0.9 && took < 3.0, "deadline fired after %.2f s", took);
}

static void deadlines_and_resumed_waits(void **state)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.timeout_s = 1.0;
    assert_int_equal(harness_run(2, &o, deadlines, NULL), 0);
    o.progress = TIDE_PROGRESS_INLINE;
    assert_int_equal(harness_run(2, &o, deadlines, NULL), 0);
}

/* ---- abort ---- */

static void aborting(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), v;
    EXPECT_OK(tide_barrier(comm));
    tide_req *req;
    EXPECT_OK(tide_irecv(comm, &v, sizeof v, 1 - r, 1, &req));
    if (r == 0) {
        double t0 = now_s();
        EXPECT_OK(tide_comm_abort(comm));
        int rc = tide_wait(req, 5000);
        EXPECT(rc == TIDE_EABORTED, "aborted receive returned %s", tide_err_name(rc));
        EXPECT(now_s() - t0 < 1.0, "abort took %.3f s", now_s() - t0);
        EXPECT(tide_send(comm, &v, sizeof v, 1, 1) == TIDE_EABORTED, "send after abort");
    } else {
        int rc = tide_wait(req, 5000);
        EXPECT(rc == TIDE_EPEER, "peer of an aborted rank got %s", tide_err_name(rc));
    }
    tide_req_free(req);
}

static void abort_fails_pending_promptly(void **state)
{
    assert_int_equal(harness_run(2, NULL, aborting, NULL), 0);
}

/* ---- use after tide_finalize ---- */

/* Every call on the world or on a communicator made from it, after
 * tide_finalize, is refused with TIDE_EINVAL, and nothing reads freed
 * memory (issue 33: a heap-use-after-free; CI runs this under
 * AddressSanitizer).  The subcommunicator can still be freed. */
static void refused_everywhere(tide_comm *m, int32_t *x, int32_t *y)
{
    tide_req *req = (tide_req *)y; /* must be cleared */
    tide_comm *sub = m;
    int peer = 1 - tide_comm_rank(m);
    EXPECT(tide_allreduce(m, x, y, 1, TIDE_INT32, TIDE_SUM) == TIDE_EINVAL, "allreduce");
    EXPECT(tide_iallgather(m, x, y, 1, TIDE_INT32, &req) == TIDE_EINVAL && !req, "iallgather");
    EXPECT(tide_barrier(m) == TIDE_EINVAL, "barrier");
    EXPECT(tide_send(m, x, 4, peer, 0) == TIDE_EINVAL, "send");
    EXPECT(tide_irecv(m, y, 4, peer, 0, &req) == TIDE_EINVAL, "irecv");
    EXPECT(tide_comm_split(m, 0, 0, &sub) == TIDE_EINVAL && !sub, "split");
    EXPECT(tide_comm_revoke(m) == TIDE_EINVAL, "revoke");
    EXPECT(tide_comm_abort(m) == TIDE_EINVAL, "abort");
    EXPECT(tide_comm_transport(m, 0) == NULL, "transport");
    EXPECT(tide_comm_rank(m) >= 0 && tide_comm_size(m) == 2, "rank and size stay readable");
}

static int after_finalize_rank(int rank, int port, void *arg)
{
    (void)arg;
    struct harness_opts o;
    harness_defaults(&o);
    tide_config cfg;
    harness_config(&cfg, rank, 2, port, "after-finalize", &o);
    cfg.log_level = 0;
    tide_comm *world, *both;
    EXPECT_OK(tide_init_with(&world, &cfg));
    int ranks[2] = {1, 0};
    EXPECT_OK(tide_comm_create_group(world, ranks, 2, &both));
    int32_t x = rank, y = 0;
    EXPECT_OK(tide_allreduce(both, &x, &y, 1, TIDE_INT32, TIDE_SUM));
    EXPECT_OK(tide_finalize(world));
    /* both keeps the context alive: its insides are torn down; then,
     * with both freed, the context itself is gone but for its tombstone. */
    refused_everywhere(both, &x, &y);
    EXPECT_OK(tide_comm_free(both));
    refused_everywhere(world, &x, &y);
    EXPECT(tide_finalize(world) == TIDE_EINVAL, "a second finalize");
    return 0;
}

static void use_after_finalize_is_refused(void **state)
{
    assert_int_equal(harness_run_raw(2, 30, after_finalize_rank, NULL), 0);
}

/* ---- wrong token ---- */

static int wrong_token_rank(int rank, int port, void *arg)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.bootstrap_s = 2;
    tide_config cfg;
    harness_config(&cfg, rank, 2, port, rank == 1 ? "not-the-token" : "the-token", &o);
    cfg.log_level = 0;
    tide_comm *comm;
    char text[2048];
    int rc = harness_init_logged(&comm, &cfg, text, sizeof text);
    if (rank == 1) {
        EXPECT(rc == TIDE_EAUTH, "the impostor got %s", tide_err_name(rc));
        EXPECT(strstr(text, "authentication failed") != NULL, "log: %s", text);
    } else {
        EXPECT(rc == TIDE_EBOOTSTRAP, "rank 0 got %s", tide_err_name(rc));
    }
    EXPECT(comm == NULL, "no communicator on failure");
    return 0;
}

static void wrong_token_is_refused(void **state)
{
    assert_int_equal(harness_run_raw(2, 30, wrong_token_rank, NULL), 0);
}

/* ---- a stranger during a running job ---- */

static int stranger_rank(int rank, int port, void *arg)
{
    struct harness_opts o;
    harness_defaults(&o);
    tide_config cfg;
    harness_config(&cfg, rank, 3, port, "tok", &o);
    tide_comm *comm;
    EXPECT_OK(tide_init_with(&comm, &cfg));
    if (rank == 0) {
        /* knock on the rendezvous port: nothing must listen, or whatever
         * answers must not disturb the job */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            const char junk[] = "GET / HTTP/1.0\r\n\r\n garbage garbage";
            ssize_t w = send(fd, junk, sizeof junk, MSG_NOSIGNAL);
            (void)w;
        }
        close(fd);
    }
    for (int round = 0; round < 20; round++)
        EXPECT_OK(tide_barrier(comm));
    int v = rank, sum = 0;
    for (int p = 0; p < 3; p++) {
        int got = -1;
        tide_req *rr;
        EXPECT_OK(tide_irecv(comm, &got, sizeof got, p, 8, &rr));
        EXPECT_OK(tide_send(comm, &v, sizeof v, p, 8));
        EXPECT_OK(tide_wait(rr, 5000));
        sum += got;
        tide_req_free(rr);
    }
    EXPECT(sum == 3, "sum of ranks %d", sum);
    EXPECT_OK(tide_finalize(comm));
    return 0;
}

static void stranger_during_job_is_harmless(void **state)
{
    assert_int_equal(harness_run_raw(3, 30, stranger_rank, NULL), 0);
}

/* ---- completion callbacks ---- */

struct chain {
    tide_comm *comm;
    int value;
    int ran;
    tide_req *next;
};

static void forward(tide_req *req, void *arg)
{
    struct chain *c = arg;
    c->ran++;
    /* from the reactor thread: post the next operation of the chain */
    c->value += 1;
    int rc = tide_isend(c->comm, &c->value, sizeof c->value, 1, 2, &c->next);
    (void)rc;
}

static void callbacks(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    if (r == 0) {
        struct chain c = {.comm = comm};
        tide_req *rr;
        EXPECT_OK(tide_irecv(comm, &c.value, sizeof c.value, 1, 1, &rr));
        EXPECT_OK(tide_req_on_complete(rr, forward, &c));
        EXPECT(tide_req_on_complete(rr, forward, &c) == TIDE_EBUSY, "second callback");
        EXPECT_OK(tide_wait(rr, 5000));
        EXPECT(c.ran == 1, "the callback ran before wait returned (ran %d)", c.ran);
        EXPECT(c.next != NULL, "the chained send was posted");
        EXPECT_OK(tide_wait(c.next, 5000));
        tide_req_free(c.next);
        /* a callback on a request that already completed runs at once */
        tide_req *late;
        EXPECT_OK(tide_irecv(comm, &c.value, sizeof c.value, 1, 3, &late));
        EXPECT_OK(tide_wait(late, 5000));
        EXPECT_OK(tide_req_on_complete(late, forward, &c));
        for (int i = 0; i < 1000 && c.ran < 2; i++) {
            int done;
            tide_test(late, &done);
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        EXPECT(c.ran == 2, "late callback ran %d", c.ran);
        EXPECT_OK(tide_wait(c.next, 5000));
        tide_req_free(c.next);
        tide_req_free(late);
        tide_req_free(rr);
    } else {
        int v = 41, got = 0;
        EXPECT_OK(tide_send(comm, &v, sizeof v, 0, 1));
        EXPECT_OK(tide_recv(comm, &got, sizeof got, 0, 2));
        EXPECT(got == 42, "chained value %d", got);
        v = 42;
        EXPECT_OK(tide_send(comm, &v, sizeof v, 0, 3));
        EXPECT_OK(tide_recv(comm, &got, sizeof got, 0, 2));
        EXPECT(got == 43, "late chained value %d", got);
    }
    /* a request freed while pending still completes: the second
     * message of its tag, received here, came after the one it took (a
     * barrier would not say so: a board barrier orders no messages) */
    tide_req *orphan;
    int x = r, y = -1, z = -1;
    EXPECT_OK(tide_irecv(comm, &y, sizeof y, 1 - r, 4, &orphan));
    tide_req_free(orphan);
    EXPECT_OK(tide_send(comm, &x, sizeof x, 1 - r, 4));
    EXPECT_OK(tide_send(comm, &x, sizeof x, 1 - r, 4));
    EXPECT_OK(tide_recv(comm, &z, sizeof z, 1 - r, 4));
    EXPECT(y == 1 - r && z == 1 - r, "orphaned receive still delivered (%d, then %d)", y, z);
}

static void completion_callbacks_chain(void **state)
{
    struct harness_opts o;
    harness_defaults(&o);
    assert_int_equal(harness_run(2, &o, callbacks, NULL), 0);
    o.progress = TIDE_PROGRESS_INLINE;
    assert_int_equal(harness_run(2, &o, callbacks, NULL), 0);
}

static int setup(void **state)
{
    shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return shm == MAP_FAILED ? -1 : 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(peer_killed_2_ranks),
        cmocka_unit_test(peer_killed_4_ranks),
        cmocka_unit_test(peer_killed_inline),
        cmocka_unit_test(peer_exits_without_finalize),
        cmocka_unit_test(deadlines_and_resumed_waits),
        cmocka_unit_test(abort_fails_pending_promptly),
        cmocka_unit_test(wrong_token_is_refused),
        cmocka_unit_test(use_after_finalize_is_refused),
        cmocka_unit_test(stranger_during_job_is_harmless),
        cmocka_unit_test(completion_callbacks_chain),
    };
    return cmocka_run_group_tests_name("failures over tcp", tests, setup, NULL);
}
