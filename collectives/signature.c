/* signature.c - a collective's wire signature (kind, count, dtype, op,
 * root, algorithm) in words, for the messages of ranks that called
 * different collectives: "allreduce of 1000 float32 (sum) [ring]".  The
 * engine's mismatch reports (engine/mismatch.c) call it through the
 * declaration in engine/context.h; naming collectives is this layer's
 * business, not the engine's. */
#include "collectives/coll.h"

#include <stdio.h>

const char *tide__kind_name(uint8_t kind)
{
    static const char *names[] = {"?", "p2p", "barrier", "allreduce", "broadcast", "reduce",
                                  "allgather", "allgatherv", "reduce_scatter", "reduce_scatterv",
                                  "gather", "scatter", "alltoall", "poison", "agree"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

void tide__describe_signature(const struct tide__frame *s, char *buf, size_t len)
{
    const char *kind = tide__kind_name(s->kind);
    if (s->kind == TIDE_KIND_BARRIER) {
        snprintf(buf, len, "barrier");
        return;
    }
    int n = snprintf(buf, len, "%s of %llu %s", kind, (unsigned long long)s->count,
                     tide_dtype_name((tide_dtype)s->dtype));
    bool reduces = s->kind == TIDE_KIND_ALLREDUCE || s->kind == TIDE_KIND_REDUCE ||
                   s->kind == TIDE_KIND_REDUCE_SCATTER || s->kind == TIDE_KIND_REDUCE_SCATTERV;
    if (reduces && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " (%s)", tide_op_name((tide_op)s->redop));
    if (s->root >= 0 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " from root %d", s->root);
    if (s->flags && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " [%s]", tide__algo_name_of(s->flags));
}

