/* transport.h - all that operations (point-to-point and collectives) see
 * of the network: post a send, post a receive, withdraw one, and learn of
 * completion through tide__msg_done().  Operations never touch sockets,
 * io_uring or threads; that is what lets a simulated network drive the
 * very same state machines.
 *
 * Contract:
 *   - Every posted message completes exactly once, through
 *     tide__msg_done(), never from inside the post call itself (so an
 *     operation is never re-entered while it is posting).
 *   - Until it completes, the transport may read (send) or write (receive)
 *     m->buf; afterwards it never touches m or its buffer again.
 *   - Messages from one rank to another are delivered in the order they
 *     were posted (a TCP stream's order).
 *   - A receive is matched to an arriving frame by (comm id, sequence,
 *     tag) from m->peer; frames that arrive before their receive is posted
 *     wait in a bounded pool of unexpected messages.
 *   - All calls happen on the reactor thread.
 */
#ifndef TIDE_TRANSPORT_H
#define TIDE_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide.h"
#include "engine/frame.h"

struct tide__ctx;
typedef struct tide_req tide_req;

/* TIDE_MSG_OP is the engine's own and never reaches a transport: a
 * request waiting on another request (engine/subreq.c).  TIDE_MSG_WATCH
 * waits for a condition on the board area (below): m->buf is a struct
 * tide__watch. */
enum tide__msg_dir { TIDE_MSG_SEND = 0, TIDE_MSG_RECV = 1, TIDE_MSG_OP = 2, TIDE_MSG_WATCH = 3 };

/* An any-source receive posts one receive to every peer, all sharing a
 * claim: the first frame matched to any of them (match.c, on the one
 * thread that matches for every transport) takes the claim, and from
 * then on the others are invisible to matching until the engine
 * withdraws them.  So exactly one frame lands in the shared buffer. */
struct tide__claim {
    struct tide__msg *winner; /* NULL until a frame matched one of them */
};

typedef struct tide__msg {
    struct tide__msg *next;     /* link in the transport's queues, then
                                 * in the engine's completion list */
    struct tide__msg *req_prev; /* link among the owning request's live */
    struct tide__msg *req_next; /* messages */
    tide_req *req;              /* the operation this message serves */
    int peer;                   /* world rank at the other end */
    uint8_t dir;                /* enum tide__msg_dir */
    uint8_t tstate;             /* transport-private progress state */
    struct tide__frame hdr;     /* send: the header to send (len is set
                                 * by the transport); receive: the key
                                 * and signature expected */
    void *buf;                  /* send: payload; receive: destination */
    size_t len;                 /* send: payload bytes; receive: capacity */
    size_t got;                 /* receive: payload bytes that arrived */
    int status;                 /* set at completion: 0 or TIDE_E* */
    uint8_t pull;               /* send: the receiver may copy the payload
                                 * straight out of buf (a transport may then
                                 * move it in one copy): set where the sender
                                 * does nothing else with the peer meanwhile,
                                 * as down a broadcast's tree */
    uint8_t completed;          /* engine: tide__msg_done has run */
    void *tpriv;                /* transport-private while posted */
    struct tide__claim *claim;  /* receive: an any-source receive's
                                 * shared claim, or NULL */
    uint64_t trace_t0;          /* engine, TIDE_TRACE: when it was posted */
} tide__msg;

struct tide__transport;

/* A watch: a message that completes once ready() says so, for
 * collectives that wait on words their peers store in shared memory
 * (collectives/board.c) rather than on frames.  The transport calls
 * ready() (reactor thread) in every poll and before every sleep, and
 * completes the message the first time it returns true.  While it is
 * false, *peer holds the world rank it waits for: the transport fails the
 * watch with TIDE_EPEER when that rank is lost, and the engine names it
 * in accounts of what an operation waits for. */
struct tide__watch {
    bool (*ready)(struct tide__watch *w, int *peer);
};

