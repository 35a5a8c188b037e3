/* reactor_uring.c - the io_uring backend (see reactor.h).  The whole loop
 * is: submit, wait, dispatch; one io_uring_enter per turn covers both
 * submitting and reaping.  Every SQE's user_data is the tide__uop of the
 * object that posted it. */
#include "engine/reactor.h"

#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_ENTRIES 1024
#define DISPATCH_BATCH 128 /* CQEs run per turn: keeps a turn short */

struct uring {
    struct io_uring ring;
};

static struct io_uring *ring_of(struct tide__reactor *r)
{
    return &((struct uring *)r->be)->ring;
}

/* Ring flags, best first.  DEFER_TASKRUN runs completion work only when
 * the owner enters the ring, which suits a thread that enters it every
 * turn anyway and saves interrupting it; older kernels reject it with
 * -EINVAL, and we step down. */
static const struct {
    unsigned flags;
    const char *name;
} ring_modes[] = {
    {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
     "io_uring, single-issuer+defer-taskrun"},
    {IORING_SETUP_COOP_TASKRUN, "io_uring, coop-taskrun"},
    {0, "io_uring, plain"},
};

static void explain_unavailable(int rc, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "io_uring is unavailable (io_uring_setup: %s): check "
             "/proc/sys/kernel/io_uring_disabled (must be 0) and, in a container, a seccomp "
             "profile that allows io_uring_setup/io_uring_enter; or use TIDE_REACTOR=epoll",
             strerror(-rc));
}

/* A ring used by one thread only tries SINGLE_ISSUER|DEFER_TASKRUN, then
 * COOP_TASKRUN, then no flags.  A shared ring (several threads take turns
 * driving it, one at a time, under the caller's lock) uses no flags: the
 * kernel then runs the completion work of a submitting thread at once,
 * even while that thread computes, so operations keep moving in the
 * background. */
static int uring_init(struct tide__reactor *r, bool shared, char *err, size_t errlen)
{
    struct uring *u = calloc(1, sizeof *u);
    if (!u) {
        snprintf(err, errlen, "out of memory");
        return TIDE_ENOMEM;
    }
    int rc = -EINVAL;
    size_t n = sizeof ring_modes / sizeof ring_modes[0];
    for (size_t i = shared ? n - 1 : 0; i < n; i++) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        p.flags = ring_modes[i].flags | IORING_SETUP_CQSIZE;
        p.cq_entries = RING_ENTRIES * 4;
        rc = io_uring_queue_init_params(RING_ENTRIES, &u->ring, &p);
        if (rc == 0) {
            r->be = u;
            r->ready = true;
            r->shared = shared;
            r->flags_name = ring_modes[i].name;
            r->inflight = 0;
            return 0;
        }
        if (rc != -EINVAL)
            break; /* ENOSYS, EPERM, ENOMEM: no flag choice will help */
    }
    free(u);
    explain_unavailable(rc, err, errlen);
    return TIDE_ENOSYS;
}

static void uring_fini(struct tide__reactor *r)
{
    io_uring_queue_exit(ring_of(r));
    free(r->be);
    r->be = NULL;
}

/* A free SQE (submitting queued ones first if the ring is full) with
 * user_data already pointing at uop.  Never NULL. */
static struct io_uring_sqe *get_sqe(struct tide__reactor *r, struct tide__uop *uop)
{
    struct io_uring *ring = ring_of(r);
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    while (!sqe) {
        /* Full: hand the queued ones to the kernel to make room. */
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
    }
    io_uring_sqe_set_data(sqe, uop);
    r->inflight++;
    return sqe;
}

static int uring_recv(struct tide__reactor *r, struct tide__uop *uop, int fd, void *buf,
                      size_t len, int flags)
{
    io_uring_prep_recv(get_sqe(r, uop), fd, buf, len, flags);
    return 0;
}

/* MSG_WAITALL: the kernel retries a short send itself before completing
 * (sockets are blocking; io_uring polls them instead of blocking). */
static int uring_sendmsg(struct tide__reactor *r, struct tide__uop *uop, int fd,
                         struct msghdr *mh)
{
    io_uring_prep_sendmsg(get_sqe(r, uop), fd, mh, MSG_NOSIGNAL | MSG_WAITALL);
    return 0;
}

static int uring_read(struct tide__reactor *r, struct tide__uop *uop, int fd, void *buf,
                      size_t len)
{
    io_uring_prep_read(get_sqe(r, uop), fd, buf, (unsigned)len, 0);
    return 0;
}

