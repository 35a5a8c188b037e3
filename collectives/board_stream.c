/* board_stream.c - the stream: 2-rank collectives in which one rank
 * only sends and the other only receives (a broadcast's vector and a
 * scatter's or gather's block, and a reduce's vector, up to 256 bytes:
 * select.c), on boards, with no header,
 * no `posted` and no gate crossing per call.  Below, "root" and
 * "reader" are the sender and the receiver: a reduce's or gather's
 * sender is the rank that is not its root.
 *
 * Why.  On boards a broadcast's root stores to its header and `posted`
 * each call, lines its reader holds.  x86 commits stores in order, so
 * a store to a line held elsewhere stalls the stores behind it, and the
 * call's few hundred stores fill the store buffer behind that one: the
 * root waited out a line crossing every call, 0.32 us a call against
 * Open MPI vader's 0.11 (docs/small-messages.md, "Counting instead of
 * timing").  Here the root writes into the ring of its board
 * (engine/board.h) one 32-byte entry {tag, 24 bytes of part} a
 * collective, two a cache line, and nothing else its reader reads but
 * the entry's data slot, where a part of more than 24 bytes goes
 * (before the tag, which is stored with release).
 *
 * One entry a collective, whatever its size.  Until 2026-11-29 a longer
 * part took an entry per 8 bytes, each with the tag: half of every line
 * was tags, so 256 bytes were eight lines each way, and collectives of
 * other sizes took other counts of entries, which the two streams then
 * had to realign.  A slot holds the part in as few lines as it fills,
 * and the reader reads it there in place.  2 ranks, five interleaved
 * rounds, medians, us a call, before -> after (Open MPI vader):
 * broadcast 64 B 0.13 -> 0.13 (0.27), 128 B 0.24 -> 0.14 (0.23), 256 B
 * 0.28 -> 0.18 (0.27); reduce 256 B 0.29 -> 0.21 (0.25); gather 512 B
 * (both blocks) 0.26 -> 0.18 (0.24); scatter 512 B 0.27 -> 0.18 (0.26).
 * A part of up to 24 bytes stays in its entry's line: with 16-byte
 * entries, four a line, a 16 B part in a slot took two lines where it
 * had taken one (three rounds, 16-byte against 32-byte entries, vader:
 * gather of two 16 B blocks 0.25 against 0.16, 0.16; reduce 16 B 0.24
 * against 0.16, 0.21; 8 B broadcast 0.17 against 0.16, 0.20).
 *
 * Both ranks write an entry for every stream collective, at the same
 * index (a communicator's stream collectives pair up in order, as all
 * its collectives do): the root its part, the reader an acknowledgement
 * (the tag only), written before it reads, so that two ranks that both
 * read find each other.  A reader that reads its own part too (a
 * reduce's or gather's root) reads it from its buffer or a copy
 * (board.c, own_part).  A tag holds the collective's sequence (low
 * SEQ_BITS bits) and a code of the caller's signature (kind, operation,
 * dtype, count and root: the algorithm is the stream's), so that
 *   - a reader compares the root's code with its own: another call is a
 *     mismatch at once, named as for headers;
 *   - two ranks that both think the other the root each find the
 *     other's acknowledgement where they look for a part: a mismatch;
 *   - a root compares the reader's entries with its own only in batches
 *     (look): two roots are found within half a ring, at the next other
 *     board collective, or when the program polls tide_comm_async_error,
 *     and reported late, as board.h's "unread" ones are;
 *   - a rank in another board collective that finds its peer's part in
 *     the stream (tide__stream_went_by) fails it as a mismatch, and a
 *     reader whose root posted a header instead finds that header.
 * Whichever way a collective fails, each rank's entry for it stays at
 * its index, so the next ones pair up.
 *
 * The same look is the flow control.  A rank writes an entry at index k
 * only once the peer's entries up to k - STREAM_HALF are looked at
 * (`seen`).  The peer writes an entry at i only after its stream collectives
 * before i ended, so every entry of ours up to k - STREAM_HALF - 1,
 * which includes k - N (the one k overwrites, with its slot), was read.
 * And the peer writes its entry at k, over its k - N, only after it saw
 * ours at k - STREAM_HALF, which we wrote after seeing its k - N: none
 * goes unlooked-at.  A reader looks at the root's entries as it reads
 * them; a root at the reader's only once half a ring ahead, and then in
 * blocks of STREAM_STEP: it waits for the end of the reader's block on
 * a watch, like every board collective, and the reader rings it there
 * (raise). */
