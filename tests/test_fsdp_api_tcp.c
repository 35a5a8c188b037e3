/* test_fsdp_api_tcp.c - the FSDP API on real loopback rank processes:
 * shard gradients averaged as the seed's tests expect (full_shard,
 * hybrid_shard across groups, an uneven unit), misuse answered with clear
 * errors (unknown unit, release without acquire, double acquire, a second
 * prefetch, sync before backward, optimizer before sync, a hybrid group
 * that does not divide the world), ranks acquiring in different orders
 * failing with TIDE_EMISMATCH, the byte budget: never exceeded,
 * prefetches dropped to make room, TIDE_ENOMEM when held units fill it,
 * and the optimizer starting the next forward's first all-gather with
 * the updated shard (cross-step prefetch). */
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

/* Forward through both units, then a backward that adds grads[u] to
 * unit u's gradient, then sync: one step up to the optimizer. */
static void forward_backward(tide_fsdp *f, const float *const *grads, size_t numel)
{
    float *w, *g;
    EXPECT_OK(tide_fsdp_begin_forward(f));
    for (int u = 0; u < 2; u++) {
        EXPECT_OK(tide_fsdp_acquire(f, u, &w));
        EXPECT_OK(tide_fsdp_release(f, u));
    }
    EXPECT_OK(tide_fsdp_begin_backward(f));
    for (int u = 1; u >= 0; u--) {
        EXPECT_OK(tide_fsdp_acquire(f, u, &w));
        EXPECT_OK(tide_fsdp_grad(f, u, &g));
        for (size_t i = 0; i < numel; i++)
            g[i] += grads[u][i];
        EXPECT_OK(tide_fsdp_grad_ready(f, u));
        EXPECT_OK(tide_fsdp_release(f, u));
    }
    EXPECT_OK(tide_fsdp_sync_gradients(f));
}

/* The next forward's first unit (0) holds want[]. */
static void expect_first_unit(tide_fsdp *f, const float *want, size_t numel, const char *after)
{
    float *w;
    EXPECT_OK(tide_fsdp_begin_forward(f));
    EXPECT_OK(tide_fsdp_acquire(f, 0, &w));
    for (size_t i = 0; i < numel; i++)
        EXPECT(w[i] == want[i], "after %s, element %zu: %g, want %g", after, i, w[i], want[i]);
    EXPECT_OK(tide_fsdp_release(f, 0));
}

/*
 * Cross-step prefetch: the optimizer starts the next forward's first
 * all-gather (one more gather, unit 0's buffer charged) and that gather
 * carries the updated shard, for SGD and for a custom optimizer that
 * calls tide_fsdp_params_updated; FULL_SHARD (fresh buffer) and
 * SHARD_GRAD_OP (its stale kept buffer reused).  Without prefetch the
 * optimizer starts nothing.  The budget (the largest unit) holds, and an
 * explicit prefetch of the unit already in flight is still TIDE_EBUSY.
 */
static void cross_step_body(tide_comm *comm, void *arg)
{
    enum { N = 6 };
    const float v[N] = {1, 2, 3, 4, 5, 6}, g0[N] = {1, 1, 2, 2, 3, 3}, g1[N] = {0};
    const float *const grads[2] = {g0, g1};
    /* Shards of 3 and (distinct) 4 floats: gathered buffers of 24 and 32 B,
     * so a budget of 56 B holds both and not a byte more. */
    const size_t numel = N, budget = 56;
    const tide_fsdp_strategy strategies[2] = {TIDE_FSDP_FULL_SHARD, TIDE_FSDP_SHARD_GRAD_OP};
    for (int s = 0; s < 2; s++)
        for (int prefetch = 0; prefetch <= 1; prefetch++) {
            tide_fsdp *f = two_units(comm, strategies[s], prefetch, budget, numel, 2);
            tide_fsdp_stats before, after;
            float want[N], *p;
            size_t count, off;
            for (int u = 0; u < 2; u++)
                EXPECT_OK(tide_fsdp_set_params(f, u, v, -1));
            forward_backward(f, grads, numel);
            tide_fsdp_stats_get(f, &before);
            EXPECT_OK(tide_fsdp_sgd(f, 0.5f));
            tide_fsdp_stats_get(f, &after);
            EXPECT(after.gathers == before.gathers + (uint64_t)prefetch,
                   "%s, prefetch %d: the optimizer started %llu gathers",
                   tide_fsdp_strategy_name(strategies[s]), prefetch,
                   (unsigned long long)(after.gathers - before.gathers));
            if (prefetch)
                EXPECT_RC(tide_fsdp_prefetch(f, 0), TIDE_EBUSY); /* already in flight */
            for (size_t i = 0; i < N; i++)
                want[i] = v[i] - 0.5f * g0[i];
            expect_first_unit(f, want, numel, "sgd");
            EXPECT_OK(tide_fsdp_acquire(f, 1, &p));
            EXPECT_OK(tide_fsdp_release(f, 1));
            EXPECT_OK(tide_fsdp_begin_backward(f)); /* back to a step's end */
            EXPECT_OK(tide_fsdp_acquire(f, 1, &p));
            EXPECT_OK(tide_fsdp_release(f, 1));
            EXPECT_OK(tide_fsdp_acquire(f, 0, &p));
            EXPECT_OK(tide_fsdp_grad(f, 0, &p));
            EXPECT_OK(tide_fsdp_grad_ready(f, 0));
            EXPECT_OK(tide_fsdp_release(f, 0));
            EXPECT_OK(tide_fsdp_sync_gradients(f));

            /* A custom optimizer: add 100 to unit 0's shard by hand. */
            EXPECT_OK(tide_fsdp_shard(f, 0, &p, NULL, &count, &off));
            for (size_t k = 0; k < count; k++)
                p[k] += 100.0f;
            EXPECT_OK(tide_fsdp_params_updated(f));
            for (size_t i = 0; i < N; i++)
                want[i] += 100.0f;
            expect_first_unit(f, want, numel, "tide_fsdp_params_updated");
            tide_fsdp_stats_get(f, &after);
            EXPECT(after.peak_unsharded_bytes <= budget, "peak %zu B over the budget %zu B",
                   after.peak_unsharded_bytes, budget);
            tide_fsdp_destroy(f);
        }
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

static void optimizer_prefetches_the_next_forward(void **state)
{
    run_on(2, cross_step_body);
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
        cmocka_unit_test(optimizer_prefetches_the_next_forward),
    };
    return cmocka_run_group_tests_name("fsdp api over tcp", tests, NULL, NULL);
}
