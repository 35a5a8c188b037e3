/* test_thread_exit.c - a caller thread that drove the reactor and then
 * exited takes nothing down with it.
 *
 * io_uring cancels what a thread submitted when that thread exits, and
 * any caller thread drives the reactor while it waits (tide_wait), so it
 * may have armed a doorbell receive or a send: before, the next
 * completion read -ECANCELED as a lost peer, and every later operation
 * failed with TIDE_EPEER (5 of 5 jobs on shared memory).  Thread pools
 * start and end threads all the time.
 *
 * Rank 0 lends its waits to a thread: it waits for a message rank 1 sends
 * 50 ms later (so it sleeps in the reactor and is woken there, arming the
 * next wake-up itself), and starts a 4 MiB send rank 1 takes only later,
 * leaving it in flight; then the thread exits.  Rank 0's main thread then
 * sleeps for another late message (the wake-up the thread armed), finishes
 * the send, rank 1 checks its bytes, and both run allreduces, which must
 * all succeed.  Thread progress
 * (in inline mode a communicator belongs to the thread that made it);
 * every transport the suites run (shm, TCP, epoll, mixed). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness.h"

#define BIG (4u << 20)

struct lent {
    tide_comm *comm;
    uint8_t *big;
    tide_req *send; /* left in flight for the main thread */
};

static void *wait_then_exit(void *p)
{
    struct lent *l = p;
    int word = 0;
    tide_req *rx;
    EXPECT_OK(tide_irecv(l->comm, &word, sizeof word, 1, 7, &rx));
    EXPECT_OK(tide_wait(rx, 10000));
    tide_req_free(rx);
    EXPECT(word == 0x5eed, "got %#x", word);
    EXPECT_OK(tide_isend(l->comm, l->big, BIG, 1, 8, &l->send));
    int rc = tide_wait(l->send, 20); /* rank 1 receives it only later */
    EXPECT(rc == TIDE_ETIMEDOUT || rc == 0, "the send: %s", tide_err_name(rc));
    return NULL;
}

static void body(tide_comm *comm, void *arg)
{
    (void)arg;
    int rank = tide_comm_rank(comm);
    uint8_t *big = malloc(BIG);
    EXPECT(big != NULL, "out of memory");
    if (rank == 0) {
        for (uint32_t i = 0; i < BIG; i++)
            big[i] = (uint8_t)(i * 7 + 3);
        struct lent l = {comm, big, NULL};
        pthread_t t;
        EXPECT(pthread_create(&t, NULL, wait_then_exit, &l) == 0, "pthread_create");
        pthread_join(t, NULL);
        /* Asleep again, to be woken the way the thread was. */
        int word = 0;
        EXPECT_OK(tide_recv(comm, &word, sizeof word, 1, 9));
        EXPECT(word == 0xbe11, "got %#x", word);
        EXPECT_OK(tide_wait(l.send, -1));
        tide_req_free(l.send);
    } else {
        int word = 0x5eed;
        harness_sleep_ms(50);
        EXPECT_OK(tide_send(comm, &word, sizeof word, 0, 7));
        harness_sleep_ms(100); /* by now rank 0's thread has gone */
        word = 0xbe11;
        EXPECT_OK(tide_send(comm, &word, sizeof word, 0, 9));
        harness_sleep_ms(50);
        EXPECT_OK(tide_recv(comm, big, BIG, 0, 8));
        for (uint32_t i = 0; i < BIG; i++)
            EXPECT(big[i] == (uint8_t)(i * 7 + 3), "byte %u of the send is %u", i, big[i]);
    }
    for (int k = 0; k < 20; k++) {
        int32_t x = rank + k, sum = -1;
        EXPECT_OK(tide_allreduce(comm, &x, &sum, 1, TIDE_INT32, TIDE_SUM));
        EXPECT(sum == 1 + 2 * k, "allreduce %d: %d", k, sum);
    }
    EXPECT_OK(tide_barrier(comm));
    free(big);
}

static void exited_thread_takes_nothing_down(void **state)
{
    (void)state;
    struct harness_opts o;
    harness_defaults(&o);
    assert_int_equal(harness_run(2, &o, body, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exited_thread_takes_nothing_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
