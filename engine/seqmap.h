/* seqmap.h - collectives by (communicator, sequence number).
 *
 * An intrusive hash table: the node lives inside what it indexes (a
 * running request, a note about one not yet started), so adding and
 * removing allocate nothing except when the table grows.  Why a table:
 * frames of collectives this rank has not reached yet (a broadcast root
 * running thousands of calls ahead, thousands of collectives in flight)
 * made the linear lists they replace cost O(n) per frame and per start.
 *
 * Reactor thread only. */
#ifndef TIDE_ENGINE_SEQMAP_H
#define TIDE_ENGINE_SEQMAP_H

#include <stddef.h>
#include <stdint.h>

struct tide__seqmap_node {
    struct tide__seqmap_node *next;
    uint32_t comm_id;
    uint64_t seq;
};

struct tide__seqmap {
    struct tide__seqmap_node **slots;
    size_t nslots; /* 0 or a power of two */
    size_t count;
};

/* Index n under (n->comm_id, n->seq); several nodes may share a key.
 * Returns -1 only when the table is empty and cannot be allocated. */
int tide__seqmap_add(struct tide__seqmap *m, struct tide__seqmap_node *n);

/* The next node with this key after `after` (NULL: the first), or NULL. */
struct tide__seqmap_node *tide__seqmap_find(const struct tide__seqmap *m, uint32_t comm_id,
                                            uint64_t seq, const struct tide__seqmap_node *after);

/* Drop n if it is in m. */
void tide__seqmap_remove(struct tide__seqmap *m, struct tide__seqmap_node *n);

/* Free the slots (not the nodes, which belong to their owners). */
void tide__seqmap_free(struct tide__seqmap *m);

#endif
