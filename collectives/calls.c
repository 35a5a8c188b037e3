/* calls.c - the public collective calls: check the arguments, resolve
 * in-place forms, pick the algorithm, and hand the request to the
 * reactor.  Everything here runs on the caller's thread; nothing is sent
 * for a call that is rejected. */
#include "collectives/board.h"
#include "collectives/coll.h"
#include "collectives/stage.h"
#include "engine/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One call, as the checks and the launch see it. */
struct call {
    const char *fn;   /* "tide_iallreduce", for messages */
    const char *name; /* "allreduce", for the request */
    uint8_t kind;
    tide_comm *comm;
    const void *sendbuf;
    void *recvbuf;
    size_t count; /* the signature's count */
    tide_dtype dtype;
    size_t esize; /* dtype's size, 0 for an unknown dtype (check_common rejects it) */
    tide_op op;
    int root;
    struct tide__blocks blk;
    size_t bytes;     /* the whole vector, for the algorithm choice */
    void *stage_to;   /* see tide__coll.stage_to */
    size_t stage_bytes;
    uint64_t seq;     /* taken already (the boards' direct path), or 0 */
};

static int reject(const struct call *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int reject(const struct call *k, const char *fmt, ...)
{
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tide__log(TIDE_LOG_WARN, k->comm ? k->comm->rank : -1, "%s: %s", k->fn, why);
    return TIDE_EINVAL;
}

/* n * m elements of esize bytes, or SIZE_MAX on overflow. */
static size_t mul3(size_t n, size_t m, size_t esize)
{
    if (m && n > SIZE_MAX / m)
        return SIZE_MAX;
    n *= m;
    if (esize && n > SIZE_MAX / esize)
        return SIZE_MAX;
    return n * esize;
}

/* The checks every collective shares. */
static int check_common(const struct call *k, tide_req **req, bool reduces)
{
    if (!k->comm || !req)
        return reject(k, "comm and req must not be NULL");
    if (tide__comm_usable(k->comm, k->fn))
        return TIDE_EINVAL;
    if (!tide__dtype_valid((int)k->dtype))
        return reject(k, "unknown dtype %d", (int)k->dtype);
    if (reduces && !tide__op_valid((int)k->op))
        return reject(k, "unknown op %d", (int)k->op);
    if (reduces && !tide__op_fits(k->op, k->dtype))
        return reject(k, "op %s is for integer dtypes, not %s", tide_op_name(k->op),
                      tide_dtype_name(k->dtype));
    return 0;
}

static int check_root(const struct call *k)
{
    if (k->root < 0 || k->root >= k->comm->size)
        return reject(k, "root %d is not a rank of the communicator (size %d)", k->root,
                      k->comm->size);
    return 0;
}

static int check_buf(const struct call *k, const char *what, const void *buf, size_t bytes)
{
    if (bytes == SIZE_MAX)
        return reject(k, "%s: the count overflows the address space", what);
    if (!buf && bytes)
        return reject(k, "%s is NULL but the count is not 0", what);
    return 0;
}

/* Run the output through a staging buffer (see tide__coll.stage_to). */
static int stage(struct call *k, size_t out_bytes)
{
    void *tmp = malloc(out_bytes ? out_bytes : 1);
    if (!tmp)
        return TIDE_ENOMEM;
    k->stage_to = k->recvbuf;
    k->stage_bytes = out_bytes;
    k->recvbuf = tmp;
    return 0;
}

/* Give back what call k owns (it made no request). */
static void drop(struct call *k)
{
    free(k->blk.offs);
    k->blk.offs = NULL;
    if (k->stage_to)
        free(k->recvbuf);
}

/* The algorithm for call k (a program's, or a part of another
 * collective's), or NULL with the reason logged and what k owns given
 * back. */
static const struct tide__algo *choose(struct call *k, size_t select_bytes, bool part)
{
    char why[200];
    const struct tide__algo *algo =
        part ? tide__select(k->kind, k->comm, select_bytes, why, sizeof why)
             : tide__select_call(k->kind, k->comm, select_bytes, why, sizeof why);
    if (!algo) {
        drop(k);
        reject(k, "%s", why);
        return NULL;
    }
    /* Selected even for a group of one, so a misnamed TIDE_ALGO_* fails
     * on one rank as it would at scale. */
    return k->comm->size == 1 ? &tide__algo_local : algo;
}

/* Call k's arguments and signature into c, a request's or the direct
 * path's. */
static void fill(const struct call *k, const struct tide__algo *algo, struct tide__coll *c)
{
    tide_req *req = &c->req;
    req->opname = k->name;
    req->algorithm = algo->name;
    bool rooted = k->kind == TIDE_KIND_BROADCAST || k->kind == TIDE_KIND_REDUCE ||
                  k->kind == TIDE_KIND_GATHER || k->kind == TIDE_KIND_SCATTER;
    req->sig.kind = k->kind;
    req->sig.dtype = (uint8_t)k->dtype;
    req->sig.redop = (uint8_t)k->op;
    req->sig.root = rooted ? k->root : -1;
    req->sig.count = k->count;
    /* Ranks running different algorithms (different TIDE_ALGO_* values)
     * would pair up frames of different patterns: the algorithm is part
     * of the signature, so that is a mismatch, not corruption. */
    req->sig.flags = tide__algo_id(algo);
    req->op_bytes = k->bytes;
    c->kind = k->kind;
    c->sendbuf = k->sendbuf;
    c->recvbuf = k->recvbuf;
    c->count = k->count;
    c->dtype = k->dtype;
    c->op = k->op;
    c->root = k->root;
    c->esize = k->esize;
    c->blk = k->blk;
    c->algo = algo;
    c->stage_to = k->stage_to;
    c->stage_bytes = k->stage_bytes;
}

/* Make the request of call k with algo, numbered (as a part of another
 * request if `part`, subreq.c) but not submitted.  On failure what k
 * owns is given back. */
static int make(struct call *k, const struct tide__algo *algo, bool part, tide_req **out)
{
    tide_req *req = tide__coll_req_new(k->comm, algo->vt, algo->op_size);
    if (!req) {
        drop(k);
        return TIDE_ENOMEM;
    }
    struct tide__coll *c = (struct tide__coll *)req;
    fill(k, algo, c);
    if (k->seq)
        req->seq = k->seq;
    else if (part)
        tide__part_number(req);
    else
        tide__coll_number(req);
    if (algo->prepare)
        algo->prepare(c);
    *out = req;
    return 0;
}

/* A blocking call whose collective runs on boards: the direct path
 * (board.h).  *taken false: it did nothing, make the request as usual.
 * Otherwise it returns the call's status; *out is NULL if it ended
 * here, else the request that goes on from where it stopped. */
static int direct(struct call *k, const struct tide__algo *algo, tide_req **out, bool *taken)
{
    struct tide__board_op op;
    tide__board_direct_clear(&op);
    op.c.req.comm = k->comm;
    op.c.req.ctx = k->comm->ctx;
    fill(k, algo, &op.c);
    enum tide__direct end = tide__board_direct(&op, algo->board);
    *taken = end != TIDE__DIRECT_DECLINED;
    if (end == TIDE__DIRECT_DECLINED)
        return 0;
    if (end == TIDE__DIRECT_DONE) { /* (the blocking wrapper forgets wait_next) */
        drop(k);
        *out = NULL;
        return 0;
    }
    k->seq = op.c.req.seq;
    int rc = make(k, algo, false, out);
    if (rc) {
        /* Our part stays readable; the peers go on without us.  (Only
         * NUMBERED leaves them waiting for this rank, to their deadline,
         * as a rank that died would.) */
        if (end == TIDE__DIRECT_PUBLISHED)
            tide__board_abandon(&op);
        return rc;
    }
    if (end == TIDE__DIRECT_PUBLISHED)
        tide__board_adopt((struct tide__board_op *)*out, &op);
    return tide__req_submit(*out, k->bytes);
}

static int launch(struct call *k, tide_req **out)
{
    const struct tide__algo *algo = choose(k, k->bytes, false);
    if (!algo)
        return TIDE_EINVAL;
    if (algo->board && !k->stage_to && tide__wait_next_pending()) {
        bool taken;
        int rc = direct(k, algo, out, &taken);
        if (taken)
            return rc;
    }
    int rc = make(k, algo, false, out);
    return rc ? rc : tide__req_submit(*out, k->bytes);
}

static struct call call_of(const char *fn, const char *name, uint8_t kind, tide_comm *comm,
                           const void *sendbuf, void *recvbuf, size_t count, tide_dtype dtype,
                           tide_op op, int root)
{
    struct call k = {fn, name, kind, comm, sendbuf, recvbuf, count, dtype, tide_dtype_size(dtype),
                     op, root, {0, 0, NULL}, 0, NULL, 0, 0};
    return k;
}

int tide__coll_part(uint8_t kind, const char *name, tide_comm *comm, const void *sendbuf,
                    void *recvbuf, size_t count, tide_dtype dtype, tide_op op,
                    size_t select_bytes, tide_req **out)
{
    struct call k = call_of("a part of a collective", name, kind, comm, sendbuf, recvbuf, count,
                            dtype, op, 0);
    k.blk.total = count;
    k.bytes = count * k.esize;
    const struct tide__algo *algo = choose(&k, select_bytes ? select_bytes : k.bytes, true);
    return algo ? make(&k, algo, true, out) : TIDE_EINVAL;
}

/* ---- allreduce ---- */

int tide_iallreduce(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                    tide_dtype dtype, tide_op op, tide_req **req)
{
    struct call k = call_of("tide_iallreduce", "allreduce", TIDE_KIND_ALLREDUCE, comm, sendbuf,
                            recvbuf, count, dtype, op, 0);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, true);
    if (rc)
        return rc;
    size_t bytes = mul3(count, 1, k.esize);
    if (k.sendbuf == TIDE_IN_PLACE)
        k.sendbuf = recvbuf;
    if ((rc = check_buf(&k, "recvbuf", recvbuf, bytes)) || (rc = check_buf(&k, "sendbuf", k.sendbuf, bytes)))
        return rc;
    if (k.sendbuf != recvbuf && tide__overlaps(k.sendbuf, bytes, recvbuf, bytes) && (rc = stage(&k, bytes)))
        return rc;
    k.blk.total = count;
    k.bytes = bytes;
    return launch(&k, req);
}

