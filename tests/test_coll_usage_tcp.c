/* test_coll_usage_tcp.c - the collectives used the way a program uses
 * them, over real loopback TCP rank processes, through the public API
 * only: thousands of requests of every collective in flight waited out
 * of order, on one communicator and across three, large ones interleaved
 * on the same links, subgroups (split, ties in its key, create_group, free
 * with a request pending) beside their parent, and bad arguments rejected
 * at the call with nothing sent.  Each runs in both progress modes.
 *
 * Results are checked against the references of tests/coll_check.c; the
 * collective x algorithm x dtype matrix is test_collectives_tcp.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/coll_check.h"

/* ---- thousands in flight ---- */

/* Every collective, small: BLK elements per block, at most 2 blocks per
 * rank in a v form, so SLOT elements hold any result on up to 8 ranks. */
enum { BLK = 2, SLOT = 16, UNSET = -7777777 };

enum kind {
    K_ALLREDUCE_SUM, K_ALLREDUCE_MAX, K_ALLGATHER, K_BROADCAST, K_REDUCE, K_GATHER, K_SCATTER,
    K_ALLTOALL, K_BARRIER, K_ALLGATHERV, K_REDUCE_SCATTERV, K_REDUCE_SCATTER, KINDS
};

static const char *const kind_names[KINDS] = {
    "allreduce(sum)", "allreduce(max)", "allgather", "broadcast", "reduce", "gather", "scatter",
    "alltoall", "barrier", "allgatherv", "reduce_scatterv", "reduce_scatter"};

struct slot {
    int32_t in[SLOT], out[SLOT];
    tide_req *req;
    const char *where; /* which communicator, for messages */
    int i, kind, rank, size;
};

/* Element j of who's input to collective i: distinct for every (who, j)
 * within one i, half of them negative so MAX and MIN pick different
 * ranks for different elements. */
static int32_t val(int i, int who, int j)
{
    int32_t v = i * 1024 + who * 32 + j;
    return j % 2 ? -v : v;
}

/* The root of collective i: every root for every kind, since i / KINDS
 * runs through all values for the i of one kind. */
static int root_of(int i, int n)
{
    return (i + i / KINDS) % n;
}

/* Both ops for the i of one kind: i % 2 would be the same for all of
 * them (KINDS is even). */
static tide_op reduce_op(int i)
{
    return i / KINDS % 2 ? TIDE_MIN : TIDE_SUM;
}

/* The v forms' per-rank counts (0, 1 or 2, the same on every rank; each
 * pattern for the i of one kind) and their offsets. */
static void v_counts(int i, int kind, int n, size_t *counts, size_t *offs)
{
    offs[0] = 0;
    for (int p = 0; p < n; p++) {
        counts[p] = (size_t)((i / KINDS + p * (kind == K_ALLGATHERV ? 1 : 2)) % 3);
        offs[p + 1] = offs[p] + counts[p];
    }
}

/* Element j of op over every rank's input to collective i, computed here
 * (not by the library) as the reference. */
static int32_t reduced(int i, int n, int j, tide_op op)
{
    int32_t acc = val(i, 0, j);
    for (int p = 1; p < n; p++) {
        int32_t v = val(i, p, j);
        if (op == TIDE_SUM)
            acc += v;
        else if (op == TIDE_MAX ? v > acc : v < acc)
            acc = v;
    }
    return acc;
}

static void fill(int32_t *p, size_t len, int i, int who)
{
    for (size_t j = 0; j < len; j++)
        p[j] = val(i, who, (int)j);
}

static int post_reducing(tide_comm *comm, struct slot *s)
{
    int i = s->i, r = s->rank, n = s->size;
    size_t counts[MAXN], offs[MAXN + 1];
    switch (s->kind) {
    case K_ALLREDUCE_SUM:
    case K_ALLREDUCE_MAX:
        fill(s->in, BLK, i, r);
        return tide_iallreduce(comm, s->in, s->out, BLK, TIDE_INT32,
                               s->kind == K_ALLREDUCE_SUM ? TIDE_SUM : TIDE_MAX, &s->req);
    case K_REDUCE:
        fill(s->in, BLK, i, r);
        return tide_ireduce(comm, s->in, s->out, BLK, TIDE_INT32, reduce_op(i), root_of(i, n),
                            &s->req);
    case K_REDUCE_SCATTER:
        fill(s->in, (size_t)n * BLK, i, r);
        return tide_ireduce_scatter(comm, s->in, s->out, BLK, TIDE_INT32, TIDE_SUM, &s->req);
    default:
        v_counts(i, K_REDUCE_SCATTERV, n, counts, offs);
        fill(s->in, offs[n], i, r);
        return tide_ireduce_scatterv(comm, s->in, s->out, counts, TIDE_INT32, TIDE_SUM, &s->req);
    }
}

/* Scatter: only the root's blocks hold values (block p is val(i, p, .)),
 * so a block taken from another rank shows as UNSET. */
