/* test_rx_pool.c - the unexpected pool of the byte-stream transports
 * (transports/rx.c) is bounded in memory, not only in payload bytes: a
 * peer that floods empty frames no receive wants is parked once their
 * bookkeeping reaches the limit, as one that floods payloads is (issue
 * 33: two million empty frames took 482 MiB past a 1 GiB limit that
 * counted none of them); and large payloads are kept for the next
 * frame of their length.  Point-to-point frames (sequence 0) never reach
 * the engine, so no context is needed here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transports/rx.h"

static struct tide__frame p2p_frame(uint32_t tag, uint64_t len)
{
    struct tide__frame f;
    memset(&f, 0, sizeof f);
    f.type = TIDE_FRAME_DATA;
    f.kind = TIDE_KIND_P2P;
    f.tag = tag;
    f.root = -1;
    f.len = len;
    return f;
}

/* A receive from peer 1 with tag, into len bytes at buf. */
static tide__msg p2p_recv(uint32_t tag, uint8_t *buf, size_t len)
{
    tide__msg m;
    memset(&m, 0, sizeof m);
    m.dir = TIDE_MSG_RECV;
    m.peer = 1;
    m.hdr = p2p_frame(tag, 0);
    m.buf = buf;
    m.len = len;
    return m;
}

/* Route frames of len bytes until the pool parks one; the count taken. */
static int fill(struct tide__rx *rx, struct tide__rx_pool *pool, uint64_t len, int most)
{
    for (int k = 0; k < most; k++) {
        rx->hdr = p2p_frame((uint32_t)k, len);
        enum tide__rx_routed r = tide__rx_route(rx, pool, NULL, 1, false);
        if (r == TIDE_RX_PARK)
            return k;
        assert_int_equal(r, TIDE_RX_ROUTED);
        assert_true(tide__rx_frame_done(rx, pool, NULL, 1) == false);
    }
    return most;
}

static void empty_frames_count(void **state)
{
    (void)state;
    struct tide__rx rx;
    memset(&rx, 0, sizeof rx);
    struct tide__rx_pool pool = {.limit = (size_t)1 << 20};
    int taken = fill(&rx, &pool, 0, 1 << 20);
    assert_true(taken < 1 << 20);
    assert_true(taken >= (int)(((size_t)1 << 20) / tide__rx_held(&rx.hdr)) - 1);
    assert_true(pool.bytes <= pool.limit);
    tide__rx_free(&rx);
}

static void payloads_count_with_their_bookkeeping(void **state)
{
    (void)state;
    struct tide__rx rx;
    memset(&rx, 0, sizeof rx);
    struct tide__rx_pool pool = {.limit = (size_t)1 << 20};
    int taken = fill(&rx, &pool, 4096, 1 << 20);
    assert_int_equal(taken, (int)(((size_t)1 << 20) / tide__rx_held(&rx.hdr)));
    assert_true(pool.bytes <= pool.limit);
    tide__rx_free(&rx);
}

/* An empty pool takes one frame past the room left (parking it could
 * stop the frames its receiver waits for first), and then nothing more. */
static void one_large_frame_then_parked(void **state)
{
    (void)state;
    struct tide__rx rx;
    memset(&rx, 0, sizeof rx);
    struct tide__rx_pool pool = {.limit = 8192};
    rx.hdr = p2p_frame(1, 6000);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_ROUTED);
    memset(rx.dst, 7, 6000);
    tide__rx_frame_done(&rx, &pool, NULL, 1);
    rx.hdr = p2p_frame(2, 4000);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_PARK);
    tide__rx_free(&rx);
}

/* A frame larger than the whole pool is never buffered, even in an empty
 * pool (issue 33: one header announcing 4 GiB reserved 4 GiB): it parks,
 * holding nothing, until its receive is posted, then goes straight into
 * that receive's buffer.  A dead peer's last frame (force) still drains. */
static void frame_larger_than_the_pool_waits_for_its_receive(void **state)
{
    (void)state;
    struct tide__rx rx;
    memset(&rx, 0, sizeof rx);
    struct tide__rx_pool pool = {.limit = 4096};
    rx.hdr = p2p_frame(5, (uint64_t)4 << 30);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_PARK);
    assert_int_equal(pool.bytes, 0);
    static uint8_t buf[8192];
    tide__msg m = p2p_recv(5, buf, sizeof buf);
    rx.hdr = p2p_frame(5, sizeof buf);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_PARK);
    tide__match_post(&rx.mq, &m);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_ROUTED);
    assert_ptr_equal(rx.msg, &m);
    assert_ptr_equal(rx.dst, buf);
    assert_int_equal(pool.bytes, 0);
    rx.hdr = p2p_frame(6, 8192);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, true), TIDE_RX_ROUTED);
    assert_true(pool.bytes > 4096);
    tide__rx_frame_done(&rx, &pool, NULL, 1);
    tide__rx_free(&rx);
}

