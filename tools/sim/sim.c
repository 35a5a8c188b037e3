/* sim.c - tide-sim: one collective on thousands of simulated ranks, in one
 * process, over the simulated network's alpha-beta model (tide.h,
 * "The simulated network").  No data moves (timing only), so 4096 ranks
 * of 64 MiB each cost what the engine's bookkeeping costs.
 *
 *   tide-sim --op allreduce --ranks 1024 --bytes 64M --alpha 5us --beta-gbps 12.5
 *   tide-sim --sweep --op allreduce [--ranks-list 4,64,1024] [-b 1K -e 64M -f 4]
 *
 * It prints the virtual completion time, the alpha-beta lower bound of
 * the collective and the textbook cost of the algorithm that ran, their
 * ratios, the traffic per rank, and the host memory per simulated rank.
 * --sweep runs every algorithm at every size and group size and names
 * the fastest next to tide's own choice: how select.c's thresholds for
 * large groups were set (docs/algorithms.md).
 *
 * Sizes are nccl-tests' "size" (bench_common.h): the vector of an
 * allreduce, the whole output of an all-gather, the whole input of a
 * reduce-scatter. */
#include "tools/common/bench_common.h"
#include "tools/common/cli.h"
#include "tide_sim.h"

#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_RANKS = 1 << 20, MAX_LIST = 32 };

struct sim_opts {
    struct bench_opts b; /* op, dtype, redop, root, algo, sizes */
    int ranks;
    int list[MAX_LIST], nlist;       /* --ranks-list: the sweep's group sizes */
    double alpha_s, bandwidth, jitter_s;
    int per_host;                    /* ranks per host; 0: one level */
    double host_alpha_s, host_bandwidth;
    bool sweep;
};

/* One run's outcome. */
struct outcome {
    double time_s;
    char algo[BENCH_ALGO_LEN];
    double msgs, bytes;         /* per rank, mean */
    uint64_t msgs_max, bytes_max;
    double mem_per_rank;        /* bytes of host memory */
    size_t shape_bytes;         /* the size after rounding to whole elements */
    int rc;
};

/* ---- the alpha-beta costs ---- */

static double log2_ceil(int p)
{
    return p > 1 ? ceil(log2((double)p)) : 0;
}

/* The lower bound on any algorithm's time (Chan et al., "Collective
 * communication: theory, practice, and experience", 2007): a latency
 * term, since data must reach every rank through a tree at best, plus the
 * bytes some rank must send or receive at full port speed. */
static double lower_bound(enum bench_coll c, int p, double n, double a, double B)
{
    double lat = log2_ceil(p) * a, part = p > 1 ? (p - 1.0) / p : 0;
    switch (c) {
    case COLL_ALLREDUCE: return lat + 2 * part * n / B;
    case COLL_BROADCAST:
    case COLL_REDUCE: return p > 1 ? lat + n / B : 0;
    case COLL_BARRIER: return lat;
    default: return lat + part * n / B; /* all-gather, reduce-scatter, all-to-all */
    }
}

/* The textbook cost of the algorithm, or a negative number if unknown. */
static double model(enum bench_coll c, const char *algo, int p, double n, double a, double B)
{
    double lg = log2_ceil(p), part = p > 1 ? (p - 1.0) / p : 0;
    if (p == 1)
        return 0;
    if (c == COLL_ALLREDUCE && !strcmp(algo, "ring"))
        return 2 * (p - 1) * a + 2 * part * n / B;
    if (c == COLL_ALLREDUCE && !strcmp(algo, "recursive_doubling"))
        return lg * (a + n / B);
    if (c == COLL_ALLREDUCE && !strcmp(algo, "rabenseifner"))
        return 2 * lg * a + 2 * part * n / B;
    if ((c == COLL_ALLGATHER || c == COLL_REDUCE_SCATTER) && !strcmp(algo, "ring"))
        return (p - 1) * a + part * n / B;
    if (c == COLL_ALLGATHER || c == COLL_REDUCE_SCATTER) /* bruck, doubling, halving */
        return lg * a + part * n / B;
    if ((c == COLL_BROADCAST || c == COLL_REDUCE) && !strcmp(algo, "binomial"))
        return lg * (a + n / B);
    if (c == COLL_ALLTOALL)
        return (p - 1) * a + part * n / B;
    return -1;
}

