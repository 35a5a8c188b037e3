/* recursive.c - the recursive algorithms: recursive doubling all-reduce,
 * Rabenseifner's all-reduce (recursive halving reduce-scatter, then
 * recursive doubling all-gather), the recursive halving reduce-scatter
 * (even and v forms), and the recursive doubling all-gather (powers of
 * two only).
 *
 * A group that is not a power of two is folded first, as MPICH does:
 * with p2 the largest power of two <= n and rem = n - p2, each even rank
 * below 2*rem hands its vector to the odd rank above it and sits out;
 * the p2 remaining ranks run the power-of-two algorithm under new ranks;
 * at the end each odd rank below 2*rem hands the result back.
 *
 *   n = 6: p2 = 4, rem = 2
 *     rank       0   1   2   3   4   5
 *     new rank   -   0   -   1   2   3
 *     round 0:   0 -> 1, 2 -> 3                 (fold)
 *     rounds 1+: new ranks 0..3, partner = new rank ^ mask
 *     last:      1 -> 0, 3 -> 2                 (unfold)
 *
 * Every rank counts the same rounds (the round is the message tag), so a
 * rank with nothing to do in a round posts nothing and moves on.
 *
 * Determinism: new ranks keep the order of the ranks they stand for, so
 * when two partial results meet, the one from the lower new rank covers
 * the lower ranks and is always the left operand.  Both partners then
 * evaluate the same expression with the same bits; every final value is
 * computed by that one rule whichever rank computes it.
 */
#include "collectives/coll.h"

#include <string.h>

/* The request of the three folding algorithms. */
struct rec_op {
    struct tide__coll c;
    int p2;      /* the largest power of two <= n */
    int rem;     /* n - p2: pairs folded into one new rank */
    int steps;   /* log2(p2) */
    int newrank; /* rank among the p2, or -1 for a rank that sits out */
    char *acc;   /* reduce-scatter: this rank's partial results */
    char *in;    /* where a partner's data lands */
};

/* ---- peer arithmetic (pure) ---- */

static int pow2_floor(int n)
{
    int p = 1;
    while (p <= n / 2)
        p *= 2;
    return p;
}

/* New rank of rank r, or -1 for an even rank below 2*rem. */
static int new_rank_of(int r, int rem)
{
    if (r >= 2 * rem)
        return r - rem;
    return r % 2 ? r / 2 : -1;
}

/* The rank that runs as new rank i. */
static int old_rank_of(int i, int rem)
{
    return i < rem ? 2 * i + 1 : i + rem;
}

/* The first rank new rank i stands for (i == p2 gives n): new rank
 * i < rem stands for ranks 2i and 2i+1, others for rank i + rem. */
static int first_rank_of(int i, int rem)
{
    return i < rem ? 2 * i : i + rem;
}

/* The new ranks [*lo, *hi) whose share new rank nr holds after `halvings`
 * steps of the allreduce's recursive halving: the partner of step s is
 * nr ^ (1 << s), and the one with that bit clear keeps the lower half. */
static void halved_range(int nr, int halvings, int p2, int *lo, int *hi)
{
    int size = p2;
    *lo = 0;
    for (int s = 0; s < halvings; s++) {
        size /= 2;
        if ((nr >> s) & 1)
            *lo += size;
    }
    *hi = *lo + size;
}

/* Where piece j of p2 begins (j == p2: count).  Pieces are whole
 * 64-byte units shared out as evenly as possible, so each starts on the
 * same alignment as the vector; the last may be short. */
static size_t piece_off(size_t count, size_t esize, int p2, int j)
{
    size_t unit = esize < 64 ? 64 / esize : 1;
    size_t units = count / unit + (count % unit != 0);
    size_t base = units / (size_t)p2, extra = units % (size_t)p2, uj = (size_t)j;
    size_t off = (uj * base + (uj < extra ? uj : extra)) * unit;
    return off < count ? off : count;
}

/* ---- shared by the three ---- */

/* Work out the fold for this rank.  Returns the number of rounds: the
 * fold, `middle` rounds among the p2, the unfold. */
