/* streaming_copy.c - a copy whose stores go around the caches (x86's
 * non-temporal, "streaming" stores), for bytes written into shared
 * memory for a peer on another core: a board's part
 * (collectives/board.c, around_caches) and a pair's ring
 * (transports/shm/shm_ring.c); why and when there.
 *
 * An ordinary store to a line that a peer holds (it read the slot two
 * publications ago) must first take the line from it: one crossing
 * between cores a line, and a 64 KiB part is a thousand lines.  A
 * streaming store writes a whole line without asking for it, and the
 * peer's copy is simply dropped.  The price is that the line goes to
 * memory rather than staying in our cache, so a peer reads it from
 * there: worth it only where our writing, not its reading, is what the
 * collective waits for.
 *
 * Streaming stores are weakly ordered, even on x86: the closing fence
 * makes them visible before any store after it, the release store that
 * tells the peers the part is there among them. */
#include "engine/streaming_copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>

void tide__copy_streaming(void *dst, const void *src, size_t bytes)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    /* A streaming store wants a 16-byte aligned destination (a slot
     * is; a caller's buffer need not be): the bytes before go plainly. */
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > bytes)
        head = bytes;
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    /* A line at a time, so the write-combining buffer fills whole lines. */
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    for (; bytes >= 16; bytes -= 16, d += 16, s += 16)
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
    memcpy(d, s, bytes);
    _mm_sfence();
}

#else

/* Elsewhere an ordinary copy: the release store after it orders it. */
void tide__copy_streaming(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

#endif
