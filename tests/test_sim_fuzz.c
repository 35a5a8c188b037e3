/* test_sim_fuzz.c - state-machine fuzzing over the simulated network.
 *
 * Each seed makes a random job: a group of 1 to 64 ranks, a random cost
 * model and jitter (so messages arrive in a random order), and a random
 * program of up to six collectives (every kind, dtype and op, counts from
 * 0 and 1 to primes and sizes the group does not divide, random roots and
 * algorithms, all in flight at once, some on sub-communicators from
 * tide_comm_split or tide_comm_create_group).  Every rank's every result
 * is checked against a reference computed independently (coll_check.c).
 * Half the seeds run the ranks as programs (tide_sim_spawn, blocking
 * calls); the other half post every rank's operations from this thread
 * and run the network.  Half the seeds give the ranks shared staging
 * memory (as on one host over shared memory) in slots of 32 to 1024
 * bytes, so the staged algorithms run with many rounds and are picked
 * (by default or forced) beside the others.  A third of the seeds put
 * the ranks on hosts of 1 to 4 (tide_sim_config.ranks_per_host: cheaper
 * links and staging memory inside a host only), most of them evenly, so
 * the hierarchical all-reduce runs (by default from its size, or forced)
 * with its parts' own algorithms, staged ones among them.  Half the seeds
 * with staging memory give the ranks boards too (tide_sim_config.boards),
 * so the board collectives run, by default for small vectors or forced,
 * between and inside the others (drawn from a second stream: the jobs of
 * older seeds stay as they were).
 *
 * With --faults, each seed also injects one fault: a rank crashes after a
 * random number of deliveries, a link stalls past the deadline, or a rank
 * calls a mismatched collective.  Then every request must either succeed
 * with the right result or fail with the error the fault implies, and
 * nothing may hang or leak.
 *
 * With --two, every job has 2 ranks on one host with boards, and half
 * its collectives take the default algorithm: the 2-rank stream
 * (collectives/board_stream.c) and the 2-rank boards then run between
 * each other and the message algorithms, which a job of 1 to 64 ranks
 * draws rarely (in a plain run, one board collective in about 190 went
 * through the stream).  With --faults too, its mismatches are where the
 * stream's entries must pair up again.
 *
 *   test_sim_fuzz [--faults] [--two] [--seeds N] [--first S] [--long SECONDS]
 *   TIDE_SIM_SEED=S [TIDE_SIM_FAULTS=1] [TIDE_SIM_TWO=1] test_sim_fuzz     (one seed)
 *
 * A failing seed prints the command that reproduces it. */
#include "tests/coll_check.h"
#include "tide_sim.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXOPS 6

enum fault { F_NONE, F_CRASH, F_STALL, F_MISMATCH };
static const char *const fault_names[] = {"none", "crash", "stall", "mismatch"};

struct fop {
    struct ccase k;  /* root and v-counts are drawn per communicator */
    int algo;        /* index into the family's algorithms; -1: the default */
    bool on_sub;
    bool in_place;
    unsigned pick;   /* root = pick % n; v-counts from it */
};

struct job {
    uint64_t seed;
    int n;
    bool spawn, sub;
    int color[MAXN], key[MAXN];
    tide_sim_config cfg;
    int nops;
    struct fop ops[MAXOPS];
    enum fault fault;
    int frank, fpeer;    /* the crashing / mismatching rank; the stalled link's end */
    uint64_t after;      /* crash after this many deliveries */
    int fop;             /* the mismatched operation */
};

/* What one rank posted for one operation. */
struct slot {
    tide_comm *comm; /* NULL: this rank takes no part */
    struct ccase k;
    size_t counts[MAXN];
    uint8_t *send, *recv;
    tide_req *req;
    int rc;
    /* A call the communicator's late report failed (post_op), made again
     * as req; kept until check_rank, with the buffers it was given. */
    tide_req *late;
    uint8_t *late_send, *late_recv;
};

struct rank_run {
    const struct job *job;
    tide_comm *world;
    tide_comm *sub; /* NULL when this rank joined no sub-communicator */
    struct slot s[MAXOPS];
};

/* Seeds that found bugs, run first every time.  (They name jobs of this
 * file's generator: a change to make_job means finding them anew.) */
