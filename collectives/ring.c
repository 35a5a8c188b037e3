/* ring.c - the pipelined ring: the bandwidth-optimal algorithm for large
 * allreduce, reduce-scatter and all-gather (and their v forms).
 *
 * The vector is cut into one block per rank.  Reduce-scatter takes n-1
 * steps: in step t rank r sends block r-t-1 (its partial sum) to r+1 and
 * receives block r-t-2 from r-1, adding its own input to it; after the
 * last step it holds block r fully reduced.  All-gather takes n-1 more
 * steps passing finished blocks around the same ring.  Every rank sends
 * and receives 2(n-1)/n of the vector, the minimum.
 *
 * Pipelining: each block is cut into chunks, and (step, chunk) pairs are
 * "units" numbered step-major.  Unit u may be sent as soon as unit u - C
 * (the same chunk one step earlier) has arrived, so chunk 0 of step t+1
 * is on the wire while chunk 1 of step t is still arriving and being
 * reduced: reduction overlaps transfer.  Up to WINDOW receives and
 * WINDOW sends are in flight; reduce-scatter receives land in SLOTS
 * staging slots of one chunk each, so memory stays small however large
 * the vector.
 *
 * Why so few, and why 512 KiB: the socket buffers already queue what
 * the window does not, and over loopback TCP a connection carrying a
 * megabyte or more each way at once falls off a cliff (a raw-socket
 * exchange of 2 MiB takes about twice as long in one piece as in 512 KiB
 * lockstep pieces; the receive queue grows and the kernel starts
 * advertising zero windows).  Measured with tools/compare.sh-style
 * interleaved runs at 2 and 4 ranks, 8 x 128 KiB in flight lost 10-30 %
 * from 2 to 64 MiB against 2 x 512 KiB; see docs/algorithms.md.
 *
 * Pacing, on two ranks: there one connection carries both directions,
 * and a unit with no data dependency (every unit of the first step) went
 * out as fast as the socket took it, so each side filled the other's
 * receive queue while busy sending its own: zero windows (159 wanted per
 * 16 MiB allreduce), reordering and retransmissions, and megabytes of
 * queued segments between the caches.  So on two ranks a unit goes out
 * only once the unit WINDOW before it has arrived: at most WINDOW chunks
 * queue each way.  2-rank allreduce 16 MiB 10.0 -> 5.8 ms, 64 MiB 36.5 ->
 * 24.7 ms (docs/algorithms.md has the series).  Blocks of a few chunks
 * fit the socket buffers whole and stay unpaced (2 MiB measured slower
 * paced).  Rings of 3 or more, where each connection carries one
 * direction, gained nothing (4 ranks on 2 cores: within noise, if
 * anything slower).
 *
 *   n = 3, rank 0 (blocks A B C; rank 0 owns A at the end of step 1):
 *     step 0: send C (input)        recv B, B += input B
 *     step 1: send B (partial)      recv A, A += input A  -> A final
 *     step 2: send A                recv C (final, from rank 2)
 *     step 3: send C                recv B (final, from rank 1)
 *
 * Where partial sums live: an allreduce keeps them in recvbuf (its
 * blocks are overwritten by the all-gather later); a reduce-scatter has
 * only its own block in recvbuf, so a partial stays in its staging slot
 * until the send that forwards it completes.  Every block is reduced
 * along one path, so every rank ends with the same bits.
 */
#include "collectives/coll.h"

#include <stdio.h>
#include <string.h>

#define WINDOW 2            /* receives and sends in flight */
#define SLOTS (WINDOW + 1)  /* a partial waiting on its send must not stall the next receive */
#define CHUNK (512u << 10)  /* bytes per chunk, see above */
#define MAX_CHUNKS (1u << 20) /* per block: units number tags (32 bits), so huge blocks grow chunks */
#define PACE_MIN_CHUNKS 5   /* two ranks pace blocks of this many chunks and more, see above */
#define NO_UNIT UINT64_MAX

