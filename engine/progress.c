/* progress.c - who drives the reactor, and how user threads reach it.
 *
 * Thread mode: a progress thread drives the reactor whenever no caller
 * does, so operations move while the caller computes.  A caller that
 * waits (tide_wait) takes the drive lock itself and the progress thread
 * parks meanwhile: a round trip then needs no hand-off between threads,
 * and on a machine with few cores nobody spins for nothing.  (Measured
 * here before this rule: caller and progress thread spinning side by
 * side made an 8-byte round trip 115 us instead of 12.)
 *
 * A large nonblocking post (tide_iallreduce, tide_isend; see request.c)
 * goes to the progress thread through the command queue: starting a
 * large operation means copies and system calls (a 1 MiB all-gather's
 * first sends), and the caller posted it so as to compute meanwhile.
 * Measured here, 4-rank FSDP with sleep compute: the trainer's thread
 * spent 0.3 ms per layer starting collectives, and a rank that fell
 * behind spent more (its peers' data was waiting for it), falling
 * further behind.  A blocking call (tide__wait_next) or a small post
 * starts its operation on the caller, which is about to drive the
 * reactor anyway or pays less than a wake-up.  A handed-over post wakes
 * the progress thread wherever it sleeps (ring, nap, parked) unless a
 * caller waits: then that caller runs the queue at its next turn.
 *
 * The progress thread's loop:
 *     someone waits?           park (futex on `waiters`; looks up every
 *                              GRACE_NS, more rarely while short waits
 *                              keep ending, up to LOOK_MAX_NS; woken by
 *                              the last waiter out if work is pending,
 *                              or by a post once nobody waits)
 *     a wait just ended?       nap out the rest of GRACE_NS, unless a
 *                              post is queued (a futex: posts wake it)
 *     lock busy?               a caller is driving briefly: nap
 *     otherwise                drive: turn while there is work, spin
 *                              (yielding the core on each idle pass) up
 *                              to TIDE_SPIN_US while operations pend,
 *                              then let go and sleep in io_uring_enter
 *                              (touching neither ring) until a
 *                              completion, a wake-up or the next deadline.
 * For OWN_SPIN_NS after the last thing it moved, while its CPU looks
 * free, it yields where it would sleep, park or nap (`struct awake`).
 * Sleep is announced in `sleeping` before the last look at the command
 * queue, and producers look at it after pushing (both seq_cst): either
 * the sleeper sees the command or the producer writes the eventfd.
 *
 * A progress thread with a CPU of its own (placement.h: the caller's
 * thread was moved off it) has nobody to give that CPU to, and every
 * sleep costs a wake-up that the next post or arrival waits for (tens of
 * microseconds in a VM, and a hand-over write of ~1.2 us per post).  So
 * it neither naps after a wait nor parks at once while callers wait, and
 * keeps turning for OWN_SPIN_NS after the last thing moved - with
 * operations pending or not - before it sleeps: a post is then picked
 * up from the queue at the next turn, with no system call.  Only just
 * after a caller drove and left nothing pending does it keep its hands
 * off the drive right (OWN_GRACE_NS), for that caller's next call.
 *
 * Inline mode: no thread, no lock; tide_wait/tide_test drive. */
#include "engine/clock.h"
#include "engine/context.h"
#include "engine/log.h"
#include "engine/trace.h"
#include "engine/waiter.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STOP_DRAIN_NS (2 * TIDE_NS_PER_S) /* finalize waits this long for the kernel */
#define COMMANDS_PER_TURN 1024
/* A caller that just left tide_wait usually posts and waits again within
 * microseconds (a round trip, the next step of a loop): the progress
 * thread leaves it the reactor for this long before taking over, so the
 * two don't fight over the lock. */
#define GRACE_NS (200 * TIDE_NS_PER_US)
/* While callers wait, the parked progress thread looks up after
 * GRACE_NS.  If waits keep ending between two looks (a loop of short
 * waits, which drives everything itself), it looks twice as rarely each
 * time, up to LOOK_MAX_NS: every look wakes a thread on cores the callers
 * are using, and looking every 200 us made a thread-mode 2-rank 8 B
 * allreduce 1.3-2x slower than never looking (measured here,
 * interleaved runs).  During one long wait it keeps looking every
 * GRACE_NS: the caller may come out into compute with work pending, and
 * looking late then cost 4-rank 4 MiB allreduce half its overlap with
 * busy compute.  A caller that leaves with operations pending wakes the
 * thread at once (tide__progress_wait_end), and so does a post handed
 * over once nobody waits (tide__progress_submit, `parked`). */
