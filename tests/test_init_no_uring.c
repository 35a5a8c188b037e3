/* test_init_no_uring.c - when io_uring is forbidden (as Docker's default
 * seccomp profile does), tide_init fails at once with TIDE_ENOSYS and a
 * message that says io_uring is unavailable and where to look. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tests/harness.h"

/* Make io_uring_setup fail with EPERM in this process, like a container. */
static int forbid_io_uring(void)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int child(void)
{
    if (forbid_io_uring())
        return 77; /* the kernel can't filter: not a failure of ours */
    FILE *log = tmpfile();
    dup2(fileno(log), 2);
    tide_config cfg;
    tide_config_default(&cfg);
    cfg.log_level = 0;
    tide_comm *comm = (tide_comm *)&cfg;
    int rc = tide_init_with(&comm, &cfg);
    char text[2048] = "";
    rewind(log);
    text[fread(text, 1, sizeof text - 1, log)] = '\0';
    if (rc != TIDE_ENOSYS || comm != NULL)
        return 1;
    if (!strstr(text, "io_uring is unavailable") || !strstr(text, "io_uring_disabled"))
        return 2;
    return 0;
}

static void init_says_io_uring_is_unavailable(void **state)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_says_io_uring_is_unavailable),
    };
    return cmocka_run_group_tests_name("init without io_uring", tests, NULL, NULL);
}