static int fold_setup(struct rec_op *op, int middle_per_step)
{
    int n = op->c.req.comm->size;
    op->p2 = pow2_floor(n);
    op->rem = n - op->p2;
    op->steps = tide__ceil_log2(op->p2);
    op->newrank = new_rank_of(op->c.req.comm->rank, op->rem);
    return op->steps * middle_per_step + 2;
}

static bool folds_away(const struct rec_op *op)
{
    return op->newrank < 0;
}

static bool takes_fold(const struct rec_op *op)
{
    return op->newrank >= 0 && op->c.req.comm->rank < 2 * op->rem;
}

/* Round 0: an even rank below 2*rem sends `mine`; the odd one above
 * receives it into op->in. */
static void fold_post(struct rec_op *op, const void *mine, size_t bytes)
{
    int r = op->c.req.comm->rank;
    if (folds_away(op))
        tide__coll_send(&op->c, r + 1, mine, bytes);
    else if (takes_fold(op))
        tide__coll_recv(&op->c, r - 1, op->in, bytes);
}

/* End of round 0 at the odd rank: dst = partner's (the lower) op mine. */
static void fold_end(struct rec_op *op, void *dst, const void *mine, size_t n)
{
    if (takes_fold(op) && n)
        tide__coll_reduce(&op->c, dst, op->in, mine, n);
}

/* The last round: the odd rank sends `from`, its even partner receives
 * into `to`. */
static void unfold_post(struct rec_op *op, const void *from, void *to, size_t bytes)
{
    int r = op->c.req.comm->rank;
    if (takes_fold(op))
        tide__coll_send(&op->c, r - 1, from, bytes);
    else if (folds_away(op))
        tide__coll_recv(&op->c, r + 1, to, bytes);
}

/* dst = lower op higher over n elements, mine and theirs ordered by
 * whose new rank is lower. */
static void combine(struct rec_op *op, int peer_new, void *dst, const void *mine,
                    const void *theirs, size_t n)
{
    if (!n)
        return;
    if (peer_new < op->newrank)
        tide__coll_reduce(&op->c, dst, theirs, mine, n);
    else
        tide__coll_reduce(&op->c, dst, mine, theirs, n);
}

/* The result is built in recvbuf: start it from the input.  (The call
 * layer staged any partial overlap, so the two are equal or disjoint.) */
static void input_to_recvbuf(struct tide__coll *c)
{
    if (c->count && c->sendbuf != c->recvbuf)
        tide__coll_copy(c, c->recvbuf, c->sendbuf, c->count * c->esize);
}

/* ---- recursive doubling all-reduce ----
 *
 * Step k (mask = 2^k): exchange the whole vector with new rank ^ mask and
 * combine.  log2(p2) steps of the full vector: few rounds, many bytes. */

/* Both all-reduces: `phases` power-of-two passes between fold and unfold,
 * a partner's data landing in one vector of scratch, the work in recvbuf. */
static int allreduce_setup(struct tide__coll *c, int phases)
{
    struct rec_op *op = (struct rec_op *)c;
    c->nrounds = fold_setup(op, phases);
    int rc = tide__coll_scratch(c, c->count * c->esize);
    if (rc)
        return rc;
    op->in = c->scratch;
    input_to_recvbuf(c);
    return 0;
}

static int rd_setup(struct tide__coll *c)
{
    return allreduce_setup(c, 1);
}

static void rd_post(struct tide__coll *c, int round)
{
    struct rec_op *op = (struct rec_op *)c;
    size_t bytes = c->count * c->esize;
    if (round == 0) {
        fold_post(op, c->recvbuf, bytes);
        return;
    }
    if (round > op->steps) {
        unfold_post(op, c->recvbuf, c->recvbuf, bytes);
        return;
    }
    if (folds_away(op))
        return;
    int peer = old_rank_of(op->newrank ^ (1 << (round - 1)), op->rem);
    tide__coll_recv(c, peer, op->in, bytes);
    tide__coll_send(c, peer, c->recvbuf, bytes);
}

