/* test_sim.c - the simulated network's own promises (tide.h, "The
 * simulated network"): its arguments, the cost model, message order
 * between two ranks, virtual deadlines, each fault's error, finalizing a
 * simulated rank, timing-only runs that touch no data, and boards
 * (cfg.boards): the board collectives' results, a lost or absent rank's
 * error, and many of them in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tide.h"
#include "tide_sim.h"

enum { N = 8 };

static tide_sim *make(int n, tide_sim_config *cfg, tide_comm **comms)
{
    tide_sim *sim = NULL;
    assert_int_equal(tide_sim_create(n, cfg, &sim, comms), 0);
    assert_non_null(sim);
    return sim;
}

static void bad_arguments(void **state)
{
    (void)state;
    tide_sim *sim = NULL;
    tide_comm *comms[N];
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    assert_int_equal(tide_sim_create(0, &cfg, &sim, comms), TIDE_EINVAL);
    assert_int_equal(tide_sim_create(N, &cfg, NULL, comms), TIDE_EINVAL);
    cfg.bandwidth = 0;
    assert_int_equal(tide_sim_create(N, &cfg, &sim, comms), TIDE_EINVAL);
    tide_sim_config_default(&cfg);
    cfg.timeout_s = -1;
    assert_int_equal(tide_sim_create(N, &cfg, &sim, comms), TIDE_EINVAL);
    tide_sim_config_default(&cfg);
    cfg.boards = 1; /* boards without staging memory: nobody would have one */
    assert_int_equal(tide_sim_create(N, &cfg, &sim, comms), TIDE_EINVAL);
    assert_null(sim);

    sim = make(N, NULL, comms);
    assert_int_equal(tide_sim_crash(sim, N, 0), TIDE_EINVAL);
    assert_int_equal(tide_sim_stall(sim, 0, -1, 0, 1), TIDE_EINVAL);
    assert_int_equal(tide_sim_stall(sim, 0, 1, -1, 1), TIDE_EINVAL);
    tide_sim_stats st;
    assert_int_equal(tide_sim_stats_of(sim, -1, &st), TIDE_EINVAL);
    assert_int_equal(tide_sim_spawn(sim, NULL, NULL), TIDE_EINVAL);
    assert_int_equal(tide_sim_run(NULL), TIDE_EINVAL);
    tide_sim_destroy(sim);
    tide_sim_destroy(NULL);
}

/* A ring all-reduce follows its textbook cost: 2(p-1) steps of one
 * block (header included) each, alpha apart. */
static void cost_model_of_a_ring(void **state)
{
    (void)state;
    tide_comm *comms[N];
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    cfg.alpha_s = 10e-6;
    cfg.bandwidth = 1e9;
    cfg.timing_only = 1;
    tide_sim *sim = make(N, &cfg, comms);
    setenv("TIDE_ALGO_ALLREDUCE", "ring", 1);
    size_t count = 8 * 4096; /* float: 16 KiB per block */
    float *buf = malloc(count * sizeof *buf); /* shared and never touched: timing only */
    tide_req *req[N];
    for (int r = 0; r < N; r++)
        assert_int_equal(tide_iallreduce(comms[r], TIDE_IN_PLACE, buf, count, TIDE_FLOAT32,
                                         TIDE_SUM, &req[r]), 0);
    unsetenv("TIDE_ALGO_ALLREDUCE");
    assert_int_equal(tide_sim_run(sim), 0);
    for (int r = 0; r < N; r++) {
        assert_int_equal(tide_wait(req[r], 0), 0);
        assert_string_equal(tide_req_algorithm(req[r]), "ring");
        tide_req_free(req[r]);
    }
    double block = count * sizeof(float) / N + 48.0;
    double want = 2 * (N - 1) * (cfg.alpha_s + block / cfg.bandwidth);
    double got = (double)tide_sim_time_ns(sim) / 1e9;
    assert_true(got > 0.99 * want && got < 1.01 * want);
    tide_sim_stats st;
    assert_int_equal(tide_sim_stats_of(sim, 3, &st), 0);
    assert_int_equal(st.msgs_sent, 2 * (N - 1));
    assert_int_equal(st.msgs_recv, 2 * (N - 1));
    tide_sim_destroy(sim);
    free(buf);
}

