/* recorder_signal.c - dumping the flight recorder on a signal (SIGUSR1
 * unless TIDE_DUMP_SIGNAL says otherwise), e.g. from `tide-run
 * --dump-on-timeout` when a job looks stuck.
 *
 * A signal handler may do almost nothing, and the recorder belongs to the
 * reactor thread; so the handler only raises each context's dump_wanted
 * flag and writes its eventfd.  In thread mode a small thread per context
 * waits on that eventfd and takes the drive right (like a caller in
 * tide_wait) to dump, or, when someone else drives, leaves the flag for
 * the driver's next turn (tide__rec_poll).  In inline mode the caller's
 * next tide_wait or tide_test dumps; a program that never calls tide
 * again does not, which the doctor reports as a missing dump.
 *
 * Global state: the table of contexts the handler may touch.  It is the
 * one exception to "everything hangs off the context" in the engine: a
 * signal handler has nothing else to reach them by.  Slots are claimed
 * and released with atomics; a context leaves the table, and waits out
 * any handler still running, before it is freed (tide__rec_teardown). */
#include "engine/context.h"
#include "engine/log.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MAX_CTX 16

static _Atomic(struct tide__ctx *) handled[MAX_CTX];
/* Handlers running now: a context that leaves the table waits for them
 * to finish before its eventfd is closed and its memory freed, since one
 * may have read its slot just before it was cleared. */
static _Atomic int in_handler;

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    atomic_fetch_add(&in_handler, 1);
    for (int i = 0; i < MAX_CTX; i++) {
        struct tide__ctx *ctx = atomic_load(&handled[i]);
        if (!ctx)
            continue;
        atomic_store(&ctx->rec.dump_wanted, 1);
        uint64_t one = 1;
        if (ctx->rec.signal_fd >= 0 && write(ctx->rec.signal_fd, &one, sizeof one) < 0)
            continue; /* the flag alone still gets it dumped at the next turn */
    }
    atomic_fetch_sub(&in_handler, 1);
    errno = saved;
}

/* The signal TIDE_DUMP_SIGNAL names: a number, USR1, USR2; 0 or "none": off. */
static int dump_signal(void)
{
    const char *s = getenv("TIDE_DUMP_SIGNAL");
    if (!s || !*s || !strcmp(s, "USR1") || !strcmp(s, "SIGUSR1"))
        return SIGUSR1;
    if (!strcmp(s, "USR2") || !strcmp(s, "SIGUSR2"))
        return SIGUSR2;
    if (!strcmp(s, "none"))
        return 0;
    int n = atoi(s);
    return n > 0 && n < NSIG ? n : 0;
}

/* Install the handler unless the program has its own for that signal. */
static bool install(struct tide__ctx *ctx, int sig)
{
    struct sigaction old, sa;
    if (sigaction(sig, NULL, &old) != 0)
        return false;
    /* Ignored counts as free: tide-run --dump-on-timeout starts ranks so,
     * lest its signal kill one that has not yet come here. */
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN && old.sa_handler != on_signal) {
        tide__log(TIDE_LOG_WARN, ctx->rank,
                  "flight recorder: signal %d has a handler already; no dumps on it", sig);
        return false;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL) == 0;
}

/* Thread mode: answer the handler's eventfd with a dump on a tide thread. */
static void *signal_main(void *arg)
{
    struct tide__ctx *ctx = arg;
    struct pollfd p = {.fd = ctx->rec.signal_fd, .events = POLLIN};
    while (!atomic_load(&ctx->rec.stop)) {
        if (poll(&p, 1, 200) <= 0)
            continue;
        uint64_t n;
        if (read(ctx->rec.signal_fd, &n, sizeof n) < 0)
            continue;
        /* Whoever drives dumps at its next turn; if nobody does within
         * a few seconds' tries, the reactor is free and this thread can. */
        for (int i = 0; i < 400 && atomic_load(&ctx->rec.dump_wanted); i++) {
            if (tide__progress_try_drive(ctx)) {
                tide__rec_poll(ctx);
                tide__progress_release(ctx);
                break;
            }
            usleep(5000);
        }
    }
    return NULL;
}

static void claim_slot(struct tide__ctx *ctx)
{
    for (int i = 0; i < MAX_CTX; i++) {
        struct tide__ctx *none = NULL;
        if (atomic_compare_exchange_strong(&handled[i], &none, ctx))
            return;
    }
    tide__log(TIDE_LOG_WARN, ctx->rank, "flight recorder: more than %d contexts; no signal dumps",
              MAX_CTX);
}

void tide__rec_setup(struct tide__ctx *ctx)
{
    ctx->rec.ready = 1;
    ctx->rec.signal_fd = -1;
    const char *dir = getenv("TIDE_DUMP_DIR");
    if (!dir || !*dir || !ctx->drive->records)
        return;
    snprintf(ctx->rec.dir, sizeof ctx->rec.dir, "%s", dir);
    int sig = dump_signal();
    if (!sig)
        return;
    if (!ctx->inline_mode) {
        ctx->rec.signal_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ctx->rec.signal_fd < 0 ||
            pthread_create(&ctx->rec.thread, NULL, signal_main, ctx) != 0) {
            tide__log(TIDE_LOG_WARN, ctx->rank, "flight recorder: no signal dumps: %s",
                      strerror(errno));
            if (ctx->rec.signal_fd >= 0)
                close(ctx->rec.signal_fd);
            ctx->rec.signal_fd = -1;
            return;
        }
        ctx->rec.thread_started = 1;
    }
    claim_slot(ctx);
    install(ctx, sig);
}

void tide__rec_teardown(struct tide__ctx *ctx)
{
    free(ctx->world.rec); /* sub-communicators free theirs (subcomm.c) */
    ctx->world.rec = NULL;
    if (!ctx->rec.ready)
        return;
    for (int i = 0; i < MAX_CTX; i++) {
        struct tide__ctx *mine = ctx;
        atomic_compare_exchange_strong(&handled[i], &mine, NULL);
    }
    while (atomic_load(&in_handler)) /* a handler is a few writes long */
        sched_yield();
    if (ctx->rec.thread_started) {
        atomic_store(&ctx->rec.stop, 1);
        pthread_join(ctx->rec.thread, NULL);
        ctx->rec.thread_started = 0;
    }
    if (ctx->rec.signal_fd >= 0)
        close(ctx->rec.signal_fd);
    ctx->rec.signal_fd = -1;
}
