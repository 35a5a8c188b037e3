/* board.c - see board.h: which board a communicator holds, and the
 * gate, publish and read steps every board collective goes through.
 *
 * Boards are claimed at a communicator's first board collective, not
 * when it is made: most communicators never run one.  The claim table
 * is ours alone (a peer learns where our board is from the directory in
 * our area), and locked, since a communicator lets go of its board where
 * its last reference goes, on whichever thread that is. */
#include "collectives/board_comm.h"
#include "engine/log.h"
#include "engine/waiter.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One entry per board of our area. */
struct claim {
    uint64_t key;   /* 0: never used */
    bool retired;   /* its communicator is gone: reusable once peers are past it */
    bool saw_all;   /* every member had claimed its board by then */
    uint64_t last;  /* the last board collective started on it */
    int *members;   /* world ranks, once retired */
    int n;
};

struct tide__board_table {
    pthread_mutex_t lock;
    struct claim e[BOARD_COUNT];
};

static uint32_t fnv32(const int *v, int n)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) {
            h ^= ((uint32_t)v[i] >> (8 * b)) & 0xffu;
            h *= 16777619u;
        }
    return h;
}

/* ---- the claim table ---- */

static void table_free(struct tide__ctx *ctx)
{
    struct tide__board_table *t = ctx->boards;
    for (int i = 0; i < BOARD_COUNT; i++)
        free(t->e[i].members);
    pthread_mutex_destroy(&t->lock);
    free(t);
    ctx->boards = NULL;
}

static struct tide__board_table *table_of(struct tide__ctx *ctx)
{
    if (ctx->boards)
        return ctx->boards;
    struct tide__board_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    ctx->boards = t;
    ctx->boards_free = table_free;
    return t;
}

/* Whether every former member of a retired board is past its last
 * collective: gone, or its own board for that key shows it done, or
 * re-keyed (it let go of the communicator, so it is past all of it; if
 * it never claimed one, it may yet, and then find ours gone). */
static bool reusable(struct tide__ctx *ctx, const struct claim *e)
{
    struct tide__transport *tp = ctx->tp;
    for (int i = 0; i < e->n; i++) {
        int w = e->members[i];
        if (w == ctx->rank || tp->ops->peer_reason(tp, w))
            continue;
        uint8_t *area = tp->ops->board_at(tp, w);
        int at = area ? board_find(area, e->key) : -1;
        struct board *b = at >= 0 ? board_at_index(area, at) : NULL;
        if (!b && !e->saw_all)
            return false;
        if (b && atomic_load_explicit(&b->done, memory_order_acquire) < e->last)
            return false;
    }
    return true;
}

/* An entry for key: a free one probing from key's home, as peers look,
 * else a retired one its peers are past.  -1 if none. */
static int take_entry(struct tide__ctx *ctx, struct tide__board_table *t, uint64_t key)
{
    for (int k = 0; k < BOARD_COUNT; k++) {
        int i = (int)((key + (uint64_t)k) % BOARD_COUNT);
        if (!t->e[i].key)
            return i;
    }
    for (int k = 0; k < BOARD_COUNT; k++) {
        int i = (int)((key + (uint64_t)k) % BOARD_COUNT);
        if (t->e[i].retired && reusable(ctx, &t->e[i]))
            return i;
    }
    return -1;
}

/* Make entry i ours for key: reset the board first, then publish the
 * key, so a peer that finds it sees a fresh board. */
static void own_entry(uint8_t *area, struct claim *e, int i, uint64_t key)
{
    struct board *b = board_at_index(area, i);
    atomic_store_explicit(&board_dir(area)[i], 0, memory_order_relaxed);
    atomic_store_explicit(&b->posted, 0, memory_order_relaxed);
    atomic_store_explicit(&b->reduced, 0, memory_order_relaxed);
    atomic_store_explicit(&b->done, 0, memory_order_relaxed);
    for (int h = 0; h < BOARD_HEADS; h++)
        atomic_store_explicit(&b->head[h].seq, 0, memory_order_relaxed);
    tide__stream_clear(b);
    atomic_store_explicit(&board_dir(area)[i], key, memory_order_release);
    free(e->members);
    *e = (struct claim){.key = key};
}

/* ---- a communicator's board ---- */

static void drop(struct tide__board_comm *bc)
{
    if (!bc)
        return;
    free(bc->world);
    free(bc->others);
    free(bc->peer);
    free(bc->peer_key);
    free(bc->spare);
    free(bc);
}

static void comm_board_free(tide_comm *comm)
{
    struct tide__board_comm *bc = comm->board;
    while (bc->first) { /* none: its requests held the communicator */
        struct started *s = bc->first;
        bc->first = s->later;
        free(s);
    }
    struct tide__board_table *t = bc->ctx->boards;
    pthread_mutex_lock(&t->lock);
    struct claim *e = &t->e[bc->index];
    e->retired = true;
    e->saw_all = bc->saw_all;
    e->last = bc->last_started;
    e->members = bc->world; /* the entry's now */
    e->n = bc->n;
    pthread_mutex_unlock(&t->lock);
    bc->world = NULL;
    drop(bc);
    comm->board = NULL;
}

static struct tide__board_comm *comm_board_new(tide_comm *comm)
{
    struct tide__board_comm *bc = calloc(1, sizeof *bc);
    int n = comm->size;
    if (!bc || !(bc->world = malloc((size_t)n * sizeof *bc->world)) ||
        !(bc->others = malloc((size_t)n * sizeof *bc->others)) ||
        !(bc->peer = calloc((size_t)n, sizeof *bc->peer)) ||
        !(bc->peer_key = calloc((size_t)n, sizeof *bc->peer_key))) {
        drop(bc);
        return NULL;
    }
    bc->ctx = comm->ctx;
    bc->n = n;
    bc->me = comm->rank;
    for (int q = 0, k = 0; q < n; q++) {
        bc->world[q] = comm->world_of ? comm->world_of[q] : q;
        if (q != bc->me)
            bc->others[k++] = bc->world[q];
    }
    bc->key = (uint64_t)comm->id << 32 | fnv32(bc->world, n);
    if (!bc->key)
        bc->key = 1;
    return bc;
}

static void comm_board_check(tide_comm *comm);

/* comm's board, claimed now if it has none.  NULL, with the request
 * failed, if there is none to be had. */
