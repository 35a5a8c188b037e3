/* fsdp_train_report.c - what tide-fsdp-train prints: the header, a line
 * per step, the medians of a run, and prefetch off and on side by side. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tools/fsdp_train/fsdp_train.h"

void report_header(const struct opts *o, int n, int prefetch)
{
    printf("tide-fsdp-train: %s", tide_fsdp_strategy_name(o->strategy));
    if (o->strategy == TIDE_FSDP_HYBRID_SHARD)
        printf(" (groups of %d)", o->group);
    printf(" on %d ranks, %d layers of %dx%d + ReLU, %d rows per rank x %d micro-steps, %s lr %g, "
           "prefetch %d, all-gather in %s, compute %s\n",
           n, o->layers, o->width, o->width, o->batch, o->accum, o->adam ? "adam" : "sgd",
           (double)o->lr, prefetch, tide_dtype_name(o->comm_dtype), o->sleep ? "sleep" : "blas");
}

/* Step time neither computing nor blocked: inside FSDP's calls (posting
 * collectives, copies, allocation), the data, the loss and the optimizer. */
static double other_s(const struct step_stats *st)
{
    return st->step_s - st->compute_s - st->blocked_s;
}

void report_step(const struct opts *o, int s, const struct step_stats *st, double pure)
{
    char loss[32] = "-";
    if (!o->sleep)
        snprintf(loss, sizeof loss, "%.7e", st->loss);
    printf("step %3d  loss %-13s  step %8.2f ms  compute %8.2f ms  blocked %7.2f ms (fwd %.1f "
           "bwd %.1f sync %.1f)  other %6.2f ms  overlap %5.1f %%  peak unsharded %zu B\n",
           s, loss, st->step_s * 1e3, st->compute_s * 1e3, st->blocked_s * 1e3, st->fwd_s * 1e3,
           st->bwd_s * 1e3, st->sync_s * 1e3, other_s(st) * 1e3,
           pure > 0 ? 100.0 * (1.0 - st->blocked_s / pure) : 0.0, st->peak);
    fflush(stdout);
}

/* Medians over the steps after the first (which pays for warm-up). */
struct medians {
    double step, compute, blocked, other;
    size_t peak; /* the largest of all steps */
};

static struct medians summarize(const struct opts *o, const struct step_stats *st)
{
    int first = o->steps > 1, n = o->steps - first;
    double *a = malloc(4 * (size_t)(n > 0 ? n : 1) * sizeof *a);
    struct medians m = {0, 0, 0, 0, 0};
    if (a == NULL)
        return m;
    for (int i = 0; i < n; i++) {
        a[i] = st[first + i].step_s;
        a[n + i] = st[first + i].compute_s;
        a[2 * n + i] = st[first + i].blocked_s;
        a[3 * n + i] = other_s(&st[first + i]);
    }
    for (int s = 0; s < o->steps; s++)
        m.peak = st[s].peak > m.peak ? st[s].peak : m.peak;
    m.step = median_sort(a, (size_t)n);
    m.compute = median_sort(a + n, (size_t)n);
    m.blocked = median_sort(a + 2 * n, (size_t)n);
    m.other = median_sort(a + 3 * n, (size_t)n);
    free(a);
    return m;
}

/* Ranks on this host: LOCAL_WORLD_SIZE (tide-run, torchrun) or the world. */
static int local_ranks(int n)
{
    const char *s = getenv("LOCAL_WORLD_SIZE");
    return s && atoi(s) > 0 ? atoi(s) : n;
}

/* The host's CPUs, not this rank's mask: a rank bound to one core would
 * otherwise read "8 ranks share 1 cores" on a 16-core host. */
static int host_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* What a newcomer reads first.  1 - blocked / pure goes negative when the
 * ranks were blocked longer than the communication alone takes (waiting
 * for slower ranks, and for a core): that is "nothing hid", said so,
 * rather than a negative share. */
static void report_hidden(tide_comm *world, double blocked, double pure)
{
    double hidden = pure > 0 ? 1.0 - blocked / pure : 0.0;
    printf("communication hidden behind compute: %.0f %% of the %.2f ms it takes alone per step",
           hidden > 0 ? 100.0 * hidden : 0.0, pure * 1e3);
    if (hidden < 0)
        printf(" (the ranks were blocked %.2f ms, longer than that: waiting for slower ranks and "
               "for a core)", blocked * 1e3);
    printf("\n");
    char cpus[64];
    int local = local_ranks(tide_comm_size(world)), host = host_cpus();
    int own = tide_comm_progress_cpus(world, cpus, sizeof cpus);
    if (own == 1) {
        printf("rank 0's progress thread runs on CPU %s, beside the math (%d ranks on %d CPUs "
               "here)\n", cpus, local, host);
        return;
    }
    if (local >= host)
        printf("why so little: %d ranks on %d CPUs here leave no CPU for the progress threads: "
               "the copies that move the data (the kernel's for TCP, the reactor's for shared "
               "memory) wait for the cores the math is using; with fewer ranks than CPUs, or "
               "with the math on an accelerator (--compute sleep shows that case), most of it "
               "hides\n", local, host);
    else
        printf("why so little: rank 0's progress thread shares its CPUs with the math (%d ranks "
               "on %d CPUs here): launch with tide-run, which gives each rank one beside its "
               "compute, or set TIDE_PROGRESS_CPUS\n", local, host);
}

