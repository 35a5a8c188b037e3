/* tcp.h - the TCP transport: one connection per peer, driven by the
 * reactor's io_uring ring.  See tcp_conn.h for the inside. */
#ifndef TIDE_TCP_H
#define TIDE_TCP_H

#include "transports/tcp/wire_auth.h"
#include "engine/transport.h"

/* The registry's entry (registry.c): check cfg's TCP settings (0 or
 * TIDE_EINVAL with why); join the job described by ctx->cfg (bootstrap.h)
 * and wrap its sockets in a transport. */
int tide__tcp_check(const tide_config *cfg, char *why, size_t len);
int tide__tcp_open(struct tide__ctx *ctx, struct tide__transport **out);

/* Wrap the bootstrapped sockets (fds[p] to rank p; fds[rank] == -1) in a
 * transport, protecting frames with keys[p] (bootstrap.h) as
 * ctx->cfg.wire_auth says (keys NULL: not at all).  Takes ownership of
 * the fds, even on failure. */
int tide__tcp_create(struct tide__ctx *ctx, int rank, int size, int *fds,
                     const struct tide__wire_keys *keys, struct tide__transport **out);

#endif