#include "collectives/board_comm.h"

#include <stdio.h>
#include <string.h>

#define STREAM_HALF (STREAM_ENTRIES / 2)
#define STREAM_STEP 32 /* a held root waits for the reader's next block of this many */
#define SEQ_BITS 40
#define SEQ_MASK (((uint64_t)1 << SEQ_BITS) - 1)
#define LINE_ENTRIES (BOARD_LINE / sizeof(struct board_entry))
/* A code's fields, from its low bits: dtype (5 bits), count (9), root
 * (1), CODE_VALID (1), the kind's place in kinds[] (2) and the
 * operation (4): 22 bits, of the 23 a tag has above its sequence beside
 * REPORTED. */
#define COUNT_AT 5
#define COUNT_MASK 511
#define ROOT_AT 14
#define KIND_AT 16
#define REDOP_AT 18
#define CODE_VALID ((uint64_t)1 << 15) /* in every code, so no tag is 0 */
_Static_assert(TIDE_DTYPE_COUNT <= 1 << COUNT_AT, "a dtype fits its 5 bits");
_Static_assert(STREAM_MAX_BYTES <= COUNT_MASK && COUNT_MASK < 1 << (ROOT_AT - COUNT_AT),
               "a count fits its 9 bits");
_Static_assert(REDOP_AT + 4 <= 63 - SEQ_BITS, "a code fits above the sequence");
#define REPORTED ((uint64_t)1 << 63)   /* on the peer's tag: this rank called another
                                          collective there (tide__stream_went_by) */

static uint64_t load(_Atomic uint64_t *w)
{
    return atomic_load_explicit(w, memory_order_acquire);
}

static uint64_t seq_of(uint64_t tag)
{
    return tag & SEQ_MASK;
}

/* Whether sequence a (of SEQ_BITS bits) comes after b: a difference of
 * less than half the space, so a sequence may wrap. */
static bool later(uint64_t a, uint64_t b)
{
    return (int64_t)((a - b) << (64 - SEQ_BITS)) > 0;
}

/* The kinds that stream, in the order of their code: the collectives
 * one of whose 2 ranks only sends and the other only receives. */
static const uint8_t kinds[4] = {TIDE_KIND_BROADCAST, TIDE_KIND_REDUCE, TIDE_KIND_GATHER,
                                 TIDE_KIND_SCATTER};
static const struct tide__algo *const algos[4] = {
    &tide__algo_board_stream, &tide__algo_board_stream_reduce, &tide__algo_board_stream_gather,
    &tide__algo_board_stream_scatter};

static uint64_t kind_code(uint8_t kind)
{
    uint64_t i = 0;
    while (i < 3 && kinds[i] != kind)
        i++;
    return i;
}

/* What may differ between two stream collectives (select.c takes the
 * stream for up to STREAM_MAX_BYTES on 2 ranks: count <= 256, root < 2;
 * the operation is a tide_op, < 16). */
static uint64_t code_of(const struct tide__frame *sig)
{
    return (uint64_t)(sig->dtype & 31) | (sig->count & COUNT_MASK) << COUNT_AT |
           (uint64_t)(sig->root & 1) << ROOT_AT | CODE_VALID | kind_code(sig->kind) << KIND_AT |
           (uint64_t)(sig->redop & 15) << REDOP_AT;
}

