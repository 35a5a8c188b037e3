/* bootstrap.c - assembling the job: rendezvous at rank 0, then a full mesh
 * of authenticated TCP connections (contract in bootstrap.h).
 *
 * Who talks to whom:
 *   - rank 0 listens at MASTER_ADDR:MASTER_PORT;
 *   - rank i > 0 dials it (the "master connection", which becomes the
 *     i<->0 link), opens its own listener on the local IP of that
 *     connection, registers the listener's address, and waits for the
 *     TABLE of every rank's address, which rank 0 sends once all have
 *     registered;
 *   - then rank i dials every rank 0 < j < i and accepts every j > i.
 * Every connection starts with the challenge-response of handshake.h.
 *
 * Everything runs in one poll(2) loop on the caller's thread over
 * nonblocking sockets.  Each connection is a small state machine (enum
 * phase) stepped whenever its socket is ready; it reads exactly the bytes
 * of the message it expects, never more, so nothing the engine will read
 * later is consumed here.  A connection we accepted that misbehaves (a
 * stranger, a wrong token, garbage, silence past its own handshake
 * deadline) is dropped with a warning and never fails the bootstrap.
 */
#include "transports/rendezvous/bootstrap.h"
#include "transports/rendezvous/congestion.h"
#include "engine/clock.h"
#include "engine/log.h"
#include "transports/rendezvous/handshake.h"
#include "transports/rendezvous/sockaddr.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#define HANDSHAKE_NS (5 * TIDE_NS_PER_S) /* one connection's handshake */
#define BACKOFF_MIN_NS (10 * TIDE_NS_PER_MS)
#define BACKOFF_MAX_NS (500 * TIDE_NS_PER_MS)
/* Accepted connections still in their handshake.  Beyond this we stop
 * accepting (they wait in the backlog) so a flood of strangers cannot
 * exhaust memory or crowd out our own dials. */
#define MAX_PENDING 64
/* With MAX_PENDING taken, a connection that has not proved the token
 * this long after we accepted it is closed to let the next one in: our
 * own ranks finish a handshake in milliseconds (and a connector that is
 * cut off dials again), while 140 idle strangers used to hold every slot
 * for the whole HANDSHAKE_NS, batch after batch, until the job gave up
 * assembling (issue 33). */
#define EVICT_AFTER_NS (200 * TIDE_NS_PER_MS)
/* Unproved connections from one address (any port): past this, its
 * oldest is closed at once, so one host's strangers cannot hold every
 * slot and keep evicting our ranks' handshakes.  Our own ranks on one
 * host dial from one address too; each proves itself in milliseconds,
 * and one cut off dials again. */
#define PER_SOURCE_MAX 32

enum phase {
    PH_FREE = 0, /* slot unused */
    /* connector: we dialed */
    PH_BACKOFF,        /* no socket; dial at retry_ns */
    PH_CONNECTING,     /* nonblocking connect in flight */
    PH_SEND_HELLO,     /* -> HELLO */
    PH_RECV_CHALLENGE, /* <- CHALLENGE */
    PH_SEND_PROOF,     /* -> PROOF (+ REGISTER on the master connection) */
    PH_RECV_TABLE,     /* <- TABLE, master connection only */
    /* acceptor: they dialed */
    PH_RECV_HELLO,     /* <- HELLO */
    PH_SEND_CHALLENGE, /* -> CHALLENGE */
    PH_RECV_PROOF,     /* <- PROOF */
    PH_RECV_REGISTER,  /* <- REGISTER (rank 0) */
    PH_REGISTERED,     /* rank 0: waiting for the other ranks to register */
    PH_SEND_TABLE,     /* -> TABLE (rank 0) */
    /* both */
    PH_DONE /* authenticated; the fd becomes fds[peer] */
};

struct conn {
    enum phase phase;
    int fd;               /* -1 in PH_BACKOFF */
    int outgoing;         /* 1: we dialed */
    int authed;           /* acceptor: the peer proved the token */
    int refused;          /* connector: the last answer did not prove the token */
    int peer;             /* the rank at the other end; -1 until HELLO */
    uint32_t purpose;     /* TIDE_HS_MASTER or TIDE_HS_MESH */
    uint64_t deadline_ns; /* end of this handshake attempt; 0 = none */
    uint64_t accepted_ns; /* acceptor: when we accepted it */
    uint64_t retry_ns;    /* PH_BACKOFF: when to dial again */
    uint64_t backoff_ns;  /* the delay after the next failure */
    struct tide__addr addr; /* where we dial, or where they came from */
    char who[TIDE_ADDR_STRLEN]; /* addr as text, for messages */
    char why[160];          /* connector: why the last attempt failed */
    uint8_t *io;            /* the message being sent or received */
    size_t io_len, io_done;
    uint8_t hello[TIDE_HS_HELLO_SIZE]; /* the raw HELLO both MACs cover */
    uint32_t wire;          /* acceptor: the mode its HELLO asks for */
    struct tide__wire_keys keys; /* the session keys, once authenticated */
    uint8_t nonce_a[TIDE_HS_NONCE_SIZE];
    uint8_t msg[TIDE_HS_CHALLENGE_SIZE]; /* fixed-size messages */
};