/* ---- one run ---- */

static double rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

static void force_algo(enum bench_coll c, const char *algo)
{
    char env[64] = "TIDE_ALGO_";
    size_t k = strlen(env);
    for (const char *s = bench_coll_name(c); *s && k < sizeof env - 1; s++)
        env[k++] = (char)toupper((unsigned char)*s);
    env[k] = '\0';
    if (algo)
        setenv(env, algo, 1);
    else
        unsetenv(env);
}

static void gather_stats(tide_sim *sim, int n, struct outcome *o)
{
    double msgs = 0, bytes = 0;
    for (int r = 0; r < n; r++) {
        tide_sim_stats st;
        tide_sim_stats_of(sim, r, &st);
        msgs += (double)st.msgs_sent;
        bytes += (double)st.bytes_sent;
        o->msgs_max = st.msgs_sent > o->msgs_max ? st.msgs_sent : o->msgs_max;
        o->bytes_max = st.bytes_sent > o->bytes_max ? st.bytes_sent : o->bytes_max;
    }
    o->msgs = msgs / n;
    o->bytes = bytes / n;
}

/* Post the collective on every rank of a fresh network and run it. */
static struct outcome run_one(const struct sim_opts *so, int n, size_t bytes, const char *algo,
                              void *send, void *recv, size_t cap)
{
    struct outcome o = {0};
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    cfg.alpha_s = so->alpha_s;
    cfg.bandwidth = so->bandwidth;
    cfg.jitter_s = so->jitter_s;
    cfg.ranks_per_host = so->per_host;
    cfg.host_alpha_s = so->host_alpha_s;
    cfg.host_bandwidth = so->host_bandwidth;
    cfg.timing_only = 1;
    cfg.timeout_s = 3600;
    tide_comm **comms = malloc((size_t)n * sizeof *comms);
    tide_req **reqs = calloc((size_t)n, sizeof *reqs);
    tide_sim *sim = NULL;
    double rss0 = rss_bytes();
    o.rc = comms && reqs ? tide_sim_create(n, &cfg, &sim, comms) : TIDE_ENOMEM;
    force_algo(so->b.coll, algo);
    for (int r = 0; !o.rc && r < n; r++) {
        struct bench b = {.comm = comms[r], .rank = r, .size = n, .opt = so->b,
                          .send = send, .recv = recv, .cap = cap};
        struct bench_shape s = bench_shape_of(&b, bytes);
        o.shape_bytes = s.bytes;
        o.rc = bench_post(&b, &s, false, &reqs[r]);
    }
    if (!o.rc) {
        tide_sim_run(sim);
        o.mem_per_rank = (rss_bytes() - rss0) / n;
        o.time_s = (double)tide_sim_time_ns(sim) / 1e9;
        snprintf(o.algo, sizeof o.algo, "%s", tide_req_algorithm(reqs[0]));
        gather_stats(sim, n, &o);
        for (int r = 0; r < n && !o.rc; r++)
            o.rc = tide_wait(reqs[r], 0);
    }
    for (int r = 0; r < n; r++)
        tide_req_free(reqs[r]);
    tide_sim_destroy(sim);
    free(comms);
    free(reqs);
    force_algo(so->b.coll, NULL);
    return o;
}

/* ---- printing ---- */

