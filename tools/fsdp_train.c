/* fsdp_train.c - tide-fsdp-train: trains an MLP (default 8 layers of
 * 1024 x 1024 with ReLU) on a learnable synthetic task (regressing a
 * fixed random linear teacher) with tide's FSDP, one unit per layer, and
 * reports per step the loss, step time, compute time, time blocked on
 * communication, overlap and peak unsharded bytes.
 *
 *   tide-run -n 4 -- tide-fsdp-train --strategy full_shard --prefetch 2 --steps 20
 *
 * Overlap = 1 - blocked / pure communication, where pure communication
 * is the same step's collectives replayed with no compute in between
 * (median of --replays runs before training).  --check trains the same
 * model in one process (rank 0, after the run) from the same seed and
 * fails unless every step's loss matches within 1e-5 relative.
 * --compare-prefetch trains twice, prefetch off then on, side by side.
 * --compute sleep replaces each layer's math by a sleep as long as its
 * BLAS version takes here, as if an accelerator computed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "fsdp_mlp.h"
#include "tide.h"
#include "tide_fsdp.h"

/* OpenBLAS's own knob; declared here because cblas.h of other vendors
 * lacks it. */
void openblas_set_num_threads(int num_threads);

struct opts {
    tide_fsdp_strategy strategy;
    int group;        /* hybrid group size; 0 = choose */
    int prefetch;     /* forward depth; backward prefetch when > 0 */
    int steps, layers, width, batch, accum, replays;
    float lr;
    int adam;
    unsigned long long seed;
    tide_dtype comm_dtype;
    size_t budget;
    int sleep, check, compare, init_rank0;
};

struct step_stats {
    double step_s, compute_s, blocked_s, loss;
    double fwd_s, bwd_s, sync_s; /* where blocked_s was spent */
    size_t peak;
};

