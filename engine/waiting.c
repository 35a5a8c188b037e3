/* waiting.c - what a pending request waits for, in words and as lists of
 * peers: the account a deadline gives, and what the flight recorder keeps.
 *
 * A request's live messages are exactly what it waits on: a receive not
 * yet complete is data a peer has not sent (or not finished sending); a
 * send not yet complete is bytes a peer has not taken off the wire.  So
 * "who is behind" is read from them, with nothing kept on the data path.
 *
 * Peers are world ranks, like every rank in the engine's messages.
 * Reactor thread only. */
#include "engine/context.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Add peer to a list of distinct peers (at most max); false when full. */
static bool add_peer(int *peers, int *n, int max, int peer)
{
    for (int i = 0; i < *n; i++)
        if (peers[i] == peer)
            return true;
    if (*n == max)
        return false;
    peers[(*n)++] = peer;
    return true;
}

/* A watch (a board's flag, collectives/board.c) waits on its peer as a
 * receive does. */
static bool same_dir(uint8_t dir, enum tide__msg_dir want)
{
    return dir == want || (dir == TIDE_MSG_WATCH && want == TIDE_MSG_RECV);
}

/* A request made of requests (subreq.c) waits on what its running parts
 * wait on. */
static void collect(const tide_req *req, enum tide__msg_dir dir, int *peers, int *n, int max,
                    int *more)
{
    for (const tide__msg *m = req->live; m; m = m->req_next) {
        if (m->completed)
            continue;
        if (m->dir == TIDE_MSG_OP)
            collect(m->buf, dir, peers, n, max, more);
        else if (same_dir(m->dir, dir) && !add_peer(peers, n, max, m->peer))
            (*more)++;
    }
}

int tide__req_waits_on(const tide_req *req, enum tide__msg_dir dir, int *peers, int max)
{
    int n = 0, more = 0;
    collect(req, dir, peers, &n, max, &more);
    return n + more;
}

/* Append printf-style to buf at *at, never past len. */
__attribute__((format(printf, 4, 5))) static void put(char *buf, size_t len, size_t *at,
                                                      const char *fmt, ...)
{
    if (*at >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    if (k > 0)
        *at = *at + (size_t)k < len ? *at + (size_t)k : len;
}

#define SHOWN 12 /* peers named per direction; the rest are counted */

/* ": waits for data from ranks 3, 5 (tag 2)" for one direction. */
static void put_peers(const tide_req *req, enum tide__msg_dir dir, const char *what, char *buf,
                      size_t len, size_t *at)
{
    int peers[SHOWN];
    int n = tide__req_waits_on(req, dir, peers, SHOWN);
    if (n == 0)
        return;
    put(buf, len, at, "; %s rank%s ", what, n > 1 ? "s" : "");
    int shown = n < SHOWN ? n : SHOWN;
    for (int i = 0; i < shown; i++)
        put(buf, len, at, "%s%d", i ? "," : "", peers[i]);
    if (n > shown)
        put(buf, len, at, " and %d more", n - shown);
}

void tide__req_describe_wait(const tide_req *req, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    if (req->seq) {
        char sig[128];
        tide__describe_signature(req->ctx, &req->sig, sig, sizeof sig);
        put(buf, len, &at, "%s on comm %u, %zu bytes, algorithm %s", sig, req->comm->id,
            req->op_bytes, req->algorithm);
    } else {
        put(buf, len, &at, "%s on comm %u, %zu bytes", req->opname, req->comm->id, req->op_bytes);
    }
    if (req->vt->describe) {
        char step[64];
        req->vt->describe(req, step, sizeof step);
        put(buf, len, &at, " at %s", step);
    }
    put(buf, len, &at, "; ");
    tide__req_describe_peers(req, buf + at, len - at);
}

void tide__req_describe_peers(const tide_req *req, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    put_peers(req, TIDE_MSG_RECV, "no data yet from", buf, len, &at);
    put_peers(req, TIDE_MSG_SEND, "sends not taken by", buf, len, &at);
    if (at >= 2) /* drop the first separator */
        memmove(buf, buf + 2, at - 2 + 1);
    else
        snprintf(buf, len, "no message outstanding");
}
