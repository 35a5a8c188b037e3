/* alltoall.c - the pairwise-exchange all-to-all: n - 1 rounds, and in
 * round k every rank sends to the rank k ahead and receives from the rank
 * k behind, so each round is a permutation and no rank is sent to by two
 * peers at once.  Own block is copied locally before round 1.
 *
 *   n = 4, rank 1:  k = 1: -> 2, <- 0;  k = 2: -> 3, <- 3;  k = 3: -> 0, <- 2
 */
#include "collectives/coll.h"


static size_t block_bytes(const struct tide__coll *c)
{
    return tide__blk_len(c, 0) * c->esize;
}

/* Block b of buf; buf is NULL when blocks are empty. */
static char *block_at(const struct tide__coll *c, const void *buf, int b)
{
    return buf ? tide__at(c, buf, tide__blk_off(c, b)) : NULL;
}

/* calls.c rejects overlapping buffers, so a plain copy is safe. */
static int pairwise_setup(struct tide__coll *c)
{
    int r = c->req.comm->rank;
    size_t bb = block_bytes(c);
    c->nrounds = c->req.comm->size - 1;
    if (bb)
        tide__coll_copy(c, block_at(c, c->recvbuf, r), block_at(c, c->sendbuf, r), bb);
    return 0;
}

static void pairwise_post(struct tide__coll *c, int round)
{
    int n = c->req.comm->size, r = c->req.comm->rank, k = round + 1;
    int to = (r + k) % n, from = (r - k + n) % n;
    size_t bb = block_bytes(c);
    tide__coll_recv(c, from, block_at(c, c->recvbuf, from), bb);
    tide__coll_send(c, to, block_at(c, c->sendbuf, to), bb);
}

static const struct tide__rounds pairwise_rounds = {pairwise_setup, pairwise_post, NULL, NULL};

const struct tide__algo tide__algo_pairwise_alltoall = {"pairwise", sizeof(struct tide__coll),
                                                        &tide__coll_vtbl, &pairwise_rounds, NULL, NULL};
