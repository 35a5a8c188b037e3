/* reduce.c - the gradient side of a step: full-size gradient buffers
 * (zeroed, or fresh for the trainer to overwrite), their reductions
 * started the moment a unit's gradient is ready, NO_SHARD buckets,
 * HYBRID_SHARD's second stage, and sync_gradients.
 *
 * Order: reductions start in grad_ready order.  HYBRID_SHARD's all-reduce
 * across groups can only start once the group's reduce-scatter is done;
 * those are started from the trainer's thread, in the same FIFO order
 * (never from a completion callback, whose timing differs per rank and
 * would reorder collectives between ranks), whenever an FSDP call finds
 * the head of the FIFO finished. */
#include "fsdp/fsdp_internal.h"

#include <stdlib.h>
#include <string.h>

#include "fsdp/shard.h"

static void grad_charge(tide_fsdp *f, size_t bytes)
{
    f->grad_bytes += bytes;
    if (f->grad_bytes > f->stats.peak_grad_bytes)
        f->stats.peak_grad_bytes = f->grad_bytes;
}

static void free_grad_full(tide_fsdp *f, struct tide__fsdp_unit *u)
{
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD || u->grad_full == NULL)
        return;
    tide__fsdp_pool_give(&f->pool, u->grad_full, u->full * sizeof(float),
                         tide__fsdp_spare_bytes(f));
    u->grad_full = NULL;
    f->grad_bytes -= u->full * sizeof(float);
}

/* Buckets cover units from the last to the first (the order backward
 * readies them), each at least bucket_bytes unless it is the last. */
int tide__fsdp_make_buckets(tide_fsdp *f)
{
    if (f->cfg.strategy != TIDE_FSDP_NO_SHARD || f->nunits == 0)
        return 0;
    f->buckets = calloc((size_t)f->nunits, sizeof *f->buckets);
    size_t *taken = calloc((size_t)f->nunits, sizeof *taken);
    if (f->buckets == NULL || taken == NULL) {
        free(taken);
        return tide__fsdp_fail(f, TIDE_ENOMEM, "making buckets: out of memory");
    }
    for (int i = f->nunits - 1; i >= 0;) {
        struct tide__fsdp_bucket *b = &f->buckets[f->nbuckets];
        size_t sum = 0;
        b->first = i;
        while (i >= 0 && (sum == 0 || sum * sizeof(float) < f->cfg.bucket_bytes))
            f->units[i].bucket = f->nbuckets, sum += f->units[i--].numel;
        b->last = i + 1;
        b->count = tide__fsdp_distinct_count(sum, taken, f->nbuckets);
        taken[f->nbuckets++] = b->count;
        if ((b->buf = calloc(b->count, sizeof(float))) == NULL) {
            free(taken);
            return tide__fsdp_fail(f, TIDE_ENOMEM, "making buckets: out of memory");
        }
        grad_charge(f, b->count * sizeof(float));
        for (int u = b->first, at = 0; u >= b->last; at += (int)f->units[u--].numel)
            f->units[u].grad_full = f->units[u].shard_grad = b->buf + at;
    }
    free(taken);
    return 0;
}

/* The unit's gradient buffer for this backward, as tide_fsdp_grad_fresh
 * gives it; `call` names the public call in the messages. */
static int take_grad(tide_fsdp *f, int unit, float **grad, int *fresh, const char *call)
{
    int rc = tide__fsdp_check_unit(f, unit, call);
    if (rc != 0)
        return rc;
    struct tide__fsdp_unit *u = &f->units[unit];
    if (f->phase != PHASE_BACKWARD)
        return tide__fsdp_fail(f, TIDE_EINVAL, "%s: unit %d outside a backward "
                                               "(call tide_fsdp_begin_backward)", call, unit);
    if (u->grad_readied)
        return tide__fsdp_fail(f, TIDE_EINVAL, "%s: unit %d's gradient was already made ready",
                               call, unit);
    int own_buffer = f->cfg.strategy != TIDE_FSDP_NO_SHARD; /* else a slice of its bucket */
    if (own_buffer && u->grad_full == NULL) {
        size_t bytes = u->full * sizeof(float);
        u->grad_full = tide__fsdp_pool_take(&f->pool, bytes, tide__fsdp_spare_bytes(f));
        if (u->grad_full == NULL)
            return tide__fsdp_fail(f, TIDE_ENOMEM, "%s: out of memory", call);
        grad_charge(f, bytes);
        u->accumulating = 0; /* from the pool: no gradient in it yet */
    }
    *fresh = !u->accumulating;
    /* The padding past numel is reduced with the rest but the trainer
     * never writes it: zero it (a few elements) so the padded shard's
     * gradient, and so its parameters, stay zero. */
    if (*fresh && own_buffer)
        memset(u->grad_full + u->numel, 0, (u->full - u->numel) * sizeof(float));
    u->accumulating = 1;
    u->grad_given = 1;
    *grad = u->grad_full;
    return 0;
}

