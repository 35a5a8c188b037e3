/* seqmap.c - see seqmap.h.  Chained buckets, doubled when the table
 * holds as many nodes as buckets. */
#include "engine/seqmap.h"

#include <stdlib.h>

#define FIRST_SLOTS 64

static size_t slot_of(size_t nslots, uint32_t comm_id, uint64_t seq)
{
    /* Sequence numbers are consecutive: a multiplicative mix spreads
     * them and the communicator id over the low bits we keep. */
    uint64_t h = (seq ^ ((uint64_t)comm_id << 40)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (nslots - 1);
}

static void grow(struct tide__seqmap *m)
{
    size_t n = m->nslots ? 2 * m->nslots : FIRST_SLOTS;
    struct tide__seqmap_node **slots = calloc(n, sizeof *slots);
    if (!slots)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < m->nslots; i++) {
        struct tide__seqmap_node *node = m->slots[i];
        while (node) {
            struct tide__seqmap_node *next = node->next;
            size_t s = slot_of(n, node->comm_id, node->seq);
            node->next = slots[s];
            slots[s] = node;
            node = next;
        }
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = n;
}

int tide__seqmap_add(struct tide__seqmap *m, struct tide__seqmap_node *n)
{
    if (m->count >= m->nslots)
        grow(m);
    if (!m->nslots)
        return -1;
    size_t s = slot_of(m->nslots, n->comm_id, n->seq);
    n->next = m->slots[s];
    m->slots[s] = n;
    m->count++;
    return 0;
}

struct tide__seqmap_node *tide__seqmap_find(const struct tide__seqmap *m, uint32_t comm_id,
                                            uint64_t seq, const struct tide__seqmap_node *after)
{
    if (!m->nslots)
        return NULL;
    struct tide__seqmap_node *node =
        after ? after->next : m->slots[slot_of(m->nslots, comm_id, seq)];
    for (; node; node = node->next)
        if (node->comm_id == comm_id && node->seq == seq)
            return node;
    return NULL;
}

void tide__seqmap_remove(struct tide__seqmap *m, struct tide__seqmap_node *n)
{
    if (!m->nslots)
        return;
    struct tide__seqmap_node **link = &m->slots[slot_of(m->nslots, n->comm_id, n->seq)];
    while (*link && *link != n)
        link = &(*link)->next;
    if (!*link)
        return;
    *link = n->next;
    m->count--;
}

void tide__seqmap_free(struct tide__seqmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->nslots = m->count = 0;
}