#define LOOK_MAX_NS (2 * TIDE_NS_PER_MS)
#define NAP_NS (50 * TIDE_NS_PER_US)       /* while a caller drives briefly */
#define SLEEP_CAP_NS (20 * TIDE_NS_PER_MS) /* deadlines armed by callers fire this late at most */
/* A progress thread on a CPU of its own stays awake this long after the
 * last thing moved: longer than the gaps between a training step's
 * collectives, short enough that an idle job sleeps within moments. */
#define OWN_SPIN_NS (2 * TIDE_NS_PER_MS)
/* ...but it leaves the drive right alone for this long after a caller
 * drove, if that caller left nothing pending: a loop of small blocking
 * calls would otherwise find it holding the lock at every call and wait
 * for it to notice and let go (a turn and a hand-over of the lock's
 * line each time). */
#define OWN_GRACE_NS (50 * TIDE_NS_PER_US)

static void wake_arm(struct tide__ctx *ctx)
{
    /* Without it a sleeping reactor still wakes at its next deadline, at
     * most SLEEP_CAP_NS later: slow, not stuck. */
    if (tide__reactor_read(&ctx->reactor, &ctx->wake_uop, ctx->wake_fd, &ctx->wake_buf,
                           sizeof ctx->wake_buf))
        tide__log(TIDE_LOG_WARN, ctx->rank, "out of memory arming the reactor's wake-up");
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

void tide__ctx_abort(struct tide__ctx *ctx, int err, const char *why)
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
        tide__ctx_abort(ctx, TIDE_EABORTED, "aborted by tide_comm_abort");
        signal_handled(cmd);
        return;
    case TIDE_CMD_STOP:
        tide__ctx_abort(ctx, TIDE_EABORTED, "the communicator was finalized");
        ctx->stopping = true;
        /* handled is signalled by the loop once the kernel let go */
        return;
    }
}

/* Run queued commands, oldest first, at most `limit`. */
static int run_queued(struct tide__ctx *ctx, int limit)
{
    int n = 0;
    struct tide__mpsc_node *node;
    while (n < limit && (node = tide__mpsc_pop(&ctx->cmds))) {
        struct tide__cmd *cmd = container_of(node, struct tide__cmd, node);
        if (cmd->kind == TIDE_CMD_STOP)
            ctx->stop_cmd = cmd;
        run_command(ctx, cmd);
        n++;
    }
    return n;
}

/* Connections whose receive is not armed in the kernel: see
 * transports/tcp/tcp_recv.c for why a spinning driver reads them itself. */
static int poll_transport(struct tide__ctx *ctx)
{
    return ctx->tp->ops->poll ? ctx->tp->ops->poll(ctx->tp) : 0;
}

static void arm_transport(struct tide__ctx *ctx)
{
    if (ctx->tp->ops->arm)
        ctx->tp->ops->arm(ctx->tp);
}

int tide__progress_turn(struct tide__ctx *ctx, uint64_t wait_ns)
{
    int n = run_queued(ctx, COMMANDS_PER_TURN);
    n += tide__timer_heap_expire(ctx->timers, tide__now_ns());
    n += tide__ctx_deliver(ctx);
    n += poll_transport(ctx);
    if (n)
        wait_ns = 0; /* new submissions to push out; don't sleep first */
    else if (wait_ns)
        arm_transport(ctx); /* arrivals must wake the ring we sleep in */
    n += tide__reactor_run(&ctx->reactor, wait_ns);
    n += tide__ctx_deliver(ctx);
    return n;
}

uint64_t tide__progress_wait_budget(struct tide__ctx *ctx, uint64_t limit_ns)
{
    struct tide__timer *t = tide__timer_heap_peek(ctx->timers);
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
    int rc = tide__reactor_init(&ctx->reactor, ctx->reactor.ops, !ctx->inline_mode,
                                ctx->init_err, sizeof ctx->init_err);
    if (rc)
        return rc;
    ctx->wake_uop.complete = wake_complete;
    wake_arm(ctx);
    ctx->tp->ops->start(ctx->tp);
    tide__log(TIDE_LOG_DEBUG, ctx->rank, "reactor ready (%s, %s progress)",
              ctx->reactor.flags_name, ctx->inline_mode ? "inline" : "thread");
    return 0;
}

