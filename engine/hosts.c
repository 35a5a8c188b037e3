/* hosts.c - which members of a communicator share a host, and the two
 * communicators hierarchical collectives run on.
 *
 * The transport knows every rank's host (transport.h, host_of), the same
 * on every rank.  From it each member of a communicator works out, with
 * no message, the same picture:
 *   - shared: every member is on one host and maps every other's staging
 *     area, so the staged algorithms (collectives/stage.h) may run;
 *   - the hosts, numbered in the order their first member appears, and
 *     how many members each has;
 *   - when the members are spread evenly, at least two to a host over at
 *     least two hosts, a hierarchy: `host`, the members on our host (in
 *     comm order), and `cross`, the member at our place on each host (in
 *     host order).  A hierarchical all-reduce reduce-scatters inside the
 *     host, all-reduces its slice across hosts with the members holding
 *     the same slice, and all-gathers inside the host again.  There are
 *     two host communicators of the same members, one for the parts that
 *     open a collective and one for those that close it: parts start on
 *     their communicator in number order (subreq.c), and on one they
 *     would hold the next collective's opening part until this one's
 *     closing part could start, stalling collectives in flight behind
 *     each other.
 * Uneven hosts get no hierarchy: their slices would not line up across
 * hosts.  Every member decides alike, so every member picks alike.
 *
 * The two are communicators like any other (own ids, own sequence
 * numbers, own recorders) but internal: made and freed with their
 * parent, never handed to the user. */
#include "engine/context.h"
#include "engine/log.h"

#include <stdlib.h>

/* Salts for tide__comm_derive, so that a host's communicator and a cross
 * one of the same members would still differ ("host", "crss"). */
#define SALT_HOST 0x686f7374u
#define SALT_CROSS 0x63727373u

static int world_rank(const tide_comm *comm, int q)
{
    return comm->world_of ? comm->world_of[q] : q;
}

/* Every member maps every other's staging area (only ranks of one host
 * can, and the transport offers it to all of a host's ranks or none). */
static bool all_staged(const tide_comm *comm)
{
    struct tide__transport *tp = comm->ctx->tp;
    size_t bytes, slot;
    if (!tp || !tp->ops->stage_at)
        return false;
    for (int q = 0; q < comm->size; q++)
        if (!tp->ops->stage_at(tp, world_rank(comm, q), &bytes, &slot))
            return false;
    return true;
}

/* The hosts of comm's members: hostix[q] (numbered by first appearance),
 * local[q] (its place among its host's members), the count per host in
 * per[].  Returns the number of hosts, or -1 out of memory. */
static int group(const tide_comm *comm, int *hostix, int *local, int *per)
{
    struct tide__transport *tp = comm->ctx->tp;
    int *ix = malloc((size_t)comm->ctx->size * sizeof *ix); /* host key -> number */
    if (!ix)
        return -1;
    for (int w = 0; w < comm->ctx->size; w++)
        ix[w] = -1;
    int nhosts = 0;
    for (int q = 0; q < comm->size; q++) {
        int key = tp->ops->host_of(tp, world_rank(comm, q));
        if (key < 0 || key >= comm->ctx->size)
            key = world_rank(comm, q); /* cannot tell: a host of its own */
        if (ix[key] < 0) {
            ix[key] = nhosts;
            per[nhosts++] = 0;
        }
        hostix[q] = ix[key];
        local[q] = per[ix[key]]++;
    }
    free(ix);
    return nhosts;
}

/* Make comm->host and comm->cross from the grouping. */
static int make_hierarchy(tide_comm *comm, const int *hostix, const int *local)
{
    int me = comm->rank, L = comm->per_host;
    int *members = malloc((size_t)(L > comm->nhosts ? L : comm->nhosts) * sizeof *members);
    if (!members)
        return TIDE_ENOMEM;
    int k = 0;
    for (int q = 0; q < comm->size; q++)
        if (hostix[q] == hostix[me])
            members[k++] = q;
    int rc = tide__comm_derive(comm, members, L, SALT_HOST, &comm->host[0]);
    if (!rc)
        rc = tide__comm_derive(comm, members, L, SALT_HOST + 1, &comm->host[1]);
    for (int q = 0; !rc && q < comm->size; q++)
        if (local[q] == local[me])
            members[hostix[q]] = q;
    if (!rc)
        rc = tide__comm_derive(comm, members, comm->nhosts, SALT_CROSS, &comm->cross);
    free(members);
    if (rc)
        return rc;
    for (int h = 0; h < 2; h++) {
        comm->host[h]->nhosts = 1;
        comm->host[h]->per_host = L;
        comm->host[h]->shared = all_staged(comm->host[h]);
    }
    comm->cross->nhosts = comm->nhosts;
    comm->cross->per_host = 1;
    return 0;
}

void tide__comm_hosts_init(tide_comm *comm)
{
    struct tide__transport *tp = comm->ctx->tp;
    int n = comm->size;
    comm->nhosts = n;
    comm->per_host = 1;
    comm->shared = all_staged(comm);
    if (n == 1 || !tp || !tp->ops->host_of)
        return;
    int *hostix = calloc(3 * (size_t)n, sizeof *hostix);
    if (!hostix) {
        comm->hosts_err = TIDE_ENOMEM;
        return;
    }
    int *local = hostix + n, *per = local + n;
    int nhosts = group(comm, hostix, local, per);
    if (nhosts < 0) {
        comm->hosts_err = TIDE_ENOMEM;
        free(hostix);
        return;
    }
    comm->nhosts = nhosts;
    comm->per_host = per[0];
    for (int h = 1; h < nhosts; h++)
        if (per[h] != per[0])
            comm->per_host = 0;
    if (tide__comm_hierarchical(comm)) {
        comm->hosts_err = make_hierarchy(comm, hostix, local);
        if (comm->hosts_err)
            tide__log(TIDE_LOG_ERROR, comm->rank, "cannot make the communicators of a "
                      "hierarchy (%d hosts of %d ranks): %s; hierarchical collectives on this "
                      "communicator will fail", nhosts, comm->per_host,
                      tide_strerror(comm->hosts_err));
    }
    free(hostix);
}

void tide__comm_hosts_free(tide_comm *comm)
{
    tide_comm *made[3] = {comm->host[0], comm->host[1], comm->cross};
    for (int k = 0; k < 3; k++)
        if (made[k])
            tide_comm_free(made[k]);
    comm->host[0] = comm->host[1] = comm->cross = NULL;
}
