/* stage.h - collectives that read their peers' data where it lies: every
 * rank of the group maps every other's staging area (transport.h), so a
 * rank copies its part into a slot of its own area once and its peers
 * read it from there, instead of each byte crossing a ring of messages
 * or a socket.  Offered to a communicator whose members all map each
 * other's areas (comm->shared, engine/hosts.c): one host's ranks.
 *
 * The data never travels in messages.  Messages are notes of 8 bytes
 * that say "my part of round k is in my slot, at this offset" (or "I
 * have read yours"); they run through the transport like any other, so
 * deadlines, peer loss, withdraw and the flight recorder work as for
 * every collective.
 *
 * A slot is two halves: round k uses half k % 2, so a rank writes round
 * k + 1 while its peers may still read round k.  Before a half is
 * written again (round k + 2), every reader has said it is done with it:
 * in the all-to-all algorithms by its note for round k + 1, which it
 * sends only after reading round k; in the broadcast by an
 * acknowledgement.  A slot is given back only on success, after the last
 * such note: a rank that failed may have a peer still reading its slot,
 * and a slot reused then could hand that peer the next operation's
 * bytes.  (Failures leak a slot each; SHM_STAGE_SLOTS bounds the damage.)
 *
 * Algorithms (stage_allreduce.c, stage_allgather.c, stage_bcast.c) embed
 * struct tide__stage and drive its message sets. */
#ifndef TIDE_STAGE_H
#define TIDE_STAGE_H

#include "collectives/coll.h"

/* Message sets: the broadcast's root keeps two rounds in flight. */
#define STAGE_SETS 2

struct tide__stage {
    struct tide__coll c;
    int n, me;            /* group size, our rank in it */
    size_t half;          /* bytes of a half slot: one round's chunk at most */
    size_t chunk;         /* elements per round (tide__stage_plan_rounds) */
    long off;             /* our slot in our area, if took */
    bool took;            /* we hold a slot (a zeroed request holds none) */
    uint8_t *mine;        /* our slot */
    uint8_t **area;       /* [n] each rank's staging area, mapped here */
    size_t area_bytes;
    const uint8_t **slot; /* [n] each rank's slot, from its notes; NULL until one came */
    uint64_t note;        /* what our sends carry: our slot's offset */
    uint64_t *got;        /* [STAGE_SETS][n] the notes received */
    tide__msg *msgs;      /* [STAGE_SETS][2n]: sends to rank q at q, receives at n + q */
    int pending[STAGE_SETS];
    uint32_t round, nrounds;
};

/* Start: look up every rank's area, and take a slot of ours if take_slot
 * (readers that publish nothing, as the broadcast's, take none).  0, or
 * the request has failed. */
int tide__stage_begin(struct tide__stage *s, bool take_slot);

/* Post in set k: our note to rank q, or a receive of q's note. */
void tide__stage_send(struct tide__stage *s, int set, int q, uint32_t tag);
void tide__stage_recv(struct tide__stage *s, int set, int q, uint32_t tag);

/* Post to and from every other rank in set k. */
void tide__stage_exchange(struct tide__stage *s, int set, uint32_t tag);

/* From the algorithm's step: account for m.  Returns the set m belongs
 * to if that set has now completed, else -1 (or the request failed: a
 * note that makes no sense). */
int tide__stage_msg_done(struct tide__stage *s, tide__msg *m);

/* Half h of rank q's slot (ours for q == me). */
const uint8_t *tide__stage_half(const struct tide__stage *s, int q, int h);

/* Release hook: give our slot back unless the operation failed. */
void tide__stage_release(tide_req *req);

/* Rounds over the c.count elements, `chunk` of them each (at most half
 * a slot, and up to 4 ranks at most 512 KiB: stage.c says why; 0: as
 * much as that): sets chunk and nrounds.  And the elements of round k:
 * [*base, *base + return). */
void tide__stage_plan_rounds(struct tide__stage *s, size_t chunk);
size_t tide__stage_round_span(const struct tide__stage *s, uint32_t k, size_t *base);

/* Whether comm's staging halves hold an element (of up to 8 bytes) of
 * every rank's block: what the staged reduce-scatter needs to carry a
 * chunk of each block every round.  Real slots hold 2 MiB (thousands of
 * ranks); the simulator's may hold a few dozen bytes. */
bool tide__stage_fits_blocks(const tide_comm *comm);

/* The even split of `elems` elements among n ranks: rank q's share starts
 * at share_off(elems, n, q) (q == n: elems). */
size_t tide__stage_share_off(size_t elems, int n, int q);

/* The describe hook: "round k of K" (or the done exchange after it). */
void tide__stage_describe(const tide_req *req, char *buf, size_t len);

#endif
