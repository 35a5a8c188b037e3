/* wait.c - tide_wait and tide_test: how a caller learns that a request
 * completed.  Spin briefly (small-message latency lives on it: ~9 us
 * round trips when spinning against ~60 us when sleeping, measured on
 * this project's machines), then sleep: on the request's futex word in
 * thread mode, inside io_uring_enter in inline mode. */
#include "engine/clock.h"
#include "engine/context.h"
#include "engine/waiter.h"

static bool is_done(tide_req *req)
{
    return atomic_load_explicit(&req->state, memory_order_acquire) & TIDE_REQ_DONE;
}

static uint64_t deadline_after_ms(int timeout_ms)
{
    if (timeout_ms < 0)
        return UINT64_MAX;
    return tide__now_ns() + (uint64_t)timeout_ms * TIDE_NS_PER_MS;
}

static int wait_thread(tide_req *req, uint64_t deadline)
{
    uint64_t spin_end = tide__now_ns() + req->ctx->spin_ns;
    for (unsigned i = 0; !is_done(req); i++) {
        tide__cpu_relax();
        if ((i & 63) == 0 && tide__now_ns() >= spin_end)
            break;
    }
    while (!is_done(req)) {
        uint64_t now = tide__now_ns();
        if (now >= deadline)
            return TIDE_ETIMEDOUT;
        uint32_t expected = TIDE_REQ_PENDING;
        atomic_compare_exchange_strong(&req->state, &expected, TIDE_REQ_WAITER);
        if (expected & TIDE_REQ_DONE)
            break;
        /* Sleep in slices of at most a second so a lost wake-up (which
         * should not happen) costs a second, not forever. */
        uint64_t slice = deadline - now;
        if (slice > TIDE_NS_PER_S)
            slice = TIDE_NS_PER_S;
        tide__futex_wait(&req->state, TIDE_REQ_WAITER, slice);
    }
    return req->status;
}

static int wait_inline(tide_req *req, uint64_t deadline)
{
    struct tide__ctx *ctx = req->ctx;
    uint64_t spin_end = tide__now_ns() + ctx->spin_ns;
    for (;;) {
        tide__progress_turn(ctx, 0);
        if (is_done(req))
            return req->status;
        uint64_t now = tide__now_ns();
        if (now >= deadline)
            return TIDE_ETIMEDOUT;
        if (now < spin_end)
            continue;
        uint64_t limit = deadline == UINT64_MAX ? UINT64_MAX : deadline - now;
        tide__progress_turn(ctx, tide__progress_wait_budget(ctx, limit));
    }
}

int tide_wait(tide_req *req, int timeout_ms)
{
    if (!req)
        return TIDE_EINVAL;
    if (is_done(req))
        return req->status;
    uint64_t deadline = deadline_after_ms(timeout_ms);
    if (req->ctx->inline_mode)
        return wait_inline(req, deadline);
    return wait_thread(req, deadline);
}

int tide_test(tide_req *req, int *done)
{
    if (!req || !done)
        return TIDE_EINVAL;
    if (!is_done(req) && req->ctx->inline_mode)
        tide__progress_turn(req->ctx, 0);
    if (!is_done(req)) {
        *done = 0;
        return 0;
    }
    *done = 1;
    return req->status;
}

int tide__wait_and_free(int rc, tide_req *req)
{
    if (rc)
        return rc;
    rc = tide_wait(req, -1);
    tide_req_free(req);
    return rc;
}