struct boot {
    int rank, world;
    double limit_s;       /* the bootstrap deadline, for messages */
    uint64_t deadline_ns; /* absolute */
    uint8_t key[TIDE_HS_KEY_SIZE];
    int wire;             /* enum tide__wire_mode */
    struct tide__addr master;
    char master_str[TIDE_ADDR_STRLEN];
    int listen_fd;                             /* ours; -1 until open */
    uint8_t self_entry[TIDE_ADDR_WIRE_SIZE];   /* rank > 0: our REGISTER */
    struct conn *conns;                        /* nconns slots */
    int nconns;
    struct pollfd *pfd;  /* 1 + nconns */
    int *pfd_conn;       /* conns index per pfd entry, -1: the listener */
    uint8_t *table;      /* world wire addresses */
    char *have;          /* acceptor: ranks already authenticated */
    int registered;      /* rank 0: ranks whose REGISTER arrived */
    int done;            /* connections in PH_DONE */
    char *err;
    size_t errlen;
    int failed;          /* the first error wins */
    const char *congestion; /* tide_config.tcp_congestion */
};

__attribute__((format(printf, 3, 4))) static int fail(struct boot *b, int rc, const char *fmt,
                                                      ...)
{
    if (b->failed || !b->err || b->errlen == 0)
        return rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->errlen, fmt, ap);
    va_end(ap);
    b->failed = 1;
    return rc;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static const char *purpose_name(uint32_t purpose)
{
    return purpose == TIDE_HS_MASTER ? "master" : "mesh";
}

/* ------------------------------------------------------------------ */
/* Sockets                                                             */
/* ------------------------------------------------------------------ */

/* The handed-over form of a connection: blocking, no Nagle, keepalive,
 * the configured congestion control (congestion.c). */
static int make_final(int fd, const char *congestion)
{
    int one = 1;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return -errno;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) < 0)
        return -errno;
    return tide__tcp_congestion_apply(fd, congestion);
}

enum io_dir { IO_RECV, IO_SEND };

/* Move the current message along.  Returns 1 when it is all through, 0
 * when the socket would block, -errno on error (-ECONNRESET for EOF). */
