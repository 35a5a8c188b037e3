/* fsdp_train_elastic.c - tide-fsdp-train --elastic: training that goes
 * on when ranks die, MPI ULFM's way.
 *
 *   tide-run --keep-going -n 4 -- tide-fsdp-train --elastic --strategy hybrid_shard --kill 3@4
 *
 * Each step starts by copying this rank's shards aside (the snapshot),
 * trains, and all-reduces the loss; then the live ranks agree
 * (tide_comm_agree) whether every one of them finished.  A rank whose
 * step failed has already revoked FSDP's communicators and its own, so
 * nobody keeps waiting for the dead.  If one did not finish, the
 * survivors shrink the communicator to the ranks alive, make a new FSDP
 * context there, piece the step's starting parameters together from
 * their snapshots and redo the step.  That needs a copy of every shard
 * on some survivor: no_shard (every rank has everything) and
 * hybrid_shard (each group holds a whole copy) lose nothing to one death
 * per group.  Only SGD: Adam's moments are not in the snapshot.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/fsdp_train/fsdp_train.h"

/* This rank's shards at the start of the step being trained. */
struct snapshot {
    size_t *numel;  /* per unit: its elements (without padding) */
    size_t *offset; /* per unit: where this rank's shard starts in the unit */
    size_t *count;  /* per unit: the shard's length (padding included) */
    float **params; /* per unit: count floats */
};

struct elastic {
    const struct opts *o;
    struct trainer t;    /* t.world is comm */
    struct snapshot snap;
    tide_comm *world;    /* from tide_init; finalized by main */
    tide_comm *comm;     /* world, or the last shrink's result */
    int me;              /* this rank in the starting world */
    int *members;        /* comm's ranks, as ranks of the starting world */
    int group;           /* hybrid_shard group size on comm */
    int recoveries;
};

void train_die(int layer)
{
    fprintf(stderr, "--kill: this rank kills itself (SIGKILL) in the backward of layer %d\n",
            layer);
    fflush(NULL);
    raise(SIGKILL);
}

/* Whether this rank (me, of the starting world) dies in step s. */
static int dies_in(const struct opts *o, int me, int s)
{
    for (int k = 0; k < o->kills; k++)
        if (o->kill_rank[k] == me && o->kill_step[k] == s)
            return 1;
    return 0;
}

static int snapshot_take(struct elastic *e)
{
    struct snapshot *sn = &e->snap;
    int units = e->o->layers;
    if (sn->numel == NULL) {
        sn->numel = calloc((size_t)units, sizeof *sn->numel);
        sn->offset = calloc((size_t)units, sizeof *sn->offset);
        sn->count = calloc((size_t)units, sizeof *sn->count);
        sn->params = calloc((size_t)units, sizeof *sn->params);
        if (!sn->numel || !sn->offset || !sn->count || !sn->params)
            return TIDE_ENOMEM;
    }
    for (int u = 0; u < units; u++) {
        float *p;
        size_t count, offset;
        int rc = tide_fsdp_shard(e->t.f, u, &p, NULL, &count, &offset);
        if (rc != 0)
            return trainer_fail(&e->t, "snapshot", rc);
        if (count != sn->count[u]) { /* the first step, or a new layout */
            free(sn->params[u]);
            if ((sn->params[u] = malloc(count * sizeof(float))) == NULL)
                return TIDE_ENOMEM;
        }
        memcpy(sn->params[u], p, count * sizeof(float));
        sn->numel[u] = tide_fsdp_unit_numel(e->t.f, u);
        sn->offset[u] = offset;
        sn->count[u] = count;
    }
    return 0;
}

static void snapshot_free(struct snapshot *sn, int units)
{
    for (int u = 0; sn->params && u < units; u++)
        free(sn->params[u]);
    free(sn->params);
    free(sn->numel);
    free(sn->offset);
    free(sn->count);
}

/* Step s and the loss's all-reduce.  On failure, revoke what others may
 * wait on: FSDP's communicators and comm. */
