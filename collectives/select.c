/* select.c - which algorithm runs a collective: chosen by group size and
 * message size, or named by TIDE_ALGO_<COLLECTIVE> (e.g.
 * TIDE_ALGO_ALLREDUCE=ring).  An algorithm that cannot serve the group
 * (recursive doubling of an all-gather over a group that is not a power
 * of two) gives way to the default, and the request reports the one that
 * ran.
 *
 * The size thresholds are where the cheaper-in-latency algorithm stops
 * winning; see docs/algorithms.md for how they were found. */
#include "collectives/board.h"
#include "collectives/coll.h"
#include "collectives/stage.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an algorithm needs of the group to run at all. */
enum need {
    ANY = 0,
    POW2,   /* a power-of-two group */
    SHARED, /* staging memory (stage.h) */
    BLOCKS, /* staging halves that hold an element of every block */
    HOSTS,  /* ranks spread evenly over hosts (engine/hosts.c) */
    BOARD,  /* boards (board.h), and a vector that fits a slot */
    STREAM, /* boards, 2 ranks and a part the stream carries (board_stream.c) */
};

struct choice {
    const char *name;
    const struct tide__algo *algo;
    enum need need;
};

#define CHOICES 7

struct family {
    uint8_t kind;
    const char *env; /* TIDE_ALGO_... */
    struct choice c[CHOICES];
};

static const struct family families[] = {
    {TIDE_KIND_ALLREDUCE, "TIDE_ALGO_ALLREDUCE",
     {{"ring", &tide__algo_ring_allreduce, ANY},
      {"recursive_doubling", &tide__algo_rd_allreduce, ANY},
      {"rabenseifner", &tide__algo_rabenseifner, ANY},
      {"shm", &tide__algo_stage_allreduce, SHARED},
      {"hier", &tide__algo_hier_allreduce, HOSTS},
      {"board", &tide__algo_board_allreduce, BOARD},
      {"board_rsag", &tide__algo_board_rsag_allreduce, BOARD}}},
    {TIDE_KIND_BROADCAST, "TIDE_ALGO_BROADCAST",
     {{"binomial", &tide__algo_binomial_bcast, ANY},
      {"chain", &tide__algo_chain_bcast, ANY},
      {"shm", &tide__algo_stage_bcast, SHARED},
      {"board", &tide__algo_board_bcast, BOARD},
      {"stream", &tide__algo_board_stream, STREAM}}},
    {TIDE_KIND_REDUCE, "TIDE_ALGO_REDUCE",
     {{"binomial", &tide__algo_binomial_reduce, ANY},
      {"board", &tide__algo_board_reduce, BOARD},
      {"stream", &tide__algo_board_stream_reduce, STREAM}}},
    {TIDE_KIND_ALLGATHER, "TIDE_ALGO_ALLGATHER",
     {{"ring", &tide__algo_ring_allgather, ANY},
      {"bruck", &tide__algo_bruck_allgather, ANY},
      {"recursive_doubling", &tide__algo_rd_allgather, POW2},
      {"shm", &tide__algo_stage_allgather, SHARED},
      {"board", &tide__algo_board_allgather, BOARD}}},
    {TIDE_KIND_ALLGATHERV, "TIDE_ALGO_ALLGATHERV",
     {{"ring", &tide__algo_ring_allgather, ANY}}},
    {TIDE_KIND_REDUCE_SCATTER, "TIDE_ALGO_REDUCE_SCATTER",
     {{"ring", &tide__algo_ring_reduce_scatter, ANY},
      {"recursive_halving", &tide__algo_rh_reduce_scatter, ANY},
      {"shm", &tide__algo_stage_reduce_scatter, BLOCKS},
      {"board", &tide__algo_board_reduce_scatter, BOARD}}},
    {TIDE_KIND_REDUCE_SCATTERV, "TIDE_ALGO_REDUCE_SCATTERV",
     {{"ring", &tide__algo_ring_reduce_scatter, ANY},
      {"recursive_halving", &tide__algo_rh_reduce_scatter, ANY}}},
    {TIDE_KIND_GATHER, "TIDE_ALGO_GATHER",
     {{"binomial", &tide__algo_binomial_gather, ANY},
      {"board", &tide__algo_board_gather, BOARD},
      {"stream", &tide__algo_board_stream_gather, STREAM}}},
    {TIDE_KIND_SCATTER, "TIDE_ALGO_SCATTER",
     {{"binomial", &tide__algo_binomial_scatter, ANY},
      {"board", &tide__algo_board_scatter, BOARD},
      {"stream", &tide__algo_board_stream_scatter, STREAM}}},
    {TIDE_KIND_ALLTOALL, "TIDE_ALGO_ALLTOALL",
     {{"pairwise", &tide__algo_pairwise_alltoall, ANY},
      {"board", &tide__algo_board_alltoall, BOARD}}},
    {TIDE_KIND_BARRIER, "TIDE_ALGO_BARRIER",
     {{"dissemination", &tide__algo_dissemination_barrier, ANY},
      {"board", &tide__algo_board_barrier, BOARD}}},
};

