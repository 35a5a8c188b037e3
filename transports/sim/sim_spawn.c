/* sim_spawn.c - one program per simulated rank, each in its own thread,
 * taking turns: exactly one thread (a program or the scheduler) runs at a
 * time, and the turn passes through semaphores, which also order their
 * memory.  So the engine needs no locks, blocking calls work (a program
 * that waits hands the turn back), and the scheduler's choices, drawn
 * from the seed, make the whole run reproducible.
 *
 * The scheduler, until every program has returned:
 *     some program can go on?   run one (chosen at random), or, now and
 *                               then, fire the next network event first
 *     else                      fire the next event, or move the clock to
 *                               the earliest waiter's deadline */
#include "transports/sim/sim.h"

#include <pthread.h>
#include <stdlib.h>

#define STACK_BYTES (1u << 20)
#define MAX_PROGRAMS 1024

enum prog_state { P_READY, P_WAITING, P_DONE };

struct sim_prog {
    struct tide_sim *sim;
    tide_comm *comm;
    pthread_t thread;
    sem_t turn; /* posted when it may run */
    enum prog_state state;
    tide_req *req;  /* P_WAITING: what for */
    uint64_t until; /* and until when (virtual ns) */
};

struct sim_spawn {
    struct sim_prog *p;
    int n;
    sem_t back; /* posted when a program hands the turn back */
    void (*fn)(tide_comm *, void *);
    void *arg;
    bool stuck; /* nothing can ever wake the waiters: their waits fail */
};

static _Thread_local struct sim_prog *self;

bool tide__sim_in_program(const struct tide_sim *s)
{
    return self && self->sim == s;
}

/* Program side: give the turn back and sleep until it comes again. */
static void hand_back(struct sim_prog *p)
{
    sem_post(&p->sim->spawn->back);
    while (sem_wait(&p->turn))
        ;
}

void tide__sim_program_yield(struct tide_sim *s)
{
    (void)s;
    hand_back(self);
}

int tide__sim_program_wait(struct tide_sim *s, tide_req *req, int timeout_ms)
{
    struct sim_prog *p = self;
    uint64_t until = timeout_ms < 0 ? UINT64_MAX : s->now + (uint64_t)timeout_ms * TIDE_NS_PER_MS;
    for (;;) {
        if (tide__req_is_done(req))
            return req->status;
        if (s->now >= until || s->spawn->stuck)
            return TIDE_ETIMEDOUT;
        p->state = P_WAITING;
        p->req = req;
        p->until = until;
        hand_back(p);
    }
}

static void *program_main(void *arg)
{
    struct sim_prog *p = arg;
    self = p;
    while (sem_wait(&p->turn))
        ;
    struct sim_spawn *sp = p->sim->spawn;
    sp->fn(p->comm, sp->arg);
    p->state = P_DONE;
    sem_post(&sp->back);
    return NULL;
}

/* ---- the scheduler ---- */

static bool can_go(const struct tide_sim *s, const struct sim_prog *p)
{
    if (p->state == P_READY)
        return true;
    return p->state == P_WAITING &&
           (tide__req_is_done(p->req) || s->now >= p->until || s->spawn->stuck);
}

static void run(struct sim_spawn *sp, struct sim_prog *p)
{
    p->state = P_READY;
    sem_post(&p->turn);
    while (sem_wait(&sp->back))
        ;
}

/* The earliest deadline among the waiters. */
static uint64_t first_until(const struct sim_spawn *sp)
{
    uint64_t t = UINT64_MAX;
    for (int i = 0; i < sp->n; i++)
        if (sp->p[i].state == P_WAITING && sp->p[i].until < t)
            t = sp->p[i].until;
    return t;
}

/* Advance the world when no program can go on. */
static void advance(struct tide_sim *s, struct sim_spawn *sp)
{
    struct tide__timer *next = tide__timer_heap_peek(&s->heap);
    uint64_t until = first_until(sp);
    if (next && next->deadline_ns <= until) {
        tide__sim_step(s);
    } else if (until != UINT64_MAX) {
        s->now = until > s->now ? until : s->now;
    } else {
        sp->stuck = true; /* waiting forever on requests that never started */
    }
}

static void schedule(struct tide_sim *s, struct sim_spawn *sp, int *ready)
{
    int live = sp->n;
    while (live) {
        tide__sim_flush(s);
        int nready = 0;
        for (int i = 0; i < sp->n; i++)
            if (can_go(s, &sp->p[i]))
                ready[nready++] = i;
        /* A delivery now and then even while programs can go on, so that
         * messages also arrive between two calls of a program (as if it
         * were slow).  Never a deadline: that would time out a request
         * whose peers simply have not had their turn yet. */
        struct tide__timer *next = tide__timer_heap_peek(&s->heap);
        bool event_first = next && tide__sim_is_delivery(next) && tide__sim_rand(s) % 4 == 0;
        if (!nready || event_first) {
            advance(s, sp);
            continue;
        }
        struct sim_prog *p = &sp->p[ready[tide__sim_rand(s) % (uint64_t)nready]];
        run(sp, p);
        if (p->state == P_DONE)
            live--;
    }
}

/* Start a thread per program; each waits for its first turn. */
static int start_programs(struct sim_spawn *sp, int *started)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_BYTES);
    for (*started = 0; *started < sp->n; ++*started) {
        struct sim_prog *p = &sp->p[*started];
        if (sem_init(&p->turn, 0, 0))
            break;
        if (pthread_create(&p->thread, &attr, program_main, p)) {
            sem_destroy(&p->turn);
            break;
        }
    }
    pthread_attr_destroy(&attr);
    return *started == sp->n ? 0 : TIDE_ENOMEM;
}

static bool all_alive(const struct tide_sim *s)
{
    for (int i = 0; i < s->n; i++)
        if (!s->ranks[i].base.ctx)
            return false;
    return true;
}

int tide_sim_spawn(tide_sim *s, void (*fn)(tide_comm *comm, void *arg), void *arg)
{
    if (!s || !fn || s->spawn || tide__sim_in_program(s) || s->n > MAX_PROGRAMS || !all_alive(s))
        return TIDE_EINVAL;
    struct sim_spawn sp = {.n = s->n, .fn = fn, .arg = arg};
    sp.p = calloc((size_t)s->n, sizeof *sp.p);
    int *ready = malloc((size_t)s->n * sizeof *ready);
    if (!sp.p || !ready || sem_init(&sp.back, 0, 0)) {
        free(sp.p);
        free(ready);
        return TIDE_ENOMEM;
    }
    for (int i = 0; i < s->n; i++)
        sp.p[i] = (struct sim_prog){.sim = s, .comm = &s->ranks[i].base.ctx->world};
    s->spawn = &sp;
    int started;
    int rc = start_programs(&sp, &started);
    if (!rc) {
        schedule(s, &sp, ready);
    } else {
        /* None has had a turn, so none has run fn: cancel them where
         * they wait for it (sem_wait is a cancellation point). */
        for (int i = 0; i < started; i++)
            pthread_cancel(sp.p[i].thread);
    }
    for (int i = 0; i < started; i++) {
        pthread_join(sp.p[i].thread, NULL);
        sem_destroy(&sp.p[i].turn);
    }
    sem_destroy(&sp.back);
    free(sp.p);
    free(ready);
    s->spawn = NULL;
    return rc;
}
