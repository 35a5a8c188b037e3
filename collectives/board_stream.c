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
 * timing").  Here the root writes its part into the ring of its board
 * (engine/board.h) in 16-byte entries {tag, 8 bytes of part}, four a
 * cache line, and nothing else its reader reads.  A part of more than 8
 * bytes takes consecutive entries, each with the same tag (the first's
 * stored last), so that every entry says whose it is.
 *
 * Both ranks write entries for every stream collective, as many and at
 * the same index (a communicator's stream collectives pair up in order,
 * as all its collectives do): the root its part, the reader an
 * acknowledgement (the tags only), written before it reads.  A reader
 * that reads its own part too (a reduce's or gather's root) reads it
 * from its buffer or a copy (board.c, own_part), since a part of more
 * than one entry is not contiguous in them.  A tag holds the
 * collective's sequence (low SEQ_BITS bits) and a code of the caller's
 * signature (kind, operation, dtype, count and root: the algorithm is
 * the stream's; they give the entries it takes), so that
 *   - a reader compares the root's code with its own: another call is a
 *     mismatch at once, named as for headers;
 *   - two ranks that both think the other the root each find the
 *     other's acknowledgement where they look for a part: a mismatch;
 *   - a root compares the reader's entries with its own only in batches
 *     (look): two roots are found within half a ring, at the next other
 *     board collective, or when the program polls tide_comm_async_error,
 *     and reported late, as board.h's "unread" ones are.  Two roots
 *     whose parts took other counts of entries leave the streams apart
 *     by the difference: the next reader finds its sender's entries
 *     elsewhere and moves its own there (realign);
 *   - a rank in another board collective that finds its peer's part in
 *     the stream (tide__stream_went_by) fails it as a mismatch, and a
 *     reader whose root posted a header instead finds that header.
 *
 * The same look is the flow control.  A rank writes an entry at index k
 * only once the peer's entries up to k - STREAM_HALF are looked at
 * (`seen`).  The peer writes an entry at i only after its stream collectives
 * before i ended, so every entry of ours up to k - STREAM_HALF - 1,
 * which includes k - N (the one k overwrites), was read.  And the peer
 * writes its entry at k, over its k - N, only after it saw ours at k -
 * STREAM_HALF, which we wrote after seeing its k - N: none goes
 * unlooked-at.  A reader looks at the root's entries as it reads them;
 * a root at the reader's only once half a ring ahead, and then in blocks
 * of STREAM_STEP: it waits for the end of the reader's block on a watch,
 * like every board collective, and the reader rings it there (raise). */
#include "collectives/board_comm.h"

#include <stdio.h>
#include <string.h>

#define STREAM_HALF (STREAM_ENTRIES / 2)
#define STREAM_STEP 32 /* a held root waits for the reader's next block of this many */
#define STREAM_SPAN (STREAM_MAX_BYTES / STREAM_PART) /* the most entries a part takes */
_Static_assert(STREAM_SPAN <= UINT8_MAX, "an op keeps its entry count in a byte (stream_k)");
#define SEQ_BITS 40
#define SEQ_MASK (((uint64_t)1 << SEQ_BITS) - 1)
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

/* The rank that sends in the collective a tag names (its code's kind
 * and root), without the whole signature sig_of makes. */
static int sender_in(uint64_t tag)
{
    uint64_t code = code_in(tag);
    return sender_of(kind_in(code), (int)(code >> ROOT_AT & 1));
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

/* The entries a part of `bytes` takes: one for each 8 bytes, at least one. */
static uint64_t entries_for(size_t bytes)
{
    return bytes <= STREAM_PART ? 1 : (bytes + STREAM_PART - 1) / STREAM_PART;
}

/* The entries of the collective a tag names, whoever wrote it: from its
 * code's kind, count and dtype alone (look steps over hundreds; the
 * whole signature, with its algorithm id, is for reports). */
static uint64_t entries_of(uint64_t tag)
{
    uint64_t code = code_in(tag);
    size_t esize = tide_dtype_size((tide_dtype)(code & 31));
    uint64_t k = entries_for(part_bytes(count_in(code), esize));
    return k < STREAM_SPAN ? k : STREAM_SPAN;
}

static struct board_entry *entry_at(struct board *b, uint64_t index)
{
    return &b->ring[index % STREAM_ENTRIES];
}

static int peer_of(const struct tide__board_comm *bc)
{
    return 1 - bc->me;
}

/* Copy the `bytes - off` bytes from `off` (at most an entry's part):
 * a whole part as one move, which the compiler inlines. */
static void copy_part(uint8_t *to, const uint8_t *from, size_t bytes, size_t off)
{
    if (bytes - off >= STREAM_PART)
        memcpy(to, from, STREAM_PART);
    else
        memcpy(to, from, bytes - off);
}

/* Tag k entries of ours from index, the first last (its tag is what the
 * peer waits on), with the part from src (bytes of it; none for an
 * acknowledgement). */
static void put(struct tide__board_comm *bc, uint64_t index, uint64_t k, uint64_t tag,
                const void *src, size_t bytes)
{
    for (uint64_t j = k; j-- > 0;) {
        struct board_entry *e = entry_at(bc->mine, index + j);
        size_t off = j * STREAM_PART;
        if (off < bytes)
            copy_part(e->part, (const uint8_t *)src + off, bytes, off);
        atomic_store_explicit(&e->tag, tag, j ? memory_order_relaxed : memory_order_release);
    }
}

/* Whether the peer's tag at our first entry `index` is from a lap before
 * (or none): it has not written this collective yet.  Our entry before
 * index is our stream collective before (each of its entries carries
 * its tag). */
static bool not_yet(struct tide__board_comm *bc, uint64_t index, uint64_t tag)
{
    uint64_t before = index ? seq_of(load(&entry_at(bc->mine, index - 1)->tag)) : 0;
    return !tag || !later(seq_of(tag), before);
}

/* Look at the peer's entries from `seen` up to `upto` (ours end there),
 * a collective at a time: seen moves over every one the peer wrote, and
 * the first unlike ours is kept in stream_bad for report_bad, unless our
 * call of it failed (its caller knows).  A collective of ours is every
 * entry with its tag: as many as its code says, or as many as the
 * sender's where a reader took as the sender did (take_as_sender_did),
 * whose code says otherwise. */
static void look(struct tide__board_comm *bc, struct board *peer, uint64_t upto)
{
    while (bc->seen < upto) {
        uint64_t i = bc->seen;
        uint64_t ours = load(&entry_at(bc->mine, i)->tag);
        uint64_t theirs = load(&entry_at(peer, i)->tag);
        if (theirs != ours && !(ours & REPORTED)) {
            if (not_yet(bc, i, theirs))
                return;
            if (!bc->stream_bad && seq_of(ours) != seq_of(bc->stream_failed))
                bc->stream_bad = i + 1;
        }
        uint64_t j = i + 1;
        while (j < upto && load(&entry_at(bc->mine, j)->tag) == ours)
            j++;
        bc->seen = j;
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

/* The entries this collective takes, and its tag: kept in the op, since
 * the gate, publish, raise and take each ask (part_bytes' multiplies and
 * code_of's search were a tenth of a reader's stream instructions). */
static uint64_t entries(struct tide__board_op *op)
{
    if (!op->stream_k)
        op->stream_k = (uint8_t)entries_for(part_bytes(op->c.count, op->c.esize));
    return op->stream_k;
}

static uint64_t tag(struct tide__board_op *op)
{
    if (!op->stream_tag)
        op->stream_tag = tag_of(&op->c.req.sig, op->c.req.seq);
    return op->stream_tag;
}

/* Whether the peer wrote its entry at `index` (any of a collective's),
 * which we wrote already: its tag is not older than ours there. */
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
    uint64_t k = entries(op);
    if (bc->streams + k <= bc->seen + STREAM_HALF)
        return true;
    /* Held: wait for the peer's entry at the end of the block of
     * STREAM_STEP that `seen` is in, looking at that one entry only
     * meanwhile, then at all up to it at once. */
    int q = peer_of(bc);
    struct board *b = tide__board_peer(bc, q);
    uint64_t at = bc->seen - bc->seen % STREAM_STEP + STREAM_STEP - 1;
    if (b && written(bc, b, at)) {
        look(bc, b, bc->streams);
        if (bc->streams + k <= bc->seen + STREAM_HALF)
            return true;
    }
    *peer = bc->world[q];
    return false;
}

void tide__stream_gate_passed(struct tide__board_op *op)
{
    report_bad(op->bc, op->c.req.comm);
}

/* Claim the lines of our ring that the next stream collective (taken
 * as long as this one) will write, from one line ahead, now, while the
 * caller has other work.  The peer read every entry of ours there a lap
 * ago (look, or its reads), so each line is shared with it, and a store
 * to it waits for the peer's copy to go.  Those stores sat in the store
 * buffer until the call's next locked instruction (taking the drive
 * right, numbering the next collective), which waited out that
 * crossing: with perf's cpu-clock, a 2-rank 8 B broadcast's reader
 * spent 60 % of its direct path's samples on those two instructions.
 * Asking early: 2 ranks, two interleaved rounds, us a call, without
 * and with (Open MPI vader): broadcast 8 B 0.14-0.15 -> 0.10 (0.13),
 * 64 B 0.26 -> 0.12-0.18 (0.25), 128 B 0.29 -> 0.22-0.25 (0.23); gather
 * 128 B 0.26-0.27 -> 0.12-0.13 (0.18); reduce 64 B 0.26 -> 0.13 (0.24);
 * scatter 256 B 0.29-0.30 -> 0.24-0.25 (0.22).  From two lines ahead
 * it did worse from 64 B on (0.16-0.18). */
#define LINE_ENTRIES (BOARD_LINE / sizeof(struct board_entry))
static void claim_next(struct tide__board_comm *bc, uint64_t next, uint64_t k)
{
    for (uint64_t j = next + LINE_ENTRIES; j < next + k + 2 * LINE_ENTRIES - 1; j += LINE_ENTRIES)
        tide__prefetch_to_write(entry_at(bc->mine, j));
}

void tide__stream_publish(struct tide__board_op *op, const void *src, size_t bytes)
{
    struct tide__board_comm *bc = op->bc;
    uint64_t i = bc->streams, k = entries(op);
    put(bc, i, k, tag(op), src, op->me == sender(op) ? bytes : 0);
    bc->streams = i + k;
    op->stream_at = i;
    claim_next(bc, i + k, k);
}

/* Whether peer q still holds this communicator's board (one that freed
 * the communicator, a misuse, may have given it to another). */
static bool holds_board(struct tide__board_comm *bc, int q)
{
    return load(bc->peer_key[q]) == bc->key;
}

/* Whether op's entries are still our last (no take gave any back, no
 * realign moved them): one board collective runs at a time. */
static bool ours_last(struct tide__board_op *op)
{
    return op->bc->streams == op->stream_at + entries(op);
}

/* Whether the sender's entry at i (tag) is the first of its part, not
 * one further into a part begun before i, which streams gone apart show
 * (in a ring whose entries each carry their collective's tag). */
static bool first_of_part(struct board *b, uint64_t i, uint64_t tag)
{
    return !i || load(&entry_at(b, i - 1)->tag) != tag;
}

/* Where the sender's entries of op's collective begin (*to), where that
 * is not at our index: when our stream collective before was one both
 * ranks sent, with other counts (neither read the other's, to take as
 * many entries as it did), the streams went apart by the difference,
 * and the sender's entries of this one follow its part of that one.
 * Only once the sender wrote them (its first, stored last), and only
 * where realign may move there: forward within the flow control's
 * room, back only to a sender's part (a peer that reads too comes
 * forward to us instead, and the two then pair as two readers do).
 * Run only while a reader waits: in paired calls it stops at the first
 * compare, of our last entry before ours with the sender's at that
 * index (equal tags: the same call), a line it wrote before the part we
 * wait for. */
static bool apart_to(struct tide__board_op *op, struct board *peer, uint64_t *to)
{
    struct tide__board_comm *bc = op->bc;
    uint64_t at = op->stream_at, k = entries(op);
    uint64_t ours = at ? load(&entry_at(bc->mine, at - 1)->tag) : 0;
    if (!ours || (ours & REPORTED) || !ours_last(op) ||
        load(&entry_at(peer, at - 1)->tag) == ours)
        return false;
    uint64_t from = at - 1;
    while (from > 0 && load(&entry_at(bc->mine, from - 1)->tag) == ours)
        if (at - --from > STREAM_HALF)
            return false;
    uint64_t theirs = load(&entry_at(peer, from)->tag);
    if (!theirs || (theirs & REPORTED) || theirs == ours || seq_of(theirs) != seq_of(ours))
        return false;
    if (sender_in(ours) != bc->me || sender_in(theirs) != peer_of(bc) ||
        entries_of(theirs) == at - from)
        return false;
    *to = from + entries_of(theirs);
    uint64_t next = load(&entry_at(peer, *to)->tag);
    if ((next & REPORTED) || seq_of(next) != seq_of(op->c.req.seq))
        return false;
    if (*to < at)
        return sender_in(next) == peer_of(bc);
    look(bc, peer, bc->streams);
    return *to + k <= bc->seen + STREAM_HALF;
}

/* A reader rings its root only where the root may wait for it: at a full
 * ring, for the entry at the end of a block of STREAM_STEP
 * (tide__stream_gate_ready). */
void tide__stream_raise(struct tide__board_op *op)
{
    struct tide__board_comm *bc = op->bc;
    uint64_t i = op->stream_at;
    if (op->me != sender(op) && i / STREAM_STEP == (i + entries(op)) / STREAM_STEP)
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
    if (b) {
        uint64_t at = op->stream_at, tag = load(&entry_at(b, at)->tag);
        /* Its entry, or one of a later collective, or its header past us
         * (the root called another collective), or its entry elsewhere
         * after a collective we both sent (realign): tide__stream_take
         * says.  Not an entry of this collective further into a part
         * begun before ours: the streams went apart, and the sender is
         * still writing the part (apart_to waits for its first), which
         * take would call another collective. */
        bool inside = seq_of(tag) == seq_of(op->c.req.seq) && !first_of_part(b, at, tag);
        if ((!not_yet(bc, at, tag) && !inside) || load(&b->posted) >= op->c.req.seq)
            return true;
        uint64_t to;
        if (apart_to(op, b, &to))
            return true;
    }
    *peer = bc->world[q];
    return false;
}

/* The sender's entries are there and as ours: its part, gathered out of
 * them, is op->parts[sender] (in own_tiny, behind the copy of our own
 * part board.c's own_part may have made). */
static bool take_plain(struct tide__board_op *op)
{
    struct tide__board_comm *bc = op->bc;
    int q = sender(op);
    struct board *b = bc->peer[q];
    uint64_t i = op->stream_at, k = entries(op);
    /* Its first entry (stored last: the rest are there). */
    if (!b || load(&entry_at(b, i)->tag) != tag(op) || !first_of_part(b, i, tag(op)) ||
        !holds_board(bc, q))
        return false;
    if (k == 1) {
        op->parts[q] = entry_at(b, i)->part; /* copy_out takes it from there */
    } else {
        size_t bytes = part_bytes(op->c.count, op->c.esize);
        for (uint64_t j = 0; j < k; j++)
            copy_part(op->own_tiny + STREAM_MAX_BYTES + j * STREAM_PART, entry_at(b, i + j)->part,
                      bytes, j * STREAM_PART);
        op->parts[q] = op->own_tiny + STREAM_MAX_BYTES;
    }
    if (bc->seen == i)
        bc->seen = i + k;
    return true;
}

bool tide__stream_plain(struct tide__board_op *op)
{
    return op->me == sender(op) || take_plain(op);
}

/* Our entries from `from` up to `to` (none if to <= from) say tag: 0 to
 * give them back, or the tag of the collective they stretch. */
static void set_tags(struct tide__board_comm *bc, uint64_t from, uint64_t to, uint64_t tag)
{
    for (uint64_t i = from; i < to; i++)
        atomic_store_explicit(&entry_at(bc->mine, i)->tag, tag, memory_order_release);
}

/* This reader's entries from index were for nothing: the root called
 * another collective there.  Give them back, so that our next stream
 * collective pairs with the root's next; they go blank (not_yet) until
 * then. */
static void give_back(struct tide__board_comm *bc, uint64_t index, uint64_t k)
{
    set_tags(bc, index, index + k, 0);
    bc->streams = index;
    if (bc->seen > index)
        bc->seen = index;
    if (bc->stream_bad > index)
        bc->stream_bad = 0;
}

/* The sender wrote another collective at our index (tag, its entries
 * k): take as many entries as it did, so that the next ones pair up.
 * Ours keep our tag (the sender's look reports the difference, or not if
 * our word came first: async_error.c keeps one report a collective). */
static void take_as_sender_did(struct tide__board_op *op, uint64_t tag)
{
    struct tide__board_comm *bc = op->bc;
    uint64_t i = op->stream_at, ours = entries(op), theirs = entries_of(tag);
    uint64_t mine = load(&entry_at(bc->mine, i)->tag);
    /* A peer that reads too (it takes us for the sender) does the same
     * with our tag: both keep the larger count, and the next pair up. */
    if (sender_in(tag) == op->me && theirs < ours)
        theirs = ours;
    set_tags(bc, i + ours, i + theirs, mine);
    set_tags(bc, i + theirs, i + ours, 0);
    bc->streams = i + theirs;
    if (bc->seen == i)
        bc->seen = i + theirs;
}

/* The sender wrote this collective elsewhere than at our index
 * (apart_to): move our entries there, so that this collective and those
 * after pair up again (the one before is reported late by either look).
 * Ours between the two indices: given back where the sender's is lower
 * (the peer never read those: it sent there too), or, where it is
 * higher, our collective before stretched over them, as
 * take_as_sender_did stretches one, so that each look steps over them
 * in one run. */
static bool realign(struct tide__board_op *op, struct board *peer)
{
    struct tide__board_comm *bc = op->bc;
    uint64_t at = op->stream_at, k = entries(op), to;
    if (!apart_to(op, peer, &to))
        return false;
    uint64_t before = load(&entry_at(bc->mine, at - 1)->tag); /* apart_to: at > 0 */
    give_back(bc, at, k);
    if (to < at) {
        give_back(bc, to, at - to);
    } else {
        set_tags(bc, at, to, before);
        if (bc->seen >= at && bc->seen < to)
            bc->seen = to;
    }
    put(bc, to, k, tag(op), NULL, 0);
    bc->streams = to + k;
    op->stream_at = to;
    return true;
}

bool tide__stream_take(struct tide__board_op *op)
{
    if (tide__stream_plain(op))
        return true;
    struct tide__board_comm *bc = op->bc;
    tide_req *req = &op->c.req;
    int q = sender(op);
    struct board *b = bc->peer[q];
    if (b && holds_board(bc, q) && realign(op, b) && tide__stream_plain(op))
        return true;
    uint64_t tag = load(&entry_at(b, op->stream_at)->tag);
    struct tide__frame theirs;
    if (seq_of(tag) == seq_of(req->seq) && holds_board(bc, q)) {
        sig_of(tag, &theirs); /* another stream collective: tide__stream_failed settles */
        theirs.comm_id = req->comm->id;
        tide__fail_mismatch(req, bc->world[q], &theirs);
        return false;
    }
    give_back(bc, op->stream_at, entries(op));
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

/* Where our entries are still the last (a take gave none back) and the
 * peer's at our index are another stream collective's, take as many as
 * it did.  Also after a failure by another route than our take: where
 * two ranks both read, the one that finds the other's entries first
 * fails, and its word to the other (a mismatch notice) can end the
 * other's call before its take ran, which left the streams apart. */
void tide__stream_failed(struct tide__board_op *op)
{
    struct tide__board_comm *bc = op->bc;
    bc->stream_failed = op->c.req.seq;
    if (op->phase != PH_POSTED || !ours_last(op))
        return;
    int q = peer_of(bc);
    struct board *b = tide__board_peer(bc, q);
    if (!b || !holds_board(bc, q))
        return;
    uint64_t theirs = load(&entry_at(b, op->stream_at)->tag);
    if (theirs && !(theirs & REPORTED) && theirs != tag(op) &&
        seq_of(theirs) == seq_of(op->c.req.seq))
        take_as_sender_did(op, theirs);
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
    /* The peer wrote its entries from i, so it read all of ours before
     * i: ours there may go (the flow control's first half).  Marked with
     * its tag, so that its look reports the mark at once, and ours steps
     * over as many entries as it took. */
    uint64_t k = entries_of(tag);
    put(bc, i, k, tag | REPORTED, NULL, 0);
    bc->streams = i + k;
    if (bc->seen == i)
        bc->seen = i + k;
    return true;
}

void tide__stream_clear(struct board *b)
{
    for (int i = 0; i < STREAM_ENTRIES; i++)
        atomic_store_explicit(&b->ring[i].tag, 0, memory_order_relaxed);
}
