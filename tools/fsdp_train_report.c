/* fsdp_train_report.c - what tide-fsdp-train prints: the header, a line
 * per step, the medians of a run, and prefetch off and on side by side. */
#include <stdio.h>
#include <stdlib.h>

#include "fsdp_train.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double train_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void report_header(const struct opts *o, int n, int prefetch)
{
    printf("tide-fsdp-train: %s", tide_fsdp_strategy_name(o->strategy));
    if (o->strategy == TIDE_FSDP_HYBRID_SHARD)
        printf(" (groups of %d)", o->group);
    printf(" on %d ranks, %d layers of %dx%d + ReLU, %d rows per rank x %d micro-steps, %s, "
           "prefetch %d, all-gather in %s, compute %s\n",
           n, o->layers, o->width, o->width, o->batch, o->accum, o->adam ? "adam" : "sgd",
           prefetch, tide_dtype_name(o->comm_dtype), o->sleep ? "sleep" : "blas");
}

void report_step(const struct opts *o, int s, const struct step_stats *st, double pure)
{
    char loss[32] = "-";
    if (!o->sleep)
        snprintf(loss, sizeof loss, "%.7e", st->loss);
    printf("step %3d  loss %-13s  step %8.2f ms  compute %8.2f ms  blocked %7.2f ms (fwd %.1f "
           "bwd %.1f sync %.1f)  overlap %5.1f %%  peak unsharded %zu B\n",
           s, loss, st->step_s * 1e3, st->compute_s * 1e3, st->blocked_s * 1e3, st->fwd_s * 1e3,
           st->bwd_s * 1e3, st->sync_s * 1e3, pure > 0 ? 100.0 * (1.0 - st->blocked_s / pure) : 0.0,
           st->peak);
    fflush(stdout);
}

/* Medians over the steps after the first (which pays for warm-up). */
static void summarize(const struct opts *o, const struct step_stats *st, double *step,
                      double *compute, double *blocked, size_t *peak)
{
    int first = o->steps > 1, n = o->steps - first;
    double *a = malloc(3 * (size_t)(n > 0 ? n : 1) * sizeof *a);
    *peak = 0;
    for (int i = 0; i < n; i++) {
        a[i] = st[first + i].step_s;
        a[n + i] = st[first + i].compute_s;
        a[2 * n + i] = st[first + i].blocked_s;
    }
    for (int s = 0; s < o->steps; s++)
        *peak = st[s].peak > *peak ? st[s].peak : *peak;
    *step = train_median(a, n);
    *compute = train_median(a + n, n);
    *blocked = train_median(a + 2 * n, n);
    free(a);
}

void report_summary(const struct opts *o, const struct step_stats *st, double pure)
{
    double step, compute, blocked;
    size_t peak;
    summarize(o, st, &step, &compute, &blocked, &peak);
    printf("median of steps %d..%d: step %.2f ms, compute %.2f ms, blocked %.2f ms = %.1f %% of "
           "the pure communication (%.2f ms) exposed, overlap %.1f %%; peak unsharded %zu B",
           o->steps > 1, o->steps - 1, step * 1e3, compute * 1e3, blocked * 1e3,
           100.0 * blocked / pure, pure * 1e3, 100.0 * (1.0 - blocked / pure), peak);
    if (o->budget)
        printf(" (budget %zu B)", o->budget);
    printf("\n");
}

void report_compare(const struct opts *o, const struct step_stats *a, double pa,
                    const struct step_stats *b, double pb, int on)
{
    double sa, ca, ba, sb, cb, bb;
    size_t ka, kb;
    printf("step | prefetch off: step ms  blocked ms  overlap %% | prefetch %d: step ms  "
           "blocked ms  overlap %%\n", on);
    for (int s = 0; s < o->steps; s++)
        printf("%4d | %22.2f %11.2f %9.1f | %19.2f %11.2f %9.1f\n", s, a[s].step_s * 1e3,
               a[s].blocked_s * 1e3, 100 * (1 - a[s].blocked_s / pa), b[s].step_s * 1e3,
               b[s].blocked_s * 1e3, 100 * (1 - b[s].blocked_s / pb));
    summarize(o, a, &sa, &ca, &ba, &ka);
    summarize(o, b, &sb, &cb, &bb, &kb);
    printf("median step: prefetch off %.2f ms (exposed %.1f %% of %.2f ms comm, peak %zu B), "
           "prefetch %d %.2f ms (exposed %.1f %% of %.2f ms, peak %zu B): %.2fx faster\n",
           sa * 1e3, 100 * ba / pa, pa * 1e3, ka, on, sb * 1e3, 100 * bb / pb, pb * 1e3, kb,
           sa / sb);
}
