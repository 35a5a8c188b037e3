/* bootstrap.h - assembling a job: rendezvous at rank 0, then a full mesh
 * of authenticated TCP connections.  Runs once, in tide_init, on the
 * caller's thread, with plain nonblocking sockets and poll(2): the
 * reactor does not exist yet. */
#ifndef TIDE_BOOTSTRAP_H
#define TIDE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "tide.h"
#include "transports/rendezvous/wire_keys.h"

/*
 * Connect this rank to every other rank of the job described by cfg.
 * On success fds[p] (for p in 0..size-1) is a connected, authenticated,
 * blocking TCP socket to rank p with TCP_NODELAY set and the configured
 * congestion control (congestion.h), and fds[rank] is -1.
 * fds must have room for cfg->size entries; so must keys, unless NULL,
 * which gets each connection's session keys (wire_auth.h) at keys[p].
 *
 * Returns 0, or:
 *   TIDE_EAUTH       a peer could not prove it knows our job token (the
 *                    message says authentication failed and names it);
 *   TIDE_EBOOTSTRAP  the job was not assembled before the bootstrap
 *                    deadline, rank 0 could not listen, etc.;
 *   TIDE_EINVAL      no token and a non-loopback master address, a
 *                    TIDE_WIRE_AUTH that is unknown, needs a token, or
 *                    differs from a peer's.
 * with a one-line explanation in err.  Nothing is left open on failure.
 */
int tide__bootstrap(const tide_config *cfg, int *fds, struct tide__wire_keys *keys, char *err,
                    size_t errlen);

/*
 * Validate a TABLE as rank 0 sends it: world wire addresses (sockaddr.h),
 * in rank order.  Returns 0 when every entry decodes, else TIDE_EPROTO
 * with the first malformed rank in *bad_rank.  Pure, for the fuzzer.
 */
int tide__bootstrap_table_check(const uint8_t *table, int world, int *bad_rank);

#endif
