/* board_bcast.c - broadcast on boards (board.h): the root publishes the
 * vector, the others a header only.  A reader waits for the root's flag,
 * checks its header and copies.  The root reads nothing and ends once
 * published (the slot it keeps until its next-but-one publication is
 * the only copy its readers need); whether they all called the same
 * broadcast - two ranks that both think they are the root never read
 * each other - is checked after the fact (board.h, "unread"). */
#include "collectives/board.h"

static size_t root_data(struct tide__board_op *op, const void **src)
{
    *src = op->c.recvbuf;
    return tide__board_is_root(op) ? op->c.count * op->c.esize : 0;
}

static bool copy_out(struct tide__board_op *op)
{
    struct tide__coll *c = &op->c;
    if (!tide__board_is_root(op))
        tide__coll_copy(c, c->recvbuf, op->parts[c->root], c->count * c->esize);
    return true;
}

static const struct tide__board_algo hooks = {
    root_data, NULL, tide__board_reads_from_root, NULL, copy_out, NULL, false};

const struct tide__algo tide__algo_board_bcast = {
    "board", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &hooks};

/* The same on 2 ranks, up to 256 bytes, through the stream (board_stream.c). */
static const struct tide__board_algo stream_hooks = {
    root_data, NULL, tide__board_reads_from_root, NULL, copy_out, NULL, true};

const struct tide__algo tide__algo_board_stream = {
    "stream", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &stream_hooks};
