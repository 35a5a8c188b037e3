/* bind.h - tide-run's rank binding: each rank on a core of its own, as
 * mpirun does by default for two ranks (--bind-to core), and beside it
 * room for the rank's progress thread.
 *
 * Why a launcher binds (measured here, 2-core KVM guest, Linux 6.18):
 * left to itself the scheduler stacked both ranks' threads on one core
 * (a rank that wakes another is followed by it, wake-affine), and a
 * nonblocking 1 MiB allreduce that hid 98 % of its time behind a sleeping
 * compute hid 7-74 % for minutes at a time, its operations starting up
 * to 0.5 ms after their post; bound, 97-99.9 % in every run.
 *
 * Why the progress thread needs room of its own (16-core host, one core
 * a rank): it and the compute shared the core, and a nonblocking
 * allreduce hid 0-20 % of its time behind busy compute.  So with C cores
 * for n ranks, rank r gets (bind_plan_assign):
 *   C >= 2n             two cores: compute on core 2r, progress on 2r+1
 *   SMT, n <= C < 2n    core r, its progress on the core's last hardware
 *                       thread (the sibling of the compute's)
 *   n < C < 2n          core r's compute, and one of the C - n spare cores
 *                       for the progress threads of a run of neighbours
 *   C == n              core r alone: no room, said at info level
 *   n > C               not bound (auto) or refused (--bind-to core)
 * The rank's mask holds both its compute and its progress CPUs, so
 * helper threads (Gloo's, a runtime's) have somewhere to run; libtide,
 * told the progress CPUs in TIDE_PROGRESS_CPUS, puts its thread there and
 * keeps the caller's thread off them (engine/placement.h). */
#ifndef TIDE_BIND_H
#define TIDE_BIND_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

enum bind_mode {
    BIND_AUTO, /* core if every rank gets a core of its own, else none */
    BIND_CORE, /* one core per rank; more ranks than cores is an error */
    BIND_NONE, /* leave the ranks where the scheduler puts them */
};

struct bind_plan {
    int ncores;          /* cores in our affinity mask */
    cpu_set_t *cores;    /* [ncores]: the CPUs (hardware threads) of each */
    bool bind;           /* whether ranks are bound */
    int nranks;
    cpu_set_t *mask;     /* [nranks] each rank's CPUs, if bind */
    cpu_set_t *progress; /* [nranks] its progress thread's, inside mask; may be empty */
    char summary[200];   /* what was decided, one line */
};

/* Parses "core", "none" or "auto"; false on anything else. */
bool bind_parse(const char *text, enum bind_mode *mode);

/* The word bind_parse reads for mode (for a command line). */
const char *bind_name(enum bind_mode mode);

/* Finds the cores we may run on and decides, for nranks ranks.  0, or -1
 * with why in err (an explicit --bind-to core with too few cores). */
int bind_plan_make(struct bind_plan *plan, enum bind_mode mode, int nranks, char *err,
                   size_t errlen);

/* The decision alone, for plan->cores as given (tests pass made-up
 * machines): fills bind, nranks, mask, progress and summary.  0, or -1
 * with why in err (--bind-to core with too few cores, out of memory). */
int bind_plan_assign(struct bind_plan *plan, enum bind_mode mode, int nranks, char *err,
                     size_t errlen);

/* In rank's child, before exec: bind it if the plan says so, and tell
 * libtide its progress CPUs (unless TIDE_PROGRESS_CPUS is set already).
 * Returns 0 or an errno (the rank then runs unbound). */
int bind_apply(const struct bind_plan *plan, int rank);

void bind_plan_free(struct bind_plan *plan);

#endif