/* A ring pays a round per rank (two for an all-reduce) where the
 * log-round algorithms pay log2 n; it wins only once the bytes dwarf
 * that latency.  tide-sim (alpha 5 us, 12.5 GB/s per port) puts the
 * crossover at about 256 KiB per rank of the group for all-reduce,
 * all-gather and reduce-scatter alike, from 4 to 4096 ranks; see
 * docs/algorithms.md for the sweeps. */
static bool ring_pays(int n, size_t bytes)
{
    return bytes >= (size_t)n * (256u << 10);
}

/* Where the ranks share staging memory (stage.h), reading each other's
 * data where it lies beats sending it from these sizes on.  Measured
 * here (2026-11-25, 2 ranks bound to the 2 cores, 4 ranks sharing them;
 * interleaved runs against the algorithms below): below them the
 * staged algorithms' two or three exchanges of notes, and a round that
 * copies in and then out where a ring of messages streams, cost more.
 * With more ranks the others forward the bytes more often, so staging
 * pays sooner: 4-rank allreduce 256 KiB 93-97 against 231-249 us.  At
 * 2 ranks: allreduce 512 KiB 69-75 against 83-95 us, all-gather even at
 * 512 KiB and ahead from 1 MiB.  Since a 2-rank all-gather's blocks may
 * be pulled in one copy (coll.c, pullable), recursive doubling takes 512
 * KiB in 23-24 us against the staged 52-62 (2026-11-29, two rounds;
 * Open MPI vader 32-34): staged from 1 MiB, where recursive doubling
 * (46) leads only with single copies (without, 97 against 73-76).
 * Broadcast on 2 ranks from 2 MiB: since
 * a broadcast's messages may be pulled in one copy (coll.c, pullable),
 * the tree takes 512 KiB in 30-32 us against the staged 66-68 and the
 * chain 1 MiB in 73-77 against 114-117; from 2 MiB staging is ahead
 * again (92-93 against 136-140 us; 4 MiB 171-183 against 273-290;
 * three interleaved rounds, 2026-11-25).  But on the 16-core host
 * (2026-11-26, two rounds each) the one copy out of the root's memory
 * is slow from 1 MiB: the tree took 219-228 us for 1 MiB, 1232-1254
 * for 4 MiB, where staging took 92-101 and 452-519 (Open MPI's vader
 * 113-122 and 464-484); at 256 KiB they tie (31-34).  Here today the
 * tree still leads (1 MiB 56-59 against 97-103).  Users run on the
 * many-core hosts: staging from 1 MiB.  Reduce-scatter (2026-11-26,
 * here, against recursive halving): 2 ranks 256 KiB 35 against 45 us,
 * 1 MiB 172 against the ring's 244; 4 ranks 256 KiB 223 against 278,
 * 1 MiB 808 against 1033; below, the boards take it (to 64 KiB). */
static size_t stage_from(uint8_t kind, int n)
{
    switch (kind) {
    case TIDE_KIND_ALLREDUCE:
        return n == 2 ? (size_t)512 << 10 : (size_t)128 << 10;
    case TIDE_KIND_BROADCAST:
        return n == 2 ? (size_t)1 << 20 : (size_t)128 << 10;
    case TIDE_KIND_ALLGATHER:
        return n == 2 ? (size_t)1 << 20 : (size_t)256 << 10;
    case TIDE_KIND_REDUCE_SCATTER:
        return n == 2 ? (size_t)256 << 10 : (size_t)128 << 10;
    default:
        return SIZE_MAX;
    }
}

