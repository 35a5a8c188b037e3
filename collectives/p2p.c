/* p2p.c - the public point-to-point send and receive: their checks, and
 * the any-source receive.  A send or receive naming its peer is one
 * message, the engine's simplest request (engine/p2p_req.c). */
#include "collectives/coll.h"
#include "engine/context.h"
#include "engine/log.h"

/* ---- the any-source receive ----
 *
 * One copy of the receive is posted to every rank of the communicator,
 * all sharing one claim (engine/transport.h): the first frame that
 * matches a copy takes the receive, and the other copies no longer match
 * anything.  Once that frame has arrived, they are taken back. */
struct any_op {
    tide_req req;
    struct tide__claim claim;
    tide__msg msg[]; /* one per comm rank, indexed by it */
};

static void any_start(tide_req *req)
{
    struct any_op *op = (struct any_op *)req;
    tide_comm *comm = req->comm;
    /* Ask a different rank first each time: the copy posted first takes
     * a frame that is already waiting, and a rank asked first every time
     * would starve the others. */
    int first = comm->any_first;
    comm->any_first = (first + 1) % comm->size;
    for (int k = 0; k < comm->size && !op->claim.winner; k++)
        tide__req_post(req, &op->msg[(first + k) % comm->size]);
}

/* Peer loss fails the receive while no frame has claimed it, or when it
 * is the claiming frame's sender that was lost. */
static void any_lost(struct any_op *op, tide__msg *m)
{
    tide_req *req = &op->req;
    struct tide__transport *tp = req->ctx->tp;
    const char *why = tp->ops->peer_reason(tp, m->peer);
    req->lost = m->peer + 1;
    tide__req_fail(req, TIDE_EPEER, "receive from any rank (tag %u): rank %d was lost%s%s",
                   m->hdr.tag, (int)(m - op->msg), why ? ": " : "", why ? why : "");
}

static void any_step(tide_req *req, tide__msg *m)
{
    struct any_op *op = (struct any_op *)req;
    tide__msg *winner = op->claim.winner;
    if (m->status == TIDE_EPEER && (!winner || winner == m)) {
        any_lost(op, m);
        return;
    }
    if (m == winner) {
        req->bytes = m->got;
        req->source = 1 + (int)(m - op->msg);
        for (tide__msg *c = req->live, *next; c; c = next) {
            next = c->req_next;
            tide__req_take_back(req, c, 0, NULL);
        }
    }
    /* Copies the transport could not give back at once complete later. */
    if (req->source && req->nlive == 0)
        tide__req_succeed(req);
}

static const struct tide__op_vtbl recv_any_vtbl = {"recv", any_start, any_step, NULL, NULL};

static int recv_any_post(tide_comm *comm, void *buf, size_t bytes, uint32_t tag, tide_req **out)
{
    size_t size = sizeof(struct any_op) + (size_t)comm->size * sizeof(tide__msg);
    tide_req *req = tide__coll_req_new(comm, &recv_any_vtbl, size);
    if (!req)
        return TIDE_ENOMEM;
    req->algorithm = "any-source";
    req->sees_peer_loss = true;
    struct any_op *op = (struct any_op *)req;
    for (int p = 0; p < comm->size; p++) {
        tide__msg_init(&op->msg[p], req, TIDE_MSG_RECV, p, TIDE_KIND_P2P, tag, buf, bytes);
        op->msg[p].claim = &op->claim;
    }
    *out = req;
    return tide__req_submit(req, bytes);
}

/* any_ok: peer may be TIDE_ANY_SOURCE (a receive). */
static int check_args(const char *fn, bool any_ok, tide_comm *comm, const void *buf, size_t bytes,
                      int peer, int tag, tide_req **req)
{
    const char *why = NULL;
    if (!comm || !req)
        why = "comm and req must not be NULL";
    else if (tide__comm_usable(comm, fn))
        return TIDE_EINVAL;
    else if (peer == TIDE_ANY_SOURCE && !any_ok)
        why = "TIDE_ANY_SOURCE names no rank to send to";
    else if ((peer < 0 && peer != TIDE_ANY_SOURCE) || peer >= comm->size)
        why = "peer is not a rank of the communicator";
    else if (tag < 0)
        why = "tag must not be negative";
    else if (!buf && bytes)
        why = "buf is NULL but bytes > 0";
    if (!why)
        return 0;
    tide__log(TIDE_LOG_WARN, comm ? comm->rank : -1, "%s(peer %d, tag %d, %zu bytes): %s", fn,
              peer, tag, bytes, why);
    return TIDE_EINVAL;
}

int tide_isend(tide_comm *comm, const void *buf, size_t bytes, int peer, int tag, tide_req **req)
{
    if (req)
        *req = NULL;
    int rc = check_args("tide_isend", false, comm, buf, bytes, peer, tag, req);
    if (rc)
        return rc;
    /* The transport only reads a send's buffer. */
    return tide__p2p_post(comm, TIDE_MSG_SEND, (void *)buf, bytes, peer, (uint32_t)tag, req);
}

int tide_irecv(tide_comm *comm, void *buf, size_t bytes, int peer, int tag, tide_req **req)
{
    if (req)
        *req = NULL;
    int rc = check_args("tide_irecv", true, comm, buf, bytes, peer, tag, req);
    if (rc)
        return rc;
    if (peer == TIDE_ANY_SOURCE)
        return recv_any_post(comm, buf, bytes, (uint32_t)tag, req);
    return tide__p2p_post(comm, TIDE_MSG_RECV, buf, bytes, peer, (uint32_t)tag, req);
}

int tide_send(tide_comm *comm, const void *buf, size_t bytes, int peer, int tag)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_isend(comm, buf, bytes, peer, tag, &req);
    return tide__wait_and_free(rc, req);
}

int tide_recv(tide_comm *comm, void *buf, size_t bytes, int peer, int tag)
{
    tide_req *req;
    tide__wait_next();
    int rc = tide_irecv(comm, buf, bytes, peer, tag, &req);
    return tide__wait_and_free(rc, req);
}
