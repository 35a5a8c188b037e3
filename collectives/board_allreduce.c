/* board_allreduce.c - all-reduce on boards (board.h), two ways, and
 * reduce, the one-shot way at its root.
 *
 * One-shot ("board"): every rank publishes its whole vector, then
 * reduces all n parts, in rank order, into recvbuf.  One flag wait;
 * each rank reads (n - 1) N bytes.  Rank order on every rank: the same
 * bits everywhere.
 *
 * Two-phase ("board_rsag"): every rank publishes its vector, reduces one
 * n-th of it (its share) from all parts into recvbuf and over that share
 * of its own slot (which only it reads in the first phase), raises
 * `reduced`, and once all have, copies the other shares out of their
 * owners' slots.  Two flag waits; each rank reads about 2N bytes, so it
 * wins once (n - 3) N bytes take longer to read than a flag takes to
 * cross.
 *
 * Reduce ("board"): every rank publishes its vector; the root reduces
 * all n parts as the one-shot all-reduce does, and the others read
 * nothing: they end once published, as a broadcast's root does, and
 * check the peers' headers after the fact (board.h, "unread"). */
#include "collectives/board.h"
#include "collectives/stage.h"

static size_t whole(struct tide__board_op *op, const void **src)
{
    *src = op->c.sendbuf;
    return op->c.count * op->c.esize;
}

/* Our part from the caller's buffer unless the reduction writes over it
 * first: in place (recvbuf is the input; calls.c stages any other
 * overlap), the first step writes dst[i] from parts 0 and 1 at [i] and
 * the later ones read dst back, so rank 0's and 1's inputs are read
 * before they are written, the others' not. */
static bool own(const struct tide__board_op *op, const void *src)
{
    return src != op->c.recvbuf || op->me < 2;
}

/* Elements [lo, lo + len) of every part, in rank order, into dst. */
static void reduce_parts(struct tide__board_op *op, char *dst, size_t lo, size_t len)
{
    struct tide__coll *c = &op->c;
    size_t at = lo * c->esize;
    tide__coll_reduce(c, dst, op->parts[0] + at, op->parts[1] + at, len);
    for (int q = 2; q < op->n; q++)
        tide__coll_reduce(c, dst, dst, op->parts[q] + at, len);
    tide__coll_avg(c, dst, len);
}

static bool one_shot(struct tide__board_op *op)
{
    reduce_parts(op, op->c.recvbuf, 0, op->c.count);
    return true;
}

static void share(const struct tide__board_op *op, int q, size_t *lo, size_t *len)
{
    *lo = tide__stage_share_off(op->c.count, op->n, q);
    *len = tide__stage_share_off(op->c.count, op->n, q + 1) - *lo;
}

/* The first phase reads our share of every part. */
static size_t my_share(const struct tide__board_op *op, size_t *off)
{
    size_t lo, len;
    share(op, op->me, &lo, &len);
    *off = lo * op->c.esize;
    return len * op->c.esize;
}

static bool reduce_share(struct tide__board_op *op)
{
    struct tide__coll *c = &op->c;
    size_t lo, len;
    share(op, op->me, &lo, &len);
    char *dst = tide__at(c, c->recvbuf, lo);
    reduce_parts(op, dst, lo, len);
    tide__coll_copy(c, op->mine + lo * c->esize, dst, len * c->esize);
    return false; /* on to the shares */
}

static void copy_shares(struct tide__board_op *op)
{
    struct tide__coll *c = &op->c;
    for (int q = 0; q < op->n; q++) {
        size_t lo, len;
        share(op, q, &lo, &len);
        if (q != op->me)
            tide__coll_copy(c, tide__at(c, c->recvbuf, lo), op->parts[q] + lo * c->esize,
                            len * c->esize);
    }
}

static bool reduce_at_root(struct tide__board_op *op)
{
    return tide__board_is_root(op) ? one_shot(op) : true;
}

static const struct tide__board_algo one_shot_algo = {
    whole, own, NULL, NULL, one_shot, NULL, false};
static const struct tide__board_algo two_phase_algo = {whole, own, NULL, my_share, reduce_share,
                                                        copy_shares, false};

const struct tide__algo tide__algo_board_allreduce = {"board", sizeof(struct tide__board_op),
                                                      &tide__board_vtbl, NULL, NULL,
                                                      &one_shot_algo};
const struct tide__algo tide__algo_board_rsag_allreduce = {
    "board_rsag", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &two_phase_algo};

static const struct tide__board_algo reduce_algo = {
    whole, own, tide__board_reads_to_root, NULL, reduce_at_root, NULL, false};

const struct tide__algo tide__algo_board_reduce = {"board", sizeof(struct tide__board_op),
                                                   &tide__board_vtbl, NULL, NULL, &reduce_algo};

/* The same on 2 ranks through the stream (board_stream.c): the other
 * rank's vector, of up to 256 bytes (select.c), comes in its entry or its
 * slot; the root's own is read from its buffer. */
static const struct tide__board_algo stream_reduce_algo = {
    whole, own, tide__board_reads_to_root, NULL, reduce_at_root, NULL, true};

const struct tide__algo tide__algo_board_stream_reduce = {
    "stream", sizeof(struct tide__board_op), &tide__board_vtbl, NULL, NULL, &stream_reduce_algo};
