/* tcp_recv.c - the receiving half of a connection: parse frames out of
 * the staging buffer, route each payload to its posted receive, to a new
 * unexpected buffer, or (truncated, mismatched, withdrawn) to nowhere.
 *
 * The state between kernel completions lives in the connection:
 *   rx.in_frame == false            waiting for (the rest of) a header
 *   rx.in_frame, rx_direct == false payload bytes come through the stage,
 *                                   or (wants_direct) are read into rx.dst
 *   rx.in_frame, rx_direct == true  the kernel writes into rx.dst itself
 * Where a frame's payload goes, and what completes, is transports/rx.c.
 *
 * The stage is filled in one of two ways.  A thread that spins in the
 * reactor reads the socket itself (tcp_recv_poll: recv with MSG_DONTWAIT);
 * only before a driver sleeps does the stage get a kernel receive
 * (tcp_recv_arm), so that arrivals wake the ring.  Why not always a
 * kernel receive: its completion reaches a running thread as an
 * inter-processor interrupt, and on this project's machines that made
 * each small message ~10 us slower than a plain recv() (an 8-byte round
 * trip 38 us instead of ~10).  In between, rx_idle says the stage wants
 * bytes and no kernel receive is armed: the data waits in the socket.
 * The rest of a large payload goes straight into its destination the
 * same way (wants_direct): read by the spinning driver, or by a kernel
 * receive armed before it sleeps. */
#include "transports/tcp/tcp_conn.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The connection wants more bytes, into the stage or (wants_direct)
 * into rx.dst: see the top of the file for who reads them. */
static void want_bytes(struct tcp_conn *c)
{
    /* Whatever is unconsumed (at most part of a header) moves to the
     * front, so the buffer never needs to wrap. */
    size_t rest = c->stage_len - c->stage_pos;
    if (c->stage_pos) {
        memmove(c->stage, c->stage + c->stage_pos, rest);
        c->stage_pos = 0;
        c->stage_len = rest;
    }
    c->rx_idle = true;
}

/* The rest of a payload big enough to skip the stage: once the stage is
 * drained, its bytes go straight to where they belong. */
static bool wants_direct(const struct tcp_conn *c)
{
    return c->rx.in_frame && c->rx.dst && c->rx.left >= TCP_DIRECT_MIN;
}

/* How much one direct receive takes: all that is left, or a piece at a
 * time where the payload is tagged, so that each piece is checked as it
 * lands (landed). */
static size_t direct_len(const struct tcp_conn *c)
{
    size_t most = c->rx_tag_due ? TCP_AUTH_PIECE : TCP_MAX_SUBMIT;
    return c->rx.left < most ? c->rx.left : most;
}

void tcp_recv_arm(struct tcp_conn *c)
{
    if (!c->rx_idle || c->lost)
        return;
    bool direct = wants_direct(c);
    struct tide__reactor *r = &c->tp->base.ctx->reactor;
    int rc = direct ? tide__reactor_recv(r, &c->rx_uop, c->fd, c->rx.dst, direct_len(c),
                                         MSG_WAITALL)
                    : tide__reactor_recv(r, &c->rx_uop, c->fd, c->stage + c->stage_len,
                                         TCP_STAGE_BYTES - c->stage_len, 0);
    if (rc) {
        tcp_conn_lost(c, "out of memory arming a receive from rank %d", c->peer);
        return;
    }
    c->rx_idle = false;
    c->rx_direct = direct;
    c->rx_busy = true;
    c->tp->kernel_ops++;
}

/* The header in c->rx.hdr was parsed: decide where its payload goes.
 * Returns false when the unexpected pool is full and the connection must
 * wait (parked) until room frees up. */
static bool route(struct tcp_conn *c)
{
    enum tide__rx_routed r = tide__rx_route(&c->rx, &c->tp->pool, c->tp->base.ctx, c->peer, false);
    if (r == TIDE_RX_NOMEM)
        tcp_conn_lost(c, "out of memory buffering a %llu-byte message",
                      (unsigned long long)c->rx.hdr.len);
    return r != TIDE_RX_PARK;
}

/* Every payload byte of the current frame has arrived. */
static void frame_done(struct tcp_conn *c)
{
    if (tide__rx_frame_done(&c->rx, &c->tp->pool, c->tp->base.ctx, c->peer))
        tcp_unexpected_freed(c->tp);
}

/* A tag did not check out: the peer is given up (and the frame in
 * flight fails with it, tcp_recv_lost). */
static void auth_failed(struct tcp_conn *c, const char *what)
{
    tcp_conn_lost(c, "authentication failed: a %s from rank %d does not carry its MAC (altered "
                     "on the way, or not sent by rank %d)",
                  what, c->peer, c->peer);
}

/* n payload bytes just landed at `at`, in the frame's destination.  A
 * large payload's tag takes them now, while they are in the cache and
 * the next bytes are still on the wire, instead of all of them after
 * the last (wire_auth.h).  The connection is lost if that fails. */