/* ...and below these.  A 2-rank all-gather from 2 MiB goes back to the
 * ring: staging copies whole halves of a slot (1 MiB) in and then out,
 * where the ring's pieces are copied in and out while still in cache.
 * Measured on an AMD EPYC 2-core VM (2026-11-28, five interleaved rounds,
 * medians, us): 2 MiB 80 against 89 staged, 4 MiB 166 against 199,
 * 8 MiB 433 against 549, 16 MiB 1374 against 1581, 32 MiB 3675 against
 * 3846; 512 KiB and 1 MiB within 5 %, and Open MPI's vader between the
 * two (4 MiB 251, 8 MiB 649).  In that VM's slower hours, when every
 * copy of a whole MiB runs at half speed (the staged all-reduce and
 * broadcast too), 2.0-2.2x: 4 MiB 204-225 against 451-462 (three
 * rounds).  On the 16-core host the staged 4 MiB
 * all-gather was 0.91x of vader's speed (README, "On a many-core
 * host"). */
static size_t stage_until(uint8_t kind, int n)
{
    return kind == TIDE_KIND_ALLGATHER && n == 2 ? (size_t)2 << 20 : SIZE_MAX;
}

static const struct tide__algo *staged(uint8_t kind, const tide_comm *comm, size_t bytes)
{
    int n = comm->size;
    if (bytes < stage_from(kind, n) || bytes >= stage_until(kind, n))
        return NULL;
    switch (kind) {
    case TIDE_KIND_ALLREDUCE:
        return &tide__algo_stage_allreduce;
    case TIDE_KIND_BROADCAST:
        return &tide__algo_stage_bcast;
    case TIDE_KIND_REDUCE_SCATTER:
        /* Where the ring pays it led Open MPI by 1.4-6.4x on the 16-core
         * host at 8 and 16 ranks, where staging was not tried against it:
         * the ring keeps those.  Up to 4 ranks staging leads it at every
         * size: AMD EPYC 2-core VM (2026-11-28, five interleaved rounds,
         * medians, out of place / in place, us), 2 ranks 2 MiB 137 / 171
         * against 179 / 213, 8 MiB 559 / 678 against 695 / 866, 32 MiB
         * 3103 / 4485 against 4124 / 5094; 4 ranks sharing the 2 cores
         * 1 MiB 0.29 against 0.9-1.5 ms, 16 MiB 4.5 against 34-50. */
        if ((n > 4 && ring_pays(n, bytes)) || !tide__stage_fits_blocks(comm))
            return NULL;
        return &tide__algo_stage_reduce_scatter;
    default:
        return &tide__algo_stage_allgather;
    }
}

/* Whether a collective of kind moving `bytes` may take the stream
 * (board_stream.c): boards, 2 ranks, and a part the stream carries: the
 * sender's vector or block, up to 256 bytes, an entry's slot (a
 * scatter's and a gather's `bytes` are both blocks, of which one
 * streams; a reduce's or gather's root reads its own from its buffer).
 * The figures below are from when a part took an entry per 8 bytes (8
 * bytes in 16, so a larger part moved more lines than the boards'
 * header crossing cost); a slot has made the stream cheaper since
 * (board_stream.c).  2 ranks, interleaved runs
 * (2026-11-29): broadcast 96 and 128 B 0.28-0.31 us on the stream
 * against 0.38-0.44 on boards, 256 B 0.39-0.42 against 0.37-0.40; a
 * reduce's root, which gathers the sender's entries before it reduces,
 * gained nothing from 128 bytes.  Since each rank claims its next ring
 * lines (board_stream.c, claim_next), every kind streams parts of up to
 * 256 bytes.  Three interleaved rounds, boards against the stream
 * (vader): broadcast 192 B 0.45-0.46 against 0.31-0.36 (0.28-0.30), 256
 * B 0.46-0.47 against 0.31-0.34 (0.29-0.32); scatter 512 B 0.46-0.48
 * against 0.30-0.32 (0.30-0.31); gather 512 B 0.50-0.52 against
 * 0.35-0.37 (0.27-0.28); reduce 96 B 0.39-0.43 against 0.28-0.29, 128 B
 * 0.43-0.53 against 0.31-0.34 (0.25-0.26), 256 B 0.53-0.55 against
 * 0.35-0.36 (0.28-0.45). */
