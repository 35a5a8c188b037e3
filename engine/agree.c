/* agree.c - the survivors' agreement behind tide_comm_agree and
 * tide_comm_shrink (MPI ULFM's MPI_Comm_agree and MPI_Comm_shrink).
 *
 * Every live rank of comm must leave with the same answer -- the same
 * set of failed ranks, the same AND of the flags -- even when the ranks
 * saw different failures and when more ranks die during the agreement.
 * The failure detector is the transport's: a message to or from a rank
 * fails with TIDE_EPEER once its connection is gone (TCP: closed; the
 * simulated network: crashed).  A rank that stops without dying is not
 * detected: the agreement then fails at its deadline (TIDE_ETIMEDOUT).
 *
 * The algorithm is FloodSet (Lynch, "Distributed Algorithms", 6.2) over
 * rounds that wait for every rank not known dead, which with a perfect
 * detector behave as synchronous rounds:
 *
 *   round 0 (probe)   send my flag to all, receive from all; a rank whose
 *                     message does not come is dead: my input is my flag
 *                     AND theirs, and the set of ranks found dead
 *   rounds 1..n       send my state (flag, failed set) to every rank not
 *                     known dead, receive theirs, merge (AND, union)
 *   decide            my state
 *
 * n rounds of flooding tolerate n - 1 deaths during them: some round has
 * no death, after it every live rank holds the union of the same states,
 * and later rounds only merge equal states.  Deaths found after round 0
 * only stop the waiting, they are not added to the state (adding them
 * would break the argument: a rank dying in the last round is seen dead
 * by some and alive by others).  So a rank that dies during the
 * agreement may stay in the decided membership; the next operation on
 * the new communicator then fails with TIDE_EPEER and the program
 * shrinks again.  Every frame carries the state as a flag byte and a
 * bitmap of comm ranks; the cost is (n+1) rounds of n^2 frames of
 * n/8 bytes, meant for tens of ranks (a tree would do better at scale).
 *
 * Frames travel on a reserved sequence number per agreement
 * (TIDE_RECOVERY_SEQ): every live rank makes its agreements on comm in
 * the same order, so the k-th one matches on every rank, and no
 * collective number ever reaches that range.
 *
 * Reactor thread, except the two public calls. */
#include "engine/context.h"
#include "engine/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct agree_op {
    tide_req req;
    int n;          /* comm size */
    int round;      /* 0: probe; 1..n: flooding */
    int pending;    /* messages of this round not complete */
    size_t len;     /* bytes of a state: flag byte + bitmap of n ranks */
    uint8_t *state; /* my state: [0] flag, [1..] failed comm ranks */
    uint8_t *out;   /* what this round sends: the state as it began */
    uint8_t *in;    /* n states: what each rank sent this round */
    uint8_t *gone;  /* n bytes: ranks found dead (no more waiting on them) */
    tide__msg *msgs; /* 2 per rank: receive, send */
    uint64_t wire;   /* the agreement's sequence number on the wire */
};

static bool bit(const uint8_t *set, int r)
{
    return set[r / 8] & (1u << (r % 8));
}

static void set_bit(uint8_t *set, int r)
{
    set[r / 8] |= (uint8_t)(1u << (r % 8));
}

static void merge(uint8_t *state, const uint8_t *other, size_t len)
{
    state[0] &= other[0];
    for (size_t i = 1; i < len; i++)
        state[i] |= other[i];
}

static void post_one(struct agree_op *op, tide__msg *m, enum tide__msg_dir dir, int peer,
                     void *buf)
{
    tide_req *req = &op->req;
    tide__msg_init(m, req, dir, peer, TIDE_KIND_AGREE, (uint32_t)op->round, buf, op->len);
    m->hdr.seq = op->wire; /* req->seq stays 0: no collective's bookkeeping */
    op->pending++;
    tide__req_post(req, m);
}

static void post_round(struct agree_op *op)
{
    tide_req *req = &op->req;
    int me = req->comm->rank;
    memcpy(op->out, op->state, op->len);
    op->pending = 0;
    for (int q = 0; q < op->n; q++) /* receives first: a peer may be ahead */
        if (q != me && !op->gone[q])
            post_one(op, &op->msgs[2 * q], TIDE_MSG_RECV, q, op->in + (size_t)q * op->len);
    for (int q = 0; q < op->n; q++)
        if (q != me && !op->gone[q])
            post_one(op, &op->msgs[2 * q + 1], TIDE_MSG_SEND, q, op->out);
}

/* The rounds are over: op->state is the answer on every live rank. */
static void decide(struct agree_op *op)
{
    tide_req *req = &op->req;
    if (bit(op->state + 1, req->comm->rank)) {
        /* Only a lost link between live ranks (not a death) gets here. */
        tide__req_fail(req, TIDE_EPEER, "the other ranks lost this rank during the agreement");
        return;
    }
    tide__req_succeed(req);
}