static int post_moving(tide_comm *comm, struct slot *s)
{
    int i = s->i, r = s->rank, n = s->size, root = root_of(i, n);
    size_t counts[MAXN], offs[MAXN + 1];
    switch (s->kind) {
    case K_ALLGATHER:
        fill(s->in, BLK, i, r);
        return tide_iallgather(comm, s->in, s->out, BLK, TIDE_INT32, &s->req);
    case K_ALLGATHERV:
        v_counts(i, K_ALLGATHERV, n, counts, offs);
        fill(s->in, counts[r], i, r);
        return tide_iallgatherv(comm, s->in, s->out, counts, TIDE_INT32, &s->req);
    case K_BROADCAST:
        if (r == root)
            fill(s->out, BLK, i, r);
        return tide_ibroadcast(comm, s->out, BLK, TIDE_INT32, root, &s->req);
    case K_GATHER:
        fill(s->in, BLK, i, r);
        return tide_igather(comm, s->in, s->out, BLK, TIDE_INT32, root, &s->req);
    case K_SCATTER:
        for (int p = 0; p < n && r == root; p++)
            fill(s->in + p * BLK, BLK, i, p);
        return tide_iscatter(comm, s->in, s->out, BLK, TIDE_INT32, root, &s->req);
    case K_ALLTOALL: /* block p of rank r: val(i, 8r + p, .) */
        for (int p = 0; p < n; p++)
            fill(s->in + p * BLK, BLK, i, 8 * r + p);
        return tide_ialltoall(comm, s->in, s->out, BLK, TIDE_INT32, &s->req);
    default:
        return tide_ibarrier(comm, &s->req);
    }
}

static void post_slot(tide_comm *comm, const char *where, struct slot *s, int i, int kind)
{
    *s = (struct slot){.where = where, .i = i, .kind = kind};
    s->rank = tide_comm_rank(comm);
    s->size = tide_comm_size(comm);
    EXPECT(s->size * BLK <= SLOT, "a slot holds results of up to %d ranks", SLOT / BLK);
    for (int j = 0; j < SLOT; j++)
        s->in[j] = s->out[j] = UNSET;
    bool reduces = kind == K_ALLREDUCE_SUM || kind == K_ALLREDUCE_MAX || kind == K_REDUCE ||
                   kind == K_REDUCE_SCATTER || kind == K_REDUCE_SCATTERV;
    int rc = reduces ? post_reducing(comm, s) : post_moving(comm, s);
    EXPECT(rc == 0, "%s #%d on %s: %s", kind_names[kind], i, where, tide_err_name(rc));
}

/* What s->out must hold: the result where the collective puts one, UNSET
 * everywhere else (a write past the result, or at a non-root, shows). */
static void expected(const struct slot *s, int32_t *want)
{
    int i = s->i, r = s->rank, n = s->size, root = root_of(i, n);
    size_t counts[MAXN], offs[MAXN + 1];
    for (int j = 0; j < SLOT; j++)
        want[j] = UNSET;
    if (s->kind == K_ALLGATHERV || s->kind == K_REDUCE_SCATTERV)
        v_counts(i, s->kind, n, counts, offs);
    for (int j = 0; j < BLK; j++) {
        if (s->kind == K_ALLREDUCE_SUM || s->kind == K_ALLREDUCE_MAX)
            want[j] = reduced(i, n, j, s->kind == K_ALLREDUCE_SUM ? TIDE_SUM : TIDE_MAX);
        else if (s->kind == K_REDUCE && r == root)
            want[j] = reduced(i, n, j, reduce_op(i));
        else if (s->kind == K_REDUCE_SCATTER)
            want[j] = reduced(i, n, r * BLK + j, TIDE_SUM);
        else if (s->kind == K_REDUCE_SCATTERV && (size_t)j < counts[r])
            want[j] = reduced(i, n, (int)offs[r] + j, TIDE_SUM);
        else if (s->kind == K_BROADCAST)
            want[j] = val(i, root, j);
        else if (s->kind == K_SCATTER)
            want[j] = val(i, r, j);
        for (int p = 0; p < n; p++) {
            if (s->kind == K_ALLGATHER || (s->kind == K_GATHER && r == root))
                want[p * BLK + j] = val(i, p, j);
            else if (s->kind == K_ALLGATHERV && (size_t)j < counts[p])
                want[offs[p] + (size_t)j] = val(i, p, j);
            else if (s->kind == K_ALLTOALL)
                want[p * BLK + j] = val(i, 8 * p + r, j);
        }
    }
}

static void wait_slot(struct slot *s)
{
    int rc = tide_wait(s->req, -1);
    EXPECT(rc == 0, "%s #%d on %s: tide_wait returned %s: %s", kind_names[s->kind], s->i,
           s->where, tide_err_name(rc), tide_req_message(s->req));
    tide_req_free(s->req);
    int32_t want[SLOT];
    expected(s, want);
    for (int j = 0; j < SLOT; j++)
        if (s->out[j] != want[j]) {
            CHECK(false, "%s #%d on %s (rank %d of %d): element %d is %d, want %d",
                  kind_names[s->kind], s->i, s->where, s->rank, s->size, j, s->out[j], want[j]);
            return;
        }
}

