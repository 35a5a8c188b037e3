/* test_shm_ring.c - the shared-memory transport's byte ring
 * (transports/shm/shm_ring.c) without processes: wrap-around, partial
 * writes when full, the writer's "tell me when there is room" flag, and
 * a writer and a reader on two threads streaming 64 MiB in random
 * pieces, every byte checked (what a pair of ranks does to it). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "transports/shm/shm_ring.h"

static struct shm_ring *new_ring(void)
{
    struct shm_ring *r = aligned_alloc(4096, sizeof *r);
    assert_non_null(r);
    memset(r, 0, sizeof *r);
    return r;
}

static uint8_t pattern(uint64_t i)
{
    return (uint8_t)(i * 131 + (i >> 9) * 7 + 3);
}

/* Writes that fill the ring stop at its end; reads give the bytes back
 * in order across the wrap, written plainly or with streaming stores
 * (the long write starts unaligned and wraps). */
static void wrap_case(bool streaming)
{
    struct shm_ring *r = new_ring();
    static uint8_t in[SHM_RING_BYTES + 1000], out[SHM_RING_BYTES + 100];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = pattern(i);
    assert_int_equal(shm_ring_write(r, in, 1000, false), 1000);
    assert_int_equal(shm_ring_read(r, out, 600), 600);
    assert_memory_equal(out, in, 600);
    /* 400 in the ring: room for SHM_RING_BYTES - 400, which wraps. */
    assert_int_equal(shm_ring_write(r, in + 1000, SHM_RING_BYTES, streaming), SHM_RING_BYTES - 400);
    assert_int_equal(shm_ring_used(r), SHM_RING_BYTES);
    assert_int_equal(shm_ring_write(r, in, 1, false), 0);
    assert_int_equal(shm_ring_read(r, out, sizeof out), SHM_RING_BYTES);
    assert_memory_equal(out, in + 600, SHM_RING_BYTES);
    assert_int_equal(shm_ring_read(r, out, 1), 0);
    /* NULL skips bytes. */
    assert_int_equal(shm_ring_write(r, in, 10, false), 10);
    assert_int_equal(shm_ring_read(r, NULL, 4), 4);
    assert_int_equal(shm_ring_read(r, out, 10), 6);
    assert_memory_equal(out, in + 4, 6);
    free(r);
}

static void full_ring_and_wrap(void **state)
{
    (void)state;
    wrap_case(false);
    wrap_case(true);
}

/* A writer that finds the ring full asks to be told; the reader sees the
 * request once, after it read. */
static void waiting_writer_is_told_once(void **state)
{
    struct shm_ring *r = new_ring();
    static uint8_t buf[SHM_RING_BYTES];
    assert_int_equal(shm_ring_write(r, buf, sizeof buf, false), sizeof buf);
    assert_int_equal(shm_ring_take_waiter(r), 0);
    assert_int_equal(shm_ring_wait_for_room(r), 0);
    assert_int_equal(shm_ring_read(r, NULL, 100), 100);
    assert_int_equal(shm_ring_take_waiter(r), 1);
    assert_int_equal(shm_ring_take_waiter(r), 0);
    /* Asking when there is room already says so: nobody will tell. */
    assert_int_equal(shm_ring_wait_for_room(r), 100);
    free(r);
}

struct stream {
    struct shm_ring *r;
    uint64_t total;
    unsigned seed;
    uint64_t bad; /* first wrong byte + 1, or 0 */
};

/* The reader owns tail, in memory the peer can write: a tail ahead of
 * head, or more than a ring behind it, gives the writer no room at all
 * (before: 3.9 MB copied into the 256 KiB ring, over what follows it). */
static void corrupt_tail_gives_no_room(void **state)
{
    (void)state;
    static const int64_t shifts[] = {1, 4096, -(int64_t)SHM_RING_BYTES - 1,
                                     -(int64_t)SHM_RING_BYTES * 15, INT64_MIN / 2};
    size_t big = 4u << 20;
    uint8_t *src = malloc(big), *dst = malloc(big);
    assert_non_null(src);
    assert_non_null(dst);
    memset(src, 0x5a, big);
    for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
        struct shm_ring *r = new_ring();
        assert_int_equal(shm_ring_write(r, src, 1000, false), 1000);
        uint64_t head = atomic_load(&r->head);
        atomic_store(&r->tail, head + (uint64_t)shifts[i]);
        assert_int_equal(shm_ring_write(r, src, big, false), 0);
        assert_int_equal(shm_ring_wait_for_room(r), 0);
        assert_int_equal(atomic_load(&r->head), head);
        assert_true(shm_ring_read(r, dst, big) <= SHM_RING_BYTES);
        free(r);
    }
    free(src);
    free(dst);
}

static void *writer(void *p)
{
    struct stream *s = p;
    static uint8_t chunk[3 * SHM_RING_BYTES];
    uint64_t at = 0;
    unsigned seed = s->seed;
    while (at < s->total) {
        size_t want = (size_t)(rand_r(&seed) % sizeof chunk) + 1;
        if (want > s->total - at)
            want = (size_t)(s->total - at);
        for (size_t i = 0; i < want; i++)
            chunk[i] = pattern(at + i);
        for (size_t done = 0; done < want;)
            done += shm_ring_write(s->r, chunk + done, want - done, want & 1); /* both kinds */
        at += want;
    }
    return NULL;
}

static void *reader(void *p)
{
    struct stream *s = p;
    static uint8_t chunk[SHM_RING_BYTES / 3];
    uint64_t at = 0;
    unsigned seed = s->seed * 7 + 1;
    while (at < s->total) {
        size_t want = (size_t)(rand_r(&seed) % sizeof chunk) + 1;
        size_t n = shm_ring_read(s->r, chunk, want);
        for (size_t i = 0; i < n && !s->bad; i++)
            if (chunk[i] != pattern(at + i))
                s->bad = at + i + 1;
        at += n;
    }
    return NULL;
}

static void two_threads_stream_64_mib(void **state)
{
    struct stream s = {.r = new_ring(), .total = (uint64_t)64 << 20, .seed = 12345};
    pthread_t w, rd;
    assert_int_equal(pthread_create(&w, NULL, writer, &s), 0);
    assert_int_equal(pthread_create(&rd, NULL, reader, &s), 0);
    pthread_join(w, NULL);
    pthread_join(rd, NULL);
    if (s.bad)
        fail_msg("byte %llu arrived wrong", (unsigned long long)(s.bad - 1));
    assert_int_equal(shm_ring_used(s.r), 0);
    free(s.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_ring_and_wrap),
        cmocka_unit_test(waiting_writer_is_told_once),
        cmocka_unit_test(corrupt_tail_gives_no_room),
        cmocka_unit_test(two_threads_stream_64_mib),
    };
    return cmocka_run_group_tests_name("shm ring", tests, NULL, NULL);
}
