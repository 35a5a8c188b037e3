/* test_reactor.c - the reactor contract (engine/reactor.h), the same
 * cases on every backend: completions run from run() and never inside a
 * post; receives, sends, eventfd reads and cancels complete with what the
 * system call would return; a receive that arrives before it is posted is
 * not lost (epoll is edge-triggered); MSG_WAITALL gathers the whole
 * length; a peer that closes ends a receive with 0; a sleeper in another
 * thread wakes for a completion.  io_uring cases skip when the kernel
 * refuses a ring: the epoll run of the same cases does not. */
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/clock.h"
#include "engine/reactor.h"

struct done {
    struct tide__uop uop;
    int calls, res;
};

static void on_done(struct tide__uop *uop, int res)
{
    struct done *d = (struct done *)uop;
    d->calls++;
    d->res = res;
}

static struct done done_new(void)
{
    return (struct done){.uop = {on_done}, .calls = 0, .res = 0};
}

struct fixture {
    const struct tide__reactor_ops *ops;
    struct tide__reactor r;
    int sv[2]; /* a connected pair of stream sockets */
    int efd;   /* an eventfd */
};

static int setup(void **state, const struct tide__reactor_ops *ops)
{
    static struct fixture f;
    memset(&f, 0, sizeof f);
    f.ops = ops;
    char err[512];
    int rc = tide__reactor_init(&f.r, ops, false, err, sizeof err);
    if (rc == TIDE_ENOSYS && ops == &tide__reactor_uring)
        return -1; /* the kernel can't: the group is skipped below */
    if (rc || socketpair(AF_UNIX, SOCK_STREAM, 0, f.sv))
        return -1;
    f.efd = eventfd(0, EFD_CLOEXEC);
    if (f.efd < 0)
        return -1;
    *state = &f;
    return 0;
}

static int setup_uring(void **state)
{
    return setup(state, &tide__reactor_uring);
}

static int setup_epoll(void **state)
{
    return setup(state, &tide__reactor_epoll);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(f->r.inflight, 0); /* every post completed */
    tide__reactor_fini(&f->r); /* before the fds close (reactor.h) */
    close(f->sv[0]);
    close(f->sv[1]);
    close(f->efd);
    return 0;
}

/* Run the reactor until d completed, at most a second. */
static void run_until(struct fixture *f, struct done *d)
{
    uint64_t give_up = tide__now_ns() + TIDE_NS_PER_S;
    while (!d->calls && tide__now_ns() < give_up)
        tide__reactor_run(&f->r, 10 * TIDE_NS_PER_MS);
    assert_int_equal(d->calls, 1);
}

static void nothing_posted_runs_nothing(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tide__reactor_run(&f->r, 0), 0);
    uint64_t t0 = tide__now_ns();
    assert_int_equal(tide__reactor_run(&f->r, 5 * TIDE_NS_PER_MS), 0);
    assert_true(tide__now_ns() - t0 >= 4 * TIDE_NS_PER_MS); /* it did wait */
}

static void receive_completes_from_run_not_post(void **state)
{
    struct fixture *f = *state;
    char buf[16] = "";
    struct done d = done_new();
    assert_int_equal(write(f->sv[1], "hello", 5), 5); /* before the post: no edge later */
    assert_int_equal(tide__reactor_recv(&f->r, &d.uop, f->sv[0], buf, sizeof buf, 0), 0);
    assert_int_equal(d.calls, 0);
    run_until(f, &d);
    assert_int_equal(d.res, 5);
    assert_memory_equal(buf, "hello", 5);
}

static void receive_waits_for_data(void **state)
{
    struct fixture *f = *state;
    char buf[16] = "";
    struct done d = done_new();
    assert_int_equal(tide__reactor_recv(&f->r, &d.uop, f->sv[0], buf, sizeof buf, 0), 0);
    tide__reactor_run(&f->r, 2 * TIDE_NS_PER_MS);
    assert_int_equal(d.calls, 0);
    assert_int_equal(write(f->sv[1], "late", 4), 4);
    run_until(f, &d);
    assert_int_equal(d.res, 4);
    assert_memory_equal(buf, "late", 4);
}

/* Two writes, the second after the receive first ran: MSG_WAITALL still
 * completes once, with the whole length. */
static void waitall_gathers_the_whole_length(void **state)
{
    struct fixture *f = *state;
    char buf[8] = "";
    struct done d = done_new();
    assert_int_equal(write(f->sv[1], "abc", 3), 3);
    assert_int_equal(tide__reactor_recv(&f->r, &d.uop, f->sv[0], buf, 8, MSG_WAITALL), 0);
    tide__reactor_run(&f->r, 2 * TIDE_NS_PER_MS);
    assert_int_equal(d.calls, 0);
    assert_int_equal(write(f->sv[1], "defgh", 5), 5);
    run_until(f, &d);
    assert_int_equal(d.res, 8);
    assert_memory_equal(buf, "abcdefgh", 8);
}

