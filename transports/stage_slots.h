/* stage_slots.h - which slots of a rank's staging area are taken
 * (transport.h: stage_take, stage_give), one bit each, for the
 * transports that have an area: shared memory and the simulator. */
#ifndef TIDE_STAGE_SLOTS_H
#define TIDE_STAGE_SLOTS_H

#include <stddef.h>
#include <stdint.h>

/* The lowest free slot of nslots (at most 64), taken: its offset, or -1.
 * Lowest first: a steady workload keeps reusing the few slots whose
 * pages are already in memory. */
static inline long tide__stage_slot_take(uint64_t *used, int nslots, size_t slot_bytes)
{
    for (int k = 0; k < nslots; k++) {
        if (!(*used & (1ull << k))) {
            *used |= 1ull << k;
            return (long)((size_t)k * slot_bytes);
        }
    }
    return -1;
}

static inline void tide__stage_slot_give(uint64_t *used, long off, size_t slot_bytes)
{
    *used &= ~(1ull << ((size_t)off / slot_bytes));
}

#endif