int tide_allreduce(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                   tide_dtype dtype, tide_op op)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_iallreduce(comm, sendbuf, recvbuf, count, dtype, op, &req);
    return tide__wait_and_free(rc, req);
}

/* ---- broadcast ---- */

int tide_ibroadcast(tide_comm *comm, void *buf, size_t count, tide_dtype dtype, int root,
                    tide_req **req)
{
    struct call k = call_of("tide_ibroadcast", "broadcast", TIDE_KIND_BROADCAST, comm, buf, buf,
                            count, dtype, TIDE_SUM, root);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, false);
    if (rc || (rc = check_root(&k)))
        return rc;
    size_t bytes = mul3(count, 1, k.esize);
    if ((rc = check_buf(&k, "buf", buf, bytes)))
        return rc;
    k.blk.total = count;
    k.bytes = bytes;
    return launch(&k, req);
}

int tide_broadcast(tide_comm *comm, void *buf, size_t count, tide_dtype dtype, int root)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_ibroadcast(comm, buf, count, dtype, root, &req);
    return tide__wait_and_free(rc, req);
}

/* ---- reduce ---- */

int tide_ireduce(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                 tide_dtype dtype, tide_op op, int root, tide_req **req)
{
    struct call k = call_of("tide_ireduce", "reduce", TIDE_KIND_REDUCE, comm, sendbuf, recvbuf,
                            count, dtype, op, root);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, true);
    if (rc || (rc = check_root(&k)))
        return rc;
    size_t bytes = mul3(count, 1, k.esize);
    bool at_root = comm->rank == root;
    if (k.sendbuf == TIDE_IN_PLACE) {
        if (!at_root)
            return reject(&k, "TIDE_IN_PLACE is for the root only (the input of others is sendbuf)");
        k.sendbuf = recvbuf;
    }
    if ((rc = check_buf(&k, "sendbuf", k.sendbuf, bytes)))
        return rc;
    if (at_root && (rc = check_buf(&k, "recvbuf", recvbuf, bytes)))
        return rc;
    if (!at_root)
        k.recvbuf = NULL;
    if (at_root && k.sendbuf != recvbuf && tide__overlaps(k.sendbuf, bytes, recvbuf, bytes) &&
        (rc = stage(&k, bytes)))
        return rc;
    k.blk.total = count;
    k.bytes = bytes;
    return launch(&k, req);
}

