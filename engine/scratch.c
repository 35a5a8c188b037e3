/* scratch.c - temporary buffers for collectives (a partner's half of a
 * vector, a ring's chunk slots), kept after use so that a training loop
 * calling the same collectives over and over stops allocating after its
 * first step.  Reactor thread only, so no lock.
 *
 * The cache is small on purpose: a few buffers, best fit on reuse, and a
 * cap on the bytes it keeps so one huge collective does not pin its
 * scratch forever. */
#include "engine/context.h"

#include <stdlib.h>

#define CACHE_SLOTS 8
#define CACHE_MAX_BYTES ((size_t)256 << 20)

void *tide__scratch_get(struct tide__ctx *ctx, size_t len)
{
    struct tide__scratch_cache *sc = &ctx->scratch;
    if (len == 0)
        return malloc(1); /* a cached buffer would come back as 0 bytes, its size lost */
    int best = -1;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (!sc->buf[i] || sc->len[i] < len)
            continue;
        if (best < 0 || sc->len[i] < sc->len[best])
            best = i;
    }
    if (best >= 0) {
        void *buf = sc->buf[best];
        sc->total -= sc->len[best];
        sc->buf[best] = NULL;
        return buf;
    }
    return malloc(len ? len : 1);
}

/* Callers give back the length they asked for, which may undercount a
 * reused buffer: the cache then only underuses it. */
void tide__scratch_put(struct tide__ctx *ctx, void *buf, size_t len)
{
    struct tide__scratch_cache *sc = &ctx->scratch;
    if (!buf)
        return;
    if (len == 0) {
        free(buf);
        return;
    }
    int slot = -1;
    for (int i = 0; i < CACHE_SLOTS && slot < 0; i++)
        if (!sc->buf[i])
            slot = i;
    if (slot < 0) { /* full: evict the smallest if it is smaller */
        slot = 0;
        for (int i = 1; i < CACHE_SLOTS; i++)
            if (sc->len[i] < sc->len[slot])
                slot = i;
        if (sc->len[slot] >= len) {
            free(buf);
            return;
        }
        sc->total -= sc->len[slot];
        free(sc->buf[slot]);
        sc->buf[slot] = NULL;
    }
    if (sc->total + len > CACHE_MAX_BYTES) {
        free(buf);
        return;
    }
    sc->buf[slot] = buf;
    sc->len[slot] = len;
    sc->total += len;
}

void tide__scratch_free_all(struct tide__ctx *ctx)
{
    struct tide__scratch_cache *sc = &ctx->scratch;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        free(sc->buf[i]);
        sc->buf[i] = NULL;
    }
    sc->total = 0;
}
