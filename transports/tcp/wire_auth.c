/* wire_auth.c - see wire_auth.h.  One-shot tags are libsodium's, the
 * pieced ones OpenSSL's (EVP): the same AEAD, so the same bytes. */
#include "transports/tcp/wire_auth.h"
#include "tide.h"
#include "engine/wire_bytes.h"

#include <limits.h>
#include <string.h>

#include <openssl/evp.h>

int tide__wire_dir_init(struct tide__wire_dir *d, uint32_t word,
                        const uint8_t key[TIDE_WIRE_KEY_SIZE], bool sending)
{
    memset(d, 0, sizeof *d);
    d->aead = (int)(word >> 8);
    d->sending = sending;
    memcpy(d->key, key, TIDE_WIRE_KEY_SIZE);
    if (d->aead == TIDE_WIRE_AES_GCM)
        crypto_aead_aes256gcm_beforenm(&d->gcm, key);
    const EVP_CIPHER *cipher =
        d->aead == TIDE_WIRE_AES_GCM ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
    d->stream = EVP_CIPHER_CTX_new();
    int ok = d->stream && (sending ? EVP_EncryptInit_ex(d->stream, cipher, NULL, key, NULL)
                                   : EVP_DecryptInit_ex(d->stream, cipher, NULL, key, NULL));
    if (ok)
        return 0;
    tide__wire_dir_clear(d);
    return TIDE_ENOMEM;
}

void tide__wire_dir_clear(struct tide__wire_dir *d)
{
    EVP_CIPHER_CTX_free(d->stream); /* wipes its key schedule */
    sodium_memzero(d, sizeof *d);
}

/* Frame `frame`'s nonce for its header (part 0) or payload (part 1). */
static void nonce_of(uint64_t frame, uint32_t part, uint8_t n[12])
{
    tide__put64(n, frame);
    tide__put32(n + 8, part);
}

/* libsodium declares its message pointers never NULL, even for no
 * message: this stands in for one. */
static uint8_t no_message[1];

/* The tag of part of the current frame: over `ad`, encrypting m into c
 * when m is given. */
static void seal(const struct tide__wire_dir *d, uint32_t part, const void *ad, size_t adlen,
                 const void *m, size_t mlen, void *c, uint8_t tag[TIDE_WIRE_TAG_SIZE])
{
    uint8_t n[12];
    nonce_of(d->frames - 1, part, n);
    if (!c)
        c = no_message;
    if (d->aead == TIDE_WIRE_AES_GCM)
        crypto_aead_aes256gcm_encrypt_detached_afternm(c, tag, NULL, m, mlen, ad, adlen, NULL,
                                                       n, &d->gcm);
    else
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(c, tag, NULL, m, mlen, ad, adlen,
                                                           NULL, n, d->key);
}

/* Check part of the current frame; decrypt c into m when m is given. */
static int open_part(const struct tide__wire_dir *d, uint32_t part, const void *ad,
                     size_t adlen, void *m, const void *c, size_t clen,
                     const uint8_t tag[TIDE_WIRE_TAG_SIZE])
{
    uint8_t n[12];
    nonce_of(d->frames - 1, part, n);
    if (!c)
        c = no_message;
    int bad = d->aead == TIDE_WIRE_AES_GCM
                  ? crypto_aead_aes256gcm_decrypt_detached_afternm(m, NULL, c, clen, tag, ad,
                                                                   adlen, n, &d->gcm)
                  : crypto_aead_chacha20poly1305_ietf_decrypt_detached(m, NULL, c, clen, tag, ad,
                                                                       adlen, n, d->key);
    return bad ? TIDE_EAUTH : 0;
}

void tide__wire_seal_header(struct tide__wire_dir *d, const uint8_t *hdr, size_t len,
                            uint8_t tag[TIDE_WIRE_TAG_SIZE])
{
    d->frames++;
    seal(d, 0, hdr, len, NULL, 0, NULL, tag);
}

/* Begin the current frame's payload in the EVP context. */
static int stream_begin(struct tide__wire_dir *d)
{
    uint8_t n[12];
    nonce_of(d->frames - 1, 1, n);
    d->streamed = 0;
    int ok = d->sending ? EVP_EncryptInit_ex(d->stream, NULL, NULL, NULL, n)
                        : EVP_DecryptInit_ex(d->stream, NULL, NULL, NULL, n);
    return ok ? 0 : TIDE_EAUTH;
}

/* Feed len bytes of the payload: as associated data when `out` is NULL,
 * else through the cipher into `out` (which may be `in`).  EVP counts
 * in ints, hence the slices. */