/* One rank's working set for training. */
struct trainer {
    const struct opts *o;
    tide_comm *world;
    tide_fsdp *f;
    int rank, n, rows;
    float **act;   /* layers + 1 activations, rows x width */
    float *da, *db, *y, *teacher;
    double fwd_s, bwd_s; /* calibrated per-layer compute (sleep mode) */
    double compute_s;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int fsdp_fail(struct trainer *t, const char *call, int rc)
{
    fprintf(stderr, "rank %d: %s: %s (%s)\n", t->rank, call, tide_fsdp_message(t->f),
            tide_err_name(rc));
    return rc;
}

static int forward(struct trainer *t, int step, int micro, double *loss)
{
    const struct opts *o = t->o;
    int rc, chunk = micro * t->n + t->rank;
    if (!o->sleep)
        mlp_batch(t->act[0], t->y, t->teacher, o->width, t->rows, o->seed, step,
                  (long)chunk * t->rows);
    if ((rc = tide_fsdp_begin_forward(t->f)) != 0)
        return fsdp_fail(t, "begin_forward", rc);
    for (int l = 0; l < o->layers; l++) {
        float *w;
        if ((rc = tide_fsdp_acquire(t->f, l, &w)) != 0)
            return fsdp_fail(t, "acquire", rc);
        double c0 = now_s();
        if (o->sleep)
            sleep_s(t->fwd_s);
        else
            mlp_forward(w, t->act[l], t->act[l + 1], o->width, t->rows, l < o->layers - 1);
        t->compute_s += now_s() - c0;
        if ((rc = tide_fsdp_release(t->f, l)) != 0)
            return fsdp_fail(t, "release", rc);
    }
    if (!o->sleep)
        *loss += mlp_loss(t->act[o->layers], t->y, t->da, (size_t)t->rows * o->width,
                          1.0f / (float)o->accum);
    return 0;
}

static int backward(struct trainer *t)
{
    const struct opts *o = t->o;
    int rc;
    if ((rc = tide_fsdp_begin_backward(t->f)) != 0)
        return fsdp_fail(t, "begin_backward", rc);
    for (int l = o->layers - 1; l >= 0; l--) {
        float *w, *g;
        if ((rc = tide_fsdp_acquire(t->f, l, &w)) != 0 || (rc = tide_fsdp_grad(t->f, l, &g)) != 0)
            return fsdp_fail(t, "acquire/grad", rc);
        double c0 = now_s();
        if (o->sleep)
            sleep_s(t->bwd_s);
        else
            mlp_backward(w, t->act[l], t->act[l + 1], t->da, l > 0 ? t->db : NULL, g, o->width,
                         t->rows, l < o->layers - 1);
        t->compute_s += now_s() - c0;
        if ((rc = tide_fsdp_grad_ready(t->f, l)) != 0 || (rc = tide_fsdp_release(t->f, l)) != 0)
            return fsdp_fail(t, "grad_ready/release", rc);
        float *swap = t->da;
        t->da = t->db;
        t->db = swap;
    }
    if ((rc = tide_fsdp_sync_gradients(t->f)) != 0)
        return fsdp_fail(t, "sync_gradients", rc);
    return 0;
}

static int optimize(struct trainer *t)
{
    tide_fsdp_adam_params ap = {t->o->lr, 0.9f, 0.999f, 1e-8f, 0.0f};
    int rc = t->o->adam ? tide_fsdp_adam(t->f, &ap) : tide_fsdp_sgd(t->f, t->o->lr);
    return rc ? fsdp_fail(t, "optimizer step", rc) : 0;
}

/* One optimizer step over accum micro-steps; *loss is this rank's mean. */
static int train_step(struct trainer *t, int step, double *loss)
{
    int rc;
    *loss = 0;
    for (int m = 0; m < t->o->accum; m++) {
        if ((rc = tide_fsdp_set_sync(t->f, m == t->o->accum - 1)) != 0)
            return fsdp_fail(t, "set_sync", rc);
        if ((rc = forward(t, step, m, loss)) != 0 || (rc = backward(t)) != 0)
            return rc;
    }
    *loss /= t->o->accum;
    return optimize(t);
}

/* The step's collectives with no compute: acquire/release everything,
 * make zero gradients ready, sync; no optimizer step. */
static int replay_step(struct trainer *t)
{
    int rc = tide_fsdp_begin_forward(t->f);
    float *w, *g;
    for (int l = 0; rc == 0 && l < t->o->layers; l++)
        if ((rc = tide_fsdp_acquire(t->f, l, &w)) == 0)
            rc = tide_fsdp_release(t->f, l);
    if (rc == 0)
        rc = tide_fsdp_begin_backward(t->f);
    for (int l = t->o->layers - 1; rc == 0 && l >= 0; l--)
        if ((rc = tide_fsdp_acquire(t->f, l, &w)) == 0 && (rc = tide_fsdp_grad(t->f, l, &g)) == 0 &&
            (rc = tide_fsdp_grad_ready(t->f, l)) == 0)
            rc = tide_fsdp_release(t->f, l);
    if (rc == 0)
        rc = tide_fsdp_sync_gradients(t->f);
    return rc ? fsdp_fail(t, "replay", rc) : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int pure_comm(struct trainer *t, double *pure)
{
    double v[16];
    int r = t->o->replays < 1 ? 1 : t->o->replays > 16 ? 16 : t->o->replays, rc;
    for (int i = 0; i < r; i++) {
        double t0 = now_s();
        if ((rc = replay_step(t)) != 0)
            return rc;
        v[i] = now_s() - t0;
    }
    *pure = median(v, r);
    return 0;
}

/* Sleep mode: how long one layer's forward and backward take with BLAS
 * here (median of 5, the largest over the ranks), so the sleeps stand in
 * for the same math.  Collective over the world. */
static void calibrate(struct trainer *t)
{
    int w = t->o->width;
    float *wb = calloc(mlp_layer_numel(w), sizeof(float));
    float *g = calloc(mlp_layer_numel(w), sizeof(float));
    double fw[5], bw[5];
    mlp_init_layer(wb, w, 1, 0);
    mlp_batch(t->act[0], t->y, wb, w, t->rows, 1, 0, 0);
    for (int i = 0; i < 5; i++) {
        double t0 = now_s();
        mlp_forward(wb, t->act[0], t->act[1], w, t->rows, 1);
        double t1 = now_s();
        memcpy(t->da, t->act[1], (size_t)t->rows * w * sizeof(float));
        double t2 = now_s();
        mlp_backward(wb, t->act[0], t->act[1], t->da, t->db, g, w, t->rows, 1);
        fw[i] = t1 - t0;
        bw[i] = now_s() - t2;
    }
    double mine[2] = {median(fw, 5), median(bw, 5)}, all[2];
    free(wb);
    free(g);
    /* Every rank sleeps the same: the slowest calibration, so no rank
     * waits for another's longer sleep and calls it communication. */
    if (tide_allreduce(t->world, mine, all, 2, TIDE_FLOAT64, TIDE_MAX) != 0)
        memcpy(all, mine, sizeof all);
    t->fwd_s = all[0];
    t->bwd_s = all[1];
}

static void trainer_free(struct trainer *t)
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

static int trainer_alloc(struct trainer *t)
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
 * rank, or by rank 0 and broadcast (--init rank0). */
static int add_layers(struct trainer *t)
{
    size_t numels[2] = {(size_t)t->o->width * t->o->width, (size_t)t->o->width};
    float *wb = malloc(mlp_layer_numel(t->o->width) * sizeof(float));
    int rc = wb ? 0 : TIDE_ENOMEM;
    for (int l = 0, unit; rc == 0 && l < t->o->layers; l++) {
        if ((rc = tide_fsdp_add_unit(t->f, numels, 2, &unit)) != 0)
            break;
        if (!t->o->init_rank0 || t->rank == 0)
            mlp_init_layer(wb, t->o->width, t->o->seed, l);
        rc = tide_fsdp_set_params(t->f, unit, wb, t->o->init_rank0 ? 0 : -1);
    }
    free(wb);
    return rc ? fsdp_fail(t, "adding layers", rc) : 0;
}

static int trainer_init(struct trainer *t, const struct opts *o, tide_comm *world, int prefetch)
{
    tide_fsdp_config cfg;
    char why[256];
    memset(t, 0, sizeof *t);
    t->o = o;
    t->world = world;
    t->rank = tide_comm_rank(world);
    t->n = tide_comm_size(world);
    t->rows = o->batch;
    tide_fsdp_config_default(&cfg);
    cfg.strategy = o->strategy;
    cfg.hybrid_group_size = o->group;
    cfg.forward_prefetch = prefetch;
    cfg.backward_prefetch = prefetch > 0;
    cfg.budget_bytes = o->budget;
    cfg.comm_dtype = o->comm_dtype;
    int rc = tide_fsdp_create(world, &cfg, &t->f, why);
    if (rc != 0) {
        fprintf(stderr, "rank %d: %s\n", t->rank, why);
        return rc;
    }
    if ((rc = trainer_alloc(t)) != 0 || (rc = add_layers(t)) != 0)
        return rc;
    if (o->sleep)
        calibrate(t);
    return 0;
}

static void print_step(const struct opts *o, int s, const struct step_stats *st, double pure)
{
    char loss[32] = "-";
    if (!o->sleep)
        snprintf(loss, sizeof loss, "%.7e", st->loss);
    printf("step %3d  loss %-13s  step %8.2f ms  compute %8.2f ms  blocked %7.2f ms (fwd %.1f "
           "bwd %.1f sync %.1f)  overlap %5.1f %%  peak unsharded %zu B\n",
           s, loss, st->step_s * 1e3, st->compute_s * 1e3, st->blocked_s * 1e3, st->fwd_s * 1e3,
           st->bwd_s * 1e3, st->sync_s * 1e3, pure > 0 ? 100.0 * (1.0 - st->blocked_s / pure) : 0.0,
           st->peak);
    fflush(stdout);
}

/* Train o->steps steps; fills st[] (loss averaged over the world) and the
 * pure communication time of one step. */
static int train(tide_comm *world, const struct opts *o, int prefetch, struct step_stats *st,
                 double *pure, int verbose)
{
    struct trainer t;
    int rc = trainer_init(&t, o, world, prefetch);
    if (rc == 0)
        rc = pure_comm(&t, pure);
    if (rc == 0 && verbose && t.rank == 0) {
        printf("pure communication of one step (no compute, median of %d replays): %.2f ms\n",
               o->replays, *pure * 1e3);
        if (o->sleep)
            printf("compute sleeps per layer: forward %.2f ms, backward %.2f ms (BLAS, calibrated "
                   "here)\n", t.fwd_s * 1e3, t.bwd_s * 1e3);
    }
    for (int s = 0; rc == 0 && s < o->steps; s++) {
        tide_fsdp_stats fs;
        double loss = 0;
        tide_fsdp_stats_reset(t.f);
        t.compute_s = 0;
        double t0 = now_s();
        if ((rc = train_step(&t, s, &loss)) != 0)
            break;
        st[s].step_s = now_s() - t0;
        tide_fsdp_stats_get(t.f, &fs);
        st[s].compute_s = t.compute_s;
        st[s].blocked_s = fs.blocked_s;
        st[s].fwd_s = fs.blocked_forward_s;
        st[s].bwd_s = fs.blocked_backward_s;
        st[s].sync_s = fs.blocked_sync_s;
        st[s].peak = fs.peak_unsharded_bytes;
        if ((rc = tide_allreduce(world, &loss, &st[s].loss, 1, TIDE_FLOAT64, TIDE_AVG)) != 0)
            fprintf(stderr, "rank %d: loss all-reduce: %s\n", t.rank, tide_strerror(rc));
        if (o->budget && fs.peak_unsharded_bytes > o->budget) {
            fprintf(stderr, "rank %d: step %d: peak unsharded %zu B exceeds the budget %zu B\n",
                    t.rank, s, fs.peak_unsharded_bytes, o->budget);
            rc = TIDE_ENOMEM;
        }
        if (verbose && t.rank == 0)
            print_step(o, s, &st[s], *pure);
    }
    trainer_free(&t);
    return rc;
}

/* Medians over the steps after the first (which pays for warm-up). */
static void summarize(const struct opts *o, const struct step_stats *st, double *step,
                      double *compute, double *blocked, size_t *peak)
{
    int first = o->steps > 1, n = o->steps - first;
    double *a = malloc(3 * (size_t)(n > 0 ? n : 1) * sizeof *a);
    *peak = 0;
    for (int i = 0; i < n; i++) {
        a[i] = st[first + i].step_s;
        a[n + i] = st[first + i].compute_s;
        a[2 * n + i] = st[first + i].blocked_s;
    }
    for (int s = 0; s < o->steps; s++)
        *peak = st[s].peak > *peak ? st[s].peak : *peak;
    *step = median(a, n);
    *compute = median(a + n, n);
    *blocked = median(a + 2 * n, n);
    free(a);
}

static void print_summary(const struct opts *o, const struct step_stats *st, double pure)
{
    double step, compute, blocked;
    size_t peak;
    summarize(o, st, &step, &compute, &blocked, &peak);
    printf("median of steps %d..%d: step %.2f ms, compute %.2f ms, blocked %.2f ms = %.1f %% of "
           "the pure communication (%.2f ms) exposed, overlap %.1f %%; peak unsharded %zu B",
           o->steps > 1, o->steps - 1, step * 1e3, compute * 1e3, blocked * 1e3,
           100.0 * blocked / pure, pure * 1e3, 100.0 * (1.0 - blocked / pure), peak);
    if (o->budget)
        printf(" (budget %zu B)", o->budget);
    printf("\n");
}

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
            mlp_backward(use[l], t->act[l], t->act[l + 1], t->da, l > 0 ? t->db : NULL, g[l],
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
static int check(tide_comm *world, const struct opts *o, const struct step_stats *st)
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

static const char usage[] =
    "usage: tide-fsdp-train [options]   (launch with tide-run -n N -- ...)\n"
    "  --strategy full_shard|shard_grad_op|no_shard|hybrid_shard   (full_shard)\n"
    "  --group G            hybrid_shard group size (2 when the world is even, else 1)\n"
    "  --prefetch K         forward prefetch depth, 0 = off; backward prefetch when > 0 (1)\n"
    "  --steps N (20)  --layers L (8)  --width W (1024)  --batch B rows per rank (32)\n"
    "  --accum M            micro-steps per optimizer step, the first M-1 without sync (1)\n"
    "  --lr X (0.03)  --optim sgd|adam (sgd)  --seed S (1)  --replays R (3)\n"
    "  --comm-dtype float32|bfloat16   all-gather dtype (float32)\n"
    "  --budget BYTES       bound on unsharded parameter bytes (0 = none)\n"
    "  --init seed|rank0    seeded on every rank, or rank 0's values broadcast (seed)\n"
    "  --compute blas|sleep real math, or sleep as long as the math takes here (blas)\n"
    "  --check              compare every step's loss with one-process training (1e-5)\n"
    "  --compare-prefetch   train with prefetch 0, then with --prefetch (2 if 0), side by side\n";

/* Value of the option at argv[*i], or NULL (and a message) if missing. */
static const char *value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "tide-fsdp-train: %s needs a value\n%s", argv[*i], usage);
        return NULL;
    }
    return argv[++*i];
}