struct ring_op {
    struct tide__coll c;
    int n, r;
    int first, last; /* steps [first, last): t < n-1 reduce-scatter, then all-gather */
    int nchunks;     /* C: chunks per block */
    size_t chunk;    /* elements per chunk */
    bool keep_partials; /* reduce-scatter: partials live in slots */
    bool paced;         /* a send waits for the arrival WINDOW units before it */
    uint64_t units;
    uint64_t next_recv, next_send;
    uint64_t done_base; /* every unit below it has arrived */
    uint64_t done_bits; /* unit done_base + i has arrived: bit i */
    uint64_t sends_done;
    uint64_t slot_unit[SLOTS]; /* staging slot -> unit it holds */
    uint64_t rmsg_unit[WINDOW], smsg_unit[WINDOW];
    tide__msg rmsg[WINDOW], smsg[WINDOW];
};

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

static bool is_rs(const struct ring_op *o, int t)
{
    return t < o->n - 1;
}

/* The blocks unit u sends and receives. */
static void unit_blocks(const struct ring_op *o, uint64_t u, int *t, int *ch, int *sblk, int *rblk)
{
    *t = o->first + (int)(u / (uint64_t)o->nchunks);
    *ch = (int)(u % (uint64_t)o->nchunks);
    if (is_rs(o, *t)) {
        *sblk = mod(o->r - *t - 1, o->n);
        *rblk = mod(o->r - *t - 2, o->n);
    } else {
        int s = *t - (o->n - 1);
        *sblk = mod(o->r - s, o->n);
        *rblk = mod(o->r - s - 1, o->n);
    }
}

/* Chunk ch of block b: its first element and length (0 past the end). */
static size_t chunk_of(const struct ring_op *o, int b, int ch, size_t *len)
{
    size_t blen = tide__blk_len(&o->c, b), at = (size_t)ch * o->chunk;
    *len = at >= blen ? 0 : (blen - at < o->chunk ? blen - at : o->chunk);
    return tide__blk_off(&o->c, b) + at;
}

static char *slot_buf(struct ring_op *o, int s)
{
    return (char *)o->c.scratch + (size_t)s * o->chunk * o->c.esize;
}

static bool arrived(const struct ring_op *o, uint64_t u)
{
    return u < o->done_base || (o->done_bits >> (u - o->done_base) & 1);
}

static void mark_arrived(struct ring_op *o, uint64_t u)
{
    o->done_bits |= 1ull << (u - o->done_base);
    while (o->done_bits & 1) {
        o->done_bits >>= 1;
        o->done_base++;
    }
}

static int free_index(const uint64_t *units, int n)
{
    for (int i = 0; i < n; i++)
        if (units[i] == NO_UNIT)
            return i;
    return -1;
}

static int slot_holding(const struct ring_op *o, uint64_t u)
{
    for (int s = 0; s < SLOTS; s++)
        if (o->slot_unit[s] == u)
            return s;
    return -1;
}

/* Post receives while the window, a message and (for reduce-scatter
 * steps) a staging slot are free.  Empty chunks (short blocks) have
 * nothing to carry: both sides skip them. */
static void post_recvs(struct ring_op *o)
{
    while (o->next_recv < o->units && o->next_recv - o->done_base < 64) {
        uint64_t u = o->next_recv;
        int t, ch, sb, rb;
        unit_blocks(o, u, &t, &ch, &sb, &rb);
        size_t len, at = chunk_of(o, rb, ch, &len);
        if (!len) {
            mark_arrived(o, u);
            o->next_recv++;
            continue;
        }
        int m = free_index(o->rmsg_unit, WINDOW), s = -1;
        if (m < 0)
            return;
        void *dst = tide__at(&o->c, o->c.recvbuf, at);
        if (is_rs(o, t)) {
            if ((s = free_index(o->slot_unit, SLOTS)) < 0)
                return;
            o->slot_unit[s] = u;
            dst = slot_buf(o, s);
        }
        o->rmsg_unit[m] = u;
        o->next_recv++;
        tide__coll_post(&o->c, &o->rmsg[m], TIDE_MSG_RECV, mod(o->r - 1, o->n), (uint32_t)u, dst,
                        len * o->c.esize);
    }
}

