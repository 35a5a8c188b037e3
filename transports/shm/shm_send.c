/* shm_send.c - the sending half of a pair: messages are written into our
 * ring in the peer's segment in the order they were posted, a header
 * then the payload, straight from the caller's buffer (one copy; the
 * reader makes the second into the destination).  A payload larger than
 * the ring streams through it: we write what fits, the reader drains
 * it, we write on.  A message completes once its last byte is in the
 * ring (tide__msg_done only queues it: the engine delivers it at its next
 * pass, so completing inside post re-enters nobody, as TCP's self-sends);
 * a single-copy one (shm_peer.h) once the reader has acked it. */
#include "transports/shm/shm_peer.h"

#include <string.h>

/* What the head puts in the ring: header and payload, or header and
 * descriptor. */
static size_t record_len(const struct shm_peer *c, const tide__msg *m)
{
    return c->tx_remote ? TIDE_FRAME_HDR_SIZE + SHM_DESC_BYTES : TIDE_FRAME_HDR_SIZE + m->len;
}

/* Write the head message on from tx_off.  Returns bytes written. */
static size_t write_head(struct shm_peer *c, tide__msg *m)
{
    size_t total = record_len(c, m), wrote = 0, hdr = total - (c->tx_remote ? 0 : m->len);
    while (c->tx_off < total) {
        size_t n;
        if (c->tx_off < hdr)
            n = shm_ring_write(c->out, c->tx_hdr + c->tx_off, hdr - c->tx_off, false);
        else
            n = shm_ring_write(c->out, (const uint8_t *)m->buf + (c->tx_off - TIDE_FRAME_HDR_SIZE),
                               total - c->tx_off, c->stream_out);
        if (n == 0)
            break;
        c->tx_off += n;
        wrote += n;
    }
    return wrote;
}

static void start_head(struct shm_peer *c)
{
    tide__msg *m = c->sq.head;
    m->hdr.len = m->len;
    tide__frame_encode(&m->hdr, c->tx_hdr);
    c->tx_off = 0;
    c->tx_remote = c->cma && m->len >= c->tp->cma_min &&
                   (c->tp->cma_all || (m->pull && m->len < SHM_CMA_AUTO_MAX));
    if (!c->tx_remote)
        return;
    uint64_t desc[2] = {(uint64_t)(uintptr_t)m->buf, (uint64_t)m->len};
    c->tx_hdr[SHM_HDR_FLAGS] = SHM_HDR_REMOTE;
    memcpy(c->tx_hdr + TIDE_FRAME_HDR_SIZE, desc, sizeof desc);
}

/* Write queued messages until the ring is full.  Returns bytes written. */
static size_t push(struct shm_peer *c)
{
    size_t wrote = 0;
    while (c->sq.head) {
        tide__msg *m = c->sq.head;
        wrote += write_head(c, m);
        if (c->tx_off < record_len(c, m)) {
            /* Full: ask the reader to tell us when it makes room, unless
             * it made some while we asked. */
            if (shm_ring_wait_for_room(c->out) == 0)
                break;
            continue;
        }
        tide__msgq_pop(&c->sq);
        if (c->tx_remote)
            tide__msgq_push(&c->awaiting, m);
        else
            tide__msg_done(c->tp->base.ctx, m, 0);
        if (c->sq.head)
            start_head(c);
    }
    return wrote;
}

void shm_send_post(struct shm_peer *c, tide__msg *m)
{
    if (c->lost) {
        tide__msg_done(c->tp->base.ctx, m, TIDE_EPEER);
        return;
    }
    bool first = c->sq.head == NULL;
    tide__msgq_push(&c->sq, m);
    if (first)
        start_head(c);
    /* Written now rather than at the next pass: a small message is in the
     * peer's ring one reactor turn sooner. */
    if (push(c))
        shm_ring_doorbell(c);
}

/* Single-copy sends the reader has acked: done.  Before the reader
 * stored acked it finished reading their buffers (release/acquire). */
static int take_acks(struct shm_peer *c)
{
    uint64_t acked = atomic_load_explicit(&c->out->acked, memory_order_acquire);
    int n = 0;
    for (; c->awaiting.head && c->acks_seen < acked; c->acks_seen++, n++)
        tide__msg_done(c->tp->base.ctx, tide__msgq_pop(&c->awaiting), 0);
    return n;
}

int shm_send_progress(struct shm_peer *c)
{
    int n = 0;
    if (c->sq.head && !c->lost && push(c)) {
        shm_ring_doorbell(c);
        n++;
    }
    if (c->awaiting.head && !c->lost)
        n += take_acks(c);
    return n;
}

bool shm_send_ready(struct shm_peer *c)
{
    if (c->awaiting.head && !c->lost &&
        atomic_load_explicit(&c->out->acked, memory_order_acquire) > c->acks_seen)
        return true;
    if (!c->sq.head || c->lost)
        return false;
    uint64_t head = atomic_load_explicit(&c->out->head, memory_order_relaxed);
    return head - atomic_load_explicit(&c->out->tail, memory_order_acquire) < SHM_RING_BYTES;
}

static bool awaiting_ack(const struct shm_peer *c, const tide__msg *m)
{
    for (const tide__msg *p = c->awaiting.head; p; p = p->next)
        if (p == m)
            return true;
    return false;
}

int shm_send_withdraw(struct shm_peer *c, tide__msg *m, bool stalled)
{
    /* Half in the ring (taking it back would break the stream), or read
     * by the peer straight out of its buffer right now: it stays.  If
     * the peer is not draining, give the pair up (that fails it). */
    if ((c->sq.head == m && c->tx_off > 0) || awaiting_ack(c, m)) {
        if (stalled)
            shm_peer_lost(c, "rank %d stopped reading our messages", c->peer);
        return TIDE_EBUSY;
    }
    if (c->sq.head == m) {
        tide__msgq_pop(&c->sq);
        if (c->sq.head)
            start_head(c);
        return 0;
    }
    tide__msgq_remove(&c->sq, m);
    return 0; /* taken back, or not ours any more */
}

void shm_send_fail_all(struct shm_peer *c)
{
    struct tide__ctx *ctx = c->tp->base.ctx;
    tide__msg *m;
    /* The reader is gone, or told (writer_gone) not to trust what it
     * copies out of those buffers any more. */
    while ((m = tide__msgq_pop(&c->awaiting)))
        tide__msg_done(ctx, m, TIDE_EPEER);
    while ((m = tide__msgq_pop(&c->sq)))
        tide__msg_done(ctx, m, TIDE_EPEER);
    c->tx_off = 0;
}
