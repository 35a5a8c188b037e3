/* trace_json.c - one rank's recorded events as Chrome trace-event JSON
 * (the "JSON Array/Object Format" that chrome://tracing and Perfetto
 * read).
 *
 * A rank is a process (pid = rank).  Its threads are:
 *   - the reactor's lanes: every operation is a complete ("X") slice from
 *     start to completion, every message (chunk) one slice from post to
 *     completion.  Operations overlap (many in flight), and the viewers
 *     want the slices of one thread properly nested, so overlapping slices
 *     are spread over as many lanes as needed ("reactor: operations",
 *     "reactor: operations 2", ...; the same for sends and receives),
 *     each slice in the lowest-ending free lane.  The lanes are synthetic
 *     thread ids far above any real one (Linux pid_max <= 2^22).
 *   - the real threads that called tide: time blocked in tide_wait,
 *     posts (instants), and the caller's own tide_trace_begin/end
 *     regions. */
#include "engine/trace.h"
#include "engine/json.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LANE_TID_BASE 2000000000
#define LANE_GROUP_SPAN 10000000

enum lane_group { LANES_OPS, LANES_SENDS, LANES_RECVS, NGROUPS };

static const char *const group_names[NGROUPS] = {"reactor: operations", "reactor: sends",
                                                 "reactor: receives"};

