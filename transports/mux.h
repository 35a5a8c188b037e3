/* mux.h - one transport made of several, each serving some of the peers
 * (shared memory to the ranks on this host, TCP to the others and to
 * ourselves).  The engine sees one transport; every call about a message
 * goes to the part that serves its peer, every call about all of them to
 * every part.  Built by the registry (registry.c). */
#ifndef TIDE_MUX_H
#define TIDE_MUX_H

#include "engine/transport.h"

/* Parts a mux may have: route[] names them in a byte. */
#define TIDE_MUX_MAX_PARTS 255

/* A transport over parts[0..nparts-1] (both copied); route[p] says
 * which part serves rank p.  Takes ownership of the parts, even on
 * failure: TIDE_EINVAL for no parts, too many, or a route to none of
 * them; TIDE_ENOMEM. */
int tide__mux_create(struct tide__ctx *ctx, struct tide__transport **parts, int nparts,
                     const uint8_t *route, struct tide__transport **out);

#endif
