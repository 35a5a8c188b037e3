/* kinds.h - the numbers of the collectives on the wire (a frame's kind:
 * engine/frame.h).  The engine carries them without knowing them; their
 * names are collectives/signature.c's.  A new collective takes the next
 * free number here, below TIDE_KIND_MAX_, and nothing below this layer
 * changes.  (1, 13 and 14 are the engine's: engine/frame.h.) */
#ifndef TIDE_COLL_KINDS_H
#define TIDE_COLL_KINDS_H

enum tide__coll_kind {
    TIDE_KIND_BARRIER = 2,
    TIDE_KIND_ALLREDUCE = 3,
    TIDE_KIND_BROADCAST = 4,
    TIDE_KIND_REDUCE = 5,
    TIDE_KIND_ALLGATHER = 6,
    TIDE_KIND_ALLGATHERV = 7,
    TIDE_KIND_REDUCE_SCATTER = 8,
    TIDE_KIND_REDUCE_SCATTERV = 9,
    TIDE_KIND_GATHER = 10,
    TIDE_KIND_SCATTER = 11,
    TIDE_KIND_ALLTOALL = 12,
};

#endif
