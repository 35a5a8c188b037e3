/* registry.c - the one place that knows which transports exist and picks
 * the one a job uses (see transport.h).  A new transport adds a line to
 * `transports`; nothing in engine/ or collectives/ changes. */
#include "engine/transport.h"
#include "engine/context.h"
#include "engine/log.h"
#include "transports/mux.h"
#include "transports/shm/shm.h"
#include "transports/rendezvous/bootstrap.h"
#include "transports/tcp/tcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct entry {
    const char *name;
    /* cfg's settings of this transport are valid: 0, or TIDE_EINVAL + why */
    int (*check)(const tide_config *cfg, char *why, size_t len);
    /* join the job described by ctx->cfg */
    int (*open)(struct tide__ctx *ctx, struct tide__transport **out);
};

static int open_shm(struct tide__ctx *ctx, struct tide__transport **out);

/* In order of preference for auto: shared memory between the ranks on
 * a host and TCP to the others, or TCP alone. */
static const struct entry transports[] = {
    {"shm", tide__tcp_check, open_shm},
    {"tcp", tide__tcp_check, tide__tcp_open},
};

#define NTRANSPORTS (sizeof transports / sizeof transports[0])

static const struct entry *find(const char *name)
{
    for (size_t i = 0; i < NTRANSPORTS; i++)
        if (!strcmp(transports[i].name, name))
            return &transports[i];
    return NULL;
}

/* shm: the TCP mesh first (the rendezvous, and the sockets that stay as
 * doorbells and loss detectors), then shared memory takes the pairs on
 * this host and TCP the rest; a mux routes each peer to its part.
 * Explicitly asked for, shm must serve every pair on this host; under
 * auto a pair that cannot share memory stays on TCP. */
static int open_shm(struct tide__ctx *ctx, struct tide__transport **out)
{
    int *fds = malloc((size_t)ctx->size * sizeof *fds);
    struct tide__wire_keys *keys = malloc((size_t)ctx->size * sizeof *keys);
    uint8_t *route = malloc((size_t)ctx->size);
    char err[512] = "";
    int rc = fds && keys && route ? 0 : TIDE_ENOMEM;
    for (int p = 0; fds && p < ctx->size; p++)
        fds[p] = -1;
    if (!rc && (rc = tide__bootstrap(&ctx->cfg, fds, keys, err, sizeof err)))
        tide__log(TIDE_LOG_ERROR, ctx->rank, "tide_init: %s", err);
    struct tide__transport *parts[2] = {NULL, NULL};
    if (!rc)
        rc = tide__shm_create(ctx, fds, !strcmp(ctx->cfg.transport, "shm"), &parts[0]);
    for (int p = 0; !rc && p < ctx->size; p++)
        route[p] = p != ctx->rank && fds[p] < 0 ? 0 : 1; /* taken by shm, or TCP's */
    if (!rc && (rc = tide__tcp_create(ctx, ctx->rank, ctx->size, fds, keys, &parts[1])))
        parts[0]->ops->destroy(parts[0]);
    if (!rc)
        rc = tide__mux_create(ctx, parts, 2, route, out);
    for (int p = 0; rc && fds && p < ctx->size; p++)
        if (fds[p] >= 0)
            close(fds[p]);
    if (keys)
        sodium_memzero(keys, (size_t)ctx->size * sizeof *keys);
    free(fds);
    free(keys);
    free(route);
    return rc;
}

int tide__transport_check(const tide_config *cfg, char *why, size_t len)
{
    if (cfg->transport[0] && !find(cfg->transport)) {
        int n = snprintf(why, len, "transport \"%s\" is unknown (known: auto", cfg->transport);
        for (size_t i = 0; i < NTRANSPORTS && n > 0 && (size_t)n < len; i++)
            n += snprintf(why + n, len - (size_t)n, ", %s", transports[i].name);
        if (n > 0 && (size_t)n < len)
            snprintf(why + n, len - (size_t)n, ")");
        return TIDE_EINVAL;
    }
    for (size_t i = 0; i < NTRANSPORTS; i++)
        if (transports[i].check(cfg, why, len))
            return TIDE_EINVAL;
    return 0;
}

int tide__transport_open(struct tide__ctx *ctx)
{
    const struct entry *e = ctx->cfg.transport[0] ? find(ctx->cfg.transport) : &transports[0];
    if (!e)
        return TIDE_EINVAL; /* tide__transport_check refused it already */
    tide__log(TIDE_LOG_DEBUG, ctx->rank, "transport: %s", e->name);
    return e->open(ctx, &ctx->tp);
}
