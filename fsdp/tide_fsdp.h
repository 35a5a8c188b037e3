/*
 * tide_fsdp.h - fully sharded data parallel training on tide's public API.
 *
 * A model is a list of *units* (a layer or a block).  The parameters of a
 * unit form one flat float32 buffer (its tensors laid end to end), which
 * is cut into equal shards, one per rank of the shard group, padded with
 * zeros at the end when the size does not divide.  A rank stores only its
 * shard (and the shard's gradient and optimizer state); the full buffer
 * exists only between acquire and release, gathered just in time.
 *
 * One training step, from the trainer's side:
 *
 *     tide_fsdp_begin_forward(f);              starts the first all-gathers
 *     for u in 0..n-1:
 *         tide_fsdp_acquire(f, u, &w);         full parameters of u; starts
 *         ... compute with w ...               the gathers of u+1..u+k
 *         tide_fsdp_release(f, u);             reshards (frees) u
 *     tide_fsdp_begin_backward(f);             starts the first re-gather
 *     for u in n-1..0:                         (reverse of the forward order)
 *         tide_fsdp_acquire(f, u, &w);
 *         tide_fsdp_grad(f, u, &g);            full gradient buffer of u
 *         ... add u's gradient into g ...      (tide_fsdp_grad_fresh: write
 *                                              it, if g holds none yet)
 *         tide_fsdp_grad_ready(f, u);          starts its reduce-scatter now
 *         tide_fsdp_release(f, u);
 *     tide_fsdp_sync_gradients(f);             waits for what is in flight
 *     tide_fsdp_sgd(f, lr);                    updates the local shards and
 *                                              starts the next forward's
 *                                              first all-gather
 *
 * Strategies (gradients are averaged over the whole world in all four):
 *   FULL_SHARD   parameters, gradients and optimizer state sharded; the
 *                backward re-gathers parameters (ZeRO-3).
 *   SHARD_GRAD_OP  parameters kept whole from forward through backward;
 *                gradients reduce-scattered; the updated shards are
 *                re-gathered lazily by the next forward (ZeRO-2).
 *   NO_SHARD     every rank holds everything; gradients are all-reduced
 *                in buckets as soon as each bucket's units are ready (DDP).
 *   HYBRID_SHARD  FULL_SHARD inside groups of hybrid_group_size
 *                contiguous ranks, replicated across groups: reduce-scatter
 *                in the group, then all-reduce across groups.
 *
 * Every rank must make the same calls in the same order with the same
 * configuration.  FSDP's collectives run on communicators of its own
 * (split from the one given at create), so they never interleave with
 * the caller's.  Each unit's shard is padded to a count no other unit
 * has, so ranks that acquire units in different orders call collectives
 * of different counts and fail with TIDE_EMISMATCH instead of mixing
 * parameters.
 *
 * Errors: functions return 0 or a negative TIDE_E* code, and
 * tide_fsdp_message() explains the last failure.  A tide_fsdp belongs to
 * one thread.
 */
#ifndef TIDE_FSDP_H
#define TIDE_FSDP_H

#include <stddef.h>
#include <stdint.h>

#include <tide.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tide_fsdp tide_fsdp;

typedef enum tide_fsdp_strategy {
    TIDE_FSDP_FULL_SHARD = 0,
    TIDE_FSDP_SHARD_GRAD_OP = 1,
    TIDE_FSDP_NO_SHARD = 2,
    TIDE_FSDP_HYBRID_SHARD = 3,
} tide_fsdp_strategy;

