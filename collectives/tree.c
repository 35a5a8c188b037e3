/* tree.c - binomial trees rooted anywhere: broadcast, reduce, gather and
 * scatter, as rounds of the driver in coll.c.
 *
 * Ranks are renumbered relative to the root (vr = 0 is the root), so the
 * one tree below serves every root.  Rank vr hangs from vr - lowbit(vr)
 * and its children are vr + m for every power of two m < lowbit(vr)
 * (every m for the root) with vr + m < n.  Its subtree is the relative
 * ranks [vr, vr + min(lowbit(vr), n - vr)): contiguous, which is what lets
 * gather and scatter move a whole subtree's blocks in one message.  With
 * L = ceil(log2 n) rounds, n = 6:
 *
 *   broadcast, scatter (masks 4, 2, 1):   reduce, gather (masks 1, 2, 4):
 *     round 0:  0 -> 4                      round 0:  1 -> 0, 3 -> 2, 5 -> 4
 *     round 1:  0 -> 2                      round 1:  2 -> 0
 *     round 2:  0 -> 1, 2 -> 3, 4 -> 5      round 2:  4 -> 0
 *
 * Every rank posts at most one message a round.
 */
#include "collectives/coll.h"

#include <stdint.h>
#include <string.h>

/* Reduce, gather and scatter keep two pointers beside the request. */
struct tree_op {
    struct tide__coll c;
    /* reduce: the running result (NULL at a leaf); gather, scatter: this
     * rank's subtree's blocks in relative order */
    char *buf;
    char *tmp; /* reduce: where a child's vector lands */
};

/* ---- peer arithmetic: pure functions of (vr, mask, n) ---- */

/* The lowest set bit of vr; for the root, one above every mask the
 * rounds use, since its subtree is the whole group. */
static int low_bit(int vr, int n)
{
    return vr ? (vr & -vr) : (1 << tide__ceil_log2(n));
}

/* How many relative ranks the subtree of vr holds. */
static int subtree_size(int vr, int n)
{
    int s = low_bit(vr, n);
    return s < n - vr ? s : n - vr;
}

/* Is vr + mask a child of vr? */
static bool has_child(int vr, int mask, int n)
{
    return mask < low_bit(vr, n) && vr + mask < n;
}

/* Is vr - mask the parent of vr? */
static bool has_parent(int vr, int mask, int n)
{
    return vr != 0 && mask == low_bit(vr, n);
}

/* Top-down trees (broadcast, scatter) start with the widest mask;
 * bottom-up ones (reduce, gather) with 1. */
static int down_mask(int n, int round)
{
    return 1 << (tide__ceil_log2(n) - 1 - round);
}

static int up_mask(int round)
{
    return 1 << round;
}

static int my_vr(const struct tide__coll *c)
{
    return tide__rel(c, c->req.comm->rank);
}

static int group_size(const struct tide__coll *c)
{
    return c->req.comm->size;
}

/* Bytes of one block (gather, scatter). */
static size_t block_bytes(const struct tide__coll *c)
{
    return tide__blk_len(c, 0) * c->esize;
}

/* Block i of a subtree's buffer; buf is NULL when the blocks are empty. */
static char *block_at(char *buf, int i, size_t bb)
{
    return buf ? buf + (size_t)i * bb : NULL;
}

static int count_rounds(struct tide__coll *c)
{
    c->nrounds = tide__ceil_log2(group_size(c));
    return 0;
}

/* ---- broadcast: the whole vector down the tree ---- */

static void bcast_post(struct tide__coll *c, int round)
{
    int n = group_size(c), vr = my_vr(c), mask = down_mask(n, round);
    size_t bytes = tide__blk_off(c, n) * c->esize;
    if (has_parent(vr, mask, n))
        tide__coll_recv(c, tide__abs(c, vr - mask), c->recvbuf, bytes);
    else if (has_child(vr, mask, n))
        tide__coll_send(c, tide__abs(c, vr + mask), c->recvbuf, bytes);
}

