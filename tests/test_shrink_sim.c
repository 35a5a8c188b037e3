/* test_shrink_sim.c - revoke, agree and shrink over the simulated
 * network, through thousands of seeded schedules.
 *
 * Each schedule: 3-6 ranks run the same random program of collectives
 * (allreduce, broadcast, allgather, barrier) in the ULFM loop of tide.h:
 * after each step every live rank agrees whether all finished it; if
 * not, it revokes, shrinks and redoes the step on the new communicator.
 * One rank crashes at a random delivery, a second one a little later
 * (often during the agreement or the shrink), and with 5 or more ranks a
 * third soon after that.  First, every pair of crash points around a
 * lone shrink of 4 ranks (crash_pairs: the case that finds too few
 * rounds of flooding).  Checked: every live rank
 * finishes the program, every result is right for the members of the
 * communicator it ran on, and all end with the same member list, which
 * holds every live rank.
 *
 *   test_shrink_sim [--seeds N] [--first S]     (TIDE_SIM_SEED=S: one, verbose) */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"
#include "tide_sim.h"
#include "ulfm_step.h"

enum { MAXN = 6, STEPS = 8 };

struct rank_result {
    bool crashed;        /* an operation said this rank crashed */
    bool done;           /* ran every step */
    int shrinks;
    int nmembers;        /* the last communicator's members, world ranks */
    int members[MAXN];
    char error[200];     /* what went wrong here, or "" */
};

struct job {
    uint64_t seed;
    int n;
    uint8_t kind[STEPS]; /* 0 allreduce, 1 broadcast, 2 allgather, 3 barrier */
    int ncrash;          /* 2, or 3 with 5 ranks or more */
    int crash[3];        /* ranks, and after how many deliveries */
    uint64_t after[3];
    struct rank_result res[MAXN];
};

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Run step `step` on comm; members[] gets the world ranks of comm (the
 * allgather every step starts with).  0, the error, or 1 when a result
 * is wrong (with why in r->error). */
static int run_step(struct job *j, tide_comm *comm, int step, struct rank_result *r,
                    int *members, int *nmembers)
{
    int me = tide_comm_rank(comm), n = tide_comm_size(comm);
    int32_t world = (int32_t)r->members[MAXN - 1]; /* set by the caller: my world rank */
    int32_t all[MAXN];
    int rc = tide_allgather(comm, &world, all, 1, TIDE_INT32);
    if (rc)
        return rc;
    int32_t sum = 0;
    for (int i = 0; i < n; i++) {
        members[i] = all[i];
        sum += (all[i] + 1) * (step + 1);
    }
    *nmembers = n;
    int32_t v = (world + 1) * (step + 1), root = step % n;
    switch (j->kind[step]) {
    case 0:
        if ((rc = tide_allreduce(comm, TIDE_IN_PLACE, &v, 1, TIDE_INT32, TIDE_SUM)))
            return rc;
        if (v != sum)
            snprintf(r->error, sizeof r->error, "step %d: allreduce %d, not %d", step, v, sum);
        return v != sum;
    case 1:
        if ((rc = tide_broadcast(comm, &v, 1, TIDE_INT32, root)))
            return rc;
        if (v != (all[root] + 1) * (step + 1))
            snprintf(r->error, sizeof r->error, "step %d: broadcast from %d gave %d", step, root,
                     v);
        return v != (all[root] + 1) * (step + 1);
    case 2:
        for (int i = 1; i < n; i++)
            if (all[i] <= all[i - 1] || (i == me && all[i] != world))
                snprintf(r->error, sizeof r->error, "step %d: members out of order", step);
        return r->error[0] != 0;
    default:
        return tide_barrier(comm);
    }
}

