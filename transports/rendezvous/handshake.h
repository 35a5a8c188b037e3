/* handshake.h - the messages of the bootstrap's mutual challenge-response,
 * as pure functions (no I/O, no state) so they can be unit-tested and
 * fuzzed without sockets.
 *
 * Both ends derive key = SHA-256(job token) (an empty token is allowed and
 * gives a fixed, public key: loopback only).  The connector opens:
 *
 *   connector -> acceptor  HELLO      64 bytes
 *     "TIDEHELO" | version | world | from_rank | to_rank | purpose | wire
 *     | nonce_c[32]   (the six u32 fields little-endian)
 *   acceptor -> connector  CHALLENGE  72 bytes
 *     "TIDECHAL" | nonce_a[32] | mac_a[32]
 *     mac_a = HMAC-SHA256(key, "A" || HELLO(64 bytes) || nonce_a)
 *   connector -> acceptor  PROOF      40 bytes
 *     "TIDEPROF" | mac_c[32]
 *     mac_c = HMAC-SHA256(key, "C" || HELLO(64 bytes) || nonce_a)
 *
 * The acceptor proves itself first (mac_a covers the connector's fresh
 * nonce_c, inside HELLO), then the connector (mac_c covers the acceptor's
 * fresh nonce_a).  The "A"/"C" prefixes keep one side's MAC from being
 * replayed as the other's.  MACs are compared in constant time.
 *
 * `wire` is how the frames that follow are protected (wire_auth.h); the
 * acceptor refuses a HELLO whose mode is not its own, and since both MACs
 * cover the HELLO nobody in between can talk the ends down to "off".
 * The session keys of the connection, one per direction:
 *     key_c = HMAC-SHA256(key, "S" "c" || HELLO || nonce_a)  connector -> acceptor
 *     key_a = HMAC-SHA256(key, "S" "a" || HELLO || nonce_a)  acceptor -> connector
 * fresh on every connection, since both nonces are.
 */
#ifndef TIDE_HANDSHAKE_H
#define TIDE_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#define TIDE_HS_VERSION 2
#define TIDE_HS_KEY_SIZE 32
#define TIDE_HS_NONCE_SIZE 32
#define TIDE_HS_MAC_SIZE 32
#define TIDE_HS_HELLO_SIZE 64
#define TIDE_HS_CHALLENGE_SIZE 72
#define TIDE_HS_PROOF_SIZE 40

/* Why the connector is calling. */
enum tide__hs_purpose {
    TIDE_HS_MASTER = 1, /* rank i > 0 registering with rank 0 */
    TIDE_HS_MESH = 2    /* rank i dialing rank j, 0 < j < i */
};

struct tide__hello {
    uint32_t version; /* TIDE_HS_VERSION */
    uint32_t world;   /* job size as the connector sees it */
    uint32_t from_rank;
    uint32_t to_rank;
    uint32_t purpose; /* enum tide__hs_purpose */
    uint32_t wire;    /* enum tide__wire_mode of the connector */
    uint8_t nonce[TIDE_HS_NONCE_SIZE]; /* nonce_c, from randombytes_buf */
};

/* key = SHA-256(token).  The caller zeroes key when done. */
void tide__hs_key_derive(const char *token, uint8_t key[TIDE_HS_KEY_SIZE]);

void tide__hs_hello_encode(const struct tide__hello *h, uint8_t out[TIDE_HS_HELLO_SIZE]);

/* Parse a HELLO.  Returns 0, or TIDE_EPROTO for a wrong length, magic or
 * version.  Says nothing about whether the ranks make sense: see
 * tide__hs_hello_problem. */
int tide__hs_hello_decode(const uint8_t *in, size_t len, struct tide__hello *out);

/* Should rank `rank` of a job of `world` ranks accept this HELLO?  NULL if
 * so, else a static phrase saying why not (for a log line).  Duplicates are
 * the caller's business. */
const char *tide__hs_hello_problem(const struct tide__hello *h, int world, int rank);

/* Acceptor: build the CHALLENGE answering hello (its 60 raw bytes) with the
 * fresh nonce_a. */
void tide__hs_challenge_make(const uint8_t key[TIDE_HS_KEY_SIZE],
                             const uint8_t hello[TIDE_HS_HELLO_SIZE],
                             const uint8_t nonce_a[TIDE_HS_NONCE_SIZE],
                             uint8_t out[TIDE_HS_CHALLENGE_SIZE]);

/* Connector: check a CHALLENGE received for our hello.  Returns 0 and
 * copies nonce_a out; TIDE_EPROTO for a wrong length or magic; TIDE_EAUTH
 * when the MAC is wrong (the acceptor does not hold our key). */
int tide__hs_challenge_check(const uint8_t key[TIDE_HS_KEY_SIZE],
                             const uint8_t hello[TIDE_HS_HELLO_SIZE], const uint8_t *in,
                             size_t len, uint8_t nonce_a[TIDE_HS_NONCE_SIZE]);

/* Connector: build the PROOF for hello and the acceptor's nonce_a. */
void tide__hs_proof_make(const uint8_t key[TIDE_HS_KEY_SIZE],
                         const uint8_t hello[TIDE_HS_HELLO_SIZE],
                         const uint8_t nonce_a[TIDE_HS_NONCE_SIZE],
                         uint8_t out[TIDE_HS_PROOF_SIZE]);

/* Acceptor: check a PROOF.  Returns 0, TIDE_EPROTO (length or magic) or
 * TIDE_EAUTH (wrong MAC). */
int tide__hs_proof_check(const uint8_t key[TIDE_HS_KEY_SIZE],
                         const uint8_t hello[TIDE_HS_HELLO_SIZE],
                         const uint8_t nonce_a[TIDE_HS_NONCE_SIZE], const uint8_t *in,
                         size_t len);

/* Both ends, once the PROOF checked out: the session keys (above).
 * connector: whether we dialed. */
void tide__hs_session_keys(const uint8_t key[TIDE_HS_KEY_SIZE],
                           const uint8_t hello[TIDE_HS_HELLO_SIZE],
                           const uint8_t nonce_a[TIDE_HS_NONCE_SIZE], int connector,
                           uint8_t tx[TIDE_HS_KEY_SIZE], uint8_t rx[TIDE_HS_KEY_SIZE]);

#endif
