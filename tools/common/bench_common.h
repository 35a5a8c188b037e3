/* bench_common.h - what tide-perf and tide-overlap share: the
 * nccl-tests-style options, the collectives they measure and how each is
 * posted, the sweep of sizes, cross-rank reductions of a timing, and the
 * JSON array they write.  Public API only, like any user program. */
#ifndef TIDE_BENCH_COMMON_H
#define TIDE_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tide.h"

enum bench_tool { BENCH_PERF, BENCH_OVERLAP };

enum bench_coll {
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLTOALL,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_BARRIER,
    COLL_COUNT
};

/* Exit statuses: 1 a run that failed (or found wrong results), 2 usage. */
enum { BENCH_EXIT_FAIL = 1, BENCH_EXIT_USAGE = 2 };

struct bench_opts {
    enum bench_coll coll; /* --op */
    size_t min_bytes;     /* -b */
    size_t max_bytes;     /* -e */
    size_t step_bytes;    /* -i, used when step_factor is 1 */
    double step_factor;   /* -f */
    long iters;           /* -n, timed iterations per size */
    long warmup;          /* -w, untimed iterations first */
    tide_dtype dtype;     /* -d */
    tide_op redop;        /* -o */
    int root;             /* -r */
    const char *algo;     /* -a, or NULL for tide's choice */
    int check;            /* -c (tide-perf) */
    int tests;            /* -t (tide-overlap): tide_test calls in the compute */
    bool compute_sleep;   /* --compute sleep (tide-overlap) */
    bool interleave;      /* --interleave (tide-overlap): a pass of pure and
                             overlapped calls in turn */
    const char *json;     /* --json FILE, or NULL */
    bool nonblocking;     /* --nonblocking (tide-perf): time tide_i*() and tide_wait */
};

/* One job: the world, the options and buffers for the largest size. */
struct bench {
    tide_comm *comm;
    int rank;
    int size;
    tide_progress_mode progress; /* as TIDE_PROGRESS set it */
    struct bench_opts opt;
    void *send; /* input of out-of-place calls */
    void *recv; /* output, and the input of in-place calls */
    size_t cap; /* bytes of each */
};

/* How one size maps onto a call.  bytes is nccl-tests' "size": the larger
 * of the send and receive buffers, rounded down to whole elements (and to
 * whole per-rank blocks where the count is per rank). */
struct bench_shape {
    size_t count; /* the count argument of the call */
    size_t bytes;
};

/*
 * Parse argv, join the job (tide_init, after -a has set TIDE_ALGO_<OP>),
 * check what needs the group size, and allocate the buffers.  usage is
 * the tool's help text before the shared options.  Returns -1 to run, or
 * the status to exit with (0 after --help; errors have been printed).
 */
int bench_start(int argc, char **argv, enum bench_tool tool, const char *usage, struct bench *b);

/* Free the buffers and finalize.  Returns status, or BENCH_EXIT_FAIL when
 * tide_finalize fails. */
int bench_end(struct bench *b, int status);

const char *bench_coll_name(enum bench_coll coll);

/* The transport to the next rank ("shm", "tcp"; "self" alone), for the
 * records: what carried the measured traffic on one host. */
const char *bench_transport(const struct bench *b);

/* The option values both tools (and tide-sim) read: true when s names a
 * value, which is stored in *out.  Sizes take K, M and G (powers of
 * 1024, as in nccl-tests).  Plain numbers: cli_parse_long and
 * cli_parse_double (cli.h). */
bool bench_parse_coll(const char *s, enum bench_coll *out);
bool bench_parse_dtype(const char *s, tide_dtype *out);
bool bench_parse_redop(const char *s, tide_op *out);
bool bench_parse_size(const char *s, size_t *out);
bool bench_coll_reduces(enum bench_coll coll);
bool bench_coll_rooted(enum bench_coll coll);
/* Whether the call has a TIDE_IN_PLACE form (broadcast has one buffer and
 * is reported as out-of-place; alltoall and barrier have none). */
bool bench_coll_has_inplace(enum bench_coll coll);
/* nccl-tests' PERFORMANCE.md: busbw = algbw * this. */
double bench_busbw_factor(enum bench_coll coll, int nranks);

/* The sizes of the sweep: first, then next until past opt->max_bytes. */
size_t bench_next_size(const struct bench_opts *opt, size_t bytes);
struct bench_shape bench_shape_of(const struct bench *b, size_t bytes);

/* Post the measured collective on b's buffers.  In place, the input is in
 * recv, where MPI (and tide) put it. */
int bench_post(struct bench *b, const struct bench_shape *s, bool inplace, tide_req **req);

/* The same call in its blocking form (tide_allreduce), as OSU's and
 * mpi-coll-bench's loops call MPI's: 0 or the error. */
int bench_call(struct bench *b, const struct bench_shape *s, bool inplace);

/* Post and wait once; returns 0 or the error (printed).  algo, unless
 * NULL, receives the name of the algorithm that ran. */
enum { BENCH_ALGO_LEN = 32 };
int bench_run_once(struct bench *b, const struct bench_shape *s, bool inplace,
                   char algo[BENCH_ALGO_LEN]);

double bench_now_s(void);

/* *v becomes the maximum (or mean) of *v over the ranks.  Collective. */
int bench_max(struct bench *b, double *v);
int bench_mean(struct bench *b, double *v);

/* Prints "what failed: why" and returns rc. */
int bench_report(const char *what, int rc);

/* The --json array, written by rank 0: open (collective: returns -1 on
 * every rank when rank 0 cannot create the file), start each record
 * (NULL on other ranks or without --json), close.  The tool writes the
 * records. */
struct bench_json {
    FILE *f;
    int records;
};
int bench_json_open(struct bench *b, struct bench_json *j);
FILE *bench_json_record(struct bench_json *j);
int bench_json_close(struct bench_json *j, const char *path);

#endif /* TIDE_BENCH_COMMON_H */
