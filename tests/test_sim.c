/* test_sim.c - the simulated network's own promises (tide.h, "The
 * simulated network"): its arguments, the cost model, message order
 * between two ranks, virtual deadlines, each fault's error, finalizing a
 * simulated rank, and timing-only runs that touch no data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tide.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
