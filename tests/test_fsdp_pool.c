/* test_fsdp_pool.c - FSDP's buffer pool without sockets: buffers of one
 * capacity class are reused, the pool never holds more than the room it
 * is given, and it keeps at most its slot count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fsdp/pool.h"

static void classes_are_coarse_but_close(void **state)
{
    static const struct { size_t bytes, cap; } cases[] = {
        {1, 64}, {64, 64}, {3720, 3776}, {4198400, 4325376}, {4198512, 4325376},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t cap = tide__fsdp_pool_capacity(cases[i].bytes);
        assert_int_equal(cap, cases[i].cap);
        assert_true(cap - cases[i].bytes <= cases[i].bytes / 32 + 64);
    }
}

static void a_given_buffer_is_taken_again(void **state)
{
    struct tide__fsdp_pool p = {0};
    void *a = tide__fsdp_pool_take(&p, 4198400, SIZE_MAX);
    assert_non_null(a);
    tide__fsdp_pool_give(&p, a, 4198400, SIZE_MAX);
    assert_int_equal(p.n, 1);
    /* a unit a few elements larger (distinct padding) is in the same class */
    assert_ptr_equal(tide__fsdp_pool_take(&p, 4198512, SIZE_MAX), a);
    assert_int_equal(p.n, 0);
    assert_int_equal(p.bytes, 0);
    tide__fsdp_pool_give(&p, a, 4198512, SIZE_MAX);
    tide__fsdp_pool_drain(&p);
    assert_int_equal(p.n, 0);
}

static void room_bounds_what_is_kept(void **state)
{
    struct tide__fsdp_pool p = {0};
    size_t cap = tide__fsdp_pool_capacity(1000);
    void *a = tide__fsdp_pool_take(&p, 1000, SIZE_MAX), *b = tide__fsdp_pool_take(&p, 1000, SIZE_MAX);
    tide__fsdp_pool_give(&p, a, 1000, cap - 1); /* no room: freed */
    assert_int_equal(p.n, 0);
    tide__fsdp_pool_give(&p, b, 1000, cap);
    assert_int_equal(p.bytes, cap);
    /* a miss of another class evicts what would not fit beside it */
    void *c = tide__fsdp_pool_take(&p, 5000, tide__fsdp_pool_capacity(5000));
    assert_int_equal(p.n, 0);
    tide__fsdp_pool_give(&p, c, 5000, SIZE_MAX);
    tide__fsdp_pool_drain(&p);
}

static void slots_are_bounded(void **state)
{
    struct tide__fsdp_pool p = {0};
    for (int i = 0; i < TIDE__FSDP_POOL_SLOTS + 3; i++)
        tide__fsdp_pool_give(&p, tide__fsdp_pool_take(&p, 100 + 100 * (size_t)i, SIZE_MAX),
                             100 + 100 * (size_t)i, SIZE_MAX);
    assert_int_equal(p.n, TIDE__FSDP_POOL_SLOTS);
    tide__fsdp_pool_drain(&p);
    assert_int_equal(p.bytes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(classes_are_coarse_but_close),
        cmocka_unit_test(a_given_buffer_is_taken_again),
        cmocka_unit_test(room_bounds_what_is_kept),
        cmocka_unit_test(slots_are_bounded),
    };
    return cmocka_run_group_tests_name("fsdp buffer pool", tests, NULL, NULL);
}
