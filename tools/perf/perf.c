/* perf.c - tide-perf: collective bandwidth in the nccl-tests convention.
 *
 *     tide-run -n 4 -- tide-perf --op allreduce -b 8 -e 64M -f 2 -n 20 -w 5 \
 *                                -d float -o sum [-r ROOT] [-a ALGO] [-c 1] [--json FILE]
 *
 * Per size, out of place and then in place: -w untimed calls (posted and
 * waited, which names the algorithm), a barrier, then -n blocking calls
 * (tide_allreduce, as OSU's and mpi-coll-bench's loops call MPI's; with
 * --nonblocking each posted and waited in turn); time is their mean on
 * each rank, and the table shows the slowest rank's.  algbw is size /
 * time, busbw algbw times nccl-tests' PERFORMANCE.md factor (allreduce
 * 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; broadcast and
 * reduce 1), so it can be set against the link speed.  With -c 1 one more
 * call runs on patterned data (perf_check.c) and every output element is
 * checked; #wrong sums the ranks', and any wrong element fails the run.
 *
 * Rank 0 prints the table and writes --json.  Options are bench_common.c's.
 */
#include <string.h>

#include "tools/common/bench_common.h"
#include "tools/perf/perf_check.h"

static const char usage[] =
    "Usage: tide-run -n 4 -- tide-perf [options]\n"
    "\n"
    "Collective time, algorithm and bus bandwidth per size, as nccl-tests prints\n"
    "them: out of place, then in place (TIDE_IN_PLACE).  Broadcast has one buffer\n"
    "and is shown out of place; alltoall and barrier have no in-place form.\n"
    "\n"
    "  -c, --check 0|1      check every output element; a wrong one fails the run\n"
    "  --nonblocking        time tide_i<op>() and tide_wait instead of the blocking\n"
    "                       call (small collectives on one host differ: a blocking\n"
    "                       one may end without a request)\n";

/* One column group of a row: out of place or in place. */
struct result {
    bool ran;
    double us;    /* the slowest rank's mean time per call */
    double algbw; /* GB/s (1e9 B/s) */
    double busbw;
    long wrong;   /* over all ranks; -1 when not checked */
};

struct perf {
    struct bench b;
    struct bench_json json;
    double busbw_sum; /* nccl-tests' "Avg bus bandwidth": over every result */
    int results;
    long wrong;
};

static int time_calls(struct bench *b, const struct bench_shape *s, bool inplace, double *us,
                      char *algo)
{
    int rc = 0;
    for (long i = 0; i < b->opt.warmup && !rc; i++)
        rc = bench_run_once(b, s, inplace, algo);
    rc = rc ? rc : tide_barrier(b->comm);
    double t0 = bench_now_s();
    for (long i = 0; i < b->opt.iters && !rc; i++)
        rc = b->opt.nonblocking ? bench_run_once(b, s, inplace, algo) : bench_call(b, s, inplace);
    if (rc && !b->opt.nonblocking)
        bench_report(bench_coll_name(b->opt.coll), rc);
    *us = (bench_now_s() - t0) / (double)b->opt.iters * 1e6;
    return rc ? rc : bench_max(b, us);
}

/* One call on patterned data; *wrong becomes the count over all ranks. */
static int check_call(struct bench *b, const struct bench_shape *s, bool inplace, long *wrong)
{
    perf_check_fill(b, s, inplace);
    int rc = bench_run_once(b, s, inplace, NULL);
    double bad = rc ? 0 : (double)perf_check_count(b, s);
    /* Back to zeros, so timed in-place sums do not grow into infinities. */
    memset(b->send, 0, b->cap);
    memset(b->recv, 0, b->cap);
    rc = rc ? rc : tide_allreduce(b->comm, TIDE_IN_PLACE, &bad, 1, TIDE_FLOAT64, TIDE_SUM);
    *wrong = (long)bad;
    return rc;
}

static int measure(struct perf *p, const struct bench_shape *s, bool inplace, struct result *r,
                   char *algo)
{
    struct bench *b = &p->b;
    int rc = time_calls(b, s, inplace, &r->us, algo);
    r->wrong = -1;
    if (!rc && b->opt.check)
        rc = check_call(b, s, inplace, &r->wrong);
    if (rc)
        return rc;
    r->ran = true;
    r->algbw = r->us > 0 ? (double)s->bytes / (r->us * 1e-6) / 1e9 : 0;
    r->busbw = r->algbw * bench_busbw_factor(b->opt.coll, b->size);
    p->busbw_sum += r->busbw;
    p->results++;
    p->wrong += r->wrong > 0 ? r->wrong : 0;
    return 0;
}

/* ------------------------------------------------------------------ report */

