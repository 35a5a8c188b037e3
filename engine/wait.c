/* wait.c - tide_wait and tide_test: how a caller learns that a request
 * completed.  A waiting caller drives the reactor itself when it can take
 * the drive right (always in inline mode; in thread mode the progress
 * thread parks while anyone waits): spinning first (small-message latency
 * lives on it: ~9 us round trips spinning against ~60 us sleeping,
 * measured on this project's machines), for as long as arrivals keep
 * coming and TIDE_SPIN_US after the last, then sleeping in io_uring_enter.
 * When this host has more ranks than cores, every idle pass of a spin
 * yields the core (tide__spin_yield; ctx->spin_yields, see comm.c): the
 * peer we wait for needs it, and a pure spin made a 4-rank allreduce two
 * to three times slower.  With a core each, the yield only slowed round
 * trips.  A caller that finds another thread driving spins, then sleeps
 * until the request completes or the driver lets go (sleep_on). */
#include "engine/clock.h"
#include "engine/context.h"
#include "engine/trace.h"
#include "engine/waiter.h"

static uint64_t deadline_after_ms(int timeout_ms)
{
    if (timeout_ms < 0)
        return UINT64_MAX;
    return tide__now_ns() + (uint64_t)timeout_ms * TIDE_NS_PER_MS;
}

/* Another thread drives: sleep until a request we may wait for
 * completes or the drive right is let go, whichever comes first.  Waking
 * on the release matters: a progress thread that sees a caller waiting
 * lets go and parks, and a caller that slept on its request alone (in
 * 1 ms slices) left the reactor undriven meanwhile, its peers' data
 * unread (4-rank FSDP, sleep compute: 2-7 such sleeps per rank and run,
 * each the whole slice).  The slice stays as a backstop.  Returns true
 * holding the drive right, when it was let go before we slept. */
static bool sleep_on(tide_req *req, uint64_t deadline)
{
    struct tide__ctx *ctx = req->ctx;
    uint64_t now = tide__now_ns();
    if (now >= deadline)
        return false;
    uint32_t expected = TIDE_REQ_PENDING;
    atomic_compare_exchange_strong(&req->state, &expected, TIDE_REQ_WAITER);
    if (expected & TIDE_REQ_DONE)
        return false;
    atomic_fetch_add(&ctx->sleepers, 1);
    atomic_thread_fence(memory_order_seq_cst); /* pairs with tide__progress_release */
    uint32_t gen = atomic_load(&ctx->wake_gen);
    bool drive = tide__progress_try_drive(ctx);
    if (!drive && !tide__req_is_done(req)) {
        uint64_t left = deadline - now;
        tide__futex_wait(&ctx->wake_gen, gen, left < TIDE_NS_PER_MS ? left : TIDE_NS_PER_MS);
    }
    atomic_fetch_sub(&ctx->sleepers, 1);
    return drive;
}

void tide__wake_sleepers(struct tide__ctx *ctx)
{
    atomic_fetch_add(&ctx->wake_gen, 1);
    tide__futex_wake(&ctx->wake_gen);
}

static int wait_driving(tide_req *req, uint64_t deadline)
{
    struct tide__ctx *ctx = req->ctx;
    uint64_t spin_end = tide__now_ns() + ctx->spin_ns;
    for (;;) {
        if (tide__req_is_done(req))
            return req->status;
        uint64_t now = tide__now_ns();
        if (now >= deadline)
            return TIDE_ETIMEDOUT;
        bool drive = tide__progress_try_drive(ctx);
        if (!drive && now < spin_end) {
            tide__spin_yield();
            continue;
        }
        if (drive || sleep_on(req, deadline)) {
            tide__progress_drive_until(ctx, req, deadline, &spin_end);
            tide__progress_release(ctx);
        }
    }
}

static int wait_real(struct tide__ctx *ctx, tide_req *req, uint64_t deadline)
{
    if (ctx->inline_mode)
        return wait_driving(req, deadline);
    /* Announce ourselves so the progress thread parks and we drive. */
    tide__progress_wait_begin(ctx);
    int rc = wait_driving(req, deadline);
    tide__progress_wait_end(ctx);
    return rc;
}

int tide__wait_reactor(struct tide__ctx *ctx, tide_req *req, int timeout_ms)
{
    uint64_t t0 = ctx->trace ? tide__now_ns() : 0;
    int rc = wait_real(ctx, req, deadline_after_ms(timeout_ms));
    if (ctx->trace)
        tide__trace_wait(ctx->trace, req, t0, rc);
    return rc;
}

int tide_wait(tide_req *req, int timeout_ms)
{
    if (!req)
        return TIDE_EINVAL;
    if (tide__req_is_done(req))
        return req->status;
    return req->ctx->drive->wait(req->ctx, req, timeout_ms);
}

int tide_test(tide_req *req, int *done)
{
    if (!req || !done)
        return TIDE_EINVAL;
    if (!tide__req_is_done(req))
        req->ctx->drive->poke(req->ctx, 0);
    if (!tide__req_is_done(req)) {
        *done = 0;
        return 0;
    }
    *done = 1;
    return req->status;
}

/* Set by a blocking call just before its nonblocking post: the request
 * is waited for at once on this thread, so the post starts it here,
 * rather than waking the progress thread only for it to park again when
 * the wait begins (progress.c).
 *
 * Initial-exec: a blocking call touches it three times, and the default
 * model for a shared library reaches it through __tls_get_addr, 33 of
 * a 2-rank 8 B broadcast's 1,500 instructions.  One byte fits the
 * static TLS that glibc keeps spare for libraries loaded later, as
 * Python's ctypes loads this one. */
static _Thread_local bool wait_next __attribute__((tls_model("initial-exec")));

void tide__wait_next(void)
{
    wait_next = true;
}

bool tide__take_wait_next(void)
{
    bool w = wait_next;
    wait_next = false;
    return w;
}

bool tide__wait_next_pending(void)
{
    return wait_next;
}

int tide__wait_and_free(int rc, tide_req *req)
{
    wait_next = false; /* the post may have failed before taking it */
    if (rc || !req) /* !req: it ended in the post (collectives/board.h, the direct path) */
        return rc;
    rc = tide_wait(req, -1);
    tide_req_free(req);
    return rc;
}
