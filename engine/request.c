/* request.c - the life of a request, on the reactor side: allocation from
 * small pools, start, message bookkeeping, failure, completion, and the
 * two references that decide when it is reclaimed.
 *
 * A request completes exactly once, in finish(): the callback runs, then
 * the DONE bit is published (waking a sleeping waiter), then the engine
 * drops its reference.  A failing request first withdraws its messages
 * from the transport and completes only when the transport has let go of
 * every buffer, so a caller that sees the error may free its buffers. */
#include "engine/context.h"
#include "engine/clock.h"
#include "engine/log.h"
#include "engine/trace.h"
#include "engine/waiter.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_GRAIN 256

/* Under AddressSanitizer every request is malloc'd and freed, so that a
 * use after its release is caught instead of hidden by the pool (a
 * withdrawn shm receive completed after its request was gone was found
 * so). */
#ifdef __SANITIZE_ADDRESS__
#define POOLED 0
#else
#define POOLED 1
#endif

static void expire_timer(struct tide__timer *t)
{
    tide__req_expire(container_of(t, tide_req, timer));
}

void tide__zero(void *p, size_t n)
{
    __asm__("" : "+r"(n)); /* n is no longer a constant the compiler could inline */
    memset(p, 0, n);
}

void tide__req_clear(tide_req *req, size_t size)
{
    /* Zero all but the message text, which only its first byte needs
     * (512 bytes of memset were a tenth of a small collective's cost). */
    tide__zero(req, offsetof(tide_req, message));
    req->message[0] = '\0';
    if (size > sizeof *req)
        tide__zero((char *)req + sizeof *req, size - sizeof *req);
}

void tide__req_clear_unsubmitted(tide_req *req)
{
    /* From the deadline on: before it lie the reference count, the
     * commands, the callbacks and the timer, which only the reactor's
     * handling of a submitted request touches. */
    size_t from = offsetof(tide_req, deadline_ns);
    tide__zero((char *)req + from, offsetof(tide_req, message) - from);
    req->message[0] = '\0';
}

tide_req *tide__req_new(tide_comm *comm, const struct tide__op_vtbl *vt, size_t size)
{
    struct tide__ctx *ctx = comm->ctx;
    unsigned cls = POOLED ? (unsigned)((size + POOL_GRAIN - 1) / POOL_GRAIN) - 1 : TIDE_POOL_CLASSES;
    tide_req *req = NULL;

    if (cls < TIDE_POOL_CLASSES) {
        pthread_mutex_lock(&ctx->pool_lock);
        req = ctx->pool[cls];
        if (req)
            ctx->pool[cls] = req->pool_next;
        pthread_mutex_unlock(&ctx->pool_lock);
    }
    if (!req)
        req = malloc(cls < TIDE_POOL_CLASSES ? (size_t)(cls + 1) * POOL_GRAIN : size);
    if (!req)
        return NULL;
    tide__req_clear(req, size);
    atomic_fetch_add(&ctx->refs, 1);
    atomic_init(&req->state, TIDE_REQ_PENDING);
    atomic_init(&req->refs, 2);
    req->vt = vt;
    req->comm = comm;
    req->ctx = ctx;
    req->size_class = cls;
    req->opname = vt->name;
    req->algorithm = vt->name;
    if (comm != &ctx->world)
        atomic_fetch_add(&comm->refs, 1);
    req->deadline_ns = tide__ctx_now(ctx) + ctx->timeout_ns;
    tide__timer_init(&req->timer, expire_timer);
    return req;
}

static void release(tide_req *req)
{
    struct tide__ctx *ctx = req->ctx;
    if (req->comm != &ctx->world)
        tide__comm_unref(req->comm);
    if (req->size_class >= TIDE_POOL_CLASSES) {
        free(req);
    } else {
        pthread_mutex_lock(&ctx->pool_lock);
        req->pool_next = ctx->pool[req->size_class];
        ctx->pool[req->size_class] = req;
        pthread_mutex_unlock(&ctx->pool_lock);
    }
    /* A request the caller keeps past tide_finalize keeps ctx alive. */
    tide__ctx_unref(ctx);
}

static void unref(tide_req *req)
{
    if (atomic_fetch_sub(&req->refs, 1) == 1)
        release(req);
}

void tide__req_pool_free(struct tide__ctx *ctx)
{
    for (int c = 0; c < TIDE_POOL_CLASSES; c++) {
        while (ctx->pool[c]) {
            tide_req *next = ctx->pool[c]->pool_next;
            free(ctx->pool[c]);
            ctx->pool[c] = next;
        }
    }
}

void tide_req_free(tide_req *req)
{
    if (req)
        unref(req);
}

/* ---- the active list: every started, unfinished request ---- */

/* Collectives are also indexed by sequence number, for the frames that
 * name them (mismatch.c).  Fails only when that index cannot be made. */
