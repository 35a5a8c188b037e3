/* stage_reduce_scatter.c - reduce-scatter through the staging area
 * (stage.h): the first half of the staged all-reduce.  Each rank copies
 * its input into its slot once, and reduces its own block straight out
 * of every rank's slot; no reduced share is copied back out.
 *
 * Rounds go over the blocks, not over the whole input, so every rank
 * reduces in every round: round k carries the k-th chunk of every block,
 * one after another in the half (block q's at q chunks in), and a rank
 * reduces the chunk of its own block from every slot (in rank order,
 * so the bits do not depend on who is fast) into recvbuf.  A half too
 * small for an element of every block (the simulator's slots of a few
 * dozen bytes) takes the blocks in groups instead, one element each,
 * and only a group's owners reduce in its rounds.
 *
 * Per round: copy in; note to all, notes from all (every chunk is in
 * place); reduce.  Our note for round k + 1 goes out only after we read
 * round k, so a peer that has every note of round k + 1 may write round
 * k + 2 into the half we read in round k.  After the last round a done
 * exchange: nobody reads our slot any more.
 *
 * Measured on the 16-core host (2026-11-26), recursive halving took
 * 131-138 us for 256 KiB at 8 and 16 ranks against Open MPI vader's
 * 69-102: that is what this is for (select.c, stage_from). */
#include "collectives/stage.h"

enum phase { PH_IN, PH_DONE };

struct stage_reduce_scatter {
    struct tide__stage s;
    enum phase phase;
    size_t block; /* elements of each rank's block */
    int group;    /* blocks a round carries (n unless the half is tiny) */
    int groups;   /* rounds per chunk: ceil(n / group) */
};

/* What round k carries: elements [*lo, *lo + return) of blocks
 * [*first, *first + group) (fewer at the end), block q's chunk at
 * (q - *first) chunks into the half. */
static size_t round_of(const struct stage_reduce_scatter *op, uint32_t k, size_t *lo, int *first)
{
    *lo = (size_t)(k / (uint32_t)op->groups) * op->s.chunk;
    *first = (int)(k % (uint32_t)op->groups) * op->group;
    size_t left = op->block - *lo;
    return left < op->s.chunk ? left : op->s.chunk;
}

static int group_end(const struct stage_reduce_scatter *op, int first)
{
    return first + op->group < op->s.n ? first + op->group : op->s.n;
}

static void round_in(struct stage_reduce_scatter *op)
{
    struct tide__stage *s = &op->s;
    int first;
    size_t lo, len = round_of(op, s->round, &lo, &first), es = s->c.esize;
    uint8_t *half = s->mine + (size_t)(s->round % 2) * s->half;
    for (int q = first; q < group_end(op, first); q++)
        tide__coll_copy(&s->c, half + (size_t)(q - first) * s->chunk * es,
                        tide__at(&s->c, s->c.sendbuf, (size_t)q * op->block + lo), len * es);
    op->phase = PH_IN;
    tide__stage_exchange(s, 0, 2 * s->round);
}

/* Our block's chunk of this round, from every slot, into recvbuf (if
 * the round carries our block). */
static void reduce_ours(struct stage_reduce_scatter *op)
{
    struct tide__stage *s = &op->s;
    int first;
    size_t lo, len = round_of(op, s->round, &lo, &first);
    if (s->me < first || s->me >= group_end(op, first))
        return;
    size_t at = (size_t)(s->me - first) * s->chunk * s->c.esize;
    int h = (int)(s->round % 2);
    char *dst = tide__at(&s->c, s->c.recvbuf, lo);
    tide__coll_reduce(&s->c, dst, tide__stage_half(s, 0, h) + at, tide__stage_half(s, 1, h) + at,
                      len);
    for (int q = 2; q < s->n; q++)
        tide__coll_reduce(&s->c, dst, dst, tide__stage_half(s, q, h) + at, len);
    tide__coll_avg(&s->c, dst, len);
}

static void start(tide_req *req)
{
    struct stage_reduce_scatter *op = (struct stage_reduce_scatter *)req;
    struct tide__stage *s = &op->s;
    op->block = s->c.count / (size_t)s->c.req.comm->size;
    if (op->block == 0) {
        tide__coll_succeed(&s->c);
        return;
    }
    if (tide__stage_begin(s, true))
        return;
    /* A half holds one chunk of each block of a group: all n blocks
     * unless it has room for fewer elements than that. */
    size_t room = s->half / s->c.esize;
    op->group = room >= (size_t)s->n ? s->n : (int)room;
    op->groups = (s->n + op->group - 1) / op->group;
    s->chunk = room / (size_t)op->group;
    size_t chunks = (op->block + s->chunk - 1) / s->chunk;
    if (chunks * (size_t)op->groups >= UINT32_MAX / 2) { /* the notes' tags: 2 a round */
        tide__req_fail(&s->c.req, TIDE_EINVAL, "a reduce-scatter of %zu elements a block "
                       "needs more rounds than a staging slot of %zu bytes allows",
                       op->block, 2 * s->half);
        return;
    }
    s->nrounds = (uint32_t)(chunks * (size_t)op->groups);
    round_in(op);
}

static void step(tide_req *req, tide__msg *m)
{
    struct stage_reduce_scatter *op = (struct stage_reduce_scatter *)req;
    struct tide__stage *s = &op->s;
    if (tide__stage_msg_done(s, m) < 0)
        return;
    if (op->phase == PH_DONE) {
        tide__coll_succeed(&s->c);
        return;
    }
    reduce_ours(op);
    if (++s->round < s->nrounds) {
        round_in(op);
        return;
    }
    op->phase = PH_DONE;
    tide__stage_exchange(s, 0, 2 * s->round);
}

static const struct tide__op_vtbl vtbl = {"collective", start, step, tide__stage_release,
                                          tide__stage_describe};

const struct tide__algo tide__algo_stage_reduce_scatter = {
    "shm", sizeof(struct stage_reduce_scatter), &vtbl, NULL, NULL};
