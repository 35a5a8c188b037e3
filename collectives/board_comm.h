/* board_comm.h - what the files of the board collectives share and the
 * rest of tide does not: a communicator's board state, the phases of a
 * board op, and the few steps of board.c that the stream
 * (board_stream.c) uses, and the stream's steps that board.c runs. */
#ifndef TIDE_BOARD_COMM_H
#define TIDE_BOARD_COMM_H

#include "collectives/board.h"

/* Ask for the cache line at p to be this CPU's, to write: a hint that
 * changes nothing but when the line crosses from the peer that read it
 * last (board.c's claim_next, board_stream.c's). */
static inline void tide__prefetch_to_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

/* A communicator's board and what it knows of its peers'. */
struct tide__board_comm {
    struct tide__ctx *ctx;
    uint64_t key;
    int index;                   /* our board's entry */
    struct board *mine;
    int n, me;
    int *world;                  /* [n] members' world ranks */
    int *others;                 /* [n - 1] the peers' world ranks, for doorbells */
    struct board **peer;         /* [n] each member's board; NULL until found */
    _Atomic uint64_t **peer_key; /* [n] its directory entry, which must still say key */
    int found;                   /* peers whose board we found */
    bool saw_all;
    uint64_t last_pub;           /* our last publication's sequence */
    unsigned unread;             /* our last publications of which we read no
                                    part and whose peers' headers are still
                                    to be checked (check_unread): how many */
    uint64_t pub_seq[BOARD_HEADS]; /* the sequence of our publication i, at
                                    i % BOARD_HEADS (the header it went to) */
    uint64_t all_posted;         /* every peer's `posted` was seen at least this */
    unsigned pubs;               /* publications so far: the next goes to header
                                    pubs % BOARD_HEADS, data slot pubs % 2 */
    uint64_t last_started;       /* the last board collective started here */
    uint64_t done;               /* what mine->done says */
    struct started *first, *last; /* started here and not yet folded into done */
    struct started *spare;       /* for the direct path's hand-over, which must not fail */
    uint64_t streams;            /* stream broadcasts started here (board_stream.c):
                                    the next one's entry goes to ring[streams % N] */
    uint64_t seen;               /* the peer's stream entries below this index are
                                    checked against ours */
    uint64_t stream_bad;         /* 1 + the index of one found unlike ours, to
                                    report; 0: none */
    uint64_t stream_failed;      /* the last stream collective that failed here:
                                    its caller was told, so look reports none */
};

/* A board collective started here, kept until `done` passes it (not in
 * the request, which its caller may free once it ended). */
struct started {
    uint64_t seq;
    bool ended;
    struct started *later;
};

enum phase {
    PH_GATE,    /* waiting for the gate (board.h) */
    PH_POSTED,  /* published; waiting for the parts we read */
    PH_REDUCED, /* two-phase: waiting for every reduced share */
    PH_SKIPPED, /* a peer went past this collective without publishing:
                   its poison frame, or the deadline, ends us */
};


/* ---- board.c, for the stream ---- */

/* Peer q's board, looked up once it has one (NULL: not yet). */
struct board *tide__board_peer(struct tide__board_comm *bc, int q);

/* The header of board b that says seq (looking from `first`), or -1;
 * *sig gets a copy of its signature. */
int tide__board_head_of(struct board *b, int first, uint64_t seq, struct tide__frame *sig);

/* A mismatch found after our part of collective seq succeeded here: tell
 * the program at its next call, and the peers, as async_error.c does. */
void tide__board_report_late(struct tide__board_comm *bc, tide_comm *comm, uint64_t seq,
                             const char *text);

/* ---- board_stream.c, for board.c: the stream's gate, publish and read
 * steps (board.h), which board.c runs in place of its own for a board
 * algorithm whose hooks say `stream` ---- */

bool tide__stream_gate_ready(struct tide__board_op *op, int *peer);
void tide__stream_gate_passed(struct tide__board_op *op);
/* Our entry: the part (bytes of it at src) if we send, else the tag. */
void tide__stream_publish(struct tide__board_op *op, const void *src, size_t bytes);
void tide__stream_raise(struct tide__board_op *op);
bool tide__stream_ready(struct tide__board_op *op, int *peer);
/* The sender's part taken into op->parts (true), or the request failed
 * or waits for the sender's account of a collective it skipped (false). */
bool tide__stream_take(struct tide__board_op *op);
/* The direct path's test: the sender's entry is there and as ours. */
bool tide__stream_plain(struct tide__board_op *op);
/* op failed (board.c's release): its caller was told, so look reports
 * nothing more of it. */
void tide__stream_failed(struct tide__board_op *op);

/* For the other board collectives of a 2-rank communicator: whether peer
 * q sent its part of collective seq through the stream (a stream
 * collective where we called another).  *sig gets its signature; if
 * `consume`, this rank's stream skips those entries, so that the next
 * stream collectives pair up again. */
bool tide__stream_went_by(struct tide__board_comm *bc, int q, uint64_t seq, struct tide__frame *sig,
                          bool consume);
/* Check the peer's stream entries that are there against ours, and
 * report a mismatch late: at the other board collectives' gates and when
 * the program asks tide_comm_async_error. */
void tide__stream_check(struct tide__board_comm *bc, tide_comm *comm);
/* A fresh board's stream: no entries. */
void tide__stream_clear(struct board *b);

#endif
