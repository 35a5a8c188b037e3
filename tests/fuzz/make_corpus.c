/* make_corpus.c - writes the seed corpus of fuzz_wire.c: one valid input
 * per parser (frames, handshake messages, bootstrap addresses), built with
 * tide's own encoders so the fuzzer starts past every magic number and MAC.
 *
 *   tools/fuzz.sh seeds      rebuilds tests/fuzz/corpus/wire/ with this
 *
 * The layout of each input (the first byte picks the parser) is described
 * at the top of fuzz_wire.c; the numbers here follow its enum target.
 */
#include "tide.h"
#include "collectives/kinds.h"
#include "engine/frame.h"
#include "transports/rendezvous/handshake.h"
#include "transports/rendezvous/sockaddr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

enum { T_FRAMES, T_HELLO, T_CHALLENGE, T_PROOF, T_REGISTER, T_TABLE };

/* An input being assembled. */
struct seed {
    uint8_t b[4096];
    size_t n;
};

static void put(struct seed *s, const void *p, size_t n)
{
    if (s->n + n > sizeof s->b) {
        fprintf(stderr, "make_corpus: seed too large\n");
        exit(1);
    }
    if (n)
        memcpy(s->b + s->n, p, n);
    s->n += n;
}

static void put_u8(struct seed *s, unsigned v)
{
    uint8_t b = (uint8_t)v;
    put(s, &b, 1);
}

static void put_u16(struct seed *s, unsigned v)
{
    put_u8(s, v & 0xff);
    put_u8(s, v >> 8);
}

static void put_frame(struct seed *s, struct tide__frame f, const void *payload, size_t len)
{
    uint8_t hdr[TIDE_FRAME_HDR_SIZE];
    f.type = TIDE_FRAME_DATA;
    f.len = len;
    tide__frame_encode(&f, hdr);
    put(s, hdr, sizeof hdr);
    put(s, payload, len);
}

static void save(const char *dir, const char *name, const struct seed *s)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(s->b, 1, s->n, fp) != s->n || fclose(fp) != 0) {
        perror(path);
        exit(1);
    }
}

/* A posted point-to-point receive, then frames for it and for others. */
static void frames_seeds(const char *dir)
{
    struct tide__frame p2p = {.kind = TIDE_KIND_P2P, .comm_id = 1, .tag = 7, .root = -1};
    struct tide__frame ar = {.kind = TIDE_KIND_ALLREDUCE, .dtype = TIDE_FLOAT32,
                             .redop = TIDE_SUM, .flags = 1, .comm_id = 1, .seq = 3,
                             .tag = 2, .root = -1, .count = 4};
    struct tide__frame poison = {.kind = TIDE_KIND_POISON, .comm_id = 1, .seq = 3,
                                 .tag = (uint32_t)-TIDE_EMISMATCH, .root = -1};
    struct tide__frame barrier = {.kind = TIDE_KIND_BARRIER, .comm_id = 2, .seq = 1, .root = -1};
    const float four[4] = {1, 2, 3, 4};
    const char why[] = "rank 1 called broadcast";
    uint8_t hdr[TIDE_FRAME_HDR_SIZE];

    struct seed s = {.n = 0};
    put_u8(&s, T_FRAMES);
    tide__frame_encode(&p2p, hdr);
    put(&s, hdr, sizeof hdr);
    put_u16(&s, 64);
    put_u8(&s, 2); /* posted after two frames */
    put_frame(&s, ar, four, sizeof four);
    put_frame(&s, barrier, NULL, 0);
    put_frame(&s, p2p, "hello", 5);
    put_frame(&s, poison, why, strlen(why));
    save(dir, "frames-p2p-allreduce-barrier-poison", &s);

    /* The frame is buffered as unexpected; the receive, posted after the
     * stream, takes it from the pool. */
    s.n = 0;
    put_u8(&s, T_FRAMES);
    tide__frame_encode(&p2p, hdr);
    put(&s, hdr, sizeof hdr);
    put_u16(&s, 16);
    put_u8(&s, 255);
    put_frame(&s, p2p, "early", 5);
    save(dir, "frames-p2p-posted-late", &s);

    /* The receive is an allreduce that the frame overruns: ETRUNCATE. */
    s.n = 0;
    put_u8(&s, T_FRAMES);
    tide__frame_encode(&ar, hdr);
    put(&s, hdr, sizeof hdr);
    put_u16(&s, 8);
    put_u8(&s, 0);
    put_frame(&s, ar, four, sizeof four);
    save(dir, "frames-allreduce-truncated", &s);
}