/* The drive right is one word, not a pthread mutex: it is taken and let
 * go on every blocking call's path, where glibc's mutex cost two library
 * calls with their checks, and letting go three locked instructions (the
 * work_pending store, the unlock, the fence the sleepers' check needs)
 * where one exchange now does.  Nobody blocks on it: a thread that finds
 * it held spins, yields, naps or sleeps on its own futex word (wait.c,
 * below). */
bool tide__progress_try_drive(struct tide__ctx *ctx)
{
    if (ctx->inline_mode)
        return true;
    return !atomic_load_explicit(&ctx->drive_lock, memory_order_relaxed) &&
           !atomic_exchange_explicit(&ctx->drive_lock, 1, memory_order_acquire);
}

/* Let go of the drive right; the exchange (sequentially consistent)
 * also orders the caller's next loads after the store, as the sleepers'
 * check needs (tide__progress_release). */
static void let_go(struct tide__ctx *ctx)
{
    atomic_exchange(&ctx->drive_lock, 0);
}

void tide__progress_release(struct tide__ctx *ctx)
{
    if (ctx->inline_mode)
        return;
    /* Whoever drives next may be asleep: leave nothing half done.  A
     * progress thread asleep in the ring looks at nothing until an
     * arrival wakes it, so then every connection gets a kernel receive;
     * otherwise it takes over within GRACE_NS and reads them itself. */
    tide__ctx_deliver(ctx);
    if (atomic_load(&ctx->sleeping))
        arm_transport(ctx);
    tide__reactor_flush(&ctx->reactor);
    /* Whoever takes the drive right next sees it (let_go releases). */
    atomic_store_explicit(&ctx->work_pending, ctx->nactive || !tide__mpsc_empty(&ctx->cmds),
                          memory_order_release);
    let_go(ctx);
    /* A caller that found the lock held sleeps (wait.c): it drives now. */
    if (atomic_load(&ctx->sleepers))
        tide__wake_sleepers(ctx);
}

void tide__progress_wait_begin(struct tide__ctx *ctx)
{
    atomic_fetch_add(&ctx->waiters, 1);
}

/* The wait ended at now (or TIDE__WAIT_JUST_ENDED): the progress
 * thread's grace counts from it.  A release store, not a sequentially
 * consistent one (an xchg on x86): the progress thread only reads it,
 * to time its grace and its looks, and the fetch_sub after it keeps it
 * before the count's fall, which is what wakes that thread. */
static void wait_end_at(struct tide__ctx *ctx, uint64_t now)
{
    atomic_store_explicit(&ctx->last_wait_ns, now, memory_order_release);
    if (atomic_fetch_sub(&ctx->waiters, 1) == 1 && atomic_load(&ctx->work_pending))
        tide__futex_wake(&ctx->waiters);
}

void tide__progress_wait_end(struct tide__ctx *ctx)
{
    wait_end_at(ctx, tide__now_ns());
}

void tide__progress_post(struct tide__ctx *ctx, struct tide__cmd *cmd, bool here)
{
    if ((!ctx->inline_mode && !here) || !tide__progress_try_drive(ctx)) {
        tide__progress_submit(ctx, cmd);
        return;
    }
    /* What this thread queued while someone else drove must start first:
     * operations start in the order they were posted. */
    run_queued(ctx, INT_MAX);
    run_command(ctx, cmd);
    tide__progress_release(ctx);
}

bool tide__progress_enter(struct tide__ctx *ctx, uint64_t patience_ns, bool *announced)
{
    *announced = false;
    if (ctx->drive != &tide__drive_reactor)
        return false;
    uint64_t until = 0;
    while (!tide__progress_try_drive(ctx)) {
        if (!*announced) { /* the progress thread lets go at its next turn */
            tide__progress_wait_begin(ctx);
            *announced = true;
        }
        uint64_t now = tide__now_ns();
        if (!until) {
            until = now + patience_ns;
        } else if (now >= until) {
            tide__progress_wait_end(ctx);
            *announced = false;
            return false;
        }
        tide__spin_yield();
    }
    run_queued(ctx, INT_MAX);
    return true;
}