static void program(tide_comm *world, void *arg)
{
    struct job *j = arg;
    int wr = tide_comm_rank(world);
    struct rank_result *r = &j->res[wr];
    r->members[MAXN - 1] = wr;
    int members[MAXN], nmembers = 0;
    tide_comm *comm = world;
    for (int step = 0; step < STEPS;) {
        int rc = run_step(j, comm, step, r, members, &nmembers);
        if (rc == 1)
            break; /* a wrong result: reported */
        if (rc == TIDE_EABORTED)
            goto crashed;
        if ((rc = ulfm_after_step(&comm, world, rc)) == 1) {
            step++;
            continue;
        }
        if (rc == TIDE_EABORTED)
            goto crashed;
        if (rc) {
            snprintf(r->error, sizeof r->error, "step %d: agree/shrink: %s", step,
                     tide_err_name(rc));
            break;
        }
        r->shrinks++;
    }
    r->done = !r->error[0];
    r->nmembers = nmembers;
    memcpy(r->members, members, sizeof members);
    if (comm != world)
        tide_comm_free(comm);
    return;
crashed:
    r->crashed = true;
    if (comm != world)
        tide_comm_free(comm);
}

static void make_job(uint64_t seed, struct job *j)
{
    memset(j, 0, sizeof *j);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    j->seed = seed;
    j->n = 3 + (int)(next_rand(&s) % (MAXN - 2));
    for (int i = 0; i < STEPS; i++)
        j->kind[i] = (uint8_t)(next_rand(&s) % 4);
    j->crash[0] = (int)(next_rand(&s) % (uint64_t)j->n);
    j->crash[1] = (j->crash[0] + 1 + (int)(next_rand(&s) % (uint64_t)(j->n - 1))) % j->n;
    j->after[0] = next_rand(&s) % 200;
    j->after[1] = j->after[0] + 1 + next_rand(&s) % 120;
    j->ncrash = j->n >= 5 ? 3 : 2;
    /* A third death soon after the second: a rank that alone saw an
     * earlier death may die while telling the others. */
    j->crash[2] = (j->crash[1] + 1 + (int)(next_rand(&s) % (uint64_t)(j->n - 1))) % j->n;
    if (j->crash[2] == j->crash[0])
        j->crash[2] = (j->crash[2] + 1) % j->n == j->crash[1] ? (j->crash[2] + 2) % j->n
                                                              : (j->crash[2] + 1) % j->n;
    j->after[2] = j->after[1] + 1 + next_rand(&s) % 40;
}

/* Returns 1 when the schedule went wrong (and says why), else 0. */
static int check(const struct job *j, bool verbose)
{
    const struct rank_result *first = NULL;
    int bad = 0;
    for (int r = 0; r < j->n; r++) {
        const struct rank_result *x = &j->res[r];
        if (verbose)
            printf("  rank %d: %s, %d shrinks, %d members %s\n", r,
                   x->crashed ? "crashed" : x->done ? "done" : "FAILED", x->shrinks,
                   x->nmembers, x->error);
        if (x->crashed)
            continue;
        if (!x->done) {
            printf("seed %llu: rank %d did not finish: %s\n", (unsigned long long)j->seed, r,
                   x->error);
            bad = 1;
            continue;
        }
        if (!first)
            first = x;
        else if (x->nmembers != first->nmembers ||
                 memcmp(x->members, first->members, sizeof(int) * (size_t)x->nmembers)) {
            printf("seed %llu: rank %d ended with other members\n", (unsigned long long)j->seed,
                   r);
            bad = 1;
        }
        bool in = false;
        for (int i = 0; first && i < first->nmembers; i++)
            in |= first->members[i] == r;
        if (!in) {
            printf("seed %llu: live rank %d is not a member\n", (unsigned long long)j->seed, r);
            bad = 1;
        }
    }
    if (!first) {
        printf("seed %llu: no rank finished\n", (unsigned long long)j->seed);
        bad = 1;
    }
    return bad;
}