static const struct {
    uint64_t seed;
    bool faults;
    const char *bug;
} regressions[] = {
    {4, true, "a crash: late frames of a collective that failed here were answered with a "
              "mismatch poison, which reached third ranks before the real reason (mismatch.c)"},
    {29, true, "the same, through a different collective"},
};

static struct rank_run runs[MAXN];
static int failures;
static bool two_ranks; /* --two */

/* ---- a job from a seed ---- */

static uint64_t rnd(uint64_t *s)
{
    return coll_next_rand(s);
}

static size_t pick_count(uint64_t *s, int n)
{
    static const size_t small[] = {0, 1, 2, 3, 5, 7, 13, 31, 97, 257};
    switch (rnd(s) % 8) {
    case 0: return (size_t)n - 1;
    case 1: return 11 * (size_t)n - 1;
    case 2: return n <= 8 ? 1000 + rnd(s) % 30000 : rnd(s) % 600;
    default: return small[rnd(s) % (sizeof small / sizeof small[0])];
    }
}

/* The family's algorithms a seed may force: the first three, the
 * staged one (index 3) where the ranks share staging memory, the
 * hierarchical one (4) where they are on hosts, and where they have
 * boards, now and then a board (5, or 6: two-phase).  (Where the group
 * cannot run it, or a vector does not fit a board, it gives way to the
 * default.)  The boards come from the second stream, b, so that every
 * other pick stays what it was before boards were drawn. */
static int pick_algo(uint64_t *s, uint64_t *b, const struct job *j, const struct family *f)
{
    int can[5], ncan = 0;
    for (int i = 0; i < 5; i++)
        if (f->algos[i] && (i < 3 || (i == 3 && j->cfg.stage_slot_bytes) ||
                            (i == 4 && j->cfg.ranks_per_host)))
            can[ncan++] = i;
    int pick = can[rnd(s) % (uint64_t)ncan];
    if (j->cfg.boards && f->algos[5] && rnd(b) % 3 == 0)
        pick = f->algos[6] && rnd(b) % 2 ? 6 : 5;
    return pick;
}

static void make_op(uint64_t *s, uint64_t *b, struct job *j, struct fop *o)
{
    memset(o, 0, sizeof *o);
    o->k.coll = (enum coll)(rnd(s) % C_COUNT);
    o->k.dtype = (tide_dtype)(rnd(s) % TIDE_DTYPE_COUNT);
    /* The arithmetic ops from the first stream, as before the bitwise
     * ones came (seeds keep their shape); those, for integers, from the
     * second. */
    o->k.op = coll_families[o->k.coll].reduces ? (tide_op)(rnd(s) % (TIDE_AVG + 1)) : TIDE_SUM;
    if (coll_families[o->k.coll].reduces && o->k.dtype <= TIDE_UINT64 && rnd(b) % 4 == 0)
        o->k.op = (tide_op)(TIDE_BAND + rnd(b) % 3);
    o->k.count = pick_count(s, j->n);
    o->k.layout = L_SEPARATE;
    o->k.salt = (unsigned)rnd(s);
    o->k.wrap = (o->k.dtype == TIDE_INT8 || o->k.dtype == TIDE_UINT8) && o->k.op == TIDE_SUM &&
                rnd(s) % 4 == 0;
    const struct family *f = &coll_families[o->k.coll];
    o->algo = f->env && rnd(s) % 4 ? pick_algo(s, b, j, f) : -1;
    if (two_ranks && rnd(b) % 2)
        o->algo = -1; /* the default: the stream where it fits */
    if (o->k.coll == C_ALLREDUCE && j->cfg.ranks_per_host && rnd(s) % 2)
        o->algo = 4; /* hierarchical: several in flight, their parts interleaving */
    o->on_sub = j->sub && rnd(s) % 2;
    o->in_place = rnd(s) % 3 == 0;
    o->pick = (unsigned)rnd(s);
}

static void make_faults(uint64_t *s, struct job *j)
{
    j->fault = (enum fault)(1 + rnd(s) % 3);
    j->frank = (int)(rnd(s) % (uint64_t)j->n);
    j->fpeer = (j->frank + 1 + (int)(rnd(s) % (uint64_t)j->n)) % j->n;
    j->after = rnd(s) % (uint64_t)(40 * j->n);
    j->fop = (int)(rnd(s) % (uint64_t)j->nops);
    if (j->fault == F_STALL) {
        j->cfg.timeout_s = 0.05; /* the stall lasts far longer */
        if (j->n == 1)
            j->fault = F_NONE;
    }
    if (j->fault == F_MISMATCH) {
        struct fop *o = &j->ops[j->fop];
        if (o->k.coll == C_BARRIER || j->n == 1) {
            j->fault = F_NONE;
            return;
        }
        o->on_sub = false; /* the mismatch is on the world: all ranks take part */
        if (o->k.count == 0)
            o->k.count = 1; /* an empty collective sends nothing: nobody could notice */
    }
}

