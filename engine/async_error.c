/* async_error.c - a failure that reaches a rank after the collective it
 * concerns had already succeeded there.
 *
 * A rank that only sends in a collective (a broadcast's or scatter's
 * root, a leaf of a reduce or gather) finishes as soon as its bytes are
 * handed to the kernel: nothing in the pattern comes back to it.  When
 * the peers find the calls mismatched (a different root, count, kind),
 * their report arrives after the fact.  Two ranks that both believe they
 * are a broadcast's root never receive at all, and before this file both
 * "succeeded" without a word.  Making such senders wait for an answer
 * would cost every broadcast a round trip; instead the report is kept on
 * the communicator and handed to the program at the next collective it
 * starts there, the way NCCL reports asynchronous errors: that call's
 * request fails with the report, sends nothing and uses no sequence
 * number, so the ranks' collectives stay paired.
 *
 * Threads: the reactor records (late_text, then late_err, release); a
 * caller takes (copies late_text, then clears late_err).  The reactor
 * writes only while late_err is 0, so a caller never reads text being
 * rewritten. */
#include "engine/context.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tide__async_error_record(tide_comm *comm, uint64_t seq, int err, const char *fmt, ...)
{
    /* One report per collective, the first (several peers may tell the
     * same story), and none while an earlier one waits to be taken. */
    if (seq <= comm->late_seq || atomic_load(&comm->late_err))
        return;
    comm->late_seq = seq;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comm->late_text, sizeof comm->late_text, fmt, ap);
    va_end(ap);
    atomic_store(&comm->late_err, err);
}

void tide__coll_number(tide_req *req)
{
    tide_comm *comm = req->comm;
    int err = atomic_load(&comm->late_err);
    if (err) {
        char text[sizeof comm->late_text];
        memcpy(text, comm->late_text, sizeof text);
        /* Two callers may race for it (MPI allows collectives on
         * different communicators from different threads, not on one,
         * but a program in error may do anything): one wins. */
        if (atomic_compare_exchange_strong(&comm->late_err, &err, 0)) {
            req->late_err = err;
            snprintf(req->message, sizeof req->message, "%s", text);
            return; /* seq 0: it reports, and runs no collective */
        }
    }
    req->seq = atomic_fetch_add(&comm->next_seq, 1);
}

bool tide__async_error_report(tide_req *req)
{
    if (!req->late_err)
        return false;
    char text[sizeof req->message];
    memcpy(text, req->message, sizeof text);
    tide__req_fail(req, req->late_err, "%s", text);
    return true;
}

int tide_comm_async_error(tide_comm *comm, const char **message)
{
    if (message)
        *message = "";
    if (!comm || tide__comm_usable(comm, "tide_comm_async_error"))
        return TIDE_EINVAL;
    struct tide__ctx *ctx = comm->ctx;
    /* Like tide_test, one pass of progress, so that a program in inline
     * mode (or over the simulated network) can poll for the report.  It
     * waits 1 ns, not 0: only a pass that may sleep gives the idle
     * connections a kernel receive (a spinning pass reads only those a
     * posted receive waits on), and a report comes on an idle one. */
    if (!atomic_load(&comm->late_err))
        ctx->drive->poke(ctx, 1);
    /* A broadcast's root on boards checks its readers' headers at its
     * next board collective: here, for a program that polls instead. */
    if (!atomic_load(&comm->late_err) && tide__progress_try_drive(ctx)) {
        if (comm->board_check)
            comm->board_check(comm);
        tide__progress_release(ctx);
    }
    int err = atomic_load(&comm->late_err);
    if (err && message)
        *message = comm->late_text;
    return err;
}