static int stream_more(struct tide__wire_dir *d, const uint8_t *in, uint8_t *out, size_t len)
{
    while (len) {
        int n = len > INT_MAX / 2 ? INT_MAX / 2 : (int)len, got;
        int ok = d->sending ? EVP_EncryptUpdate(d->stream, out, &got, in, n)
                            : EVP_DecryptUpdate(d->stream, out, &got, in, n);
        if (!ok || (out && got != n))
            return TIDE_EAUTH;
        d->streamed += (size_t)n;
        in += n;
        len -= (size_t)n;
        if (out)
            out += n;
    }
    return 0;
}

/* A piece that starts `offset` bytes into the payload: the first begins
 * it; any other must follow the last. */
static int stream_piece(struct tide__wire_dir *d, size_t offset, const void *in, void *out,
                        size_t len)
{
    if (offset == 0 && stream_begin(d))
        return TIDE_EAUTH;
    if (offset != d->streamed)
        return TIDE_EAUTH; /* a piece skipped or fed twice */
    return stream_more(d, in, out, len);
}

int tide__wire_seal_payload(struct tide__wire_dir *d, const void *payload, size_t len,
                            void *secret, uint8_t tag[TIDE_WIRE_TAG_SIZE])
{
    if (len < TIDE_WIRE_STREAM_MIN) {
        if (secret)
            seal(d, 1, NULL, 0, payload, len, secret, tag);
        else
            seal(d, 1, payload, len, NULL, 0, NULL, tag);
        return 0;
    }
    return tide__wire_seal_piece(d, 0, payload, len, secret)
               ? TIDE_EAUTH
               : tide__wire_seal_end(d, len, tag);
}

int tide__wire_seal_piece(struct tide__wire_dir *d, size_t offset, const void *piece, size_t len,
                          void *secret)
{
    return stream_piece(d, offset, piece, secret, len);
}

int tide__wire_seal_end(struct tide__wire_dir *d, size_t len, uint8_t tag[TIDE_WIRE_TAG_SIZE])
{
    uint8_t none[16];
    int got;
    bool whole = d->streamed == len;
    d->streamed = 0;
    if (!whole || !EVP_EncryptFinal_ex(d->stream, none, &got) ||
        !EVP_CIPHER_CTX_ctrl(d->stream, EVP_CTRL_AEAD_GET_TAG, TIDE_WIRE_TAG_SIZE, tag))
        return TIDE_EAUTH;
    return 0;
}

int tide__wire_open_header(struct tide__wire_dir *d, const uint8_t *hdr, size_t len,
                           const uint8_t tag[TIDE_WIRE_TAG_SIZE])
{
    d->frames++;
    return open_part(d, 0, hdr, len, NULL, NULL, 0, tag);
}

int tide__wire_open_payload(struct tide__wire_dir *d, void *payload, size_t len, bool decrypt,
                            const uint8_t tag[TIDE_WIRE_TAG_SIZE])
{
    if (decrypt && len > TIDE_WIRE_SECRET_MAX)
        return TIDE_EAUTH; /* no sender of ours encrypts that much */
    if (len >= TIDE_WIRE_STREAM_MIN)
        return tide__wire_open_piece(d, 0, payload, len, decrypt)
                   ? TIDE_EAUTH
                   : tide__wire_open_end(d, len, tag);
    if (decrypt)
        return open_part(d, 1, NULL, 0, payload, payload, len, tag);
    return open_part(d, 1, payload, len, NULL, NULL, 0, tag);
}

int tide__wire_open_piece(struct tide__wire_dir *d, size_t offset, void *piece, size_t len,
                          bool decrypt)
{
    return stream_piece(d, offset, piece, decrypt ? piece : NULL, len);
}

int tide__wire_open_end(struct tide__wire_dir *d, size_t len,
                        const uint8_t tag[TIDE_WIRE_TAG_SIZE])
{
    uint8_t expect[TIDE_WIRE_TAG_SIZE], none[16];
    int got;
    memcpy(expect, tag, sizeof expect); /* EVP's ctrl takes it non-const */
    bool whole = d->streamed == len;
    d->streamed = 0;
    if (!whole || !EVP_CIPHER_CTX_ctrl(d->stream, EVP_CTRL_AEAD_SET_TAG, TIDE_WIRE_TAG_SIZE,
                                       expect))
        return TIDE_EAUTH;
    return EVP_DecryptFinal_ex(d->stream, none, &got) > 0 ? 0 : TIDE_EAUTH;
}
