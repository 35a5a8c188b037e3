/* fsdp_train_args.c - tide-fsdp-train's command line: getopt_long, with
 * -h, --help, --version, usage errors and numbers as every tool has them
 * (cli.h). */
#include <float.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tools/common/cli.h"
#include "tools/fsdp_train/fsdp_train.h"

/* The most of any count (steps, layers, ranks to kill...): far past any
 * run, and small enough for an int. */
enum { TRAIN_MAX_COUNT = 1000000 };

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
    "                       (SIGKILL) halfway through step S's backward\n"
    "  -h, --help           print this help; --version: tide's version\n"
    "Values go as --opt V or --opt=V.  Exit status: 0 trained (and checked); 1 a\n"
    "rank failed; 2 a usage error.\n";

/* Every option is long; getopt_long returns 0 for those with a value and
 * says which through its index, and the parsers below take it by name. */
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

/* The options whose value is a word; 1 when name is none of them. */
static int parse_word(const char *name, const char *v, struct opts *o)
{
    if (strcmp(name, "strategy") == 0)
        return tide_fsdp_strategy_parse(v, &o->strategy);
    if (strcmp(name, "optim") == 0)
        return (o->adam = strcmp(v, "adam") == 0) || strcmp(v, "sgd") == 0 ? 0 : -1;
    if (strcmp(name, "comm-dtype") == 0) {
        o->comm_dtype = strcmp(v, "bfloat16") == 0 ? TIDE_BFLOAT16 : TIDE_FLOAT32;
        return strcmp(v, "bfloat16") == 0 || strcmp(v, "float32") == 0 ? 0 : -1;
    }
    if (strcmp(name, "init") == 0)
        return (o->init_rank0 = strcmp(v, "rank0") == 0) || strcmp(v, "seed") == 0 ? 0 : -1;
    if (strcmp(name, "compute") == 0)
        return (o->sleep = strcmp(v, "sleep") == 0) || strcmp(v, "blas") == 0 ? 0 : -1;
    return 1;
}

/* "F,B[,D]": positive milliseconds per layer, forward then backward, and
 * for making the batch (a GEMM of a layer forward's shape: F if not given). */
static int parse_sleeps(const char *v, struct opts *o)
{
    char buf[96], *part[3];
    double ms[3];
    int n = cli_split(v, ',', buf, sizeof buf, part, 3);
    if (n < 2)
        return -1;
    for (int i = 0; i < n; i++)
        if (!cli_parse_double(part[i], 0.0, &ms[i]) || ms[i] == 0.0)
            return -1;
    o->sleep_fwd_ms = ms[0];
    o->sleep_bwd_ms = ms[1];
    o->sleep_batch_ms = n == 3 ? ms[2] : ms[0];
    o->sleep = 1;
    return 0;
}

/* "R@S[,R@S...]": at most TRAIN_MAX_KILLS pairs. */
static int parse_kills(const char *v, struct opts *o)
{
    char buf[160], *pair[TRAIN_MAX_KILLS];
    int n = cli_split(v, ',', buf, sizeof buf, pair, TRAIN_MAX_KILLS);
    for (int k = 0; k < n; k++) {
        char *at = strchr(pair[k], '@');
        if (at == NULL)
            return -1;
        *at = '\0';
        if (!cli_parse_int(pair[k], 0, TRAIN_MAX_COUNT, &o->kill_rank[k]) ||
            !cli_parse_int(at + 1, 0, TRAIN_MAX_COUNT, &o->kill_step[k]))
            return -1;
    }
    o->kills = n;
    return n > 0 ? 0 : -1;
}

/* The options whose value is a number or a list of them; 1 when name is
 * none of them. */