static struct tide__board_comm *board_of(tide_req *req)
{
    tide_comm *comm = req->comm;
    if (comm->board)
        return comm->board;
    struct tide__ctx *ctx = comm->ctx;
    uint8_t *area = ctx->tp->ops->board_at(ctx->tp, ctx->rank);
    if (!area) { /* select.c offers boards only where there is an area */
        tide__req_fail(req, TIDE_EPROTO, "internal error: this rank has no board area");
        return NULL;
    }
    struct tide__board_table *t = table_of(ctx);
    struct tide__board_comm *bc = t ? comm_board_new(comm) : NULL;
    if (!bc) {
        tide__req_fail(req, TIDE_ENOMEM, "cannot allocate a communicator's board state");
        return NULL;
    }
    pthread_mutex_lock(&t->lock);
    int i = take_entry(ctx, t, bc->key);
    if (i >= 0)
        own_entry(area, &t->e[i], i, bc->key);
    pthread_mutex_unlock(&t->lock);
    if (i < 0) {
        drop(bc);
        tide__req_fail(req, TIDE_ENOMEM, "all %d boards of this rank are held by communicators "
                       "that are alive (or whose peers still use them): free some",
                       BOARD_COUNT);
        return NULL;
    }
    bc->index = i;
    bc->mine = board_at_index(area, i);
    bc->peer[bc->me] = bc->mine;
    comm->board = bc;
    comm->board_free = comm_board_free;
    comm->board_check = comm_board_check;
    /* A peer at its first gate waits for our board to appear: tell it
     * (a transport that looks only when told would not notice before
     * our first publication, and would name the wrong rank meanwhile). */
    ctx->tp->ops->board_raise(ctx->tp, bc->others, bc->n - 1);
    return bc;
}

/* ---- the watches ---- */

static uint64_t load(_Atomic uint64_t *w)
{
    return atomic_load_explicit(w, memory_order_acquire);
}

struct board *tide__board_peer(struct tide__board_comm *bc, int q)
{
    if (bc->peer[q])
        return bc->peer[q];
    struct tide__transport *tp = bc->ctx->tp;
    uint8_t *area = tp->ops->board_at(tp, bc->world[q]);
    int at = area ? board_find(area, bc->key) : -1;
    if (at < 0)
        return NULL;
    if (++bc->found == bc->n - 1)
        bc->saw_all = true;
    bc->peer_key[q] = &board_dir(area)[at];
    bc->peer[q] = board_at_index(area, at);
    return bc->peer[q];
}

/* The header our last publication went to: every member's publication
 * of the same collective went to its own header of that index, since
 * the ranks of a communicator publish once per board collective, alike. */
static int last_head(const struct tide__board_comm *bc)
{
    return (int)((bc->pubs + BOARD_HEADS - 1) % BOARD_HEADS);
}

/* ---- what a rank that read nothing checks after the fact (board.h) ---- */

/* board_comm.h.  Most likely `first`; *sig is a copy, since the header
 * is not ours to trust. */
int tide__board_head_of(struct board *b, int first, uint64_t seq, struct tide__frame *sig)
{
    for (int t = 0; t < BOARD_HEADS; t++) {
        int k = (first + t) % BOARD_HEADS;
        if (load(&b->head[k].seq) == seq) {
            *sig = b->head[k].sig;
            return k;
        }
    }
    return -1;
}

/* Peer q's header of our unread publication seq differs from ours
 * (theirs), or it has none (NULL): tell the program at its next call,
 * and the peers, as async_error.c does for a mismatch found late. */
static void report_unread(struct tide__board_comm *bc, tide_comm *comm, int q, uint64_t seq,
                          const struct tide__frame *ours, const struct tide__frame *theirs)
{
    struct tide__ctx *ctx = bc->ctx;
    char text[300];
    if (theirs) {
        tide__describe_mismatch(ctx, bc->world[q], theirs, ours, text, sizeof text);
    } else {
        char mine[128];
        tide__describe_signature(ctx, ours, mine, sizeof mine);
        snprintf(text, sizeof text, "rank %d went past collective %llu without publishing its "
                 "part of it; rank %d called %s", bc->world[q], (unsigned long long)seq,
                 ctx->rank, mine);
    }
    tide__board_report_late(bc, comm, seq, text);
}

void tide__board_report_late(struct tide__board_comm *bc, tide_comm *comm, uint64_t seq,
                             const char *text)
{
    tide__poison_comm(bc->ctx, comm, seq, TIDE_EMISMATCH, 0, text);
    tide__async_error_record(comm, seq, TIDE_EMISMATCH, "collective %llu had succeeded here, "
                             "but %s", (unsigned long long)seq, text);
}

/* Whether peer b has published eight board collectives past seq, so that
 * every one of its headers is newer: it wrote its header of seq over.
 * Then it has seen to seq already.  If it read our part of seq (a
 * root of a reduce, a broadcast's reader) it compared our signature
 * with its own there.  If it read nothing, seq was an unread one of
 * its own, and its gate for the publication that wrote over it (eight
 * later) passed only once it saw us post past seq (a runner's lead ends
 * AHEAD_MAX + 1 past what it saw), and checked seq against our header
 * then (gate_passed), which was still in place: we write ours over only
 * after the same check on our side, so whichever of us checked first
 * saw both.  (Roots that change hands on 2 ranks let one rank run
 * ahead past the other's last unread ones: rank 1 a root of eight
 * broadcasts it had not yet checked, rank 0 then the root of the next
 * eight while rank 1 sleeps.) */
static bool written_over(struct board *b, uint64_t seq)
{
    for (int k = 0; k < BOARD_HEADS; k++)
        if (load(&b->head[k].seq) <= seq)
            return false;
    return true;
}

/* Compare every peer's header of our unread publication seq, which went
 * to our header `head` (and theirs most likely too), with ours; false
 * once one differs (reported). */
static bool check_one(struct tide__board_comm *bc, tide_comm *comm, int head, uint64_t seq,
                      const struct tide__frame *ours)
{
    for (int q = 0; q < bc->n; q++) {
        struct tide__frame theirs;
        /* A peer that freed the communicator since is past it. */
        if (q == bc->me || load(bc->peer_key[q]) != bc->key)
            continue;
        bool found = tide__board_head_of(bc->peer[q], head, seq, &theirs) >= 0;
        if (load(bc->peer_key[q]) != bc->key ||
            (found && tide__frame_same_signature(ours, &theirs)) ||
            (!found && written_over(bc->peer[q], seq)))
            continue;
        report_unread(bc, comm, q, seq, ours, found ? &theirs : NULL);
        return false;
    }
    return true;
}

/* Every peer has posted `upto` or later: check our unread publications
 * up to it, oldest first (one report at most).  Our headers of them, and
 * each peer's, are still there: a root running ahead publishes at most
 * AHEAD_MAX past what every peer posted (ahead_gate), which keeps the
 * eight headers of each rank clear of its unread ones; otherwise a
 * rank publishes only once every peer posted its last publication. */
