/* sim.h - the simulated network's insides, shared by sim.c (the virtual
 * clock, the event loop, the public calls), sim_net.c (the transport each
 * simulated rank's engine sees) and sim_spawn.c (rank programs run as
 * threads that take turns).
 *
 * One heap orders everything that happens at a virtual time: message
 * deliveries, ranks looking at their board watches, and the deadlines of
 * requests (every simulated context's timers point at it).  Firing the
 * earliest one and then letting the engines of the ranks it touched
 * deliver their completions is one step; nothing else ever moves, so a
 * run is a pure function of its seed. */
#ifndef TIDE_SIM_H
#define TIDE_SIM_H

#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/context.h"
#include "transports/match.h"
#include "tide_sim.h"

/* What a rank knows of one peer: receives posted for it, frames that came
 * early, and when the peer's last message arrives here (a later one never
 * overtakes it, as on a TCP stream). */
struct sim_peer {
    int peer; /* -1: an empty slot */
    uint64_t last_arrival;
    struct tide__match mq;
};

/* A port: when its sending and its receiving sides are free. */
struct sim_port {
    uint64_t tx_free, rx_free;
};

struct sim_rank {
    struct tide__transport base; /* base.ctx: its engine; NULL once finalized */
    struct tide_sim *sim;
    int rank;
    const char *gone; /* NULL while it takes part; else why not */
    char gone_buf[96];
    struct sim_port port;      /* its own: the network's, or inside its host */
    struct sim_peer *peers;    /* open addressing on peer; cap a power of 2 */
    size_t npeers, peers_cap;
    bool dirty; /* queued for its engine to deliver completions */
    uint64_t stage_used; /* its staging slots taken, one bit each (sim_net.c) */
    uint8_t *board;             /* cfg.boards: its board area, made when first asked for */
    struct tide__msgq watches;  /* its posted TIDE_MSG_WATCH messages */
    struct tide__timer look;    /* when it next asks its watches whether they are ready */
    tide_sim_stats stats;
};

/* A message on its way. */
struct sim_event {
    struct tide__timer timer; /* in the network's heap, at the arrival time */
    struct tide_sim *sim;
    tide__msg *m; /* the send */
    int from, to;
    struct sim_event *next_free;
};

struct sim_stall {
    int from, to;
    uint64_t start, end;
};

struct sim_crash {
    int rank;
    uint64_t at; /* when this many messages have been delivered */
};

struct sim_spawn;

struct tide_sim {
    tide_sim_config cfg;
    int n;
    struct sim_rank *ranks;
    uint64_t now; /* virtual ns */
    struct sim_port *nics;  /* ranks_per_host: each host's network port */
    double ns_per_byte, host_ns_per_byte; /* between hosts, inside one */
    uint64_t alpha_ns, host_alpha_ns, jitter_ns;
    uint64_t rng;
    struct tide__timer_heap heap;
    struct sim_event *free_events;
    int *dirty; /* a ring of ranks whose engines have news, oldest first */
    int dirty_head, ndirty;
    uint64_t delivered;
    struct sim_crash *crashes;
    int ncrashes;
    struct sim_stall *stalls;
    int nstalls;
    struct sim_spawn *spawn; /* while tide_sim_spawn runs */
    uint8_t *stage; /* cfg.stage_slot_bytes: every rank's staging area, one after another */
};

/* Slots in each rank's staging area (cfg.stage_slot_bytes each), as the
 * shared-memory transport has. */
#define SIM_STAGE_SLOTS 64

/* ---- sim.c ---- */

/* The next number of the schedule's generator. */
uint64_t tide__sim_rand(struct tide_sim *s);
/* Queue rank r for its engine to deliver what completed. */
void tide__sim_dirty(struct tide_sim *s, struct sim_rank *r);
/* Let every queued engine deliver, until none has news. */
void tide__sim_flush(struct tide_sim *s);
/* Fire the earliest armed timer (a delivery or a deadline) at its time,
 * then flush.  False when nothing is armed. */
bool tide__sim_step(struct tide_sim *s);
/* A delivery happened: apply the crashes due now. */
void tide__sim_count_delivery(struct tide_sim *s);
/* tide_wait and tide_test on a simulated request (wait.c). */
int tide__sim_wait(struct tide_sim *s, tide_req *req, int timeout_ms);
void tide__sim_test(struct tide_sim *s);

/* ---- sim_net.c: the transport of a simulated rank ---- */

void tide__sim_net_init(struct tide_sim *s, struct sim_rank *r, struct tide__ctx *ctx);
/* Rank r leaves (crash, abort, finalize) for the reason why: its messages
 * in flight are dropped, its watches fail, and so do its peers' traffic
 * with it and their watches that wait for it. */
void tide__sim_net_lose(struct sim_rank *r, const char *why);
/* tide_sim_destroy: free what the network kept of rank r once it left
 * (its board area). */
void tide__sim_net_free(struct sim_rank *r);
/* Is t one of the network's own events (a delivery, or a rank looking
 * at its board watches), not a request's deadline? */
bool tide__sim_is_delivery(const struct tide__timer *t);

/* ---- sim_spawn.c ---- */

/* The calling thread's rank program, if it is one of s's; then waiting
 * and testing hand the turn over instead of driving. */
bool tide__sim_in_program(const struct tide_sim *s);
int tide__sim_program_wait(struct tide_sim *s, tide_req *req, int timeout_ms);
void tide__sim_program_yield(struct tide_sim *s);

#endif
