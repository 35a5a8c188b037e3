/* test_streaming_copy.c - engine/streaming_copy.c: the copy around
 * the caches moves exactly the bytes asked, whatever the alignment of
 * either end and however the length falls against 16-byte stores and
 * 64-byte lines, and touches nothing beside them.  (A board's slot is
 * aligned, a ring's place is not.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/streaming_copy.h"

enum { SPAN = 4096, GUARD = 128, FILL = 0x5a };

static void every_alignment_and_length(void **state)
{
    (void)state;
    static uint8_t src[SPAN + GUARD], dst[SPAN + 2 * GUARD];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 131 + 7);
    static const size_t lengths[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 200, 1000, 4033};
    for (size_t so = 0; so < 33; so++)
        for (size_t d_off = 0; d_off < 33; d_off++)
            for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
                size_t len = lengths[li];
                memset(dst, FILL, sizeof dst);
                uint8_t *to = dst + GUARD + d_off;
                tide__copy_streaming(to, src + so, len);
                assert_memory_equal(to, src + so, len);
                for (uint8_t *p = dst; p < to; p++)
                    assert_int_equal(*p, FILL);
                for (uint8_t *p = to + len; p < dst + sizeof dst; p++)
                    assert_int_equal(*p, FILL);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_alignment_and_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
