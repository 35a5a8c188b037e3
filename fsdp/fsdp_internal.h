/* fsdp_internal.h - the FSDP context and its units, shared by the files
 * of fsdp/ (context.c: creation, registration, parameters, errors;
 * gather.c: passes, acquire/release, prefetch and the byte budget;
 * reduce.c: gradients and their reductions; optim.c: optimizer steps).
 * Only include/tide.h is used underneath: no engine internals. */
#ifndef TIDE_FSDP_INTERNAL_H
#define TIDE_FSDP_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>

#include "fsdp/pool.h"
#include "fsdp/tide_fsdp.h"

/* Where a unit's full parameters are. */
enum tide__fsdp_pstate {
    PARAMS_SHARDED = 0, /* only the shard exists */
    PARAMS_GATHERING,   /* full buffer allocated, all-gather in flight */
    PARAMS_GATHERED,    /* full and current, nobody holds it */
    PARAMS_HELD,        /* acquired by the trainer */
};

enum tide__fsdp_phase {
    PHASE_IDLE = 0, /* between steps */
    PHASE_FORWARD,
    PHASE_BACKWARD,
    PHASE_SYNCED, /* gradients reduced, optimizer not run yet */
};

struct tide__fsdp_unit {
    size_t numel;     /* real elements */
    int ntensors;
    size_t *offsets;  /* ntensors + 1 prefix sums */
    size_t shard;     /* padded elements per rank (NO_SHARD: the whole, padded) */
    size_t full;      /* shard * group size: elements of the gathered buffer */
    float *shard_params;
    float *shard_grad;   /* averaged gradient of the shard (NO_SHARD: in its bucket) */
    float *adam_m, *adam_v; /* optimizer state, allocated at the first Adam step */
    long adam_t;
    float *full_params;  /* NULL when sharded (NO_SHARD: == shard_params) */
    tide_req *gather;    /* the all-gather in flight */
    enum tide__fsdp_pstate pstate;
    int stale;           /* SHARD_GRAD_OP: the kept full copy predates the shard */
    float *grad_full;    /* full-size gradient (NO_SHARD: points into its bucket) */
    int grad_given;      /* tide_fsdp_grad was called in this backward */
    int grad_readied;    /* tide_fsdp_grad_ready was called in this backward */
    int accumulating;    /* grad_full holds gradients not reduced yet */
    tide_req *reduce;    /* reduce-scatter (hybrid: inside the group) in flight */
    atomic_int reduce_done; /* set by its completion callback (reduce.c) */
    tide_req *reduce2;   /* HYBRID_SHARD: all-reduce across groups in flight */
    int bucket;          /* NO_SHARD: index of its bucket */
};

/* NO_SHARD: consecutive units (in reverse registration order, the order
 * backward makes them ready) whose gradients share one all-reduce. */
struct tide__fsdp_bucket {
    int first, last;  /* unit range, first > last: backward order */
    int pending;      /* units not ready yet in this backward */
    size_t count;     /* elements reduced (distinct from other buckets) */
    float *buf;       /* the gradients of its units, end to end */
    tide_req *req;
};

struct tide_fsdp {
    tide_fsdp_config cfg;
    tide_comm *world;        /* the caller's; outlives us */
    tide_comm *shard_comm;   /* private: the ranks a unit is sharded over */
    tide_comm *replica_comm; /* HYBRID_SHARD: same position in every group */
    int group_rank, group_size;
    struct tide__fsdp_unit *units;
    int nunits, units_cap;
    struct tide__fsdp_bucket *buckets;
    int nbuckets;
    enum tide__fsdp_phase phase;
    int sync;                /* reduce in this backward (else accumulate) */
    int started;             /* a forward has begun: no more units */
    int any_grad_ready;      /* since the last sync */
    int syncing;             /* inside tide_fsdp_sync_gradients (for the stats) */
    int *plan;               /* expected acquire order of the current pass */
    int plan_len, plan_next;
    int *last_forward;       /* the order the previous forward acquired */
    int last_forward_len;
    int *record;             /* this forward's acquisitions, in order */
    int record_len, record_cap;
    int *fifo;               /* units with reductions in flight, issue order */
    int fifo_head, fifo_len;
    size_t grad_bytes;
    struct tide__fsdp_pool pool; /* freed full-size buffers, for the next unit */
    tide_fsdp_stats stats;
    char msg[256];
};

/* Set the message and return code (context.c). */
int tide__fsdp_fail(tide_fsdp *f, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* TIDE_EINVAL with a message unless 0 <= unit < nunits. */
int tide__fsdp_check_unit(tide_fsdp *f, int unit, const char *call);

/* Wait for *req (accounting the time as blocked), free it and set *req
 * to NULL.  On failure the message says what was waited for. */
int tide__fsdp_wait(tide_fsdp *f, tide_req **req, const char *what, int unit);

double tide__fsdp_now(void);

/* Whether a strategy shards parameters (FULL_SHARD, HYBRID_SHARD). */
int tide__fsdp_reshards(const tide_fsdp *f);

/* Unsharded bytes accounting (gather.c). */
void tide__fsdp_charge(tide_fsdp *f, size_t bytes);
void tide__fsdp_uncharge(tide_fsdp *f, size_t bytes);

/* Bytes the budget leaves beside the unsharded bytes held (SIZE_MAX
 * without a budget): what the buffer pool may keep (gather.c). */
size_t tide__fsdp_spare_bytes(const tide_fsdp *f);

/* Wait for every gather in flight and free or mark stale what nobody
 * holds (gather.c); run at sync and before parameters change. */
int tide__fsdp_settle_params(tide_fsdp *f, int params_changed);

/* The unit the next forward is expected to acquire first, or -1
 * (gather.c). */
int tide__fsdp_next_forward_first(const tide_fsdp *f);

/* Cross-step prefetch: the unit's shard is final for the next forward,
 * so start its all-gather now, as begin_forward would, if forward
 * prefetch is on, nothing is gathered yet and it fits the budget; else
 * do nothing (gather.c).  Returns 0 or the all-gather's error. */
int tide__fsdp_gather_ahead(tide_fsdp *f, int unit);

/* Test reductions in flight and start follow-ups, without blocking
 * (reduce.c). */
int tide__fsdp_pump(tide_fsdp *f);

/* NO_SHARD buckets, laid out once at the first forward (reduce.c). */
int tide__fsdp_make_buckets(tide_fsdp *f);

/* New backward: no gradient given or ready yet, buckets all pending. */
void tide__fsdp_reset_grads(tide_fsdp *f);

/* Free a unit's reduction state (reduce.c), for destroy. */
void tide__fsdp_drop_reductions(tide_fsdp *f);

#endif