int tide_reduce(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                tide_dtype dtype, tide_op op, int root)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_ireduce(comm, sendbuf, recvbuf, count, dtype, op, root, &req);
    return tide__wait_and_free(rc, req);
}

/* ---- all-gather ---- */

int tide_iallgather(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                    tide_dtype dtype, tide_req **req)
{
    struct call k = call_of("tide_iallgather", "allgather", TIDE_KIND_ALLGATHER, comm, sendbuf,
                            recvbuf, sendcount, dtype, TIDE_SUM, 0);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, false);
    if (rc)
        return rc;
    size_t esize = k.esize;
    size_t in = mul3(sendcount, 1, esize), out = mul3(sendcount, (size_t)comm->size, esize);
    char *own = recvbuf ? (char *)recvbuf + (size_t)comm->rank * (in == SIZE_MAX ? 0 : in) : NULL;
    if (k.sendbuf == TIDE_IN_PLACE)
        k.sendbuf = own;
    if ((rc = check_buf(&k, "recvbuf", recvbuf, out)) || (rc = check_buf(&k, "sendbuf", k.sendbuf, in)))
        return rc;
    k.blk.each = sendcount;
    k.bytes = out;
    return launch(&k, req);
}

int tide_allgather(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                   tide_dtype dtype)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_iallgather(comm, sendbuf, recvbuf, sendcount, dtype, &req);
    return tide__wait_and_free(rc, req);
}

