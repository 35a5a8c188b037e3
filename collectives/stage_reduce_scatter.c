/* stage_reduce_scatter.c - reduce-scatter through the staging area
 * (stage.h): the first half of the staged all-reduce.  Each rank copies
 * its input into its slot once, and reduces its own block straight out
 * of every rank's slot; no reduced share is copied back out.
 *
 * Rounds go over the blocks, not over the whole input, so every rank
 * reduces in every round: round k carries the k-th chunk of every block,
 * one after another in the half (block q's at q chunks in), and a rank
 * reduces the chunk of its own block from every slot (in rank order,
 * so the bits do not depend on who is fast) into recvbuf.  It runs
 * where a staging half holds an element of every block (select.c asks
 * tide__stage_fits_blocks: thousands of ranks in real slots; the
 * simulator's few dozen bytes give way to recursive halving).
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
};

/* Round k's chunk of each block: elements [*lo, *lo + return) of it. */
static size_t chunk_of(const struct stage_reduce_scatter *op, uint32_t k, size_t *lo)
{
    *lo = (size_t)k * op->s.chunk;
    size_t left = op->block - *lo;
    return left < op->s.chunk ? left : op->s.chunk;
}

static void round_in(struct stage_reduce_scatter *op)
{
    struct tide__stage *s = &op->s;
    size_t lo, len = chunk_of(op, s->round, &lo), es = s->c.esize;
    uint8_t *half = s->mine + (size_t)(s->round % 2) * s->half;
    for (int q = 0; q < s->n; q++)
        tide__coll_copy(&s->c, half + (size_t)q * s->chunk * es,
                        tide__at(&s->c, s->c.sendbuf, (size_t)q * op->block + lo), len * es);
    op->phase = PH_IN;
    tide__stage_exchange(s, 0, 2 * s->round);
}

/* Our block's chunk of this round, from every slot, into recvbuf. */
static void reduce_ours(struct stage_reduce_scatter *op)
{
    struct tide__stage *s = &op->s;
    size_t lo, len = chunk_of(op, s->round, &lo), at = (size_t)s->me * s->chunk * s->c.esize;
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
    /* A half holds one chunk of each of the n blocks. */
    s->chunk = s->half / s->c.esize / (size_t)s->n;
    size_t chunks = s->chunk ? (op->block + s->chunk - 1) / s->chunk : 0;
    if (!s->chunk || chunks >= UINT32_MAX / 2) { /* select.c checks; the tags: 2 a round */
        tide__req_fail(&s->c.req, TIDE_EPROTO, "internal error: a staging half of %zu bytes "
                       "for %d blocks of %zu elements", s->half, s->n, op->block);
        return;
    }
    s->nrounds = (uint32_t)chunks;
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
    "shm", sizeof(struct stage_reduce_scatter), &vtbl, NULL, NULL, NULL};