static bool streams(uint8_t kind, const tide_comm *comm, size_t bytes)
{
    size_t most = kind == TIDE_KIND_BROADCAST || kind == TIDE_KIND_REDUCE ? STREAM_MAX_BYTES
                  : kind == TIDE_KIND_SCATTER || kind == TIDE_KIND_GATHER
                      ? 2 * STREAM_MAX_BYTES
                      : 0;
    return comm->size == 2 && bytes <= most && tide__board_fits(kind, comm, bytes);
}

/* Boards (board.h) for small vectors on one host.  Measured here
 * (2026-11-26, tide-perf, 2 ranks on the 2 cores and 4 sharing them,
 * against the message algorithms in the same runs):
 *   all-reduce   2 ranks 8 B 1.2-1.4 us against 1.9, 8 KiB 4.1-4.9
 *                against 4.3, 32 KiB 11.4-11.9 against 9.7-11; 4 ranks
 *                8 B 5.2 against 9.3, 4 KiB 7.7 against 17.6, 32 KiB
 *                one-shot 30.4, two-phase 21.6, recursive doubling 38.5.
 *                One-shot reads (n - 1) N bytes, two-phase about 2N and
 *                waits twice: one-shot while (n - 2) N <= 32 KiB (the
 *                cost model of docs/small-messages.md), two-phase above;
 *   all-gather   2 ranks 8 B 1.1 against 2.0, 32 KiB 5.7 against 6.9;
 *                4 ranks 4 KiB 5.6 against 17.8.  On 2 ranks from 64
 *                KiB the messages won until a block of 32 KiB went into
 *                its slot around the caches (board.c, around_caches):
 *                2026-11-27, 64 KiB 8.2-8.3 us (medians) on boards,
 *                7.0-7.2 by recursive doubling or the ring; 2026-11-29,
 *                five interleaved rounds, medians, 64 KiB 5.74 on boards
 *                against 6.98 by recursive doubling (Open MPI vader
 *                6.29), 128 KiB 9.7-11.0 against 13.4-14.4 (vader
 *                10.5-12.4): boards to the slot's size;
 *   reduce-scatter  2 ranks 8 B 1.1 against 1.9; 4 ranks 4 KiB 6.9
 *                against 24.9, 32 KiB 14.7 against 28.4;
 *   broadcast    2 ranks 8 B 1.2-1.4 against 1.2 (the root waited for
 *                every reader's header then; the tree's root waits for
 *                nothing), 4 KiB 1.8 against 3.5, 32 KiB 4.7 against
 *                3.6; 4 ranks 8 B 5.2-6.5 against 3.6-4.4, 4 KiB 5.9
 *                against 10.1, 32 KiB 12.5 against 27.0.  So from 1 KiB
 *                (and at every size from 8 ranks, where a tree has three
 *                rounds or more); on 2 ranks to 16 KiB.
 * On the 16-core host (2026-11-26, tools/device_compare.sh, best of two
 * rounds, against TIDE_BOARDS=0) the boards won at 8 and 16 ranks at
 * every size from 8 B to 32 KiB: allreduce 16 ranks 8 B 2.9 against
 * 7.6 us, 4 KiB 6.4 against 15.7, 32 KiB 22 against 48; all-gather 8
 * ranks 4 KiB 3.0 against 9.1; broadcast 8 ranks 8-512 B 1.7 against
 * 2.1-3.0 (a tree's three rounds).  There again (2026-11-27), with
 * blocking calls ending on the caller's thread (board.h, the direct
 * path), the 2-rank broadcast below 1 KiB took 0.59-0.80 us on boards
 * against 0.71-1.26 for the tree (4 KiB 1.2-1.3 against 3.0-3.1): boards
 * at every size on 2 ranks now too.  (Posted and waited, on the 2-core
 * machine, the tree kept a lead of 0.1-0.5 us at 8 B there.)  And to
 * the slot's 64 KiB: the tree's one message, a single copy, was thought
 * to win there, but took 6.9-7.4 us against the board's 3.1-3.2
 * (2026-11-27, an AMD EPYC 2-core machine, 6 interleaved runs).  (On
 * that machine the 2-rank all-gather of 64 KiB took 3.9-4.2 us on
 * boards against 4.5-5.1 by messages, the reverse of the figures above
 * from another 2-core machine; boards since their streaming stores,
 * above.) */
