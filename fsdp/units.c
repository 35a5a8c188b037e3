/* units.c - registering units (their tensors, padding and shards), and
 * setting or reading their parameters outside a step. */
#include "fsdp/fsdp_internal.h"

#include <stdlib.h>
#include <string.h>

#include "fsdp/shard.h"

static int grow_units(tide_fsdp *f)
{
    if (f->nunits < f->units_cap)
        return 0;
    int cap = f->units_cap ? 2 * f->units_cap : 8;
    struct tide__fsdp_unit *u = realloc(f->units, (size_t)cap * sizeof *u);
    if (u == NULL)
        return TIDE_ENOMEM;
    f->units = u;
    f->units_cap = cap;
    return 0;
}

/* Padded shard size, distinct from every earlier unit's (see shard.h);
 * NO_SHARD shards nothing and makes its buckets distinct instead. */
static size_t unit_shard(tide_fsdp *f, size_t numel)
{
    size_t base = tide__fsdp_shard_count(numel, f->group_size);
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD)
        return base;
    size_t *taken = malloc((size_t)(f->nunits + 1) * sizeof *taken);
    if (taken == NULL)
        return 0;
    for (int i = 0; i < f->nunits; i++)
        taken[i] = f->units[i].shard;
    size_t c = tide__fsdp_distinct_count(base, taken, f->nunits);
    free(taken);
    return c;
}

static int fill_unit(tide_fsdp *f, struct tide__fsdp_unit *u, const size_t *numels, int ntensors)
{
    memset(u, 0, sizeof *u);
    u->ntensors = ntensors;
    u->offsets = malloc((size_t)(ntensors + 1) * sizeof *u->offsets);
    if (u->offsets == NULL)
        return TIDE_ENOMEM;
    u->offsets[0] = 0;
    for (int t = 0; t < ntensors; t++)
        u->offsets[t + 1] = u->offsets[t] + numels[t];
    u->numel = u->offsets[ntensors];
    u->shard = unit_shard(f, u->numel);
    u->full = u->shard * (size_t)f->group_size;
    u->shard_params = calloc(u->shard ? u->shard : 1, sizeof(float));
    if (f->cfg.strategy != TIDE_FSDP_NO_SHARD)
        u->shard_grad = calloc(u->shard ? u->shard : 1, sizeof(float));
    if (u->shard == 0 || u->shard_params == NULL ||
        (f->cfg.strategy != TIDE_FSDP_NO_SHARD && u->shard_grad == NULL))
        return TIDE_ENOMEM;
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD) { /* always whole */
        u->full_params = u->shard_params;
        u->pstate = PARAMS_GATHERED;
        tide__fsdp_charge(f, u->full * sizeof(float));
    }
    return 0;
}

int tide_fsdp_add_unit(tide_fsdp *f, const size_t *numels, int ntensors, int *unit)
{
    if (f->started)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_add_unit: units must be added "
                                               "before the first forward");
    if (numels == NULL || ntensors < 1 || unit == NULL)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_add_unit: need >= 1 tensor");
    size_t total = 0;
    for (int t = 0; t < ntensors; t++)
        total += numels[t];
    if (total == 0)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_add_unit: a unit of 0 elements");
    if (grow_units(f) != 0)
        return tide__fsdp_fail(f, TIDE_ENOMEM, "tide_fsdp_add_unit: out of memory");
    struct tide__fsdp_unit *u = &f->units[f->nunits];
    if (fill_unit(f, u, numels, ntensors) != 0) {
        free(u->offsets);
        free(u->shard_params);
        free(u->shard_grad);
        return tide__fsdp_fail(f, TIDE_ENOMEM, "tide_fsdp_add_unit: out of memory");
    }
    *unit = f->nunits++;
    return 0;
}

size_t tide_fsdp_unit_numel(const tide_fsdp *f, int unit)
{
    return unit >= 0 && unit < f->nunits ? f->units[unit].numel : 0;
}

