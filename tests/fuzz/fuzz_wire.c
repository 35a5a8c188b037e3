/* fuzz_wire.c - libFuzzer target for every parser of bytes that arrive
 * from the network: frame headers and the frame stream (frame.c, match.c,
 * as tcp_recv.c walks it), the handshake (handshake.c), and the bootstrap's
 * REGISTER and TABLE messages (sockaddr.c, bootstrap.c).  Built and run by
 * tools/fuzz.sh; seeds in corpus/wire/ come from make_corpus.c; inputs that
 * once crashed live in regressions/, named after their bug, and are
 * replayed on every run.
 *
 * Byte 0 (mod TARGET_COUNT) picks the parser; the rest is its input:
 *
 *   FRAMES     <48-byte header of a receive><u16 its capacity><u8 how many
 *              frames arrive before it is posted>, then a stream of
 *              frames: <48-byte header><payload>...
 *   HELLO      <u16 world - 1><u16 rank (mod world)><the message>
 *   CHALLENGE  <u8 token length><token><60-byte HELLO><32-byte nonce_a>
 *   and PROOF  <u8 mode>, then for an even mode the message as is; for an
 *              odd one <u8 length><edits>: the genuine message cut or
 *              padded to length, each edit <u8 position><u8 xor>
 *   REGISTER   <24-byte wire address>
 *   TABLE      <u8 world - 1><world 24-byte wire addresses>
 *
 * Besides what the sanitizers catch, each parser is held to its contract
 * by CHECK: what passes validation is within limits, re-encoding a decoded
 * message gives back its bytes, and a handshake message is accepted
 * exactly when it is the genuine one.  A broken CHECK aborts, which
 * libFuzzer reports as a crash and saves the input.
 */
#include "tide.h"
#include "engine/frame.h"
#include "transports/match.h"
#include "transports/rendezvous/bootstrap.h"
#include "transports/rendezvous/handshake.h"
#include "transports/rendezvous/sockaddr.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

enum target { T_FRAMES, T_HELLO, T_CHALLENGE, T_PROOF, T_REGISTER, T_TABLE, TARGET_COUNT };

#define CHECK(cond) check((cond), #cond, __LINE__)

static void check(bool ok, const char *what, int line)
{
    if (ok)
        return;
    fprintf(stderr, "fuzz_wire.c:%d: invariant broken: %s\n", line, what);
    abort();
}

/* The unread rest of the input. */
struct cursor {
    const uint8_t *p;
    size_t n;
};

/* The next len bytes, or NULL (nothing consumed) when fewer are left. */
static const uint8_t *take(struct cursor *in, size_t len)
{
    if (in->n < len)
        return NULL;
    const uint8_t *p = in->p;
    in->p += len;
    in->n -= len;
    return p;
}

static int take_u8(struct cursor *in, int dflt)
{
    const uint8_t *p = take(in, 1);
    return p ? p[0] : dflt;
}

/* ---- frames ---------------------------------------------------------- */

/* A header that passed tide__frame_decode: within limits, and encoding it
 * again gives back the 48 bytes (but the reserved bytes 10-11, which the
 * decoder ignores so a later version may use them). */
static void check_valid_header(const uint8_t *raw, const struct tide__frame *f)
{
    CHECK(f->type == TIDE_FRAME_DATA);
    CHECK(f->kind >= 1 && f->kind < TIDE_KIND_MAX_);
    CHECK(f->len <= TIDE_FRAME_MAX_PAYLOAD);
    uint8_t again[TIDE_FRAME_HDR_SIZE];
    tide__frame_encode(f, again);
    CHECK(memcmp(again, raw, 10) == 0);
    CHECK(memcmp(again + 12, raw + 12, TIDE_FRAME_HDR_SIZE - 12) == 0);
    CHECK(tide__frame_same_key(f, f) && tide__frame_same_signature(f, f));
    if (f->kind == TIDE_KIND_POISON) {
        int err = tide__frame_poison_error(f);
        CHECK(err >= TIDE_EREVOKED && err <= TIDE_EINVAL); /* every code tide has */
        CHECK(err == TIDE_EPROTO || (uint32_t)-err == f->tag);
    }
}

/* A frame met the posted receive m (same key): may its payload land in
 * m's buffer?  Only when it fits and is the operation m expects. */
static int check_match(const tide__msg *m, const struct tide__frame *f)
{
    int st = tide__match_check(m, f);
    CHECK(st == 0 || st == TIDE_EMISMATCH || st == TIDE_ETRUNCATE);
    if (st == 0) {
        CHECK(f->len <= m->len);
        CHECK(f->kind == m->hdr.kind);
        CHECK(f->kind == TIDE_KIND_P2P || tide__frame_same_signature(f, &m->hdr));
    }
    return st;
}

