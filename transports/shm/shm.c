/* shm.c - the shared-memory transport's face: creating it, posting and
 * withdrawing messages, the progress pass (poll) and the sleep (arm),
 * doorbells, losing a peer, aborting, tearing down.  The halves of a
 * pair live in shm_send.c and shm_recv.c, the setup in shm_setup.c. */
#include "transports/shm/shm.h"
#include "transports/shm/shm_peer.h"
#include "transports/stage_slots.h"
#include "engine/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* Unexpected messages held before we stop reading rings (as TCP). */
#define DEFAULT_UX_LIMIT ((size_t)1 << 30)

static struct tide__shm *shm_of(struct tide__transport *base)
{
    return container_of(base, struct tide__shm, base);
}

static bool served(const struct shm_peer *c)
{
    return c->fd >= 0;
}

void shm_peer_lost(struct shm_peer *c, const char *fmt, ...)
{
    if (c->lost)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->lost_buf, sizeof c->lost_buf, fmt, ap);
    va_end(ap);
    c->lost = c->lost_buf;
    /* A reader still copying out of our single-copy sends learns, after
     * its copy, that we gave them back: it must not believe the bytes. */
    if (c->out)
        atomic_store(&c->out->writer_gone, 1);
    /* A peer that leaves while we expect nothing from it has most likely
     * just finished (every normal finalize ends so): said at debug level
     * only; a loss that fails work deserves a warning. */
    bool pending = c->sq.head || c->rx.mq.posted.head || c->rx.in_frame;
    int level = pending && !c->tp->aborting ? TIDE_LOG_WARN : TIDE_LOG_DEBUG;
    tide__log(level, c->tp->rank, "lost rank %d: %s", c->peer, c->lost);
    shutdown(c->fd, SHUT_RDWR); /* our doorbell receive comes back at once */
    shm_send_fail_all(c);
    shm_recv_lost(c);
    /* A watch fails only if it still waits for a lost rank: a peer that
     * published, read ours and finished may be gone before we look, and
     * its flags stay readable in our mapping (as a frame it sent before
     * closing is still received). */
    shm_watch_poll(c->tp);
}

void shm_ring_doorbell(struct shm_peer *c)
{
    /* Pairs with arm(): we published to the ring, it published
     * `sleeping`; after the fence one of us sees the other. */
    atomic_thread_fence(memory_order_seq_cst);
    shm_ring_doorbell_fenced(c);
}