struct tide__transport_ops {
    const char *name;
    /* Reactor thread, once its ring exists: arm the first receives. */
    void (*start)(struct tide__transport *tp);
    /* Post m (dir says which).  Completion always follows. */
    void (*post)(struct tide__transport *tp, tide__msg *m);
    /* Take back a posted message because its operation failed with err.
     * Returns 0 when it is gone and no completion will follow, TIDE_EBUSY
     * when the kernel still holds its buffer: the completion follows
     * promptly.  (A send half-way onto the wire cannot be taken back
     * without breaking the stream; if err is TIDE_ETIMEDOUT the peer is
     * not draining it and the connection is given up.) */
    int (*withdraw)(struct tide__transport *tp, tide__msg *m, int err);
    /* Why peer was lost, or NULL while it is healthy. */
    const char *(*peer_reason)(struct tide__transport *tp, int peer);
    /* Fail everything with err and close all connections, promptly. */
    void (*abort)(struct tide__transport *tp, int err);
    /* A driver spins: move what already arrived without waiting on the
     * kernel ring (non-blocking reads).  Returns how many connections
     * made progress.  NULL when the transport has nothing to poll. */
    int (*poll)(struct tide__transport *tp);
    /* A driver is about to sleep in the ring, or leaves it to a thread
     * that sleeps there: make sure every arrival will complete a kernel
     * operation (and so wake the ring).  NULL: always so. */
    void (*arm)(struct tide__transport *tp);
    /* Messages and kernel operations still outstanding. */
    unsigned (*outstanding)(struct tide__transport *tp);
    /* Free it; only once outstanding() is 0 or after abort and drain. */
    void (*destroy)(struct tide__transport *tp);
    /* The name of the transport that carries messages to world rank
     * peer.  NULL: always this one's name. */
    const char *(*peer_transport)(struct tide__transport *tp, int peer);

    /* Staging memory, for collectives that read their peers' data where
     * it lies instead of sending it (collectives/stage.c).  Optional:
     * NULL, or stage_at returning NULL, means there is none.
     *
     * Every rank owns a staging area cut into slots; every other rank of
     * the job maps it (read-only), so a rank copies its part of a
     * collective into a slot of its own and its peers read it there.
     * Offered per host: among the ranks of a host only if every one of
     * them maps every other's (every pair through shared memory), which
     * all of them then know alike, since the choice of algorithm must be
     * the same on every rank of a communicator.  Peers' areas are mapped
     * read-only: writing there faults.
     *
     * stage_at: where world rank peer's area (ours for our own rank) is
     * mapped here, with the area's size and its slots' size, or NULL
     * (not offered, or peer is on another host).
     * stage_take: a free slot of our own area, as its offset (-1: all
     * are taken); stage_give frees it.  Reactor thread only. */
    uint8_t *(*stage_at)(struct tide__transport *tp, int peer, size_t *bytes, size_t *slot_bytes);
    long (*stage_take)(struct tide__transport *tp);
    void (*stage_give)(struct tide__transport *tp, long off);

    /* Boards (engine/board.h), for collectives that publish small
     * vectors once for every peer of the host to read in place.
     * Optional, like the staging area, and offered where it is (every
     * peer that has a staging area has a board area too).
     * board_at: world rank peer's area (ours for our own rank; peers'
     * mapped read-only), or NULL.  board_raise: we stored to a word of
     * our board that world ranks peers[0..n-1] may wait on: wake those of
     * them that sleep (after a full fence).  Watches (TIDE_MSG_WATCH)
     * are posted only where board_at is offered. */
    uint8_t *(*board_at)(struct tide__transport *tp, int peer);
    void (*board_raise)(struct tide__transport *tp, const int *peers, int n);

    /* Which host world rank peer runs on, as a number every rank of the
     * job computes alike for it (the lowest world rank on that host), so
     * that hierarchical collectives group ranks the same everywhere
     * (engine/hosts.c).  Optional: NULL means the transport cannot tell,
     * and every rank counts as a host of its own. */
    int (*host_of)(struct tide__transport *tp, int peer);
};

struct tide__transport {
    const struct tide__transport_ops *ops;
    struct tide__ctx *ctx;
};

/* ---- the registry (registry.c): the transports tide_init can open ----
 *
 * Choosing how ranks reach each other happens there and nowhere else: a
 * new transport is a new folder under transports/ plus one line in its
 * table.  (The simulated network is not in it: tide_sim_create makes a
 * whole job in one process, contexts and transport together.) */

/* Check what of cfg the transports read (cfg->transport names one they
 * know; their own settings are valid).  0, or TIDE_EINVAL with why. */
int tide__transport_check(const tide_config *cfg, char *why, size_t len);

/* Join the job described by ctx->cfg with the transport it names (or the
 * best one for "", auto), and set ctx->tp.  0 or a TIDE_E*, logged. */
int tide__transport_open(struct tide__ctx *ctx);

/* Called by a transport when m completes (status 0 or TIDE_E*). */
void tide__msg_done(struct tide__ctx *ctx, tide__msg *m, int status);

/* Called by a transport when a frame arrives that no posted receive
 * wants (header only; the payload is still to come), so the engine can
 * check it against its own collective of that sequence. */
void tide__frame_unexpected(struct tide__ctx *ctx, int peer, const struct tide__frame *f);

/* Called by a transport when a TIDE_KIND_POISON frame has fully arrived
 * (it never enters matching): a peer failed a collective. */
void tide__frame_poison(struct tide__ctx *ctx, int peer, const struct tide__frame *f,
                        const void *data, size_t len);

#endif