/* A Fisher-Yates shuffle of order[0..len) with this rank's own stream. */
static void shuffle(int *order, int len, uint64_t *rng)
{
    for (int i = len - 1; i > 0; i--) {
        int j = (int)(coll_next_rand(rng) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
}

/* Large collectives of several kinds in flight together (their chunks
 * interleave on the same links), waited in reverse order. */
static void big_in_flight(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    enum { K = 5, COUNT = 300000 };
    struct ccase k[K] = {
        {C_ALLREDUCE, TIDE_FLOAT32, TIDE_SUM, COUNT, 0, L_SEPARATE, false, 1},
        {C_ALLREDUCE, TIDE_INT32, TIDE_MAX, COUNT, 0, L_SEPARATE, false, 2},
        {C_BROADCAST, TIDE_FLOAT32, TIDE_SUM, COUNT, n - 1, L_SEPARATE, false, 3},
        {C_ALLGATHER, TIDE_FLOAT32, TIDE_SUM, COUNT / 4, 0, L_SEPARATE, false, 4},
        {C_REDUCE_SCATTER, TIDE_INT8, TIDE_SUM, COUNT / 2, 0, L_SEPARATE, false, 5},
    };
    uint8_t *in[K], *out[K];
    tide_req *req[K];
    for (int i = 0; i < K; i++) {
        size_t blocks = k[i].coll == C_ALLGATHER || k[i].coll == C_REDUCE_SCATTER ? (size_t)n : 1;
        size_t bytes = k[i].count * blocks * tide_dtype_size(k[i].dtype);
        in[i] = coll_alloc_guarded(bytes);
        out[i] = coll_alloc_guarded(bytes);
        if (k[i].coll == C_BROADCAST && r == k[i].root)
            coll_fill_pat(out[i], bytes, 500 + (unsigned)k[i].root, k[i].salt);
        else if (k[i].coll == C_ALLGATHER)
            coll_fill_pat(in[i], k[i].count * 4, (unsigned)r, k[i].salt);
        else
            coll_fill_input(&k[i], r, in[i], 0, k[i].count * blocks);
    }
    EXPECT_OK(tide_iallreduce(comm, in[0], out[0], COUNT, TIDE_FLOAT32, TIDE_SUM, &req[0]));
    EXPECT_OK(tide_iallreduce(comm, in[1], out[1], COUNT, TIDE_INT32, TIDE_MAX, &req[1]));
    EXPECT_OK(tide_ibroadcast(comm, out[2], COUNT, TIDE_FLOAT32, n - 1, &req[2]));
    EXPECT_OK(tide_iallgather(comm, in[3], out[3], COUNT / 4, TIDE_FLOAT32, &req[3]));
    EXPECT_OK(tide_ireduce_scatter(comm, in[4], out[4], COUNT / 2, TIDE_INT8, TIDE_SUM, &req[4]));
    for (int i = K - 1; i >= 0; i--) {
        coll_await(&k[i], n, req[i]);
        if (k[i].coll == C_BROADCAST)
            coll_check_pat(&k[i], n, out[i], COUNT * 4, 500 + (unsigned)k[i].root, "buffer", 0);
        for (int p = 0; k[i].coll == C_ALLGATHER && p < n; p++)
            coll_check_pat(&k[i], n, out[i] + (size_t)p * k[i].count * 4, k[i].count * 4,
                           (unsigned)p, "block", p);
        if (coll_families[k[i].coll].reduces)
            coll_check_reduced(&k[i], n, out[i],
                               k[i].coll == C_ALLREDUCE ? 0 : (size_t)r * k[i].count,
                               k[i].count);
        free(in[i]);
        free(out[i]);
    }
}

/* 2000 allreduces waited in reverse order, then 2000 of every kind mixed,
 * waited in an order of each rank's own; then a few large ones together. */
static void in_flight_body(tide_comm *comm, void *arg)
{
    enum { N = 2000 };
    int r = tide_comm_rank(comm), order[N];
    struct slot *s = calloc(N, sizeof *s);
    EXPECT(s, "calloc");
    for (int i = 0; i < N; i++)
        post_slot(comm, "world", &s[i], i, K_ALLREDUCE_SUM);
    for (int i = N - 1; i >= 0; i--)
        wait_slot(&s[i]);
    uint64_t rng = 0x1234567u + (uint64_t)r * 7919u;
    for (int i = 0; i < N; i++) {
        order[i] = i;
        post_slot(comm, "world", &s[i], i, i % KINDS);
    }
    shuffle(order, N, &rng);
    for (int i = 0; i < N; i++)
        wait_slot(&s[order[i]]);
    free(s);
    big_in_flight(comm);
    EXPECT_OK(tide_barrier(comm));
    coll_end_of_body();
}

/* The world, the world in reverse (a split) and a group without rank 0
 * (all ranks on two), with PER collectives of every kind posted on each.
 * Each rank posts each communicator's collectives in the same order but
 * interleaves the communicators in an order of its own, so frames of
 * three communicators share the links in a different order on every
 * rank; then it waits all of them in a random order. */
static void comms_in_flight_body(tide_comm *comm, void *arg)
{
    enum { NC = 3, PER = 1000 };
    static const char *const names[NC] = {"world", "reversed world", "group without 0"};
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), members[MAXN], m = 0;
    tide_comm *c[NC] = {comm, NULL, NULL};
    EXPECT_OK(tide_comm_split(comm, 0, -r, &c[1]));
    EXPECT(c[1] && tide_comm_rank(c[1]) == n - 1 - r, "the reversed world");
    for (int p = n > 2 ? 1 : 0; p < n; p++)
        members[m++] = p;
    if (r >= members[0])
        EXPECT_OK(tide_comm_create_group(comm, members, m, &c[2]));
    struct slot *s = calloc(NC * PER, sizeof *s);
    int *order = malloc(NC * PER * sizeof *order), next[NC] = {0}, posted = 0;
    EXPECT(s && order, "calloc");
    uint64_t rng = 0x9e3779b9u + (uint64_t)r * 104729u;
    for (int x = 0; x < NC; x++)
        next[x] = c[x] ? 0 : PER; /* nothing to post on a group we are not in */
    while (next[0] < PER || next[1] < PER || next[2] < PER) {
        int x = (int)(coll_next_rand(&rng) % NC);
        if (next[x] == PER)
            continue;
        int i = next[x]++;
        post_slot(c[x], names[x], &s[x * PER + i], i, (i + x) % KINDS);
        order[posted++] = x * PER + i;
    }
    shuffle(order, posted, &rng);
    for (int i = 0; i < posted; i++)
        wait_slot(&s[order[i]]);
    free(s);
    free(order);
    EXPECT_OK(tide_comm_free(c[1]));
    if (c[2])
        EXPECT_OK(tide_comm_free(c[2]));
    EXPECT_OK(tide_barrier(comm));
    coll_end_of_body();
}

/* ---- subgroups ---- */

static int32_t sum_allreduce(tide_comm *comm, int32_t v)
{
    int32_t out = 0;
    EXPECT_OK(tide_allreduce(comm, &v, &out, 1, TIDE_INT32, TIDE_SUM));
    return out;
}

/* Split by parity, key -r: the highest rank of each parity comes first. */
static tide_comm *split_by_parity(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), size = 0, rank = 0;
    tide_comm *sub = NULL;
    EXPECT_OK(tide_comm_split(comm, r % 2, -r, &sub));
    EXPECT(sub, "tide_comm_split gave NULL for color %d", r % 2);
    for (int p = r % 2; p < n; p += 2) {
        size++;
        rank += p > r;
    }
    EXPECT(tide_comm_size(sub) == size && tide_comm_rank(sub) == rank,
           "split by parity: rank %d of %d, want %d of %d", tide_comm_rank(sub),
           tide_comm_size(sub), rank, size);
    return sub;
}