static void next_round(struct agree_op *op)
{
    if (++op->round > op->n) {
        decide(op);
        return;
    }
    post_round(op);
    if (!op->pending) /* everyone else is dead: nothing to wait for */
        next_round(op);
}

static void agree_start(tide_req *req)
{
    struct agree_op *op = (struct agree_op *)req;
    struct tide__transport *tp = req->ctx->tp;
    for (int q = 0; q < op->n; q++) {
        int w = req->comm->world_of ? req->comm->world_of[q] : q;
        if (q != req->comm->rank && tp->ops->peer_reason(tp, w)) {
            op->gone[q] = 1; /* known lost before the call: part of the input */
            set_bit(op->state + 1, q);
        }
    }
    post_round(op);
    if (!op->pending)
        next_round(op);
}

static void agree_step(tide_req *req, tide__msg *m)
{
    struct agree_op *op = (struct agree_op *)req;
    int q = (int)(m - op->msgs) / 2;
    if (m->status == TIDE_EPEER) {
        op->gone[q] = 1;
        if (op->round == 0)
            set_bit(op->state + 1, q);
    } else if (m->dir == TIDE_MSG_RECV) {
        if (m->got != op->len) {
            tide__req_fail(req, TIDE_EPROTO, "rank %d sent a %zu-byte agreement state, not %zu",
                           m->peer, m->got, op->len);
            return;
        }
        merge(op->state, op->in + (size_t)q * op->len, op->len);
    }
    if (--op->pending == 0)
        next_round(op);
}

static void agree_describe(const tide_req *req, char *buf, size_t len)
{
    const struct agree_op *op = (const struct agree_op *)req;
    snprintf(buf, len, "round %d of %d", op->round, op->n);
}

static const struct tide__op_vtbl agree_vtbl = {"agree", agree_start, agree_step, NULL,
                                                agree_describe};

/* Run one agreement on comm with this rank's flag; on success *state
 * (malloc'd: the flag byte, then a bitmap of failed comm ranks) holds
 * the decision and *wire its sequence number. */
static int agreement(tide_comm *comm, int flag_in, uint8_t **failed, uint64_t *wire)
{
    int n = comm->size;
    size_t len = 1 + ((size_t)n + 7) / 8;
    size_t bufs = len * (2 + (size_t)n) + (size_t)n;
    size_t size = sizeof(struct agree_op) + 2 * (size_t)n * sizeof(tide__msg) + bufs;
    *failed = calloc(1, len);
    tide_req *req = *failed ? tide__req_new(comm, &agree_vtbl, size) : NULL;
    if (!req) {
        free(*failed);
        *failed = NULL;
        return TIDE_ENOMEM;
    }
    struct agree_op *op = (struct agree_op *)req;
    op->n = n;
    op->len = len;
    op->msgs = (tide__msg *)(op + 1);
    op->state = (uint8_t *)(op->msgs + 2 * n);
    op->out = op->state + len;
    op->in = op->out + len;
    op->gone = op->in + (size_t)n * len;
    op->state[0] = flag_in != 0;
    req->survives_revoke = true; /* recovery runs on a revoked comm */
    req->sees_peer_loss = true;
    op->wire = *wire = TIDE_RECOVERY_SEQ(atomic_fetch_add(&comm->agreements, 1));
    tide__wait_next();
    int rc = tide__req_submit(req, 0);
    if (rc == 0)
        rc = tide_wait(req, -1);
    if (rc == 0)
        memcpy(*failed, op->state, len);
    tide_req_free(req);
    if (rc) {
        free(*failed);
        *failed = NULL;
    }
    return rc;
}

int tide_comm_agree(tide_comm *comm, int *flag)
{
    if (!comm || !flag || tide__comm_usable(comm, "tide_comm_agree"))
        return TIDE_EINVAL;
    uint8_t *state;
    uint64_t wire;
    int rc = agreement(comm, *flag, &state, &wire);
    if (rc == 0)
        *flag = state[0];
    free(state);
    return rc;
}

int tide_comm_shrink(tide_comm *comm, tide_comm **newcomm)
{
    if (newcomm)
        *newcomm = NULL;
    if (!comm || !newcomm || tide__comm_usable(comm, "tide_comm_shrink"))
        return TIDE_EINVAL;
    uint8_t *state;
    uint64_t wire;
    int rc = agreement(comm, 1, &state, &wire);
    if (rc)
        return rc;
    int *members = malloc((size_t)comm->size * sizeof *members);
    int k = 0;
    for (int r = 0; members && r < comm->size; r++)
        if (!bit(state + 1, r))
            members[k++] = r;
    rc = members ? tide__comm_derive(comm, members, k, wire, newcomm) : TIDE_ENOMEM;
    if (!rc)
        tide__comm_hosts_init(*newcomm);
    free(members);
    free(state);
    return rc;
}
