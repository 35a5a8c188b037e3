/* revoke.c - tide_comm_revoke: waking every rank out of a communicator
 * that cannot go on (MPI ULFM's MPI_Comm_revoke).
 *
 * A lost rank fails only the operations that talk to it.  A rank that
 * waits on a healthy peer (which itself failed and stopped calling) is
 * told nothing and waits out its deadline.  Revoking says "this
 * communicator is finished" to every rank at once:
 *
 *   revoking rank          other ranks
 *   -------------          -----------
 *   mark comm revoked      poison frame (comm, seq TIDE_REVOKE_SEQ,
 *   notice to all  ----->  tag -TIDE_EREVOKED, root = origin)
 *   fail its pending ops   first notice: mark, forward to all, fail pending
 *                          later notices: ignored
 *
 * Forwarding costs n^2 small frames per revoke, and buys reliability: a
 * rank that dies halfway through its sends still reaches everyone
 * through whoever heard it.  The notice is a poison frame, so it needs
 * nothing new from the transports (they hand poison to the engine,
 * never to matching).
 *
 * Reactor thread, except tide_comm_revoke itself, which posts a request
 * to get there (so it works the same in thread, inline and simulated
 * runs). */
#include "engine/context.h"
#include "engine/log.h"

#include <stdio.h>

void tide__comm_revoked(tide_comm *comm, int origin, int from)
{
    struct tide__ctx *ctx = comm->ctx;
    if (atomic_exchange(&comm->revoked, true))
        return;
    char text[96];
    snprintf(text, sizeof text, "rank %d revoked communicator %u", origin, comm->id);
    tide__log(TIDE_LOG_INFO, ctx->rank, "%s (heard from rank %d)", text, from);
    tide__poison_comm(ctx, comm, TIDE_REVOKE_SEQ, TIDE_EREVOKED, origin + 1, text);
    /* From the head again after each: failing one may finish others (a
     * request made of requests, subreq.c, its parts). */
    tide_req *req = ctx->active;
    while (req) {
        if (req->comm != comm || req->survives_revoke || req->failing || req->finished) {
            req = req->act_next;
            continue;
        }
        req->told_by_peer = true; /* everyone hears the notice: no poison per op */
        tide__req_fail(req, TIDE_EREVOKED, "%s", text);
        req = ctx->active;
    }
}

/* The request that carries a revoke to the reactor thread. */
static void revoke_start(tide_req *req)
{
    int me = req->ctx->rank;
    tide__comm_revoked(req->comm, me, me);
    tide__req_succeed(req);
}

static void revoke_step(tide_req *req, tide__msg *m)
{
    (void)m; /* it posts no messages of its own: its notices are the engine's */
    tide__req_fail(req, TIDE_EPROTO, "internal error: a message completed for a revoke");
}

static const struct tide__op_vtbl revoke_vtbl = {"revoke", revoke_start, revoke_step, NULL,
                                                 NULL};

int tide_comm_revoke(tide_comm *comm)
{
    if (!comm || tide__comm_usable(comm, "tide_comm_revoke"))
        return TIDE_EINVAL;
    tide_req *req = tide__req_new(comm, &revoke_vtbl, sizeof *req);
    if (!req)
        return TIDE_ENOMEM;
    req->survives_revoke = true; /* revoking twice is harmless */
    tide__wait_next();
    return tide__wait_and_free(tide__req_submit(req, 0), req);
}
