/* handshake.c - encoding and checking of the bootstrap handshake messages
 * (HELLO, CHALLENGE, PROOF) and the key derivation; see handshake.h for
 * the protocol.  No I/O here: every byte a peer sends is judged by these
 * functions, which is what the fuzzer targets.  All crypto is libsodium's. */
#include "transports/rendezvous/handshake.h"
#include "tide.h"
#include "engine/wire_bytes.h"

#include <string.h>

#include <sodium.h>

static const uint8_t magic_hello[8] = {'T', 'I', 'D', 'E', 'H', 'E', 'L', 'O'};
static const uint8_t magic_challenge[8] = {'T', 'I', 'D', 'E', 'C', 'H', 'A', 'L'};
static const uint8_t magic_proof[8] = {'T', 'I', 'D', 'E', 'P', 'R', 'O', 'F'};

void tide__hs_key_derive(const char *token, uint8_t key[TIDE_HS_KEY_SIZE])
{
    crypto_hash_sha256(key, (const unsigned char *)token, strlen(token));
}

void tide__hs_hello_encode(const struct tide__hello *h, uint8_t out[TIDE_HS_HELLO_SIZE])
{
    memcpy(out, magic_hello, 8);
    tide__put32(out + 8, h->version);
    tide__put32(out + 12, h->world);
    tide__put32(out + 16, h->from_rank);
    tide__put32(out + 20, h->to_rank);
    tide__put32(out + 24, h->purpose);
    tide__put32(out + 28, h->wire);
    memcpy(out + 32, h->nonce, TIDE_HS_NONCE_SIZE);
}

int tide__hs_hello_decode(const uint8_t *in, size_t len, struct tide__hello *out)
{
    if (len != TIDE_HS_HELLO_SIZE || memcmp(in, magic_hello, 8) != 0)
        return TIDE_EPROTO;
    out->version = tide__get32(in + 8);
    out->world = tide__get32(in + 12);
    out->from_rank = tide__get32(in + 16);
    out->to_rank = tide__get32(in + 20);
    out->purpose = tide__get32(in + 24);
    out->wire = tide__get32(in + 28);
    memcpy(out->nonce, in + 32, TIDE_HS_NONCE_SIZE);
    if (out->version != TIDE_HS_VERSION)
        return TIDE_EPROTO;
    return 0;
}

const char *tide__hs_hello_problem(const struct tide__hello *h, int world, int rank)
{
    if (h->world != (uint32_t)world)
        return "it belongs to a job of a different size";
    if (h->to_rank != (uint32_t)rank)
        return "it is addressed to another rank";
    if (h->from_rank >= (uint32_t)world || h->from_rank == (uint32_t)rank)
        return "it claims an impossible rank";
    if (h->purpose == TIDE_HS_MASTER)
        return rank == 0 ? NULL : "it wants rank 0 but we are not rank 0";
    if (h->purpose != TIDE_HS_MESH)
        return "it names an unknown purpose";
    /* In the mesh the higher rank dials the lower, and rank 0 is reached
     * only through the master connections. */
    if (rank == 0 || h->from_rank <= (uint32_t)rank)
        return "it dials the mesh the wrong way round";
    return NULL;
}

/* mac = HMAC-SHA256(key, role || hello || nonce_a), role being "A" or
 * "C" (the proofs) or "Sc", "Sa" (the session keys). */
static void compute_mac(const uint8_t key[TIDE_HS_KEY_SIZE], const char *role,
                        const uint8_t hello[TIDE_HS_HELLO_SIZE],
                        const uint8_t nonce_a[TIDE_HS_NONCE_SIZE], uint8_t mac[TIDE_HS_MAC_SIZE])
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key, TIDE_HS_KEY_SIZE);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)role, strlen(role));
    crypto_auth_hmacsha256_update(&st, hello, TIDE_HS_HELLO_SIZE);
    crypto_auth_hmacsha256_update(&st, nonce_a, TIDE_HS_NONCE_SIZE);
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_memzero(&st, sizeof st);
}

/* 0 if mac matches the one we compute, TIDE_EAUTH otherwise. */
static int verify_mac(const uint8_t key[TIDE_HS_KEY_SIZE], const char *role,
                      const uint8_t hello[TIDE_HS_HELLO_SIZE],
                      const uint8_t nonce_a[TIDE_HS_NONCE_SIZE], const uint8_t *mac)
{
    uint8_t want[TIDE_HS_MAC_SIZE];
    compute_mac(key, role, hello, nonce_a, want);
    int bad = crypto_verify_32(want, mac);
    sodium_memzero(want, sizeof want);
    return bad ? TIDE_EAUTH : 0;
}

void tide__hs_challenge_make(const uint8_t key[TIDE_HS_KEY_SIZE],
                             const uint8_t hello[TIDE_HS_HELLO_SIZE],
                             const uint8_t nonce_a[TIDE_HS_NONCE_SIZE],
                             uint8_t out[TIDE_HS_CHALLENGE_SIZE])
{
    memcpy(out, magic_challenge, 8);
    memcpy(out + 8, nonce_a, TIDE_HS_NONCE_SIZE);
    compute_mac(key, "A", hello, nonce_a, out + 8 + TIDE_HS_NONCE_SIZE);
}

int tide__hs_challenge_check(const uint8_t key[TIDE_HS_KEY_SIZE],
                             const uint8_t hello[TIDE_HS_HELLO_SIZE], const uint8_t *in,
                             size_t len, uint8_t nonce_a[TIDE_HS_NONCE_SIZE])
{
    if (len != TIDE_HS_CHALLENGE_SIZE || memcmp(in, magic_challenge, 8) != 0)
        return TIDE_EPROTO;
    int rc = verify_mac(key, "A", hello, in + 8, in + 8 + TIDE_HS_NONCE_SIZE);
    if (rc)
        return rc;
    memcpy(nonce_a, in + 8, TIDE_HS_NONCE_SIZE);
    return 0;
}

void tide__hs_proof_make(const uint8_t key[TIDE_HS_KEY_SIZE],
                         const uint8_t hello[TIDE_HS_HELLO_SIZE],
                         const uint8_t nonce_a[TIDE_HS_NONCE_SIZE],
                         uint8_t out[TIDE_HS_PROOF_SIZE])
{
    memcpy(out, magic_proof, 8);
    compute_mac(key, "C", hello, nonce_a, out + 8);
}

int tide__hs_proof_check(const uint8_t key[TIDE_HS_KEY_SIZE],
                         const uint8_t hello[TIDE_HS_HELLO_SIZE],
                         const uint8_t nonce_a[TIDE_HS_NONCE_SIZE], const uint8_t *in,
                         size_t len)
{
    if (len != TIDE_HS_PROOF_SIZE || memcmp(in, magic_proof, 8) != 0)
        return TIDE_EPROTO;
    return verify_mac(key, "C", hello, nonce_a, in + 8);
}

void tide__hs_session_keys(const uint8_t key[TIDE_HS_KEY_SIZE],
                           const uint8_t hello[TIDE_HS_HELLO_SIZE],
                           const uint8_t nonce_a[TIDE_HS_NONCE_SIZE], int connector,
                           uint8_t tx[TIDE_HS_KEY_SIZE], uint8_t rx[TIDE_HS_KEY_SIZE])
{
    compute_mac(key, connector ? "Sc" : "Sa", hello, nonce_a, tx);
    compute_mac(key, connector ? "Sa" : "Sc", hello, nonce_a, rx);
}
