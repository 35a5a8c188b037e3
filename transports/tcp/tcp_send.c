/* tcp_send.c - the sending half of a connection: a FIFO of messages,
 * sent in batches by one sendmsg at a time, remainders resubmitted.
 * With MACs (wire_auth.h) a batch is sealed as it is filled, except a
 * large payload at its end, which is sealed a piece at a time just ahead
 * of the kernel (seal_ahead): sealed whole first, 16 MiB kept the wire
 * idle for 2 ms before its first byte. */
#include "transports/tcp/tcp_conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Give the reactor what is left of the batch, up to what is sealed
 * (tx_ready), at most TCP_MAX_SUBMIT bytes (a completion's result is an
 * int). */
static void submit(struct tcp_conn *c)
{
    struct tide__tcp *tp = c->tp;
    unsigned n = 0;
    size_t bytes = 0, most = c->tx_ready - c->tx_sent;
    if (most > TCP_MAX_SUBMIT)
        most = TCP_MAX_SUBMIT;
    for (unsigned i = c->tx_iov_first; i < c->tx_iov_n && bytes < most; i++) {
        c->tx_sub[n] = c->tx_iov[i];
        if (c->tx_sub[n].iov_len > most - bytes)
            c->tx_sub[n].iov_len = most - bytes;
        bytes += c->tx_sub[n].iov_len;
        n++;
    }
    memset(&c->tx_mh, 0, sizeof c->tx_mh);
    c->tx_mh.msg_iov = c->tx_sub;
    c->tx_mh.msg_iovlen = n;
    if (tide__reactor_sendmsg(&tp->base.ctx->reactor, &c->tx_uop, c->fd, &c->tx_mh)) {
        tcp_conn_lost(c, "out of memory posting a send to rank %d", c->peer);
        return;
    }
    tp->kernel_ops++;
    c->tx_busy = true;
}

static void add_iov(struct tcp_conn *c, void *base, size_t len)
{
    if (!len)
        return;
    c->tx_iov[c->tx_iov_n].iov_base = base;
    c->tx_iov[c->tx_iov_n].iov_len = len;
    c->tx_iov_n++;
}

/* The cipher library failed (it does not, keyed): the connection goes,
 * and with it the batch so far and the queue. */
static void seal_failed(struct tcp_conn *c, const tide__msg *m)
{
    tcp_conn_lost(c, "could not seal a %zu-byte payload for rank %d", m->len, c->peer);
}

/* Whether slot i's payload is sealed a piece at a time (seal_ahead). */
static bool sealed_in_pieces(const struct tcp_conn *c, const tide__msg *m)
{
    return c->tp->wire != TIDE_WIRE_OFF && m->len >= TIDE_WIRE_STREAM_MIN;
}

/* Seal slot i's payload (wire_auth.h) right after its header, so frames
 * keep stream order, encrypting it into tx_secret[i] where that was
 * allocated, unless it is sealed in pieces as it goes.  False when the
 * connection was lost over it. */
static bool seal_payload(struct tcp_conn *c, unsigned i, const tide__msg *m)
{
    if (c->tp->wire == TIDE_WIRE_OFF || !m->len || sealed_in_pieces(c, m))
        return true;
    if (tide__wire_seal_payload(&c->tx_auth, m->buf, m->len, c->tx_secret[i], c->tx_tag[i])) {
        seal_failed(c, m);
        return false;
    }
    return true;
}

/* Seal the large payload that ends the batch until what is ready reaches
 * `ahead` bytes past what the kernel has taken, or the whole of it with
 * its tag.  False when the connection was lost over it. */
static bool seal_ahead(struct tcp_conn *c, size_t ahead)
{
    tide__msg *m = c->tx_sealing;
    if (!m)
        return true;
    const uint8_t *src = m->buf;
    uint8_t *secret = c->tx_secret[c->tx_seal_slot];
    int bad = 0;
    while (!bad && c->tx_sealed < m->len && c->tx_ready < c->tx_sent + ahead) {
        size_t at = c->tx_sealed, n = m->len - at < TCP_AUTH_PIECE ? m->len - at : TCP_AUTH_PIECE;
        bad = tide__wire_seal_piece(&c->tx_auth, at, src + at, n, secret ? secret + at : NULL);
        c->tx_sealed += n;
        c->tx_ready += n;
    }
    if (!bad && c->tx_sealed == m->len) {
        bad = tide__wire_seal_end(&c->tx_auth, m->len, c->tx_tag[c->tx_seal_slot]);
        c->tx_ready = c->tx_total; /* the tag too */
        c->tx_sealing = NULL;
    }
    if (bad)
        seal_failed(c, m);
    return !bad;
}

