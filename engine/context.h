/* context.h - the engine's central structures: the per-process context
 * (reactor, progress, transport, timers), communicators and requests.
 *
 * Ownership and threads, in one place:
 *   - A context is made by tide_init and freed by tide_finalize.  Its
 *     reactor, timers, transport and the lists of live requests belong to
 *     whoever drives the reactor: in thread mode the holder of drive_lock
 *     (the progress thread, or a caller waiting in tide_wait, which takes
 *     over so a round trip needs no thread hand-off), in inline mode the
 *     one thread that uses the communicator.  "Reactor thread" below means
 *     that holder.
 *   - User threads reach the reactor only through the command queue
 *     (mpsc.h) plus a wake-up, and read request results through the
 *     request's atomic state word.
 *   - A request holds two references: the user's (dropped by
 *     tide_req_free) and the engine's (dropped when it completes).
 */
#ifndef TIDE_CONTEXT_H
#define TIDE_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/clock.h"
#include "engine/mpsc.h"
#include "engine/placement.h"
#include "engine/reactor.h"
#include "engine/recorder.h"
#include "engine/seqmap.h"
#include "engine/timer_heap.h"
#include "tide.h"
#include "engine/msgq.h"
#include "engine/transport.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Something for the reactor thread to do, handed over by a user thread. */
enum tide__cmd_kind {
    TIDE_CMD_START,    /* start cmd->req */
    TIDE_CMD_CALLBACK, /* attach (or run) cmd->req's completion callback */
    TIDE_CMD_ABORT,    /* fail every pending request */
    TIDE_CMD_STOP,     /* abort, drain, and leave the progress loop */
};

struct tide__cmd {
    struct tide__mpsc_node node;
    enum tide__cmd_kind kind;
    tide_req *req;
    _Atomic uint32_t handled; /* ABORT/STOP: set when done; the caller waits */
};

/* Who moves a context's operations, and on what clock.  The engine asks
 * only this table, never which kind it has:
 *   - tide__drive_reactor (progress.c): real time; the reactor, driven by
 *     the progress thread or by callers waiting (thread or inline mode);
 *   - the simulated network's (transports/sim): virtual time, in which
 *     a wait runs the whole network until its request completes.
 * A new way of running (another simulator, a replay) is a new table. */
struct tide__drive_ops {
    const char *name; /* "reactor", "sim" */
    /* Keeps the flight recorder and dumps it to files (TIDE_DUMP_DIR):
     * a real process does; thousands of simulated ranks in one would pay
     * the rings' memory for nothing and have nowhere to dump. */
    bool records;
    uint64_t (*now)(const struct tide__ctx *ctx);
    /* tide_init: get going (a progress thread, a ring); 0 or TIDE_E*,
     * with the reason in ctx->init_err. */
    int (*start)(struct tide__ctx *ctx);
    /* tide_finalize: fail what is pending, let go of every buffer. */
    void (*stop)(struct tide__ctx *ctx);
    /* tide_wait: until req completes or timeout_ms (< 0: none) passed on
     * this clock.  Returns req's status or TIDE_ETIMEDOUT. */
    int (*wait)(struct tide__ctx *ctx, tide_req *req, int timeout_ms);
    /* tide_test and friends: one pass of progress, if it can be had
     * without blocking, waiting up to wait_ns for news. */
    void (*poke)(struct tide__ctx *ctx, uint64_t wait_ns);
};

extern const struct tide__drive_ops tide__drive_reactor;

/* What each kind of operation plugs into the engine. */
struct tide__op_vtbl {
    const char *name; /* "send", "recv", "barrier", "allreduce", ... */
    /* Reactor thread: post the first messages (or finish at once). */
    void (*start)(tide_req *req);
    /* Reactor thread: message m, posted by this request, completed
     * successfully.  (Failures never reach step: the engine fails the
     * request and drains its other messages.) */
    void (*step)(tide_req *req, tide__msg *m);
    /* Reactor thread, optional: give back what start took (scratch
     * memory); runs once as the request completes, success or failure,
     * when the transport holds none of its messages any more. */
    void (*release)(tide_req *req);
    /* Reactor thread, optional: where the algorithm stands ("round 2 of
     * 3"), for a deadline's message and the flight recorder. */
    void (*describe)(const tide_req *req, char *buf, size_t len);
};

enum { TIDE_REQ_PENDING = 0, TIDE_REQ_DONE = 1, TIDE_REQ_WAITER = 2 };

