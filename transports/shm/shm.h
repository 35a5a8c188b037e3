/* shm.h - the shared-memory transport: ranks on one host exchange
 * messages through rings in shared memory (shm_peer.h has the inside).
 * It serves only the pairs on this host; the registry (registry.c) puts
 * it beside TCP, which serves the rest and itself. */
#ifndef TIDE_SHM_H
#define TIDE_SHM_H

#include <stdbool.h>

#include "engine/transport.h"

/*
 * Over the bootstrapped sockets (fds[p] to rank p, fds[rank] == -1), find
 * the ranks on this host and make a transport for them.  Takes fds[p] of
 * every pair it serves (fds[p] becomes -1; the socket stays open for
 * doorbells and loss) and leaves the rest for TCP.  required: a pair on
 * this host that cannot use shared memory is TIDE_ENOSYS instead of
 * staying on TCP.  Collective: every rank calls it after the bootstrap.
 * 0 or a TIDE_E*, logged.
 */
int tide__shm_create(struct tide__ctx *ctx, int *fds, bool required,
                     struct tide__transport **out);

#endif
