/* subcomm.c - communicators made from others: the object, its wire id
 * and its release, for the calls that make one (tide_comm_split and
 * tide_comm_create_group, which agree on their members through a
 * collective: collectives/comm_split.c) and for those the engine derives
 * (shrink's survivors, the hierarchy's of hosts.c).
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

uint32_t tide__comm_id_mix(uint32_t h, uint64_t v)
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

int tide__comm_new(tide_comm *parent, const int *members, int n, int rank, uint32_t id,
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
    free(comm->select_memo);
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

/* ---- create_group's tally ---- */

uint64_t tide__comm_groups_before(tide_comm *comm, uint32_t hash)
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

/* ---- derived: shrink's survivors, hosts.c's internal communicators ---- */

int tide__comm_derive(tide_comm *parent, const int *members, int n, uint64_t salt,
                      tide_comm **out)
{
    int rank = -1;
    uint32_t id = tide__comm_id_mix(tide__comm_id_mix(TIDE_COMM_ID_SEED, parent->id), salt);
    for (int i = 0; i < n; i++) {
        if (members[i] == parent->rank)
            rank = i;
        id = tide__comm_id_mix(id, (uint64_t)members[i]);
    }
    if (rank < 0)
        return TIDE_EPEER; /* agree.c refuses this first */
    return tide__comm_new(parent, members, n, rank, id, out);
}
