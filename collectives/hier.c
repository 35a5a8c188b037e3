/* hier.c - the hierarchical all-reduce, for ranks spread evenly over
 * several hosts (engine/hosts.c made comm->host and comm->cross):
 *
 *   1. reduce-scatter inside the host: each of the host's L ranks ends
 *      with its slice (1/L of the vector) summed over the host;
 *   2. all-reduce of that slice across hosts, with the rank holding the
 *      same slice on every other host;
 *   3. all-gather inside the host: every rank has the whole result.
 *
 * Across hosts each rank moves 1/L of the vector where a flat algorithm
 * moves all of it (or its share of n ranks' pieces, through every rank
 * of every host): the network carries L times less, and what stays on
 * the host goes through shared memory.  Each part is an ordinary
 * collective on its communicator, chosen for it (a ring or the staged
 * algorithms inside the host, whatever suits the slice across), and run
 * as a part of this request (engine/subreq.c).
 *
 * The result is the same on every rank: every slice is reduced once,
 * in one order (host by host), and then copied.  It is not bit for bit
 * the flat algorithms' result, whose order differs (like any two
 * algorithms'). */
#include "collectives/coll.h"
#include "engine/log.h"

#include <stdio.h>
#include <string.h>

#define PARTS 3

struct hier_op {
    struct tide__coll c;
    tide_req *part[PARTS];
    int posted;          /* parts posted so far; part[posted - 1] runs */
    int err;             /* the parts could not be made: start fails */
    char why[160];
    size_t slice, slice_len; /* our slice of the vector, in elements */
    tide__msg m;         /* the running part */
};

/* The parts' names, as their own messages and the parent's give them. */
static const char *const part_name[PARTS] = {"reduce_scatter inside the host",
                                             "allreduce across hosts",
                                             "allgather inside the host"};

/* Make the three parts now (the caller's thread): their sequence numbers
 * on the host's and the cross communicator follow the calling order. */
static void prepare(struct tide__coll *c)
{
    struct hier_op *op = (struct hier_op *)c;
    tide_comm *comm = c->req.comm;
    if (c->req.late_err)
        return; /* it only reports a late error, numbered nowhere (async_error.c) */
    if (!comm->host[0] || !comm->host[1] || !comm->cross) {
        op->err = comm->hosts_err ? comm->hosts_err : TIDE_EPROTO;
        snprintf(op->why, sizeof op->why, "this rank could not make the communicators of its "
                 "host and across hosts (%s)", tide_strerror(op->err));
        return;
    }
    struct tide__blocks slices = {0, c->count, NULL};
    int L = comm->host[0]->size, i = comm->host[0]->rank;
    op->slice = tide__blocks_off(&slices, L, i);
    op->slice_len = tide__blocks_off(&slices, L, i + 1) - op->slice;
    char *mine = c->recvbuf ? tide__at(c, c->recvbuf, op->slice) : NULL;
    /* AVG divides once, by the whole group, after the sum (step). */
    tide_op sum = c->op == TIDE_AVG ? TIDE_SUM : c->op;
    /* Across hosts, our slice shares the host's network port with the
     * L - 1 others: choose its algorithm as for the whole vector (for a
     * small slice, recursive doubling's log2 H whole-slice rounds, all L
     * at once through one port, lose to Rabenseifner's halves). */
    size_t whole = c->count * c->esize;
    int rc = tide__coll_part(TIDE_KIND_REDUCE_SCATTERV, part_name[0], comm->host[0], c->sendbuf,
                             mine, c->count, c->dtype, sum, 0, &op->part[0]);
    if (!rc)
        rc = tide__coll_part(TIDE_KIND_ALLREDUCE, part_name[1], comm->cross, mine, mine,
                             op->slice_len, c->dtype, sum, whole, &op->part[1]);
    if (!rc)
        rc = tide__coll_part(TIDE_KIND_ALLGATHERV, part_name[2], comm->host[1], mine, c->recvbuf,
                             c->count, c->dtype, sum, 0, &op->part[2]);
    if (rc) {
        op->err = rc;
        snprintf(op->why, sizeof op->why, "could not make its parts: %s", tide_strerror(rc));
    }
}

static void post_next(struct hier_op *op)
{
    tide_req *part = op->part[op->posted++];
    tide__req_post_part(&op->c.req, &op->m, part);
}

static void start(tide_req *req)
{
    struct hier_op *op = (struct hier_op *)req;
    if (op->err) {
        tide__req_fail(req, op->err, "%s", op->why);
        return;
    }
    post_next(op);
}

/* Part posted - 1 succeeded. */
static void step(tide_req *req, tide__msg *m)
{
    (void)m;
    struct hier_op *op = (struct hier_op *)req;
    struct tide__coll *c = &op->c;
    if (op->posted == 2) /* our slice is summed over every rank */
        tide__coll_avg(c, tide__at(c, c->recvbuf, op->slice), op->slice_len);
    if (op->posted < PARTS)
        post_next(op);
    else
        tide__coll_succeed(c);
}

/* Parts never posted are dropped (their numbers count as failed here);
 * all are let go.  A dropped part carries its parent's reason: its peers
 * in the part may hear of the failure only from it (a rank whose part
 * runs while ours never will), and "failed first" alone lost what
 * differed in a mismatch (which counts, which ranks). */
static void release(tide_req *req)
{
    struct hier_op *op = (struct hier_op *)req;
    char why[sizeof req->message];
    snprintf(why, sizeof why, "the hierarchical all-reduce it is part of failed first (%.440s)",
             req->message[0] ? req->message : "aborted");
    for (int k = 0; k < PARTS; k++) {
        if (!op->part[k])
            continue;
        if (k >= op->posted)
            tide__req_drop_part(op->part[k], req->failing ? req->failing : TIDE_EABORTED, why);
        tide_req_free(op->part[k]);
        op->part[k] = NULL;
    }
    tide__coll_release(req);
}

static void describe(const tide_req *req, char *buf, size_t len)
{
    const struct hier_op *op = (const struct hier_op *)req;
    int k = op->posted ? op->posted - 1 : 0;
    const tide_req *part = op->part[k];
    snprintf(buf, len, "part %d of %d, %s (comm %u)", k + 1, PARTS, part_name[k],
             part ? part->comm->id : 0);
}

static const struct tide__op_vtbl hier_vtbl = {"allreduce", start, step, release, describe};

const struct tide__algo tide__algo_hier_allreduce = {"hier", sizeof(struct hier_op), &hier_vtbl,
                                                     NULL, prepare, NULL};