static void rd_end(struct tide__coll *c, int round)
{
    struct rec_op *op = (struct rec_op *)c;
    if (round == 0)
        fold_end(op, c->recvbuf, c->recvbuf, c->count);
    else if (round <= op->steps && !folds_away(op))
        combine(op, op->newrank ^ (1 << (round - 1)), c->recvbuf, c->recvbuf, op->in, c->count);
}

static void rd_finish(struct tide__coll *c)
{
    tide__coll_avg(c, c->recvbuf, c->count);
}

static const struct tide__rounds rd_rounds = {rd_setup, rd_post, rd_end, rd_finish};

const struct tide__algo tide__algo_rd_allreduce = {"recursive_doubling", sizeof(struct rec_op),
                                                   &tide__coll_vtbl, &rd_rounds, NULL, NULL};

/* ---- Rabenseifner's all-reduce ----
 *
 * The vector is cut into p2 pieces.  Reduce-scatter, step s (mask 2^s):
 * send the partner the half of the current pieces it keeps, receive and
 * combine the half this rank keeps; after log2(p2) steps each new rank
 * owns one piece, fully reduced.  All-gather: retrace the steps backwards,
 * swapping what each side owns.  Rounds, after the fold:
 *
 *   1 .. steps             halving   (pieces held: p2/2, p2/4, ..., 1)
 *   steps+1 .. 2*steps     doubling  (pieces held: 2, 4, ..., p2)
 */

/* Element range [*lo, *hi) of the pieces new rank nr holds after
 * `halvings` steps. */
static void held_elems(const struct rec_op *op, int nr, int halvings, size_t *lo, size_t *hi)
{
    int a, b;
    halved_range(nr, halvings, op->p2, &a, &b);
    *lo = piece_off(op->c.count, op->c.esize, op->p2, a);
    *hi = piece_off(op->c.count, op->c.esize, op->p2, b);
}

static int rab_setup(struct tide__coll *c)
{
    return allreduce_setup(c, 2);
}

/* Halving step s: the partner keeps what it holds after the step. */
static void rab_post_halving(struct rec_op *op, int s)
{
    struct tide__coll *c = &op->c;
    int peer_new = op->newrank ^ (1 << s), peer = old_rank_of(peer_new, op->rem);
    size_t klo, khi, glo, ghi;
    held_elems(op, op->newrank, s + 1, &klo, &khi);
    held_elems(op, peer_new, s + 1, &glo, &ghi);
    tide__coll_recv(c, peer, tide__at(c, op->in, klo), (khi - klo) * c->esize);
    tide__coll_send(c, peer, tide__at(c, c->recvbuf, glo), (ghi - glo) * c->esize);
}

/* Doubling, undoing halving step s: swap what each side holds. */
static void rab_post_doubling(struct rec_op *op, int s)
{
    struct tide__coll *c = &op->c;
    int peer_new = op->newrank ^ (1 << s), peer = old_rank_of(peer_new, op->rem);
    size_t mlo, mhi, tlo, thi;
    held_elems(op, op->newrank, s + 1, &mlo, &mhi);
    held_elems(op, peer_new, s + 1, &tlo, &thi);
    tide__coll_recv(c, peer, tide__at(c, c->recvbuf, tlo), (thi - tlo) * c->esize);
    tide__coll_send(c, peer, tide__at(c, c->recvbuf, mlo), (mhi - mlo) * c->esize);
}

static void rab_post(struct tide__coll *c, int round)
{
    struct rec_op *op = (struct rec_op *)c;
    if (round == 0) {
        fold_post(op, c->recvbuf, c->count * c->esize);
        return;
    }
    if (round > 2 * op->steps) {
        unfold_post(op, c->recvbuf, c->recvbuf, c->count * c->esize);
        return;
    }
    if (folds_away(op))
        return;
    if (round <= op->steps)
        rab_post_halving(op, round - 1);
    else
        rab_post_doubling(op, 2 * op->steps - round);
}

/* After halving step s, combine the kept half; after the last, apply
 * AVG's division to the one piece this rank owns, so that each piece is
 * divided exactly once, by one rank, before it is copied everywhere. */