/* A peer's last bytes and its close, while a MSG_WAITALL receive waits:
 * it completes with what came (epoll sees both as one edge). */
static void waitall_ends_at_the_close(void **state)
{
    struct fixture *f = *state;
    char buf[8] = "";
    struct done d = done_new();
    assert_int_equal(tide__reactor_recv(&f->r, &d.uop, f->sv[0], buf, 8, MSG_WAITALL), 0);
    tide__reactor_run(&f->r, 2 * TIDE_NS_PER_MS);
    assert_int_equal(d.calls, 0);
    assert_int_equal(write(f->sv[1], "abc", 3), 3);
    shutdown(f->sv[1], SHUT_WR);
    run_until(f, &d);
    assert_int_equal(d.res, 3);
    assert_memory_equal(buf, "abc", 3);
}

static void sendmsg_sends_every_iovec(void **state)
{
    struct fixture *f = *state;
    struct iovec iov[2] = {{"head", 4}, {"-tail", 5}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    struct done d = done_new();
    assert_int_equal(tide__reactor_sendmsg(&f->r, &d.uop, f->sv[1], &mh), 0);
    assert_int_equal(d.calls, 0);
    run_until(f, &d);
    assert_int_equal(d.res, 9);
    char buf[16];
    assert_int_equal(read(f->sv[0], buf, sizeof buf), 9);
    assert_memory_equal(buf, "head-tail", 9);
}

/* A send larger than the socket buffer: completions (short sends are
 * resubmitted, as the TCP transport does) until every byte went, while
 * the other end reads. */
static void large_send_completes_as_the_peer_drains(void **state)
{
    struct fixture *f = *state;
    static char out[4 << 20], in[sizeof out];
    for (size_t i = 0; i < sizeof out; i++)
        out[i] = (char)(i * 7);
    size_t sent = 0, got = 0;
    uint64_t give_up = tide__now_ns() + 5 * TIDE_NS_PER_S;
    struct done d = done_new();
    d.calls = 1; /* nothing in flight yet */
    while ((sent < sizeof out || got < sizeof in) && tide__now_ns() < give_up) {
        if (d.calls && sent < sizeof out) {
            if (d.res > 0)
                sent += (size_t)d.res;
            d = done_new();
            struct iovec iov = {out + sent, sizeof out - sent};
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
            if (sent < sizeof out)
                assert_int_equal(tide__reactor_sendmsg(&f->r, &d.uop, f->sv[1], &mh), 0);
            tide__reactor_run(&f->r, 0);
        }
        tide__reactor_run(&f->r, 0);
        ssize_t n = recv(f->sv[0], in + got, sizeof in - got, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
    }
    assert_int_equal(sent, sizeof out);
    assert_int_equal(got, sizeof in);
    assert_memory_equal(in, out, sizeof out);
}

static void peer_close_ends_a_receive_with_zero(void **state)
{
    struct fixture *f = *state;
    char buf[4];
    struct done d = done_new();
    assert_int_equal(tide__reactor_recv(&f->r, &d.uop, f->sv[0], buf, sizeof buf, 0), 0);
    tide__reactor_run(&f->r, 0);
    shutdown(f->sv[1], SHUT_WR);
    run_until(f, &d);
    assert_int_equal(d.res, 0);
}

static void cancel_ends_a_pending_receive(void **state)
{
    struct fixture *f = *state;
    char buf[4];
    struct done d = done_new(), c = done_new();
    assert_int_equal(tide__reactor_recv(&f->r, &d.uop, f->sv[0], buf, sizeof buf, 0), 0);
    tide__reactor_run(&f->r, 1 * TIDE_NS_PER_MS);
    assert_int_equal(tide__reactor_cancel(&f->r, &d.uop, &c.uop), 0);
    run_until(f, &d);
    run_until(f, &c);
    assert_int_equal(d.res, -ECANCELED);
    /* The slot is free again: a new receive on the fd works. */
    struct done again = done_new();
    assert_int_equal(tide__reactor_recv(&f->r, &again.uop, f->sv[0], buf, sizeof buf, 0), 0);
    assert_int_equal(write(f->sv[1], "x", 1), 1);
    run_until(f, &again);
    assert_int_equal(again.res, 1);
}

static void eventfd_read_completes_on_write(void **state)
{
    struct fixture *f = *state;
    int efd = f->efd;
    uint64_t v = 0, one = 3;
    struct done d = done_new();
    assert_int_equal(tide__reactor_read(&f->r, &d.uop, efd, &v, sizeof v), 0);
    tide__reactor_run(&f->r, 1 * TIDE_NS_PER_MS);
    assert_int_equal(d.calls, 0);
    assert_int_equal(write(efd, &one, sizeof one), (ssize_t)sizeof one);
    run_until(f, &d);
    assert_int_equal(d.res, (int)sizeof v);
    assert_int_equal(v, 3);
    /* Posted again, read again: the next write is seen too. */
    d = done_new();
    assert_int_equal(tide__reactor_read(&f->r, &d.uop, efd, &v, sizeof v), 0);
    assert_int_equal(write(efd, &one, sizeof one), (ssize_t)sizeof one);
    run_until(f, &d);
    assert_int_equal(d.res, (int)sizeof v);
}

struct sleeper {
    struct tide__reactor *r;
    uint64_t slept_ns;
};

static void *sleep_thread(void *arg)
{
    struct sleeper *s = arg;
    uint64_t t0 = tide__now_ns();
    tide__reactor_sleep(s->r, 2 * TIDE_NS_PER_S);
    s->slept_ns = tide__now_ns() - t0;
    return NULL;
}

/* A thread that does not drive sleeps until a completion is ready: the
 * progress thread's way of waiting (engine/progress.c). */
static void sleeper_wakes_for_a_completion(void **state)
{
    struct fixture *f = *state;
    char buf[4];
    struct done d = done_new();
    assert_int_equal(tide__reactor_recv(&f->r, &d.uop, f->sv[0], buf, sizeof buf, 0), 0);
    tide__reactor_flush(&f->r);
    struct sleeper s = {&f->r, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sleep_thread, &s), 0);
    usleep(20 * 1000);
    assert_int_equal(write(f->sv[1], "wake", 4), 4);
    pthread_join(t, NULL);
    assert_true(s.slept_ns < TIDE_NS_PER_S);
    run_until(f, &d);
    assert_int_equal(d.res, 4);
}

/* fd readiness, for a transport that brings its own descriptors: a
 * pending check waits for data, sees it without taking it, and a
 * writable socket is reported at once. */
static void poll_fd_reports_readiness(void **state)
{
    struct fixture *f = *state;
    struct done in = done_new(), out = done_new();
    assert_int_equal(tide__reactor_poll_fd(&f->r, &in.uop, f->sv[0], POLLIN), 0);
    tide__reactor_run(&f->r, 2 * TIDE_NS_PER_MS);
    assert_int_equal(in.calls, 0);
    assert_int_equal(write(f->sv[1], "ready", 5), 5);
    run_until(f, &in);
    assert_true(in.res & POLLIN);
    char buf[8];
    assert_int_equal(recv(f->sv[0], buf, sizeof buf, MSG_DONTWAIT), 5); /* left for us */

    assert_int_equal(tide__reactor_poll_fd(&f->r, &out.uop, f->sv[1], POLLOUT), 0);
    run_until(f, &out);
    assert_true(out.res & POLLOUT);

    /* A hang-up ends a wait for input. */
    struct done hup = done_new();
    assert_int_equal(tide__reactor_poll_fd(&f->r, &hup.uop, f->sv[0], POLLIN), 0);
    tide__reactor_run(&f->r, 0);
    assert_int_equal(hup.calls, 0);
    shutdown(f->sv[1], SHUT_WR);
    run_until(f, &hup);
    assert_true(hup.res & (POLLIN | POLLHUP | POLLRDHUP));
}

static const struct CMUnitTest cases[] = {
    cmocka_unit_test(nothing_posted_runs_nothing),
    cmocka_unit_test(receive_completes_from_run_not_post),
    cmocka_unit_test(receive_waits_for_data),
    cmocka_unit_test(waitall_gathers_the_whole_length),
    cmocka_unit_test(waitall_ends_at_the_close),
    cmocka_unit_test(sendmsg_sends_every_iovec),
    cmocka_unit_test(large_send_completes_as_the_peer_drains),
    cmocka_unit_test(peer_close_ends_a_receive_with_zero),
    cmocka_unit_test(cancel_ends_a_pending_receive),
    cmocka_unit_test(eventfd_read_completes_on_write),
    cmocka_unit_test(sleeper_wakes_for_a_completion),
    cmocka_unit_test(poll_fd_reports_readiness),
};
#define NCASES (sizeof cases / sizeof cases[0])

/* The same cases, each with a fresh reactor of one backend. */
static int run_on(const char *name, CMFixtureFunction setup_fn)
{
    struct CMUnitTest t[NCASES];
    for (size_t i = 0; i < NCASES; i++) {
        t[i] = cases[i];
        t[i].setup_func = setup_fn;
        t[i].teardown_func = teardown;
    }
    return _cmocka_run_group_tests(name, t, NCASES, NULL, NULL);
}

int main(void)
{
    int failed = run_on("reactor: epoll", setup_epoll);
    char err[512];
    if (tide__reactor_uring_probe(err, sizeof err) == 0)
        failed += run_on("reactor: io_uring", setup_uring);
    else
        print_message("reactor: io_uring cases not run: %s\n", err);
    return failed;
}