static void check_unread(struct tide__board_comm *bc, tide_comm *comm, uint64_t upto)
{
    while (bc->unread) {
        unsigned i = bc->pubs - bc->unread;
        int head = (int)(i % BOARD_HEADS);
        uint64_t seq = bc->pub_seq[head];
        if (seq > upto)
            return;
        bc->unread--;
        struct tide__frame ours = bc->mine->head[head].sig; /* ours, unchanged since */
        if (!check_one(bc, comm, head, seq, &ours)) {
            bc->unread = 0;
            return;
        }
    }
}

/* tide_comm_async_error, with the drive right: a program may poll for
 * news of its last broadcast instead of calling another collective,
 * once every peer has posted it. */
static void comm_board_check(tide_comm *comm)
{
    struct tide__board_comm *bc = comm->board;
    if (bc && bc->n == 2)
        tide__stream_check(bc, comm);
    if (!bc || !bc->unread)
        return;
    uint64_t least = bc->last_pub;
    for (int q = 0; q < bc->n; q++) {
        if (q == bc->me)
            continue;
        uint64_t posted = load(&bc->peer[q]->posted);
        if (posted < least)
            least = posted;
    }
    check_unread(bc, comm, least);
}

/* Whether peer q's board shows `word` >= seq, our last publication's
 * sequence (the gate's, before we publish) or this collective's (after).
 * For `posted` the header of the slot seq most likely went to (the one
 * we published it in: part_of's guess) is looked at first: a reader
 * that sees its part there has the header and a tiny part in the same
 * crossing (engine/board.h), where `posted` took one crossing and the
 * header another.  A few percent on 2 ranks here, 8 B all-reduce,
 * blocking: 0.61-0.86 us (median 0.645) against 0.63-0.82 (0.685) in 8
 * interleaved runs; a line crossing between these two cores costs about
 * 200 ns.  `posted` covers the other slot, and a peer that went past
 * seq without publishing.  part_line: the part we look for most likely
 * fills the header's second line too (tiny_max), which we then ask for
 * at every look, so that it crosses with the first rather than after it
 * (issued once the sequence matched, it measured slower than none). */
static bool shows(const struct tide__board_op *op, int q, size_t word_off, uint64_t seq,
                  bool part_line)
{
    struct board *b = op->bc->peer[q];
    if (word_off == offsetof(struct board, posted)) {
        struct board_slot_head *h = &b->head[last_head(op->bc)];
        if (part_line)
            __builtin_prefetch((const uint8_t *)h + 64);
        if (load(&h->seq) == seq)
            return true;
    }
    return load((_Atomic uint64_t *)((uint8_t *)b + word_off)) >= seq;
}

static enum tide__board_reads reads_of(const struct tide__board_op *op);

/* A broadcast's root on 2 ranks whose part rides in its header (up to
 * 72 bytes, BOARD_TINY): its gate lets it publish up to AHEAD_MAX
 * collectives past what its reader last posted, and looks at the
 * reader's `posted` only once that is spent.  At the gate below, which
 * waits for the reader to post our last publication, each call paid two
 * crossings in a row (the reader's `posted` came to us, then our header
 * went to it).  2 ranks, back to back, in an hour of this VM when a
 * crossing took 200 ns: 8 B 0.53 us a call at that gate, 0.35 running
 * ahead, 0.33 with the reader asking for our next header early
 * (ask_next_head); in a middling hour (five interleaved rounds) 8 B 0.48
 * against 0.38-0.45, 64 B 0.46-0.56 against 0.37-0.42; in the fastest
 * hours 8 B 0.32 against 0.33-0.34, 64 B 0.33 against 0.355, where Open
 * MPI's vader takes 0.12 and 0.26.  (A part of 9-72 bytes goes to the
 * data slot otherwise, which is reused every other publication: no lead
 * there.)  At 8 ranks a root seven ahead measured slower on the 16-core
 * host (0.88 against 0.68 us, docs/small-messages.md): not there until
 * measured again.  AHEAD_MAX + 1 < BOARD_HEADS keeps the headers of the
 * unread ones, ours and the reader's, in place until check_unread has
 * seen them. */
#define AHEAD_MAX 6

/* Whether a 2-rank broadcast of `bytes` runs ahead: the root's test
 * (runs_ahead) and its reader's (flags_ready). */
static bool ahead_fits(const struct tide__board_op *op, size_t bytes)
{
    return op->n == 2 && bytes <= BOARD_TINY;
}

static bool runs_ahead(struct tide__board_op *op)
{
    const void *src;
    return reads_of(op) == TIDE__READS_NONE && ahead_fits(op, op->algo->part(op, &src));
}

static bool ahead_gate(struct tide__board_op *op, int *peer)
{
    struct tide__board_comm *bc = op->bc;
    if (bc->last_pub <= bc->all_posted + AHEAD_MAX)
        return true;
    int q = 1 - op->me;
    if (!tide__board_peer(bc, q)) {
        *peer = bc->world[q];
        return false;
    }
    uint64_t posted = load(&bc->peer[q]->posted);
    if (posted + AHEAD_MAX < bc->last_pub) {
        *peer = bc->world[q];
        return false;
    }
    bc->all_posted = posted;
    return true;
}

static bool gate_ready(struct tide__board_op *op, int *peer)
{
    struct tide__board_comm *bc = op->bc;
    if (op->algo->stream)
        return tide__stream_gate_ready(op, peer);
    if (bc->done < op->prev) {
        *peer = bc->world[bc->me];
        return false;
    }
    /* Known already when the collective before read every peer's part:
     * it saw each `posted` at its own sequence, our last publication
     * (none yet: the loop below first finds the peers' boards). */
    if (bc->last_pub && bc->all_posted >= bc->last_pub)
        return true;
    if (bc->last_pub && runs_ahead(op))
        return ahead_gate(op, peer);
    for (; op->next < op->n; op->next++) {
        int q = op->next;
        if (q == op->me)
            continue;
        /* The header first (shows): a broadcast's root then checks it
         * (gate_passed) without a second crossing - 14 % of a 2-rank 8 B
         * root's samples before; the loop, which its reader paces, took
         * as long. */
        if (!tide__board_peer(bc, q) ||
            !shows(op, q, offsetof(struct board, posted), bc->last_pub, false)) {
            *peer = bc->world[q];
            return false;
        }
    }
    if (bc->last_pub > bc->all_posted)
        bc->all_posted = bc->last_pub;
    return true;
}

/* The gate is open: every peer posted our last publication (or, running
 * ahead, all_posted), so the check of those unread cannot wait.  Not
 * inside gate_ready, which the transport calls while it walks its
 * watches: the check may send. */
static void gate_passed(struct tide__board_op *op)
{
    if (op->algo->stream) {
        tide__stream_gate_passed(op);
        return;
    }
    if (op->n == 2 && op->bc->seen < op->bc->streams)
        tide__stream_check(op->bc, op->c.req.comm);
    if (op->bc->unread)
        check_unread(op->bc, op->c.req.comm, op->bc->all_posted);
}