size_t tide_fsdp_tensor_offset(const tide_fsdp *f, int unit, int tensor)
{
    if (unit < 0 || unit >= f->nunits || tensor < 0 || tensor >= f->units[unit].ntensors)
        return (size_t)-1;
    return f->units[unit].offsets[tensor];
}

static int outside_step(tide_fsdp *f, int unit, const char *call)
{
    int rc = tide__fsdp_check_unit(f, unit, call);
    if (rc == 0 && (f->phase == PHASE_FORWARD || f->phase == PHASE_BACKWARD))
        rc = tide__fsdp_fail(f, TIDE_EINVAL, "%s: not during a forward or backward", call);
    return rc;
}

/* Keep this rank's shard of full (numel elements), zero padding. */
static void keep_shard(tide_fsdp *f, struct tide__fsdp_unit *u, const float *full)
{
    size_t real = tide__fsdp_shard_real(u->numel, u->shard, f->group_rank);
    memset(u->shard_params, 0, u->shard * sizeof(float));
    if (real)
        memcpy(u->shard_params, full + (size_t)f->group_rank * u->shard, real * sizeof(float));
}

int tide_fsdp_set_params(tide_fsdp *f, int unit, const float *full, int root)
{
    int rc = outside_step(f, unit, "tide_fsdp_set_params");
    if (rc != 0)
        return rc;
    if ((rc = tide__fsdp_settle_params(f, 1)) != 0)
        return rc;
    struct tide__fsdp_unit *u = &f->units[unit];
    if (root < 0) {
        if (full == NULL)
            return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_set_params: no values");
        keep_shard(f, u, full);
        return 0;
    }
    float *tmp = malloc(u->numel * sizeof(float));
    if (tmp == NULL)
        return tide__fsdp_fail(f, TIDE_ENOMEM, "tide_fsdp_set_params: out of memory");
    if (tide_comm_rank(f->world) == root)
        memcpy(tmp, full, u->numel * sizeof(float));
    rc = tide_broadcast(f->world, tmp, u->numel, TIDE_FLOAT32, root);
    if (rc == 0)
        keep_shard(f, u, tmp);
    else
        tide__fsdp_fail(f, rc, "tide_fsdp_set_params: broadcast from rank %d: %s", root,
                        tide_strerror(rc));
    free(tmp);
    return rc;
}

int tide_fsdp_get_params(tide_fsdp *f, int unit, float *full)
{
    int rc = outside_step(f, unit, "tide_fsdp_get_params");
    if (rc != 0 || full == NULL)
        return rc ? rc : tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_get_params: no buffer");
    struct tide__fsdp_unit *u = &f->units[unit];
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD) {
        memcpy(full, u->shard_params, u->numel * sizeof(float));
        return 0;
    }
    float *tmp = malloc(u->full * sizeof(float));
    if (tmp == NULL)
        return tide__fsdp_fail(f, TIDE_ENOMEM, "tide_fsdp_get_params: out of memory");
    rc = tide_allgather(f->shard_comm, u->shard_params, tmp, u->shard, TIDE_FLOAT32);
    if (rc == 0)
        memcpy(full, tmp, u->numel * sizeof(float));
    else
        tide__fsdp_fail(f, rc, "tide_fsdp_get_params: all-gather: %s", tide_strerror(rc));
    free(tmp);
    return rc;
}

int tide_fsdp_set_sync(tide_fsdp *f, int sync)
{
    if (f->phase == PHASE_BACKWARD)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_set_sync: not during a backward");
    f->sync = sync != 0;
    return 0;
}

void tide_fsdp_stats_get(const tide_fsdp *f, tide_fsdp_stats *out)
{
    *out = f->stats;
}

void tide_fsdp_stats_reset(tide_fsdp *f)
{
    size_t now = f->stats.unsharded_bytes;
    memset(&f->stats, 0, sizeof f->stats);
    f->stats.unsharded_bytes = now;
    f->stats.peak_unsharded_bytes = now;
    f->stats.peak_grad_bytes = f->grad_bytes;
}