/* Deliver a buffered frame into m, as tcp_recv_post does for a receive
 * posted after its frame arrived.  m->buf holds exactly m->len bytes, so
 * AddressSanitizer sees any write past it. */
static void check_deliver(const struct tide__unexp *ux, tide__msg *m, int st)
{
    memset(m->buf, 0xA5, m->len);
    int got = tide__match_deliver(ux, m);
    CHECK(got == st);
    CHECK(m->got == ux->hdr.len);
    if (got == 0 && ux->hdr.len)
        CHECK(memcmp(m->buf, ux->data, (size_t)ux->hdr.len) == 0);
    if (got != 0 && m->len)
        CHECK(((uint8_t *)m->buf)[0] == 0xA5); /* nothing written */
}

static void free_unexpected(struct tide__match *mq)
{
    while (mq->ux_head) {
        struct tide__unexp *ux = mq->ux_head;
        CHECK(tide__match_remove_unexpected(mq, ux));
        tide__unexp_free(ux);
    }
}

/* The receive m is posted, as tcp_recv_post does it: a complete buffered
 * frame with its key is delivered at once, else m waits in the posted
 * list.  Returns whether it waits. */
static bool post_receive(struct tide__match *mq, tide__msg *m)
{
    struct tide__unexp *ux = tide__match_take_unexpected(mq, m);
    if (!ux) {
        tide__match_post(mq, m);
        return true;
    }
    CHECK(tide__frame_same_key(&ux->hdr, &m->hdr) && ux->complete);
    check_deliver(ux, m, check_match(m, &ux->hdr));
    tide__unexp_free(ux);
    return false;
}

/* Walk a stream as tcp_recv.c's parse() does: a header once 48 bytes are
 * there, a corrupt one ends the connection, the payload follows.  One
 * receive is posted before the frame the input says; a frame for it is
 * judged as it arrives, the others are buffered as unexpected. */
static void fuzz_frames(struct cursor *in)
{
    const uint8_t *want_raw = take(in, TIDE_FRAME_HDR_SIZE);
    const uint8_t *cap = take(in, 2);
    int post_at = take_u8(in, 0);
    if (!want_raw || !cap)
        return;
    tide__msg m;
    memset(&m, 0, sizeof m);
    m.dir = TIDE_MSG_RECV;
    tide__frame_decode(want_raw, &m.hdr); /* valid or not, whatever it filled in */
    m.len = (size_t)cap[0] | (size_t)cap[1] << 8;
    m.buf = malloc(m.len ? m.len : 1);
    CHECK(m.buf != NULL);

    struct tide__match mq;
    memset(&mq, 0, sizeof mq);
    bool posted = false, done = false;
    const uint8_t *raw;
    for (int k = 0; (raw = take(in, TIDE_FRAME_HDR_SIZE)); k++) {
        if (k == post_at) {
            posted = post_receive(&mq, &m);
            done = !posted;
        }
        struct tide__frame f;
        int rc = tide__frame_decode(raw, &f);
        CHECK(rc == 0 || rc == TIDE_EPROTO);
        if (rc)
            break; /* tcp_recv drops the connection */
        check_valid_header(raw, &f);
        const uint8_t *payload = take(in, (size_t)f.len);
        if (!payload)
            break; /* the rest has not arrived */
        struct tide__unexp *ux = tide__unexp_new(&f, payload);
        CHECK(ux != NULL && ux->complete);
        if (posted && tide__match_take_posted(&mq, &f) == &m) {
            posted = false;
            done = true;
            check_deliver(ux, &m, check_match(&m, &f));
            tide__unexp_free(ux);
            continue;
        }
        tide__match_add_unexpected(&mq, ux);
    }
    if (!done && !posted)
        posted = post_receive(&mq, &m); /* posted after the last frame */
    if (posted)
        CHECK(tide__match_remove_posted(&mq, &m));
    free_unexpected(&mq);
    free(m.buf);
}

/* ---- handshake ------------------------------------------------------- */

/* What bootstrap.c relies on once a HELLO is accepted: the peer is a real
 * rank of this job (it indexes the rank tables), not us, and dials the
 * way the protocol says. */
static void check_accepted_hello(const struct tide__hello *h, int world, int rank)
{
    CHECK(h->world == (uint32_t)world);
    CHECK(h->to_rank == (uint32_t)rank);
    CHECK(h->from_rank < (uint32_t)world && h->from_rank != (uint32_t)rank);
    CHECK(h->purpose == TIDE_HS_MASTER || h->purpose == TIDE_HS_MESH);
    if (h->purpose == TIDE_HS_MASTER)
        CHECK(rank == 0);
    else
        CHECK(rank > 0 && h->from_rank > (uint32_t)rank);
}

