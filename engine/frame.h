/* frame.h - the wire header that starts every message on a connection.
 *
 *   0      4    5    6    7    8    9    10        12        16        20
 *   +------+----+----+----+----+----+----+---------+---------+---------+
 *   |magic |ver |type|kind|dtyp|rdop|flag|reserved | comm id |   tag   |
 *   +------+----+----+----+----+----+----+---------+---------+---------+
 *   20        24                32                40                48
 *   +---------+-----------------+-----------------+-----------------+
 *   |  root   |   sequence      | payload length  |   count         |
 *   +---------+-----------------+-----------------+-----------------+
 *
 * All fields little-endian.  The two reserved bytes are the transport's
 * own: TCP sends zeros and ignores them; shared memory marks a payload
 * left in the sender's memory there (transports/shm/shm_peer.h).  (comm id, sequence, tag) is the matching key:
 * point-to-point messages use sequence 0 and match in arrival order;
 * collectives use the communicator's collective sequence (from 1) and a
 * tag naming the round or chunk.  (kind, dtype, redop, root, count, flags
 * = algorithm) is the collective's signature: a receiver whose posted signature differs knows
 * the ranks called mismatched collectives.
 */
#ifndef TIDE_FRAME_H
#define TIDE_FRAME_H

#include <stdint.h>

#define TIDE_FRAME_MAGIC 0x45444954u /* "TIDE" read little-endian */
#define TIDE_FRAME_VERSION 1
#define TIDE_FRAME_HDR_SIZE 48

/* Longest payload a peer may announce: anything larger is a corrupt or
 * hostile stream, rejected before a byte of payload is read. */
#define TIDE_FRAME_MAX_PAYLOAD (1ull << 40)

enum tide__frame_type {
    TIDE_FRAME_DATA = 1, /* a message with a payload */
};

/* What operation a frame belongs to; part of the signature.  These are
 * the engine's own; the collectives number theirs (collectives/kinds.h)
 * in the gaps below TIDE_KIND_MAX_, and the engine carries those numbers
 * without knowing them. */
enum tide__op_kind {
    TIDE_KIND_P2P = 1,     /* one message (engine/p2p_req.c) */
    TIDE_KIND_POISON = 13, /* a peer failed collective (comm, seq): tag = -error,
                            * root = world rank whose loss caused it or -1,
                            * payload = its account (engine/mismatch.c) */
    TIDE_KIND_AGREE = 14,  /* the survivors' agreement (engine/agree.c): tag =
                            * round, payload = flag byte + failed-rank bitmap */
    TIDE_KIND_MAX_ = 64 /* kinds above this are rejected as corrupt */
};

struct tide__frame {
    uint8_t type;
    uint8_t kind;
    uint8_t dtype;
    uint8_t redop;
    uint8_t flags;
    uint32_t comm_id;
    uint32_t tag;
    int32_t root;
    uint64_t seq;
    uint64_t len;
    uint64_t count;
};

void tide__frame_encode(const struct tide__frame *f, uint8_t out[TIDE_FRAME_HDR_SIZE]);

/* Decode and validate a header.  Returns 0, or TIDE_EPROTO for a bad
 * magic, version, type or kind, or a payload over TIDE_FRAME_MAX_PAYLOAD. */
int tide__frame_decode(const uint8_t in[TIDE_FRAME_HDR_SIZE], struct tide__frame *f);

/* The error a TIDE_KIND_POISON frame reports: its tag carries the
 * sender's TIDE_E* code, negated.  Anything else in the tag is a corrupt
 * or hostile peer and reads as TIDE_EPROTO.  Always a TIDE_E* code. */
int tide__frame_poison_error(const struct tide__frame *f);

/* Same (comm, seq, tag): the frame is meant for this receive. */
int tide__frame_same_key(const struct tide__frame *a, const struct tide__frame *b);

/* Same signature (kind, dtype, redop, root, count, and the flags, which
 * collectives use for their algorithm). */
int tide__frame_same_signature(const struct tide__frame *a, const struct tide__frame *b);

#endif
