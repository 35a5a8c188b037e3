/* test_fsdp_api_tcp.c - the FSDP API on real loopback rank processes:
 * shard gradients averaged as the seed's tests expect (full_shard,
 * hybrid_shard across groups, an uneven unit), misuse answered with clear
 * errors (unknown unit, release without acquire, double acquire, a second
 * prefetch, sync before backward, optimizer before sync, a hybrid group
 * that does not divide the world, a NULL fresh), ranks acquiring in
 * different orders failing with TIDE_EMISMATCH, the byte budget: never
 * exceeded, prefetches dropped to make room, TIDE_ENOMEM when held units
 * fill it, the optimizer starting the next forward's first all-gather
 * with the updated shard (cross-step prefetch), and tide_fsdp_grad_fresh:
 * fresh only at an accumulation window's start, and writing a fresh
 * buffer giving the same gradients and shards as adding into a zeroed
 * one, in every strategy. */
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
    int fresh;
    EXPECT_RC(tide_fsdp_grad_fresh(f, 1, &w, &fresh), TIDE_EINVAL);
    EXPECT(strstr(tide_fsdp_message(f), "tide_fsdp_grad_fresh: unit 1 outside a backward"),
           "message: %s", tide_fsdp_message(f));
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
    int fresh;
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
    EXPECT_RC(tide_fsdp_grad_fresh(f, 1, &g, NULL), TIDE_EINVAL);
    EXPECT(strstr(tide_fsdp_message(f), "tide_fsdp_grad_fresh: unit 1: fresh is NULL"),
           "message: %s", tide_fsdp_message(f));
    EXPECT_RC(tide_fsdp_grad_ready(f, 1), TIDE_EINVAL); /* the failed call gave none */
    EXPECT_RC(tide_fsdp_grad_fresh(f, 7, &g, &fresh), TIDE_EINVAL);
    EXPECT_OK(tide_fsdp_grad(f, 1, &g));
    EXPECT_OK(tide_fsdp_grad_ready(f, 1));
    EXPECT_RC(tide_fsdp_grad_ready(f, 1), TIDE_EINVAL); /* twice */
    EXPECT_RC(tide_fsdp_grad(f, 1, &g), TIDE_EINVAL);   /* after ready */
    EXPECT_RC(tide_fsdp_grad_fresh(f, 1, &g, &fresh), TIDE_EINVAL);
    EXPECT(strstr(tide_fsdp_message(f), "tide_fsdp_grad_fresh: unit 1's gradient was already"),
           "message: %s", tide_fsdp_message(f));
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

/*
 * tide_fsdp_grad_fresh over accumulation windows, for every strategy on 4
 * ranks: units of 33, 43 and 50 floats (FULL_SHARD: padded shards of 9,
 * 11 and 13, so 3, 1 and 2 padding elements), windows of 3, 1 and 2
 * micro-steps (no-sync until the last, then SGD).  FSDP recycles its
 * freed buffers, and the first two units' share a size class, so a fresh
 * buffer holds stale values, some of unit 1's where unit 0 has padding.
 */
enum { WIN_UNITS = 3, WIN_WINDOWS = 3 };
static const size_t win_numel[WIN_UNITS] = {33, 43, 50};
static const int win_micro[WIN_WINDOWS] = {3, 1, 2};

static const struct win_case {
    const char *name;
    tide_fsdp_strategy strategy;
    int group;
} win_cases[] = {
    {"full_shard", TIDE_FSDP_FULL_SHARD, 1},
    {"shard_grad_op", TIDE_FSDP_SHARD_GRAD_OP, 1},
    {"no_shard", TIDE_FSDP_NO_SHARD, 1},
    {"hybrid_shard", TIDE_FSDP_HYBRID_SHARD, 2},
};

/* How a test trainer puts its gradient into FSDP's buffer. */
enum grad_way {
    ZERO_THEN_ADD,  /* tide_fsdp_grad, then += */
    WRITE_IF_FRESH, /* tide_fsdp_grad_fresh, then = when fresh, else += */
};

static tide_fsdp *window_context(tide_comm *comm, const struct win_case *c)
{
    tide_fsdp *f = make(comm, c->strategy, c->group, 1, 0);
    for (int i = 0, u; i < WIN_UNITS; i++) {
        EXPECT_OK(tide_fsdp_add_unit(f, &win_numel[i], 1, &u));
        float v[64];
        for (size_t k = 0; k < win_numel[i]; k++)
            v[k] = 1.0f + (float)k * 0.125f + (float)i;
        EXPECT_OK(tide_fsdp_set_params(f, u, v, -1));
    }
    return f;
}

/* Exact in float32, so either way sums the same bits; differs by rank. */
static float grad_value(tide_comm *comm, int unit, size_t i, int window, int micro)
{
    return (float)(tide_comm_rank(comm) + 1) * 0.5f + (float)unit - (float)i * 0.25f +
           (float)(window * 4 + micro);
}

/* One micro-step of window w: forward through the units, a backward that
 * puts grad_value into every unit's gradient `way`, then sync (which
 * reduces only when sync is 1).  Returns the fresh units, a bit each. */
