/* msgq.h - a FIFO of messages linked through tide__msg.next: the posted
 * receives of a peer, the sends waiting for a connection. */
#ifndef TIDE_MSGQ_H
#define TIDE_MSGQ_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/transport.h"

struct tide__msgq {
    tide__msg *head, *tail;
};

static inline void tide__msgq_push(struct tide__msgq *q, tide__msg *m)
{
    m->next = NULL;
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
}

/* Unlink m, whose predecessor in q is prev (NULL when m is the head). */
static inline void tide__msgq_unlink(struct tide__msgq *q, tide__msg *prev, tide__msg *m)
{
    if (prev)
        prev->next = m->next;
    else
        q->head = m->next;
    if (q->tail == m)
        q->tail = prev;
    m->next = NULL;
}

static inline tide__msg *tide__msgq_pop(struct tide__msgq *q)
{
    tide__msg *m = q->head;
    if (m)
        tide__msgq_unlink(q, NULL, m);
    return m;
}

/* Unlink m from q; true if it was there. */
static inline bool tide__msgq_remove(struct tide__msgq *q, tide__msg *m)
{
    tide__msg *prev = NULL;
    for (tide__msg *p = q->head; p; prev = p, p = p->next) {
        if (p == m) {
            tide__msgq_unlink(q, prev, m);
            return true;
        }
    }
    return false;
}

#endif
