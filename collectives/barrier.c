/* barrier.c - the dissemination barrier (Hensgen, Finkel, Manber):
 * in round k every rank signals rank + 2^k and waits for rank - 2^k.
 * After ceil(log2 n) rounds every rank has heard, directly or through
 * others, from all.  Works for any n, not only powers of two.
 *
 *   n = 5, rank 0:  round 0 -> 1, <- 4;  round 1 -> 2, <- 3;  round 2 -> 4, <- 1
 */
#include "collectives/coll.h"

static int dissemination_setup(struct tide__coll *c)
{
    c->nrounds = tide__ceil_log2(c->req.comm->size);
    return 0;
}

static void dissemination_post(struct tide__coll *c, int round)
{
    int n = c->req.comm->size, r = c->req.comm->rank, d = 1 << round;
    tide__coll_recv(c, (r - d % n + n) % n, NULL, 0); /* receive first: the peer may be ahead */
    tide__coll_send(c, (r + d) % n, NULL, 0);
}

static const struct tide__rounds dissemination_rounds = {dissemination_setup, dissemination_post,
                                                         NULL, NULL};

const struct tide__algo tide__algo_dissemination_barrier = {
    "dissemination", sizeof(struct tide__coll), &tide__coll_vtbl, &dissemination_rounds, NULL,
    NULL};