static void hello_seeds(const char *dir, struct tide__hello *master, struct tide__hello *mesh)
{
    uint8_t raw[TIDE_HS_HELLO_SIZE];
    struct seed s = {.n = 0};
    put_u8(&s, T_HELLO);
    put_u16(&s, 4 - 1); /* world 4 */
    put_u16(&s, 0);     /* rank 0 */
    tide__hs_hello_encode(master, raw);
    put(&s, raw, sizeof raw);
    save(dir, "hello-master", &s);

    s.n = 0;
    put_u8(&s, T_HELLO);
    put_u16(&s, 4 - 1);
    put_u16(&s, 1);
    tide__hs_hello_encode(mesh, raw);
    put(&s, raw, sizeof raw);
    save(dir, "hello-mesh", &s);
}

/* CHALLENGE and PROOF: token, HELLO and nonce_a, then mode 0 with the
 * genuine message as the bytes. */
static void auth_seeds(const char *dir, const struct tide__hello *master)
{
    const char token[] = "fuzz-token";
    uint8_t key[TIDE_HS_KEY_SIZE], hello[TIDE_HS_HELLO_SIZE], nonce_a[TIDE_HS_NONCE_SIZE];
    uint8_t chal[TIDE_HS_CHALLENGE_SIZE], proof[TIDE_HS_PROOF_SIZE];
    tide__hs_key_derive(token, key);
    tide__hs_hello_encode(master, hello);
    for (size_t i = 0; i < sizeof nonce_a; i++)
        nonce_a[i] = (uint8_t)(0xA0 + i);
    tide__hs_challenge_make(key, hello, nonce_a, chal);
    tide__hs_proof_make(key, hello, nonce_a, proof);

    const struct {
        const char *name;
        int target;
        const uint8_t *msg;
        size_t len;
    } cases[] = {
        {"challenge", T_CHALLENGE, chal, sizeof chal},
        {"proof", T_PROOF, proof, sizeof proof},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct seed s = {.n = 0};
        put_u8(&s, (unsigned)cases[k].target);
        put_u8(&s, (unsigned)strlen(token));
        put(&s, token, strlen(token));
        put(&s, hello, sizeof hello);
        put(&s, nonce_a, sizeof nonce_a);
        put_u8(&s, 0); /* mode 0: the message as is */
        put(&s, cases[k].msg, cases[k].len);
        save(dir, cases[k].name, &s);
    }
}

static void addr_v4(struct tide__addr *a, const char *ip, int port)
{
    memset(a, 0, sizeof *a);
    a->u.in4.sin_family = AF_INET;
    inet_pton(AF_INET, ip, &a->u.in4.sin_addr);
    a->len = sizeof a->u.in4;
    tide__addr_set_port(a, port);
}

static void addr_v6(struct tide__addr *a, const char *ip, int port)
{
    memset(a, 0, sizeof *a);
    a->u.in6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &a->u.in6.sin6_addr);
    a->len = sizeof a->u.in6;
    tide__addr_set_port(a, port);
}

static void bootstrap_seeds(const char *dir)
{
    struct tide__addr a[4];
    addr_v4(&a[0], "127.0.0.1", 29500);
    addr_v4(&a[1], "10.1.2.3", 40001);
    addr_v6(&a[2], "::1", 40002);
    addr_v6(&a[3], "fd00::1:2", 40003);
    uint8_t wire[4][TIDE_ADDR_WIRE_SIZE];
    for (int j = 0; j < 4; j++)
        tide__addr_encode(&a[j], wire[j]);

    struct seed s = {.n = 0};
    put_u8(&s, T_REGISTER);
    put(&s, wire[1], TIDE_ADDR_WIRE_SIZE);
    save(dir, "register-ipv4", &s);
    s.n = 0;
    put_u8(&s, T_REGISTER);
    put(&s, wire[3], TIDE_ADDR_WIRE_SIZE);
    save(dir, "register-ipv6", &s);

    s.n = 0;
    put_u8(&s, T_TABLE);
    put_u8(&s, 4 - 1); /* world 4 */
    put(&s, wire, sizeof wire);
    save(dir, "table-4-ranks", &s);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    if (sodium_init() < 0)
        return 1;
    struct tide__hello master = {.version = TIDE_HS_VERSION, .world = 4, .from_rank = 2,
                                 .to_rank = 0, .purpose = TIDE_HS_MASTER};
    struct tide__hello mesh = {.version = TIDE_HS_VERSION, .world = 4, .from_rank = 3,
                               .to_rank = 1, .purpose = TIDE_HS_MESH};
    memset(master.nonce, 0x11, sizeof master.nonce);
    memset(mesh.nonce, 0x22, sizeof mesh.nonce);
    frames_seeds(argv[1]);
    hello_seeds(argv[1], &master, &mesh);
    auth_seeds(argv[1], &master);
    bootstrap_seeds(argv[1]);
    return 0;
}