static int io_move(struct conn *c, enum io_dir dir)
{
    while (c->io_done < c->io_len) {
        uint8_t *p = c->io + c->io_done;
        size_t left = c->io_len - c->io_done;
        ssize_t n = dir == IO_SEND ? send(c->fd, p, left, MSG_NOSIGNAL) : recv(c->fd, p, left, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -errno;
        if (n == 0)
            return -ECONNRESET;
        c->io_done += (size_t)n;
    }
    return 1;
}

/* Next message to move on c: len bytes at buf, in phase next. */
static void set_io(struct conn *c, uint8_t *buf, size_t len, enum phase next)
{
    c->io = buf;
    c->io_len = len;
    c->io_done = 0;
    c->phase = next;
}

/* ------------------------------------------------------------------ */
/* Connection slots                                                    */
/* ------------------------------------------------------------------ */

static struct conn *new_conn(struct boot *b)
{
    for (int k = 0; k < b->nconns; k++) {
        struct conn *c = &b->conns[k];
        if (c->phase != PH_FREE)
            continue;
        memset(c, 0, sizeof *c);
        c->fd = -1;
        c->peer = -1;
        return c;
    }
    return NULL;
}

static void close_conn(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    sodium_memzero(c, sizeof *c); /* nonces, MAC material */
    c->fd = -1;
    c->phase = PH_FREE;
}

/* Forget an accepted connection that misbehaved, with a warning.  Never
 * fails the bootstrap: returns 0. */
__attribute__((format(printf, 3, 4))) static int drop(struct boot *b, struct conn *c,
                                                      const char *fmt, ...)
{
    char why[160], claim[40] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (c->peer >= 0)
        snprintf(claim, sizeof claim, " claiming to be rank %d", c->peer);
    tide__log(TIDE_LOG_WARN, b->rank, "dropping a connection from %s%s: %s", c->who, claim, why);
    if (c->authed)
        b->have[c->peer] = 0;
    if (c->phase == PH_REGISTERED)
        b->registered--;
    close_conn(c);
    return 0;
}

/* A connection we dialed failed before the peer proved itself: close it
 * and dial again after the backoff.  Returns 0. */
static int redial(struct boot *b, struct conn *c, const char *why)
{
    tide__log(TIDE_LOG_DEBUG, b->rank, "rank %d at %s: %s; retrying in %llu ms", c->peer, c->who,
              why, (unsigned long long)(c->backoff_ns / TIDE_NS_PER_MS));
    snprintf(c->why, sizeof c->why, "%s", why);
    c->refused = 0;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->deadline_ns = 0;
    c->retry_ns = tide__now_ns() + c->backoff_ns;
    c->backoff_ns = min_u64(2 * c->backoff_ns, BACKOFF_MAX_NS);
    c->phase = PH_BACKOFF;
    return 0;
}

/* An authenticated connection broke: the job cannot be assembled. */
static int lost(struct boot *b, struct conn *c, int e)
{
    return fail(b, TIDE_EBOOTSTRAP, "lost the connection to rank %d at %s during bootstrap: %s",
                c->peer, c->who, strerror(e));
}

static void conn_done(struct boot *b, struct conn *c)
{
    c->phase = PH_DONE;
    c->deadline_ns = 0;
    b->done++;
    tide__log(TIDE_LOG_DEBUG, b->rank, "connected to rank %d at %s (%s, %s)", c->peer, c->who,
              purpose_name(c->purpose), c->outgoing ? "dialed" : "accepted");
}

/* Queue an outgoing dial to rank peer at a, starting now. */
static int add_dial(struct boot *b, int peer, uint32_t purpose, const struct tide__addr *a)
{
    struct conn *c = new_conn(b);
    if (!c)
        return fail(b, TIDE_EBOOTSTRAP, "internal error: no connection slot for rank %d", peer);
    c->outgoing = 1;
    c->peer = peer;
    c->purpose = purpose;
    c->addr = *a;
    tide__addr_format(a, c->who, sizeof c->who);
    c->backoff_ns = BACKOFF_MIN_NS;
    c->phase = PH_BACKOFF; /* retry_ns 0: dial at once */
    return 0;
}

/* ------------------------------------------------------------------ */
/* Connector side                                                      */
/* ------------------------------------------------------------------ */

static int dial(struct boot *b, struct conn *c, uint64_t now)
{
    c->fd = socket(c->addr.u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return fail(b, TIDE_EBOOTSTRAP, "rank %d cannot create a socket: %s", b->rank,
                    strerror(errno));
    c->deadline_ns = min_u64(now + HANDSHAKE_NS, b->deadline_ns);
    c->phase = PH_CONNECTING; /* even when connect is immediate: POLLOUT says so */
    if (connect(c->fd, &c->addr.u.sa, c->addr.len) < 0 && errno != EINPROGRESS)
        return redial(b, c, strerror(errno));
    return 0;
}

/* Rank i > 0: listen on the local IP of the master connection (an address
 * that routes to the other ranks), port chosen by the kernel, and encode
 * it for REGISTER. */
static int open_own_listener(struct boot *b, int master_fd)
{
    struct tide__addr a;
    memset(&a, 0, sizeof a);
    a.len = sizeof a.u;
    if (getsockname(master_fd, &a.u.sa, &a.len) < 0)
        return fail(b, TIDE_EBOOTSTRAP, "getsockname: %s", strerror(errno));
    tide__addr_set_port(&a, 0);
    char where[TIDE_ADDR_STRLEN];
    tide__addr_format(&a, where, sizeof where);
    int fd = tide__addr_listen(&a);
    if (fd < 0)
        return fail(b, TIDE_EBOOTSTRAP, "rank %d cannot listen on %s: %s", b->rank, where,
                    strerror(-fd));
    b->listen_fd = fd;
    a.len = sizeof a.u;
    if (getsockname(fd, &a.u.sa, &a.len) < 0 || tide__addr_encode(&a, b->self_entry) < 0)
        return fail(b, TIDE_EBOOTSTRAP, "rank %d cannot name its listener", b->rank);
    tide__addr_format(&a, where, sizeof where);
    tide__log(TIDE_LOG_DEBUG, b->rank, "listening on %s", where);
    return 0;
}

static int on_connected(struct boot *b, struct conn *c)
{
    int e = 0;
    socklen_t len = sizeof e;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        e = errno;
    if (e)
        return redial(b, c, strerror(e));
    if (c->purpose == TIDE_HS_MASTER && b->listen_fd < 0) {
        int rc = open_own_listener(b, c->fd);
        if (rc)
            return rc;
    }
    struct tide__hello h = {
        .version = TIDE_HS_VERSION,
        .world = (uint32_t)b->world,
        .from_rank = (uint32_t)b->rank,
        .to_rank = (uint32_t)c->peer,
        .purpose = c->purpose,
        .wire = tide__wire_word(b->wire),
    };
    randombytes_buf(h.nonce, sizeof h.nonce);
    tide__hs_hello_encode(&h, c->hello);
    set_io(c, c->hello, TIDE_HS_HELLO_SIZE, PH_SEND_HELLO);
    return 0;
}

static int on_challenge(struct boot *b, struct conn *c)
{
    int rc = tide__hs_challenge_check(b->key, c->hello, c->msg, TIDE_HS_CHALLENGE_SIZE,
                                      c->nonce_a);
    /* Not fatal: anyone who can answer at that address (a stranger who
     * took the port first, something in between) could send a CHALLENGE
     * we cannot check, and must not end the job; we dial again until the
     * deadline, which then says so. */
    if (rc == TIDE_EAUTH) {
        redial(b, c, "it could not prove our job token");
        c->refused = 1;
        return 0;
    }
    if (rc)
        return redial(b, c, "the peer does not speak the tide handshake");
    c->deadline_ns = 0;
    tide__hs_proof_make(b->key, c->hello, c->nonce_a, c->msg);
    tide__hs_session_keys(b->key, c->hello, c->nonce_a, 1, c->keys.tx, c->keys.rx);
    size_t len = TIDE_HS_PROOF_SIZE;
    if (c->purpose == TIDE_HS_MASTER) {
        memcpy(c->msg + len, b->self_entry, TIDE_ADDR_WIRE_SIZE);
        len += TIDE_ADDR_WIRE_SIZE;
    }
    set_io(c, c->msg, len, PH_SEND_PROOF);
    return 0;
}

int tide__bootstrap_table_check(const uint8_t *table, int world, int *bad_rank)
{
    for (int j = 0; j < world; j++) {
        struct tide__addr a;
        if (tide__addr_decode(table + (size_t)j * TIDE_ADDR_WIRE_SIZE, &a) < 0) {
            *bad_rank = j;
            return TIDE_EPROTO;
        }
    }
    return 0;
}

/* Rank i > 0 has every rank's address: dial the ranks below it. */
static int on_table(struct boot *b, struct conn *c)
{
    conn_done(b, c);
    int bad;
    if (tide__bootstrap_table_check(b->table, b->world, &bad) < 0)
        return fail(b, TIDE_EBOOTSTRAP, "rank 0 at %s sent a malformed address for rank %d",
                    b->master_str, bad);
    for (int j = 1; j < b->rank; j++) {
        struct tide__addr a;
        tide__addr_decode(b->table + (size_t)j * TIDE_ADDR_WIRE_SIZE, &a); /* checked above */
        int rc = add_dial(b, j, TIDE_HS_MESH, &a);
        if (rc)
            return rc;
    }
    return 0;
}

/* Step a connection we dialed as far as its socket allows.  Returns 0 or
 * a fatal error. */
static int step_connector(struct boot *b, struct conn *c, short revents)
{
    for (;;) {
        int r;
        switch (c->phase) {
        case PH_BACKOFF: /* the timer pass dials */
        case PH_DONE:
            return 0;
        case PH_CONNECTING:
            if (!revents)
                return 0;
            r = on_connected(b, c);
            if (r)
                return r;
            break;
        case PH_SEND_HELLO:
            r = io_move(c, IO_SEND);
            if (r <= 0)
                return r < 0 ? redial(b, c, strerror(-r)) : 0;
            set_io(c, c->msg, TIDE_HS_CHALLENGE_SIZE, PH_RECV_CHALLENGE);
            break;
        case PH_RECV_CHALLENGE:
            r = io_move(c, IO_RECV);
            if (r <= 0)
                return r < 0 ? redial(b, c, strerror(-r)) : 0;
            r = on_challenge(b, c);
            if (r)
                return r;
            break;
        case PH_SEND_PROOF:
            r = io_move(c, IO_SEND);
            if (r <= 0)
                return r < 0 ? lost(b, c, -r) : 0;
            if (c->purpose != TIDE_HS_MASTER) {
                conn_done(b, c);
                return 0;
            }
            set_io(c, b->table, (size_t)b->world * TIDE_ADDR_WIRE_SIZE, PH_RECV_TABLE);
            break;
        case PH_RECV_TABLE:
            r = io_move(c, IO_RECV);
            if (r <= 0)
                return r < 0 ? lost(b, c, -r) : 0;
            return on_table(b, c);
        default:
            return fail(b, TIDE_EBOOTSTRAP, "internal error: dialed connection in phase %d",
                        (int)c->phase);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Acceptor side                                                       */
/* ------------------------------------------------------------------ */

/* A connection someone dialed to us that has not proved the token yet:
 * one of the MAX_PENDING. */
static bool unproved(const struct conn *c)
{
    return c->phase != PH_FREE && !c->outgoing && !c->authed;
}

/* The acceptor that has waited longest without proving the token, if it
 * has waited EVICT_AFTER_NS (at *when: the time it will have, if none
 * has yet); NULL if there is none. */
static struct conn *oldest_unproved(struct boot *b, uint64_t now, uint64_t *when)
{
    struct conn *old = NULL;
    for (int k = 0; k < b->nconns; k++) {
        struct conn *c = &b->conns[k];
        if (!unproved(c))
            continue;
        if (!old || c->accepted_ns < old->accepted_ns)
            old = c;
    }
    if (!old)
        return NULL;
    *when = old->accepted_ns + EVICT_AFTER_NS;
    return *when <= now ? old : NULL;
}

static bool same_host(const struct tide__addr *a, const struct tide__addr *b)
{
    if (a->u.sa.sa_family != b->u.sa.sa_family)
        return false;
    if (a->u.sa.sa_family == AF_INET)
        return a->u.in4.sin_addr.s_addr == b->u.in4.sin_addr.s_addr;
    return !memcmp(&a->u.in6.sin6_addr, &b->u.in6.sin6_addr, sizeof a->u.in6.sin6_addr);
}

/* c was just accepted: past PER_SOURCE_MAX unproved connections from its
 * address, the oldest of them goes. */
static void cap_source(struct boot *b, const struct conn *c)
{
    struct conn *old = NULL;
    int n = 0;
    for (int k = 0; k < b->nconns; k++) {
        struct conn *o = &b->conns[k];
        if (!unproved(o) || !same_host(&o->addr, &c->addr))
            continue;
        n++;
        if (!old || o->accepted_ns < old->accepted_ns)
            old = o;
    }
    if (n <= PER_SOURCE_MAX)
        return;
    tide__log(TIDE_LOG_DEBUG, b->rank, "closing %s: %d connections from its address have not "
              "proved the job token", old->who, n);
    close_conn(old);
}

static int pending_count(const struct boot *b)
{
    int pending = 0;
    for (int k = 0; k < b->nconns; k++)
        pending += unproved(&b->conns[k]);
    return pending;
}

static void accept_pending(struct boot *b, uint64_t now)
{
    uint64_t when;
    struct conn *old = pending_count(b) >= MAX_PENDING ? oldest_unproved(b, now, &when) : NULL;
    if (old) {
        tide__log(TIDE_LOG_DEBUG, b->rank, "closing %s, which has not proved the job token in "
                  "%d ms, to take the next connection", old->who,
                  (int)((now - old->accepted_ns) / TIDE_NS_PER_MS));
        close_conn(old);
    }
    for (;;) {
        struct conn *c = new_conn(b);
        if (!c)
            return;
        c->addr.len = sizeof c->addr.u;
        c->fd = accept4(b->listen_fd, &c->addr.u.sa, &c->addr.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c->fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED)
                continue;
            if (e != EAGAIN && e != EWOULDBLOCK)
                tide__log(TIDE_LOG_WARN, b->rank, "accept: %s", strerror(e));
            return; /* the slot stays PH_FREE */
        }
        c->deadline_ns = min_u64(now + HANDSHAKE_NS, b->deadline_ns);
        c->accepted_ns = now;
        set_io(c, c->hello, TIDE_HS_HELLO_SIZE, PH_RECV_HELLO);
        tide__addr_format(&c->addr, c->who, sizeof c->who);
        tide__log(TIDE_LOG_DEBUG, b->rank, "accepted a connection from %s", c->who);
        cap_source(b, c);
        return; /* one per pass keeps the pending count honest */
    }
}

static int on_hello(struct boot *b, struct conn *c)
{
    struct tide__hello h;
    if (tide__hs_hello_decode(c->hello, TIDE_HS_HELLO_SIZE, &h) < 0)
        return drop(b, c, "it does not speak the tide handshake (bad HELLO)");
    const char *problem = tide__hs_hello_problem(&h, b->world, b->rank);
    if (problem)
        return drop(b, c, "%s", problem);
    c->peer = (int)h.from_rank;
    c->purpose = h.purpose;
    c->wire = h.wire;
    randombytes_buf(c->nonce_a, sizeof c->nonce_a);
    tide__hs_challenge_make(b->key, c->hello, c->nonce_a, c->msg);
    set_io(c, c->msg, TIDE_HS_CHALLENGE_SIZE, PH_SEND_CHALLENGE);
    return 0;
}

static int on_proof(struct boot *b, struct conn *c)
{
    int rc = tide__hs_proof_check(b->key, c->hello, c->nonce_a, c->msg, TIDE_HS_PROOF_SIZE);
    if (rc == TIDE_EAUTH)
        return drop(b, c, "it does not share our job token (TIDE_JOB_TOKEN differs)");
    if (rc)
        return drop(b, c, "it sent a malformed PROOF");
    if (b->have[c->peer])
        return drop(b, c, "rank %d is already connected", c->peer);
    /* Checked only now that the HELLO is proven ours: a stranger's HELLO
     * must not be able to end the job. */
    if (c->wire != tide__wire_word(b->wire))
        return fail(b, TIDE_EINVAL,
                    "rank %d protects its frames with TIDE_WIRE_AUTH=%s and we with TIDE_WIRE_AUTH=%s: "
                    "every rank of a job must use the same",
                    c->peer, tide__wire_word_name(c->wire),
                    tide__wire_word_name(tide__wire_word(b->wire)));
    tide__hs_session_keys(b->key, c->hello, c->nonce_a, 0, c->keys.tx, c->keys.rx);
    b->have[c->peer] = 1;
    c->authed = 1;
    if (b->rank == 0) {
        set_io(c, c->msg, TIDE_ADDR_WIRE_SIZE, PH_RECV_REGISTER);
        return 0;
    }
    conn_done(b, c);
    return 0;
}

/* Rank 0: record a REGISTER; when the last one arrives, send TABLE to all. */
static int on_register(struct boot *b, struct conn *c)
{
    struct tide__addr a;
    if (tide__addr_decode(c->msg, &a) < 0)
        return drop(b, c, "it registered a malformed address");
    memcpy(b->table + (size_t)c->peer * TIDE_ADDR_WIRE_SIZE, c->msg, TIDE_ADDR_WIRE_SIZE);
    c->deadline_ns = 0;
    c->phase = PH_REGISTERED;
    b->registered++;
    char where[TIDE_ADDR_STRLEN];
    tide__addr_format(&a, where, sizeof where);
    tide__log(TIDE_LOG_DEBUG, 0, "rank %d registered, listening at %s (%d of %d)", c->peer,
              where, b->registered, b->world - 1);
    if (b->registered < b->world - 1)
        return 0;
    for (int k = 0; k < b->nconns; k++) {
        struct conn *r = &b->conns[k];
        if (r->phase == PH_REGISTERED)
            set_io(r, b->table, (size_t)b->world * TIDE_ADDR_WIRE_SIZE, PH_SEND_TABLE);
    }
    return 0;
}

/* A registered rank's socket turned readable before TABLE: it closed (or
 * spoke out of turn).  Forget it; it may register again. */
static int on_registered_readable(struct boot *b, struct conn *c)
{
    uint8_t byte;
    ssize_t n = recv(c->fd, &byte, 1, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    return drop(b, c, n > 0 ? "it sent data before the address table" : "it went away");
}

/* Step a connection we accepted.  Returns 0 or a fatal error; anything
 * wrong with the peer itself only drops the connection. */
static int step_acceptor(struct boot *b, struct conn *c, short revents)
{
    for (;;) {
        int r;
        switch (c->phase) {
        case PH_FREE: /* dropped */
        case PH_DONE:
            return 0;
        case PH_RECV_HELLO:
        case PH_RECV_PROOF:
        case PH_RECV_REGISTER:
            r = io_move(c, IO_RECV);
            if (r < 0 && c->phase == PH_RECV_PROOF) /* the connector found our MAC wrong */
                return drop(b, c, "it hung up after our challenge (another TIDE_JOB_TOKEN?): %s",
                            strerror(-r));
            if (r <= 0)
                return r < 0 ? drop(b, c, "%s", strerror(-r)) : 0;
            r = c->phase == PH_RECV_HELLO   ? on_hello(b, c)
                : c->phase == PH_RECV_PROOF ? on_proof(b, c)
                                            : on_register(b, c);
            if (r)
                return r;
            break;
        case PH_SEND_CHALLENGE:
            r = io_move(c, IO_SEND);
            if (r <= 0)
                return r < 0 ? drop(b, c, "%s", strerror(-r)) : 0;
            set_io(c, c->msg, TIDE_HS_PROOF_SIZE, PH_RECV_PROOF);
            break;
        case PH_REGISTERED:
            return revents ? on_registered_readable(b, c) : 0;
        case PH_SEND_TABLE:
            r = io_move(c, IO_SEND);
            if (r <= 0)
                return r < 0 ? lost(b, c, -r) : 0;
            conn_done(b, c);
            return 0;
        default:
            return fail(b, TIDE_EBOOTSTRAP, "internal error: accepted connection in phase %d",
                        (int)c->phase);
        }
    }
}

/* ------------------------------------------------------------------ */
/* The poll loop                                                       */
/* ------------------------------------------------------------------ */

/* What each phase waits for; 0: free, backing off or done (a finished
 * connection's bytes belong to the engine, not to us). */
static const short phase_events[PH_DONE + 1] = {
    [PH_CONNECTING] = POLLOUT,    [PH_SEND_HELLO] = POLLOUT,  [PH_RECV_CHALLENGE] = POLLIN,
    [PH_SEND_PROOF] = POLLOUT,    [PH_RECV_TABLE] = POLLIN,   [PH_RECV_HELLO] = POLLIN,
    [PH_SEND_CHALLENGE] = POLLOUT, [PH_RECV_PROOF] = POLLIN,  [PH_RECV_REGISTER] = POLLIN,
    [PH_REGISTERED] = POLLIN,     [PH_SEND_TABLE] = POLLOUT,
};

/* Fill b->pfd; *timeout_ms is the time to the nearest deadline or retry. */
static int build_pollset(struct boot *b, uint64_t now, int *timeout_ms)
{
    int n = 0, pending = 0, free_slots = 0;
    uint64_t next = b->deadline_ns;
    for (int k = 0; k < b->nconns; k++) {
        const struct conn *c = &b->conns[k];
        free_slots += c->phase == PH_FREE;
        pending += unproved(c);
        if (c->phase == PH_BACKOFF)
            next = min_u64(next, c->retry_ns);
        if (c->deadline_ns)
            next = min_u64(next, c->deadline_ns);
        short ev = phase_events[c->phase];
        if (!ev)
            continue;
        b->pfd[n] = (struct pollfd){.fd = c->fd, .events = ev};
        b->pfd_conn[n++] = k;
    }
    /* With MAX_PENDING taken, listen once the oldest unproved one may be
     * closed for the next (accept_pending), and wake for that moment. */
    uint64_t when = 0;
    bool may_accept = false;
    if (pending < MAX_PENDING)
        may_accept = free_slots > 0;
    else if (oldest_unproved(b, now, &when))
        may_accept = true;
    else if (when)
        next = min_u64(next, when);
    if (b->listen_fd >= 0 && may_accept) {
        b->pfd[n] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
        b->pfd_conn[n++] = -1;
    }
    uint64_t ms = next > now ? (next - now + TIDE_NS_PER_MS - 1) / TIDE_NS_PER_MS : 0;
    *timeout_ms = ms > INT_MAX ? INT_MAX : (int)ms;
    return n;
}

static int dispatch(struct boot *b, int n)
{
    for (int i = 0; i < n; i++) {
        short rev = b->pfd[i].revents;
        if (!rev)
            continue;
        int k = b->pfd_conn[i];
        if (k < 0) {
            accept_pending(b, tide__now_ns());
            continue;
        }
        struct conn *c = &b->conns[k];
        int rc = c->outgoing ? step_connector(b, c, rev) : step_acceptor(b, c, rev);
        if (rc)
            return rc;
    }
    return 0;
}

/* Dial what is due; give up on handshakes past their own deadline. */
static int run_timers(struct boot *b, uint64_t now)
{
    for (int k = 0; k < b->nconns; k++) {
        struct conn *c = &b->conns[k];
        if (c->phase == PH_BACKOFF && now >= c->retry_ns) {
            int rc = dial(b, c, now);
            if (rc)
                return rc;
            continue;
        }
        if (!c->deadline_ns || now < c->deadline_ns)
            continue;
        if (!c->outgoing)
            drop(b, c, "no complete handshake within %llu s",
                 (unsigned long long)(HANDSHAKE_NS / TIDE_NS_PER_S));
        else if (c->phase == PH_CONNECTING)
            redial(b, c, "connect timed out");
        else
            redial(b, c, "no answer to our handshake");
    }
    return 0;
}

/* Has rank j got as far as we were waiting for? */
static int peer_ready(const struct boot *b, int j)
{
    for (int k = 0; k < b->nconns; k++) {
        const struct conn *c = &b->conns[k];
        if (c->phase == PH_FREE || c->peer != j)
            continue;
        if (c->phase == PH_DONE || c->phase == PH_REGISTERED || c->phase == PH_SEND_TABLE)
            return 1;
    }
    return 0;
}

/* Append "rank 3" or "ranks 2, 3, 5": the peers not ready yet (rank 0
 * counts only for rank 0's own list: the others reach it first). */
static void list_missing(const struct boot *b, char *out, size_t cap)
{
    char nums[400] = "";
    int missing = 0;
    for (int j = 0; j < b->world; j++) {
        if (j == b->rank || (b->rank != 0 && j == 0) || peer_ready(b, j))
            continue;
        size_t len = strlen(nums);
        if (len + 16 < sizeof nums)
            snprintf(nums + len, sizeof nums - len, "%s%d", missing ? ", " : "", j);
        else if (len + 5 < sizeof nums && nums[len - 1] != '.')
            snprintf(nums + len, sizeof nums - len, ", ...");
        missing++;
    }
    size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s %s", missing == 1 ? "rank" : "ranks", nums);
}

static int fail_timeout(struct boot *b)
{
    char what[512] = "";
    for (int k = 0; k < b->nconns; k++) {
        const struct conn *c = &b->conns[k];
        if (c->outgoing && c->refused && c->phase != PH_DONE)
            return fail(b, TIDE_EAUTH,
                        "authentication failed: rank %d at %s could not prove our job token, "
                        "to the bootstrap deadline of %g s (TIDE_JOB_TOKEN differs there, or "
                        "something else answers at that address)",
                        c->peer, c->who, b->limit_s);
    }
    const struct conn *m = &b->conns[0]; /* rank > 0: the master connection */
    if (b->rank == 0) {
        snprintf(what, sizeof what, "waiting for ");
        list_missing(b, what, sizeof what);
        size_t len = strlen(what);
        snprintf(what + len, sizeof what - len, " to register with rank 0 at %s", b->master_str);
    } else if (m->phase < PH_SEND_PROOF) {
        const char *why = m->why[0]                        ? m->why
                          : m->phase == PH_RECV_CHALLENGE ? "no answer to our handshake"
                                                          : "not connected yet";
        snprintf(what, sizeof what, "could not reach rank 0 at %s (%s)", b->master_str, why);
    } else if (m->phase != PH_DONE) {
        snprintf(what, sizeof what,
                 "waiting for rank 0 at %s to send the address table (not every rank has "
                 "registered)",
                 b->master_str);
    } else {
        snprintf(what, sizeof what, "waiting for mesh connections with ");
        list_missing(b, what, sizeof what);
    }
    return fail(b, TIDE_EBOOTSTRAP, "bootstrap timed out after %g s: %s", b->limit_s, what);
}

static int run(struct boot *b)
{
    while (b->done < b->world - 1) {
        uint64_t now = tide__now_ns();
        if (now >= b->deadline_ns)
            return fail_timeout(b);
        int rc = run_timers(b, now);
        if (rc)
            return rc;
        int timeout_ms;
        int n = build_pollset(b, now, &timeout_ms);
        int ready = poll(b->pfd, (nfds_t)n, timeout_ms);
        if (ready < 0 && errno != EINTR)
            return fail(b, TIDE_EBOOTSTRAP, "poll: %s", strerror(errno));
        if (ready > 0 && (rc = dispatch(b, n)))
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Setup and teardown                                                  */
/* ------------------------------------------------------------------ */

static int check_config(struct boot *b, const tide_config *cfg)
{
    if (cfg->master_port < 1 || cfg->master_port > 65535)
        return fail(b, TIDE_EINVAL, "MASTER_PORT %d is not in 1..65535", cfg->master_port);
    b->limit_s = cfg->bootstrap_timeout_s > 0 ? cfg->bootstrap_timeout_s : cfg->timeout_s;
    if (!(b->limit_s > 0))
        return fail(b, TIDE_EINVAL, "no bootstrap deadline: set TIDE_BOOTSTRAP_TIMEOUT or "
                                    "TIDE_TIMEOUT to a positive number of seconds");
    b->deadline_ns = tide__now_ns() + tide__seconds_to_ns(b->limit_s);
    int rc = tide__addr_resolve(cfg->master_addr, cfg->master_port, &b->master, b->err, b->errlen);
    if (rc) {
        b->failed = 1;
        return rc;
    }
    tide__addr_format(&b->master, b->master_str, sizeof b->master_str);
    /* Decided before any socket is opened: without a token we must not
     * even dial a non-loopback address. */
    if (cfg->job_token[0] == '\0') {
        if (!tide__addr_is_loopback(&b->master))
            return fail(b, TIDE_EINVAL,
                        "no TIDE_JOB_TOKEN set and MASTER_ADDR %s is not loopback: set a "
                        "shared job token (tide-run sets one)",
                        cfg->master_addr);
        tide__log(TIDE_LOG_WARN, b->rank,
                  "no TIDE_JOB_TOKEN set: connections are not authenticated; fine on loopback "
                  "only");
    }
    if (sodium_init() < 0)
        return fail(b, TIDE_EBOOTSTRAP, "libsodium failed to initialise");
    tide__hs_key_derive(cfg->job_token, b->key);
    b->wire = tide__wire_mode_of(cfg);
    if (b->wire < 0)
        return fail(b, TIDE_EINVAL, "TIDE_WIRE_AUTH=\"%s\": expected auto, off, mac or encrypt",
                    cfg->wire_auth);
    if (b->wire != TIDE_WIRE_OFF && cfg->job_token[0] == '\0')
        return fail(b, TIDE_EINVAL,
                    "TIDE_WIRE_AUTH=%s needs a job token (TIDE_JOB_TOKEN): without one the "
                    "frames' keys would be public",
                    cfg->wire_auth);
    return 0;
}

static int alloc_boot(struct boot *b)
{
    b->nconns = b->world + MAX_PENDING;
    b->conns = calloc((size_t)b->nconns, sizeof *b->conns);
    b->pfd = calloc((size_t)b->nconns + 1, sizeof *b->pfd);
    b->pfd_conn = calloc((size_t)b->nconns + 1, sizeof *b->pfd_conn);
    b->table = calloc((size_t)b->world, TIDE_ADDR_WIRE_SIZE);
    b->have = calloc((size_t)b->world, 1);
    if (!b->conns || !b->pfd || !b->pfd_conn || !b->table || !b->have)
        return fail(b, TIDE_ENOMEM, "out of memory for a job of %d ranks", b->world);
    return 0;
}

/* Rank 0 listens; the others queue their dial to it. */
static int start(struct boot *b)
{
    if (b->rank != 0)
        return add_dial(b, 0, TIDE_HS_MASTER, &b->master);
    int fd = tide__addr_listen(&b->master);
    if (fd < 0)
        return fail(b, TIDE_EBOOTSTRAP, "rank 0 cannot listen on %s: %s", b->master_str,
                    strerror(-fd));
    b->listen_fd = fd;
    tide__addr_encode(&b->master, b->table); /* rank 0's entry */
    tide__log(TIDE_LOG_DEBUG, 0, "listening on %s for %d ranks", b->master_str, b->world - 1);
    return 0;
}

/* Success: hand every connection over in its final form. */
static int hand_over(struct boot *b, int *fds, struct tide__wire_keys *keys)
{
    for (int k = 0; k < b->nconns; k++) {
        struct conn *c = &b->conns[k];
        if (c->phase != PH_DONE)
            continue;
        int e = make_final(c->fd, b->congestion);
        if (e < 0)
            return fail(b, TIDE_EBOOTSTRAP, "cannot configure the socket to rank %d: %s",
                        c->peer, strerror(-e));
    }
    for (int k = 0; k < b->nconns; k++) {
        struct conn *c = &b->conns[k];
        if (c->phase != PH_DONE)
            continue;
        fds[c->peer] = c->fd;
        c->fd = -1; /* now the caller's */
        if (keys)
            keys[c->peer] = c->keys;
    }
    tide__log(TIDE_LOG_DEBUG, b->rank, "bootstrap complete: %d peers", b->world - 1);
    return 0;
}

static void cleanup(struct boot *b)
{
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    for (int k = 0; b->conns && k < b->nconns; k++)
        if (b->conns[k].phase != PH_FREE)
            close_conn(&b->conns[k]);
    sodium_memzero(b->key, sizeof b->key);
    free(b->conns);
    free(b->pfd);
    free(b->pfd_conn);
    free(b->table);
    free(b->have);
}

int tide__bootstrap(const tide_config *cfg, int *fds, struct tide__wire_keys *keys, char *err,
                    size_t errlen)
{
    struct boot b;
    memset(&b, 0, sizeof b);
    b.listen_fd = -1;
    b.err = err;
    b.errlen = errlen;
    if (err && errlen)
        err[0] = '\0';
    if (!cfg || !fds)
        return fail(&b, TIDE_EINVAL, "tide__bootstrap: cfg and fds are required");
    if (cfg->size < 1 || cfg->rank < 0 || cfg->rank >= cfg->size)
        return fail(&b, TIDE_EINVAL, "rank %d is not in a job of %d ranks", cfg->rank, cfg->size);
    b.rank = cfg->rank;
    b.world = cfg->size;
    b.congestion = cfg->tcp_congestion;
    for (int p = 0; p < b.world; p++)
        fds[p] = -1;
    if (b.world == 1)
        return 0;

    int rc = check_config(&b, cfg);
    if (!rc)
        rc = alloc_boot(&b);
    if (!rc)
        rc = start(&b);
    if (!rc)
        rc = run(&b);
    if (!rc)
        rc = hand_over(&b, fds, keys);
    cleanup(&b);
    return rc;
}
