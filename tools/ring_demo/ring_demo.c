/* ring_demo.c - tide-ring-demo, the first demo: every rank joins,
 * a token travels once around the ring of ranks, every rank hands 1 MiB
 * to its right neighbour, all meet at a barrier, then they run an
 * allreduce, an all-gather and a reduce-scatter (small ones whose results
 * are printed, and a 16 MiB allreduce), and each checks what it got.  It
 * says what happens in plain words.  Run it with
 *     tide-run -n 4 -- tide-ring-demo
 * (tide-fsdp-train is the main job now.) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/common/cli.h"
#include "tide.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "%s failed: %s (%s)\n", what, tide_strerror(rc), tide_err_name(rc));
    return 1;
}

/* Rank 0 starts the token at 0; every rank adds (its rank + 1) and passes
 * it right; rank 0 gets back 1 + 2 + ... + n. */
static int pass_token(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int right = (r + 1) % n, left = (r + n - 1) % n, rc;
    int64_t token = 0;
    if (r != 0 && (rc = tide_recv(comm, &token, sizeof token, left, 1)))
        return fail("receiving the token", rc);
    token += r + 1;
    if ((rc = tide_send(comm, &token, sizeof token, right, 1)))
        return fail("passing the token on", rc);
    if (r != 0)
        return 0;
    if ((rc = tide_recv(comm, &token, sizeof token, left, 1)))
        return fail("receiving the token back", rc);
    int64_t want = (int64_t)n * (n + 1) / 2;
    printf("the token went around all %d ranks, each adding its rank + 1: it came back as %lld "
           "(expected %lld) %s\n",
           n, (long long)token, (long long)want, token == want ? "- correct" : "- WRONG");
    return token == want ? 0 : 1;
}

/* Every rank sends 1 MiB of a pattern made from its rank to the right and
 * checks the pattern of its left neighbour, both at once (nonblocking). */
static int exchange_block(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    int right = (r + 1) % n, left = (r + n - 1) % n, rc;
    size_t words = (1u << 20) / sizeof(uint32_t);
    uint32_t *out = malloc(words * sizeof *out), *in = calloc(words, sizeof *in);
    if (!out || !in)
        return fail("allocating 1 MiB", TIDE_ENOMEM);
    for (size_t i = 0; i < words; i++)
        out[i] = (uint32_t)(r * 0x9e3779b9u + i);
    tide_req *recv, *send;
    double t0 = now_s();
    if ((rc = tide_irecv(comm, in, words * sizeof *in, left, 2, &recv)) ||
        (rc = tide_isend(comm, out, words * sizeof *out, right, 2, &send)))
        return fail("posting the 1 MiB exchange", rc);
    if ((rc = tide_wait(send, -1)) || (rc = tide_wait(recv, -1)))
        return fail("the 1 MiB exchange", rc);
    double ms = (now_s() - t0) * 1e3;
    size_t bad = 0;
    for (size_t i = 0; i < words; i++)
        bad += in[i] != (uint32_t)(left * 0x9e3779b9u + i);
    printf("received 1 MiB from rank %d in %.2f ms: %s\n", left, ms,
           bad ? "CORRUPT" : "every byte as sent");
    tide_req_free(recv);
    tide_req_free(send);
    free(out);
    free(in);
    return bad ? 1 : 0;
}

/* The whole group agrees whether every rank's checks passed. */
static int all_passed(tide_comm *comm, int bad)
{
    int32_t mine = bad != 0, sum = 0;
    int rc = tide_allreduce(comm, &mine, &sum, 1, TIDE_INT32, TIDE_SUM);
    return rc ? fail("agreeing on the result", rc) : sum != 0;
}

static void print_vec(const char *what, const float *v, int len, const char *algo, int ok)
{
    printf("%s: [", what);
    for (int i = 0; i < len; i++)
        printf(i ? " %g" : "%g", v[i]);
    printf("] (algorithm %s) %s\n", algo, ok ? "- correct" : "- WRONG");
}

