/* coll.h - what every collective shares: the call's arguments, the
 * blocks a vector is cut into, and a round driver that most algorithms
 * are written against.
 *
 * A collective request is a struct tide__coll (or a struct that starts
 * with one).  Its algorithm is a struct tide__algo: a name and an op
 * vtable.  Most algorithms are sequences of rounds (binomial trees,
 * recursive doubling, Bruck, pairwise exchange): they fill a struct
 * tide__rounds and let the driver in coll.c post each round, wait for its
 * messages and call them back.  The pipelined ring and chain need finer
 * control and bring their own start/step.
 *
 * All ranks are ranks of the communicator; messages map them to world
 * ranks.  Every message of a collective carries its signature (kind,
 * dtype, op, root, count), so a peer that called something else is
 * caught before a payload byte lands.
 */
#ifndef TIDE_COLL_H
#define TIDE_COLL_H

#include "collectives/kinds.h"
#include "collectives/reduction.h"
#include "engine/context.h"

/* Messages one round may post. */
#define TIDE_COLL_MSGS 4

struct tide__coll;
struct tide__board_algo;

/* An algorithm made of rounds.  post_round posts up to TIDE_COLL_MSGS
 * messages with tide__coll_send/recv (receives first: a peer that is
 * ahead then lands in place); end_round runs once they all completed;
 * finish runs after the last round, before success.  A round that posts
 * nothing goes straight to its end_round.  Any of them may call
 * tide__req_fail. */
struct tide__rounds {
    /* Count rounds (c->nrounds) and take scratch; 0 or a TIDE_E*. */
    int (*setup)(struct tide__coll *c);
    void (*post_round)(struct tide__coll *c, int round);
    void (*end_round)(struct tide__coll *c, int round);
    void (*finish)(struct tide__coll *c);
};

/* An algorithm: its name (as tide_req_algorithm reports it) and how the
 * engine runs it.  Round-based ones set rounds and use tide__coll_vtbl;
 * op_size is the size of their request struct.  prepare, optional, runs
 * on the caller's thread once the request is made and numbered: an
 * algorithm made of other collectives (hier.c) makes them there, since
 * their sequence numbers must follow the calling order.  board: the
 * hooks of an algorithm on boards, which a blocking call may run
 * without a request (board.h, the direct path). */
struct tide__algo {
    const char *name;
    size_t op_size;
    const struct tide__op_vtbl *vt;
    const struct tide__rounds *rounds;
    void (*prepare)(struct tide__coll *c);
    const struct tide__board_algo *board;
};

/* How a vector is cut into one block per rank.  Exactly one of: blocks
 * of `each` elements; `total` elements split as evenly as possible (the
 * first total % n blocks one longer); explicit offsets (n + 1 entries). */
struct tide__blocks {
    size_t each;
    size_t total;
    size_t *offs; /* owned: freed with the request */
};

/* The request of a collective.  Algorithms with state of their own
 * declare a struct that starts with this one and give its size in
 * tide__algo.op_size. */
struct tide__coll {
    tide_req req;
    uint8_t kind; /* TIDE_KIND_*, on the wire */
    const void *sendbuf; /* the input (recvbuf when in place) */
    void *recvbuf;
    size_t count; /* the signature's count; meaning per collective */
    tide_dtype dtype;
    tide_op op;
    int root;
    size_t esize; /* bytes per element */
    struct tide__blocks blk;

    const struct tide__algo *algo;
    /* When the output overlaps the input in a way the algorithm cannot
     * work in, it runs into recvbuf = a staging buffer and its result is
     * copied to stage_to on success.  Allreduce, reduce and
     * reduce-scatter are staged that way; all-gather, gather and scatter
     * are not, so their algorithms read their own input before writing
     * any of recvbuf. */
    void *stage_to;
    size_t stage_bytes;
    void *scratch; /* from tide__scratch_get, returned on release */
    size_t scratch_len;

    /* the round driver */
    int round, nrounds;
    int pending; /* messages of this round not yet complete */
    int nmsg;
    tide__msg msg[TIDE_COLL_MSGS];
};