/* Same-tag messages between two ranks match in the order they were
 * sent, whatever the jitter. */
static void pairs_keep_order(void **state)
{
    (void)state;
    tide_comm *comms[2];
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    cfg.jitter_s = 100e-6;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        cfg.seed = seed;
        tide_sim *sim = make(2, &cfg, comms);
        int out[16], in[16];
        tide_req *s[16], *r[16];
        for (int i = 0; i < 16; i++) {
            out[i] = i;
            assert_int_equal(tide_isend(comms[0], &out[i], sizeof out[i], 1, 7, &s[i]), 0);
        }
        for (int i = 0; i < 16; i++)
            assert_int_equal(tide_irecv(comms[1], &in[i], sizeof in[i], 0, 7, &r[i]), 0);
        tide_sim_run(sim);
        for (int i = 0; i < 16; i++) {
            assert_int_equal(tide_wait(s[i], 0), 0);
            assert_int_equal(tide_wait(r[i], 0), 0);
            assert_int_equal(in[i], i);
            tide_req_free(s[i]);
            tide_req_free(r[i]);
        }
        tide_sim_destroy(sim);
    }
}

/* Deadlines pass in virtual time: a receive nobody answers fails after
 * timeout_s of it, at once in real time. */
static void deadlines_are_virtual(void **state)
{
    (void)state;
    tide_comm *comms[2];
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    cfg.timeout_s = 1000;
    tide_sim *sim = make(2, &cfg, comms);
    int x;
    tide_req *r;
    assert_int_equal(tide_irecv(comms[1], &x, sizeof x, 0, 1, &r), 0);
    assert_int_equal(tide_wait(r, 5), TIDE_ETIMEDOUT); /* tide_wait's own timeout */
    assert_int_equal(tide_sim_time_ns(sim), 5000000);
    assert_int_equal(tide_wait(r, -1), TIDE_ETIMEDOUT); /* the operation's deadline */
    assert_true(tide_sim_time_ns(sim) >= 1000000000000ull);
    assert_non_null(strstr(tide_req_message(r), "deadline"));
    tide_req_free(r);
    tide_sim_destroy(sim);
}

static void run_allreduce(tide_comm **comms, int n, int *rc)
{
    float x[N];
    tide_req *req[N];
    for (int r = 0; r < n; r++) {
        x[r] = (float)r;
        rc[r] = tide_iallreduce(comms[r], TIDE_IN_PLACE, &x[r], 1, TIDE_FLOAT32, TIDE_SUM, &req[r]);
        assert_int_equal(rc[r], 0);
    }
    for (int r = 0; r < n; r++) {
        rc[r] = tide_wait(req[r], -1);
        if (!rc[r])
            assert_true(x[r] == (float)(n * (n - 1) / 2));
        tide_req_free(req[r]);
    }
}

static void crash_fails_peers_with_epeer(void **state)
{
    (void)state;
    tide_comm *comms[N];
    tide_sim *sim = make(N, NULL, comms);
    assert_int_equal(tide_sim_crash(sim, 5, 0), 0);
    int rc[N];
    run_allreduce(comms, N, rc);
    for (int r = 0; r < N; r++)
        assert_int_equal(rc[r], r == 5 ? TIDE_EABORTED : TIDE_EPEER);
    tide_sim_destroy(sim);
}

static void stall_fails_with_etimedout(void **state)
{
    (void)state;
    tide_comm *comms[N];
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    cfg.timeout_s = 2;
    tide_sim *sim = make(N, &cfg, comms);
    assert_int_equal(tide_sim_stall(sim, 2, 3, 0, 60), 0);
    int rc[N];
    run_allreduce(comms, N, rc);
    int timed_out = 0;
    for (int r = 0; r < N; r++) {
        assert_true(rc[r] == 0 || rc[r] == TIDE_ETIMEDOUT);
        timed_out += rc[r] == TIDE_ETIMEDOUT;
    }
    assert_true(timed_out >= 1);
    tide_sim_destroy(sim);
}

