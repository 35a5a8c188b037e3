/* comm.c - communicators: joining a job (tide_init), its rank and size,
 * abort, finalize.  A context holds everything per process; the world
 * communicator is embedded in it. */
#include "engine/clock.h"
#include "engine/context.h"
#include "engine/log.h"
#include "engine/trace.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Every rank keeps a connection, a shared-memory pair and tables for
 * each other one: a job past this is not one tide can assemble, and a
 * WORLD_SIZE of 2^31 - 1 had tide_init touch gigabytes before failing. */
#define MAX_RANKS (1 << 20)

static int check_config(const tide_config *cfg)
{
    const char *why = NULL;
    if (cfg->size < 1 || cfg->size > MAX_RANKS)
        why = "size must be in [1, 1048576]";
    else if (cfg->rank < 0 || cfg->rank >= cfg->size)
        why = "rank must be in [0, size)";
    else if (cfg->master_port < 1 || cfg->master_port > 65535)
        why = "master_port must be in [1, 65535]";
    else if (!(cfg->timeout_s > 0))
        why = "timeout_s must be positive";
    else if (cfg->bootstrap_timeout_s < 0)
        why = "bootstrap_timeout_s must not be negative";
    else if (cfg->progress != TIDE_PROGRESS_THREAD && cfg->progress != TIDE_PROGRESS_INLINE)
        why = "progress must be TIDE_PROGRESS_THREAD or TIDE_PROGRESS_INLINE";
    else if (cfg->spin_us < 0)
        why = "spin_us must not be negative";
    else if (cfg->reactor != TIDE_REACTOR_AUTO && cfg->reactor != TIDE_REACTOR_IO_URING &&
             cfg->reactor != TIDE_REACTOR_EPOLL)
        why = "reactor must be TIDE_REACTOR_AUTO, TIDE_REACTOR_IO_URING or TIDE_REACTOR_EPOLL";
    else if (cfg->yield_when_idle < -1 || cfg->yield_when_idle > 1)
        why = "yield_when_idle must be -1 (auto), 0 or 1";
    else if (!memchr(cfg->master_addr, '\0', sizeof cfg->master_addr) || !cfg->master_addr[0])
        why = "master_addr must be a non-empty string";
    else if (!memchr(cfg->job_token, '\0', sizeof cfg->job_token))
        why = "job_token is not terminated";
    else if (!memchr(cfg->trace_path, '\0', sizeof cfg->trace_path))
        why = "trace_path is not terminated";
    else if (!memchr(cfg->tcp_congestion, '\0', sizeof cfg->tcp_congestion))
        why = "tcp_congestion is not terminated";
    else if (!memchr(cfg->transport, '\0', sizeof cfg->transport))
        why = "transport is not terminated";
    else if (!memchr(cfg->progress_cpus, '\0', sizeof cfg->progress_cpus))
        why = "progress_cpus is not terminated";
    else if (!tide__placement_setting_ok(cfg->progress_cpus))
        why = "progress_cpus (TIDE_PROGRESS_CPUS) is neither auto, none nor a CPU list such as "
              "3, 2,18 or 4-5";
    char tp_why[200];
    if (!why && tide__transport_check(cfg, tp_why, sizeof tp_why))
        why = tp_why;
    if (!why)
        return 0;
    tide__log(TIDE_LOG_ERROR, -1, "tide_init: invalid configuration: %s", why);
    return TIDE_EINVAL;
}

/* Whether a waiter spinning for a peer gives its core away on each idle
 * pass.  Open MPI's rule (mpi_yield_when_idle): only when this host has
 * more ranks than cores, where the peer may be runnable on ours.  With a
 * core each the yield is pure cost: 2-rank 8-byte round trips, 8
 * interleaved rounds, thread mode 10.25 us yielding against 9.43 not.
 * The cores are this process's affinity mask, so ranks pinned one core
 * each still yield (a mask says nothing of where the others run). */
static bool spin_yields(const tide_config *cfg)
{
    if (cfg->yield_when_idle >= 0)
        return cfg->yield_when_idle == 1;
    cpu_set_t cores;
    if (cfg->local_size < 0 || sched_getaffinity(0, sizeof cores, &cores) != 0)
        return true;
    return cfg->local_size > CPU_COUNT(&cores);
}