static const struct tide__algo *on_board(uint8_t kind, const tide_comm *comm, size_t bytes)
{
    int n = comm->size;
    if (!tide__board_fits(kind, comm, bytes))
        return NULL;
    switch (kind) {
    case TIDE_KIND_ALLREDUCE:
        if (n == 2)
            return bytes <= (16u << 10) ? &tide__algo_board_allreduce : NULL;
        if (bytes * (size_t)(n - 2) <= (32u << 10))
            return &tide__algo_board_allreduce;
        return &tide__algo_board_rsag_allreduce;
    case TIDE_KIND_ALLGATHER:
        return bytes < stage_from(kind, n) ? &tide__algo_board_allgather : NULL;
    case TIDE_KIND_REDUCE_SCATTER:
        return &tide__algo_board_reduce_scatter;
    case TIDE_KIND_BROADCAST:
        if (streams(kind, comm, bytes))
            return &tide__algo_board_stream;
        return bytes >= (1u << 10) || n == 2 || n >= 8 ? &tide__algo_board_bcast : NULL;
    case TIDE_KIND_ALLTOALL:
        /* Each rank copies its block out of every peer's slot, against
         * the pairwise exchange's n - 1 rounds of messages.  2 ranks
         * (2026-11-28, µs): 8 B 0.49 against 1.55, 2 KiB 0.90 against
         * 1.74, 64 KiB 4.30 against 4.74; 4 sharing the 2 cores 1 KiB
         * 12.6 against 33, 64 KiB 18.8 against 38.  Open MPI's vader
         * took 0.52, 1.21 and 8.34 on 2 ranks. */
        return &tide__algo_board_alltoall;
    case TIDE_KIND_REDUCE:
        /* One publication and one read against a tree's messages.  2
         * ranks (2026-11-28, us, board against binomial): reduce 8 B
         * 0.41 against 1.15, 4 KiB 0.86 against 1.53, 64 KiB 7.8
         * against 12.3; gather 8 B 0.34 against 0.76, 32 KiB 1.43
         * against 1.89; scatter 8 B 0.36 against 0.81, 64 KiB 2.85
         * against 2.68.  Open MPI's vader: reduce 0.15, 5.41 and 8.03 at
         * 8 B, 4 and 32 KiB, gather 0.12 / 1.38 / 6.80, scatter 0.21 /
         * 1.87 / 6.82.  But 4 ranks sharing the 2 cores went the other
         * way below 64 KiB (reduce 8 KiB 11.6 against 4.4, gather 1 KiB
         * 11.6 against 1.75): a tree's leaves send and go on, where the
         * board's gate holds every rank to its peers' last collective.
         * So on 2 ranks only, until a many-core host measures 8 and 16
         * (tools/device_compare.sh); gather and scatter alike. */
        if (streams(kind, comm, bytes))
            return &tide__algo_board_stream_reduce;
        return n == 2 ? &tide__algo_board_reduce : NULL;
    case TIDE_KIND_GATHER:
        if (streams(kind, comm, bytes))
            return &tide__algo_board_stream_gather;
        return n == 2 ? &tide__algo_board_gather : NULL;
    case TIDE_KIND_SCATTER:
        if (streams(kind, comm, bytes))
            return &tide__algo_board_stream_scatter;
        return n == 2 ? &tide__algo_board_scatter : NULL;
    case TIDE_KIND_BARRIER:
        /* A flag and n - 1 loads against log2 n rounds of frames: 2
         * ranks 0.44-0.50 us against 1.39-1.62, 4 sharing the 2 cores
         * 12-14 against 21-25 (2026-11-28). */
        return &tide__algo_board_barrier;
    default:
        return NULL;
    }
}

/* Boards are chosen by default; TIDE_BOARDS=0 turns them off (forcing
 * one with TIDE_ALGO_<COLLECTIVE>=board still works), to compare or to
 * rule them out.  They were off by default for a day: a rank whose
 * peers had read its part, finished and exited before it looked failed
 * its board collective with TIDE_EPEER (shm_peer_lost failed every watch
 * on a lost rank without asking whether its flags were up), 2-3 % of
 * tide-perf's 4-rank checks under load. */
#define FAMILIES (sizeof families / sizeof families[0])

static const char *algo_env(size_t family, const char *name);

static bool boards_by_default(void)
{
    const char *v = algo_env(FAMILIES, "TIDE_BOARDS");
    return !v || strcmp(v, "0") != 0;
}

