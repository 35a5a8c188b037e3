/* overlap.c - tide-overlap: how much of a nonblocking collective hides
 * under compute, by the OSU micro-benchmarks' method (osu_iallreduce and
 * friends).
 *
 *     tide-run -n 4 -- tide-overlap --op allreduce -b 8 -e 64M [-t N]
 *                                   [--compute busy|sleep] [--json FILE]
 *
 * Per size, on every rank:
 *   t_pure     post + wait, nothing else, mean over -n calls;
 *   t_overall  post, compute, wait, where the compute is a busy loop
 *              that spins for t_pure (or a nanosleep of t_pure);
 *   t_cpu      the compute inside those calls, measured there;
 *   overlap    max(0, 100 * (1 - (t_overall - t_cpu) / t_pure)).
 * Each time is then averaged over the ranks, as OSU does.  Beside it,
 * the same from medians: the median over the calls of t_overall - t_cpu
 * (what did not hide in one call) against the median t_pure, averaged
 * over the ranks.  The two part where a few calls stall: a virtual CPU
 * descheduled for a millisecond during a 100 us call takes a tenth of a
 * ten-call mean's overlap, and none of the median's.  The JSON also has
 * each rank's median (t_exposed_median_by_rank_us) and the largest
 * (t_exposed_median_max_us): one rank far above the others is one rank
 * that did not progress in the background.  As in OSU,
 * every call is followed by a barrier outside the timed part: without
 * it the ranks drift apart (a nanosleep oversleeps by tens of
 * microseconds, differently on each rank), and a rank that posts late
 * shows up as communication that did not hide on its peers.  And as in
 * OSU, t_cpu is the compute of the same call: a separate compute-alone
 * run oversleeps differently, which made single sizes of a 256 KiB
 * shared-memory sweep read anywhere from 40 to 85 % (this machine).
 *
 * --interleave adds a pass after those two: -n pairs of calls, one pure
 * and one overlapped in turn, each column from its medians (Alt.Ovl).
 * OSU measures all of t_pure before any overlapped call, and on a VM
 * whose host's speed drifts over seconds the two phases can see
 * different machines: on the 16-core host, 8 ranks, t_pure of a 16 MiB
 * all-reduce moved 7.3-8.4 ms between sweeps, and a size that hid 82-94 %
 * exposed the same on every rank (docs/compare-2026-11-27-16core-night.md).
 * In turn, both columns see the same drift; but each pure call there
 * follows an overlapped one and pays what that left behind (a progress
 * thread gone to sleep, cold lines): on the 2-core machine, 2 ranks,
 * shared memory, 256 KiB, sleeping compute, Alt.Ovl read 96-97 % where
 * Med.Ovl read 87-88 %.  Read it beside Med.Ovl, not instead.
 *
 * The compute makes no tide call unless -t N asks for N tide_test calls
 * spread through it (OSU's -t): what is measured by default is progress
 * in the background.  The busy loop holds its core: with 4 ranks on 2
 * cores the reactor threads must take it from the compute (and what they
 * take is not counted against the compute, as in OSU); --compute sleep
 * leaves the CPU free, as when the math runs on an accelerator.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "tools/common/bench_common.h"
#include "tools/common/median.h"

static const char usage[] =
    "Usage: tide-run -n 4 -- tide-overlap [options]\n"
    "\n"
    "OSU-style overlap of a nonblocking collective with compute, per size.\n"
    "\n"
    "  -t, --tests N        call tide_test N times spread through the compute\n"
    "                       (default 0: no tide call while computing)\n"
    "  --compute busy|sleep spin (default, OSU's) or nanosleep for the compute\n"
    "  --interleave         then pure and overlapped calls in turn (the Alt.Ovl column)\n";

enum { SPIN_CHUNK = 256 }; /* multiply-adds between looks at the clock */

struct overlap {
    struct bench b;
    struct bench_json json;
    volatile double sink; /* keeps the busy loop's result alive */
};

