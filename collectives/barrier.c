/* barrier.c - the dissemination barrier (Hensgen, Finkel, Manber):
 * in round k every rank signals rank + 2^k and waits for rank - 2^k.
 * After ceil(log2 n) rounds every rank has heard, directly or through
 * others, from all.  Works for any n, not only powers of two.
 *
 *   n = 5, rank 0:  round 0 -> 1, <- 4;  round 1 -> 2, <- 3;  round 2 -> 4, <- 1
 */
#include "collectives/coll.h"

#include <stdio.h>

struct barrier_op {
    struct tide__coll c; /* its call (calls.c): no buffers, count 0 */
    int round;   /* current round, from 0 */
    int rounds;  /* ceil(log2 size) */
    int pending; /* messages of this round not yet complete */
    tide__msg send, recv;
};

static void post_round(struct barrier_op *op)
{
    tide_req *req = &op->c.req;
    int n = req->comm->size, r = req->comm->rank, d = 1 << op->round;
    int to = (r + d) % n, from = (r - d % n + n) % n;
    tide__msg_init(&op->recv, req, TIDE_MSG_RECV, from, TIDE_KIND_BARRIER, (uint32_t)op->round,
                   NULL, 0);
    tide__msg_init(&op->send, req, TIDE_MSG_SEND, to, TIDE_KIND_BARRIER, (uint32_t)op->round, NULL,
                   0);
    op->pending = 2;
    tide__req_post(req, &op->recv); /* receive first: the peer may be ahead */
    tide__req_post(req, &op->send);
}

static void barrier_start(tide_req *req)
{
    struct barrier_op *op = (struct barrier_op *)req;
    op->rounds = tide__ceil_log2(req->comm->size);
    if (op->rounds == 0) {
        tide__req_succeed(req);
        return;
    }
    post_round(op);
}

static void barrier_step(tide_req *req, tide__msg *m)
{
    struct barrier_op *op = (struct barrier_op *)req;
    (void)m;
    if (--op->pending)
        return;
    if (++op->round == op->rounds) {
        tide__req_succeed(req);
        return;
    }
    post_round(op);
}

static void barrier_describe(const tide_req *req, char *buf, size_t len)
{
    const struct barrier_op *op = (const struct barrier_op *)req;
    snprintf(buf, len, "round %d of %d", op->round + 1, op->rounds);
}

static const struct tide__op_vtbl barrier_vtbl = {"barrier", barrier_start, barrier_step, NULL,
                                                  barrier_describe};

const struct tide__algo tide__algo_dissemination_barrier = {"dissemination",
                                                            sizeof(struct barrier_op),
                                                            &barrier_vtbl, NULL, NULL, NULL};