static int link_active(struct tide__ctx *ctx, tide_req *req)
{
    req->act_prev = NULL;
    req->act_next = ctx->active;
    if (ctx->active)
        ctx->active->act_prev = req;
    ctx->active = req;
    ctx->nactive++;
    req->by_seq.comm_id = req->comm->id;
    req->by_seq.seq = req->seq;
    return req->seq ? tide__seqmap_add(&ctx->running, &req->by_seq) : 0;
}

static void unlink_active(struct tide__ctx *ctx, tide_req *req)
{
    if (req->act_prev)
        req->act_prev->act_next = req->act_next;
    else
        ctx->active = req->act_next;
    if (req->act_next)
        req->act_next->act_prev = req->act_prev;
    ctx->nactive--;
    if (req->seq)
        tide__seqmap_remove(&ctx->running, &req->by_seq);
}

static void finish(tide_req *req, int status)
{
    struct tide__ctx *ctx = req->ctx;
    req->finished = true;
    req->status = status;
    if (req->seq)
        tide__rec_end(req, status);
    unlink_active(ctx, req);
    tide__timer_disarm(ctx->timers, &req->timer);
    if (req->vt->release)
        req->vt->release(req);
    if (ctx->trace)
        tide__trace_op(ctx->trace, req, status);
    if (req->cb)
        req->cb(req, req->cb_arg);
    uint32_t old = atomic_exchange(&req->state, TIDE_REQ_DONE);
    if (old & TIDE_REQ_WAITER)
        tide__wake_sleepers(ctx);
    unref(req);
}

/* Run req's start (m NULL) or a step.  Either may finish req, and its
 * owner, woken, may free it at once from its own thread while the state
 * machine still reads req on its way out (a board collective that failed
 * a mismatch did, under ASan): the reactor holds a reference meanwhile. */
static void run_step(tide_req *req, tide__msg *m)
{
    atomic_fetch_add_explicit(&req->refs, 1, memory_order_relaxed);
    if (m)
        req->vt->step(req, m);
    else
        req->vt->start(req);
    unref(req);
}

/* Reactor thread: begin executing req. */
static void start(tide_req *req)
{
    struct tide__ctx *ctx = req->ctx;
    if (ctx->trace)
        req->trace_t0 = tide__now_ns();
    if (req->seq)
        tide__rec_start(req);
    if (link_active(ctx, req) < 0) {
        tide__req_fail(req, TIDE_ENOMEM, "cannot start: out of memory indexing it");
        return;
    }
    if (ctx->broken) {
        tide__req_fail(req, ctx->broken, "cannot start: the communicator is no longer usable");
        return;
    }
    if (atomic_load(&req->comm->revoked) && !req->survives_revoke) {
        req->told_by_peer = true; /* the ranks heard the notice itself */
        tide__req_fail(req, TIDE_EREVOKED, "cannot start: the communicator was revoked");
        return;
    }
    if (tide__timer_arm(ctx->timers, &req->timer, req->deadline_ns) < 0) {
        tide__req_fail(req, TIDE_ENOMEM, "cannot arm its deadline");
        return;
    }
    if (req->seq && tide__check_notes(req))
        return;
    /* After the notes: a part its parent dropped (subreq.c) has a number,
     * and must count as started here. */
    if (tide__async_error_report(req))
        return;
    run_step(req, NULL);
}

/* Below this many bytes a post starts its operation on the caller's
 * thread even when it will not wait at once: the start is a few small
 * sends, cheaper than waking the progress thread (4-rank OSU-style
 * overlap runs with sleep compute, 8 B to 32 KiB, were 20-50 % slower
 * handing them over).  Larger ones go to the progress thread: see
 * progress.c. */
#define START_HERE_MAX_BYTES (64u << 10)

int tide__req_submit(tide_req *req, size_t bytes)
{
    struct tide__ctx *ctx = req->ctx;
    req->start_cmd.kind = TIDE_CMD_START;
    req->start_cmd.req = req;
    req->op_bytes = bytes;
    if (ctx->trace)
        tide__trace_post(ctx->trace, req);
    bool here = tide__take_wait_next() || bytes < START_HERE_MAX_BYTES;
    req->start_handed_over = !here;
    tide__progress_post(ctx, &req->start_cmd, here);
    return 0;
}

void tide__req_start_cmd(tide_req *req)
{
    start(req);
}

/* ---- messages ---- */

static void link_msg(tide_req *req, tide__msg *m)
{
    m->req = req;
    m->req_prev = NULL;
    m->req_next = req->live;
    if (req->live)
        req->live->req_prev = m;
    req->live = m;
    req->nlive++;
}

static void unlink_msg(tide_req *req, tide__msg *m)
{
    if (m->req_prev)
        m->req_prev->req_next = m->req_next;
    else
        req->live = m->req_next;
    if (m->req_next)
        m->req_next->req_prev = m->req_prev;
    req->nlive--;
}