static enum tide__board_reads reads_of(const struct tide__board_op *op)
{
    return op->algo->reads ? op->algo->reads(op) : TIDE__READS_ALL;
}

enum tide__board_reads tide__board_reads_to_root(const struct tide__board_op *op)
{
    return tide__board_is_root(op) ? TIDE__READS_ALL : TIDE__READS_NONE;
}

enum tide__board_reads tide__board_reads_from_root(const struct tide__board_op *op)
{
    return tide__board_is_root(op) ? TIDE__READS_NONE : TIDE__READS_ROOT;
}

/* The first rank from q on whose part we read (reads: reads_of(op)), or
 * op->n if none: every peer's, the root's only, or none.  The loops
 * over the parts go `for (q = next_read(op, r, 0); q < op->n; q =
 * next_read(op, r, q + 1))`. */
static int next_read(const struct tide__board_op *op, enum tide__board_reads reads, int q)
{
    if (reads == TIDE__READS_NONE)
        return op->n;
    if (reads == TIDE__READS_ROOT)
        return q <= op->c.root ? op->c.root : op->n;
    return q == op->me ? q + 1 : q;
}

/* A broadcast's reader whose root runs ahead (runs_ahead) asks for the
 * root's next header (both lines if the part rides in the second) as
 * soon as it has this one: the root most likely wrote it already, and
 * the crossing then overlaps with the rest of this call (2 ranks, 8 B,
 * back to back: 0.33 us a call against 0.35 without, in an hour of this
 * VM when a crossing took 200 ns). */
static void ask_next_head(const struct tide__board_op *op, bool line2)
{
    const struct board *root = op->bc->peer[op->c.root];
    const uint8_t *h = (const uint8_t *)&root->head[(last_head(op->bc) + 1) % BOARD_HEADS];
    __builtin_prefetch(h);
    if (line2)
        __builtin_prefetch(h + 64);
}

/* Whether peer q, whose part of this collective we wait for, put it in
 * its stream instead (a stream broadcast where we called another
 * collective): part_of finds it and says so. */
static bool streamed(struct tide__board_op *op, int q, bool posted)
{
    struct tide__frame sig;
    return posted && op->n == 2 && tide__stream_went_by(op->bc, q, op->c.req.seq, &sig, false);
}

/* Every rank we read shows `word` >= our sequence. */
static bool flags_ready(struct tide__board_op *op, size_t word_off, int *peer)
{
    if (op->algo->stream)
        return tide__stream_ready(op, peer);
    uint64_t seq = op->c.req.seq;
    enum tide__board_reads reads = reads_of(op);
    bool posted = word_off == offsetof(struct board, posted);
    /* A root running ahead (a broadcast's, a scatter's) puts 9-72 bytes
     * there too: its part is the call's whole vector. */
    size_t bytes = op->c.req.op_bytes;
    bool ahead = reads == TIDE__READS_ROOT && ahead_fits(op, bytes);
    bool root_line2 = ahead && bytes > BOARD_TINY_LINE;
    bool part_line = (op->line2 || root_line2) && posted;
    for (int q = next_read(op, reads, op->next); q < op->n; q = next_read(op, reads, q + 1)) {
        op->next = q; /* the next look starts here */
        if (!shows(op, q, word_off, seq, part_line) && !streamed(op, q, posted)) {
            *peer = op->bc->world[q];
            return false;
        }
    }
    op->next = op->n;
    if (posted && ahead)
        ask_next_head(op, root_line2);
    /* We read every peer's (a broadcast's reader on 2 ranks reads the
     * only peer's): the next gate need not look at their `posted`. */
    bool every = reads == TIDE__READS_ALL || (reads == TIDE__READS_ROOT && op->n == 2);
    if (every && word_off == offsetof(struct board, posted) && seq > op->bc->all_posted)
        op->bc->all_posted = seq;
    return true;
}

static void raise_reduced(struct tide__board_op *op);

static bool ready(struct tide__board_op *op, int *peer)
{
    switch (op->phase) {
    case PH_GATE:
        return gate_ready(op, peer);
    case PH_POSTED:
        return flags_ready(op, offsetof(struct board, posted), peer);
    case PH_REDUCED:
        return flags_ready(op, offsetof(struct board, reduced), peer);
    default:
        *peer = op->skipper;
        return false;
    }
}

static bool watch_ready(struct tide__watch *w, int *peer)
{
    return ready(container_of(w, struct tide__board_op, watch), peer);
}

static void wait_for(struct tide__board_op *op, int peer)
{
    tide__msg *m = &op->wmsg;
    tide__zero(m, sizeof *m);
    m->dir = TIDE_MSG_WATCH;
    m->peer = peer;
    m->hdr.comm_id = op->c.req.comm->id;
    m->hdr.seq = op->c.req.seq;
    m->buf = &op->watch;
    tide__req_post(&op->c.req, m);
}

/* ---- the steps ---- */

/* The most bytes of a part that go into its header (engine/board.h).
 * A broadcast's only where they share the first line, unless its root
 * runs ahead (runs_ahead): its readers wait on the root's header, and
 * 64 bytes in the second line took the 2-rank loop 0.60 us a call
 * against 0.49 from the slot's data (0.50 against 0.47 with the second
 * line prefetched at every look, as shows does for the others). */
static size_t tiny_max(struct tide__board_op *op)
{
    return reads_of(op) == TIDE__READS_ALL || runs_ahead(op) ? BOARD_TINY : BOARD_TINY_LINE;
}

/* Where read takes our own part from (bytes of it at src, published in
 * op->mine): the caller's buffer where the algorithm allows (its `own`),
 * else a copy of a tiny part, and only else our slot.  Our slot is what
 * the peers read at that moment, and reading it too was dear, though
 * the lines are only shared then (in this VM at least).  2 ranks,
 * blocking, 3 interleaved runs against reading our slot: all-reduce 8 B
 * 0.53-0.67 us against 0.61-0.71, 512 B 0.69-0.83 against 0.93-0.97,
 * 4 KiB 1.89-2.05 against 2.48-2.64; all-gather 4 KiB 1.19-1.34 against
 * 1.42-1.57.  A stream collective has no slot (a reduce's or gather's
 * root reads its own part from its buffer or the copy): its part fits
 * own_tiny. */
static const uint8_t *own_part(struct tide__board_op *op, const void *src, size_t bytes)
{
    if (!bytes || reads_of(op) == TIDE__READS_NONE) /* read takes nothing here */
        return op->algo->stream ? op->own_tiny : op->mine; /* not NULL: C's offsets */
    if (op->algo->own && op->algo->own(op, src))
        return src;
    if (bytes <= tiny_max(op) || op->algo->stream) {
        memcpy(op->own_tiny, src, bytes);
        return op->own_tiny;
    }
    return op->mine;
}

