/* trace_collect.c - at tide_finalize, bring every rank's trace to rank 0
 * and write one file.
 *
 *   1. each rank sends rank 0 its (host name, trace origin) and gets
 *      rank 0's: rank 0 learns who shares its clock (same host:
 *      CLOCK_MONOTONIC is one clock), the others rank 0's origin, which
 *      becomes time zero;
 *   2. ranks on other hosts estimate their clock's offset from rank 0's
 *      with a few ping-pongs (Cristian's method: the exchange with the
 *      shortest round trip, its midpoint);
 *   3. each rank writes its events as JSON in rank 0's time and sends
 *      rank 0 their length, then the text; rank 0 writes the file.
 *
 * It runs over the world communicator with the engine's own requests and
 * tags (p2p_req.c: no user receive can take these messages, and no
 * collective is involved), and waits at most TRACE_WAIT_MS per step: a
 * rank that never finalizes costs a minute, not TIDE_TIMEOUT.  A rank
 * whose events do not reach rank 0 writes <path>.rank<R>.json instead.
 * Buffers handed to the engine stay alive until tide__trace_free, after
 * the reactor stopped: a send that timed out may still be in the kernel. */
#include "engine/trace.h"
#include "engine/clock.h"
#include "engine/context.h"
#include "engine/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRACE_WAIT_MS 60000
#define CLOCK_ROUNDS 8
#define TAG_CLOCK (TIDE_ENGINE_TAG + 1)
#define TAG_TEXT (TIDE_ENGINE_TAG + 2)
#define TAG_INFO (TIDE_ENGINE_TAG + 3)
#define TAG_SIZE (TIDE_ENGINE_TAG + 4)

struct rank_info {
    char host[56];
    uint64_t origin_ns;
};

/* What the exchange holds on to until the reactor has stopped. */
struct tide__collect {
    struct tide__ctx *ctx;
    tide_comm *world;
    struct rank_info *info;   /* rank 0: every rank's; others: rank 0's and theirs */
    struct tide__text json;   /* this rank's events */
    uint64_t size_word;       /* a JSON length, sent or received */
    char *inbox;              /* rank 0: a peer's events */
    int64_t clock_word[2];
};

/* Wait for *req, posted with result rc (a pointer: the post fills it in
 * while the arguments are evaluated, in no set order). */
static int wait_for(int rc, tide_req **reqp)
{
    if (rc)
        return rc;
    tide_req *req = *reqp;
    int ms = TRACE_WAIT_MS;
    if (req->ctx->cfg.timeout_s * 1000 < ms)
        ms = (int)(req->ctx->cfg.timeout_s * 1000) + 1;
    rc = tide_wait(req, ms);
    tide_req_free(req);
    return rc;
}

static int p2p(struct tide__collect *c, enum tide__msg_dir dir, void *buf, size_t len, int peer,
               uint32_t tag)
{
    tide_req *req = NULL;
    return wait_for(tide__p2p_post(c->world, dir, buf, len, peer, tag, &req), &req);
}

/* Remote rank's clock minus rank 0's, measured from rank 0 (which keeps
 * the estimate with the shortest round trip) and sent to the rank. */
static int clock_offset_root(struct tide__collect *c, int peer)
{
    uint64_t best_rtt = UINT64_MAX;
    int64_t best = 0;
    for (int i = 0; i < CLOCK_ROUNDS; i++) {
        uint64_t t0 = tide__now_ns();
        int rc = p2p(c, TIDE_MSG_SEND, &c->clock_word[0], 8, peer, TAG_CLOCK);
        if (!rc)
            rc = p2p(c, TIDE_MSG_RECV, &c->clock_word[1], 8, peer, TAG_CLOCK);
        uint64_t t1 = tide__now_ns();
        if (rc)
            return rc;
        if (t1 - t0 < best_rtt) {
            best_rtt = t1 - t0;
            best = c->clock_word[1] - (int64_t)(t0 + (t1 - t0) / 2);
        }
    }
    c->clock_word[0] = best;
    return p2p(c, TIDE_MSG_SEND, &c->clock_word[0], 8, peer, TAG_CLOCK);
}