static uint8_t kind_in(uint64_t code)
{
    return kinds[code >> KIND_AT & 3];
}

static size_t count_in(uint64_t code)
{
    return code >> COUNT_AT & COUNT_MASK;
}

static uint64_t tag_of(const struct tide__frame *sig, uint64_t seq)
{
    return seq_of(seq) | code_of(sig) << SEQ_BITS;
}

/* The code a tag holds (code_of's), with or without REPORTED. */
static uint64_t code_in(uint64_t tag)
{
    return (tag & ~REPORTED) >> SEQ_BITS;
}

/* The signature a tag stands for. */
static void sig_of(uint64_t tag, struct tide__frame *sig)
{
    uint64_t code = code_in(tag);
    *sig = (struct tide__frame){
        .kind = kind_in(code),
        .dtype = (uint8_t)(code & 31),
        .redop = (uint8_t)(code >> REDOP_AT & 15),
        .root = (int32_t)(code >> ROOT_AT & 1),
        .count = count_in(code),
        .flags = tide__algo_id(algos[code >> KIND_AT & 3]),
        .seq = seq_of(tag),
    };
}

/* The rank that sends in a stream collective of kind with root: a
 * broadcast's or scatter's root, a reduce's or gather's other rank. */
static int sender_of(uint8_t kind, int root)
{
    return kind == TIDE_KIND_BROADCAST || kind == TIDE_KIND_SCATTER ? root : 1 - root;
}

static int sender(const struct tide__board_op *op)
{
    return sender_of(op->c.kind, op->c.root);
}

/* The bytes the sender's part holds: one vector or block (a scatter's
 * root sends its reader's block only, board_alltoall.c). */
static size_t part_bytes(size_t count, size_t esize)
{
    return count * esize;
}

static struct board_entry *entry_at(struct board *b, uint64_t index)
{
    return &b->ring[index % STREAM_ENTRIES];
}

/* The data slot of the entry at index: its part, if in_slot. */
static uint8_t *slot_at(struct board *b, uint64_t index)
{
    return b->stream_slot[index % STREAM_ENTRIES];
}

/* Whether a part of `bytes` goes to its entry's slot rather than the
 * entry: the one rule the sender (put, claim_next) and the reader
 * (take_plain) must agree on. */
static bool in_slot(size_t bytes)
{
    return bytes > STREAM_PART;
}

static int peer_of(const struct tide__board_comm *bc)
{
    return 1 - bc->me;
}

/* Our entry at index: the part from src (bytes of it; none for an
 * acknowledgement) in the entry, or in its slot if longer, then the tag
 * (what the peer waits on).  An 8-byte part, the commonest (a double, a
 * pair of floats), is one fixed move, which the compiler inlines. */
static void put(struct tide__board_comm *bc, uint64_t index, uint64_t tag, const void *src,
                size_t bytes)
{
    struct board_entry *e = entry_at(bc->mine, index);
    if (in_slot(bytes))
        memcpy(slot_at(bc->mine, index), src, bytes);
    else if (bytes == sizeof(uint64_t))
        memcpy(e->part, src, sizeof(uint64_t));
    else if (bytes)
        memcpy(e->part, src, bytes);
    atomic_store_explicit(&e->tag, tag, memory_order_release);
}

/* Whether the peer's tag at our entry `index` is from a lap before (or
 * none): it has not written this collective yet.  Our entry before index
 * is our stream collective before. */
static bool not_yet(struct tide__board_comm *bc, uint64_t index, uint64_t tag)
{
    uint64_t before = index ? seq_of(load(&entry_at(bc->mine, index - 1)->tag)) : 0;
    return !tag || !later(seq_of(tag), before);
}

/* Look at the peer's entries from `seen` up to `upto` (ours end there):
 * seen moves over every one the peer wrote, and the first unlike ours is
 * kept in stream_bad for report_bad, unless our call of it failed (its
 * caller knows). */