struct tide__ctx *tide__ctx_new(const tide_config *cfg, bool wake)
{
    struct tide__ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    atomic_init(&ctx->refs, 1);
    ctx->cfg = *cfg;
    ctx->rank = cfg->rank;
    ctx->size = cfg->size;
    ctx->timeout_ns = tide__seconds_to_ns(cfg->timeout_s);
    ctx->spin_ns = (uint64_t)cfg->spin_us * TIDE_NS_PER_US;
    ctx->inline_mode = cfg->progress == TIDE_PROGRESS_INLINE;
    ctx->spin_yields = spin_yields(cfg);
    const char *direct = getenv("TIDE_BOARD_DIRECT");
    ctx->board_direct = !direct || strcmp(direct, "0") != 0;
    const char *streaming = getenv("TIDE_STREAMING_STORES");
    ctx->streaming_stores = !streaming || strcmp(streaming, "0") != 0;
    tide__mpsc_init(&ctx->cmds);
    tide__timer_heap_init(&ctx->own_timers);
    ctx->timers = &ctx->own_timers;
    ctx->drive = &tide__drive_reactor;
    pthread_mutex_init(&ctx->pool_lock, NULL);
    ctx->wake_fd = wake ? eventfd(0, EFD_CLOEXEC) : -1;
    ctx->world.ctx = ctx;
    ctx->world.id = 1;
    ctx->world.rank = cfg->rank;
    ctx->world.size = cfg->size;
    atomic_init(&ctx->world.next_seq, 1);
    if (wake && ctx->wake_fd < 0) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

/* Tombstones: the last contexts tide_init made and tide_finalize freed,
 * kept (their insides released) so that a call on a communicator of one
 * reads `finalized` and is refused instead of reading freed memory.  A
 * program that inits and finalizes over and over keeps the last
 * TOMBSTONES of them, 5 KB each. */
#define TOMBSTONES 64
static struct tide__ctx *tombstones[TOMBSTONES];
static unsigned ntombstones;
static pthread_mutex_t tombstone_lock = PTHREAD_MUTEX_INITIALIZER;

static void retire(struct tide__ctx *ctx)
{
    pthread_mutex_lock(&tombstone_lock);
    struct tide__ctx *oldest = tombstones[ntombstones % TOMBSTONES];
    tombstones[ntombstones++ % TOMBSTONES] = ctx;
    pthread_mutex_unlock(&tombstone_lock);
    free(oldest);
}

int tide__comm_usable(const tide_comm *comm, const char *fn)
{
    if (!atomic_load_explicit(&comm->ctx->finalized, memory_order_acquire))
        return 0;
    tide__log(TIDE_LOG_WARN, comm->rank, "%s: used after tide_finalize", fn);
    return TIDE_EINVAL;
}

void tide__ctx_unref(struct tide__ctx *ctx)
{
    if (atomic_fetch_sub(&ctx->refs, 1) != 1)
        return;
    tide__rec_teardown(ctx); /* first: its thread may still take the drive right */
    tide__req_pool_free(ctx);
    tide__scratch_free_all(ctx);
    tide__notes_free(ctx);
    if (ctx->world.board_free)
        ctx->world.board_free(&ctx->world); /* before the claim table it retires into */
    if (ctx->boards_free)
        ctx->boards_free(ctx);
    free(ctx->world.groups);
    free(ctx->world.failed);
    free(ctx->world.select_memo);
    pthread_mutex_destroy(&ctx->pool_lock);
    tide__timer_heap_free(&ctx->own_timers);
    tide__trace_free(ctx);
    if (ctx->wake_fd >= 0)
        close(ctx->wake_fd);
    if (ctx->retire_on_free)
        retire(ctx);
    else
        free(ctx);
}

int tide_init_with(tide_comm **out, const tide_config *cfg)
{
    if (!out)
        return TIDE_EINVAL;
    *out = NULL;
    if (!cfg)
        return TIDE_EINVAL;
    int rc = check_config(cfg);
    if (rc)
        return rc;
    tide__log_set_level(cfg->log_level);

    /* Before anyone waits on us: a rank that cannot have the reactor it
     * was told to use says so at once. */
    const struct tide__reactor_ops *reactor;
    char err[512];
    rc = tide__reactor_choose(cfg->reactor, &reactor, err, sizeof err);
    if (rc) {
        tide__log(TIDE_LOG_ERROR, cfg->rank, "tide_init: %s", err);
        return rc;
    }
    struct tide__ctx *ctx = tide__ctx_new(cfg, true);
    if (!ctx)
        return TIDE_ENOMEM;
    ctx->reactor.ops = reactor;
    ctx->retire_on_free = true;
    if (cfg->trace_path[0])
        rc = tide__trace_open(ctx, cfg->trace_path);
    if (!rc)
        rc = tide__transport_open(ctx);
    if (!rc)
        tide__comm_hosts_init(&ctx->world);
    if (!rc) {
        rc = ctx->drive->start(ctx);
        if (rc) {
            tide__log(TIDE_LOG_ERROR, ctx->rank, "tide_init: %s", ctx->init_err);
            ctx->tp->ops->destroy(ctx->tp);
        }
    }
    if (rc) {
        tide__comm_hosts_free(&ctx->world);
        tide__ctx_unref(ctx);
        return rc;
    }
    /* Arm the dump signal now, not at the first collective: with
     * TIDE_DUMP_DIR set, a SIGUSR1 that came before it would kill the
     * process (its default action) instead of dumping.  No operation
     * runs yet, so the reactor's recorder state is ours to set up. */
    tide__rec_setup(ctx);
    if (ctx->trace)
        tide__log(TIDE_LOG_INFO, ctx->rank, "tracing into %s (written at tide_finalize)",
                  cfg->trace_path);
    *out = &ctx->world;
    return 0;
}

int tide_init(tide_comm **comm)
{
    if (!comm)
        return TIDE_EINVAL;
    *comm = NULL;
    tide_config cfg;
    tide_config_default(&cfg);
    int rc = tide_config_from_env(&cfg);
    if (rc)
        return rc;
    return tide_init_with(comm, &cfg);
}

int tide_comm_rank(const tide_comm *comm)
{
    return comm ? comm->rank : TIDE_EINVAL;
}

int tide_comm_size(const tide_comm *comm)
{
    return comm ? comm->size : TIDE_EINVAL;
}

const char *tide_comm_reactor(const tide_comm *comm)
{
    if (!comm || tide__comm_usable(comm, "tide_comm_reactor"))
        return NULL;
    const struct tide__ctx *ctx = comm->ctx;
    return ctx->reactor.ops ? ctx->reactor.ops->name : ctx->drive->name;
}

int tide_comm_progress_cpus(const tide_comm *comm, char *buf, size_t len)
{
    if (!comm || !buf || !len || tide__comm_usable(comm, "tide_comm_progress_cpus"))
        return TIDE_EINVAL;
    /* Set before tide_init returned (the thread placed itself before it
     * said it was ready), so no lock. */
    const struct tide__placement *p = &comm->ctx->place;
    tide__cpulist_format(&p->progress, buf, len);
    return p->own ? 1 : 0;
}

const char *tide_comm_transport(const tide_comm *comm, int peer)
{
    if (!comm || peer < 0 || peer >= comm->size || tide__comm_usable(comm, "tide_comm_transport"))
        return NULL;
    struct tide__transport *tp = comm->ctx->tp;
    int world = comm->world_of ? comm->world_of[peer] : peer;
    return tp->ops->peer_transport ? tp->ops->peer_transport(tp, world) : tp->ops->name;
}

int tide_comm_abort(tide_comm *comm)
{
    if (!comm || tide__comm_usable(comm, "tide_comm_abort"))
        return TIDE_EINVAL;
    tide__progress_command_sync(comm->ctx, TIDE_CMD_ABORT);
    return 0;
}

int tide_finalize(tide_comm *comm)
{
    if (!comm || tide__comm_usable(comm, "tide_finalize"))
        return TIDE_EINVAL;
    struct tide__ctx *ctx = comm->ctx;
    if (comm != &ctx->world)
        return TIDE_EINVAL;
    tide__trace_collect(ctx); /* collective when tracing: every rank sends rank 0 its events */
    ctx->drive->stop(ctx);
    tide__comm_hosts_free(&ctx->world);
    ctx->tp->ops->destroy(ctx->tp);
    ctx->tp = NULL;
    atomic_store_explicit(&ctx->finalized, true, memory_order_release);
    tide__ctx_unref(ctx);
    return 0;
}
