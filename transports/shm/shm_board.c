/* shm_board.c - boards over shared memory (engine/board.h): the
 * board area at the end of each rank's segment, and the watches that
 * wait on its words.
 *
 * A watch is noticed like a ring that filled: every pass of the driver
 * asks each watch whether it is ready (loads only), and before the
 * driver sleeps, arm() asks again after publishing `sleeping`.  A peer
 * that raises a word fences and rings the doorbell of every listed rank
 * whose header shows `sleeping`: the pairing of shm_ring.h, so no raise
 * is missed and a spinning peer costs nothing but loads. */
#include "transports/shm/shm_peer.h"

static int wait_peer(struct tide__shm *tp, tide__msg *m, bool *ready)
{
    struct tide__watch *w = m->buf;
    int peer = m->peer;
    *ready = w->ready(w, &peer);
    if (!*ready && peer >= 0 && peer < tp->size)
        m->peer = peer;
    return m->peer;
}

/* Why the rank a watch waits for is gone, or NULL. */
static const char *lost_peer(struct tide__shm *tp, int peer)
{
    if (peer == tp->rank || peer < 0 || peer >= tp->size)
        return NULL;
    const struct shm_peer *c = &tp->peers[peer];
    return c->fd < 0 ? "not served by shared memory" : c->lost;
}

void shm_watch_post(struct tide__shm *tp, tide__msg *m)
{
    tide__msgq_push(&tp->watches, m);
}

int shm_watch_withdraw(struct tide__shm *tp, tide__msg *m)
{
    tide__msgq_remove(&tp->watches, m);
    return 0;
}

int shm_watch_poll(struct tide__shm *tp)
{
    int n = 0;
    tide__msg *prev = NULL, *m = tp->watches.head;
    while (m) {
        tide__msg *next = m->next;
        bool ready;
        int peer = wait_peer(tp, m, &ready);
        if (ready || lost_peer(tp, peer)) {
            tide__msgq_unlink(&tp->watches, prev, m);
            tide__msg_done(tp->base.ctx, m, ready ? 0 : TIDE_EPEER);
            n++;
        } else {
            prev = m;
        }
        m = next;
    }
    return n;
}

bool shm_watch_any_ready(struct tide__shm *tp)
{
    for (tide__msg *m = tp->watches.head; m; m = m->next) {
        bool ready;
        int peer = wait_peer(tp, m, &ready);
        if (ready || lost_peer(tp, peer))
            return true;
    }
    return false;
}

void shm_watch_fail_all(struct tide__shm *tp, int err)
{
    tide__msg *m;
    while ((m = tide__msgq_pop(&tp->watches)))
        tide__msg_done(tp->base.ctx, m, err);
}

uint8_t *shm_board_at(struct tide__transport *base, int peer)
{
    struct tide__shm *tp = container_of(base, struct tide__shm, base);
    if (!tp->stage_ok || peer < 0 || peer >= tp->size)
        return NULL;
    return peer == tp->rank ? tp->board : tp->peers[peer].board;
}

void shm_board_raise(struct tide__transport *base, const int *peers, int n)
{
    struct tide__shm *tp = container_of(base, struct tide__shm, base);
    /* One fence orders our stores before every peer's `sleeping` load. */
    atomic_thread_fence(memory_order_seq_cst);
    for (int i = 0; i < n; i++) {
        int p = peers[i];
        if (p != tp->rank && p >= 0 && p < tp->size && tp->peers[p].fd >= 0 &&
            !tp->peers[p].lost)
            shm_ring_doorbell_fenced(&tp->peers[p]);
    }
}