/* Tell the peers that sleep (transport.h, board_raise: a fence, then
 * their `sleeping` words). */
static void raise_posted(struct tide__board_op *op)
{
    if (op->algo->stream) {
        tide__stream_raise(op);
        return;
    }
    struct tide__transport *tp = op->c.req.ctx->tp;
    tp->ops->board_raise(tp, op->bc->others, op->bc->n - 1);
}

/* Whether our part goes into our slot around the caches
 * (streaming_copy.c).  An ordinary store into the slot waits for its
 * line to come back from the peers that read it two publications ago,
 * and with a part of tens of KiB that copy was what the collective
 * waited for.  Streaming stores take no line back but leave the part in
 * memory, so they pay where our writing is the bound, not the peers'
 * reading:
 *   - a broadcast's or scatter's root, from 16 KiB: it alone writes
 *     what each reader copies (or a block of);
 *   - the rest on 2 ranks, from 32 KiB: each rank writes and reads as
 *     much (a reduce's or gather's root reads every part), and below
 *     that, reading from memory cost more than the crossings saved.
 * 2 ranks, three interleaved rounds, medians, us, ordinary -> streaming
 * (Open MPI vader), an AMD EPYC 2-core VM: broadcast 16 KiB 2.15 -> 1.50
 * (3.60), 32 KiB 4.02 -> 2.57 (4.90), 64 KiB 7.93 -> 4.45 (7.95);
 * scatter 16 KiB 1.42 -> 1.31 (2.97), 64 KiB 5.41 -> 2.73 (6.71);
 * reduce-scatter 32 KiB 4.30 -> 3.79, 64 KiB 8.70 -> 5.87 (14.8); gather
 * 64 KiB 4.10 -> 3.75 (5.88); reduce 32 KiB 4.91 -> 4.32 (5.49).  Below
 * those sizes it lost: all-gather 16 KiB 1.61 -> 1.97, all-reduce 8 KiB
 * 1.49 -> 2.05, reduce 16 KiB 2.09 -> 2.48.  On 4 ranks sharing the 2
 * cores a broadcast still gained (64 KiB 18.5-18.9 -> 13.2-14.4, two
 * rounds) but a reduce-scatter lost (32 KiB 10.6-14.8 -> 16.1-18.0,
 * three): on more ranks only the roots go around the caches, until a
 * many-core host says otherwise. */
#define AROUND_CACHES_ROOT (16u << 10)
#define AROUND_CACHES (32u << 10)

static bool around_caches(const struct tide__board_op *op, size_t bytes)
{
    /* The size first: every small publication, the common one, stops there. */
    if (bytes < AROUND_CACHES_ROOT || !op->c.req.ctx->streaming_stores)
        return false;
    uint8_t kind = op->c.kind;
    bool root = (kind == TIDE_KIND_BROADCAST || kind == TIDE_KIND_SCATTER) &&
                tide__board_is_root(op);
    if (root)
        return bytes >= AROUND_CACHES_ROOT;
    return op->n == 2 && bytes >= AROUND_CACHES;
}

/* Our part, header and `posted` into our board.  raise_posted must
 * follow before we wait for anything (run_direct looks at the parts
 * first, and says why). */
static void publish(struct tide__board_op *op)
{
    const void *src = NULL;
    size_t bytes = op->algo->part(op, &src);
    if (op->algo->stream) {
        tide__stream_publish(op, src, bytes);
        op->parts[op->me] = own_part(op, src, bytes);
        return;
    }
    struct tide__board_comm *bc = op->bc;
    struct board *b = bc->mine;
    uint64_t seq = op->c.req.seq;
    struct board_slot_head *head = &b->head[bc->pubs % BOARD_HEADS];
    bool tiny = bytes && bytes <= tiny_max(op);
    op->line2 = tiny && bytes > BOARD_TINY_LINE;
    op->mine = tiny ? head->tiny : b->data[bc->pubs % 2];
    if (around_caches(op, bytes)) /* never a tiny part */
        tide__coll_copy_streaming(&op->c, op->mine, src, bytes);
    else if (bytes)
        tide__coll_copy(&op->c, op->mine, src, bytes);
    head->sig = op->c.req.sig;
    head->sig.len = tiny ? bytes : 0;
    atomic_store_explicit(&head->seq, seq, memory_order_release);
    atomic_store_explicit(&b->posted, seq, memory_order_release);
    bc->pubs++;
    bc->last_pub = seq;
    bc->pub_seq[(bc->pubs - 1) % BOARD_HEADS] = seq;
    /* Otherwise its gate checked every one before (gate_passed). */
    bc->unread = reads_of(op) == TIDE__READS_NONE ? bc->unread + 1 : 0;
    op->parts[op->me] = own_part(op, src, bytes);
}

enum part { PART_OK, PART_MISMATCH, PART_GONE, PART_SKIPPED, PART_STREAMED };

/* Peer q's part of this collective, which has posted it: its header
 * must say this sequence and our signature (*sig gets theirs), and its
 * board must still be this communicator's. */
static enum part part_of(struct tide__board_op *op, int q, struct tide__frame *sig)
{
    int k = tide__board_head_of(op->bc->peer[q], last_head(op->bc), op->c.req.seq, sig);
    if (k < 0 && op->n == 2 && tide__stream_went_by(op->bc, q, op->c.req.seq, sig, false))
        return PART_STREAMED;
    if (k < 0)
        return PART_SKIPPED;
    if (!tide__frame_same_signature(&op->c.req.sig, sig))
        return PART_MISMATCH;
    /* A peer that freed the communicator (a misuse: we call a collective
     * it never will) may have given the board to another, whose part
     * this is not. */
    if (load(op->bc->peer_key[q]) != op->bc->key)
        return PART_GONE;
    struct board *b = op->bc->peer[q];
    op->parts[q] = sig->len ? b->head[k].tiny : b->data[k % 2];
    return PART_OK;
}

/* Peer q's part, or the request fails (or waits for q's account of a
 * collective it skipped): false. */
static bool take_part(struct tide__board_op *op, int q)
{
    struct tide__frame theirs;
    switch (part_of(op, q, &theirs)) {
    case PART_OK:
        return true;
    case PART_STREAMED:
        tide__stream_went_by(op->bc, q, op->c.req.seq, &theirs, true);
        /* fall through */
    case PART_MISMATCH:
        theirs.comm_id = op->c.req.comm->id;
        theirs.seq = op->c.req.seq;
        tide__fail_mismatch(&op->c.req, op->bc->world[q], &theirs);
        return false;
    case PART_GONE:
        tide__req_fail(&op->c.req, TIDE_EMISMATCH, "rank %d no longer holds this "
                       "communicator's board: it freed the communicator", op->bc->world[q]);
        return false;
    default:
        op->phase = PH_SKIPPED;
        op->skipper = op->bc->world[q];
        return false;
    }
}

