/* test_wire_auth.c - the authenticated data plane (issue 33; wire_auth.h).
 *
 * Before it, nothing after the handshake was authenticated: a relay on
 * loopback rewrote frames and rank 0 got 20 of 20 all-reduces wrong with
 * rc 0.  Here: the seal and open functions on both AEADs (tampered
 * headers, payloads and tags, a skipped frame, another key); collectives
 * and messages of every shape over TCP with MACs and with encryption; a
 * relay that flips one byte of rank 1's stream, which rank 0 must report
 * as an authentication failure and never as a result; a stranger who
 * answers rank 1's first dial with a CHALLENGE it cannot check, which
 * must not end rank 1 (it dials again); ranks that disagree on the mode;
 * a MAC without a token. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "transports/tcp/wire_auth.h"

/* ---- seal and open, no sockets ---- */

static const uint8_t key_a[TIDE_WIRE_KEY_SIZE] = {1, 2, 3};
static const uint8_t key_b[TIDE_WIRE_KEY_SIZE] = {1, 2, 4};

/* A sender and a receiver of one direction, keyed afresh. */
static void pair(uint32_t word, struct tide__wire_dir *tx, struct tide__wire_dir *rx,
                 const uint8_t *rx_key)
{
    tide__wire_dir_clear(tx);
    tide__wire_dir_clear(rx);
    assert_int_equal(tide__wire_dir_init(tx, word, key_a, true), 0);
    assert_int_equal(tide__wire_dir_init(rx, word, rx_key, false), 0);
}

/* Every case on payloads of `size` bytes: below TIDE_WIRE_STREAM_MIN
 * tagged in one call, above it piece by piece. */
static void one_aead(int aead, size_t size)
{
    uint32_t word = TIDE_WIRE_MAC | (uint32_t)aead << 8;
    struct tide__wire_dir tx = {0}, rx = {0};
    uint8_t hdr[48], htag[16], ptag[16];
    uint8_t *payload = malloc(size), *secret = malloc(size), *plain = malloc(size);
    assert_non_null(payload);
    assert_non_null(secret);
    assert_non_null(plain);
    for (size_t i = 0; i < size; i++)
        payload[i] = (uint8_t)(i * 31 + 7);
    memset(hdr, 0x5a, sizeof hdr);

    /* Two good frames, the second with an empty payload, then a third. */
    pair(word, &tx, &rx, key_a);
    for (int f = 0; f < 3; f++) {
        size_t len = f == 1 ? 0 : size;
        hdr[0] = (uint8_t)f;
        tide__wire_seal_header(&tx, hdr, sizeof hdr, htag);
        if (len)
            assert_int_equal(tide__wire_seal_payload(&tx, payload, len, NULL, ptag), 0);
        assert_int_equal(tide__wire_open_header(&rx, hdr, sizeof hdr, htag), 0);
        if (len)
            assert_int_equal(tide__wire_open_payload(&rx, payload, len, false, ptag), 0);
    }

    /* One bit anywhere: header, payload, either tag. */
    for (int where = 0; where < 4; where++) {
        pair(word, &tx, &rx, key_a);
        tide__wire_seal_header(&tx, hdr, sizeof hdr, htag);
        tide__wire_seal_payload(&tx, payload, size, NULL, ptag);
        uint8_t *bit = where == 0 ? &hdr[40] : where == 1 ? &payload[size - 1234]
                     : where == 2 ? &htag[3]  : &ptag[15];
        *bit ^= 0x10;
        int h = tide__wire_open_header(&rx, hdr, sizeof hdr, htag);
        int p = tide__wire_open_payload(&rx, payload, size, false, ptag);
        assert_int_equal(h, where == 0 || where == 2 ? TIDE_EAUTH : 0);
        assert_int_equal(p, where == 1 || where == 3 ? TIDE_EAUTH : 0);
        *bit ^= 0x10;
    }

    /* A frame dropped (or replayed) on the way: the next one fails. */
    pair(word, &tx, &rx, key_a);
    tide__wire_seal_header(&tx, hdr, sizeof hdr, htag);
    tide__wire_seal_header(&tx, hdr, sizeof hdr, htag);
    assert_int_equal(tide__wire_open_header(&rx, hdr, sizeof hdr, htag), TIDE_EAUTH);

    /* Another connection's key (or the other direction's). */
    pair(word, &tx, &rx, key_b);
    tide__wire_seal_header(&tx, hdr, sizeof hdr, htag);
    assert_int_equal(tide__wire_open_header(&rx, hdr, sizeof hdr, htag), TIDE_EAUTH);

    /* Encrypting: the wire shows no plaintext, and it comes back whole. */
    word = TIDE_WIRE_ENCRYPT | (uint32_t)aead << 8;
    pair(word, &tx, &rx, key_a);
    tide__wire_seal_header(&tx, hdr, sizeof hdr, htag);
    assert_int_equal(tide__wire_seal_payload(&tx, payload, size, secret, ptag), 0);
    assert_memory_not_equal(secret, payload, 64);
    memcpy(plain, secret, size);
    assert_int_equal(tide__wire_open_header(&rx, hdr, sizeof hdr, htag), 0);
    assert_int_equal(tide__wire_open_payload(&rx, plain, size, true, ptag), 0);
    assert_memory_equal(plain, payload, size);
    tide__wire_dir_clear(&tx);
    tide__wire_dir_clear(&rx);
    free(payload);
    free(secret);
    free(plain);
}

