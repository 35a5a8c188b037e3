/* mpi_allreduce_sweep.c - the MPI twin of allreduce_sweep.c (same sizes,
 * iterations and output), built by tools/compare_allreduce.sh with mpicc.
 * Not part of the meson build: MPI is a comparison, not a dependency. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int r;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    for (size_t bytes = 8; bytes <= (32u << 20); bytes *= 4) {
        int count = (int)(bytes / sizeof(float));
        float *a = calloc((size_t)count, sizeof *a), *b = calloc((size_t)count, sizeof *b);
        int iters = bytes >= (8u << 20) ? 4 : bytes >= (1u << 20) ? 30 : 300;
        for (int i = 0; i < 3; i++)
            MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double us = (MPI_Wtime() - t0) / iters * 1e6;
        if (r == 0)
            printf("%zu %.1f default\n", bytes, us);
        free(a);
        free(b);
    }
    MPI_Finalize();
    return 0;
}