bool tide__req_take_back(tide_req *req, tide__msg *m, int err, const char *why)
{
    /* A completed message is already queued for delivery, where it will
     * be unlinked.  A part (subreq.c) fails too, and its completion
     * follows. */
    if (m->completed)
        return false;
    struct tide__transport *tp = req->ctx->tp;
    bool gone = m->dir == TIDE_MSG_OP ? tide__part_withdraw(m->buf, err, req->opname, why)
                                      : tp->ops->withdraw(tp, m, err) == 0;
    if (gone)
        unlink_msg(req, m);
    return gone;
}

void tide__req_post(tide_req *req, tide__msg *m)
{
    struct tide__transport *tp = req->ctx->tp;
    link_msg(req, m);
    m->status = 0;
    m->got = 0;
    m->completed = 0;
    if (m->dir == TIDE_MSG_OP) { /* a part (subreq.c): it runs, the transport never sees it */
        tide__part_admit(m->buf);
        return;
    }
    if (req->ctx->trace)
        m->trace_t0 = tide__now_ns();
    tp->ops->post(tp, m);
}

void tide__msg_init(tide__msg *m, tide_req *req, enum tide__msg_dir dir, int peer, uint8_t kind,
                    uint32_t tag, void *buf, size_t len)
{
    tide__zero(m, sizeof *m);
    m->dir = (uint8_t)dir;
    m->peer = req->comm->world_of ? req->comm->world_of[peer] : peer;
    m->hdr.type = TIDE_FRAME_DATA;
    m->hdr.kind = kind;
    m->hdr.comm_id = req->comm->id;
    m->hdr.seq = req->seq;
    m->hdr.tag = tag;
    m->hdr.root = -1;
    if (req->seq) { /* a collective: every frame carries its signature */
        m->hdr.dtype = req->sig.dtype;
        m->hdr.redop = req->sig.redop;
        m->hdr.root = req->sig.root;
        m->hdr.count = req->sig.count;
        m->hdr.flags = req->sig.flags;
    }
    m->buf = buf;
    m->len = len;
}

void tide__msg_done(struct tide__ctx *ctx, tide__msg *m, int status)
{
    m->status = status;
    m->completed = 1;
    tide__msgq_push(&ctx->done, m);
}

void tide__req_succeed(tide_req *req)
{
    if (req->nlive) {
        tide__log(TIDE_LOG_ERROR, req->ctx->rank, "%s finished with %u messages still posted",
                  req->opname, req->nlive);
        tide__req_fail(req, TIDE_EPROTO, "internal error: finished with messages posted");
        return;
    }
    if (req->seq)
        tide__collective_succeeded(req);
    finish(req, 0);
}

void tide__req_fail(tide_req *req, int err, const char *fmt, ...)
{
    if (req->finished || req->failing)
        return; /* the first error wins */
    req->failing = err;

    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(req->message, sizeof req->message, "rank %d: %s (seq %llu): %s: %s",
             req->comm->rank, req->opname, (unsigned long long)req->seq, detail,
             tide_strerror(err));
    if (req->seq) {
        tide__collective_failed(req, err, detail);
        tide__rec_failed(req, err);
    }

    tide__msg *m = req->live;
    while (m) {
        tide__msg *next = m->req_next;
        tide__req_take_back(req, m, err, detail);
        m = next;
    }
    if (!req->nlive)
        finish(req, err);
}

/* A message failed: fail its request with an account of which peer. */
static void fail_from_msg(tide_req *req, tide__msg *m)
{
    if (m->dir == TIDE_MSG_OP) {
        tide__part_failed(req, m->buf);
        return;
    }
    struct tide__transport *tp = req->ctx->tp;
    const char *why = tp->ops->peer_reason(tp, m->peer);
    const char *dir = m->dir == TIDE_MSG_SEND    ? "send to"
                      : m->dir == TIDE_MSG_WATCH ? "waiting for the board flag from"
                                                 : "receive from";
    if (m->status == TIDE_EPEER)
        req->lost = m->peer + 1; /* the origin that poison frames carry on */
    if (m->status == TIDE_EPEER && why)
        tide__req_fail(req, m->status, "%s rank %d (tag %u) failed: %s", dir, m->peer,
                       m->hdr.tag, why);
    else if (m->status == TIDE_ETRUNCATE)
        tide__req_fail(req, m->status, "%s rank %d (tag %u): %zu bytes arrived for a %zu-byte buffer",
                       dir, m->peer, m->hdr.tag, m->got, m->len);
    else if (m->status == TIDE_EMISMATCH && m->got != m->len &&
             tide__frame_same_signature(&req->sig, &m->hdr))
        tide__req_fail(req, m->status, "%s rank %d (tag %u): %zu bytes arrived where this rank "
                       "expects %zu: ranks passed different counts", dir, m->peer, m->hdr.tag,
                       m->got, m->len);
    else if (m->status == TIDE_EMISMATCH)
        tide__fail_mismatch(req, m->peer, &m->hdr); /* the transport left their header */
    else
        tide__req_fail(req, m->status, "%s rank %d (tag %u) failed", dir, m->peer, m->hdr.tag);
}