/* Across hosts, the hierarchical all-reduce crosses the network once
 * per slice, in log2 H rounds or fewer, where recursive doubling and
 * Rabenseifner cross it in up to log2 n rounds: from 16 KiB to 64 KiB
 * it took 0.60-0.95 of the best flat time in tide-sim sweeps (2 to 32
 * hosts of 2, 4 and 8 ranks, each host's 12.5 GB/s port shared by its
 * ranks), and it ties Rabenseifner from 256 KiB to 1 MiB.  On two hosts
 * it sends half what a ring sends through each host's port and ties or
 * beats every flat one at every larger size (the ring: 1.30x slower at
 * 2 x 8 ranks, 4-64 MiB).  On more hosts the ring sends about as much
 * and overlaps its passes inside and across hosts where the parts run
 * one after the other: from 4 MiB the ring was up to 19 % faster, so
 * there the flat choice stands.  docs/algorithms.md, "Hierarchical
 * all-reduce", has the sweeps. */
#define HIER_FROM ((size_t)16 << 10)
#define HIER_FLAT_FROM ((size_t)4 << 20) /* on more than two hosts */

static bool hier_pays(const tide_comm *comm, size_t bytes)
{
    return bytes >= HIER_FROM && (comm->nhosts == 2 || bytes < HIER_FLAT_FROM);
}

/* The default: small vectors want few rounds, large ones few bytes per
 * rank. */
static const struct tide__algo *by_size(uint8_t kind, const tide_comm *comm, size_t bytes)
{
    int n = comm->size;
    const struct tide__algo *fast = comm->shared ? staged(kind, comm, bytes) : NULL;
    if (!fast && comm->shared && boards_by_default())
        fast = on_board(kind, comm, bytes);
    if (fast)
        return fast;
    if (kind == TIDE_KIND_ALLREDUCE && tide__comm_hierarchical(comm) && hier_pays(comm, bytes))
        return &tide__algo_hier_allreduce;
    switch (kind) {
    case TIDE_KIND_ALLREDUCE:
        /* Measured here at 2 and 4 ranks (against Open MPI, README):
         * recursive doubling's few rounds win up to 64 KiB,
         * Rabenseifner's halves up to 1 MiB, and above that the ring,
         * whose chunks overlap the reduction with the transfer, once it
         * pays in larger groups too. */
        if (bytes <= (64u << 10))
            return &tide__algo_rd_allreduce;
        if (bytes <= (1u << 20) || !ring_pays(n, bytes))
            return &tide__algo_rabenseifner;
        return &tide__algo_ring_allreduce;
    case TIDE_KIND_BROADCAST:
        /* Two ranks: the chain is the root's one send cut into 256 KiB
         * messages with 2 MiB in flight, and above 512 KiB that beat one
         * whole message here (interleaved runs, 2026-11-21: 1 MiB
         * 196 -> 177 us, 4 MiB 853 -> 732, 16 MiB 4016 -> 3180; 2 MiB
         * within noise; below 512 KiB the whole message wins).  Not
         * on one host, where the whole message is one copy out of the
         * root's memory (TIDE_SHM_CMA): there the chain took 603-619 us
         * for 1 MiB on the 16-core host against Open MPI's 102, and
         * here 55 against the whole message's 51 (4 MiB: 505 against
         * 325), up to where the staged broadcast takes over (1 MiB). */
        if (bytes <= (64u << 10) || (n <= 2 && (bytes <= (512u << 10) || comm->shared)))
            return &tide__algo_binomial_bcast;
        return &tide__algo_chain_bcast;
    case TIDE_KIND_REDUCE:
        return &tide__algo_binomial_reduce;
    case TIDE_KIND_ALLGATHER:
        /* Two ranks on one host below staging: recursive doubling's one
         * exchange of whole blocks, each pulled in one copy (coll.c,
         * pullable), where the ring's pieces go through the rings
         * (2026-11-29, two rounds, 512 KiB: 21-24 us against 55-71). */
        if (ring_pays(n, bytes) && !(n == 2 && comm->shared && bytes < stage_from(kind, n)))
            return &tide__algo_ring_allgather;
        return tide__is_pow2(n) ? &tide__algo_rd_allgather : &tide__algo_bruck_allgather;
    case TIDE_KIND_ALLGATHERV:
        return &tide__algo_ring_allgather;
    case TIDE_KIND_REDUCE_SCATTER:
    case TIDE_KIND_REDUCE_SCATTERV:
        return ring_pays(n, bytes) ? &tide__algo_ring_reduce_scatter
                                   : &tide__algo_rh_reduce_scatter;
    case TIDE_KIND_GATHER:
        return &tide__algo_binomial_gather;
    case TIDE_KIND_SCATTER:
        return &tide__algo_binomial_scatter;
    case TIDE_KIND_BARRIER:
        return &tide__algo_dissemination_barrier;
    default:
        return &tide__algo_pairwise_alltoall;
    }
}