/* Ask for the lines we read of every part (the algorithm's span, at
 * most PREFETCH_PART_LINES of each and PREFETCH_LINES in all) before
 * the headers are checked, so that their crossings overlap with each
 * other and with the checks; a tiny part came with its header.  2
 * ranks, blocking, 8 interleaved runs, the span against the first line
 * only: all-reduce 512 B 0.68 us against 0.75, 4 KiB 1.365 against
 * 1.685; reduce-scatter 512 B 0.695 against 0.74, 4 KiB 1.17 against
 * 1.38; all-gather 512 B 0.67 against 0.705, 4 KiB 1.145 against 1.19
 * (from 16 KiB no change: the hardware's own prefetcher has the stream
 * by then).  (The first line against none: 8 B 0.65-0.82 against
 * 0.79-0.92.) */
#define PREFETCH_PART_LINES 64
#define PREFETCH_LINES 128

static void prefetch_parts(const struct tide__board_op *op, enum tide__board_reads reads)
{
    int slot = last_head(op->bc); /* part_of's first guess */
    size_t off = 0;
    size_t len = op->algo->span ? op->algo->span(op, &off) : op->c.count * op->c.esize;
    size_t parts = reads == TIDE__READS_ALL ? (size_t)op->n - 1 : 1;
    size_t lines = (off % 64 + len + 63) / 64, most = PREFETCH_LINES / parts;
    if (lines > PREFETCH_PART_LINES)
        lines = PREFETCH_PART_LINES;
    if (lines > most)
        lines = most ? most : 1;
    for (int q = next_read(op, reads, 0); q < op->n; q = next_read(op, reads, q + 1)) {
        if (op->bc->peer[q]->head[slot].sig.len)
            continue;
        const uint8_t *at = op->bc->peer[q]->data[slot % 2] + off / 64 * 64;
        for (size_t l = 0; l < lines; l++)
            __builtin_prefetch(at + 64 * l);
    }
}

static bool take_parts(struct tide__board_op *op)
{
    if (op->algo->stream)
        return tide__stream_take(op);
    enum tide__board_reads reads = reads_of(op);
    prefetch_parts(op, reads);
    for (int q = next_read(op, reads, 0); q < op->n; q = next_read(op, reads, q + 1))
        if (!take_part(op, q))
            return false;
    return true;
}

/* Go as far as the flags allow; wait for the first that is not up. */
static void advance(struct tide__board_op *op)
{
    for (;;) {
        int peer = -1;
        if (op->c.req.failing || op->c.req.finished)
            return;
        if (!ready(op, &peer)) {
            wait_for(op, peer);
            return;
        }
        op->next = 0;
        switch (op->phase) {
        case PH_GATE:
            gate_passed(op);
            publish(op);
            /* At once: raising after the first look, as run_direct does,
             * measured nothing here, where a request's own ~1 us hides
             * it (8 B blocking calls through requests, TIDE_BOARD_DIRECT=0,
             * 10 rounds, after the look against at once: all-reduce 1.10
             * us against 1.03, all-gather 0.94 against 1.005). */
            raise_posted(op);
            op->phase = PH_POSTED;
            break;
        case PH_POSTED:
            if (!take_parts(op)) {
                if (op->phase == PH_SKIPPED)
                    tide__log(TIDE_LOG_DEBUG, op->c.req.ctx->rank, "board seq %llu: a peer went "
                              "past it without publishing; waiting for its account",
                              (unsigned long long)op->c.req.seq);
                break;
            }
            if (op->algo->read(op)) {
                tide__coll_succeed(&op->c);
                return;
            }
            raise_reduced(op);
            break;
        case PH_REDUCED:
            op->algo->read_reduced(op);
            tide__coll_succeed(&op->c);
            return;
        default:
            return;
        }
    }
}

static void raise_reduced(struct tide__board_op *op)
{
    struct tide__board_comm *bc = op->bc;
    atomic_store_explicit(&bc->mine->reduced, op->c.req.seq, memory_order_release);
    struct tide__transport *tp = op->c.req.ctx->tp;
    tp->ops->board_raise(tp, bc->others, bc->n - 1);
    op->phase = PH_REDUCED;
}

/* Put s, for collective seq, last in bc's order; returns the one before. */
static uint64_t line_up(struct tide__board_comm *bc, struct started *s, uint64_t seq)
{
    s->seq = seq;
    if (bc->last)
        bc->last->later = s;
    else
        bc->first = s;
    bc->last = s;
    uint64_t prev = bc->last_started;
    bc->last_started = seq;
    return prev;
}

static void board_start(tide_req *req)
{
    struct tide__board_op *op = (struct tide__board_op *)req;
    struct tide__coll *c = &op->c;
    const struct tide__board_algo *algo = c->algo->board;
    op->algo = algo;
    op->watch.ready = watch_ready;
    op->n = c->req.comm->size;
    op->me = c->req.comm->rank;
    if (tide__coll_scratch(c, (size_t)op->n * sizeof *op->parts))
        return;
    op->parts = c->scratch;
    const void *src;
    size_t part = algo->part(op, &src);
    if (op->bc) { /* the direct path published it (tide__board_adopt) */
        op->parts[op->me] = own_part(op, src, part);
        advance(op);
        return;
    }
    if (part > BOARD_SLOT) { /* select.c checks: not ours to meet */
        tide__req_fail(&c->req, TIDE_EPROTO, "internal error: %zu bytes for a board slot of %zu",
                       part, BOARD_SLOT);
        return;
    }
    struct tide__board_comm *bc = board_of(&c->req);
    if (!bc)
        return;
    struct started *s = calloc(1, sizeof *s);
    if (!s) {
        tide__req_fail(&c->req, TIDE_ENOMEM, "cannot allocate a board collective's place");
        return;
    }
    op->bc = bc;
    op->started = s;
    op->prev = line_up(bc, s, c->req.seq);
    op->phase = PH_GATE;
    advance(op);
}

static void board_step(tide_req *req, tide__msg *m)
{
    (void)m;
    advance((struct tide__board_op *)req);
}

/* `done` moves over the collectives that ended, in order: one that
 * failed at its gate must not claim the one before it finished. */
static void board_release(tide_req *req)
{
    struct tide__board_op *op = (struct tide__board_op *)req;
    struct tide__board_comm *bc = op->bc;
    if (bc) {
        if (op->algo && op->algo->stream && req->status)
            tide__stream_failed(op);
        op->started->ended = true;
        while (bc->first && bc->first->ended) {
            struct started *s = bc->first;
            bc->done = s->seq;
            bc->first = s->later;
            free(s);
        }
        if (!bc->first)
            bc->last = NULL;
        atomic_store_explicit(&bc->mine->done, bc->done, memory_order_release);
        /* The next one here may wait at its gate for this `done`: a
         * transport that learns of stores only when told (the simulator)
         * must look at our own watches again. */
        struct tide__transport *tp = req->ctx->tp;
        if (bc->first)
            tp->ops->board_raise(tp, &bc->world[bc->me], 1);
        op->bc = NULL;
    }
    tide__coll_release(req);
}

