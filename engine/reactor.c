/* reactor.c - see reactor.h.  The whole loop is: submit, wait, dispatch.
 * One io_uring_enter per turn covers both submitting and reaping. */
#include "engine/reactor.h"
#include "tide.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define RING_ENTRIES 1024
#define DISPATCH_BATCH 128 /* CQEs run per turn: keeps a turn short */

/* Ring flags, best first.  DEFER_TASKRUN runs completion work only when
 * the owner enters the ring, which suits a thread that enters it every
 * turn anyway and saves interrupting it; older kernels reject it with
 * -EINVAL, and we step down. */
static const struct {
    unsigned flags;
    const char *name;
} ring_modes[] = {
    {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
     "single-issuer+defer-taskrun"},
    {IORING_SETUP_COOP_TASKRUN, "coop-taskrun"},
    {0, "plain"},
};

static void explain_unavailable(int rc, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "io_uring is unavailable (io_uring_setup: %s). tide needs it: check "
             "/proc/sys/kernel/io_uring_disabled (must be 0) and, in a container, a seccomp "
             "profile that allows io_uring_setup/io_uring_enter",
             strerror(-rc));
}

int tide__reactor_init(struct tide__reactor *r, bool shared, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    int rc = -EINVAL;
    size_t n = sizeof ring_modes / sizeof ring_modes[0];
    for (size_t i = shared ? n - 1 : 0; i < n; i++) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        p.flags = ring_modes[i].flags | IORING_SETUP_CQSIZE;
        p.cq_entries = RING_ENTRIES * 4;
        rc = io_uring_queue_init_params(RING_ENTRIES, &r->ring, &p);
        if (rc == 0) {
            r->ready = 1;
            r->shared = shared;
            r->flags_name = ring_modes[i].name;
            return 0;
        }
        if (rc != -EINVAL)
            break; /* ENOSYS, EPERM, ENOMEM: no flag choice will help */
    }
    explain_unavailable(rc, err, errlen);
    return TIDE_ENOSYS;
}

int tide__reactor_probe(char *err, size_t errlen)
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

void tide__reactor_fini(struct tide__reactor *r)
{
    if (r->ready)
        io_uring_queue_exit(&r->ring);
    r->ready = 0;
}

struct io_uring_sqe *tide__reactor_sqe(struct tide__reactor *r, struct tide__uop *uop)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    while (!sqe) {
        /* Full: hand the queued ones to the kernel to make room. */
        io_uring_submit(&r->ring);
        sqe = io_uring_get_sqe(&r->ring);
    }
    io_uring_sqe_set_data(sqe, uop);
    r->inflight++;
    return sqe;
}

void tide__reactor_flush(struct tide__reactor *r)
{
    if (io_uring_sq_ready(&r->ring))
        io_uring_submit(&r->ring);
}

/* TASKRUN_FLAG: the kernel raises IORING_SQ_TASKRUN while completion
 * work waits for us to enter the ring.  Without it, every spin pass must
 * enter just in case (a system call each). */
static bool completion_work_pending(struct tide__reactor *r)
{
    if (!(r->ring.flags & IORING_SETUP_TASKRUN_FLAG))
        return true;
    unsigned flags = io_uring_smp_load_acquire(r->ring.sq.kflags);
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
    if (wait_ns == 0 && (r->shared || !completion_work_pending(r)))
        return io_uring_submit(&r->ring);
    if (wait_ns == 0)
        return io_uring_submit_and_get_events(&r->ring);
    struct io_uring_cqe *cqe;
    if (wait_ns == UINT64_MAX)
        return io_uring_submit_and_wait(&r->ring, 1);
    struct __kernel_timespec ts = {
        .tv_sec = (long long)(wait_ns / 1000000000ull),
        .tv_nsec = (long long)(wait_ns % 1000000000ull),
    };
    return io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, NULL);
}

int tide__reactor_run(struct tide__reactor *r, uint64_t wait_ns)
{
    /* -ETIME (timeout) and -EINTR (a signal) are ordinary here: we just
     * run whatever completed. */
    (void)enter(r, wait_ns);

    struct io_uring_cqe *cqes[DISPATCH_BATCH];
    unsigned n = io_uring_peek_batch_cqe(&r->ring, cqes, DISPATCH_BATCH);
    struct {
        struct tide__uop *uop;
        int res;
    } done[DISPATCH_BATCH];
    for (unsigned i = 0; i < n; i++) {
        done[i].uop = io_uring_cqe_get_data(cqes[i]);
        done[i].res = cqes[i]->res;
    }
    /* Release the CQ slots before running handlers, which may submit. */
    io_uring_cq_advance(&r->ring, n);
    r->inflight -= n;
    for (unsigned i = 0; i < n; i++)
        done[i].uop->complete(done[i].uop, done[i].res);
    return (int)n;
}

void tide__reactor_sleep(struct tide__reactor *r, uint64_t wait_ns)
{
    struct __kernel_timespec ts = {
        .tv_sec = (long long)(wait_ns / 1000000000ull),
        .tv_nsec = (long long)(wait_ns % 1000000000ull),
    };
    struct io_uring_getevents_arg arg = {.ts = (uint64_t)(uintptr_t)&ts};
    /* to_submit 0: the submission ring belongs to whoever drives. */
    io_uring_enter2(r->ring.ring_fd, 0, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                    (sigset_t *)&arg, sizeof arg);
}
