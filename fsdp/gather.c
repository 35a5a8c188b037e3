/* gather.c - the parameter side of a step: forward and backward passes,
 * acquire and release, the prefetch chain and the byte budget.
 *
 * The chain: each pass has a plan, the order in which units are expected
 * (forward: what the previous forward recorded, else registration order;
 * backward: this forward reversed).  begin_forward starts the first
 * unit's gather (unless the optimizer step already did: gather_ahead,
 * called from optim.c once that unit's shard is final); acquiring the
 * unit at plan position i starts its own gather if nobody did, waits for
 * it, and then starts the gathers of positions i+1 .. i+k that fit the
 * budget, to overlap its compute.
 *
 * Determinism: which gathers start, and in which order, depends only on
 * the sequence of calls and the configuration, never on timing (nothing
 * is admitted "because a gather finished").  So every rank making the
 * same calls issues the same collectives in the same order.
 *
 * Budget: a gather is charged its full buffer when it starts.  A demand
 * that does not fit first frees kept stale buffers, then prefetched
 * units (farthest in the plan first, waiting for them if in flight); if
 * the units the trainer itself holds leave no room it fails with
 * TIDE_ENOMEM, never waits for memory that cannot come. */
#include "fsdp/fsdp_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp/bf16.h"

void tide__fsdp_charge(tide_fsdp *f, size_t bytes)
{
    f->stats.unsharded_bytes += bytes;
    if (f->stats.unsharded_bytes > f->stats.peak_unsharded_bytes)
        f->stats.peak_unsharded_bytes = f->stats.unsharded_bytes;
}

void tide__fsdp_uncharge(tide_fsdp *f, size_t bytes)
{
    f->stats.unsharded_bytes -= bytes;
}

size_t tide__fsdp_spare_bytes(const tide_fsdp *f)
{
    if (f->cfg.budget_bytes == 0)
        return SIZE_MAX;
    size_t held = f->stats.unsharded_bytes;
    return f->cfg.budget_bytes > held ? f->cfg.budget_bytes - held : 0;
}

static size_t full_bytes(const struct tide__fsdp_unit *u)
{
    return u->full * sizeof(float);
}

/* Bytes a gather of u would add (a kept stale buffer is reused). */
static size_t gather_cost(const struct tide__fsdp_unit *u)
{
    return u->full_params ? 0 : full_bytes(u);
}

static int fits(const tide_fsdp *f, size_t bytes)
{
    return f->cfg.budget_bytes == 0 || f->stats.unsharded_bytes + bytes <= f->cfg.budget_bytes;
}

/* Back to the pool, which keeps it for the next unit if the budget
 * leaves room (pool.h). */
static void free_full(tide_fsdp *f, struct tide__fsdp_unit *u)
{
    if (u->full_params)
        tide__fsdp_uncharge(f, full_bytes(u));
    tide__fsdp_pool_give(&f->pool, u->full_params, full_bytes(u), tide__fsdp_spare_bytes(f));
    u->full_params = NULL;
    u->pstate = PARAMS_SHARDED;
}

/* Start u's all-gather into its full buffer.  float32 gathers from the
 * shard itself: the collective copies it into place when it starts,
 * which for a large unit is on the progress thread (a 1 MiB copy per
 * acquire was ~0.1 ms of the trainer's time between layers).  The shard
 * is not written while a gather is in flight: the optimizer runs after
 * sync, when none is, and starts the next one only once the shard is
 * final.  bfloat16 narrows into the upper half of the float32 buffer
 * (TIDE_IN_PLACE), widened at acquire. */
