/* shm_ring.c - see shm_ring.h. */
#include "transports/shm/shm_ring.h"

#include "engine/streaming_copy.h"

#include <string.h>

/* Copy n bytes between the ring at byte count pos and buf, in at most
 * two pieces (the second from the start of data after the wrap). */
static void copy_in(struct shm_ring *r, uint64_t pos, const uint8_t *buf, size_t n,
                    bool streaming)
{
    size_t at = (size_t)(pos % SHM_RING_BYTES), first = SHM_RING_BYTES - at;
    if (first > n)
        first = n;
    if (streaming && n >= SHM_RING_STREAM_MIN) {
        tide__copy_streaming(r->data + at, buf, first);
        tide__copy_streaming(r->data, buf + first, n - first);
        return;
    }
    memcpy(r->data + at, buf, first);
    memcpy(r->data, buf + first, n - first);
}

static void copy_out(struct shm_ring *r, uint64_t pos, uint8_t *buf, size_t n)
{
    size_t at = (size_t)(pos % SHM_RING_BYTES), first = SHM_RING_BYTES - at;
    if (first > n)
        first = n;
    memcpy(buf, r->data + at, first);
    memcpy(buf + first, r->data, n - first);
}

/* Room for the writer.  The reader writes tail in shared memory, so a
 * corrupt one can put it ahead of head or more than a ring behind: read
 * as no room (the send then waits out its deadline), never as more room
 * than the ring has, which had us copy megabytes past its end. */
static size_t room_of(uint64_t head, uint64_t tail)
{
    uint64_t used = head - tail;
    return used > SHM_RING_BYTES ? 0 : SHM_RING_BYTES - (size_t)used;
}

size_t shm_ring_write(struct shm_ring *r, const void *src, size_t len, bool streaming)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    size_t room = room_of(head, tail);
    size_t n = len < room ? len : room;
    if (n == 0)
        return 0;
    copy_in(r, head, src, n, streaming);
    atomic_store_explicit(&r->head, head + n, memory_order_release);
    return n;
}

size_t shm_ring_read(struct shm_ring *r, void *dst, size_t len)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    size_t used = head - tail > SHM_RING_BYTES ? SHM_RING_BYTES : (size_t)(head - tail);
    size_t n = len < used ? len : used;
    if (n == 0)
        return 0;
    if (dst)
        copy_out(r, tail, dst, n);
    atomic_store_explicit(&r->tail, tail + n, memory_order_release);
    return n;
}

size_t shm_ring_used(struct shm_ring *r)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    return (size_t)(atomic_load_explicit(&r->head, memory_order_acquire) - tail);
}

size_t shm_ring_wait_for_room(struct shm_ring *r)
{
    /* Loaded first: a writer blocked for long asks on every pass, and a
     * store would pull the reader's cache line over each time. */
    if (!atomic_load_explicit(&r->writer_waits, memory_order_relaxed))
        atomic_store_explicit(&r->writer_waits, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    return room_of(head, atomic_load_explicit(&r->tail, memory_order_acquire));
}

void shm_ring_want_ack(struct shm_ring *r)
{
    atomic_store_explicit(&r->writer_waits, 1, memory_order_relaxed);
}

int shm_ring_take_waiter(struct shm_ring *r)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&r->writer_waits, memory_order_relaxed))
        return 0;
    return atomic_exchange_explicit(&r->writer_waits, 0, memory_order_relaxed);
}
