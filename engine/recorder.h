/* recorder.h - the flight recorder: per communicator, an always-on ring of
 * its last TIDE_REC_OPS collectives, dumped as JSON (one file per rank)
 * on an error, on a deadline, and on a signal, for tools/doctor/doctor.c.
 *
 * The ring is written and read only by the reactor thread (a request
 * carries its post time there, as its deadline), so recording takes no
 * lock and no atomic: a few stores at start and at end of each collective. */
#ifndef TIDE_RECORDER_H
#define TIDE_RECORDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TIDE_REC_OPS 256 /* per communicator: ~20 KiB, made at its first collective */

enum tide__rec_state { TIDE_REC_EMPTY = 0, TIDE_REC_STARTED, TIDE_REC_DONE, TIDE_REC_FAILED };

/* One collective as this rank saw it.  Times are the context's clock:
 * t_post precise, t_start and t_end at tick resolution (recorder.c). */
struct tide__rec_op {
    uint64_t seq; /* its slot is seq % TIDE_REC_OPS */
    uint64_t t_post, t_start, t_end; /* t_end 0 while it runs */
    uint64_t count;
    size_t bytes;
    const char *algorithm; /* static string */
    int32_t root;
    int status; /* 0 or TIDE_E* once ended */
    uint8_t kind, dtype, redop, state;
};

struct tide__recorder {
    struct tide__rec_op ops[TIDE_REC_OPS];
    char first_error[512]; /* the first failure on this communicator, for the doctor */
};

/* Per context: where and when to dump, and the thread that answers the
 * dump signal (recorder_dump.c). */
struct tide__rec_ctx {
    int ready;           /* 0: not yet set up (first collective start) */
    char dir[200];       /* TIDE_DUMP_DIR, "" when dumps are off */
    uint64_t last_auto_ns; /* last dump on an error or deadline */
    int signal_fd;       /* eventfd the signal handler writes, -1 */
    pthread_t thread;    /* answers it by asking the reactor for a dump */
    int thread_started;
    _Atomic int dump_wanted; /* a dump waits for the reactor's next turn */
    _Atomic int stop;
};

#endif
