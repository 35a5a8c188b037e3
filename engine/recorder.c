/* recorder.c - the flight recorder's ring: each collective is written into
 * its communicator's slot seq % TIDE_REC_OPS as it starts and updated as
 * it ends, on the reactor thread.  The post time is the deadline's origin
 * (read by the caller's thread when it made the request), so nothing here
 * is shared with user threads.
 *
 * Cost: a handful of stores and two reads of the coarse clock per
 * collective (start and end); README.md gives the measured overhead on
 * small allreduces. */
#include "engine/context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct tide__rec_op *slot(tide_comm *comm, uint64_t seq)
{
    return &comm->rec->ops[seq % TIDE_REC_OPS];
}

/* Write req's entry as started at now, or as done then too if `whole`
 * (one pass of stores: the direct path records every small collective). */
static void record_start(tide_req *req, uint64_t now, bool whole)
{
    struct tide__ctx *ctx = req->ctx;
    if (!ctx->rec.ready)
        tide__rec_setup(ctx);
    if (!ctx->drive->records) /* (simulated ranks: context.h) */
        return;
    /* Made at the first collective: a communicator that never runs one
     * (and every simulated rank) costs nothing. */
    if (!req->comm->rec && !(req->comm->rec = calloc(1, sizeof *req->comm->rec)))
        return; /* no recording on this comm; the operation itself goes on */
    struct tide__rec_op *op = slot(req->comm, req->seq);
    op->seq = req->seq;
    op->t_post = req->deadline_ns - ctx->timeout_ns; /* the deadline counts from the post */
    op->t_start = now > op->t_post ? now : op->t_post;
    op->t_end = whole ? op->t_start : 0;
    op->count = req->sig.count;
    op->bytes = req->op_bytes;
    op->algorithm = req->algorithm;
    op->root = req->sig.root;
    op->status = 0;
    op->kind = req->sig.kind;
    op->dtype = req->sig.dtype;
    op->redop = req->sig.redop;
    op->state = whole ? TIDE_REC_DONE : TIDE_REC_STARTED;
}

static void record_end(tide_req *req, int status, uint64_t now)
{
    if (!req->comm->rec)
        return;
    struct tide__rec_op *op = slot(req->comm, req->seq);
    if (op->seq != req->seq)
        return; /* overwritten: TIDE_REC_OPS newer ones started meanwhile */
    op->t_end = now > op->t_start ? now : op->t_start;
    op->status = status;
    op->state = status ? TIDE_REC_FAILED : TIDE_REC_DONE;
}

/* Start and end times come from the coarse clock (the kernel's last
 * tick, engine/clock.h): they are only shown, to a tenth of a second by
 * the doctor, and a precise read costs 25-45 ns in a VM, two a
 * collective.  Neither goes before the post time, which is the
 * deadline's origin on the precise clock.  (Simulated ranks record
 * nothing: context.h, drive_ops.records.) */
void tide__rec_start(tide_req *req)
{
    record_start(req, tide__coarse_now_ns(), false);
}

void tide__rec_end(tide_req *req, int status)
{
    record_end(req, status, tide__coarse_now_ns());
}

void tide__rec_whole(tide_req *req, uint64_t now)
{
    record_start(req, now, true);
}

/* Automatic dumps at most this often: the first failure's picture is the
 * one that explains; the poison it sends fails the rest a moment later. */
#define AUTO_DUMP_GAP_NS (1000ull * 1000 * 1000)

void tide__rec_failed(tide_req *req, int err)
{
    struct tide__ctx *ctx = req->ctx;
    struct tide__recorder *rec = req->comm->rec;
    if (!rec)
        return;
    if (!rec->first_error[0])
        snprintf(rec->first_error, sizeof rec->first_error, "%s", req->message);
    struct tide__rec_op *op = slot(req->comm, req->seq);
    if (op->seq == req->seq)
        op->status = err; /* still running until its messages drain */
    if (!ctx->rec.dir[0] || ctx->broken == TIDE_EABORTED)
        return;
    uint64_t now = tide__ctx_now(ctx);
    if (ctx->rec.last_auto_ns && now - ctx->rec.last_auto_ns < AUTO_DUMP_GAP_NS)
        return;
    ctx->rec.last_auto_ns = now;
    tide__rec_dump(ctx, err == TIDE_ETIMEDOUT ? "deadline" : "error");
}