/* A rank that finalizes is gone for its peers; the others still work. */
static void finalize_one_rank(void **state)
{
    (void)state;
    tide_comm *comms[3];
    tide_sim *sim = make(3, NULL, comms);
    assert_int_equal(tide_finalize(comms[2]), 0);
    int x = 1, y = 0;
    tide_req *s, *r, *lost;
    assert_int_equal(tide_isend(comms[0], &x, sizeof x, 1, 0, &s), 0);
    assert_int_equal(tide_irecv(comms[1], &y, sizeof y, 0, 0, &r), 0);
    assert_int_equal(tide_irecv(comms[1], &y, sizeof y, 2, 0, &lost), 0);
    tide_sim_run(sim);
    assert_int_equal(tide_wait(s, 0), 0);
    assert_int_equal(tide_wait(r, 0), 0);
    assert_int_equal(y, 1);
    assert_int_equal(tide_wait(lost, 0), TIDE_EPEER);
    assert_non_null(strstr(tide_req_message(lost), "left the job"));
    tide_req_free(s);
    tide_req_free(r);
    tide_req_free(lost);
    tide_sim_destroy(sim);
}

struct split_result {
    int rc[N], sub_rank[N], sub_size[N], max[N];
};

/* Blocking calls, sub-communicators included, in rank programs. */
static void split_program(tide_comm *world, void *arg)
{
    struct split_result *res = arg;
    int r = tide_comm_rank(world);
    tide_comm *sub = NULL;
    res->rc[r] = tide_comm_split(world, r % 3, -r, &sub);
    if (res->rc[r])
        return;
    res->sub_rank[r] = tide_comm_rank(sub);
    res->sub_size[r] = tide_comm_size(sub);
    res->rc[r] = tide_allreduce(sub, &r, &res->max[r], 1, TIDE_INT32, TIDE_MAX);
    tide_comm_free(sub);
}

static void programs_split_and_reduce(void **state)
{
    (void)state;
    tide_comm *comms[N];
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    cfg.jitter_s = 30e-6;
    tide_sim *sim = make(N, &cfg, comms);
    struct split_result res = {0};
    assert_int_equal(tide_sim_spawn(sim, split_program, &res), 0);
    for (int r = 0; r < N; r++) {
        int color = r % 3, members = (N - color + 2) / 3, top = color + 3 * (members - 1);
        assert_int_equal(res.rc[r], 0);
        assert_int_equal(res.sub_size[r], members);
        assert_int_equal(res.sub_rank[r], (top - r) / 3); /* key -r: highest rank first */
        assert_int_equal(res.max[r], top);
    }
    tide_sim_destroy(sim);
}

/* The same seed, the same run: to the nanosecond. */
static void runs_are_reproducible(void **state)
{
    (void)state;
    uint64_t t[2];
    for (int k = 0; k < 2; k++) {
        tide_comm *comms[N];
        tide_sim_config cfg;
        tide_sim_config_default(&cfg);
        cfg.jitter_s = 50e-6;
        cfg.seed = 42;
        tide_sim *sim = make(N, &cfg, comms);
        struct split_result res = {0};
        assert_int_equal(tide_sim_spawn(sim, split_program, &res), 0);
        t[k] = tide_sim_time_ns(sim);
        tide_sim_destroy(sim);
    }
    assert_int_equal(t[0], t[1]);
}

/* ---- boards ---- */

enum { BCOUNT = 37 }; /* int32s: no group size here divides it */

static void board_config(tide_sim_config *cfg, uint64_t seed)
{
    tide_sim_config_default(cfg);
    cfg->seed = seed;
    cfg->jitter_s = 20e-6;
    cfg->stage_slot_bytes = 256;
    cfg->boards = 1;
}

/* One board collective, forced, on every rank. */
struct board_case {
    const char *env, *algo;
    enum { B_ALLREDUCE, B_ALLGATHER, B_REDUCE_SCATTER, B_BROADCAST } kind;
};

static const struct board_case board_cases[] = {
    {"TIDE_ALGO_ALLREDUCE", "board", B_ALLREDUCE},
    {"TIDE_ALGO_ALLREDUCE", "board_rsag", B_ALLREDUCE},
    {"TIDE_ALGO_ALLGATHER", "board", B_ALLGATHER},
    {"TIDE_ALGO_REDUCE_SCATTER", "board", B_REDUCE_SCATTER},
    {"TIDE_ALGO_BROADCAST", "board", B_BROADCAST},
};