static int run_job(struct job *j, bool verbose)
{
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    cfg.seed = j->seed;
    cfg.jitter_s = 20e-6;
    cfg.timeout_s = 30; /* virtual: a hang shows as a failure, not a stuck test */
    tide_sim *sim;
    tide_comm *comms[MAXN];
    if (tide_sim_create(j->n, &cfg, &sim, comms))
        return 1;
    for (int c = 0; c < j->ncrash; c++)
        tide_sim_crash(sim, j->crash[c], j->after[c]);
    int rc = tide_sim_spawn(sim, program, j);
    tide_sim_destroy(sim);
    if (verbose)
        printf("seed %llu: %d ranks, crash rank %d after %llu and rank %d after %llu\n",
               (unsigned long long)j->seed, j->n, j->crash[0], (unsigned long long)j->after[0],
               j->crash[1], (unsigned long long)j->after[1]);
    return rc ? 1 : check(j, verbose);
}

/* Every pair of crash points around one shrink of 4 ranks: the first
 * victim dies at delivery a (round 0 has 12), a second at b, later.  A
 * death in round 0 that only some ranks saw, then the death of one that
 * saw it while telling the others, is where too few rounds of flooding
 * leave the survivors with different members (and sizes). */
static void shrink_only(tide_comm *world, void *arg)
{
    struct job *j = arg;
    struct rank_result *r = &j->res[tide_comm_rank(world)];
    tide_comm *smaller = NULL;
    int rc = tide_comm_shrink(world, &smaller);
    r->crashed = rc == TIDE_EABORTED;
    r->done = rc == 0;
    r->nmembers = smaller ? tide_comm_size(smaller) : 0;
    if (rc && !r->crashed)
        snprintf(r->error, sizeof r->error, "shrink: %s", tide_err_name(rc));
    if (smaller)
        tide_comm_free(smaller);
}

static int crash_pairs(void)
{
    int failures = 0;
    static struct job j;
    for (int victim2 = 1; victim2 < 4; victim2++)
        for (uint64_t a = 0; a < 12; a++)
            for (uint64_t b = a + 1; b <= a + 36; b++) {
                memset(&j, 0, sizeof j);
                j.n = 4;
                tide_sim *sim;
                tide_comm *comms[4];
                if (tide_sim_create(4, NULL, &sim, comms))
                    return 1;
                tide_sim_crash(sim, 0, a);
                tide_sim_crash(sim, victim2, b);
                tide_sim_spawn(sim, shrink_only, &j);
                tide_sim_destroy(sim);
                int size = -1;
                for (int r = 0; r < 4; r++) {
                    const struct rank_result *x = &j.res[r];
                    if (x->crashed)
                        continue;
                    bool bad = !x->done || (size >= 0 && x->nmembers != size);
                    if (bad)
                        printf("crashes 0@%llu %d@%llu: rank %d: %s, size %d (others %d)\n",
                               (unsigned long long)a, victim2, (unsigned long long)b, r,
                               x->error, x->nmembers, size);
                    failures += bad;
                    size = x->nmembers;
                }
            }
    return failures;
}

int main(int argc, char **argv)
{
    uint64_t first = 1, count = 2000;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--seeds") && a + 1 < argc)
            count = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--first") && a + 1 < argc)
            first = strtoull(argv[++a], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--seeds N] [--first S]\n", argv[0]);
            return 2;
        }
    }
    static struct job j;
    const char *one = getenv("TIDE_SIM_SEED");
    if (one) {
        make_job(strtoull(one, NULL, 10), &j);
        return run_job(&j, true);
    }
    int failures = crash_pairs(), shrinks = 0;
    for (uint64_t seed = first; seed < first + count; seed++) {
        make_job(seed, &j);
        failures += run_job(&j, false);
        for (int r = 0; r < j.n; r++)
            shrinks += j.res[r].shrinks;
    }
    printf("%llu schedules from seed %llu (%d shrinks on live ranks): %d failed\n",
           (unsigned long long)count, (unsigned long long)first, shrinks, failures);
    return failures ? 1 : 0;
}
