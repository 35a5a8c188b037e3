/* cq.c - completion queues: many requests, one waiter (MPI_Waitsome, or a
 * verbs CQ).  A thread that must learn of thousands of requests' ends --
 * the Python package's poller, which completes torch futures -- blocks in
 * one call instead of holding a thread, or a test loop, per request.
 *
 * Built on tide_req_on_complete only: the callback runs on the reactor,
 * links a node prepared at attach time onto the done list and signals the
 * waiter, so the reactor never allocates, never blocks beyond the queue's
 * lock, and never calls back into a language runtime (a Python callback
 * there would need the GIL on the reactor thread).
 *
 * Lock order: the queue's lock is a leaf; the reactor holds nothing of
 * ours when it calls on_done. */
#include "tide.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

/* One attached request: allocated by tide_cq_attach, owned by the reactor
 * until on_done links it onto the done list, then by the queue. */
struct cq_node {
    tide_cq *cq;
    tide_req *req;
    uint64_t tag;
    struct cq_node *next;
};

struct tide_cq {
    pthread_mutex_t lock;
    pthread_cond_t cond;       /* signalled on a completion or an interrupt */
    struct cq_node *done_head; /* completed, not yet returned, in completion order */
    struct cq_node *done_tail;
    struct cq_node *spare;     /* returned nodes, reused by the next attach */
    size_t attached;           /* callbacks that have not run yet */
    int interrupted;           /* tide_cq_interrupt since the last wait returned */
};

int tide_cq_create(tide_cq **out)
{
    if (!out)
        return TIDE_EINVAL;
    *out = NULL;
    tide_cq *cq = calloc(1, sizeof *cq);
    if (!cq)
        return TIDE_ENOMEM;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    /* Timeouts must not jump with the wall clock. */
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&cq->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rc || pthread_mutex_init(&cq->lock, NULL)) {
        if (!rc)
            pthread_cond_destroy(&cq->cond);
        free(cq);
        return TIDE_ENOMEM;
    }
    *out = cq;
    return 0;
}

/* Reactor thread: req finished (its DONE bit follows right after). */
static void on_done(tide_req *req, void *arg)
{
    struct cq_node *n = arg;
    tide_cq *cq = n->cq;
    pthread_mutex_lock(&cq->lock);
    n->next = NULL;
    if (cq->done_tail)
        cq->done_tail->next = n;
    else
        cq->done_head = n;
    cq->done_tail = n;
    cq->attached--;
    pthread_cond_signal(&cq->cond);
    pthread_mutex_unlock(&cq->lock);
}

int tide_cq_attach(tide_cq *cq, tide_req *req, uint64_t tag)
{
    if (!cq || !req)
        return TIDE_EINVAL;
    pthread_mutex_lock(&cq->lock);
    struct cq_node *n = cq->spare;
    if (n)
        cq->spare = n->next;
    cq->attached++;
    pthread_mutex_unlock(&cq->lock);
    if (!n)
        n = malloc(sizeof *n);
    int rc = n ? 0 : TIDE_ENOMEM;
    if (n) {
        *n = (struct cq_node){.cq = cq, .req = req, .tag = tag};
        rc = tide_req_on_complete(req, on_done, n);
    }
    if (rc) {
        pthread_mutex_lock(&cq->lock);
        cq->attached--;
        pthread_mutex_unlock(&cq->lock);
        free(n);
    }
    return rc;
}

static struct timespec deadline_after(int timeout_ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Take up to max nodes off the done list; the caller holds the lock. */
static struct cq_node *take(tide_cq *cq, int max, int *count)
{
    struct cq_node *first = cq->done_head, *last = NULL;
    int k = 0;
    for (struct cq_node *n = first; n && k < max; n = n->next, k++)
        last = n;
    if (last) {
        cq->done_head = last->next;
        if (!cq->done_head)
            cq->done_tail = NULL;
        last->next = NULL;
    }
    *count = k;
    return k ? first : NULL;
}

int tide_cq_wait(tide_cq *cq, uint64_t *tags, int max, int timeout_ms)
{
    if (!cq || !tags || max < 1)
        return TIDE_EINVAL;
    struct timespec until = deadline_after(timeout_ms < 0 ? 0 : timeout_ms);
    int count = 0, timed_out = 0;
    pthread_mutex_lock(&cq->lock);
    while (!cq->done_head && !cq->interrupted && !timed_out && timeout_ms != 0) {
        if (timeout_ms < 0)
            pthread_cond_wait(&cq->cond, &cq->lock);
        else
            timed_out = pthread_cond_timedwait(&cq->cond, &cq->lock, &until) != 0;
    }
    cq->interrupted = 0;
    struct cq_node *list = take(cq, max, &count);
    pthread_mutex_unlock(&cq->lock);

    struct cq_node *n = list, *last = NULL;
    for (int i = 0; n; n = n->next, i++) {
        /* The callback runs just before the request publishes DONE: wait
         * out that window, so every tag returned tests done. */
        int done = 0;
        while (tide_test(n->req, &done), !done)
            sched_yield();
        tags[i] = n->tag;
        last = n;
    }
    if (last) {
        pthread_mutex_lock(&cq->lock);
        last->next = cq->spare;
        cq->spare = list;
        pthread_mutex_unlock(&cq->lock);
    }
    return count;
}

int tide_cq_interrupt(tide_cq *cq)
{
    if (!cq)
        return TIDE_EINVAL;
    pthread_mutex_lock(&cq->lock);
    cq->interrupted = 1;
    pthread_cond_broadcast(&cq->cond);
    pthread_mutex_unlock(&cq->lock);
    return 0;
}

static void free_list(struct cq_node *n)
{
    while (n) {
        struct cq_node *next = n->next;
        free(n);
        n = next;
    }
}

int tide_cq_destroy(tide_cq *cq)
{
    if (!cq)
        return 0;
    pthread_mutex_lock(&cq->lock);
    size_t attached = cq->attached;
    pthread_mutex_unlock(&cq->lock);
    if (attached)
        return TIDE_EBUSY;
    free_list(cq->done_head);
    free_list(cq->spare);
    pthread_cond_destroy(&cq->cond);
    pthread_mutex_destroy(&cq->lock);
    free(cq);
    return 0;
}
