/* bench_common.c - the part tide-perf and tide-overlap share (see
 * bench_common.h):
 *   table    the collectives: names, TIDE_ALGO_* variable, busbw factor
 *   options  nccl-tests' spellings, sizes with K/M/G, --help
 *   job      tide_init, buffers, the sweep of sizes and how a size maps
 *            onto a call
 *   calls    posting each collective, cross-rank max/mean of a timing
 *   json     the array of records written by rank 0
 */
#include "tools/common/bench_common.h"
#include "tools/common/cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ table */

enum bus { BUS_NONE, BUS_ONE, BUS_RING, BUS_ALLREDUCE };

static const struct {
    const char *name;
    const char *algo_env; /* NULL: one algorithm, nothing to force */
    enum bus bus;
    bool per_rank;        /* count is per rank: size = count * n elements */
    bool reduces;         /* takes -o */
    bool rooted;          /* takes -r */
    bool inplace;         /* has a TIDE_IN_PLACE form */
} colls[COLL_COUNT] = {
    [COLL_ALLREDUCE] = {.name = "allreduce", .algo_env = "TIDE_ALGO_ALLREDUCE",
                        .bus = BUS_ALLREDUCE, .reduces = true, .inplace = true},
    [COLL_ALLGATHER] = {.name = "allgather", .algo_env = "TIDE_ALGO_ALLGATHER", .bus = BUS_RING,
                        .per_rank = true, .inplace = true},
    [COLL_REDUCE_SCATTER] = {.name = "reduce_scatter", .algo_env = "TIDE_ALGO_REDUCE_SCATTER",
                             .bus = BUS_RING, .per_rank = true, .reduces = true, .inplace = true},
    [COLL_BROADCAST] = {.name = "broadcast", .algo_env = "TIDE_ALGO_BROADCAST", .bus = BUS_ONE,
                        .rooted = true},
    [COLL_REDUCE] = {.name = "reduce", .algo_env = "TIDE_ALGO_REDUCE", .bus = BUS_ONE,
                     .reduces = true, .rooted = true, .inplace = true},
    [COLL_ALLTOALL] = {.name = "alltoall", .algo_env = "TIDE_ALGO_ALLTOALL", .bus = BUS_RING,
                       .per_rank = true},
    [COLL_GATHER] = {.name = "gather", .algo_env = "TIDE_ALGO_GATHER", .bus = BUS_RING,
                     .per_rank = true, .rooted = true},
    [COLL_SCATTER] = {.name = "scatter", .algo_env = "TIDE_ALGO_SCATTER", .bus = BUS_RING,
                      .per_rank = true, .rooted = true},
    [COLL_BARRIER] = {.name = "barrier", .bus = BUS_NONE},
};

const char *bench_coll_name(enum bench_coll coll) { return colls[coll].name; }

const char *bench_transport(const struct bench *b)
{
    int n = tide_comm_size(b->comm);
    const char *t = n > 1 ? tide_comm_transport(b->comm, (tide_comm_rank(b->comm) + 1) % n) : NULL;
    return t ? t : "self";
}
bool bench_coll_reduces(enum bench_coll coll) { return colls[coll].reduces; }
bool bench_coll_rooted(enum bench_coll coll) { return colls[coll].rooted; }
bool bench_coll_has_inplace(enum bench_coll coll) { return colls[coll].inplace; }

double bench_busbw_factor(enum bench_coll coll, int n)
{
    switch (colls[coll].bus) {
    case BUS_ONE:
        return 1.0;
    case BUS_RING:
        return (double)(n - 1) / n;
    case BUS_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    default:
        return 0.0;
    }
}

/* ---------------------------------------------------------------- options */

static const char shared_help[] =
    "  --op NAME            allreduce, allgather, reduce_scatter, broadcast, reduce,\n"
    "                       alltoall, gather, scatter, barrier (default allreduce)\n"
    "  -b, --minbytes SIZE  smallest size, suffixes K M G (default 8)\n"
    "  -e, --maxbytes SIZE  largest size (default 64M)\n"
    "  -f, --stepfactor F   multiply the size by F each step (default 2)\n"
    "  -i, --stepbytes SIZE add SIZE each step instead (with -f 1)\n"
    "  -n, --iters N        timed iterations per size (default 20)\n"
    "  -w, --warmup_iters N untimed iterations first (default 5)\n"
    "  -d, --datatype T     int8 uint8 int32 uint32 int64 uint64 half bfloat16\n"
    "                       float double (default float)\n"
    "  -o, --redop OP       sum prod min max avg (default sum)\n"
    "  -r, --root R         root of broadcast, reduce, gather, scatter (default 0)\n"
    "  -a, --algo NAME      force an algorithm (sets TIDE_ALGO_<OP>; names in\n"
    "                       docs/algorithms.md)\n"
    "  --json FILE          also write the results as a JSON array (rank 0)\n"
    "Size is nccl-tests' size: the larger of the send and receive buffers.\n";