static const struct tide__rounds bcast_rounds = {count_rounds, bcast_post, NULL, NULL};

const struct tide__algo tide__algo_binomial_bcast = {"binomial", sizeof(struct tide__coll),
                                                     &tide__coll_vtbl, &bcast_rounds, NULL, NULL};

/* ---- reduce: vectors up the tree, combined at each parent ---- */

/* A leaf sends its input as it is; a parent folds its children into
 * t->buf: recvbuf at the root, scratch elsewhere. */
static int reduce_setup(struct tide__coll *c)
{
    struct tree_op *t = (struct tree_op *)c;
    int n = group_size(c), vr = my_vr(c);
    size_t bytes = c->count * c->esize;
    c->nrounds = tide__ceil_log2(n);
    if (!has_child(vr, 1, n)) /* vr + 1 is the first child of any parent */
        return 0;
    if (vr == 0) {
        int rc = tide__coll_scratch(c, bytes);
        t->buf = c->recvbuf;
        t->tmp = c->scratch;
        return rc;
    }
    if (bytes > SIZE_MAX / 2)
        return TIDE_ENOMEM;
    int rc = tide__coll_scratch(c, 2 * bytes);
    t->buf = c->scratch;
    t->tmp = (char *)c->scratch + bytes;
    return rc;
}

static void reduce_post(struct tide__coll *c, int round)
{
    struct tree_op *t = (struct tree_op *)c;
    int n = group_size(c), vr = my_vr(c), mask = up_mask(round);
    size_t bytes = c->count * c->esize;
    if (has_child(vr, mask, n))
        tide__coll_recv(c, tide__abs(c, vr + mask), t->tmp, bytes);
    else if (has_parent(vr, mask, n))
        tide__coll_send(c, tide__abs(c, vr - mask), t->buf ? t->buf : c->sendbuf, bytes);
}

/* The running result stays on the left and the child's on the right:
 * own, then lower relative ranks before higher, so every run folds the
 * same values in the same order and floats come out bit-identical. */
static void reduce_end(struct tide__coll *c, int round)
{
    struct tree_op *t = (struct tree_op *)c;
    int n = group_size(c), vr = my_vr(c), mask = up_mask(round);
    if (!has_child(vr, mask, n))
        return;
    /* The first child (mask 1) meets the input itself, which saves
     * copying it; at an in-place root t->buf is the input, exactly. */
    const void *acc = mask == 1 ? c->sendbuf : t->buf;
    tide__coll_reduce(c, t->buf, acc, t->tmp, c->count);
}

/* With n >= 2 the root always has a child, so its result is in recvbuf. */
static void reduce_finish(struct tide__coll *c)
{
    if (my_vr(c) == 0)
        tide__coll_avg(c, c->recvbuf, c->count);
}

static const struct tide__rounds reduce_rounds = {reduce_setup, reduce_post, reduce_end,
                                                  reduce_finish};

const struct tide__algo tide__algo_binomial_reduce = {"binomial", sizeof(struct tree_op),
                                                      &tide__coll_vtbl, &reduce_rounds, NULL, NULL};

/* ---- gather: each subtree's blocks up the tree in one message ---- */

/* A leaf sends its input as it is; a parent gathers its subtree into
 * t->buf: straight into recvbuf at root 0 (relative order is absolute
 * order there), into scratch elsewhere. */
static int gather_setup(struct tide__coll *c)
{
    struct tree_op *t = (struct tree_op *)c;
    int n = group_size(c), vr = my_vr(c), size = subtree_size(vr, n);
    size_t bb = block_bytes(c);
    c->nrounds = tide__ceil_log2(n);
    if (size == 1)
        return 0;
    if (vr == 0 && c->root == 0) {
        t->buf = c->recvbuf;
    } else {
        int rc = tide__coll_scratch(c, (size_t)size * bb);
        if (rc)
            return rc;
        t->buf = c->scratch;
    }
    /* Take our own block now: at the root the input may overlap recvbuf,
     * which the children's blocks are about to fill. */
    if (bb)
        memmove(t->buf, c->sendbuf, bb);
    return 0;
}

