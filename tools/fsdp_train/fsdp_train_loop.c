/* fsdp_train_loop.c - the training loop of tide-fsdp-train: forward and
 * backward through the layers with acquire/release around each layer's
 * compute, the optimizer step, and the no-compute replay that measures a
 * step's pure communication. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/fsdp_train/fsdp_mlp.h"
#include "tools/fsdp_train/fsdp_train.h"

/* Compute starts: timed for the report, and a region of the TIDE_TRACE
 * timeline (so the trace shows the gathers running under it). */
static double compute_begin(struct trainer *t, const char *what, int layer)
{
    if (tide_trace_enabled(t->world)) {
        char label[32];
        snprintf(label, sizeof label, layer < 0 ? "%s" : "%s %d", what, layer);
        tide_trace_begin(t->world, label);
    }
    return train_now();
}

static void compute_end(struct trainer *t, double c0)
{
    t->compute_s += train_now() - c0;
    tide_trace_end(t->world);
}

static int forward(struct trainer *t, int step, int micro, double *loss)
{
    const struct opts *o = t->o;
    int rc, chunk = micro * t->n + t->rank;
    /* The first gather starts before the batch is made, so the batch's
     * math (a GEMM with the teacher) hides it.  Sleep mode sleeps for that
     * math too: without it, its steps had nothing to hide the first
     * gather behind, unlike the BLAS steps they stand in for. */
    if ((rc = tide_fsdp_begin_forward(t->f)) != 0)
        return trainer_fail(t, "begin_forward", rc);
    double cb = compute_begin(t, "batch", -1);
    if (o->sleep)
        train_sleep(t->batch_s);
    else
        mlp_batch(t->act[0], t->y, t->teacher, o->width, t->rows, o->seed, step,
                  (long)chunk * t->rows);
    compute_end(t, cb);
    for (int l = 0; l < o->layers; l++) {
        float *w;
        if ((rc = tide_fsdp_acquire(t->f, l, &w)) != 0)
            return trainer_fail(t, "acquire", rc);
        double c0 = compute_begin(t, "forward", l);
        if (o->sleep)
            train_sleep(t->fwd_s);
        else
            mlp_forward(w, t->act[l], t->act[l + 1], o->width, t->rows, l < o->layers - 1);
        compute_end(t, c0);
        if ((rc = tide_fsdp_release(t->f, l)) != 0)
            return trainer_fail(t, "release", rc);
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
        return trainer_fail(t, "begin_backward", rc);
    for (int l = o->layers - 1; l >= 0; l--) {
        float *w, *g;
        int fresh;
        if ((rc = tide_fsdp_acquire(t->f, l, &w)) != 0 ||
            (rc = tide_fsdp_grad_fresh(t->f, l, &g, &fresh)) != 0)
            return trainer_fail(t, "acquire/grad_fresh", rc);
        double c0 = compute_begin(t, "backward", l);
        /* Sleep mode leaves g as it is, fresh or not: the sleep stands
         * for the whole backward, writing g included (the accelerator's
         * work, not this CPU's).  No loss is computed there, so g's
         * values (whatever the recycled buffer held) only pass through
         * the reductions and the optimizer, whose cost does not depend
         * on them (subnormals aside).  The replay (replay_step) writes
         * none either: neither figure pays a zeroing the other does not. */
        if (o->sleep)
            train_sleep(t->bwd_s);
        else
            mlp_backward(w, t->act[l], t->act[l + 1], t->da, l > 0 ? t->db : NULL, g, !fresh,
                         o->width, t->rows, l < o->layers - 1);
        compute_end(t, c0);
        if ((rc = tide_fsdp_grad_ready(t->f, l)) != 0 || (rc = tide_fsdp_release(t->f, l)) != 0)
            return trainer_fail(t, "grad_ready/release", rc);
        if (t->die_in_backward && l == o->layers / 2)
            train_die(l); /* with reductions in flight, the worst moment */
        float *swap = t->da;
        t->da = t->db;
        t->db = swap;
    }
    if ((rc = tide_fsdp_sync_gradients(t->f)) != 0)
        return trainer_fail(t, "sync_gradients", rc);
    return 0;
}

static int optimize(struct trainer *t)
{
    tide_fsdp_adam_params ap = {t->o->lr, 0.9f, 0.999f, 1e-8f, 0.0f};
    tide_trace_begin(t->world, "optimizer"); /* a region of the TIDE_TRACE timeline */
    int rc = t->o->adam ? tide_fsdp_adam(t->f, &ap) : tide_fsdp_sgd(t->f, t->o->lr);
    tide_trace_end(t->world);
    return rc ? trainer_fail(t, "optimizer step", rc) : 0;
}

int train_step(struct trainer *t, int step, double *loss)
{
    int rc;
    *loss = 0;
    for (int m = 0; m < t->o->accum; m++) {
        if ((rc = tide_fsdp_set_sync(t->f, m == t->o->accum - 1)) != 0)
            return trainer_fail(t, "set_sync", rc);
        if ((rc = forward(t, step, m, loss)) != 0 || (rc = backward(t)) != 0)
            return rc;
    }
    *loss /= t->o->accum;
    return optimize(t);
}

/* The step's collectives with no compute: acquire/release everything,
 * make the gradients ready unwritten (tide_fsdp_grad_fresh: no zeroing,
 * as in a sleep-mode step), sync, and tell FSDP the parameters changed
 * without changing them.  That last call stands for the optimizer step:
 * it is what makes SHARD_GRAD_OP re-gather in the next forward, so
 * without it the replays of that strategy would gather nothing in
 * forward and measure less communication than a real step does. */
static int replay_step(struct trainer *t)
{
    int rc = tide_fsdp_begin_forward(t->f);
    float *w, *g;
    int fresh;
    for (int l = 0; rc == 0 && l < t->o->layers; l++)
        if ((rc = tide_fsdp_acquire(t->f, l, &w)) == 0)
            rc = tide_fsdp_release(t->f, l);
    if (rc == 0)
        rc = tide_fsdp_begin_backward(t->f);
    for (int l = t->o->layers - 1; rc == 0 && l >= 0; l--)
        if ((rc = tide_fsdp_acquire(t->f, l, &w)) == 0 &&
            (rc = tide_fsdp_grad_fresh(t->f, l, &g, &fresh)) == 0 &&
            (rc = tide_fsdp_grad_ready(t->f, l)) == 0)
            rc = tide_fsdp_release(t->f, l);
    if (rc == 0)
        rc = tide_fsdp_sync_gradients(t->f);
    if (rc == 0)
        rc = tide_fsdp_params_updated(t->f);
    return rc ? trainer_fail(t, "replay", rc) : 0;
}

/* The pure communication of a step for each trainer: the median of
 * o->replays no-compute replays, the trainers taking turns so that both
 * see the same moments of a noisy machine. */
static int pure_comm(struct trainer *t, int nruns, double *pure)
{
    enum { MAX_REPLAYS = 16 };
    double v[TRAIN_MAX_RUNS][MAX_REPLAYS];
    int r = t->o->replays < 1 ? 1 : t->o->replays > MAX_REPLAYS ? MAX_REPLAYS : t->o->replays;
    for (int i = 0; i < r; i++)
        for (int k = 0; k < nruns; k++) {
            double t0 = train_now();
            int rc = replay_step(&t[k]);
            if (rc != 0)
                return rc;
            v[k][i] = train_now() - t0;
        }
    for (int k = 0; k < nruns; k++)
        pure[k] = median_sort(v[k], (size_t)r);
    return 0;
}

/* One optimizer step of trainer t, measured into *st (st->loss: this
 * rank's loss; see average_losses). */
static int measured_step(struct trainer *t, int s, struct step_stats *st)
{
    tide_fsdp_stats fs;
    double loss = 0;
    tide_fsdp_stats_reset(t->f);
    t->compute_s = 0;
    double t0 = train_now();
    int rc = train_step(t, s, &loss);
    if (rc != 0)
        return rc;
    st->step_s = train_now() - t0;
    tide_fsdp_stats_get(t->f, &fs);
    st->compute_s = t->compute_s;
    st->blocked_s = fs.blocked_s;
    st->fwd_s = fs.blocked_forward_s;
    st->bwd_s = fs.blocked_backward_s;
    st->sync_s = fs.blocked_sync_s;
    st->peak = fs.peak_unsharded_bytes;
    st->loss = loss; /* this rank's; averaged over the world after the last step */
    if (t->o->budget && fs.peak_unsharded_bytes > t->o->budget) {
        fprintf(stderr, "rank %d: step %d: peak unsharded %zu B exceeds the budget %zu B\n",
                t->rank, s, fs.peak_unsharded_bytes, t->o->budget);
        rc = TIDE_ENOMEM;
    }
    return rc;
}

/* Average every step's loss over the world, in one all-reduce after
 * the last step.  Not per step: a blocking collective between steps
 * would run beside the gather FSDP starts for the next forward at the
 * optimizer step, outside the timed steps, and would hide that gather's
 * time (and the ranks' skew) from the figures.  Collective. */
static int average_losses(tide_comm *world, const struct opts *o, int nruns,
                          struct step_stats *const *st)
{
    size_t n = (size_t)nruns * (size_t)o->steps;
    double *loss = malloc(n * sizeof *loss);
    if (loss == NULL)
        return TIDE_ENOMEM;
    for (int k = 0; k < nruns; k++)
        for (int s = 0; s < o->steps; s++)
            loss[(size_t)k * o->steps + s] = st[k][s].loss;
    int rc = tide_allreduce(world, TIDE_IN_PLACE, loss, n, TIDE_FLOAT64, TIDE_AVG);
    if (rc != 0)
        fprintf(stderr, "rank %d: loss all-reduce: %s\n", tide_comm_rank(world),
                tide_strerror(rc));
    for (int k = 0; rc == 0 && k < nruns; k++)
        for (int s = 0; s < o->steps; s++)
            st[k][s].loss = loss[(size_t)k * o->steps + s];
    free(loss);
    return rc;
}

static void report_start(const struct trainer *t, const double *pure, int nruns)
{
    for (int k = 0; k < nruns; k++)
        printf("pure communication of one step%s (no compute, median of %d replays): %.2f ms\n",
               nruns > 1 ? (k ? " with prefetch" : " without prefetch") : "", t->o->replays,
               pure[k] * 1e3);
    if (t->o->sleep)
        printf("compute sleeps: per layer forward %.2f ms, backward %.2f ms; making a batch "
               "%.2f ms (%s)\n",
               t->fwd_s * 1e3, t->bwd_s * 1e3, t->batch_s * 1e3,
               t->o->sleep_fwd_ms > 0 ? "--sleep-ms" : "BLAS, calibrated here");
}

int train_steps(tide_comm *world, const struct opts *o, const int *prefetch, int nruns,
                struct step_stats *const *st, double *pure, int verbose)
{
    struct trainer t[TRAIN_MAX_RUNS];
    int rc = 0, made = 0;
    for (; rc == 0 && made < nruns; made++) /* a failed one is freed too */
        rc = trainer_init(&t[made], o, world, prefetch[made], made ? &t[0] : NULL);
    if (rc == 0)
        rc = pure_comm(t, nruns, pure);
    if (rc == 0 && verbose && t[0].rank == 0)
        report_start(&t[0], pure, nruns);
    for (int s = 0; rc == 0 && s < o->steps; s++)
        for (int k = 0; rc == 0 && k < nruns; k++)
            rc = measured_step(&t[k], s, &st[k][s]);
    if (rc == 0)
        rc = average_losses(world, o, nruns, st);
    for (int s = 0; rc == 0 && verbose && nruns == 1 && t[0].rank == 0 && s < o->steps; s++)
        report_step(o, s, &st[0][s], pure[0]);
    for (int k = 0; k < made; k++)
        trainer_free(&t[k]);
    return rc;
}