static void fuzz_hello(struct cursor *in)
{
    const uint8_t *wr = take(in, 4);
    if (!wr)
        return;
    int world = 1 + (wr[0] | wr[1] << 8);
    int rank = (wr[2] | wr[3] << 8) % world;
    struct tide__hello h;
    int rc = tide__hs_hello_decode(in->p, in->n, &h);
    CHECK(rc == 0 || rc == TIDE_EPROTO);
    if (rc)
        return;
    CHECK(in->n == TIDE_HS_HELLO_SIZE && h.version == TIDE_HS_VERSION);
    uint8_t again[TIDE_HS_HELLO_SIZE];
    tide__hs_hello_encode(&h, again);
    CHECK(memcmp(again, in->p, TIDE_HS_HELLO_SIZE) == 0);
    const char *problem = tide__hs_hello_problem(&h, world, rank);
    if (problem)
        CHECK(problem[0] != '\0');
    else
        check_accepted_hello(&h, world, rank);
}

/* What the CHALLENGE and PROOF cases share: a key from a token, the HELLO
 * both MACs cover, the acceptor's nonce, and the message to judge. */
struct hs_case {
    uint8_t key[TIDE_HS_KEY_SIZE];
    const uint8_t *hello, *nonce_a;
    uint8_t msg[256];
    size_t len;
};

/* Read the shared part; 0 if the input is too short. */
static int read_hs_case(struct cursor *in, struct hs_case *hc)
{
    char token[256];
    int tok_len = take_u8(in, -1);
    const uint8_t *tok = tok_len >= 0 ? take(in, (size_t)tok_len) : NULL;
    hc->hello = take(in, TIDE_HS_HELLO_SIZE);
    hc->nonce_a = take(in, TIDE_HS_NONCE_SIZE);
    if (!tok || !hc->hello || !hc->nonce_a)
        return 0;
    memcpy(token, tok, (size_t)tok_len);
    token[tok_len] = '\0'; /* an embedded NUL just shortens it, as in the environment */
    tide__hs_key_derive(token, hc->key);
    return 1;
}

/* The message: the rest as is (even mode), or the genuine one resized
 * and with bytes flipped (odd mode), which reaches the MAC checks far more
 * often than random bytes would. */
static void read_message(struct cursor *in, struct hs_case *hc, const uint8_t *genuine,
                         size_t genuine_len)
{
    if (take_u8(in, 0) % 2 == 0) {
        hc->len = in->n < sizeof hc->msg ? in->n : sizeof hc->msg;
        memcpy(hc->msg, in->p, hc->len);
        return;
    }
    memset(hc->msg, 0, sizeof hc->msg);
    memcpy(hc->msg, genuine, genuine_len);
    int len = take_u8(in, -1);
    hc->len = len < 0 ? genuine_len : (size_t)len % (genuine_len + 9);
    const uint8_t *edit;
    while ((edit = take(in, 2)))
        hc->msg[edit[0] % (genuine_len + 8)] ^= edit[1];
}

static void fuzz_challenge(struct cursor *in)
{
    struct hs_case hc;
    if (!read_hs_case(in, &hc))
        return;
    uint8_t genuine[TIDE_HS_CHALLENGE_SIZE];
    tide__hs_challenge_make(hc.key, hc.hello, hc.nonce_a, genuine);
    read_message(in, &hc, genuine, sizeof genuine);

    /* Expected: EPROTO for a wrong length or magic; else 0 exactly when
     * the MAC is the one for the nonce the message carries. */
    int want = TIDE_EPROTO;
    if (hc.len == sizeof genuine && memcmp(hc.msg, genuine, 8) == 0) {
        uint8_t honest[TIDE_HS_CHALLENGE_SIZE];
        tide__hs_challenge_make(hc.key, hc.hello, hc.msg + 8, honest);
        want = memcmp(honest, hc.msg, sizeof honest) == 0 ? 0 : TIDE_EAUTH;
    }
    uint8_t nonce_out[TIDE_HS_NONCE_SIZE];
    memset(nonce_out, 0x5A, sizeof nonce_out);
    int rc = tide__hs_challenge_check(hc.key, hc.hello, hc.msg, hc.len, nonce_out);
    CHECK(rc == want);
    if (rc == 0)
        CHECK(memcmp(nonce_out, hc.msg + 8, sizeof nonce_out) == 0);
}

