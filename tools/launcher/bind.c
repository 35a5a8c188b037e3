/* bind.c - see bind.h.  Cores are the CPUs of our affinity mask grouped
 * by (package, core id) from sysfs, so that a rank bound to a core of a
 * machine with SMT gets both its hardware threads; where sysfs says
 * nothing, each CPU is a core.  Cores are handed out in CPU order, so a
 * rank's progress core is its compute core's neighbour (often sharing a
 * cache with it): a container's cpuset is respected, ranks never share a
 * compute core. */
#include "tools/launcher/bind.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = {[BIND_AUTO] = "auto", [BIND_CORE] = "core",
                                         [BIND_NONE] = "none"};

bool bind_parse(const char *text, enum bind_mode *mode)
{
    for (size_t m = 0; m < sizeof mode_names / sizeof mode_names[0]; m++) {
        if (strcmp(text, mode_names[m]) == 0) {
            *mode = (enum bind_mode)m;
            return true;
        }
    }
    return false;
}

const char *bind_name(enum bind_mode mode)
{
    return mode_names[mode];
}

/* A topology number of cpu from sysfs, or -1 if there is none. */
static long topology(int cpu, const char *what)
{
    char path[96];
    long value = -1;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, what);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld", &value) != 1)
        value = -1;
    fclose(f);
    return value;
}

/* Which core of plan->cores cpu belongs to, adding one if new. */
static void add_cpu(struct bind_plan *plan, long *ids, int cpu)
{
    long package = topology(cpu, "physical_package_id");
    long core = topology(cpu, "core_id");
    for (int k = 0; core >= 0 && k < plan->ncores; k++) {
        if (ids[2 * k] == package && ids[2 * k + 1] == core) {
            CPU_SET(cpu, &plan->cores[k]);
            return;
        }
    }
    int k = plan->ncores++;
    CPU_ZERO(&plan->cores[k]);
    CPU_SET(cpu, &plan->cores[k]);
    ids[2 * k] = package;
    ids[2 * k + 1] = core;
}

static int find_cores(struct bind_plan *plan)
{
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0)
        return -1;
    int ncpus = CPU_COUNT(&mask);
    long *ids = malloc(2 * sizeof *ids * (size_t)ncpus);
    plan->cores = malloc(sizeof *plan->cores * (size_t)ncpus);
    if (!ids || !plan->cores) {
        free(ids);
        return -1;
    }
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &mask))
            add_cpu(plan, ids, cpu);
    free(ids);
    return 0;
}

static void add_core(cpu_set_t *set, const cpu_set_t *core)
{
    CPU_OR(set, set, core);
}

/* The last hardware thread of core, alone. */
static void last_thread(cpu_set_t *set, const cpu_set_t *core)
{
    CPU_ZERO(set);
    for (int cpu = CPU_SETSIZE - 1; cpu >= 0; cpu--) {
        if (CPU_ISSET(cpu, core)) {
            if (CPU_COUNT(core) > 1)
                CPU_SET(cpu, set);
            return;
        }
    }
}

static bool has_smt(const struct bind_plan *plan, int ncores)
{
    for (int k = 0; k < ncores; k++)
        if (CPU_COUNT(&plan->cores[k]) < 2)
            return false;
    return true;
}

/* n <= C < 2n without SMT: the S = C - n spare cores each serve a run of
 * about n / S neighbouring ranks, laid out run by run: the run's compute
 * cores, then its progress core.  Rank r is in run r * S / n, so its
 * compute core is r plus the progress cores of the runs before it. */
static void share_spares(struct bind_plan *plan, int n, int spare)
{
    for (int r = 0; r < n; r++) {
        int run = (int)((int64_t)r * spare / n);
        int last = r; /* the run's last rank */
        while (last + 1 < n && (int)((int64_t)(last + 1) * spare / n) == run)
            last++;
        CPU_ZERO(&plan->mask[r]);
        add_core(&plan->mask[r], &plan->cores[r + run]);
        plan->progress[r] = plan->cores[last + run + 1];
        add_core(&plan->mask[r], &plan->progress[r]);
    }
}

