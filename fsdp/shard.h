/* shard.h - the arithmetic of sharding, as pure functions: how a unit's
 * flat buffer is padded and cut into per-rank shards, how counts are made
 * distinct between units, and how HYBRID_SHARD lays ranks out in groups.
 * No communicator, no allocation: tests/test_fsdp_shard.c checks them. */
#ifndef TIDE_FSDP_SHARD_H
#define TIDE_FSDP_SHARD_H

#include <stddef.h>

/* Elements per rank when numel elements are cut into group shards:
 * ceil(numel / group), so the padding (shard * group - numel) is less
 * than group.  0 when numel is 0; group must be >= 1. */
size_t tide__fsdp_shard_count(size_t numel, int group);

/*
 * The smallest count >= base that is not in taken[0..ntaken-1].  Units
 * (and buckets) are padded to distinct counts so that ranks calling their
 * collectives in different orders disagree on a count, which the
 * engine's signature check turns into TIDE_EMISMATCH.
 */
size_t tide__fsdp_distinct_count(size_t base, const size_t *taken, int ntaken);

/* Where rank sits in HYBRID_SHARD with groups of `group` contiguous
 * ranks: group number (color of the shard group), position inside it
 * (color of the replica group across groups). */
struct tide__fsdp_layout {
    int group_color;   /* rank / group: which shard group */
    int replica_color; /* rank % group: which replica set */
    int groups;        /* size / group */
};

/* 0, or -1 when group < 1 or size is not a multiple of group. */
int tide__fsdp_hybrid_layout(int rank, int size, int group, struct tide__fsdp_layout *out);

/*
 * Which part of a unit's real elements [0, numel) falls in shard r of
 * `shard` elements: it starts at r * shard; *real is how many of its
 * elements are real (the rest is zero padding), possibly 0.
 */
size_t tide__fsdp_shard_real(size_t numel, size_t shard, int r);

#endif