struct tide_req {
    _Atomic uint32_t state; /* TIDE_REQ_*; WAITER: a caller sleeps for it (wait.c) */
    _Atomic int refs;       /* user + engine */
    const struct tide__op_vtbl *vt;
    tide_comm *comm;
    struct tide__ctx *ctx;
    struct tide__cmd start_cmd; /* hands the request to the reactor */
    struct tide__cmd cb_cmd;    /* hands its callback to the reactor */
    bool start_handed_over; /* poster's thread: a nonblocking post left its start
                               to the progress thread (request.c) */
    void (*cb)(tide_req *, void *); /* reactor-owned: runs in finish() */
    void *cb_arg;
    void (*cb_new)(tide_req *, void *); /* handed over by tide_req_on_complete */
    void *cb_new_arg;
    _Atomic int cb_claimed;
    struct tide__timer timer; /* the operation's deadline */
    uint64_t deadline_ns;
    uint64_t seq;              /* collective sequence (0 for p2p) */
    struct tide__frame sig;    /* collectives: kind, dtype, redop, root, count */
    bool told_by_peer;         /* failed by a peer's poison: do not echo it */
    int lost;                  /* 1 + world rank of the lost peer its failure
                                  stems from; 0: none (poison frames carry it) */
    int late_err;              /* reports comm's late failure instead of running */
    bool survives_revoke;      /* runs on a revoked comm (revoke and recovery calls);
                                  every other operation fails there */
    bool sees_peer_loss;       /* its step gets messages that failed with TIDE_EPEER
                                  (the agreement's failure detector) */
    int status;                /* final result, valid once DONE */
    int failing;               /* first error, while messages drain */
    bool finished;             /* reactor: completed, callback ran */
    int source;                /* receive: 1 + the comm rank its message came
                                  from; 0 for other operations */
    tide__msg *live;           /* messages the transport holds */
    unsigned nlive;
    tide_req *act_prev, *act_next; /* in the context's active list */
    struct tide__seqmap_node by_seq; /* collectives: in ctx->running */
    size_t bytes;                  /* receive: bytes that arrived */
    size_t op_bytes;               /* what the call moves (tide__req_submit) */
    uint64_t trace_t0;     /* TIDE_TRACE: when it started */
    uint64_t trace_bytes;  /* TIDE_TRACE: bytes its messages moved */
    const char *opname;    /* in messages: vt->name unless set */
    const char *algorithm;
    unsigned size_class; /* which pool it returns to */
    tide_req *pool_next;
    tide_req *gate_next; /* a part waiting for its turn to start (subreq.c) */
    bool gated;          /* it waits there */
    char message[512]; /* a deadline's lists every peer it waits for */
    /* operation-specific state follows in the enclosing struct */
};

struct tide_comm {
    struct tide__ctx *ctx;
    uint32_t id; /* on the wire; world is 1; unique among a rank's comms */
    int rank, size;
    int *world_of;  /* comm rank -> world rank; NULL for the world */
    _Atomic uint64_t next_seq; /* collective sequence numbers, from 1 */
    _Atomic int refs;          /* the user's + one per live request */
    uint64_t started_seq;      /* reactor: highest sequence started */
    int any_first;             /* reactor: the rank an any-source receive
                                  asks first (collectives/p2p.c) */
    struct tide__group_tally { /* create_group: groups made per member list */
        uint32_t hash, count;
    } *groups;
    int ngroups;
    uint64_t *failed;          /* reactor: sequences of collectives that failed here */
    size_t nfailed, failed_cap;
    /* Reactor: the last collectives that succeeded here, by seq modulo
     * the size, so that news of one can say what this rank called. */
    struct tide__frame recent[16];
    /* A failure learned after its collective succeeded here, for the
     * next collective call to report (async_error.c). */
    _Atomic int late_err;
    uint64_t late_seq;         /* reactor: the last collective recorded late */
    char late_text[232];
    /* Set once by the reactor when comm is revoked here or by a peer
     * (revoke.c); read by callers too (a request on it fails at start). */
    _Atomic bool revoked;
    _Atomic uint64_t agreements; /* agree/shrink calls made on it (agree.c) */
    /* Hosts (hosts.c), set once as the communicator is made. */
    bool shared;               /* its members map each other's staging areas */
    int nhosts, per_host;      /* hosts its members are on; members on each,
                                  or 0 when the hosts do not have as many */
    tide_comm *host[2];        /* the hierarchy, when per_host >= 2 on >= 2
                                  hosts: our host's members, twice (parts that
                                  open a collective run on [0], parts that close
                                  it on [1]) ... */
    tide_comm *cross;          /* ... and the members at our place on every
                                  host; NULL if no hierarchy */
    tide_req *gated;           /* reactor: parts numbered here waiting to start
                                  in number order (subreq.c), by seq */
    int hosts_err;             /* making them failed: hierarchical collectives
                                  on comm fail with it */
    tide_comm *next;           /* in the context's list of comms */
    /* Reactor: its board (collectives/board.c), made at its first board
     * collective, and what lets it go where the last reference goes
     * (any thread). */
    struct tide__board_comm *board;
    void (*board_free)(tide_comm *comm);
    /* Drive right: check what its last board collective left unread
     * (board.h), for tide_comm_async_error. */
    void (*board_check)(tide_comm *comm);
    struct tide__recorder *rec; /* reactor: its last collectives (recorder.c), made
                                   at its first; NULL until then or if memory ran out */
    /* The algorithms chosen for the caller's last calls here, per kind
     * (collectives/select.c, tide__select_call); malloc'd at the first,
     * or NULL.  The caller's thread only: one calls collectives on a
     * communicator at a time (MPI's rule). */
    struct tide__select_memo *select_memo;
};

