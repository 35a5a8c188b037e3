/* names.c - how the engine names a frame's kind, and describes a
 * collective's signature ("allreduce of 8 float32 (sum) [ring]"), in
 * error messages, deadline reports and the flight recorder's dumps.
 *
 * Collectives and their algorithms are the collective layer's to name
 * (collectives/signature.c): it hands its namer to each context as it
 * makes requests on it (tide__ctx_set_namer), so a context has one
 * before any of its operations can fail, stall or be dumped.  The
 * engine calls through that table and never by symbol, so that engine/
 * depends on nothing above it.  Without a namer (a context that has run
 * nothing of the collective layer's) a kind is its number, except the
 * engine's own (p2p, poison, agree). */
#include "engine/context.h"

#include <stdio.h>

void tide__ctx_set_namer(struct tide__ctx *ctx, const struct tide__namer *namer)
{
    /* Every request passes here: a store only the first time, so the
     * calls of a busy loop do not write the context's line. */
    if (atomic_load_explicit(&ctx->namer, memory_order_relaxed) != namer)
        atomic_store_explicit(&ctx->namer, namer, memory_order_release);
}

static const struct tide__namer *namer_of(const struct tide__ctx *ctx)
{
    return atomic_load_explicit(&ctx->namer, memory_order_acquire);
}

const char *tide__kind_name(const struct tide__ctx *ctx, uint8_t kind)
{
    const struct tide__namer *n = namer_of(ctx);
    if (n)
        return n->kind_name(kind);
    switch (kind) {
    case TIDE_KIND_P2P:
        return "p2p";
    case TIDE_KIND_POISON:
        return "poison";
    case TIDE_KIND_AGREE:
        return "agree";
    }
    return "?";
}

void tide__describe_signature(const struct tide__ctx *ctx, const struct tide__frame *s, char *buf,
                              size_t len)
{
    const struct tide__namer *n = namer_of(ctx);
    if (n) {
        n->describe(s, buf, len);
        return;
    }
    snprintf(buf, len, "kind %u of %llu %s", s->kind, (unsigned long long)s->count,
             tide_dtype_name((tide_dtype)s->dtype));
}