/* Fill with tide_fsdp_config_default(), then change what you need. */
typedef struct tide_fsdp_config {
    tide_fsdp_strategy strategy; /* default FULL_SHARD */
    int hybrid_group_size;       /* HYBRID_SHARD: ranks per shard group */
    int forward_prefetch;        /* all-gathers kept ahead in forward (k); 0 = none; default 1 */
    int backward_prefetch;       /* 1: gather the next unit of backward ahead (default); 0: no */
    size_t budget_bytes;         /* bound on unsharded parameter bytes; 0 = unbounded */
    tide_dtype comm_dtype;       /* all-gather dtype: TIDE_FLOAT32 (default) or TIDE_BFLOAT16 */
    tide_dtype reduce_dtype;     /* gradient reduction dtype: TIDE_FLOAT32 only */
    size_t bucket_bytes;         /* NO_SHARD all-reduce bucket size; default 4 MiB */
} tide_fsdp_config;

/* Peak and time accounting, since create or the last tide_fsdp_stats_reset. */
typedef struct tide_fsdp_stats {
    size_t unsharded_bytes;      /* full parameter buffers held now (incl. gathers in flight) */
    size_t peak_unsharded_bytes; /* the most held at once */
    size_t peak_grad_bytes;      /* the most full-size gradient bytes held at once */
    double blocked_s;            /* time spent waiting for communication, of which: */
    double blocked_forward_s;    /*   in forward (all-gathers) */
    double blocked_backward_s;   /*   in backward before sync (all-gathers) */
    double blocked_sync_s;       /*   in sync_gradients and outside passes */
    uint64_t gathers;            /* all-gathers started */
    uint64_t reductions;         /* reduce-scatters and all-reduces started */
    uint64_t dropped_prefetches; /* prefetched units freed unused to fit the budget */
} tide_fsdp_stats;

/* Adam hyper-parameters (tide_fsdp_adam). */
typedef struct tide_fsdp_adam_params {
    float lr, beta1, beta2, eps, weight_decay;
} tide_fsdp_adam_params;

/* Defaults: FULL_SHARD, forward prefetch 1, backward prefetch on,
 * unbounded budget, float32 gathers and reductions, 4 MiB buckets. */
TIDE_API void tide_fsdp_config_default(tide_fsdp_config *cfg);

/* "full_shard", "shard_grad_op", "no_shard", "hybrid_shard", or "?". */
TIDE_API const char *tide_fsdp_strategy_name(tide_fsdp_strategy s);

/* Parse a strategy name as printed by tide_fsdp_strategy_name.  Returns
 * 0, or TIDE_EINVAL for an unknown name. */
TIDE_API int tide_fsdp_strategy_parse(const char *name, tide_fsdp_strategy *out);

/*
 * Create an FSDP context over comm (which must outlive it).  Collective
 * over comm: it splits private communicators (HYBRID_SHARD: the group and
 * the replicas across groups).  Returns TIDE_EINVAL for a bad config, e.g.
 * a world size that is not a multiple of hybrid_group_size; *out is NULL
 * then and `message`, when not NULL, receives the reason (256 bytes).
 */
TIDE_API int tide_fsdp_create(tide_comm *comm, const tide_fsdp_config *cfg, tide_fsdp **out,
                              char *message);

/* Free everything: waits (up to the operations' deadline) for
 * communication still in flight, then frees the communicators.  NULL is
 * ignored. */
TIDE_API void tide_fsdp_destroy(tide_fsdp *f);

/*
 * After a failure (a call returned TIDE_EPEER, TIDE_ETIMEDOUT, ...):
 * revoke FSDP's private communicators (tide_comm_revoke), so that the
 * ranks still waiting on them for this rank fail promptly with
 * TIDE_EREVOKED instead of at their deadline.  The context is unusable
 * afterwards: destroy it, shrink the communicator it was made over
 * (tide_comm_shrink) and create a new one there.  tide-fsdp-train
 * --elastic shows the whole recovery.  Returns 0, or TIDE_EINVAL for
 * NULL.  Not collective; revoking twice is harmless.
 */
TIDE_API int tide_fsdp_revoke(tide_fsdp *f);

/* Why the last call that failed failed ("" if none has). */
TIDE_API const char *tide_fsdp_message(const tide_fsdp *f);