static int step(struct elastic *e, int s, double *loss)
{
    e->t.die_in_backward = dies_in(e->o, e->me, s);
    int rc = train_step(&e->t, s, loss);
    if (rc == 0 && (rc = tide_allreduce(e->comm, TIDE_IN_PLACE, loss, 1, TIDE_FLOAT64,
                                        TIDE_AVG)) != 0)
        fprintf(stderr, "rank %d: loss all-reduce: %s\n", e->t.rank, tide_strerror(rc));
    if (rc != 0) {
        tide_fsdp_revoke(e->t.f);
        tide_comm_revoke(e->comm);
    }
    return rc;
}

/* Whether every rank's snapshot of unit u covers all of it (no_shard, or
 * hybrid groups of one): then nothing needs sending.  span[r * per + 2u]
 * is rank r's offset in unit u, the next its count. */
static int held_by_all(const uint64_t *span, size_t per, int n, int u, size_t numel)
{
    for (int r = 0; r < n; r++)
        if (span[r * per + 2 * u] != 0 || span[r * per + 2 * u + 1] < numel)
            return 0;
    return 1;
}

/* Unit u's parameters into full: each stretch of it is broadcast by the
 * lowest rank whose snapshot holds it.  Every rank walks the same spans,
 * so they make the same broadcasts.  Collective over t->world. */
static int restore_unit(const struct trainer *t, const struct snapshot *sn, int u,
                        const uint64_t *span, size_t per, float *full)
{
    size_t at = 0, numel = sn->numel[u];
    if (held_by_all(span, per, t->n, u, numel)) {
        memcpy(full, sn->params[u], numel * sizeof(float));
        return 0;
    }
    while (at < numel) {
        int root = -1;
        size_t end = 0;
        for (int r = 0; r < t->n && root < 0; r++) {
            uint64_t off = span[r * per + 2 * u], cnt = span[r * per + 2 * u + 1];
            if (off <= at && at < off + cnt)
                root = r, end = off + cnt < numel ? off + cnt : numel;
        }
        if (root < 0) {
            fprintf(stderr, "rank %d: layer %d: elements %zu.. were held only by lost ranks\n",
                    t->rank, u, at);
            return TIDE_EPEER;
        }
        if (root == t->rank)
            memcpy(full + at, sn->params[u] + (at - sn->offset[u]), (end - at) * sizeof(float));
        int rc = tide_broadcast(t->world, full + at, end - at, TIDE_FLOAT32, root);
        if (rc != 0)
            return rc;
        at = end;
    }
    return 0;
}

/* Give the new FSDP context the parameters of the step's start, pieced
 * together from the survivors' snapshots.  Collective over t->world. */
static int restore(struct elastic *e)
{
    struct trainer *t = &e->t;
    const struct snapshot *sn = &e->snap;
    int units = e->o->layers;
    size_t per = 2 * (size_t)units, most = 0;
    uint64_t *span = malloc(per * ((size_t)t->n + 1) * sizeof *span);
    for (int u = 0; span && u < units; u++) {
        span[2 * u] = sn->offset[u];
        span[2 * u + 1] = sn->count[u];
        most = sn->numel[u] > most ? sn->numel[u] : most;
    }
    float *full = malloc(most * sizeof(float));
    int rc = span && full ? 0 : TIDE_ENOMEM;
    if (rc == 0)
        rc = tide_allgather(t->world, span, span + per, per, TIDE_UINT64);
    for (int u = 0; rc == 0 && u < units; u++)
        if ((rc = restore_unit(t, sn, u, span + per, per, full)) == 0 &&
            (rc = tide_fsdp_set_params(t->f, u, full, -1)) != 0)
            trainer_fail(t, "set_params", rc);
    free(span);
    free(full);
    return rc;
}

/* The largest hybrid group size, at most the old one, that divides n. */
static int group_for(int n, int group)
{
    while (group > 1 && n % group != 0)
        group--;
    return group;
}