static void look(struct tide__board_comm *bc, struct board *peer, uint64_t upto)
{
    for (; bc->seen < upto; bc->seen++) {
        uint64_t i = bc->seen;
        uint64_t ours = load(&entry_at(bc->mine, i)->tag);
        uint64_t theirs = load(&entry_at(peer, i)->tag);
        if (theirs == ours || (ours & REPORTED))
            continue;
        if (not_yet(bc, i, theirs))
            return;
        if (!bc->stream_bad && seq_of(ours) != seq_of(bc->stream_failed))
            bc->stream_bad = i + 1;
    }
}

/* Report the entry look found unlike ours, if any: late, since our part
 * of it succeeded here (a root reads nothing). */
static void report_bad(struct tide__board_comm *bc, tide_comm *comm)
{
    if (!bc->stream_bad)
        return;
    uint64_t i = bc->stream_bad - 1;
    bc->stream_bad = 0;
    int q = peer_of(bc);
    uint64_t ours = load(&entry_at(bc->mine, i)->tag);
    uint64_t theirs = load(&entry_at(bc->peer[q], i)->tag);
    struct tide__frame mine, other;
    sig_of(ours, &mine);
    sig_of(theirs, &other);
    char text[300];
    if (seq_of(ours) == seq_of(theirs) && (theirs & REPORTED)) {
        char desc[128];
        tide__describe_signature(bc->ctx, &mine, desc, sizeof desc);
        snprintf(text, sizeof text, "rank %d called another collective, and found rank %d's part "
                 "of %s in its stream", bc->world[q], bc->ctx->rank, desc);
    } else if (seq_of(ours) == seq_of(theirs)) {
        tide__describe_mismatch(bc->ctx, bc->world[q], &other, &mine, text, sizeof text);
    } else {
        snprintf(text, sizeof text, "rank %d's stream collective %llu on this communicator was "
                 "its collective %llu, this rank's was %llu: the two called other collectives "
                 "between",
                 bc->world[q], (unsigned long long)i + 1, (unsigned long long)seq_of(theirs),
                 (unsigned long long)seq_of(ours));
    }
    tide__board_report_late(bc, comm, seq_of(ours), text);
}

void tide__stream_check(struct tide__board_comm *bc, tide_comm *comm)
{
    struct board *peer = tide__board_peer(bc, peer_of(bc));
    if (peer)
        look(bc, peer, bc->streams);
    report_bad(bc, comm);
}

/* This collective's tag: kept in the op, since publish and take both
 * ask (code_of's search was a tenth of a reader's stream instructions). */
static uint64_t tag(struct tide__board_op *op)
{
    if (!op->stream_tag)
        op->stream_tag = tag_of(&op->c.req.sig, op->c.req.seq);
    return op->stream_tag;
}

/* Whether the peer wrote its entry at `index`, which we wrote already:
 * its tag is not older than ours there. */
static bool written(struct tide__board_comm *bc, struct board *peer, uint64_t index)
{
    uint64_t theirs = load(&entry_at(peer, index)->tag);
    return theirs && !later(seq_of(load(&entry_at(bc->mine, index)->tag)), seq_of(theirs));
}

bool tide__stream_gate_ready(struct tide__board_op *op, int *peer)
{
    struct tide__board_comm *bc = op->bc;
    if (bc->done < op->prev) {
        *peer = bc->world[bc->me];
        return false;
    }
    if (bc->streams < bc->seen + STREAM_HALF)
        return true;
    /* Held: wait for the peer's entry at the end of the block of
     * STREAM_STEP that `seen` is in, looking at that one entry only
     * meanwhile, then at all up to it at once. */
    int q = peer_of(bc);
    struct board *b = tide__board_peer(bc, q);
    uint64_t at = bc->seen - bc->seen % STREAM_STEP + STREAM_STEP - 1;
    if (b && written(bc, b, at)) {
        look(bc, b, bc->streams);
        if (bc->streams < bc->seen + STREAM_HALF)
            return true;
    }
    *peer = bc->world[q];
    return false;
}

