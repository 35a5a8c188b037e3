/* fsdp_trainer.c - one rank's working set for tide-fsdp-train: the FSDP
 * context and its layers (one unit each), activations and data buffers,
 * and the calibration that makes --compute sleep stand in for the math. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/fsdp_train/fsdp_mlp.h"
#include "tools/fsdp_train/fsdp_train.h"

double train_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void train_sleep(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int trainer_fail(struct trainer *t, const char *call, int rc)
{
    fprintf(stderr, "rank %d: %s: %s (%s)\n", t->rank, call, tide_fsdp_message(t->f),
            tide_err_name(rc));
    return rc;
}

/* Sleep mode: how long making a batch and one layer's forward and
 * backward take with BLAS here (median of 5, the largest over the ranks),
 * so the sleeps stand in for the same math.  The backward writes a fresh
 * gradient (beta = 0), as every step without --accum does.  Collective
 * over the world. */
static void calibrate(struct trainer *t)
{
    int w = t->o->width;
    float *wb = calloc(mlp_layer_numel(w), sizeof(float));
    float *g = calloc(mlp_layer_numel(w), sizeof(float));
    double fw[5], bw[5], bat[5];
    mlp_init_layer(wb, w, 1, 0);
    for (int i = 0; i < 5; i++) {
        double tb = train_now();
        mlp_batch(t->act[0], t->y, t->teacher, w, t->rows, 1, i, 0);
        double t0 = train_now();
        mlp_forward(wb, t->act[0], t->act[1], w, t->rows, 1);
        double t1 = train_now();
        memcpy(t->da, t->act[1], (size_t)t->rows * w * sizeof(float));
        double t2 = train_now();
        mlp_backward(wb, t->act[0], t->act[1], t->da, t->db, g, 0, w, t->rows, 1);
        bat[i] = t0 - tb;
        fw[i] = t1 - t0;
        bw[i] = train_now() - t2;
    }
    double mine[3] = {median_sort(fw, 5), median_sort(bw, 5), median_sort(bat, 5)}, all[3];
    free(wb);
    free(g);
    /* Every rank sleeps the same: the slowest calibration, so no rank
     * waits for another's longer sleep and calls it communication. */
    if (tide_allreduce(t->world, mine, all, 3, TIDE_FLOAT64, TIDE_MAX) != 0)
        memcpy(all, mine, sizeof all);
    t->fwd_s = all[0];
    t->bwd_s = all[1];
    t->batch_s = all[2];
}

void trainer_free(struct trainer *t)
{
    tide_fsdp_destroy(t->f);
    for (int l = 0; t->act && l <= t->o->layers; l++)
        free(t->act[l]);
    free(t->act);
    free(t->da);
    free(t->db);
    free(t->y);
    free(t->teacher);
}

int trainer_alloc(struct trainer *t)
{
    size_t act = (size_t)t->rows * t->o->width * sizeof(float);
    int ok = (t->act = calloc((size_t)t->o->layers + 1, sizeof *t->act)) != NULL;
    for (int l = 0; ok && l <= t->o->layers; l++)
        ok = (t->act[l] = calloc(1, act)) != NULL;
    t->da = calloc(1, act);
    t->db = calloc(1, act);
    t->y = calloc(1, act);
    t->teacher = calloc((size_t)t->o->width * t->o->width, sizeof(float));
    if (!ok || !t->da || !t->db || !t->y || !t->teacher) {
        fprintf(stderr, "rank %d: out of memory\n", t->rank);
        return TIDE_ENOMEM;
    }
    mlp_teacher(t->teacher, t->o->width, t->o->seed);
    return 0;
}

/* Units, one per layer, initialised by the seeded initializer on every
 * rank, or by rank 0 and broadcast (--init rank0); left at zero unless
 * seed. */
static int add_layers(struct trainer *t, int seed)
{
    size_t numels[2] = {(size_t)t->o->width * t->o->width, (size_t)t->o->width};
    float *wb = seed ? malloc(mlp_layer_numel(t->o->width) * sizeof(float)) : NULL;
    int rc = seed && wb == NULL ? TIDE_ENOMEM : 0;
    for (int l = 0, unit; rc == 0 && l < t->o->layers; l++) {
        if ((rc = tide_fsdp_add_unit(t->f, numels, 2, &unit)) != 0 || !seed)
            continue;
        if (!t->o->init_rank0 || t->rank == 0)
            mlp_init_layer(wb, t->o->width, t->o->seed, l);
        rc = tide_fsdp_set_params(t->f, unit, wb, t->o->init_rank0 ? 0 : -1);
    }
    free(wb);
    return rc ? trainer_fail(t, "adding layers", rc) : 0;
}

int trainer_fsdp(struct trainer *t, int prefetch, int group, int seed)
{
    const struct opts *o = t->o;
    tide_fsdp_config cfg;
    char why[256];
    tide_fsdp_config_default(&cfg);
    cfg.strategy = o->strategy;
    cfg.hybrid_group_size = group;
    cfg.forward_prefetch = prefetch;
    cfg.backward_prefetch = prefetch > 0;
    cfg.budget_bytes = o->budget;
    cfg.comm_dtype = o->comm_dtype;
    int rc = tide_fsdp_create(t->world, &cfg, &t->f, why);
    if (rc != 0) {
        fprintf(stderr, "rank %d: %s\n", t->rank, why);
        return rc;
    }
    return add_layers(t, seed);
}

int trainer_init(struct trainer *t, const struct opts *o, tide_comm *world, int prefetch,
                 const struct trainer *like_t)
{
    memset(t, 0, sizeof *t);
    t->o = o;
    t->world = world;
    t->rank = tide_comm_rank(world);
    t->n = tide_comm_size(world);
    t->rows = o->batch;
    int rc;
    if ((rc = trainer_alloc(t)) != 0 || (rc = trainer_fsdp(t, prefetch, o->group, 1)) != 0)
        return rc;
    if (o->sleep_fwd_ms > 0) {
        t->fwd_s = o->sleep_fwd_ms * 1e-3;
        t->bwd_s = o->sleep_bwd_ms * 1e-3;
        t->batch_s = o->sleep_batch_ms * 1e-3;
    } else if (o->sleep && like_t) {
        t->fwd_s = like_t->fwd_s;
        t->bwd_s = like_t->bwd_s;
        t->batch_s = like_t->batch_s;
    } else if (o->sleep) {
        calibrate(t);
    }
    return 0;
}
