/* mux.h - one transport made of several, each serving some of the peers
 * (shared memory to the ranks on this host, TCP to the others and to
 * ourselves).  The engine sees one transport; every call about a message
 * goes to the part that serves its peer, every call about all of them to
 * every part.  Built by the registry (registry.c). */
#ifndef TIDE_MUX_H
#define TIDE_MUX_H

#include "engine/transport.h"

#define TIDE_MUX_MAX_PARTS 2

/* A transport over parts[0..nparts-1]; route[p] says which part serves
 * rank p (copied).  Takes ownership of the parts, even on failure. */
int tide__mux_create(struct tide__ctx *ctx, struct tide__transport **parts, int nparts,
                     const uint8_t *route, struct tide__transport **out);

#endif