static int clock_offset_peer(struct tide__collect *c, int64_t *offset)
{
    for (int i = 0; i < CLOCK_ROUNDS; i++) {
        int rc = p2p(c, TIDE_MSG_RECV, &c->clock_word[0], 8, 0, TAG_CLOCK);
        c->clock_word[1] = (int64_t)tide__now_ns();
        if (!rc)
            rc = p2p(c, TIDE_MSG_SEND, &c->clock_word[1], 8, 0, TAG_CLOCK);
        if (rc)
            return rc;
    }
    int rc = p2p(c, TIDE_MSG_RECV, &c->clock_word[0], 8, 0, TAG_CLOCK);
    *offset = c->clock_word[0];
    return rc;
}

static bool same_host(const struct tide__collect *c, int r)
{
    return strcmp(c->info[r].host, c->info[0].host) == 0;
}

/* Steps 1 and 2: this rank's shift into rank 0's clock. */
static int align_clocks(struct tide__collect *c, int64_t *shift)
{
    struct tide__ctx *ctx = c->ctx;
    struct rank_info me = {.origin_ns = ctx->trace->origin_ns};
    gethostname(me.host, sizeof me.host - 1);
    c->info = calloc((size_t)ctx->size, sizeof *c->info);
    if (!c->info)
        return TIDE_ENOMEM;
    c->info[ctx->rank] = me;
    *shift = 0;
    int rc = 0;
    if (ctx->rank != 0) {
        rc = p2p(c, TIDE_MSG_SEND, &c->info[ctx->rank], sizeof me, 0, TAG_INFO);
        if (!rc)
            rc = p2p(c, TIDE_MSG_RECV, &c->info[0], sizeof me, 0, TAG_INFO);
        if (rc)
            return rc;
        return same_host(c, ctx->rank) ? 0 : clock_offset_peer(c, shift);
    }
    for (int r = 1; r < ctx->size && !rc; r++)
        rc = p2p(c, TIDE_MSG_RECV, &c->info[r], sizeof me, r, TAG_INFO);
    for (int r = 1; r < ctx->size && !rc; r++)
        rc = p2p(c, TIDE_MSG_SEND, &c->info[0], sizeof me, r, TAG_INFO);
    for (int r = 1; r < ctx->size && !rc; r++)
        if (!same_host(c, r))
            rc = clock_offset_root(c, r);
    return rc;
}

static FILE *open_trace(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        tide__log(TIDE_LOG_ERROR, -1, "TIDE_TRACE: cannot write %s: %s", path, strerror(errno));
    return f;
}

static void write_head(FILE *f, int ranks)
{
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"source\":\"tide\",\"ranks\":%d},"
               "\"traceEvents\":[\n",
            ranks);
}

static int write_tail(FILE *f, const char *path)
{
    fputs("\n]}\n", f);
    if (fclose(f) == 0)
        return 0;
    tide__log(TIDE_LOG_ERROR, -1, "TIDE_TRACE: writing %s failed: %s", path, strerror(errno));
    return -1;
}

/* This rank's events alone, in <path>.rank<R>.json. */
static void write_own(struct tide__collect *c, const char *why)
{
    struct tide__ctx *ctx = c->ctx;
    if (c->json.failed) { /* half a text is not JSON: write nothing */
        tide__log(TIDE_LOG_ERROR, ctx->rank, "TIDE_TRACE: out of memory; this rank's events are lost");
        return;
    }
    char path[sizeof ctx->trace->path + 32];
    snprintf(path, sizeof path, "%s.rank%d.json", ctx->trace->path, ctx->rank);
    tide__log(TIDE_LOG_WARN, ctx->rank, "TIDE_TRACE: %s; this rank's events go to %s", why, path);
    FILE *f = open_trace(path);
    if (!f)
        return;
    write_head(f, 1);
    fwrite(c->json.s, 1, c->json.len, f);
    write_tail(f, path);
}