/* Mean microseconds per call of each phase, on this rank, then averaged. */
struct times {
    double pure, cpu, overall;
    double post, wait; /* of overall: in the post, in tide_wait (OSU's Init, Wait) */
    double pure_median, exposed_median; /* exposed: t_overall - t_cpu of one call */
    double alt_pure_median, alt_exposed_median; /* the same from --interleave's pass */
};

/* Each call's t_pure, and t_overall - t_cpu, for the medians. */
struct samples {
    double *pure, *exposed;
    double *by_rank; /* [ranks] each rank's median exposed */
};

/* ---------------------------------------------------------------- compute */

/* Spins for us microseconds of wall-clock time, as OSU's dummy compute
 * does: a dependent chain of multiply-adds (no vectorizing, no memory
 * traffic), with a look at the clock every few hundred nanoseconds.  A
 * fixed amount of work would not do: with more ranks than cores, how
 * fast it runs depends on which ranks are computing at that moment. */
static void busy(struct overlap *v, double us)
{
    double x = v->sink, end = bench_now_s() + us * 1e-6;
    while (bench_now_s() < end)
        for (int i = 0; i < SPIN_CHUNK; i++)
            x = x * 0.9999999 + 1e-7;
    v->sink = x;
}

static void sleep_us(double us)
{
    long long ns = (long long)(us * 1e3);
    struct timespec t = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        continue;
}

/* Compute for what lasts us alone, in -t slices (one without -t), with a
 * tide_test on req after each when req is not NULL. */
static int compute(struct overlap *v, double us, tide_req *req)
{
    int slices = v->b.opt.tests > 0 ? v->b.opt.tests : 1;
    for (int i = 0; i < slices; i++) {
        if (v->b.opt.compute_sleep)
            sleep_us(us / slices);
        else
            busy(v, us / slices);
        int done, rc = req && v->b.opt.tests > 0 ? tide_test(req, &done) : 0;
        if (rc)
            return bench_report("tide_test", rc);
    }
    return 0;
}

/* ---------------------------------------------------------------- measure */

/* Post, compute for cpu_us (not at all if < 0), wait; adds the times
 * taken to *t (the whole call to t->pure without compute, to t->overall
 * with) and stores the call's t_pure or t_overall - t_cpu in *sample.
 * Then a barrier, untimed. */
static int one_call(struct overlap *v, const struct bench_shape *s, double cpu_us, struct times *t,
                    double *sample)
{
    struct bench *b = &v->b;
    tide_req *req;
    double t0 = bench_now_s();
    int rc = bench_post(b, s, false, &req);
    if (rc)
        return bench_report(bench_coll_name(b->opt.coll), rc);
    double t1 = bench_now_s();
    rc = cpu_us >= 0 ? compute(v, cpu_us, req) : 0;
    double t2 = bench_now_s();
    int w = tide_wait(req, -1);
    double t3 = bench_now_s();
    *sample = (t3 - t0 - (t2 - t1)) * 1e6;
    if (cpu_us < 0) {
        t->pure += (t3 - t0) * 1e6;
    } else {
        t->overall += (t3 - t0) * 1e6;
        t->post += (t1 - t0) * 1e6;
        t->cpu += (t2 - t1) * 1e6;
        t->wait += (t3 - t2) * 1e6;
    }
    if (w)
        fprintf(stderr, "%s failed: %s\n", bench_coll_name(b->opt.coll), tide_req_message(req));
    tide_req_free(req);
    rc = rc ? rc : w;
    return rc ? rc : tide_barrier(b->comm);
}

/* --interleave's pass: a pure call, then one overlapped for t->pure (the
 * first pass's mean), -n times; their medians into t's alt_ fields. */
