/* mpsc.h - an intrusive multi-producer, single-consumer queue without locks
 * (Dmitry Vyukov's design).  User threads push requests; only the reactor
 * thread pops.  Push is one atomic exchange; pop never blocks. */
#ifndef TIDE_MPSC_H
#define TIDE_MPSC_H

#include <stdatomic.h>
#include <stdbool.h>

struct tide__mpsc_node {
    _Atomic(struct tide__mpsc_node *) next;
};

struct tide__mpsc {
    _Atomic(struct tide__mpsc_node *) head; /* producers append here */
    /* consumer pops here; atomic (relaxed) because tide__mpsc_empty reads
     * it from other threads (the progress thread looks while a caller
     * drives), a data race ThreadSanitizer reported with two callers */
    _Atomic(struct tide__mpsc_node *) tail;
    struct tide__mpsc_node stub;            /* keeps the list never empty */
};

void tide__mpsc_init(struct tide__mpsc *q);

/* Any thread.  The node must not be in any queue. */
void tide__mpsc_push(struct tide__mpsc *q, struct tide__mpsc_node *node);

/* Consumer thread only.  NULL when empty, or when a producer is halfway
 * through a push: that producer will wake the consumer afterwards, so the
 * consumer must simply look again later. */
struct tide__mpsc_node *tide__mpsc_pop(struct tide__mpsc *q);

/* Consumer thread only.  False while a push is in progress, so a consumer
 * that checks this before sleeping never sleeps on a pending push. */
bool tide__mpsc_empty(struct tide__mpsc *q);

#endif
