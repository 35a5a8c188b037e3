/* board_allgather.c - all-gather on boards (board.h): every rank
 * publishes its block, then copies every block, its own included, out
 * of the slots.  Reading its own from its slot too means recvbuf is
 * written only after the input was read (at publishing), however the
 * two overlap.  Gather is the same at its root; the others read
 * nothing and end once published (board.h, "unread"). */
#include "collectives/board.h"

static size_t own_block(struct tide__board_op *op, const void **src)
{
    *src = op->c.sendbuf;
    return op->c.count * op->c.esize;
}

/* Ours from the caller's buffer where it overlaps no block we write. */
static bool own(const struct tide__board_op *op, const void *src)
{
    size_t bb = op->c.count * op->c.esize;
    return !tide__overlaps(src, bb, op->c.recvbuf, (size_t)op->n * bb);
}

static bool copy_blocks(struct tide__board_op *op)
{
    struct tide__coll *c = &op->c;
    size_t bb = c->count * c->esize;
    for (int q = 0; q < op->n; q++)
        tide__coll_copy(c, tide__at(c, c->recvbuf, (size_t)q * c->count), op->parts[q], bb);
    return true;
}

static bool gather_at_root(struct tide__board_op *op)
{
    return tide__board_is_root(op) ? copy_blocks(op) : true;
}

static const struct tide__board_algo hooks = {own_block, own, NULL, NULL, copy_blocks, NULL, false};
static const struct tide__board_algo gather_hooks = {
    own_block, own, tide__board_reads_to_root, NULL, gather_at_root, NULL, false};

const struct tide__algo tide__algo_board_allgather = {
    "board", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &hooks};
const struct tide__algo tide__algo_board_gather = {
    "board", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &gather_hooks};

/* The same on 2 ranks through the stream (board_stream.c): the other
 * rank's block, of up to 256 bytes, comes in its entry or its slot; the
 * root's own is read from its buffer (or a copy, where it overlaps
 * recvbuf). */
static const struct tide__board_algo stream_gather_hooks = {
    own_block, own, tide__board_reads_to_root, NULL, gather_at_root, NULL, true};

const struct tide__algo tide__algo_board_stream_gather = {
    "stream", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &stream_gather_hooks};
