/* bind.c - see bind.h.  Cores are the CPUs of our affinity mask grouped
 * by (package, core id) from sysfs, so that a rank bound to a core of a
 * machine with SMT gets both its hardware threads; where sysfs says
 * nothing, each CPU is a core.  Rank r gets the r-th core in CPU order:
 * a container's cpuset is respected, ranks never share a core. */
#include "bind.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool bind_parse(const char *text, enum bind_mode *mode)
{
    if (strcmp(text, "core") == 0)
        *mode = BIND_CORE;
    else if (strcmp(text, "none") == 0)
        *mode = BIND_NONE;
    else if (strcmp(text, "auto") == 0)
        *mode = BIND_AUTO;
    else
        return false;
    return true;
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

int bind_plan_make(struct bind_plan *plan, enum bind_mode mode, int nranks, char *err,
                   size_t errlen)
{
    *plan = (struct bind_plan){0};
    if (mode == BIND_NONE)
        return 0;
    if (find_cores(plan) != 0) {
        bind_plan_free(plan);
        /* Not knowing the cores is no reason to refuse a run. */
        if (mode == BIND_AUTO)
            return 0;
        snprintf(err, errlen, "--bind-to core: cannot read the CPU affinity: %s",
                 strerror(errno));
        return -1;
    }
    plan->bind = nranks <= plan->ncores;
    if (plan->bind)
        return 0;
    int ncores = plan->ncores;
    bind_plan_free(plan);
    if (mode == BIND_CORE) {
        snprintf(err, errlen, "--bind-to core: %d ranks but %d cores to bind them to "
                 "(--bind-to none shares them)", nranks, ncores);
        return -1;
    }
    return 0;
}

int bind_apply(const struct bind_plan *plan, int rank)
{
    if (!plan->bind)
        return 0;
    if (sched_setaffinity(0, sizeof plan->cores[rank], &plan->cores[rank]) != 0)
        return errno;
    /* A rank alone on its core has nobody to give the core to while it
     * spins: the library's "more ranks than cores" rule would see one
     * core in its mask and yield on every idle pass, for nothing. */
    return setenv("TIDE_YIELD_WHEN_IDLE", "0", 0) != 0 ? errno : 0;
}

void bind_plan_free(struct bind_plan *plan)
{
    free(plan->cores);
    plan->cores = NULL;
    plan->ncores = 0;
}
