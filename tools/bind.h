/* bind.h - tide-run's rank binding: each rank on a core of its own, as
 * mpirun does by default for two ranks (--bind-to core).
 *
 * Why a launcher binds (measured here, 2-core KVM guest, Linux 6.18):
 * left to itself the scheduler stacked both ranks' threads on one core
 * (a rank that wakes another is followed by it, wake-affine), and a
 * nonblocking 1 MiB allreduce that hid 98 % of its time behind a sleeping
 * compute hid 7-74 % for minutes at a time, its operations starting up
 * to 0.5 ms after their post; bound, 97-99.9 % in every run. */
#ifndef TIDE_BIND_H
#define TIDE_BIND_H

#include <sched.h>
#include <stdbool.h>

enum bind_mode {
    BIND_AUTO, /* core if every rank gets a core of its own, else none */
    BIND_CORE, /* one core per rank; more ranks than cores is an error */
    BIND_NONE, /* leave the ranks where the scheduler puts them */
};

struct bind_plan {
    int ncores;       /* cores in our affinity mask */
    cpu_set_t *cores; /* [ncores]: the CPUs (hardware threads) of each */
    bool bind;        /* whether ranks are bound */
};

/* Parses "core", "none" or "auto"; false on anything else. */
bool bind_parse(const char *text, enum bind_mode *mode);

/* Finds the cores we may run on and decides, for nranks ranks.  0, or -1
 * with why in err (an explicit --bind-to core with too few cores). */
int bind_plan_make(struct bind_plan *plan, enum bind_mode mode, int nranks, char *err,
                   size_t errlen);

/* In rank's child, before exec: bind it if the plan says so.  Returns 0
 * or an errno (the rank then runs unbound). */
int bind_apply(const struct bind_plan *plan, int rank);

void bind_plan_free(struct bind_plan *plan);

#endif
