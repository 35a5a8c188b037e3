/* test_shm.c - the shared-memory transport as users meet it: which
 * transport carries each pair (TIDE_TRANSPORT auto, shm, tcp; a job split
 * into two test hosts), and that a rank killed while streaming a large
 * message through a ring fails its partner with TIDE_EPEER and leaves
 * nothing behind in /dev/shm (the segments are unnamed memfds). */
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

#include "tests/harness.h"

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
    /* Both kinds of pair carry a collective whose every element is checked. */
    size_t count = 100000;
    int *v = malloc(count * sizeof *v);
    EXPECT(v, "malloc");
    for (size_t i = 0; i < count; i++)
        v[i] = r * 3 + (int)(i % 5);
    EXPECT_OK(tide_allreduce(comm, TIDE_IN_PLACE, v, count, TIDE_INT32, TIDE_SUM));
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

static void killed_rank_leaves_nothing_behind(void **state)
{
    int before = tide_entries_in_dev_shm();
    struct harness_opts o;
    harness_defaults(&o);
    setenv("TIDE_TRANSPORT", "shm", 1);
    int failed = harness_run(2, &o, killed_mid_stream, NULL);
    unsetenv("TIDE_TRANSPORT");
    assert_int_equal(failed, 1); /* the killed rank, and only it */
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
    };
    return cmocka_run_group_tests_name("shm transport", tests, NULL, NULL);
}
