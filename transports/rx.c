/* rx.c - see rx.h. */
#include "transports/rx.h"
#include "engine/context.h"
#include "tide.h"

#include <string.h>

size_t tide__rx_held(const struct tide__frame *f)
{
    return (size_t)f->len + sizeof(struct tide__unexp);
}

/* ---- Spares ----
 *
 * A large frame that comes before its receive lands in pages of its own
 * (match.c), and writing it faults each one in: in a VM whose page
 * faults are dear that cost more than the copy.  A 4-rank reduce (on the
 * 2-core AMD EPYC VM, 2026-11-28) sends every parent its first child's
 * vector before the parent has posted for it, and spent 1,030 faults and
 * 22 ms a call on each 4 MiB one, against 2.5 ms for the whole
 * all-reduce.  Collectives repeat their sizes, so the last few large
 * payloads freed are kept, by length, and the next frame of that length
 * takes one.  That 4-rank reduce, interleaved runs: 1 MiB 2.1-2.9 ms
 * against 5.6-5.9, 16 MiB in place 9-10 against 68-84, over TCP 30-40
 * against 117-122.  At most TIDE_RX_SPARES of SPARE_MAX each stay held
 * (128 MiB), and only where such frames came.
 *
 * Frames below TIDE_PAYLOAD_MAP_MIN come from malloc, whose free trims
 * the heap once its top passes a threshold (glibc's is 128 KiB to
 * start): a 2-rank all-gather of 256 KiB, whose 128 KiB halves often
 * came before their receives, grew the heap with brk and gave it back
 * every call, faulting 32 pages back in each time - 80-100 us a call
 * against 12-16 when they were posted first (and against Open MPI
 * vader's 14-16).  A rank running ahead (below) keeps up to
 * TIDE_RX_AHEAD frames a peer in the pool, taken and let go of in turn,
 * and the heap churned the same way.  So those from SMALL_MIN up are
 * kept too, TIDE_RX_SMALL_SPARES of them (at most 32 MiB). */
#define SMALL_MIN ((size_t)4 << 10)
#define SPARE_MAX ((size_t)32 << 20) /* larger ones go back at once */

/* The spares a payload of len bytes is kept among, or NULL. */
static struct tide__rx_spare *spares_for(struct tide__rx_pool *pool, size_t len, size_t *n)
{
    if (len < SMALL_MIN || len > SPARE_MAX)
        return NULL;
    bool large = len >= TIDE_PAYLOAD_MAP_MIN;
    *n = large ? TIDE_RX_SPARES : TIDE_RX_SMALL_SPARES;
    return large ? pool->spare : pool->small;
}

static uint8_t *spare_take(struct tide__rx_pool *pool, size_t len)
{
    size_t n;
    struct tide__rx_spare *sp = spares_for(pool, len, &n);
    for (size_t i = 0; sp && i < n; i++) {
        if (sp[i].p && sp[i].len == len) {
            uint8_t *p = sp[i].p;
            sp[i].p = NULL;
            return p;
        }
    }
    return NULL;
}

/* Keeps ux's payload if it is one to keep, in a free place or the
 * smallest spare's; what it displaces is freed. */
static void spare_keep(struct tide__rx_pool *pool, struct tide__unexp *ux)
{
    size_t len = (size_t)ux->hdr.len, n;
    struct tide__rx_spare *sp = spares_for(pool, len, &n), *s = sp;
    if (!sp || !ux->data)
        return;
    for (size_t i = 1; i < n && s->p; i++)
        if (!sp[i].p || sp[i].len < s->len)
            s = &sp[i];
    tide__payload_free(s->p, s->len);
    s->p = tide__unexp_take_payload(ux);
    s->len = len;
}

static void spares_free(struct tide__rx_spare *sp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tide__payload_free(sp[i].p, sp[i].len);
        sp[i].p = NULL;
    }
}

void tide__rx_pool_free(struct tide__rx_pool *pool)
{
    spares_free(pool->spare, TIDE_RX_SPARES);
    spares_free(pool->small, TIDE_RX_SMALL_SPARES);
}

