/* coll_check.h - what the collectives tests over TCP share: the case
 * model, exact references in every dtype, byte patterns and guarded
 * buffers, one case of each collective run and checked, and the parent's
 * run of a body under an algorithm set.
 *
 * A wrong value is printed with the case that produced it and the run
 * goes on (CHECK); a call or wait that fails ends the rank (EXPECT),
 * since the communicator cannot be trusted after it.  Layouts assume a
 * little-endian host.  Everything here runs in a rank process except
 * coll_run, which is the parent's. */
#ifndef TIDE_TEST_COLL_CHECK_H
#define TIDE_TEST_COLL_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/harness.h"

/* ---- soft checks: report and go on; the rank fails at the end ---- */

extern int coll_failed_checks; /* this rank's failed CHECKs so far */

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond) && coll_failed_checks++ < 40) {                                   \
            fprintf(stderr, "%s:%d: rank %d: ", __FILE__, __LINE__, harness_rank);    \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
        }                                                                             \
    } while (0)

/* ---- collectives, their algorithms and the cases ---- */

enum coll {
    C_ALLREDUCE, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_ALLGATHERV, C_REDUCE_SCATTER,
    C_REDUCE_SCATTERV, C_GATHER, C_SCATTER, C_ALLTOALL, C_BARRIER, C_COUNT
};

struct family {
    const char *name;
    const char *env;       /* TIDE_ALGO_..., NULL: no choice */
    const char *algos[7];  /* the names tide.h lists; the sets force the first three
                              (shm, the staged algorithm, runs by default where
                              every pair of ranks shares memory; hier where the
                              ranks are spread evenly over test hosts), then
                              the boards: set 4 forces index 5, set 5 index 6
                              (or 5 where a family has no 6) */
    bool reduces;
};

/* Indexed by enum coll. */
extern const struct family coll_families[C_COUNT];

/* Where input and output live.  What "aliased" and "overlap" mean per
 * collective is drawn where the buffers are laid out (coll_check.c). */
enum layout_kind { L_SEPARATE, L_IN_PLACE, L_ALIASED, L_OVERLAP, L_COUNT };

struct ccase {
    enum coll coll;
    tide_dtype dtype;
    tide_op op;
    size_t count;   /* the call's count argument (per block where blocks) */
    int root;
    enum layout_kind layout;
    bool wrap;      /* int8/uint8 sums that overflow on purpose */
    unsigned salt;  /* varies inputs, NULL-at-zero and layout details */
};

enum { MAXN = 64, GUARD = 64, FILL = 0xa5 };

/* Which small cases coll_run_small_cases runs. */
struct plan {
    int set;    /* which algorithm of each collective was forced (3: none;
                   4 and 5: the boards) */
    bool full;  /* the whole dtype x op product, else a rotating fifth */
    bool big;   /* the 300000-element cases */
};

/* Fail the rank (EXPECT) if any CHECK failed; the last step of a body. */
void coll_end_of_body(void);

/* The case in words, with the forced and the run algorithm; a static buffer. */
const char *coll_describe(const struct ccase *k, int n);

/* Whether n ranks of this run share memory, so that board collectives
 * run among them: the tests' default transport, unless TIDE_TRANSPORT=tcp
 * or the ranks are spread over test hosts (TIDE_TEST_HOST_SIZE). */
bool coll_boards_run(int n);

/* EXPECT the post returned 0, and forget the last request's algorithm. */
void coll_posted(const struct ccase *k, int n, int rc);

/* Wait req (EXPECT success), check the algorithm it reports, free it. */
void coll_await(const struct ccase *k, int n, tide_req *req);

/* ---- exact values in every dtype ---- */

/* binary32 -> bfloat16 bits, round to nearest even. */
uint16_t coll_f32_to_bf16(float f);

/* The bits of v in float dtype d (float16 and bfloat16 via binary32). */
uint64_t coll_float_bits(tide_dtype d, double v);

/* The bits of element i of the reduction over n ranks' inputs for case k. */
uint64_t coll_ref_bits(const struct ccase *k, int n, size_t i);

/* Element j of size es at p, as bits. */
uint64_t coll_load_bits(const uint8_t *p, size_t j, size_t es);

/* Write rank r's input elements first..first+len of case k at p. */
void coll_fill_input(const struct ccase *k, int r, uint8_t *p, size_t first, size_t len);

/* CHECK out[0..len) against the reference elements first.. of case k. */
void coll_check_reduced(const struct ccase *k, int n, const uint8_t *out, size_t first,
                        size_t len);

/* ---- byte patterns and guarded buffers ---- */

/* Fill bytes at p with the pattern of (who, salt). */
void coll_fill_pat(uint8_t *p, size_t bytes, unsigned who, unsigned salt);

/* CHECK p holds the pattern of (who, k->salt); what and block name it. */
void coll_check_pat(const struct ccase *k, int n, const uint8_t *p, size_t bytes,
                    unsigned who, const char *what, int block);

/* malloc bytes + GUARD filled with FILL (EXPECT success); free() it. */
uint8_t *coll_alloc_guarded(size_t bytes);

/* ---- running cases ---- */

/* Run case k on comm and CHECK every output, guard and kept input. */
void coll_run_case(tide_comm *comm, const struct ccase *k);

/* Every collective at counts 0, 1, 13 and 11n-1 in the plan's dtypes and ops, then wraps. */
void coll_run_small_cases(tide_comm *comm, const struct plan *pl, unsigned *salt);

/* xorshift64: advance *s and return it. */
uint64_t coll_next_rand(uint64_t *s);

/* FNV-1a of len bytes: a result's fingerprint, to compare across ranks
 * and launches. */
uint64_t coll_hash(const void *buf, size_t len);

/* ---- the parent ---- */

/* Parent: run body on n ranks under algorithm set (3: none, -1: as set); 1 if any failed. */
int coll_run(const char *what, int n, tide_progress_mode mode, int set, harness_body body,
             void *arg);

#endif
