/* test_threads.c - several caller threads in one rank, as tide.h allows
 * in thread mode: each communicator's collectives from one thread at a
 * time, different communicators from different threads at once, and
 * point-to-point from any thread.  Three threads a rank (the main one
 * and two it starts) each run their own mix on their own communicator
 * while the progress thread drives: small and large all-reduces,
 * nonblocking ones tested in a loop, sends and receives, a barrier.
 * Every result is checked.
 *
 * tools/test.sh also runs this under ThreadSanitizer (issue 33: with two
 * caller threads the engine's command queue raced); there any data race
 * in the engine fails the run. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#define THREADS 3
#define ROUNDS 30
#define BIG (256 * 1024) /* floats: a message algorithm, not a board */

struct worker {
    tide_comm *comm; /* its own: a split of the world */
    int id;
};

static void run_mix(struct worker *w)
{
    tide_comm *c = w->comm;
    int rank = tide_comm_rank(c), n = tide_comm_size(c);
    float *big = malloc(BIG * sizeof *big), *out = malloc(BIG * sizeof *out);
    EXPECT(big && out, "out of memory");
    for (int r = 0; r < ROUNDS; r++) {
        int32_t x = rank + r + 100 * w->id, sum = 0;
        EXPECT_OK(tide_allreduce(c, &x, &sum, 1, TIDE_INT32, TIDE_SUM));
        EXPECT(sum == n * (r + 100 * w->id) + n * (n - 1) / 2, "thread %d round %d: %d", w->id, r,
               sum);

        for (int i = 0; i < BIG; i++)
            big[i] = (float)(i % 97 + rank + w->id);
        tide_req *req;
        EXPECT_OK(tide_iallreduce(c, big, out, BIG, TIDE_FLOAT32, TIDE_SUM, &req));
        int rc, done = 0;
        while (!(rc = tide_test(req, &done)) && !done)
            ;
        EXPECT(rc == 0, "thread %d: %s", w->id, tide_err_name(rc));
        tide_req_free(req);
        for (int i = 0; i < BIG; i += 4099)
            EXPECT(out[i] == (float)(n * (i % 97 + w->id) + n * (n - 1) / 2), "thread %d [%d] %g",
                   w->id, i, out[i]);

        int32_t token = 7 * r + w->id, got = -1;
        int to = (rank + 1) % n, from = (rank + n - 1) % n;
        tide_req *rx;
        EXPECT_OK(tide_irecv(c, &got, sizeof got, from, r, &rx));
        EXPECT_OK(tide_send(c, &token, sizeof token, to, r));
        EXPECT_OK(tide_wait(rx, 20000));
        tide_req_free(rx);
        EXPECT(got == token, "thread %d round %d: got %d", w->id, r, got);
    }
    EXPECT_OK(tide_barrier(c));
    free(big);
    free(out);
}

static void *worker_main(void *p)
{
    run_mix(p);
    return NULL;
}

static void body(tide_comm *world, void *arg)
{
    (void)arg;
    struct worker w[THREADS];
    pthread_t t[THREADS];
    /* Communicators are made in the same order on every rank, by one
     * thread; then each thread has its own. */
    for (int k = 0; k < THREADS; k++) {
        EXPECT_OK(tide_comm_split(world, 0, tide_comm_rank(world), &w[k].comm));
        w[k].id = k;
    }
    for (int k = 1; k < THREADS; k++)
        EXPECT(pthread_create(&t[k], NULL, worker_main, &w[k]) == 0, "pthread_create");
    run_mix(&w[0]);
    for (int k = 1; k < THREADS; k++)
        pthread_join(t[k], NULL);
    for (int k = 0; k < THREADS; k++)
        EXPECT_OK(tide_comm_free(w[k].comm));
}

static void threads_share_a_rank(void **state)
{
    (void)state;
    struct harness_opts o;
    harness_defaults(&o);
    o.run_limit_s = 120;
    assert_int_equal(harness_run(3, &o, body, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_share_a_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
