/* board_reduce_scatter.c - reduce-scatter on boards (board.h): every
 * rank publishes its whole input, then reduces its own block from all
 * of them, in rank order, into recvbuf (which holds only that block). */
#include "collectives/board.h"

static size_t whole(struct tide__board_op *op, const void **src)
{
    *src = op->c.sendbuf;
    return op->c.count * op->c.esize;
}

/* Our part from the caller's buffer unless the reduction writes over it
 * first: recvbuf is either apart from the input or (in place) our block
 * of it (calls.c stages any other overlap), and then, as for all-reduce
 * (board_allreduce.c, own), only ranks 0 and 1 read it before it is
 * written. */
static bool own(const struct tide__board_op *op, const void *src)
{
    const struct tide__coll *c = &op->c;
    return (const char *)src + tide__blk_off(c, op->me) * c->esize != (char *)c->recvbuf ||
           op->me < 2;
}

/* Of every part, we read our block. */
static size_t my_block(const struct tide__board_op *op, size_t *off)
{
    const struct tide__coll *c = &op->c;
    *off = tide__blk_off(c, op->me) * c->esize;
    return tide__blk_len(c, op->me) * c->esize;
}

static bool reduce_block(struct tide__board_op *op)
{
    struct tide__coll *c = &op->c;
    size_t at = tide__blk_off(c, op->me) * c->esize, len = tide__blk_len(c, op->me);
    tide__coll_reduce(c, c->recvbuf, op->parts[0] + at, op->parts[1] + at, len);
    for (int q = 2; q < op->n; q++)
        tide__coll_reduce(c, c->recvbuf, c->recvbuf, op->parts[q] + at, len);
    tide__coll_avg(c, c->recvbuf, len);
    return true;
}

static const struct tide__board_algo hooks = {
    whole, own, NULL, my_block, reduce_block, NULL, false};

const struct tide__algo tide__algo_board_reduce_scatter = {
    "board", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &hooks};
