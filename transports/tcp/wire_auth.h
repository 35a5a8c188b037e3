/* wire_auth.h - an authenticated (and, if asked, encrypted) data plane
 * on a TCP connection between two ranks (issue 33).
 *
 * The handshake (transports/rendezvous/handshake.h) proves that both
 * ends hold the job token; from its fresh nonces each end derives two
 * session keys, one per direction (rendezvous/wire_keys.h).  After it,
 * every frame on the wire reads
 *
 *     header (48) | header tag (16) | payload | payload tag (16)
 *
 * with no payload tag for an empty payload.  Frame i of a direction tags
 * its header with the AEAD nonce (i, 0) and its payload with (i, 1), the
 * bytes as associated data (or, encrypting, the payload as plaintext).
 * So a frame cannot be altered, dropped, replayed, reordered or moved
 * to another connection or direction without the receiver noticing, and
 * a header is believed (its length, its destination) only once its tag
 * checks out.
 *
 * The receiver checks a payload's tag in its destination (a posted
 * receive or the unexpected pool: contiguous either way), so the
 * receive path keeps its zero-copy reads: a large payload piece by
 * piece as the pieces land, a small one once it is all in, and nothing
 * completes with it before the tag has checked out.  The sender seals a
 * large payload piece by piece too, just ahead of the kernel
 * (tcp_send.c).  A payload that goes nowhere (its receive
 * was withdrawn, or failed on the header) is not checked: no byte of it
 * reaches anyone.  Encrypting, the sender encrypts into a buffer of its
 * own and the receiver decrypts in place.
 *
 * The AEAD is AES-256-GCM where the CPU has AES-NI and PCLMUL, else
 * ChaCha20-Poly1305; the handshake makes both ends agree.  Headers and
 * small payloads are tagged in one call by libsodium (80 ns for a
 * header; OpenSSL's EVP interface costs 400).  A payload of
 * TIDE_WIRE_STREAM_MIN bytes or more is tagged by OpenSSL's EVP
 * interface instead, the same AEAD giving the same bytes, for two
 * reasons: it takes the payload in pieces, so a receiver checks each
 * piece as it lands, while the next is on the wire and this one is in
 * its cache, instead of the whole payload after its last byte; and its
 * GHASH is twice libsodium 1.0.18's (GCM over associated data, 16 MiB,
 * 2-core machine: 7.5-9.8 GB/s against 3.8-4.1). */
#ifndef TIDE_WIRE_AUTH_H
#define TIDE_WIRE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#include "transports/rendezvous/wire_keys.h"

#define TIDE_WIRE_TAG_SIZE 16
/* The largest payload either AEAD encrypts (AES-GCM's bound, ~64 GiB);
 * authenticating only, any. */
#define TIDE_WIRE_SECRET_MAX ((size_t)crypto_aead_aes256gcm_MESSAGEBYTES_MAX)
/* Payloads this large or larger are tagged piece by piece (above). */
#define TIDE_WIRE_STREAM_MIN ((size_t)64 * 1024)

struct evp_cipher_ctx_st; /* OpenSSL's EVP_CIPHER_CTX */

/* One direction of one connection. */
struct tide__wire_dir {
    crypto_aead_aes256gcm_state gcm; /* the key, expanded (AES-GCM) */
    uint8_t key[TIDE_WIRE_KEY_SIZE];  /* (ChaCha20-Poly1305) */
    int aead;
    bool sending;                     /* which way: seal or open */
    struct evp_cipher_ctx_st *stream; /* large payloads, keyed once */
    uint64_t frames;                  /* frames begun so far */
    size_t streamed;                  /* bytes of the payload in progress */
};

/* Key one direction: `sending` seals, otherwise it opens.  0, or
 * TIDE_ENOMEM. */
int tide__wire_dir_init(struct tide__wire_dir *d, uint32_t word,
                        const uint8_t key[TIDE_WIRE_KEY_SIZE], bool sending);
void tide__wire_dir_clear(struct tide__wire_dir *d);

/* Sending, frame by frame in stream order: the header's tag (this begins
 * the frame), then the payload's, encrypting it into `secret` unless
 * that is NULL.  0, or TIDE_EAUTH where the cipher library failed (it
 * does not, keyed; the connection is unusable then). */
void tide__wire_seal_header(struct tide__wire_dir *d, const uint8_t *hdr, size_t len,
                            uint8_t tag[TIDE_WIRE_TAG_SIZE]);
int tide__wire_seal_payload(struct tide__wire_dir *d, const void *payload, size_t len,
                            void *secret, uint8_t tag[TIDE_WIRE_TAG_SIZE]);

/* The same for a payload of TIDE_WIRE_STREAM_MIN bytes or more, piece
 * by piece, so that its first bytes can leave before its last are
 * sealed: every byte once, in order, saying where each piece starts in
 * the payload (offset 0 begins it; `secret` is where that piece's
 * ciphertext goes, or NULL), then the tag. */
int tide__wire_seal_piece(struct tide__wire_dir *d, size_t offset, const void *piece, size_t len,
                          void *secret);
int tide__wire_seal_end(struct tide__wire_dir *d, size_t len, uint8_t tag[TIDE_WIRE_TAG_SIZE]);

/* Receiving: check a header's tag (which begins the frame, good or
 * not), then its payload's, decrypting it in place if `decrypt`.
 * 0, or TIDE_EAUTH. */
int tide__wire_open_header(struct tide__wire_dir *d, const uint8_t *hdr, size_t len,
                           const uint8_t tag[TIDE_WIRE_TAG_SIZE]);
int tide__wire_open_payload(struct tide__wire_dir *d, void *payload, size_t len, bool decrypt,
                            const uint8_t tag[TIDE_WIRE_TAG_SIZE]);

/* The same for a payload of TIDE_WIRE_STREAM_MIN bytes or more, piece
 * by piece as it lands: feed every byte of it once, in order, saying
 * where each piece starts in the payload (offset 0 begins it), then
 * check its tag.  The bytes count only if the tag checks out.  0, or
 * TIDE_EAUTH. */
int tide__wire_open_piece(struct tide__wire_dir *d, size_t offset, void *piece, size_t len,
                          bool decrypt);
int tide__wire_open_end(struct tide__wire_dir *d, size_t len,
                        const uint8_t tag[TIDE_WIRE_TAG_SIZE]);

#endif
