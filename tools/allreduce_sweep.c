/* allreduce_sweep.c - tide-allreduce-sweep: time a float32 sum allreduce
 * from 8 B to 32 MiB (x4 steps) with tide's default algorithm choice and
 * print "bytes microseconds algorithm" per line from rank 0.  Its twin
 * mpi_allreduce_sweep.c does the same with MPI_Allreduce, so
 * tools/compare_allreduce.sh can set the two side by side in one run. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tide.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
    tide_comm *w;
    if (tide_init(&w))
        return 1;
    int r = tide_comm_rank(w);
    for (size_t bytes = 8; bytes <= (32u << 20); bytes *= 4) {
        size_t count = bytes / sizeof(float);
        float *a = calloc(count, sizeof *a), *b = calloc(count, sizeof *b);
        int iters = bytes >= (8u << 20) ? 4 : bytes >= (1u << 20) ? 30 : 300;
        int rc = 0;
        for (int i = 0; i < 3 && !rc; i++) /* warm-up: connections, scratch */
            rc = tide_allreduce(w, a, b, count, TIDE_FLOAT32, TIDE_SUM);
        rc = rc ? rc : tide_barrier(w);
        double t0 = now_s();
        for (int i = 0; i < iters && !rc; i++)
            rc = tide_allreduce(w, a, b, count, TIDE_FLOAT32, TIDE_SUM);
        double us = (now_s() - t0) / iters * 1e6;
        tide_req *req;
        rc = rc ? rc : tide_iallreduce(w, a, b, count, TIDE_FLOAT32, TIDE_SUM, &req);
        rc = rc ? rc : tide_wait(req, -1);
        if (rc) {
            fprintf(stderr, "allreduce of %zu bytes failed: %s\n", bytes, tide_strerror(rc));
            return 1;
        }
        if (r == 0)
            printf("%zu %.1f %s\n", bytes, us, tide_req_algorithm(req));
        tide_req_free(req);
        free(a);
        free(b);
    }
    return tide_finalize(w) ? 1 : 0;
}