/* Rank r's input element i (of a reduce-scatter's whole input too). */
static int32_t board_in(int r, size_t i)
{
    return (int32_t)(1000 * r + (int)i);
}

static int post_board(const struct board_case *c, tide_comm *comm, int32_t *in, int32_t *out,
                      tide_req **req)
{
    switch (c->kind) {
    case B_ALLREDUCE:
        return tide_iallreduce(comm, in, out, BCOUNT, TIDE_INT32, TIDE_SUM, req);
    case B_ALLGATHER:
        return tide_iallgather(comm, in, out, BCOUNT, TIDE_INT32, req);
    case B_REDUCE_SCATTER:
        return tide_ireduce_scatter(comm, in, out, BCOUNT, TIDE_INT32, TIDE_SUM, req);
    default:
        return tide_ibroadcast(comm, out, BCOUNT, TIDE_INT32, 1, req);
    }
}

/* What rank r's output holds at element i of n ranks' collective. */
static int32_t board_want(const struct board_case *c, int n, int r, size_t i)
{
    int32_t sum_r = 1000 * n * (n - 1) / 2;
    switch (c->kind) {
    case B_ALLREDUCE:
        return sum_r + n * (int32_t)i;
    case B_ALLGATHER:
        return board_in((int)(i / BCOUNT), i % BCOUNT);
    case B_REDUCE_SCATTER:
        return sum_r + n * (int32_t)((size_t)r * BCOUNT + i);
    default:
        return board_in(1, i);
    }
}

static void run_board_case(const struct board_case *c, int n, uint64_t seed)
{
    tide_comm *comms[N];
    tide_sim_config cfg;
    board_config(&cfg, seed);
    tide_sim *sim = make(n, &cfg, comms);
    static int32_t in[N][N * BCOUNT], out[N][N * BCOUNT];
    size_t outs = c->kind == B_ALLGATHER ? (size_t)n * BCOUNT : BCOUNT;
    tide_req *req[N];
    setenv(c->env, c->algo, 1);
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < N * BCOUNT; i++)
            in[r][i] = board_in(r, i);
        memcpy(out[r], in[r], sizeof out[r]); /* a broadcast's root sends its own */
        assert_int_equal(post_board(c, comms[r], in[r], out[r], &req[r]), 0);
    }
    unsetenv(c->env);
    assert_int_equal(tide_sim_run(sim), 0);
    for (int r = 0; r < n; r++) {
        assert_int_equal(tide_wait(req[r], 0), 0);
        assert_string_equal(tide_req_algorithm(req[r]), c->algo);
        for (size_t i = 0; i < outs; i++)
            assert_int_equal(out[r][i], board_want(c, n, r, i));
        tide_req_free(req[r]);
    }
    tide_sim_destroy(sim);
}

static void boards_give_right_results(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof board_cases / sizeof board_cases[0]; k++)
        for (int n = 4; n <= 5; n++)
            for (uint64_t seed = 1; seed <= 3; seed++)
                run_board_case(&board_cases[k], n, seed);
}

/* Boards are offered as staging memory is: inside a host only.  A
 * forced board on the world of two hosts gives way; on one host's ranks
 * it runs. */
