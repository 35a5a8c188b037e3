/* mismatch.c - noticing that ranks called different collectives, and
 * making sure a failed collective does not leave the others hanging.
 *
 * Every frame of a collective carries its signature (kind, dtype, op,
 * root, count).  A mismatch shows up in one of three ways:
 *   - a frame meets a posted receive whose signature differs (the
 *     transport fails that receive with TIDE_EMISMATCH);
 *   - a frame arrives that no receive wants yet: if this rank's
 *     collective with that sequence number is running, the signatures are
 *     compared now; if it has not started, the signature is noted and
 *     compared when it starts; if it already finished, the peer must have
 *     run a different pattern, and it is told so;
 *   - a peer reports it (below).
 * A rank whose collective already succeeded when the news comes (one
 * that only sends, like a broadcast's root) is told through its next
 * collective call instead: see async_error.c.
 * A rank whose collective fails (mismatch, deadline, a lost peer) sends a
 * "poison" frame with its account to every other rank of the
 * communicator, so ranks that wait on it fail at once with the same error
 * instead of waiting out their deadline.  Frames that arrive for a
 * collective that already failed here are its leftovers, not a mismatch:
 * the sender learns the real reason from whoever failed first (the
 * simulated network's fault schedules found the older rule, which
 * answered them with a mismatch, racing that reason to third ranks).
 *
 * Ranks in messages are world ranks (those of tide_init's communicator).
 *
 * Reactor thread only. */
#include "engine/context.h"
#include "engine/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Something learned about a collective this rank has not started. */
struct tide__note {
    uint32_t comm_id;
    uint64_t seq;
    int peer; /* world rank it came from */
    int err;  /* 0: a frame arrived early with signature sig; else a peer's failure */
    struct tide__frame sig;
    char text[200];
};

/* A poison frame on its way out: owned by the engine, not a request. */
struct ctl_msg {
    tide__msg m;
    char text[256];
};

static tide_req *find_active(struct tide__ctx *ctx, uint32_t comm_id, uint64_t seq)
{
    struct tide__seqmap_node *n = NULL;
    while ((n = tide__seqmap_find(&ctx->running, comm_id, seq, n))) {
        tide_req *req = container_of(n, tide_req, by_seq);
        if (!req->finished)
            return req;
    }
    return NULL;
}

void tide__describe_mismatch(const struct tide__ctx *ctx, int peer,
                             const struct tide__frame *theirs, const struct tide__frame *ours,
                             char *buf, size_t len)
{
    char mine[128], other[128];
    tide__describe_signature(ctx, ours, mine, sizeof mine);
    tide__describe_signature(ctx, theirs, other, sizeof other);
    snprintf(buf, len, "rank %d called %s; rank %d called %s", peer, other, ctx->rank, mine);
}

void tide__fail_mismatch(tide_req *req, int peer, const struct tide__frame *theirs)
{
    char text[300];
    tide__describe_mismatch(req->ctx, peer, theirs, &req->sig, text, sizeof text);
    tide__req_fail(req, TIDE_EMISMATCH, "%s", text);
}

static void send_poison(struct tide__ctx *ctx, int world_peer, uint32_t comm_id, uint64_t seq,
                        int err, int lost, const char *text)
{
    struct ctl_msg *cm = calloc(1, sizeof *cm);
    if (!cm)
        return; /* the peer then waits out its own deadline */
    snprintf(cm->text, sizeof cm->text, "%s", text);
    tide__msg *m = &cm->m;
    m->dir = TIDE_MSG_SEND;
    m->peer = world_peer;
    m->hdr.type = TIDE_FRAME_DATA;
    m->hdr.kind = TIDE_KIND_POISON;
    m->hdr.comm_id = comm_id;
    m->hdr.seq = seq;
    m->hdr.tag = (uint32_t)-err;
    m->hdr.root = lost - 1; /* the origin of a loss, so that third ranks name it */
    m->buf = cm->text;
    m->len = strlen(cm->text);
    ctx->tp->ops->post(ctx->tp, m);
}

void tide__ctl_msg_done(tide__msg *m)
{
    free(container_of(m, struct ctl_msg, m));
}