static void print_size(double bytes, char *out, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

static void print_time(double s, char *out, size_t len)
{
    if (s >= 1)
        snprintf(out, len, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(out, len, "%.3f ms", s * 1e3);
    else
        snprintf(out, len, "%.2f us", s * 1e6);
}

static int report_one(const struct sim_opts *so, const struct outcome *o, double wall)
{
    size_t bytes = o->shape_bytes;
    int p = so->ranks;
    char a[32], b[32], c[32], d[32], e[32], f[32];
    if (o->rc) {
        fprintf(stderr, "tide-sim: %s failed: %s\n", bench_coll_name(so->b.coll),
                tide_strerror(o->rc));
        return 1;
    }
    double lb = lower_bound(so->b.coll, p, (double)bytes, so->alpha_s, so->bandwidth);
    double md = model(so->b.coll, o->algo, p, (double)bytes, so->alpha_s, so->bandwidth);
    print_size((double)bytes, a, sizeof a);
    printf("# tide-sim: %s of %s (%s%s%s) on %d simulated ranks\n", bench_coll_name(so->b.coll),
           a, tide_dtype_name(so->b.dtype), bench_coll_reduces(so->b.coll) ? ", " : "",
           bench_coll_reduces(so->b.coll) ? tide_op_name(so->b.redop) : "", p);
    printf("# model: alpha %g us per message, %g GB/s per port\n", so->alpha_s * 1e6,
           so->bandwidth / 1e9);
    print_time(o->time_s, a, sizeof a);
    print_time(lb, b, sizeof b);
    printf("algorithm             %s\n", o->algo);
    printf("virtual time          %s\n", a);
    printf("lower bound           %s   (ratio %.3f)\n", b, lb > 0 ? o->time_s / lb : 1.0);
    if (md >= 0) {
        print_time(md, c, sizeof c);
        printf("algorithm's model     %s   (ratio %.3f)\n", c, md > 0 ? o->time_s / md : 1.0);
    }
    print_size(o->bytes, d, sizeof d);
    print_size((double)o->bytes_max, e, sizeof e);
    print_size(o->mem_per_rank, f, sizeof f);
    printf("messages per rank     %.1f (max %llu)\n", o->msgs, (unsigned long long)o->msgs_max);
    printf("bytes sent per rank   %s (max %s)\n", d, e);
    printf("host memory per rank  %s\n", f);
    printf("wall time             %.2f s\n", wall);
    return 0;
}

/* ---- the sweep ---- */

static const char *const *algos_of(enum bench_coll c)
{
    static const char *const allreduce[] = {"ring", "recursive_doubling", "rabenseifner", "hier",
                                            NULL};
    static const char *const allgather[] = {"ring", "bruck", "recursive_doubling", NULL};
    static const char *const rs[] = {"ring", "recursive_halving", NULL};
    static const char *const bcast[] = {"binomial", "chain", NULL};
    static const char *const none[] = {NULL};
    switch (c) {
    case COLL_ALLREDUCE: return allreduce;
    case COLL_ALLGATHER: return allgather;
    case COLL_REDUCE_SCATTER: return rs;
    case COLL_BROADCAST: return bcast;
    default: return none;
    }
}

static int sweep_point(const struct sim_opts *so, int p, size_t bytes, void *send, void *recv,
                       size_t cap)
{
    const char *const *names = algos_of(so->b.coll);
    char sz[32], t[32];
    struct bench probe = {.size = p, .opt = so->b};
    bytes = bench_shape_of(&probe, bytes).bytes;
    if (!bytes && so->b.coll != COLL_BARRIER)
        return 0; /* less than an element per rank */
    print_size((double)bytes, sz, sizeof sz);
    printf("%6d %10s", p, sz);
    double best = INFINITY;
    const char *best_name = "-";
    for (int i = 0; names[i]; i++) {
        struct outcome o = run_one(so, p, bytes, names[i], send, recv, cap);
        if (o.rc || strcmp(o.algo, names[i])) { /* failed, or cannot serve this group */
            printf(" %12s", "-");
            continue;
        }
        print_time(o.time_s, t, sizeof t);
        printf(" %12s", t);
        if (o.time_s < best) {
            best = o.time_s;
            best_name = names[i];
        }
    }
    struct outcome d = run_one(so, p, bytes, NULL, send, recv, cap);
    if (d.rc)
        return bench_report("the default algorithm", d.rc);
    double lb = lower_bound(so->b.coll, p, (double)bytes, so->alpha_s, so->bandwidth);
    printf("  %-18s %-18s %6.2f %6.2f\n", best_name, d.algo, isfinite(best) ? d.time_s / best : 1,
           lb > 0 ? d.time_s / lb : 1);
    fflush(stdout);
    return 0;
}

static int sweep(const struct sim_opts *so, void *send, void *recv, size_t cap)
{
    const char *const *names = algos_of(so->b.coll);
    printf("# tide-sim sweep: %s, alpha %g us, %g GB/s per port; virtual times\n",
           bench_coll_name(so->b.coll), so->alpha_s * 1e6, so->bandwidth / 1e9);
    if (so->per_host)
        printf("# hosts of %d ranks sharing that port; inside a host %g us, %g GB/s\n",
               so->per_host, so->host_alpha_s * 1e6, so->host_bandwidth / 1e9);
    printf("# %4s %10s", "ranks", "size");
    for (int i = 0; names[i]; i++)
        printf(" %12.12s", names[i]);
    printf("  %-18s %-18s %6s %6s\n", "fastest", "tide chose", "/best", "/bound");
    for (int i = 0; i < so->nlist; i++) {
        int p = so->list[i];
        for (size_t bytes = so->b.min_bytes; bytes && bytes <= so->b.max_bytes;
             bytes = bench_next_size(&so->b, bytes))
            if (sweep_point(so, p, bytes, send, recv, cap))
                return BENCH_EXIT_FAIL;
    }
    return 0;
}

/* ---- options ---- */

static const char usage[] =
    "usage: tide-sim --op OP --ranks N --bytes SIZE [options]\n"
    "       tide-sim --sweep --op OP [--ranks-list N,N,...] [-b MIN] [-e MAX] [-f FACTOR] [options]\n"
    "  --op OP            allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall, barrier\n"
    "  --ranks N          simulated ranks (1 .. 1048576)\n"
    "  -b, --bytes SIZE   nccl-tests size, with K, M or G (e.g. 64M)\n"
    "  --sweep            every algorithm at every size and group size, the fastest\n"
    "                     beside tide's choice; sizes from -b (default 1K) to -e\n"
    "                     (default 64M), times -f (default 4) each step\n"
    "  --ranks-list N,N,...\n"
    "                     the sweep's group sizes (default 4,16,64,256,1024,4096)\n"
    "  --alpha TIME       latency per message: ns, us, ms or s (default 5us)\n"
    "  --beta-gbps G      bandwidth of each rank's send and receive port, GB/s (default 12.5)\n"
    "  --jitter TIME      random extra delay per message (default 0)\n"
    "  --ranks-per-host N hosts of N ranks: --alpha and --beta-gbps are then each\n"
    "                     host's network port (shared by its ranks), and inside a\n"
    "                     host messages cost --host-alpha (default 0.5us) and\n"
    "                     --host-gbps (default 50)\n"
    "  -d DTYPE, -o OP    element type (default float) and reduction (default sum)\n"
    "  -r ROOT            root of broadcast and reduce (default 0)\n"
    "  -a ALGO            force an algorithm (TIDE_ALGO_<OP>)\n"
    "  -h, --help         print this help; --version: tide's version\n";

/* "5us" -> 5e-6 seconds; false when malformed. */
static bool parse_time(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    double unit = !strcmp(end, "ns") ? 1e-9 : !strcmp(end, "us") ? 1e-6
                : !strcmp(end, "ms") ? 1e-3 : !strcmp(end, "s") || !*end ? 1 : -1;
    if (isspace((unsigned char)*s) || end == s || unit < 0 || !(v >= 0) || !isfinite(v))
        return false;
    *out = v * unit;
    return true;
}

/* A rate in GB/s, above 0, as bytes per second. */
static bool parse_gbps(const char *s, double *out)
{
    double g;
    if (!cli_parse_double(s, 0.0, &g) || g == 0.0)
        return false;
    *out = g * 1e9;
    return true;
}

/* "4,64,1024": the sweep's group sizes, each a whole number of ranks. */
static bool parse_ranks_list(const char *v, struct sim_opts *so)
{
    char buf[256], *part[MAX_LIST];
    int n = cli_split(v, ',', buf, sizeof buf, part, MAX_LIST);
    for (int i = 0; i < n; i++)
        if (!cli_parse_int(part[i], 1, MAX_RANKS, &so->list[i]))
            return false;
    so->nlist = n;
    return n > 0;
}

/* Apply option c (getopt's code) with its argument v: true if v is good. */
static bool take(struct sim_opts *so, int c, const char *v)
{
    switch (c) {
    case 'S': so->sweep = true; return true;
    case 'O': return bench_parse_coll(v, &so->b.coll);
    case 'n': return cli_parse_int(v, 1, MAX_RANKS, &so->ranks);
    case 'L': return parse_ranks_list(v, so);
    case 'b': return bench_parse_size(v, &so->b.min_bytes);
    case 'e': return bench_parse_size(v, &so->b.max_bytes);
    case 'f': return cli_parse_double(v, 1.0, &so->b.step_factor) && so->b.step_factor > 1;
    case 'A': return parse_time(v, &so->alpha_s);
    case 'J': return parse_time(v, &so->jitter_s);
    case 'B': return parse_gbps(v, &so->bandwidth);
    case 'P': return cli_parse_int(v, 1, MAX_RANKS, &so->per_host);
    case 'H': return parse_time(v, &so->host_alpha_s);
    case 'G': return parse_gbps(v, &so->host_bandwidth);
    case 'd': return bench_parse_dtype(v, &so->b.dtype);
    case 'o': return bench_parse_redop(v, &so->b.redop);
    case 'r': return cli_parse_int(v, 0, INT_MAX, &so->b.root);
    case 'a': so->b.algo = v; return true;
    default: return false;
    }
}

/* take, as cli_parse hands it an option (cli.h). */
static int take_option(void *so, int c, int at, const char *v)
{
    (void)at;
    return take(so, c, v) ? 0 : -1;
}

/* -1 to run; else the exit status (0 after --help or --version, 2 on a
 * usage error, which has been said). */
static int parse_args(struct sim_opts *so, int argc, char **argv)
{
    static const struct option longs[] = {
        {"sweep", no_argument, NULL, 'S'},            {"op", required_argument, NULL, 'O'},
        {"ranks", required_argument, NULL, 'n'},      {"ranks-list", required_argument, NULL, 'L'},
        {"bytes", required_argument, NULL, 'b'},      {"alpha", required_argument, NULL, 'A'},
        {"jitter", required_argument, NULL, 'J'},     {"beta-gbps", required_argument, NULL, 'B'},
        {"ranks-per-host", required_argument, NULL, 'P'},
        {"host-alpha", required_argument, NULL, 'H'}, {"host-gbps", required_argument, NULL, 'G'},
        {"help", no_argument, NULL, 'h'},             {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const struct cli_tool tool = {.name = "tide-sim", .usage = usage,
                                  .version = tide_version(), .longs = longs};
    int rc = cli_parse(&tool, argc, argv, ":b:e:f:d:o:r:a:h", take_option, so);
    if (rc >= 0)
        return rc;
    if (!so->sweep && so->ranks < 1)
        return cli_usage_error(&tool, "--ranks is required");
    if (so->b.root >= (so->sweep ? 1 : so->ranks))
        return cli_usage_error(&tool, "-r must be below the group size");
    return -1;
}

int main(int argc, char **argv)
{
    struct sim_opts so = {.b = {.coll = COLL_ALLREDUCE, .min_bytes = 1024, .max_bytes = 0,
                                .step_factor = 4, .dtype = TIDE_FLOAT32, .redop = TIDE_SUM},
                          .ranks = 0, .list = {4, 16, 64, 256, 1024, 4096}, .nlist = 6,
                          .alpha_s = 5e-6, .bandwidth = 12.5e9, .host_alpha_s = 0.5e-6,
                          .host_bandwidth = 50e9};
    int rc = parse_args(&so, argc, argv);
    if (rc >= 0)
        return rc;
    if (!so.b.max_bytes || !so.sweep)
        so.b.max_bytes = so.sweep ? 64u << 20 : so.b.min_bytes;
    /* Never touched (timing only), so these cost address space, not memory. */
    size_t cap = so.b.max_bytes + 64;
    void *send = malloc(cap), *recv = malloc(cap);
    if (!send || !recv) {
        fprintf(stderr, "tide-sim: cannot reserve %zu bytes of buffers\n", cap);
        return BENCH_EXIT_FAIL;
    }
    if (so.sweep) {
        rc = sweep(&so, send, recv, cap);
    } else {
        double t0 = bench_now_s();
        struct outcome o = run_one(&so, so.ranks, so.b.min_bytes, so.b.algo, send, recv, cap);
        rc = report_one(&so, &o, bench_now_s() - t0);
    }
    free(send);
    free(recv);
    return rc;
}
