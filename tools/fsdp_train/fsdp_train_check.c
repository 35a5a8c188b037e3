/* fsdp_train_check.c - --check: the same model trained in one process
 * (every rank's micro-batches in turn, from the same seed), and every
 * step's loss compared with the distributed run's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/fsdp_train/fsdp_mlp.h"
#include "tools/fsdp_train/fsdp_train.h"

/* The same Adam arithmetic as tide_fsdp_adam, element for element. */
static void ref_adam(float *p, const float *g, float *m, float *v, size_t count, long step,
                     float lr)
{
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float c1 = 1.0f - powf(b1, (float)step), c2 = 1.0f - powf(b2, (float)step);
    for (size_t k = 0; k < count; k++) {
        m[k] = b1 * m[k] + (1.0f - b1) * g[k];
        v[k] = b2 * v[k] + (1.0f - b2) * g[k] * g[k];
        p[k] -= lr * ((m[k] / c1) / (sqrtf(v[k] / c2) + eps) + 0.0f * p[k]);
    }
}

/* One process: every rank's micro-batches in turn, gradients accumulated
 * and divided by the number of ranks, as FSDP averages them. */
static void reference_step(struct trainer *t, float **p, float **g, float **use, int s,
                           double *loss)
{
    const struct opts *o = t->o;
    size_t numel = mlp_layer_numel(o->width);
    int gathers_bf16 = o->comm_dtype == TIDE_BFLOAT16 && o->strategy != TIDE_FSDP_NO_SHARD;
    for (int l = 0; l < o->layers; l++) {
        memset(g[l], 0, numel * sizeof(float));
        memcpy(use[l], p[l], numel * sizeof(float));
        if (gathers_bf16)
            mlp_round_bf16(use[l], numel);
    }
    *loss = 0;
    for (int chunk = 0; chunk < o->accum * t->n; chunk++) {
        mlp_batch(t->act[0], t->y, t->teacher, o->width, t->rows, o->seed, s,
                  (long)chunk * t->rows);
        for (int l = 0; l < o->layers; l++)
            mlp_forward(use[l], t->act[l], t->act[l + 1], o->width, t->rows, l < o->layers - 1);
        *loss += mlp_loss(t->act[o->layers], t->y, t->da, (size_t)t->rows * o->width,
                          1.0f / (float)o->accum);
        for (int l = o->layers - 1; l >= 0; l--) {
            mlp_backward(use[l], t->act[l], t->act[l + 1], t->da, l > 0 ? t->db : NULL, g[l], 1,
                         o->width, t->rows, l < o->layers - 1);
            float *swap = t->da;
            t->da = t->db;
            t->db = swap;
        }
    }
    *loss /= (double)(o->accum * t->n);
}

static int reference(tide_comm *world, const struct opts *o, double *ref_loss)
{
    struct trainer t;
    memset(&t, 0, sizeof t);
    t.o = o;
    t.n = tide_comm_size(world);
    t.rows = o->batch;
    size_t numel = mlp_layer_numel(o->width);
    float **mem = calloc(5 * (size_t)o->layers, sizeof *mem);
    int rc = mem ? trainer_alloc(&t) : TIDE_ENOMEM;
    for (int i = 0; rc == 0 && i < 5 * o->layers; i++)
        rc = (mem[i] = calloc(numel, sizeof(float))) ? 0 : TIDE_ENOMEM;
    float **p = mem, **g = mem + o->layers, **use = mem + 2 * o->layers;
    float **m = mem + 3 * o->layers, **v = mem + 4 * o->layers;
    for (int l = 0; rc == 0 && l < o->layers; l++)
        mlp_init_layer(p[l], o->width, o->seed, l);
    for (int s = 0; rc == 0 && s < o->steps; s++) {
        reference_step(&t, p, g, use, s, &ref_loss[s]);
        for (int l = 0; l < o->layers; l++)
            for (size_t k = 0; k < numel; k++)
                g[l][k] /= (float)t.n;
        for (int l = 0; l < o->layers; l++)
            if (o->adam)
                ref_adam(p[l], g[l], m[l], v[l], numel, s + 1, o->lr);
            else
                for (size_t k = 0; k < numel; k++)
                    p[l][k] -= o->lr * g[l][k];
    }
    for (int i = 0; mem && i < 5 * o->layers; i++)
        free(mem[i]);
    free(mem);
    trainer_free(&t);
    return rc;
}

/* Rank 0 compares; every rank learns the verdict. */
int check_against_one_process(tide_comm *world, const struct opts *o, const struct step_stats *st)
{
    int32_t bad = 0;
    if (tide_comm_rank(world) == 0) {
        double *ref = calloc((size_t)o->steps, sizeof *ref), worst = 0;
        bad = ref == NULL || reference(world, o, ref) != 0;
        for (int s = 0; !bad && s < o->steps; s++) {
            double rel = fabs(st[s].loss - ref[s]) / fmax(fabs(ref[s]), 1e-30);
            worst = fmax(worst, rel);
            if (rel > 1e-5 || isnan(rel)) {
                printf("check: step %d: loss %.9e, one process %.9e: relative difference %.2e "
                       "> 1e-5\n", s, st[s].loss, ref[s], rel);
                bad = 1;
            }
        }
        if (!bad)
            printf("check: every step's loss matches one-process training within %.2e relative "
                   "(limit 1e-5)\n", worst);
        free(ref);
    }
    int rc = tide_broadcast(world, &bad, 1, TIDE_INT32, 0);
    return rc ? rc : bad ? TIDE_EMISMATCH : 0;
}