#define TIDE_POOL_CLASSES 16

struct tide__ctx {
    _Atomic int refs; /* the world communicator + every unreleased request */
    const struct tide__namer *_Atomic namer; /* names.c: the collective layer's */
    tide_config cfg;
    int rank, size;
    uint64_t timeout_ns;
    uint64_t spin_ns;
    bool spin_yields; /* a spinning waiter yields on idle passes (comm.c: spin_yields) */
    bool board_direct; /* blocking board collectives may end on the caller's thread
                          (collectives/board.h); TIDE_BOARD_DIRECT=0 turns it off */
    uint64_t board_direct_ended; /* drive right: how many did (tests look) */
    bool streaming_stores; /* large board parts go around the caches (collectives/board.c,
                              publish); TIDE_STREAMING_STORES=0 turns it off */
    uint64_t frames_unexpected;  /* drive right: collectives' frames that came before their
                                    receive (tests look) */
    bool inline_mode;
    /* tide_finalize ran: every call on its communicators is refused
     * (tide__comm_usable).  The context's memory outlives it for that
     * (comm.c, retire). */
    _Atomic bool finalized;
    bool retire_on_free; /* made by tide_init: kept as a tombstone when freed */
    struct tide__trace *trace; /* TIDE_TRACE recording (trace.h), or NULL */
    struct tide__rec_ctx rec;  /* flight recorder dumps (recorder_dump.c) */
    /* Which boards our communicators hold (collectives/board.c), made at
     * the first board collective, freed with the context by boards_free. */
    struct tide__board_table *boards;
    void (*boards_free)(struct tide__ctx *ctx);

    /* progress */
    _Atomic uint32_t drive_lock; /* thread mode: 1 while someone drives the reactor
                                    (progress.c, tide__progress_try_drive) */
    _Atomic uint32_t waiters;   /* thread mode: callers inside tide_wait */
    _Atomic uint64_t last_wait_ns; /* when a caller last left tide_wait, or
                                      TIDE__WAIT_JUST_ENDED (progress.c) */
    _Atomic bool work_pending;  /* operations were active when the last driver let go,
                                   or a post was queued since */
    pthread_t thread;
    bool thread_started;
    struct tide__placement place; /* where the progress thread runs (placement.h); its
                                     `own` is cleared if the thread could not go there */
    struct tide__mpsc cmds;
    _Atomic int sleeping;     /* threads (about to be) blocked in the reactor's kernel wait:
                                 the progress thread, a caller in tide_wait, or both */
    _Atomic uint32_t napping; /* progress thread naps on this futex word */
    _Atomic bool parked;      /* progress thread sleeps on `waiters` (callers drive) */
    _Atomic uint32_t sleepers; /* callers in tide_wait asleep on `wake_gen` */
    _Atomic uint32_t wake_gen; /* their futex word: bumped by tide__wake_sleepers */
    int wake_fd;              /* eventfd user threads write to wake it */
    uint64_t wake_buf;        /* target of the armed eventfd read */
    struct tide__uop wake_uop;
    bool stopping;            /* reactor: leave the loop */
    struct tide__cmd *stop_cmd; /* signalled once the loop has drained */
    int init_rc;              /* reactor thread's ring setup result */
    _Atomic uint32_t init_done;
    char init_err[256];

