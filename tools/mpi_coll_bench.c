/* mpi_coll_bench.c - the MPI twin of tide-perf and tide-overlap, so that
 * tools/compare.sh can set Open MPI beside tide in one run.
 *
 *   mpirun -np 4 mpi-coll-bench --tool ompi-tcp [--op LIST] -b 8 -e 64M -f 4
 *                               -n 20 -w 5 [--json FILE]
 *   mpirun -np 4 mpi-coll-bench --tool ompi-tcp --overlap [--compute busy|sleep]
 *                               [-t TESTS] -b 64K -e 16M -f 4 -n 20 -w 5 [--json FILE]
 *
 * Perf mode times float32 sum collectives out of place (allreduce,
 * allgather, reduce_scatter = MPI_Reduce_scatter_block, broadcast,
 * alltoall, reduce, gather, scatter; roots are rank 0) the way tide-perf
 * does (tools/common/bench_common.c): "bytes" is nccl-tests' size, the
 * larger buffer rounded down to whole per-rank blocks (a size with no
 * whole element is skipped); time is the mean per call of the slowest
 * rank; algbw = bytes / time and busbw = algbw times nccl-tests' factor
 * (allreduce 2(n-1)/n, broadcast and reduce 1, the others (n-1)/n).  The
 * first warm-up call's result is checked and the wrong elements counted.
 * A barrier (--op barrier) is timed once, as a row of 0 bytes.
 *
 * Overlap mode is the OSU micro-benchmarks' method for MPI_Iallreduce,
 * done as tools/perf/overlap.c does it so the figures compare: t_pure
 * (Iallreduce + Wait alone), t_overall (post, a compute lasting t_pure
 * alone: a calibrated busy loop or a nanosleep, wait), t_cpu (that
 * compute, timed inside the call), each a mean per call averaged over
 * ranks, a barrier (untimed) after every call, and overlap % = max(0,
 * 100 (1 - (t_overall - t_cpu) / t_pure)).  With -t N the compute is cut
 * into N slices with an MPI_Test after each.
 *
 * Rank 0 prints one line per size and, with --json, writes the records as
 * a JSON array in the shape tide-perf and tide-overlap use.  Not part of
 * the meson build: MPI is a comparison, not a dependency; compare.sh
 * builds it with mpicc.
 */
#include <mpi.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { CALIBRATION_UNITS = 1 << 18, CALIBRATION_RUNS = 5 };

enum op {
    OP_ALLREDUCE,
    OP_ALLGATHER,
    OP_REDUCE_SCATTER,
    OP_BROADCAST,
    OP_ALLTOALL,
    OP_REDUCE,
    OP_GATHER,
    OP_SCATTER,
    OP_BARRIER, /* last: timed once, not per size (run) */
    OP_COUNT
};

static const char *const op_names[OP_COUNT] = {"allreduce", "allgather", "reduce_scatter",
                                               "broadcast", "alltoall", "reduce",
                                               "gather", "scatter", "barrier"};

struct options {
    const char *tool;      /* the "tool" field of every record */
    int ops[OP_COUNT];     /* 1 = measure this collective */
    size_t min_bytes, max_bytes;
    long factor, iters, warmup;
    int overlap;           /* 1 = OSU overlap mode (allreduce only) */
    int sleep_compute;     /* overlap: sleep instead of spinning */
    int tests;             /* overlap: MPI_Test calls during compute */
    const char *json;
};

struct bench {
    struct options opt;
    int rank, size;
    float *send, *recv;    /* sized for the largest vector */
    FILE *json;            /* rank 0, with --json */
    int records;           /* written so far, for the commas */
    long wrong_total;
    double units_per_us;   /* overlap: busy-loop speed, measured alone */
    volatile double sink;  /* keeps the busy loop's result alive */
};

/* ---------------------------------------------------------------- options */

