/* pool.c - see pool.h. */
#include "fsdp/pool.h"

#include <stdlib.h>
#include <string.h>

size_t tide__fsdp_pool_capacity(size_t bytes)
{
    size_t granule = 64;
    while (granule * 2 <= bytes / 32)
        granule *= 2;
    return (bytes + granule - 1) / granule * granule;
}

/* Take slot i out of the pool (order kept) and return its buffer. */
static void *remove_at(struct tide__fsdp_pool *p, int i)
{
    void *buf = p->buf[i];
    p->bytes -= p->cap[i];
    p->n--;
    memmove(p->buf + i, p->buf + i + 1, (size_t)(p->n - i) * sizeof p->buf[0]);
    memmove(p->cap + i, p->cap + i + 1, (size_t)(p->n - i) * sizeof p->cap[0]);
    return buf;
}

static void evict_oldest(struct tide__fsdp_pool *p)
{
    free(remove_at(p, 0));
}

/* Evict until the pool plus `extra` bytes fit in room. */
static void shrink_to(struct tide__fsdp_pool *p, size_t extra, size_t room)
{
    while (p->n > 0 && (extra > room || p->bytes > room - extra))
        evict_oldest(p);
}

void *tide__fsdp_pool_take(struct tide__fsdp_pool *p, size_t bytes, size_t room)
{
    size_t cap = tide__fsdp_pool_capacity(bytes);
    for (int i = p->n - 1; i >= 0; i--) /* newest first: its pages are warmest */
        if (p->cap[i] == cap)
            return remove_at(p, i);
    shrink_to(p, cap, room);
    return malloc(cap);
}

void tide__fsdp_pool_give(struct tide__fsdp_pool *p, void *buf, size_t bytes, size_t room)
{
    size_t cap = tide__fsdp_pool_capacity(bytes);
    if (buf == NULL)
        return;
    if (cap > room) {
        free(buf);
        return;
    }
    if (p->n == TIDE__FSDP_POOL_SLOTS)
        evict_oldest(p);
    shrink_to(p, cap, room);
    p->buf[p->n] = buf;
    p->cap[p->n++] = cap;
    p->bytes += cap;
}

void tide__fsdp_pool_drain(struct tide__fsdp_pool *p)
{
    while (p->n > 0)
        evict_oldest(p);
}