static int start_gather(tide_fsdp *f, int ui)
{
    struct tide__fsdp_unit *u = &f->units[ui];
    if (u->full_params == NULL) {
        u->full_params = tide__fsdp_pool_take(&f->pool, full_bytes(u), tide__fsdp_spare_bytes(f));
        if (u->full_params == NULL)
            return tide__fsdp_fail(f, TIDE_ENOMEM, "gathering unit %d: out of memory", ui);
        tide__fsdp_charge(f, full_bytes(u));
    }
    int rc;
    if (f->cfg.comm_dtype == TIDE_BFLOAT16) {
        uint16_t *area = tide__fsdp_bf16_area(u->full_params, u->full);
        tide__fsdp_narrow(u->shard_params, area + (size_t)f->group_rank * u->shard, u->shard);
        rc = tide_iallgather(f->shard_comm, TIDE_IN_PLACE, area, u->shard, TIDE_BFLOAT16,
                             &u->gather);
    } else {
        rc = tide_iallgather(f->shard_comm, u->shard_params, u->full_params, u->shard,
                             TIDE_FLOAT32, &u->gather);
    }
    if (rc != 0) {
        free_full(f, u);
        return tide__fsdp_fail(f, rc, "all-gather of unit %d: %s", ui, tide_strerror(rc));
    }
    u->pstate = PARAMS_GATHERING;
    f->stats.gathers++;
    return 0;
}

static int finish_gather(tide_fsdp *f, int ui)
{
    struct tide__fsdp_unit *u = &f->units[ui];
    if (u->pstate != PARAMS_GATHERING)
        return 0;
    int rc = tide__fsdp_wait(f, &u->gather, "all-gather", ui);
    if (rc != 0) {
        free_full(f, u);
        return rc;
    }
    if (f->cfg.comm_dtype == TIDE_BFLOAT16)
        tide__fsdp_widen_in_place(u->full_params, u->full);
    u->pstate = PARAMS_GATHERED;
    return 0;
}

static int drop(tide_fsdp *f, int ui)
{
    int rc = finish_gather(f, ui);
    free_full(f, &f->units[ui]);
    f->stats.dropped_prefetches++;
    return rc;
}

static int droppable(const struct tide__fsdp_unit *u)
{
    return u->pstate == PARAMS_GATHERING || u->pstate == PARAMS_GATHERED;
}

/* Free what the trainer does not hold until bytes fit; see the header. */
static int make_room(tide_fsdp *f, size_t bytes)
{
    int rc = 0;
    for (int i = 0; i < f->nunits && !fits(f, bytes); i++)
        if (f->units[i].pstate == PARAMS_SHARDED && f->units[i].full_params)
            free_full(f, &f->units[i]);
    for (int j = f->plan_len - 1; j >= f->plan_next && !fits(f, bytes) && rc == 0; j--)
        if (droppable(&f->units[f->plan[j]]))
            rc = drop(f, f->plan[j]);
    for (int i = f->nunits - 1; i >= 0 && !fits(f, bytes) && rc == 0; i--)
        if (droppable(&f->units[i]))
            rc = drop(f, i);
    return rc;
}

/* Keep the gathers of the next `depth` plan positions going, in order, as
 * far as the budget allows. */
static int prefetch_upto(tide_fsdp *f, int depth)
{
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD)
        return 0;
    for (int j = f->plan_next; j < f->plan_len && j < f->plan_next + depth; j++) {
        struct tide__fsdp_unit *u = &f->units[f->plan[j]];
        if (u->pstate != PARAMS_SHARDED)
            continue;
        if (!fits(f, gather_cost(u)))
            break;
        int rc = start_gather(f, f->plan[j]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int prefetch_fill(tide_fsdp *f)
{
    return prefetch_upto(f, f->phase == PHASE_FORWARD ? f->cfg.forward_prefetch
                                                      : f->cfg.backward_prefetch);
}

int tide__fsdp_settle_params(tide_fsdp *f, int params_changed)
{
    int rc = 0;
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD)
        return 0;
    for (int i = 0; i < f->nunits; i++) {
        struct tide__fsdp_unit *u = &f->units[i];
        int r = finish_gather(f, i);
        rc = rc ? rc : r;
        if (u->pstate == PARAMS_HELD)
            continue;
        if (tide__fsdp_reshards(f))
            free_full(f, u);
        else if (params_changed) /* SHARD_GRAD_OP keeps the buffer for the next gather */
            u->pstate = PARAMS_SHARDED;
    }
    return rc;
}

int tide__fsdp_next_forward_first(const tide_fsdp *f)
{
    /* The order begin_forward will plan: the forward that just ended,
     * else the one before, else registration order. */
    if (f->record_len > 0)
        return f->record[0];
    if (f->last_forward_len > 0)
        return f->last_forward[0];
    return f->nunits > 0 ? 0 : -1;
}

int tide__fsdp_gather_ahead(tide_fsdp *f, int unit)
{
    /* Only what begin_forward itself would start: nothing without
     * prefetch, and only if it fits now (never make room: the units
     * dropped would have to be gathered again). */
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD || f->cfg.forward_prefetch == 0 || unit < 0)
        return 0;
    struct tide__fsdp_unit *u = &f->units[unit];
    if (u->pstate != PARAMS_SHARDED || !fits(f, gather_cost(u)))
        return 0;
    return start_gather(f, unit);
}

