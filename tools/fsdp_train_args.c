/* fsdp_train_args.c - tide-fsdp-train's command line. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_train.h"

static const char usage[] =
    "usage: tide-fsdp-train [options]   (launch with tide-run -n N -- ...)\n"
    "  --strategy full_shard|shard_grad_op|no_shard|hybrid_shard   (full_shard)\n"
    "  --group G            hybrid_shard group size (2 when the world is even, else 1)\n"
    "  --prefetch K         forward prefetch depth, 0 = off; backward prefetch when > 0 (1)\n"
    "  --steps N (20)  --layers L (8)  --width W (1024)  --batch B rows per rank (32)\n"
    "  --accum M            micro-steps per optimizer step, the first M-1 without sync (1)\n"
    "  --optim sgd|adam (sgd)  --lr X (sgd 0.03, adam 0.001)  --seed S (1)  --replays R (3)\n"
    "  --comm-dtype float32|bfloat16   all-gather dtype (float32)\n"
    "  --budget BYTES       bound on unsharded parameter bytes (0 = none)\n"
    "  --init seed|rank0    seeded on every rank, or rank 0's values broadcast (seed)\n"
    "  --compute blas|sleep real math, or sleep as long as the math takes here (blas)\n"
    "  --sleep-ms F,B[,D]   sleep F ms per layer forward, B backward, D making the batch\n"
    "                       (default F); implies --compute sleep: fixed sleeps for A/B runs\n"
    "  --check              compare every step's loss with one-process training (1e-5)\n"
    "  --compare-prefetch   train with prefetch 0 and with --prefetch (2 if 0), steps taking turns\n"
    "  --elastic            go on when ranks die: shrink to the survivors, rebuild, redo the\n"
    "                       step (no_shard or hybrid_shard, sgd; launch with tide-run --keep-going)\n"
    "  --kill R@S[,R@S...]  with --elastic: rank R (of the starting world) kills itself\n"
    "                       (SIGKILL) halfway through step S's backward\n";

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

/* "F,B[,D]": positive milliseconds per layer, forward then backward, and
 * for making the batch (a GEMM of a layer forward's shape: F if not given). */
static int parse_sleeps(const char *v, struct opts *o)
{
    char *end;
    o->sleep_fwd_ms = strtod(v, &end);
    if (*end != ',')
        return -1;
    o->sleep_bwd_ms = strtod(end + 1, &end);
    o->sleep_batch_ms = o->sleep_fwd_ms;
    if (*end == ',')
        o->sleep_batch_ms = strtod(end + 1, &end);
    o->sleep = 1;
    return *end || !(o->sleep_fwd_ms > 0) || !(o->sleep_bwd_ms > 0) || !(o->sleep_batch_ms > 0)
               ? -1
               : 0;
}

/* "R@S[,R@S...]": at most TRAIN_MAX_KILLS pairs. */
static int parse_kills(const char *v, struct opts *o)
{
    char *end;
    for (o->kills = 0; o->kills < TRAIN_MAX_KILLS; v = end + 1) {
        long r = strtol(v, &end, 10), s;
        if (end == v || *end != '@' || r < 0)
            return -1;
        s = strtol(v = end + 1, &end, 10);
        if (end == v || s < 0 || r > 1000000 || s > 1000000)
            return -1;
        o->kill_rank[o->kills] = (int)r;
        o->kill_step[o->kills++] = (int)s;
        if (*end != ',')
            return *end ? -1 : 0;
    }
    return -1;
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
        return (o->lr = strtof(v, &end)), *end || !(o->lr >= 0) ? -1 : 0;
    if (strcmp(opt, "--seed") == 0)
        return (o->seed = strtoull(v, &end, 10)), *end ? -1 : 0;
    if (strcmp(opt, "--budget") == 0)
        return (o->budget = strtoull(v, &end, 10)), *end ? -1 : 0;
    if (strcmp(opt, "--sleep-ms") == 0)
        return parse_sleeps(v, o);
    if (strcmp(opt, "--kill") == 0)
        return parse_kills(v, o);
    return 1;
}

/* --elastic and --kill with what they need; 0 or -1 (printed). */
static int check_elastic(const struct opts *o, int world)
{
    const char *why = NULL;
    if (o->kills && !o->elastic)
        why = "--kill needs --elastic";
    else if (o->elastic && o->strategy != TIDE_FSDP_NO_SHARD &&
             o->strategy != TIDE_FSDP_HYBRID_SHARD)
        why = "--elastic needs every parameter replicated on another rank: --strategy no_shard "
              "or hybrid_shard";
    else if (o->elastic && (o->adam || o->check || o->compare))
        why = "--elastic restores parameters only: it takes --optim sgd, and neither --check "
              "nor --compare-prefetch";
    for (int k = 0; why == NULL && k < o->kills; k++)
        if (o->kill_rank[k] >= world || o->kill_step[k] >= o->steps)
            why = "--kill R@S needs a rank R below the world size and a step S below --steps";
    if (why == NULL)
        return 0;
    fprintf(stderr, "tide-fsdp-train: %s\n", why);
    return -1;
}

/* 0: run; 1: --help was printed; -1: a usage error was printed. */
int train_parse_args(int argc, char **argv, struct opts *o, int world)
{
    *o = (struct opts){.prefetch = 1, .steps = 20, .layers = 8, .width = 1024, .batch = 32,
                       .accum = 1, .replays = 3, .lr = -1, .seed = 1,
                       .comm_dtype = TIDE_FLOAT32};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *v;
        int rc = 1;
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        if (strcmp(opt, "--version") == 0) {
            printf("tide-fsdp-train %s\n", tide_version());
            return 1;
        }
        if (strcmp(opt, "--check") == 0)
            o->check = 1, rc = 0;
        else if (strcmp(opt, "--compare-prefetch") == 0)
            o->compare = 1, rc = 0;
        else if (strcmp(opt, "--elastic") == 0)
            o->elastic = 1, rc = 0;
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
    /* Adam's steps are lr-sized whatever the gradient's scale: with SGD's
     * 0.03 this model's loss reached 1e12 by the second step. */
    if (o->lr < 0)
        o->lr = o->adam ? 0.001f : 0.03f;
    if (o->steps < 1 || o->layers < 1 || o->width < 1 || o->batch < 1 || o->accum < 1 ||
        (o->check && o->sleep)) {
        fprintf(stderr, "tide-fsdp-train: steps, layers, width, batch and accum must be >= 1, "
                        "and --check needs --compute blas\n");
        return -1;
    }
    return check_elastic(o, world);
}
