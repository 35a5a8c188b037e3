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
 * with several parents in flight, the order in which their parts become
 * ready may differ between ranks, calling order does not.  And they
 * start on their communicator in number order, as a user's collectives
 * do (in the order they were posted): the engine tells a frame for a
 * collective that ended here from one for a collective still to come by
 * the highest number started (mismatch.c), so a part that started ahead
 * of an earlier one would make the earlier one's frames look like a
 * mismatch.  A part ready before its turn waits at its communicator's
 * gate (comm->gated) until every part numbered before it has started.
 * A part that never runs because its parent failed first still takes
 * its turn, failing at once, so that its number counts as failed here
 * and peers' frames for it are taken for leftovers, not for a mismatch.
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
    tide__zero(m, sizeof *m);
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

/* Start the parts whose turn has come.  The gate holds a reference to
 * each part in it (its parent may let go of it meanwhile). */
static void open_gate(tide_comm *comm)
{
    tide_req *part;
    while ((part = comm->gated) && part->seq == comm->started_seq + 1) {
        comm->gated = part->gate_next;
        part->gated = false;
        comm->started_seq = part->seq; /* even if it fails before its notes are read */
        tide__req_start_cmd(part);
        tide_req_free(part);
    }
}

void tide__part_admit(tide_req *part)
{
    tide_comm *comm = part->comm;
    tide_req **at = &comm->gated;
    while (*at && (*at)->seq < part->seq)
        at = &(*at)->gate_next;
    part->gate_next = *at;
    *at = part;
    part->gated = true;
    atomic_fetch_add(&part->refs, 1);
    open_gate(comm);
}

/* Fail part when it waits to start: it will, failing at once. */
static void fail_on_start(tide_req *part, int err, const char *why)
{
    part->late_err = err;
    snprintf(part->message, sizeof part->message, "%s", why);
}

bool tide__part_withdraw(tide_req *part, int err, const char *parent, const char *why)
{
    /* The parent's reason goes along: the part's peers may hear of the
     * failure from this part first, and "the allreduce it is part of
     * failed" alone did not tell them what differed (a mismatch across
     * two hosts, seen here about one run in 50). */
    char text[300];
    if (why)
        snprintf(text, sizeof text, "the %s it is part of failed: %s", parent, why);
    else
        snprintf(text, sizeof text, "the %s it is part of failed", parent);
    if (!part->gated) {
        tide__req_fail(part, err, "%s", text); /* its completion follows */
        return false;
    }
    fail_on_start(part, err, text);
    part->cb = NULL; /* gone from its parent: it completes to nobody */
    return true;
}

void tide__req_drop_part(tide_req *part, int err, const char *why)
{
    fail_on_start(part, err, why);
    tide__part_admit(part);
}