    const struct tide__drive_ops *drive; /* tide__drive_reactor unless simulated */
    void *drive_data;                    /* the driver's own (the simulator), or NULL */

    /* reactor thread only */
    struct tide__reactor reactor;
    struct tide__timer_heap *timers; /* own_timers, or the simulator's */
    struct tide__timer_heap own_timers;
    struct tide__transport *tp;
    bool timing_only;         /* move no payload, reduce nothing (a simulation of time) */
    tide_req *active;         /* started, not finished */
    unsigned nactive;
    struct tide__msgq done;   /* completed messages to deliver */
    int broken;               /* 0, or why every new operation fails */
    struct tide__seqmap running; /* active collectives by (comm, seq) */
    struct tide__seqmap notes;   /* mismatch.c: news of collectives not started */
    struct tide__seqmap_node *spare_notes; /* mismatch.c: freed notes, for reuse */
    struct tide__note *inbox; /* mismatch.c: transport reports to handle */
    size_t ninbox, inbox_cap;

    /* scratch buffers kept for reuse by collectives (scratch.c) */
    struct tide__scratch_cache {
        void *buf[8];
        size_t len[8];
        size_t total;
    } scratch;

    /* request pools and the list of sub-communicators (any thread,
     * under pool_lock) */
    pthread_mutex_t pool_lock;
    tide_req *pool[TIDE_POOL_CLASSES];
    tide_comm *comms; /* sub-communicators, for unique ids */

    tide_comm world;
};

/* last_wait_ns of a caller that left without reading the clock: the
 * progress thread takes the time it first sees it for it. */
#define TIDE__WAIT_JUST_ENDED UINT64_MAX

/* The context's clock: real time, or a simulator's virtual time. */
static inline uint64_t tide__ctx_now(const struct tide__ctx *ctx)
{
    return ctx->drive->now(ctx);
}

/* Any thread: has req completed?  (An acquire: its status and message
 * are then visible.) */
static inline bool tide__req_is_done(const tide_req *req)
{
    return atomic_load_explicit(&((tide_req *)req)->state, memory_order_acquire) & TIDE_REQ_DONE;
}

/* ---- request.c: the life of a request ---- */

/* Allocate a request of `size` bytes (>= sizeof(tide_req)) for comm,
 * zeroed, with both references held.  NULL when out of memory. */
tide_req *tide__req_new(tide_comm *comm, const struct tide__op_vtbl *vt, size_t size);
/* Zero a request of `size` bytes as tide__req_new does (all but the
 * message text, whose first byte only). */
void tide__req_clear(tide_req *req, size_t size);
/* Zero the part of a request that one never submitted uses (one on a
 * caller's stack that never reaches the reactor: collectives/board.h):
 * tide__req_clear's less the reactor's fields, reference count, commands,
 * callbacks and timer, which stay as they were.  Its comm and ctx are
 * among those: the caller sets them. */
void tide__req_clear_unsubmitted(tide_req *req);

/* memset(p, 0, n), never as `rep stos`: GCC writes a memset of a few
 * hundred constant bytes inline as that instruction, whose start-up
 * alone costs tens of cycles on AMD's cores (three of them were 15 % of
 * a 2-rank 8 B all-gather's samples there); the C library's, which this
 * calls, uses vector stores at these sizes. */
void tide__zero(void *p, size_t n);

/* Hand req to the reactor (any thread); bytes: what the call moves, for
 * the choice of who starts it (request.c).  Takes effect at once in
 * inline mode.  Returns 0; the request's outcome is reported through it. */
int tide__req_submit(tide_req *req, size_t bytes);

/* Reactor: the handlers of TIDE_CMD_START and TIDE_CMD_CALLBACK. */
void tide__req_start_cmd(tide_req *req);
void tide__req_attach_callback(tide_req *req);

/* Fill m as a message of req's operation (kind, sequence, tag) to or
 * from comm-rank peer (m->peer becomes its world rank). */
void tide__msg_init(tide__msg *m, tide_req *req, enum tide__msg_dir dir, int peer, uint8_t kind,
                    uint32_t tag, void *buf, size_t len);

/* A context for rank cfg->rank of cfg->size, with no transport yet
 * (comm.c).  wake: make the eventfd user threads wake the reactor with
 * (a simulated rank has no reactor to wake).  NULL when out of memory. */
struct tide__ctx *tide__ctx_new(const tide_config *cfg, bool wake);

