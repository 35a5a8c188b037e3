/* shm_recv.c - the receiving half of a pair: parse frames out of the
 * peer's ring in our segment and route each payload to its posted
 * receive, to a new unexpected buffer, or (truncated, mismatched,
 * withdrawn) to nowhere: the routing TCP uses too (transports/rx.c),
 * over a ring instead of a socket.  Nothing here waits: a pass reads what
 * is there and keeps its place (rx.in_frame, rx.left) for the next. */
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

/* The header in c->rx.hdr was parsed: decide where its payload goes
 * (transports/rx.c).  Returns false when the unexpected pool is full
 * (the ring then fills and the writer waits: a slow receiver slows its
 * senders); a dead peer's last frames go in regardless. */
static bool route(struct shm_peer *c)
{
    enum tide__rx_routed r = tide__rx_route(&c->rx, &c->tp->pool, c->tp->base.ctx, c->peer,
                                            c->draining);
    if (r == TIDE_RX_NOMEM)
        shm_peer_lost(c, "out of memory buffering a %llu-byte message",
                      (unsigned long long)c->rx.hdr.len);
    return r != TIDE_RX_PARK;
}

/* Every payload byte of the current frame has arrived. */
static void frame_done(struct shm_peer *c)
{
    if (tide__rx_frame_done(&c->rx, &c->tp->pool, c->tp->base.ctx, c->peer))
        unexpected_freed(c->tp);
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
    if (tide__frame_decode(c->rx_hdr_buf, &c->rx.hdr) < 0 || (c->rx_remote && !c->cma)) {
        shm_peer_lost(c, "protocol error: rank %d sent a corrupt frame header", c->peer);
        return n;
    }
    set_parked(c, !route(c));
    return n;
}

/* A single copy is made in pieces of at most this many bytes: a rank
 * that dies while we copy from it fails our next piece, where one call
 * for a whole 256 MiB message kept the reactor thread 1.1-1.5 s in the
 * kernel on a VM whose page walks are dear, and the loss went unnoticed
 * as long (test_failures_tcp's peer_killed under TIDE_SHM_CMA=1).  A
 * system call per 4 MiB costs nothing next to the copy. */
#define CMA_PIECE ((size_t)4 << 20)

/* A single-copy frame: copy its payload straight out of the sender into
 * where route() sent it (nowhere: skip), then ack it so the sender can
 * reuse its buffer.  0, or the peer is lost. */
static int read_remote(struct shm_peer *c)
{
    uint64_t desc[2];
    memcpy(desc, c->rx_hdr_buf + TIDE_FRAME_HDR_SIZE, sizeof desc);
    if (desc[1] != c->rx.hdr.len) {
        shm_peer_lost(c, "protocol error: rank %d described %llu bytes for a %llu-byte frame",
                      c->peer, (unsigned long long)desc[1], (unsigned long long)c->rx.hdr.len);
        return -1;
    }
    for (size_t done = 0; c->rx.dst && done < c->rx.left;) {
        size_t piece = c->rx.left - done < CMA_PIECE ? c->rx.left - done : CMA_PIECE;
        struct iovec local = {c->rx.dst + done, piece};
        struct iovec remote = {(void *)(uintptr_t)(desc[0] + done), piece};
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
    if (c->rx.dst && atomic_load(&c->in->writer_gone)) {
        shm_peer_lost(c, "rank %d gave the pair up during a copy", c->peer);
        return -1;
    }
    c->rx.left = 0;
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
        if (!c->rx.in_frame) {
            size_t n = read_header(c);
            got += n;
            if (!c->rx.in_frame)
                break;
        }
        if (c->rx_remote) {
            if (read_remote(c))
                break;
            got++; /* an ack moved: the writer may wait for it */
            frame_done(c);
            /* One single copy a pass: the receives it completed are
             * delivered before we read on, and their owners post the next
             * ones.  Reading on, the next frames found no receive posted
             * (its sender had its ack, so it sent them) and went the
             * unexpected way, into fresh pool buffers: a 2-rank chain
             * broadcast of 4-64 MiB (chunks of 256 KiB, eight in flight)
             * took 6-160 ms instead of 0.3-10, acking a chunk every
             * 0.85 ms while the first eight waited undelivered. */
            break;
        }
        size_t n = shm_ring_read(c->in, c->rx.dst, c->rx.left);
        if (c->rx.dst)
            c->rx.dst += n;
        c->rx.left -= n;
        got += n;
        if (c->rx.left)
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
    bool freed;
    bool done = tide__rx_post(&c->rx, &c->tp->pool, c->tp->base.ctx, m, c->lost != NULL, true,
                              &freed);
    if (freed)
        unexpected_freed(c->tp);
    if (!done && c->parked) /* its header may be the one waiting for pool room */
        shm_recv_progress(c);
}

int shm_recv_withdraw(struct shm_peer *c, tide__msg *m)
{
    /* Half read: the rest of its payload is read and dropped, and the
     * frame's end completes nothing (the message is its owner's again:
     * it may be freed before that end comes). */
    if (tide__rx_withdraw(&c->rx, m)) {
        c->rx.msg = NULL;
        c->rx.dst = NULL;
    }
    return 0;
}

void shm_recv_lost(struct shm_peer *c)
{
    tide__rx_lost(&c->rx, &c->tp->pool, c->tp->base.ctx);
    set_parked(c, false);
}

void shm_recv_free(struct shm_peer *c)
{
    tide__rx_free(&c->rx);
}
