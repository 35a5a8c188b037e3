/* subreq.c - a request made of requests.
 *
 * Some operations are others in sequence: a hierarchical all-reduce is a
 * reduce-scatter among the ranks of a host, an all-reduce across hosts
 * and an all-gather inside the host again (collectives/hier.c), each an
 * ordinary collective on a communicator of its own (hosts.c).  The
 * parent waits on a part as it waits on a message: the part is linked
 * among the parent's live messages by a tide__msg of direction
 * TIDE_MSG_OP, and its completion is delivered like a message's
 * (tide__ctx_deliver): the parent's step runs when the part succeeded,
 * and the parent fails with the part's account when it failed.  So what
 * holds for messages holds for parts, with no new rule: a failing parent
 * fails its running parts and completes only after they did (no part
 * still touches the caller's buffers then), and the deadline's account
 * and the flight recorder's "waits for" read the parts' messages
 * (waiting.c).
 *
 * Parts are numbered when their parent is called, not when they start:
 * with several parents in flight, starting order may differ between
 * ranks, calling order does not.  A part that never runs because its
 * parent failed first is still started, failing at once, so that its
 * number counts as failed here and peers' frames for it are taken for
 * leftovers (mismatch.c), not for a mismatch.
 *
 * Reactor thread, but for tide__part_number. */
#include "engine/context.h"

#include <stdio.h>
#include <string.h>

void tide__part_number(tide_req *part)
{
    /* Not tide__coll_number: a late error kept on an internal
     * communicator is never taken by a part, which would then run with
     * no number while its peers' parts had one. */
    part->seq = atomic_fetch_add(&part->comm->next_seq, 1);
}

static void part_done(tide_req *part, void *arg)
{
    tide__msg_done(part->ctx, arg, part->status);
}

void tide__req_post_part(tide_req *req, tide__msg *m, tide_req *part)
{
    memset(m, 0, sizeof *m);
    m->dir = TIDE_MSG_OP;
    m->peer = -1;
    m->buf = part;
    part->cb = part_done;
    part->cb_arg = m;
    part->deadline_ns = req->deadline_ns; /* one deadline for the whole */
    tide__req_post(req, m);
}

void tide__part_failed(tide_req *req, tide_req *part)
{
    if (part->lost)
        req->lost = part->lost; /* poison frames name the lost rank */
    tide__req_fail(req, part->status, "its %s on communicator %u failed: %s", part->opname,
                   part->comm->id, part->message);
}

void tide__req_drop_part(tide_req *part, int err, const char *why)
{
    part->late_err = err;
    snprintf(part->message, sizeof part->message, "%s", why);
    tide__req_start_cmd(part);
}