/* Print, on the new rank 0, who was lost and how long recovering took:
 * the slowest survivor's figures, s[0] agreeing that the step failed,
 * s[1] shrinking, s[2] rebuilding, s[3] all of it, from this rank's
 * failure to now.  Collective over comm. */
static int report_recovery(struct elastic *e, const int *old, int old_n, int old_group,
                           int step, double *s)
{
    int rc = tide_allreduce(e->comm, TIDE_IN_PLACE, s, 4, TIDE_FLOAT64, TIDE_MAX);
    if (rc != 0 || e->t.rank != 0)
        return rc;
    printf("elastic: step %d failed; lost rank%s", step, old_n - e->t.n > 1 ? "s" : "");
    for (int i = 0, k, lost = 0; i < old_n; i++) {
        for (k = 0; k < e->t.n && e->members[k] != old[i]; k++)
            ;
        if (k == e->t.n)
            printf("%s%d", lost++ ? "," : " ", old[i]);
    }
    printf(" (of the starting world); %d ranks go on\n", e->t.n);
    if (e->o->strategy == TIDE_FSDP_HYBRID_SHARD)
        printf("elastic: hybrid_shard groups of %d -> %d ranks\n", old_group, e->group);
    printf("elastic: recovered in %.1f ms: agreeing that the step failed %.1f ms (until the "
           "last survivor noticed), shrink %.1f ms, new FSDP context and the step's starting "
           "parameters %.1f ms; redoing step %d\n",
           s[3] * 1e3, s[0] * 1e3, s[1] * 1e3, s[2] * 1e3, step);
    fflush(stdout);
    return 0;
}

/* The step failed somewhere: shrink to the live ranks, rebuild FSDP
 * there from the snapshots.  t_fail: when this rank's step ended; t0:
 * when the agreement said it failed; step_rc: how it ended here. */
static int recover(struct elastic *e, int step, double t_fail, double t0, int step_rc)
{
    struct trainer *t = &e->t;
    tide_comm *smaller = NULL;
    int rc = tide_comm_shrink(e->comm, &smaller);
    if (rc != 0) {
        fprintf(stderr, "rank %d: shrink: %s\n", t->rank, tide_strerror(rc));
        return rc;
    }
    if (tide_comm_size(smaller) == t->n) { /* a failure that a redo would only repeat */
        if (t->rank == 0)
            fprintf(stderr, "elastic: step %d failed but no rank was lost: not redoing it\n",
                    step);
        tide_comm_free(smaller);
        return step_rc ? step_rc : TIDE_EREVOKED;
    }
    double t1 = train_now();
    tide_fsdp_revoke(t->f); /* nothing left in flight for destroy to wait out */
    tide_fsdp_destroy(t->f);
    t->f = NULL;
    if (e->comm != e->world)
        tide_comm_free(e->comm);
    int *old = e->members, old_n = t->n, old_group = e->group;
    e->comm = t->world = smaller;
    t->rank = tide_comm_rank(smaller);
    t->n = tide_comm_size(smaller);
    e->group = group_for(t->n, e->group);
    e->recoveries++;
    e->members = malloc((size_t)t->n * sizeof *e->members);
    rc = e->members ? tide_allgather(smaller, &e->me, e->members, 1, TIDE_INT32) : TIDE_ENOMEM;
    if (rc == 0 && (rc = trainer_fsdp(t, e->o->prefetch, e->group, 0)) == 0)
        rc = restore(e);
    double s[4] = {t0 - t_fail, t1 - t0, train_now() - t1, train_now() - t_fail};
    if (rc == 0)
        rc = report_recovery(e, old, old_n, old_group, step, s);
    free(old);
    return rc;
}

/* FNV-1a over the bytes, so ranks can compare their parameters cheaply. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* After training: every survivor must hold the same parameters.  Their
 * squared norm is printed too: runs that differ only in strategy must
 * agree on it up to float rounding (the test compares no_shard, whose
 * recovery copies locally, with hybrid_shard, whose recovery sends).
 * Collective over comm; TIDE_EMISMATCH when they differ. */
