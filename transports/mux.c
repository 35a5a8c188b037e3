/* mux.c - see mux.h. */
#include "transports/mux.h"
#include "engine/context.h"

#include <stdlib.h>
#include <string.h>

struct tide__mux {
    struct tide__transport base;
    struct tide__transport **parts; /* [nparts] */
    int nparts, size;
    uint8_t *route; /* [size] */
};

static struct tide__mux *mux_of(struct tide__transport *base)
{
    return container_of(base, struct tide__mux, base);
}

static struct tide__transport *part_of(struct tide__transport *base, int peer)
{
    struct tide__mux *x = mux_of(base);
    return x->parts[x->route[peer]];
}

static void start(struct tide__transport *base)
{
    struct tide__mux *x = mux_of(base);
    for (int i = 0; i < x->nparts; i++)
        x->parts[i]->ops->start(x->parts[i]);
}

static struct tide__transport *stager(struct tide__transport *base);

/* A watch goes to the part with the board area, whichever rank it waits
 * for (our own included, whose messages go over TCP). */
static struct tide__transport *part_for(struct tide__transport *base, const tide__msg *m)
{
    return m->dir == TIDE_MSG_WATCH ? stager(base) : part_of(base, m->peer);
}

static void post(struct tide__transport *base, tide__msg *m)
{
    struct tide__transport *t = part_for(base, m);
    t->ops->post(t, m);
}

static int withdraw(struct tide__transport *base, tide__msg *m, int err)
{
    struct tide__transport *t = part_for(base, m);
    return t->ops->withdraw(t, m, err);
}

static const char *peer_reason(struct tide__transport *base, int peer)
{
    if (peer < 0 || peer >= mux_of(base)->size)
        return NULL;
    struct tide__transport *t = part_of(base, peer);
    return t->ops->peer_reason(t, peer);
}

static const char *peer_transport(struct tide__transport *base, int peer)
{
    struct tide__transport *t = part_of(base, peer);
    return t->ops->peer_transport ? t->ops->peer_transport(t, peer) : t->ops->name;
}

static void abort_all(struct tide__transport *base, int err)
{
    struct tide__mux *x = mux_of(base);
    for (int i = 0; i < x->nparts; i++)
        x->parts[i]->ops->abort(x->parts[i], err);
}

static int poll_all(struct tide__transport *base)
{
    struct tide__mux *x = mux_of(base);
    int n = 0;
    for (int i = 0; i < x->nparts; i++)
        if (x->parts[i]->ops->poll)
            n += x->parts[i]->ops->poll(x->parts[i]);
    return n;
}

static void arm(struct tide__transport *base)
{
    struct tide__mux *x = mux_of(base);
    for (int i = 0; i < x->nparts; i++)
        if (x->parts[i]->ops->arm)
            x->parts[i]->ops->arm(x->parts[i]);
}

static unsigned outstanding(struct tide__transport *base)
{
    struct tide__mux *x = mux_of(base);
    unsigned n = 0;
    for (int i = 0; i < x->nparts; i++)
        n += x->parts[i]->ops->outstanding(x->parts[i]);
    return n;
}

/* The staging area is the one part's that has it (shared memory): it
 * serves our own rank too, though messages to ourselves go over TCP. */
static struct tide__transport *stager(struct tide__transport *base)
{
    struct tide__mux *x = mux_of(base);
    for (int i = 0; i < x->nparts; i++)
        if (x->parts[i]->ops->stage_at)
            return x->parts[i];
    return NULL;
}

static uint8_t *stage_at(struct tide__transport *base, int peer, size_t *bytes,
                         size_t *slot_bytes)
{
    struct tide__transport *t = stager(base);
    return t ? t->ops->stage_at(t, peer, bytes, slot_bytes) : NULL;
}

static long stage_take(struct tide__transport *base)
{
    struct tide__transport *t = stager(base);
    return t ? t->ops->stage_take(t) : -1;
}

static void stage_give(struct tide__transport *base, long off)
{
    struct tide__transport *t = stager(base);
    if (t)
        t->ops->stage_give(t, off);
}

static uint8_t *board_at(struct tide__transport *base, int peer)
{
    struct tide__transport *t = stager(base);
    return t && t->ops->board_at ? t->ops->board_at(t, peer) : NULL;
}

static void board_raise(struct tide__transport *base, const int *peers, int n)
{
    struct tide__transport *t = stager(base);
    if (t && t->ops->board_raise)
        t->ops->board_raise(t, peers, n);
}

/* Hosts, likewise: shared memory's setup is what learned them. */
static int host_of(struct tide__transport *base, int peer)
{
    struct tide__mux *x = mux_of(base);
    for (int i = 0; i < x->nparts; i++)
        if (x->parts[i]->ops->host_of)
            return x->parts[i]->ops->host_of(x->parts[i], peer);
    return peer;
}

static void destroy(struct tide__transport *base)
{
    struct tide__mux *x = mux_of(base);
    for (int i = 0; i < x->nparts; i++)
        x->parts[i]->ops->destroy(x->parts[i]);
    free(x->parts);
    free(x->route);
    free(x);
}

/* Every rank routed to one of the nparts parts. */
static bool routes_valid(const uint8_t *route, int size, int nparts)
{
    for (int p = 0; p < size; p++)
        if (route[p] >= nparts)
            return false;
    return true;
}

static const struct tide__transport_ops mux_ops = {
    .name = "mux",
    .start = start,
    .post = post,
    .withdraw = withdraw,
    .peer_reason = peer_reason,
    .abort = abort_all,
    .poll = poll_all,
    .arm = arm,
    .outstanding = outstanding,
    .destroy = destroy,
    .peer_transport = peer_transport,
    .stage_at = stage_at,
    .stage_take = stage_take,
    .stage_give = stage_give,
    .board_at = board_at,
    .board_raise = board_raise,
    .host_of = host_of,
};

int tide__mux_create(struct tide__ctx *ctx, struct tide__transport **parts, int nparts,
                     const uint8_t *route, struct tide__transport **out)
{
    bool valid = nparts >= 1 && nparts <= TIDE_MUX_MAX_PARTS &&
                 routes_valid(route, ctx->size, nparts);
    struct tide__mux *x = valid ? calloc(1, sizeof *x) : NULL;
    uint8_t *r = valid ? malloc((size_t)ctx->size) : NULL;
    struct tide__transport **p = valid ? calloc((size_t)nparts, sizeof *p) : NULL;
    if (!x || !r || !p) {
        for (int i = 0; i < nparts; i++)
            parts[i]->ops->destroy(parts[i]);
        free(x);
        free(r);
        free(p);
        return valid ? TIDE_ENOMEM : TIDE_EINVAL;
    }
    memcpy(r, route, (size_t)ctx->size);
    memcpy(p, parts, (size_t)nparts * sizeof *p);
    x->base.ops = &mux_ops;
    x->base.ctx = ctx;
    x->nparts = nparts;
    x->size = ctx->size;
    x->route = r;
    x->parts = p;
    *out = &x->base;
    return 0;
}