void tide__text_printf(struct tide__text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->len;
        int n = vsnprintf(t->s ? t->s + t->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 1 << 16;
        while (cap - t->len <= (size_t)n)
            cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

static void to_text(void *t, const char *piece)
{
    tide__text_printf(t, "%s", piece);
}

/* s as the inside of a JSON string (json.h). */
static void put_escaped(struct tide__text *t, const char *s)
{
    tide__json_escape(s, to_text, t);
}

struct emit {
    struct tide__text *out;
    int rank;
    int64_t shift;
    uint64_t origin;
};

/* Microseconds since the trace's origin, in rank 0's clock. */
static double micros(const struct emit *em, uint64_t t)
{
    return (double)((int64_t)(t - em->origin) - em->shift) / 1000.0;
}

static void meta(const struct emit *em, int64_t tid, const char *what, const char *name, int sort)
{
    struct tide__text *t = em->out;
    tide__text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%lld,\"name\":\"%s_name\",\"args\":{\"name\":\"",
                      em->rank, (long long)tid, what);
    put_escaped(t, name);
    tide__text_printf(t, "\"}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%lld,\"name\":\"%s_sort_index\","
                         "\"args\":{\"sort_index\":%d}},\n",
                      em->rank, (long long)tid, what, sort);
}

static const char *result_name(int status)
{
    return status ? tide_err_name(status) : "ok";
}

static void op_slice(const struct emit *em, const struct tide__trace_event *e, int64_t tid)
{
    tide__text_printf(em->out,
                      "{\"ph\":\"X\",\"cat\":\"op\",\"name\":\"%s\",\"pid\":%d,\"tid\":%lld,"
                      "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"algorithm\":\"%s\",\"seq\":%llu,"
                      "\"comm\":%u,\"bytes\":%llu",
                      e->name, em->rank, (long long)tid, micros(em, e->t0),
                      (double)(e->t1 - e->t0) / 1000.0, e->algorithm, (unsigned long long)e->seq,
                      e->comm, (unsigned long long)e->bytes);
    if (e->seq)
        tide__text_printf(em->out, ",\"count\":%llu,\"dtype\":\"%s\",\"redop\":\"%s\",\"root\":%d",
                          (unsigned long long)e->count, tide_dtype_name((tide_dtype)e->dtype),
                          tide_op_name((tide_op)e->redop), e->root);
    tide__text_printf(em->out, ",\"result\":\"%s\"}},\n", result_name(e->status));
}

static void msg_slice(const struct emit *em, const struct tide__trace_event *e, int64_t tid)
{
    bool send = e->kind == TIDE_TRACE_SEND;
    tide__text_printf(em->out,
                      "{\"ph\":\"X\",\"cat\":\"chunk\",\"name\":\"%s %d\",\"pid\":%d,\"tid\":%lld,"
                      "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"op\":\"%s\",\"seq\":%llu,\"comm\":%u,"
                      "\"peer\":%d,\"tag\":%u,\"bytes\":%llu,\"result\":\"%s\"}},\n",
                      send ? "send to" : "recv from", e->peer, em->rank, (long long)tid,
                      micros(em, e->t0), (double)(e->t1 - e->t0) / 1000.0, e->name,
                      (unsigned long long)e->seq, e->comm, e->peer, e->tag,
                      (unsigned long long)e->bytes, result_name(e->status));
}

static void thread_event(const struct emit *em, const struct tide__trace_event *e)
{
    struct tide__text *t = em->out;
    switch (e->kind) {
    case TIDE_TRACE_WAIT:
        tide__text_printf(t,
                          "{\"ph\":\"X\",\"cat\":\"wait\",\"name\":\"wait %s\",\"pid\":%d,\"tid\":%d,"
                          "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%llu,\"comm\":%u,"
                          "\"algorithm\":\"%s\",\"result\":\"%s\"}},\n",
                          e->name, em->rank, e->tid, micros(em, e->t0),
                          (double)(e->t1 - e->t0) / 1000.0, (unsigned long long)e->seq, e->comm,
                          e->algorithm, result_name(e->status));
        return;
    case TIDE_TRACE_POST:
        tide__text_printf(t,
                          "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"post\",\"name\":\"post %s\",\"pid\":%d,"
                          "\"tid\":%d,\"ts\":%.3f,\"args\":{\"seq\":%llu,\"comm\":%u}},\n",
                          e->name, em->rank, e->tid, micros(em, e->t0), (unsigned long long)e->seq,
                          e->comm);
        return;
    case TIDE_TRACE_BEGIN:
        tide__text_printf(t, "{\"ph\":\"B\",\"cat\":\"user\",\"name\":\"");
        put_escaped(t, e->label);
        tide__text_printf(t, "\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f},\n", em->rank, e->tid,
                          micros(em, e->t0));
        return;
    case TIDE_TRACE_END:
        tide__text_printf(t, "{\"ph\":\"E\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f},\n", em->rank, e->tid,
                          micros(em, e->t0));
        return;
    }
}

static enum lane_group group_of(const struct tide__trace_event *e)
{
    if (e->kind == TIDE_TRACE_OP)
        return LANES_OPS;
    return e->kind == TIDE_TRACE_SEND ? LANES_SENDS : LANES_RECVS;
}

static bool on_reactor(const struct tide__trace_event *e)
{
    return e->kind == TIDE_TRACE_OP || e->kind == TIDE_TRACE_SEND || e->kind == TIDE_TRACE_RECV;
}

static int by_start(const void *a, const void *b, void *events)
{
    const struct tide__trace_event *ev = events;
    const struct tide__trace_event *x = &ev[*(const size_t *)a];
    const struct tide__trace_event *y = &ev[*(const size_t *)b];
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* The lanes of one group: a min-heap of (end of its last slice, lane). */
struct lanes {
    struct lane {
        uint64_t end;
        int id;
    } *heap;
    int n, cap;
    int used; /* lanes handed out */
};

static void sift_down(struct lanes *l, int i)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= l->n)
            return;
        if (c + 1 < l->n && l->heap[c + 1].end < l->heap[c].end)
            c++;
        if (l->heap[i].end <= l->heap[c].end)
            return;
        struct lane tmp = l->heap[i];
        l->heap[i] = l->heap[c];
        l->heap[c] = tmp;
        i = c;
    }
}

