/* test_fsdp_shard.c - FSDP's sharding arithmetic without sockets: shard
 * sizes and padding, distinct counts, the hybrid layout, which elements
 * of a shard are real, and bfloat16 narrowing and in-place widening. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fsdp/bf16.h"
#include "fsdp/shard.h"

static void shard_sizes_and_padding(void **state)
{
    static const struct { size_t numel; int group; size_t shard; } cases[] = {
        {4, 2, 2}, {5, 2, 3}, {1, 4, 1}, {1048576 + 1024, 3, 349867}, {7, 1, 7}, {0, 3, 0},
        {9, 4, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t s = tide__fsdp_shard_count(cases[i].numel, cases[i].group);
        assert_int_equal(s, cases[i].shard);
        /* padding is less than one element per rank */
        assert_true(s * (size_t)cases[i].group >= cases[i].numel);
        assert_true(s * (size_t)cases[i].group - cases[i].numel < (size_t)cases[i].group);
    }
}

static void real_elements_per_shard(void **state)
{
    /* 9 elements over 4 ranks, shards of 3: 3, 3, 3, 0 real */
    assert_int_equal(tide__fsdp_shard_real(9, 3, 0), 3);
    assert_int_equal(tide__fsdp_shard_real(9, 3, 2), 3);
    assert_int_equal(tide__fsdp_shard_real(9, 3, 3), 0);
    /* 5 over 2, shards of 3: 3 then 2 */
    assert_int_equal(tide__fsdp_shard_real(5, 3, 1), 2);
    /* a distinct-padded shard of 4 for 5 elements: 4 then 1 */
    assert_int_equal(tide__fsdp_shard_real(5, 4, 1), 1);
}

static void counts_are_distinct(void **state)
{
    size_t taken[8];
    int n = 0;
    /* eight equal layers get eight different counts, in order */
    for (int i = 0; i < 8; i++) {
        size_t c = tide__fsdp_distinct_count(100, taken, n);
        assert_int_equal(c, 100 + (size_t)i);
        taken[n++] = c;
    }
    assert_int_equal(tide__fsdp_distinct_count(50, taken, n), 50);
    assert_int_equal(tide__fsdp_distinct_count(103, taken, n), 108);
}

static void hybrid_layout(void **state)
{
    struct tide__fsdp_layout l;
    assert_int_equal(tide__fsdp_hybrid_layout(3, 4, 2, &l), 0);
    assert_int_equal(l.group_color, 1);
    assert_int_equal(l.replica_color, 1);
    assert_int_equal(l.groups, 2);
    assert_int_equal(tide__fsdp_hybrid_layout(2, 6, 3, &l), 0);
    assert_int_equal(l.group_color, 0);
    assert_int_equal(l.replica_color, 2);
    assert_int_equal(tide__fsdp_hybrid_layout(0, 4, 3, &l), -1); /* 4 is not a multiple of 3 */
    assert_int_equal(tide__fsdp_hybrid_layout(0, 4, 0, &l), -1);
    assert_int_equal(tide__fsdp_hybrid_layout(4, 4, 2, &l), -1);
}

static void bf16_rounds_to_nearest_even(void **state)
{
    assert_int_equal(tide__fsdp_to_bf16(1.0f), 0x3f80);
    assert_int_equal(tide__fsdp_to_bf16(-2.0f), 0xc000);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to even (1) */
    assert_int_equal(tide__fsdp_to_bf16(1.0f + 1.0f / 256), 0x3f80);
    /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even (1 + 2^-6) */
    assert_int_equal(tide__fsdp_to_bf16(1.0f + 3.0f / 256), 0x3f82);
    assert_int_equal(tide__fsdp_to_bf16(1.0f + 1.0f / 128 + 1.0f / 1024), 0x3f81);
}

/* Widening in place must read every value before overwriting it, for
 * odd and even lengths. */
static void bf16_widens_in_place(void **state)
{
    for (size_t n = 1; n <= 33; n++) {
        float src[33], buf[33];
        for (size_t i = 0; i < n; i++)
            src[i] = (float)i * 1.5f - 7.0f; /* exact in bfloat16 */
        tide__fsdp_narrow(src, tide__fsdp_bf16_area(buf, n), n);
        tide__fsdp_widen_in_place(buf, n);
        assert_memory_equal(buf, src, n * sizeof(float));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shard_sizes_and_padding),
        cmocka_unit_test(real_elements_per_shard),
        cmocka_unit_test(counts_are_distinct),
        cmocka_unit_test(hybrid_layout),
        cmocka_unit_test(bf16_rounds_to_nearest_even),
        cmocka_unit_test(bf16_widens_in_place),
    };
    return cmocka_run_group_tests_name("fsdp sharding arithmetic", tests, NULL, NULL);
}