void tide__progress_announce(struct tide__ctx *ctx, bool *announced)
{
    /* A progress thread on our CPU parks while we are announced; else it
     * wakes every NAP_NS to find the lock held, on the CPU we wait on.
     * Not before we wait: most direct calls find their peers on time, and
     * with the count's two read-modify-writes on every call a 2-rank 8 B
     * broadcast took 0.33 us against 0.31 (AMD EPYC VM, 2026-11-27). */
    if (*announced || ctx->inline_mode || ctx->place.own)
        return;
    tide__progress_wait_begin(ctx);
    *announced = true;
}

void tide__progress_leave(struct tide__ctx *ctx, bool announced, uint64_t now)
{
    tide__progress_release(ctx);
    /* As a wait's end (see GRACE_NS), at the time the caller read, or
     * else "just now" for the progress thread to time (last_wait): a
     * clock read costs 25-45 ns in a VM, a sixth of a 2-rank 8 B
     * broadcast.  The progress thread only reads it: no order with
     * anything else.  A caller that announced itself gets no clock read
     * either: a lock-step 2-rank all-reduce waits a moment for its peer
     * at nearly every call (a probe on wait_end_at: 418,464 calls in
     * 410,000 collectives), and its waits are too short to reach
     * await's first clock read.  2 ranks, interleaved rounds, us a call,
     * with the read and an xchg for the store, and without (Open MPI
     * vader): all-reduce 16 B 0.26 -> 0.23 (0.25), all-gather 32 B 0.25
     * -> 0.21 (0.23), reduce-scatter 32 B 0.25 -> 0.23 (0.29), in the
     * VM's fastest stretch; all-gather 16 B 0.34 -> 0.27 (0.50) in its
     * usual one. */
    uint64_t ended = now ? now : TIDE__WAIT_JUST_ENDED;
    if (announced)
        wait_end_at(ctx, ended);
    else if (!ctx->inline_mode)
        atomic_store_explicit(&ctx->last_wait_ns, ended, memory_order_release);
}

/* Spinning past TIDE_SPIN_US pays while nobody else wants this CPU (the
 * caller sleeps, the math runs on an accelerator, the peer is a moment
 * late): a yield that comes straight back says so, and a sleep would
 * cost a wake-up when the news comes - tens of microseconds in a VM, up
 * to 190 us seen here.  Measured (2 ranks, a core each, sleeping
 * compute, 256 KiB allreduce over shared memory): ranks that slept
 * between the two rounds woke 50-190 us late now and then, and 5-30 % of
 * the operation did not hide.  A yield that comes back late means
 * someone took the CPU (a computing caller, another rank); two in a row,
 * since a VM's own stalls make one now and then, end the spin. */
#define YIELD_TAKEN_NS (20 * TIDE_NS_PER_US)

struct spin_probe {
    int late; /* yields in a row that came back late */
};

/* Yields once; whether this CPU still looks free. */
static bool cpu_looks_free(struct spin_probe *p)
{
    uint64_t t = tide__now_ns();
    tide__spin_yield();
    p->late = tide__now_ns() - t > YIELD_TAKEN_NS ? p->late + 1 : 0;
    return p->late < 2;
}

/* The progress thread stays awake for OWN_SPIN_NS after the last thing
 * it moved, while the CPU looks free: where it would sleep (in the ring
 * with nothing pending, parked while a caller waits, napping after a
 * wait, dozing while a caller drives) it yields instead.  The next post
 * then lands in the queue with no system call: waking a sleeping thread
 * took 2.5 of a post's 3.0 us in this VM (a futex wake; 0.5 without it),
 * and a caller back from computing usually waits, makes a small blocking
 * call (a barrier) and posts the next operation, whose post paid that
 * wake-up every time: 256 KiB all-reduce over shared memory, sleeping
 * compute, hid 87-91 % of itself (medians), short of 95.  A computing
 * caller on our CPU makes the yields come back late, and we sleep as
 * before; a loop of small blocking calls, which the progress thread
 * never drives, keeps it asleep as before. */
struct awake {
    uint64_t moved_ns; /* when the progress thread last moved something */
    struct spin_probe probe;
};