/* Fills mask and progress for n ranks on C >= n cores; returns how. */
static const char *lay_out(struct bind_plan *plan, int n)
{
    int c = plan->ncores;
    for (int r = 0; r < n; r++) {
        CPU_ZERO(&plan->mask[r]);
        CPU_ZERO(&plan->progress[r]);
    }
    if (c >= 2 * n) {
        for (int r = 0; r < n; r++) {
            add_core(&plan->mask[r], &plan->cores[2 * r]);
            plan->progress[r] = plan->cores[2 * r + 1];
            add_core(&plan->mask[r], &plan->progress[r]);
        }
        return "a core for compute and one for its progress thread";
    }
    if (has_smt(plan, n)) {
        for (int r = 0; r < n; r++) {
            plan->mask[r] = plan->cores[r];
            last_thread(&plan->progress[r], &plan->cores[r]);
        }
        return "a core, its progress thread on the core's second hardware thread";
    }
    if (c > n) {
        share_spares(plan, n, c - n);
        return "a core for compute; the spare cores shared by neighbours' progress threads";
    }
    for (int r = 0; r < n; r++)
        plan->mask[r] = plan->cores[r];
    return "a core, shared by compute and progress thread: no room for progress, "
           "so communication moves only while a rank waits";
}

int bind_plan_assign(struct bind_plan *plan, enum bind_mode mode, int nranks, char *err,
                     size_t errlen)
{
    plan->bind = false;
    plan->nranks = nranks;
    int c = plan->ncores;
    if (mode == BIND_NONE) {
        snprintf(plan->summary, sizeof plan->summary, "%d ranks not bound (--bind-to none)",
                 nranks);
        return 0;
    }
    if (nranks > c) {
        if (mode == BIND_CORE) {
            snprintf(err, errlen, "--bind-to core: %d ranks but %d cores to bind them to "
                     "(--bind-to none shares them)", nranks, c);
            return -1;
        }
        snprintf(plan->summary, sizeof plan->summary, "%d ranks on %d cores: not bound; no "
                 "room for progress threads, which share cores with compute", nranks, c);
        return 0;
    }
    plan->mask = calloc((size_t)nranks, sizeof *plan->mask);
    plan->progress = calloc((size_t)nranks, sizeof *plan->progress);
    if (!plan->mask || !plan->progress) {
        snprintf(err, errlen, "out of memory planning the binding of %d ranks", nranks);
        return -1;
    }
    const char *how = lay_out(plan, nranks);
    plan->bind = true;
    snprintf(plan->summary, sizeof plan->summary, "%d rank%s on %d cores: each rank %s", nranks,
             nranks == 1 ? "" : "s", c, how);
    return 0;
}

int bind_plan_make(struct bind_plan *plan, enum bind_mode mode, int nranks, char *err,
                   size_t errlen)
{
    *plan = (struct bind_plan){0};
    if (mode != BIND_NONE && find_cores(plan) != 0) {
        bind_plan_free(plan);
        /* Not knowing the cores is no reason to refuse a run. */
        if (mode == BIND_AUTO)
            return 0;
        snprintf(err, errlen, "--bind-to core: cannot read the CPU affinity: %s",
                 strerror(errno));
        return -1;
    }
    if (bind_plan_assign(plan, mode, nranks, err, errlen) == 0)
        return 0;
    bind_plan_free(plan);
    return -1;
}

/* "5,21": the launcher does not link libtide, whose parser reads it. */
static void cpu_list(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int cpu = 0; cpu < CPU_SETSIZE && used + 12 < len; cpu++)
        if (CPU_ISSET(cpu, set))
            used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "", cpu);
}

int bind_apply(const struct bind_plan *plan, int rank)
{
    if (!plan->bind)
        return 0;
    if (sched_setaffinity(0, sizeof plan->mask[rank], &plan->mask[rank]) != 0)
        return errno;
    if (CPU_COUNT(&plan->progress[rank])) {
        char list[256];
        cpu_list(&plan->progress[rank], list, sizeof list);
        if (setenv("TIDE_PROGRESS_CPUS", list, 0) != 0)
            return errno;
    }
    /* A rank alone on its cores has nobody to give them to while it
     * spins: the library's "more ranks than cores" rule would see its
     * mask and yield on every idle pass, for nothing. */
    return setenv("TIDE_YIELD_WHEN_IDLE", "0", 0) != 0 ? errno : 0;
}

void bind_plan_free(struct bind_plan *plan)
{
    free(plan->cores);
    free(plan->mask);
    free(plan->progress);
    plan->cores = plan->mask = plan->progress = NULL;
    plan->ncores = 0;
    plan->bind = false;
}
