/* mpsc.c - see mpsc.h.  The one subtle point: between a producer's
 * exchange of head and its store of prev->next, the list is briefly cut.
 * pop() then returns NULL and empty() returns false, so the consumer keeps
 * looking instead of sleeping. */
#include "engine/mpsc.h"

#include <stddef.h>

void tide__mpsc_init(struct tide__mpsc *q)
{
    atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
    atomic_store_explicit(&q->head, &q->stub, memory_order_relaxed);
    atomic_store_explicit(&q->tail, &q->stub, memory_order_relaxed);
}

void tide__mpsc_push(struct tide__mpsc *q, struct tide__mpsc_node *node)
{
    atomic_store_explicit(&node->next, NULL, memory_order_relaxed);
    /* seq_cst: pairs with the consumer's "sleeping" flag (see progress.c). */
    struct tide__mpsc_node *prev = atomic_exchange(&q->head, node);
    atomic_store_explicit(&prev->next, node, memory_order_release);
}

/* Only the consumer writes tail: its own loads need no ordering. */
static void set_tail(struct tide__mpsc *q, struct tide__mpsc_node *tail)
{
    atomic_store_explicit(&q->tail, tail, memory_order_relaxed);
}

struct tide__mpsc_node *tide__mpsc_pop(struct tide__mpsc *q)
{
    struct tide__mpsc_node *tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    struct tide__mpsc_node *next = atomic_load_explicit(&tail->next, memory_order_acquire);

    if (tail == &q->stub) {
        if (!next)
            return NULL;
        set_tail(q, next);
        tail = next;
        next = atomic_load_explicit(&next->next, memory_order_acquire);
    }
    if (next) {
        set_tail(q, next);
        return tail;
    }
    /* tail is the last node we can see; if head moved past it, a producer
     * is mid-push. */
    if (tail != atomic_load(&q->head))
        return NULL;
    /* Re-insert the stub behind tail so tail can be handed out. */
    tide__mpsc_push(q, &q->stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next) {
        set_tail(q, next);
        return tail;
    }
    return NULL;
}

bool tide__mpsc_empty(struct tide__mpsc *q)
{
    return atomic_load_explicit(&q->tail, memory_order_relaxed) == &q->stub &&
           atomic_load(&q->head) == &q->stub &&
           atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL;
}