/* Yields once, if still awake; whether it did. */
static bool stay_awake(struct awake *a)
{
    return tide__now_ns() - a->moved_ns < OWN_SPIN_NS && cpu_looks_free(&a->probe);
}

/* Block in the ring (holding the drive right) up to wait_ns, unless a
 * command is already queued.  `sleeping` counts, not flags: the progress
 * thread may be asleep in the ring too (it let go of the lock first),
 * and a caller that cleared a flag on its way out left it asleep
 * unannounced: the next release then skipped arm() and posts skipped
 * the wake-up, so a handed-over operation waited for the sleep's cap
 * (SLEEP_CAP_NS).  Seen here as whole 20 ms stalls: a 64 MiB overlap run
 * at 0 % (both ranks' operations waiting to start). */
static void block_in_ring(struct tide__ctx *ctx, uint64_t wait_ns)
{
    atomic_fetch_add(&ctx->sleeping, 1);
    if (tide__mpsc_empty(&ctx->cmds))
        tide__progress_turn(ctx, tide__progress_wait_budget(ctx, wait_ns));
    atomic_fetch_sub(&ctx->sleeping, 1);
}

/* The spin is measured from the last turn that moved something, not
 * from the start of the wait: a large message arrives over hundreds of
 * microseconds, and a waiter that went to sleep halfway let the kernel
 * finish it as a blocking receive does, in bursts after each wake-up.
 * Measured here (interleaved runs): 2-rank 2 MiB broadcast 469 -> 323 us,
 * 4-rank small broadcasts 14-19 -> 6-10 us (a stream of arrivals kept
 * putting receivers to sleep); a raw socket receiver shows the same
 * (2 MiB one way, 310 us spinning, 470 us blocking). */
void tide__progress_drive_until(struct tide__ctx *ctx, tide_req *req, uint64_t deadline,
                                uint64_t *spin_end)
{
    struct spin_probe probe = {0};
    for (;;) {
        int moved = tide__progress_turn(ctx, 0);
        if (tide__req_is_done(req))
            return;
        uint64_t now = tide__now_ns();
        if (now >= deadline)
            return;
        if (moved && now + ctx->spin_ns > *spin_end)
            *spin_end = now + ctx->spin_ns;
        if (now < *spin_end) {
            if (!moved && ctx->spin_yields)
                tide__spin_yield(); /* the peer we wait for may need this core */
            continue;
        }
        /* Past the spin, on while nobody else wants the CPU (see
         * cpu_looks_free): a sleep's wake-up is what a peer a moment late
         * would cost us. */
        if (now - (*spin_end - ctx->spin_ns) < OWN_SPIN_NS && cpu_looks_free(&probe))
            continue;
        uint64_t left = deadline == UINT64_MAX ? UINT64_MAX : deadline - now;
        /* Bounded so other waiters get a turn at driving now and then. */
        block_in_ring(ctx, ctx->inline_mode || left < SLEEP_CAP_NS ? left : SLEEP_CAP_NS);
        if (!ctx->inline_mode)
            return;
    }
}

/* Progress thread, holding the lock: turn while there is work and nobody
 * waits, spinning while operations are pending: TIDE_SPIN_US, then on up
 * to OWN_SPIN_NS while the CPU looks free (above); on a CPU of its own,
 * OWN_SPIN_NS whether operations pend or not.  Returns true when it
 * stopped for want of work, false when a caller came to wait (or the
 * context stops): that caller drives now, and may be gone again by the
 * time we look, leaving operations pending that a sleep would stall. */
static bool drive_while_needed(struct tide__ctx *ctx, struct awake *a)
{
    bool own = ctx->place.own;
    uint64_t since = tide__now_ns(); /* or the last turn that moved something */
    while (!ctx->stopping && !atomic_load(&ctx->waiters)) {
        int moved = tide__progress_turn(ctx, 0);
        uint64_t now = tide__now_ns();
        if (moved) {
            a->moved_ns = since = now;
            continue;
        }
        if (now - since >= OWN_SPIN_NS)
            return true;
        if (own || (ctx->nactive && now - since < ctx->spin_ns))
            tide__spin_yield(); /* a computing caller (or a neighbour's progress) may need it */
        else if (ctx->nactive ? !cpu_looks_free(&a->probe) : !stay_awake(a))
            return true;
    }
    return false;
}

