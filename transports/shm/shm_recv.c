/* shm_recv.c - the receiving half of a pair: parse frames out of the
 * peer's ring in our segment and route each payload to its posted
 * receive, to a new unexpected buffer, or (truncated, mismatched,
 * withdrawn) to nowhere; the same routing as tcp_recv.c, over a ring
 * instead of a socket.  Nothing here waits: a pass reads what is there
 * and keeps its place (in_frame, rx_left) for the next. */
#include "transports/shm/shm_peer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* Room in the pool: peers whose next header waited for it go on. */
static void unexpected_freed(struct tide__shm *tp)
{
    for (int p = 0; tp->nparked && p < tp->size; p++)
        if (tp->peers[p].parked)
            shm_recv_progress(&tp->peers[p]);
}

static void set_parked(struct shm_peer *c, bool parked)
{
    if (parked != c->parked)
        c->tp->nparked += parked ? 1 : (unsigned)-1;
    c->parked = parked;
}

static void drop_unexpected(struct tide__shm *tp, struct tide__unexp *ux)
{
    tp->ux_bytes -= (size_t)ux->hdr.len;
    tide__unexp_free(ux);
}

/* The header in c->rx_hdr was parsed: decide where its payload goes.
 * Returns false when the unexpected pool is full (the ring then fills
 * and the writer waits: a slow receiver slows its senders). */
static bool route(struct shm_peer *c)
{
    struct tide__shm *tp = c->tp;
    struct tide__frame *f = &c->rx_hdr;
    c->rx_msg = NULL;
    c->rx_ux = NULL;
    c->rx_dst = NULL;
    c->rx_left = (size_t)f->len;
    tide__msg *m = f->kind == TIDE_KIND_POISON ? NULL : tide__match_take_posted(&c->mq, f);
    if (m) {
        c->rx_msg = m;
        c->rx_status = tide__match_check(m, f);
        if (c->rx_status == 0)
            c->rx_dst = m->buf;
        if (c->rx_status == TIDE_EMISMATCH)
            m->hdr = *f; /* so the failure can say what the peer called */
        c->in_frame = true;
        return true;
    }
    if (f->kind == TIDE_KIND_POISON && f->len > SHM_POISON_MAX) {
        shm_peer_lost(c, "protocol error: rank %d sent a %llu-byte failure report", c->peer,
                      (unsigned long long)f->len);
        return true;
    }
    if (f->len && tp->ux_bytes + f->len > tp->ux_limit && tp->ux_bytes > 0 && !c->draining)
        return false;
    struct tide__unexp *ux = tide__unexp_new(f, NULL);
    if (!ux) {
        shm_peer_lost(c, "out of memory buffering a %llu-byte message", (unsigned long long)f->len);
        return true;
    }
    tp->ux_bytes += (size_t)f->len;
    c->rx_ux = ux;
    c->rx_dst = ux->data;
    c->in_frame = true;
    if (f->kind == TIDE_KIND_POISON)
        return true; /* not for matching: handed to the engine once complete */
    tide__match_add_unexpected(&c->mq, ux);
    tide__frame_unexpected(tp->base.ctx, c->peer, f);
    return true;
}

/* Every payload byte of the current frame has arrived. */
static void frame_done(struct shm_peer *c)
{
    struct tide__shm *tp = c->tp;
    struct tide__ctx *ctx = tp->base.ctx;
    struct tide__unexp *ux = c->rx_ux;
    c->in_frame = false;
    if (c->rx_msg) {
        c->rx_msg->got = (size_t)c->rx_hdr.len;
        tide__msg_done(ctx, c->rx_msg, c->rx_status);
    } else if (ux && ux->hdr.kind == TIDE_KIND_POISON) {
        tide__frame_poison(ctx, c->peer, &ux->hdr, ux->data, (size_t)ux->hdr.len);
        drop_unexpected(tp, ux);
        unexpected_freed(tp);
    } else if (ux) {
        ux->complete = true;
        if (ux->claimed) {
            tide__msg_done(ctx, ux->claimed, tide__match_deliver(ux, ux->claimed));
            drop_unexpected(tp, ux);
            unexpected_freed(tp);
        }
    }
    c->rx_msg = NULL;
    c->rx_ux = NULL;
    c->rx_dst = NULL;
}

/* Read a header (and a single-copy frame's descriptor), or the rest of
 * one.  Returns bytes read; sets in_frame (or parks) once it is whole. */
static size_t read_header(struct shm_peer *c)
{
    size_t want = TIDE_FRAME_HDR_SIZE, n = 0;
    if (c->rx_hdr_have >= TIDE_FRAME_HDR_SIZE &&
        (c->rx_hdr_buf[SHM_HDR_FLAGS] & SHM_HDR_REMOTE))
        want += SHM_DESC_BYTES;
    while (c->rx_hdr_have < want) {
        size_t got = shm_ring_read(c->in, c->rx_hdr_buf + c->rx_hdr_have, want - c->rx_hdr_have);
        if (!got)
            return n;
        n += got;
        c->rx_hdr_have += got;
        if (c->rx_hdr_have == TIDE_FRAME_HDR_SIZE &&
            (c->rx_hdr_buf[SHM_HDR_FLAGS] & SHM_HDR_REMOTE))
            want += SHM_DESC_BYTES;
    }
    c->rx_hdr_have = 0;
    c->rx_remote = want > TIDE_FRAME_HDR_SIZE;
    if (tide__frame_decode(c->rx_hdr_buf, &c->rx_hdr) < 0 || (c->rx_remote && !c->cma)) {
        shm_peer_lost(c, "protocol error: rank %d sent a corrupt frame header", c->peer);
        return n;
    }
    set_parked(c, !route(c));
    return n;
}