/* Copy counts into offsets (n + 1 entries) and their total.  0, or
 * TIDE_EINVAL (said) when the total does not fit a size_t, or
 * TIDE_ENOMEM; on failure nothing is left allocated. */
static int offsets_of(const struct call *k, const size_t *counts, size_t **offs, size_t *total)
{
    int n = k->comm->size;
    *total = 0; /* written on every path: gcc -O3 cannot tell that callers read it only on 0 */
    *offs = malloc(((size_t)n + 1) * sizeof **offs);
    if (!*offs)
        return TIDE_ENOMEM;
    size_t sum = 0;
    for (int b = 0; b < n; b++) {
        (*offs)[b] = sum;
        if (counts[b] >= SIZE_MAX - sum) {
            free(*offs);
            *offs = NULL;
            return reject(k, "the counts add up past what a size_t holds (at rank %d)", b);
        }
        sum += counts[b];
    }
    (*offs)[n] = sum;
    *total = sum;
    return 0;
}

int tide_iallgatherv(tide_comm *comm, const void *sendbuf, void *recvbuf, const size_t *counts,
                     tide_dtype dtype, tide_req **req)
{
    struct call k = call_of("tide_iallgatherv", "allgatherv", TIDE_KIND_ALLGATHERV, comm, sendbuf,
                            recvbuf, 0, dtype, TIDE_SUM, 0);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, false);
    if (rc)
        return rc;
    if (!counts)
        return reject(&k, "counts must not be NULL");
    size_t total;
    if ((rc = offsets_of(&k, counts, &k.blk.offs, &total)))
        return rc;
    size_t esize = k.esize;
    size_t in = mul3(counts[comm->rank], 1, esize), out = mul3(total, 1, esize);
    if (k.sendbuf == TIDE_IN_PLACE)
        k.sendbuf = recvbuf ? (char *)recvbuf + k.blk.offs[comm->rank] * esize : NULL;
    if ((rc = check_buf(&k, "recvbuf", recvbuf, out)) || (rc = check_buf(&k, "sendbuf", k.sendbuf, in))) {
        free(k.blk.offs);
        return rc;
    }
    k.count = total;
    k.bytes = out;
    return launch(&k, req);
}