/*
 * Register a unit made of ntensors tensors of numels[i] float32 elements,
 * laid end to end in that order.  Units are numbered 0, 1, ... in the
 * order they are added, and that is the forward order assumed until the
 * first forward has recorded the real one.  Parameters start at zero.
 * Only before the first forward.
 */
TIDE_API int tide_fsdp_add_unit(tide_fsdp *f, const size_t *numels, int ntensors, int *unit);

/* Number of float32 elements of the unit (its tensors, without padding),
 * or 0 for an unknown unit. */
TIDE_API size_t tide_fsdp_unit_numel(const tide_fsdp *f, int unit);

/* Offset (in elements) of tensor t in the unit's flat buffer, or
 * (size_t)-1 for an unknown unit or tensor. */
TIDE_API size_t tide_fsdp_tensor_offset(const tide_fsdp *f, int unit, int tensor);

/*
 * Set a unit's parameters from full (tide_fsdp_unit_numel elements).
 * root < 0: every rank passes the same values (e.g. a seeded
 * initializer) and keeps its shard; nothing is sent.  root >= 0: root's
 * values are broadcast (full is ignored elsewhere and may be NULL);
 * collective over the FSDP context.  Not between begin_forward and sync.
 */
TIDE_API int tide_fsdp_set_params(tide_fsdp *f, int unit, const float *full, int root);

/* Gather a unit's current parameters into full (numel elements) on every
 * rank; collective.  Not between begin_forward and sync. */
TIDE_API int tide_fsdp_get_params(tide_fsdp *f, int unit, float *full);

/*
 * Gradient synchronisation for the coming backward: sync = 1 (default)
 * reduces gradients in this backward; sync = 0 accumulates them locally
 * (each unit keeps a full-size gradient buffer) and the next backward
 * with sync = 1 adds to them and reduces the sum.  Every backward still
 * ends with tide_fsdp_sync_gradients, which then reduces nothing.
 */
TIDE_API int tide_fsdp_set_sync(tide_fsdp *f, int sync);

/* Start a forward pass: starts the all-gathers of the first k units of
 * the expected forward order. */
TIDE_API int tide_fsdp_begin_forward(tide_fsdp *f);

/* Start the backward pass: the expected order is the reverse of the
 * order in which this forward acquired units. */
TIDE_API int tide_fsdp_begin_backward(tide_fsdp *f);

/*
 * Make the unit's full parameters available: *params points at
 * tide_fsdp_unit_numel floats, valid until tide_fsdp_release.  Waits only
 * if its all-gather has not finished; starts it if nobody had, and
 * starts the gathers of the next units of the expected order that fit
 * the budget.  Errors: TIDE_EINVAL for an unknown unit or outside a
 * pass, TIDE_EBUSY when it is already acquired, TIDE_ENOMEM when the
 * budget cannot hold it even after dropping every prefetch, or the
 * collective's error (TIDE_EMISMATCH when ranks acquire in different
 * orders).
 */
TIDE_API int tide_fsdp_acquire(tide_fsdp *f, int unit, float **params);

/* Explicitly start a unit's all-gather now (for orders the automatic
 * prefetch cannot predict).  TIDE_EBUSY if it is already gathered or in
 * flight and not yet consumed; TIDE_ENOMEM if it does not fit the budget
 * now (nothing is started). */
TIDE_API int tide_fsdp_prefetch(tide_fsdp *f, int unit);

/* Give the unit's full parameters back (FULL_SHARD, HYBRID_SHARD: freed;
 * SHARD_GRAD_OP: kept until the optimizer changes the shard).
 * TIDE_EINVAL if it is not acquired. */
TIDE_API int tide_fsdp_release(tide_fsdp *f, int unit);

