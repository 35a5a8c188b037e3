/* test_p2p_tcp.c - point-to-point over real loopback TCP between rank
 * processes: ordering, tags, self-sends, zero bytes, big messages, many
 * in flight, truncation, bad arguments, receives from any rank; in both
 * progress modes and with 2, 3 and 4 ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/harness.h"

/* ---- bodies: each runs on every rank ---- */

/* Every rank sends 100 numbered messages on one tag to its right
 * neighbour and checks they arrive in order from the left. */
static void ring_order(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    enum { COUNT = 100 };
    uint32_t out[COUNT], in[COUNT];
    tide_req *sends[COUNT], *recvs[COUNT];
    for (int i = 0; i < COUNT; i++) {
        out[i] = (uint32_t)(r * 1000 + i);
        EXPECT_OK(tide_irecv(comm, &in[i], sizeof in[i], (r + n - 1) % n, 7, &recvs[i]));
    }
    for (int i = 0; i < COUNT; i++)
        EXPECT_OK(tide_isend(comm, &out[i], sizeof out[i], (r + 1) % n, 7, &sends[i]));
    for (int i = 0; i < COUNT; i++) {
        EXPECT_OK(tide_wait(recvs[i], -1));
        EXPECT_OK(tide_wait(sends[i], -1));
        uint32_t want = (uint32_t)(((r + n - 1) % n) * 1000 + i);
        EXPECT(in[i] == want, "message %d: got %u, want %u", i, in[i], want);
        EXPECT(tide_req_bytes(recvs[i]) == sizeof in[i], "bytes %zu", tide_req_bytes(recvs[i]));
        tide_req_free(recvs[i]);
        tide_req_free(sends[i]);
    }
    EXPECT_OK(tide_barrier(comm));
}

/* Tags are independent: receives posted in the opposite order of the
 * sends still get the right messages. */
static void tags_independent(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int peer = r ^ 1;
    if (peer >= n) {
        EXPECT_OK(tide_barrier(comm));
        return;
    }
    int a = 100 + r, b = 200 + r, ga = 0, gb = 0;
    tide_req *ra, *rb;
    EXPECT_OK(tide_irecv(comm, &gb, sizeof gb, peer, 2, &rb));
    EXPECT_OK(tide_send(comm, &a, sizeof a, peer, 1));
    EXPECT_OK(tide_send(comm, &b, sizeof b, peer, 2));
    EXPECT_OK(tide_irecv(comm, &ga, sizeof ga, peer, 1, &ra));
    EXPECT_OK(tide_wait(ra, -1));
    EXPECT_OK(tide_wait(rb, -1));
    EXPECT(ga == 100 + peer && gb == 200 + peer, "got %d %d", ga, gb);
    tide_req_free(ra);
    tide_req_free(rb);
    EXPECT_OK(tide_barrier(comm));
}

static void self_and_zero(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    /* send to yourself before and after the receive is posted */
    int v = 42 + r, got = 0;
    EXPECT_OK(tide_send(comm, &v, sizeof v, r, 3));
    EXPECT_OK(tide_recv(comm, &got, sizeof got, r, 3));
    EXPECT(got == v, "self-send got %d", got);
    tide_req *rr;
    got = 0;
    EXPECT_OK(tide_irecv(comm, &got, sizeof got, r, 4, &rr));
    EXPECT_OK(tide_send(comm, &v, sizeof v, r, 4));
    EXPECT_OK(tide_wait(rr, 5000));
    EXPECT(got == v, "self-send (posted first) got %d", got);
    tide_req_free(rr);
    /* zero-byte messages, NULL buffers allowed */
    EXPECT_OK(tide_irecv(comm, NULL, 0, (r + n - 1) % n, 5, &rr));
    EXPECT_OK(tide_send(comm, NULL, 0, (r + 1) % n, 5));
    EXPECT_OK(tide_wait(rr, -1));
    EXPECT(tide_req_bytes(rr) == 0, "zero-byte receive got %zu", tide_req_bytes(rr));
    tide_req_free(rr);
    EXPECT_OK(tide_barrier(comm));
}

#define BIG_BYTES ((size_t)64 << 20)

static uint32_t pattern_word(size_t i, int rank)
{
    return (uint32_t)(i * 2654435761u) ^ (uint32_t)rank;
}

/* A BIG_BYTES send buffer holding rank's pattern, and a zeroed receive
 * buffer. */