static int uring_poll_fd(struct tide__reactor *r, struct tide__uop *uop, int fd, short events)
{
    io_uring_prep_poll_add(get_sqe(r, uop), fd, (unsigned)events);
    return 0;
}

static int uring_cancel(struct tide__reactor *r, struct tide__uop *target, struct tide__uop *uop)
{
    io_uring_prep_cancel64(get_sqe(r, uop), (uint64_t)(uintptr_t)target, 0);
    return 0;
}

static void uring_flush(struct tide__reactor *r)
{
    struct io_uring *ring = ring_of(r);
    if (io_uring_sq_ready(ring))
        io_uring_submit(ring);
}

/* TASKRUN_FLAG: the kernel raises IORING_SQ_TASKRUN while completion
 * work waits for us to enter the ring.  Without it, every spin pass must
 * enter just in case (a system call each). */
static bool completion_work_pending(struct io_uring *ring)
{
    if (!(ring->flags & IORING_SETUP_TASKRUN_FLAG))
        return true;
    unsigned flags = io_uring_smp_load_acquire(ring->sq.kflags);
    return flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW);
}

/* A shared ring has no taskrun flags: the kernel interrupts the
 * submitting thread to post its completions, so the completion ring is
 * up to date without entering the kernel, and a spinning waiter's look
 * costs a memory read instead of a system call (io_uring_submit enters
 * only when something is queued).  The other rings run completion work
 * only inside io_uring_enter, which a look skips while the kernel says
 * there is none (TASKRUN_FLAG). */
static int enter(struct tide__reactor *r, uint64_t wait_ns)
{
    struct io_uring *ring = ring_of(r);
    if (wait_ns == 0 && (r->shared || !completion_work_pending(ring)))
        return io_uring_submit(ring);
    if (wait_ns == 0)
        return io_uring_submit_and_get_events(ring);
    struct io_uring_cqe *cqe;
    if (wait_ns == UINT64_MAX)
        return io_uring_submit_and_wait(ring, 1);
    struct __kernel_timespec ts = {
        .tv_sec = (long long)(wait_ns / 1000000000ull),
        .tv_nsec = (long long)(wait_ns % 1000000000ull),
    };
    return io_uring_submit_and_wait_timeout(ring, &cqe, 1, &ts, NULL);
}

static int uring_run(struct tide__reactor *r, uint64_t wait_ns)
{
    /* -ETIME (timeout) and -EINTR (a signal) are ordinary here: we just
     * run whatever completed. */
    (void)enter(r, wait_ns);

    struct io_uring *ring = ring_of(r);
    struct io_uring_cqe *cqes[DISPATCH_BATCH];
    unsigned n = io_uring_peek_batch_cqe(ring, cqes, DISPATCH_BATCH);
    struct {
        struct tide__uop *uop;
        int res;
    } done[DISPATCH_BATCH];
    for (unsigned i = 0; i < n; i++) {
        done[i].uop = io_uring_cqe_get_data(cqes[i]);
        done[i].res = cqes[i]->res;
    }
    /* Release the CQ slots before running handlers, which may submit. */
    io_uring_cq_advance(ring, n);
    r->inflight -= n;
    for (unsigned i = 0; i < n; i++)
        done[i].uop->complete(done[i].uop, done[i].res);
    return (int)n;
}

static void uring_sleep(struct tide__reactor *r, uint64_t wait_ns)
{
    struct __kernel_timespec ts = {
        .tv_sec = (long long)(wait_ns / 1000000000ull),
        .tv_nsec = (long long)(wait_ns % 1000000000ull),
    };
    struct io_uring_getevents_arg arg = {.ts = (uint64_t)(uintptr_t)&ts};
    /* to_submit 0: the submission ring belongs to whoever drives. */
    io_uring_enter2(ring_of(r)->ring_fd, 0, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                    (sigset_t *)&arg, sizeof arg);
}

const struct tide__reactor_ops tide__reactor_uring = {
    .name = "io_uring",
    .init = uring_init,
    .fini = uring_fini,
    .recv = uring_recv,
    .sendmsg = uring_sendmsg,
    .read = uring_read,
    .poll_fd = uring_poll_fd,
    .cancel = uring_cancel,
    .flush = uring_flush,
    .run = uring_run,
    .sleep = uring_sleep,
};

int tide__reactor_uring_probe(char *err, size_t errlen)
{
    struct io_uring ring;
    int rc = io_uring_queue_init(4, &ring, 0);
    if (rc < 0) {
        explain_unavailable(rc, err, errlen);
        return TIDE_ENOSYS;
    }
    io_uring_queue_exit(&ring);
    return 0;
}
