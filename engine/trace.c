/* trace.c - recording trace events (see trace.h for the design), and the
 * public tide_trace_begin/tide_trace_end. */
#include "engine/trace.h"
#include "engine/clock.h"
#include "engine/context.h"
#include "engine/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 4 Mi events of 120 bytes: 480 MiB of address space, of which only the
 * pages written are ever backed by memory.  A training step of a few
 * hundred collectives records thousands of events; this lasts for hours
 * of that, and a longer run keeps its first events and counts the rest. */
#define TRACE_CAP (4u << 20)
#define TRACE_MIN_CAP (64u << 10)

int tide__trace_open(struct tide__ctx *ctx, const char *path)
{
    struct tide__trace *tr = calloc(1, sizeof *tr);
    if (!tr)
        return TIDE_ENOMEM;
    if (strlen(path) >= sizeof tr->path) {
        tide__log(TIDE_LOG_ERROR, ctx->rank, "TIDE_TRACE: the path is longer than %zu bytes",
                  sizeof tr->path - 1);
        free(tr);
        return TIDE_EINVAL;
    }
    /* mmap, not calloc: untouched slots then cost nothing at all.  Where
     * the kernel will not promise that much (strict overcommit), a
     * smaller buffer still makes a useful trace. */
    size_t cap = TRACE_CAP;
    void *ev;
    while ((ev = mmap(NULL, cap * sizeof *tr->ev, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)) == MAP_FAILED &&
           cap > TRACE_MIN_CAP)
        cap /= 2;
    if (ev == MAP_FAILED) {
        free(tr);
        return TIDE_ENOMEM;
    }
    strcpy(tr->path, path);
    tr->ev = ev;
    tr->cap = cap;
    tr->origin_ns = tide__now_ns();
    ctx->trace = tr;
    return 0;
}

void tide__trace_free(struct tide__ctx *ctx)
{
    struct tide__trace *tr = ctx->trace;
    if (!tr)
        return;
    tide__collect_free(tr->collect);
    munmap(tr->ev, tr->cap * sizeof *tr->ev);
    free(tr);
    ctx->trace = NULL;
}

int32_t tide__trace_tid(void)
{
    static _Thread_local int32_t tid;
    if (!tid)
        tid = (int32_t)syscall(SYS_gettid);
    return tid;
}

/* A zeroed slot, or NULL when the buffer is full (the event is dropped;
 * trace_json.c reports how many were). */
static struct tide__trace_event *claim(struct tide__trace *tr, enum tide__trace_kind kind)
{
    if (atomic_load_explicit(&tr->closed, memory_order_relaxed))
        return NULL; /* finalize's own exchange is not the user's work */
    size_t i = atomic_fetch_add_explicit(&tr->n, 1, memory_order_relaxed);
    if (i >= tr->cap)
        return NULL;
    struct tide__trace_event *e = &tr->ev[i];
    memset(e, 0, sizeof *e);
    e->kind = (uint8_t)kind;
    return e;
}

static void describe_req(struct tide__trace_event *e, const tide_req *req)
{
    e->name = req->opname;
    e->algorithm = req->algorithm;
    e->seq = req->seq;
    e->comm = req->comm->id;
}

void tide__trace_op(struct tide__trace *tr, const tide_req *req, int status)
{
    struct tide__trace_event *e = claim(tr, TIDE_TRACE_OP);
    if (!e)
        return;
    describe_req(e, req);
    e->t0 = req->trace_t0;
    e->t1 = tide__now_ns();
    e->bytes = req->trace_bytes;
    e->status = (int16_t)status;
    e->count = req->seq ? req->sig.count : 0;
    e->dtype = req->sig.dtype;
    e->redop = req->sig.redop;
    e->root = req->seq ? req->sig.root : -1;
}

void tide__trace_msg(struct tide__trace *tr, const tide__msg *m)
{
    struct tide__trace_event *e =
        claim(tr, m->dir == TIDE_MSG_SEND ? TIDE_TRACE_SEND : TIDE_TRACE_RECV);
    if (!e)
        return;
    describe_req(e, m->req);
    e->t0 = m->trace_t0;
    e->t1 = tide__now_ns();
    e->peer = m->peer;
    e->tag = m->hdr.tag;
    e->bytes = m->dir == TIDE_MSG_SEND ? m->len : m->got;
    e->status = (int16_t)m->status;
}

void tide__trace_wait(struct tide__trace *tr, const tide_req *req, uint64_t t0, int rc)
{
    struct tide__trace_event *e = claim(tr, TIDE_TRACE_WAIT);
    if (!e)
        return;
    describe_req(e, req);
    e->t0 = t0;
    e->t1 = tide__now_ns();
    e->tid = tide__trace_tid();
    e->status = (int16_t)rc;
}

void tide__trace_post(struct tide__trace *tr, const tide_req *req)
{
    struct tide__trace_event *e = claim(tr, TIDE_TRACE_POST);
    if (!e)
        return;
    describe_req(e, req);
    e->t0 = e->t1 = tide__now_ns();
    e->tid = tide__trace_tid();
}

/* name, cut to fit at a character boundary: the trace is JSON, which
 * must be valid UTF-8. */
static void copy_label(char *dst, const char *name)
{
    size_t n = strnlen(name, TIDE_TRACE_LABEL);
    if (n == TIDE_TRACE_LABEL) {
        n = TIDE_TRACE_LABEL - 1;
        while (n > 0 && ((unsigned char)name[n] & 0xC0) == 0x80)
            n--; /* name[n] continues a character: cut before it starts */
    }
    memcpy(dst, name, n);
    dst[n] = '\0';
}

static struct tide__trace *trace_of(tide_comm *comm)
{
    return comm && comm->ctx ? comm->ctx->trace : NULL;
}

/* A caller's region opens (name) or closes (NULL) on its thread. */
static int mark(tide_comm *comm, enum tide__trace_kind kind, const char *name)
{
    struct tide__trace *tr = trace_of(comm);
    struct tide__trace_event *e = tr ? claim(tr, kind) : NULL;
    if (!e)
        return 0;
    e->t0 = e->t1 = tide__now_ns();
    e->tid = tide__trace_tid();
    e->comm = comm->id;
    if (name)
        copy_label(e->label, name);
    return 0;
}

int tide_trace_begin(tide_comm *comm, const char *name)
{
    if (!comm || !name || tide__comm_usable(comm, "tide_trace_begin"))
        return TIDE_EINVAL;
    return mark(comm, TIDE_TRACE_BEGIN, name);
}

int tide_trace_end(tide_comm *comm)
{
    if (!comm || tide__comm_usable(comm, "tide_trace_end"))
        return TIDE_EINVAL;
    return mark(comm, TIDE_TRACE_END, NULL);
}

int tide_trace_enabled(const tide_comm *comm)
{
    return comm && comm->ctx && comm->ctx->trace;
}