static void landed(struct tcp_conn *c, uint8_t *at, size_t n)
{
    if (!c->rx_tag_due || !n || c->rx.hdr.len < TIDE_WIRE_STREAM_MIN)
        return;
    size_t offset = (size_t)c->rx.hdr.len - c->rx.left - n;
    if (tide__wire_open_piece(&c->rx_auth, offset, at, n, c->tp->wire == TIDE_WIRE_ENCRYPT))
        auth_failed(c, "payload");
}

/* The current frame's payload is in: check its tag where it has one,
 * decrypt it, and complete what it was for.  Returns false when its tag
 * has yet to arrive, or failed (the connection is then lost: nothing
 * the frame was for completes with its bytes). */
static bool frame_end(struct tcp_conn *c)
{
    if (c->rx_tag_due) {
        if (c->stage_len - c->stage_pos < TIDE_WIRE_TAG_SIZE)
            return false;
        /* A payload that went nowhere reaches nobody: not checked
         * (wire_auth.h).  One that is all in its destination is, before
         * anything completes with it. */
        size_t len = (size_t)c->rx.hdr.len;
        bool decrypt = c->tp->wire == TIDE_WIRE_ENCRYPT;
        const uint8_t *tag = c->stage + c->stage_pos;
        int bad = 0;
        if (c->rx.dst && len >= TIDE_WIRE_STREAM_MIN)
            bad = tide__wire_open_end(&c->rx_auth, len, tag); /* its bytes went by in landed */
        else if (c->rx.dst)
            bad = tide__wire_open_payload(&c->rx_auth, c->rx.dst - len, len, decrypt, tag);
        c->stage_pos += TIDE_WIRE_TAG_SIZE;
        c->rx_tag_due = false;
        if (bad) {
            auth_failed(c, "payload");
            return false;
        }
    }
    frame_done(c);
    return true;
}

/* A whole header (and its tag) is at the stage's front: check and parse
 * it.  False when the connection was lost over it. */
static bool read_header(struct tcp_conn *c)
{
    const uint8_t *h = c->stage + c->stage_pos;
    if (c->tp->wire != TIDE_WIRE_OFF &&
        tide__wire_open_header(&c->rx_auth, h, TIDE_FRAME_HDR_SIZE, h + TIDE_FRAME_HDR_SIZE)) {
        auth_failed(c, "frame header");
        return false;
    }
    if (tide__frame_decode(h, &c->rx.hdr) < 0) {
        tcp_conn_lost(c, "protocol error: rank %d sent a corrupt frame header", c->peer);
        return false;
    }
    c->stage_pos += c->tp->hdr_size;
    c->rx_tag_due = c->tp->wire != TIDE_WIRE_OFF && c->rx.hdr.len > 0;
    return true;
}

/* Consume what the stage holds; post the next kernel receive. */
static void parse(struct tcp_conn *c)
{
    while (!c->lost) {
        if (c->rx.in_frame) {
            size_t avail = c->stage_len - c->stage_pos;
            size_t take = avail < c->rx.left ? avail : c->rx.left;
            uint8_t *at = c->rx.dst;
            if (take && at) {
                memcpy(at, c->stage + c->stage_pos, take);
                c->rx.dst += take;
            }
            c->stage_pos += take;
            c->rx.left -= take;
            if (at)
                landed(c, at, take);
            if (c->lost)
                return;
            if (c->rx.left == 0 && frame_end(c))
                continue;
            if (!c->lost)
                want_bytes(c);
            return;
        }
        if (c->parked)
            return;
        if (c->stage_len - c->stage_pos < c->tp->hdr_size) {
            want_bytes(c);
            return;
        }
        if (!read_header(c))
            return;
        if (!route(c)) {
            c->parked = true;
            c->tp->nparked++;
            return;
        }
    }
}

static void lost_while_receiving(struct tcp_conn *c)
{
    tide__rx_lost(&c->rx, &c->tp->pool, c->tp->base.ctx);
}

/* The receive of a withdrawn message came back: the rest of its payload
 * is read and thrown away so the stream stays in step. */
static void finish_cancel(struct tcp_conn *c)
{
    tide__msg_done(c->tp->base.ctx, c->rx.msg, TIDE_EABORTED);
    c->rx.msg = NULL;
    c->rx.dst = NULL;
    c->rx_cancelled = false;
}

/* A receive into the stage (or, direct, into rx_dst) returned res. */
static void received(struct tcp_conn *c, bool direct, int res)
{
    if (!c->lost && (res == -EAGAIN || res == -EINTR || res == -ECANCELED)) {
        res = 0; /* nothing arrived; carry on from where we are */
    } else if (c->lost) {
        lost_while_receiving(c); /* a receive armed before the loss came back */
        return;
    } else if (res <= 0) {
        tcp_conn_lost(c, res == 0 ? "rank %d closed the connection (exited or was killed)"
                                  : "receiving from rank %d failed",
                      c->peer);
        return;
    }
    if (direct) {
        c->rx.dst += res;
        c->rx.left -= (size_t)res;
        landed(c, c->rx.dst - res, (size_t)res);
        if (c->lost)
            return;
        if (c->rx_cancelled)
            finish_cancel(c); /* parse() ends the frame once its tag is in */
    } else {
        c->stage_len += (size_t)res;
    }
    parse(c);
}