static void big_buffers(int rank, uint32_t **out, uint32_t **in)
{
    *out = malloc(BIG_BYTES);
    *in = calloc(1, BIG_BYTES);
    EXPECT(*out && *in, "malloc");
    for (size_t i = 0; i < BIG_BYTES / 4; i++)
        (*out)[i] = pattern_word(i, rank);
}

static void expect_pattern(const uint32_t *in, int from)
{
    for (size_t i = 0; i < BIG_BYTES / 4; i++)
        EXPECT(in[i] == pattern_word(i, from), "word %zu differs", i);
}

/* 64 MiB each way between rank pairs, with a checked pattern. */
static void big_messages(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    uint32_t *out, *in;
    big_buffers(r, &out, &in);
    int to = (r + 1) % n, from = (r + n - 1) % n;
    tide_req *rs, *rr;
    EXPECT_OK(tide_irecv(comm, in, BIG_BYTES, from, 9, &rr));
    EXPECT_OK(tide_isend(comm, out, BIG_BYTES, to, 9, &rs));
    EXPECT_OK(tide_wait(rs, -1));
    EXPECT_OK(tide_wait(rr, -1));
    expect_pattern(in, from);
    tide_req_free(rs);
    tide_req_free(rr);
    free(out);
    free(in);
    EXPECT_OK(tide_barrier(comm));
}

/* A large message whose receive is posted while it is arriving: the
 * receiver first drives for a later small message (behind the large one
 * in the stream), so the large frame starts into an unexpected buffer;
 * the late receive then takes it over (or, if the kernel is writing into
 * that buffer, gets it copied at the end; or, with a progress thread
 * reading ahead, it has all arrived).  Every way the bytes must be exact. */
static void late_receive_of_arriving_message(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    uint32_t *out, *in;
    big_buffers(r, &out, &in);
    int to = (r + 1) % n, from = (r + n - 1) % n;
    uint64_t tail_out = 0x7469646500000000ull | (uint64_t)r, tail_in = 0;
    tide_req *sb, *st, *rb, *rt;
    EXPECT_OK(tide_isend(comm, out, BIG_BYTES, to, 11, &sb));
    EXPECT_OK(tide_isend(comm, &tail_out, sizeof tail_out, to, 12, &st));
    EXPECT_OK(tide_irecv(comm, &tail_in, sizeof tail_in, from, 12, &rt));
    int done = 0;
    for (int i = 0; i < 20 && !done; i++) {
        EXPECT_OK(tide_test(rt, &done));
        usleep(200);
    }
    EXPECT_OK(tide_irecv(comm, in, BIG_BYTES, from, 11, &rb));
    EXPECT_OK(tide_wait(rb, -1));
    EXPECT_OK(tide_wait(rt, -1));
    EXPECT_OK(tide_wait(sb, -1));
    EXPECT_OK(tide_wait(st, -1));
    expect_pattern(in, from);
    EXPECT(tail_in == (0x7469646500000000ull | (uint64_t)from), "tail %llx",
           (unsigned long long)tail_in);
    tide_req_free(sb);
    tide_req_free(st);
    tide_req_free(rb);
    tide_req_free(rt);
    free(out);
    free(in);
    EXPECT_OK(tide_barrier(comm));
}

/* Many messages in flight to every peer at once, mixed sizes, received
 * in an order different from the send order. */
static void many_in_flight(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    enum { PER_PEER = 300 };
    size_t sizes[] = {1, 8, 100, 4096, 5000, 70000};
    size_t ns = sizeof sizes / sizeof sizes[0];
    int total = n * PER_PEER;
    uint8_t **in = calloc((size_t)total, sizeof *in), **out = calloc((size_t)total, sizeof *out);
    tide_req **rq = calloc((size_t)total * 2, sizeof *rq);
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < PER_PEER; i++) {
            int k = p * PER_PEER + i;
            size_t len = sizes[i % ns];
            in[k] = malloc(len);
            out[k] = malloc(len);
            memset(out[k], (r * 31 + i) & 0xff, len);
            EXPECT_OK(tide_irecv(comm, in[k], len, p, i % 5, &rq[2 * k]));
        }
    }
    for (int i = 0; i < PER_PEER; i++)
        for (int p = 0; p < n; p++) {
            int k = p * PER_PEER + i;
            EXPECT_OK(tide_isend(comm, out[k], sizes[i % ns], p, i % 5, &rq[2 * k + 1]));
        }
    for (int k = total - 1; k >= 0; k--) { /* wait in reverse order */
        int p = k / PER_PEER, i = k % PER_PEER;
        size_t len = sizes[i % ns];
        EXPECT_OK(tide_wait(rq[2 * k], -1));
        EXPECT_OK(tide_wait(rq[2 * k + 1], -1));
        for (size_t b = 0; b < len; b++)
            EXPECT(in[k][b] == ((p * 31 + i) & 0xff), "peer %d msg %d byte %zu", p, i, b);
        tide_req_free(rq[2 * k]);
        tide_req_free(rq[2 * k + 1]);
        free(in[k]);
        free(out[k]);
    }
    free(in);
    free(out);
    free(rq);
    EXPECT_OK(tide_barrier(comm));
}

