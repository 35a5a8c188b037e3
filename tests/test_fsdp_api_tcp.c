/* test_fsdp_api_tcp.c - the FSDP API on real loopback rank processes:
 * shard gradients averaged as the seed's tests expect (full_shard,
 * hybrid_shard across groups, an uneven unit), misuse answered with clear
 * errors (unknown unit, release without acquire, double acquire, a second
 * prefetch, sync before backward, optimizer before sync, a hybrid group
 * that does not divide the world), ranks acquiring in different orders
 * failing with TIDE_EMISMATCH, and the byte budget: never exceeded,
 * prefetches dropped to make room, TIDE_ENOMEM when held units fill it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fsdp/tide_fsdp.h"
#include "tests/harness.h"

#define EXPECT_RC(call, want)                                                                \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        EXPECT(rc_ == (want), "%s returned %s, want %s (%s)", #call, tide_err_name(rc_),     \
               tide_err_name(want), tide_fsdp_message(f));                                   \
    } while (0)

static tide_fsdp *make(tide_comm *comm, tide_fsdp_strategy s, int group, int prefetch,
                       size_t budget)
{
    tide_fsdp_config cfg;
    tide_fsdp *f = NULL;
    char why[256] = "";
    tide_fsdp_config_default(&cfg);
    cfg.strategy = s;
    cfg.hybrid_group_size = group;
    cfg.forward_prefetch = prefetch;
    cfg.backward_prefetch = prefetch > 0;
    cfg.budget_bytes = budget;
    int rc = tide_fsdp_create(comm, &cfg, &f, why);
    EXPECT(rc == 0, "tide_fsdp_create: %s", why);
    return f;
}

/* One unit of `numel` elements set to `values`, one forward, then a
 * backward that adds `grad` and syncs; returns the context. */
static tide_fsdp *one_step(tide_comm *comm, tide_fsdp_strategy s, int group, size_t numel,
                           const float *values, const float *grad)
{
    tide_fsdp *f = make(comm, s, group, 1, 0);
    float *w, *g;
    int u;
    EXPECT_OK(tide_fsdp_add_unit(f, &numel, 1, &u));
    EXPECT_OK(tide_fsdp_set_params(f, u, values, -1));
    EXPECT_OK(tide_fsdp_begin_forward(f));
    EXPECT_OK(tide_fsdp_acquire(f, u, &w));
    for (size_t i = 0; i < numel; i++)
        EXPECT(w[i] == values[i], "gathered element %zu: %g, want %g", i, w[i], values[i]);
    EXPECT_OK(tide_fsdp_release(f, u));
    EXPECT_OK(tide_fsdp_begin_backward(f));
    EXPECT_OK(tide_fsdp_acquire(f, u, &w));
    EXPECT_OK(tide_fsdp_grad(f, u, &g));
    for (size_t i = 0; i < numel; i++)
        g[i] += grad[i];
    EXPECT_OK(tide_fsdp_grad_ready(f, u));
    EXPECT_OK(tide_fsdp_release(f, u));
    EXPECT_OK(tide_fsdp_sync_gradients(f));
    return f;
}

static void expect_shard_grad(tide_fsdp *f, const float *want, size_t count)
{
    float *g;
    size_t n, off;
    EXPECT_OK(tide_fsdp_shard(f, 0, NULL, &g, &n, &off));
    EXPECT(n == count, "shard of %zu elements, want %zu", n, count);
    for (size_t i = 0; i < count; i++)
        EXPECT(g[i] == want[off + i], "shard grad [%zu] (element %zu): %g, want %g", i, off + i,
               g[i], want[off + i]);
}

/* The seed's 2-rank test: both ranks [1,2,3,4] -> rank 0 [1,2], rank 1 [3,4]. */
static void full_shard_grads_body(tide_comm *comm, void *arg)
{
    const float v[4] = {10, 20, 30, 40}, grad[4] = {1, 2, 3, 4};
    tide_fsdp *f = one_step(comm, TIDE_FSDP_FULL_SHARD, 1, 4, v, grad);
    expect_shard_grad(f, grad, 2);
    tide_fsdp_destroy(f);
}

/* 5 elements on 2 ranks: shards of 3, the last one padded with a zero
 * that stays zero through SGD. */
static void uneven_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    const float v[5] = {1, 2, 3, 4, 5};
    const float grad[5] = {(float)r, 1, 2, 3, 4}, want[6] = {0.5f, 1, 2, 3, 4, 0};
    tide_fsdp *f = one_step(comm, TIDE_FSDP_FULL_SHARD, 1, 5, v, grad);
    float out[5];
    expect_shard_grad(f, want, 3);
    EXPECT_OK(tide_fsdp_sgd(f, 1.0f));
    EXPECT_OK(tide_fsdp_get_params(f, 0, out));
    for (int i = 0; i < 5; i++)
        EXPECT(out[i] == v[i] - want[i], "after SGD [%d]: %g, want %g", i, out[i], v[i] - want[i]);
    float *p;
    size_t n, off;
    EXPECT_OK(tide_fsdp_shard(f, 0, &p, NULL, &n, &off));
    EXPECT(r == 0 || p[2] == 0.0f, "padding became %g", p[2]);
    tide_fsdp_destroy(f);
}

