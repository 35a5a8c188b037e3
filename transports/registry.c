/* registry.c - the one place that knows which transports exist and picks
 * the one a job uses (see transport.h).  A new transport adds a line to
 * `transports`; nothing in engine/ or collectives/ changes. */
#include "transports/transport.h"
#include "engine/context.h"
#include "engine/log.h"
#include "transports/tcp/tcp.h"

#include <stdio.h>
#include <string.h>

struct entry {
    const char *name;
    /* cfg's settings of this transport are valid: 0, or TIDE_EINVAL + why */
    int (*check)(const tide_config *cfg, char *why, size_t len);
    /* join the job described by ctx->cfg */
    int (*open)(struct tide__ctx *ctx, struct tide__transport **out);
};

/* In order of preference for auto. */
static const struct entry transports[] = {
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