/* A message longer than the receive fails it with TIDE_ETRUNCATE and
 * writes nothing; the stream stays usable afterwards. */
static void truncation(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int to = (r + 1) % n, from = (r + n - 1) % n;
    uint8_t big[100000], small[64 + 16];
    memset(big, 0xab, sizeof big);
    memset(small, 0x11, sizeof small);
    tide_req *rr;
    EXPECT_OK(tide_irecv(comm, small, 64, from, 1, &rr));
    EXPECT_OK(tide_send(comm, big, sizeof big, to, 1));
    int rc = tide_wait(rr, -1);
    EXPECT(rc == TIDE_ETRUNCATE, "got %s", tide_err_name(rc));
    EXPECT(strstr(tide_req_message(rr), "100000 bytes") != NULL, "message: %s",
           tide_req_message(rr));
    for (size_t i = 0; i < sizeof small; i++)
        EXPECT(small[i] == 0x11, "byte %zu was overwritten", i);
    tide_req_free(rr);
    /* a small truncated message too (it travels through the stage) */
    EXPECT_OK(tide_irecv(comm, small, 2, from, 1, &rr));
    EXPECT_OK(tide_send(comm, big, 10, to, 1));
    EXPECT(tide_wait(rr, -1) == TIDE_ETRUNCATE, "small truncation");
    tide_req_free(rr);
    /* and the next message arrives intact */
    int v = r, got = -1;
    EXPECT_OK(tide_irecv(comm, &got, sizeof got, from, 1, &rr));
    EXPECT_OK(tide_send(comm, &v, sizeof v, to, 1));
    EXPECT_OK(tide_wait(rr, -1));
    EXPECT(got == from, "after truncation got %d", got);
    tide_req_free(rr);
    EXPECT_OK(tide_barrier(comm));
}

static void bad_arguments(tide_comm *comm, void *arg)
{
    int n = tide_comm_size(comm), v = 0;
    tide_req *req = (tide_req *)&v;
    EXPECT(tide_isend(comm, &v, 4, n, 0, &req) == TIDE_EINVAL, "peer == size");
    EXPECT(req == NULL, "req must be NULL after a failed call");
    EXPECT(tide_isend(comm, &v, 4, -1, 0, &req) == TIDE_EINVAL, "peer -1");
    EXPECT(tide_irecv(comm, NULL, 4, 0, 0, &req) == TIDE_EINVAL, "NULL buffer");
    EXPECT(tide_isend(comm, &v, 4, 0, -3, &req) == TIDE_EINVAL, "negative tag");
    EXPECT(tide_isend(NULL, &v, 4, 0, 0, &req) == TIDE_EINVAL, "NULL comm");
    EXPECT(tide_isend(comm, &v, 4, 0, 0, NULL) == TIDE_EINVAL, "NULL req");
    EXPECT(tide_wait(NULL, 0) == TIDE_EINVAL, "wait NULL");
    EXPECT(tide_recv(comm, NULL, 1, 0, 0) == TIDE_EINVAL, "blocking NULL buffer");
    EXPECT_OK(tide_barrier(comm));
}

/* ---- receives from any rank (TIDE_ANY_SOURCE) ---- */

enum { ANY_ROUNDS = 3 };

/* Every rank (rank 0 too) sends ANY_ROUNDS numbered messages to rank 0,
 * which takes them with any-source receives posted before the sends
 * (posted_first) or after they arrived: each message once, told whose,
 * in send order per sender.  A receive whose copies were not all taken
 * back would never complete. */
