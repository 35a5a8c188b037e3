/* context.c - an FSDP context: configuration, creation of its private
 * communicators, unit registration and padding, setting and reading
 * parameters, error messages, statistics. */
#include "fsdp/fsdp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsdp/shard.h"

static const char *const strategy_names[] = {"full_shard", "shard_grad_op", "no_shard",
                                              "hybrid_shard"};

void tide_fsdp_config_default(tide_fsdp_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->strategy = TIDE_FSDP_FULL_SHARD;
    cfg->hybrid_group_size = 1;
    cfg->forward_prefetch = 1;
    cfg->backward_prefetch = 1;
    cfg->comm_dtype = TIDE_FLOAT32;
    cfg->reduce_dtype = TIDE_FLOAT32;
    cfg->bucket_bytes = (size_t)4 << 20;
}

const char *tide_fsdp_strategy_name(tide_fsdp_strategy s)
{
    return (unsigned)s < 4 ? strategy_names[s] : "?";
}

int tide_fsdp_strategy_parse(const char *name, tide_fsdp_strategy *out)
{
    for (int i = 0; name && i < 4; i++)
        if (strcmp(name, strategy_names[i]) == 0) {
            *out = (tide_fsdp_strategy)i;
            return 0;
        }
    return TIDE_EINVAL;
}

double tide__fsdp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int tide__fsdp_fail(tide_fsdp *f, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *tide_fsdp_message(const tide_fsdp *f)
{
    return f ? f->msg : "no FSDP context";
}

int tide__fsdp_check_unit(tide_fsdp *f, int unit, const char *call)
{
    if (unit < 0 || unit >= f->nunits)
        return tide__fsdp_fail(f, TIDE_EINVAL, "%s: unknown unit %d (%d registered)", call, unit,
                               f->nunits);
    return 0;
}

int tide__fsdp_reshards(const tide_fsdp *f)
{
    return f->cfg.strategy == TIDE_FSDP_FULL_SHARD || f->cfg.strategy == TIDE_FSDP_HYBRID_SHARD;
}

int tide__fsdp_wait(tide_fsdp *f, tide_req **req, const char *what, int unit)
{
    if (*req == NULL)
        return 0;
    double t0 = tide__fsdp_now();
    int rc = tide_wait(*req, -1);
    double dt = tide__fsdp_now() - t0;
    f->stats.blocked_s += dt;
    if (f->phase == PHASE_FORWARD)
        f->stats.blocked_forward_s += dt;
    else if (f->phase == PHASE_BACKWARD && !f->syncing)
        f->stats.blocked_backward_s += dt;
    else
        f->stats.blocked_sync_s += dt;
    if (rc != 0)
        tide__fsdp_fail(f, rc, "%s of unit %d failed: %s", what, unit, tide_req_message(*req));
    tide_req_free(*req);
    *req = NULL;
    return rc;
}

static int check_config(const tide_fsdp_config *c, int world, char *why, size_t cap)
{
    if ((unsigned)c->strategy > TIDE_FSDP_HYBRID_SHARD)
        snprintf(why, cap, "unknown strategy %d", (int)c->strategy);
    else if (c->strategy == TIDE_FSDP_HYBRID_SHARD &&
             (c->hybrid_group_size < 1 || world % c->hybrid_group_size != 0))
        snprintf(why, cap, "hybrid_shard: world size %d is not a multiple of group size %d",
                 world, c->hybrid_group_size);
    else if (c->forward_prefetch < 0 || (c->backward_prefetch != 0 && c->backward_prefetch != 1))
        snprintf(why, cap, "forward_prefetch must be >= 0 and backward_prefetch 0 or 1");
    else if (c->comm_dtype != TIDE_FLOAT32 && c->comm_dtype != TIDE_BFLOAT16)
        snprintf(why, cap, "comm_dtype must be float32 or bfloat16, not %s",
                 tide_dtype_name(c->comm_dtype));
    else if (c->reduce_dtype != TIDE_FLOAT32)
        snprintf(why, cap, "reduce_dtype must be float32, not %s", tide_dtype_name(c->reduce_dtype));
    else if (c->bucket_bytes == 0)
        snprintf(why, cap, "bucket_bytes must be > 0");
    else
        return 0;
    return TIDE_EINVAL;
}

/* The shard group (and for HYBRID_SHARD the replica group) as private
 * communicators, so FSDP's collectives have a sequence of their own. */
static int split_comms(tide_fsdp *f, int rank, int size)
{
    int group_color = 0, rc;
    struct tide__fsdp_layout lay;
    if (f->cfg.strategy == TIDE_FSDP_HYBRID_SHARD) {
        tide__fsdp_hybrid_layout(rank, size, f->cfg.hybrid_group_size, &lay);
        group_color = lay.group_color;
    }
    if ((rc = tide_comm_split(f->world, group_color, rank, &f->shard_comm)) != 0)
        return rc;
    if (f->cfg.strategy == TIDE_FSDP_HYBRID_SHARD &&
        (rc = tide_comm_split(f->world, lay.replica_color, rank, &f->replica_comm)) != 0)
        return rc;
    f->group_rank = tide_comm_rank(f->shard_comm);
    f->group_size = tide_comm_size(f->shard_comm);
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD) { /* its comm only all-reduces */
        f->group_rank = 0;
        f->group_size = 1;
    }
    return 0;
}

