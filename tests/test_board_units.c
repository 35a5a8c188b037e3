/* test_board_units.c - the board area's directory (engine/board.h):
 * a peer finds a communicator's board by scanning for its key, and the
 * scan must find exactly what was stored, never read past the area and
 * never take garbage for a key, whatever a corrupt or hostile peer left
 * in its directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/board.h"

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The directory alone: board_find reads nothing past it. */
static uint8_t *new_area(void)
{
    uint8_t *area = calloc(1, BOARD_DIR_BYTES);
    assert_non_null(area);
    return area;
}

static void layout_is_what_peers_assume(void **state)
{
    (void)state;
    assert_int_equal(offsetof(struct board, posted), 0);
    assert_int_equal(offsetof(struct board, reduced), 128);
    assert_int_equal(offsetof(struct board, done), 256);
    assert_int_equal(offsetof(struct board, head), 512);
    assert_int_equal(offsetof(struct board, data), BOARD_HEAD_BYTES);
    assert_int_equal(sizeof(struct board) % 1024, 0); /* flags stay on their own line pairs */
    uint8_t *area = (uint8_t *)0x100000;
    assert_ptr_equal((uint8_t *)board_at_index(area, BOARD_COUNT - 1) + BOARD_STRIDE,
                     area + BOARD_AREA_BYTES);
}

/* Keys stored where a claim puts them (first free from key's home) are
 * found there; keys never stored are not found. */
static void finds_what_was_claimed(void **state)
{
    (void)state;
    uint8_t *area = new_area();
    _Atomic uint64_t *dir = board_dir(area);
    uint64_t s = 88172645463325252ull, keys[BOARD_COUNT];
    int where[BOARD_COUNT];
    for (int k = 0; k < BOARD_COUNT; k++) {
        uint64_t key = next(&s) | 1;
        int i = (int)(key % BOARD_COUNT);
        while (atomic_load(&dir[i]))
            i = (i + 1) % BOARD_COUNT;
        atomic_store(&dir[i], key);
        keys[k] = key;
        where[k] = i;
    }
    for (int k = 0; k < BOARD_COUNT; k++)
        assert_int_equal(board_find(area, keys[k]), where[k]);
    for (int k = 0; k < 1000; k++) {
        uint64_t other = next(&s) | 1;
        bool stored = false;
        for (int j = 0; j < BOARD_COUNT; j++)
            stored |= keys[j] == other;
        if (!stored)
            assert_int_equal(board_find(area, other), -1);
    }
    free(area);
}

/* Random directories, as a corrupt peer might leave: whatever is found
 * is an entry holding exactly the key, inside the directory. */
static void garbage_never_matches(void **state)
{
    (void)state;
    uint8_t *area = new_area();
    _Atomic uint64_t *dir = board_dir(area);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < BOARD_COUNT; i++)
            atomic_store(&dir[i], next(&s) % 7 ? next(&s) : 0);
        for (int k = 0; k < 50; k++) {
            uint64_t key = next(&s) % 3 ? next(&s) : atomic_load(&dir[next(&s) % BOARD_COUNT]);
            int at = board_find(area, key);
            assert_true(at >= -1 && at < BOARD_COUNT);
            if (at >= 0)
                assert_true(atomic_load(&dir[at]) == key);
        }
    }
    free(area);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layout_is_what_peers_assume),
        cmocka_unit_test(finds_what_was_claimed),
        cmocka_unit_test(garbage_never_matches),
    };
    return cmocka_run_group_tests_name("board directory", tests, NULL, NULL);
}