void tcp_recv_complete(struct tide__uop *uop, int res)
{
    struct tcp_conn *c = container_of(uop, struct tcp_conn, rx_uop);
    c->rx_busy = false;
    c->tp->kernel_ops--;
    bool direct = c->rx_direct;
    c->rx_direct = false;
    received(c, direct, res);
}

/* Whether bytes wait in the socket, asked without taking its lock.  A
 * recv() on an empty socket takes the lock all the same, and while a
 * reader holds it the peer's segments queue on the socket's backlog
 * instead of the receive queue, to be processed later by the reader.
 * Spinning on recv() through a large payload did that a hundred times
 * per message: 2-rank 2 MiB allreduces took 737 us without this check
 * and 585 with it (8 interleaved rounds, 2026-11-21), 512 KiB
 * broadcasts 112 and 90; Open MPI, which polls before it reads,
 * 530-560 and 119 in the same series.
 * Headers and small payloads keep the plain recv(): there the data is
 * usually already there, and a poll() in front of it made an 8-byte
 * round trip slower. */
static bool readable(const struct tcp_conn *c)
{
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    return poll(&pfd, 1, 0) != 0;
}

int tcp_recv_poll(struct tcp_conn *c)
{
    if (!c->rx_idle || c->lost)
        return 0;
    /* Nobody waits on a quiet connection: it is armed before anyone
     * sleeps, and a system call per idle peer per spin would add up. */
    if (!c->rx.mq.posted.head && !c->rx.in_frame && !c->stage_len)
        return 0;
    bool direct = wants_direct(c);
    if (direct && !readable(c))
        return 0;
    ssize_t n = direct ? recv(c->fd, c->rx.dst, direct_len(c), MSG_DONTWAIT)
                       : recv(c->fd, c->stage + c->stage_len, TCP_STAGE_BYTES - c->stage_len,
                              MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    c->rx_idle = false;
    received(c, direct, n < 0 ? -errno : (int)n);
    return 1;
}

void tcp_recv_lost(struct tcp_conn *c)
{
    if (c->rx_busy) {
        /* An armed receive comes back (shutdown ends it) and finishes
         * the frame in flight; the posted receives fail now. */
        tcp_recv_fail_all(c);
        return;
    }
    /* Idle, or parsing what a receive brought (a tag or a header that
     * did not check out): nothing will come back to end the frame. */
    c->rx_idle = false;
    lost_while_receiving(c);
}

void tcp_recv_start(struct tcp_conn *c)
{
    parse(c);
}

/* A late receive takes over the frame arriving into the unexpected pool
 * (tide__rx_adopt) unless the kernel is writing into that buffer.  (A
 * receiver that posts late, behind a sender already streaming a large
 * message, otherwise had every byte of it go through a fresh buffer and a
 * second copy.) */
void tcp_recv_post(struct tcp_conn *c, tide__msg *m)
{
    bool freed, can_adopt = !(c->rx_busy && c->rx_direct);
    bool done = tide__rx_post(&c->rx, &c->tp->pool, c->tp->base.ctx, m, c->lost != NULL,
                              can_adopt, &freed);
    if (freed)
        tcp_unexpected_freed(c->tp);
    if (!done)
        tcp_recv_unpark(c);
}

void tcp_recv_unpark(struct tcp_conn *c)
{
    if (!c->parked || c->lost || c->rx_busy)
        return;
    if (!route(c))
        return;
    c->parked = false;
    c->tp->nparked--;
    parse(c);
}

int tcp_recv_withdraw(struct tcp_conn *c, tide__msg *m)
{
    if (!tide__rx_withdraw(&c->rx, m))
        return 0; /* gone, or not ours any more */
    if (!c->rx_direct) {
        c->rx.msg = NULL;
        c->rx.dst = NULL; /* the rest of the payload is discarded, through the stage */
        return 0;
    }
    /* The kernel is writing into m's buffer: cancel, and finish when the
     * receive comes back. */
    c->rx_cancelled = true;
    if (tide__reactor_cancel(&c->tp->base.ctx->reactor, &c->rx_uop, &c->tp->cancel_uop)) {
        /* Closing makes the receive come back all the same. */
        tcp_conn_lost(c, "out of memory cancelling a receive from rank %d", c->peer);
        return TIDE_EBUSY;
    }
    c->tp->kernel_ops++;
    return TIDE_EBUSY;
}

void tcp_recv_fail_all(struct tcp_conn *c)
{
    tide__rx_fail_posted(&c->rx, c->tp->base.ctx);
}
