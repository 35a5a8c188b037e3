/* timer_heap.h - deadlines in a binary min-heap.  Ties fire in the order
 * they were armed (a sequence number breaks them), so runs are
 * reproducible.  Owned and touched only by the reactor thread. */
#ifndef TIDE_TIMER_HEAP_H
#define TIDE_TIMER_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct tide__timer {
    uint64_t deadline_ns; /* absolute, tide__now_ns() clock */
    uint64_t order;       /* arm order, the tie-break */
    size_t slot;          /* index in the heap; SIZE_MAX when not armed */
    void (*fire)(struct tide__timer *t); /* runs on expiry, already disarmed */
};

struct tide__timer_heap {
    struct tide__timer **items;
    size_t len, cap;
    uint64_t next_order;
};

void tide__timer_heap_init(struct tide__timer_heap *h);
void tide__timer_heap_free(struct tide__timer_heap *h);

/* A timer starts disarmed. */
void tide__timer_init(struct tide__timer *t, void (*fire)(struct tide__timer *t));

/* Disarm and fire every timer due at or before now_ns; returns how many. */
int tide__timer_heap_expire(struct tide__timer_heap *h, uint64_t now_ns);

/* Arm t (disarming it first if armed).  TIDE_ENOMEM if the heap can't grow. */
int tide__timer_arm(struct tide__timer_heap *h, struct tide__timer *t, uint64_t deadline_ns);

/* Disarm t; harmless when it is not armed. */
void tide__timer_disarm(struct tide__timer_heap *h, struct tide__timer *t);

/* The earliest armed timer, or NULL. */
struct tide__timer *tide__timer_heap_peek(const struct tide__timer_heap *h);

#endif