static int copy_order(tide_fsdp *f, int **dst, const int *src, int n, int reverse)
{
    int *p = realloc(*dst, (size_t)(n ? n : 1) * sizeof *p);
    if (p == NULL)
        return tide__fsdp_fail(f, TIDE_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        p[i] = src ? src[reverse ? n - 1 - i : i] : (reverse ? n - 1 - i : i);
    *dst = p;
    return 0;
}

static int held_unit(const tide_fsdp *f)
{
    for (int i = 0; i < f->nunits; i++)
        if (f->units[i].pstate == PARAMS_HELD)
            return i;
    return -1;
}

int tide_fsdp_begin_forward(tide_fsdp *f)
{
    int held = held_unit(f), rc;
    if (f->phase == PHASE_BACKWARD)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_begin_forward: the backward has not "
                                               "ended (call tide_fsdp_sync_gradients)");
    if (held >= 0 && f->cfg.strategy != TIDE_FSDP_NO_SHARD)
        return tide__fsdp_fail(f, TIDE_EBUSY, "tide_fsdp_begin_forward: unit %d is still "
                                              "acquired", held);
    if (!f->started) {
        f->started = 1;
        if ((rc = tide__fsdp_make_buckets(f)) != 0)
            return rc;
    }
    if (f->record_len > 0) { /* the forward that just ended predicts this one */
        if ((rc = copy_order(f, &f->last_forward, f->record, f->record_len, 0)) != 0)
            return rc;
        f->last_forward_len = f->record_len;
    }
    int n = f->last_forward_len ? f->last_forward_len : f->nunits;
    if ((rc = copy_order(f, &f->plan, f->last_forward_len ? f->last_forward : NULL, n, 0)) != 0)
        return rc;
    f->plan_len = n;
    f->plan_next = 0;
    f->record_len = 0;
    f->phase = PHASE_FORWARD;
    /* Only the first unit: nothing computes yet to hide the others behind,
     * and gathers in flight together share the links, so a second one
     * would only delay the first (see acquire). */
    return prefetch_upto(f, f->cfg.forward_prefetch > 0 ? 1 : 0);
}

int tide_fsdp_begin_backward(tide_fsdp *f)
{
    int held = held_unit(f), rc;
    if (f->phase != PHASE_FORWARD)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_begin_backward: no forward to go "
                                               "back through");
    if (held >= 0 && f->cfg.strategy != TIDE_FSDP_NO_SHARD)
        return tide__fsdp_fail(f, TIDE_EBUSY, "tide_fsdp_begin_backward: unit %d is still "
                                              "acquired", held);
    if ((rc = copy_order(f, &f->plan, f->record, f->record_len, 1)) != 0)
        return rc;
    f->plan_len = f->record_len;
    f->plan_next = 0;
    tide__fsdp_reset_grads(f);
    f->phase = PHASE_BACKWARD;
    return prefetch_fill(f);
}

static int record(tide_fsdp *f, int ui)
{
    if (f->record_len == f->record_cap) {
        int cap = f->record_cap ? 2 * f->record_cap : 16;
        int *r = realloc(f->record, (size_t)cap * sizeof *r);
        if (r == NULL)
            return tide__fsdp_fail(f, TIDE_ENOMEM, "out of memory");
        f->record = r;
        f->record_cap = cap;
    }
    f->record[f->record_len++] = ui;
    return 0;
}

/* Checks shared by acquire and release. */
static int check_in_pass(tide_fsdp *f, int ui, const char *call)
{
    int rc = tide__fsdp_check_unit(f, ui, call);
    if (rc == 0 && f->phase != PHASE_FORWARD && f->phase != PHASE_BACKWARD)
        rc = tide__fsdp_fail(f, TIDE_EINVAL, "%s: unit %d outside a forward or backward "
                                             "(call tide_fsdp_begin_forward first)", call, ui);
    return rc;
}