static const char help_text[] =
    "Usage: mpirun -np N mpi-coll-bench --tool NAME [options]\n"
    "\n"
    "  --tool NAME        the records' \"tool\" field (ompi-tcp, ompi-sm, ...)\n"
    "  --op LIST          comma-separated: allreduce,allgather,reduce_scatter,broadcast,\n"
    "                     alltoall, reduce, gather, scatter, barrier (default the first\n"
    "                     four; roots are rank 0; a barrier is timed once, as 0 bytes)\n"
    "  -b, -e SIZE        smallest and largest size in bytes (K, M, G suffixes)\n"
    "  -f FACTOR          size multiplier (default 2)\n"
    "  -n ITERS, -w WARM  timed and warm-up calls per size (default 20, 5)\n"
    "  --overlap          OSU overlap of MPI_Iallreduce instead of timings\n"
    "  --compute busy|sleep  the overlap's compute: a calibrated busy loop or a sleep\n"
    "  -t TESTS           overlap: MPI_Test calls spread through the compute\n"
    "  --json FILE        write the records (rank 0)\n";

/* "64M" -> 67108864; returns 0 on a malformed size. */
static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    const char *units = "KMG";
    const char *u = *end ? strchr(units, *end) : NULL;
    if (end == s || (*end && (!u || end[1])))
        return 0;
    for (const char *k = units; u && k <= u; k++)
        v <<= 10;
    return (size_t)v;
}