int tide_fsdp_create(tide_comm *comm, const tide_fsdp_config *cfg, tide_fsdp **out,
                     char *message)
{
    char why[200] = "";
    int rank = tide_comm_rank(comm), size = tide_comm_size(comm), rc;
    *out = NULL;
    if (rank < 0 || cfg == NULL)
        rc = TIDE_EINVAL, snprintf(why, sizeof why, "no communicator or no config");
    else
        rc = check_config(cfg, size, why, sizeof why);
    tide_fsdp *f = rc == 0 ? calloc(1, sizeof *f) : NULL;
    if (rc == 0 && f == NULL)
        rc = TIDE_ENOMEM, snprintf(why, sizeof why, "out of memory");
    if (rc == 0) {
        f->cfg = *cfg;
        f->world = comm;
        f->sync = 1;
        if ((rc = split_comms(f, rank, size)) != 0)
            snprintf(why, sizeof why, "splitting FSDP's communicators: %s", tide_strerror(rc));
    }
    if (rc != 0) {
        if (message)
            snprintf(message, 256, "tide_fsdp_create: %s", why);
        tide_fsdp_destroy(f);
        return rc;
    }
    *out = f;
    return 0;
}

static void free_unit(struct tide__fsdp_unit *u, int no_shard)
{
    tide_wait(u->gather, -1);
    tide_req_free(u->gather);
    if (!no_shard) {
        free(u->full_params);
        free(u->grad_full);
        free(u->shard_grad);
    }
    free(u->shard_params);
    free(u->adam_m);
    free(u->adam_v);
    free(u->offsets);
}

int tide_fsdp_revoke(tide_fsdp *f)
{
    if (f == NULL)
        return TIDE_EINVAL;
    /* Revoking the caller's communicator would not reach these: revoke
     * touches no other communicator, and FSDP's are its own splits. */
    if (f->replica_comm)
        tide_comm_revoke(f->replica_comm);
    if (f->shard_comm)
        tide_comm_revoke(f->shard_comm);
    return 0;
}

void tide_fsdp_destroy(tide_fsdp *f)
{
    if (f == NULL)
        return;
    tide__fsdp_drop_reductions(f);
    for (int i = 0; i < f->nunits; i++)
        free_unit(&f->units[i], f->cfg.strategy == TIDE_FSDP_NO_SHARD);
    for (int b = 0; b < f->nbuckets; b++)
        free(f->buckets[b].buf);
    free(f->buckets);
    free(f->units);
    free(f->plan);
    free(f->last_forward);
    free(f->record);
    free(f->fifo);
    tide__fsdp_pool_drain(&f->pool);
    if (f->replica_comm)
        tide_comm_free(f->replica_comm);
    if (f->shard_comm)
        tide_comm_free(f->shard_comm);
    free(f);
}
