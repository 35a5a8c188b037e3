/* harness.h - run a test body on N real rank processes over loopback TCP.
 *
 * Each rank is a forked child that joins a job with tide_init_with (a free
 * port, a fresh token), runs the body, finalizes and exits 0.  A failed
 * EXPECT in a child prints where and why and exits 1; the parent collects
 * every child's fate.  cmocka's asserts are not used in children because
 * they unwind into the parent's copy of the test runner. */
#ifndef TIDE_TEST_HARNESS_H
#define TIDE_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tide.h"

#define EXPECT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: rank %d: expected %s: ", __FILE__, __LINE__,           \
                    harness_rank, #cond);                                                  \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            _exit(1);                                                                      \
        }                                                                                  \
    } while (0)

/* An API call that must succeed. */
#define EXPECT_OK(call) \
    do { int rc_ = (call); EXPECT(rc_ == 0, "%s returned %s", #call, tide_err_name(rc_)); } while (0)

extern int harness_rank;

struct harness_opts {
    tide_progress_mode progress;
    double timeout_s;      /* operation deadline (default 20) */
    double bootstrap_s;    /* bootstrap deadline (default 20) */
    int spin_us;           /* -1: default */
    int run_limit_s;       /* kill the children after this (default 60) */
    const char *token;     /* NULL: a fresh random one */
    const char *master;    /* NULL: 127.0.0.1 */
    const char *trace_path; /* NULL: no TIDE_TRACE */
};

typedef void (*harness_body)(tide_comm *comm, void *arg);

/* Fill opts with the defaults above. */
void harness_defaults(struct harness_opts *o);

/* Sleep ms milliseconds (nanosleep; a signal may cut it short). */
void harness_sleep_ms(long ms);

/* A free loopback TCP port (bound once with port 0, then released). */
int harness_free_port(const char *addr);

/* Run body on n ranks.  Returns the number of ranks that failed (exited
 * non-zero, died, or were killed at the run limit); each failure is
 * printed. */
int harness_run(int n, const struct harness_opts *o, harness_body body, void *arg);

/* Fork n children running fn(rank, port, arg) (no tide_init): for tests
 * that need several ranks to do different things around init. */
int harness_run_raw(int n, int run_limit_s, int (*fn)(int rank, int port, void *arg), void *arg);
/* The same on a port of the caller's choosing. */
int harness_run_raw_on(int n, int run_limit_s, int port, int (*fn)(int rank, int port, void *arg),
                       void *arg);

/* A body (arg: struct harness_kill): every rank starts a 64 MiB float
 * all-reduce and rank `victim` is killed pause_ms later.  Every other
 * rank must have run `algo` and fail with TIDE_EPEER within the run
 * limit, and its next all-reduce on the communicator must fail too
 * rather than hang.  harness_run then counts exactly one failed rank. */
struct harness_kill {
    int victim;
    int pause_ms;
    const char *algo;
};
void harness_killed_mid_allreduce(tide_comm *comm, void *arg);

/* tide_init_with with what it logs to stderr caught in text (cap bytes,
 * terminated), for tests of what a failed init says. */
int harness_init_logged(tide_comm **comm, const tide_config *cfg, char *text, size_t cap);

/* The config a child would use: rank, size, port, token, deadlines. */
void harness_config(tide_config *cfg, int rank, int n, int port, const char *token,
                    const struct harness_opts *o);

#endif