static int parse_number(const char *name, const char *v, struct opts *o)
{
    static const struct { const char *name; size_t at; int min; } ints[] = {
        {"group", offsetof(struct opts, group), 0}, /* 0: choose */
        {"prefetch", offsetof(struct opts, prefetch), 0},
        {"steps", offsetof(struct opts, steps), 1},   {"layers", offsetof(struct opts, layers), 1},
        {"width", offsetof(struct opts, width), 1},   {"batch", offsetof(struct opts, batch), 1},
        {"accum", offsetof(struct opts, accum), 1},   {"replays", offsetof(struct opts, replays), 0},
    };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        if (strcmp(name, ints[k].name) == 0)
            return cli_parse_int(v, ints[k].min, TRAIN_MAX_COUNT,
                                 (int *)(void *)((char *)o + ints[k].at)) ? 0 : -1;
    long l;
    double d;
    if (strcmp(name, "lr") == 0) {
        if (!cli_parse_double(v, 0.0, &d) || d > FLT_MAX)
            return -1;
        o->lr = (float)d;
        return 0;
    }
    if (strcmp(name, "seed") == 0)
        return cli_parse_long(v, 0, LONG_MAX, &l) ? (o->seed = (unsigned long long)l, 0) : -1;
    if (strcmp(name, "budget") == 0)
        return cli_parse_long(v, 0, LONG_MAX, &l) ? (o->budget = (size_t)l, 0) : -1;
    if (strcmp(name, "sleep-ms") == 0)
        return parse_sleeps(v, o);
    if (strcmp(name, "kill") == 0)
        return parse_kills(v, o);
    return 1;
}

/* --elastic and --kill with what they need, and --check with real
 * compute: NULL when the options go together, else why not. */
static const char *check_options(const struct opts *o, int world)
{
    if (o->check && o->sleep)
        return "--check needs --compute blas: sleep mode writes no gradient";
    if (o->kills && !o->elastic)
        return "--kill needs --elastic";
    if (o->elastic && o->strategy != TIDE_FSDP_NO_SHARD && o->strategy != TIDE_FSDP_HYBRID_SHARD)
        return "--elastic needs every parameter replicated on another rank: --strategy no_shard "
               "or hybrid_shard";
    if (o->elastic && (o->adam || o->check || o->compare))
        return "--elastic restores parameters only: it takes --optim sgd, and neither --check "
               "nor --compare-prefetch";
    for (int k = 0; k < o->kills; k++)
        if (o->kill_rank[k] >= world || o->kill_step[k] >= o->steps)
            return "--kill R@S needs a rank R below the world size and a step S below --steps";
    return NULL;
}

/* Option c (getopt's code; 0 with longs[at] for one with a value v):
 * 0 when taken, -1 when v is bad. */
/* cli.h's cli_take_fn: 0, or -1 for a bad value. */
static int take_option(void *opts, int c, int at, const char *v)
{
    struct opts *o = opts;
    switch (c) {
    case 'c': o->check = 1; return 0;
    case 'p': o->compare = 1; return 0;
    case 'e': o->elastic = 1; return 0;
    case 0: break;
    default: return -1; /* not in longs: cannot happen */
    }
    int rc = parse_word(longs[at].name, v, o);
    if (rc == 1)
        rc = parse_number(longs[at].name, v, o);
    return rc == 0 ? 0 : -1;
}

int train_parse_args(int argc, char **argv, struct opts *o, int world, bool speak)
{
    const struct cli_tool tool = {.name = "tide-fsdp-train", .usage = usage,
                                  .version = tide_version(), .longs = longs, .quiet = !speak};
    *o = (struct opts){.prefetch = 1, .steps = 20, .layers = 8, .width = 1024, .batch = 32,
                       .accum = 1, .replays = 3, .lr = -1, .seed = 1,
                       .comm_dtype = TIDE_FLOAT32};
    int rc = cli_parse(&tool, argc, argv, ":h", take_option, o);
    if (rc >= 0)
        return rc == 0 ? 1 : -1; /* --help or --version; or a usage error, said */
    if (o->group == 0)
        o->group = world % 2 == 0 ? 2 : 1;
    /* Adam's steps are lr-sized whatever the gradient's scale: with SGD's
     * 0.03 this model's loss reached 1e12 by the second step. */
    if (o->lr < 0)
        o->lr = o->adam ? 0.001f : 0.03f;
    const char *why = check_options(o, world);
    return why ? (cli_usage_error(&tool, "%s", why), -1) : 0;
}