static void rab_end(struct tide__coll *c, int round)
{
    struct rec_op *op = (struct rec_op *)c;
    if (round == 0) {
        fold_end(op, c->recvbuf, c->recvbuf, c->count);
        return;
    }
    if (round > op->steps || folds_away(op))
        return;
    int s = round - 1;
    size_t lo, hi;
    held_elems(op, op->newrank, s + 1, &lo, &hi);
    char *kept = tide__at(c, c->recvbuf, lo);
    combine(op, op->newrank ^ (1 << s), kept, kept, tide__at(c, op->in, lo), hi - lo);
    if (s == op->steps - 1)
        tide__coll_avg(c, kept, hi - lo);
}

static const struct tide__rounds rab_rounds = {rab_setup, rab_post, rab_end, NULL};

const struct tide__algo tide__algo_rabenseifner = {"rabenseifner", sizeof(struct rec_op),
                                                   &tide__coll_vtbl, &rab_rounds, NULL, NULL};

/* ---- recursive halving reduce-scatter ----
 *
 * New rank i is responsible for the blocks of the ranks it stands for
 * (2i and 2i+1, or i + rem).  Step s (mask = p2 / 2^(s+1)) splits the
 * current set of new ranks in two: each side keeps the half with itself
 * in it, sends the other half to new rank ^ mask, and combines what it
 * receives.  After log2(p2) steps a new rank holds just its own blocks.
 *
 * Partial results live in op->acc, never in the caller's sendbuf; the
 * first step reads sendbuf directly instead of copying it.  Output is
 * written only at the end, after the own input block has been read: the
 * output may be that very block (recvbuf = sendbuf + own offset). */

/* Elements [*lo, *hi) of the blocks of new ranks [a, b). */
static void blocks_elems(const struct rec_op *op, int a, int b, size_t *lo, size_t *hi)
{
    *lo = tide__blk_off(&op->c, first_rank_of(a, op->rem));
    *hi = tide__blk_off(&op->c, first_rank_of(b, op->rem));
}

/* The halves of step s: what this rank keeps and what it gives away. */
static void rh_halves(const struct rec_op *op, int s, size_t keep[2], size_t give[2])
{
    int mask = op->p2 >> (s + 1), lo = op->newrank & ~(2 * mask - 1);
    int mine = op->newrank & mask ? lo + mask : lo, theirs = op->newrank & mask ? lo : lo + mask;
    blocks_elems(op, mine, mine + mask, &keep[0], &keep[1]);
    blocks_elems(op, theirs, theirs + mask, &give[0], &give[1]);
}

/* The partial results a halving step starts from: sendbuf until this
 * rank has combined anything (the fold, or its first step). */
static const void *rh_mine(const struct rec_op *op, int round)
{
    return round == 1 && !takes_fold(op) ? op->c.sendbuf : op->acc;
}

static int rh_setup(struct tide__coll *c)
{
    struct rec_op *op = (struct rec_op *)c;
    c->nrounds = fold_setup(op, 1);
    size_t total = tide__blk_off(c, c->req.comm->size) * c->esize;
    int rc = tide__coll_scratch(c, 2 * total);
    if (rc)
        return rc;
    op->acc = c->scratch;
    op->in = op->acc + total;
    return 0;
}

static void rh_post(struct tide__coll *c, int round)
{
    struct rec_op *op = (struct rec_op *)c;
    int r = c->req.comm->rank;
    if (round == 0) {
        fold_post(op, c->sendbuf, tide__blk_off(c, c->req.comm->size) * c->esize);
        return;
    }
    if (round > op->steps) { /* the odd rank holds block r - 1 */
        size_t off = tide__blk_off(c, takes_fold(op) ? r - 1 : r);
        size_t len = tide__blk_len(c, takes_fold(op) ? r - 1 : r);
        unfold_post(op, tide__at(c, op->acc, off), c->recvbuf, len * c->esize);
        return;
    }
    if (folds_away(op))
        return;
    int s = round - 1, peer = old_rank_of(op->newrank ^ (op->p2 >> round), op->rem);
    size_t keep[2], give[2];
    rh_halves(op, s, keep, give);
    tide__coll_recv(c, peer, tide__at(c, op->in, keep[0]), (keep[1] - keep[0]) * c->esize);
    tide__coll_send(c, peer, tide__at(c, rh_mine(op, round), give[0]),
                    (give[1] - give[0]) * c->esize);
}