static void any_source_round(tide_comm *comm, bool posted_first)
{
    /* A tag of its own: the next round's messages must not be taken by
     * this round's receives, and could, since any rank's will do. */
    int tag = posted_first ? 6 : 16;
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), total = n * ANY_ROUNDS;
    int out[ANY_ROUNDS], *in = calloc((size_t)total, sizeof *in);
    tide_req **recvs = calloc((size_t)total, sizeof *recvs), *sends[ANY_ROUNDS];
    EXPECT(in && recvs, "calloc");
    for (int i = 0; r == 0 && posted_first && i < total; i++)
        EXPECT_OK(tide_irecv(comm, &in[i], sizeof in[i], TIDE_ANY_SOURCE, tag, &recvs[i]));
    for (int k = 0; k < ANY_ROUNDS; k++) {
        out[k] = r * 100 + k;
        EXPECT_OK(tide_isend(comm, &out[k], sizeof out[k], 0, tag, &sends[k]));
    }
    for (int k = 0; k < ANY_ROUNDS; k++) {
        EXPECT_OK(tide_wait(sends[k], -1));
        EXPECT(tide_req_source(sends[k]) == -1, "a send has no source");
        tide_req_free(sends[k]);
    }
    EXPECT_OK(tide_barrier(comm)); /* the messages may now wait at rank 0 */
    for (int i = 0; r == 0 && !posted_first && i < total; i++)
        EXPECT_OK(tide_irecv(comm, &in[i], sizeof in[i], TIDE_ANY_SOURCE, tag, &recvs[i]));
    int next[64] = {0};
    for (int i = 0; r == 0 && i < total; i++) {
        EXPECT_OK(tide_wait(recvs[i], 10000));
        int from = tide_req_source(recvs[i]);
        EXPECT(from >= 0 && from < n && in[i] / 100 == from, "receive %d: got %d from %d", i,
               in[i], from);
        EXPECT(in[i] % 100 == next[from]++, "rank %d's messages out of order: %d", from, in[i]);
        EXPECT(tide_req_bytes(recvs[i]) == sizeof in[i], "bytes %zu", tide_req_bytes(recvs[i]));
        tide_req_free(recvs[i]);
    }
    free(in);
    free(recvs);
}

/* Receives match in the order posted: an any-source receive posted
 * before one naming rank n-1 takes that rank's first message. */
static void any_then_named(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    if (r == 0) {
        int a = -1, b = -1;
        tide_req *ra, *rb;
        EXPECT_OK(tide_irecv(comm, &a, sizeof a, TIDE_ANY_SOURCE, 7, &ra));
        EXPECT_OK(tide_irecv(comm, &b, sizeof b, n - 1, 7, &rb));
        if (n == 1) {
            EXPECT_OK(tide_send(comm, &(int){1}, sizeof(int), 0, 7));
            EXPECT_OK(tide_send(comm, &(int){2}, sizeof(int), 0, 7));
        }
        EXPECT_OK(tide_wait(ra, 10000));
        EXPECT_OK(tide_wait(rb, 10000));
        EXPECT(a == 1 && b == 2 && tide_req_source(ra) == n - 1 && tide_req_source(rb) == n - 1,
               "any-source got %d from %d, named got %d", a, tide_req_source(ra), b);
        tide_req_free(ra);
        tide_req_free(rb);
    } else if (r == n - 1) {
        EXPECT_OK(tide_send(comm, &(int){1}, sizeof(int), 0, 7));
        EXPECT_OK(tide_send(comm, &(int){2}, sizeof(int), 0, 7));
    }
}

/* A large message (read straight into the buffer over TCP), then one
 * too long for the buffer: TIDE_ETRUNCATE, and no source. */
static void any_big_and_truncated(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    size_t words = 1 << 18;
    uint32_t *buf = calloc(words, sizeof *buf);
    EXPECT(buf, "calloc");
    tide_req *req;
    if (r == 0) {
        EXPECT_OK(tide_irecv(comm, buf, words * 4, TIDE_ANY_SOURCE, 8, &req));
        if (n == 1)
            EXPECT_OK(tide_send(comm, buf, words * 4, 0, 8));
        EXPECT_OK(tide_wait(req, 10000));
        for (size_t i = 0; n > 1 && i < words; i += 997)
            EXPECT(buf[i] == pattern_word(i, n - 1), "word %zu", i);
        EXPECT(tide_req_source(req) == n - 1, "source %d", tide_req_source(req));
        tide_req_free(req);
        uint8_t small[2] = {0x11, 0x11};
        EXPECT_OK(tide_irecv(comm, small, sizeof small, TIDE_ANY_SOURCE, 9, &req));
        if (n == 1)
            EXPECT_OK(tide_send(comm, buf, 8, 0, 9));
        int rc = tide_wait(req, 10000);
        EXPECT(rc == TIDE_ETRUNCATE, "got %s", tide_err_name(rc));
        EXPECT(tide_req_source(req) == -1 && small[0] == 0x11, "a failed receive has no source");
        tide_req_free(req);
    } else if (r == n - 1) {
        for (size_t i = 0; i < words; i++)
            buf[i] = pattern_word(i, r);
        EXPECT_OK(tide_send(comm, buf, words * 4, 0, 8));
        EXPECT_OK(tide_send(comm, buf, 8, 0, 9));
    }
    free(buf);
}

