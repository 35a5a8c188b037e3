/* reactor.h - one io_uring ring, owned by one thread.
 *
 * Every submission's user_data points to a tide__uop embedded in the
 * object that posted it (a connection, the wake-up eventfd); its complete
 * function runs when the CQE comes back.  The reactor knows nothing else.
 */
#ifndef TIDE_REACTOR_H
#define TIDE_REACTOR_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tide__uop {
    void (*complete)(struct tide__uop *uop, int res);
};

struct tide__reactor {
    struct io_uring ring;
    int ready;              /* ring initialized */
    unsigned inflight;      /* submitted, CQE not yet seen */
    const char *flags_name; /* which ring flags the kernel accepted */
    bool shared;            /* driven by several threads: no taskrun flags */
};

/* Create the ring.  A ring used by one thread only tries
 * SINGLE_ISSUER|DEFER_TASKRUN, then COOP_TASKRUN, then no flags.  A
 * shared ring (several threads take turns driving it, one at a time,
 * under the caller's lock) uses no flags: the kernel then runs the
 * completion work of a submitting thread at once, even while that thread
 * computes, so operations keep moving in the background.
 * Returns 0, or TIDE_ENOSYS with a message in err when io_uring is
 * unavailable (old kernel, seccomp, kernel.io_uring_disabled). */
int tide__reactor_init(struct tide__reactor *r, bool shared, char *err, size_t errlen);

/* Write-once process-wide probe: can this process create a ring at all?
 * 0, or TIDE_ENOSYS with the reason in err. */
int tide__reactor_probe(char *err, size_t errlen);

void tide__reactor_fini(struct tide__reactor *r);

/* A free SQE (submitting queued ones first if the ring is full) with
 * user_data already pointing at uop.  Never NULL. */
struct io_uring_sqe *tide__reactor_sqe(struct tide__reactor *r, struct tide__uop *uop);

/* Submit what is queued, without waiting or running completions: for a
 * thread that stops driving. */
void tide__reactor_flush(struct tide__reactor *r);

/* Submit what is queued, wait up to wait_ns for a completion (0: don't
 * wait; UINT64_MAX: no limit), and run the completions that are ready,
 * at most a bounded batch.  Returns how many ran (>= 0).  On a shared
 * ring a look (wait_ns 0) with nothing to submit is no system call. */
int tide__reactor_run(struct tide__reactor *r, uint64_t wait_ns);

/* Sleep until a completion is ready or wait_ns passed, without touching
 * the submission or completion rings: safe while another thread holds
 * the right to drive the ring. */
void tide__reactor_sleep(struct tide__reactor *r, uint64_t wait_ns);

#endif
