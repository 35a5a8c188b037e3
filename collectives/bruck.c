/* bruck.c - Bruck's all-gather: ceil(log2 n) rounds for any group size.
 *
 * Each rank gathers into a scratch buffer rotated so that its own block
 * is first: scratch block j is the block of rank (r + j) % n.  In round k
 * (d = 2^k) a rank holds blocks 0 .. d-1; it sends the first
 * min(d, n - d) of them to rank r - d and appends as many from rank
 * r + d, whose first blocks are exactly the ones it is missing next.  At
 * the end the scratch is rotated back into recvbuf.
 *
 *   n = 5, rank 0 (scratch holds blocks of ranks):
 *     start     0
 *     round 0   0 1           (<- rank 1 sends its block 1)
 *     round 1   0 1 2 3       (<- rank 2 sends its blocks 2 3)
 *     round 2   0 1 2 3 4     (<- rank 4 sends its block 4; min(4, 1) = 1)
 */
#include "collectives/coll.h"


/* Reading sendbuf into scratch first lets it overlap recvbuf freely:
 * recvbuf is written only in finish. */
static int bruck_setup(struct tide__coll *c)
{
    int n = c->req.comm->size;
    size_t bytes = c->blk.each * c->esize;
    int rc = tide__coll_scratch(c, (size_t)n * bytes);
    if (rc)
        return rc;
    if (bytes)
        tide__coll_copy(c, c->scratch, c->sendbuf, bytes);
    c->nrounds = tide__ceil_log2(n);
    return 0;
}

static void bruck_post(struct tide__coll *c, int round)
{
    int n = c->req.comm->size, r = c->req.comm->rank, d = 1 << round;
    int blocks = d < n - d ? d : n - d;
    size_t each = c->blk.each * c->esize, bytes = (size_t)blocks * each;
    char *scratch = c->scratch;
    tide__coll_recv(c, (r + d) % n, scratch + (size_t)d * each, bytes);
    tide__coll_send(c, (r - d + n) % n, scratch, bytes);
}

/* Scratch block j belongs at recvbuf block (r + j) % n: blocks 0 .. n-r-1
 * go to r .. n-1, the rest wrap round to 0 .. r-1. */
static void bruck_finish(struct tide__coll *c)
{
    int n = c->req.comm->size, r = c->req.comm->rank;
    size_t each = c->blk.each * c->esize;
    if (!each)
        return;
    tide__coll_rotate(c, c->recvbuf, c->scratch, n, r, each);
}

static const struct tide__rounds bruck_rounds = {bruck_setup, bruck_post, NULL, bruck_finish};

const struct tide__algo tide__algo_bruck_allgather = {"bruck", sizeof(struct tide__coll),
                                                      &tide__coll_vtbl, &bruck_rounds, NULL, NULL};