static void gather_post(struct tide__coll *c, int round)
{
    struct tree_op *t = (struct tree_op *)c;
    int n = group_size(c), vr = my_vr(c), mask = up_mask(round);
    size_t bb = block_bytes(c);
    if (has_child(vr, mask, n)) {
        size_t len = (size_t)subtree_size(vr + mask, n) * bb;
        tide__coll_recv(c, tide__abs(c, vr + mask), block_at(t->buf, mask, bb), len);
    } else if (has_parent(vr, mask, n)) {
        size_t len = (size_t)subtree_size(vr, n) * bb;
        tide__coll_send(c, tide__abs(c, vr - mask), t->buf ? t->buf : c->sendbuf, len);
    }
}

/* At a root other than 0 the blocks sit in relative order: relative j
 * belongs at rank (j + root) % n, so the first n - root go to the end. */
static void gather_finish(struct tide__coll *c)
{
    struct tree_op *t = (struct tree_op *)c;
    int n = group_size(c), root = c->root;
    size_t bb = block_bytes(c);
    if (my_vr(c) != 0 || root == 0 || bb == 0)
        return;
    tide__coll_rotate(c, c->recvbuf, t->buf, n, root, bb);
}

static const struct tide__rounds gather_rounds = {gather_setup, gather_post, NULL, gather_finish};

const struct tide__algo tide__algo_binomial_gather = {"binomial", sizeof(struct tree_op),
                                                      &tide__coll_vtbl, &gather_rounds, NULL, NULL};

/* ---- scatter: each subtree's blocks down the tree in one message ---- */

/* The root sends from its input in relative order: sendbuf itself at
 * root 0, else a rotated copy.  A leaf receives straight into recvbuf;
 * other ranks receive their subtree into scratch. */
static int scatter_setup(struct tide__coll *c)
{
    struct tree_op *t = (struct tree_op *)c;
    int n = group_size(c), vr = my_vr(c), size = subtree_size(vr, n), root = c->root;
    size_t bb = block_bytes(c);
    c->nrounds = tide__ceil_log2(n);
    if (vr == 0 && root == 0) {
        t->buf = (char *)c->sendbuf; /* only read */
        return 0;
    }
    if (size == 1) {
        t->buf = c->recvbuf;
        return 0;
    }
    int rc = tide__coll_scratch(c, (size_t)size * bb);
    if (rc)
        return rc;
    t->buf = c->scratch;
    if (vr == 0 && bb) /* relative j is rank (j + root) % n */
        tide__coll_rotate(c, t->buf, c->sendbuf, n, n - root, bb);
    return 0;
}

static void scatter_post(struct tide__coll *c, int round)
{
    struct tree_op *t = (struct tree_op *)c;
    int n = group_size(c), vr = my_vr(c), mask = down_mask(n, round);
    size_t bb = block_bytes(c);
    if (has_parent(vr, mask, n)) {
        size_t len = (size_t)subtree_size(vr, n) * bb;
        tide__coll_recv(c, tide__abs(c, vr - mask), t->buf, len);
    } else if (has_child(vr, mask, n)) {
        size_t len = (size_t)subtree_size(vr + mask, n) * bb;
        tide__coll_send(c, tide__abs(c, vr + mask), block_at(t->buf, mask, bb), len);
    }
}

/* Our own block is the first of the subtree.  It is copied last: at the
 * root recvbuf may overlap the input the sends were reading. */
static void scatter_finish(struct tide__coll *c)
{
    struct tree_op *t = (struct tree_op *)c;
    size_t bb = block_bytes(c);
    if (t->buf != c->recvbuf && bb)
        memmove(c->recvbuf, t->buf, bb);
}

static const struct tide__rounds scatter_rounds = {scatter_setup, scatter_post, NULL,
                                                   scatter_finish};

const struct tide__algo tide__algo_binomial_scatter = {"binomial", sizeof(struct tree_op),
                                                       &tide__coll_vtbl, &scatter_rounds, NULL, NULL};