void report_summary(tide_comm *world, const struct opts *o, const struct step_stats *st,
                    double pure)
{
    struct medians m = summarize(o, st);
    printf("median of steps %d..%d: step %.2f ms, compute %.2f ms, blocked %.2f ms = %.1f %% of "
           "the pure communication (%.2f ms) exposed, %.1f %% of the step, overlap %.1f %%; "
           "other %.2f ms; peak unsharded %zu B",
           o->steps > 1, o->steps - 1, m.step * 1e3, m.compute * 1e3, m.blocked * 1e3,
           100.0 * m.blocked / pure, pure * 1e3, 100.0 * m.blocked / m.step,
           100.0 * (1.0 - m.blocked / pure), m.other * 1e3, m.peak);
    if (o->budget)
        printf(" (budget %zu B)", o->budget);
    printf("\n");
    report_hidden(world, m.blocked, pure);
}

/* The median over the steps after the first of the least any rank was
 * blocked in that step: the rank that every other waited for, whose
 * blocked time no rank's compute covered.  Collective; -1 on failure. */
static double critical_blocked(tide_comm *world, const struct opts *o, const struct step_stats *st)
{
    int first = o->steps > 1, n = o->steps - first;
    double *mine = malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof *mine), result = -1;
    if (mine == NULL) /* its peers' allreduce then ends at the communicator's deadline */
        return -1;
    for (int i = 0; i < n; i++)
        mine[i] = st[first + i].blocked_s;
    if (n > 0 && tide_allreduce(world, mine, mine + n, (size_t)n, TIDE_FLOAT64, TIDE_MIN) == 0)
        result = median_sort(mine + n, (size_t)n);
    free(mine);
    return result;
}

void report_ranks(tide_comm *world, const struct opts *o, const struct step_stats *st, double pure)
{
    double mine = summarize(o, st).blocked, least, most;
    if (tide_allreduce(world, &mine, &least, 1, TIDE_FLOAT64, TIDE_MIN) != 0 ||
        tide_allreduce(world, &mine, &most, 1, TIDE_FLOAT64, TIDE_MAX) != 0)
        return;
    double critical = critical_blocked(world, o, st);
    if (tide_comm_rank(world) != 0)
        return;
    printf("blocked per step over the ranks (medians): least %.2f ms (%.1f %% of the pure "
           "communication), most %.2f ms (%.1f %%); the gap is ranks waiting for the slowest\n",
           least * 1e3, 100.0 * least / pure, most * 1e3, 100.0 * most / pure);
    if (critical < 0 || pure <= 0)
        return;
    double hidden = 1.0 - critical / pure;
    printf("on the critical path (each step's least blocked rank, the one the others waited "
           "for; median): blocked %.2f ms, communication hidden %.0f %%\n", critical * 1e3,
           hidden > 0 ? 100.0 * hidden : 0.0);
}

static void compare_line(const char *name, const struct medians *m, double pure)
{
    printf("%-12s step %8.2f ms  compute %8.2f ms  blocked %7.2f ms (%5.1f %% of %.2f ms comm, "
           "%4.1f %% of the step)  other %6.2f ms  peak %zu B\n",
           name, m->step * 1e3, m->compute * 1e3, m->blocked * 1e3, 100 * m->blocked / pure,
           pure * 1e3, 100 * m->blocked / m->step, m->other * 1e3, m->peak);
}

void report_compare(const struct opts *o, const struct step_stats *a, double pa,
                    const struct step_stats *b, double pb, int on)
{
    char name[32];
    printf("step | prefetch off: step ms  blocked ms  overlap %% | prefetch %d: step ms  "
           "blocked ms  overlap %%\n", on);
    for (int s = 0; s < o->steps; s++)
        printf("%4d | %22.2f %11.2f %9.1f | %19.2f %11.2f %9.1f\n", s, a[s].step_s * 1e3,
               a[s].blocked_s * 1e3, 100 * (1 - a[s].blocked_s / pa), b[s].step_s * 1e3,
               b[s].blocked_s * 1e3, 100 * (1 - b[s].blocked_s / pb));
    struct medians ma = summarize(o, a), mb = summarize(o, b);
    printf("medians of steps %d..%d, the two runs' steps taking turns:\n", o->steps > 1,
           o->steps - 1);
    compare_line("prefetch off", &ma, pa);
    snprintf(name, sizeof name, "prefetch %d", on);
    compare_line(name, &mb, pb);
    printf("prefetch %d is %.2fx as fast as no prefetch (median step off / on)\n", on,
           ma.step / mb.step);
}