/* Post on the subgroup and on the parent, in an order that differs by
 * rank, then wait both. */
static void sub_and_parent_in_flight(tide_comm *comm, tide_comm *sub)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int32_t in = r + 1, out_sub = 0, out_all = 0, want_sub = 0, b[2] = {0, 0};
    tide_req *rs, *ra, *rb;
    for (int p = r % 2; p < n; p += 2)
        want_sub += p + 1;
    if (tide_comm_rank(sub) == 0)
        b[0] = 77, b[1] = r;
    int top = r % 2 + ((n - 1 - r % 2) / 2) * 2; /* the sub's rank 0: its highest */
    for (int round = 0; round < 2; round++) {
        if ((r + round) % 2) {
            EXPECT_OK(tide_iallreduce(sub, &in, &out_sub, 1, TIDE_INT32, TIDE_SUM, &rs));
            EXPECT_OK(tide_ibroadcast(sub, b, 2, TIDE_INT32, 0, &rb));
            EXPECT_OK(tide_iallreduce(comm, &in, &out_all, 1, TIDE_INT32, TIDE_SUM, &ra));
        } else {
            EXPECT_OK(tide_iallreduce(comm, &in, &out_all, 1, TIDE_INT32, TIDE_SUM, &ra));
            EXPECT_OK(tide_iallreduce(sub, &in, &out_sub, 1, TIDE_INT32, TIDE_SUM, &rs));
            EXPECT_OK(tide_ibroadcast(sub, b, 2, TIDE_INT32, 0, &rb));
        }
        EXPECT_OK(tide_wait(ra, -1));
        EXPECT_OK(tide_wait(rb, -1));
        EXPECT_OK(tide_wait(rs, -1));
        tide_req_free(ra), tide_req_free(rb), tide_req_free(rs);
        CHECK(out_sub == want_sub && out_all == n * (n + 1) / 2,
              "in flight together: sub sum %d (want %d), parent sum %d (want %d)", out_sub,
              want_sub, out_all, n * (n + 1) / 2);
        CHECK(b[0] == 77 && b[1] == top, "sub broadcast from its rank 0: %d %d, want 77 %d", b[0],
              b[1], top);
    }
}