static void trace_msg(struct tide__trace *tr, tide_req *req, const tide__msg *m)
{
    req->trace_bytes += m->dir == TIDE_MSG_SEND ? m->len : m->got;
    tide__trace_msg(tr, m);
}

int tide__ctx_deliver(struct tide__ctx *ctx)
{
    tide__rec_poll(ctx);
    int n = 0;
    tide__msg *m;
    /* The inbox first, and again before each message: a step that posts
     * a receive can have the transport take in a frame it had left in
     * the stream (transports/rx.c) and tell us of it, and a later
     * message of this pass may end that frame's collective - after
     * which the word would read as a frame of another collective. */
    for (;;) {
        if (ctx->ninbox)
            n += tide__inbox_process(ctx);
        if (!(m = tide__msgq_pop(&ctx->done)))
            break;
        n++;
        tide_req *req = m->req;
        if (!req) {
            tide__ctl_msg_done(m);
            continue;
        }
        unlink_msg(req, m);
        if (ctx->trace && m->dir != TIDE_MSG_OP)
            trace_msg(ctx->trace, req, m);
        if (req->failing) {
            if (!req->nlive)
                finish(req, req->failing);
        } else if (m->status < 0 && !(m->status == TIDE_EPEER && req->sees_peer_loss)) {
            fail_from_msg(req, m);
        } else {
            run_step(req, m);
        }
    }
    return n;
}

/* The account says what the request still waits for, so that the ranks'
 * messages together show who is behind: "no data yet from rank 3". */
void tide__req_expire(tide_req *req)
{
    char waits[320];
    tide__req_describe_wait(req, waits, sizeof waits);
    tide__req_fail(req, TIDE_ETIMEDOUT,
                   "did not complete within its deadline (TIDE_TIMEOUT=%g s): %s",
                   req->ctx->cfg.timeout_s, waits);
}

void tide__ctx_fail_all(struct tide__ctx *ctx, int err, const char *why)
{
    /* From the head again after each: failing one may finish others (a
     * request made of requests, subreq.c, its parts). */
    tide_req *req = ctx->active;
    while (req) {
        if (req->failing || req->finished) {
            req = req->act_next;
            continue;
        }
        tide__req_fail(req, err, "%s", why);
        req = ctx->active;
    }
}

/* ---- callbacks and accessors ---- */

/* Reactor: attach the callback handed over by tide_req_on_complete, or run
 * it now if the request already finished. */
void tide__req_attach_callback(tide_req *req)
{
    if (req->finished)
        req->cb_new(req, req->cb_new_arg);
    else {
        req->cb = req->cb_new;
        req->cb_arg = req->cb_new_arg;
    }
    /* Drop the reference tide_req_on_complete took to keep req alive
     * until this point even if it finished and was freed meanwhile. */
    unref(req);
}

int tide_req_on_complete(tide_req *req, void (*fn)(tide_req *, void *), void *arg)
{
    if (!req || !fn)
        return TIDE_EINVAL;
    if (atomic_exchange(&req->cb_claimed, 1))
        return TIDE_EBUSY;
    /* Written before the command is published (a release) and read by the
     * reactor after it pops it (an acquire). */
    req->cb_new = fn;
    req->cb_new_arg = arg;
    atomic_fetch_add(&req->refs, 1);
    req->cb_cmd.kind = TIDE_CMD_CALLBACK;
    req->cb_cmd.req = req;
    /* Attaching is cheap, but driving here runs every queued command
     * first, this request's own start among them when it was handed to
     * the progress thread: a 4-rank FSDP trace showed the trainer's thread
     * starting its 4 MiB reduce-scatters after all (0.1-0.6 ms of copies
     * and sends between layers).  So the callback follows its request. */
    tide__progress_post(req->ctx, &req->cb_cmd, !req->start_handed_over);
    return 0;
}

const char *tide_req_message(const tide_req *req)
{
    if (!req)
        return "";
    if (!tide__req_is_done(req))
        return "";
    return req->message;
}

size_t tide_req_bytes(const tide_req *req)
{
    if (!req || !tide__req_is_done(req))
        return 0;
    return req->bytes;
}

int tide_req_source(const tide_req *req)
{
    if (!req || !tide__req_is_done(req) || req->status != 0)
        return -1;
    return req->source - 1;
}

const char *tide_req_algorithm(const tide_req *req)
{
    return req ? req->algorithm : "";
}
