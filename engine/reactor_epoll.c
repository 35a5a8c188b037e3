/* reactor_epoll.c - the epoll backend (see reactor.h): the same
 * completion model as io_uring, made of readiness and non-blocking calls,
 * for where io_uring is refused (Docker's default seccomp profile since
 * 25.0, kernel.io_uring_disabled).
 *
 * Each fd gets one slot for a receive (or read) and one for a send, and
 * is registered once, edge-triggered, for both directions.  An operation
 * goes through three states:
 *
 *   posted    on the try list: tried at the next flush or run
 *   waiting   tried, would block: tried again when epoll reports the
 *             fd's edge in that direction
 *   finished  its slot is free again and (uop, res) waits on the done
 *             ring; run() calls complete(uop, res), oldest first
 *
 * Why try at post instead of waiting for an edge: with edge triggering,
 * bytes that arrived before the operation was posted made their edge
 * already (reaped then with nothing to do), and no second edge comes.
 * Trying first, then waiting, loses nothing.  Calls never block: sockets
 * get MSG_DONTWAIT per call (they stay blocking for the rest of tide),
 * and an fd read with read(2) (the wake-up eventfd) is made O_NONBLOCK.
 *
 * A spinning driver's pass costs no system call unless a socket operation
 * waits for an edge, or a sleeper saw edges: the wake-up eventfd matters
 * only to a driver that sleeps, and a sleeping run always asks epoll. */
#include "engine/reactor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define DISPATCH_BATCH 128 /* completions run per turn: keeps a turn short */
#define EVENTS_PER_WAIT 64
#define RECV_SLICE (4u << 20) /* bytes one MSG_WAITALL attempt reads at most */

enum ep_kind { EP_RECV = 1, EP_SENDMSG, EP_READ, EP_POLL_IN, EP_POLL_OUT };

struct ep_op {
    struct tide__uop *uop; /* NULL: the slot is free */
    uint8_t kind;          /* enum ep_kind */
    bool queued;           /* on the try list */
    bool waiting;          /* tried; waits for the fd's edge */
    int fd;
    void *buf;
    size_t len, got; /* recv with MSG_WAITALL: completes once got == len */
    int flags;
    struct msghdr *mh;
    struct ep_op *next; /* in the try list */
};

struct ep_fd {
    bool added; /* registered with epoll */
    struct ep_op rx, tx;
};

struct ep_done {
    struct tide__uop *uop;
    int res;
};

struct epoll_be {
    int epfd;
    struct ep_fd **fds; /* by fd number; each allocated on first use */
    int nfds;
    struct ep_op *try_head, *try_tail;
    unsigned nwaiting_io; /* socket operations waiting for an edge */
    struct ep_done *done; /* ring of finished operations */
    unsigned done_head, ndone, done_cap;
    /* Posted or finished operations, for a sleeper in another thread: it
     * must not sleep while any exist, since no edge will come for them. */
    _Atomic unsigned unrun;
    /* A sleeper woke because edges wait in epoll's ready list: the next
     * run reaps them even if it would not wait.  Otherwise one that only
     * the wake-up eventfd waits for (a job of one rank) leaves the edge
     * there, and the epoll fd stays readable: every later sleep returned
     * at once (measured: 294 ms of CPU in 300 ms of idling). */
    _Atomic bool edges_seen;
};

static struct epoll_be *be_of(struct tide__reactor *r)
{
    return r->be;
}

static int ep_init(struct tide__reactor *r, bool shared, char *err, size_t errlen)
{
    struct epoll_be *be = calloc(1, sizeof *be);
    int epfd = be ? epoll_create1(EPOLL_CLOEXEC) : -1;
    if (epfd < 0) {
        snprintf(err, errlen, "epoll_create1: %s", be ? strerror(errno) : "out of memory");
        free(be);
        return be ? TIDE_ENOSYS : TIDE_ENOMEM;
    }
    be->epfd = epfd;
    r->be = be;
    r->ready = true;
    r->shared = shared;
    r->flags_name = "epoll, edge-triggered";
    r->inflight = 0;
    return 0;
}

static void ep_fini(struct tide__reactor *r)
{
    struct epoll_be *be = be_of(r);
    close(be->epfd);
    for (int i = 0; i < be->nfds; i++)
        free(be->fds[i]);
    free(be->fds);
    free(be->done);
    free(be);
    r->be = NULL;
}

