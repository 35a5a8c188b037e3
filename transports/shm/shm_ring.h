/* shm_ring.h - a single-producer single-consumer byte ring in shared
 * memory: one rank writes frames into it (a header, then the payload,
 * as on a TCP stream), one other rank reads them out.
 *
 * head and tail count bytes since the start and never wrap; the data
 * offset is count % SHM_RING_BYTES.  The writer owns head, the reader
 * tail; each publishes with a release store and reads the other's with
 * an acquire load, so bytes are visible before the count that covers
 * them.  They sit on separate cache lines: a writer spinning on tail
 * does not steal the line the reader writes head on.
 *
 * acked counts the frames whose payload the reader copied straight out
 * of the writer's memory (single-copy frames, shm_peer.h): the writer
 * may reuse those buffers.
 *
 * writer_waits is the writer's "the ring was full (or I wait for acked),
 * tell me when you move": the reader clears it and rings the writer's
 * doorbell
 * (shm_peer.h) once it has consumed.  Both sides store their flag, then
 * fence, then look at the other's counter (Dekker), so one of them
 * always sees the other and no wake-up is lost. */
#ifndef TIDE_SHM_RING_H
#define TIDE_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_RING_BYTES ((size_t)256 * 1024)
#define SHM_CACHE_LINE 64

struct shm_ring {
    _Atomic uint64_t head; /* bytes ever written (writer) */
    _Atomic uint32_t writer_gone; /* the writer gave the pair up (shm_peer.h) */
    uint8_t pad0[SHM_CACHE_LINE - sizeof(uint64_t) - sizeof(uint32_t)];
    _Atomic uint64_t tail;  /* bytes ever consumed (reader) */
    _Atomic uint64_t acked; /* single-copy frames read (reader) */
    _Atomic uint32_t writer_waits;
    uint8_t pad1[4096 - SHM_CACHE_LINE - 2 * sizeof(uint64_t) - sizeof(uint32_t)];
    uint8_t data[SHM_RING_BYTES];
};

/* A write of this many bytes or more may go in with streaming stores. */
#define SHM_RING_STREAM_MIN ((size_t)16 * 1024)

/* Copy up to len bytes of src in (as many as fit); returns how many.
 * streaming: if they are SHM_RING_STREAM_MIN or more, with stores that go
 * around the caches (engine/streaming_copy.c; shm_peer.h says when).
 * A tail ahead of head or more than a ring behind (a corrupt reader)
 * reads as a full ring: never past the data. */
size_t shm_ring_write(struct shm_ring *r, const void *src, size_t len, bool streaming);

/* Copy up to len bytes out into dst (NULL: skip them); returns how many.
 * A head more than a ring ahead (a corrupt writer) reads as a full ring:
 * never past the data. */
size_t shm_ring_read(struct shm_ring *r, void *dst, size_t len);

/* Bytes waiting to be read. */
size_t shm_ring_used(struct shm_ring *r);

/* Writer: the ring is full; ask to be told when there is room.  Returns
 * the room there is after asking (nonzero: write on, nobody will tell). */
size_t shm_ring_wait_for_room(struct shm_ring *r);

/* Reader, after reading: whether the writer asked to be told (clears it). */
int shm_ring_take_waiter(struct shm_ring *r);

/* Writer, about to sleep while single-copy frames wait for the reader:
 * ask to be told when it acks one. */
void shm_ring_want_ack(struct shm_ring *r);

#endif