/* Start u's gather now, making room in the budget if it does not fit. */
static int demand(tide_fsdp *f, int ui)
{
    struct tide__fsdp_unit *u = &f->units[ui];
    int rc = make_room(f, gather_cost(u));
    if (rc != 0)
        return rc;
    if (!fits(f, gather_cost(u)))
        return tide__fsdp_fail(f, TIDE_ENOMEM,
                               "tide_fsdp_acquire: unit %d needs %zu bytes but the budget of %zu "
                               "has %zu held by acquired units", ui, gather_cost(u),
                               f->cfg.budget_bytes, f->stats.unsharded_bytes);
    return start_gather(f, ui);
}

int tide_fsdp_acquire(tide_fsdp *f, int unit, float **params)
{
    int rc = check_in_pass(f, unit, "tide_fsdp_acquire");
    if (rc != 0)
        return rc;
    struct tide__fsdp_unit *u = &f->units[unit];
    if (u->pstate == PARAMS_HELD)
        return tide__fsdp_fail(f, TIDE_EBUSY, "tide_fsdp_acquire: unit %d is already acquired",
                               unit);
    if ((rc = tide__fsdp_pump(f)) != 0)
        return rc;
    if (f->phase == PHASE_FORWARD && (rc = record(f, unit)) != 0)
        return rc;
    for (int j = f->plan_next; j < f->plan_len; j++)
        if (f->plan[j] == unit) {
            f->plan_next = j + 1;
            break;
        }
    if (u->pstate == PARAMS_SHARDED && (rc = demand(f, unit)) != 0)
        return rc;
    /* Our own gather first, then the chain: a gather started while the
     * trainer waits shares the links with the one it waits for and only
     * lengthens the wait (measured here: 4 MiB gathers in flight together
     * take as long as one after another), whereas started after it, it
     * overlaps this unit's compute.  When the unit was prefetched the wait
     * is nil and nothing changes. */
    if ((rc = finish_gather(f, unit)) != 0 || (rc = prefetch_fill(f)) != 0)
        return rc;
    u->pstate = PARAMS_HELD;
    *params = u->full_params;
    return 0;
}

int tide_fsdp_prefetch(tide_fsdp *f, int unit)
{
    int rc = tide__fsdp_check_unit(f, unit, "tide_fsdp_prefetch");
    if (rc != 0)
        return rc;
    struct tide__fsdp_unit *u = &f->units[unit];
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_prefetch: no_shard gathers nothing; "
                                               "prefetch needs a sharding strategy");
    if (f->phase == PHASE_SYNCED)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_prefetch: parameters are about to "
                                               "change (run the optimizer first)");
    if (u->pstate != PARAMS_SHARDED)
        return tide__fsdp_fail(f, TIDE_EBUSY, "tide_fsdp_prefetch: unit %d is already "
                                              "prefetched or acquired", unit);
    if (!fits(f, gather_cost(u)))
        return tide__fsdp_fail(f, TIDE_ENOMEM, "tide_fsdp_prefetch: unit %d (%zu bytes) does "
                                               "not fit the budget now", unit, gather_cost(u));
    return start_gather(f, unit);
}

/* The last unit of the forward is the first of the backward: keeping it
 * saves a gather that nothing could hide (as PyTorch keeps its root
 * unsharded).  Freed at sync like any other leftover. */
static int last_of_forward(const tide_fsdp *f, int unit)
{
    return f->phase == PHASE_FORWARD && f->plan_next == f->plan_len && f->plan_len > 0 &&
           f->plan[f->plan_len - 1] == unit;
}

int tide_fsdp_release(tide_fsdp *f, int unit)
{
    int rc = check_in_pass(f, unit, "tide_fsdp_release");
    if (rc != 0)
        return rc;
    struct tide__fsdp_unit *u = &f->units[unit];
    if (u->pstate != PARAMS_HELD)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_release: unit %d is not acquired",
                               unit);
    u->pstate = PARAMS_GATHERED;
    if (tide__fsdp_reshards(f) && !last_of_forward(f, unit))
        free_full(f, u);
    if ((rc = tide__fsdp_pump(f)) != 0)
        return rc;
    return prefetch_fill(f);
}
