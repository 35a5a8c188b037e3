/* progress.c - who runs the reactor, and how user threads reach it.
 *
 * Thread mode: a progress thread owns the ring.  Its loop is
 *     turn (commands, timers, ring, completions)
 *     -> did something? go again
 *     -> operations pending and idle less than TIDE_SPIN_US? go again
 *     -> otherwise sleep in io_uring_enter until a completion, the next
 *        deadline, or a wake-up through the eventfd.
 * Sleeping is announced in `sleeping` before the last look at the command
 * queue, and producers look at `sleeping` after pushing (both seq_cst):
 * either the reactor sees the command or the producer sees the flag and
 * writes the eventfd.  No command is ever stranded.
 *
 * Inline mode: no thread; tide_wait/tide_test call tide__progress_turn. */
#include "engine/clock.h"
#include "engine/context.h"
#include "engine/log.h"
#include "engine/waiter.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define STOP_DRAIN_NS (2 * TIDE_NS_PER_S) /* finalize waits this long for the kernel */
#define COMMANDS_PER_TURN 1024

static void wake_arm(struct tide__ctx *ctx)
{
    struct io_uring_sqe *sqe = tide__reactor_sqe(&ctx->reactor, &ctx->wake_uop);
    io_uring_prep_read(sqe, ctx->wake_fd, &ctx->wake_buf, sizeof ctx->wake_buf, 0);
}

static void wake_complete(struct tide__uop *uop, int res)
{
    struct tide__ctx *ctx = container_of(uop, struct tide__ctx, wake_uop);
    (void)res;
    if (!ctx->stopping)
        wake_arm(ctx);
}

static void signal_handled(struct tide__cmd *cmd)
{
    atomic_store(&cmd->handled, 1);
    tide__futex_wake(&cmd->handled);
}

static void abort_all(struct tide__ctx *ctx, int err, const char *why)
{
    if (!ctx->broken)
        ctx->broken = err;
    ctx->tp->ops->abort(ctx->tp, err);
    tide__ctx_fail_all(ctx, err, why);
}

static void run_command(struct tide__ctx *ctx, struct tide__cmd *cmd)
{
    switch (cmd->kind) {
    case TIDE_CMD_START:
        tide__req_start_cmd(cmd->req);
        return;
    case TIDE_CMD_CALLBACK:
        tide__req_attach_callback(cmd->req);
        return;
    case TIDE_CMD_ABORT:
        abort_all(ctx, TIDE_EABORTED, "aborted by tide_comm_abort");
        signal_handled(cmd);
        return;
    case TIDE_CMD_STOP:
        abort_all(ctx, TIDE_EABORTED, "the communicator was finalized");
        ctx->stopping = true;
        /* handled is signalled by the loop once the kernel let go */
        return;
    }
}

int tide__progress_turn(struct tide__ctx *ctx, uint64_t wait_ns)
{
    int n = 0;
    struct tide__mpsc_node *node;
    while (n < COMMANDS_PER_TURN && (node = tide__mpsc_pop(&ctx->cmds))) {
        struct tide__cmd *cmd = container_of(node, struct tide__cmd, node);
        if (cmd->kind == TIDE_CMD_STOP)
            ctx->stop_cmd = cmd;
        run_command(ctx, cmd);
        n++;
    }
    n += tide__timer_heap_expire(&ctx->timers, tide__now_ns());
    n += tide__ctx_deliver(ctx);
    if (n)
        wait_ns = 0; /* new submissions to push out; don't sleep first */
    n += tide__reactor_run(&ctx->reactor, wait_ns);
    n += tide__ctx_deliver(ctx);
    return n;
}

uint64_t tide__progress_wait_budget(struct tide__ctx *ctx, uint64_t limit_ns)
{
    struct tide__timer *t = tide__timer_heap_peek(&ctx->timers);
    if (!t)
        return limit_ns;
    uint64_t now = tide__now_ns();
    uint64_t until = t->deadline_ns > now ? t->deadline_ns - now : 0;
    return until < limit_ns ? until : limit_ns;
}

/* After STOP: keep turning until the transport holds nothing, so no
 * kernel operation still points into a user's buffer when we return. */
