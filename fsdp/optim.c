/* optim.c - the local shards seen by an optimizer, and the two provided
 * optimizers, SGD and Adam(W), which only ever touch this rank's shard:
 * optimizer state is sharded exactly like the parameters. */
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
    return tide__fsdp_settle_params(f, 1);
}

static int check_step(tide_fsdp *f, const char *call)
{
    if (f->phase != PHASE_SYNCED)
        return tide__fsdp_fail(f, TIDE_EINVAL, "%s: gradients are not synchronised (call "
                                               "tide_fsdp_sync_gradients after the backward)",
                               call);
    return 0;
}

int tide_fsdp_sgd(tide_fsdp *f, float lr)
{
    int rc = check_step(f, "tide_fsdp_sgd");
    if (rc != 0)
        return rc;
    for (int i = 0; i < f->nunits; i++) {
        struct tide__fsdp_unit *u = &f->units[i];
        for (size_t k = 0; k < u->shard; k++)
            u->shard_params[k] -= lr * u->shard_grad[k];
    }
    return tide_fsdp_params_updated(f);
}

static void adam_unit(struct tide__fsdp_unit *u, const tide_fsdp_adam_params *p)
{
    u->adam_t++;
    float c1 = 1.0f - powf(p->beta1, (float)u->adam_t);
    float c2 = 1.0f - powf(p->beta2, (float)u->adam_t);
    for (size_t k = 0; k < u->shard; k++) {
        float g = u->shard_grad[k];
        u->adam_m[k] = p->beta1 * u->adam_m[k] + (1.0f - p->beta1) * g;
        u->adam_v[k] = p->beta2 * u->adam_v[k] + (1.0f - p->beta2) * g * g;
        float step = (u->adam_m[k] / c1) / (sqrtf(u->adam_v[k] / c2) + p->eps);
        u->shard_params[k] -= p->lr * (step + p->weight_decay * u->shard_params[k]);
    }
}

int tide_fsdp_adam(tide_fsdp *f, const tide_fsdp_adam_params *p)
{
    int rc = check_step(f, "tide_fsdp_adam");
    if (rc != 0)
        return rc;
    for (int i = 0; i < f->nunits; i++) {
        struct tide__fsdp_unit *u = &f->units[i];
        if (u->adam_m == NULL) {
            u->adam_m = calloc(u->shard, sizeof(float));
            u->adam_v = calloc(u->shard, sizeof(float));
            if (u->adam_m == NULL || u->adam_v == NULL)
                return tide__fsdp_fail(f, TIDE_ENOMEM, "tide_fsdp_adam: out of memory");
        }
        adam_unit(u, p);
    }
    return tide_fsdp_params_updated(f);
}