/* Leave a spare of len bytes in pool: a frame half arrived before its
 * receive, which takes it over and lets its payload go.  Returns that
 * payload's address. */
static uint8_t *leave_spare(struct tide__rx *rx, struct tide__rx_pool *pool, uint32_t tag,
                            size_t len)
{
    static uint8_t buf[(size_t)2 << 20];
    size_t half = len / 2;
    assert_true(len <= sizeof buf);
    rx->hdr = p2p_frame(tag, len);
    assert_int_equal(tide__rx_route(rx, pool, NULL, 1, false), TIDE_RX_ROUTED);
    uint8_t *payload = rx->dst;
    memset(rx->dst, 0x5a, half);
    rx->dst += half;
    rx->left -= half;
    tide__msg m = p2p_recv(tag, buf, len);
    bool freed;
    assert_true(tide__rx_post(rx, pool, NULL, &m, false, true, &freed));
    assert_true(freed);                   /* taken over: its payload let go of */
    assert_ptr_equal(rx->dst, buf + half); /* the rest goes straight in */
    assert_int_equal(buf[0], 0x5a);
    assert_int_equal(buf[half - 1], 0x5a);
    assert_int_equal(pool->bytes, 0);
    rx->msg = NULL; /* as if the rest had come: nothing to complete here */
    rx->dst = NULL;
    rx->in_frame = false;
    return payload;
}

/* Spares (rx.c): a large frame's payload, let go of, is kept for the
 * next frame of its length, whose pages are then in memory already; one
 * of another length, or one when none is free, gets pages of its own.
 * (Told apart by what they hold: the kernel often maps fresh pages at
 * the address it just unmapped.) */
static void large_payloads_are_reused(void **state)
{
    (void)state;
    const size_t len = (size_t)2 << 20;
    struct tide__rx rx;
    memset(&rx, 0, sizeof rx);
    struct tide__rx_pool pool = {.limit = (size_t)1 << 30};
    leave_spare(&rx, &pool, 7, len);
    rx.hdr = p2p_frame(8, len + len / 2);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_ROUTED);
    assert_int_equal(rx.dst[0], 0); /* another length: fresh pages */
    rx.hdr = p2p_frame(9, len);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_ROUTED);
    assert_int_equal(rx.dst[0], 0x5a); /* the same length: the spare, as it was left */
    rx.hdr = p2p_frame(10, len);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_ROUTED);
    assert_int_equal(rx.dst[0], 0); /* no spare left */
    tide__rx_free(&rx);
    tide__rx_pool_free(&pool);
}

/* Payloads below TIDE_PAYLOAD_MAP_MIN come from malloc, and from 4 KiB
 * are kept too (rx.c: freeing each made glibc trim its heap and fault
 * it back in, call after call).  Told apart by address: while a spare
 * is held, no other allocation can be given its memory. */
static void mid_payloads_are_reused(void **state)
{
    (void)state;
    const size_t len = (size_t)128 << 10;
    struct tide__rx rx;
    memset(&rx, 0, sizeof rx);
    struct tide__rx_pool pool = {.limit = (size_t)1 << 30};
    uint8_t *kept = leave_spare(&rx, &pool, 11, len);
    rx.hdr = p2p_frame(12, len / 2);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_ROUTED);
    assert_ptr_not_equal(rx.dst, kept); /* another length: its own */
    rx.hdr = p2p_frame(13, len);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_ROUTED);
    assert_ptr_equal(rx.dst, kept); /* the same length: the spare */
    rx.hdr = p2p_frame(14, len);
    assert_int_equal(tide__rx_route(&rx, &pool, NULL, 1, false), TIDE_RX_ROUTED);
    assert_ptr_not_equal(rx.dst, kept); /* taken already */
    tide__rx_free(&rx);
    tide__rx_pool_free(&pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_frames_count),
        cmocka_unit_test(payloads_count_with_their_bookkeeping),
        cmocka_unit_test(one_large_frame_then_parked),
        cmocka_unit_test(frame_larger_than_the_pool_waits_for_its_receive),
        cmocka_unit_test(large_payloads_are_reused),
        cmocka_unit_test(mid_payloads_are_reused),
    };
    return cmocka_run_group_tests_name("unexpected pool", tests, NULL, NULL);
}