/* Where unit u's payload comes from. */
static const void *send_source(struct ring_op *o, uint64_t u, int t, size_t at)
{
    if (t == 0)
        return tide__at(&o->c, o->c.sendbuf, at);
    if (is_rs(o, t) && o->keep_partials)
        return slot_buf(o, slot_holding(o, u - (uint64_t)o->nchunks));
    return tide__at(&o->c, o->c.recvbuf, at);
}

/* Post sends in unit order while their data is ready: unit u needs unit
 * u - C (its chunk, one step earlier) to have arrived, and when paced,
 * every unit before u - WINDOW too. */
static void post_sends(struct ring_op *o)
{
    while (o->next_send < o->units) {
        uint64_t u = o->next_send;
        if (u >= (uint64_t)o->nchunks && !arrived(o, u - (uint64_t)o->nchunks))
            return;
        if (o->paced && u >= o->done_base + WINDOW)
            return;
        int t, ch, sb, rb;
        unit_blocks(o, u, &t, &ch, &sb, &rb);
        size_t len, at = chunk_of(o, sb, ch, &len);
        if (!len) {
            o->sends_done++;
            o->next_send++;
            continue;
        }
        int m = free_index(o->smsg_unit, WINDOW);
        if (m < 0)
            return;
        o->smsg_unit[m] = u;
        o->next_send++;
        tide__coll_post(&o->c, &o->smsg[m], TIDE_MSG_SEND, mod(o->r + 1, o->n), (uint32_t)u,
                        (void *)send_source(o, u, t, at), len * o->c.esize);
    }
}

static void pump(struct ring_op *o)
{
    post_recvs(o);
    post_sends(o);
    if (o->done_base == o->units && o->sends_done == o->units && !o->c.req.failing)
        tide__coll_succeed(&o->c);
}

/* A reduce-scatter chunk arrived in slot s: add this rank's input.  The
 * last step's result is final (this rank's block); earlier ones are
 * partials to forward. */
static void reduce_arrival(struct ring_op *o, int s, int t, int rb, int ch)
{
    struct tide__coll *c = &o->c;
    size_t len, at = chunk_of(o, rb, ch, &len);
    const void *in = tide__at(c, c->sendbuf, at);
    void *dst = tide__at(c, c->recvbuf, at); /* allreduce: recvbuf is full size */
    bool final = t == o->n - 2;
    if (final && c->kind != TIDE_KIND_ALLREDUCE) /* recvbuf holds only this rank's block */
        dst = tide__at(c, c->recvbuf, at - tide__blk_off(c, rb));
    else if (!final && o->keep_partials)
        dst = slot_buf(o, s);
    tide__coll_reduce(c, dst, slot_buf(o, s), in, len);
    if (final)
        tide__coll_avg(c, dst, len);
    if (final || !o->keep_partials)
        o->slot_unit[s] = NO_UNIT;
}

static void ring_step(tide_req *req, tide__msg *m)
{
    struct ring_op *o = (struct ring_op *)req;
    int t, ch, sb, rb;
    if (m->dir == TIDE_MSG_SEND) {
        int i = (int)(m - o->smsg);
        uint64_t u = o->smsg_unit[i];
        o->smsg_unit[i] = NO_UNIT;
        o->sends_done++;
        unit_blocks(o, u, &t, &ch, &sb, &rb);
        if (t > 0 && is_rs(o, t) && o->keep_partials) /* the partial went on: free its slot */
            o->slot_unit[slot_holding(o, u - (uint64_t)o->nchunks)] = NO_UNIT;
    } else {
        int i = (int)(m - o->rmsg);
        uint64_t u = o->rmsg_unit[i];
        o->rmsg_unit[i] = NO_UNIT;
        unit_blocks(o, u, &t, &ch, &sb, &rb);
        if (is_rs(o, t))
            reduce_arrival(o, slot_holding(o, u), t, rb, ch);
        mark_arrived(o, u);
    }
    pump(o);
}