static void drain(struct tide__ctx *ctx)
{
    uint64_t give_up = tide__now_ns() + STOP_DRAIN_NS;
    while (ctx->tp->ops->outstanding(ctx->tp) && tide__now_ns() < give_up)
        tide__progress_turn(ctx, 10 * TIDE_NS_PER_MS);
    if (ctx->tp->ops->outstanding(ctx->tp))
        tide__log(TIDE_LOG_WARN, ctx->rank, "finalize: %u transfers still in the kernel after %d s",
                  ctx->tp->ops->outstanding(ctx->tp), (int)(STOP_DRAIN_NS / TIDE_NS_PER_S));
}

static int setup_ring(struct tide__ctx *ctx)
{
    int rc = tide__reactor_init(&ctx->reactor, ctx->init_err, sizeof ctx->init_err);
    if (rc)
        return rc;
    ctx->wake_uop.complete = wake_complete;
    wake_arm(ctx);
    ctx->tp->ops->start(ctx->tp);
    tide__log(TIDE_LOG_DEBUG, ctx->rank, "reactor ready (%s ring, %s progress)",
              ctx->reactor.flags_name, ctx->inline_mode ? "inline" : "thread");
    return 0;
}

static void sleep_until_needed(struct tide__ctx *ctx)
{
    atomic_store(&ctx->sleeping, 1);
    if (!tide__mpsc_empty(&ctx->cmds)) {
        atomic_store(&ctx->sleeping, 0);
        return;
    }
    tide__progress_turn(ctx, tide__progress_wait_budget(ctx, UINT64_MAX));
    atomic_store(&ctx->sleeping, 0);
}

static void *progress_main(void *arg)
{
    struct tide__ctx *ctx = arg;
    ctx->init_rc = setup_ring(ctx);
    atomic_store(&ctx->init_done, 1);
    tide__futex_wake(&ctx->init_done);
    if (ctx->init_rc)
        return NULL;

    uint64_t idle_since = tide__now_ns();
    while (!ctx->stopping) {
        if (tide__progress_turn(ctx, 0)) {
            idle_since = tide__now_ns();
            continue;
        }
        if (ctx->nactive && tide__now_ns() - idle_since < ctx->spin_ns) {
            tide__cpu_relax();
            continue;
        }
        sleep_until_needed(ctx);
        idle_since = tide__now_ns();
    }
    drain(ctx);
    tide__reactor_fini(&ctx->reactor);
    if (ctx->stop_cmd)
        signal_handled(ctx->stop_cmd);
    return NULL;
}

int tide__progress_start(struct tide__ctx *ctx)
{
    if (ctx->inline_mode)
        return setup_ring(ctx);

    int rc = pthread_create(&ctx->thread, NULL, progress_main, ctx);
    if (rc) {
        snprintf(ctx->init_err, sizeof ctx->init_err, "cannot start the progress thread: %s",
                 strerror(rc));
        return TIDE_ENOMEM;
    }
    ctx->thread_started = true;
    while (!atomic_load(&ctx->init_done))
        tide__futex_wait(&ctx->init_done, 0, TIDE_NS_PER_S);
    if (ctx->init_rc) {
        pthread_join(ctx->thread, NULL);
        ctx->thread_started = false;
    }
    return ctx->init_rc;
}

void tide__progress_submit(struct tide__ctx *ctx, struct tide__cmd *cmd)
{
    tide__mpsc_push(&ctx->cmds, &cmd->node);
    if (atomic_exchange(&ctx->sleeping, 0)) {
        uint64_t one = 1;
        ssize_t w = write(ctx->wake_fd, &one, sizeof one);
        (void)w; /* an eventfd write fails only on counter overflow: it is awake then */
    }
}

void tide__progress_command_sync(struct tide__ctx *ctx, enum tide__cmd_kind kind)
{
    struct tide__cmd cmd = {.kind = kind};
    atomic_init(&cmd.handled, 0);
    if (ctx->inline_mode) {
        run_command(ctx, &cmd);
        return;
    }
    tide__progress_submit(ctx, &cmd);
    while (!atomic_load(&cmd.handled))
        tide__futex_wait(&cmd.handled, 0, TIDE_NS_PER_S);
}

void tide__progress_stop(struct tide__ctx *ctx)
{
    if (ctx->inline_mode) {
        if (!ctx->reactor.ready)
            return;
        abort_all(ctx, TIDE_EABORTED, "the communicator was finalized");
        ctx->stopping = true;
        drain(ctx);
        tide__reactor_fini(&ctx->reactor);
        return;
    }
    if (!ctx->thread_started)
        return;
    tide__progress_command_sync(ctx, TIDE_CMD_STOP);
    pthread_join(ctx->thread, NULL);
    ctx->thread_started = false;
}