static void rh_end(struct tide__coll *c, int round)
{
    struct rec_op *op = (struct rec_op *)c;
    if (round == 0) {
        fold_end(op, op->acc, c->sendbuf, tide__blk_off(c, c->req.comm->size));
        return;
    }
    if (round > op->steps || folds_away(op))
        return;
    size_t keep[2], give[2];
    rh_halves(op, round - 1, keep, give);
    combine(op, op->newrank ^ (op->p2 >> round), tide__at(c, op->acc, keep[0]),
            tide__at(c, rh_mine(op, round), keep[0]), tide__at(c, op->in, keep[0]),
            keep[1] - keep[0]);
}

static void rh_finish(struct tide__coll *c)
{
    struct rec_op *op = (struct rec_op *)c;
    int r = c->req.comm->rank;
    size_t len = tide__blk_len(c, r);
    if (!folds_away(op) && len) /* the even ones received theirs in place */
        tide__coll_copy(c, c->recvbuf, tide__at(c, op->acc, tide__blk_off(c, r)), len * c->esize);
    tide__coll_avg(c, c->recvbuf, len);
}

static const struct tide__rounds rh_rounds = {rh_setup, rh_post, rh_end, rh_finish};

const struct tide__algo tide__algo_rh_reduce_scatter = {"recursive_halving", sizeof(struct rec_op),
                                                        &tide__coll_vtbl, &rh_rounds, NULL, NULL};

/* ---- recursive doubling all-gather (power-of-two groups) ----
 *
 * Round k: swap the 2^k blocks gathered so far with rank ^ 2^k, in place
 * in recvbuf.  The selector only picks this for powers of two. */

static int rdg_setup(struct tide__coll *c)
{
    int n = c->req.comm->size;
    if (!tide__is_pow2(n)) {
        tide__req_fail(&c->req, TIDE_EINVAL, "recursive_doubling: group of %d is not a power of two",
                       n);
        return TIDE_EINVAL;
    }
    c->nrounds = tide__ceil_log2(n);
    size_t bytes = c->blk.each * c->esize;
    char *own = bytes ? tide__at(c, c->recvbuf, (size_t)c->req.comm->rank * c->blk.each) : NULL;
    if (bytes && c->sendbuf != own)
        memmove(own, c->sendbuf, bytes); /* the input may overlap recvbuf */
    return 0;
}

static void rdg_post(struct tide__coll *c, int round)
{
    int r = c->req.comm->rank, mask = 1 << round, peer = r ^ mask;
    size_t each = c->blk.each, bytes = (size_t)mask * each * c->esize;
    size_t mine = (size_t)(r & ~(mask - 1)) * each, theirs = (size_t)(peer & ~(mask - 1)) * each;
    /* Our own block from the input, where it lies apart: a peer that
     * pulls it (coll.c, pullable) then reads the input rather than our
     * block in recvbuf, which the next all-gather's setup writes again,
     * each store taking its line back first (2 ranks, 256 KiB, pulled:
     * 108-122 us a call from recvbuf, 12.9-13.0 from the input). */
    const void *from = tide__at(c, c->recvbuf, mine);
    size_t all = (size_t)c->req.comm->size * each * c->esize;
    if (round == 0 && bytes && !tide__overlaps(c->sendbuf, bytes, c->recvbuf, all))
        from = c->sendbuf;
    tide__coll_recv(c, peer, tide__at(c, c->recvbuf, theirs), bytes);
    tide__coll_send(c, peer, from, bytes);
}

static const struct tide__rounds rdg_rounds = {rdg_setup, rdg_post, NULL, NULL};

const struct tide__algo tide__algo_rd_allgather = {"recursive_doubling", sizeof(struct tide__coll),
                                                   &tide__coll_vtbl, &rdg_rounds, NULL, NULL};
