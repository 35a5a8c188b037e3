/* trace.h - TIDE_TRACE: a timeline of what each rank did, written as a
 * Chrome/Perfetto trace (open it at https://ui.perfetto.dev).
 *
 * Recording (trace.c) appends fixed-size events to one preallocated array
 * per process: a slot is claimed with one atomic add, so the reactor and
 * any number of user threads record without a lock, and nothing is
 * allocated on the data path.  When the array is full, events are counted
 * as dropped, never blocked on.  With tracing off, ctx->trace is NULL and
 * every hook is one predictable branch.
 *
 * At tide_finalize (trace_collect.c) the ranks align their clocks to rank
 * 0's, each turns its events into JSON (trace_json.c), and rank 0 writes
 * them all into the one file.  If that exchange fails (a peer gone), each
 * rank writes its own events to <path>.rank<R>.json instead. */
#ifndef TIDE_TRACE_H
#define TIDE_TRACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/transport.h"
#include "tide.h"

struct tide__ctx;

enum tide__trace_kind {
    TIDE_TRACE_OP,    /* an operation, from start to completion (reactor) */
    TIDE_TRACE_SEND,  /* one message (a chunk) on the wire, post to done */
    TIDE_TRACE_RECV,
    TIDE_TRACE_WAIT,  /* a caller blocked in tide_wait */
    TIDE_TRACE_POST,  /* a caller posted an operation (an instant) */
    TIDE_TRACE_BEGIN, /* tide_trace_begin / tide_trace_end */
    TIDE_TRACE_END,
};

#define TIDE_TRACE_LABEL 32

struct tide__trace_event {
    uint64_t t0, t1;  /* CLOCK_MONOTONIC ns; t1 == t0 for instants */
    uint64_t seq;     /* collective sequence (0: point-to-point) */
    uint64_t bytes;   /* op: bytes it sent + received here; msg: its size */
    uint64_t count;   /* op: the call's count */
    const char *name; /* op name (static strings of the library) */
    const char *algorithm;
    int32_t tid;      /* the OS thread (user-thread events) */
    int32_t peer;     /* msg: world rank at the other end */
    int32_t root;
    uint32_t comm;    /* communicator id */
    uint32_t tag;
    int16_t status;   /* TIDE_E* or 0 */
    uint8_t kind;     /* enum tide__trace_kind */
    uint8_t dtype, redop;
    char label[TIDE_TRACE_LABEL]; /* BEGIN: the caller's name */
};

struct tide__trace {
    char path[4096];
    struct tide__trace_event *ev;
    size_t cap;
    _Atomic size_t n;       /* slots claimed (may exceed cap: dropped) */
    _Atomic int closed;     /* finalize is collecting: record no more */
    uint64_t origin_ns;     /* when tracing started */
    int32_t progress_tid;   /* the progress thread, to name its track */
    struct tide__collect *collect; /* finalize's exchange (trace_collect.c) */
};

/* Start recording for ctx into path (tide_init).  0, TIDE_EINVAL (path
 * too long) or TIDE_ENOMEM. */
int tide__trace_open(struct tide__ctx *ctx, const char *path);

/* The calling thread's OS id (cached per thread). */
int32_t tide__trace_tid(void);

/* Reactor: operation req ran from req->trace_t0 until now, ending with
 * status. */
void tide__trace_op(struct tide__trace *tr, const tide_req *req, int status);

/* Reactor: message m completed (posted at m->trace_t0). */
void tide__trace_msg(struct tide__trace *tr, const tide__msg *m);

/* Caller: it waited for req from t0 until now; tide_wait returned rc. */
void tide__trace_wait(struct tide__trace *tr, const tide_req *req, uint64_t t0, int rc);

/* Caller: it posted req. */
void tide__trace_post(struct tide__trace *tr, const tide_req *req);

/* ---- trace_json.c ---- */

/* A growable text buffer. */
struct tide__text {
    char *s;
    size_t len, cap;
    int failed; /* out of memory: the text is incomplete */
};

void tide__text_printf(struct tide__text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Append rank's events as JSON trace events (comma-separated, no
 * enclosing brackets), shifted by -shift_ns and made relative to
 * origin_ns (both in this rank's clock: the shift aligns it to rank 0's). */
void tide__trace_json(const struct tide__trace *tr, int rank, const char *host, int64_t shift_ns,
                      uint64_t origin_ns, struct tide__text *out);

/* ---- trace_collect.c ---- */

/* tide_finalize, before the reactor stops: gather every rank's events
 * and write the trace.  Collective over the world when size > 1. */
void tide__trace_collect(struct tide__ctx *ctx);

/* After the reactor stopped: free the recording. */
void tide__trace_free(struct tide__ctx *ctx);
void tide__collect_free(struct tide__collect *c);

#endif