/* ---- the direct path (board.h) ---- */

/* The most ranks whose parts the direct path reads: their addresses
 * live on the caller's stack. */
#define DIRECT_MAX_RANKS 64
/* How long it waits for the drive right and then for the parts before
 * a request takes over: a peer later than this costs the request's
 * ~1 us on top, and meanwhile nothing else of this process moves. */
#define DIRECT_PATIENCE_NS (20 * TIDE_NS_PER_US)
#define DIRECT_SPIN_NS (2 * TIDE_NS_PER_US)
#define DIRECT_YIELD_TAKEN_NS (5 * TIDE_NS_PER_US) /* a yield this late: someone ran */

static uint64_t patience(const struct tide__ctx *ctx)
{
    return ctx->spin_ns < DIRECT_PATIENCE_NS ? ctx->spin_ns : DIRECT_PATIENCE_NS;
}

/* The collective ended here, with no other board collective of bc's
 * communicator pending: `done` passes it. */
static void ended_alone(struct tide__board_comm *bc, uint64_t seq)
{
    bc->last_started = seq;
    bc->done = seq;
    atomic_store_explicit(&bc->mine->done, seq, memory_order_release);
}

static bool parts_ready(struct tide__board_op *op, int *peer)
{
    return flags_ready(op, offsetof(struct board, posted), peer);
}

/* Wait up to patience_ns for cond (the gate, or every part we read
 * posted): spinning with a pause between looks, and from DIRECT_SPIN_NS
 * on yielding between them where this CPU is wanted too - by our
 * progress thread, which shares it, or by someone a first yield found
 * (it came back late: the peer we wait for, in a mask we were not told
 * of).  On the 16-core host, 8 B at 16 ranks, which share their CPUs
 * with their progress threads, spinning took 5.6-10 us and yielding
 * from 2 us on 2.96-5.1 (the request path 3.2-5.5,
 * docs/compare-2026-11-27-16core.md);
 * at 8 ranks, with CPUs of their own, spinning did better (2.5-2.9
 * against the request path's 3.1-3.4).  Two ranks whose callers shared
 * a CPU here spun out their whole patience without yields: 74 us a
 * call, against 4-5.  *now_out (if not NULL) gets each clock reading. */
static bool await(struct tide__board_op *op, bool (*cond)(struct tide__board_op *op, int *peer),
                  uint64_t patience_ns, uint64_t *now_out)
{
    struct tide__ctx *ctx = op->c.req.ctx;
    uint64_t since = 0;
    bool shared = ctx->spin_yields || (!ctx->inline_mode && !ctx->place.own);
    bool yielding = ctx->spin_yields, probed = false;
    int peer;
    op->next = 0;
    for (unsigned i = 1;; i++) {
        if (cond(op, &peer))
            return true;
        if (i == 1)
            tide__progress_announce(ctx, &op->announced);
        if (yielding)
            tide__spin_yield();
        else
            tide__cpu_relax();
        if (i % 16)
            continue; /* the clock costs as much as a look */
        uint64_t now = tide__now_ns();
        if (now_out)
            *now_out = now;
        if (!since) {
            since = now;
        } else if (now - since >= patience_ns) {
            return false;
        } else if (now - since >= DIRECT_SPIN_NS && !probed) {
            probed = true;
            tide__spin_yield();
            yielding = shared || tide__now_ns() - now > DIRECT_YIELD_TAKEN_NS;
        }
    }
}

/* Every part we read is as ours: else the request says why not. */
static bool parts_plain(struct tide__board_op *op)
{
    if (op->algo->stream)
        return tide__stream_plain(op);
    struct tide__frame sig;
    enum tide__board_reads reads = reads_of(op);
    prefetch_parts(op, reads);
    for (int q = next_read(op, reads, 0); q < op->n; q = next_read(op, reads, q + 1))
        if (part_of(op, q, &sig) != PART_OK)
            return false;
    return true;
}

/* Claim, once a direct call that read every peer's part succeeded,
 * the lines our next publication will write: its header's two and the
 * first CLAIM_DATA_MAX bytes of its data slot, for a part as long as
 * this one.  Each peer has posted this collective, so it is done
 * reading our last slot; it read those lines last, so a store to them
 * waits for its copy to go, and the store buffer held it until the next
 * locked instruction (board_stream.c's claim_next, where this was
 * found, says more).  2 ranks, interleaved rounds, us a blocking call,
 * without and with: all-reduce 8 B 0.42-0.48 -> 0.27-0.40, 512 B
 * 0.61-0.63 -> 0.49-0.50; all-gather 512 B 0.59-0.60 -> 0.47-0.49, 2
 * KiB 0.91-0.92 -> 0.78-0.79.  Claiming a whole 4 KiB slot did worse
 * (all-reduce 1.14-1.18 -> 1.41-1.42).  So did claiming anything for a
 * rank that reads no part or the root's only (a broadcast's and a
 * scatter's ranks): its peers may still be reading what it claims, even
 * its header (three rounds, header alone against nothing: broadcast
 * 256 B 0.65-0.67 against 0.55, 512 B 0.64-0.70 against 0.51-0.56,
 * scatter 512 B 0.65-0.71 against 0.56-0.57).  Only on the direct
 * path: a request ends on whichever thread drives, often not the one
 * whose next call publishes (nonblocking all-gather 512 B 0.55 ->
 * 0.64-0.69 with it). */
#define CLAIM_DATA_MAX 512

static void claim_next(struct tide__board_op *op)
{
    if (reads_of(op) != TIDE__READS_ALL)
        return;
    struct tide__board_comm *bc = op->bc;
    struct board *b = bc->mine;
    const uint8_t *head = (const uint8_t *)&b->head[bc->pubs % BOARD_HEADS];
    tide__prefetch_to_write(head);
    tide__prefetch_to_write(head + BOARD_LINE);
    const void *src;
    size_t bytes = op->algo->part(op, &src);
    if (bytes <= tiny_max(op))
        return; /* it rode in the header */
    const uint8_t *data = b->data[bc->pubs % 2];
    for (size_t off = 0; off < bytes && off < CLAIM_DATA_MAX; off += BOARD_LINE)
        tide__prefetch_to_write(data + off);
}

/* Holding the drive right: as far as the collective goes plainly.
 * *now: ctx's clock, if a wait for the parts read it as the collective
 * ended here, else left 0.  A call that finds its peers on time reads
 * no clock but the coarse one, for the flight recorder: the clock was a
 * sixth of a 2-rank 8 B broadcast (25-45 ns a read in a VM). */