/* The slot of fd, registered with epoll; NULL (with errno) if it cannot
 * be had. */
static struct ep_fd *slot_of(struct epoll_be *be, int fd)
{
    if (fd < 0) {
        errno = EBADF;
        return NULL;
    }
    if (fd >= be->nfds) {
        int n = be->nfds ? be->nfds : 64;
        while (n <= fd)
            n *= 2;
        struct ep_fd **grown = realloc(be->fds, (size_t)n * sizeof *grown);
        if (!grown)
            return NULL;
        memset(grown + be->nfds, 0, (size_t)(n - be->nfds) * sizeof *grown);
        be->fds = grown;
        be->nfds = n;
    }
    if (!be->fds[fd] && !(be->fds[fd] = calloc(1, sizeof *be->fds[fd])))
        return NULL;
    struct ep_fd *s = be->fds[fd];
    if (!s->added) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                 .data.ptr = s};
        if (epoll_ctl(be->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST)
            return NULL;
        s->added = true;
    }
    return s;
}

/* Room on the done ring for every operation in flight, taken at post
 * time, where running out of memory can still be reported: a finished
 * operation must never find the ring full. */
static int reserve(struct epoll_be *be, unsigned inflight)
{
    if (inflight <= be->done_cap)
        return 0;
    unsigned cap = be->done_cap ? 2 * be->done_cap : 64;
    struct ep_done *grown = malloc(cap * sizeof *grown);
    if (!grown)
        return TIDE_ENOMEM;
    for (unsigned i = 0; i < be->ndone; i++)
        grown[i] = be->done[(be->done_head + i) % be->done_cap];
    free(be->done);
    be->done = grown;
    be->done_head = 0;
    be->done_cap = cap;
    return 0;
}

static void push_done(struct epoll_be *be, struct tide__uop *uop, int res)
{
    be->done[(be->done_head + be->ndone) % be->done_cap] = (struct ep_done){uop, res};
    be->ndone++;
    atomic_fetch_add_explicit(&be->unrun, 1, memory_order_relaxed);
}

static void unqueue(struct epoll_be *be, struct ep_op *op)
{
    struct ep_op **p = &be->try_head, *prev = NULL;
    while (*p && *p != op) {
        prev = *p;
        p = &(*p)->next;
    }
    if (!*p)
        return;
    *p = op->next;
    if (be->try_tail == op)
        be->try_tail = prev;
    op->next = NULL;
    op->queued = false;
    atomic_fetch_sub_explicit(&be->unrun, 1, memory_order_relaxed);
}

static void finish(struct epoll_be *be, struct ep_op *op, int res)
{
    if (op->queued)
        unqueue(be, op); /* a cancel: the slot may be posted again before the next try */
    if (op->waiting && op->kind != EP_READ)
        be->nwaiting_io--;
    struct tide__uop *uop = op->uop;
    op->uop = NULL;
    op->waiting = false;
    push_done(be, uop, res);
}

/* A receive's attempt.  MSG_WAITALL reads until the whole length, the end
 * of the stream, or EAGAIN: stopping after a short read would wait for an
 * edge that may have come already (a dying peer's last data and its FIN
 * arrive as one edge).  It completes early after RECV_SLICE bytes, so
 * that one large transfer does not hold the loop (reactor.h allows it). */
