/* match.h - pairing arriving frames with posted receives, per peer.
 *
 * Two FIFO lists per peer: receives posted and not yet matched, and
 * frames that arrived before their receive ("unexpected", buffered).
 * FIFO order is what makes same-tag point-to-point messages match in the
 * order they were sent.  Shared by every transport. */
#ifndef TIDE_MATCH_H
#define TIDE_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/msgq.h"
#include "engine/transport.h"

struct tide__unexp {
    struct tide__unexp *next;
    struct tide__frame hdr;
    uint8_t *data;       /* hdr.len bytes (NULL when 0) */
    bool complete;       /* every payload byte has arrived */
    tide__msg *claimed;  /* a receive matched it while it was arriving */
};

struct tide__match {
    struct tide__msgq posted;
    struct tide__unexp *ux_head, *ux_tail;
};

/* Find and unlink the oldest posted receive whose key matches f.  An
 * any-source receive's copy it takes claims the receive (transport.h);
 * copies claimed elsewhere are passed over. */
tide__msg *tide__match_take_posted(struct tide__match *mq, const struct tide__frame *f);

/* Find and unlink the oldest unexpected frame whose key matches m (and
 * claim m's any-source receive for it); NULL if none, or if m's receive
 * is claimed elsewhere. */
struct tide__unexp *tide__match_take_unexpected(struct tide__match *mq, tide__msg *m);

void tide__match_post(struct tide__match *mq, tide__msg *m);
void tide__match_add_unexpected(struct tide__match *mq, struct tide__unexp *ux);

/* Unlink ux from the unexpected list; true if it was there. */
bool tide__match_remove_unexpected(struct tide__match *mq, struct tide__unexp *ux);

/* Unlink m from the posted list; true if it was there. */
bool tide__match_remove_posted(struct tide__match *mq, tide__msg *m);

/* May frame f land in receive m?  0, TIDE_EMISMATCH (a different
 * operation) or TIDE_ETRUNCATE (too long).  Decided from the header
 * alone, before a byte of payload is written. */
int tide__match_check(const tide__msg *m, const struct tide__frame *f);

/* Copy a complete unexpected frame into receive m; sets m->got and
 * returns the status m completes with.  A frame without data (a
 * timing-only simulation) copies nothing. */
int tide__match_deliver(const struct tide__unexp *ux, tide__msg *m);

/* A buffered copy of frame f with its payload (len bytes at data, may be
 * NULL for 0), marked complete; NULL when out of memory. */
struct tide__unexp *tide__unexp_new(const struct tide__frame *f, const void *data);
void tide__unexp_free(struct tide__unexp *ux);

/* From this many bytes a payload has pages of its own (match.c), which a
 * transport may keep for the next frame of that length (rx.c, spares). */
#define TIDE_PAYLOAD_MAP_MIN ((size_t)1 << 20)

/* Frame f, about to arrive into payload: f->len bytes that
 * tide__payload_new gave, now the frame's.  NULL when out of memory
 * (payload is then still the caller's). */
struct tide__unexp *tide__unexp_into(const struct tide__frame *f, uint8_t *payload);

/* Take ux's payload back before freeing ux (NULL if it has none). */
uint8_t *tide__unexp_take_payload(struct tide__unexp *ux);

uint8_t *tide__payload_new(size_t len);
void tide__payload_free(uint8_t *p, size_t len);

/* Free every frame still in mq's unexpected list (transport teardown). */
void tide__match_free_unexpected(struct tide__match *mq);

#endif
