/* wire_keys.c - see wire_keys.h. */
#include "transports/rendezvous/wire_keys.h"
#include "tide.h"

#include <string.h>
#include <strings.h>

#include <sodium.h>

int tide__wire_mode_parse(const char *name, bool have_token)
{
    if (!name[0] || !strcasecmp(name, "auto"))
        return have_token ? TIDE_WIRE_MAC : TIDE_WIRE_OFF;
    if (!strcasecmp(name, "off"))
        return TIDE_WIRE_OFF;
    if (!strcasecmp(name, "mac"))
        return TIDE_WIRE_MAC;
    if (!strcasecmp(name, "encrypt"))
        return TIDE_WIRE_ENCRYPT;
    return -1;
}

int tide__wire_mode_of(const tide_config *cfg)
{
    return tide__wire_mode_parse(cfg->wire_auth, cfg->job_token[0] != '\0');
}

uint32_t tide__wire_word(int mode)
{
    if (mode == TIDE_WIRE_OFF)
        return 0;
    int aead = crypto_aead_aes256gcm_is_available() ? TIDE_WIRE_AES_GCM : TIDE_WIRE_CHACHA_POLY;
    return (uint32_t)mode | (uint32_t)aead << 8;
}

const char *tide__wire_word_name(uint32_t word)
{
    switch (word) {
    case 0:
        return "off";
    case TIDE_WIRE_MAC | TIDE_WIRE_AES_GCM << 8:
        return "mac (AES-256-GCM)";
    case TIDE_WIRE_MAC | TIDE_WIRE_CHACHA_POLY << 8:
        return "mac (ChaCha20-Poly1305: this CPU lacks AES-NI)";
    case TIDE_WIRE_ENCRYPT | TIDE_WIRE_AES_GCM << 8:
        return "encrypt (AES-256-GCM)";
    case TIDE_WIRE_ENCRYPT | TIDE_WIRE_CHACHA_POLY << 8:
        return "encrypt (ChaCha20-Poly1305: this CPU lacks AES-NI)";
    }
    return "unknown";
}
