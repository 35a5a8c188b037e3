/* test_init_no_uring.c - when io_uring is forbidden (as Docker's default
 * seccomp profile does), tide_init with the default reactor falls back to
 * epoll and says why, once, at info level; asked for io_uring explicitly
 * it fails at once with TIDE_ENOSYS and a message that says io_uring is
 * unavailable and where to look. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tests/harness.h"
#include "tests/seccomp_deny.h"

/* Run init with `reactor` in a child that may not use io_uring; returns
 * the child's verdict: 0 as expected, 77 the kernel can't filter, else
 * which check failed. */
static int child(tide_reactor_kind reactor)
{
    if (seccomp_deny_io_uring())
        return 77;
    FILE *log = tmpfile();
    dup2(fileno(log), 2);
    tide_config cfg;
    tide_config_default(&cfg);
    cfg.reactor = reactor;
    cfg.log_level = 2; /* info: the fallback is said there */
    tide_comm *comm = (tide_comm *)&cfg;
    int rc = tide_init_with(&comm, &cfg);
    char text[2048] = "";
    rewind(log);
    text[fread(text, 1, sizeof text - 1, log)] = '\0';
    if (reactor == TIDE_REACTOR_IO_URING) {
        if (rc != TIDE_ENOSYS || comm != NULL)
            return 1;
        /* The kernel's refusal, or a libtide built without io_uring
         * (tests/meson.build says which). */
        const char *built = getenv("TIDE_TEST_URING_BUILT");
        const char *why = built && !strcmp(built, "0") ? "built without it" : "io_uring_disabled";
        if (!strstr(text, "io_uring is unavailable") || !strstr(text, why))
            return 2;
        return 0;
    }
    if (rc != 0 || !comm)
        return 3;
    if (strcmp(tide_comm_reactor(comm), "epoll") != 0)
        return 4;
    if (!strstr(text, "using the epoll reactor") || !strstr(text, "io_uring is unavailable"))
        return 5;
    /* One rank, but a real request through the reactor. */
    int v = 21, out = 0;
    if (tide_allreduce(comm, &v, &out, 1, TIDE_INT32, TIDE_SUM) != 0 || out != 21)
        return 6;
    return tide_finalize(comm) == 0 ? 0 : 7;
}

static int run_child(tide_reactor_kind reactor)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child(reactor));
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void auto_falls_back_to_epoll(void **state)
{
    int verdict = run_child(TIDE_REACTOR_AUTO);
    if (verdict == 77)
        skip(); /* no seccomp filters in this kernel */
    assert_int_equal(verdict, 0);
}

static void explicit_io_uring_says_it_is_unavailable(void **state)
{
    int verdict = run_child(TIDE_REACTOR_IO_URING);
    if (verdict == 77)
        skip();
    assert_int_equal(verdict, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_falls_back_to_epoll),
        cmocka_unit_test(explicit_io_uring_says_it_is_unavailable),
    };
    return cmocka_run_group_tests_name("init without io_uring", tests, NULL, NULL);
}