/* Two streams: s draws the job as it was before boards existed (seeds
 * that found bugs keep naming the same jobs), b draws what boards add. */
static void make_job(uint64_t seed, bool faults, struct job *j)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    uint64_t b = seed * 0xD1B54A32D192ED03ull + 7;
    memset(j, 0, sizeof *j);
    j->seed = seed;
    uint64_t band = rnd(&s) % 100;
    j->n = band < 40 ? 1 + (int)(rnd(&s) % 8) : band < 75 ? 9 + (int)(rnd(&s) % 16)
                                                          : 25 + (int)(rnd(&s) % 40);
    int per_host = rnd(&s) % 3 == 0 ? 1 + (int)(rnd(&s) % 4) : 0;
    if (per_host > 1 && rnd(&s) % 4) { /* mostly even hosts: a hierarchy */
        j->n -= j->n % per_host;
        if (j->n < 2 * per_host)
            j->n = 2 * per_host;
    }
    if (two_ranks) { /* one host, or none: boards need both on one */
        j->n = 2;
        per_host = per_host ? 2 : 0;
    }
    j->spawn = seed % 2 == 0;
    j->sub = j->n > 1 && rnd(&s) % 2;
    for (int r = 0; r < j->n; r++) {
        j->color[r] = rnd(&s) % 10 == 0 ? TIDE_UNDEFINED : (int)(rnd(&s) % 3);
        j->key[r] = (int)(rnd(&s) % 5);
    }
    tide_sim_config_default(&j->cfg);
    j->cfg.seed = rnd(&s);
    j->cfg.alpha_s = (double)(rnd(&s) % 20) * 1e-6;
    j->cfg.bandwidth = 1e8 * (double)(1 + rnd(&s) % 200);
    j->cfg.jitter_s = (double)(rnd(&s) % 50) * 1e-6;
    j->cfg.timeout_s = 30;
    if (rnd(&s) % 2)
        j->cfg.stage_slot_bytes = (size_t)32 << (rnd(&s) % 6);
    j->cfg.boards = j->cfg.stage_slot_bytes && rnd(&b) % 2;
    if (two_ranks) {
        if (!j->cfg.stage_slot_bytes)
            j->cfg.stage_slot_bytes = 256;
        j->cfg.boards = true;
    }
    j->cfg.ranks_per_host = per_host;
    j->cfg.host_alpha_s = (double)(rnd(&s) % 4) * 1e-7;
    j->nops = 1 + (int)(rnd(&s) % MAXOPS);
    for (int i = 0; i < j->nops; i++)
        make_op(&s, &b, j, &j->ops[i]);
    if (faults)
        make_faults(&s, j);
}

/* ---- posting one operation on one rank ---- */