/* The seed's inter-node averaging: groups {0,1} and {2,3}; node 0 grads
 * [2,4,6,8], node 1 [10,20,30,40] -> position 0 [6,12], position 1 [18,24]. */
static void hybrid_grads_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    const float v[4] = {0, 0, 0, 0}, a[4] = {2, 4, 6, 8}, b[4] = {10, 20, 30, 40};
    const float want[4] = {6, 12, 18, 24};
    tide_fsdp *f = one_step(comm, TIDE_FSDP_HYBRID_SHARD, 2, 4, v, r < 2 ? a : b);
    expect_shard_grad(f, want, 2);
    tide_fsdp_destroy(f);
}

static void run_on(int n, harness_body body)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.timeout_s = 10;
    assert_int_equal(harness_run(n, &o, body, NULL), 0);
}

static void full_shard_grads(void **state)
{
    run_on(2, full_shard_grads_body);
}

static void uneven_padding(void **state)
{
    run_on(2, uneven_body);
}

static void hybrid_averages_across_groups(void **state)
{
    run_on(4, hybrid_grads_body);
}

static tide_fsdp *two_units(tide_comm *comm, tide_fsdp_strategy s, int prefetch, size_t budget,
                            size_t numel, int units)
{
    tide_fsdp *f = make(comm, s, 1, prefetch, budget);
    for (int i = 0, u; i < units; i++)
        EXPECT_OK(tide_fsdp_add_unit(f, &numel, 1, &u));
    return f;
}

static void misuse_forward(tide_fsdp *f)
{
    float *w;
    EXPECT_RC(tide_fsdp_sync_gradients(f), TIDE_EINVAL); /* before any backward */
    EXPECT(strstr(tide_fsdp_message(f), "sync_gradients") != NULL, "message: %s",
           tide_fsdp_message(f));
    EXPECT_RC(tide_fsdp_acquire(f, 0, &w), TIDE_EINVAL); /* outside a pass */
    EXPECT_RC(tide_fsdp_sgd(f, 0.1f), TIDE_EINVAL);      /* before sync */
    EXPECT_OK(tide_fsdp_prefetch(f, 1));
    EXPECT_RC(tide_fsdp_prefetch(f, 1), TIDE_EBUSY); /* a second prefetch, not consumed */
    EXPECT_OK(tide_fsdp_begin_forward(f));
    EXPECT_RC(tide_fsdp_acquire(f, 7, &w), TIDE_EINVAL);
    EXPECT(strstr(tide_fsdp_message(f), "unknown unit 7") != NULL, "message: %s",
           tide_fsdp_message(f));
    EXPECT_RC(tide_fsdp_acquire(f, -1, &w), TIDE_EINVAL);
    EXPECT_RC(tide_fsdp_release(f, 0), TIDE_EINVAL); /* never acquired */
    EXPECT(strstr(tide_fsdp_message(f), "not acquired") != NULL, "message: %s",
           tide_fsdp_message(f));
    EXPECT_OK(tide_fsdp_acquire(f, 0, &w));
    EXPECT_RC(tide_fsdp_acquire(f, 0, &w), TIDE_EBUSY);
    EXPECT_RC(tide_fsdp_begin_backward(f), TIDE_EBUSY); /* 0 still held */
    EXPECT_OK(tide_fsdp_release(f, 0));
    EXPECT_RC(tide_fsdp_release(f, 0), TIDE_EINVAL); /* twice */
    EXPECT_OK(tide_fsdp_acquire(f, 1, &w));
    EXPECT_OK(tide_fsdp_release(f, 1));
    EXPECT_RC(tide_fsdp_grad(f, 1, &w), TIDE_EINVAL); /* not in backward */
    size_t one = 4;
    int u;
    EXPECT_RC(tide_fsdp_add_unit(f, &one, 1, &u), TIDE_EINVAL); /* after the first forward */
}

