/* stage_bcast.c - broadcast through the staging area (stage.h): the root
 * copies the vector into its slot a chunk at a time and every other rank
 * copies it straight out, all at once.
 *
 * Two rounds are in flight, one per half of the root's slot and one
 * message set each.  For round k the root copies chunk k into half k % 2
 * and sends every rank a note (tag 2k); a rank copies the chunk out and
 * answers (tag 2k + 1).  Once every answer to round k is in, the root
 * writes round k + 2 into that half.  The last answers are also what
 * lets the root give its slot back.  Each byte is copied once in and
 * once out per rank, where a chain or tree forwards it from rank to
 * rank through transport rings. */
#include "collectives/stage.h"

enum { AWAIT_NOTE, AWAIT_SENT }; /* a reader's set: the root's note, our answer */

/* A vector smaller than two halves would go in one or two rounds that
 * copy in, then out, with nothing to overlap: cut it into PIECES rounds
 * (of at least PIECE_MIN bytes), so the readers copy one round out while
 * the root copies the next in (2-rank 512 KiB: 83-98 us in one round,
 * 31-71 us in four). */
#define PIECES 4
#define PIECE_MIN ((size_t)64 << 10)

struct stage_bcast {
    struct tide__stage s;
    uint32_t set_round[STAGE_SETS]; /* the round each set carries */
    uint8_t set_state[STAGE_SETS];  /* readers: AWAIT_* */
    uint32_t rounds_done;
};

/* Elements per round, a function of the signature only: every rank cuts
 * alike.  From two halves on, rounds as large as tide__stage_plan_rounds
 * allows (0): a half, or 512 KiB up to 4 ranks (stage.c). */
static size_t piece_elems(const struct tide__stage *s)
{
    size_t total = s->c.count * s->c.esize;
    if (total >= 2 * s->half)
        return 0;
    size_t c = total / PIECES;
    c = c < PIECE_MIN ? PIECE_MIN : c;
    return (c + s->c.esize - 1) / s->c.esize;
}

/* Round k's bytes of the vector: [*off, *off + return). */
static size_t round_bytes(const struct tide__stage *s, uint32_t k, size_t *off)
{
    size_t base, elems = tide__stage_round_span(s, k, &base);
    *off = base * s->c.esize;
    return elems * s->c.esize;
}

/* Root: round k into half k % 2, its notes out and the answers awaited. */
static void root_post(struct stage_bcast *op, uint32_t k)
{
    struct tide__stage *s = &op->s;
    int set = (int)(k % 2);
    size_t off, len = round_bytes(s, k, &off);
    op->set_round[set] = k;
    tide__coll_copy(&s->c, s->mine + (size_t)set * s->half, (char *)s->c.recvbuf + off, len);
    for (int q = 0; q < s->n && !s->c.req.failing; q++)
        if (q != s->me)
            tide__stage_recv(s, set, q, 2 * k + 1);
    for (int q = 0; q < s->n && !s->c.req.failing; q++)
        if (q != s->me)
            tide__stage_send(s, set, q, 2 * k);
}

static void reader_post(struct stage_bcast *op, uint32_t k)
{
    struct tide__stage *s = &op->s;
    int set = (int)(k % 2);
    op->set_round[set] = k;
    op->set_state[set] = AWAIT_NOTE;
    tide__stage_recv(s, set, s->c.root, 2 * k);
}

static void start(tide_req *req)
{
    struct stage_bcast *op = (struct stage_bcast *)req;
    struct tide__stage *s = &op->s;
    struct tide__coll *c = &s->c;
    size_t total = c->count * c->esize;
    if (total == 0) {
        tide__coll_succeed(c);
        return;
    }
    bool root = c->req.comm->rank == c->root;
    if (tide__stage_begin(s, root))
        return;
    tide__stage_plan_rounds(s, piece_elems(s));
    for (uint32_t k = 0; k < STAGE_SETS && k < s->nrounds && !c->req.failing; k++) {
        if (root)
            root_post(op, k);
        else
            reader_post(op, k);
    }
}

/* A set finished: the next round it carries, or the end. */
static void set_done(struct stage_bcast *op, int set)
{
    struct tide__stage *s = &op->s;
    bool root = s->me == s->c.root;
    uint32_t k = op->set_round[set];
    if (!root && op->set_state[set] == AWAIT_NOTE) {
        size_t off, len = round_bytes(s, k, &off);
        tide__coll_copy(&s->c, (char *)s->c.recvbuf + off, tide__stage_half(s, s->c.root, set),
                        len);
        op->set_state[set] = AWAIT_SENT;
        tide__stage_send(s, set, s->c.root, 2 * k + 1);
        return;
    }
    s->round = ++op->rounds_done;
    if (op->rounds_done == s->nrounds) {
        s->round = s->nrounds - 1;
        tide__coll_succeed(&s->c);
        return;
    }
    if (k + STAGE_SETS >= s->nrounds)
        return;
    if (root)
        root_post(op, k + STAGE_SETS);
    else
        reader_post(op, k + STAGE_SETS);
}

static void step(tide_req *req, tide__msg *m)
{
    struct stage_bcast *op = (struct stage_bcast *)req;
    int set = tide__stage_msg_done(&op->s, m);
    if (set >= 0)
        set_done(op, set);
}

static const struct tide__op_vtbl vtbl = {"collective", start, step, tide__stage_release,
                                          tide__stage_describe};

const struct tide__algo tide__algo_stage_bcast = {"shm", sizeof(struct stage_bcast), &vtbl, NULL, NULL, NULL};
