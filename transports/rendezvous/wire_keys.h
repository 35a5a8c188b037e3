/* wire_keys.h - what the rendezvous agrees on for the frames that follow
 * it: how they are protected (TIDE_WIRE_AUTH: off, mac, encrypt, and
 * with which AEAD), and each connection's two session keys, derived in
 * the handshake (handshake.h).  The TCP transport applies them to its
 * frames (transports/tcp/wire_auth.h); another transport that dials
 * through the rendezvous would take the same. */
#ifndef TIDE_WIRE_KEYS_H
#define TIDE_WIRE_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#define TIDE_WIRE_KEY_SIZE 32

/* What protects a connection's frames (tide_config.wire_auth). */
enum tide__wire_mode {
    TIDE_WIRE_OFF = 0,     /* nothing after the handshake */
    TIDE_WIRE_MAC = 1,     /* every frame authenticated */
    TIDE_WIRE_ENCRYPT = 2, /* authenticated, payloads encrypted */
};

/* Which AEAD; with the mode, what the handshake's `wire` word says. */
enum tide__wire_aead {
    TIDE_WIRE_AES_GCM = 1,
    TIDE_WIRE_CHACHA_POLY = 2,
};

/* One connection's session keys, from the handshake. */
struct tide__wire_keys {
    uint8_t tx[TIDE_WIRE_KEY_SIZE]; /* what we send */
    uint8_t rx[TIDE_WIRE_KEY_SIZE]; /* what the peer sends us */
};

/* The mode tide_config.wire_auth names ("" or "auto": MAC when the job
 * has a token, else off), or -1 for a name we do not know. */
int tide__wire_mode_parse(const char *name, bool have_token);

/* The same for a whole config: its wire_auth, given its job_token. */
struct tide_config;
int tide__wire_mode_of(const struct tide_config *cfg);

/* The handshake's word for a mode on this CPU (mode | aead << 8; 0 for
 * off), and a phrase for one, e.g. "mac (AES-256-GCM)". */
uint32_t tide__wire_word(int mode);
const char *tide__wire_word_name(uint32_t word);

#endif
