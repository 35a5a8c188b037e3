/* sim.c - the simulated network: making it, its virtual clock and event
 * loop, waiting on simulated requests, faults, and tearing it down.  See
 * sim.h for the shape and tide.h for the cost model. */
#include "transports/sim/sim.h"
#include "engine/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS (1 << 20)

void tide_sim_config_default(tide_sim_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->seed = 1;
    cfg->alpha_s = 5e-6;
    cfg->bandwidth = 12.5e9;
    cfg->timeout_s = 300;
    cfg->host_alpha_s = 0.5e-6;
    cfg->host_bandwidth = 50e9;
}


uint64_t tide_sim_time_ns(const tide_sim *sim)
{
    return sim ? sim->now : 0;
}

/* splitmix64: every seed, 0 included, gives a good stream. */
uint64_t tide__sim_rand(struct tide_sim *s)
{
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- engines with news ---- */

void tide__sim_dirty(struct tide_sim *s, struct sim_rank *r)
{
    if (r->dirty)
        return;
    r->dirty = true;
    s->dirty[(s->dirty_head + s->ndirty) % s->n] = r->rank;
    s->ndirty++;
}

void tide__sim_flush(struct tide_sim *s)
{
    while (s->ndirty) {
        struct sim_rank *r = &s->ranks[s->dirty[s->dirty_head]];
        s->dirty_head = (s->dirty_head + 1) % s->n;
        s->ndirty--;
        r->dirty = false; /* before delivering: what it posts may queue it again */
        if (r->base.ctx)
            tide__ctx_deliver(r->base.ctx);
    }
}

static void all_dirty(struct tide_sim *s)
{
    for (int r = 0; r < s->n; r++)
        tide__sim_dirty(s, &s->ranks[r]);
}

bool tide__sim_step(struct tide_sim *s)
{
    tide__sim_flush(s);
    struct tide__timer *t = tide__timer_heap_peek(&s->heap);
    if (!t)
        return false;
    if (t->deadline_ns > s->now)
        s->now = t->deadline_ns;
    /* A deadline's request may be freed by its own firing. */
    bool delivery = tide__sim_is_delivery(t);
    tide__timer_disarm(&s->heap, t);
    t->fire(t);
    if (!delivery)
        all_dirty(s); /* a request failed somewhere: rare, so look everywhere */
    tide__sim_flush(s);
    return true;
}

/* ---- making and unmaking ---- */

static int check_config(int n, const tide_sim_config *c)
{
    const char *why = NULL;
    if (n < 1 || n > MAX_RANKS)
        why = "n must be in [1, 1<<20]";
    else if (!(c->alpha_s >= 0) || !isfinite(c->alpha_s))
        why = "alpha_s must be a finite number >= 0";
    else if (!(c->bandwidth > 0))
        why = "bandwidth must be > 0";
    else if (!(c->jitter_s >= 0) || !isfinite(c->jitter_s))
        why = "jitter_s must be a finite number >= 0";
    else if (!(c->timeout_s > 0))
        why = "timeout_s must be > 0";
    else if (c->ranks_per_host < 0)
        why = "ranks_per_host must be >= 0";
    else if (c->ranks_per_host && (!(c->host_alpha_s >= 0) || !isfinite(c->host_alpha_s) ||
                                   !(c->host_bandwidth > 0)))
        why = "with ranks_per_host, host_alpha_s must be finite and >= 0, host_bandwidth > 0";
    else if (c->stage_slot_bytes && (c->stage_slot_bytes < 16 || c->stage_slot_bytes > (1u << 30)))
        why = "stage_slot_bytes must be 0 or from 16 to 1 GiB";
    else if (c->stage_slot_bytes && (size_t)n * SIM_STAGE_SLOTS > SIZE_MAX / c->stage_slot_bytes)
        why = "stage_slot_bytes times the ranks' slots does not fit in memory";
    else if (c->boards && !c->stage_slot_bytes)
        why = "boards needs stage_slot_bytes: only ranks that share staging memory have boards";
    if (!why)
        return 0;
    tide__log(TIDE_LOG_ERROR, -1, "tide_sim_create: %s", why);
    return TIDE_EINVAL;
}

/* ---- how a simulated rank's engine runs (engine/context.h) ---- */

static struct tide_sim *sim_of(const struct tide__ctx *ctx)
{
    return ctx->drive_data;
}

static uint64_t sim_now(const struct tide__ctx *ctx)
{
    return sim_of(ctx)->now;
}

static int sim_start(struct tide__ctx *ctx)
{
    ctx->tp->ops->start(ctx->tp);
    return 0;
}

/* A simulated transport takes everything back at once. */
static void sim_stop(struct tide__ctx *ctx)
{
    tide__ctx_abort(ctx, TIDE_EABORTED, "the communicator was finalized");
    ctx->stopping = true;
    while (tide__ctx_deliver(ctx))
        ;
}

static int sim_wait(struct tide__ctx *ctx, tide_req *req, int timeout_ms)
{
    return tide__sim_wait(sim_of(ctx), req, timeout_ms);
}

/* One step of the whole network; virtual time has no "wait a little". */
static void sim_poke(struct tide__ctx *ctx, uint64_t wait_ns)
{
    (void)wait_ns;
    tide__sim_test(sim_of(ctx));
}

static const struct tide__drive_ops sim_drive = {
    .name = "sim",
    .records = false, /* no files; no rings for thousands of ranks */
    .now = sim_now,
    .start = sim_start,
    .stop = sim_stop,
    .wait = sim_wait,
    .poke = sim_poke,
};

static int add_rank(struct tide_sim *s, int r)
{
    tide_config c;
    tide_config_default(&c);
    c.rank = r;
    c.size = s->n;
    c.timeout_s = s->cfg.timeout_s;
    c.progress = TIDE_PROGRESS_INLINE;
    c.spin_us = 0;
    c.log_level = s->cfg.log_level;
    struct tide__ctx *ctx = tide__ctx_new(&c, false);
    if (!ctx)
        return TIDE_ENOMEM;
    ctx->drive = &sim_drive;
    ctx->drive_data = s;
    ctx->timers = &s->heap;
    ctx->timing_only = s->cfg.timing_only != 0;
    struct sim_rank *sr = &s->ranks[r];
    sr->rank = r;
    tide__sim_net_init(s, sr, ctx);
    ctx->tp = &sr->base;
    return ctx->drive->start(ctx);
}

int tide_sim_create(int n, const tide_sim_config *cfg, tide_sim **out, tide_comm **comms)
{
    if (!out || !comms)
        return TIDE_EINVAL;
    *out = NULL;
    tide_sim_config def;
    tide_sim_config_default(&def);
    if (!cfg)
        cfg = &def;
    int rc = check_config(n, cfg);
    if (rc)
        return rc;
    tide__log_set_level(cfg->log_level);
    struct tide_sim *s = calloc(1, sizeof *s);
    if (!s)
        return TIDE_ENOMEM;
    s->cfg = *cfg;
    s->n = n;
    s->rng = cfg->seed;
    s->ns_per_byte = 1e9 / cfg->bandwidth;
    s->alpha_ns = (uint64_t)llround(cfg->alpha_s * 1e9);
    if (cfg->ranks_per_host) {
        s->host_ns_per_byte = 1e9 / cfg->host_bandwidth;
        s->host_alpha_ns = (uint64_t)llround(cfg->host_alpha_s * 1e9);
    } else {
        s->host_ns_per_byte = s->ns_per_byte;
        s->host_alpha_ns = s->alpha_ns;
    }
    s->jitter_ns = (uint64_t)llround(cfg->jitter_s * 1e9);
    tide__timer_heap_init(&s->heap);
    s->ranks = calloc((size_t)n, sizeof *s->ranks);
    s->dirty = malloc((size_t)n * sizeof *s->dirty);
    if (cfg->stage_slot_bytes)
        s->stage = calloc((size_t)n * SIM_STAGE_SLOTS, cfg->stage_slot_bytes);
    if (cfg->ranks_per_host)
        s->nics = calloc((size_t)(n / cfg->ranks_per_host + 1), sizeof *s->nics);
    rc = s->ranks && s->dirty && (s->stage || !cfg->stage_slot_bytes) &&
                 (s->nics || !cfg->ranks_per_host)
             ? 0
             : TIDE_ENOMEM;
    for (int r = 0; !rc && r < n; r++)
        rc = add_rank(s, r);
    if (rc) {
        tide_sim_destroy(s);
        return rc;
    }
    for (int r = 0; r < n; r++) {
        comms[r] = &s->ranks[r].base.ctx->world;
        tide__comm_hosts_init(comms[r]);
    }
    *out = s;
    return 0;
}

void tide_sim_destroy(tide_sim *s)
{
    if (!s)
        return;
    for (int r = 0; s->ranks && r < s->n; r++)
        if (s->ranks[r].base.ctx)
            tide_finalize(&s->ranks[r].base.ctx->world);
    tide__timer_heap_free(&s->heap); /* nothing is left in it: every rank let go */
    while (s->free_events) {
        struct sim_event *next = s->free_events->next_free;
        free(s->free_events);
        s->free_events = next;
    }
    for (int r = 0; s->ranks && r < s->n; r++)
        tide__sim_net_free(&s->ranks[r]);
    free(s->ranks);
    free(s->dirty);
    free(s->stage);
    free(s->nics);
    free(s->crashes);
    free(s->stalls);
    free(s);
}

/* ---- running ---- */

int tide_sim_run(tide_sim *s)
{
    if (!s)
        return TIDE_EINVAL;
    while (tide__sim_step(s))
        ;
    return 0;
}

int tide__sim_wait(struct tide_sim *s, tide_req *req, int timeout_ms)
{
    if (tide__sim_in_program(s))
        return tide__sim_program_wait(s, req, timeout_ms);
    uint64_t deadline =
        timeout_ms < 0 ? UINT64_MAX : s->now + (uint64_t)timeout_ms * TIDE_NS_PER_MS;
    for (;;) {
        tide__sim_flush(s);
        if (tide__req_is_done(req))
            return req->status;
        struct tide__timer *t = tide__timer_heap_peek(&s->heap);
        if (!t || t->deadline_ns > deadline) {
            if (deadline != UINT64_MAX && deadline > s->now)
                s->now = deadline;
            return TIDE_ETIMEDOUT;
        }
        tide__sim_step(s);
    }
}

void tide__sim_test(struct tide_sim *s)
{
    if (tide__sim_in_program(s))
        tide__sim_program_yield(s);
    else
        tide__sim_step(s);
}

int tide_sim_stats_of(const tide_sim *s, int r, tide_sim_stats *out)
{
    if (!s || !out || r < 0 || r >= s->n)
        return TIDE_EINVAL;
    *out = s->ranks[r].stats;
    return 0;
}

/* ---- faults ---- */

static void crash(struct tide_sim *s, int r)
{
    struct sim_rank *sr = &s->ranks[r];
    if (!sr->base.ctx || sr->gone)
        return;
    char why[64];
    snprintf(why, sizeof why, "rank %d crashed (simulated)", r);
    tide__sim_net_lose(sr, why);
    tide__ctx_abort(sr->base.ctx, TIDE_EABORTED, "this rank crashed (simulated)");
    tide__sim_dirty(s, sr);
}

void tide__sim_count_delivery(struct tide_sim *s)
{
    s->delivered++;
    for (int i = 0; i < s->ncrashes; i++)
        if (s->crashes[i].at == s->delivered)
            crash(s, s->crashes[i].rank);
}

int tide_sim_crash(tide_sim *s, int r, uint64_t after)
{
    if (!s || r < 0 || r >= s->n)
        return TIDE_EINVAL;
    if (after == 0) {
        crash(s, r);
        tide__sim_flush(s);
        return 0;
    }
    struct sim_crash *c = realloc(s->crashes, ((size_t)s->ncrashes + 1) * sizeof *c);
    if (!c)
        return TIDE_ENOMEM;
    c[s->ncrashes++] = (struct sim_crash){r, s->delivered + after};
    s->crashes = c;
    return 0;
}

int tide_sim_stall(tide_sim *s, int from, int to, double at_s, double for_s)
{
    if (!s || from < 0 || from >= s->n || to < 0 || to >= s->n || !(at_s >= 0) ||
        !(for_s >= 0) || !isfinite(at_s + for_s))
        return TIDE_EINVAL;
    struct sim_stall *w = realloc(s->stalls, ((size_t)s->nstalls + 1) * sizeof *w);
    if (!w)
        return TIDE_ENOMEM;
    uint64_t start = (uint64_t)llround(at_s * 1e9);
    w[s->nstalls++] = (struct sim_stall){from, to, start, start + (uint64_t)llround(for_s * 1e9)};
    s->stalls = w;
    return 0;
}
