/* stage.c - see stage.h: the slot, the areas and the notes that staged
 * algorithms share. */
#include "collectives/stage.h"
#include "engine/log.h"

#include <stdio.h>
#include <string.h>

static int world_rank(const tide_comm *comm, int q)
{
    return comm->world_of ? comm->world_of[q] : q;
}

bool tide__stage_fits_blocks(const tide_comm *comm)
{
    struct tide__transport *tp = comm->ctx->tp;
    size_t area_bytes = 0, slot_bytes = 0;
    if (!comm->shared || !tp->ops->stage_at ||
        !tp->ops->stage_at(tp, world_rank(comm, comm->rank), &area_bytes, &slot_bytes))
        return false;
    return slot_bytes / 2 >= (size_t)comm->size * 8;
}

size_t tide__stage_share_off(size_t elems, int n, int q)
{
    size_t base = elems / (size_t)n, extra = elems % (size_t)n, uq = (size_t)q;
    return uq * base + (uq < extra ? uq : extra);
}

/* A round of a whole half (1 MiB) is copied in and out beyond the
 * caches' reach: up to 4 ranks rounds of 512 KiB took half the time of
 * whole halves.  AMD EPYC 2-core VM (2026-11-28, three interleaved
 * rounds, us), 2 ranks, halves against 512 KiB: all-reduce 1 MiB
 * 211-266 against 106-133, 4 MiB 965-1092 against 405-445, 32 MiB
 * 8304-9840 against 5052-5460 (the ring 117-156, 504-556, 6894-7627);
 * broadcast 2 MiB 288-366 against 114-121, 4 MiB 667-702 against
 * 198-224, 16 MiB 2516-2584 against 832-878 (the tree over the rings
 * 154-193, 323-378, 1498-1688; Open MPI's vader 4 MiB 238-282, 16 MiB
 * 1658-1668); all-gather 4 MiB 453-512 against 219-258, as fast as the
 * ring, which select.c gives 2 ranks from 2 MiB.  4 ranks sharing the 2
 * cores, broadcast 4 MiB 1026-1112 against 540-658.  256 KiB was as
 * fast to 4 MiB and slower beyond, 128 KiB slower still.  (An earlier
 * 2-core machine measured a 2 MiB broadcast in halves ahead, 87-97
 * against 131-224.)  The reduce-scatter's rounds are a half of n
 * blocks, 512 KiB each at 2 ranks: 512 KiB rounds changed nothing
 * there.  8 and 16 ranks keep whole halves, with which they led vader
 * by 1.4-3.4x at 16 MiB on the 16-core host, until a many-core run
 * compares the two. */
#define STAGE_ROUND_MAX ((size_t)512 << 10)
#define STAGE_SMALL_GROUP 4

void tide__stage_plan_rounds(struct tide__stage *s, size_t chunk)
{
    size_t round = s->half;
    if (s->n <= STAGE_SMALL_GROUP && round > STAGE_ROUND_MAX)
        round = STAGE_ROUND_MAX;
    size_t most = round / s->c.esize;
    s->chunk = chunk && chunk < most ? chunk : most;
    s->nrounds = (uint32_t)((s->c.count + s->chunk - 1) / s->chunk);
}

size_t tide__stage_round_span(const struct tide__stage *s, uint32_t k, size_t *base)
{
    *base = (size_t)k * s->chunk;
    size_t left = s->c.count - *base;
    return left < s->chunk ? left : s->chunk;
}

/* The arrays (areas, slots, notes, messages) in one piece of scratch. */
static int take_arrays(struct tide__stage *s)
{
    size_t n = (size_t)s->n;
    size_t bytes = n * sizeof *s->area + n * sizeof *s->slot + STAGE_SETS * n * sizeof *s->got +
                   STAGE_SETS * 2 * n * sizeof *s->msgs;
    if (tide__coll_scratch(&s->c, bytes))
        return -1;
    memset(s->c.scratch, 0, bytes);
    /* Messages first: the scratch is malloc-aligned, and so are they. */
    s->msgs = s->c.scratch;
    s->got = (uint64_t *)(s->msgs + STAGE_SETS * 2 * n);
    s->area = (uint8_t **)(s->got + STAGE_SETS * n);
    s->slot = (const uint8_t **)(s->area + n);
    return 0;
}