/* The seed's examples, on any number of ranks: rank 0 prints them. */
static int small_collectives(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), rc, bad = 0;
    float three[3] = {(float)r, (float)r, (float)r}, sum[3];
    tide_req *req;
    if ((rc = tide_iallreduce(comm, three, sum, 3, TIDE_FLOAT32, TIDE_SUM, &req)) ||
        (rc = tide_wait(req, -1)))
        return fail("the allreduce", rc);
    float want = (float)n * (float)(n - 1) / 2;
    int ok = sum[0] == want && sum[1] == want && sum[2] == want;
    bad |= !ok;
    if (r == 0)
        print_vec("allreduce of [r, r, r], summed over the ranks", sum, 3, tide_req_algorithm(req), ok);
    tide_req_free(req);

    float pair[2] = {10.0f * (float)r, 10.0f * (float)r + 1}, *all = malloc(2 * (size_t)n * sizeof *all);
    if (!all)
        return fail("allocating", TIDE_ENOMEM);
    if ((rc = tide_iallgather(comm, pair, all, 2, TIDE_FLOAT32, &req)) || (rc = tide_wait(req, -1)))
        return fail("the all-gather", rc);
    ok = 1;
    for (int i = 0; i < 2 * n; i++)
        ok &= all[i] == 10.0f * (float)(i / 2) + (float)(i % 2);
    bad |= !ok;
    if (r == 0)
        print_vec("all-gather of [10r, 10r+1]", all, 2 * n, tide_req_algorithm(req), ok);
    tide_req_free(req);

    for (int i = 0; i < n; i++)
        all[i] = (float)(i + 1);
    float mine;
    if ((rc = tide_ireduce_scatter(comm, all, &mine, 1, TIDE_FLOAT32, TIDE_SUM, &req)) ||
        (rc = tide_wait(req, -1)))
        return fail("the reduce-scatter", rc);
    ok = mine == (float)(n * (r + 1));
    bad |= !ok;
    if ((rc = tide_gather(comm, &mine, all, 1, TIDE_FLOAT32, 0)))
        return fail("gathering the reduce-scatter results", rc);
    if (r == 0)
        print_vec("reduce-scatter of [1, 2, ..., n]: rank r gets n(r+1)", all, n,
                  tide_req_algorithm(req), ok);
    tide_req_free(req);
    free(all);
    return bad;
}

/* A 16 MiB allreduce, the size where bandwidth matters, checked. */
static int big_allreduce(tide_comm *comm)
{
    int r = tide_comm_rank(comm), n = tide_comm_size(comm), rc;
    size_t count = (16u << 20) / sizeof(float);
    float *in = malloc(count * sizeof *in), *out = malloc(count * sizeof *out);
    if (!in || !out)
        return fail("allocating 2 x 16 MiB", TIDE_ENOMEM);
    for (size_t i = 0; i < count; i++)
        in[i] = (float)((i + (size_t)r) % 8);
    tide_req *req;
    double t0 = now_s();
    if ((rc = tide_iallreduce(comm, in, out, count, TIDE_FLOAT32, TIDE_SUM, &req)) ||
        (rc = tide_wait(req, -1)))
        return fail("the 16 MiB allreduce", rc);
    double ms = (now_s() - t0) * 1e3;
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int q = 0; q < n; q++)
            want += (float)((i + (size_t)q) % 8);
        wrong += out[i] != want;
    }
    if (r == 0)
        printf("allreduce of 16 MiB of floats: %.1f ms (algorithm %s), %s\n", ms,
               tide_req_algorithm(req), wrong ? "WRONG elements" : "every element correct");
    tide_req_free(req);
    free(in);
    free(out);
    return wrong != 0;
}

static const char usage[] =
    "Usage: tide-run -n N -- tide-ring-demo\n"
    "\n"
    "Every rank joins; a token goes once around the ring of ranks, each\n"
    "hands 1 MiB to its right neighbour, all meet at a barrier, then they\n"
    "run small collectives and a 16 MiB allreduce, and check every result.\n"
    "It takes no options but these:\n"
    "\n"
    "  -h, --help   print this help\n"
    "  --version    print tide's version\n"
    "\n"
    "Exit status: 0 when every check on every rank passed.\n";

/* -1: run the demo; else the exit status (after --help, --version or a
 * misuse: an argument it would otherwise ignore). */
static int parse_args(int argc, char **argv)
{
    const struct cli_tool tool = {.name = "tide-ring-demo", .usage = usage,
                                  .version = tide_version()};
    int rc = cli_help_version(&tool, argc, argv);
    if (rc >= 0 || optind == argc)
        return rc;
    return cli_usage_error(&tool, "unexpected argument '%s'", argv[optind]);
}

int main(int argc, char **argv)
{
    int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    tide_comm *comm;
    rc = tide_init(&comm);
    if (rc)
        return fail("joining the job (tide_init)", rc);
    int r = tide_comm_rank(comm), n = tide_comm_size(comm);
    printf("rank %d of %d joined: connected to every other rank over authenticated TCP\n", r, n);

    int bad = pass_token(comm) | exchange_block(comm);
    double t0 = now_s();
    if ((rc = tide_barrier(comm)))
        return fail("the barrier", rc);
    printf("all %d ranks met at the barrier (%.0f us)\n", n, (now_s() - t0) * 1e6);
    bad |= small_collectives(comm) | big_allreduce(comm);
    bad = all_passed(comm, bad);
    if ((rc = tide_finalize(comm)))
        return fail("tide_finalize", rc);
    if (r == 0)
        printf("%s\n", bad ? "demo FAILED" : "demo passed: every check on every rank came out right");
    return bad;
}