/* Progress thread, holding the lock, idle: let go and sleep in the ring. */
static void release_and_sleep(struct tide__ctx *ctx)
{
    uint64_t nap = tide__progress_wait_budget(ctx, SLEEP_CAP_NS);
    atomic_fetch_add(&ctx->sleeping, 1);
    bool commands = !tide__mpsc_empty(&ctx->cmds);
    tide__progress_release(ctx);
    if (!commands)
        tide__reactor_sleep(&ctx->reactor, nap);
    atomic_fetch_sub(&ctx->sleeping, 1);
}

/* The lock is busy: its holder runs the queue, and a post cannot free
 * it, so a plain sleep.  (A futex nap would return at once while posts
 * wait in the queue, and spin against the holder.) */
static void nap_while_busy(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)NAP_NS};
    nanosleep(&ts, NULL);
}

/* Sleep in user space (a futex, so that a post can cut it short). */
static void nap(struct tide__ctx *ctx, uint64_t ns)
{
    atomic_store(&ctx->napping, 1);
    if (tide__mpsc_empty(&ctx->cmds))
        tide__futex_wait(&ctx->napping, 1, ns);
    atomic_store(&ctx->napping, 0);
}

/* How often the parked progress thread looks up: see LOOK_MAX_NS. */
struct lookout {
    uint64_t every_ns;    /* sleep this long while a caller waits */
    uint64_t wait_end_ns; /* last_wait_ns at the previous look */
};

/* When a caller last left a wait.  One that left TIDE__WAIT_JUST_ENDED
 * left it after our last look: the first look to see it stamps it with
 * its own time, later than the caller's, so the grace it gets only grows,
 * by at most the time between two looks. */
static uint64_t last_wait(struct tide__ctx *ctx)
{
    uint64_t t = atomic_load(&ctx->last_wait_ns);
    if (t != TIDE__WAIT_JUST_ENDED)
        return t;
    uint64_t now = tide__now_ns();
    if (atomic_compare_exchange_strong(&ctx->last_wait_ns, &t, now))
        return now;
    return t == TIDE__WAIT_JUST_ENDED ? now : t; /* a caller stamped it meanwhile */
}

static void lookout_reset(struct lookout *l)
{
    l->every_ns = GRACE_NS;
}

static void lookout_update(struct lookout *l, uint64_t wait_end_ns)
{
    bool short_waits = wait_end_ns != l->wait_end_ns;
    l->wait_end_ns = wait_end_ns;
    if (!short_waits)
        l->every_ns = GRACE_NS;
    else if (l->every_ns < LOOK_MAX_NS / 2)
        l->every_ns *= 2;
    else
        l->every_ns = LOOK_MAX_NS;
}

/* On a CPU of our own: wait for the callers to leave by looking, up to
 * OWN_SPIN_NS, so that one leaving with work pending needs no wake-up.
 * Returns whether they left. */
static bool outwait_callers(struct tide__ctx *ctx)
{
    uint64_t until = tide__now_ns() + OWN_SPIN_NS;
    while (atomic_load(&ctx->waiters) && tide__now_ns() < until)
        tide__spin_yield();
    return atomic_load(&ctx->waiters) == 0;
}

/* Callers drive while they wait, and for GRACE_NS after: stay out of
 * their way.  Sleeps and returns true, or returns false when the progress
 * thread should drive. */
static bool leave_to_callers(struct tide__ctx *ctx, struct lookout *look, struct awake *a)
{
    uint32_t w = atomic_load(&ctx->waiters);
    if (w && ctx->place.own && outwait_callers(ctx))
        return true;
    if (w && stay_awake(a))
        return true;
    if (w) {
        atomic_store(&ctx->parked, true);
        tide__futex_wait(&ctx->waiters, w, look->every_ns);
        atomic_store(&ctx->parked, false);
        lookout_update(look, last_wait(ctx));
        return true;
    }
    uint64_t wait_end = last_wait(ctx);
    uint64_t now = tide__now_ns();
    uint64_t since = now > wait_end ? now - wait_end : 0;
    bool idle = !atomic_load(&ctx->work_pending) && tide__mpsc_empty(&ctx->cmds);
    if (ctx->place.own && idle && since < OWN_GRACE_NS) {
        tide__spin_yield(); /* its CPU: nobody else wants it */
        return true;
    }
    if (since >= GRACE_NS || !tide__mpsc_empty(&ctx->cmds) || ctx->place.own)
        return false; /* a post with nobody waiting is ours to start */
    if (!stay_awake(a))
        nap(ctx, GRACE_NS - since);
    return true;
}