static void slot_done(struct tcp_conn *c, unsigned i, int status);

/* A buffer for m's encrypted payload, or NULL. */
static uint8_t *secret_for(const tide__msg *m)
{
    return m->len > TIDE_WIRE_SECRET_MAX ? NULL : malloc(m->len);
}

/* Take up to a batch of queued messages off the queue. */
static void fill_batch(struct tcp_conn *c)
{
    int wire = c->tp->wire;
    size_t hsize = c->tp->hdr_size, sealed = 0;
    c->ntx = c->tx_next = 0;
    c->tx_iov_first = c->tx_iov_n = 0;
    c->tx_sent = c->tx_total = 0;
    c->tx_sealing = NULL;
    while (c->sq.head && c->ntx < TCP_TX_BATCH && sealed < TCP_SEAL_BATCH_BYTES) {
        tide__msg *m = tide__msgq_pop(&c->sq);
        unsigned i = c->ntx;
        if (wire == TIDE_WIRE_ENCRYPT && m->len && !(c->tx_secret[i] = secret_for(m))) {
            /* No frame of it began: the stream stays whole. */
            tide__msg_done(c->tp->base.ctx, m, m->len > TIDE_WIRE_SECRET_MAX ? TIDE_EINVAL
                                                                             : TIDE_ENOMEM);
            continue;
        }
        m->hdr.len = m->len;
        tide__frame_encode(&m->hdr, c->tx_hdr[i]);
        if (wire != TIDE_WIRE_OFF) {
            tide__wire_seal_header(&c->tx_auth, c->tx_hdr[i], TIDE_FRAME_HDR_SIZE,
                                   c->tx_hdr[i] + TIDE_FRAME_HDR_SIZE);
            sealed += m->len;
        }
        c->tx[i] = m;
        if (!seal_payload(c, i, m)) {
            slot_done(c, i, TIDE_EPEER); /* the loss failed the batch so far and the queue */
            return;
        }
        add_iov(c, c->tx_hdr[i], hsize);
        c->tx_total += hsize;
        if (sealed_in_pieces(c, m)) {
            c->tx_sealing = m; /* seal_ahead takes it from here */
            c->tx_seal_slot = i;
            c->tx_sealed = 0;
            c->tx_ready = c->tx_total;
        }
        add_iov(c, c->tx_secret[i] ? c->tx_secret[i] : m->buf, m->len);
        c->tx_total += m->len;
        if (wire != TIDE_WIRE_OFF && m->len) {
            add_iov(c, c->tx_tag[i], TIDE_WIRE_TAG_SIZE);
            c->tx_total += TIDE_WIRE_TAG_SIZE;
        }
        c->tx_end[i] = c->tx_total;
        c->ntx++;
        if (c->tx_sealing)
            return; /* it ends the batch: the next header waits for its tag */
    }
    c->tx_ready = c->tx_total;
}

/* Slot i's message has left (or failed): its encrypted copy goes. */
static void slot_done(struct tcp_conn *c, unsigned i, int status)
{
    free(c->tx_secret[i]);
    c->tx_secret[i] = NULL;
    tide__msg_done(c->tp->base.ctx, c->tx[i], status);
}

/* Drop n sent bytes from the front of the iovec list. */
static void advance(struct tcp_conn *c, size_t n)
{
    while (n && c->tx_iov_first < c->tx_iov_n) {
        struct iovec *v = &c->tx_iov[c->tx_iov_first];
        if (n < v->iov_len) {
            v->iov_base = (char *)v->iov_base + n;
            v->iov_len -= n;
            return;
        }
        n -= v->iov_len;
        c->tx_iov_first++;
    }
}

/* n more bytes of the batch are in the kernel's hands. */
static void sent(struct tcp_conn *c, size_t n)
{
    c->tx_sent += n;
    advance(c, n);
    while (c->tx_next < c->ntx && c->tx_end[c->tx_next] <= c->tx_sent)
        slot_done(c, c->tx_next++, 0);
}

