/* signature.c - a collective's wire signature (kind, count, dtype, op,
 * root, algorithm) in words, for the messages of ranks that called
 * different collectives: "allreduce of 1000 float32 (sum) [ring]".
 * Naming collectives is this layer's business, not the engine's: the
 * engine's mismatch and deadline reports and its flight recorder call
 * these through the namer each request hands its context
 * (tide__coll_req_new; engine/names.c). */
#include "collectives/coll.h"

#include <stdio.h>

static const char *kind_name(uint8_t kind)
{
    static const char *names[] = {"?", "p2p", "barrier", "allreduce", "broadcast", "reduce",
                                  "allgather", "allgatherv", "reduce_scatter", "reduce_scatterv",
                                  "gather", "scatter", "alltoall", "poison", "agree"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

static void describe(const struct tide__frame *s, char *buf, size_t len)
{
    const char *kind = kind_name(s->kind);
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

static const struct tide__namer namer = {kind_name, describe};

tide_req *tide__coll_req_new(tide_comm *comm, const struct tide__op_vtbl *vt, size_t size)
{
    tide__ctx_set_namer(comm->ctx, &namer);
    return tide__req_new(comm, vt, size);
}
