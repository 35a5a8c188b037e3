/* test_mux.c - transports/mux.c over any number of parts (issue 35): each
 * message goes to the part that serves its peer, calls about all
 * messages reach every part, and a mux that cannot be built still frees
 * the parts it was given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/context.h"
#include "transports/mux.h"

/* A part that only counts what reaches it. */
struct fake {
    struct tide__transport base;
    int index;
    int posts, starts, polls, destroyed;
    int last_peer;
};

static int destroyed_total;

static struct fake *fake_of(struct tide__transport *t)
{
    return container_of(t, struct fake, base);
}

static void fake_start(struct tide__transport *t)
{
    fake_of(t)->starts++;
}

static void fake_post(struct tide__transport *t, tide__msg *m)
{
    fake_of(t)->posts++;
    fake_of(t)->last_peer = m->peer;
}

static int fake_withdraw(struct tide__transport *t, tide__msg *m, int err)
{
    (void)t, (void)m, (void)err;
    return 0;
}

static const char *fake_reason(struct tide__transport *t, int peer)
{
    (void)t, (void)peer;
    return NULL;
}

static void fake_abort(struct tide__transport *t, int err)
{
    (void)t, (void)err;
}

static int fake_poll(struct tide__transport *t)
{
    fake_of(t)->polls++;
    return 1;
}

static unsigned fake_outstanding(struct tide__transport *t)
{
    return (unsigned)fake_of(t)->index;
}

static void fake_destroy(struct tide__transport *t)
{
    fake_of(t)->destroyed++;
    destroyed_total++;
}

static const char *const fake_names[] = {"part0", "part1", "part2", "part3"};

static const char *fake_transport(struct tide__transport *t, int peer)
{
    (void)peer;
    return fake_names[fake_of(t)->index];
}

static const struct tide__transport_ops fake_ops = {
    .name = "fake",
    .start = fake_start,
    .post = fake_post,
    .withdraw = fake_withdraw,
    .peer_reason = fake_reason,
    .abort = fake_abort,
    .poll = fake_poll,
    .outstanding = fake_outstanding,
    .destroy = fake_destroy,
    .peer_transport = fake_transport,
};

enum { RANKS = 7, PARTS = 4 };

static void make_parts(struct fake *f, struct tide__transport **parts, struct tide__ctx *ctx)
{
    memset(f, 0, PARTS * sizeof *f);
    for (int i = 0; i < PARTS; i++) {
        f[i].base.ops = &fake_ops;
        f[i].base.ctx = ctx;
        f[i].index = i;
        f[i].last_peer = -1;
        parts[i] = &f[i].base;
    }
}

/* All the mux reads of a context: its size. */
static struct tide__ctx *fake_ctx(void)
{
    struct tide__ctx *ctx = calloc(1, sizeof *ctx);
    assert_non_null(ctx);
    ctx->size = RANKS;
    return ctx;
}

static void routes_each_peer_to_its_part(void **state)
{
    (void)state;
    struct tide__ctx *ctx = fake_ctx();
    struct fake f[PARTS];
    struct tide__transport *parts[PARTS], *mux = NULL;
    make_parts(f, parts, ctx);
    const uint8_t route[RANKS] = {3, 0, 1, 2, 1, 3, 0};
    assert_int_equal(tide__mux_create(ctx, parts, PARTS, route, &mux), 0);

    mux->ops->start(mux);
    for (int p = 0; p < RANKS; p++) {
        tide__msg m = {.dir = TIDE_MSG_SEND, .peer = p};
        mux->ops->post(mux, &m);
        assert_int_equal(f[route[p]].last_peer, p);
        assert_string_equal(mux->ops->peer_transport(mux, p), fake_names[route[p]]);
    }
    int posts[PARTS] = {2, 2, 1, 2};
    for (int i = 0; i < PARTS; i++) {
        assert_int_equal(f[i].starts, 1);
        assert_int_equal(f[i].posts, posts[i]);
    }
    assert_int_equal(mux->ops->poll(mux), PARTS); /* every part polled once */
    assert_int_equal(mux->ops->outstanding(mux), 0 + 1 + 2 + 3);
    destroyed_total = 0;
    mux->ops->destroy(mux);
    assert_int_equal(destroyed_total, PARTS);
    free(ctx);
}

static void a_mux_that_cannot_be_built_frees_its_parts(void **state)
{
    (void)state;
    struct tide__ctx *ctx = fake_ctx();
    struct fake f[PARTS];
    struct tide__transport *parts[PARTS], *mux = NULL;

    const uint8_t bad_route[RANKS] = {0, 1, 2, 3, 4, 0, 0}; /* part 4 does not exist */
    make_parts(f, parts, ctx);
    destroyed_total = 0;
    assert_int_equal(tide__mux_create(ctx, parts, PARTS, bad_route, &mux), TIDE_EINVAL);
    assert_int_equal(destroyed_total, PARTS);
    assert_null(mux);

    const uint8_t route[RANKS] = {0};
    make_parts(f, parts, ctx);
    destroyed_total = 0;
    assert_int_equal(tide__mux_create(ctx, parts, 0, route, &mux), TIDE_EINVAL);
    assert_int_equal(destroyed_total, 0);
    free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes_each_peer_to_its_part),
        cmocka_unit_test(a_mux_that_cannot_be_built_frees_its_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