/* The tag and ciphertext libsodium gives in one call for the payload of
 * frame 0 (nonce (0, 1): wire_auth.h), the bytes a peer of any size
 * threshold expects. */
static void sodium_reference(int aead, bool encrypt, const uint8_t *payload, size_t len,
                             uint8_t *cipher, uint8_t tag[16])
{
    uint8_t n[12] = {0}, none[1];
    n[8] = 1;
    const uint8_t *m = encrypt ? payload : none, *ad = encrypt ? NULL : payload;
    size_t mlen = encrypt ? len : 0, adlen = encrypt ? 0 : len;
    if (aead == TIDE_WIRE_AES_GCM)
        crypto_aead_aes256gcm_encrypt_detached(encrypt ? cipher : none, tag, NULL, m, mlen, ad,
                                               adlen, NULL, n, key_a);
    else
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(encrypt ? cipher : none, tag, NULL, m,
                                                           mlen, ad, adlen, NULL, n, key_a);
}

/* A large payload tagged by OpenSSL (wire_auth.h) carries the tag that
 * libsodium gives the whole of it, and the receiver gets the same
 * answer however the payload is cut into pieces as it lands: the format
 * on the wire did not change with the library. */
static void pieces_match_one_call(int aead, bool encrypt)
{
    uint32_t word = (uint32_t)(encrypt ? TIDE_WIRE_ENCRYPT : TIDE_WIRE_MAC) | (uint32_t)aead << 8;
    size_t len = 5 * TIDE_WIRE_STREAM_MIN + 13;
    uint8_t *payload = malloc(len), *wire = malloc(len), *ref = malloc(len);
    assert_non_null(payload);
    assert_non_null(wire);
    assert_non_null(ref);
    for (size_t i = 0; i < len; i++)
        payload[i] = (uint8_t)(i * 131 + 17);
    uint8_t hdr[48] = {7}, htag[16], tag[16], reftag[16];
    struct tide__wire_dir tx = {0}, rx = {0};

    pair(word, &tx, &rx, key_a);
    tide__wire_seal_header(&tx, hdr, sizeof hdr, htag);
    assert_int_equal(tide__wire_seal_payload(&tx, payload, len, encrypt ? wire : NULL, tag), 0);
    sodium_reference(aead, encrypt, payload, len, ref, reftag);
    assert_memory_equal(tag, reftag, sizeof tag);
    if (encrypt)
        assert_memory_equal(wire, ref, len);
    else
        memcpy(wire, payload, len);

    /* Cut at odd places, one byte included; then once more, altered. */
    for (int bad = 0; bad < 2; bad++) {
        uint8_t *got = malloc(len);
        assert_non_null(got);
        memcpy(got, wire, len);
        if (bad)
            got[len / 2] ^= 1;
        assert_int_equal(tide__wire_open_header(&rx, hdr, sizeof hdr, htag), 0);
        size_t cuts[] = {0, 1, 4096, 65537, 200000, len};
        for (int k = 0; k + 1 < (int)(sizeof cuts / sizeof cuts[0]); k++)
            assert_int_equal(tide__wire_open_piece(&rx, cuts[k], got + cuts[k],
                                                   cuts[k + 1] - cuts[k], encrypt),
                             0);
        assert_int_equal(tide__wire_open_end(&rx, len, tag), bad ? TIDE_EAUTH : 0);
        if (!bad && encrypt)
            assert_memory_equal(got, payload, len);
        free(got);
        tide__wire_seal_header(&tx, hdr, sizeof hdr, htag); /* the next frame's */
        tide__wire_seal_payload(&tx, payload, len, encrypt ? wire : NULL, tag);
    }

    /* A piece skipped, or the payload ended short: refused. */
    assert_int_equal(tide__wire_open_header(&rx, hdr, sizeof hdr, htag), 0);
    assert_int_equal(tide__wire_open_piece(&rx, 0, wire, 100, encrypt), 0);
    assert_int_equal(tide__wire_open_piece(&rx, 200, wire + 200, 100, encrypt), TIDE_EAUTH);
    assert_int_equal(tide__wire_open_end(&rx, len, tag), TIDE_EAUTH);

    tide__wire_dir_clear(&tx);
    tide__wire_dir_clear(&rx);
    free(payload);
    free(wire);
    free(ref);
}