/* getenv(f->env), remembered per thread and family while the environment
 * does not change.  A collective is chosen per call and TIDE_ALGO_* may
 * be set between calls (tests do), but scanning the environment was a
 * sixth of a small collective's instructions.  The environment counts as
 * unchanged while its array is where it was, with as many entries, and
 * the same last entry, and the entry we found (if any) is the same
 * string: glibc's setenv replaces an entry's pointer and appends a new
 * one, unsetenv moves the ones after it down.  (A putenv string edited in
 * place goes unnoticed.) */
extern char **environ;

struct env_cache {
    char **env;         /* environ when read */
    size_t count;       /* its entries then */
    const char *last;   /* its last entry then (a new variable goes last) */
    size_t at;          /* where entry was */
    const char *entry;  /* "NAME=value" found, or NULL */
};

/* Whether the entry c found (if any) is still the same string, in an
 * environment array that env_unchanged found unchanged. */
static bool entry_unchanged(const struct env_cache *c)
{
    return !c->entry || environ[c->at] == c->entry;
}

static bool env_unchanged(const struct env_cache *c)
{
    char **env = environ;
    if (!c->env || env != c->env || env[c->count]) /* moved, or an entry more */
        return false;
    if (c->count && env[c->count - 1] != c->last) /* one fewer, or one gone and one added */
        return false;
    return entry_unchanged(c);
}

static _Thread_local struct env_cache env_caches[FAMILIES + 1]; /* + TIDE_BOARDS */

static const char *algo_env(size_t family, const char *name)
{
    struct env_cache *c = &env_caches[family];
    if (env_unchanged(c))
        return c->entry ? c->entry + strlen(name) + 1 : NULL;
    const char *value = getenv(name);
    *c = (struct env_cache){.env = environ};
    for (; environ && environ[c->count]; c->count++)
        if (value && environ[c->count] + strlen(name) + 1 == value)
            c->entry = environ[c->at = c->count];
    c->last = c->count ? environ[c->count - 1] : NULL;
    return value;
}

/* kind's entry in families, or FAMILIES if it has none. */
static size_t family_of(uint8_t kind)
{
    for (size_t i = 0; i < FAMILIES; i++)
        if (families[i].kind == kind)
            return i;
    return FAMILIES;
}

const struct tide__algo *tide__select(uint8_t kind, const tide_comm *comm, size_t bytes, char *why,
                                      size_t len)
{
    int n = comm->size;
    size_t fi = family_of(kind);
    const struct family *f = fi < FAMILIES ? &families[fi] : NULL;
    const char *want = f ? algo_env(fi, f->env) : NULL;
    if (!want || !*want)
        return by_size(kind, comm, bytes);

    for (int i = 0; i < CHOICES && f->c[i].name; i++) {
        const struct choice *c = &f->c[i];
        if (strcmp(want, c->name) != 0)
            continue;
        if ((c->need == POW2 && !tide__is_pow2(n)) || (c->need == SHARED && !comm->shared) ||
            (c->need == BLOCKS && !tide__stage_fits_blocks(comm)) ||
            (c->need == HOSTS && !tide__comm_hierarchical(comm)) ||
            (c->need == BOARD && !tide__board_fits(kind, comm, bytes)) ||
            (c->need == STREAM && !streams(kind, comm, bytes)))
            return by_size(kind, comm, bytes);
        return c->algo;
    }
    int used = snprintf(why, len, "%s=%s names no algorithm; choose one of:", f->env, want);
    for (int i = 0; i < CHOICES && f->c[i].name && used > 0 && (size_t)used < len; i++)
        used += snprintf(why + used, len - (size_t)used, " %s", f->c[i].name);
    return NULL;
}

/* The last choice per kind for a communicator's calls.  The choice is
 * a function of the kind, the bytes, the communicator (its size, hosts
 * and shared memory, fixed at its making) and two variables: TIDE_ALGO_*
 * of the kind's family and TIDE_BOARDS.  Choosing again was 9 % of a
 * 2-rank 8 B all-gather's samples (the environment's thread-local
 * caches, the size rules, the board checks); a loop of small collectives
 * asks the same each call.  Remembered, 2 ranks, 8 B, 10 interleaved
 * runs: all-gather median 0.62 us against 0.70, all-reduce 0.56 against
 * 0.645. */