static int attempt_recv(struct ep_op *op)
{
    bool all = op->flags & MSG_WAITALL;
    size_t start = op->got;
    for (;;) {
        ssize_t n = recv(op->fd, (char *)op->buf + op->got, op->len - op->got,
                         (op->flags & ~MSG_WAITALL) | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return -EAGAIN; /* drained: the next arrival makes an edge */
        if (n < 0)
            return op->got ? (int)op->got : -errno; /* what came, then the error */
        op->got += (size_t)n;
        if (n == 0 || !all || op->got == op->len || op->got - start >= RECV_SLICE)
            return (int)op->got;
    }
}

/* A readiness check's attempt: the revents, or -EAGAIN while there are
 * none (the fd's edge tries it again). */
static int attempt_poll(const struct ep_op *op)
{
    struct pollfd p = {.fd = op->fd, .events = op->kind == EP_POLL_IN ? POLLIN : POLLOUT};
    int n = poll(&p, 1, 0);
    if (n < 0)
        return errno == EINTR ? -EAGAIN : -errno;
    if (p.revents & POLLNVAL)
        return -EBADF;
    return n ? p.revents : -EAGAIN;
}

/* One non-blocking attempt.  Returns the result, or -EAGAIN when the
 * operation must wait for an edge. */
static int attempt(struct ep_op *op)
{
    ssize_t n;
    switch (op->kind) {
    case EP_RECV:
        return attempt_recv(op);
    case EP_SENDMSG:
        n = sendmsg(op->fd, op->mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        break;
    case EP_READ:
        n = read(op->fd, op->buf, op->len);
        break;
    case EP_POLL_IN:
    case EP_POLL_OUT:
        return attempt_poll(op);
    default:
        return -EINVAL;
    }
    if (n >= 0)
        return (int)n;
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

/* Try op; finish it, or leave it waiting for its edge. */
static void try_op(struct epoll_be *be, struct ep_op *op)
{
    int res = attempt(op);
    if (res == -EAGAIN || res == -EINTR) {
        if (!op->waiting && op->kind != EP_READ)
            be->nwaiting_io++;
        op->waiting = true;
        return;
    }
    finish(be, op, res);
}

/* Try every posted operation once. */
static void try_posted(struct epoll_be *be)
{
    while (be->try_head) {
        struct ep_op *op = be->try_head;
        be->try_head = op->next;
        if (!be->try_head)
            be->try_tail = NULL;
        op->next = NULL;
        op->queued = false;
        atomic_fetch_sub_explicit(&be->unrun, 1, memory_order_relaxed);
        try_op(be, op);
    }
}

/* Take a slot for a new operation of kind on fd.  NULL when the post
 * is over: TIDE_ENOMEM in *rc, or 0 with a failed completion queued. */
static struct ep_op *post(struct tide__reactor *r, struct tide__uop *uop, int fd, uint8_t kind,
                          int *rc)
{
    struct epoll_be *be = be_of(r);
    if ((*rc = reserve(be, r->inflight + 1)) != 0)
        return NULL;
    r->inflight++;
    errno = 0;
    struct ep_fd *s = slot_of(be, fd);
    bool tx = kind == EP_SENDMSG || kind == EP_POLL_OUT;
    struct ep_op *op = s ? (tx ? &s->tx : &s->rx) : NULL;
    if (!op || op->uop) {
        /* One receive and one send per fd (reactor.h): a second is a bug
         * of the caller's, reported rather than lost. */
        push_done(be, uop, op ? -EBUSY : -(errno ? errno : ENOMEM));
        return NULL;
    }
    memset(op, 0, sizeof *op);
    op->uop = uop;
    op->kind = kind;
    op->fd = fd;
    op->queued = true;
    if (be->try_tail)
        be->try_tail->next = op;
    else
        be->try_head = op;
    be->try_tail = op;
    atomic_fetch_add_explicit(&be->unrun, 1, memory_order_relaxed);
    return op;
}

static int ep_recv(struct tide__reactor *r, struct tide__uop *uop, int fd, void *buf, size_t len,
                   int flags)
{
    int rc;
    struct ep_op *op = post(r, uop, fd, EP_RECV, &rc);
    if (op) {
        op->buf = buf;
        op->len = len;
        op->flags = flags;
    }
    return rc;
}

static int ep_sendmsg(struct tide__reactor *r, struct tide__uop *uop, int fd, struct msghdr *mh)
{
    int rc;
    struct ep_op *op = post(r, uop, fd, EP_SENDMSG, &rc);
    if (op)
        op->mh = mh;
    return rc;
}

static int ep_read(struct tide__reactor *r, struct tide__uop *uop, int fd, void *buf, size_t len)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK))
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK); /* read(2) has no per-call flag */
    int rc;
    struct ep_op *op = post(r, uop, fd, EP_READ, &rc);
    if (op) {
        op->buf = buf;
        op->len = len;
    }
    return rc;
}

static int ep_poll_fd(struct tide__reactor *r, struct tide__uop *uop, int fd, short events)
{
    int rc;
    post(r, uop, fd, events & POLLIN ? EP_POLL_IN : EP_POLL_OUT, &rc);
    return rc;
}

/* The operation posted with uop, if it has not finished. */
static struct ep_op *find_op(struct epoll_be *be, struct tide__uop *uop)
{
    for (int fd = 0; fd < be->nfds; fd++) {
        struct ep_fd *s = be->fds[fd];
        if (s && s->rx.uop == uop)
            return &s->rx;
        if (s && s->tx.uop == uop)
            return &s->tx;
    }
    return NULL;
}