/* Aliases accepted beside tide_dtype_name()'s nccl-tests names. */
static const struct {
    const char *alias;
    tide_dtype dtype;
} dtype_aliases[] = {
    {"fp16", TIDE_FLOAT16},    {"float16", TIDE_FLOAT16}, {"bf16", TIDE_BFLOAT16},
    {"fp32", TIDE_FLOAT32},    {"float32", TIDE_FLOAT32}, {"fp64", TIDE_FLOAT64},
    {"float64", TIDE_FLOAT64},
};

bool bench_parse_dtype(const char *s, tide_dtype *out)
{
    for (int d = 0; d < TIDE_DTYPE_COUNT; d++)
        if (strcmp(s, tide_dtype_name((tide_dtype)d)) == 0)
            return *out = (tide_dtype)d, true;
    for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
        if (strcmp(s, dtype_aliases[i].alias) == 0)
            return *out = dtype_aliases[i].dtype, true;
    return false;
}

bool bench_parse_redop(const char *s, tide_op *out)
{
    for (int o = 0; o < TIDE_OP_COUNT; o++)
        if (strcmp(s, tide_op_name((tide_op)o)) == 0)
            return *out = (tide_op)o, true;
    return false;
}

bool bench_parse_coll(const char *s, enum bench_coll *out)
{
    for (int c = 0; c < COLL_COUNT; c++)
        if (strcmp(s, colls[c].name) == 0)
            return *out = (enum bench_coll)c, true;
    return false;
}

/* "64M" -> 64 << 20; K, M and G are powers of 1024, as in nccl-tests. */
bool bench_parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || s[0] == '-')
        return false;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v > (SIZE_MAX >> 1) >> shift)
        return false;
    *out = (size_t)v << shift;
    return true;
}

/* Whether the value of option c is good: a refused one is named by
 * "bad value 'ARG' for " followed by *what. */
static bool take_value(int c, const char *arg, struct bench_opts *o, const char **what)
{
    long v = 0;
    bool ok = false;
    switch (c) {
    case 'O': *what = "--op"; return bench_parse_coll(arg, &o->coll);
    case 'b': *what = "-b (a size: 64K, 1M)"; return bench_parse_size(arg, &o->min_bytes);
    case 'e': *what = "-e (a size: 64K, 1M)"; return bench_parse_size(arg, &o->max_bytes);
    case 'i': *what = "-i (a size: 64K, 1M)"; return bench_parse_size(arg, &o->step_bytes);
    case 'f': *what = "-f (1 or more)"; return cli_parse_double(arg, 1.0, &o->step_factor);
    case 'n': *what = "-n (1 or more)"; return cli_parse_long(arg, 1, 100000000, &o->iters);
    case 'w': *what = "-w (0 or more)"; return cli_parse_long(arg, 0, 100000000, &o->warmup);
    case 'd': *what = "-d"; return bench_parse_dtype(arg, &o->dtype);
    case 'o': *what = "-o"; return bench_parse_redop(arg, &o->redop);
    case 'r': *what = "-r (a rank)"; ok = cli_parse_long(arg, 0, INT_MAX, &v); o->root = (int)v; break;
    case 'c': *what = "-c (0 or 1)"; ok = cli_parse_long(arg, 0, 1, &v); o->check = (int)v; break;
    case 't': *what = "-t (0 or more)"; ok = cli_parse_long(arg, 0, 1000000, &v); o->tests = (int)v; break;
    case 'C':
        *what = "--compute (busy or sleep)";
        o->compute_sleep = strcmp(arg, "sleep") == 0;
        return o->compute_sleep || strcmp(arg, "busy") == 0;
    case 'a': o->algo = arg; return true;
    case 'N': o->nonblocking = true; return true;
    case 'L': o->interleave = true; return true;
    case 'j': o->json = arg; return true;
    }
    return ok;
}

/* Which tool reads the options, into what (take_option's context). */
struct reading {
    const struct cli_tool *t;
    enum bench_tool tool;
    struct bench_opts *o;
};

/* Takes one option of either tool (cli.h's cli_take_fn): 0, or a usage
 * error said here, with words of its own for each option's values. */