/* The progress thread runs as SCHED_BATCH: same share of the CPU, but
 * waking it (a post, an arrival) no longer preempts the thread that is
 * running on that core, usually the caller that just posted.  With 2
 * cores and 4 ranks a trainer that handed a reduce-scatter over was
 * often switched out for its own progress thread for 1-3 ms before its
 * next layer; the ranks drifted apart by that much per step and the
 * step's last collectives waited for the slowest (4-rank FSDP, sleep
 * compute: step 208.8 -> 205.5 ms, time outside compute and waits 3.1 ->
 * 1.2 ms; 2 ranks 203.8 -> 199.9 ms).  Not fatal if refused. */
static void no_wakeup_preemption(struct tide__ctx *ctx)
{
    struct sched_param sp = {0};
    int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    if (rc)
        tide__log(TIDE_LOG_DEBUG, ctx->rank, "progress thread stays SCHED_OTHER: %s",
                  strerror(rc));
}

/* Go to the CPUs placement chose, if any.  Not fatal if refused (a
 * cpuset that excludes them): we then share the caller's. */
static void go_to_place(struct tide__ctx *ctx)
{
    struct tide__placement *p = &ctx->place;
    if (!CPU_COUNT(&p->progress))
        return;
    int rc = pthread_setaffinity_np(pthread_self(), sizeof p->progress, &p->progress);
    if (!rc)
        return;
    p->own = false;
    tide__log(TIDE_LOG_INFO, ctx->rank, "progress thread stays on the caller's CPUs: cannot "
              "move it to the ones chosen: %s", strerror(rc));
}

static void *progress_main(void *arg)
{
    struct tide__ctx *ctx = arg;
    if (ctx->trace)
        ctx->trace->progress_tid = tide__trace_tid();
    go_to_place(ctx);
    no_wakeup_preemption(ctx);
    while (!tide__progress_try_drive(ctx)) /* the caller's init waits: not for long */
        tide__spin_yield();
    ctx->init_rc = setup_ring(ctx);
    let_go(ctx);
    atomic_store(&ctx->init_done, 1);
    tide__futex_wake(&ctx->init_done);
    if (ctx->init_rc)
        return NULL;

    struct lookout look = {GRACE_NS, 0};
    struct awake awake = {0};
    for (;;) {
        if (leave_to_callers(ctx, &look, &awake))
            continue;
        if (!tide__progress_try_drive(ctx)) {
            if (!stay_awake(&awake))
                nap_while_busy();
            continue;
        }
        lookout_reset(&look);
        bool idle = drive_while_needed(ctx, &awake);
        if (ctx->stopping)
            break;
        if (idle)
            release_and_sleep(ctx);
        else
            tide__progress_release(ctx);
    }
    drain(ctx);
    tide__reactor_fini(&ctx->reactor);
    let_go(ctx);
    if (ctx->stop_cmd)
        signal_handled(ctx->stop_cmd);
    return NULL;
}

/* Decide where the progress thread runs and move the caller off its
 * CPUs (the thread moves itself as it starts).  A caller that cannot be
 * moved leaves the thread sharing its CPUs, as if none had been chosen. */
static void place_threads(struct tide__ctx *ctx)
{
    struct tide__placement_in in = {.setting = ctx->cfg.progress_cpus,
                                    .local_size = ctx->cfg.local_size,
                                    .local_rank = ctx->cfg.local_rank};
    struct tide__placement *p = &ctx->place;
    tide__placement_probe(&in);
    bool ok = tide__placement_decide(&in, p) == 0; /* tide_init checked the setting */
    p->caller_tid = gettid();
    p->caller_was = in.mask;
    if (ok && CPU_COUNT(&p->caller) && sched_setaffinity(0, sizeof p->caller, &p->caller) != 0) {
        tide__log(TIDE_LOG_INFO, ctx->rank, "progress thread not placed: cannot move the "
                  "caller's thread off its CPUs: %s", strerror(errno));
        ok = false;
    }
    if (!ok) { /* unplaced: the thread shares the caller's CPUs */
        CPU_ZERO(&p->progress);
        CPU_ZERO(&p->caller);
        p->own = false;
        return;
    }
    tide__log(TIDE_LOG_INFO, ctx->rank, "%s", p->why);
}