/* tide__req_new for this layer's requests, collectives and
 * point-to-point alike: it also gives the context this layer's names
 * for kinds and signatures (signature.c; engine/names.c). */
tide_req *tide__coll_req_new(tide_comm *comm, const struct tide__op_vtbl *vt, size_t size);

/* The vtable of round-based algorithms (the driver). */
extern const struct tide__op_vtbl tide__coll_vtbl;

/* Post a send or receive of bytes for the current round (tag = round)
 * to or from comm rank peer.  A zero-byte message is still sent: the
 * peer counts on it. */
void tide__coll_send(struct tide__coll *c, int peer, const void *buf, size_t bytes);
void tide__coll_recv(struct tide__coll *c, int peer, void *buf, size_t bytes);

/* Same, with an explicit tag, for algorithms with their own step (the
 * ring, the chain): fill m and post it. */
void tide__coll_post(struct tide__coll *c, tide__msg *m, enum tide__msg_dir dir, int peer,
                     uint32_t tag, void *buf, size_t bytes);

/* Take len bytes of scratch into c->scratch (released with the request).
 * 0 or TIDE_ENOMEM (and the request is failed). */
int tide__coll_scratch(struct tide__coll *c, size_t len);

/* The element offset of block b of n blocks (b == n: the total). */
size_t tide__blocks_off(const struct tide__blocks *blk, int n, int b);

/* The element offset and length of block b of c's group. */
size_t tide__blk_off(const struct tide__coll *c, int b);
size_t tide__blk_len(const struct tide__coll *c, int b);

/* Byte pointers into a buffer, by element index.  A buffer may be NULL
 * where it holds no element (a count of 0, a rank that receives
 * nothing): no offset is applied to it then, not even 0, which C leaves
 * undefined (clang's UBSan reports it). */
static inline char *tide__at(const struct tide__coll *c, const void *buf, size_t elem)
{
    if (!buf)
        return NULL;
    return (char *)buf + elem * c->esize;
}

/* comm rank <-> rank relative to root (trees), and the group's size. */
/* Whether [a, a + alen) and [b, b + blen) share a byte. */
static inline bool tide__overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
    const char *x = a, *y = b;
    return alen && blen && x < y + blen && y < x + alen;
}

static inline int tide__rel(const struct tide__coll *c, int r)
{
    int n = c->req.comm->size;
    return (r - c->root + n) % n;
}

static inline int tide__abs(const struct tide__coll *c, int vr)
{
    return (vr + c->root) % c->req.comm->size;
}

/* Finish c successfully (copying out of the staging buffer if any).
 * Every algorithm ends with this rather than tide__req_succeed. */
void tide__coll_succeed(struct tide__coll *c);

/* memcpy and tide__reduce for algorithms: every byte an algorithm moves
 * or combines locally goes through these (or the streaming copy below),
 * so a timing-only simulation (tide-sim at thousands of ranks) can skip
 * them all. */
void tide__coll_copy(const struct tide__coll *c, void *dst, const void *src, size_t bytes);
/* tide__coll_copy with stores that go around the caches, and a fence
 * after them (streaming_copy.c says when that pays). */
void tide__coll_copy_streaming(const struct tide__coll *c, void *dst, const void *src,
                               size_t bytes);
void tide__coll_reduce(const struct tide__coll *c, void *dst, const void *a, const void *b,
                       size_t n);
/* Copy n blocks of bb bytes so that dst block (j + k) % n = src block j
 * (the rank-order rotations of Bruck and of rooted trees). */
void tide__coll_rotate(const struct tide__coll *c, void *dst, const void *src, int n, int k,
                       size_t bb);

/* Group-size arithmetic shared by the algorithms. */
static inline int tide__ceil_log2(int n) /* rounds of a tree or a dissemination */
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