void tide__stream_gate_passed(struct tide__board_op *op)
{
    report_bad(op->bc, op->c.req.comm);
}

/* Claim the lines our next stream collective will write, now, while the
 * caller has other work: our ring's line after the one its entry goes
 * to (that one may hold this collective's entry too, which the peer
 * reads now), and, for a part as long as this one, its slot's lines.
 * The peer read every one of them a lap ago (look, or its reads), so
 * each is shared with it, and a store to it waits for the peer's copy
 * to go.  Those stores sat in the store buffer until the call's next
 * locked instruction (taking the drive right, numbering the next
 * collective), which waited out that crossing: with perf's cpu-clock, a
 * 2-rank 8 B broadcast's reader spent 60 % of its direct path's samples
 * on those two instructions.  Asking early (when a part took an entry
 * per 8 bytes): 2 ranks, two interleaved rounds, us a call, without and
 * with (Open MPI vader): broadcast 8 B 0.14-0.15 -> 0.10 (0.13), 64 B
 * 0.26 -> 0.12-0.18 (0.25), 128 B 0.29 -> 0.22-0.25 (0.23); gather 128
 * B 0.26-0.27 -> 0.12-0.13 (0.18); reduce 64 B 0.26 -> 0.13 (0.24).
 * From two lines ahead it did worse from 64 B on (0.16-0.18). */
static void claim_next(struct tide__board_comm *bc, uint64_t next, size_t bytes)
{
    tide__prefetch_to_write(entry_at(bc->mine, next + LINE_ENTRIES));
    if (!in_slot(bytes))
        return;
    const uint8_t *slot = slot_at(bc->mine, next);
    for (size_t off = 0; off < bytes; off += BOARD_LINE)
        tide__prefetch_to_write(slot + off);
}

void tide__stream_publish(struct tide__board_op *op, const void *src, size_t bytes)
{
    struct tide__board_comm *bc = op->bc;
    uint64_t i = bc->streams;
    if (op->me != sender(op))
        bytes = 0; /* an acknowledgement */
    put(bc, i, tag(op), src, bytes);
    bc->streams = i + 1;
    op->stream_at = i;
    claim_next(bc, i + 1, bytes);
}

/* Whether peer q still holds this communicator's board (one that freed
 * the communicator, a misuse, may have given it to another). */
static bool holds_board(struct tide__board_comm *bc, int q)
{
    return load(bc->peer_key[q]) == bc->key;
}

/* A reader rings its root only where the root may wait for it: at a full
 * ring, for the entry at the end of a block of STREAM_STEP
 * (tide__stream_gate_ready). */
void tide__stream_raise(struct tide__board_op *op)
{
    struct tide__board_comm *bc = op->bc;
    if (op->me != sender(op) && (op->stream_at + 1) % STREAM_STEP)
        return;
    struct tide__transport *tp = op->c.req.ctx->tp;
    tp->ops->board_raise(tp, bc->others, 1);
}

bool tide__stream_ready(struct tide__board_op *op, int *peer)
{
    if (op->me == sender(op))
        return true;
    struct tide__board_comm *bc = op->bc;
    int q = sender(op);
    struct board *b = tide__board_peer(bc, q);
    /* Its entry, or one of a later collective, or its header past us
     * (the root called another collective): tide__stream_take says. */
    if (b && (!not_yet(bc, op->stream_at, load(&entry_at(b, op->stream_at)->tag)) ||
              load(&b->posted) >= op->c.req.seq))
        return true;
    *peer = bc->world[q];
    return false;
}

/* The sender's entry is there and as ours: its part is op->parts[sender],
 * read in place (by copy_out, or read).  It writes that entry and slot
 * again a lap on, once it saw our entry half a lap on, which we write
 * after this collective ended. */
