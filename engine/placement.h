/* placement.h - where a rank's progress thread runs.
 *
 * A progress thread that shares its CPU with the caller's compute moves
 * nothing while the caller computes: measured on a 16-core host with
 * tide-run binding each rank to one core, a nonblocking allreduce hid
 * 0-20 % of its time behind busy compute; the same ranks unbound hid
 * 72-99.9 %.  So where the process's affinity mask has room, the
 * progress thread gets a CPU of it that the calling thread leaves to it
 * (as Intel MPI's I_MPI_ASYNC_PROGRESS_PIN does), and where there is no
 * room we say so.
 *
 * TIDE_PROGRESS_CPUS (tide_config.progress_cpus) chooses:
 *   auto (or "")  the highest-numbered CPU of the mask, if the mask has
 *                 two or more CPUs and is this rank's alone: narrower
 *                 than the CPUs this host gives the job and not shared
 *                 with the other local ranks (local ranks x mask size <=
 *                 host CPUs), or the whole host for a rank alone on it.
 *                 A mask of the whole host that the local ranks share
 *                 (torchrun, mpirun --bind-to none) with room for all
 *                 their progress threads (CPUs >= 2 x local ranks) is
 *                 split by local rank: rank k's progress thread takes
 *                 the (k+1)-th highest CPU, and every caller keeps off
 *                 the top local-ranks CPUs, so no compute lands where a
 *                 progress thread runs.  Other shared masks (local rank
 *                 unknown, too few CPUs, a socket several ranks share)
 *                 are left to the scheduler: a fixed choice there could
 *                 stack progress threads on one CPU.
 *   none          no placement.
 *   a CPU list    "5", "5,21", "4-5": the progress thread goes there
 *                 (tide-run passes the CPUs it set aside for the rank).
 * When placed, the calling thread's mask loses the progress CPUs (if
 * anything is left), so the compute - and threads the caller starts
 * later, such as an OpenMP pool - stays off them. */
#ifndef TIDE_PLACEMENT_H
#define TIDE_PLACEMENT_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* What the decision looks at (pure: tests pass made-up machines). */
struct tide__placement_in {
    const char *setting; /* "", "auto", "none" or a CPU list */
    cpu_set_t mask;      /* the calling thread's affinity mask */
    int host_cpus;       /* CPUs this host (container, cgroup) gives the job */
    int local_size;      /* ranks on this host; -1 unknown */
    int local_rank;      /* our place among them (0..local_size-1); -1 unknown */
};

struct tide__placement {
    cpu_set_t progress; /* the progress thread's CPUs; empty: left to the scheduler */
    cpu_set_t caller;   /* the calling thread's new mask; empty: unchanged */
    bool own;           /* the progress CPUs are not the caller's: it may spin there */
    pid_t caller_tid;   /* the thread moved off them, and its mask before (given */
    cpu_set_t caller_was; /* back at tide_finalize; progress.c) */
    char why[320];      /* one line, said at info level */
};

/* Decide.  0, or TIDE_EINVAL when the setting is neither auto, none nor
 * a valid CPU list (why says so). */
int tide__placement_decide(const struct tide__placement_in *in, struct tide__placement *out);

/* Whether setting is one the decision takes. */
bool tide__placement_setting_ok(const char *setting);

/* The inputs of this process: the calling thread's mask, the host's CPUs. */
void tide__placement_probe(struct tide__placement_in *in);

/* "0-3,8,10-11" into set.  0, or -1 on anything else (empty, a CPU past
 * CPU_SETSIZE, a range backwards, trailing junk). */
int tide__cpulist_parse(const char *text, cpu_set_t *set);

/* set as a CPU list, "0-3,8" ("" for an empty set), cut to len. */
void tide__cpulist_format(const cpu_set_t *set, char *buf, size_t len);

#endif