static inline bool tide__is_pow2(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

/* Apply AVG's division to n elements at buf (no-op for other ops). */
void tide__coll_avg(struct tide__coll *c, void *buf, size_t n);

/* Reactor: release hook shared by all collectives (scratch, offsets). */
void tide__coll_release(tide_req *req);

/* The algorithm for a collective of kind over comm moving `bytes` (the
 * whole vector), honouring TIDE_ALGO_<KIND>: by comm's size and hosts
 * (engine/hosts.c: whether its ranks share staging memory, whether they
 * are spread over hosts).  NULL, with why filled, when the variable
 * names no algorithm of that collective. */
const struct tide__algo *tide__select(uint8_t kind, const tide_comm *comm, size_t bytes, char *why,
                                      size_t len);

/* tide__select for a program's call on comm (not a part of another
 * collective: the caller's thread, see tide_comm.select_memo): the
 * choice of the communicator's last call of that kind and size again
 * while the environment is as it was then. */
const struct tide__algo *tide__select_call(uint8_t kind, tide_comm *comm, size_t bytes, char *why,
                                           size_t len);

/* A collective made as part of another (hier.c, engine/subreq.c): kind
 * (all-reduce, reduce-scatter-v or all-gather-v, the blocks of the
 * latter two being count split evenly) on comm, with buffers the calling
 * collective has checked; its algorithm chosen for comm as for a vector
 * of select_bytes (0: its own size); numbered, not submitted.  0, or
 * TIDE_ENOMEM / TIDE_EINVAL (a TIDE_ALGO_* naming nothing), logged. */
int tide__coll_part(uint8_t kind, const char *name, tide_comm *comm, const void *sendbuf,
                    void *recvbuf, size_t count, tide_dtype dtype, tide_op op,
                    size_t select_bytes, tide_req **out);

/* A small number naming an algorithm on the wire (frame flags), and back. */
uint8_t tide__algo_id(const struct tide__algo *algo);
const char *tide__algo_name_of(uint8_t id);

/* ---- algorithms ---- */
extern const struct tide__algo tide__algo_ring_allreduce;
extern const struct tide__algo tide__algo_ring_reduce_scatter;
extern const struct tide__algo tide__algo_ring_allgather;
extern const struct tide__algo tide__algo_rd_allreduce;   /* recursive doubling */
extern const struct tide__algo tide__algo_rabenseifner;
extern const struct tide__algo tide__algo_rh_reduce_scatter; /* recursive halving */
extern const struct tide__algo tide__algo_rd_allgather;
extern const struct tide__algo tide__algo_bruck_allgather;
extern const struct tide__algo tide__algo_binomial_bcast;
extern const struct tide__algo tide__algo_chain_bcast;
extern const struct tide__algo tide__algo_binomial_reduce;
extern const struct tide__algo tide__algo_binomial_gather;
extern const struct tide__algo tide__algo_binomial_scatter;
extern const struct tide__algo tide__algo_pairwise_alltoall;
extern const struct tide__algo tide__algo_dissemination_barrier;
extern const struct tide__algo tide__algo_local; /* a group of one */
/* through the staging area, on one host (stage.h) */
extern const struct tide__algo tide__algo_stage_allreduce;
extern const struct tide__algo tide__algo_stage_allgather;
extern const struct tide__algo tide__algo_stage_bcast;
extern const struct tide__algo tide__algo_stage_reduce_scatter;
/* over several hosts, through comm->host and comm->cross (engine/hosts.c) */
extern const struct tide__algo tide__algo_hier_allreduce;
extern const struct tide__algo tide__algo_board_allreduce;
extern const struct tide__algo tide__algo_board_rsag_allreduce;
extern const struct tide__algo tide__algo_board_allgather;
extern const struct tide__algo tide__algo_board_reduce_scatter;
extern const struct tide__algo tide__algo_board_bcast;
extern const struct tide__algo tide__algo_board_stream;
extern const struct tide__algo tide__algo_board_stream_reduce;
extern const struct tide__algo tide__algo_board_stream_gather;
extern const struct tide__algo tide__algo_board_stream_scatter;
extern const struct tide__algo tide__algo_board_barrier;
extern const struct tide__algo tide__algo_board_alltoall;
extern const struct tide__algo tide__algo_board_reduce;
extern const struct tide__algo tide__algo_board_gather;
extern const struct tide__algo tide__algo_board_scatter;

#endif