static int parse_word(const char *opt, const char *v, struct opts *o)
{
    if (strcmp(opt, "--strategy") == 0)
        return tide_fsdp_strategy_parse(v, &o->strategy);
    if (strcmp(opt, "--optim") == 0)
        return (o->adam = strcmp(v, "adam") == 0) || strcmp(v, "sgd") == 0 ? 0 : -1;
    if (strcmp(opt, "--comm-dtype") == 0) {
        o->comm_dtype = strcmp(v, "bfloat16") == 0 ? TIDE_BFLOAT16 : TIDE_FLOAT32;
        return strcmp(v, "bfloat16") == 0 || strcmp(v, "float32") == 0 ? 0 : -1;
    }
    if (strcmp(opt, "--init") == 0)
        return (o->init_rank0 = strcmp(v, "rank0") == 0) || strcmp(v, "seed") == 0 ? 0 : -1;
    if (strcmp(opt, "--compute") == 0)
        return (o->sleep = strcmp(v, "sleep") == 0) || strcmp(v, "blas") == 0 ? 0 : -1;
    return 1; /* not a word option */
}

static int parse_number(const char *opt, const char *v, struct opts *o)
{
    static const struct { const char *name; size_t at; } ints[] = {
        {"--group", offsetof(struct opts, group)},   {"--prefetch", offsetof(struct opts, prefetch)},
        {"--steps", offsetof(struct opts, steps)},   {"--layers", offsetof(struct opts, layers)},
        {"--width", offsetof(struct opts, width)},   {"--batch", offsetof(struct opts, batch)},
        {"--accum", offsetof(struct opts, accum)},   {"--replays", offsetof(struct opts, replays)},
    };
    char *end;
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        if (strcmp(opt, ints[k].name) == 0) {
            long x = strtol(v, &end, 10);
            *(int *)(void *)((char *)o + ints[k].at) = (int)x;
            return *end || x < 0 || x > 1000000 ? -1 : 0;
        }
    if (strcmp(opt, "--lr") == 0)
        return (o->lr = strtof(v, &end)), *end ? -1 : 0;
    if (strcmp(opt, "--seed") == 0)
        return (o->seed = strtoull(v, &end, 10)), *end ? -1 : 0;
    if (strcmp(opt, "--budget") == 0)
        return (o->budget = strtoull(v, &end, 10)), *end ? -1 : 0;
    return 1;
}