/*
 * The unit's full-size gradient buffer for this backward (*grad points at
 * tide_fsdp_unit_numel floats).  It is zero at the start of an
 * accumulation window and keeps what earlier no-sync backwards added:
 * the trainer adds (+=) its gradient into it, e.g. a GEMM with beta = 1.
 * Only during backward, and not after grad_ready.
 */
TIDE_API int tide_fsdp_grad(tide_fsdp *f, int unit, float **grad);

/*
 * tide_fsdp_grad without the zeroing (PyTorch's zero_grad(set_to_none=
 * True)): the same buffer, checks and effects, and *fresh says what the
 * buffer holds.  *fresh = 1: no gradient yet in this accumulation window
 * and the contents are undefined, so the trainer must write (=) every
 * one of its tide_fsdp_unit_numel elements, e.g. a GEMM with beta = 0.
 * *fresh = 0: it holds what earlier no-sync backwards accumulated; add
 * (+=) into it.  Saves tide_fsdp_grad's memset of the whole buffer (4 MiB
 * for a 1024 x 1024 layer) on the trainer's thread.  TIDE_EINVAL when
 * fresh is NULL, otherwise the errors of tide_fsdp_grad.
 */
TIDE_API int tide_fsdp_grad_fresh(tide_fsdp *f, int unit, float **grad, int *fresh);

/* The unit's gradient is complete: start its reduce-scatter (NO_SHARD:
 * its bucket's all-reduce once the bucket is complete) at once.  The
 * buffer must not be touched afterwards. */
TIDE_API int tide_fsdp_grad_ready(tide_fsdp *f, int unit);

/*
 * End the backward: wait for every reduction in flight and free the
 * gathered parameters nobody holds.  Afterwards tide_fsdp_shard gives
 * each unit's averaged shard gradient.  TIDE_EINVAL before any backward
 * has made a gradient ready, TIDE_EBUSY while a unit is still acquired.
 */
TIDE_API int tide_fsdp_sync_gradients(tide_fsdp *f);

/*
 * The local shard of a unit: *params and *grad (either may be NULL) point
 * at *count floats (the padded shard; NO_SHARD: the whole unit), and
 * *offset says which element of the unit's flat buffer the shard starts
 * at (elements past numel are padding).  A custom optimizer updates
 * params in place after sync and then calls tide_fsdp_params_updated.
 */
TIDE_API int tide_fsdp_shard(tide_fsdp *f, int unit, float **params, float **grad, size_t *count,
                             size_t *offset);

/* Tell FSDP the shards changed (after a custom optimizer step, or any
 * change to tide_fsdp_shard's params): full copies kept from before are
 * dropped, and with forward prefetch on, the all-gather of the unit the
 * next forward acquires first starts now, from the new shard, so that
 * it runs while the trainer prepares the next batch (cross-step
 * prefetch; only if it fits the budget).  That unit then counts as
 * prefetched: tide_fsdp_prefetch of it returns TIDE_EBUSY.  Not during
 * a pass. */
TIDE_API int tide_fsdp_params_updated(tide_fsdp *f);

/* Plain SGD on every local shard: p -= lr * g.  After sync.  The next
 * forward's first unit is updated first and its all-gather starts at
 * once, overlapping the other units' updates (see
 * tide_fsdp_params_updated). */
TIDE_API int tide_fsdp_sgd(tide_fsdp *f, float lr);

/* Adam (with decoupled weight decay, as AdamW) on every local shard;
 * its moments are sharded like the parameters.  After sync; starts the
 * next forward's first all-gather as tide_fsdp_sgd does. */
TIDE_API int tide_fsdp_adam(tide_fsdp *f, const tide_fsdp_adam_params *p);

/* Counters and peaks; reset by tide_fsdp_stats_reset (the current
 * unsharded bytes are kept and become the new peak). */
TIDE_API void tide_fsdp_stats_get(const tide_fsdp *f, tide_fsdp_stats *out);
TIDE_API void tide_fsdp_stats_reset(tide_fsdp *f);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_FSDP_H */
