/* deny_io_uring.c - run a command as a container with Docker's default
 * seccomp profile would: io_uring refused with EPERM, for the command and
 * everything it starts.  tools/test.sh runs the test suites under it
 * (meson test --wrapper), so every test also passes on the epoll reactor
 * that tide falls back to.
 *
 *   deny-io-uring COMMAND [ARG...]
 *
 * It fails (exit 125) rather than run the command unfiltered, and sets
 * TIDE_EXPECT_REACTOR=epoll, which tests/harness.c checks in every rank
 * it starts: a suite that silently ran on io_uring would prove nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/seccomp_deny.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: deny-io-uring COMMAND [ARG...]\n");
        return 125;
    }
    if (seccomp_deny_io_uring()) {
        fprintf(stderr, "deny-io-uring: cannot install the seccomp filter: %s\n",
                strerror(errno));
        return 125;
    }
    /* The test harness checks every rank it starts really runs on epoll. */
    setenv("TIDE_EXPECT_REACTOR", "epoll", 1);
    execvp(argv[1], argv + 1);
    fprintf(stderr, "deny-io-uring: %s: %s\n", argv[1], strerror(errno));
    return 127;
}