/* Rank 0: its own events, then each rank's as it arrives. */
static void write_all(struct tide__collect *c)
{
    struct tide__ctx *ctx = c->ctx;
    const char *path = ctx->trace->path;
    FILE *f = open_trace(path);
    if (!f)
        return;
    write_head(f, ctx->size);
    fwrite(c->json.s, 1, c->json.len, f);
    int missing = 0;
    for (int r = 1; r < ctx->size; r++) {
        int rc = p2p(c, TIDE_MSG_RECV, &c->size_word, sizeof c->size_word, r, TAG_SIZE);
        size_t len = (size_t)c->size_word;
        char *buf = rc ? NULL : realloc(c->inbox, len ? len : 1);
        if (!rc && !buf)
            rc = TIDE_ENOMEM;
        if (buf)
            c->inbox = buf;
        if (!rc)
            rc = p2p(c, TIDE_MSG_RECV, c->inbox, len, r, TAG_TEXT);
        if (rc) {
            tide__log(TIDE_LOG_WARN, 0, "TIDE_TRACE: no events from rank %d (%s)", r,
                      tide_strerror(rc));
            missing++;
            if (rc == TIDE_ETIMEDOUT)
                break; /* its receive stays posted into inbox: do not reuse it */
            continue;
        }
        fputs(",\n", f);
        fwrite(c->inbox, 1, len, f);
    }
    if (!write_tail(f, path))
        tide__log(TIDE_LOG_INFO, 0, "TIDE_TRACE: wrote %s (%d of %d ranks)", path,
                  ctx->size - missing, ctx->size);
}

static int exchange(struct tide__collect *c, const char *host, int64_t shift)
{
    struct tide__ctx *ctx = c->ctx;
    tide__trace_json(ctx->trace, ctx->rank, host, shift, c->info[0].origin_ns, &c->json);
    if (c->json.failed)
        return TIDE_ENOMEM;
    if (ctx->rank == 0)
        return 0; /* write_all receives the rest */
    c->size_word = c->json.len;
    int rc = p2p(c, TIDE_MSG_SEND, &c->size_word, sizeof c->size_word, 0, TAG_SIZE);
    return rc ? rc : p2p(c, TIDE_MSG_SEND, c->json.s, c->json.len, 0, TAG_TEXT);
}

void tide__trace_collect(struct tide__ctx *ctx)
{
    struct tide__trace *tr = ctx->trace;
    if (!tr)
        return;
    struct tide__collect *c = calloc(1, sizeof *c);
    if (!c) {
        tide__log(TIDE_LOG_ERROR, ctx->rank, "TIDE_TRACE: out of memory; no trace written");
        return;
    }
    c->ctx = ctx;
    c->world = &ctx->world;
    tr->collect = c;
    atomic_store(&tr->closed, 1);
    int64_t shift = 0;
    int rc = ctx->size > 1 ? align_clocks(c, &shift) : 0;
    char host[56] = "";
    gethostname(host, sizeof host - 1);
    if (!rc && ctx->size > 1) {
        rc = exchange(c, host, shift);
    } else if (!rc) { /* alone: no exchange, our clock is the clock */
        tide__trace_json(tr, 0, host, 0, tr->origin_ns, &c->json);
        rc = c->json.failed ? TIDE_ENOMEM : 0;
    }
    if (rc) {
        if (!c->json.len && !c->json.failed) /* failed before serializing */
            tide__trace_json(tr, ctx->rank, host, 0, tr->origin_ns, &c->json);
        write_own(c, tide_strerror(rc));
        return;
    }
    if (ctx->rank == 0)
        write_all(c);
}

void tide__collect_free(struct tide__collect *c)
{
    if (!c)
        return;
    free(c->info);
    free(c->json.s);
    free(c->inbox);
    free(c);
}
