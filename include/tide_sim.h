/*
 * tide_sim.h - tide's simulated network: N ranks in one process, every
 * call of tide.h working on their communicators unchanged.  For tests,
 * fuzzing and planning (tide-sim); a program that only runs jobs needs
 * tide.h alone.
 */
#ifndef TIDE_SIM_API_H
#define TIDE_SIM_API_H

#include "tide.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* The simulated network                                               */
/* ------------------------------------------------------------------ */

/*
 * N ranks in this one process, joined by a simulated network instead of
 * TCP: every collective and every call above works on their
 * communicators unchanged, driving the very same state machines.  Used to
 * test them under every order in which messages can arrive (a seeded
 * schedule), under faults, and to plan for clusters far larger than a
 * machine (tide-sim).
 *
 * Time is virtual: it moves only from one network event to the next, so a
 * run is exactly reproducible from its seed, and deadlines (timeout_s,
 * tide_wait's timeout) are in virtual time too.
 *
 * The cost model, per message of L bytes (payload + 48-byte header) from
 * rank a to rank b: it occupies a's send port for beta*L (ports are taken
 * in the order messages are posted), travels alpha, and occupies b's
 * receive port for beta*L; plus a random delay of up to jitter_s.
 * Messages between two ranks arrive in the order they were sent, as over
 * one TCP stream.  A send completes when its message arrives.
 *
 * Two ways to drive it, both single-threaded in effect:
 *   - Post nonblocking operations on the ranks' communicators, then
 *     tide_sim_run (or tide_wait/tide_test on any request, which advance
 *     the whole network).
 *   - tide_sim_spawn runs one program per rank, each in its own thread;
 *     only one runs at a time, handing over whenever it waits, so blocking
 *     calls (tide_allreduce, tide_comm_split, ...) work and the schedule
 *     stays reproducible.
 */
typedef struct tide_sim tide_sim;

typedef struct tide_sim_config {
    uint64_t seed;       /* the schedule: jitter and hand-over choices */
    double alpha_s;      /* per-message latency (default 5e-6) */
    double bandwidth;    /* bytes per second of each port (default 12.5e9) */
    double jitter_s;     /* extra random delay per message (default 0) */
    int timing_only;     /* 1: move and reduce no data, only time it (for
                          * thousands of ranks; buffers are never touched
                          * and may be shared by all ranks) */
    double timeout_s;    /* deadline of every operation (default 300) */
    int log_level;       /* as in tide_config (default 0: errors only) */
    size_t stage_slot_bytes; /* > 0: the ranks share staging memory, as ranks on
                          * one host do over shared memory, in slots of this
                          * many bytes (16 to 1 GiB; two rounds' chunks), so
                          * the staged collectives ("shm") run and are fuzzed
                          * with as many rounds as small slots make; 0: not
                          * (default) */
    int ranks_per_host;  /* > 0: a two-level network.  Ranks r with the same
                          * r / ranks_per_host share a host: messages between
                          * them cost host_alpha_s and host_bandwidth through
                          * the ranks' own ports, the others alpha_s and
                          * bandwidth through their hosts' network ports, one
                          * per host, shared by its ranks (a NIC); staging
                          * memory (if any) is shared within a host only; and
                          * hierarchical collectives group ranks by host.
                          * 0: one level, every rank its own port with the
                          * costs above (default) */
    double host_alpha_s; /* latency inside a host (default 0.5e-6) */
    double host_bandwidth; /* bytes per second inside a host (default 50e9) */
    int boards;          /* nonzero: the ranks that share staging memory (so
                          * stage_slot_bytes > 0; within a host only where
                          * ranks_per_host is set) also have board areas,
                          * so the board collectives run; a flag a rank
                          * raises is seen by its peers one latency inside
                          * a host later (host_alpha_s, or alpha_s in a
                          * one-level network), plus jitter.  0: none
                          * (default) */
} tide_sim_config;

/* What one simulated rank sent and received. */
typedef struct tide_sim_stats {
    uint64_t msgs_sent, bytes_sent;  /* bytes include the headers */
    uint64_t msgs_recv, bytes_recv;
    uint64_t unexpected;             /* messages that arrived before their receive */
} tide_sim_stats;

/* Fill cfg with the defaults above (seed 1). */
TIDE_API void tide_sim_config_default(tide_sim_config *cfg);

/*
 * Make a simulated network of n ranks (1 <= n <= 1<<20) and the world
 * communicator of each: comms[r] is rank r's.  cfg NULL: the defaults.
 * TIDE_EINVAL for a bad argument, TIDE_ENOMEM.
 */
TIDE_API int tide_sim_create(int n, const tide_sim_config *cfg, tide_sim **sim,
                             tide_comm **comms);

/*
 * Run the network until nothing more can happen: every message
 * delivered, every started request complete (those that can never
 * complete fail at their deadline, in virtual time).  Returns 0.
 */
TIDE_API int tide_sim_run(tide_sim *sim);

/*
 * Run fn(comms[r], arg) for every rank r, each in a thread of its own of
 * which only one runs at a time (see above); returns when all have
 * returned.  TIDE_ENOMEM if the threads cannot be made; at most 1024
 * ranks.
 */
TIDE_API int tide_sim_spawn(tide_sim *sim, void (*fn)(tide_comm *comm, void *arg), void *arg);

/* Virtual time since the network was made, in nanoseconds. */
TIDE_API uint64_t tide_sim_time_ns(const tide_sim *sim);

/* Rank r's traffic so far.  TIDE_EINVAL for a bad rank. */
TIDE_API int tide_sim_stats_of(const tide_sim *sim, int r, tide_sim_stats *out);

/*
 * Faults.  Crash rank r after `after` more message deliveries anywhere
 * in the network (0: now): its messages in flight are lost, its peers see
 * it gone (TIDE_EPEER) and its own requests fail with TIDE_EABORTED.
 */
TIDE_API int tide_sim_crash(tide_sim *sim, int r, uint64_t after);

/*
 * Hold every message from rank `from` to rank `to` that would arrive
 * between virtual times at_s and at_s + for_s until the end of that
 * window (a stalled link; longer than timeout_s, its operations time
 * out).
 */
TIDE_API int tide_sim_stall(tide_sim *sim, int from, int to, double at_s, double for_s);

/*
 * Finalize every rank not finalized yet (tide_finalize on a simulated
 * world communicator works too) and free the network.
 */
TIDE_API void tide_sim_destroy(tide_sim *sim);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_SIM_API_H */