static int parse_ops(char *list, int *ops)
{
    memset(ops, 0, OP_COUNT * sizeof *ops);
    for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
        int found = 0;
        for (int i = 0; i < OP_COUNT; i++)
            if (strcmp(name, op_names[i]) == 0)
                ops[i] = found = 1;
        if (!found)
            return -1;
    }
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longs[] = {
        {"tool", required_argument, NULL, 'T'}, {"op", required_argument, NULL, 'O'},
        {"overlap", no_argument, NULL, 'V'},    {"compute", required_argument, NULL, 'C'},
        {"json", required_argument, NULL, 'J'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct options){.tool = "mpi", .ops = {1, 1, 1, 1}, .min_bytes = 8,
                          .max_bytes = 64u << 20, .factor = 2, .iters = 20, .warmup = 5};
    int c, bad = 0;
    while ((c = getopt_long(argc, argv, "b:e:f:n:w:t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'T': o->tool = optarg; break;
        case 'O': bad |= parse_ops(optarg, o->ops); break;
        case 'V': o->overlap = 1; break;
        case 'C': o->sleep_compute = strcmp(optarg, "sleep") == 0;
                  bad |= !o->sleep_compute && strcmp(optarg, "busy") != 0; break;
        case 'J': o->json = optarg; break;
        case 'b': bad |= (o->min_bytes = parse_size(optarg)) == 0; break;
        case 'e': bad |= (o->max_bytes = parse_size(optarg)) == 0; break;
        case 'f': bad |= (o->factor = atol(optarg)) < 2; break;
        case 'n': bad |= (o->iters = atol(optarg)) < 1; break;
        case 'w': bad |= (o->warmup = atol(optarg)) < 0; break;
        case 't': bad |= (o->tests = atoi(optarg)) < 0; break;
        case 'h': fputs(help_text, stdout); return 1;
        default: bad = 1;
        }
    }
    if (bad || optind != argc || o->min_bytes > o->max_bytes) {
        fputs(help_text, stderr);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- the data */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Small integers, so float sums over a few ranks are exact. */
static float pattern(int rank, size_t i)
{
    return (float)((rank + 1) * (int)(i % 7 + 1));
}

/* Element counts of one call: *count is what the nccl-tests size names
 * (the whole vector), *per_rank the block each rank owns in allgather and
 * reduce_scatter; 0 when the size holds no whole block (8 B on 4 ranks). */
static void counts(const struct bench *b, enum op op, size_t bytes, size_t *count,
                   size_t *per_rank)
{
    size_t n = bytes / sizeof(float);
    *per_rank = n / (size_t)b->size;
    bool blocks = op == OP_ALLGATHER || op == OP_REDUCE_SCATTER || op == OP_ALLTOALL ||
                 op == OP_GATHER || op == OP_SCATTER;
    *count = blocks ? *per_rank * (size_t)b->size : n;
}

static void fill(struct bench *b, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        b->send[i] = pattern(b->rank, i);
        b->recv[i] = -1.0f;
    }
}

static int run_op(struct bench *b, enum op op, size_t count, size_t per_rank)
{
    switch (op) {
    case OP_ALLREDUCE:
        return MPI_Allreduce(b->send, b->recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case OP_ALLGATHER:
        return MPI_Allgather(b->send, (int)per_rank, MPI_FLOAT, b->recv, (int)per_rank,
                             MPI_FLOAT, MPI_COMM_WORLD);
    case OP_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(b->send, b->recv, (int)per_rank, MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD);
    case OP_BROADCAST:
        /* In place by nature; rank 0's send buffer is never overwritten. */
        return MPI_Bcast(b->rank == 0 ? b->send : b->recv, (int)count, MPI_FLOAT, 0,
                         MPI_COMM_WORLD);
    case OP_ALLTOALL:
        return MPI_Alltoall(b->send, (int)per_rank, MPI_FLOAT, b->recv, (int)per_rank, MPI_FLOAT,
                            MPI_COMM_WORLD);
    case OP_REDUCE:
        return MPI_Reduce(b->send, b->recv, (int)count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    case OP_GATHER:
        return MPI_Gather(b->send, (int)per_rank, MPI_FLOAT, b->recv, (int)per_rank, MPI_FLOAT, 0,
                          MPI_COMM_WORLD);
    case OP_SCATTER:
        return MPI_Scatter(b->send, (int)per_rank, MPI_FLOAT, b->recv, (int)per_rank, MPI_FLOAT, 0,
                           MPI_COMM_WORLD);
    case OP_BARRIER:
        return MPI_Barrier(MPI_COMM_WORLD);
    default:
        return MPI_ERR_ARG;
    }
}

/* Elements of this rank's result that differ from what they must be. */
static long count_wrong(const struct bench *b, enum op op, size_t count, size_t per_rank)
{
    float ranks_sum = (float)(b->size * (b->size + 1) / 2);
    size_t n = op == OP_REDUCE_SCATTER || op == OP_SCATTER ? per_rank : count;
    long wrong = 0;
    bool root_only = op == OP_REDUCE || op == OP_GATHER; /* the others have no output */
    if ((op == OP_BROADCAST && b->rank == 0) || op == OP_BARRIER || (root_only && b->rank != 0))
        return 0;
    for (size_t i = 0; i < n; i++) {
        float want;
        if (op == OP_ALLREDUCE || op == OP_REDUCE)
            want = ranks_sum * pattern(0, i);
        else if (op == OP_ALLGATHER || op == OP_GATHER)
            want = pattern((int)(i / per_rank), i % per_rank);
        else if (op == OP_REDUCE_SCATTER)
            want = ranks_sum * pattern(0, (size_t)b->rank * per_rank + i);
        else if (op == OP_ALLTOALL) /* block i / per_rank came from that rank */
            want = pattern((int)(i / per_rank), (size_t)b->rank * per_rank + i % per_rank);
        else if (op == OP_SCATTER)
            want = pattern(0, (size_t)b->rank * per_rank + i);
        else
            want = pattern(0, i);
        wrong += b->recv[i] != want;
    }
    return wrong;
}

/* -------------------------------------------------------------- records */

static void json_begin(struct bench *b)
{
    if (b->json)
        fprintf(b->json, "%s\n  {\"tool\": \"%s\"", b->records++ ? "," : "[", b->opt.tool);
}

static double mean_over_ranks(double v, int size)
{
    double sum = 0;
    MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / size;
}

static double max_over_ranks(double v)
{
    double max = 0;
    MPI_Allreduce(&v, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

static bool reduces(enum op op)
{
    return op == OP_ALLREDUCE || op == OP_REDUCE_SCATTER || op == OP_REDUCE;
}

static bool rooted(enum op op)
{
    return op == OP_BROADCAST || op == OP_REDUCE || op == OP_GATHER || op == OP_SCATTER;
}

static double bus_factor(enum op op, int n)
{
    if (op == OP_ALLREDUCE)
        return 2.0 * (n - 1) / n;
    return op == OP_BROADCAST || op == OP_REDUCE ? 1.0 : (double)(n - 1) / n;
}

/* One size of one collective: check, warm up, time, report. */
static int perf_size(struct bench *b, enum op op, size_t req_bytes)
{
    size_t count, per_rank;
    counts(b, op, req_bytes, &count, &per_rank);
    if (count == 0 && op != OP_BARRIER)
        return MPI_SUCCESS;
    fill(b, count);
    int rc = run_op(b, op, count, per_rank);
    long wrong = count_wrong(b, op, count, per_rank);
    for (long i = 1; i < b->opt.warmup && rc == MPI_SUCCESS; i++)
        rc = run_op(b, op, count, per_rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    for (long i = 0; i < b->opt.iters && rc == MPI_SUCCESS; i++)
        rc = run_op(b, op, count, per_rank);
    double us = max_over_ranks((now_s() - t0) * 1e6 / (double)b->opt.iters);
    long wrong_all = 0;
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    b->wrong_total += wrong_all;
    if (rc != MPI_SUCCESS || b->rank != 0)
        return rc;
    size_t bytes = count * sizeof(float);
    double algbw = (double)bytes / us / 1e3; /* GB/s */
    double busbw = algbw * bus_factor(op, b->size);
    printf("%-15s %10zu %10zu %10.2f %8.3f %8.3f %6ld\n", op_names[op], bytes, count, us, algbw,
           busbw, wrong_all);
    json_begin(b);
    if (b->json)
        fprintf(b->json, ", \"op\": \"%s\", \"ranks\": %d, \"bytes\": %zu, \"count\": %zu, "
                "\"dtype\": \"float\", \"redop\": \"%s\", \"root\": %d, \"algo\": \"default\", "
                "\"inplace\": false, \"time_us\": %.3f, \"algbw_gbps\": %.6f, "
                "\"busbw_gbps\": %.6f, \"wrong\": %ld}",
                op_names[op], b->size, bytes, count, reduces(op) ? "sum" : "none",
                rooted(op) ? 0 : -1, us, algbw, busbw, wrong_all);
    return rc;
}

/* --------------------------------------------------------------- overlap */

/* A dependent chain of multiply-adds (tools/perf/overlap.c's): fixed work, so
 * when communication takes the CPU from it, it runs longer. */
static void busy(struct bench *b, double units)
{
    double x = b->sink;
    for (long i = 0; i < (long)units; i++)
        x = x * 0.9999999 + 1e-7;
    b->sink = x;
}

static void sleep_us(double us)
{
    long long ns = (long long)(us * 1e3);
    struct timespec t = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        continue;
}

/* The fastest of a few runs: the loop's own speed, not a neighbour's. */
static void calibrate(struct bench *b)
{
    double best = INFINITY;
    for (int i = 0; i < CALIBRATION_RUNS; i++) {
        double t0 = now_s();
        busy(b, CALIBRATION_UNITS);
        double took = now_s() - t0;
        best = took < best ? took : best;
    }
    b->units_per_us = CALIBRATION_UNITS / (best * 1e6);
}

/* Computes for what lasts us alone, in -t slices with an MPI_Test after
 * each (req NULL: no tests). */
static void compute(struct bench *b, double us, MPI_Request *req)
{
    int slices = req && b->opt.tests > 0 ? b->opt.tests : 1;
    for (int i = 0; i < slices; i++) {
        if (b->opt.sleep_compute)
            sleep_us(us / slices);
        else
            busy(b, us * b->units_per_us / slices);
        int done;
        if (req && b->opt.tests > 0)
            MPI_Test(req, &done, MPI_STATUS_IGNORE);
    }
}

/* Mean us per call of: post, compute for cpu_us (none if < 0), wait; the
 * compute's own mean into *cpu.  A barrier after each call, untimed. */
static double iallreduce_loop(struct bench *b, size_t count, long iters, double cpu_us,
                              double *cpu)
{
    double total = 0, computing = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < iters; i++) {
        MPI_Request req;
        double t0 = now_s();
        MPI_Iallreduce(b->send, b->recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        double c0 = now_s();
        if (cpu_us >= 0)
            compute(b, cpu_us, &req);
        computing += now_s() - c0;
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        total += now_s() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double per = (double)(iters ? iters : 1);
    if (cpu)
        *cpu = computing / per * 1e6;
    return total / per * 1e6;
}

static void overlap_size(struct bench *b, size_t req_bytes)
{
    size_t count = req_bytes / sizeof(float), bytes = count * sizeof(float);
    if (count == 0)
        return;
    fill(b, count);
    iallreduce_loop(b, count, b->opt.warmup, -1, NULL);
    double pure = iallreduce_loop(b, count, b->opt.iters, -1, NULL), cpu;
    double overall = iallreduce_loop(b, count, b->opt.iters, pure, &cpu);
    pure = mean_over_ranks(pure, b->size);
    cpu = mean_over_ranks(cpu, b->size);
    overall = mean_over_ranks(overall, b->size);
    double pct = pure > 0 ? 100.0 * (1.0 - (overall - cpu) / pure) : 0;
    pct = pct > 0 ? pct : 0;
    if (b->rank != 0)
        return;
    const char *model = b->opt.sleep_compute ? "sleep" : "busy";
    printf("overlap %-6s %10zu  pure %10.1f  cpu %10.1f  overall %10.1f us  %5.1f %%\n", model,
           bytes, pure, cpu, overall, pct);
    json_begin(b);
    if (b->json)
        fprintf(b->json, ", \"op\": \"allreduce\", \"ranks\": %d, \"bytes\": %zu, "
                "\"compute\": \"%s\", \"tests\": %d, \"t_pure_us\": %.3f, \"t_cpu_us\": %.3f, "
                "\"t_overall_us\": %.3f, \"overlap_pct\": %.2f}",
                b->size, bytes, model, b->opt.tests, pure, cpu, overall, pct);
}

/* ------------------------------------------------------------------ main */

static int run(struct bench *b)
{
    int rc = MPI_SUCCESS;
    if (b->opt.overlap) {
        calibrate(b);
        for (size_t s = b->opt.min_bytes; s <= b->opt.max_bytes; s *= (size_t)b->opt.factor)
            overlap_size(b, s);
        return rc;
    }
    if (b->rank == 0)
        printf("%-15s %10s %10s %10s %8s %8s %6s\n", "# op", "bytes", "count", "time_us",
               "algbw", "busbw", "wrong");
    for (int op = 0; op < OP_BARRIER && rc == MPI_SUCCESS; op++)
        for (size_t s = b->opt.min_bytes; b->opt.ops[op] && s <= b->opt.max_bytes && !rc;
             s *= (size_t)b->opt.factor)
            rc = perf_size(b, (enum op)op, s);
    if (b->opt.ops[OP_BARRIER] && rc == MPI_SUCCESS)
        rc = perf_size(b, OP_BARRIER, 0); /* no data: once, whatever the sizes */
    return rc;
}

int main(int argc, char **argv)
{
    static struct bench b;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.size);
    int rc = parse_options(argc, argv, &b.opt);
    if (rc) {
        MPI_Finalize();
        return rc > 0 ? 0 : 2;
    }
    /* Room for the largest vector, rounded up to whole per-rank blocks. */
    size_t cap = b.opt.max_bytes / sizeof(float) + (size_t)b.size;
    b.send = malloc(cap * sizeof(float));
    b.recv = malloc(cap * sizeof(float));
    if (b.rank == 0 && b.opt.json && !(b.json = fopen(b.opt.json, "w")))
        perror(b.opt.json);
    if (!b.send || !b.recv || (b.rank == 0 && b.opt.json && !b.json))
        MPI_Abort(MPI_COMM_WORLD, 1);
    rc = run(&b);
    if (b.json) {
        fputs(b.records ? "\n]\n" : "[]\n", b.json);
        fclose(b.json);
    }
    free(b.send);
    free(b.recv);
    MPI_Finalize();
    return rc != MPI_SUCCESS || b.wrong_total ? 1 : 0;
}
