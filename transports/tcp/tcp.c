/* tcp.c - the TCP transport's face: creating it over bootstrapped
 * sockets, posting and withdrawing messages (self-sends never touch a
 * socket), losing a peer, aborting, tearing down.  The halves of a
 * connection live in tcp_send.c and tcp_recv.c. */
#include "transports/tcp/tcp.h"
#include "transports/rendezvous/bootstrap.h"
#include "transports/rendezvous/congestion.h"
#include "transports/tcp/tcp_conn.h"
#include "engine/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* Unexpected messages held per process before connections stop reading
 * (a slow receiver then slows its senders instead of growing forever). */
#define DEFAULT_UX_LIMIT ((size_t)1 << 30)

static struct tide__tcp *tcp_of(struct tide__transport *base)
{
    return container_of(base, struct tide__tcp, base);
}

void tcp_conn_lost(struct tcp_conn *c, const char *fmt, ...)
{
    if (c->lost)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->lost_buf, sizeof c->lost_buf, fmt, ap);
    va_end(ap);
    c->lost = c->lost_buf;
    /* A peer that closes while we expect nothing from it has most likely
     * just finished (every normal finalize ends so): said at debug level
     * only; a loss that fails work deserves a warning. */
    bool pending = c->sq.head || c->ntx || c->rx.mq.posted.head || c->rx.in_frame;
    int level = pending && !c->tp->aborting ? TIDE_LOG_WARN : TIDE_LOG_DEBUG;
    tide__log(level, c->tp->rank, "lost rank %d: %s", c->peer, c->lost);
    /* Makes the kernel finish our pending send and receive at once. */
    if (c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
    tcp_send_fail_all(c);
    tcp_recv_lost(c);
}

void tcp_unexpected_freed(struct tide__tcp *tp)
{
    for (int p = 0; tp->nparked && p < tp->size; p++)
        tcp_recv_unpark(&tp->conns[p]);
}

/* ---- self-sends: matched in memory, no socket ---- */

static void self_send(struct tide__tcp *tp, tide__msg *m)
{
    struct tcp_conn *c = &tp->conns[tp->rank];
    struct tide__ctx *ctx = tp->base.ctx;
    m->hdr.len = m->len;
    tide__msg *r = tide__match_take_posted(&c->rx.mq, &m->hdr);
    if (r) {
        struct tide__unexp view = {.hdr = m->hdr, .data = m->buf, .complete = true};
        tide__msg_done(ctx, r, tide__match_deliver(&view, r));
        tide__msg_done(ctx, m, 0);
        return;
    }
    struct tide__unexp *ux = tide__unexp_new(&m->hdr, m->buf);
    if (!ux) {
        tide__msg_done(ctx, m, TIDE_ENOMEM);
        return;
    }
    tide__rx_hold(&c->rx, &tp->pool, ux);
    tide__msg_done(ctx, m, 0);
}

static void post(struct tide__transport *base, tide__msg *m)
{
    struct tide__tcp *tp = tcp_of(base);
    struct tcp_conn *c = &tp->conns[m->peer];
    if (m->peer == tp->rank && m->dir == TIDE_MSG_SEND)
        self_send(tp, m);
    else if (m->dir == TIDE_MSG_SEND)
        tcp_send_post(c, m);
    else
        tcp_recv_post(c, m);
}

static int withdraw(struct tide__transport *base, tide__msg *m, int err)
{
    struct tide__tcp *tp = tcp_of(base);
    struct tcp_conn *c = &tp->conns[m->peer];
    if (m->dir == TIDE_MSG_RECV)
        return tcp_recv_withdraw(c, m);
    if (m->peer == tp->rank)
        return 0; /* self-sends complete when posted */
    return tcp_send_withdraw(c, m, err == TIDE_ETIMEDOUT);
}

static const char *peer_reason(struct tide__transport *base, int peer)
{
    struct tide__tcp *tp = tcp_of(base);
    if (peer < 0 || peer >= tp->size)
        return NULL;
    return tp->conns[peer].lost;
}

static void start(struct tide__transport *base)
{
    struct tide__tcp *tp = tcp_of(base);
    for (int p = 0; p < tp->size; p++)
        if (tp->conns[p].fd >= 0)
            tcp_recv_start(&tp->conns[p]);
}

static void abort_all(struct tide__transport *base, int err)
{
    struct tide__tcp *tp = tcp_of(base);
    tp->aborting = true;
    for (int p = 0; p < tp->size; p++) {
        struct tcp_conn *c = &tp->conns[p];
        if (c->fd >= 0)
            tcp_conn_lost(c, "%s", tide_strerror(err));
        else
            tcp_recv_fail_all(c);
    }
}

static int poll_idle(struct tide__transport *base)
{
    struct tide__tcp *tp = tcp_of(base);
    int n = 0;
    for (int p = 0; p < tp->size; p++)
        if (tp->conns[p].fd >= 0)
            n += tcp_recv_poll(&tp->conns[p]);
    return n;
}

static void arm_idle(struct tide__transport *base)
{
    struct tide__tcp *tp = tcp_of(base);
    for (int p = 0; p < tp->size; p++)
        if (tp->conns[p].fd >= 0)
            tcp_recv_arm(&tp->conns[p]);
}

static unsigned outstanding(struct tide__transport *base)
{
    return tcp_of(base)->kernel_ops;
}