void tide__poison_comm(struct tide__ctx *ctx, tide_comm *comm, uint64_t seq, int err, int lost,
                       const char *text)
{
    for (int r = 0; r < comm->size; r++) {
        int w = comm->world_of ? comm->world_of[r] : r;
        if (w != ctx->rank && !ctx->tp->ops->peer_reason(ctx->tp, w))
            send_poison(ctx, w, comm->id, seq, err, lost, text);
    }
}

void tide__collective_failed(tide_req *req, int err, const char *detail)
{
    tide_comm *comm = req->comm;
    if (comm->nfailed == comm->failed_cap) {
        size_t cap = comm->failed_cap ? 2 * comm->failed_cap : 8;
        uint64_t *p = realloc(comm->failed, cap * sizeof *p);
        if (p) { /* else a late frame of it may be taken for a mismatch */
            comm->failed = p;
            comm->failed_cap = cap;
        }
    }
    if (comm->nfailed < comm->failed_cap)
        comm->failed[comm->nfailed++] = req->seq;
    if (!req->told_by_peer && !req->ctx->broken)
        tide__poison_comm(req->ctx, comm, req->seq, err, req->lost, detail);
}

/* Where comm remembers collective seq, if it is recent enough. */
static struct tide__frame *recent_slot(tide_comm *comm, uint64_t seq)
{
    return &comm->recent[seq % (sizeof comm->recent / sizeof comm->recent[0])];
}

void tide__collective_succeeded(tide_req *req)
{
    struct tide__frame *s = recent_slot(req->comm, req->seq);
    /* Field by field: inlined into the boards' direct path by the
     * link-time optimiser, `*s = req->sig` became a `rep movsl`, whose
     * start-up took 7 % of a 2-rank 8 B broadcast reader's samples
     * (perf, cpu-clock) on AMD's cores. */
    const struct tide__frame *f = &req->sig;
    s->type = f->type;
    s->kind = f->kind;
    s->dtype = f->dtype;
    s->redop = f->redop;
    s->flags = f->flags;
    s->comm_id = f->comm_id;
    s->tag = f->tag;
    s->root = f->root;
    s->seq = req->seq;
    s->len = f->len;
    s->count = f->count;
}

/* "allreduce of 8 float (sum)": what collective seq of comm was here,
 * when it is recent enough to remember, else "this collective". */
static void describe_ended(tide_comm *comm, uint64_t seq, char *buf, size_t len)
{
    const struct tide__frame *s = recent_slot(comm, seq);
    if (s->seq == seq)
        tide__describe_signature(comm->ctx, s, buf, len);
    else
        snprintf(buf, len, "this collective");
}

/* Did collective seq of comm fail here?  (Recent failures first.) */
static bool failed_here(const tide_comm *comm, uint64_t seq)
{
    for (size_t i = comm->nfailed; i-- > 0;)
        if (comm->failed[i] == seq)
            return true;
    return false;
}

/* Append n to a growing array.  When memory runs out the note is lost,
 * which costs a later, slower failure (a deadline), not a wrong one. */
static void append(struct tide__note **arr, size_t *len, size_t *cap, const struct tide__note *n)
{
    if (*len == *cap) {
        size_t more = *cap ? 2 * *cap : 16;
        struct tide__note *p = realloc(*arr, more * sizeof *p);
        if (!p)
            return;
        *arr = p;
        *cap = more;
    }
    (*arr)[(*len)++] = *n;
}

/* A note kept until its collective starts here. */
struct kept_note {
    struct tide__seqmap_node key; /* also links spare notes */
    struct tide__note note;
};

/* Like append: a note that cannot be kept costs a later failure. */
static void add_note(struct tide__ctx *ctx, const struct tide__note *n)
{
    struct kept_note *k;
    if (ctx->spare_notes) {
        k = container_of(ctx->spare_notes, struct kept_note, key);
        ctx->spare_notes = k->key.next;
    } else if (!(k = malloc(sizeof *k))) {
        return;
    }
    k->key.comm_id = n->comm_id;
    k->key.seq = n->seq;
    k->note = *n;
    if (tide__seqmap_add(&ctx->notes, &k->key) < 0)
        free(k);
}

static void spare_note(struct tide__ctx *ctx, struct kept_note *k)
{
    k->key.next = ctx->spare_notes;
    ctx->spare_notes = &k->key;
}

/* The communicator whose collective `seq` has already started here and
 * is no longer running (so it ended), or NULL. */