int tide_allgatherv(tide_comm *comm, const void *sendbuf, void *recvbuf, const size_t *counts,
                    tide_dtype dtype)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_iallgatherv(comm, sendbuf, recvbuf, counts, dtype, &req);
    return tide__wait_and_free(rc, req);
}

/* ---- reduce-scatter ---- */

/* Shared by the even and v forms once the blocks are known: resolve the
 * in-place form and stage the output when it overlaps the input
 * anywhere but at this rank's own block (where the algorithms write it
 * last, after reading that input block). */
static int reduce_scatter_launch(struct call *k, size_t total, tide_req **req)
{
    tide_comm *comm = k->comm;
    size_t esize = k->esize;
    size_t own_off = tide__blocks_off(&k->blk, comm->size, comm->rank);
    size_t in = mul3(total, 1, esize);
    size_t out = mul3(tide__blocks_off(&k->blk, comm->size, comm->rank + 1) - own_off, 1, esize);
    int rc;
    if (k->sendbuf == TIDE_IN_PLACE)
        k->sendbuf = k->recvbuf;
    if ((rc = check_buf(k, "sendbuf", k->sendbuf, in)) || (rc = check_buf(k, "recvbuf", k->recvbuf, out))) {
        free(k->blk.offs);
        return rc;
    }
    const char *own = k->sendbuf ? (const char *)k->sendbuf + own_off * esize : NULL;
    if (k->recvbuf != own && tide__overlaps(k->sendbuf, in, k->recvbuf, out) && (rc = stage(k, out))) {
        free(k->blk.offs);
        return rc;
    }
    k->count = total;
    k->bytes = in;
    return launch(k, req);
}

int tide_ireduce_scatter(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                         tide_dtype dtype, tide_op op, tide_req **req)
{
    struct call k = call_of("tide_ireduce_scatter", "reduce_scatter", TIDE_KIND_REDUCE_SCATTER,
                            comm, sendbuf, recvbuf, recvcount, dtype, op, 0);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, true);
    if (rc)
        return rc;
    size_t total = recvcount;
    if (comm->size > 1 && recvcount > SIZE_MAX / (size_t)comm->size)
        return reject(&k, "the count overflows the address space");
    total *= (size_t)comm->size;
    k.blk.each = recvcount;
    rc = reduce_scatter_launch(&k, total, req);
    return rc;
}

int tide_reduce_scatter(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                        tide_dtype dtype, tide_op op)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_ireduce_scatter(comm, sendbuf, recvbuf, recvcount, dtype, op, &req);
    return tide__wait_and_free(rc, req);
}

int tide_ireduce_scatterv(tide_comm *comm, const void *sendbuf, void *recvbuf,
                          const size_t *counts, tide_dtype dtype, tide_op op, tide_req **req)
{
    struct call k = call_of("tide_ireduce_scatterv", "reduce_scatterv",
                            TIDE_KIND_REDUCE_SCATTERV, comm, sendbuf, recvbuf, 0, dtype, op, 0);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, true);
    if (rc)
        return rc;
    if (!counts)
        return reject(&k, "counts must not be NULL");
    size_t total;
    if ((rc = offsets_of(&k, counts, &k.blk.offs, &total)))
        return rc;
    return reduce_scatter_launch(&k, total, req);
}

int tide_reduce_scatterv(tide_comm *comm, const void *sendbuf, void *recvbuf,
                         const size_t *counts, tide_dtype dtype, tide_op op)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_ireduce_scatterv(comm, sendbuf, recvbuf, counts, dtype, op, &req);
    return tide__wait_and_free(rc, req);
}

/* ---- gather, scatter, all-to-all ---- */