static void any_source(tide_comm *comm, void *arg)
{
    tide_req *req = NULL;
    int v = 0;
    EXPECT(tide_isend(comm, &v, 4, TIDE_ANY_SOURCE, 0, &req) == TIDE_EINVAL && !req,
           "a send to TIDE_ANY_SOURCE");
    EXPECT(tide_irecv(comm, &v, 4, -2, 0, &req) == TIDE_EINVAL, "peer -2");
    any_source_round(comm, true);
    any_source_round(comm, false);
    any_then_named(comm);
    any_big_and_truncated(comm);
    EXPECT_OK(tide_barrier(comm));
}

/* Thread progress moves data while the caller computes: rank 0 posts a
 * 64 MiB send and then spins for 2 s without a single tide call; rank
 * 1 must have the whole message long before rank 0 looks again (within
 * 1.5 s: the bytes take ~50 ms, but under ASan with the machine's other
 * core busy too, 0.86 s once, against a compute of 1 s then). */
static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void background_progress(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    size_t bytes = 64u << 20;
    char *buf = malloc(bytes);
    EXPECT(buf, "malloc");
    memset(buf, r == 0 ? 0x5a : 0, bytes);
    EXPECT_OK(tide_barrier(comm));
    tide_req *req;
    if (r == 0) {
        EXPECT_OK(tide_isend(comm, buf, bytes, 1, 1, &req));
        double until = mono_s() + 2.0;
        volatile double x = 1;
        while (mono_s() < until)
            x = x * 1.0000001 + 1e-9; /* compute; no tide call */
        EXPECT_OK(tide_wait(req, 5000));
    } else {
        double t0 = mono_s();
        EXPECT_OK(tide_irecv(comm, buf, bytes, 0, 1, &req));
        EXPECT_OK(tide_wait(req, 5000));
        double took = mono_s() - t0;
        EXPECT(took < 1.5, "the message took %.3f s: it waited for the sender's compute", took);
        EXPECT(buf[0] == 0x5a && buf[bytes - 1] == 0x5a, "payload");
    }
    tide_req_free(req);
    free(buf);
    EXPECT_OK(tide_barrier(comm));
}

static void thread_progress_runs_in_background(void **state)
{
    assert_int_equal(harness_run(2, NULL, background_progress, NULL), 0);
}

/* ---- the table: every body x progress mode x rank count ---- */

struct scenario {
    const char *name;
    harness_body body;
};

static const struct scenario scenarios[] = {
    {"ring_order", ring_order},         {"tags_independent", tags_independent},
    {"self_and_zero", self_and_zero},   {"big_messages", big_messages},
    {"late_receive_of_arriving_message", late_receive_of_arriving_message},
    {"many_in_flight", many_in_flight}, {"truncation", truncation},
    {"bad_arguments", bad_arguments},   {"any_source", any_source},
};

static void run_all(tide_progress_mode mode, int ranks)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.progress = mode;
    o.run_limit_s = 120;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        int failed = harness_run(ranks, &o, scenarios[i].body, NULL);
        if (failed)
            fail_msg("%s on %d ranks (%s progress): %d ranks failed", scenarios[i].name, ranks,
                     mode == TIDE_PROGRESS_INLINE ? "inline" : "thread", failed);
    }
}

static void thread_2_ranks(void **state) { run_all(TIDE_PROGRESS_THREAD, 2); }
static void thread_3_ranks(void **state) { run_all(TIDE_PROGRESS_THREAD, 3); }
static void thread_4_ranks(void **state) { run_all(TIDE_PROGRESS_THREAD, 4); }
static void inline_2_ranks(void **state) { run_all(TIDE_PROGRESS_INLINE, 2); }
static void inline_3_ranks(void **state) { run_all(TIDE_PROGRESS_INLINE, 3); }
static void single_rank(void **state) { run_all(TIDE_PROGRESS_THREAD, 1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(single_rank),    cmocka_unit_test(thread_2_ranks),
        cmocka_unit_test(thread_3_ranks), cmocka_unit_test(thread_4_ranks),
        cmocka_unit_test(inline_2_ranks), cmocka_unit_test(inline_3_ranks),
        cmocka_unit_test(thread_progress_runs_in_background),
    };
    return cmocka_run_group_tests_name("p2p over tcp", tests, NULL, NULL);
}