static const char *redop_name(const struct bench *b)
{
    return bench_coll_reduces(b->opt.coll) ? tide_op_name(b->opt.redop) : "none";
}

static int root_of(const struct bench *b)
{
    return bench_coll_rooted(b->opt.coll) ? b->opt.root : -1;
}

static void print_header(const struct bench *b)
{
    const struct bench_opts *o = &b->opt;
    printf("# tide-perf %s: %d ranks, minBytes %zu maxBytes %zu step: ", bench_coll_name(o->coll),
           b->size, o->min_bytes, o->max_bytes);
    if (o->step_factor > 1.0)
        printf("%g(factor)", o->step_factor);
    else
        printf("%zu(bytes)", o->step_bytes);
    printf(" warmup iters: %ld iters: %ld validation: %d algo: %s\n#\n", o->warmup, o->iters,
           o->check, o->algo ? o->algo : "default");
    printf("#%56s%-33s%s\n", "", "out-of-place", "in-place");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong", "algo");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
}

static void print_result(const struct result *r)
{
    if (!r->ran) {
        printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    /* nccl-tests' precision: fewer decimals as the time grows. */
    int decimals = r->us >= 10000.0 ? 0 : r->us >= 100.0 ? 1 : 2;
    char wrong[24] = "N/A";
    if (r->wrong >= 0)
        snprintf(wrong, sizeof wrong, "%ld", r->wrong);
    printf("  %7.*f  %6.2f  %6.2f  %6s", decimals, r->us, r->algbw, r->busbw, wrong);
}

static void print_row(const struct bench *b, const struct bench_shape *s,
                      const struct result r[2], const char *algo)
{
    printf("  %10zu  %12zu  %8s  %6s  %6d", s->bytes, s->count, tide_dtype_name(b->opt.dtype),
           redop_name(b), root_of(b));
    print_result(&r[0]);
    print_result(&r[1]);
    printf("  %s\n", algo);
    fflush(stdout);
}

static void json_record(struct perf *p, const struct bench_shape *s, bool inplace,
                        const struct result *r, const char *algo)
{
    const struct bench *b = &p->b;
    FILE *f = bench_json_record(&p->json);
    if (!f)
        return;
    fprintf(f,
            "{\"tool\":\"tide-perf\",\"reactor\":\"%s\",\"transport\":\"%s\",\"op\":\"%s\","
            "\"ranks\":%d,"
            "\"bytes\":%zu,\"count\":%zu,"
            "\"dtype\":\"%s\",\"redop\":\"%s\",\"root\":%d,\"algo\":\"%s\",\"inplace\":%s,"
            "\"time_us\":%.3f,\"algbw_gbps\":%.6f,\"busbw_gbps\":%.6f,\"wrong\":%ld}",
            tide_comm_reactor(b->comm), bench_transport(b), bench_coll_name(b->opt.coll), b->size,
            s->bytes, s->count,
            tide_dtype_name(b->opt.dtype), redop_name(b), root_of(b), algo,
            inplace ? "true" : "false", r->us, r->algbw, r->busbw, r->wrong);
}

/* ------------------------------------------------------------------- main */

static int run_size(struct perf *p, size_t bytes)
{
    struct bench *b = &p->b;
    struct bench_shape s = bench_shape_of(b, bytes);
    struct result r[2] = {{0}, {0}};
    char algo[BENCH_ALGO_LEN] = "?";
    for (int inplace = 0; inplace < 2; inplace++) {
        if (inplace && !bench_coll_has_inplace(b->opt.coll))
            continue;
        int rc = measure(p, &s, inplace, &r[inplace], algo);
        if (rc)
            return rc;
        json_record(p, &s, inplace, &r[inplace], algo);
    }
    if (b->rank == 0)
        print_row(b, &s, r, algo);
    return 0;
}

int main(int argc, char **argv)
{
    struct perf p = {0};
    int status = bench_start(argc, argv, BENCH_PERF, usage, &p.b);
    if (status >= 0)
        return status;
    struct bench *b = &p.b;
    if (bench_json_open(b, &p.json))
        return bench_end(b, BENCH_EXIT_USAGE);
    if (b->rank == 0)
        print_header(b);
    int rc = 0;
    for (size_t bytes = b->opt.min_bytes; bytes <= b->opt.max_bytes && !rc;
         bytes = bench_next_size(&b->opt, bytes))
        rc = run_size(&p, bytes);
    if (b->rank == 0 && !rc) {
        printf("# Out of bounds values : %ld %s\n", p.wrong, p.wrong ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n", p.results ? p.busbw_sum / p.results : 0.0);
    }
    if (bench_json_close(&p.json, b->opt.json) && !rc)
        rc = -1;
    return bench_end(b, rc || p.wrong ? BENCH_EXIT_FAIL : 0);
}
