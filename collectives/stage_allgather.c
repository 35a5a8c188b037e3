/* stage_allgather.c - all-gather through the staging area (stage.h):
 * each rank puts its block in its slot, a chunk per round, and copies
 * every other rank's chunk straight out of theirs.
 *
 * Per round: copy our chunk in; notes to all and from all (every chunk
 * is in place, and every peer has read our previous round's); copy the
 * others' chunks out.  After the last round a done exchange: nobody
 * reads our slot any more.  Each byte is copied in once and out n - 1
 * times, by the n ranks in parallel, where a ring moves n - 1 messages
 * through transport rings (two copies each) one after the other. */
#include "collectives/stage.h"

#include <string.h>

struct stage_allgather {
    struct tide__stage s;
    const char *own; /* our block of recvbuf: the input, once moved there */
    bool done_sent;  /* the last exchange is the done one */
};

static void round_in(struct stage_allgather *op)
{
    struct tide__stage *s = &op->s;
    size_t base, elems = tide__stage_round_span(s, s->round, &base);
    tide__coll_copy(&s->c, s->mine + (size_t)(s->round % 2) * s->half,
                    tide__at(&s->c, op->own, base), elems * s->c.esize);
    tide__stage_exchange(s, 0, 2 * s->round);
}

static void copy_chunks(struct stage_allgather *op)
{
    struct tide__stage *s = &op->s;
    size_t base, elems = tide__stage_round_span(s, s->round, &base);
    for (int q = 0; q < s->n; q++)
        if (q != s->me)
            tide__coll_copy(&s->c, tide__at(&s->c, s->c.recvbuf, (size_t)q * s->c.count + base),
                            tide__stage_half(s, q, (int)(s->round % 2)), elems * s->c.esize);
}

static void start(tide_req *req)
{
    struct stage_allgather *op = (struct stage_allgather *)req;
    struct tide__stage *s = &op->s;
    struct tide__coll *c = &s->c;
    if (c->count == 0) {
        tide__coll_succeed(c);
        return;
    }
    /* Our own block first: the input may overlap recvbuf anywhere
     * (calls.c does not stage an all-gather), and from here on it is
     * read only from our block, which nothing else writes. */
    op->own = tide__at(c, c->recvbuf, (size_t)c->req.comm->rank * c->count);
    if (op->own != (const char *)c->sendbuf && !c->req.ctx->timing_only)
        memmove((char *)op->own, c->sendbuf, c->count * c->esize);
    if (tide__stage_begin(s, true))
        return;
    tide__stage_plan_rounds(s, 0);
    round_in(op);
}

static void step(tide_req *req, tide__msg *m)
{
    struct stage_allgather *op = (struct stage_allgather *)req;
    struct tide__stage *s = &op->s;
    if (tide__stage_msg_done(s, m) < 0)
        return;
    if (op->done_sent) {
        tide__coll_succeed(&s->c);
        return;
    }
    copy_chunks(op);
    if (++s->round < s->nrounds) {
        round_in(op);
        return;
    }
    op->done_sent = true;
    tide__stage_exchange(s, 0, 2 * s->round);
}

static const struct tide__op_vtbl vtbl = {"collective", start, step, tide__stage_release,
                                          tide__stage_describe};

const struct tide__algo tide__algo_stage_allgather = {"shm", sizeof(struct stage_allgather),
                                                      &vtbl, NULL, NULL, NULL};