static void boards_only_inside_a_host(void **state)
{
    (void)state;
    tide_comm *comms[4], *host[2];
    tide_sim_config cfg;
    board_config(&cfg, 1);
    cfg.ranks_per_host = 2;
    tide_sim *sim = make(4, &cfg, comms);
    int ranks[2] = {0, 1};
    for (int r = 0; r < 2; r++)
        assert_int_equal(tide_comm_create_group(comms[r], ranks, 2, &host[r]), 0);
    float x[4] = {1, 2, 3, 4}, y[2] = {1, 2};
    tide_req *world[4], *sub[2];
    setenv("TIDE_ALGO_ALLREDUCE", "board", 1);
    for (int r = 0; r < 4; r++)
        assert_int_equal(tide_iallreduce(comms[r], TIDE_IN_PLACE, &x[r], 1, TIDE_FLOAT32,
                                         TIDE_SUM, &world[r]), 0);
    for (int r = 0; r < 2; r++)
        assert_int_equal(tide_iallreduce(host[r], TIDE_IN_PLACE, &y[r], 1, TIDE_FLOAT32,
                                         TIDE_SUM, &sub[r]), 0);
    unsetenv("TIDE_ALGO_ALLREDUCE");
    assert_int_equal(tide_sim_run(sim), 0);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(tide_wait(world[r], 0), 0);
        assert_true(x[r] == 10);
        assert_string_not_equal(tide_req_algorithm(world[r]), "board");
        tide_req_free(world[r]);
    }
    for (int r = 0; r < 2; r++) {
        assert_int_equal(tide_wait(sub[r], 0), 0);
        assert_true(y[r] == 3);
        assert_string_equal(tide_req_algorithm(sub[r]), "board");
        tide_req_free(sub[r]);
        tide_comm_free(host[r]);
    }
    tide_sim_destroy(sim);
}

/* Ranks 0-2 of 4 start a board all-reduce that rank 3 never joins; the
 * network runs until they all wait on board flags.  Returns the sim. */
static tide_sim *boards_without_rank_3(tide_sim_config *cfg, tide_comm **comms, float *x,
                                       tide_req **req)
{
    tide_sim *sim = make(4, cfg, comms);
    setenv("TIDE_ALGO_ALLREDUCE", "board", 1);
    for (int r = 0; r < 3; r++) {
        x[r] = (float)r;
        assert_int_equal(tide_iallreduce(comms[r], TIDE_IN_PLACE, &x[r], 1, TIDE_FLOAT32,
                                         TIDE_SUM, &req[r]), 0);
    }
    unsetenv("TIDE_ALGO_ALLREDUCE");
    assert_int_equal(tide_wait(req[0], 1), TIDE_ETIMEDOUT); /* tide_wait's own timeout */
    return sim;
}

static void board_crash_fails_peers_with_epeer(void **state)
{
    (void)state;
    tide_comm *comms[4];
    tide_sim_config cfg;
    board_config(&cfg, 1);
    float x[3];
    tide_req *req[3];
    tide_sim *sim = boards_without_rank_3(&cfg, comms, x, req);
    assert_int_equal(tide_sim_crash(sim, 3, 0), 0);
    uint64_t crashed = tide_sim_time_ns(sim);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(tide_wait(req[r], -1), TIDE_EPEER);
        assert_non_null(strstr(tide_req_message(req[r]), "board flag from rank 3"));
        tide_req_free(req[r]);
    }
    assert_true(tide_sim_time_ns(sim) - crashed < 1000000); /* at once, not at a deadline */
    tide_sim_destroy(sim);
}

static void board_absent_rank_fails_at_deadline(void **state)
{
    (void)state;
    tide_comm *comms[4];
    tide_sim_config cfg;
    board_config(&cfg, 1);
    cfg.timeout_s = 2;
    float x[3];
    tide_req *req[3];
    tide_sim *sim = boards_without_rank_3(&cfg, comms, x, req);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(tide_wait(req[r], -1), TIDE_ETIMEDOUT);
        assert_non_null(strstr(tide_req_message(req[r]), "deadline"));
        tide_req_free(req[r]);
    }
    assert_true(tide_sim_time_ns(sim) >= 2000000000ull);
    tide_sim_destroy(sim);
}

/* Board collectives on one communicator run one at a time, in order:
 * many posted at once, one-shot and two-phase mixed, all complete, in
 * the order they were posted, whatever order they are waited in. */
enum { INFLIGHT = 12 };

struct done_at {
    int *count; /* the rank's completions so far */
    int at;     /* this one's place among them */
};

static void note_done(tide_req *req, void *arg)
{
    struct done_at *d = arg;
    (void)req;
    d->at = (*d->count)++;
}

