/* coll.c - the machinery every collective shares: messages carrying the
 * collective's signature, blocks, scratch, and the round driver. */
#include "collectives/coll.h"
#include "engine/streaming_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Collectives whose receivers may pull a payload out of the sender's
 * buffer (transport.h, pull): those whose bytes flow one way, down or up
 * a tree, where a sender waits on nothing from its receiver while that
 * one copies; the all-gather, whose blocks each rank only forwards; and
 * the all-to-all, whose blocks come straight from the input.
 * Where ranks combine what they exchange (all-reduce, reduce-scatter)
 * they write into the buffers their peers just read from, and each
 * store first takes its line back: 2 ranks over shared memory,
 * TIDE_SHM_CMA=1 against the rings, all-reduce 128 KiB 42 us against 30.
 * The all-gather had lost the same way until recursive doubling sent its
 * own block from the input (recursive.c, rdg_post): 2026-11-29, 2 ranks,
 * two rounds, pulled against the rings, us, 256 KiB 12.9-13.0 against
 * 28.8-29.7, 512 KiB 23.4-24.4 against 54.3-55.0 (Open MPI vader 18.0,
 * 32.1-34.4); 4 ranks sharing the 2 cores level or faster.  The
 * all-to-all, pulled against the rings: 2 ranks, three rounds, 1 MiB
 * 46-60 against 86-101 (vader 55-66); 4 ranks sharing the cores, three
 * rounds, 1 MiB 180-203 against 572-580, 2 MiB 339-349 against
 * 1209-1320 (vader at 1 MiB in another hour 249, when the rings took
 * 652-742).  One earlier pair of rounds on 4 ranks had it slower (1 MiB
 * 176 against 140-142), in an hour when the rings were four times as
 * fast as in these. */
static bool pullable(uint8_t kind)
{
    return kind == TIDE_KIND_BROADCAST || kind == TIDE_KIND_SCATTER ||
           kind == TIDE_KIND_GATHER || kind == TIDE_KIND_REDUCE || kind == TIDE_KIND_ALLGATHER ||
           kind == TIDE_KIND_ALLTOALL;
}

void tide__coll_post(struct tide__coll *c, tide__msg *m, enum tide__msg_dir dir, int peer,
                     uint32_t tag, void *buf, size_t bytes)
{
    tide__msg_init(m, &c->req, dir, peer, c->kind, tag, buf, bytes);
    m->pull = dir == TIDE_MSG_SEND && pullable(c->kind);
    tide__req_post(&c->req, m);
}

static void post_round_msg(struct tide__coll *c, enum tide__msg_dir dir, int peer, void *buf,
                           size_t bytes)
{
    if (c->nmsg == TIDE_COLL_MSGS) {
        tide__req_fail(&c->req, TIDE_EPROTO, "internal error: too many messages in round %d",
                       c->round);
        return;
    }
    tide__msg *m = &c->msg[c->nmsg++];
    c->pending++;
    tide__coll_post(c, m, dir, peer, (uint32_t)c->round, buf, bytes);
}

void tide__coll_send(struct tide__coll *c, int peer, const void *buf, size_t bytes)
{
    /* The transport only reads a send's buffer. */
    post_round_msg(c, TIDE_MSG_SEND, peer, (void *)buf, bytes);
}

void tide__coll_recv(struct tide__coll *c, int peer, void *buf, size_t bytes)
{
    post_round_msg(c, TIDE_MSG_RECV, peer, buf, bytes);
}

int tide__coll_scratch(struct tide__coll *c, size_t len)
{
    if (c->scratch) {
        tide__req_fail(&c->req, TIDE_EPROTO, "internal error: scratch taken twice");
        return TIDE_EPROTO;
    }
    c->scratch = tide__scratch_get(c->req.ctx, len);
    if (!c->scratch) {
        tide__req_fail(&c->req, TIDE_ENOMEM, "cannot allocate %zu bytes of scratch", len);
        return TIDE_ENOMEM;
    }
    c->scratch_len = len;
    return 0;
}

size_t tide__blocks_off(const struct tide__blocks *blk, int n, int b)
{
    if (blk->offs)
        return blk->offs[b];
    if (blk->each)
        return (size_t)b * blk->each;
    size_t base = blk->total / (size_t)n, extra = blk->total % (size_t)n, ub = (size_t)b;
    return ub * base + (ub < extra ? ub : extra);
}

size_t tide__blk_off(const struct tide__coll *c, int b)
{
    return tide__blocks_off(&c->blk, c->req.comm->size, b);
}

