/* board.h - collectives for small vectors among the ranks of one host,
 * that use shared memory as shared memory: each rank writes its part
 * once into its board (engine/board.h), raises a flag, and reads or
 * reduces what it needs straight out of every peer's board.  No message
 * crosses a ring and no rank forwards another's bytes: an all-reduce of
 * 8 bytes among 16 ranks is one store and fifteen loads a rank, where a
 * message algorithm takes four rounds of frames.  (DeepSpeed's CPU
 * all-reduce and Open MPI's shared-memory collectives work alike.)
 *
 * The waiting is the transport's: a collective posts a watch
 * (transport.h, TIDE_MSG_WATCH) that completes once its peers' flags
 * say so, so spinning, sleeping with doorbells, the progress thread,
 * deadlines, peer loss and the flight recorder all work as for
 * messages.  A collective tests its condition once before posting, so
 * one whose peers came first never waits.
 *
 * Every board collective goes through three steps:
 *   gate     the previous board collective on this communicator has
 *            ended here (they run one at a time, in sequence order), and
 *            every peer has published our last publication's sequence
 *            or a later one, so none still reads the slot we write now;
 *   publish  the part (if any) into the slot we did not use last, the
 *            next of our eight headers (sequence, signature; a tiny part
 *            rides in it instead: engine/board.h), then `posted`;
 *   read     once the peers it needs have posted this sequence: check
 *            each header (a different signature is a mismatch, named as
 *            for frames), then reduce or copy; the two-phase all-reduce
 *            raises `reduced` in between and waits for it.
 *
 * Why the gate suffices: a peer reads our slot for collective u only
 * inside its u, and publishes a later collective only after u ended
 * there (its own gate).  Our slot was last written for our publication
 * two back, u (the header we write, eight back: earlier still); the gate
 * asks each peer to show our last publication w or later, which is after
 * u.  In steady state this holds at once: n - 1
 * loads, no wait.  And `done` (every board collective up to it ended
 * here) lets a rank reuse the board of a freed communicator once its
 * former peers show they are past its last collective.
 *
 * A rank that reads nothing (a broadcast's root) ends once published,
 * as a sending root does over messages and Open MPI's does: its buffer
 * is free (the part is in its slot), and waiting for the readers would
 * keep it a round trip for nothing but a check.  (Back to back on 2
 * ranks, 8 B, this changed nothing measurable here, 0.72-0.75 us a
 * call against 0.59-0.76 before: the readers set the pace, and the
 * readers of the call before had posted long since.)  The
 * gate keeps its slot for the readers, and its check of their headers
 * (did they all call this broadcast?) comes after the fact: at its next
 * board collective's gate, which waits for every peer to post it anyway,
 * or when the program asks tide_comm_async_error.  (On 2 ranks a root
 * whose part rides in its header runs up to six broadcasts ahead of its
 * reader, and checks the reader's headers of all it has posted once the
 * lead is spent: board.c, runs_ahead.)  A header unlike ours
 * is then reported as async_error.c reports a mismatch found late: to
 * the program at its next call, and to the peers as poison.
 *
 * Offered to communicators whose members all map each other's staging
 * areas (comm->shared, engine/hosts.c), so every member chooses alike;
 * a vector that does not fit a slot (BOARD_SLOT) never runs here. */
#ifndef TIDE_BOARD_COLL_H
#define TIDE_BOARD_COLL_H

#include "collectives/coll.h"
#include "engine/board.h"

struct tide__board_op;

/* Whose parts a rank reads. */
enum tide__board_reads {
    TIDE__READS_ALL,  /* every peer's */
    TIDE__READS_ROOT, /* the root's only (a broadcast's readers) */
    TIDE__READS_NONE, /* none (a broadcast's root): its collective ends once
                         published, and the peers' headers are checked
                         after the fact (below, "unread") */
};

/* The `reads` of the rooted collectives: the root reads every part and
 * the others none (reduce, gather), or the others the root's and the
 * root none (broadcast, scatter). */
enum tide__board_reads tide__board_reads_to_root(const struct tide__board_op *op);
enum tide__board_reads tide__board_reads_from_root(const struct tide__board_op *op);

/* What an algorithm adds to the steps above. */
struct tide__board_algo {
    /* The bytes to publish (0: a header only), at *src. */
    size_t (*part)(struct tide__board_op *op, const void **src);
    /* Whether read may take this rank's own part from src, the caller's
     * buffer, instead of its slot: whether nothing read writes before
     * it has read all of it (NULL: never).  See board.c, own_part. */
    bool (*own)(const struct tide__board_op *op, const void *src);
    /* Whose parts this rank reads (NULL: every peer's). */
    enum tide__board_reads (*reads)(const struct tide__board_op *op);
    /* The bytes of each such part that read takes, from *off (NULL: all
     * count elements of it, from 0): what board.c prefetches. */
    size_t (*span)(const struct tide__board_op *op, size_t *off);
    /* Every part it reads is posted and checked (op->parts): reduce or
     * copy.  true: the result is complete; false (two-phase): our
     * reduced share is in our slot, raise `reduced` and wait for all. */
    bool (*read)(struct tide__board_op *op);
    /* Every peer's reduced share is in place (two-phase only). */
    void (*read_reduced)(struct tide__board_op *op);
    /* The part goes to the stream (board_stream.c), not to a header. */
    bool stream;
};

