/* test_revoke.c - tide_comm_revoke over the simulated network: it wakes
 * ranks that wait on healthy peers, reaches every rank even when the
 * revoking rank dies while telling them, fails later operations, and
 * leaves other communicators alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tide.h"
#include "tide_sim.h"

enum { N = 4 };

static tide_sim *make(tide_comm **comms)
{
    tide_sim_config cfg;
    tide_sim_config_default(&cfg);
    cfg.timeout_s = 5; /* a rank the notice misses fails here, not at 300 s */
    tide_sim *sim = NULL;
    assert_int_equal(tide_sim_create(N, &cfg, &sim, comms), 0);
    return sim;
}

/* req failed with TIDE_EREVOKED, naming the revoking rank, well before
 * its deadline. */
static void assert_revoked(tide_sim *sim, tide_req *req, int origin)
{
    char who[32];
    snprintf(who, sizeof who, "rank %d revoked", origin);
    assert_int_equal(tide_wait(req, 0), TIDE_EREVOKED);
    assert_non_null(strstr(tide_req_message(req), who));
    assert_true(tide_sim_time_ns(sim) < 1000000000ull);
    tide_req_free(req);
}

/* Ranks 1-3 wait on each other (point to point) and on an allreduce
 * rank 0 never joins: nothing would tell them before their deadline. */
static void revoke_wakes_every_rank(void **state)
{
    (void)state;
    tide_comm *comms[N];
    tide_sim *sim = make(comms);
    char byte[N];
    tide_req *coll[N], *p2p[N];
    for (int r = 1; r < N; r++) {
        assert_int_equal(tide_iallreduce(comms[r], TIDE_IN_PLACE, &byte[r], 1, TIDE_INT8,
                                         TIDE_SUM, &coll[r]), 0);
        assert_int_equal(tide_irecv(comms[r], &byte[r], 1, r % (N - 1) + 1, 7, &p2p[r]), 0);
    }
    assert_int_equal(tide_comm_revoke(comms[0]), 0);
    assert_int_equal(tide_sim_run(sim), 0);
    for (int r = 1; r < N; r++) {
        assert_revoked(sim, coll[r], 0);
        assert_revoked(sim, p2p[r], 0);
    }
    /* Later operations fail at once, on every rank, sending nothing. */
    for (int r = 0; r < N; r++) {
        tide_req *later;
        assert_int_equal(tide_ibarrier(comms[r], &later), 0);
        assert_int_equal(tide_wait(later, -1), TIDE_EREVOKED);
        tide_req_free(later);
        assert_int_equal(tide_isend(comms[r], byte, 1, (r + 1) % N, 1, &later), 0);
        assert_int_equal(tide_wait(later, -1), TIDE_EREVOKED);
        tide_req_free(later);
    }
    /* Revoking again, anywhere, is harmless. */
    assert_int_equal(tide_comm_revoke(comms[2]), 0);
    assert_int_equal(tide_comm_revoke(comms[0]), 0);
    assert_int_equal(tide_comm_revoke(NULL), TIDE_EINVAL);
    tide_sim_destroy(sim);
}

/* Rank 0 dies after the first of its three notices arrives: the rank that
 * got it forwards it, so all three wake.  Their waits do not involve
 * rank 0, so its death alone would not wake them. */
static void notice_outlives_its_origin(void **state)
{
    (void)state;
    for (uint64_t after = 1; after <= 3; after++) {
        tide_comm *comms[N];
        tide_sim *sim = make(comms);
        char byte[N];
        tide_req *req[N];
        for (int r = 1; r < N; r++)
            assert_int_equal(tide_irecv(comms[r], &byte[r], 1, r % (N - 1) + 1, 7, &req[r]), 0);
        assert_int_equal(tide_sim_crash(sim, 0, after), 0);
        int rc = tide_comm_revoke(comms[0]);
        assert_true(rc == 0 || rc == TIDE_EABORTED);
        assert_int_equal(tide_sim_run(sim), 0);
        for (int r = 1; r < N; r++)
            assert_revoked(sim, req[r], 0);
        tide_sim_destroy(sim);
    }
}

/* Revoking a group leaves its parent working. */
static void other_comms_go_on(void **state)
{
    (void)state;
    tide_comm *comms[N], *sub[N] = {0};
    tide_sim *sim = make(comms);
    const int members[] = {0, 1, 2};
    for (int r = 0; r < 3; r++)
        assert_int_equal(tide_comm_create_group(comms[r], members, 3, &sub[r]), 0);
    int32_t v[N];
    tide_req *req[N];
    for (int r = 1; r < 3; r++)
        assert_int_equal(tide_iallreduce(sub[r], TIDE_IN_PLACE, &v[r], 1, TIDE_INT32, TIDE_SUM,
                                         &req[r]), 0);
    assert_int_equal(tide_comm_revoke(sub[0]), 0);
    assert_int_equal(tide_sim_run(sim), 0);
    for (int r = 1; r < 3; r++)
        assert_revoked(sim, req[r], 0);
    for (int r = 0; r < N; r++) {
        v[r] = r + 1;
        assert_int_equal(tide_iallreduce(comms[r], TIDE_IN_PLACE, &v[r], 1, TIDE_INT32,
                                         TIDE_SUM, &req[r]), 0);
    }
    assert_int_equal(tide_sim_run(sim), 0);
    for (int r = 0; r < N; r++) {
        assert_int_equal(tide_wait(req[r], 0), 0);
        assert_int_equal(v[r], 10);
        tide_req_free(req[r]);
    }
    for (int r = 0; r < 3; r++)
        assert_int_equal(tide_comm_free(sub[r]), 0);
    tide_sim_destroy(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(revoke_wakes_every_rank),
        cmocka_unit_test(notice_outlives_its_origin),
        cmocka_unit_test(other_comms_go_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