static int same_params(struct elastic *e)
{
    struct trainer *t = &e->t;
    uint64_t h[2] = {14695981039346656037ull, 0};
    double norm2 = 0;
    size_t numel = tide_fsdp_unit_numel(t->f, 0);
    float *full = malloc(numel * sizeof(float));
    int rc = full ? 0 : TIDE_ENOMEM;
    for (int u = 0; rc == 0 && u < e->o->layers; u++) {
        if ((rc = tide_fsdp_get_params(t->f, u, full)) != 0)
            break;
        h[0] = fnv1a(h[0], full, numel * sizeof(float));
        for (size_t i = 0; i < numel; i++)
            norm2 += (double)full[i] * full[i];
    }
    free(full);
    h[1] = ~h[0]; /* the MIN of both: the smallest and the largest hash */
    if (rc == 0)
        rc = tide_allreduce(e->comm, TIDE_IN_PLACE, h, 2, TIDE_UINT64, TIDE_MIN);
    if (rc == 0 && h[0] != ~h[1])
        rc = TIDE_EMISMATCH;
    if (t->rank == 0 && (rc == 0 || rc == TIDE_EMISMATCH))
        printf(rc == 0 ? "elastic: the %d ranks hold the same parameters (hash %016llx, "
                         "squared norm %.9g)\n"
                       : "elastic: the %d ranks hold different parameters (%llx, %.9g)\n",
               t->n, (unsigned long long)h[0], norm2);
    return rc;
}

/* Train o->steps steps, redoing a step after each recovery. */
static int train_loop(struct elastic *e)
{
    double first = 0, last = 0;
    int rc = 0;
    for (int s = 0; rc == 0 && s < e->o->steps;) {
        double t0 = train_now(), loss = 0;
        if ((rc = snapshot_take(e)) != 0)
            break;
        int step_rc = step(e, s, &loss), ok = step_rc == 0;
        double t_fail = train_now();
        if ((rc = tide_comm_agree(e->comm, &ok)) != 0) {
            fprintf(stderr, "rank %d: agree: %s\n", e->t.rank, tide_strerror(rc));
            break;
        }
        if (!ok) {
            rc = recover(e, s, t_fail, train_now(), step_rc);
            continue;
        }
        if (e->t.rank == 0)
            printf("step %3d  loss %.6f  %8.2f ms  %d ranks\n", s, loss, (train_now() - t0) * 1e3,
                   e->t.n);
        fflush(stdout);
        first = s == 0 ? loss : first;
        last = loss;
        s++;
    }
    if (rc == 0 && e->t.rank == 0)
        printf("elastic: %d steps, loss %.6f -> %.6f, %d recover%s, %d ranks at the end\n",
               e->o->steps, first, last, e->recoveries, e->recoveries == 1 ? "y" : "ies", e->t.n);
    return rc;
}

int train_elastic(tide_comm *world, const struct opts *o)
{
    struct elastic e = {.o = o, .world = world, .comm = world, .group = o->group};
    e.me = tide_comm_rank(world);
    int n = tide_comm_size(world), rc = trainer_init(&e.t, o, world, o->prefetch, NULL);
    if (rc == 0 && (e.members = malloc((size_t)n * sizeof *e.members)) == NULL)
        rc = TIDE_ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++)
        e.members[i] = i;
    if (rc == 0 && e.me == 0)
        printf("tide-fsdp-train --elastic: %s on %d ranks, %d layers of %d x %d, batch %d per "
               "rank, sgd lr %g\n",
               tide_fsdp_strategy_name(o->strategy), n, o->layers, o->width, o->width, o->batch,
               (double)o->lr);
    if (rc == 0)
        rc = train_loop(&e);
    if (rc == 0)
        rc = same_params(&e);
    trainer_free(&e.t);
    snapshot_free(&e.snap, o->layers);
    free(e.members);
    if (e.comm != world)
        tide_comm_free(e.comm);
    return rc;
}