/* Unsorted with duplicates; a non-member and a rank outside get EINVAL. */
static void create_group_cases(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int ranks[] = {n - 1, 0, n - 1, 1 % n, 0}, bad1[] = {0, n}, bad2[] = {-1, 0};
    bool member = r == 0 || r == 1 || r == n - 1;
    int size = 1 + (n > 1) + (n > 2), rank = r == 0 ? 0 : r == 1 ? 1 : size - 1;
    tide_comm *g = NULL;
    int rc = tide_comm_create_group(comm, ranks, 5, &g);
    if (!member) {
        CHECK(rc == TIDE_EINVAL && !g, "create_group as a non-member returned %s",
              tide_err_name(rc));
    } else {
        EXPECT(rc == 0 && g, "create_group returned %s", tide_err_name(rc));
        EXPECT(tide_comm_size(g) == size && tide_comm_rank(g) == rank,
               "create_group: rank %d of %d, want %d of %d", tide_comm_rank(g),
               tide_comm_size(g), rank, size);
        int32_t want = 1 + (n > 1 ? 2 : 0) + (n > 2 ? n : 0);
        CHECK(sum_allreduce(g, r + 1) == want, "sum over the created group");
        EXPECT_OK(tide_comm_free(g));
    }
    g = NULL;
    rc = tide_comm_create_group(comm, bad1, 2, &g);
    CHECK(rc == TIDE_EINVAL && !g, "create_group with rank %d returned %s", n, tide_err_name(rc));
    rc = tide_comm_create_group(comm, bad2, 2, &g);
    CHECK(rc == TIDE_EINVAL && !g, "create_group with rank -1 returned %s", tide_err_name(rc));
}

/* ---- split with equal keys ---- */

/* The new rank MPI_Comm_split gives parent rank me: among the ranks of
 * its color, those with a lower key, or an equal key and a lower parent
 * rank, come first.  Written out here rather than sorted, to be a
 * reference independent of the library's qsort. */
static int split_rank_ref(const int *color, const int *key, int n, int me)
{
    int rank = 0;
    for (int p = 0; p < n; p++)
        rank += p != me && color[p] == color[me] &&
                (key[p] < key[me] || (key[p] == key[me] && p < me));
    return rank;
}

/* Split comm with color[p] and key[p] for its rank p; CHECK this rank's
 * place and that an allgather of parent ranks on the new communicator
 * lists them in MPI's order. */
static void split_and_check(tide_comm *comm, const int *color, const int *key, const char *what)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), size = 0;
    int32_t want[MAXN], got[MAXN], mine = r;
    tide_comm *sub = comm; /* must become NULL or a new communicator */
    EXPECT_OK(tide_comm_split(comm, color[r], key[r], &sub));
    if (color[r] == TIDE_UNDEFINED) {
        CHECK(sub == NULL, "split %s: TIDE_UNDEFINED gave a communicator", what);
        return;
    }
    EXPECT(sub && sub != comm, "split %s gave no communicator", what);
    for (int p = 0; p < n; p++)
        if (color[p] == color[r]) {
            want[split_rank_ref(color, key, n, p)] = p;
            size++;
        }
    int rank = split_rank_ref(color, key, n, r);
    CHECK(tide_comm_size(sub) == size && tide_comm_rank(sub) == rank,
          "split %s: rank %d of %d, want %d of %d", what, tide_comm_rank(sub), tide_comm_size(sub),
          rank, size);
    EXPECT(tide_comm_size(sub) <= n, "split %s: a group larger than its parent", what);
    EXPECT_OK(tide_allgather(sub, &mine, got, 1, TIDE_INT32));
    for (int q = 0; q < size; q++)
        CHECK(got[q] == want[q], "split %s: new rank %d is parent rank %d, want %d", what, q,
              got[q], want[q]);
    EXPECT_OK(tide_comm_free(sub));
}

/* Ties in key go by rank in the parent: all keys equal, pairs of equal
 * keys in descending order, equal keys within colors, equal keys beside
 * a rank that joins none, and equal keys in a parent whose order is not
 * the world's (the reversed world: ties then go against world order). */
static void split_ties(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), color[MAXN] = {0}, key[MAXN] = {0};
    for (int p = 0; p < n; p++)
        color[p] = 0, key[p] = 4;
    split_and_check(comm, color, key, "all keys equal");
    for (int p = 0; p < n; p++)
        key[p] = (n - 1 - p) / 2;
    split_and_check(comm, color, key, "pairs of equal keys, descending");
    for (int p = 0; p < n; p++)
        color[p] = p % 2, key[p] = 5;
    split_and_check(comm, color, key, "equal keys within two colors");
    for (int p = 0; p < n; p++)
        color[p] = p == n / 2 ? TIDE_UNDEFINED : 3, key[p] = -(p % 2);
    split_and_check(comm, color, key, "odd ranks first, one rank undefined");
    tide_comm *rev = NULL;
    EXPECT_OK(tide_comm_split(comm, 1, n - r, &rev));
    EXPECT(rev && tide_comm_rank(rev) == n - 1 - r, "the reversed world");
    for (int p = 0; p < n; p++)
        color[p] = 0, key[p] = p % 3 == 2;
    split_and_check(rev, color, key, "of the reversed world, keys 0 0 1 0 0 1 ...");
    EXPECT_OK(tide_comm_free(rev));
}