/* A small batch goes out at once with a non-blocking sendmsg from the
 * driving thread: through the ring the same send costs a submission and
 * a completion to reap, and its completion is seen a turn later.
 * Returns true when the whole batch went; otherwise the ring sends the
 * rest (and reports any error).  Why not every batch: tried 2026-11-21,
 * large direct sends made 2-rank broadcasts a little faster but doubled
 * the exposed communication of 4-rank FSDP training (12 % -> 23 %,
 * interleaved runs): the trainer's own thread then does the copying. */
static bool send_now(struct tcp_conn *c)
{
    if (c->tx_total > TCP_SEND_NOW_MAX || c->tx_ready < c->tx_total)
        return false;
    struct msghdr mh = {.msg_iov = c->tx_iov, .msg_iovlen = c->tx_iov_n};
    ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0)
        return false;
    sent(c, (size_t)n);
    return c->tx_sent == c->tx_total;
}

/* Submit what is ready of the batch.  While a payload is sealed in
 * pieces, the kernel gets the send at once (flush) and the next pieces
 * are sealed while it sends, instead of at the next turn of the loop. */
static void submit_and_seal(struct tcp_conn *c)
{
    if (!seal_ahead(c, TCP_AUTH_PIECE)) /* at least a piece to send */
        return;
    submit(c);
    if (!c->tx_sealing || c->lost)
        return;
    tide__reactor_flush(&c->tp->base.ctx->reactor);
    seal_ahead(c, TCP_SEAL_AHEAD);
}

/* Move queued messages into the kernel, a batch at a time, until one
 * has to wait for the ring. */
static void start_batch(struct tcp_conn *c)
{
    while (!c->tx_busy && c->sq.head && !c->lost) {
        fill_batch(c);
        if (!c->ntx)
            continue; /* every message of it failed before its frame began */
        if (!send_now(c)) {
            submit_and_seal(c);
            return;
        }
        c->ntx = c->tx_next = 0;
    }
}

static void fail_batch(struct tcp_conn *c)
{
    c->tx_sealing = NULL;
    for (; c->tx_next < c->ntx; c->tx_next++)
        slot_done(c, c->tx_next, TIDE_EPEER);
    c->ntx = c->tx_next = 0;
}

void tcp_send_complete(struct tide__uop *uop, int res)
{
    struct tcp_conn *c = container_of(uop, struct tcp_conn, tx_uop);
    c->tx_busy = false;
    c->tp->kernel_ops--;

    /* -ECANCELED: the thread that submitted it exited (io_uring cancels a
     * thread's requests then), and any caller thread may have driven the
     * reactor in tide_wait.  Nothing went out of a cancelled send, and we
     * never cancel one ourselves: send the rest again. */
    if (res == -EAGAIN || res == -EINTR || res == -ECANCELED) {
        if (!c->lost) {
            submit_and_seal(c);
            return;
        }
    }
    if (res < 0 || c->lost) {
        if (res < 0)
            tcp_conn_lost(c, "sending failed: %s", strerror(-res));
        fail_batch(c);
        tcp_send_fail_all(c);
        return;
    }
    sent(c, (size_t)res);
    if (c->tx_sent < c->tx_total) {
        submit_and_seal(c); /* a short send, or more sealed: the rest, in order */
        return;
    }
    c->ntx = c->tx_next = 0;
    start_batch(c);
}

void tcp_send_post(struct tcp_conn *c, tide__msg *m)
{
    if (c->lost) {
        tide__msg_done(c->tp->base.ctx, m, TIDE_EPEER);
        return;
    }
    tide__msgq_push(&c->sq, m);
    start_batch(c);
}

int tcp_send_withdraw(struct tcp_conn *c, tide__msg *m, bool stalled)
{
    if (tide__msgq_remove(&c->sq, m))
        return 0;
    /* In the kernel, possibly half on the wire: it must finish or the
     * connection must go. */
    if (stalled)
        tcp_conn_lost(c, "rank %d did not take our data before the deadline", c->peer);
    return TIDE_EBUSY;
}

void tcp_send_fail_all(struct tcp_conn *c)
{
    struct tide__ctx *ctx = c->tp->base.ctx;
    tide__msg *m;
    while ((m = tide__msgq_pop(&c->sq)))
        tide__msg_done(ctx, m, TIDE_EPEER);
    if (!c->tx_busy)
        fail_batch(c);
}

void tcp_send_free(struct tcp_conn *c)
{
    for (unsigned i = 0; i < TCP_TX_BATCH; i++) {
        free(c->tx_secret[i]);
        c->tx_secret[i] = NULL;
    }
}
