/* fsdp_train.h - what the files of tide-fsdp-train share: the options,
 * one step's figures, one rank's trainer, and the calls between the
 * files (see fsdp_train.c for the map). */
#ifndef TIDE_FSDP_TRAIN_H
#define TIDE_FSDP_TRAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "tide.h"
#include "tide_fsdp.h"
#include "tools/common/median.h"

#define TRAIN_MAX_KILLS 8

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
    /* --sleep-ms: fixed sleeps instead of calibrating (per layer; the batch) */
    double sleep_fwd_ms, sleep_bwd_ms, sleep_batch_ms;
    /* --elastic, and --kill RANK@STEP,...: those ranks of the starting
     * world kill themselves in that step's backward */
    int elastic, kills;
    int kill_rank[TRAIN_MAX_KILLS], kill_step[TRAIN_MAX_KILLS];
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
    double fwd_s, bwd_s, batch_s; /* sleep mode: per layer, and making the batch */
    double compute_s;
    int die_in_backward; /* --kill: SIGKILL this rank halfway through backward */
};

/* fsdp_train_args.c: 0 run; 1 after --help or --version (printed when
 * `speak`: rank 0 alone); -1 a usage error was printed (by every rank:
 * the first to exit makes tide-run stop the others).  world is the
 * number of ranks (for defaults). */
int train_parse_args(int argc, char **argv, struct opts *o, int world, bool speak);

/* fsdp_trainer.c */
double train_now(void);   /* monotonic seconds */
void train_sleep(double s);
/* Print why an FSDP call failed (with FSDP's message); returns rc. */
int trainer_fail(struct trainer *t, const char *call, int rc);
/* Buffers only (the one-process reference uses them too). */
int trainer_alloc(struct trainer *t);
/* The FSDP context over t->world (hybrid groups of `group` ranks) and
 * one unit per layer, with the seeded parameters when seed is nonzero,
 * else zeros for the caller to set.  Collective. */
int trainer_fsdp(struct trainer *t, int prefetch, int group, int seed);
/* The FSDP context with forward prefetch `prefetch`, the layers, the
 * buffers and, in sleep mode, the sleeps: --sleep-ms, like_t's (so that
 * runs compared side by side sleep alike), or calibrated.  Collective. */
int trainer_init(struct trainer *t, const struct opts *o, tide_comm *world, int prefetch,
                 const struct trainer *like_t);
void trainer_free(struct trainer *t);

/* fsdp_train_loop.c: train o->steps steps with each of nruns (at most
 * TRAIN_MAX_RUNS) prefetch depths, the runs' steps taking turns, so that
 * a noisy machine slows them alike.  Fills st[k][] (loss averaged over
 * the world) and pure[k], the pure communication of one step; prints
 * each step on rank 0 when verbose and nruns == 1, after the last step
 * (nothing between steps but FSDP and the bookkeeping).  Collective. */
#define TRAIN_MAX_RUNS 2
/* One optimizer step over o->accum micro-steps; *loss is this rank's
 * mean.  Collective over t->world (FSDP's communicators). */
int train_step(struct trainer *t, int step, double *loss);
int train_steps(tide_comm *world, const struct opts *o, const int *prefetch, int nruns,
                struct step_stats *const *st, double *pure, int verbose);

/* fsdp_train_report.c */
void report_header(const struct opts *o, int n, int prefetch);
void report_step(const struct opts *o, int s, const struct step_stats *st, double pure);
/* The medians, then the headline: the share of the communication that
 * hid behind compute, where rank 0's progress thread ran, and why little
 * hid when it had no CPU of its own (ranks >= the host's CPUs, or a
 * launch that did not place it). */
void report_summary(tide_comm *world, const struct opts *o, const struct step_stats *st,
                    double pure);
/* The least and the most any rank was blocked (median per step), on
 * rank 0: the figures above are rank 0's own, and a rank that ends its
 * compute first also waits for the slowest, which no prefetch can
 * hide.  And the share hidden on the critical path: from each step's
 * least blocked rank, the one the others waited for, so what is left is
 * communication and not another rank's compute.  Collective. */
void report_ranks(tide_comm *world, const struct opts *o, const struct step_stats *st,
                  double pure);
/* Prefetch off (a, pure communication pa) and on (b, pb) side by side. */
void report_compare(const struct opts *o, const struct step_stats *a, double pa,
                    const struct step_stats *b, double pb, int on);

/* fsdp_train_check.c: rank 0 trains in one process and compares every
 * step's loss; every rank gets the verdict (0 or TIDE_EMISMATCH). */
int check_against_one_process(tide_comm *world, const struct opts *o, const struct step_stats *st);

/* fsdp_train_elastic.c: --elastic, training that shrinks and goes on
 * when ranks die; train_die is --kill's SIGKILL. */
int train_elastic(tide_comm *world, const struct opts *o);
void train_die(int layer);

#endif