int tide__stage_begin(struct tide__stage *s, bool take_slot)
{
    struct tide__coll *c = &s->c;
    struct tide__transport *tp = c->req.ctx->tp;
    s->n = c->req.comm->size;
    s->me = c->req.comm->rank;
    s->round = 0;
    for (int k = 0; k < STAGE_SETS; k++)
        s->pending[k] = 0;
    if (take_arrays(s))
        return -1;
    size_t slot_bytes = 0;
    for (int q = 0; q < s->n; q++) {
        s->area[q] = tp->ops->stage_at(tp, world_rank(c->req.comm, q), &s->area_bytes, &slot_bytes);
        if (!s->area[q]) {
            tide__req_fail(&c->req, TIDE_EPROTO, "internal error: rank %d has no staging area", q);
            return -1;
        }
    }
    s->half = slot_bytes / 2 / c->esize * c->esize;
    if (!take_slot)
        return 0;
    s->off = tp->ops->stage_take(tp);
    if (s->off < 0) {
        tide__req_fail(&c->req, TIDE_ENOMEM, "every slot of this rank's shared staging area "
                       "is taken by collectives in flight (or leaked by failed ones)");
        return -1;
    }
    s->took = true;
    s->mine = s->area[s->me] + s->off;
    s->slot[s->me] = s->mine;
    s->note = (uint64_t)s->off;
    return 0;
}

static tide__msg *msg_at(struct tide__stage *s, int set, int i)
{
    return &s->msgs[(size_t)set * 2 * (size_t)s->n + (size_t)i];
}

void tide__stage_send(struct tide__stage *s, int set, int q, uint32_t tag)
{
    s->pending[set]++;
    tide__coll_post(&s->c, msg_at(s, set, q), TIDE_MSG_SEND, q, tag, &s->note, sizeof s->note);
}

void tide__stage_recv(struct tide__stage *s, int set, int q, uint32_t tag)
{
    s->pending[set]++;
    tide__coll_post(&s->c, msg_at(s, set, s->n + q), TIDE_MSG_RECV, q, tag,
                    &s->got[(size_t)set * (size_t)s->n + (size_t)q], sizeof *s->got);
}

void tide__stage_exchange(struct tide__stage *s, int set, uint32_t tag)
{
    /* Receives first: a peer that is ahead lands in place. */
    for (int q = 0; q < s->n && !s->c.req.failing; q++)
        if (q != s->me)
            tide__stage_recv(s, set, q, tag);
    for (int q = 0; q < s->n && !s->c.req.failing; q++)
        if (q != s->me)
            tide__stage_send(s, set, q, tag);
}

/* Whether m is a send (else a receive of rank *q's note). */
static bool is_send(const struct tide__stage *s, const tide__msg *m, int *q)
{
    size_t i = (size_t)(m - s->msgs) % (2 * (size_t)s->n);
    *q = (int)(i % (size_t)s->n);
    return i < (size_t)s->n;
}

/* A peer's note: its slot's offset.  A slot that does not lie inside its
 * area would have us read someone else's memory: refuse it. */
static bool take_note(struct tide__stage *s, tide__msg *m, int q, int set)
{
    uint64_t off = s->got[(size_t)set * (size_t)s->n + (size_t)q];
    if (m->got != sizeof off || off > s->area_bytes || s->area_bytes - off < 2 * s->half) {
        tide__req_fail(&s->c.req, TIDE_EPROTO, "rank %d sent a staging note that makes no sense "
                       "(%zu bytes, offset %llu)", q, m->got, (unsigned long long)off);
        return false;
    }
    s->slot[q] = s->area[q] + off;
    return true;
}

int tide__stage_msg_done(struct tide__stage *s, tide__msg *m)
{
    int q, set = (int)((size_t)(m - s->msgs) / (2 * (size_t)s->n));
    if (!is_send(s, m, &q) && !take_note(s, m, q, set))
        return -1;
    return --s->pending[set] == 0 ? set : -1;
}

const uint8_t *tide__stage_half(const struct tide__stage *s, int q, int h)
{
    return s->slot[q] + (size_t)h * s->half;
}

void tide__stage_release(tide_req *req)
{
    struct tide__stage *s = (struct tide__stage *)req;
    struct tide__transport *tp = req->ctx->tp;
    if (s->took && req->status == 0)
        tp->ops->stage_give(tp, s->off);
    else if (s->took)
        tide__log(TIDE_LOG_DEBUG, req->ctx->rank, "%s failed: its staging slot at %ld stays "
                  "taken (a peer may still read it)", req->opname ? req->opname : req->vt->name,
                  s->off);
    s->took = false;
    tide__coll_release(req);
}

void tide__stage_describe(const tide_req *req, char *buf, size_t len)
{
    const struct tide__stage *s = (const struct tide__stage *)req;
    if (s->round >= s->nrounds)
        snprintf(buf, len, "after round %u of %u, waiting for every rank to be done reading",
                 s->nrounds, s->nrounds);
    else
        snprintf(buf, len, "round %u of %u", s->round + 1, s->nrounds);
}
