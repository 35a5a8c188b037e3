/* shm_peer.h - the shared-memory transport's inside, shared by shm.c
 * (lifecycle, posting, progress, doorbells, loss), shm_send.c, shm_recv.c
 * and shm_setup.c.
 *
 * Each rank owns one segment (a memfd): a header page, then one inbound
 * ring (shm_ring.h) per rank of the job, written only by that rank.  A
 * peer maps the header page and its own ring in our segment; we map the
 * whole of ours.  Pages of rings nobody writes are never touched, so a
 * large job costs address space, not memory.  The memfd has no name: a
 * peer opens it through /proc/<pid>/fd, and it is gone when the last
 * process mapping it exits, however it exits.
 *
 * The TCP connection of each pair stays open beside the rings, carrying
 * no data: a rank about to sleep in its reactor sets `sleeping` in its
 * header, and a writer that finds it set sends one byte down the socket
 * (the doorbell), which completes the receive the sleeper's reactor has
 * posted there.  The same receive returning 0 is how a dead peer is
 * noticed.  A spinning rank costs its peers nothing but memory reads.
 *
 * Single copy: a payload of at least cma_min bytes to a peer whose
 * memory we may read and that may read ours (probed at setup) is not
 * copied into the ring, if its message may be pulled (transport.h:
 * collectives whose bytes flow one way, as a broadcast's) and is below
 * SHM_CMA_AUTO_MAX, or TIDE_SHM_CMA=1 asks for it everywhere.  Its header carries
 * SHM_HDR_REMOTE in its first reserved byte and is followed by a
 * descriptor (the payload's address in the sender, its length); the
 * reader copies the payload straight from the sender with
 * process_vm_readv(2) into the destination, in pieces of CMA_PIECE
 * (shm_recv.c: a sender's death fails the next one), then counts it in the
 * ring's `acked`, and the sender completes the message when its count
 * comes up.  Where the kernel refuses (a container without ptrace
 * permission), the pair keeps the ring and says so.  Everywhere it
 * measured slower than the ring here (both ranks of an exchange copying
 * from each other at once); one way, faster (docs/architecture.md).
 * TIDE_SHM_CMA=0: never.
 *
 * Streaming stores: where this pair are the only ranks on their host,
 * a payload's piece of SHM_RING_STREAM_MIN bytes or more goes into the
 * ring with stores that skip taking each line back from the reader,
 * which read it a ring ago (engine/streaming_copy.c;
 * TIDE_STREAMING_STORES=0: never).  2 ranks, two interleaved rounds, us,
 * ordinary -> streaming (Open MPI vader): reduce 1 MiB 161-163 -> 109-111
 * (107), 4 MiB 739-740 -> 455-460 (491-522); all-to-all 4 MiB 332-333
 * -> 241-283 (230-243); all-reduce 256 KiB 45-52 -> 37-40 (58-73).  On
 * more ranks every pair's bytes would go through memory where they now
 * pass between caches, and 4 ranks sharing the 2 cores measured within
 * their noise: left to the many-core host.
 *
 * After the rings the segment holds the staging area that collectives
 * read each other's data from (transport.h, collectives/stage.c):
 * SHM_STAGE_SLOTS slots of SHM_STAGE_SLOT bytes, mapped read-only by
 * every peer, and then the board area (engine/board.h, shm_board.c),
 * mapped read-only by every peer with it.  Like the rings, their pages
 * cost memory only once used. */
#ifndef TIDE_SHM_PEER_H
#define TIDE_SHM_PEER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "engine/context.h"
#include "transports/rx.h"
#include "transports/shm/shm_ring.h"

#define SHM_MAGIC 0x4d48536564697400ull /* "\0tideSHM" */
#define SHM_HDR_FLAGS 10          /* the header byte with our flags (frame.h) */
#define SHM_HDR_REMOTE 0x1        /* the payload stays in the sender's memory */
#define SHM_DESC_BYTES 16         /* a single-copy frame's descriptor: addr, len */
#define SHM_CMA_MIN ((size_t)64 * 1024)
/* Under TIDE_SHM_CMA=auto, pulled payloads below this size only: on the
 * 16-core host (2026-11-26, two rounds) the ring's two copies beat the
 * single copy from 1 MiB, for a reduce at 2 ranks 1.1-1.9x and at 8
 * ranks 1.5-2.6x (1 MiB 1126-1353 against 1887-3582 us), while from 64
 * KiB to 256 KiB the single copy led (8 ranks 64 KiB 92 against 154).
 * On this project's 2-core machine it led at every size (1.2-1.6x):
 * users run on the many-core hosts. */
#define SHM_CMA_AUTO_MAX ((size_t)1 << 20)
/* One slot per staged collective in flight on this rank: 64 of them
 * before one fails with TIDE_ENOMEM.  A slot is two halves, one chunk of
 * the vector each (collectives/stage.c): 1 MiB chunks measured best on
 * this project's machine (README, "Shared memory on one host"). */
#define SHM_STAGE_SLOTS 64
#define SHM_STAGE_SLOT ((size_t)2 << 20)

struct shm_header {
    uint64_t magic;
    uint32_t size;              /* rings that follow: one per rank of the job */
    uint32_t pad0;
    uint64_t nonce;             /* random, also in the identity we send (shm_setup.c) */
    uint8_t pad[SHM_CACHE_LINE - 24];
    _Atomic uint32_t sleeping;  /* the owner may sleep: writers ring its doorbell */
};

struct tide__shm;

