/* test_trace.c - TIDE_TRACE over real rank processes: one valid JSON file
 * with every rank's operations, chunks, waits, posts and the caller's
 * regions; overlapping operations spread over lanes; labels escaped;
 * per-rank files when the ranks cannot meet at finalize; nothing at all
 * when tracing is off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness.h"
#include "tests/json_check.h"

static char dir[64];
static char path[128];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tide-trace-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/trace.json", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The whole file, NUL-terminated, or NULL when it does not exist. */
static char *slurp(const char *file, size_t *len)
{
    FILE *f = fopen(file, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return s;
}

/* Read file and insist it is one valid JSON document. */
static char *read_valid(const char *file)
{
    size_t len = 0;
    char *s = slurp(file, &len);
    if (!s)
        fail_msg("%s was not written", file);
    char err[128];
    if (json_check(s, len, err, sizeof err))
        fail_msg("%s is not valid JSON: %s", file, err);
    return s;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* How many events of category cat (and name prefix) rank pid recorded. */
static int events(const char *s, const char *cat, const char *name, int pid)
{
    char needle[160];
    snprintf(needle, sizeof needle, "\"cat\":\"%s\",\"name\":\"%s", cat, name);
    char pidkey[32];
    snprintf(pidkey, sizeof pidkey, "\"pid\":%d,", pid);
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) {
        const char *end = strchr(p, '}');
        const char *at = strstr(p, pidkey);
        if (at && end && at < end)
            n++;
    }
    return n;
}

static void set_trace(struct harness_opts *o, tide_progress_mode mode)
{
    harness_defaults(o);
    o->progress = mode;
    o->trace_path = path;
}

/* ---- bodies ---- */

enum { BIG = 1 << 20, SMALL = 256, INFLIGHT = 8 };

/* A chunked allreduce (ring or shm), a region with a nested one, a ring of
 * point-to-point messages, and INFLIGHT allreduces in flight at once:
 * rank 0 posts its share late, so on the others all of them run
 * together (they cannot finish without rank 0). */
static void mixed_work(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    EXPECT(tide_trace_enabled(comm), "tracing should be on");
    float *big = malloc(BIG * sizeof *big);
    EXPECT(big, "out of memory");
    for (int i = 0; i < BIG; i++)
        big[i] = (float)r;
    EXPECT_OK(tide_trace_begin(comm, "compute"));
    EXPECT_OK(tide_trace_begin(comm, "inner"));
    tide_req *req;
    EXPECT_OK(tide_iallreduce(comm, big, big, BIG, TIDE_FLOAT32, TIDE_SUM, &req));
    EXPECT_OK(tide_trace_end(comm));
    EXPECT_OK(tide_trace_end(comm));
    EXPECT_OK(tide_wait(req, -1));
    tide_req_free(req);
    EXPECT(big[7] == (float)(n * (n - 1) / 2), "allreduce gave %g", big[7]);

    int out = r, in = -1;
    tide_req *rx;
    EXPECT_OK(tide_irecv(comm, &in, sizeof in, (r + n - 1) % n, 3, &rx));
    EXPECT_OK(tide_send(comm, &out, sizeof out, (r + 1) % n, 3));
    EXPECT_OK(tide_wait(rx, -1));
    tide_req_free(rx);

    if (r == 0)
        usleep(50 * 1000);
    tide_req *many[INFLIGHT];
    for (int i = 0; i < INFLIGHT; i++)
        EXPECT_OK(tide_iallreduce(comm, big + i * SMALL, big + i * SMALL, SMALL, TIDE_FLOAT32,
                                  TIDE_MAX, &many[i]));
    for (int i = 0; i < INFLIGHT; i++) {
        EXPECT_OK(tide_wait(many[i], -1));
        tide_req_free(many[i]);
    }
    free(big);
}

static void check_mixed(const char *s, int n)
{
    for (int r = 0; r < n; r++) {
        char name[64];
        snprintf(name, sizeof name, "\"pid\":%d,\"tid\":0,\"name\":\"process_name\"", r);
        assert_int_equal(count(s, name), 1);
        assert_int_equal(events(s, "op", "allreduce", r), 1 + INFLIGHT);
        assert_true(events(s, "op", "send", r) >= 1);
        assert_true(events(s, "op", "recv", r) >= 1);
        assert_true(events(s, "chunk", "send to", r) >= 2);
        assert_true(events(s, "chunk", "recv from", r) >= 2);
        assert_true(events(s, "wait", "wait allreduce", r) >= 1);
        assert_int_equal(events(s, "post", "post allreduce", r), 1 + INFLIGHT);
        assert_int_equal(events(s, "user", "compute", r), 1);
        assert_int_equal(events(s, "user", "inner", r), 1);
    }
    assert_int_equal(count(s, "\"ph\":\"E\""), 2 * n);
    /* The big one runs in chunks: a ring, or through the staging area
     * where every pair shares memory. */
    assert_true(count(s, "\"algorithm\":\"ring\"") + count(s, "\"algorithm\":\"shm\"") >= n);
    assert_int_equal(count(s, "\"result\":\"ok\""), count(s, "\"result\":"));
    /* Rank 1 ran INFLIGHT operations at once: they need several lanes. */
    assert_true(count(s, "\"pid\":1,\"tid\":2000000001,\"name\":\"thread_name\"") == 1);
    /* Time zero is rank 0's start, before anything any rank did. */
    assert_null(strstr(s, "\"ts\":-"));
}

static void run_mixed(int n, tide_progress_mode mode)
{
    struct harness_opts o;
    set_trace(&o, mode);
    assert_int_equal(harness_run(n, &o, mixed_work, NULL), 0);
    char *s = read_valid(path);
    check_mixed(s, n);
    free(s);
    unlink(path);
}

static void thread_mode_3_ranks(void **state)
{
    (void)state;
    run_mixed(3, TIDE_PROGRESS_THREAD);
}

static void inline_mode_2_ranks(void **state)
{
    (void)state;
    run_mixed(2, TIDE_PROGRESS_INLINE);
}

/* Labels are the caller's text: quotes, backslashes and control
 * characters are escaped, and a long UTF-8 label is cut between
 * characters, so the file stays valid JSON. */
static void odd_labels(tide_comm *comm, void *arg)
{
    EXPECT_OK(tide_trace_begin(comm, "say \"hi\"\\\n\t"));
    EXPECT_OK(tide_trace_end(comm));
    EXPECT_OK(tide_trace_begin(comm, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                                     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                                     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"));
    EXPECT_OK(tide_trace_end(comm));
    EXPECT(tide_trace_begin(NULL, "x") == TIDE_EINVAL, "NULL comm");
    EXPECT(tide_trace_begin(comm, NULL) == TIDE_EINVAL, "NULL name");
    EXPECT(tide_trace_end(NULL) == TIDE_EINVAL, "NULL comm");
    int x = 1;
    EXPECT_OK(tide_allreduce(comm, &x, &x, 1, TIDE_INT32, TIDE_SUM));
}

static void single_rank_and_labels(void **state)
{
    (void)state;
    struct harness_opts o;
    set_trace(&o, TIDE_PROGRESS_THREAD);
    assert_int_equal(harness_run(1, &o, odd_labels, NULL), 0);
    char *s = read_valid(path);
    assert_non_null(strstr(s, "\"name\":\"say \\\"hi\\\"\\\\\\u000a\\u0009\""));
    /* 15 two-byte characters fit in 31 bytes; the 16th would not. */
    assert_non_null(strstr(s, "\"name\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                              "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\""));
    assert_int_equal(events(s, "op", "allreduce", 0), 1);
    free(s);
    unlink(path);
}

/* A broken communicator cannot gather the trace: every rank writes its
 * own file, promptly. */
static void abort_then_finalize(tide_comm *comm, void *arg)
{
    int x = 1;
    EXPECT_OK(tide_allreduce(comm, &x, &x, 1, TIDE_INT32, TIDE_SUM));
    EXPECT_OK(tide_comm_abort(comm));
}

/* Rank 1 leaves without finalizing: rank 0 learns it at once from the
 * closed connection, not after a timeout, and keeps its own events. */
static void rank1_vanishes(tide_comm *comm, void *arg)
{
    int x = 1;
    EXPECT_OK(tide_allreduce(comm, &x, &x, 1, TIDE_INT32, TIDE_SUM));
    if (tide_comm_rank(comm) == 1)
        _exit(0);
}

static void expect_own_files(int n, bool rank1_too)
{
    char own[160];
    assert_int_equal(access(path, F_OK), -1);
    for (int r = 0; r < n; r++) {
        snprintf(own, sizeof own, "%s.rank%d.json", path, r);
        if (r == 1 && !rank1_too) {
            assert_int_equal(access(own, F_OK), -1);
            continue;
        }
        char *s = read_valid(own);
        assert_int_equal(events(s, "op", "allreduce", r), 1);
        free(s);
        unlink(own);
    }
}

static void broken_comm_writes_per_rank_files(void **state)
{
    (void)state;
    struct harness_opts o;
    set_trace(&o, TIDE_PROGRESS_THREAD);
    o.run_limit_s = 30; /* a minute's wait at finalize would fail this */
    assert_int_equal(harness_run(2, &o, abort_then_finalize, NULL), 0);
    expect_own_files(2, true);
}

static void vanished_peer_writes_own_file(void **state)
{
    (void)state;
    struct harness_opts o;
    set_trace(&o, TIDE_PROGRESS_THREAD);
    o.run_limit_s = 30;
    assert_int_equal(harness_run(2, &o, rank1_vanishes, NULL), 0);
    expect_own_files(2, false);
}

static void untraced(tide_comm *comm, void *arg)
{
    EXPECT(!tide_trace_enabled(comm), "tracing should be off");
    EXPECT_OK(tide_trace_begin(comm, "nothing"));
    EXPECT_OK(tide_trace_end(comm));
    EXPECT(tide_trace_begin(NULL, "x") == TIDE_EINVAL, "NULL comm");
}

static void tracing_off_writes_nothing(void **state)
{
    (void)state;
    struct harness_opts o;
    harness_defaults(&o);
    assert_int_equal(harness_run(2, &o, untraced, NULL), 0);
    assert_int_equal(access(path, F_OK), -1);
    assert_false(tide_trace_enabled(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(thread_mode_3_ranks),
        cmocka_unit_test(inline_mode_2_ranks),
        cmocka_unit_test(single_rank_and_labels),
        cmocka_unit_test(broken_comm_writes_per_rank_files),
        cmocka_unit_test(vanished_peer_writes_own_file),
        cmocka_unit_test(tracing_off_writes_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