static void drop(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__unexp *ux)
{
    pool->bytes -= tide__rx_held(&ux->hdr);
    if (ux->hdr.kind != TIDE_KIND_POISON)
        rx->nheld--;
    spare_keep(pool, ux);
    tide__unexp_free(ux);
}

/* ---- A peer running ahead ----
 *
 * A 2-rank reduce's non-root only sends.  With every frame that came
 * before its receive buffered, it ran thousands of calls ahead of its
 * root, whose pool then took each frame into memory never touched
 * before (up to the pool's 1 GiB): 2 ranks, 32 KiB, 35-130 us a call
 * where 3.3 is the root's own pace (2-core AMD EPYC VM, 2026-11-28).  So
 * once TIDE_RX_AHEAD of a peer's frames wait in the pool, and no
 * receive from that peer is posted, its next collective frame waits in
 * the stream (ring or socket) instead: its sender fills that and then
 * waits for room, as with a full pool.  With the small spares above,
 * the same reduce takes 3.2-3.5 us at 32 KiB (16 KiB 2.1-2.2 against up
 * to 52).  A bound of 64 held 18-38 us there.  A receive posted for
 * that peer lifts it, so a receiver waiting for a later frame of the
 * stream reads on as before.  The bound must stay above the frames an
 * algorithm keeps in flight to one peer (chain.c's window: 8): with
 * none at all, ring reduce-scatters of 8 MB deadlocked, each rank's
 * next receive waiting for its send to the next.  Point-to-point frames
 * keep tide_isend's promise (buffered as they come), agreement frames
 * their protocol's. */
static bool runs_ahead(const struct tide__rx *rx, const struct tide__frame *f)
{
    return rx->nheld >= TIDE_RX_AHEAD && f->seq != 0 && f->seq < TIDE_RECOVERY_SEQ_MIN &&
           f->kind != TIDE_KIND_POISON && !rx->mq.posted.head;
}

enum tide__rx_routed tide__rx_route(struct tide__rx *rx, struct tide__rx_pool *pool,
                                    struct tide__ctx *ctx, int peer, bool force)
{
    struct tide__frame *f = &rx->hdr;
    rx->msg = NULL;
    rx->ux = NULL;
    rx->dst = NULL;
    rx->left = (size_t)f->len;
    tide__msg *m = f->kind == TIDE_KIND_POISON ? NULL : tide__match_take_posted(&rx->mq, f);
    if (m) {
        rx->msg = m;
        rx->status = tide__match_check(m, f);
        if (rx->status == 0)
            rx->dst = m->buf;
        if (rx->status == TIDE_EMISMATCH)
            m->hdr = *f; /* so the failure can say what the peer called */
        rx->in_frame = true;
        return TIDE_RX_ROUTED;
    }
    /* An empty pool takes any one frame it can hold: parking it could
     * stop the very frames its receiver waits for first.  A frame larger
     * than the whole pool is never buffered (one header must not cost
     * gigabytes): it waits, and its peer's stream with it, for the
     * receive it is for, which then takes it straight into its buffer;
     * a receiver that wants other frames of that peer first meets its
     * deadline, as with a full pool. */
    size_t held = tide__rx_held(f);
    bool too_big = held > pool->limit;
    if (!force && (too_big || (pool->bytes + held > pool->limit && pool->bytes > 0) ||
                   runs_ahead(rx, f)))
        return TIDE_RX_PARK;
    uint8_t *spare = spare_take(pool, (size_t)f->len);
    struct tide__unexp *ux = spare ? tide__unexp_into(f, spare) : tide__unexp_new(f, NULL);
    if (!ux) {
        tide__payload_free(spare, (size_t)f->len);
        return TIDE_RX_NOMEM;
    }
    rx->ux = ux;
    rx->dst = ux->data;
    rx->in_frame = true;
    if (f->kind == TIDE_KIND_POISON) {
        pool->bytes += held;
        return TIDE_RX_ROUTED; /* not for matching: handed to the engine once complete */
    }
    tide__rx_hold(rx, pool, ux);
    tide__frame_unexpected(ctx, peer, f);
    return TIDE_RX_ROUTED;
}

void tide__rx_hold(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__unexp *ux)
{
    pool->bytes += tide__rx_held(&ux->hdr);
    rx->nheld++;
    tide__match_add_unexpected(&rx->mq, ux);
}

