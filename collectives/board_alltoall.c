/* board_alltoall.c - all-to-all on boards (board.h): every rank
 * publishes its whole input, then copies block `me` of every peer's
 * into its recvbuf, in place of the pairwise exchange's n - 1 rounds of
 * messages.  Its own block comes straight from its sendbuf: tide_alltoall
 * rejects overlapping buffers, so nothing we write is read after.
 *
 * Scatter is the root's half of it: the root publishes its whole input
 * and copies its own block; each other rank copies its block out of the
 * root's.  The root reads nothing and ends once published, as a
 * broadcast's root does (board.h, "unread"). */
#include "collectives/board.h"

static size_t whole(struct tide__board_op *op, const void **src)
{
    *src = op->c.sendbuf;
    return (size_t)op->n * op->c.count * op->c.esize;
}

static bool own(const struct tide__board_op *op, const void *src)
{
    (void)op;
    (void)src;
    return true;
}

/* Of every part, we read the block addressed to us. */
static size_t my_block(const struct tide__board_op *op, size_t *off)
{
    size_t bb = op->c.count * op->c.esize;
    *off = (size_t)op->me * bb;
    return bb;
}

static bool copy_blocks(struct tide__board_op *op)
{
    struct tide__coll *c = &op->c;
    size_t bb = c->count * c->esize, at = (size_t)op->me * bb;
    if (!bb)
        return true; /* the buffers may be NULL */
    for (int q = 0; q < op->n; q++)
        tide__coll_copy(c, tide__at(c, c->recvbuf, (size_t)q * c->count), op->parts[q] + at, bb);
    return true;
}

static size_t root_whole(struct tide__board_op *op, const void **src)
{
    return tide__board_is_root(op) ? whole(op, src) : 0;
}

/* Our block into recvbuf: the root's from its sendbuf, the others' from
 * the root's part, which holds every block (every_block) or only ours. */
static bool copy_block(struct tide__board_op *op, bool every_block)
{
    struct tide__coll *c = &op->c;
    size_t bb = c->count * c->esize, at = (size_t)op->me * bb;
    if (!bb)
        return true; /* the buffers may be NULL */
    const uint8_t *from = tide__board_is_root(op) ? (const uint8_t *)c->sendbuf + at
                                                  : op->parts[c->root] + (every_block ? at : 0);
    tide__coll_copy(c, c->recvbuf, from, bb);
    return true;
}

static bool copy_my_block(struct tide__board_op *op)
{
    return copy_block(op, true);
}

static const struct tide__board_algo hooks = {whole, own, NULL, my_block, copy_blocks, NULL, false};
static const struct tide__board_algo scatter_hooks = {
    root_whole, NULL, tide__board_reads_from_root, my_block, copy_my_block, NULL, false};

const struct tide__algo tide__algo_board_alltoall = {
    "board", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &hooks};
const struct tide__algo tide__algo_board_scatter = {
    "board", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &scatter_hooks};

/* The same on 2 ranks through the stream (board_stream.c), where the
 * root's entries go to one reader only: it streams that reader's block
 * (up to 256 bytes: select.c), not its whole input, and copies its
 * own.  Half the entries (when a part took one per 8 bytes), and blocks
 * of up to 128 bytes streamed then (256 since): 2 ranks, three interleaved rounds
 * (tide-perf's size is the whole input), 32 B 0.18-0.20 us against
 * 0.26-0.31 streaming the whole, 64 B 0.26 against 0.28-0.35, 256 B
 * 0.29-0.31 against 0.34-0.52 on boards. */
static size_t peer_block(struct tide__board_op *op, const void **src)
{
    size_t bb = op->c.count * op->c.esize;
    if (!tide__board_is_root(op) || !bb)
        return 0; /* the reader's acknowledgement; or nothing to send (sendbuf may be NULL) */
    *src = (const uint8_t *)op->c.sendbuf + (size_t)(1 - op->me) * bb;
    return bb;
}

static bool copy_streamed_block(struct tide__board_op *op)
{
    return copy_block(op, false); /* the part is our block */
}

static const struct tide__board_algo stream_scatter_hooks = {
    peer_block, NULL, tide__board_reads_from_root, NULL, copy_streamed_block, NULL, true};

const struct tide__algo tide__algo_board_stream_scatter = {
    "stream", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &stream_scatter_hooks};
