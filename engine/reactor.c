/* reactor.c - choosing a context's reactor backend (see reactor.h). */
#include "engine/reactor.h"
#include "engine/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* Write-once process-wide probe (STYLE.md: global state is limited to
 * such probes): 1 io_uring works, -1 refused, 0 not asked yet.  Two
 * threads may both probe the first time; they find the same answer. */
static _Atomic int uring_works;
static char uring_why[320];
static atomic_flag fallback_said = ATOMIC_FLAG_INIT;

static bool uring_allowed(char *err, size_t errlen)
{
    int known = atomic_load(&uring_works);
    if (known == 0) {
        char why[sizeof uring_why];
        known = tide__reactor_uring_probe(why, sizeof why) == 0 ? 1 : -1;
        if (known < 0)
            memcpy(uring_why, why, sizeof why);
        atomic_store(&uring_works, known);
    }
    if (known < 0)
        snprintf(err, errlen, "%s", uring_why);
    return known > 0;
}

int tide__reactor_choose(tide_reactor_kind want, const struct tide__reactor_ops **out, char *err,
                         size_t errlen)
{
    *out = NULL;
    switch (want) {
    case TIDE_REACTOR_EPOLL:
        *out = &tide__reactor_epoll;
        return 0;
    case TIDE_REACTOR_IO_URING:
        if (!uring_allowed(err, errlen))
            return TIDE_ENOSYS;
        *out = &tide__reactor_uring;
        return 0;
    case TIDE_REACTOR_AUTO:
        break;
    default:
        snprintf(err, errlen, "unknown reactor %d", (int)want);
        return TIDE_EINVAL;
    }
    char why[sizeof uring_why];
    if (uring_allowed(why, sizeof why)) {
        *out = &tide__reactor_uring;
        return 0;
    }
    /* Containers refuse io_uring by default: that is expected, not an
     * error, so it is said once and at info level. */
    if (!atomic_flag_test_and_set(&fallback_said))
        tide__log(TIDE_LOG_INFO, -1, "using the epoll reactor: %s", why);
    *out = &tide__reactor_epoll;
    return 0;
}