int tide_fsdp_grad_fresh(tide_fsdp *f, int unit, float **grad, int *fresh)
{
    if (fresh == NULL)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_grad_fresh: unit %d: fresh is NULL "
                                               "(it says whether to write or add the gradient)",
                               unit);
    return take_grad(f, unit, grad, fresh, "tide_fsdp_grad_fresh");
}

int tide_fsdp_grad(tide_fsdp *f, int unit, float **grad)
{
    int fresh;
    int rc = take_grad(f, unit, grad, &fresh, "tide_fsdp_grad");
    if (rc == 0 && fresh) /* a window starts from zero */
        memset(*grad, 0, f->units[unit].numel * sizeof(float));
    return rc;
}

static int push_fifo(tide_fsdp *f, int ui)
{
    if (f->fifo == NULL && (f->fifo = malloc((size_t)f->nunits * sizeof *f->fifo)) == NULL)
        return tide__fsdp_fail(f, TIDE_ENOMEM, "out of memory");
    f->fifo[f->fifo_len++] = ui;
    return 0;
}

static int start_bucket(tide_fsdp *f, struct tide__fsdp_bucket *b)
{
    int rc = tide_iallreduce(f->shard_comm, TIDE_IN_PLACE, b->buf, b->count, TIDE_FLOAT32,
                             TIDE_AVG, &b->req);
    if (rc != 0)
        return tide__fsdp_fail(f, rc, "all-reduce of a gradient bucket: %s", tide_strerror(rc));
    f->stats.reductions++;
    return 0;
}

/* Completion callback (reactor thread): only raises the unit's flag. */
static void note_done(tide_req *req, void *flag)
{
    (void)req;
    atomic_store((atomic_int *)flag, 1);
}

static int start_reduce(tide_fsdp *f, int ui)
{
    struct tide__fsdp_unit *u = &f->units[ui];
    u->accumulating = 0;
    if (f->cfg.strategy == TIDE_FSDP_NO_SHARD) {
        struct tide__fsdp_bucket *b = &f->buckets[u->bucket];
        return --b->pending == 0 ? start_bucket(f, b) : 0;
    }
    atomic_store(&u->reduce_done, 0);
    int rc = tide_ireduce_scatter(f->shard_comm, u->grad_full, u->shard_grad, u->shard,
                                  TIDE_FLOAT32, TIDE_AVG, &u->reduce);
    if (rc == 0)
        rc = tide_req_on_complete(u->reduce, note_done, &u->reduce_done);
    if (rc != 0)
        return tide__fsdp_fail(f, rc, "reduce-scatter of unit %d: %s", ui, tide_strerror(rc));
    f->stats.reductions++;
    return push_fifo(f, ui);
}

void tide__fsdp_reset_grads(tide_fsdp *f)
{
    for (int i = 0; i < f->nunits; i++)
        f->units[i].grad_given = f->units[i].grad_readied = 0;
    for (int b = 0; b < f->nbuckets; b++)
        f->buckets[b].pending = f->buckets[b].first - f->buckets[b].last + 1;
}

int tide_fsdp_grad_ready(tide_fsdp *f, int unit)
{
    int rc = tide__fsdp_check_unit(f, unit, "tide_fsdp_grad_ready");
    if (rc != 0)
        return rc;
    struct tide__fsdp_unit *u = &f->units[unit];
    if (f->phase != PHASE_BACKWARD || !u->grad_given || u->grad_readied)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_grad_ready: unit %d %s", unit,
                               f->phase != PHASE_BACKWARD ? "outside a backward"
                               : u->grad_readied         ? "is already ready"
                                                         : "has no gradient (call tide_fsdp_grad)");
    u->grad_readied = 1;
    f->any_grad_ready = 1;
    if (!f->sync) /* no-sync: keep accumulating locally */
        return 0;
    if ((rc = start_reduce(f, unit)) != 0)
        return rc;
    return tide__fsdp_pump(f);
}

/* The head's reduce-scatter is done: free its full gradient and, for
 * HYBRID_SHARD, average the shard across groups. */
