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
 * --compare-prefetch trains twice, prefetch off and on, their steps
 * taking turns, side by side.
 * --compute sleep replaces each layer's math, and the batch's, by a
 * sleep as long as its BLAS version takes here, as if an accelerator
 * computed.
 *
 * This file runs one of the three modes; the pieces live beside it:
 * fsdp_train_args.c (options), fsdp_trainer.c (a rank's model, buffers
 * and sleep calibration), fsdp_train_loop.c (the steps and the
 * no-compute replay), fsdp_train_report.c (what is printed),
 * fsdp_train_check.c (--check against one process),
 * fsdp_train_elastic.c (--elastic: shrink and go on when ranks die),
 * fsdp_mlp.c (the math). */
#include <stdio.h>
#include <stdlib.h>

#include "tools/fsdp_train/fsdp_train.h"

/* OpenBLAS's own knob; declared here because cblas.h of other vendors
 * lacks it. */
void openblas_set_num_threads(int num_threads);
/* Prefetch off and on, with the same model and data, their steps taking
 * turns: side by side. */
static int compare(tide_comm *world, const struct opts *o)
{
    int depth[2] = {0, o->prefetch > 0 ? o->prefetch : 2}, rank = tide_comm_rank(world), rc;
    struct step_stats *st[2] = {calloc((size_t)o->steps, sizeof *st[0]),
                                calloc((size_t)o->steps, sizeof *st[1])};
    double pure[2] = {0, 0};
    if (rank == 0)
        report_header(o, tide_comm_size(world), depth[1]);
    rc = st[0] && st[1] ? train_steps(world, o, depth, 2, st, pure, 1) : TIDE_ENOMEM;
    if (rc == 0 && rank == 0)
        report_compare(o, st[0], pure[0], st[1], pure[1], depth[1]);
    free(st[0]);
    free(st[1]);
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
        report_header(o, tide_comm_size(world), o->prefetch);
    int rc = train_steps(world, o, &o->prefetch, 1, &st, &pure, 1);
    if (rc == 0 && rank == 0)
        report_summary(world, o, st, pure);
    if (rc == 0)
        report_ranks(world, o, st, pure);
    if (rc == 0 && o->check)
        rc = check_against_one_process(world, o, st);
    free(st);
    return rc;
}

int main(int argc, char **argv)
{
    tide_comm *world;
    struct opts o;
    openblas_set_num_threads(1); /* the ranks share the cores; one thread each */
    /* The command line first, so that --help and a usage error start
     * nothing: the world's size and our rank come from the launcher's
     * environment, as tide_init reads them. */
    tide_config cfg;
    tide_config_default(&cfg);
    bool cfg_ok = tide_config_from_env(&cfg) == 0;
    int rc = train_parse_args(argc, argv, &o, cfg.size, cfg.rank == 0);
    if (rc != 0)
        return rc > 0 ? 0 : 2; /* --help, or a usage error */
    if (!cfg_ok)
        return 1; /* tide said which variable */
    rc = tide_init_with(&world, &cfg);
    if (rc != 0) {
        fprintf(stderr, "tide-fsdp-train: tide_init: %s\n", tide_strerror(rc));
        return 1;
    }
    rc = o.elastic ? train_elastic(world, &o) : o.compare ? compare(world, &o) : run(world, &o);
    if (rc != 0)
        fprintf(stderr, "tide-fsdp-train: rank %d failed: %s\n", tide_comm_rank(world),
                tide_err_name(rc));
    tide_finalize(world);
    return rc != 0;
}