/* 0: run; 1: --help was printed; -1: a usage error was printed. */
static int parse(int argc, char **argv, struct opts *o, int world)
{
    *o = (struct opts){.prefetch = 1, .steps = 20, .layers = 8, .width = 1024, .batch = 32,
                       .accum = 1, .replays = 3, .lr = 0.03f, .seed = 1,
                       .comm_dtype = TIDE_FLOAT32};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *v;
        int rc = 1;
        if (strcmp(opt, "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        if (strcmp(opt, "--check") == 0)
            o->check = 1, rc = 0;
        else if (strcmp(opt, "--compare-prefetch") == 0)
            o->compare = 1, rc = 0;
        else if ((v = value(argc, argv, &i)) == NULL)
            return -1;
        else if ((rc = parse_word(opt, v, o)) == 1)
            rc = parse_number(opt, v, o);
        if (rc != 0) {
            fprintf(stderr, "tide-fsdp-train: bad option %s%s%s\n%s", opt, rc < 0 ? " " : "",
                    rc < 0 ? argv[i] : "", usage);
            return -1;
        }
    }
    if (o->group == 0)
        o->group = world % 2 == 0 ? 2 : 1;
    if (o->steps < 1 || o->layers < 1 || o->width < 1 || o->batch < 1 || o->accum < 1 ||
        (o->check && o->sleep)) {
        fprintf(stderr, "tide-fsdp-train: steps, layers, width, batch and accum must be >= 1, "
                        "and --check needs --compute blas\n");
        return -1;
    }
    return 0;
}

static void print_header(const struct opts *o, int n, int prefetch)
{
    printf("tide-fsdp-train: %s", tide_fsdp_strategy_name(o->strategy));
    if (o->strategy == TIDE_FSDP_HYBRID_SHARD)
        printf(" (groups of %d)", o->group);
    printf(" on %d ranks, %d layers of %dx%d + ReLU, %d rows per rank x %d micro-steps, %s, "
           "prefetch %d, all-gather in %s, compute %s\n",
           n, o->layers, o->width, o->width, o->batch, o->accum, o->adam ? "adam" : "sgd",
           prefetch, tide_dtype_name(o->comm_dtype), o->sleep ? "sleep" : "blas");
}

/* Prefetch off, then on, with the same model and data: side by side. */
static int compare(tide_comm *world, const struct opts *o)
{
    int on = o->prefetch > 0 ? o->prefetch : 2, rank = tide_comm_rank(world), rc;
    struct step_stats *a = calloc((size_t)o->steps, sizeof *a);
    struct step_stats *b = calloc((size_t)o->steps, sizeof *b);
    double pa = 0, pb = 0, sa, ca, ba, sb, cb, bb;
    size_t ka, kb;
    if (rank == 0)
        print_header(o, tide_comm_size(world), on);
    rc = a && b ? train(world, o, 0, a, &pa, 0) : TIDE_ENOMEM;
    if (rc == 0)
        rc = train(world, o, on, b, &pb, 0);
    if (rc == 0 && rank == 0) {
        printf("step | prefetch off: step ms  blocked ms  overlap %% | prefetch %d: step ms  "
               "blocked ms  overlap %%\n", on);
        for (int s = 0; s < o->steps; s++)
            printf("%4d | %22.2f %11.2f %9.1f | %19.2f %11.2f %9.1f\n", s, a[s].step_s * 1e3,
                   a[s].blocked_s * 1e3, 100 * (1 - a[s].blocked_s / pa), b[s].step_s * 1e3,
                   b[s].blocked_s * 1e3, 100 * (1 - b[s].blocked_s / pb));
        summarize(o, a, &sa, &ca, &ba, &ka);
        summarize(o, b, &sb, &cb, &bb, &kb);
        printf("median step: prefetch off %.2f ms (exposed %.1f %% of %.2f ms comm, peak %zu B), "
               "prefetch %d %.2f ms (exposed %.1f %% of %.2f ms, peak %zu B): %.2fx faster\n",
               sa * 1e3, 100 * ba / pa, pa * 1e3, ka, on, sb * 1e3, 100 * bb / pb, pb * 1e3, kb,
               sa / sb);
    }
    free(a);
    free(b);
    return rc;
}

static int run(tide_comm *world, const struct opts *o)
{
    struct step_stats *st = calloc((size_t)o->steps, sizeof *st);
    double pure = 0;
    int rank = tide_comm_rank(world);
    if (st == NULL)
        return TIDE_ENOMEM;
    if (rank == 0)
        print_header(o, tide_comm_size(world), o->prefetch);
    int rc = train(world, o, o->prefetch, st, &pure, 1);
    if (rc == 0 && rank == 0)
        print_summary(o, st, pure);
    if (rc == 0 && o->check)
        rc = check(world, o, st);
    free(st);
    return rc;
}

int main(int argc, char **argv)
{
    tide_comm *world;
    struct opts o;
    openblas_set_num_threads(1); /* the ranks share the cores; one thread each */
    int rc = tide_init(&world);
    if (rc != 0) {
        fprintf(stderr, "tide-fsdp-train: tide_init: %s\n", tide_strerror(rc));
        return 1;
    }
    if ((rc = parse(argc, argv, &o, tide_comm_size(world))) != 0) {
        tide_finalize(world);
        return rc > 0 ? 0 : 2; /* --help, or a usage error */
    }
    rc = o.compare ? compare(world, &o) : run(world, &o);
    if (rc != 0)
        fprintf(stderr, "tide-fsdp-train: rank %d failed: %s\n", tide_comm_rank(world),
                tide_err_name(rc));
    tide_finalize(world);
    return rc != 0;
}