static void fuzz_proof(struct cursor *in)
{
    struct hs_case hc;
    if (!read_hs_case(in, &hc))
        return;
    uint8_t genuine[TIDE_HS_PROOF_SIZE];
    tide__hs_proof_make(hc.key, hc.hello, hc.nonce_a, genuine);
    read_message(in, &hc, genuine, sizeof genuine);

    int want = TIDE_EPROTO;
    if (hc.len == sizeof genuine && memcmp(hc.msg, genuine, 8) == 0)
        want = memcmp(hc.msg, genuine, sizeof genuine) == 0 ? 0 : TIDE_EAUTH;
    CHECK(tide__hs_proof_check(hc.key, hc.hello, hc.nonce_a, hc.msg, hc.len) == want);

    /* The acceptor's own MAC, sent back as a PROOF, must not pass: the
     * roles' prefixes keep one side's MAC from serving as the other's. */
    uint8_t chal[TIDE_HS_CHALLENGE_SIZE], replay[TIDE_HS_PROOF_SIZE];
    tide__hs_challenge_make(hc.key, hc.hello, hc.nonce_a, chal);
    memcpy(replay, genuine, 8);
    memcpy(replay + 8, chal + 8 + TIDE_HS_NONCE_SIZE, TIDE_HS_MAC_SIZE);
    CHECK(tide__hs_proof_check(hc.key, hc.hello, hc.nonce_a, replay, sizeof replay) ==
          TIDE_EAUTH);
}

/* ---- bootstrap: REGISTER and TABLE ------------------------------------ */

/* A wire address that decoded: a usable endpoint, printable within
 * TIDE_ADDR_STRLEN, whose encoding gives back the same 24 bytes (the
 * decoder demands zero padding, so the form is canonical). */
static void check_valid_addr(const uint8_t *raw, const struct tide__addr *a)
{
    CHECK(a->u.sa.sa_family == AF_INET || a->u.sa.sa_family == AF_INET6);
    CHECK(a->len == (a->u.sa.sa_family == AF_INET ? sizeof a->u.in4 : sizeof a->u.in6));
    CHECK(tide__addr_port(a) == (raw[2] << 8 | raw[3]) && tide__addr_port(a) != 0);
    uint8_t again[TIDE_ADDR_WIRE_SIZE];
    CHECK(tide__addr_encode(a, again) == 0);
    CHECK(memcmp(again, raw, TIDE_ADDR_WIRE_SIZE) == 0);
    char text[TIDE_ADDR_STRLEN + 1];
    memset(text, 'x', sizeof text);
    tide__addr_format(a, text, TIDE_ADDR_STRLEN);
    CHECK(memchr(text, '\0', TIDE_ADDR_STRLEN) != NULL && text[0] != '(');
    (void)tide__addr_is_loopback(a);
}

static void fuzz_register(struct cursor *in)
{
    const uint8_t *raw = take(in, TIDE_ADDR_WIRE_SIZE);
    if (!raw)
        return; /* the bootstrap reads exactly 24 bytes */
    struct tide__addr a;
    int rc = tide__addr_decode(raw, &a);
    CHECK(rc == 0 || rc == TIDE_EPROTO);
    if (rc == 0)
        check_valid_addr(raw, &a);
}

static void fuzz_table(struct cursor *in)
{
    int world = 1 + take_u8(in, 0);
    if (in->n / TIDE_ADDR_WIRE_SIZE < (size_t)world)
        world = (int)(in->n / TIDE_ADDR_WIRE_SIZE);
    if (world < 1)
        return;
    int bad = -1;
    int rc = tide__bootstrap_table_check(in->p, world, &bad);
    CHECK(rc == 0 || (rc == TIDE_EPROTO && bad >= 0 && bad < world));
    int good = rc == 0 ? world : bad;
    for (int j = 0; j < world; j++) {
        const uint8_t *raw = in->p + (size_t)j * TIDE_ADDR_WIRE_SIZE;
        struct tide__addr a;
        int one = tide__addr_decode(raw, &a);
        if (j < good) {
            CHECK(one == 0);
            check_valid_addr(raw, &a);
        } else if (j == good) {
            CHECK(one == TIDE_EPROTO); /* the first bad one, as reported */
        }
    }
}

/* ---- entry points ----------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (sodium_init() < 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    struct cursor in = {data + 1, size - 1};
    switch (data[0] % TARGET_COUNT) {
    case T_FRAMES:
        fuzz_frames(&in);
        break;
    case T_HELLO:
        fuzz_hello(&in);
        break;
    case T_CHALLENGE:
        fuzz_challenge(&in);
        break;
    case T_PROOF:
        fuzz_proof(&in);
        break;
    case T_REGISTER:
        fuzz_register(&in);
        break;
    case T_TABLE:
        fuzz_table(&in);
        break;
    default:
        break;
    }
    return 0;
}
