/* reactor.h - the event loop under a context: one per context, driven by
 * one thread at a time.  Two backends sit behind one table of operations,
 * chosen at tide_init (TIDE_REACTOR):
 *
 *   io_uring  reactor_uring.c: the kernel performs each operation and
 *             posts its completion; one io_uring_enter per turn.
 *   epoll     reactor_epoll.c: readiness.  Each operation is tried with
 *             a non-blocking call; what would block waits for the socket's
 *             edge and is tried again.  For where io_uring is refused
 *             (Docker's default seccomp profile, kernel.io_uring_disabled).
 *
 * Both give users the same completion model: an operation is posted with a
 * tide__uop embedded in the object that posted it (a connection, the
 * context's wake-up eventfd), and its complete(uop, res) runs later from
 * tide__reactor_run with what the system call would have returned (bytes,
 * or -errno).  Never from inside the post: a transport is not re-entered
 * while it posts.  A post returns 0, or TIDE_ENOMEM when the backend could
 * not take it (epoll grows its tables while warming up); then no
 * completion follows.
 *
 * Rules for users (the TCP transport keeps them):
 *   - at most one receive and one send in flight per fd: io_uring keeps no
 *     order between two sends on a socket, and epoll keeps one slot each;
 *   - an fd stays open while an operation on it is in flight, and for as
 *     long as the reactor lives once one was posted on it;
 *   - a thread that stops driving calls tide__reactor_flush first, so that
 *     what it posted reaches the kernel before another thread sleeps on it.
 */
#ifndef TIDE_REACTOR_H
#define TIDE_REACTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tide.h"

struct tide__uop {
    void (*complete)(struct tide__uop *uop, int res);
};

struct tide__reactor;

/* One backend.  Every function runs on the thread that drives, except
 * sleep (see below). */
struct tide__reactor_ops {
    const char *name; /* "io_uring", "epoll": what tide_reactor_name reports */
    /* Set r up; shared: several threads take turns driving it (thread
     * progress).  0, or a TIDE_E* with the reason in err. */
    int (*init)(struct tide__reactor *r, bool shared, char *err, size_t errlen);
    void (*fini)(struct tide__reactor *r);
    /* recv(2) into buf; flags: 0 or MSG_WAITALL (io_uring waits for all
     * of it; epoll may complete with less, after a few MiB, so that one
     * transfer does not hold the loop: the caller takes the rest). */
    int (*recv)(struct tide__reactor *r, struct tide__uop *uop, int fd, void *buf, size_t len,
                 int flags);
    /* sendmsg(2) of mh, which must stay valid until completion.  A short
     * send completes with the bytes sent: the caller resubmits the rest. */
    int (*sendmsg)(struct tide__reactor *r, struct tide__uop *uop, int fd, struct msghdr *mh);
    /* read(2), for an eventfd (epoll makes the fd O_NONBLOCK). */
    int (*read)(struct tide__reactor *r, struct tide__uop *uop, int fd, void *buf, size_t len);
    /* Complete once fd is ready: events is POLLIN or POLLOUT, and res
     * the poll(2) revents (POLLERR and POLLHUP included), or -errno.
     * For a transport that brings descriptors of its own and does its
     * own reading and writing (a verbs completion channel, UCX's event
     * fd).  One shot: post it again for the next readiness.  It takes
     * the fd's receive slot (POLLIN) or send slot (POLLOUT). */
    int (*poll_fd)(struct tide__reactor *r, struct tide__uop *uop, int fd, short events);
    /* Cancel the receive posted with target: it completes (with -ECANCELED
     * if it had not finished), and so does uop (res ignored). */
    int (*cancel)(struct tide__reactor *r, struct tide__uop *target, struct tide__uop *uop);
    /* Hand what is posted to the kernel, without waiting or running
     * completions: for a thread that stops driving. */
    void (*flush)(struct tide__reactor *r);
    /* Push out what is posted, wait up to wait_ns for a completion (0:
     * don't wait; UINT64_MAX: no limit), run the completions that are
     * ready, at most a bounded batch.  Returns how many ran. */
    int (*run)(struct tide__reactor *r, uint64_t wait_ns);
    /* Sleep until a completion may be ready or wait_ns passed, touching
     * nothing the driver owns: safe while another thread holds the right
     * to drive. */
    void (*sleep)(struct tide__reactor *r, uint64_t wait_ns);
};

struct tide__reactor {
    const struct tide__reactor_ops *ops;
    void *be;               /* the backend's state */
    bool ready;             /* init succeeded, fini not yet run */
    bool shared;            /* driven by several threads, one at a time */
    const char *flags_name; /* how the backend was set up, for the log */
    unsigned inflight;      /* posted, completion not yet run */
};

extern const struct tide__reactor_ops tide__reactor_uring;
extern const struct tide__reactor_ops tide__reactor_epoll;

/* Which backend a context gets for `want` (TIDE_REACTOR_*).  auto takes
 * io_uring when this process may create a ring, else epoll, saying why
 * once per process at info level.  An explicit io_uring that the kernel
 * refuses is TIDE_ENOSYS with the reason in err. */
int tide__reactor_choose(tide_reactor_kind want, const struct tide__reactor_ops **out, char *err,
                         size_t errlen);

/* Write-once process-wide probe: can this process create an io_uring
 * ring at all?  0, or TIDE_ENOSYS with the reason in err. */
int tide__reactor_uring_probe(char *err, size_t errlen);

static inline int tide__reactor_init(struct tide__reactor *r, const struct tide__reactor_ops *ops,
                                     bool shared, char *err, size_t errlen)
{
    r->ops = ops;
    return ops->init(r, shared, err, errlen);
}

static inline void tide__reactor_fini(struct tide__reactor *r)
{
    if (r->ready)
        r->ops->fini(r);
    r->ready = false;
}

static inline int tide__reactor_recv(struct tide__reactor *r, struct tide__uop *uop, int fd,
                                      void *buf, size_t len, int flags)
{
    return r->ops->recv(r, uop, fd, buf, len, flags);
}

static inline int tide__reactor_sendmsg(struct tide__reactor *r, struct tide__uop *uop, int fd,
                                         struct msghdr *mh)
{
    return r->ops->sendmsg(r, uop, fd, mh);
}

static inline int tide__reactor_read(struct tide__reactor *r, struct tide__uop *uop, int fd,
                                      void *buf, size_t len)
{
    return r->ops->read(r, uop, fd, buf, len);
}

static inline int tide__reactor_poll_fd(struct tide__reactor *r, struct tide__uop *uop, int fd,
                                         short events)
{
    return r->ops->poll_fd(r, uop, fd, events);
}

static inline int tide__reactor_cancel(struct tide__reactor *r, struct tide__uop *target,
                                        struct tide__uop *uop)
{
    return r->ops->cancel(r, target, uop);
}

static inline void tide__reactor_flush(struct tide__reactor *r)
{
    r->ops->flush(r);
}

static inline int tide__reactor_run(struct tide__reactor *r, uint64_t wait_ns)
{
    return r->ops->run(r, wait_ns);
}

static inline void tide__reactor_sleep(struct tide__reactor *r, uint64_t wait_ns)
{
    r->ops->sleep(r, wait_ns);
}

#endif