static unsigned micro_step(tide_comm *comm, tide_fsdp *f, enum grad_way way, int w, int m)
{
    unsigned fresh_units = 0;
    float *p, *g;
    EXPECT_OK(tide_fsdp_set_sync(f, m == win_micro[w] - 1));
    EXPECT_OK(tide_fsdp_begin_forward(f));
    for (int u = 0; u < WIN_UNITS; u++) {
        EXPECT_OK(tide_fsdp_acquire(f, u, &p));
        EXPECT_OK(tide_fsdp_release(f, u));
    }
    EXPECT_OK(tide_fsdp_begin_backward(f));
    for (int u = WIN_UNITS - 1; u >= 0; u--) {
        int fresh = 0;
        EXPECT_OK(tide_fsdp_acquire(f, u, &p));
        if (way == WRITE_IF_FRESH)
            EXPECT_OK(tide_fsdp_grad_fresh(f, u, &g, &fresh));
        else
            EXPECT_OK(tide_fsdp_grad(f, u, &g));
        for (size_t i = 0; i < win_numel[u]; i++)
            g[i] = fresh ? grad_value(comm, u, i, w, m) : g[i] + grad_value(comm, u, i, w, m);
        fresh_units |= (unsigned)fresh << u;
        EXPECT_OK(tide_fsdp_grad_ready(f, u));
        EXPECT_OK(tide_fsdp_release(f, u));
    }
    EXPECT_OK(tide_fsdp_sync_gradients(f));
    return fresh_units;
}

/* fresh is 1 for every unit on a window's first micro-step, 0 after. */
static void fresh_window_body(tide_comm *comm, void *arg)
{
    for (size_t c = 0; c < sizeof win_cases / sizeof win_cases[0]; c++) {
        tide_fsdp *f = window_context(comm, &win_cases[c]);
        for (int w = 0; w < WIN_WINDOWS; w++) {
            for (int m = 0; m < win_micro[w]; m++) {
                unsigned got = micro_step(comm, f, WRITE_IF_FRESH, w, m);
                unsigned want = m == 0 ? (1u << WIN_UNITS) - 1 : 0;
                EXPECT(got == want, "%s, window %d, micro-step %d: fresh units %#x, want %#x",
                       win_cases[c].name, w, m, got, want);
            }
            EXPECT_OK(tide_fsdp_sgd(f, 0.5f));
        }
        tide_fsdp_destroy(f);
    }
}

/* a's and b's shards (gradient after sync, or parameters) hold the same
 * bits, and b's padding is zero. */
static void expect_same_shards(tide_fsdp *a, tide_fsdp *b, int grads, const char *name, int w)
{
    for (int u = 0; u < WIN_UNITS; u++) {
        float *va, *vb;
        size_t na, nb, off;
        EXPECT_OK(tide_fsdp_shard(a, u, grads ? NULL : &va, grads ? &va : NULL, &na, &off));
        EXPECT_OK(tide_fsdp_shard(b, u, grads ? NULL : &vb, grads ? &vb : NULL, &nb, &off));
        EXPECT(na == nb, "%s: shards of %zu and %zu", name, na, nb);
        for (size_t k = 0; k < nb; k++) {
            EXPECT(memcmp(&va[k], &vb[k], sizeof(float)) == 0,
                   "%s, window %d, unit %d, shard %s [%zu]: %g written, %g added", name, w, u,
                   grads ? "gradient" : "parameter", k, vb[k], va[k]);
            EXPECT(off + k < win_numel[u] || vb[k] == 0.0f,
                   "%s, window %d, unit %d: padding %s [%zu] is %g", name, w, u,
                   grads ? "gradient" : "parameter", k, vb[k]);
        }
    }
}

/* A trainer that writes fresh buffers (b) gets the same synced gradients
 * and updated shards as one that adds into zeroed ones (a). */
static void fresh_write_body(tide_comm *comm, void *arg)
{
    for (size_t c = 0; c < sizeof win_cases / sizeof win_cases[0]; c++) {
        const char *name = win_cases[c].name;
        tide_fsdp *a = window_context(comm, &win_cases[c]);
        tide_fsdp *b = window_context(comm, &win_cases[c]);
        for (int w = 0; w < WIN_WINDOWS; w++) {
            for (int m = 0; m < win_micro[w]; m++) {
                micro_step(comm, a, ZERO_THEN_ADD, w, m);
                micro_step(comm, b, WRITE_IF_FRESH, w, m);
            }
            expect_same_shards(a, b, 1, name, w);
            EXPECT_OK(tide_fsdp_sgd(a, 0.5f));
            EXPECT_OK(tide_fsdp_sgd(b, 0.5f));
            expect_same_shards(a, b, 0, name, w);
        }
        tide_fsdp_destroy(a);
        tide_fsdp_destroy(b);
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

static void grad_fresh_only_at_a_windows_start(void **state)
{
    run_on(4, fresh_window_body);
}

static void writing_fresh_buffers_matches_adding(void **state)
{
    run_on(4, fresh_write_body);
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
        cmocka_unit_test(grad_fresh_only_at_a_windows_start),
        cmocka_unit_test(writing_fresh_buffers_matches_adding),
    };
    return cmocka_run_group_tests_name("fsdp api over tcp", tests, NULL, NULL);
}