static int take_option(void *reading, int c, int at, const char *arg)
{
    const struct reading *r = reading;
    const struct cli_tool *t = r->t;
    enum bench_tool tool = r->tool;
    (void)at;
    if ((c == 'c' || c == 'N') && tool != BENCH_PERF)
        return cli_usage_error(t, "%s is a tide-perf option", c == 'c' ? "-c" : "--nonblocking");
    if ((c == 't' || c == 'C' || c == 'L') && tool != BENCH_OVERLAP)
        return cli_usage_error(t, "%s is a tide-overlap option",
                               c == 't' ? "-t" : c == 'C' ? "--compute" : "--interleave");
    const char *what = "";
    if (take_value(c, arg, r->o, &what))
        return 0;
    return cli_usage_error(t, "bad value '%s' for %s", arg, what);
}

/* The checks between options, once all are read. */
static const char *check_options(const struct bench_opts *o)
{
    if (o->min_bytes > o->max_bytes)
        return "-b is larger than -e";
    if (o->step_factor <= 1.0 && o->step_bytes == 0)
        return "-f 1 needs -i with a size of 1 or more";
    if (o->algo && !colls[o->coll].algo_env)
        return "-a: barrier has one algorithm";
    return NULL;
}

/* Returns -1 to run, 0 after --help (printed by rank 0 alone),
 * BENCH_EXIT_USAGE on an error, said as every tool says one
 * (tools/common/cli.h).  Every rank explains an error: the first to exit
 * makes tide-run stop the others, maybe before they have written a
 * word. */
