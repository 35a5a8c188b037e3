/* subcomm.c - communicators made from others: tide_comm_split (MPI's
 * semantics), tide_comm_create_group (the seed's SubBackend, sorted
 * and de-duplicated members), those the engine derives (shrink's
 * survivors, the hierarchy's of hosts.c), and their release.
 *
 * A sub-communicator shares its parent's context, transport and
 * connections; only its rank mapping and its id differ.  The id goes on
 * the wire, so two communicators that share a rank must never share an
 * id.  Members agree on it without a message: it is a hash of what they
 * all know (the parent's id, the split's sequence number or the member
 * list and how often that list was grouped before, and the color).
 * Distinct ids are then a matter of a 32-bit hash not colliding among a
 * process's live communicators; a collision is detected and refused. */
#include "engine/context.h"
#include "engine/log.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a over the bytes of v. */
static uint32_t mix(uint32_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (uint32_t)(v >> (8 * i)) & 0xffu;
        h *= 16777619u;
    }
    return h;
}

/* The communicator with wire id `id`, or NULL; pool_lock held. */
static tide_comm *lookup(struct tide__ctx *ctx, uint32_t id)
{
    if (id == ctx->world.id)
        return &ctx->world;
    tide_comm *c = ctx->comms;
    while (c && c->id != id)
        c = c->next;
    return c;
}

tide_comm *tide__comm_find(struct tide__ctx *ctx, uint32_t id)
{
    pthread_mutex_lock(&ctx->pool_lock);
    tide_comm *c = lookup(ctx, id);
    pthread_mutex_unlock(&ctx->pool_lock);
    return c;
}

/* Make a communicator of parent's ranks members[0..n-1] (parent ranks,
 * in the new order), with this process at new rank `rank`. */
static int comm_new(tide_comm *parent, const int *members, int n, int rank, uint32_t id,
                    tide_comm **out)
{
    struct tide__ctx *ctx = parent->ctx;
    tide_comm *c = calloc(1, sizeof *c);
    int *world_of = malloc((size_t)n * sizeof *world_of);
    if (!c || !world_of) {
        free(c);
        free(world_of);
        return TIDE_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        world_of[i] = parent->world_of ? parent->world_of[members[i]] : members[i];
    c->ctx = ctx;
    c->rank = rank;
    c->size = n;
    c->world_of = world_of;
    atomic_init(&c->next_seq, 1);
    atomic_init(&c->refs, 1);

    id = id < 2 ? id + 2 : id; /* 0 is unused, 1 is the world */
    pthread_mutex_lock(&ctx->pool_lock);
    bool clash = lookup(ctx, id) != NULL;
    if (!clash) {
        c->id = id;
        c->next = ctx->comms;
        ctx->comms = c;
    }
    pthread_mutex_unlock(&ctx->pool_lock);
    if (clash) {
        tide__log(TIDE_LOG_ERROR, parent->rank,
                  "new communicator: id %u is already in use by another communicator here", id);
        free(world_of);
        free(c);
        return TIDE_EBUSY;
    }
    atomic_fetch_add(&ctx->refs, 1);
    *out = c;
    return 0;
}

void tide__comm_unref(tide_comm *comm)
{
    if (atomic_fetch_sub(&comm->refs, 1) != 1)
        return;
    struct tide__ctx *ctx = comm->ctx;
    if (comm->board_free)
        comm->board_free(comm);
    free(comm->world_of);
    free(comm->groups);
    free(comm->failed);
    free(comm->rec);
    free(comm);
    tide__ctx_unref(ctx);
}

int tide_comm_free(tide_comm *comm)
{
    if (!comm || comm == &comm->ctx->world)
        return TIDE_EINVAL;
    struct tide__ctx *ctx = comm->ctx;
    pthread_mutex_lock(&ctx->pool_lock);
    for (tide_comm **p = &ctx->comms; *p; p = &(*p)->next) {
        if (*p == comm) {
            *p = comm->next;
            break;
        }
    }
    pthread_mutex_unlock(&ctx->pool_lock);
    tide__comm_hosts_free(comm);
    tide__comm_unref(comm);
    return 0;
}

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

    tide_req *req;
    tide__wait_next();
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
    uint32_t id = mix(mix(mix(2166136261u, comm->id), seq), (uint64_t)(uint32_t)mine[0]);
    rc = comm_new(comm, members, k, rank, id, newcomm);
    if (!rc)
        tide__comm_hosts_init(*newcomm);
out:
    free(all);
    free(m);
    free(members);
    return rc;
}

/* ---- create_group ---- */

/* How many groups with member-list hash `hash` this rank made from comm
 * before (and count this one).  UINT64_MAX when out of memory. */
static uint64_t group_count(tide_comm *comm, uint32_t hash)
{
    struct tide__ctx *ctx = comm->ctx;
    uint64_t before = UINT64_MAX;
    pthread_mutex_lock(&ctx->pool_lock);
    for (int i = 0; i < comm->ngroups; i++)
        if (comm->groups[i].hash == hash)
            before = comm->groups[i].count++;
    if (before == UINT64_MAX) {
        struct tide__group_tally *g =
            realloc(comm->groups, ((size_t)comm->ngroups + 1) * sizeof *g);
        if (g) {
            g[comm->ngroups++] = (struct tide__group_tally){hash, 1};
            comm->groups = g;
            before = 0;
        }
    }
    pthread_mutex_unlock(&ctx->pool_lock);
    return before;
}

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
    uint32_t id = mix(2166136261u, comm->id);
    for (int i = 0; i < k; i++)
        id = mix(id, (uint64_t)members[i]);
    uint64_t before = group_count(comm, id);
    int rc = before == UINT64_MAX ? TIDE_ENOMEM
                                  : comm_new(comm, members, k, rank, mix(id, before), newcomm);
    if (!rc)
        tide__comm_hosts_init(*newcomm);
    free(members);
    return rc;
}

/* ---- derived: shrink's survivors, hosts.c's internal communicators ---- */

int tide__comm_derive(tide_comm *parent, const int *members, int n, uint64_t salt,
                      tide_comm **out)
{
    int rank = -1;
    uint32_t id = mix(mix(2166136261u, parent->id), salt);
    for (int i = 0; i < n; i++) {
        if (members[i] == parent->rank)
            rank = i;
        id = mix(id, (uint64_t)members[i]);
    }
    if (rank < 0)
        return TIDE_EPEER; /* agree.c refuses this first */
    return comm_new(parent, members, n, rank, id, out);
}