static int interleaved(struct overlap *v, const struct bench_shape *s, struct samples *each_call,
                       struct times *t)
{
    long n = v->b.opt.iters;
    struct times sums = {0}; /* the first pass's means stay as they are */
    int rc = 0;
    for (long i = 0; i < n && !rc; i++) {
        rc = one_call(v, s, -1, &sums, &each_call->pure[i]);
        rc = rc ? rc : one_call(v, s, t->pure, &sums, &each_call->exposed[i]);
    }
    if (!rc) {
        t->alt_pure_median = median_sort(each_call->pure, (size_t)n);
        t->alt_exposed_median = median_sort(each_call->exposed, (size_t)n);
    }
    return rc;
}

static int measure(struct overlap *v, const struct bench_shape *s, struct samples *each_call,
                   struct times *t)
{
    struct bench *b = &v->b;
    long n = b->opt.iters;
    int rc = 0;
    *t = (struct times){0};
    for (long i = 0; i < b->opt.warmup && !rc; i++)
        rc = bench_run_once(b, s, false, NULL);
    rc = rc ? rc : tide_barrier(b->comm);
    for (long i = 0; i < n && !rc; i++)
        rc = one_call(v, s, -1, t, &each_call->pure[i]);
    t->pure /= (double)n;
    for (long i = 0; i < n && !rc; i++)
        rc = one_call(v, s, t->pure, t, &each_call->exposed[i]);
    double *sums[] = {&t->cpu, &t->overall, &t->post, &t->wait};
    for (size_t k = 0; k < sizeof sums / sizeof sums[0]; k++)
        *sums[k] /= (double)n;
    if (!rc) {
        t->pure_median = median_sort(each_call->pure, (size_t)n);
        t->exposed_median = median_sort(each_call->exposed, (size_t)n);
        rc = tide_allgather(b->comm, &t->exposed_median, each_call->by_rank, 1, TIDE_FLOAT64);
        rc = rc ? bench_report("the ranks' medians", rc) : 0;
    }
    if (!rc && b->opt.interleave)
        rc = interleaved(v, s, each_call, t);
    double *each[] = {&t->pure, &t->cpu, &t->overall, &t->post, &t->wait, &t->pure_median,
                      &t->exposed_median, &t->alt_pure_median, &t->alt_exposed_median};
    for (size_t k = 0; k < sizeof each / sizeof each[0] && !rc; k++)
        rc = bench_mean(b, each[k]);
    return rc;
}

/* ----------------------------------------------------------------- report */

/* 100 * (1 - exposed / pure), within 0..100. */
static double hidden_pct(double exposed, double pure)
{
    if (pure <= 0)
        return 0;
    /* Noise can make t_overall < t_cpu; more than all of it cannot hide. */
    double pct = 100 * (1 - exposed / pure);
    return pct < 0 ? 0 : pct > 100 ? 100 : pct;
}

static double overlap_pct(const struct times *t)
{
    return hidden_pct(t->overall - t->cpu, t->pure);
}

static double overlap_median_pct(const struct times *t)
{
    return hidden_pct(t->exposed_median, t->pure_median);
}

static double overlap_alt_pct(const struct times *t)
{
    return hidden_pct(t->alt_exposed_median, t->alt_pure_median);
}

static void print_header(const struct overlap *v)
{
    const struct bench *b = &v->b;
    printf("# tide-overlap %s: %d ranks, %s progress, compute %s, %d tide_test calls, "
           "warmup iters: %ld iters: %ld\n",
           bench_coll_name(b->opt.coll), b->size,
           b->progress == TIDE_PROGRESS_INLINE ? "inline" : "thread",
           b->opt.compute_sleep ? "sleep" : "busy", b->opt.tests, b->opt.warmup, b->opt.iters);
    printf("# Overall = post + compute + wait; Compute = that compute; a barrier after each call\n");
    printf("# Med.Ovl: the overlap from each rank's medians over the calls (stalls aside)\n");
    if (b->opt.interleave)
        printf("# Alt.Ovl: the same from a pass of pure and overlapped calls in turn\n");
    printf("%-12s%14s%14s%17s%13s%11s%11s%13s%s\n", "# Size", "Overall(us)", "Compute(us)",
           "Pure Comm.(us)", "Overlap(%)", "Post(us)", "Wait(us)", "Med.Ovl(%)",
           b->opt.interleave ? "   Alt.Ovl(%)" : "");
}