static void subgroup_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    /* the split follows a collective still pending on comm */
    int32_t pin = r + 1, pout = 0;
    tide_req *pending;
    EXPECT_OK(tide_iallreduce(comm, &pin, &pout, 1, TIDE_INT32, TIDE_SUM, &pending));
    tide_comm *sub = split_by_parity(comm);
    EXPECT_OK(tide_wait(pending, -1));
    tide_req_free(pending);
    CHECK(pout == n * (n + 1) / 2, "allreduce pending across the split: %d", pout);
    struct plan pl = {3, false, false};
    unsigned salt = 7;
    coll_run_small_cases(sub, &pl, &salt); /* roots and blocks in sub's ranks */
    sub_and_parent_in_flight(comm, sub);
    /* TIDE_UNDEFINED joins none */
    tide_comm *rest = (tide_comm *)&salt;
    EXPECT_OK(tide_comm_split(comm, r == n - 1 ? TIDE_UNDEFINED : 5, r, &rest));
    if (r == n - 1)
        CHECK(rest == NULL, "TIDE_UNDEFINED gave a communicator");
    else {
        EXPECT(rest && tide_comm_size(rest) == n - 1 && tide_comm_rank(rest) == r, "rest");
        CHECK(sum_allreduce(rest, 1) == n - 1, "sum over the rest");
        EXPECT_OK(tide_comm_free(rest));
    }
    create_group_cases(comm);
    split_ties(comm);
    /* freed with a request pending: it still completes */
    size_t count = 100000;
    int32_t *in = malloc(count * 4), *out = malloc(count * 4);
    EXPECT(in && out, "malloc");
    for (size_t i = 0; i < count; i++)
        in[i] = (int32_t)i + r;
    tide_req *req;
    int m = tide_comm_size(sub);
    EXPECT_OK(tide_iallreduce(sub, in, out, count, TIDE_INT32, TIDE_MAX, &req));
    EXPECT_OK(tide_comm_free(sub));
    EXPECT_OK(tide_wait(req, -1));
    tide_req_free(req);
    int top = r % 2 + ((n - 1 - r % 2) / 2) * 2;
    for (size_t i = 0; i < count; i++)
        if (out[i] != (int32_t)i + top) {
            CHECK(false, "allreduce pending at tide_comm_free (sub of %d): element %zu is %d", m,
                  i, out[i]);
            break;
        }
    free(in);
    free(out);
    EXPECT_OK(tide_barrier(comm));
    coll_end_of_body();
}

/* ---- bad arguments: EINVAL at the call, nothing sent ---- */

#define BAD(call)                                                                       \
    do {                                                                                \
        int rc_ = (call);                                                               \
        CHECK(rc_ == TIDE_EINVAL, "%s returned %s, want TIDE_EINVAL", #call,            \
              tide_err_name(rc_));                                                      \
    } while (0)