static int parse_options(int argc, char **argv, enum bench_tool tool, const char *usage,
                         bool print_help, struct bench_opts *o)
{
    static const struct option longs[] = {
        {"op", required_argument, NULL, 'O'},       {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'}, {"stepbytes", required_argument, NULL, 'i'},
        {"stepfactor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'}, {"datatype", required_argument, NULL, 'd'},
        {"redop", required_argument, NULL, 'o'},    {"root", required_argument, NULL, 'r'},
        {"algo", required_argument, NULL, 'a'},     {"check", required_argument, NULL, 'c'},
        {"tests", required_argument, NULL, 't'},    {"compute", required_argument, NULL, 'C'},
        {"json", required_argument, NULL, 'j'},     {"nonblocking", no_argument, NULL, 'N'},
        {"interleave", no_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},           {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct bench_opts){.min_bytes = 8, .max_bytes = 64u << 20, .step_bytes = 1u << 20,
                             .step_factor = 2.0, .iters = 20, .warmup = 5,
                             .dtype = TIDE_FLOAT32, .redop = TIDE_SUM};
    /* The usage text as cli_common prints it: the tool's, then the
     * options both tools share. */
    static char help[8192];
    snprintf(help, sizeof help, "%s%s", usage, shared_help);
    const char *name = strrchr(argv[0], '/');
    const struct cli_tool t = {.name = name ? name + 1 : argv[0], .usage = help,
                               .version = tide_version(), .longs = longs, .quiet = !print_help};
    struct reading r = {&t, tool, o};
    int rc = cli_parse(&t, argc, argv, ":b:e:i:f:n:w:d:o:r:a:c:t:h", take_option, &r);
    if (rc >= 0)
        return rc;
    const char *why = check_options(o);
    return why ? cli_usage_error(&t, "%s", why) : -1;
}

/* -------------------------------------------------------------------- job */

size_t bench_next_size(const struct bench_opts *opt, size_t bytes)
{
    if (opt->coll == COLL_BARRIER)
        return SIZE_MAX; /* one row: a barrier moves no data */
    double next = opt->step_factor > 1.0 ? (double)bytes * opt->step_factor
                                         : (double)bytes + (double)opt->step_bytes;
    if (next >= (double)(SIZE_MAX >> 1))
        return SIZE_MAX; /* past any -e parse_size accepts */
    return next >= (double)bytes + 1.0 ? (size_t)next : bytes + 1;
}

struct bench_shape bench_shape_of(const struct bench *b, size_t bytes)
{
    size_t es = tide_dtype_size(b->opt.dtype);
    size_t blocks = colls[b->opt.coll].per_rank ? (size_t)b->size : 1;
    if (b->opt.coll == COLL_BARRIER)
        return (struct bench_shape){0, 0};
    size_t count = bytes / es / blocks;
    return (struct bench_shape){count, count * blocks * es};
}

/* Forces the algorithm, then proves the name with a call of count 0 (the
 * library checks it at the call), so a typo is a usage error. */
static int force_algo(struct bench *b)
{
    if (!b->opt.algo)
        return 0;
    setenv(colls[b->opt.coll].algo_env, b->opt.algo, 1);
    tide_req *req;
    struct bench_shape none = {0, 0};
    int rc = bench_post(b, &none, false, &req);
    if (rc == TIDE_EINVAL) {
        fprintf(stderr, "-a %s: not an algorithm of %s (see docs/algorithms.md)\n",
                b->opt.algo, colls[b->opt.coll].name);
        return BENCH_EXIT_USAGE;
    }
    rc = rc ? rc : tide_wait(req, -1);
    if (rc == 0)
        tide_req_free(req);
    return rc ? bench_report("the -a check", rc), BENCH_EXIT_FAIL : 0;
}

static int setup(struct bench *b)
{
    b->rank = tide_comm_rank(b->comm);
    b->size = tide_comm_size(b->comm);
    if (bench_coll_rooted(b->opt.coll) && b->opt.root >= b->size) {
        fprintf(stderr, "-r %d: not a rank (the job has %d)\n", b->opt.root, b->size);
        return BENCH_EXIT_USAGE;
    }
    /* The largest size the sweep reaches, rounded as its calls will be. */
    size_t top = b->opt.min_bytes;
    for (size_t s = top; s <= b->opt.max_bytes; s = bench_next_size(&b->opt, s))
        top = s;
    b->cap = bench_shape_of(b, top).bytes;
    b->send = calloc(1, b->cap ? b->cap : 1);
    b->recv = calloc(1, b->cap ? b->cap : 1);
    if (!b->send || !b->recv) {
        fprintf(stderr, "out of memory for two buffers of %zu bytes\n", b->cap);
        return BENCH_EXIT_FAIL;
    }
    return force_algo(b);
}

int bench_start(int argc, char **argv, enum bench_tool tool, const char *usage, struct bench *b)
{
    *b = (struct bench){0};
    /* Every rank parses the same argv; rank 0 alone prints --help. */
    tide_config cfg;
    tide_config_default(&cfg);
    bool cfg_ok = tide_config_from_env(&cfg) == 0;
    int rc = parse_options(argc, argv, tool, usage, cfg.rank == 0, &b->opt);
    if (rc >= 0)
        return rc;
    if (!cfg_ok)
        return BENCH_EXIT_FAIL; /* tide logged which variable */
    rc = tide_init_with(&b->comm, &cfg);
    if (rc)
        return bench_report("tide_init", rc), BENCH_EXIT_FAIL;
    b->progress = cfg.progress;
    rc = setup(b);
    return rc ? bench_end(b, rc) : -1;
}

int bench_end(struct bench *b, int status)
{
    free(b->send);
    free(b->recv);
    b->send = b->recv = NULL;
    int rc = tide_finalize(b->comm);
    b->comm = NULL;
    return rc ? bench_report("tide_finalize", rc), BENCH_EXIT_FAIL : status;
}

/* ------------------------------------------------------------------ calls */

/* The input argument of the measured call. */
static const void *input_of(const struct bench *b, bool inplace)
{
    /* In place, as in nccl-tests, every rank's input of a reduce is in
     * recv; TIDE_IN_PLACE itself is for the root only. */
    if (inplace && b->opt.coll == COLL_REDUCE && b->rank != b->opt.root)
        return b->recv;
    return inplace ? TIDE_IN_PLACE : b->send;
}

int bench_post(struct bench *b, const struct bench_shape *s, bool inplace, tide_req **req)
{
    tide_comm *w = b->comm;
    const struct bench_opts *o = &b->opt;
    const void *in = input_of(b, inplace);
    switch (o->coll) {
    case COLL_ALLREDUCE:
        return tide_iallreduce(w, in, b->recv, s->count, o->dtype, o->redop, req);
    case COLL_ALLGATHER:
        return tide_iallgather(w, in, b->recv, s->count, o->dtype, req);
    case COLL_REDUCE_SCATTER:
        return tide_ireduce_scatter(w, in, b->recv, s->count, o->dtype, o->redop, req);
    case COLL_BROADCAST:
        return tide_ibroadcast(w, b->recv, s->count, o->dtype, o->root, req);
    case COLL_REDUCE:
        return tide_ireduce(w, in, b->recv, s->count, o->dtype, o->redop, o->root, req);
    case COLL_ALLTOALL:
        return tide_ialltoall(w, b->send, b->recv, s->count, o->dtype, req);
    case COLL_GATHER:
        return tide_igather(w, b->send, b->recv, s->count, o->dtype, o->root, req);
    case COLL_SCATTER:
        return tide_iscatter(w, b->send, b->recv, s->count, o->dtype, o->root, req);
    default:
        return tide_ibarrier(w, req);
    }
}

int bench_call(struct bench *b, const struct bench_shape *s, bool inplace)
{
    tide_comm *w = b->comm;
    const struct bench_opts *o = &b->opt;
    const void *in = input_of(b, inplace);
    switch (o->coll) {
    case COLL_ALLREDUCE:
        return tide_allreduce(w, in, b->recv, s->count, o->dtype, o->redop);
    case COLL_ALLGATHER:
        return tide_allgather(w, in, b->recv, s->count, o->dtype);
    case COLL_REDUCE_SCATTER:
        return tide_reduce_scatter(w, in, b->recv, s->count, o->dtype, o->redop);
    case COLL_BROADCAST:
        return tide_broadcast(w, b->recv, s->count, o->dtype, o->root);
    case COLL_REDUCE:
        return tide_reduce(w, in, b->recv, s->count, o->dtype, o->redop, o->root);
    case COLL_ALLTOALL:
        return tide_alltoall(w, b->send, b->recv, s->count, o->dtype);
    case COLL_GATHER:
        return tide_gather(w, b->send, b->recv, s->count, o->dtype, o->root);
    case COLL_SCATTER:
        return tide_scatter(w, b->send, b->recv, s->count, o->dtype, o->root);
    default:
        return tide_barrier(w);
    }
}

int bench_run_once(struct bench *b, const struct bench_shape *s, bool inplace,
                   char algo[BENCH_ALGO_LEN])
{
    tide_req *req;
    int rc = bench_post(b, s, inplace, &req);
    if (rc)
        return bench_report(colls[b->opt.coll].name, rc);
    rc = tide_wait(req, -1);
    if (rc)
        fprintf(stderr, "%s of %zu bytes failed: %s\n", colls[b->opt.coll].name, s->bytes,
                tide_req_message(req));
    else if (algo && strcmp(algo, tide_req_algorithm(req)) != 0) /* no printf per call */
        snprintf(algo, BENCH_ALGO_LEN, "%s", tide_req_algorithm(req));
    tide_req_free(req);
    return rc;
}

double bench_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int bench_max(struct bench *b, double *v)
{
    int rc = tide_allreduce(b->comm, TIDE_IN_PLACE, v, 1, TIDE_FLOAT64, TIDE_MAX);
    return rc ? bench_report("the max over ranks", rc) : 0;
}

int bench_mean(struct bench *b, double *v)
{
    int rc = tide_allreduce(b->comm, TIDE_IN_PLACE, v, 1, TIDE_FLOAT64, TIDE_AVG);
    return rc ? bench_report("the mean over ranks", rc) : 0;
}

int bench_report(const char *what, int rc)
{
    fprintf(stderr, "%s failed: %s (%s)\n", what, tide_strerror(rc), tide_err_name(rc));
    return rc;
}

/* ------------------------------------------------------------------- json */

int bench_json_open(struct bench *b, struct bench_json *j)
{
    *j = (struct bench_json){0};
    if (!b->opt.json)
        return 0;
    int32_t ok = 1;
    if (b->rank == 0 && !(j->f = fopen(b->opt.json, "w"))) {
        fprintf(stderr, "--json %s: %s\n", b->opt.json, strerror(errno));
        ok = 0;
    }
    /* Every rank learns it, so all stop together instead of losing rank 0. */
    int rc = tide_allreduce(b->comm, TIDE_IN_PLACE, &ok, 1, TIDE_INT32, TIDE_MIN);
    if (rc || !ok) {
        if (j->f)
            fclose(j->f);
        j->f = NULL;
        return rc ? bench_report("--json agreement", rc) : -1;
    }
    if (j->f)
        fputs("[", j->f);
    return 0;
}

FILE *bench_json_record(struct bench_json *j)
{
    if (j->f)
        fputs(j->records++ ? ",\n  " : "\n  ", j->f);
    return j->f;
}

int bench_json_close(struct bench_json *j, const char *path)
{
    if (!j->f)
        return 0;
    fputs("\n]\n", j->f);
    bool bad = ferror(j->f) != 0;
    if (fclose(j->f) != 0 || bad) {
        fprintf(stderr, "--json %s: writing failed\n", path);
        return -1;
    }
    j->f = NULL;
    return 0;
}
