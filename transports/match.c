/* match.c - see match.h.  Lists are searched from the oldest entry: with
 * collectives issued in order, the match is almost always at the head. */
#include "transports/match.h"
#include "tide.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A receive another peer's frame already claimed (an any-source
 * receive's, see transport.h) waits only to be withdrawn. */
static bool claimed_elsewhere(const tide__msg *m)
{
    return m->claim && m->claim->winner && m->claim->winner != m;
}

static void claim(tide__msg *m)
{
    if (m->claim)
        m->claim->winner = m;
}

tide__msg *tide__match_take_posted(struct tide__match *mq, const struct tide__frame *f)
{
    tide__msg *prev = NULL;
    for (tide__msg *m = mq->posted.head; m; prev = m, m = m->next) {
        if (tide__frame_same_key(&m->hdr, f) && !claimed_elsewhere(m)) {
            tide__msgq_unlink(&mq->posted, prev, m);
            claim(m);
            return m;
        }
    }
    return NULL;
}

struct tide__unexp *tide__match_take_unexpected(struct tide__match *mq, tide__msg *m)
{
    if (claimed_elsewhere(m))
        return NULL;
    struct tide__unexp *prev = NULL;
    for (struct tide__unexp *ux = mq->ux_head; ux; prev = ux, ux = ux->next) {
        if (!tide__frame_same_key(&ux->hdr, &m->hdr))
            continue;
        if (prev)
            prev->next = ux->next;
        else
            mq->ux_head = ux->next;
        if (mq->ux_tail == ux)
            mq->ux_tail = prev;
        ux->next = NULL;
        claim(m);
        return ux;
    }
    return NULL;
}

void tide__match_post(struct tide__match *mq, tide__msg *m)
{
    tide__msgq_push(&mq->posted, m);
}

void tide__match_add_unexpected(struct tide__match *mq, struct tide__unexp *ux)
{
    ux->next = NULL;
    if (mq->ux_tail)
        mq->ux_tail->next = ux;
    else
        mq->ux_head = ux;
    mq->ux_tail = ux;
}

bool tide__match_remove_posted(struct tide__match *mq, tide__msg *m)
{
    return tide__msgq_remove(&mq->posted, m);
}

bool tide__match_remove_unexpected(struct tide__match *mq, struct tide__unexp *ux)
{
    struct tide__unexp *prev = NULL;
    for (struct tide__unexp *p = mq->ux_head; p; prev = p, p = p->next) {
        if (p != ux)
            continue;
        if (prev)
            prev->next = p->next;
        else
            mq->ux_head = p->next;
        if (mq->ux_tail == p)
            mq->ux_tail = prev;
        p->next = NULL;
        return true;
    }
    return false;
}

int tide__match_check(const tide__msg *m, const struct tide__frame *f)
{
    if (m->hdr.kind != f->kind)
        return TIDE_EMISMATCH;
    if (f->kind != TIDE_KIND_P2P && !tide__frame_same_signature(&m->hdr, f))
        return TIDE_EMISMATCH;
    /* A collective knows every message's length.  A frame of another
     * length with the same signature comes from a peer that passed other
     * counts (an all-gather-v's array) or lies: a shorter one completed
     * would leave the rest of the buffer unwritten and call it success. */
    if (f->kind != TIDE_KIND_P2P && f->len != m->len)
        return TIDE_EMISMATCH;
    if (f->len > m->len)
        return TIDE_ETRUNCATE;
    return 0;
}

int tide__match_deliver(const struct tide__unexp *ux, tide__msg *m)
{
    int st = tide__match_check(m, &ux->hdr);
    m->got = (size_t)ux->hdr.len;
    if (st == TIDE_EMISMATCH)
        m->hdr = ux->hdr; /* so the failure can say what the peer called */
    if (st == 0 && ux->hdr.len && ux->data) /* no data: a timing-only simulation */
        memcpy(m->buf, ux->data, (size_t)ux->hdr.len);
    return st;
}

/* A large payload gets pages of its own from the kernel, touched only as
 * its bytes arrive.  malloc's may be filled at once (MALLOC_PERTURB_,
 * which meson sets for every test): a 256 MiB frame that came before its
 * receive kept the reactor thread 1.1 s in that memset on a VM whose
 * page faults are dear, and a rank lost meanwhile went unnoticed as long
 * (test_failures_tcp's peer_killed). */
uint8_t *tide__payload_new(size_t len)
{
    if (len < TIDE_PAYLOAD_MAP_MIN)
        return malloc(len);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void tide__payload_free(uint8_t *p, size_t len)
{
    if (len < TIDE_PAYLOAD_MAP_MIN)
        free(p);
    else if (p)
        munmap(p, len);
}

struct tide__unexp *tide__unexp_into(const struct tide__frame *f, uint8_t *payload)
{
    struct tide__unexp *ux = calloc(1, sizeof *ux);
    if (!ux)
        return NULL;
    ux->hdr = *f;
    ux->data = payload;
    ux->complete = f->len == 0;
    return ux;
}

uint8_t *tide__unexp_take_payload(struct tide__unexp *ux)
{
    uint8_t *p = ux->data;
    ux->data = NULL;
    return p;
}

struct tide__unexp *tide__unexp_new(const struct tide__frame *f, const void *data)
{
    uint8_t *payload = NULL;
    if (f->len && !(payload = tide__payload_new((size_t)f->len)))
        return NULL;
    struct tide__unexp *ux = tide__unexp_into(f, payload);
    if (!ux) {
        tide__payload_free(payload, (size_t)f->len);
        return NULL;
    }
    if (data && f->len)
        memcpy(ux->data, data, (size_t)f->len);
    ux->complete = data != NULL || f->len == 0;
    return ux;
}

void tide__unexp_free(struct tide__unexp *ux)
{
    if (!ux)
        return;
    tide__payload_free(ux->data, (size_t)ux->hdr.len);
    free(ux);
}

void tide__match_free_unexpected(struct tide__match *mq)
{
    while (mq->ux_head) {
        struct tide__unexp *next = mq->ux_head->next;
        tide__unexp_free(mq->ux_head);
        mq->ux_head = next;
    }
    mq->ux_tail = NULL;
}