static void report(struct overlap *v, const struct bench_shape *s, const struct times *t,
                   const double *by_rank)
{
    const struct bench *b = &v->b;
    if (b->rank != 0)
        return;
    printf("%-12zu%14.2f%14.2f%17.2f%13.2f%11.2f%11.2f%13.2f", s->bytes, t->overall, t->cpu,
           t->pure, overlap_pct(t), t->post, t->wait, overlap_median_pct(t));
    if (b->opt.interleave)
        printf("%13.2f", overlap_alt_pct(t));
    printf("\n");
    fflush(stdout);
    FILE *f = bench_json_record(&v->json);
    if (!f)
        return;
    double most = by_rank[0];
    for (int r = 1; r < b->size; r++)
        most = by_rank[r] > most ? by_rank[r] : most;
    fprintf(f,
            "{\"tool\":\"tide-overlap\",\"reactor\":\"%s\",\"transport\":\"%s\","
            "\"op\":\"%s\",\"ranks\":%d,"
            "\"bytes\":%zu,"
            "\"compute\":\"%s\",\"tests\":%d,\"t_pure_us\":%.3f,\"t_cpu_us\":%.3f,"
            "\"t_overall_us\":%.3f,\"t_post_us\":%.3f,\"t_wait_us\":%.3f,\"overlap_pct\":%.2f,"
            "\"t_pure_median_us\":%.3f,\"t_exposed_median_us\":%.3f,"
            "\"t_exposed_median_max_us\":%.3f,"
            "\"overlap_median_pct\":%.2f,\"t_exposed_median_by_rank_us\":[",
            tide_comm_reactor(b->comm), bench_transport(b), bench_coll_name(b->opt.coll), b->size,
            s->bytes, b->opt.compute_sleep ? "sleep" : "busy", b->opt.tests, t->pure, t->cpu, t->overall,
            t->post, t->wait, overlap_pct(t), t->pure_median, t->exposed_median, most,
            overlap_median_pct(t));
    for (int r = 0; r < b->size; r++)
        fprintf(f, "%s%.3f", r ? "," : "", by_rank[r]);
    fprintf(f, "]");
    if (b->opt.interleave)
        fprintf(f, ",\"t_alt_pure_median_us\":%.3f,\"t_alt_exposed_median_us\":%.3f,"
                "\"overlap_alt_pct\":%.2f", t->alt_pure_median, t->alt_exposed_median,
                overlap_alt_pct(t));
    fprintf(f, "}");
}

int main(int argc, char **argv)
{
    struct overlap v = {0};
    int status = bench_start(argc, argv, BENCH_OVERLAP, usage, &v.b);
    if (status >= 0)
        return status;
    struct bench *b = &v.b;
    if (bench_json_open(b, &v.json))
        return bench_end(b, BENCH_EXIT_USAGE);
    if (b->rank == 0)
        print_header(&v);
    struct samples each_call = {calloc((size_t)b->opt.iters, sizeof(double)),
                                calloc((size_t)b->opt.iters, sizeof(double)),
                                calloc((size_t)b->size, sizeof(double))};
    int rc = each_call.pure && each_call.exposed && each_call.by_rank
                 ? 0
                 : bench_report("calloc", TIDE_ENOMEM);
    for (size_t bytes = b->opt.min_bytes; bytes <= b->opt.max_bytes && !rc;
         bytes = bench_next_size(&b->opt, bytes)) {
        struct bench_shape s = bench_shape_of(b, bytes);
        struct times t;
        rc = measure(&v, &s, &each_call, &t);
        if (!rc)
            report(&v, &s, &t, each_call.by_rank);
    }
    free(each_call.pure);
    free(each_call.exposed);
    free(each_call.by_rank);
    if (bench_json_close(&v.json, b->opt.json) && !rc)
        rc = -1;
    return bench_end(b, rc ? BENCH_EXIT_FAIL : 0);
}
