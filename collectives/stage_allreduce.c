/* stage_allreduce.c - all-reduce through the staging area (stage.h), the
 * way shared-memory collectives do it: each rank reduces one n-th of the
 * vector, reading that share straight out of every rank's slot, and
 * every rank copies the others' reduced shares out of their slots.
 *
 * Per round (one chunk of at most half a slot):
 *   in    copy our chunk of the input into our slot; note to all, notes
 *         from all (everyone's chunk is in place);
 *   out   reduce our share of the chunk from every slot (in rank order,
 *         so the result does not depend on who is fast) into recvbuf and
 *         back into our slot; notes both ways (every share is reduced);
 *         copy the other shares out of their owners' slots.
 * After the last round a done exchange: nobody reads our slot any more.
 *
 * Each byte is copied in once, read n times by the reductions (one n-th
 * each by n ranks) and copied out n - 1 times, all in parallel on the
 * n ranks' cores, against a ring's 2(n - 1) messages each copied into
 * and out of a transport ring.  Every rank gets the same bits: each share
 * is reduced once, by its owner. */
#include "collectives/stage.h"

enum phase { PH_IN, PH_OUT, PH_DONE };

struct stage_allreduce {
    struct tide__stage s;
    enum phase phase;
};

static void round_in(struct stage_allreduce *op)
{
    struct tide__stage *s = &op->s;
    size_t base, elems = tide__stage_round_span(s, s->round, &base), es = s->c.esize;
    tide__coll_copy(&s->c, s->mine + (size_t)(s->round % 2) * s->half,
                    tide__at(&s->c, s->c.sendbuf, base), elems * es);
    op->phase = PH_IN;
    tide__stage_exchange(s, 0, 3 * s->round);
}

/* Our share of the round, from every slot, into recvbuf and our slot. */
static void reduce_share(struct stage_allreduce *op)
{
    struct tide__stage *s = &op->s;
    size_t base, elems = tide__stage_round_span(s, s->round, &base), es = s->c.esize;
    int h = (int)(s->round % 2);
    size_t lo = tide__stage_share_off(elems, s->n, s->me);
    size_t len = tide__stage_share_off(elems, s->n, s->me + 1) - lo;
    char *dst = tide__at(&s->c, s->c.recvbuf, base + lo);
    tide__coll_reduce(&s->c, dst, tide__stage_half(s, 0, h) + lo * es,
                      tide__stage_half(s, 1, h) + lo * es, len);
    for (int q = 2; q < s->n; q++)
        tide__coll_reduce(&s->c, dst, dst, tide__stage_half(s, q, h) + lo * es, len);
    tide__coll_avg(&s->c, dst, len);
    tide__coll_copy(&s->c, s->mine + (size_t)h * s->half + lo * es, dst, len * es);
}

static void copy_shares(struct stage_allreduce *op)
{
    struct tide__stage *s = &op->s;
    size_t base, elems = tide__stage_round_span(s, s->round, &base), es = s->c.esize;
    int h = (int)(s->round % 2);
    for (int q = 0; q < s->n; q++) {
        if (q == s->me)
            continue;
        size_t lo = tide__stage_share_off(elems, s->n, q);
        size_t len = tide__stage_share_off(elems, s->n, q + 1) - lo;
        tide__coll_copy(&s->c, tide__at(&s->c, s->c.recvbuf, base + lo),
                        tide__stage_half(s, q, h) + lo * es, len * es);
    }
}

static void start(tide_req *req)
{
    struct stage_allreduce *op = (struct stage_allreduce *)req;
    struct tide__stage *s = &op->s;
    if (s->c.count == 0) {
        tide__coll_succeed(&s->c);
        return;
    }
    if (tide__stage_begin(s, true))
        return;
    tide__stage_plan_rounds(s, 0);
    round_in(op);
}

static void step(tide_req *req, tide__msg *m)
{
    struct stage_allreduce *op = (struct stage_allreduce *)req;
    struct tide__stage *s = &op->s;
    if (tide__stage_msg_done(s, m) < 0)
        return;
    switch (op->phase) {
    case PH_IN:
        reduce_share(op);
        op->phase = PH_OUT;
        tide__stage_exchange(s, 0, 3 * s->round + 1);
        return;
    case PH_OUT:
        copy_shares(op);
        if (++s->round < s->nrounds) {
            round_in(op);
            return;
        }
        op->phase = PH_DONE;
        tide__stage_exchange(s, 0, 3 * s->round);
        return;
    case PH_DONE:
        tide__coll_succeed(&s->c);
        return;
    }
}

static const struct tide__op_vtbl vtbl = {"collective", start, step, tide__stage_release,
                                          tide__stage_describe};

const struct tide__algo tide__algo_stage_allreduce = {"shm", sizeof(struct stage_allreduce),
                                                      &vtbl, NULL, NULL, NULL};