static enum tide__direct run_direct(struct tide__board_op *op, uint64_t *now)
{
    struct tide__coll *c = &op->c;
    tide_comm *comm = c->req.comm;
    struct tide__ctx *ctx = c->req.ctx;
    struct tide__board_comm *bc = comm->board;
    if (!bc || bc->first || comm->gated || ctx->broken || atomic_load(&comm->revoked) ||
        atomic_load(&comm->late_err))
        return TIDE__DIRECT_DECLINED;
    if (!bc->spare && !(bc->spare = calloc(1, sizeof *bc->spare)))
        return TIDE__DIRECT_DECLINED;
    op->bc = bc;
    op->prev = bc->last_started;
    /* A broadcast's root, which does not wait for its readers, often
     * finds the gate shut for a moment: the readers are still reading
     * its last one.  Most calls find it open: one look before await's
     * setup (41 of a 2-rank 8 B broadcast's 1,277 instructions). */
    int peer;
    op->next = 0;
    if (!gate_ready(op, &peer) && !await(op, gate_ready, patience(ctx), NULL))
        return TIDE__DIRECT_DECLINED;
    gate_passed(op);
    if (atomic_load(&comm->late_err))
        return TIDE__DIRECT_DECLINED; /* the gate found our last broadcast mismatched:
                                         this call reports it (async_error.c) */
    uint64_t seq = atomic_fetch_add(&comm->next_seq, 1);
    c->req.seq = seq;
    if (tide__notes_waiting(ctx, comm, seq))
        return TIDE__DIRECT_NUMBERED; /* a peer's word on it came first */
    /* The raise's fence waits until our stores own their lines, which
     * the peers read last time: a crossing.  Look at the parts first,
     * and the look's crossing overlaps it.  2 ranks, 8 B, 8-10
     * interleaved runs against raising at once: all-reduce median 0.475
     * us against 0.585, reduce-scatter 0.51 against 0.60, broadcast
     * 0.525 against 0.60, all-gather 0.41 against 0.445; 512 B and 4
     * KiB within 3 %. */
    publish(op);
    uint64_t end = 0; /* the clock, if the wait below reads it */
    op->next = 0;
    bool ready = parts_ready(op, &peer);
    raise_posted(op);
    if ((!ready && !await(op, parts_ready, patience(ctx), &end)) || !parts_plain(op))
        return TIDE__DIRECT_PUBLISHED;
    op->algo->read(op);
    if (!op->algo->stream)
        claim_next(op);
    ended_alone(bc, seq);
    /* What a request's start and end would have noted. */
    if (seq > comm->started_seq)
        comm->started_seq = seq;
    *now = end;
    uint64_t shown = end ? end : tide__coarse_now_ns();
    c->req.deadline_ns = shown + ctx->timeout_ns; /* the recorder's post time */
    tide__rec_whole(&c->req, shown);
    tide__collective_succeeded(&c->req);
    ctx->board_direct_ended++;
    return TIDE__DIRECT_DONE;
}

void tide__board_direct_clear(struct tide__board_op *op)
{
    tide__req_clear_unsubmitted(&op->c.req);
    /* The call's arguments, from kind to stage_bytes, are fill's
     * (calls.c); the round driver's fields are zeroed with the rest. */
    struct tide__coll *c = &op->c;
    c->scratch = NULL;
    c->scratch_len = 0;
    c->round = c->nrounds = c->pending = c->nmsg = 0;
    size_t from = offsetof(struct tide__board_op, algo);
    tide__zero(&op->algo, offsetof(struct tide__board_op, watch) - from);
}

enum tide__direct tide__board_direct(struct tide__board_op *op, const struct tide__board_algo *algo)
{
    struct tide__ctx *ctx = op->c.req.ctx;
    tide_comm *comm = op->c.req.comm;
    if (!ctx->board_direct || algo->read_reduced || comm->size > DIRECT_MAX_RANKS || ctx->trace)
        return TIDE__DIRECT_DECLINED;
    const uint8_t *parts[DIRECT_MAX_RANKS];
    op->algo = algo;
    op->n = comm->size;
    op->me = comm->rank;
    op->parts = parts;
    if (!tide__progress_enter(ctx, patience(ctx), &op->announced))
        return TIDE__DIRECT_DECLINED;
    uint64_t now = 0;
    enum tide__direct end = run_direct(op, &now);
    tide__progress_leave(ctx, op->announced, now);
    op->parts = NULL; /* our stack's */
    return end;
}

/* adopt and abandon run on the caller's thread without the drive right:
 * the direct path found no board collective of this communicator
 * pending, and only this thread calls collectives on it (MPI's rule),
 * so nothing else touches bc until the request is submitted. */
void tide__board_adopt(struct tide__board_op *op, const struct tide__board_op *from)
{
    struct tide__board_comm *bc = from->bc;
    struct started *s = bc->spare;
    bc->spare = NULL;
    op->bc = bc;
    op->started = s;
    op->prev = line_up(bc, s, from->c.req.seq);
    /* Whole, as board_start would make it: the request may fail before
     * its start runs (a peer's word on it came first), and its release
     * asks what it was (a stream collective settles its entries). */
    op->algo = from->algo;
    op->n = from->n;
    op->me = from->me;
    op->mine = from->mine;
    op->stream_at = from->stream_at;
    op->phase = PH_POSTED;
}

void tide__board_abandon(const struct tide__board_op *from)
{
    ended_alone(from->bc, from->c.req.seq);
}

static void board_describe(const tide_req *req, char *buf, size_t len)
{
    const struct tide__board_op *op = (const struct tide__board_op *)req;
    /* Short: the engine gives this 64 bytes. */
    static const char *const where[] = {"its gate (the one before, peers' reads)",
                                        "its read (parts not all posted)",
                                        "its second read (shares not all posted)",
                                        "a skipped part (the peer's account)"};
    snprintf(buf, len, "%s", where[op->phase < 4 ? op->phase : 0]);
}

const struct tide__op_vtbl tide__board_vtbl = {"collective", board_start, board_step, board_release,
                                               board_describe};

bool tide__board_fits(uint8_t kind, const tide_comm *comm, size_t bytes)
{
    struct tide__transport *tp = comm->ctx->tp;
    if (!comm->shared || comm->size < 2 || !tp->ops->board_at ||
        !tp->ops->board_at(tp, comm->ctx->rank)) /* areas are offered to all or none */
        return false;
    /* An all-gather's and a gather's slot holds one block of the whole. */
    bool block = kind == TIDE_KIND_ALLGATHER || kind == TIDE_KIND_GATHER;
    size_t slot_use = block ? bytes / (size_t)comm->size : bytes;
    return slot_use <= BOARD_SLOT;
}
