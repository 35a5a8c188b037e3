/* reactor_uring_none.c - the io_uring backend of a libtide built without
 * liburing (meson setup -Dio_uring=disabled, or no liburing >= 2.3 at
 * build time): the probe says so, and TIDE_REACTOR=auto takes epoll, as
 * it does where the kernel refuses io_uring.  reactor.c asks the probe
 * before it uses this table, so only init is ever reached, and only if
 * a caller skips the probe: it refuses too. */
#include "engine/reactor.h"

#include <stdio.h>

static const char why[] = "io_uring is unavailable: this libtide was built without it "
                          "(meson setup -Dio_uring=disabled, or liburing >= 2.3 was not found)";

int tide__reactor_uring_probe(char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", why);
    return TIDE_ENOSYS;
}

static int refuse(struct tide__reactor *r, bool shared, char *err, size_t errlen)
{
    (void)r;
    (void)shared;
    snprintf(err, errlen, "%s", why);
    return TIDE_ENOSYS;
}

const struct tide__reactor_ops tide__reactor_uring = {.name = "io_uring", .init = refuse};