/* NULL buffers with a count, and an unknown dtype, for every collective. */
static void bad_buffers_and_dtypes(tide_comm *comm, const size_t *counts)
{
    int r = tide_comm_rank(comm);
    int32_t a[64] = {0}, b[64] = {0};
    const tide_dtype dt = (tide_dtype)99, i32 = TIDE_INT32;
    const tide_op sum = TIDE_SUM;
    tide_req *q;
    BAD(tide_iallreduce(comm, NULL, b, 4, i32, sum, &q));
    BAD(tide_iallreduce(comm, a, NULL, 4, i32, sum, &q));
    BAD(tide_allreduce(comm, NULL, b, 4, i32, sum));
    BAD(tide_ibroadcast(comm, NULL, 4, i32, 0, &q));
    BAD(tide_ireduce(comm, NULL, b, 4, i32, sum, 0, &q));
    if (r == 0)
        BAD(tide_ireduce(comm, a, NULL, 4, i32, sum, 0, &q));
    BAD(tide_iallgather(comm, NULL, b, 4, i32, &q));
    BAD(tide_iallgather(comm, a, NULL, 4, i32, &q));
    BAD(tide_iallgatherv(comm, NULL, b, counts, i32, &q));
    BAD(tide_ireduce_scatter(comm, NULL, b, 4, i32, sum, &q));
    BAD(tide_ireduce_scatterv(comm, a, NULL, counts, i32, sum, &q));
    BAD(tide_igather(comm, NULL, b, 4, i32, 0, &q));
    BAD(tide_iscatter(comm, a, NULL, 4, i32, 0, &q));
    BAD(tide_ialltoall(comm, NULL, b, 4, i32, &q));
    /* bitwise ops are for integers only */
    BAD(tide_iallreduce(comm, a, b, 4, TIDE_FLOAT32, TIDE_BAND, &q));
    BAD(tide_ireduce(comm, a, b, 2, TIDE_FLOAT64, TIDE_BXOR, 0, &q));
    BAD(tide_ireduce_scatter(comm, a, b, 1, TIDE_BFLOAT16, TIDE_BOR, &q));
    /* unknown dtype */
    BAD(tide_iallreduce(comm, a, b, 4, dt, sum, &q));
    BAD(tide_ibroadcast(comm, a, 4, dt, 0, &q));
    BAD(tide_ireduce(comm, a, b, 4, dt, sum, 0, &q));
    BAD(tide_iallgather(comm, a, b, 4, dt, &q));
    BAD(tide_iallgatherv(comm, a, b, counts, dt, &q));
    BAD(tide_ireduce_scatter(comm, a, b, 1, dt, sum, &q));
    BAD(tide_ireduce_scatterv(comm, a, b, counts, dt, sum, &q));
    BAD(tide_igather(comm, a, b, 4, dt, 0, &q));
    BAD(tide_iscatter(comm, a, b, 4, dt, 0, &q));
    BAD(tide_ialltoall(comm, a, b, 4, dt, &q));
    BAD(tide_iallreduce(comm, a, b, 4, (tide_dtype)-1, sum, &q));
    /* Counts whose total does not fit a size_t, past it or onto it: a
     * clear EINVAL (was ENOMEM), and nothing left allocated (24 bytes
     * leaked a call; LeakSanitizer checks that under ASan). */
    size_t huge[64];
    int n = tide_comm_size(comm);
    for (int k = 0; k < 2; k++) {
        for (int p = 0; p < n; p++)
            huge[p] = p == 0 ? SIZE_MAX / 2 : (k ? SIZE_MAX / 2 + 1 : SIZE_MAX);
        BAD(tide_iallgatherv(comm, a, b, huge, i32, &q));
        BAD(tide_ireduce_scatterv(comm, a, b, huge, i32, sum, &q));
    }
}

/* NULL where a buffer must be given, on one rank alone (the root, where
 * only the root's buffer is read), each followed by the same collective
 * with good buffers on every rank, checked against coll_check.c's
 * reference.  A rejected call that still sent a frame or took a sequence
 * number would leave that rank out of step and fail the follow-up. */
static void null_buffers_alone(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), last = n - 1;
    int32_t a[64] = {0};
    size_t ones[MAXN];
    const tide_dtype i32 = TIDE_INT32;
    tide_req *q;
    EXPECT(4 * n <= 64, "a holds 4 elements per rank");
    for (int p = 0; p < n; p++)
        ones[p] = 1;
    struct ccase k = {C_GATHER, i32, TIDE_SUM, 4, last, L_SEPARATE, false, 41};
    if (r == last)
        BAD(tide_igather(comm, a, NULL, 4, i32, last, &q));
    coll_run_case(comm, &k);
    k.coll = C_SCATTER;
    if (r == last)
        BAD(tide_iscatter(comm, NULL, a, 4, i32, last, &q));
    coll_run_case(comm, &k);
    k.coll = C_REDUCE_SCATTER;
    if (r == last)
        BAD(tide_ireduce_scatter(comm, a, NULL, 4, i32, TIDE_SUM, &q));
    coll_run_case(comm, &k);
    k.coll = C_ALLGATHERV;
    if (r == last)
        BAD(tide_iallgatherv(comm, a, NULL, ones, i32, &q));
    coll_run_case(comm, &k);
    k.coll = C_REDUCE_SCATTERV;
    if (r == last)
        BAD(tide_ireduce_scatterv(comm, NULL, a, ones, i32, TIDE_SUM, &q));
    coll_run_case(comm, &k);
    k.coll = C_ALLTOALL;
    if (r == last)
        BAD(tide_ialltoall(comm, a, NULL, 4, i32, &q));
    coll_run_case(comm, &k);
}