/* tide_finalize: the thread that called tide_init gets its CPUs back, if
 * it is the one finalizing and still has the mask we gave it (a program
 * that computes on after tide should not stay off the progress CPUs). */
static void give_back_cpus(struct tide__ctx *ctx)
{
    struct tide__placement *p = &ctx->place;
    cpu_set_t now;
    if (!CPU_COUNT(&p->caller) || gettid() != p->caller_tid ||
        sched_getaffinity(0, sizeof now, &now) != 0 || !CPU_EQUAL(&now, &p->caller))
        return;
    if (sched_setaffinity(0, sizeof p->caller_was, &p->caller_was) != 0)
        tide__log(TIDE_LOG_INFO, ctx->rank, "cannot give the caller's thread its CPUs back: %s",
                  strerror(errno));
}

int tide__progress_start(struct tide__ctx *ctx)
{
    if (ctx->inline_mode)
        return setup_ring(ctx);

    place_threads(ctx);
    int rc = pthread_create(&ctx->thread, NULL, progress_main, ctx);
    if (rc) {
        snprintf(ctx->init_err, sizeof ctx->init_err, "cannot start the progress thread: %s",
                 strerror(rc));
        give_back_cpus(ctx); /* tide_init fails: the caller keeps what it had */
        return TIDE_ENOMEM;
    }
    ctx->thread_started = true;
    while (!atomic_load(&ctx->init_done))
        tide__futex_wait(&ctx->init_done, 0, TIDE_NS_PER_S);
    if (ctx->init_rc) {
        pthread_join(ctx->thread, NULL);
        ctx->thread_started = false;
        give_back_cpus(ctx);
    }
    return ctx->init_rc;
}

void tide__progress_submit(struct tide__ctx *ctx, struct tide__cmd *cmd)
{
    tide__mpsc_push(&ctx->cmds, &cmd->node);
    if (atomic_load(&ctx->sleeping)) {
        /* Written as long as anyone sleeps in the ring: a second post
         * before the sleeper woke writes again, harmlessly. */
        uint64_t one = 1;
        ssize_t w = write(ctx->wake_fd, &one, sizeof one);
        (void)w; /* an eventfd write fails only on counter overflow: it is awake then */
    } else if (atomic_exchange(&ctx->napping, 0)) {
        tide__futex_wake(&ctx->napping);
    } else {
        /* Parked while callers wait, it looks up only every LOOK_MAX_NS
         * or so.  A waiter runs the queue at its next turn, and the last
         * one out wakes the thread on work_pending; with nobody waiting,
         * wake it here.  Otherwise this post would start that late (a
         * 4-rank FSDP trace: the next step's first all-gather, posted
         * after the optimizer step, started 0.8-1 ms after its post). */
        atomic_store(&ctx->work_pending, true);
        if (atomic_load(&ctx->waiters) == 0 && atomic_exchange(&ctx->parked, false))
            tide__futex_wake(&ctx->waiters);
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
    tide__futex_wake(&ctx->waiters); /* parked, it might look only LOOK_MAX_NS later */
    while (!atomic_load(&cmd.handled))
        tide__futex_wait(&cmd.handled, 0, TIDE_NS_PER_S);
}

void tide__progress_stop(struct tide__ctx *ctx)
{
    if (ctx->inline_mode) {
        if (!ctx->reactor.ready)
            return;
        tide__ctx_abort(ctx, TIDE_EABORTED, "the communicator was finalized");
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
    give_back_cpus(ctx);
}

static uint64_t real_now(const struct tide__ctx *ctx)
{
    (void)ctx;
    return tide__now_ns();
}

/* One pass, only if the drive right is free: tide_test never blocks. */
static void poke(struct tide__ctx *ctx, uint64_t wait_ns)
{
    if (!tide__progress_try_drive(ctx))
        return;
    tide__progress_turn(ctx, wait_ns);
    tide__progress_release(ctx);
}

const struct tide__drive_ops tide__drive_reactor = {
    .name = "reactor",
    .records = true,
    .now = real_now,
    .start = tide__progress_start,
    .stop = tide__progress_stop,
    .wait = tide__wait_reactor,
    .poke = poke,
};
