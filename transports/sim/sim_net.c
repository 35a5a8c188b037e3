/* sim_net.c - the transport a simulated rank's engine posts to: the same
 * contract as TCP's (transport.h), with a send turned into a delivery
 * event at the time the cost model gives, and matching done at arrival
 * with the same match.c as TCP.
 *
 * A send completes when its message arrives, whether or not a receive
 * waits for it (early frames are copied into the peer's unexpected pool,
 * as a kernel socket buffer would hold them).  Reading the payload at
 * arrival rather than at posting is deliberate: an algorithm that touches
 * a buffer it has handed to the transport is caught by the results. */
#include "transports/sim/sim.h"
#include "engine/log.h"
#include "engine/board.h"
#include "transports/stage_slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static struct sim_rank *rank_of(struct tide__transport *base)
{
    return container_of(base, struct sim_rank, base);
}

/* ---- what a rank knows of each peer: an open-addressing table ----
 *
 * A rank of a ring talks to two peers and one of a tree to log2(n), so
 * thousands of simulated ranks cannot afford an array of n per rank. */

static size_t slot_of(int peer, size_t cap)
{
    return ((size_t)peer * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

static bool peers_grow(struct sim_rank *r)
{
    size_t cap = r->peers_cap ? 2 * r->peers_cap : 4;
    struct sim_peer *t = malloc(cap * sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < cap; i++)
        t[i] = (struct sim_peer){.peer = -1};
    for (size_t i = 0; i < r->peers_cap; i++) {
        if (r->peers[i].peer < 0)
            continue;
        size_t j = slot_of(r->peers[i].peer, cap);
        while (t[j].peer >= 0)
            j = (j + 1) & (cap - 1);
        t[j] = r->peers[i];
    }
    free(r->peers);
    r->peers = t;
    r->peers_cap = cap;
    return true;
}

/* r's record of peer; made when create is set (NULL if out of memory). */
static struct sim_peer *peer_of(struct sim_rank *r, int peer, bool create)
{
    if (r->peers_cap) {
        size_t j = slot_of(peer, r->peers_cap);
        for (; r->peers[j].peer >= 0; j = (j + 1) & (r->peers_cap - 1))
            if (r->peers[j].peer == peer)
                return &r->peers[j];
    }
    if (!create)
        return NULL;
    if (4 * (r->npeers + 1) > 3 * r->peers_cap && !peers_grow(r))
        return NULL;
    size_t j = slot_of(peer, r->peers_cap);
    while (r->peers[j].peer >= 0)
        j = (j + 1) & (r->peers_cap - 1);
    r->peers[j] = (struct sim_peer){.peer = peer};
    r->npeers++;
    return &r->peers[j];
}

/* ---- completions ---- */

static void done(struct sim_rank *r, tide__msg *m, int status)
{
    tide__msg_done(r->base.ctx, m, status);
    tide__sim_dirty(r->sim, r);
}

static void fail_posted(struct sim_rank *r, struct sim_peer *q)
{
    tide__msg *m;
    while ((m = tide__msgq_pop(&q->mq.posted)))
        done(r, m, TIDE_EPEER);
}

/* ---- the cost model ---- */

static uint64_t stalled_until(const struct tide_sim *s, int from, int to, uint64_t t)
{
    for (int i = 0; i < s->nstalls; i++) {
        const struct sim_stall *w = &s->stalls[i];
        if (w->from == from && w->to == to && t >= w->start && t < w->end)
            t = w->end;
    }
    return t;
}

/* Rank r's host: the lowest rank on it (ranks_per_host in tide.h). */
static int host_rank(const struct tide_sim *s, int r)
{
    int per = s->cfg.ranks_per_host;
    return per ? r - r % per : 0;
}

/* The port a message from a to b leaves and enters by: the ranks' own
 * in a one-level network or inside a host; between hosts, the hosts'
 * network ports, which all ranks of a host share (as a NIC). */
static void ports(struct tide_sim *s, struct sim_rank *a, struct sim_rank *b, bool near,
                  struct sim_port **out, struct sim_port **in)
{
    int per = s->cfg.ranks_per_host;
    *out = near || !per ? &a->port : &s->nics[a->rank / per];
    *in = near || !per ? &b->port : &s->nics[b->rank / per];
}

/* When a message of `bytes` posted now from a reaches b (see tide.h). */
static uint64_t arrival(struct tide_sim *s, struct sim_rank *a, struct sim_rank *b,
                        struct sim_peer *q, size_t bytes)
{
    uint64_t t = s->now;
    if (a != b) {
        bool near = host_rank(s, a->rank) == host_rank(s, b->rank);
        struct sim_port *out, *in;
        ports(s, a, b, near, &out, &in);
        uint64_t wire = (uint64_t)((double)bytes * (near ? s->host_ns_per_byte : s->ns_per_byte));
        uint64_t start = t > out->tx_free ? t : out->tx_free;
        out->tx_free = start + wire;
        t = start + wire + (near ? s->host_alpha_ns : s->alpha_ns);
        if (t < in->rx_free + wire)
            t = in->rx_free + wire;
        in->rx_free = t;
    }
    if (s->jitter_ns)
        t += tide__sim_rand(s) % (s->jitter_ns + 1);
    t = stalled_until(s, a->rank, b->rank, t);
    if (t < q->last_arrival)
        t = q->last_arrival; /* ties fire in posting order: FIFO holds */
    q->last_arrival = t;
    return t;
}

/* ---- sending and delivering ---- */

static void deliver_fire(struct tide__timer *t);

static struct sim_event *event_new(struct tide_sim *s)
{
    struct sim_event *ev = s->free_events;
    if (ev)
        s->free_events = ev->next_free;
    else if (!(ev = malloc(sizeof *ev)))
        return NULL;
    tide__timer_init(&ev->timer, deliver_fire);
    ev->sim = s;
    return ev;
}

static void event_free(struct tide_sim *s, struct sim_event *ev)
{
    ev->m->tpriv = NULL;
    ev->next_free = s->free_events;
    s->free_events = ev;
}

static void send_post(struct sim_rank *a, tide__msg *m)
{
    struct tide_sim *s = a->sim;
    struct sim_rank *b = &s->ranks[m->peer];
    m->hdr.len = m->len;
    if (a->gone || b->gone) {
        done(a, m, TIDE_EPEER);
        return;
    }
    struct sim_peer *q = peer_of(b, a->rank, true);
    struct sim_event *ev = q ? event_new(s) : NULL;
    if (!ev) {
        done(a, m, TIDE_ENOMEM);
        return;
    }
    size_t bytes = m->len + TIDE_FRAME_HDR_SIZE;
    ev->m = m;
    ev->from = a->rank;
    ev->to = b->rank;
    m->tpriv = ev;
    if (tide__timer_arm(&s->heap, &ev->timer, arrival(s, a, b, q, bytes)) < 0) {
        event_free(s, ev);
        done(a, m, TIDE_ENOMEM);
        return;
    }
    a->stats.msgs_sent++;
    a->stats.bytes_sent += bytes;
}

/* An early frame, kept until its receive is posted: a copy of the
 * payload, or (timing only) just the header. */
static struct tide__unexp *keep_early(const struct tide_sim *s, const tide__msg *m)
{
    if (!s->cfg.timing_only || m->hdr.kind == TIDE_KIND_POISON)
        return tide__unexp_new(&m->hdr, m->buf);
    struct tide__unexp *ux = calloc(1, sizeof *ux);
    if (ux) {
        ux->hdr = m->hdr;
        ux->complete = true;
    }
    return ux;
}

static void arrive(struct sim_rank *a, struct sim_rank *b, tide__msg *m)
{
    struct tide_sim *s = a->sim;
    struct tide__ctx *ctx = b->base.ctx;
    b->stats.msgs_recv++;
    b->stats.bytes_recv += m->len + TIDE_FRAME_HDR_SIZE;
    tide__sim_dirty(s, b);
    if (m->hdr.kind == TIDE_KIND_POISON) { /* never matched: news for the engine */
        tide__frame_poison(ctx, a->rank, &m->hdr, m->buf, m->len);
        done(a, m, 0);
        return;
    }
    struct sim_peer *q = peer_of(b, a->rank, false); /* made when m was posted */
    tide__msg *r = tide__match_take_posted(&q->mq, &m->hdr);
    if (r) {
        struct tide__unexp view = {.hdr = m->hdr, .complete = true};
        view.data = s->cfg.timing_only ? NULL : m->buf;
        done(b, r, tide__match_deliver(&view, r));
        done(a, m, 0);
        return;
    }
    struct tide__unexp *ux = keep_early(s, m);
    if (!ux) {
        done(a, m, TIDE_ENOMEM);
        return;
    }
    b->stats.unexpected++;
    tide__match_add_unexpected(&q->mq, ux);
    tide__frame_unexpected(ctx, a->rank, &m->hdr);
    done(a, m, 0);
}

static void deliver_fire(struct tide__timer *t)
{
    struct sim_event *ev = container_of(t, struct sim_event, timer);
    struct tide_sim *s = ev->sim;
    tide__msg *m = ev->m;
    struct sim_rank *a = &s->ranks[ev->from], *b = &s->ranks[ev->to];
    event_free(s, ev);
    if (a->gone || b->gone) { /* only if dropping it ran out of memory */
        if (a->base.ctx)
            done(a, m, TIDE_EPEER);
        return;
    }
    arrive(a, b, m);
    tide__sim_count_delivery(s);
}

static bool is_message(const struct tide__timer *t)
{
    return t->fire == deliver_fire;
}

static void look_fire(struct tide__timer *t);

bool tide__sim_is_delivery(const struct tide__timer *t)
{
    return is_message(t) || t->fire == look_fire;
}

/* ---- receiving ---- */

static void recv_post(struct sim_rank *r, tide__msg *m)
{
    struct sim_peer *q = peer_of(r, m->peer, true);
    if (!q) {
        done(r, m, TIDE_ENOMEM);
        return;
    }
    struct tide__unexp *ux = tide__match_take_unexpected(&q->mq, m);
    if (ux) {
        done(r, m, tide__match_deliver(ux, m));
        tide__unexp_free(ux);
        return;
    }
    if (r->gone || r->sim->ranks[m->peer].gone) {
        done(r, m, TIDE_EPEER);
        return;
    }
    tide__match_post(&q->mq, m);
}

/* ---- boards (engine/board.h) ----
 *
 * As with staging, a peer's board area is a pointer into this process,
 * and only the ranks of one host get one.  Nothing here sees a store
 * happen, so a watch is only ever completed at a look: a rank that
 * stores a flag says so (board_raise), and each rank it names that has
 * watches looks at them after the host's latency, as a peer spinning on
 * the word would see it then.  (A store that board.c forgot to raise
 * thus leaves its waiters to their deadline, which the fuzzer reports,
 * where shared memory's polling would hide it.) */

/* Whether ranks a and b map each other's staging area and board area. */
static bool shares_memory(const struct tide_sim *s, int a, int b)
{
    return s->stage && b >= 0 && b < s->n && host_rank(s, a) == host_rank(s, b);
}

/* Made at the first ask, by whoever asks, and mapped rather than
 * calloc'd: a board collective touches a few pages of the 104.5 MiB, and
 * calloc zeroes all of them under MALLOC_PERTURB_ (which meson test
 * sets), as the sanitizers poison all of them at free.  Kept until
 * tide_sim_destroy, as a mapping would outlive its rank's crash. */
static uint8_t *board_at(struct tide__transport *base, int peer)
{
    struct sim_rank *r = rank_of(base);
    struct tide_sim *s = r->sim;
    if (!s->cfg.boards || !shares_memory(s, r->rank, peer))
        return NULL;
    struct sim_rank *o = &s->ranks[peer];
    if (!o->board) {
        void *p = mmap(NULL, BOARD_AREA_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        o->board = p == MAP_FAILED ? NULL : p;
    }
    return o->board;
}

void tide__sim_net_free(struct sim_rank *r)
{
    if (r->board)
        munmap(r->board, BOARD_AREA_BYTES);
    r->board = NULL;
}

/* Rank r looks at its watches at time t, or earlier if a look is due
 * then already (a look sees every store made before it). */
static void look_at(struct sim_rank *r, uint64_t t)
{
    struct tide_sim *s = r->sim;
    if (r->look.slot != SIZE_MAX && r->look.deadline_ns <= t)
        return;
    /* Re-arming an armed timer frees its slot first, so only a first
     * arm can fail: then the watches end at their deadline. */
    if (tide__timer_arm(&s->heap, &r->look, t) < 0)
        tide__log(TIDE_LOG_WARN, r->rank, "out of memory scheduling a look at board watches: "
                  "they will end at their deadline");
}

/* Our own store we see at once; a peer's after the host's latency and
 * the seed's jitter.  Ranks with no watch need no look: a watch is
 * posted only after its condition was found false, which sees every
 * store already made. */
static void board_raise(struct tide__transport *base, const int *peers, int n)
{
    struct sim_rank *r = rank_of(base);
    struct tide_sim *s = r->sim;
    for (int i = 0; i < n; i++) {
        if (peers[i] < 0 || peers[i] >= s->n)
            continue;
        struct sim_rank *o = &s->ranks[peers[i]];
        if (!o->watches.head)
            continue;
        uint64_t t = s->now;
        if (o != r && s->jitter_ns)
            t += tide__sim_rand(s) % (s->jitter_ns + 1);
        look_at(o, o == r ? t : t + s->host_alpha_ns);
    }
}

/* 0: watch m of rank r is ready; TIDE_EPEER: the rank it waits for (or
 * r) is gone; 1: it still waits, and m->peer says for whom. */
static int watch_status(struct sim_rank *r, tide__msg *m)
{
    if (r->gone)
        return TIDE_EPEER;
    struct tide__watch *w = m->buf;
    int peer = m->peer;
    if (w->ready(w, &peer))
        return 0;
    if (peer >= 0 && peer < r->sim->n)
        m->peer = peer;
    return r->sim->ranks[m->peer].gone ? TIDE_EPEER : 1;
}

static void look_fire(struct tide__timer *t)
{
    struct sim_rank *r = container_of(t, struct sim_rank, look);
    tide__msg *prev = NULL, *m = r->watches.head;
    while (m) {
        tide__msg *next = m->next;
        int status = watch_status(r, m);
        if (status <= 0) {
            tide__msgq_unlink(&r->watches, prev, m);
            done(r, m, status);
        } else {
            prev = m;
        }
        m = next;
    }
}

/* A watch on a rank already gone hears no raise: a look fails it (at
 * once, but never from inside post). */
static void watch_post(struct sim_rank *r, tide__msg *m)
{
    tide__msgq_push(&r->watches, m);
    if (r->gone || (m->peer >= 0 && m->peer < r->sim->n && r->sim->ranks[m->peer].gone))
        look_at(r, r->sim->now);
}

/* Rank `lost` left: its watches fail, and every other rank looks at
 * its own at once.  A look rather than failing those whose m->peer is
 * `lost`: m->peer is only as fresh as the last look, and a peer's claim
 * of its board raises nobody, so a watch may still name a rank it has
 * since got past and really wait for `lost`. */
static void watches_lose(struct sim_rank *lost)
{
    struct tide_sim *s = lost->sim;
    tide__msg *m;
    while ((m = tide__msgq_pop(&lost->watches)))
        done(lost, m, TIDE_EPEER);
    for (int p = 0; p < s->n; p++)
        if (s->ranks[p].watches.head)
            look_at(&s->ranks[p], s->now);
}

/* ---- the transport's face ---- */

static void start(struct tide__transport *base)
{
    (void)base; /* nothing to arm: deliveries find their receives */
}

static void post(struct tide__transport *base, tide__msg *m)
{
    struct sim_rank *r = rank_of(base);
    m->tpriv = NULL;
    if (m->dir == TIDE_MSG_WATCH)
        watch_post(r, m);
    else if (m->dir == TIDE_MSG_SEND)
        send_post(r, m);
    else
        recv_post(r, m);
}

/* Nothing is ever half on a wire here: everything is taken back at once. */
static int withdraw(struct tide__transport *base, tide__msg *m, int err)
{
    struct sim_rank *r = rank_of(base);
    (void)err;
    if (m->dir == TIDE_MSG_WATCH) {
        tide__msgq_remove(&r->watches, m);
        return 0;
    }
    if (m->dir == TIDE_MSG_RECV) {
        struct sim_peer *q = peer_of(r, m->peer, false);
        if (q)
            tide__match_remove_posted(&q->mq, m);
        return 0;
    }
    struct sim_event *ev = m->tpriv;
    if (ev) {
        tide__timer_disarm(&r->sim->heap, &ev->timer);
        event_free(r->sim, ev);
    }
    return 0;
}

static const char *peer_reason(struct tide__transport *base, int peer)
{
    struct sim_rank *r = rank_of(base);
    if (r->gone)
        return r->gone;
    if (peer < 0 || peer >= r->sim->n)
        return NULL;
    return r->sim->ranks[peer].gone;
}

static void abort_all(struct tide__transport *base, int err)
{
    struct sim_rank *r = rank_of(base);
    char why[96];
    (void)err; /* finalize and tide_comm_abort both come here */
    snprintf(why, sizeof why, "rank %d left the job (it finalized or aborted)", r->rank);
    tide__sim_net_lose(r, why);
}

static unsigned outstanding(struct tide__transport *base)
{
    (void)base;
    return 0;
}

static void free_peers(struct sim_rank *r)
{
    for (size_t i = 0; i < r->peers_cap; i++)
        tide__match_free_unexpected(&r->peers[i].mq);
    free(r->peers);
    r->peers = NULL;
    r->peers_cap = r->npeers = 0;
}

/* tide_finalize: the rank is gone for good; the network keeps its slot. */
static void destroy(struct tide__transport *base)
{
    struct sim_rank *r = rank_of(base);
    char why[64];
    snprintf(why, sizeof why, "rank %d finalized", r->rank);
    tide__sim_net_lose(r, why); /* if it did not abort first */
    tide__timer_disarm(&r->sim->heap, &r->look);
    free_peers(r);
    r->base.ctx = NULL;
}

/* ---- staging memory and hosts (transport.h): all ranks live in this
 * process, so "mapping" a peer's area is pointing at it; only the ranks
 * of one host (ranks_per_host) do ---- */

static uint8_t *stage_at(struct tide__transport *base, int peer, size_t *bytes,
                         size_t *slot_bytes)
{
    struct tide_sim *s = rank_of(base)->sim;
    *slot_bytes = s->cfg.stage_slot_bytes;
    *bytes = SIM_STAGE_SLOTS * *slot_bytes;
    if (!shares_memory(s, rank_of(base)->rank, peer))
        return NULL;
    return s->stage + (size_t)peer * *bytes;
}

static int host_of(struct tide__transport *base, int peer)
{
    return host_rank(rank_of(base)->sim, peer);
}

static long stage_take(struct tide__transport *base)
{
    struct sim_rank *r = rank_of(base);
    if (!r->sim->stage)
        return -1;
    return tide__stage_slot_take(&r->stage_used, SIM_STAGE_SLOTS, r->sim->cfg.stage_slot_bytes);
}

static void stage_give(struct tide__transport *base, long off)
{
    struct sim_rank *r = rank_of(base);
    tide__stage_slot_give(&r->stage_used, off, r->sim->cfg.stage_slot_bytes);
}

static const struct tide__transport_ops sim_ops = {
    .name = "sim",
    .start = start,
    .post = post,
    .withdraw = withdraw,
    .peer_reason = peer_reason,
    .abort = abort_all,
    .outstanding = outstanding,
    .destroy = destroy,
    .stage_at = stage_at,
    .stage_take = stage_take,
    .stage_give = stage_give,
    .board_at = board_at, /* NULL unless cfg.boards */
    .board_raise = board_raise,
    .host_of = host_of,
};


void tide__sim_net_init(struct tide_sim *s, struct sim_rank *r, struct tide__ctx *ctx)
{
    r->base.ops = &sim_ops;
    r->base.ctx = ctx;
    r->sim = s;
    tide__timer_init(&r->look, look_fire);
}

/* ---- a rank leaves ---- */

/* Drop every message in flight from or to r: r's own complete on its
 * side (its engine is failing them anyway), the peers' fail.  Collected
 * first: taking one out of the heap reorders the rest. */
static void drop_in_flight(struct sim_rank *r)
{
    struct tide_sim *s = r->sim;
    size_t k = 0;
    struct sim_event **hit = malloc((s->heap.len + 1) * sizeof *hit);
    for (size_t i = 0; hit && i < s->heap.len; i++) {
        struct tide__timer *t = s->heap.items[i];
        struct sim_event *ev = container_of(t, struct sim_event, timer);
        if (is_message(t) && (ev->from == r->rank || ev->to == r->rank))
            hit[k++] = ev;
    }
    for (size_t i = 0; i < k; i++) {
        tide__msg *m = hit[i]->m;
        struct sim_rank *sender = &s->ranks[hit[i]->from];
        tide__timer_disarm(&s->heap, &hit[i]->timer);
        event_free(s, hit[i]);
        done(sender, m, TIDE_EPEER);
    }
    free(hit);
}

void tide__sim_net_lose(struct sim_rank *r, const char *why)
{
    if (r->gone)
        return;
    snprintf(r->gone_buf, sizeof r->gone_buf, "%s", why);
    r->gone = r->gone_buf;
    drop_in_flight(r);
    for (size_t i = 0; i < r->peers_cap; i++)
        if (r->peers[i].peer >= 0)
            fail_posted(r, &r->peers[i]);
    watches_lose(r);
    struct tide_sim *s = r->sim;
    for (int p = 0; p < s->n; p++) {
        struct sim_rank *o = &s->ranks[p];
        struct sim_peer *q = o != r && o->base.ctx ? peer_of(o, r->rank, false) : NULL;
        if (q)
            fail_posted(o, q);
    }
}
