/* pool.h - a few full-size buffers (gathered parameters, full gradients)
 * kept for the next unit instead of going back to the system.
 *
 * Why: glibc hands a freed multi-MiB buffer back to the kernel (munmap or
 * heap trim), and the next unit's malloc then faults in every page again.
 * Measured here on the demo (8 layers of 1024 x 1024, 2 ranks, sleep
 * compute): ~9,400 page faults per step, about 50 ms of a 145 ms step
 * whose compute was 92 ms.  Reusing buffers removes nearly all of them.
 *
 * Units pad to distinct counts (shard.h), so equal layers differ by a
 * few elements: buffers are sized up to a capacity class (about 3 %
 * coarse) and reused within a class.  Pure bookkeeping over malloc: no
 * communicator; tests/test_fsdp_pool.c checks it. */
#ifndef TIDE_FSDP_POOL_H
#define TIDE_FSDP_POOL_H

#include <stddef.h>

#define TIDE__FSDP_POOL_SLOTS 8 /* prefetch depth + a few gradients in flight */

struct tide__fsdp_pool {
    void *buf[TIDE__FSDP_POOL_SLOTS]; /* oldest first */
    size_t cap[TIDE__FSDP_POOL_SLOTS];
    int n;
    size_t bytes; /* sum of cap[0..n-1] */
};

/* The capacity class of a buffer of `bytes`: bytes rounded up to a power
 * of two no larger than bytes / 32 (at least 64). */
size_t tide__fsdp_pool_capacity(size_t bytes);

/*
 * A buffer of at least `bytes`: a pooled one of the same class, else a new
 * malloc, after freeing pooled buffers (oldest first) until the pool plus
 * the new buffer fit in `room` bytes (SIZE_MAX: no bound).  NULL when
 * malloc fails.  The contents are undefined.
 */
void *tide__fsdp_pool_take(struct tide__fsdp_pool *p, size_t bytes, size_t room);

/* Keep buf (taken for `bytes`) for reuse if the pool then holds at most
 * `room` bytes, evicting older buffers as needed; otherwise free it.
 * NULL is ignored. */
void tide__fsdp_pool_give(struct tide__fsdp_pool *p, void *buf, size_t bytes, size_t room);

/* Free every pooled buffer. */
void tide__fsdp_pool_drain(struct tide__fsdp_pool *p);

#endif
