/* fsdp_train_args.c - tide-fsdp-train's command line. */
#include <getopt.h>
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
            return end == v || *end || x < 0 || x > 1000000 ? -1 : 0;
        }
    if (strcmp(opt, "--lr") == 0)
        return (o->lr = strtof(v, &end)), end == v || *end || !(o->lr >= 0) ? -1 : 0;
    if (strcmp(opt, "--seed") == 0)
        return (o->seed = strtoull(v, &end, 10)), end == v || *end || *v == '-' ? -1 : 0;
    if (strcmp(opt, "--budget") == 0)
        return (o->budget = strtoull(v, &end, 10)), end == v || *end || *v == '-' ? -1 : 0;
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

/* Every option is long; getopt_long returns 0 for them and says which
 * through its index, and the parsers above take it by name. */
static const struct option longs[] = {
    {"strategy", required_argument, NULL, 0}, {"group", required_argument, NULL, 0},
    {"prefetch", required_argument, NULL, 0}, {"steps", required_argument, NULL, 0},
    {"layers", required_argument, NULL, 0},   {"width", required_argument, NULL, 0},
    {"batch", required_argument, NULL, 0},    {"accum", required_argument, NULL, 0},
    {"optim", required_argument, NULL, 0},    {"lr", required_argument, NULL, 0},
    {"seed", required_argument, NULL, 0},     {"replays", required_argument, NULL, 0},
    {"comm-dtype", required_argument, NULL, 0}, {"budget", required_argument, NULL, 0},
    {"init", required_argument, NULL, 0},     {"compute", required_argument, NULL, 0},
    {"sleep-ms", required_argument, NULL, 0}, {"kill", required_argument, NULL, 0},
    {"check", no_argument, NULL, 'c'},        {"compare-prefetch", no_argument, NULL, 'p'},
    {"elastic", no_argument, NULL, 'e'},      {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0},
};

/* Option c (getopt's code; 0 with longs[at] for a valued one).  0 when
 * taken, 1 after --help or --version, -1 on a usage error (printed). */
static int take_option(int c, int at, const char *v, struct opts *o)
{
    switch (c) {
    case 'h': fputs(usage, stdout); return 1;
    case 'V': printf("tide-fsdp-train %s\n", tide_version()); return 1;
    case 'c': o->check = 1; return 0;
    case 'p': o->compare = 1; return 0;
    case 'e': o->elastic = 1; return 0;
    case 0: break;
    default: /* getopt said what */
        fputs("tide-fsdp-train: see tide-fsdp-train --help\n", stderr);
        return -1;
    }
    char opt[40];
    snprintf(opt, sizeof opt, "--%s", longs[at].name);
    int rc = parse_word(opt, v, o);
    if (rc == 1)
        rc = parse_number(opt, v, o);
    if (rc == 0)
        return 0;
    fprintf(stderr, "tide-fsdp-train: bad value '%s' for %s (see tide-fsdp-train --help)\n", v,
            opt);
    return -1;
}

/* 0: run; 1: --help or --version was printed; -1: a usage error was
 * printed. */
int train_parse_args(int argc, char **argv, struct opts *o, int world)
{
    *o = (struct opts){.prefetch = 1, .steps = 20, .layers = 8, .width = 1024, .batch = 32,
                       .accum = 1, .replays = 3, .lr = -1, .seed = 1,
                       .comm_dtype = TIDE_FLOAT32};
    int c, at = 0;
    while ((c = getopt_long(argc, argv, "h", longs, &at)) != -1) {
        int rc = take_option(c, at, optarg, o);
        if (rc != 0)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "tide-fsdp-train: unexpected argument '%s' (see tide-fsdp-train "
                        "--help)\n", argv[optind]);
        return -1;
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