void shm_ring_doorbell_fenced(struct shm_peer *c)
{
    if (!atomic_load_explicit(&c->peer_hdr->sleeping, memory_order_relaxed) ||
        !atomic_exchange(&c->peer_hdr->sleeping, 0))
        return; /* awake, or another writer rang already */
    static const uint8_t bell = 1;
    /* EAGAIN: bells already wait unread there; EPIPE and the like: the
     * loss shows on our own receive from that socket. */
    (void)send(c->fd, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void post_bell(struct shm_peer *c)
{
    struct tide__reactor *r = &c->tp->base.ctx->reactor;
    if (tide__reactor_recv(r, &c->bell_uop, c->fd, c->bell_buf, sizeof c->bell_buf, 0)) {
        shm_peer_lost(c, "out of memory arming a receive from rank %d", c->peer);
        return;
    }
    c->bell_busy = true;
    c->tp->kernel_ops++;
}

/* Bytes on the pair's socket are only ever doorbells: the rings say what
 * arrived, and the next pass reads them.  The end of the stream is the
 * peer's end.  -ECANCELED is not: io_uring cancels what a thread armed
 * when that thread exits, and any caller thread may have driven the
 * reactor in tide_wait (thread pools come and go); nothing of ours
 * cancels a doorbell, so it is armed again. */
static void bell_complete(struct tide__uop *uop, int res)
{
    struct shm_peer *c = container_of(uop, struct shm_peer, bell_uop);
    c->bell_busy = false;
    c->tp->kernel_ops--;
    bool again = res > 0 || res == -EAGAIN || res == -EINTR || res == -ECANCELED;
    if (again && !c->lost && !c->tp->aborting) {
        post_bell(c);
        return;
    }
    if (c->lost)
        return;
    c->draining = true;
    shm_recv_progress(c); /* what it wrote before it died still counts */
    shm_peer_lost(c, res == 0 ? "rank %d closed the connection (exited or was killed)"
                              : "receiving from rank %d failed",
                  c->peer);
}

static void post_wake(struct tide__shm *tp)
{
    if (tide__reactor_read(&tp->base.ctx->reactor, &tp->wake_uop, tp->wake_fd, &tp->wake_buf,
                           sizeof tp->wake_buf)) {
        tide__log(TIDE_LOG_WARN, tp->rank, "shm: out of memory arming the wake-up read");
        return;
    }
    tp->wake_busy = true;
    tp->kernel_ops++;
}

static void wake_complete(struct tide__uop *uop, int res)
{
    struct tide__shm *tp = container_of(uop, struct tide__shm, wake_uop);
    (void)res;
    tp->wake_busy = false;
    tp->kernel_ops--;
    if (!tp->aborting)
        post_wake(tp);
}

static void wake_self(struct tide__shm *tp)
{
    uint64_t one = 1;
    (void)write(tp->wake_fd, &one, sizeof one); /* a full counter wakes all the same */
}

static void post(struct tide__transport *base, tide__msg *m)
{
    if (m->dir == TIDE_MSG_WATCH) {
        shm_watch_post(shm_of(base), m);
        return;
    }
    struct shm_peer *c = &shm_of(base)->peers[m->peer];
    if (m->dir == TIDE_MSG_SEND)
        shm_send_post(c, m);
    else
        shm_recv_post(c, m);
}

static int withdraw(struct tide__transport *base, tide__msg *m, int err)
{
    if (m->dir == TIDE_MSG_WATCH)
        return shm_watch_withdraw(shm_of(base), m);
    struct shm_peer *c = &shm_of(base)->peers[m->peer];
    if (m->dir == TIDE_MSG_RECV)
        return shm_recv_withdraw(c, m);
    return shm_send_withdraw(c, m, err == TIDE_ETIMEDOUT);
}

static const char *peer_reason(struct tide__transport *base, int peer)
{
    struct tide__shm *tp = shm_of(base);
    if (peer < 0 || peer >= tp->size)
        return NULL;
    return tp->peers[peer].lost;
}

static void start(struct tide__transport *base)
{
    struct tide__shm *tp = shm_of(base);
    for (int p = 0; p < tp->size; p++)
        if (served(&tp->peers[p]))
            post_bell(&tp->peers[p]);
    post_wake(tp);
}

static void abort_all(struct tide__transport *base, int err)
{
    struct tide__shm *tp = shm_of(base);
    tp->aborting = true;
    for (int p = 0; p < tp->size; p++)
        if (served(&tp->peers[p]))
            shm_peer_lost(&tp->peers[p], "%s", tide_strerror(err));
    shm_watch_fail_all(tp, err);
    wake_self(tp); /* the wake-up read comes back, and is not armed again */
}

/* A pass of the driver: read every ring, write what waits. */
static int poll_all(struct tide__transport *base)
{
    struct tide__shm *tp = shm_of(base);
    int n = 0;
    if (!tp->hdr)
        return 0; /* no segment: no pair of ours */
    if (atomic_load_explicit(&tp->hdr->sleeping, memory_order_relaxed))
        atomic_store(&tp->hdr->sleeping, 0); /* awake: writers need not ring */
    for (int p = 0; p < tp->size; p++) {
        struct shm_peer *c = &tp->peers[p];
        if (!served(c))
            continue;
        n += shm_recv_progress(c);
        n += shm_send_progress(c);
    }
    if (tp->watches.head)
        n += shm_watch_poll(tp);
    return n;
}

/* The driver is about to sleep in the reactor: from now on writers ring
 * our doorbell; whatever arrived before they could see that, we wake
 * ourselves for. */
static void arm(struct tide__transport *base)
{
    struct tide__shm *tp = shm_of(base);
    if (!tp->hdr)
        return;
    for (int p = 0; p < tp->size; p++) /* acks to wait for: ask to be told */
        if (served(&tp->peers[p]) && tp->peers[p].awaiting.head)
            shm_ring_want_ack(tp->peers[p].out);
    atomic_store(&tp->hdr->sleeping, 1);
    atomic_thread_fence(memory_order_seq_cst);
    for (int p = 0; p < tp->size; p++) {
        struct shm_peer *c = &tp->peers[p];
        if (!served(c))
            continue;
        if ((!c->lost && !c->parked && shm_ring_used(c->in)) || shm_send_ready(c)) {
            wake_self(tp);
            return;
        }
    }
    if (tp->watches.head && shm_watch_any_ready(tp))
        wake_self(tp);
}

/* ---- the staging area (transport.h, shm_peer.h) ---- */

static uint8_t *stage_at(struct tide__transport *base, int peer, size_t *bytes,
                         size_t *slot_bytes)
{
    struct tide__shm *tp = shm_of(base);
    *bytes = (size_t)SHM_STAGE_SLOTS * SHM_STAGE_SLOT;
    *slot_bytes = SHM_STAGE_SLOT;
    if (!tp->stage_ok || peer < 0 || peer >= tp->size)
        return NULL;
    return peer == tp->rank ? tp->stage : tp->peers[peer].stage;
}

static int host_of(struct tide__transport *base, int peer)
{
    struct tide__shm *tp = shm_of(base);
    return peer >= 0 && peer < tp->size ? tp->host[peer] : peer;
}

static long stage_take(struct tide__transport *base)
{
    struct tide__shm *tp = shm_of(base);
    if (!tp->stage_ok)
        return -1;
    return tide__stage_slot_take(&tp->stage_used, SHM_STAGE_SLOTS, SHM_STAGE_SLOT);
}

static void stage_give(struct tide__transport *base, long off)
{
    tide__stage_slot_give(&shm_of(base)->stage_used, off, SHM_STAGE_SLOT);
}

static unsigned outstanding(struct tide__transport *base)
{
    return shm_of(base)->kernel_ops;
}

static void destroy(struct tide__transport *base)
{
    struct tide__shm *tp = shm_of(base);
    tp->aborting = true;
    for (int p = 0; p < tp->size; p++) {
        struct shm_peer *c = &tp->peers[p];
        if (!served(c))
            continue;
        close(c->fd);
        shm_recv_free(c);
    }
    tide__rx_pool_free(&tp->pool);
    shm_unmap(tp);
    if (tp->wake_fd >= 0)
        close(tp->wake_fd);
    free(tp->peers);
    free(tp->host);
    free(tp);
}

static const struct tide__transport_ops shm_ops = {
    .name = "shm",
    .start = start,
    .post = post,
    .withdraw = withdraw,
    .peer_reason = peer_reason,
    .abort = abort_all,
    .poll = poll_all,
    .arm = arm,
    .outstanding = outstanding,
    .destroy = destroy,
    .stage_at = stage_at,
    .stage_take = stage_take,
    .stage_give = stage_give,
    .board_at = shm_board_at,
    .board_raise = shm_board_raise,
    .host_of = host_of,
};

int tide__shm_create(struct tide__ctx *ctx, int *fds, bool required,
                     struct tide__transport **out)
{
    struct tide__shm *tp = calloc(1, sizeof *tp);
    struct shm_peer *peers = calloc((size_t)ctx->size, sizeof *peers);
    int *host = calloc((size_t)ctx->size, sizeof *host);
    if (!tp || !peers || !host) {
        free(tp);
        free(peers);
        free(host);
        return TIDE_ENOMEM;
    }
    tp->host = host;
    tp->base.ops = &shm_ops;
    tp->base.ctx = ctx;
    tp->rank = ctx->rank;
    tp->size = ctx->size;
    tp->peers = peers;
    tp->memfd = -1;
    tp->pool.limit = DEFAULT_UX_LIMIT;
    /* Single copies for messages that may be pulled (one-way
     * collectives) by default; for all with TIDE_SHM_CMA=1, none with 0.
     * On this project's 2-core machines the rings were as fast or faster
     * for exchanges, single copies faster one way (docs/architecture.md,
     * "Shared memory on one host"). */
    const char *cma = getenv("TIDE_SHM_CMA");
    if (cma && *cma && strcmp(cma, "0") && strcmp(cma, "1") && strcmp(cma, "auto"))
        tide__log(TIDE_LOG_WARN, ctx->rank, "TIDE_SHM_CMA=%s: expected auto, 0 or 1; using auto",
                  cma);
    tp->cma_min = cma && !strcmp(cma, "0") ? SIZE_MAX : SHM_CMA_MIN;
    tp->cma_all = cma && !strcmp(cma, "1");
    tp->wake_uop.complete = wake_complete;
    for (int p = 0; p < ctx->size; p++)
        peers[p] = (struct shm_peer){.tp = tp, .peer = p, .fd = -1,
                                     .bell_uop.complete = bell_complete};
    char err[256] = "";
    tp->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int rc = tp->wake_fd < 0 ? TIDE_ENOMEM : 0;
    if (rc)
        snprintf(err, sizeof err, "eventfd: %s", strerror(errno));
    else
        rc = shm_setup(tp, fds, ctx->cfg.bootstrap_timeout_s > 0 ? ctx->cfg.bootstrap_timeout_s
                                                                 : ctx->cfg.timeout_s,
                       required, err, sizeof err);
    if (rc) {
        tide__log(TIDE_LOG_ERROR, ctx->rank, "tide_init: shared memory: %s", err);
        destroy(&tp->base);
        return rc;
    }
    *out = &tp->base;
    return 0;
}