static void destroy(struct tide__transport *base)
{
    struct tide__tcp *tp = tcp_of(base);
    tp->aborting = true;
    for (int p = 0; p < tp->size; p++) {
        struct tcp_conn *c = &tp->conns[p];
        if (c->fd >= 0)
            close(c->fd);
        tide__rx_free(&c->rx);
        free(c->stage);
        tcp_send_free(c);
        tide__wire_dir_clear(&c->tx_auth);
        tide__wire_dir_clear(&c->rx_auth);
    }
    tide__rx_pool_free(&tp->pool);
    free(tp->conns);
    free(tp);
}

static void cancel_done(struct tide__uop *uop, int res)
{
    (void)res; /* -ENOENT/-EALREADY: the receive finished first; fine */
    container_of(uop, struct tide__tcp, cancel_uop)->kernel_ops--;
}

static const struct tide__transport_ops tcp_ops = {
    .name = "tcp",
    .start = start,
    .post = post,
    .withdraw = withdraw,
    .peer_reason = peer_reason,
    .abort = abort_all,
    .poll = poll_idle,
    .arm = arm_idle,
    .outstanding = outstanding,
    .destroy = destroy,
};

static int init_conn(struct tide__tcp *tp, int p, int fd, const struct tide__wire_keys *keys)
{
    struct tcp_conn *c = &tp->conns[p];
    c->tp = tp;
    c->peer = p;
    c->fd = fd;
    c->tx_uop.complete = tcp_send_complete;
    c->rx_uop.complete = tcp_recv_complete;
    if (fd < 0)
        return 0;
    uint32_t word = tide__wire_word(tp->wire);
    if (tp->wire != TIDE_WIRE_OFF && (tide__wire_dir_init(&c->tx_auth, word, keys[p].tx, true) ||
                                      tide__wire_dir_init(&c->rx_auth, word, keys[p].rx, false)))
        return TIDE_ENOMEM;
    c->stage = malloc(TCP_STAGE_BYTES);
    return c->stage ? 0 : TIDE_ENOMEM;
}

/* How this job's frames are protected: as the bootstrap agreed, which
 * handed us keys unless the mode is off. */
static int wire_mode(const struct tide__ctx *ctx, const struct tide__wire_keys *keys)
{
    int mode = tide__wire_mode_of(&ctx->cfg);
    return keys && mode > 0 ? mode : TIDE_WIRE_OFF;
}

int tide__tcp_create(struct tide__ctx *ctx, int rank, int size, int *fds,
                     const struct tide__wire_keys *keys, struct tide__transport **out)
{
    struct tide__tcp *tp = calloc(1, sizeof *tp);
    struct tcp_conn *conns = calloc((size_t)size, sizeof *conns);
    int rc = tp && conns ? 0 : TIDE_ENOMEM;
    if (tp) {
        tp->base.ops = &tcp_ops;
        tp->base.ctx = ctx;
        tp->rank = rank;
        tp->size = size;
        tp->conns = conns;
        tp->pool.limit = DEFAULT_UX_LIMIT;
        tp->cancel_uop.complete = cancel_done;
        tp->wire = wire_mode(ctx, keys);
        tp->hdr_size = TIDE_FRAME_HDR_SIZE + (tp->wire ? TIDE_WIRE_TAG_SIZE : 0);
    }
    for (int p = 0; conns && p < size; p++)
        conns[p].fd = -1; /* so a failed setup closes only what it owns */
    for (int p = 0; p < size; p++) {
        if (!rc)
            rc = init_conn(tp, p, fds[p], keys);
        else if (fds[p] >= 0)
            close(fds[p]);
        fds[p] = -1;
    }
    if (rc) {
        if (tp && conns)
            destroy(&tp->base);
        else {
            free(conns);
            free(tp);
        }
        return rc;
    }
    bool sockets = false;
    for (int p = 0; p < size; p++)
        sockets |= conns[p].fd >= 0;
    if (sockets)
        tide__log(TIDE_LOG_INFO, rank, "frames on TCP connections: TIDE_WIRE_AUTH=%s",
                  tide__wire_word_name(tide__wire_word(tp->wire)));
    *out = &tp->base;
    return 0;
}

int tide__tcp_check(const tide_config *cfg, char *why, size_t len)
{
    if (tide__wire_mode_parse(cfg->wire_auth, true) < 0) {
        snprintf(why, len, "TIDE_WIRE_AUTH \"%s\" is unknown (known: auto, off, mac, encrypt)",
                 cfg->wire_auth);
        return TIDE_EINVAL;
    }
    return tide__tcp_congestion_check(cfg->tcp_congestion, why, len);
}

/* Bootstrap the mesh and wrap it in the transport. */
int tide__tcp_open(struct tide__ctx *ctx, struct tide__transport **out)
{
    int *fds = malloc((size_t)ctx->size * sizeof *fds);
    struct tide__wire_keys *keys = malloc((size_t)ctx->size * sizeof *keys);
    if (!fds || !keys) {
        free(fds);
        free(keys);
        return TIDE_ENOMEM;
    }
    for (int p = 0; p < ctx->size; p++)
        fds[p] = -1;
    char err[512] = "";
    int rc = tide__bootstrap(&ctx->cfg, fds, keys, err, sizeof err);
    if (rc)
        tide__log(TIDE_LOG_ERROR, ctx->rank, "tide_init: %s", err);
    else
        rc = tide__tcp_create(ctx, ctx->rank, ctx->size, fds, keys, out);
    sodium_memzero(keys, (size_t)ctx->size * sizeof *keys);
    free(fds);
    free(keys);
    return rc;
}