static uint8_t *zalloc(size_t bytes)
{
    uint8_t *p = calloc(1, bytes + 1); /* never NULL for 0 bytes */
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static void v_counts(struct slot *sl, int n, unsigned pick)
{
    for (int p = 0; p < n; p++)
        sl->counts[p] = sl->k.count ? (pick + 7u * (unsigned)p) % (sl->k.count + 1) : 0;
}

static size_t v_total(const struct slot *sl, int n, int upto)
{
    size_t t = 0;
    for (int p = 0; p < upto && p < n; p++)
        t += sl->counts[p];
    return t;
}

/* Another dtype of the same size: a mismatch the buffers do not notice.
 * An integer stays one under a bitwise op, which refuses floats at the
 * call (that would be a refusal, not a mismatch). */
static tide_dtype twin(tide_dtype d, tide_op op)
{
    bool bitwise = op == TIDE_BAND || op == TIDE_BOR || op == TIDE_BXOR;
    if (bitwise && (d == TIDE_INT32 || d == TIDE_INT64))
        return d == TIDE_INT32 ? TIDE_UINT32 : TIDE_UINT64;
    switch (d) {
    case TIDE_INT8: return TIDE_UINT8;
    case TIDE_UINT8: return TIDE_INT8;
    case TIDE_INT32: return TIDE_FLOAT32;
    case TIDE_UINT32: return TIDE_INT32;
    case TIDE_FLOAT32: return TIDE_UINT32;
    case TIDE_INT64: return TIDE_FLOAT64;
    case TIDE_UINT64: return TIDE_INT64;
    case TIDE_FLOAT64: return TIDE_UINT64;
    case TIDE_FLOAT16: return TIDE_BFLOAT16;
    default: return TIDE_FLOAT16;
    }
}

static void set_algorithm(const struct fop *o)
{
    const struct family *f = &coll_families[o->k.coll];
    if (!f->env)
        return;
    if (o->algo >= 0)
        setenv(f->env, f->algos[o->algo], 1);
    else
        unsetenv(f->env);
}

static int post_reduce_kind(struct slot *sl, const struct fop *o, int r, int n)
{
    struct ccase *k = &sl->k;
    size_t es = tide_dtype_size(k->dtype), c = k->count;
    switch (k->coll) {
    case C_ALLREDUCE:
    case C_REDUCE: {
        bool root = k->coll == C_ALLREDUCE || r == k->root;
        sl->recv = zalloc(c * es);
        bool inp = o->in_place && root;
        sl->send = inp ? NULL : zalloc(c * es);
        coll_fill_input(k, r, inp ? sl->recv : sl->send, 0, c);
        const void *send = inp ? TIDE_IN_PLACE : sl->send;
        if (k->coll == C_ALLREDUCE)
            return tide_iallreduce(sl->comm, send, sl->recv, c, k->dtype, k->op, &sl->req);
        return tide_ireduce(sl->comm, send, root ? sl->recv : NULL, c, k->dtype, k->op, k->root,
                            &sl->req);
    }
    case C_REDUCE_SCATTER:
        sl->send = zalloc(c * (size_t)n * es);
        sl->recv = zalloc(c * es);
        coll_fill_input(k, r, sl->send, 0, c * (size_t)n);
        return tide_ireduce_scatter(sl->comm, sl->send, sl->recv, c, k->dtype, k->op, &sl->req);
    default: { /* C_REDUCE_SCATTERV */
        size_t total = v_total(sl, n, n);
        sl->send = zalloc(total * es);
        sl->recv = zalloc(sl->counts[r] * es);
        coll_fill_input(k, r, sl->send, 0, total);
        return tide_ireduce_scatterv(sl->comm, sl->send, sl->recv, sl->counts, k->dtype, k->op,
                                     &sl->req);
    }
    }
}

static int post_move_kind(struct slot *sl, const struct fop *o, int r, int n)
{
    struct ccase *k = &sl->k;
    size_t bb = k->count * tide_dtype_size(k->dtype), es = tide_dtype_size(k->dtype);
    switch (k->coll) {
    case C_BROADCAST:
        sl->recv = zalloc(bb);
        if (r == k->root)
            coll_fill_pat(sl->recv, bb, 500, k->salt);
        return tide_ibroadcast(sl->comm, sl->recv, k->count, k->dtype, k->root, &sl->req);
    case C_ALLGATHER:
        sl->recv = zalloc(bb * (size_t)n);
        if (o->in_place) {
            coll_fill_pat(sl->recv + (size_t)r * bb, bb, (unsigned)r, k->salt);
            return tide_iallgather(sl->comm, TIDE_IN_PLACE, sl->recv, k->count, k->dtype,
                                   &sl->req);
        }
        sl->send = zalloc(bb);
        coll_fill_pat(sl->send, bb, (unsigned)r, k->salt);
        return tide_iallgather(sl->comm, sl->send, sl->recv, k->count, k->dtype, &sl->req);
    case C_ALLGATHERV:
        sl->recv = zalloc(v_total(sl, n, n) * es);
        sl->send = zalloc(sl->counts[r] * es);
        coll_fill_pat(sl->send, sl->counts[r] * es, (unsigned)r, k->salt);
        return tide_iallgatherv(sl->comm, sl->send, sl->recv, sl->counts, k->dtype, &sl->req);
    case C_GATHER:
        sl->send = zalloc(bb);
        sl->recv = r == k->root ? zalloc(bb * (size_t)n) : NULL;
        coll_fill_pat(sl->send, bb, (unsigned)r, k->salt);
        return tide_igather(sl->comm, sl->send, sl->recv, k->count, k->dtype, k->root, &sl->req);
    case C_SCATTER:
        sl->send = r == k->root ? zalloc(bb * (size_t)n) : NULL;
        sl->recv = zalloc(bb);
        for (int p = 0; sl->send && p < n; p++)
            coll_fill_pat(sl->send + (size_t)p * bb, bb, 1000u + (unsigned)p, k->salt);
        return tide_iscatter(sl->comm, sl->send, sl->recv, k->count, k->dtype, k->root, &sl->req);
    case C_ALLTOALL:
        sl->send = zalloc(bb * (size_t)n);
        sl->recv = zalloc(bb * (size_t)n);
        for (int p = 0; p < n; p++)
            coll_fill_pat(sl->send + (size_t)p * bb, bb, 64u * (unsigned)r + (unsigned)p, k->salt);
        return tide_ialltoall(sl->comm, sl->send, sl->recv, k->count, k->dtype, &sl->req);
    default:
        return tide_ibarrier(sl->comm, &sl->req);
    }
}

static void post_once(struct rank_run *rr, int i)
{
    const struct job *j = rr->job;
    const struct fop *o = &j->ops[i];
    struct slot *sl = &rr->s[i];
    memset(sl, 0, sizeof *sl);
    sl->comm = o->on_sub ? rr->sub : rr->world;
    if (!sl->comm)
        return;
    int r = tide_comm_rank(sl->comm), n = tide_comm_size(sl->comm);
    sl->k = o->k;
    sl->k.root = (int)(o->pick % (unsigned)n);
    if (j->fault == F_MISMATCH && i == j->fop && tide_comm_rank(rr->world) == j->frank)
        sl->k.dtype = twin(sl->k.dtype, sl->k.op); /* the one rank that calls something else */
    v_counts(sl, n, o->pick);
    set_algorithm(o);
    sl->rc = coll_families[o->k.coll].reduces ? post_reduce_kind(sl, o, r, n)
                                              : post_move_kind(sl, o, r, n);
    set_algorithm(&(struct fop){.k = o->k, .algo = -1});
    if (sl->rc) {
        sl->req = NULL;
        CHECK(false, "seed %llu: posting op %d (%s) failed: %s", (unsigned long long)j->seed, i,
              coll_describe(&sl->k, n), tide_err_name(sl->rc));
    }
}

/* Post op i on rr's rank.  A call that took a late report of an
 * earlier collective of its communicator fails with it, runs nothing
 * and counts for nothing (async_error.c), and tide.h tells programs to
 * call again: so does this one.  Without boards a report only comes
 * while the ranks wait, after every post; a board collective's gate
 * checks the ones before it when it is posted, and a 2-rank stream
 * sender hears of a reader's mismatch there. */
static void post_op(struct rank_run *rr, int i)
{
    post_once(rr, i);
    struct slot *sl = &rr->s[i];
    if (rr->job->fault != F_MISMATCH || sl->rc || !sl->req ||
        !strstr(tide_req_message(sl->req), "had succeeded here"))
        return;
    tide_req *late = sl->req;
    uint8_t *send = sl->send, *recv = sl->recv;
    post_once(rr, i);
    sl->late = late;
    sl->late_send = send;
    sl->late_recv = recv;
}

/* ---- checking one operation on one rank ---- */

static void check_moved(const struct slot *sl, int r, int n)
{
    const struct ccase *k = &sl->k;
    size_t es = tide_dtype_size(k->dtype), bb = k->count * es;
    switch (k->coll) {
    case C_BROADCAST:
        coll_check_pat(k, n, sl->recv, bb, 500, "broadcast buffer", k->root);
        return;
    case C_ALLGATHER:
        for (int p = 0; p < n; p++)
            coll_check_pat(k, n, sl->recv + (size_t)p * bb, bb, (unsigned)p, "block", p);
        return;
    case C_ALLGATHERV:
        for (int p = 0; p < n; p++)
            coll_check_pat(k, n, sl->recv + v_total(sl, n, p) * es, sl->counts[p] * es,
                           (unsigned)p, "block", p);
        return;
    case C_GATHER:
        for (int p = 0; r == k->root && p < n; p++)
            coll_check_pat(k, n, sl->recv + (size_t)p * bb, bb, (unsigned)p, "block", p);
        return;
    case C_SCATTER:
        coll_check_pat(k, n, sl->recv, bb, 1000u + (unsigned)r, "block", r);
        return;
    case C_ALLTOALL:
        for (int p = 0; p < n; p++)
            coll_check_pat(k, n, sl->recv + (size_t)p * bb, bb, 64u * (unsigned)p + (unsigned)r,
                           "block", p);
        return;
    default:
        return;
    }
}

static void check_result(const struct slot *sl)
{
    const struct ccase *k = &sl->k;
    int r = tide_comm_rank(sl->comm), n = tide_comm_size(sl->comm);
    switch (k->coll) {
    case C_ALLREDUCE:
        coll_check_reduced(k, n, sl->recv, 0, k->count);
        return;
    case C_REDUCE:
        if (r == k->root)
            coll_check_reduced(k, n, sl->recv, 0, k->count);
        return;
    case C_REDUCE_SCATTER:
        coll_check_reduced(k, n, sl->recv, (size_t)r * k->count, k->count);
        return;
    case C_REDUCE_SCATTERV:
        coll_check_reduced(k, n, sl->recv, v_total(sl, n, r), sl->counts[r]);
        return;
    default:
        check_moved(sl, r, n);
    }
}

/* The error op i may end with on world rank wr, given the job's fault
 * (0: it must succeed). */
static bool allowed(const struct job *j, int i, int wr, int rc)
{
    switch (j->fault) {
    case F_CRASH:
        return rc == (wr == j->frank ? TIDE_EABORTED : TIDE_EPEER);
    case F_STALL:
        return rc == TIDE_ETIMEDOUT;
    case F_MISMATCH:
        return i == j->fop && rc == TIDE_EMISMATCH;
    default:
        return false;
    }
}

/* Whether op i carries any data: an empty collective sends nothing,
 * so nobody can notice it mismatched (v counts can all be 0). */
static bool moves_data(const struct rank_run *rr, int i, int n)
{
    const struct slot *sl = &rr->s[i];
    if (sl->k.coll == C_ALLGATHERV || sl->k.coll == C_REDUCE_SCATTERV)
        return v_total(sl, n, n) > 0;
    return sl->k.count > 0;
}

static uint64_t hier_ran; /* hierarchical all-reduces that succeeded, on all ranks */
static uint64_t board_ran; /* board collectives that succeeded, on all ranks */
static uint64_t stream_ran; /* of which through the stream (collectives/board_stream.c) */

static void check_rank(struct rank_run *rr)
{
    const struct job *j = rr->job;
    int wr = tide_comm_rank(rr->world);
    harness_rank = wr;
    bool noticed = false;
    for (int i = 0; i < j->nops; i++) {
        struct slot *sl = &rr->s[i];
        if (!sl->comm || sl->rc)
            continue;
        int n = tide_comm_size(sl->comm);
        if (sl->late) {
            CHECK(tide_wait(sl->late, 0) == TIDE_EMISMATCH && i > j->fop,
                  "seed %llu: op %d (%s), posted after op %d, took a late report: %s",
                  (unsigned long long)j->seed, i, coll_describe(&sl->k, n), j->fop,
                  tide_req_message(sl->late));
            noticed = true;
            tide_req_free(sl->late);
            free(sl->late_send);
            free(sl->late_recv);
        }
        int rc = tide_wait(sl->req, 0); /* the network is idle: it is over */
        noticed |= i == j->fop && rc == TIDE_EMISMATCH;
        if (rc == TIDE_ETIMEDOUT && !tide_req_message(sl->req)[0])
            CHECK(false, "seed %llu: op %d (%s) never completed", (unsigned long long)j->seed, i,
                  coll_describe(&sl->k, n));
        else if (rc && !allowed(j, i, wr, rc))
            CHECK(false, "seed %llu: op %d (%s) failed: %s", (unsigned long long)j->seed, i,
                  coll_describe(&sl->k, n), tide_req_message(sl->req));
        else if (!rc)
            check_result(sl);
        hier_ran += !rc && !strcmp(tide_req_algorithm(sl->req), "hier");
        board_ran += !rc && (!strncmp(tide_req_algorithm(sl->req), "board", 5) ||
                             !strcmp(tide_req_algorithm(sl->req), "stream"));
        stream_ran += !rc && !strcmp(tide_req_algorithm(sl->req), "stream");
        tide_req_free(sl->req);
        free(sl->send);
        free(sl->recv);
    }
    /* A rank that only sent in the mismatched collective may have
     * finished it before the news came: then the world communicator
     * holds the report, since every call was posted before it came. */
    const char *late = "";
    if (j->fault == F_MISMATCH && !noticed && moves_data(rr, j->fop, j->n))
        CHECK(tide_comm_async_error(rr->world, &late) == TIDE_EMISMATCH,
              "seed %llu: rank %d never heard that rank %d called op %d with another dtype",
              (unsigned long long)j->seed, wr, j->frank, j->fop);
    else if (j->fault == F_MISMATCH)
        CHECK(tide_comm_async_error(rr->world, &late) == 0,
              "seed %llu: rank %d failed op %d and was also told late: %s",
              (unsigned long long)j->seed, wr, j->fop, late);
}

/* ---- running a job ---- */

/* A rank's programs under tide_sim_spawn: blocking calls allowed.  With
 * a fault the split runs first, alone, and the fault comes after it: a
 * split that fails on some ranks only leaves the others with a
 * communicator their peers never joined (as in MPI). */
static void split_program(tide_comm *world, void *arg)
{
    (void)arg;
    struct rank_run *rr = &runs[tide_comm_rank(world)];
    const struct job *j = rr->job;
    int r = tide_comm_rank(world);
    if (!j->sub)
        return;
    int rc = tide_comm_split(world, j->color[r], j->key[r], &rr->sub);
    harness_rank = r;
    CHECK(rc == 0, "seed %llu: tide_comm_split failed: %s", (unsigned long long)j->seed,
          tide_err_name(rc));
}

static void ops_program(tide_comm *world, void *arg)
{
    (void)arg;
    struct rank_run *rr = &runs[tide_comm_rank(world)];
    const struct job *j = rr->job;
    for (int i = 0; i < j->nops; i++)
        post_op(rr, i);
    /* Wait in reverse order: completion must not depend on it. */
    for (int i = j->nops - 1; i >= 0; i--)
        if (rr->s[i].req)
            tide_wait(rr->s[i].req, -1);
}

static void program(tide_comm *world, void *arg)
{
    split_program(world, arg);
    ops_program(world, arg);
}

/* Sub-communicators without communication: each rank's colour group. */
static void make_groups(const struct job *j, tide_comm **world)
{
    for (int r = 0; r < j->n; r++) {
        int members[MAXN], k = 0;
        for (int p = 0; p < j->n; p++)
            if (j->color[p] == j->color[r])
                members[k++] = p;
        runs[r].sub = NULL;
        if (j->color[r] != TIDE_UNDEFINED &&
            tide_comm_create_group(world[r], members, k, &runs[r].sub)) {
            harness_rank = r;
            CHECK(false, "seed %llu: tide_comm_create_group failed", (unsigned long long)j->seed);
        }
    }
}

static void inject(tide_sim *sim, const struct job *j)
{
    if (j->fault == F_CRASH)
        tide_sim_crash(sim, j->frank, j->after);
    if (j->fault == F_STALL)
        tide_sim_stall(sim, j->frank, j->fpeer, 0, 100 * j->cfg.timeout_s);
}

static void run_job(const struct job *j)
{
    tide_comm *world[MAXN];
    tide_sim *sim;
    int before = coll_failed_checks;
    if (tide_sim_create(j->n, &j->cfg, &sim, world)) {
        fprintf(stderr, "seed %llu: tide_sim_create failed\n", (unsigned long long)j->seed);
        exit(2);
    }
    for (int r = 0; r < j->n; r++)
        runs[r] = (struct rank_run){.job = j, .world = world[r]};
    if (j->spawn && j->fault != F_NONE) {
        tide_sim_spawn(sim, split_program, NULL);
        inject(sim, j);
        tide_sim_spawn(sim, ops_program, NULL);
    } else if (j->spawn) {
        tide_sim_spawn(sim, program, NULL);
    } else {
        if (j->sub)
            make_groups(j, world);
        inject(sim, j);
        for (int r = j->n - 1; r >= 0; r--) /* not in rank order, on purpose */
            for (int i = 0; i < j->nops; i++)
                post_op(&runs[r], i);
    }
    /* Programs return once their own waits end: deliver what is still on
     * the wire (a late report of a mismatch) before the checks. */
    tide_sim_run(sim);
    for (int r = 0; r < j->n; r++) {
        check_rank(&runs[r]);
        tide_comm_free(runs[r].sub);
    }
    tide_sim_destroy(sim);
    if (coll_failed_checks > before) {
        failures++;
        fprintf(stderr, "FAILED: reproduce with: TIDE_SIM_SEED=%llu%s%s %s\n",
                (unsigned long long)j->seed, j->fault != F_NONE ? " TIDE_SIM_FAULTS=1" : "",
                two_ranks ? " TIDE_SIM_TWO=1" : "", "build/tests/test_sim_fuzz");
        coll_failed_checks = before; /* count each seed once, keep printing */
    }
}

static void describe(const struct job *j)
{
    printf("seed %llu: %d ranks (%d a host), %s, %d ops%s, staging slots of %zu bytes%s, "
           "fault %s (rank %d, peer %d, after %llu, op %d)\n",
           (unsigned long long)j->seed, j->n, j->cfg.ranks_per_host,
           j->spawn ? "programs" : "posted", j->nops, j->sub ? ", sub-communicators" : "",
           j->cfg.stage_slot_bytes, j->cfg.boards ? " and boards" : "", fault_names[j->fault],
           j->frank, j->fpeer, (unsigned long long)j->after, j->fop);
    for (int i = 0; i < j->nops; i++)
        printf("  op %d%s%s: %s\n", i, j->ops[i].on_sub ? " on the sub-communicator" : "",
               j->ops[i].in_place ? " in place" : "", coll_describe(&j->ops[i].k, j->n));
}

int main(int argc, char **argv)
{
    bool faults = getenv("TIDE_SIM_FAULTS") && atoi(getenv("TIDE_SIM_FAULTS"));
    two_ranks = getenv("TIDE_SIM_TWO") && atoi(getenv("TIDE_SIM_TWO"));
    uint64_t first = 1, count = 10000;
    double long_s = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--faults"))
            faults = true;
        else if (!strcmp(argv[a], "--two"))
            two_ranks = true;
        else if (!strcmp(argv[a], "--seeds") && a + 1 < argc)
            count = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--first") && a + 1 < argc)
            first = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--long") && a + 1 < argc)
            long_s = atof(argv[++a]);
        else {
            fprintf(stderr,
                    "usage: %s [--faults] [--two] [--seeds N] [--first S] [--long SECONDS]\n",
                    argv[0]);
            return 2;
        }
    }
    const char *one = getenv("TIDE_SIM_SEED");
    struct job j;
    if (one) {
        make_job(strtoull(one, NULL, 10), faults, &j);
        describe(&j);
        run_job(&j);
        return failures ? 1 : 0;
    }
    for (size_t i = 0; i < sizeof regressions / sizeof regressions[0]; i++) {
        if (regressions[i].faults != faults || two_ranks)
            continue;
        make_job(regressions[i].seed, faults, &j);
        run_job(&j);
    }
    time_t end = time(NULL) + (time_t)long_s;
    uint64_t ran = 0;
    for (uint64_t seed = first; long_s > 0 ? time(NULL) < end : seed < first + count; seed++) {
        make_job(seed, faults, &j);
        run_job(&j);
        ran++;
    }
    printf("%llu %s%s schedules from seed %llu: %d failed; %llu hierarchical all-reduces and "
           "%llu board collectives (%llu through the stream) ran\n",
           (unsigned long long)ran, faults ? "fault" : "fault-free", two_ranks ? " 2-rank" : "",
           (unsigned long long)first,
           failures, (unsigned long long)hier_ran, (unsigned long long)board_ran,
           (unsigned long long)stream_ran);
    /* A run long enough to have drawn even hosts and boards must have
     * run some of each: one never chosen would leave its state machines
     * unfuzzed. */
    if (two_ranks && ran >= 100 && stream_ran == 0) {
        fprintf(stderr, "no stream collective ran in %llu 2-rank schedules\n",
                (unsigned long long)ran);
        return 1;
    }
    if (!two_ranks && ran >= 1000 && (hier_ran == 0 || board_ran == 0)) {
        fprintf(stderr, "no %s ran in %llu schedules\n",
                hier_ran ? "board collective" : "hierarchical all-reduce", (unsigned long long)ran);
        return 1;
    }
    return failures ? 1 : 0;
}