static tide_comm *ended_here(struct tide__ctx *ctx, uint32_t comm_id, uint64_t seq)
{
    tide_comm *comm = tide__comm_find(ctx, comm_id);
    return comm && seq <= comm->started_seq ? comm : NULL;
}

static void check_unexpected(struct tide__ctx *ctx, int peer, const struct tide__frame *f)
{
    tide_req *req = find_active(ctx, f->comm_id, f->seq);
    if (req) {
        if (!tide__frame_same_signature(&req->sig, f))
            tide__fail_mismatch(req, peer, f);
        return;
    }
    tide_comm *comm = ended_here(ctx, f->comm_id, f->seq);
    if (comm && failed_here(comm, f->seq))
        return; /* the rest of a collective that failed here: the peer hears why */
    if (comm) {
        /* It succeeded here, so the peer runs another pattern.  Everyone is
         * told, not only the sender: a root waiting for data the sender
         * sent elsewhere would otherwise wait out its deadline. */
        char mine[128], theirs[128], text[300];
        describe_ended(comm, f->seq, mine, sizeof mine);
        tide__describe_signature(ctx, f, theirs, sizeof theirs);
        snprintf(text, sizeof text, "it had finished %s when rank %d sent a frame of %s", mine,
                 peer, theirs);
        tide__poison_comm(ctx, comm, f->seq, TIDE_EMISMATCH, 0, text);
        tide__async_error_record(comm, f->seq, TIDE_EMISMATCH,
                                 "collective %llu (%s) had succeeded here when rank %d sent a "
                                 "frame of %s for it",
                                 (unsigned long long)f->seq, mine, peer, theirs);
        return;
    }
    struct tide__note n = {f->comm_id, f->seq, peer, 0, *f, ""};
    add_note(ctx, &n);
}

/* A peer's poison f (with its account, text) fails req.  A loss names
 * the rank lost first: with 4 ranks and rank 3 killed, rank 0 may hear
 * from rank 2 before its own link to rank 3 breaks, and "rank 2
 * reported" alone points at the wrong rank. */
static void fail_from_peer(tide_req *req, int err, int peer, const struct tide__frame *f,
                           const char *text)
{
    req->told_by_peer = true; /* no echo back */
    if (err == TIDE_EPEER && f->root >= 0 && f->root < req->ctx->size) {
        req->lost = f->root + 1;
        tide__req_fail(req, err, "rank %d was lost; rank %d reported: %s", f->root, peer, text);
        return;
    }
    if (err == TIDE_ETIMEDOUT && req->live) {
        /* Its deadline is the peer's; what this rank waits for is news. */
        char here[160];
        tide__req_describe_peers(req, here, sizeof here);
        tide__req_fail(req, err, "rank %d reported: %s; here: %s", peer, text, here);
        return;
    }
    tide__req_fail(req, err, "rank %d reported: %s", peer, text);
}

static void apply_poison(struct tide__ctx *ctx, int peer, const struct tide__frame *f,
                         const char *text)
{
    size_t n = strlen(text);
    int err = tide__frame_poison_error(f);
    if (f->seq == TIDE_REVOKE_SEQ) {
        tide_comm *revoked = tide__comm_find(ctx, f->comm_id);
        /* A notice for a communicator this rank has not made yet (or has
         * freed) finds nothing to wake. */
        if (revoked && err == TIDE_EREVOKED)
            tide__comm_revoked(revoked, f->root, peer);
        return;
    }
    tide_req *req = find_active(ctx, f->comm_id, f->seq);
    if (req) {
        fail_from_peer(req, err, peer, f, text);
        return;
    }
    tide_comm *comm = ended_here(ctx, f->comm_id, f->seq);
    if (comm) {
        /* Nothing waits for it here.  Only a mismatch is news to a rank
         * where it succeeded: a peer's deadline or loss is the peer's. */
        if (err == TIDE_EMISMATCH && !failed_here(comm, f->seq))
            tide__async_error_record(comm, f->seq, err,
                                     "collective %llu had succeeded here, but rank %d "
                                     "reported: %s",
                                     (unsigned long long)f->seq, peer, text);
        return;
    }
    struct tide__note note = {f->comm_id, f->seq, peer, err, *f, ""};
    memcpy(note.text, text, n + 1);
    add_note(ctx, &note);
}