static void seals_and_opens_on_both_aeads(void **state)
{
    (void)state;
    assert_true(sodium_init() >= 0);
    for (int big = 0; big < 2; big++) {
        size_t size = big ? 3 * TIDE_WIRE_STREAM_MIN + 5 : 3000;
        if (crypto_aead_aes256gcm_is_available())
            one_aead(TIDE_WIRE_AES_GCM, size);
        one_aead(TIDE_WIRE_CHACHA_POLY, size);
    }
}

static void pieced_tags_are_libsodiums(void **state)
{
    (void)state;
    assert_true(sodium_init() >= 0);
    for (int encrypt = 0; encrypt < 2; encrypt++) {
        if (crypto_aead_aes256gcm_is_available())
            pieces_match_one_call(TIDE_WIRE_AES_GCM, encrypt);
        pieces_match_one_call(TIDE_WIRE_CHACHA_POLY, encrypt);
    }
}

static void mode_names(void **state)
{
    (void)state;
    assert_int_equal(tide__wire_mode_parse("", true), TIDE_WIRE_MAC);
    assert_int_equal(tide__wire_mode_parse("auto", false), TIDE_WIRE_OFF);
    assert_int_equal(tide__wire_mode_parse("OFF", true), TIDE_WIRE_OFF);
    assert_int_equal(tide__wire_mode_parse("mac", false), TIDE_WIRE_MAC);
    assert_int_equal(tide__wire_mode_parse("encrypt", true), TIDE_WIRE_ENCRYPT);
    assert_int_equal(tide__wire_mode_parse("tls", true), -1);
    assert_string_equal(tide__wire_word_name(0), "off");
    assert_non_null(strstr(tide__wire_word_name(tide__wire_word(TIDE_WIRE_MAC)), "mac ("));
}

/* ---- real ranks ---- */

struct job {
    const char *wire[3];  /* each rank's TIDE_WIRE_AUTH */
    const char *token;
    int relay_port;       /* rank 1 dials this instead of rank 0 */
    int altered;          /* the relay alters a byte: rank 0 must fail */
    int count;            /* floats per all-reduce through the relay */
};

static void config(tide_config *cfg, int rank, int n, int port, const struct job *j)
{
    struct harness_opts o;
    harness_defaults(&o);
    o.bootstrap_s = 5;
    harness_config(cfg, rank, n, port, j->token ? j->token : "wire-auth-test", &o);
    snprintf(cfg->transport, sizeof cfg->transport, "tcp");
    snprintf(cfg->wire_auth, sizeof cfg->wire_auth, "%s", j->wire[rank]);
    if (rank == 1 && j->relay_port)
        cfg->master_port = j->relay_port;
}