size_t tide__blk_len(const struct tide__coll *c, int b)
{
    return tide__blk_off(c, b + 1) - tide__blk_off(c, b);
}

void tide__coll_copy(const struct tide__coll *c, void *dst, const void *src, size_t bytes)
{
    if (bytes && !c->req.ctx->timing_only)
        memcpy(dst, src, bytes);
}

void tide__coll_copy_streaming(const struct tide__coll *c, void *dst, const void *src,
                               size_t bytes)
{
    if (bytes && !c->req.ctx->timing_only)
        tide__copy_streaming(dst, src, bytes);
}

void tide__coll_reduce(const struct tide__coll *c, void *dst, const void *a, const void *b,
                       size_t n)
{
    if (n && !c->req.ctx->timing_only)
        tide__reduce(c->dtype, c->op, dst, a, b, n);
}

void tide__coll_rotate(const struct tide__coll *c, void *dst, const void *src, int n, int k,
                       size_t bb)
{
    char *out = dst;
    const char *in = src;
    tide__coll_copy(c, out + (size_t)k * bb, in, (size_t)(n - k) * bb);
    tide__coll_copy(c, out, in + (size_t)(n - k) * bb, (size_t)k * bb);
}

void tide__coll_avg(struct tide__coll *c, void *buf, size_t n)
{
    if (c->op == TIDE_AVG && n && !c->req.ctx->timing_only)
        tide__reduce_avg(c->dtype, buf, n, c->req.comm->size);
}

void tide__coll_succeed(struct tide__coll *c)
{
    if (c->stage_to)
        tide__coll_copy(c, c->stage_to, c->recvbuf, c->stage_bytes);
    tide__req_succeed(&c->req);
}

void tide__coll_release(tide_req *req)
{
    struct tide__coll *c = (struct tide__coll *)req;
    if (c->stage_to) {
        free(c->recvbuf);
        c->recvbuf = NULL;
        c->stage_to = NULL;
    }
    tide__scratch_put(req->ctx, c->scratch, c->scratch_len);
    c->scratch = NULL;
    free(c->blk.offs);
    c->blk.offs = NULL;
}

/* ---- the round driver ---- */

/* Run rounds until one has messages in flight, or the last is done. */
static void advance(struct tide__coll *c)
{
    const struct tide__rounds *rs = c->algo->rounds;
    while (c->pending == 0 && !c->req.failing && !c->req.finished) {
        if (c->round >= 0 && rs->end_round)
            rs->end_round(c, c->round);
        if (c->req.failing)
            return;
        if (++c->round >= c->nrounds) {
            if (rs->finish)
                rs->finish(c);
            if (!c->req.failing)
                tide__coll_succeed(c);
            return;
        }
        c->nmsg = 0;
        rs->post_round(c, c->round);
    }
}

static void rounds_start(tide_req *req)
{
    struct tide__coll *c = (struct tide__coll *)req;
    c->round = -1;
    c->pending = 0;
    c->nrounds = 0;
    int rc = c->algo->rounds->setup ? c->algo->rounds->setup(c) : 0;
    if (rc) {
        tide__req_fail(req, rc, "%s: cannot set up", c->algo->name); /* no-op if failed already */
        return;
    }
    advance(c);
}

static void rounds_step(tide_req *req, tide__msg *m)
{
    struct tide__coll *c = (struct tide__coll *)req;
    (void)m;
    if (--c->pending == 0)
        advance(c);
}

static void rounds_describe(const tide_req *req, char *buf, size_t len)
{
    const struct tide__coll *c = (const struct tide__coll *)req;
    snprintf(buf, len, "round %d of %d", c->round + 1, c->nrounds);
}

const struct tide__op_vtbl tide__coll_vtbl = {"collective", rounds_start, rounds_step,
                                              tide__coll_release, rounds_describe};

/* ---- a group of one: the result is the input ---- */

static void local_start(tide_req *req)
{
    struct tide__coll *c = (struct tide__coll *)req;
    size_t n = tide__blk_len(c, 0); /* with one rank, block 0 is all */
    if (c->kind != TIDE_KIND_BROADCAST && n && c->sendbuf != c->recvbuf)
        memmove(c->recvbuf, c->sendbuf, n * c->esize);
    tide__coll_succeed(c);
}

static const struct tide__op_vtbl local_vtbl = {"collective", local_start, NULL,
                                                tide__coll_release, NULL};

const struct tide__algo tide__algo_local = {"local", sizeof(struct tide__coll), &local_vtbl, NULL, NULL, NULL};