/* The request of a board collective. */
struct tide__board_op {
    struct tide__coll c;
    const struct tide__board_algo *algo;
    struct tide__board_comm *bc;
    uint8_t phase;                 /* board.c's enum phase */
    int next;                      /* where the next look resumes */
    int n, me;
    uint8_t *mine;                 /* our published slot's data */
    bool line2;                    /* our part went into the header's second line:
                                      the peers' most likely did too */
    const uint8_t **parts;         /* [n] each rank's part of this collective */
    uint64_t prev;                 /* the board collective before it here; 0: none */
    struct started *started;       /* its place in the communicator's order */
    int skipper;                   /* the world rank that skipped it (PH_SKIPPED) */
    bool announced;                /* the direct path waits: as a waiter (progress.c) */
    uint64_t stream_at;            /* a stream collective's index (board_stream.c) */
    uint64_t stream_tag;           /* and its tag, once asked; 0: not yet */
    /* Last, since the direct path leaves them, and c.msg, unzeroed
     * (tide__board_direct_clear): only a request waits on a watch, and
     * own_tiny is written before it is read. */
    struct tide__watch watch;
    tide__msg wmsg;
    /* A tiny part of ours, to read (own_part); or a stream reader's copy
     * of its own part (it reads its sender's in place: board_stream.c). */
    uint8_t own_tiny[BOARD_TINY > STREAM_MAX_BYTES ? BOARD_TINY : STREAM_MAX_BYTES];
};

/* Whether this rank is the root of op's rooted collective: the test of
 * every rooted board algorithm's hooks and of their `reads`. */
static inline bool tide__board_is_root(const struct tide__board_op *op)
{
    return op->me == op->c.root;
}

/* The vtable of every board algorithm: it runs the hooks of the request's
 * algorithm (c.algo->board), as tide__coll_vtbl runs its rounds. */
extern const struct tide__op_vtbl tide__board_vtbl;

/* The direct path.  A blocking call of a small vector spent more of its
 * time on the engine than on the boards: a request from the pool, its
 * place in the active list and the deadline heap, a turn of the reactor,
 * completion, four clock reads (2 ranks on the 2-core machine, 8 bytes:
 * 0.94-1.29 us that way, 0.74-0.83 this way; Open MPI's vader 0.6-0.7).
 * So a blocking call whose collective runs on boards first tries it
 * here, on the caller's thread with the drive right held, as a request
 * would run it: gate, publish, wait a moment (20 us, TIDE_SPIN_US at
 * most) for the parts, check and read.
 * Only when everything is plain does it end here: no board collective
 * of this communicator pending, peers on time, every header as ours.
 * Otherwise it stops where it is and the request takes over from there
 * (a mismatch, a late or lost peer, a deadline are then the request's,
 * and reported as always).  Not for two-phase all-reduce, tracing, or
 * the simulator (whose flags move only as its clock does). */
enum tide__direct {
    TIDE__DIRECT_DECLINED,  /* nothing done: make the request as usual */
    TIDE__DIRECT_NUMBERED,  /* op->c.req.seq is taken: the request uses it */
    TIDE__DIRECT_PUBLISHED, /* and our part is out: tide__board_adopt */
    TIDE__DIRECT_DONE,      /* the collective succeeded here */
};

/* Zero what the direct path uses of an op on the caller's stack: not
 * what only a submitted request uses (the round driver's messages
 * op->c.msg, the watch, the reactor's fields of c.req), nor the call's
 * arguments, which calls.c's fill writes next - 360 of its 2,144
 * bytes.  2 ranks, 8 B all-gather: zeroing took 9 % of the caller's
 * samples when it cleared the whole op, 4 % at 700 bytes; at 360, a
 * broadcast's call took 43 instructions fewer than at 700
 * (tools/call_cost.sh). */
void tide__board_direct_clear(struct tide__board_op *op);

/* op: a board op cleared so, with the call's arguments and signature
 * (calls.c), on the caller's stack, comm and ctx set; algo: the hooks
 * the chosen algorithm would run. */
enum tide__direct tide__board_direct(struct tide__board_op *op, const struct tide__board_algo *algo);

/* Before the request of a PUBLISHED collective is submitted: it goes on
 * from what `from` did (its start then waits for the parts).  Or, when
 * no request could be made, tide__board_abandon: we read nothing more,
 * so the collective has ended here as far as our board is concerned. */
void tide__board_adopt(struct tide__board_op *op, const struct tide__board_op *from);
void tide__board_abandon(const struct tide__board_op *from);

/* Whether vectors of kind moving `bytes` in all fit comm's boards. */
bool tide__board_fits(uint8_t kind, const tide_comm *comm, size_t bytes);

#endif