static void sift_up(struct lanes *l, int i)
{
    while (i > 0 && l->heap[(i - 1) / 2].end > l->heap[i].end) {
        struct lane tmp = l->heap[i];
        l->heap[i] = l->heap[(i - 1) / 2];
        l->heap[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
}

/* The lane for a slice [t0, t1]: the one that fell free first, if it did
 * by t0, else a new one.  -1 when out of memory. */
static int lane_for(struct lanes *l, uint64_t t0, uint64_t t1)
{
    if (l->n && l->heap[0].end <= t0) {
        l->heap[0].end = t1;
        int id = l->heap[0].id;
        sift_down(l, 0);
        return id;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        struct lane *h = realloc(l->heap, (size_t)cap * sizeof *h);
        if (!h)
            return -1;
        l->heap = h;
        l->cap = cap;
    }
    l->heap[l->n] = (struct lane){.end = t1, .id = l->used++};
    sift_up(l, l->n++);
    return l->used - 1;
}

static int64_t lane_tid(enum lane_group g, int lane)
{
    return LANE_TID_BASE + (int64_t)g * LANE_GROUP_SPAN + lane;
}

/* The reactor's slices, in order of start, each in its lane; then the
 * names of the lanes used. */
static void emit_reactor(const struct emit *em, const struct tide__trace_event *ev, size_t n)
{
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    struct lanes lanes[NGROUPS] = {{0}};
    if (!order) {
        em->out->failed = 1;
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (on_reactor(&ev[i]))
            order[m++] = i;
    qsort_r(order, m, sizeof *order, by_start, (void *)ev);
    for (size_t k = 0; k < m; k++) {
        const struct tide__trace_event *e = &ev[order[k]];
        enum lane_group g = group_of(e);
        int lane = lane_for(&lanes[g], e->t0, e->t1);
        if (lane < 0) {
            em->out->failed = 1;
            break;
        }
        if (g == LANES_OPS)
            op_slice(em, e, lane_tid(g, lane));
        else
            msg_slice(em, e, lane_tid(g, lane));
    }
    for (int g = 0; g < NGROUPS; g++) {
        for (int lane = 0; lane < lanes[g].used; lane++) {
            char name[64];
            if (lane == 0)
                snprintf(name, sizeof name, "%s", group_names[g]);
            else
                snprintf(name, sizeof name, "%s %d", group_names[g], lane + 1);
            meta(em, lane_tid((enum lane_group)g, lane), "thread", name, g * 1000 + lane);
        }
        free(lanes[g].heap);
    }
    free(order);
}

/* Name each real thread that recorded something, once. */
static void name_threads(const struct emit *em, const struct tide__trace *tr,
                         const struct tide__trace_event *ev, size_t n)
{
    int32_t seen[64];
    int nseen = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t tid = ev[i].tid;
        if (on_reactor(&ev[i]) || nseen == 64)
            continue;
        int k = 0;
        while (k < nseen && seen[k] != tid)
            k++;
        if (k < nseen)
            continue;
        seen[nseen++] = tid;
        char name[64];
        if (tid == tr->progress_tid)
            snprintf(name, sizeof name, "progress thread");
        else if (tid == (int32_t)getpid())
            snprintf(name, sizeof name, "main thread");
        else
            snprintf(name, sizeof name, "thread %d", tid);
        meta(em, tid, "thread", name, 100000 + k);
    }
}

void tide__trace_json(const struct tide__trace *tr, int rank, const char *host, int64_t shift_ns,
                      uint64_t origin_ns, struct tide__text *out)
{
    size_t claimed = atomic_load(&((struct tide__trace *)tr)->n);
    size_t n = claimed < tr->cap ? claimed : tr->cap;
    struct emit em = {.out = out, .rank = rank, .shift = shift_ns, .origin = origin_ns};
    char name[128];
    snprintf(name, sizeof name, "rank %d (%s)", rank, host);
    meta(&em, 0, "process", name, rank);
    if (claimed > n)
        tide__text_printf(out,
                          "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_labels\","
                          "\"args\":{\"labels\":\"%zu events dropped (buffer full)\"}},\n",
                          rank, claimed - n);
    name_threads(&em, tr, tr->ev, n);
    emit_reactor(&em, tr->ev, n);
    for (size_t i = 0; i < n; i++)
        if (!on_reactor(&tr->ev[i]))
            thread_event(&em, &tr->ev[i]);
    /* Every event above ends in ",\n"; the caller joins ranks with
     * commas, so take the last one back. */
    if (!out->failed && out->len >= 2)
        out->len -= 2;
}
