/* p2p.c - point-to-point send and receive: the simplest operations, one
 * message each.  Matching in send order per (peer, tag) comes from the
 * transport (a FIFO per peer and an ordered stream). */
#include "engine/context.h"
#include "engine/log.h"

struct p2p_op {
    tide_req req;
    tide__msg msg;
};

static void p2p_start(tide_req *req)
{
    struct p2p_op *op = (struct p2p_op *)req;
    tide__req_post(req, &op->msg);
}

static void p2p_step(tide_req *req, tide__msg *m)
{
    if (m->dir == TIDE_MSG_RECV)
        req->bytes = m->got;
    tide__req_succeed(req);
}

static const struct tide__op_vtbl send_vtbl = {"send", p2p_start, p2p_step, NULL, NULL};
static const struct tide__op_vtbl recv_vtbl = {"recv", p2p_start, p2p_step, NULL, NULL};

static int check_args(const char *fn, tide_comm *comm, const void *buf, size_t bytes, int peer,
                      int tag, tide_req **req)
{
    const char *why = NULL;
    if (!comm || !req)
        why = "comm and req must not be NULL";
    else if (tide__comm_usable(comm, fn))
        return TIDE_EINVAL;
    else if (peer < 0 || peer >= comm->size)
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

int tide__p2p_post(tide_comm *comm, enum tide__msg_dir dir, void *buf, size_t bytes, int peer,
                   uint32_t tag, tide_req **out)
{
    const struct tide__op_vtbl *vt = dir == TIDE_MSG_SEND ? &send_vtbl : &recv_vtbl;
    tide_req *req = tide__req_new(comm, vt, sizeof(struct p2p_op));
    if (!req)
        return TIDE_ENOMEM;
    req->algorithm = "p2p";
    struct p2p_op *op = (struct p2p_op *)req;
    tide__msg_init(&op->msg, req, dir, peer, TIDE_KIND_P2P, tag, buf, bytes);
    *out = req;
    return tide__req_submit(req, bytes);
}

int tide_isend(tide_comm *comm, const void *buf, size_t bytes, int peer, int tag, tide_req **req)
{
    if (req)
        *req = NULL;
    int rc = check_args("tide_isend", comm, buf, bytes, peer, tag, req);
    if (rc)
        return rc;
    /* The transport only reads a send's buffer. */
    return tide__p2p_post(comm, TIDE_MSG_SEND, (void *)buf, bytes, peer, (uint32_t)tag, req);
}

int tide_irecv(tide_comm *comm, void *buf, size_t bytes, int peer, int tag, tide_req **req)
{
    if (req)
        *req = NULL;
    int rc = check_args("tide_irecv", comm, buf, bytes, peer, tag, req);
    if (rc)
        return rc;
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