static void ring_start(tide_req *req)
{
    struct ring_op *o = (struct ring_op *)req;
    struct tide__coll *c = &o->c;
    o->n = req->comm->size;
    o->r = req->comm->rank;
    o->first = c->kind == TIDE_KIND_ALLGATHER || c->kind == TIDE_KIND_ALLGATHERV ? o->n - 1 : 0;
    o->last = c->kind == TIDE_KIND_ALLREDUCE || o->first == o->n - 1 ? 2 * o->n - 2 : o->n - 1;
    o->keep_partials = c->kind != TIDE_KIND_ALLREDUCE;
    for (int i = 0; i < WINDOW; i++)
        o->rmsg_unit[i] = o->smsg_unit[i] = NO_UNIT;
    for (int s = 0; s < SLOTS; s++)
        o->slot_unit[s] = NO_UNIT;

    size_t most = 0;
    for (int b = 0; b < o->n; b++)
        if (tide__blk_len(c, b) > most)
            most = tide__blk_len(c, b);
    /* Chunks of about CHUNK bytes, all the same length: a block of
     * 1 MiB + 1 KiB (an FSDP unit with its bias) went as 512 KiB, 512 KiB
     * and a 1 KiB straggler, one more message per step for nothing. */
    size_t target = (most + MAX_CHUNKS - 1) / MAX_CHUNKS;
    if (target < CHUNK / c->esize)
        target = CHUNK / c->esize;
    size_t nchunks = (most + target / 2) / target;
    if (nchunks == 0)
        nchunks = 1;
    o->nchunks = (int)nchunks;
    o->chunk = most ? (most + nchunks - 1) / nchunks : target;
    o->units = (uint64_t)(o->last - o->first) * (uint64_t)o->nchunks;
    o->paced = o->n == 2 && o->nchunks >= PACE_MIN_CHUNKS;

    if (o->first == o->n - 1) { /* all-gather: start from this rank's block in place */
        size_t own = tide__blk_off(c, o->r), len = tide__blk_len(c, o->r);
        char *dst = tide__at(c, c->recvbuf, own);
        if (len && dst != (const char *)c->sendbuf)
            memmove(dst, c->sendbuf, len * c->esize);
        c->sendbuf = c->recvbuf; /* the all-gather only reads recvbuf */
    } else if (most && tide__coll_scratch(c, SLOTS * o->chunk * c->esize)) {
        return;
    }
    pump(o);
}

/* Units count (step, chunk) pairs; the step is the ring's round. */
static void ring_describe(const tide_req *req, char *buf, size_t len)
{
    const struct ring_op *o = (const struct ring_op *)req;
    int t = o->first + (o->nchunks ? (int)(o->done_base / (uint64_t)o->nchunks) : 0);
    snprintf(buf, len, "step %d of %d (%llu of %llu units arrived, %llu sent)", t - o->first + 1,
             o->last - o->first, (unsigned long long)o->done_base,
             (unsigned long long)o->units, (unsigned long long)o->sends_done);
}

static const struct tide__op_vtbl ring_vtbl = {"collective", ring_start, ring_step,
                                               tide__coll_release, ring_describe};

const struct tide__algo tide__algo_ring_allreduce = {"ring", sizeof(struct ring_op), &ring_vtbl,
                                                     NULL, NULL, NULL};
const struct tide__algo tide__algo_ring_reduce_scatter = {"ring", sizeof(struct ring_op),
                                                          &ring_vtbl, NULL, NULL, NULL};
const struct tide__algo tide__algo_ring_allgather = {"ring", sizeof(struct ring_op), &ring_vtbl,
                                                     NULL, NULL, NULL};
