/* tcp.h - the TCP transport: one connection per peer, driven by the
 * reactor's io_uring ring.  See tcp_conn.h for the inside. */
#ifndef TIDE_TCP_H
#define TIDE_TCP_H

#include "transports/transport.h"

/* Wrap the bootstrapped sockets (fds[p] to rank p; fds[rank] == -1) in a
 * transport.  Takes ownership of the fds, even on failure. */
int tide__tcp_create(struct tide__ctx *ctx, int rank, int size, int *fds,
                     struct tide__transport **out);

#endif