static void misuse_body(tide_comm *comm, void *arg)
{
    tide_fsdp_config cfg;
    tide_fsdp *f = NULL;
    char why[256] = "";
    float *w, *g;
    tide_fsdp_config_default(&cfg);
    cfg.strategy = TIDE_FSDP_HYBRID_SHARD;
    cfg.hybrid_group_size = 3;
    EXPECT(tide_fsdp_create(comm, &cfg, &f, why) == TIDE_EINVAL && f == NULL, "group 3 of 2");
    EXPECT(strstr(why, "not a multiple") != NULL, "message: %s", why);

    f = two_units(comm, TIDE_FSDP_FULL_SHARD, 0, 0, 8, 2);
    misuse_forward(f);
    EXPECT_OK(tide_fsdp_begin_backward(f));
    EXPECT_RC(tide_fsdp_grad_ready(f, 1), TIDE_EINVAL); /* no gradient taken */
    EXPECT_OK(tide_fsdp_acquire(f, 1, &w));
    EXPECT_OK(tide_fsdp_grad(f, 1, &g));
    EXPECT_OK(tide_fsdp_grad_ready(f, 1));
    EXPECT_RC(tide_fsdp_grad_ready(f, 1), TIDE_EINVAL); /* twice */
    EXPECT_RC(tide_fsdp_grad(f, 1, &g), TIDE_EINVAL);   /* after ready */
    EXPECT_RC(tide_fsdp_sync_gradients(f), TIDE_EBUSY); /* 1 still held */
    EXPECT_OK(tide_fsdp_release(f, 1));
    EXPECT_OK(tide_fsdp_sync_gradients(f));
    EXPECT_RC(tide_fsdp_sync_gradients(f), TIDE_EINVAL); /* nothing new */
    EXPECT_OK(tide_fsdp_sgd(f, 0.1f));
    tide_fsdp_destroy(f);

    f = two_units(comm, TIDE_FSDP_NO_SHARD, 1, 0, 8, 1);
    EXPECT_RC(tide_fsdp_prefetch(f, 0), TIDE_EINVAL); /* no_shard gathers nothing */
    tide_fsdp_destroy(f);
}

/* With no prefetch the acquisition order is the collective order: rank 0
 * asks for unit 0 and rank 1 for unit 1, same sizes, distinct counts. */
static void mismatch_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm);
    float *w;
    tide_fsdp *f = two_units(comm, TIDE_FSDP_FULL_SHARD, 0, 0, 64, 2);
    EXPECT_OK(tide_fsdp_begin_forward(f));
    EXPECT_RC(tide_fsdp_acquire(f, r == 0 ? 0 : 1, &w), TIDE_EMISMATCH);
    EXPECT(strstr(tide_fsdp_message(f), "all-gather") != NULL, "message: %s",
           tide_fsdp_message(f));
    tide_fsdp_destroy(f);
}

/* Units of ~400 B under a 900 B budget: two fit.  Acquiring unit 0
 * prefetches unit 1; acquiring unit 3 out of plan order then drops that
 * prefetch; holding 0 and 3 leaves no room for 1. */
static void budget_body(tide_comm *comm, void *arg)
{
    tide_fsdp_stats st;
    float *w;
    tide_fsdp *f = two_units(comm, TIDE_FSDP_FULL_SHARD, 3, 900, 100, 4);
    EXPECT_OK(tide_fsdp_begin_forward(f));
    EXPECT_OK(tide_fsdp_acquire(f, 0, &w));
    EXPECT_OK(tide_fsdp_acquire(f, 3, &w));
    EXPECT_RC(tide_fsdp_acquire(f, 1, &w), TIDE_ENOMEM);
    tide_fsdp_stats_get(f, &st);
    EXPECT(st.dropped_prefetches == 1, "dropped %llu prefetches, want 1",
           (unsigned long long)st.dropped_prefetches);
    EXPECT(st.peak_unsharded_bytes <= 900 && st.peak_unsharded_bytes >= 800, "peak %zu",
           st.peak_unsharded_bytes);
    tide_fsdp_destroy(f);

    f = two_units(comm, TIDE_FSDP_FULL_SHARD, 1, 300, 100, 1); /* smaller than one unit */
    EXPECT_OK(tide_fsdp_begin_forward(f));
    EXPECT_RC(tide_fsdp_acquire(f, 0, &w), TIDE_ENOMEM);
    EXPECT(strstr(tide_fsdp_message(f), "budget") != NULL, "message: %s", tide_fsdp_message(f));
    tide_fsdp_destroy(f);
}

static void misuse_errors(void **state)
{
    run_on(2, misuse_body);
}

static void different_orders_mismatch(void **state)
{
    run_on(2, mismatch_body);
}

static void budget_is_a_bound(void **state)
{
    run_on(2, budget_body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_shard_grads),
        cmocka_unit_test(uneven_padding),
        cmocka_unit_test(hybrid_averages_across_groups),
        cmocka_unit_test(misuse_errors),
        cmocka_unit_test(different_orders_mismatch),
        cmocka_unit_test(budget_is_a_bound),
    };
    return cmocka_run_group_tests_name("fsdp api over tcp", tests, NULL, NULL);
}