/* Drop a reference to ctx; the last one frees it (comm.c). */
void tide__ctx_unref(struct tide__ctx *ctx);

/* Reactor: post message m on behalf of req. */
void tide__req_post(tide_req *req, tide__msg *m);

/* Reactor: take live message m back from the transport (a receive no
 * longer wanted).  True when it is gone and unlinked from req; false
 * when its completion is still to come (already completed, or the
 * transport still holds its buffer).  why, if not NULL: req's failure,
 * which a part (subreq.c) m stands for passes on to its peers. */
bool tide__req_take_back(tide_req *req, tide__msg *m, int err, const char *why);

/* Reactor: req succeeded (it must hold no live messages). */
void tide__req_succeed(tide_req *req);

/* Reactor: req failed.  The first error wins; the message is formatted
 * as "rank R: <op> <detail>: <error text>".  Live messages are withdrawn
 * and the request completes once the transport has let go of them all. */
void tide__req_fail(tide_req *req, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reactor: deliver completed messages to their requests. Returns count. */
int tide__ctx_deliver(struct tide__ctx *ctx);

/* Reactor: fail every active request with err. */
void tide__ctx_fail_all(struct tide__ctx *ctx, int err, const char *why);

/* Reactor: the deadline-timer callback of requests. */
void tide__req_expire(tide_req *req);

/* Free pooled requests (finalize). */
void tide__req_pool_free(struct tide__ctx *ctx);

/* ---- mismatch.c: ranks that called different collectives ---- */

/* ---- names.c: naming kinds and signatures ---- */

/* What the layer that defines collectives tells the engine about them:
 * "allreduce", the name of a TIDE_KIND_*, for the flight recorder's
 * dumps; "allreduce of 1000 float32 (sum) [ring]", for messages.  The
 * engine knows neither collectives nor algorithms (names.c). */
struct tide__namer {
    const char *(*kind_name)(uint8_t kind);
    void (*describe)(const struct tide__frame *s, char *buf, size_t len);
};
/* Any thread, before it hands ctx a request: from now on ctx names
 * kinds and signatures through namer. */
void tide__ctx_set_namer(struct tide__ctx *ctx, const struct tide__namer *namer);
const char *tide__kind_name(const struct tide__ctx *ctx, uint8_t kind);
void tide__describe_signature(const struct tide__ctx *ctx, const struct tide__frame *s, char *buf,
                              size_t len);
/* "rank <peer> called <theirs>; rank <us> called <ours>" into buf: how
 * every mismatch is told. */
void tide__describe_mismatch(const struct tide__ctx *ctx, int peer,
                             const struct tide__frame *theirs, const struct tide__frame *ours,
                             char *buf, size_t len);
/* Fail req with TIDE_EMISMATCH, saying what world rank peer called. */
void tide__fail_mismatch(tide_req *req, int peer, const struct tide__frame *theirs);
/* A collective is starting: apply what was learned of it before (early
 * frames, peers' failures).  True when that failed it. */
bool tide__check_notes(tide_req *req);
/* Whether something was learned of collective seq of comm before it
 * started here (the boards' direct path then leaves it to a request). */
bool tide__notes_waiting(struct tide__ctx *ctx, const tide_comm *comm, uint64_t seq);
/* req (a collective) failed here with err for the reason in detail:
 * remember it, and tell the other ranks of its comm unless told_by_peer
 * (they heard from the rank that failed first) or ctx is broken. */
void tide__collective_failed(tide_req *req, int err, const char *detail);
/* req (a collective) succeeded here: remember what it was. */
void tide__collective_succeeded(tide_req *req);
/* An engine-owned control message completed: free it. */
void tide__ctl_msg_done(tide__msg *m);
void tide__notes_free(struct tide__ctx *ctx);
/* Handle what the transport reported (early frames, poison). */
int tide__inbox_process(struct tide__ctx *ctx);

/* ---- waiting.c: what a pending request waits for ---- */

/* The distinct world ranks req's incomplete messages of direction dir
 * go to or come from: up to max of them into peers; returns how many
 * there are (possibly more than max). */
int tide__req_waits_on(const tide_req *req, enum tide__msg_dir dir, int *peers, int max);
/* "allreduce of 8 float (sum) on comm 1, 32 bytes, algorithm ring at
 * round 1 of 2; no data yet from rank 3; sends not taken by rank 1". */
void tide__req_describe_wait(const tide_req *req, char *buf, size_t len);
/* Only the peers: "no data yet from rank 3; sends not taken by rank 1". */
void tide__req_describe_peers(const tide_req *req, char *buf, size_t len);

/* ---- recorder.c, recorder_dump.c, recorder_signal.c: the flight recorder ---- */

/* Reactor: collective req starts / ended with status (0 or TIDE_E*). */
void tide__rec_start(tide_req *req);
void tide__rec_end(tide_req *req, int status);
/* Both at once, at time now (ctx's clock), for a collective that
 * succeeded without a request's start (collectives/board.h). */
void tide__rec_whole(tide_req *req, uint64_t now);
/* Reactor: req failed with err; its message is final.  Keeps the
 * comm's first error and dumps (at most once a second) when dumps are on. */
void tide__rec_failed(tide_req *req, int err);
/* Reactor: write this rank's dump now (TIDE_DUMP_DIR set); reason is
 * "deadline", "error" or "signal".  0 or a TIDE_E*. */
int tide__rec_dump(struct tide__ctx *ctx, const char *reason);
/* Reactor, each turn: a dump the signal asked for.  Cheap when none. */
static inline void tide__rec_poll(struct tide__ctx *ctx)
{
    if (atomic_load_explicit(&ctx->rec.dump_wanted, memory_order_relaxed) &&
        atomic_exchange(&ctx->rec.dump_wanted, 0))
        tide__rec_dump(ctx, "signal");
}
/* At tide_init (before any operation), or else at a context's first
 * collective (a simulated rank's, which records but never dumps): read
 * TIDE_DUMP_DIR and, when set, arm the dump signal (recorder_signal.c). */
void tide__rec_setup(struct tide__ctx *ctx);
/* Any thread, before ctx is freed: stop the signal's thread. */
void tide__rec_teardown(struct tide__ctx *ctx);

/* ---- async_error.c: failures learned after the fact ---- */

/* Reactor: collective seq of comm succeeded here, but a peer's account
 * (printf-style) says it failed; the next collective call reports it. */
void tide__async_error_record(tide_comm *comm, uint64_t seq, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Caller's thread, for a new collective request: give it the next
 * sequence number of its comm -- or, when a late failure waits, make
 * it report that instead (seq 0: it sends nothing, uses no number). */
void tide__coll_number(tide_req *req);
/* Reactor, as req starts: if it carries a late failure, fail it with
 * that and return true. */
bool tide__async_error_report(tide_req *req);

/* ---- revoke.c: tide_comm_revoke ---- */

/* The sequence number of a revoke notice: a poison frame (tag
 * -TIDE_EREVOKED) that names no collective but the whole communicator.
 * Collectives count up from 1 and never reach it. */
#define TIDE_REVOKE_SEQ UINT64_MAX

/* Reactor: comm is revoked, by this rank (origin = its world rank) or by
 * the notice of world rank `from`.  The first time: tell every other
 * reachable rank of comm (forwarding makes the notice reach them all
 * even if its origin dies while sending), then fail comm's pending
 * operations but recovery ones with TIDE_EREVOKED.  Later times: nothing. */
void tide__comm_revoked(tide_comm *comm, int origin, int from);

/* Reactor: send a poison frame (comm, seq) with err, lost (1 + world
 * rank of the loss it stems from, or 0) and text to every other
 * reachable rank of comm (mismatch.c). */
void tide__poison_comm(struct tide__ctx *ctx, tide_comm *comm, uint64_t seq, int err, int lost,
                       const char *text);

/* ---- agree.c: tide_comm_agree, tide_comm_shrink ---- */

/* The sequence number of comm's k-th agreement (from 0), counting down
 * from just below TIDE_REVOKE_SEQ; frames from TIDE_RECOVERY_SEQ_MIN up
 * belong to no collective. */
#define TIDE_RECOVERY_SEQ(k) (UINT64_MAX - 1 - (uint64_t)(k))
#define TIDE_RECOVERY_SEQ_MIN (UINT64_MAX - (1ull << 32))

/* subcomm.c: a communicator of parent's ranks members[0..n-1] (parent
 * ranks, in the new order, this rank among them) that every member
 * derives alike without a message, as shrink's survivors and the
 * hierarchy's communicators are; salt (for shrink, the agreement's
 * sequence number) makes its id differ from others' of the same
 * members. */
int tide__comm_derive(tide_comm *parent, const int *members, int n, uint64_t salt,
                      tide_comm **out);

/* ---- scratch.c: reactor-owned temporary buffers ---- */

/* A buffer of at least len bytes (reused when one is cached), or NULL. */
void *tide__scratch_get(struct tide__ctx *ctx, size_t len);
/* Give back a buffer from tide__scratch_get (len as asked); NULL is ok. */
void tide__scratch_put(struct tide__ctx *ctx, void *buf, size_t len);
/* Free the cache (finalize). */
void tide__scratch_free_all(struct tide__ctx *ctx);

/* ---- subcomm.c ---- */

/* Make a communicator of parent's ranks members[0..n-1] (parent ranks,
 * in the new order), with this process at new rank `rank` and wire id
 * `id` (0 and 1 are moved out of the way).  TIDE_EBUSY, logged, if
 * another live communicator here has that id. */
int tide__comm_new(tide_comm *parent, const int *members, int n, int rank, uint32_t id,
                   tide_comm **out);

/* FNV-1a over the bytes of v, from h (TIDE_COMM_ID_SEED to begin): how
 * a communicator's wire id is made from what its members all know. */
#define TIDE_COMM_ID_SEED 2166136261u
uint32_t tide__comm_id_mix(uint32_t h, uint64_t v);

/* How many groups with member-list hash `hash` this rank made from comm
 * before (and count this one).  UINT64_MAX when out of memory. */
uint64_t tide__comm_groups_before(tide_comm *comm, uint32_t hash);

/* Drop a reference to a sub-communicator; the last one frees it. */
void tide__comm_unref(tide_comm *comm);

/* The communicator of this process with wire id `id` (the world or a
 * live sub-communicator), or NULL.  Any thread. */
tide_comm *tide__comm_find(struct tide__ctx *ctx, uint32_t id);

/* 0 when comm may be used; TIDE_EINVAL, logged as fn's, after its
 * context's tide_finalize (a use that would otherwise read freed memory
 * or a torn-down transport). */
int tide__comm_usable(const tide_comm *comm, const char *fn);

/* ---- subreq.c: a request made of requests ---- */

/* Give part (a collective made with tide__req_new, not submitted) its
 * sequence number on its communicator: when its parent is called. */
void tide__part_number(tide_req *part);
/* Reactor: start part as a part of req, through m (which it fills).
 * req's step gets m when part succeeded (m->buf is part); req fails with
 * part's account when it failed.  req holds part's user reference. */
void tide__req_post_part(tide_req *req, tide__msg *m, tide_req *part);
/* request.c's delivery: part failed; fail req with its account. */
void tide__part_failed(tide_req *req, tide_req *part);
/* request.c: start part once every part numbered before it on its
 * communicator has started (at once if they have). */
void tide__part_admit(tide_req *part);
/* request.c: part's parent (named parent) fails with err, for the
 * reason why (NULL: none given).  true when part had not started: it is
 * the parent's no more (no completion will follow) and starts failing in
 * its turn; false when it runs: it fails, and its completion follows. */
bool tide__part_withdraw(tide_req *part, int err, const char *parent, const char *why);
/* Reactor: a part never posted because its parent ended first: start it
 * failing with err and why, so its number counts as failed here. */
void tide__req_drop_part(tide_req *part, int err, const char *why);

/* ---- hosts.c: which members share a host; the hierarchy's communicators ---- */

/* Once, as comm is made (the caller's thread, before any collective on
 * it): learn its hosts from the transport and, when the members are
 * spread evenly over several hosts, make comm->host and comm->cross. */
void tide__comm_hosts_init(tide_comm *comm);
/* With comm: free the communicators hosts_init made. */
void tide__comm_hosts_free(tide_comm *comm);
/* Whether comm's members are spread evenly over hosts, at least two on
 * each of at least two: then hosts_init made the hierarchy (or failed
 * to, hosts_err), and hierarchical collectives are chosen alike on
 * every member either way. */
static inline bool tide__comm_hierarchical(const tide_comm *comm)
{
    return comm->nhosts >= 2 && comm->per_host >= 2;
}

/* ---- p2p_req.c ---- */

/* Tags from here up are the engine's own (users' are 0..INT_MAX): its
 * point-to-point traffic never meets a user's receive. */
#define TIDE_ENGINE_TAG 0x80000000u

/* Post a send or receive of bytes with peer (a comm rank), any tag.
 * Arguments are the caller's to check. */
int tide__p2p_post(tide_comm *comm, enum tide__msg_dir dir, void *buf, size_t bytes, int peer,
                   uint32_t tag, tide_req **out);

/* ---- wait.c ---- */

/* The blocking form of every call: tide__wait_next() before the
 * nonblocking call; then if rc (its result) is 0, wait for req up to its
 * deadline and free it.  Returns the result. */
void tide__wait_next(void);
int tide__wait_and_free(int rc, tide_req *req);

/* Whether this thread's next post is a blocking call's (tide__wait_next),
 * which it forgets as it answers. */
bool tide__take_wait_next(void);
/* The same without clearing it. */
bool tide__wait_next_pending(void);

/* Any thread: wake every caller asleep in tide_wait because another
 * thread held the drive right: a request one of them waits for has
 * completed, or the drive right was let go. */
void tide__wake_sleepers(struct tide__ctx *ctx);

/* ---- progress.c: who runs the reactor ---- */

/* Start progress: thread mode spawns the reactor thread and waits for it
 * to set up its ring; inline mode sets the ring up here.
 * (tide__drive_reactor's start.) */
int tide__progress_start(struct tide__ctx *ctx);

/* Any thread: hand a command to the reactor and wake it if it sleeps. */
void tide__progress_submit(struct tide__ctx *ctx, struct tide__cmd *cmd);

/* Any thread: a START or CALLBACK command.  In inline mode, or if `here`
 * (the caller may run it), run it now unless another thread drives;
 * otherwise hand it to the progress thread (see progress.c). */
void tide__progress_post(struct tide__ctx *ctx, struct tide__cmd *cmd, bool here);

/* Take the right to drive the reactor (always granted in inline mode);
 * false when another thread has it.  tide__progress_release hands it
 * back, after pushing out what the holder queued for the kernel. */
bool tide__progress_try_drive(struct tide__ctx *ctx);
void tide__progress_release(struct tide__ctx *ctx);

/* A caller that will run a short operation on its own thread with no
 * request (collectives/board.h, the direct path): take the drive right,
 * announced as a waiter if another thread holds it, waiting up to
 * patience_ns, and start what was posted before (operations start in
 * the order they were posted).  False, having taken nothing: another
 * thread kept it, or ctx is not driven by the reactor (a simulated
 * rank).  Before it waits for anything else with the right held, the
 * caller calls tide__progress_announce: a progress thread sharing this
 * CPU then parks.  tide__progress_leave gives the right back; now:
 * ctx's clock if the caller read it (as it does while it waits), else 0:
 * the caller then leaves TIDE__WAIT_JUST_ENDED. */
bool tide__progress_enter(struct tide__ctx *ctx, uint64_t patience_ns, bool *announced);
void tide__progress_announce(struct tide__ctx *ctx, bool *announced);
void tide__progress_leave(struct tide__ctx *ctx, bool announced, uint64_t now);

/* The holder of the drive right: turn until req completes or deadline,
 * spinning until *spin_end, then sleeping in the ring.  A turn that moved
 * something pushes *spin_end to the spin time past it: only a quiet spin
 * ends in sleep. */
void tide__progress_drive_until(struct tide__ctx *ctx, tide_req *req, uint64_t deadline,
                                uint64_t *spin_end);

/* Thread mode, around a caller's wait: while any caller waits the
 * progress thread parks; the last one out wakes it if operations are
 * still pending, so that they move on in the background at once. */
void tide__progress_wait_begin(struct tide__ctx *ctx);
void tide__progress_wait_end(struct tide__ctx *ctx);

/* Any thread: submit an ABORT/STOP command and wait until it is handled. */
void tide__progress_command_sync(struct tide__ctx *ctx, enum tide__cmd_kind kind);

/* Reactor: one turn: commands, expired timers, the ring (waiting up to
 * wait_ns), completions.  Returns how many things happened. */
int tide__progress_turn(struct tide__ctx *ctx, uint64_t wait_ns);

/* Reactor: how long the next blocking wait may last (next deadline). */
uint64_t tide__progress_wait_budget(struct tide__ctx *ctx, uint64_t limit_ns);

/* Reactor: fail every request with err and make the communicator
 * unusable (tide_comm_abort, finalize, a simulated crash). */
void tide__ctx_abort(struct tide__ctx *ctx, int err, const char *why);

/* Stop the reactor and release the ring (finalize; tide__drive_reactor's
 * stop). */
void tide__progress_stop(struct tide__ctx *ctx);

/* tide__drive_reactor's wait (wait.c). */
int tide__wait_reactor(struct tide__ctx *ctx, tide_req *req, int timeout_ms);

#endif