/* ---- the inbox: what the transport reported, handled between turns ----
 *
 * The transport reports from inside its receive path; acting there
 * (failing requests, running their callbacks, posting poison) would
 * re-enter it.  So reports are queued and handled with the completed
 * messages.  An early frame is noted with err 0 and the text empty. */

static void inbox_push(struct tide__ctx *ctx, int peer, const struct tide__frame *f, int poison,
                       const void *data, size_t len)
{
    struct tide__note n = {f->comm_id, f->seq, peer, poison, *f, ""};
    tide__printable_copy(n.text, sizeof n.text, data, len);
    append(&ctx->inbox, &ctx->ninbox, &ctx->inbox_cap, &n);
}

void tide__frame_unexpected(struct tide__ctx *ctx, int peer, const struct tide__frame *f)
{
    /* Point-to-point frames have no signature; an agreement's early
     * frames (agree.c) are its own business. */
    if (f->seq == 0 || f->seq >= TIDE_RECOVERY_SEQ_MIN)
        return;
    ctx->frames_unexpected++;
    inbox_push(ctx, peer, f, 0, NULL, 0);
}

void tide__frame_poison(struct tide__ctx *ctx, int peer, const struct tide__frame *f,
                        const void *data, size_t len)
{
    inbox_push(ctx, peer, f, 1, data, len);
}

int tide__inbox_process(struct tide__ctx *ctx)
{
    int n = 0;
    /* Handling may fail requests whose callbacks post more work, which
     * can report more: take the batch first. */
    while (ctx->ninbox) {
        size_t k = ctx->ninbox;
        struct tide__note *batch = ctx->inbox;
        ctx->inbox = NULL;
        ctx->ninbox = ctx->inbox_cap = 0;
        for (size_t i = 0; i < k; i++) {
            if (batch[i].err)
                apply_poison(ctx, batch[i].peer, &batch[i].sig, batch[i].text);
            else
                check_unexpected(ctx, batch[i].peer, &batch[i].sig);
        }
        free(batch);
        n += (int)k;
    }
    return n;
}

/* Does note n, about req's collective, fail it?  Then it has. */
static bool fails_on(tide_req *req, const struct tide__note *n)
{
    if (n->err) {
        fail_from_peer(req, n->err, n->peer, &n->sig, n->text);
        return true;
    }
    if (!tide__frame_same_signature(&req->sig, &n->sig)) {
        tide__fail_mismatch(req, n->peer, &n->sig);
        return true;
    }
    return false;
}

bool tide__check_notes(tide_req *req)
{
    struct tide__ctx *ctx = req->ctx;
    tide_comm *comm = req->comm;
    uint32_t comm_id = comm->id;
    uint64_t seq = req->seq;
    if (seq > comm->started_seq)
        comm->started_seq = seq;
    bool failed = false;
    struct tide__seqmap_node *key;
    /* Once failed, req may be gone: its caller, waiting on another
     * thread, can see it end and free it (ASan caught it, a progress
     * thread starting a handed-over all-gather), and comm with it. */
    while ((key = tide__seqmap_find(&ctx->notes, comm_id, seq, NULL))) {
        tide__seqmap_remove(&ctx->notes, key);
        struct kept_note *k = container_of(key, struct kept_note, key);
        if (!failed) /* one account is enough */
            failed = fails_on(req, &k->note);
        spare_note(ctx, k);
    }
    return failed;
}

bool tide__notes_waiting(struct tide__ctx *ctx, const tide_comm *comm, uint64_t seq)
{
    return tide__seqmap_find(&ctx->notes, comm->id, seq, NULL) != NULL;
}

static void free_note_list(struct tide__seqmap_node *key)
{
    while (key) {
        struct tide__seqmap_node *next = key->next;
        free(container_of(key, struct kept_note, key));
        key = next;
    }
}

void tide__notes_free(struct tide__ctx *ctx)
{
    free(ctx->inbox);
    ctx->inbox = NULL;
    ctx->ninbox = ctx->inbox_cap = 0;
    for (size_t i = 0; i < ctx->notes.nslots; i++)
        free_note_list(ctx->notes.slots[i]);
    tide__seqmap_free(&ctx->notes);
    free_note_list(ctx->spare_notes);
    ctx->spare_notes = NULL;
    tide__seqmap_free(&ctx->running);
}