/* Rare (a receive withdrawn mid-payload), so a scan of the slots. */
static int ep_cancel(struct tide__reactor *r, struct tide__uop *target, struct tide__uop *uop)
{
    struct epoll_be *be = be_of(r);
    if (reserve(be, r->inflight + 1))
        return TIDE_ENOMEM;
    r->inflight++;
    struct ep_op *op = find_op(be, target);
    if (op)
        finish(be, op, -ECANCELED);
    push_done(be, uop, op ? 0 : -ENOENT);
    return 0;
}

static void ep_flush(struct tide__reactor *r)
{
    try_posted(be_of(r));
}

/* Wait for edges up to wait_ns (0: just look) and try what they unblock. */
static void reap_edges(struct epoll_be *be, uint64_t wait_ns)
{
    struct epoll_event ev[EVENTS_PER_WAIT];
    int n;
    if (wait_ns == UINT64_MAX) {
        n = epoll_wait(be->epfd, ev, EVENTS_PER_WAIT, -1);
    } else {
        struct timespec ts = {.tv_sec = (time_t)(wait_ns / 1000000000ull),
                              .tv_nsec = (long)(wait_ns % 1000000000ull)};
        n = epoll_pwait2(be->epfd, ev, EVENTS_PER_WAIT, &ts, NULL);
        if (n < 0 && errno == ENOSYS) /* before Linux 5.11: milliseconds, rounded up */
            n = epoll_wait(be->epfd, ev, EVENTS_PER_WAIT, (int)((wait_ns + 999999) / 1000000));
    }
    for (int i = 0; i < n; i++) {
        struct ep_fd *s = ev[i].data.ptr;
        uint32_t e = ev[i].events;
        if (s->rx.uop && s->rx.waiting && (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
            try_op(be, &s->rx);
        if (s->tx.uop && s->tx.waiting && (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
            try_op(be, &s->tx);
    }
}

static int dispatch(struct tide__reactor *r)
{
    struct epoll_be *be = be_of(r);
    struct ep_done batch[DISPATCH_BATCH];
    unsigned n = be->ndone < DISPATCH_BATCH ? be->ndone : DISPATCH_BATCH;
    for (unsigned i = 0; i < n; i++)
        batch[i] = be->done[(be->done_head + i) % be->done_cap];
    /* Off the ring before the handlers run: they post and may finish
     * operations at once (a failed registration). */
    be->done_head = (be->done_head + n) % (be->done_cap ? be->done_cap : 1);
    be->ndone -= n;
    atomic_fetch_sub_explicit(&be->unrun, n, memory_order_relaxed);
    r->inflight -= n;
    for (unsigned i = 0; i < n; i++)
        batch[i].uop->complete(batch[i].uop, batch[i].res);
    return (int)n;
}

static int ep_run(struct tide__reactor *r, uint64_t wait_ns)
{
    struct epoll_be *be = be_of(r);
    try_posted(be);
    if (be->ndone)
        wait_ns = 0; /* completions are ready: look, don't sleep */
    if (wait_ns || be->nwaiting_io || atomic_exchange(&be->edges_seen, false))
        reap_edges(be, wait_ns);
    return dispatch(r);
}

/* Another thread drives: poll the epoll fd itself, which is readable
 * while edges wait to be reaped, without reaping them. */
static void ep_sleep(struct tide__reactor *r, uint64_t wait_ns)
{
    struct epoll_be *be = be_of(r);
    if (atomic_load_explicit(&be->unrun, memory_order_relaxed))
        return;
    struct pollfd pfd = {.fd = be->epfd, .events = POLLIN};
    struct timespec ts = {.tv_sec = (time_t)(wait_ns / 1000000000ull),
                          .tv_nsec = (long)(wait_ns % 1000000000ull)};
    if (ppoll(&pfd, 1, wait_ns == UINT64_MAX ? NULL : &ts, NULL) > 0)
        atomic_store(&be->edges_seen, true);
}

const struct tide__reactor_ops tide__reactor_epoll = {
    .name = "epoll",
    .init = ep_init,
    .fini = ep_fini,
    .recv = ep_recv,
    .sendmsg = ep_sendmsg,
    .read = ep_read,
    .poll_fd = ep_poll_fd,
    .cancel = ep_cancel,
    .flush = ep_flush,
    .run = ep_run,
    .sleep = ep_sleep,
};
