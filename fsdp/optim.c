/* optim.c - the local shards seen by an optimizer, and the two provided
 * optimizers, SGD and Adam(W), which only ever touch this rank's shard:
 * optimizer state is sharded exactly like the parameters.  The end of
 * an optimizer step is where the next forward's first all-gather can
 * start (cross-step prefetch). */
#include "fsdp/fsdp_internal.h"

#include <math.h>
#include <stdlib.h>

int tide_fsdp_shard(tide_fsdp *f, int unit, float **params, float **grad, size_t *count,
                    size_t *offset)
{
    int rc = tide__fsdp_check_unit(f, unit, "tide_fsdp_shard");
    if (rc != 0)
        return rc;
    struct tide__fsdp_unit *u = &f->units[unit];
    if (params)
        *params = u->shard_params;
    if (grad)
        *grad = u->shard_grad;
    if (count)
        *count = u->shard;
    if (offset)
        *offset = (size_t)f->group_rank * u->shard;
    return 0;
}

int tide_fsdp_params_updated(tide_fsdp *f)
{
    if (f->phase == PHASE_FORWARD || f->phase == PHASE_BACKWARD)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_params_updated: not during a pass");
    f->phase = PHASE_IDLE;
    int rc = tide__fsdp_settle_params(f, 1);
    /* Every shard is final now: the next forward's first gather can run
     * while the trainer prepares its batch. */
    return rc ? rc : tide__fsdp_gather_ahead(f, tide__fsdp_next_forward_first(f));
}

static int check_step(tide_fsdp *f, const char *call)
{
    if (f->phase != PHASE_SYNCED)
        return tide__fsdp_fail(f, TIDE_EINVAL, "%s: gradients are not synchronised (call "
                                               "tide_fsdp_sync_gradients after the backward)",
                               call);
    return 0;
}

/* One unit's update by a provided optimizer; 0 or a TIDE_E* code. */
typedef int (*update_fn)(tide_fsdp *f, struct tide__fsdp_unit *u, const void *arg);

/*
 * Update every local shard with fn.  The unit the next forward acquires
 * first goes first and its all-gather starts as soon as its shard is
 * final (cross-step prefetch): it then runs while the other shards are
 * updated and while the trainer prepares the next batch, instead of
 * starting at begin_forward with nothing to hide behind.  The kept full
 * buffers (SHARD_GRAD_OP) are marked stale before anything changes, so
 * that gather is the only full copy that is current.
 */
static int step_shards(tide_fsdp *f, const char *call, update_fn fn, const void *arg)
{
    int rc = check_step(f, call);
    if (rc == 0)
        rc = tide__fsdp_settle_params(f, 1); /* nothing is in flight after sync: no wait */
    int first = tide__fsdp_next_forward_first(f);
    if (rc == 0 && first >= 0 && (rc = fn(f, &f->units[first], arg)) == 0)
        rc = tide__fsdp_gather_ahead(f, first);
    for (int i = 0; rc == 0 && i < f->nunits; i++)
        if (i != first)
            rc = fn(f, &f->units[i], arg);
    if (rc == 0)
        f->phase = PHASE_IDLE;
    return rc;
}

/* At -O2 gcc vectorizes a loop only if it needs no alias check (hence
 * restrict: a shard's parameters and gradient never overlap) and no
 * scalar epilogue (hence whole blocks, then a tail).  The plain loop ran
 * scalar: 1.4-3.8 ms per step for a 4-rank demo's 2 Mi elements, at the
 * end of the backward, where the next forward's first gather waits for
 * it on every rank.  Element for element the same arithmetic. */
enum { SGD_BLOCK = 64 };

static void sgd_span(float *restrict p, const float *restrict g, float lr, size_t n)
{
    size_t k = 0;
    for (; k + SGD_BLOCK <= n; k += SGD_BLOCK)
        for (size_t j = 0; j < SGD_BLOCK; j++)
            p[k + j] -= lr * g[k + j];
    for (; k < n; k++)
        p[k] -= lr * g[k];
}

static int sgd_unit(tide_fsdp *f, struct tide__fsdp_unit *u, const void *arg)
{
    (void)f;
    sgd_span(u->shard_params, u->shard_grad, *(const float *)arg, u->shard);
    return 0;
}

int tide_fsdp_sgd(tide_fsdp *f, float lr)
{
    return step_shards(f, "tide_fsdp_sgd", sgd_unit, &lr);
}

/* Adam over one shard, in blocks as sgd_span.  sqrtf is the other thing
 * that kept it scalar: C's sqrtf sets errno for a negative argument, so
 * gcc calls it per element unless told errno does not matter
 * (-fno-math-errno, fsdp/meson.build; v is never negative anyway).  The
 * plain loop took ~4.7 ns an element here: 38-43 ms of a 1-rank demo
 * step with 8 units of 1 Mi.  Element for element the same arithmetic.
 * The tail repeats the block's three lines: with them in an inline
 * helper, gcc 12 at -O2 no longer vectorized the block. */
enum { ADAM_BLOCK = 64 };

/* c1, c2: this step's bias corrections, 1 - beta^t. */
static void adam_span(float *restrict p, float *restrict m, float *restrict v,
                      const float *restrict g, const tide_fsdp_adam_params *hp, float c1,
                      float c2, size_t n)
{
    const float lr = hp->lr, b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps;
    const float wd = hp->weight_decay, d1 = 1.0f - b1, d2 = 1.0f - b2;
    size_t k = 0;
    for (; k + ADAM_BLOCK <= n; k += ADAM_BLOCK)
        for (size_t j = 0; j < ADAM_BLOCK; j++) {
            m[k + j] = b1 * m[k + j] + d1 * g[k + j];
            v[k + j] = b2 * v[k + j] + d2 * g[k + j] * g[k + j];
            p[k + j] -= lr * ((m[k + j] / c1) / (sqrtf(v[k + j] / c2) + eps) + wd * p[k + j]);
        }
    for (; k < n; k++) {
        m[k] = b1 * m[k] + d1 * g[k];
        v[k] = b2 * v[k] + d2 * g[k] * g[k];
        p[k] -= lr * ((m[k] / c1) / (sqrtf(v[k] / c2) + eps) + wd * p[k]);
    }
}

/* Adam's moments are allocated at the unit's first step. */
static int adam_unit(tide_fsdp *f, struct tide__fsdp_unit *u, const void *arg)
{
    const tide_fsdp_adam_params *p = arg;
    if (u->adam_m == NULL) {
        u->adam_m = calloc(u->shard, sizeof(float));
        u->adam_v = calloc(u->shard, sizeof(float));
        if (u->adam_m == NULL || u->adam_v == NULL)
            return tide__fsdp_fail(f, TIDE_ENOMEM, "tide_fsdp_adam: out of memory");
    }
    u->adam_t++;
    adam_span(u->shard_params, u->adam_m, u->adam_v, u->shard_grad, p,
              1.0f - powf(p->beta1, (float)u->adam_t), 1.0f - powf(p->beta2, (float)u->adam_t),
              u->shard);
    return 0;
}

int tide_fsdp_adam(tide_fsdp *f, const tide_fsdp_adam_params *p)
{
    return step_shards(f, "tide_fsdp_adam", adam_unit, p);
}
