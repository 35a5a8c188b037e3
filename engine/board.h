/* board.h - the boards of a rank's board area: where collectives on one
 * host publish small vectors for every peer to read in place
 * (collectives/board.c), laid out alike by every transport that offers
 * an area (transport.h: board_at): shared memory and the simulator.
 *
 * One board per communicator and rank.  A directory of keys at the
 * start of the area says which communicator holds which board; a peer
 * finds ours by scanning for the key, so no message need say where it
 * is.  Only the owner writes its area; peers map it read-only.
 *
 *   area   directory: BOARD_COUNT x _Atomic u64 key (0: free), a page
 *          boards 0..BOARD_COUNT-1, BOARD_STRIDE bytes each:
 *   +0     posted  u64: my part of collective `seq` is published
 *   +128   reduced u64: my reduced share of `seq` is in my slot
 *   +256   done    u64: every board collective <= seq has ended here
 *   +512   BOARD_HEADS headers (struct board_slot_head), 128 bytes each
 *   +2048  slot 0 data (BOARD_SLOT bytes), then slot 1 data
 *   then   the stream: STREAM_ENTRIES entries of 32 bytes (struct
 *          board_entry), a ring of its own for the 2-rank broadcasts,
 *          reduces, gathers and scatters of a few bytes
 *          (collectives/board_stream.c); then a data slot of
 *          STREAM_MAX_BYTES for each entry, for parts longer than an
 *          entry holds (virtual memory: only a slot written costs a page)
 *
 * Publication p (the p-th board collective here) goes to header p %
 * BOARD_HEADS and, if its part does not ride in the header, to data slot
 * p % 2: BOARD_HEADS is even, so a header and its data slot agree in
 * parity, and the gate (collectives/board.h) protects both alike.  More
 * headers than data slots: a header is then written again eight
 * collectives after its peers read it rather than two, and small
 * collectives among many ranks measured faster so (16 ranks on the
 * 16-core host, blocking calls, 6 interleaved rounds: all-reduce 8 B
 * 1.70 us against 2.07, all-gather 64 B 1.40 against 1.77,
 * reduce-scatter 64 B 1.94 against 2.35; 2 ranks unchanged;
 * docs/small-messages.md).
 *
 * A part of BOARD_TINY bytes or fewer goes into its header, after the
 * sequence and signature (sig.len says so), not into the slot's data: a
 * reader watching the header then has it in the same crossing between
 * cores, where the data line would take a second (2 ranks, 8 B
 * all-reduce here: see collectives/board.c).  Up to 8 bytes share the
 * header's first cache line; the rest fill the second line of its pair,
 * which the adjacent-line prefetcher (and the reader's prefetch) brings
 * with the first.
 *
 * The words sit 128 bytes apart because adjacent-line prefetchers fetch
 * cache lines in pairs: a word a peer spins on shares no pair with one
 * we store to.  Every word holds a collective's sequence number (they
 * start at 1; 0 is "none yet"), so a dump reads "rank 3's board shows
 * seq 41". */
#ifndef TIDE_BOARD_H
#define TIDE_BOARD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/frame.h"

#define BOARD_COUNT 256
#define BOARD_SLOT ((size_t)64 << 10)
#define BOARD_DIR_BYTES ((size_t)4096)
#define BOARD_HEADS 8
#define BOARD_HEAD_BYTES ((size_t)2048)
#define STREAM_ENTRIES 1024
#define STREAM_PART 24      /* the bytes of a part an entry holds; longer ones go to its slot */
#define STREAM_MAX_BYTES 256 /* the most a stream collective's sender moves (an entry's slot) */
#define STREAM_ENTRY_BYTES (8 + STREAM_PART) /* struct board_entry: the tag, then the part */
#define STREAM_BYTES (STREAM_ENTRIES * (STREAM_ENTRY_BYTES + STREAM_MAX_BYTES)) /* ring, slots */
/* Keeps every board 1 KiB-aligned. */
#define BOARD_STRIDE (BOARD_HEAD_BYTES + 2 * BOARD_SLOT + STREAM_BYTES)
#define BOARD_AREA_BYTES (BOARD_DIR_BYTES + (size_t)BOARD_COUNT * BOARD_STRIDE)

#define BOARD_LINE 64 /* a cache line: the layout below keeps words apart by it */
#define BOARD_TINY (128 - 8 - sizeof(struct tide__frame)) /* 72 */
#define BOARD_TINY_LINE 8 /* of which in the header's first line */

struct board_slot_head {
    _Atomic uint64_t seq;   /* the collective whose part the slot holds */
    struct tide__frame sig; /* its signature, as the publisher called it;
                               len: bytes of the part held in tiny (0: in
                               the slot's data) */
    uint8_t tiny[BOARD_TINY];
};

/* An entry of the stream: the tag (the collective's sequence and a code
 * of its signature: board_stream.c) is stored last, with release. */
struct board_entry {
    _Atomic uint64_t tag;
    uint8_t part[STREAM_PART];
};

struct board {
    _Atomic uint64_t posted;
    uint8_t pad0[120];
    _Atomic uint64_t reduced;
    uint8_t pad1[120];
    _Atomic uint64_t done;
    uint8_t pad2[248];
    struct board_slot_head head[BOARD_HEADS];
    uint8_t pad3[BOARD_HEAD_BYTES - 512 - BOARD_HEADS * 128];
    uint8_t data[2][BOARD_SLOT];
    struct board_entry ring[STREAM_ENTRIES];
    uint8_t stream_slot[STREAM_ENTRIES][STREAM_MAX_BYTES]; /* ring[i]'s part, if longer */
};

_Static_assert(sizeof(struct board) == BOARD_STRIDE, "board layout");
_Static_assert(sizeof(struct board_slot_head) == 2 * BOARD_LINE,
               "a header fills a pair of cache lines");
_Static_assert(sizeof(struct board_entry) == STREAM_ENTRY_BYTES &&
                   2 * STREAM_ENTRY_BYTES == BOARD_LINE,
               "two entries a cache line");
_Static_assert(offsetof(struct board, stream_slot) % BOARD_LINE == 0 &&
                   STREAM_MAX_BYTES % BOARD_LINE == 0,
               "a stream slot fills whole cache lines: a part takes as few as it can");
_Static_assert(BOARD_HEADS % 2 == 0, "a header and its data slot agree in parity");
_Static_assert(offsetof(struct board_slot_head, tiny) + BOARD_TINY_LINE <= BOARD_LINE,
               "a part of BOARD_TINY_LINE bytes shares its header's first cache line");
_Static_assert(BOARD_COUNT * sizeof(uint64_t) <= BOARD_DIR_BYTES, "board directory");

static inline _Atomic uint64_t *board_dir(uint8_t *area)
{
    return (_Atomic uint64_t *)area;
}

static inline struct board *board_at_index(uint8_t *area, int i)
{
    return (struct board *)(area + BOARD_DIR_BYTES + (size_t)i * BOARD_STRIDE);
}

/* The entry of the board keyed `key` in an area, or -1 if it has none
 * (yet).  Probes from key % BOARD_COUNT, as the claim does; never reads
 * past the area whatever the directory holds. */
static inline int board_find(uint8_t *area, uint64_t key)
{
    _Atomic uint64_t *dir = board_dir(area);
    for (int k = 0; k < BOARD_COUNT; k++) {
        int i = (int)((key + (uint64_t)k) % BOARD_COUNT);
        if (atomic_load_explicit(&dir[i], memory_order_acquire) == key)
            return i;
    }
    return -1;
}

#endif