bool tide__rx_frame_done(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__ctx *ctx,
                         int peer)
{
    struct tide__unexp *ux = rx->ux;
    bool freed = false;
    rx->in_frame = false;
    if (rx->msg) {
        rx->msg->got = (size_t)rx->hdr.len;
        tide__msg_done(ctx, rx->msg, rx->status);
    } else if (ux && ux->hdr.kind == TIDE_KIND_POISON) {
        tide__frame_poison(ctx, peer, &ux->hdr, ux->data, (size_t)ux->hdr.len);
        drop(rx, pool, ux);
        freed = true;
    } else if (ux) {
        ux->complete = true;
        if (ux->claimed) {
            tide__msg_done(ctx, ux->claimed, tide__match_deliver(ux, ux->claimed));
            drop(rx, pool, ux);
            freed = true;
        }
    }
    rx->msg = NULL;
    rx->ux = NULL;
    rx->dst = NULL;
    return freed;
}

bool tide__rx_adopt(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__unexp *ux,
                    tide__msg *m)
{
    if (rx->ux != ux || tide__match_check(m, &ux->hdr))
        return false;
    size_t arrived = (size_t)ux->hdr.len - rx->left;
    if (arrived)
        memcpy(m->buf, ux->data, arrived);
    rx->msg = m;
    rx->status = 0;
    rx->dst = (uint8_t *)m->buf + arrived;
    rx->ux = NULL;
    drop(rx, pool, ux);
    return true;
}

bool tide__rx_post(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__ctx *ctx,
                   tide__msg *m, bool lost, bool can_adopt, bool *freed)
{
    struct tide__unexp *ux = tide__match_take_unexpected(&rx->mq, m);
    *freed = false;
    if (ux && !ux->complete) {
        if (can_adopt && tide__rx_adopt(rx, pool, ux, m))
            *freed = true;
        else
            ux->claimed = m; /* frame_done delivers it */
        return true;
    }
    if (ux) {
        tide__msg_done(ctx, m, tide__match_deliver(ux, m));
        drop(rx, pool, ux);
        *freed = true;
        return true;
    }
    if (lost) {
        tide__msg_done(ctx, m, TIDE_EPEER);
        return true;
    }
    tide__match_post(&rx->mq, m);
    return false;
}

bool tide__rx_withdraw(struct tide__rx *rx, tide__msg *m)
{
    if (tide__match_remove_posted(&rx->mq, m))
        return false;
    if (rx->ux && rx->ux->claimed == m) {
        /* Let the arriving message finish into the pool, unclaimed. */
        rx->ux->claimed = NULL;
        tide__match_add_unexpected(&rx->mq, rx->ux);
        return false;
    }
    return rx->msg == m;
}

void tide__rx_lost(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__ctx *ctx)
{
    if (rx->msg)
        tide__msg_done(ctx, rx->msg, TIDE_EPEER);
    if (rx->ux) {
        /* A half-arrived message is worthless; drop it from the pool. */
        struct tide__unexp *ux = rx->ux;
        if (ux->claimed)
            tide__msg_done(ctx, ux->claimed, TIDE_EPEER);
        else if (ux->hdr.kind != TIDE_KIND_POISON)
            tide__match_remove_unexpected(&rx->mq, ux);
        drop(rx, pool, ux);
    }
    rx->msg = NULL;
    rx->ux = NULL;
    rx->dst = NULL;
    rx->in_frame = false;
    tide__rx_fail_posted(rx, ctx);
}

void tide__rx_fail_posted(struct tide__rx *rx, struct tide__ctx *ctx)
{
    tide__msg *m;
    while ((m = tide__msgq_pop(&rx->mq.posted)))
        tide__msg_done(ctx, m, TIDE_EPEER);
}

void tide__rx_free(struct tide__rx *rx)
{
    /* A frame still arriving is not in the list when claimed, nor a poison. */
    if (rx->ux && (rx->ux->claimed || rx->ux->hdr.kind == TIDE_KIND_POISON))
        tide__unexp_free(rx->ux);
    tide__match_free_unexpected(&rx->mq);
}
