/* timer_heap.c - see timer_heap.h. */
#include "engine/timer_heap.h"
#include "tide.h"

#include <stdbool.h>
#include <stdlib.h>

void tide__timer_heap_init(struct tide__timer_heap *h)
{
    h->items = NULL;
    h->len = h->cap = 0;
    h->next_order = 0;
}

void tide__timer_heap_free(struct tide__timer_heap *h)
{
    for (size_t i = 0; i < h->len; i++)
        h->items[i]->slot = SIZE_MAX;
    free(h->items);
    tide__timer_heap_init(h);
}

void tide__timer_init(struct tide__timer *t, void (*fire)(struct tide__timer *t))
{
    t->fire = fire;
    t->deadline_ns = 0;
    t->order = 0;
    t->slot = SIZE_MAX;
}

static bool earlier(const struct tide__timer *a, const struct tide__timer *b)
{
    if (a->deadline_ns != b->deadline_ns)
        return a->deadline_ns < b->deadline_ns;
    return a->order < b->order;
}

static void place(struct tide__timer_heap *h, size_t i, struct tide__timer *t)
{
    h->items[i] = t;
    t->slot = i;
}

static void sift_up(struct tide__timer_heap *h, size_t i)
{
    struct tide__timer *t = h->items[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!earlier(t, h->items[parent]))
            break;
        place(h, i, h->items[parent]);
        i = parent;
    }
    place(h, i, t);
}

static void sift_down(struct tide__timer_heap *h, size_t i)
{
    struct tide__timer *t = h->items[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->len)
            break;
        if (child + 1 < h->len && earlier(h->items[child + 1], h->items[child]))
            child++;
        if (!earlier(h->items[child], t))
            break;
        place(h, i, h->items[child]);
        i = child;
    }
    place(h, i, t);
}

int tide__timer_arm(struct tide__timer_heap *h, struct tide__timer *t, uint64_t deadline_ns)
{
    tide__timer_disarm(h, t);
    if (h->len == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct tide__timer **items = realloc(h->items, cap * sizeof *items);
        if (!items)
            return TIDE_ENOMEM;
        h->items = items;
        h->cap = cap;
    }
    t->deadline_ns = deadline_ns;
    t->order = h->next_order++;
    place(h, h->len++, t);
    sift_up(h, t->slot);
    return 0;
}

void tide__timer_disarm(struct tide__timer_heap *h, struct tide__timer *t)
{
    size_t i = t->slot;
    if (i == SIZE_MAX)
        return;
    t->slot = SIZE_MAX;
    struct tide__timer *last = h->items[--h->len];
    if (i == h->len)
        return;
    place(h, i, last);
    /* The moved timer may belong above or below its new slot. */
    if (i > 0 && earlier(last, h->items[(i - 1) / 2]))
        sift_up(h, i);
    else
        sift_down(h, i);
}

struct tide__timer *tide__timer_heap_peek(const struct tide__timer_heap *h)
{
    return h->len ? h->items[0] : NULL;
}

int tide__timer_heap_expire(struct tide__timer_heap *h, uint64_t now_ns)
{
    int n = 0;
    struct tide__timer *t;
    while ((t = tide__timer_heap_peek(h)) && t->deadline_ns <= now_ns) {
        tide__timer_disarm(h, t);
        t->fire(t);
        n++;
    }
    return n;
}
