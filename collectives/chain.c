/* chain.c - the pipelined chain broadcast, for large vectors.
 *
 * Relative ranks (root = 0) form a line 0 -> 1 -> ... -> n-1 and the
 * vector travels in chunks: rank i forwards chunk j to i + 1 as soon as it
 * has it from i - 1, so once the pipeline is full every link carries a
 * different chunk at the same time.  The time is about (n - 2 + chunks)
 * chunk-transfers, against log2(n) whole-vector transfers for a binomial
 * tree: for large vectors the chain wins by up to log2(n).
 *
 *   chunk:    0     1     2     3
 *   0 -> 1    t0    t1    t2    t3
 *   1 -> 2          t1    t2    t3    t4
 *   2 -> 3                t2    t3    t4    t5
 *
 * Each rank keeps up to WINDOW receives and WINDOW sends in flight.  Chunk
 * j uses slot j % WINDOW on both sides; a receive slot is reused only
 * after its chunk was forwarded, which also paces a fast upstream to a
 * slow downstream.  The tag of every message is its chunk index.
 *
 * Own start/step rather than the round driver: a round would wait for the
 * slowest link, which is exactly the stall a pipeline exists to avoid.
 */
#include "collectives/coll.h"

#include <stdint.h>
#include <stdio.h>

/* Messages in flight each way.  Eight chunks of up to 256 KiB keep 2 MiB
 * moving per link, beyond a loopback or datacenter link's
 * bandwidth-delay product, and the op stays within the pool's largest
 * (4 KiB) request class. */
#define WINDOW 8

/* Chunk size: 256 KiB makes the per-message cost (a 48-byte header, one
 * completion, one step) negligible next to the payload and lets each
 * send fill a socket buffer, while a 1 GiB vector is still 4096 chunks,
 * so filling the pipeline ((n - 2) chunk times) is noise.  Smaller
 * vectors are cut into CHUNKS_MIN pieces (of at least 16 KiB) so that the
 * mid sizes the selector gives the chain still pipeline. */
#define CHUNK_MAX ((size_t)256 << 10)
#define CHUNK_MIN ((size_t)16 << 10)
#define CHUNKS_MIN 8

enum recv_state {
    SLOT_FREE = 0, /* may take the next chunk */
    SLOT_POSTED,   /* receive in flight */
    SLOT_ARRIVED,  /* chunk is in recvbuf, not yet forwarded */
};

struct chain_op {
    struct tide__coll c;
    size_t chunk;            /* bytes per chunk (the last may be shorter) */
    uint32_t nchunks;        /* at least 1: an empty vector still sends one */
    uint32_t next_recv;      /* next chunk to post a receive for */
    uint32_t next_send;      /* next chunk to forward */
    uint32_t recvs_done;     /* chunks arrived */
    uint32_t sends_done;     /* chunks sent and completed */
    int prev, next;          /* comm ranks up and down the line; -1 if none */
    uint8_t rstate[WINDOW];  /* enum recv_state, per receive slot */
    uint8_t sbusy[WINDOW];   /* send slot in flight */
    uint32_t rchunk[WINDOW]; /* chunk a receive slot holds */
    tide__msg rmsg[WINDOW];
    tide__msg smsg[WINDOW];
};

_Static_assert(sizeof(struct chain_op) <= 4096, "chain_op must fit the largest pool class");

/* Bytes per chunk for a vector of `bytes`: a pure function of the
 * signature, so every rank cuts the vector alike. */
static size_t chunk_bytes(size_t bytes)
{
    size_t c = bytes / CHUNKS_MIN;
    if (c < CHUNK_MIN)
        return CHUNK_MIN;
    return c > CHUNK_MAX ? CHUNK_MAX : c;
}

static size_t vector_bytes(const struct chain_op *op)
{
    return op->c.count * op->c.esize;
}

static size_t chunk_off(const struct chain_op *op, uint32_t j)
{
    return (size_t)j * op->chunk;
}

static size_t chunk_len(const struct chain_op *op, uint32_t j)
{
    size_t end = chunk_off(op, j) + op->chunk, total = vector_bytes(op);
    return (end < total ? end : total) - chunk_off(op, j);
}