static void fill(float *v, size_t n, int rank, int round)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((int)(i % 1000) + 1000 * rank + round);
}

/* Every shape the receive path has: small and large all-reduces (staged
 * and direct reads), a broadcast, empty messages, and large and small
 * messages that arrive before their receive (the unexpected pool, and a
 * late receive adopting a frame half in). */
static int every_shape_rank(int rank, int port, void *arg)
{
    tide_config cfg;
    config(&cfg, rank, 3, port, arg);
    tide_comm *comm;
    EXPECT_OK(tide_init_with(&comm, &cfg));
    for (int p = 0; p < 3; p++)
        EXPECT(p == rank || !strcmp(tide_comm_transport(comm, p), "tcp"), "rank %d over %s", p,
               tide_comm_transport(comm, p));
    static const size_t counts[] = {2, 1000, 300000};
    for (size_t k = 0; k < 3; k++) {
        size_t n = counts[k];
        float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
        fill(in, n, rank, (int)k);
        EXPECT_OK(tide_allreduce(comm, in, out, n, TIDE_FLOAT32, TIDE_SUM));
        for (size_t i = 0; i < n; i++) {
            float want = (float)(3 * (int)(i % 1000) + 3000 + 3 * (int)k);
            EXPECT(out[i] == want, "allreduce %zu: [%zu] %g, not %g", n, i, out[i], want);
        }
        fill(out, n, rank == 2 ? 2 : 9, (int)k);
        EXPECT_OK(tide_broadcast(comm, out, n, TIDE_FLOAT32, 2));
        fill(in, n, 2, (int)k);
        EXPECT(!memcmp(in, out, n * sizeof *in), "broadcast of %zu", n);
        free(in);
        free(out);
    }
    size_t big = 3u << 20;
    uint8_t *buf = malloc(big);
    if (rank == 0) {
        memset(buf, 0xab, big);
        EXPECT_OK(tide_send(comm, NULL, 0, 1, 5));
        EXPECT_OK(tide_send(comm, buf, big, 1, 6));
        EXPECT_OK(tide_send(comm, buf, 100, 1, 7));
    } else if (rank == 1) {
        struct timespec ts = {0, 100 * 1000 * 1000}; /* let them arrive first */
        nanosleep(&ts, NULL);
        memset(buf, 0, big);
        EXPECT_OK(tide_recv(comm, NULL, 0, 0, 5));
        EXPECT_OK(tide_recv(comm, buf, big, 0, 6));
        EXPECT(buf[0] == 0xab && buf[big / 2] == 0xab && buf[big - 1] == 0xab, "big message");
        EXPECT_OK(tide_recv(comm, buf, 100, 0, 7));
        EXPECT(buf[99] == 0xab, "small message");
    }
    free(buf);
    EXPECT_OK(tide_barrier(comm));
    EXPECT_OK(tide_finalize(comm));
    return 0;
}

static void collectives_with_macs_and_encryption(void **state)
{
    (void)state;
    struct job mac = {{"mac", "mac", "mac"}, NULL, 0, 0, 0};
    struct job enc = {{"encrypt", "encrypt", "encrypt"}, NULL, 0, 0, 0};
    assert_int_equal(harness_run_raw(3, 60, every_shape_rank, &mac), 0);
    assert_int_equal(harness_run_raw(3, 60, every_shape_rank, &enc), 0);
}

/* ---- a relay that alters one byte ---- */

struct relay {
    int listen_fd, port, to_port;
    long flip_at;     /* offset in the stream from the dialer; -1: none */
    int flipped;
    int forge_first;  /* answer the first dial with a forged CHALLENGE */
};

