/* comm_split.c - the calls that make a communicator of some of another's
 * ranks: tide_comm_split (MPI's semantics: an all-gather of every rank's
 * color and key) and tide_comm_create_group (the seed's SubBackend:
 * sorted, de-duplicated members, no message).  The communicator object
 * and its wire id are the engine's (engine/subcomm.c, whose comment says
 * how members agree on the id without a message). */
#include "engine/context.h"
#include "engine/log.h"

#include <stdlib.h>
#include <string.h>

/* ---- split ---- */

struct member {
    int color, key, rank;
};

static int by_key(const void *a, const void *b)
{
    const struct member *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

int tide_comm_split(tide_comm *comm, int color, int key, tide_comm **newcomm)
{
    if (newcomm)
        *newcomm = NULL;
    if (!comm || !newcomm || tide__comm_usable(comm, "tide_comm_split"))
        return TIDE_EINVAL;
    int n = comm->size;
    int32_t mine[2] = {color < 0 ? TIDE_UNDEFINED : color, key};
    int32_t *all = malloc((size_t)n * sizeof mine);
    struct member *m = malloc((size_t)n * sizeof *m);
    int *members = malloc((size_t)n * sizeof *members);
    int rc = TIDE_ENOMEM;
    if (!all || !m || !members)
        goto out;

    /* Not the blocking form: the new id mixes in this all-gather's
     * sequence number, so it needs a request (the direct path of a
     * blocking call on boards makes none; collectives/board.h). */
    tide_req *req;
    rc = tide_iallgather(comm, mine, all, 2, TIDE_INT32, &req);
    uint64_t seq = req ? req->seq : 0;
    if ((rc = tide__wait_and_free(rc, req)) != 0)
        goto out;
    if (mine[0] == TIDE_UNDEFINED)
        goto out; /* rc is 0: a rank that joins none gets NULL */

    int k = 0;
    for (int r = 0; r < n; r++)
        if (all[2 * r] == mine[0])
            m[k++] = (struct member){all[2 * r], all[2 * r + 1], r};
    qsort(m, (size_t)k, sizeof *m, by_key);
    int rank = 0;
    for (int i = 0; i < k; i++) {
        members[i] = m[i].rank;
        if (m[i].rank == comm->rank)
            rank = i;
    }
    uint32_t id = tide__comm_id_mix(TIDE_COMM_ID_SEED, comm->id);
    id = tide__comm_id_mix(tide__comm_id_mix(id, seq), (uint64_t)(uint32_t)mine[0]);
    rc = tide__comm_new(comm, members, k, rank, id, newcomm);
    if (!rc)
        tide__comm_hosts_init(*newcomm);
out:
    free(all);
    free(m);
    free(members);
    return rc;
}

/* ---- create_group ---- */

static int by_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int tide_comm_create_group(tide_comm *comm, const int *ranks, int n, tide_comm **newcomm)
{
    if (newcomm)
        *newcomm = NULL;
    if (!comm || !newcomm || !ranks || n < 1) {
        tide__log(TIDE_LOG_WARN, comm ? comm->rank : -1,
                  "tide_comm_create_group: comm, ranks and newcomm must be given, n >= 1");
        return TIDE_EINVAL;
    }
    if (tide__comm_usable(comm, "tide_comm_create_group"))
        return TIDE_EINVAL;
    int *members = malloc((size_t)n * sizeof *members);
    if (!members)
        return TIDE_ENOMEM;
    memcpy(members, ranks, (size_t)n * sizeof *members);
    qsort(members, (size_t)n, sizeof *members, by_int);
    int k = 0, rank = -1;
    for (int i = 0; i < n; i++) {
        if (members[i] < 0 || members[i] >= comm->size) {
            tide__log(TIDE_LOG_WARN, comm->rank,
                      "tide_comm_create_group: rank %d is not in the communicator (size %d)",
                      members[i], comm->size);
            free(members);
            return TIDE_EINVAL;
        }
        if (k && members[k - 1] == members[i])
            continue;
        if (members[i] == comm->rank)
            rank = k;
        members[k++] = members[i];
    }
    if (rank < 0) {
        tide__log(TIDE_LOG_WARN, comm->rank,
                  "tide_comm_create_group: this rank (%d) is not a member of the group",
                  comm->rank);
        free(members);
        return TIDE_EINVAL;
    }
    /* Members create their groups in the same order, so the number of
     * groups this rank made from comm before is the same on all of them
     * only if it counts groups of these very members: hash the list,
     * then the count of earlier groups with that hash. */
    uint32_t id = tide__comm_id_mix(TIDE_COMM_ID_SEED, comm->id);
    for (int i = 0; i < k; i++)
        id = tide__comm_id_mix(id, (uint64_t)members[i]);
    uint64_t before = tide__comm_groups_before(comm, id);
    int rc = TIDE_ENOMEM;
    if (before != UINT64_MAX)
        rc = tide__comm_new(comm, members, k, rank, tide__comm_id_mix(id, before), newcomm);
    if (!rc)
        tide__comm_hosts_init(*newcomm);
    free(members);
    return rc;
}