/* A pointer to chunk j of the vector (recvbuf is NULL for an empty one). */
static char *chunk_at(const struct chain_op *op, uint32_t j)
{
    char *buf = op->c.recvbuf;
    return buf ? buf + chunk_off(op, j) : NULL;
}

/* Forward, in order, every chunk that has arrived and has a send slot.
 * The root has every chunk from the start. */
static void post_sends(struct chain_op *op)
{
    if (op->next < 0)
        return;
    while (op->next_send < op->nchunks && !op->c.req.failing) {
        uint32_t j = op->next_send;
        int s = (int)(j % WINDOW);
        if (op->sbusy[s])
            return;
        if (op->prev >= 0) {
            if (op->rstate[s] != SLOT_ARRIVED || op->rchunk[s] != j)
                return;
            op->rstate[s] = SLOT_FREE;
        }
        op->sbusy[s] = 1;
        op->next_send++;
        tide__coll_post(&op->c, &op->smsg[s], TIDE_MSG_SEND, op->next, j, chunk_at(op, j),
                        chunk_len(op, j));
    }
}

static void post_recvs(struct chain_op *op)
{
    while (op->prev >= 0 && op->next_recv < op->nchunks && !op->c.req.failing) {
        uint32_t j = op->next_recv;
        int s = (int)(j % WINDOW);
        if (op->rstate[s] != SLOT_FREE)
            return;
        op->rstate[s] = SLOT_POSTED;
        op->rchunk[s] = j;
        op->next_recv++;
        tide__coll_post(&op->c, &op->rmsg[s], TIDE_MSG_RECV, op->prev, j, chunk_at(op, j),
                        chunk_len(op, j));
    }
}

/* Post what can be posted; succeed once every chunk has come in and gone
 * out (so no message is left in flight). */
static void pump(struct chain_op *op)
{
    post_sends(op); /* frees receive slots, so before the receives */
    post_recvs(op);
    if (op->c.req.failing)
        return;
    bool got_all = op->prev < 0 || op->recvs_done == op->nchunks;
    bool sent_all = op->next < 0 || op->sends_done == op->nchunks;
    if (got_all && sent_all)
        tide__coll_succeed(&op->c);
}

static void chain_start(tide_req *req)
{
    struct chain_op *op = (struct chain_op *)req;
    struct tide__coll *c = &op->c;
    int n = req->comm->size, vr = tide__rel(c, req->comm->rank);
    size_t bytes = vector_bytes(op);
    op->chunk = chunk_bytes(bytes);
    size_t nchunks = bytes ? (bytes - 1) / op->chunk + 1 : 1;
    if (nchunks > UINT32_MAX) { /* the tag is 32 bits */
        tide__req_fail(req, TIDE_EINVAL, "chain: %zu bytes is too many chunks", bytes);
        return;
    }
    op->nchunks = (uint32_t)nchunks;
    op->prev = vr > 0 ? tide__abs(c, vr - 1) : -1;
    op->next = vr < n - 1 ? tide__abs(c, vr + 1) : -1;
    pump(op);
}

static void chain_step(tide_req *req, tide__msg *m)
{
    struct chain_op *op = (struct chain_op *)req;
    if (m->dir == TIDE_MSG_RECV) {
        int s = (int)(m - op->rmsg);
        op->recvs_done++;
        /* The last rank forwards nothing, so its slot is free at once. */
        op->rstate[s] = op->next >= 0 ? SLOT_ARRIVED : SLOT_FREE;
    } else {
        int s = (int)(m - op->smsg);
        op->sends_done++;
        op->sbusy[s] = 0;
    }
    pump(op);
}

static void chain_describe(const tide_req *req, char *buf, size_t len)
{
    const struct chain_op *op = (const struct chain_op *)req;
    snprintf(buf, len, "chunk %u of %u (%u arrived, %u forwarded)",
             op->recvs_done < op->nchunks ? op->recvs_done + 1 : op->nchunks, op->nchunks,
             op->recvs_done, op->sends_done);
}

static const struct tide__op_vtbl chain_vtbl = {"collective", chain_start, chain_step,
                                                tide__coll_release, chain_describe};

const struct tide__algo tide__algo_chain_bcast = {"chain", sizeof(struct chain_op), &chain_vtbl,
                                                  NULL, NULL, NULL};