static int dial(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int tries = 0; tries < 500; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return fd;
        close(fd);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* Forward bytes both ways until either side closes; flip one bit of the
 * dialer's stream at flip_at. */
static int accept_one(int listen_fd)
{
    struct pollfd lp = {.fd = listen_fd, .events = POLLIN};
    return poll(&lp, 1, 20000) == 1 ? accept(listen_fd, NULL, NULL) : -1;
}

/* Read the dialer's HELLO and answer with a CHALLENGE whose MAC nobody
 * can check, as a stranger holding the port would. */
static void forge_challenge(int fd)
{
    uint8_t hello[64], chal[72] = "TIDECHAL";
    size_t got = 0;
    while (got < sizeof hello) {
        ssize_t n = read(fd, hello + got, sizeof hello - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    randombytes_buf(chal + 8, sizeof chal - 8);
    if (write(fd, chal, sizeof chal) != (ssize_t)sizeof chal)
        return;
    struct timespec ts = {0, 50 * 1000 * 1000}; /* let it read before we close */
    nanosleep(&ts, NULL);
}

static void relay_main(struct relay *r)
{
    if (r->forge_first) {
        int fd = accept_one(r->listen_fd);
        if (fd < 0)
            return;
        forge_challenge(fd);
        close(fd);
    }
    int from = accept_one(r->listen_fd), to = dial(r->to_port);
    long passed = 0;
    char buf[65536];
    struct pollfd pf[2] = {{.fd = from, .events = POLLIN}, {.fd = to, .events = POLLIN}};
    while (from >= 0 && to >= 0 && poll(pf, 2, 20000) > 0) {
        int src = pf[0].revents ? 0 : 1;
        ssize_t n = read(pf[src].fd, buf, sizeof buf);
        if (n <= 0)
            break;
        if (src == 0 && r->flip_at >= 0 && !r->flipped && passed + n > r->flip_at) {
            buf[r->flip_at - passed] ^= 0x04;
            r->flipped = 1;
        }
        if (src == 0)
            passed += n;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(pf[1 - src].fd, buf + off, (size_t)(n - off));
            if (w <= 0)
                goto out;
            off += w;
        }
    }
out:
    if (from >= 0)
        close(from);
    if (to >= 0)
        close(to);
}

/* Rank 0 must see the altered byte as an authentication failure, never
 * as a result; rank 1 may finish or lose rank 0, but not hang. */
static int relayed_rank(int rank, int port, void *arg)
{
    struct job *j = arg;
    tide_config cfg;
    config(&cfg, rank, 2, port, j);
    tide_comm *comm;
    EXPECT_OK(tide_init_with(&comm, &cfg));
    int n = j->count;
    float *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
    int failed = 0;
    for (int round = 0; round < 40 && !failed; round++) {
        fill(in, (size_t)n, rank, round);
        tide_req *req;
        EXPECT_OK(tide_iallreduce(comm, in, out, (size_t)n, TIDE_FLOAT32, TIDE_SUM, &req));
        int rc = tide_wait(req, 10000);
        if (rc == 0) {
            for (int i = 0; i < n; i++)
                EXPECT(out[i] == (float)(2 * (i % 1000) + 1000 + 2 * round),
                       "round %d: [%d] %g: an altered byte got through", round, i, out[i]);
        } else {
            failed = 1;
            const char *msg = tide_req_message(req);
            EXPECT(rc == TIDE_EPEER, "round %d failed with %s", round, tide_err_name(rc));
            EXPECT(rank == 1 || strstr(msg, "authentication failed"), "rank 0 was told: %s", msg);
        }
        tide_req_free(req);
    }
    EXPECT(rank == 1 || failed == j->altered, "rank 0 %s", failed ? "failed" : "never noticed");
    free(in);
    free(out);
    tide_finalize(comm);
    return 0;
}

/* Rank 1 dials rank 0 through r (see relayed_rank). */
static int run_relayed(struct relay *r, struct job *j)
{
    r->port = harness_free_port(NULL);
    r->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    assert_int_equal(bind(r->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(r->listen_fd, 4), 0);
    /* Rank 1 dials the relay, which dials rank 0 (retrying until it
     * listens).  The relay is a process, not a thread: the ranks are
     * forked, and a fork of a process with a second thread may inherit
     * a lock that thread held (under AddressSanitizer the allocator's:
     * rank 1 then hung in tide_init). */
    j->relay_port = r->port;
    r->to_port = harness_free_port(NULL);
    fflush(NULL);
    pid_t relay = fork();
    assert_true(relay >= 0);
    if (relay == 0) {
        alarm(90);
        signal(SIGPIPE, SIG_IGN); /* a rank that gave up closes first: not our death */
        relay_main(r);
        _exit(r->flipped ? 0 : 3);
    }
    close(r->listen_fd);
    int failed = harness_run_raw_on(2, 60, r->to_port, relayed_rank, j);
    int status = 0;
    assert_int_equal(waitpid(relay, &status, 0), relay);
    r->flipped = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    return failed;
}

static void an_altered_byte_is_caught(void **state)
{
    (void)state;
    /* Past the handshake and tide_init's own frames: in an all-reduce's
     * payload.  (WIRE_TEST_MODE=off shows what it did before.) */
    const char *mode = getenv("WIRE_TEST_MODE") ? getenv("WIRE_TEST_MODE") : "mac";
    struct relay r = {.flip_at = 20000};
    struct job j = {{mode, mode}, NULL, 0, 1, 4096};
    assert_int_equal(run_relayed(&r, &j), 0);
    assert_int_equal(r.flipped, 1);

    /* The same deep inside a large payload, whose tag is checked piece
     * by piece as it lands (wire_auth.h): 3 MB all-reduces, so both
     * ranks' payloads are over TIDE_WIRE_STREAM_MIN. */
    struct relay big = {.flip_at = 700000};
    j.count = 750000;
    assert_int_equal(run_relayed(&big, &j), 0);
    assert_int_equal(big.flipped, 1);
}

static void a_forged_challenge_is_dialed_past(void **state)
{
    (void)state;
    struct relay r = {.flip_at = -1, .forge_first = 1};
    struct job j = {{"mac", "mac"}, NULL, 0, 0, 4096};
    assert_int_equal(run_relayed(&r, &j), 0);
}

/* ---- misconfiguration ---- */

/* Rank 0 asks for MACs, rank 1 for nothing: rank 0 must refuse rank 1
 * with a message naming both settings. */
static int disagreeing_rank(int rank, int port, void *arg)
{
    tide_config cfg;
    config(&cfg, rank, 2, port, arg);
    cfg.bootstrap_timeout_s = 3;
    tide_comm *comm;
    char text[4096];
    int rc = harness_init_logged(&comm, &cfg, text, sizeof text);
    EXPECT(rc != 0, "joined a job whose ranks disagree on TIDE_WIRE_AUTH");
    EXPECT(rank == 1 || (rc == TIDE_EINVAL && strstr(text, "TIDE_WIRE_AUTH=mac") &&
                         strstr(text, "TIDE_WIRE_AUTH=off")),
           "rank 0 said %s: %s", tide_err_name(rc), text);
    return 0;
}

static void ranks_must_agree_on_the_mode(void **state)
{
    (void)state;
    struct job j = {{"mac", "off"}, NULL, 0, 0, 0};
    assert_int_equal(harness_run_raw(2, 30, disagreeing_rank, &j), 0);
}

static void a_mac_needs_a_token(void **state)
{
    (void)state;
    tide_config cfg;
    struct job j = {{"mac", "mac"}, "", 0, 0, 0};
    config(&cfg, 0, 2, harness_free_port(NULL), &j);
    cfg.job_token[0] = '\0';
    tide_comm *comm;
    char text[2048];
    assert_int_equal(harness_init_logged(&comm, &cfg, text, sizeof text), TIDE_EINVAL);
    assert_non_null(strstr(text, "TIDE_WIRE_AUTH=mac needs a job token"));
    snprintf(cfg.wire_auth, sizeof cfg.wire_auth, "tls");
    assert_int_equal(harness_init_logged(&comm, &cfg, text, sizeof text), TIDE_EINVAL);
    assert_non_null(strstr(text, "\"tls\" is unknown"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seals_and_opens_on_both_aeads),
        cmocka_unit_test(pieced_tags_are_libsodiums),
        cmocka_unit_test(mode_names),
        cmocka_unit_test(collectives_with_macs_and_encryption),
        cmocka_unit_test(an_altered_byte_is_caught),
        cmocka_unit_test(a_forged_challenge_is_dialed_past),
        cmocka_unit_test(ranks_must_agree_on_the_mode),
        cmocka_unit_test(a_mac_needs_a_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
