/* tcp_send.c - the sending half of a connection: a FIFO of messages,
 * sent in batches by one sendmsg at a time, remainders resubmitted. */
#include "transports/tcp/tcp_conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Give the reactor what is left of the batch, at most TCP_MAX_SUBMIT
 * bytes (a completion's result is an int). */
static void submit(struct tcp_conn *c)
{
    struct tide__tcp *tp = c->tp;
    unsigned n = 0;
    size_t bytes = 0;
    for (unsigned i = c->tx_iov_first; i < c->tx_iov_n && bytes < TCP_MAX_SUBMIT; i++) {
        c->tx_sub[n] = c->tx_iov[i];
        if (c->tx_sub[n].iov_len > TCP_MAX_SUBMIT - bytes)
            c->tx_sub[n].iov_len = TCP_MAX_SUBMIT - bytes;
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

/* The payload of slot i as it goes on the wire, with its tag: sealed
 * (wire_auth.h) right after its header, so frames keep stream order;
 * encrypted into tx_secret[i] where that was allocated. */
static const void *seal_payload(struct tcp_conn *c, unsigned i, const tide__msg *m)
{
    if (c->tp->wire == TIDE_WIRE_OFF || !m->len)
        return m->buf;
    tide__wire_seal_payload(&c->tx_auth, m->buf, m->len, c->tx_secret[i], c->tx_tag[i]);
    return c->tx_secret[i] ? c->tx_secret[i] : m->buf;
}

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
        add_iov(c, c->tx_hdr[i], hsize);
        add_iov(c, (void *)seal_payload(c, i, m), m->len);
        c->tx_total += hsize + m->len;
        if (wire != TIDE_WIRE_OFF && m->len) {
            add_iov(c, c->tx_tag[i], TIDE_WIRE_TAG_SIZE);
            c->tx_total += TIDE_WIRE_TAG_SIZE;
        }
        c->tx_end[i] = c->tx_total;
        c->tx[i] = m;
        c->ntx++;
    }
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
    if (c->tx_total > TCP_SEND_NOW_MAX)
        return false;
    struct msghdr mh = {.msg_iov = c->tx_iov, .msg_iovlen = c->tx_iov_n};
    ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0)
        return false;
    sent(c, (size_t)n);
    return c->tx_sent == c->tx_total;
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
            submit(c);
            return;
        }
        c->ntx = c->tx_next = 0;
    }
}

static void fail_batch(struct tcp_conn *c)
{
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
            submit(c);
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
        submit(c); /* a short send: the rest, in order */
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
