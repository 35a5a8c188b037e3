/* hang_rank.c - a rank program for test_doctor_tcp under tide-run: every
 * rank runs ROUNDS allreduces, then rank STUCK "computes" (sleeps) for
 * SECONDS while the others enter the next allreduce and wait for it.
 * The job looks stuck; tide-run --dump-on-timeout asks every rank for a
 * flight-recorder dump, which the stuck rank writes from its signal
 * thread while its main thread sleeps.
 *
 * Usage: hang_rank STUCK ROUNDS SECONDS.  Exit 0 on the stuck rank, and
 * on the others 3 (their allreduce failed, as it must). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tide.h"

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int stuck = atoi(argv[1]), rounds = atoi(argv[2]);
    struct timespec nap = {atoi(argv[3]), 0};
    tide_comm *comm;
    int rc = tide_init(&comm);
    if (rc) {
        fprintf(stderr, "tide_init: %s\n", tide_strerror(rc));
        return 1;
    }
    int r = tide_comm_rank(comm);
    int32_t in[8] = {r}, out[8];
    for (int i = 0; i < rounds && rc == 0; i++)
        rc = tide_allreduce(comm, in, out, 8, TIDE_INT32, TIDE_SUM);
    if (rc == 0 && r == stuck) /* the dump signal cuts a sleep short: sleep the rest */
        while (nanosleep(&nap, &nap) != 0)
            ;
    else if (rc == 0)
        rc = tide_allreduce(comm, in, out, 8, TIDE_INT32, TIDE_SUM) ? 3 : 4;
    tide_comm_abort(comm);
    tide_finalize(comm);
    return rc;
}