/* A single-copy frame: copy its payload straight out of the sender into
 * where route() sent it (nowhere: skip), then ack it so the sender can
 * reuse its buffer.  0, or the peer is lost. */
static int read_remote(struct shm_peer *c)
{
    uint64_t desc[2];
    memcpy(desc, c->rx_hdr_buf + TIDE_FRAME_HDR_SIZE, sizeof desc);
    if (desc[1] != c->rx_hdr.len) {
        shm_peer_lost(c, "protocol error: rank %d described %llu bytes for a %llu-byte frame",
                      c->peer, (unsigned long long)desc[1], (unsigned long long)c->rx_hdr.len);
        return -1;
    }
    for (size_t done = 0; c->rx_dst && done < c->rx_left;) {
        struct iovec local = {c->rx_dst + done, c->rx_left - done};
        struct iovec remote = {(void *)(uintptr_t)(desc[0] + done), c->rx_left - done};
        ssize_t got = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            shm_peer_lost(c, got < 0 && errno == ESRCH ? "rank %d exited"
                                                       : "copying from rank %d failed", c->peer);
            return -1;
        }
        done += (size_t)got;
    }
    /* After the copy, not before: if the writer gave its buffer back in
     * the meantime, what we copied may be its next contents. */
    if (c->rx_dst && atomic_load(&c->in->writer_gone)) {
        shm_peer_lost(c, "rank %d gave the pair up during a copy", c->peer);
        return -1;
    }
    c->rx_left = 0;
    atomic_store_explicit(&c->in->acked, ++c->acked, memory_order_release);
    return 0;
}

int shm_recv_progress(struct shm_peer *c)
{
    size_t got = 0;
    if (c->busy)
        return 0; /* re-entered through unexpected_freed: the outer pass reads on */
    c->busy = true;
    while (!c->lost) {
        if (c->parked) {
            if (!route(c))
                break;
            set_parked(c, false);
        }
        if (!c->in_frame) {
            size_t n = read_header(c);
            got += n;
            if (!c->in_frame)
                break;
        }
        if (c->rx_remote) {
            if (read_remote(c))
                break;
            got++; /* an ack moved: the writer may wait for it */
            frame_done(c);
            continue;
        }
        size_t n = shm_ring_read(c->in, c->rx_dst, c->rx_left);
        if (c->rx_dst)
            c->rx_dst += n;
        c->rx_left -= n;
        got += n;
        if (c->rx_left)
            break;
        frame_done(c);
    }
    c->busy = false;
    if (got && !c->lost && shm_ring_take_waiter(c->in))
        shm_ring_doorbell(c); /* the writer waits for the room we made */
    return got != 0;
}

void shm_recv_post(struct shm_peer *c, tide__msg *m)
{
    struct tide__shm *tp = c->tp;
    struct tide__unexp *ux = tide__match_take_unexpected(&c->mq, m);
    if (ux && !ux->complete) {
        ux->claimed = m; /* frame_done delivers it */
        return;
    }
    if (ux) {
        tide__msg_done(tp->base.ctx, m, tide__match_deliver(ux, m));
        drop_unexpected(tp, ux);
        unexpected_freed(tp);
        return;
    }
    if (c->lost) {
        tide__msg_done(tp->base.ctx, m, TIDE_EPEER);
        return;
    }
    tide__match_post(&c->mq, m);
    if (c->parked) /* its header may be the one waiting for pool room */
        shm_recv_progress(c);
}

int shm_recv_withdraw(struct shm_peer *c, tide__msg *m)
{
    if (tide__match_remove_posted(&c->mq, m))
        return 0;
    if (c->rx_ux && c->rx_ux->claimed == m) {
        /* Let the arriving message finish into the pool, unclaimed. */
        c->rx_ux->claimed = NULL;
        tide__match_add_unexpected(&c->mq, c->rx_ux);
        return 0;
    }
    if (c->rx_msg == m) {
        c->rx_msg = NULL;
        c->rx_dst = NULL; /* the rest of its payload is read and dropped */
    }
    return 0;
}

void shm_recv_lost(struct shm_peer *c)
{
    struct tide__shm *tp = c->tp;
    struct tide__ctx *ctx = tp->base.ctx;
    if (c->rx_msg)
        tide__msg_done(ctx, c->rx_msg, TIDE_EPEER);
    if (c->rx_ux) {
        /* A half-arrived message is worthless; drop it from the pool. */
        struct tide__unexp *ux = c->rx_ux;
        if (ux->claimed)
            tide__msg_done(ctx, ux->claimed, TIDE_EPEER);
        else if (ux->hdr.kind != TIDE_KIND_POISON)
            tide__match_remove_unexpected(&c->mq, ux);
        drop_unexpected(tp, ux);
    }
    c->rx_msg = NULL;
    c->rx_ux = NULL;
    c->in_frame = false;
    set_parked(c, false);
    tide__msg *m;
    while ((m = tide__msgq_pop(&c->mq.posted)))
        tide__msg_done(ctx, m, TIDE_EPEER);
}

void shm_recv_free(struct shm_peer *c)
{
    if (c->rx_ux && (c->rx_ux->claimed || c->rx_ux->hdr.kind == TIDE_KIND_POISON))
        tide__unexp_free(c->rx_ux); /* not in the list */
    tide__match_free_unexpected(&c->mq);
}