struct shm_peer {
    struct tide__shm *tp;
    int peer;                 /* world rank; fd < 0: not served by shm */
    int fd;                   /* the pair's TCP socket: doorbells and loss */
    const char *lost;         /* NULL while healthy; why it broke */
    char lost_buf[160];
    struct shm_ring *out;     /* our ring in the peer's segment: we write */
    struct shm_header *peer_hdr; /* the peer's header page */
    struct shm_ring *in;      /* the peer's ring in our segment: we read */
    uint8_t *stage;           /* the peer's staging area, read-only */
    uint8_t *board;           /* the peer's board area (after it), read-only */
    pid_t pid;                /* the peer's process */
    bool cma;                 /* single copy both ways (see above) */
    bool stream_out;          /* payloads go into `out` around the caches (above) */

    /* sending: sq's head is being written; a written message completes
     * at once (tide__msg_done only queues it for the engine's delivery) */
    struct tide__msgq sq;
    struct tide__msgq awaiting; /* single-copy sends the reader has not acked */
    uint64_t acks_seen;       /* of them, completed so far */
    uint8_t tx_hdr[TIDE_FRAME_HDR_SIZE + SHM_DESC_BYTES]; /* + descriptor */
    bool tx_remote;           /* the head goes as a single-copy frame */
    size_t tx_off;            /* bytes of the head's header + payload written */

    /* receiving: the frame arriving and where it goes (transports/rx.h) */
    struct tide__rx rx;
    uint8_t rx_hdr_buf[TIDE_FRAME_HDR_SIZE + SHM_DESC_BYTES];
    size_t rx_hdr_have;
    bool rx_remote;           /* the frame's payload is in the sender */
    uint64_t acked;           /* single-copy frames we read */
    bool parked;              /* the header waits for room in the pool */
    bool draining;            /* the peer is gone: read what it left, pool limit or not */
    bool busy;                /* inside shm_recv_progress (it may be re-entered) */

    /* the doorbell socket's receive */
    uint8_t bell_buf[64];
    bool bell_busy;
    struct tide__uop bell_uop;
};

struct tide__shm {
    struct tide__transport base;
    int rank, size;
    struct shm_peer *peers;   /* [size]; fd < 0 for the peers it does not serve */
    struct shm_header *hdr;   /* our segment */
    size_t seg_bytes;
    int memfd;
    int wake_fd;              /* eventfd: arm() wakes our own reactor with it */
    uint64_t wake_buf;
    bool wake_busy;
    struct tide__uop wake_uop;
    unsigned kernel_ops;      /* our reactor operations not yet completed */
    struct tide__rx_pool pool; /* payload bytes held as unexpected */
    unsigned nparked;         /* peers whose header waits for pool room */
    size_t cma_min;           /* single copy from this size; SIZE_MAX: never */
    bool cma_all;             /* for every message, not only those that may be pulled */
    uint8_t *stage;           /* our staging area (in our segment) */
    bool stage_ok;            /* every rank of this host maps every other's */
    int *host;                /* [size] each rank's host: the lowest rank on it */
    uint64_t stage_used;      /* taken slots, one bit each */
    uint8_t *board;           /* our board area (engine/board.h) */
    struct tide__msgq watches; /* posted TIDE_MSG_WATCH messages */
    bool aborting;
};

/* shm.c */
void shm_peer_lost(struct shm_peer *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Tell the peer something changed in a ring it cares about, if it sleeps. */
void shm_ring_doorbell(struct shm_peer *c);
/* The same after the caller's own seq_cst fence (one for many peers). */
void shm_ring_doorbell_fenced(struct shm_peer *c);

/* shm_send.c */
void shm_send_post(struct shm_peer *c, tide__msg *m);
/* Write what fits; complete what the reader acked.  Returns progress. */
int shm_send_progress(struct shm_peer *c);
int shm_send_withdraw(struct shm_peer *c, tide__msg *m, bool stalled);
void shm_send_fail_all(struct shm_peer *c);
/* Something waits to be written and there is room, or an ack came. */
bool shm_send_ready(struct shm_peer *c);

/* shm_recv.c */
void shm_recv_post(struct shm_peer *c, tide__msg *m);
/* Read and route what the peer wrote.  Returns progress. */
int shm_recv_progress(struct shm_peer *c);
int shm_recv_withdraw(struct shm_peer *c, tide__msg *m);
/* The peer is gone: fail what waits on it (after reading what it wrote). */
void shm_recv_lost(struct shm_peer *c);
void shm_recv_free(struct shm_peer *c);

/* shm_board.c: the board area and watches (transport.h). */
void shm_watch_post(struct tide__shm *tp, tide__msg *m);
int shm_watch_withdraw(struct tide__shm *tp, tide__msg *m);
/* Complete the watches that are ready (or wait on a lost rank): progress. */
int shm_watch_poll(struct tide__shm *tp);
/* arm(): whether a pass now would complete a watch. */
bool shm_watch_any_ready(struct tide__shm *tp);
/* Fail every watch with err: the transport aborts. */
void shm_watch_fail_all(struct tide__shm *tp, int err);
uint8_t *shm_board_at(struct tide__transport *base, int peer);
void shm_board_raise(struct tide__transport *base, const int *peers, int n);

/* shm_setup.c: find the peers on this host (same kernel, same network
 * namespace, same user, same TIDE_HOST_ID) over the bootstrapped
 * sockets, make our segment and map theirs.  Takes fds[p] of every pair
 * it will serve (setting it to -1); leaves the others to TCP.
 * required: fail (TIDE_ENOSYS) rather than leave a pair on this host to
 * TCP.  0 or a TIDE_E* with why in err. */
int shm_setup(struct tide__shm *tp, int *fds, double timeout_s, bool required, char *err,
              size_t errlen);
void shm_unmap(struct tide__shm *tp);

#endif