static int stage_two(tide_fsdp *f, int ui)
{
    struct tide__fsdp_unit *u = &f->units[ui];
    free_grad_full(f, u);
    if (f->replica_comm == NULL)
        return 0;
    int rc = tide_iallreduce(f->replica_comm, TIDE_IN_PLACE, u->shard_grad, u->shard,
                             TIDE_FLOAT32, TIDE_AVG, &u->reduce2);
    if (rc != 0)
        return tide__fsdp_fail(f, rc, "all-reduce across groups of unit %d: %s", ui,
                               tide_strerror(rc));
    f->stats.reductions++;
    return 0;
}

/* Looks at the completion flag before tide_test: in thread mode
 * tide_test drives the reactor for a turn when nobody else does, and
 * pumping at every acquire, release and grad_ready had the trainer's
 * thread reducing and copying the collectives' data between its layers. */
int tide__fsdp_pump(tide_fsdp *f)
{
    while (f->fifo_head < f->fifo_len) {
        int ui = f->fifo[f->fifo_head], done = 0;
        struct tide__fsdp_unit *u = &f->units[ui];
        if (!atomic_load(&u->reduce_done))
            return 0;
        int rc = tide_test(u->reduce, &done);
        if (!done)
            return 0;
        if (rc != 0) {
            tide__fsdp_fail(f, rc, "reduce-scatter of unit %d failed: %s", ui,
                            tide_req_message(u->reduce));
            return rc;
        }
        tide_req_free(u->reduce);
        u->reduce = NULL;
        f->fifo_head++;
        if ((rc = stage_two(f, ui)) != 0)
            return rc;
    }
    return 0;
}

/* Wait for every reduction, in the order they were started. */
static int wait_reductions(tide_fsdp *f)
{
    int rc = 0;
    for (int b = 0; b < f->nbuckets && rc == 0; b++) {
        if (f->buckets[b].pending > 0 && f->buckets[b].req == NULL) /* some unit never ready */
            rc = start_bucket(f, &f->buckets[b]);
        if (rc == 0)
            rc = tide__fsdp_wait(f, &f->buckets[b].req, "gradient bucket all-reduce", b);
    }
    for (; f->fifo_head < f->fifo_len && rc == 0; f->fifo_head++) {
        int ui = f->fifo[f->fifo_head];
        rc = tide__fsdp_wait(f, &f->units[ui].reduce, "reduce-scatter", ui);
        if (rc == 0)
            rc = stage_two(f, ui);
    }
    for (int i = 0; i < f->fifo_len && rc == 0; i++)
        rc = tide__fsdp_wait(f, &f->units[f->fifo[i]].reduce2, "all-reduce across groups",
                             f->fifo[i]);
    return rc;
}

int tide_fsdp_sync_gradients(tide_fsdp *f)
{
    if (f->phase != PHASE_BACKWARD || !f->any_grad_ready)
        return tide__fsdp_fail(f, TIDE_EINVAL, "tide_fsdp_sync_gradients: no backward has made "
                                               "a gradient ready since the last sync");
    for (int i = 0; i < f->nunits; i++)
        if (f->units[i].pstate == PARAMS_HELD && f->cfg.strategy != TIDE_FSDP_NO_SHARD)
            return tide__fsdp_fail(f, TIDE_EBUSY, "tide_fsdp_sync_gradients: unit %d is still "
                                                  "acquired", i);
    f->syncing = 1;
    int rc = f->sync ? wait_reductions(f) : 0;
    for (int i = 0; f->sync && i < f->nunits; i++) /* units without a gradient this step */
        if (!f->units[i].grad_readied && f->cfg.strategy != TIDE_FSDP_NO_SHARD)
            memset(f->units[i].shard_grad, 0, f->units[i].shard * sizeof(float));
    f->fifo_head = f->fifo_len = 0;
    f->any_grad_ready = 0;
    int rc2 = tide__fsdp_settle_params(f, 0);
    f->syncing = 0;
    f->phase = f->sync ? PHASE_SYNCED : PHASE_IDLE;
    return rc ? rc : rc2;
}

void tide__fsdp_drop_reductions(tide_fsdp *f)
{
    for (int b = 0; b < f->nbuckets; b++) {
        tide_wait(f->buckets[b].req, -1);
        tide_req_free(f->buckets[b].req);
    }
    for (int i = 0; i < f->nunits; i++) {
        struct tide__fsdp_unit *u = &f->units[i];
        tide_wait(u->reduce, -1);
        tide_req_free(u->reduce);
        tide_wait(u->reduce2, -1);
        tide_req_free(u->reduce2);
        u->reduce = u->reduce2 = NULL;
    }
}