/* Gather and scatter: the root's side holds size blocks, others one. */
static int rooted_blocks(struct call *k, tide_req **req, const void *one, const void *all,
                         const char *one_name, const char *all_name)
{
    tide_comm *comm = k->comm;
    int rc = check_common(k, req, false);
    if (rc || (rc = check_root(k)))
        return rc;
    if (one == TIDE_IN_PLACE || all == TIDE_IN_PLACE)
        return reject(k, "TIDE_IN_PLACE is not supported here");
    size_t esize = k->esize;
    size_t b1 = mul3(k->count, 1, esize), ball = mul3(k->count, (size_t)comm->size, esize);
    if ((rc = check_buf(k, one_name, one, b1)))
        return rc;
    if (comm->rank == k->root && (rc = check_buf(k, all_name, all, ball)))
        return rc;
    k->blk.each = k->count;
    k->bytes = ball;
    return launch(k, req);
}

int tide_igather(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                 tide_dtype dtype, int root, tide_req **req)
{
    struct call k = call_of("tide_igather", "gather", TIDE_KIND_GATHER, comm, sendbuf, recvbuf,
                            sendcount, dtype, TIDE_SUM, root);
    if (req)
        *req = NULL;
    if (comm && (root < 0 || root >= comm->size || comm->rank != root))
        k.recvbuf = NULL;
    return rooted_blocks(&k, req, sendbuf, k.recvbuf, "sendbuf", "recvbuf");
}

int tide_gather(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                tide_dtype dtype, int root)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_igather(comm, sendbuf, recvbuf, sendcount, dtype, root, &req);
    return tide__wait_and_free(rc, req);
}

int tide_iscatter(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                  tide_dtype dtype, int root, tide_req **req)
{
    struct call k = call_of("tide_iscatter", "scatter", TIDE_KIND_SCATTER, comm, sendbuf, recvbuf,
                            recvcount, dtype, TIDE_SUM, root);
    if (req)
        *req = NULL;
    if (comm && (root < 0 || root >= comm->size || comm->rank != root))
        k.sendbuf = NULL;
    return rooted_blocks(&k, req, recvbuf, k.sendbuf, "recvbuf", "sendbuf");
}

int tide_scatter(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                 tide_dtype dtype, int root)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_iscatter(comm, sendbuf, recvbuf, recvcount, dtype, root, &req);
    return tide__wait_and_free(rc, req);
}

int tide_ialltoall(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                   tide_dtype dtype, tide_req **req)
{
    struct call k = call_of("tide_ialltoall", "alltoall", TIDE_KIND_ALLTOALL, comm, sendbuf,
                            recvbuf, count, dtype, TIDE_SUM, 0);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, false);
    if (rc)
        return rc;
    if (sendbuf == TIDE_IN_PLACE)
        return reject(&k, "TIDE_IN_PLACE is not supported here");
    size_t bytes = mul3(count, (size_t)comm->size, k.esize);
    if ((rc = check_buf(&k, "sendbuf", sendbuf, bytes)) || (rc = check_buf(&k, "recvbuf", recvbuf, bytes)))
        return rc;
    if (tide__overlaps(sendbuf, bytes, recvbuf, bytes))
        return reject(&k, "sendbuf and recvbuf overlap");
    k.blk.each = count;
    k.bytes = bytes;
    return launch(&k, req);
}

int tide_alltoall(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                  tide_dtype dtype)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_ialltoall(comm, sendbuf, recvbuf, count, dtype, &req);
    return tide__wait_and_free(rc, req);
}

/* ---- barrier ---- */

/* A collective of no data: the dissemination barrier by messages, or,
 * among ranks that share memory, the boards' (select.c). */
int tide_ibarrier(tide_comm *comm, tide_req **req)
{
    struct call k = call_of("tide_ibarrier", "barrier", TIDE_KIND_BARRIER, comm, NULL, NULL, 0,
                            TIDE_UINT8, TIDE_SUM, 0);
    if (req)
        *req = NULL;
    int rc = check_common(&k, req, false);
    return rc ? rc : launch(&k, req);
}

int tide_barrier(tide_comm *comm)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_ibarrier(comm, &req);
    return tide__wait_and_free(rc, req);
}