static void bad_arguments_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int32_t a[64] = {0}, b[64] = {0};
    size_t counts[MAXN];
    const tide_dtype i32 = TIDE_INT32;
    const tide_op op = (tide_op)99, sum = TIDE_SUM;
    tide_req *q;
    for (int p = 0; p < n; p++)
        counts[p] = 1;
    bad_buffers_and_dtypes(comm, counts);
    null_buffers_alone(comm);
    /* unknown op */
    BAD(tide_iallreduce(comm, a, b, 4, i32, op, &q));
    BAD(tide_iallreduce(comm, a, b, 4, i32, (tide_op)-1, &q));
    BAD(tide_ireduce(comm, a, b, 4, i32, op, 0, &q));
    BAD(tide_ireduce_scatter(comm, a, b, 1, i32, op, &q));
    BAD(tide_ireduce_scatterv(comm, a, b, counts, i32, op, &q));
    /* root outside the group */
    BAD(tide_ibroadcast(comm, a, 4, i32, -1, &q));
    BAD(tide_ibroadcast(comm, a, 4, i32, n, &q));
    BAD(tide_ireduce(comm, a, b, 4, i32, sum, n, &q));
    BAD(tide_igather(comm, a, b, 4, i32, -1, &q));
    BAD(tide_iscatter(comm, a, b, 4, i32, n, &q));
    /* NULL req, NULL comm, NULL counts */
    BAD(tide_iallreduce(comm, a, b, 4, i32, sum, NULL));
    BAD(tide_ibroadcast(comm, a, 4, i32, 0, NULL));
    BAD(tide_iallgather(comm, a, b, 1, i32, NULL));
    BAD(tide_ibarrier(comm, NULL));
    BAD(tide_iallreduce(NULL, a, b, 4, i32, sum, &q));
    BAD(tide_iallgatherv(comm, a, b, NULL, i32, &q));
    BAD(tide_ireduce_scatterv(comm, a, b, NULL, i32, sum, &q));
    /* all-to-all buffers that overlap */
    BAD(tide_ialltoall(comm, a, a, 1, i32, &q));
    BAD(tide_ialltoall(comm, a, a + 1, 2, i32, &q)); /* 2n elements each: overlap at any n */
    BAD(tide_ialltoall(comm, a + 1, a, 2, i32, &q));
    /* TIDE_IN_PLACE is for the root of a reduce only */
    if (r != 0)
        BAD(tide_ireduce(comm, TIDE_IN_PLACE, b, 4, i32, sum, 0, &q));
    /* nothing went out: the next collectives match up */
    EXPECT_OK(tide_barrier(comm));
    CHECK(sum_allreduce(comm, r + 1) == n * (n + 1) / 2, "sum after the rejected calls");
    EXPECT_OK(tide_allreduce(comm, NULL, NULL, 0, i32, sum)); /* NULL is fine at count 0 */
    EXPECT_OK(tide_allgather(comm, NULL, NULL, 0, i32));
    EXPECT_OK(tide_barrier(comm));
    coll_end_of_body();
}

/* TIDE_ALGO_ALLREDUCE names no algorithm (set by the parent). */
static void unknown_algorithm_body(tide_comm *comm, void *arg)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int32_t a[4] = {r, r, r, r}, b[4];
    tide_req *q;
    BAD(tide_iallreduce(comm, a, b, 4, TIDE_INT32, TIDE_SUM, &q));
    BAD(tide_allreduce(comm, a, b, 4, TIDE_INT32, TIDE_SUM));
    EXPECT_OK(tide_barrier(comm));
    a[0] = r == n - 1 ? 1234 : 0;
    EXPECT_OK(tide_broadcast(comm, a, 1, TIDE_INT32, n - 1));
    CHECK(a[0] == 1234, "broadcast after the rejected allreduce: %d", a[0]);
    coll_end_of_body();
}

/* ---- the parent ---- */

static void many_in_flight(void **state)
{
    int failed = 0;
    for (int n = 2; n <= 4; n++) {
        failed += coll_run("2000 in flight", n, TIDE_PROGRESS_THREAD, 3, in_flight_body, NULL);
        failed += coll_run("2000 in flight", n, TIDE_PROGRESS_INLINE, 3, in_flight_body, NULL);
        failed += coll_run("in flight on three communicators", n,
                           n == 3 ? TIDE_PROGRESS_INLINE : TIDE_PROGRESS_THREAD, 3,
                           comms_in_flight_body, NULL);
    }
    if (failed)
        fail_msg("%d runs failed", failed);
}

static void subgroups(void **state)
{
    int failed = 0;
    for (int n = 2; n <= 5; n++)
        failed += coll_run("subgroups", n, TIDE_PROGRESS_THREAD, 3, subgroup_body, NULL);
    failed += coll_run("subgroups", 5, TIDE_PROGRESS_THREAD, 0, subgroup_body, NULL);
    failed += coll_run("subgroups", 4, TIDE_PROGRESS_INLINE, 3, subgroup_body, NULL);
    if (failed)
        fail_msg("%d runs failed", failed);
}

static void bad_arguments(void **state)
{
    int failed = 0;
    for (int n = 1; n <= 3; n++)
        failed += coll_run("bad arguments", n, TIDE_PROGRESS_THREAD, 3, bad_arguments_body, NULL);
    failed += coll_run("bad arguments", 2, TIDE_PROGRESS_INLINE, 3, bad_arguments_body, NULL);
    for (int n = 2; n <= 3; n++) {
        setenv("TIDE_ALGO_ALLREDUCE", "no_such_algorithm", 1);
        failed += coll_run("an unknown algorithm", n, TIDE_PROGRESS_THREAD, -1,
                           unknown_algorithm_body, NULL);
    }
    unsetenv("TIDE_ALGO_ALLREDUCE");
    if (failed)
        fail_msg("%d runs failed", failed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(many_in_flight),
        cmocka_unit_test(subgroups),
    };
    return cmocka_run_group_tests_name("collectives in use over tcp", tests, NULL, NULL);
}
