/* p2p_req.c - the simplest request: one message to or from one rank of
 * a communicator.  The public send and receive (collectives/p2p.c) are
 * made of it, and so is what the engine itself says rank to rank at
 * finalize (trace_collect.c).  Matching in send order per (peer, tag)
 * comes from the transport (a FIFO per peer and an ordered stream). */
#include "engine/context.h"

struct p2p_op {
    tide_req req;
    tide__msg msg;
    int peer; /* the comm rank named */
};

static void p2p_start(tide_req *req)
{
    struct p2p_op *op = (struct p2p_op *)req;
    tide__req_post(req, &op->msg);
}

static void p2p_step(tide_req *req, tide__msg *m)
{
    if (m->dir == TIDE_MSG_RECV) {
        req->bytes = m->got;
        req->source = 1 + ((struct p2p_op *)req)->peer;
    }
    tide__req_succeed(req);
}

static const struct tide__op_vtbl send_vtbl = {"send", p2p_start, p2p_step, NULL, NULL};
static const struct tide__op_vtbl recv_vtbl = {"recv", p2p_start, p2p_step, NULL, NULL};

int tide__p2p_post(tide_comm *comm, enum tide__msg_dir dir, void *buf, size_t bytes, int peer,
                   uint32_t tag, tide_req **out)
{
    const struct tide__op_vtbl *vt = dir == TIDE_MSG_SEND ? &send_vtbl : &recv_vtbl;
    tide_req *req = tide__req_new(comm, vt, sizeof(struct p2p_op));
    if (!req)
        return TIDE_ENOMEM;
    req->algorithm = "p2p";
    struct p2p_op *op = (struct p2p_op *)req;
    op->peer = peer;
    tide__msg_init(&op->msg, req, dir, peer, TIDE_KIND_P2P, tag, buf, bytes);
    *out = req;
    return tide__req_submit(req, bytes);
}
