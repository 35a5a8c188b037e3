/* shard.c - padding, distinct counts and the hybrid layout (see shard.h). */
#include "fsdp/shard.h"

size_t tide__fsdp_shard_count(size_t numel, int group)
{
    size_t g = group < 1 ? 1 : (size_t)group;
    return numel / g + (numel % g != 0);
}

static int is_taken(size_t c, const size_t *taken, int ntaken)
{
    for (int i = 0; i < ntaken; i++)
        if (taken[i] == c)
            return 1;
    return 0;
}

/* Quadratic in the number of units, which is tens to hundreds, once at
 * registration. */
size_t tide__fsdp_distinct_count(size_t base, const size_t *taken, int ntaken)
{
    size_t c = base;
    while (is_taken(c, taken, ntaken))
        c++;
    return c;
}

int tide__fsdp_hybrid_layout(int rank, int size, int group, struct tide__fsdp_layout *out)
{
    if (group < 1 || size < 1 || size % group != 0 || rank < 0 || rank >= size)
        return -1;
    out->group_color = rank / group;
    out->replica_color = rank % group;
    out->groups = size / group;
    return 0;
}

size_t tide__fsdp_shard_real(size_t numel, size_t shard, int r)
{
    size_t start = (size_t)r * shard;
    if (start >= numel)
        return 0;
    return numel - start < shard ? numel - start : shard;
}
