/* rx.h - one peer's receiving side in a byte-stream transport (TCP,
 * shared memory): where the frame arriving now goes (its posted receive,
 * a buffer in the unexpected pool, or nowhere), what completes when its
 * last byte is in, what a late receive does with a frame half arrived,
 * and what fails when the peer is lost.  The transports move the bytes
 * (socket or ring) into rx->dst and call these at the frame's edges;
 * this file keeps the rules they share in one place.  Reactor thread. */
#ifndef TIDE_RX_H
#define TIDE_RX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/match.h"

/* Memory held by unexpected frames, per transport: each frame's payload
 * and its bookkeeping (tide__rx_held), so that a flood of empty frames
 * counts too.  Past the limit a connection stops reading (it "parks"),
 * so a slow receiver slows its senders instead of growing without
 * bound; a frame larger than the whole limit parks until its receive is
 * posted, however empty the pool (issue 33: one header announcing 4 GiB
 * reserved 4 GiB). */
#define TIDE_RX_SPARES 4       /* of payloads from TIDE_PAYLOAD_MAP_MIN */
#define TIDE_RX_SMALL_SPARES 32 /* of smaller ones */

/* A peer with this many frames in the pool, and no receive from it
 * posted, waits for us with its next collective frame (rx.c, "A peer
 * running ahead"). */
#define TIDE_RX_AHEAD 16

struct tide__rx_pool {
    size_t bytes, limit;
    /* Payloads let go of, kept for the next frame of their length (rx.c,
     * "Spares"); not counted in bytes. */
    struct tide__rx_spare {
        uint8_t *p;
        size_t len;
    } spare[TIDE_RX_SPARES], small[TIDE_RX_SMALL_SPARES];
};

/* Transport teardown: give the spares back. */
void tide__rx_pool_free(struct tide__rx_pool *pool);

/* What one unexpected frame with header f holds in the pool. */
size_t tide__rx_held(const struct tide__frame *f);

struct tide__rx {
    struct tide__match mq;   /* posted receives and unexpected frames */
    bool in_frame;           /* hdr was parsed; its payload is arriving */
    struct tide__frame hdr;
    tide__msg *msg;          /* the receive the payload is for, or */
    struct tide__unexp *ux;  /* the unexpected buffer it fills, or neither: discard */
    unsigned nheld;          /* this peer's frames in the pool, poison aside */
    int status;              /* what msg completes with */
    uint8_t *dst;            /* where payload bytes go (NULL: discard) */
    size_t left;             /* payload bytes still to come */
};

enum tide__rx_routed {
    TIDE_RX_ROUTED = 0,  /* in_frame; dst says where the payload goes */
    TIDE_RX_PARK = 1,    /* the pool is full, or the peer runs ahead (rx.c): route
                            again once the pool has room or a receive is posted */
    TIDE_RX_NOMEM = 2,   /* no buffer for it: the peer must be given up */
};

/* rx->hdr was just parsed: decide where its payload goes.  force: past
 * the pool's limit (a dead peer's last frames). */
enum tide__rx_routed tide__rx_route(struct tide__rx *rx, struct tide__rx_pool *pool,
                                    struct tide__ctx *ctx, int peer, bool force);

/* ux, a frame of this peer's that no receive wanted, joins the pool and
 * the unexpected list (as route's do; TCP's sends to itself too). */
void tide__rx_hold(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__unexp *ux);

/* Every payload byte of the current frame is in: complete what it was
 * for.  Returns true when it freed room in the pool. */
bool tide__rx_frame_done(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__ctx *ctx,
                         int peer);

/* The receive m matches ux, the frame arriving now into the pool: take
 * it over, so that what arrived is copied once and the rest goes
 * straight into m's buffer.  False when its signature does not fit
 * (then ux->claimed = m and frame_done delivers the failure). */
bool tide__rx_adopt(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__unexp *ux,
                    tide__msg *m);

/* Post receive m.  Returns true when m is taken care of (completed from
 * the pool, failed because the peer is lost, or left to the frame now
 * arriving), with *freed set when pool room was freed; false when it was
 * queued, waiting for its frame.  can_adopt: the transport lets a late
 * receive take over the arriving frame's destination now. */
bool tide__rx_post(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__ctx *ctx,
                   tide__msg *m, bool lost, bool can_adopt, bool *freed);

/* Withdraw m.  Returns true when m is the receive the arriving payload
 * is being written into: the transport must stop writing into it
 * (rx->dst = NULL for a copy it makes itself) and say when it has;
 * otherwise m is gone (or was never ours) and nothing follows. */
bool tide__rx_withdraw(struct tide__rx *rx, tide__msg *m);

/* The peer is lost: fail the frame arriving and every posted receive. */
void tide__rx_lost(struct tide__rx *rx, struct tide__rx_pool *pool, struct tide__ctx *ctx);

/* Fail every posted receive with TIDE_EPEER (the frame arriving, if any,
 * is left to finish or fail on its own). */
void tide__rx_fail_posted(struct tide__rx *rx, struct tide__ctx *ctx);

/* Teardown: free what the pool holds for this peer. */
void tide__rx_free(struct tide__rx *rx);

#endif