static void many_boards_in_flight(void **state)
{
    (void)state;
    enum { NR = 5 };
    tide_comm *comms[NR];
    tide_sim_config cfg;
    board_config(&cfg, 7);
    tide_sim *sim = make(NR, &cfg, comms);
    static int32_t buf[NR][INFLIGHT][BCOUNT];
    static struct done_at when[NR][INFLIGHT];
    int count[NR] = {0};
    tide_req *req[NR][INFLIGHT];
    for (int r = 0; r < NR; r++)
        for (int k = 0; k < INFLIGHT; k++) {
            setenv("TIDE_ALGO_ALLREDUCE", k % 3 ? "board" : "board_rsag", 1);
            for (size_t i = 0; i < BCOUNT; i++)
                buf[r][k][i] = board_in(r, i) + k;
            assert_int_equal(tide_iallreduce(comms[r], TIDE_IN_PLACE, buf[r][k], BCOUNT,
                                             TIDE_INT32, TIDE_SUM, &req[r][k]), 0);
            when[r][k] = (struct done_at){.count = &count[r], .at = -1};
            assert_int_equal(tide_req_on_complete(req[r][k], note_done, &when[r][k]), 0);
        }
    unsetenv("TIDE_ALGO_ALLREDUCE");
    for (int k = INFLIGHT - 1; k >= 0; k--)
        for (int r = 0; r < NR; r++) {
            assert_int_equal(tide_wait(req[r][k], -1), 0);
            assert_string_equal(tide_req_algorithm(req[r][k]), k % 3 ? "board" : "board_rsag");
            assert_int_equal(when[r][k].at, k);
            for (size_t i = 0; i < BCOUNT; i++)
                assert_int_equal(buf[r][k][i], 1000 * NR * (NR - 1) / 2 + NR * ((int)i + k));
        }
    for (int r = 0; r < NR; r++)
        for (int k = 0; k < INFLIGHT; k++)
            tide_req_free(req[r][k]);
    tide_sim_destroy(sim);
}

/* 1,500 stream broadcasts of 4 bytes in flight on 2 ranks (the first
 * 700 from rank 0, the next from rank 1), a board all-reduce every 100th:
 * over the simulated network too the stream pairs them in order, and a
 * root that fills half its ring waits for its reader's block to end
 * (collectives/board_stream.c) rather than for its deadline. */
static void stream_in_flight(void **state)
{
    (void)state;
    enum { K = 1500 };
    tide_comm *comms[2];
    tide_sim_config cfg;
    board_config(&cfg, 11);
    tide_sim *sim = make(2, &cfg, comms);
    static int32_t v[2][K];
    static tide_req *req[2][K];
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < K; k++) {
            int root = k / 700 % 2;
            v[r][k] = r == root ? k * 7 : -1;
            int rc = k % 100 == 50
                         ? tide_iallreduce(comms[r], TIDE_IN_PLACE, &v[r][k], 1, TIDE_INT32,
                                           TIDE_SUM, &req[r][k])
                         : tide_ibroadcast(comms[r], &v[r][k], 1, TIDE_INT32, root, &req[r][k]);
            assert_int_equal(rc, 0);
        }
    assert_int_equal(tide_sim_run(sim), 0);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < K; k++) {
            assert_int_equal(tide_wait(req[r][k], 0), 0);
            int sum = k % 100 == 50;
            assert_string_equal(tide_req_algorithm(req[r][k]), sum ? "board" : "stream");
            assert_int_equal(v[r][k], sum ? k * 7 - 1 : k * 7);
            tide_req_free(req[r][k]);
        }
    tide_sim_destroy(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(cost_model_of_a_ring),
        cmocka_unit_test(pairs_keep_order),
        cmocka_unit_test(deadlines_are_virtual),
        cmocka_unit_test(crash_fails_peers_with_epeer),
        cmocka_unit_test(stall_fails_with_etimedout),
        cmocka_unit_test(finalize_one_rank),
        cmocka_unit_test(programs_split_and_reduce),
        cmocka_unit_test(runs_are_reproducible),
        cmocka_unit_test(boards_give_right_results),
        cmocka_unit_test(stream_in_flight),
        cmocka_unit_test(boards_only_inside_a_host),
        cmocka_unit_test(board_crash_fails_peers_with_epeer),
        cmocka_unit_test(board_absent_rank_fails_at_deadline),
        cmocka_unit_test(many_boards_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