#define MEMO_KINDS (TIDE_KIND_ALLTOALL + 1) /* kinds.h's last; a later one is not kept */

struct tide__select_memo {
    struct memo_entry {
        const struct tide__algo *algo; /* NULL: none yet */
        size_t bytes;
        /* The environment then: both caches saw the same array
         * (tide__select_call), so that of the second goes unchecked. */
        struct env_cache family, boards;
    } e[MEMO_KINDS];
};

const struct tide__algo *tide__select_call(uint8_t kind, tide_comm *comm, size_t bytes, char *why,
                                           size_t len)
{
    struct tide__select_memo *m = comm->select_memo;
    struct memo_entry *e = m && kind < MEMO_KINDS ? &m->e[kind] : NULL;
    if (e && e->algo && e->bytes == bytes && env_unchanged(&e->family) &&
        entry_unchanged(&e->boards))
        return e->algo;
    const struct tide__algo *algo = tide__select(kind, comm, bytes, why, len);
    size_t fi = family_of(kind);
    if (!algo || kind >= MEMO_KINDS || fi == FAMILIES)
        return algo;
    if (!m && !(m = comm->select_memo = calloc(1, sizeof *m)))
        return algo; /* chosen anew next time */
    /* Both caches as this choice saw them: each either still matches
     * this array or is made anew from it, so they hold the same one. */
    algo_env(fi, families[fi].env);
    algo_env(FAMILIES, "TIDE_BOARDS");
    m->e[kind] = (struct memo_entry){algo, bytes, env_caches[fi], env_caches[FAMILIES]};
    return algo;
}

/* Ids are positions in one list of every algorithm; 0 is "none". */
static const struct tide__algo *const all_algos[] = {
    &tide__algo_local,           &tide__algo_ring_allreduce,    &tide__algo_ring_reduce_scatter,
    &tide__algo_ring_allgather,  &tide__algo_rd_allreduce,      &tide__algo_rabenseifner,
    &tide__algo_rh_reduce_scatter, &tide__algo_rd_allgather,    &tide__algo_bruck_allgather,
    &tide__algo_binomial_bcast,  &tide__algo_chain_bcast,       &tide__algo_binomial_reduce,
    &tide__algo_binomial_gather, &tide__algo_binomial_scatter,  &tide__algo_pairwise_alltoall,
    &tide__algo_dissemination_barrier, &tide__algo_stage_allreduce, &tide__algo_stage_allgather,
    &tide__algo_stage_bcast,     &tide__algo_hier_allreduce,    &tide__algo_board_allreduce,
    &tide__algo_board_rsag_allreduce, &tide__algo_board_allgather, &tide__algo_board_reduce_scatter,
    &tide__algo_board_bcast,     &tide__algo_stage_reduce_scatter, &tide__algo_board_barrier,
    &tide__algo_board_alltoall,  &tide__algo_board_reduce,      &tide__algo_board_gather,
    &tide__algo_board_scatter,   &tide__algo_board_stream,      &tide__algo_board_stream_reduce,
    &tide__algo_board_stream_gather, &tide__algo_board_stream_scatter,
};

uint8_t tide__algo_id(const struct tide__algo *algo)
{
    /* A loop of small collectives asks for the same one every call.  One
     * byte every thread shares, checked against the list, rather than a
     * thread-local pair: in a shared library each thread-local access is
     * a call (__tls_get_addr), and this is on every call's path. */
    static _Atomic uint8_t last;
    uint8_t id = atomic_load_explicit(&last, memory_order_relaxed);
    if (id && all_algos[id - 1] == algo)
        return id;
    for (size_t i = 0; i < sizeof all_algos / sizeof all_algos[0]; i++) {
        if (all_algos[i] == algo) {
            id = (uint8_t)(i + 1);
            atomic_store_explicit(&last, id, memory_order_relaxed);
            return id;
        }
    }
    return 0;
}

const char *tide__algo_name_of(uint8_t id)
{
    if (id == 0 || id > sizeof all_algos / sizeof all_algos[0])
        return "?";
    return all_algos[id - 1]->name;
}