static bool take_plain(struct tide__board_op *op)
{
    struct tide__board_comm *bc = op->bc;
    int q = sender(op);
    struct board *b = bc->peer[q];
    uint64_t i = op->stream_at;
    if (!b || load(&entry_at(b, i)->tag) != tag(op) || !holds_board(bc, q))
        return false;
    bool slot = in_slot(part_bytes(op->c.count, op->c.esize));
    op->parts[q] = slot ? slot_at(b, i) : entry_at(b, i)->part;
    if (bc->seen == i)
        bc->seen = i + 1;
    return true;
}

bool tide__stream_plain(struct tide__board_op *op)
{
    return op->me == sender(op) || take_plain(op);
}

/* This reader's entry at index was for nothing: the root called another
 * collective there.  Give it back, so that our next stream collective
 * pairs with the root's next; it goes blank (not_yet) until then. */
static void give_back(struct tide__board_comm *bc, uint64_t index)
{
    atomic_store_explicit(&entry_at(bc->mine, index)->tag, 0, memory_order_release);
    bc->streams = index;
    if (bc->seen > index)
        bc->seen = index;
    if (bc->stream_bad > index)
        bc->stream_bad = 0;
}

bool tide__stream_take(struct tide__board_op *op)
{
    if (tide__stream_plain(op))
        return true;
    struct tide__board_comm *bc = op->bc;
    tide_req *req = &op->c.req;
    int q = sender(op);
    struct board *b = bc->peer[q];
    uint64_t tag = load(&entry_at(b, op->stream_at)->tag);
    struct tide__frame theirs;
    if (seq_of(tag) == seq_of(req->seq) && holds_board(bc, q)) {
        sig_of(tag, &theirs); /* another stream collective: both entries stay */
        theirs.comm_id = req->comm->id;
        tide__fail_mismatch(req, bc->world[q], &theirs);
        return false;
    }
    give_back(bc, op->stream_at);
    if (!holds_board(bc, q)) {
        tide__req_fail(req, TIDE_EMISMATCH, "rank %d no longer holds this communicator's board: "
                       "it freed the communicator", bc->world[q]);
    } else if (tide__board_head_of(b, 0, req->seq, &theirs) >= 0) {
        theirs.comm_id = req->comm->id;
        theirs.seq = req->seq;
        tide__fail_mismatch(req, bc->world[q], &theirs);
    } else if (!not_yet(bc, op->stream_at, tag)) {
        tide__req_fail(req, TIDE_EMISMATCH, "rank %d streamed collective %llu "
                       "and published nothing for this one", bc->world[q],
                       (unsigned long long)seq_of(tag));
    } else {
        op->phase = PH_SKIPPED; /* its account (a poison frame), or the deadline, ends us */
        op->skipper = bc->world[q];
    }
    return false;
}

void tide__stream_failed(struct tide__board_op *op)
{
    op->bc->stream_failed = op->c.req.seq;
}

bool tide__stream_went_by(struct tide__board_comm *bc, int q, uint64_t seq, struct tide__frame *sig,
                          bool consume)
{
    struct board *b = bc->peer[q];
    uint64_t i = bc->streams;
    uint64_t tag = b ? load(&entry_at(b, i)->tag) : 0;
    if (!tag || seq_of(tag) != seq_of(seq))
        return false;
    sig_of(tag, sig);
    if (sender_of(sig->kind, sig->root) != q)
        return false; /* an acknowledgement: q waits for our part, and finds our header */
    if (!consume)
        return true;
    /* The peer wrote its entry at i, so it read all of ours before i:
     * ours there may go (the flow control's first half).  Marked with
     * its tag, so that its look reports the mark at once. */
    put(bc, i, tag | REPORTED, NULL, 0);
    bc->streams = i + 1;
    if (bc->seen == i)
        bc->seen = i + 1;
    return true;
}

void tide__stream_clear(struct board *b)
{
    for (int i = 0; i < STREAM_ENTRIES; i++)
        atomic_store_explicit(&b->ring[i].tag, 0, memory_order_relaxed);
}
