/* test_engine_units.c - the reactor's building blocks without sockets:
 * timer heap order and removal, the MPSC queue under concurrent
 * producers, the frame codec and its validation, matching FIFO order,
 * error names and configuration from the environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "engine/log.h"
#include "engine/mpsc.h"
#include "engine/seqmap.h"
#include "engine/timer_heap.h"
#include "tide.h"
#include "collectives/kinds.h"
#include "engine/frame.h"
#include "transports/match.h"

/* ---- timer heap ---- */

static int fired[64], nfired;

static void record(struct tide__timer *t)
{
    fired[nfired++] = (int)t->order;
}

static void timer_heap_fires_in_deadline_then_arm_order(void **state)
{
    struct tide__timer_heap h;
    tide__timer_heap_init(&h);
    struct tide__timer t[40];
    nfired = 0;
    /* deadlines 39..0 with ties every other one */
    for (int i = 0; i < 40; i++) {
        tide__timer_init(&t[i], record);
        assert_int_equal(tide__timer_arm(&h, &t[i], (uint64_t)(100 - i / 2)), 0);
    }
    tide__timer_disarm(&h, &t[5]); /* order 5 never fires */
    tide__timer_disarm(&h, &t[5]); /* twice is harmless */
    assert_int_equal(tide__timer_heap_expire(&h, 90), 20); /* i >= 20 */
    assert_int_equal(tide__timer_heap_expire(&h, 1000), 19); /* the rest but 5 */
    assert_null(tide__timer_heap_peek(&h));
    /* fired by deadline, ties by arm order */
    for (int i = 1; i < nfired; i++) {
        uint64_t da = 100 - (uint64_t)fired[i - 1] / 2, db = 100 - (uint64_t)fired[i] / 2;
        assert_true(da < db || (da == db && fired[i - 1] < fired[i]));
        assert_int_not_equal(fired[i], 5);
    }
    tide__timer_heap_free(&h);
}

static void timer_rearm_moves_the_deadline(void **state)
{
    struct tide__timer_heap h;
    tide__timer_heap_init(&h);
    struct tide__timer a, b;
    tide__timer_init(&a, record);
    tide__timer_init(&b, record);
    tide__timer_arm(&h, &a, 10);
    tide__timer_arm(&h, &b, 20);
    tide__timer_arm(&h, &a, 30);
    assert_ptr_equal(tide__timer_heap_peek(&h), &b);
    tide__timer_heap_free(&h);
    assert_int_equal(a.slot, SIZE_MAX);
}

/* ---- MPSC queue ---- */

struct item {
    struct tide__mpsc_node node;
    int producer, seq;
};

enum { PRODUCERS = 4, PER_PRODUCER = 50000 };
static struct tide__mpsc queue;
static struct item items[PRODUCERS][PER_PRODUCER];

static void *produce(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        items[p][i].producer = p;
        items[p][i].seq = i;
        tide__mpsc_push(&queue, &items[p][i].node);
    }
    return NULL;
}

static void mpsc_keeps_each_producers_order(void **state)
{
    tide__mpsc_init(&queue);
    assert_true(tide__mpsc_empty(&queue));
    assert_null(tide__mpsc_pop(&queue));
    pthread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++)
        pthread_create(&th[p], NULL, produce, (void *)(intptr_t)p);
    int next[PRODUCERS] = {0}, got = 0;
    while (got < PRODUCERS * PER_PRODUCER) {
        struct tide__mpsc_node *n = tide__mpsc_pop(&queue);
        if (!n)
            continue;
        struct item *it = (struct item *)n;
        assert_int_equal(it->seq, next[it->producer]);
        next[it->producer]++;
        got++;
    }
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(th[p], NULL);
    assert_null(tide__mpsc_pop(&queue));
    assert_true(tide__mpsc_empty(&queue));
}

/* ---- frames ---- */

static struct tide__frame sample_frame(void)
{
    struct tide__frame f = {.type = TIDE_FRAME_DATA, .kind = TIDE_KIND_BARRIER, .dtype = 3,
                            .redop = 2, .flags = 0, .comm_id = 0xdeadbeef, .tag = 77,
                            .root = -1, .seq = 1ull << 40, .len = 12345, .count = 999};
    return f;
}

static void frame_round_trips(void **state)
{
    struct tide__frame f = sample_frame(), g;
    uint8_t buf[TIDE_FRAME_HDR_SIZE];
    tide__frame_encode(&f, buf);
    assert_int_equal(tide__frame_decode(buf, &g), 0);
    assert_true(tide__frame_same_key(&f, &g));
    assert_true(tide__frame_same_signature(&f, &g));
    assert_int_equal(g.len, 12345);
    assert_int_equal(g.root, -1);
    assert_int_equal(g.comm_id, 0xdeadbeef);
}

static void frame_rejects_corruption(void **state)
{
    struct tide__frame f = sample_frame(), g;
    uint8_t buf[TIDE_FRAME_HDR_SIZE];
    struct {
        const char *what;
        int offset;
        uint8_t value;
    } cases[] = {
        {"magic", 0, 'X'},   {"version", 4, 99}, {"type", 5, 0},
        {"kind zero", 6, 0}, {"kind huge", 6, 200}, {"length over 1 TiB", 37, 0x7f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tide__frame_encode(&f, buf);
        buf[cases[i].offset] = cases[i].value;
        if (tide__frame_decode(buf, &g) != TIDE_EPROTO)
            fail_msg("corrupt %s was accepted", cases[i].what);
    }
}

/* ---- matching ---- */

static tide__msg recv_msg(uint32_t tag, void *buf, size_t len)
{
    tide__msg m = {.dir = TIDE_MSG_RECV, .buf = buf, .len = len};
    m.hdr.kind = TIDE_KIND_P2P;
    m.hdr.tag = tag;
    m.hdr.comm_id = 1;
    return m;
}

static void match_is_fifo_per_key(void **state)
{
    struct tide__match mq = {0};
    int a, b, c;
    tide__msg m1 = recv_msg(5, &a, 4), m2 = recv_msg(6, &b, 4), m3 = recv_msg(5, &c, 4);
    tide__match_post(&mq, &m1);
    tide__match_post(&mq, &m2);
    tide__match_post(&mq, &m3);
    struct tide__frame f = {.kind = TIDE_KIND_P2P, .comm_id = 1, .tag = 5, .len = 4};
    assert_ptr_equal(tide__match_take_posted(&mq, &f), &m1);
    assert_ptr_equal(tide__match_take_posted(&mq, &f), &m3);
    assert_null(tide__match_take_posted(&mq, &f));
    assert_true(tide__match_remove_posted(&mq, &m2));
    assert_false(tide__match_remove_posted(&mq, &m2));
    assert_null(mq.posted.head);
    assert_null(mq.posted.tail);
}

static void match_checks_length_and_signature(void **state)
{
    char buf[8];
    tide__msg m = recv_msg(1, buf, sizeof buf);
    struct tide__frame f = {.kind = TIDE_KIND_P2P, .comm_id = 1, .tag = 1, .len = 8};
    assert_int_equal(tide__match_check(&m, &f), 0);
    f.len = 9;
    assert_int_equal(tide__match_check(&m, &f), TIDE_ETRUNCATE);
    f.kind = TIDE_KIND_BARRIER;
    assert_int_equal(tide__match_check(&m, &f), TIDE_EMISMATCH);
    m.hdr.kind = TIDE_KIND_BARRIER;
    f.len = 0;
    f.count = 3; /* same kind, different signature */
    assert_int_equal(tide__match_check(&m, &f), TIDE_EMISMATCH);
}

static void unexpected_copy_delivers(void **state)
{
    struct tide__match mq = {0};
    struct tide__frame f = {.kind = TIDE_KIND_P2P, .comm_id = 1, .tag = 2, .len = 5};
    struct tide__unexp *ux = tide__unexp_new(&f, "hello");
    assert_non_null(ux);
    assert_true(ux->complete);
    tide__match_add_unexpected(&mq, ux);
    char out[8] = {0};
    tide__msg m = recv_msg(2, out, sizeof out);
    struct tide__unexp *got = tide__match_take_unexpected(&mq, &m);
    assert_ptr_equal(got, ux);
    assert_int_equal(tide__match_deliver(got, &m), 0);
    assert_int_equal(m.got, 5);
    assert_string_equal(out, "hello");
    tide__unexp_free(got);
}

/* ---- errors, config, ring ---- */

static void every_error_has_a_name_and_text(void **state)
{
    for (int e = -1; e >= TIDE_EBUSY; e--) {
        assert_string_not_equal(tide_strerror(e), "unknown error");
        assert_string_not_equal(tide_err_name(e), "TIDE_E?");
    }
    assert_string_equal(tide_err_name(TIDE_EPEER), "TIDE_EPEER");
    assert_string_equal(tide_strerror(0), "success");
    assert_string_equal(tide_strerror(-999), "unknown error");
}

static void config_reads_each_launcher(void **state)
{
    struct {
        const char *rank_var, *size_var, *rank, *size;
        int want_rank, want_size, want_rc;
    } cases[] = {
        {"RANK", "WORLD_SIZE", "3", "8", 3, 8, 0},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "1", "2", 1, 2, 0},
        {"SLURM_PROCID", "SLURM_NTASKS", "5", "6", 5, 6, 0},
        {"PMI_RANK", "PMI_SIZE", "2", "4", 2, 4, 0}, /* MPICH, Intel MPI */
        /* a rank and no size: refused, not a silent job of one */
        {"PMIX_RANK", "UNRELATED_SIZE", "1", "4", 0, 1, TIDE_EINVAL},
        {"RANK", "WORLD_SIZE", "8", "8", 0, 1, TIDE_EINVAL},
        {"RANK", "WORLD_SIZE", "x", "8", 0, 1, TIDE_EINVAL},
    };
    const char *all[] = {"RANK",         "WORLD_SIZE",   "OMPI_COMM_WORLD_RANK",
                         "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                         "PMI_RANK",     "PMI_SIZE",     "PMIX_RANK", "UNRELATED_SIZE"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t v = 0; v < sizeof all / sizeof all[0]; v++)
            unsetenv(all[v]);
        setenv(cases[i].rank_var, cases[i].rank, 1);
        setenv(cases[i].size_var, cases[i].size, 1);
        tide_config cfg;
        tide_config_default(&cfg);
        int rc = tide_config_from_env(&cfg);
        assert_int_equal(rc, cases[i].want_rc);
        if (rc == 0) {
            assert_int_equal(cfg.rank, cases[i].want_rank);
            assert_int_equal(cfg.size, cases[i].want_size);
        }
    }
    for (size_t v = 0; v < sizeof all / sizeof all[0]; v++)
        unsetenv(all[v]); /* the last case left RANK="x" behind */
    setenv("TIDE_PROGRESS", "sideways", 1);
    tide_config cfg;
    tide_config_default(&cfg);
    assert_int_equal(tide_config_from_env(&cfg), TIDE_EINVAL);
    unsetenv("TIDE_PROGRESS");
}

/* TIDE_YIELD_WHEN_IDLE: auto (the default, decided from LOCAL_WORLD_SIZE
 * and the cores), 0 or 1; anything else is refused by name, and so is a
 * config that sets the field out of range. */
static void config_reads_yield_when_idle(void **state)
{
    (void)state;
    const struct {
        const char *value;
        int want_rc, want;
    } cases[] = {
        {"auto", 0, -1},       {"AUTO", 0, -1},         {"0", 0, 0},          {"1", 0, 1},
        {"2", TIDE_EINVAL, 0}, {"yes", TIDE_EINVAL, 0}, {"01", TIDE_EINVAL, 0},
    };
    tide_config cfg;
    tide_config_default(&cfg);
    assert_int_equal(cfg.yield_when_idle, -1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("TIDE_YIELD_WHEN_IDLE", cases[i].value, 1);
        tide_config_default(&cfg);
        cfg.yield_when_idle = 7; /* must be overwritten on success */
        int rc = tide_config_from_env(&cfg);
        assert_int_equal(rc, cases[i].want_rc);
        if (rc == 0)
            assert_int_equal(cfg.yield_when_idle, cases[i].want);
    }
    unsetenv("TIDE_YIELD_WHEN_IDLE");

    tide_config_default(&cfg);
    cfg.yield_when_idle = 2;
    tide_comm *comm = (tide_comm *)&cfg; /* must come back NULL */
    assert_int_equal(tide_init_with(&comm, &cfg), TIDE_EINVAL);
    assert_null(comm);

    /* TIDE_YIELD_WHEN_IDLE=auto leaves the reactor chosen in code alone
     * (it used to reset it to auto). */
    setenv("TIDE_YIELD_WHEN_IDLE", "auto", 1);
    tide_config_default(&cfg);
    cfg.reactor = TIDE_REACTOR_EPOLL;
    assert_int_equal(tide_config_from_env(&cfg), 0);
    assert_int_equal(cfg.reactor, TIDE_REACTOR_EPOLL);
    unsetenv("TIDE_YIELD_WHEN_IDLE");
}

/* The rendezvous port: MASTER_PORT; under torchrun (whose store holds
 * MASTER_PORT) the next one; TIDE_MASTER_PORT over both. */
static void config_reads_master_port(void **state)
{
    (void)state;
    static const struct {
        const char *torchrun, *ours; /* TORCHELASTIC_RUN_ID, TIDE_MASTER_PORT; NULL: unset */
        int want_rc, want;
    } cases[] = {{NULL, NULL, 0, 29500},
                 {"job", NULL, 0, 29501},
                 {"job", "4100", 0, 4100},
                 {"job", "70000", TIDE_EINVAL, 0}};
    setenv("MASTER_PORT", "29500", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tide_config cfg;
        if (cases[i].torchrun)
            setenv("TORCHELASTIC_RUN_ID", cases[i].torchrun, 1);
        if (cases[i].ours)
            setenv("TIDE_MASTER_PORT", cases[i].ours, 1);
        tide_config_default(&cfg);
        assert_int_equal(tide_config_from_env(&cfg), cases[i].want_rc);
        if (!cases[i].want_rc)
            assert_int_equal(cfg.master_port, cases[i].want);
        unsetenv("TIDE_MASTER_PORT");
        unsetenv("TORCHELASTIC_RUN_ID");
    }
    unsetenv("MASTER_PORT");
}

/* TIDE_LOG_LEVEL by number or by name, in any case; anything else is an
 * error that names what is expected. */
static void config_reads_log_level_names(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        int want_rc, want;
    } cases[] = {{"0", 0, 0},   {"3", 0, 3},       {"error", 0, 0}, {"WARN", 0, 1},
                 {"warning", 0, 1}, {"Info", 0, 2}, {"debug", 0, 3}, {"4", TIDE_EINVAL, 0},
                 {"loud", TIDE_EINVAL, 0}, {"23", TIDE_EINVAL, 0}, {"-1", TIDE_EINVAL, 0}};
    const char *was = getenv("TIDE_LOG_LEVEL");
    char saved[16] = "";
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tide_config cfg;
        setenv("TIDE_LOG_LEVEL", cases[i].value, 1);
        tide_config_default(&cfg);
        assert_int_equal(tide_config_from_env(&cfg), cases[i].want_rc);
        if (!cases[i].want_rc)
            assert_int_equal(cfg.log_level, cases[i].want);
    }
    if (was)
        setenv("TIDE_LOG_LEVEL", saved, 1);
    else
        unsetenv("TIDE_LOG_LEVEL");
}

/* A world past 2^20 ranks is refused at once: WORLD_SIZE=INT_MAX had
 * tide_init touch gigabytes (and overflow) before failing. */
static void init_refuses_a_huge_world(void **state)
{
    (void)state;
    static const int sizes[] = {0, -3, (1 << 20) + 1, 2147483647};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        tide_config cfg;
        tide_config_default(&cfg);
        cfg.size = sizes[i];
        cfg.log_level = 0;
        tide_comm *comm = (tide_comm *)&cfg;
        assert_int_equal(tide_init_with(&comm, &cfg), TIDE_EINVAL);
        assert_null(comm);
    }
}

/* TIDE_TCP_CONGESTION: auto (any case) is the empty default, anything else
 * is kept as given for tide_init to try, and a name longer than the kernel
 * allows is refused. */
static void config_reads_tcp_congestion(void **state)
{
    (void)state;
    const struct {
        const char *value;
        int want_rc;
        const char *want;
    } cases[] = {
        {"auto", 0, ""},     {"AUTO", 0, ""}, {"", 0, ""},
        {"system", 0, "system"}, {"cubic", 0, "cubic"},
        {"a-name-too-long-for-tcp", TIDE_EINVAL, ""},
    };
    tide_config cfg;
    tide_config_default(&cfg);
    assert_string_equal(cfg.tcp_congestion, "");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("TIDE_TCP_CONGESTION", cases[i].value, 1);
        tide_config_default(&cfg);
        int rc = tide_config_from_env(&cfg);
        assert_int_equal(rc, cases[i].want_rc);
        if (rc == 0)
            assert_string_equal(cfg.tcp_congestion, cases[i].want);
    }
    unsetenv("TIDE_TCP_CONGESTION");
}

static void config_reads_reactor(void **state)
{
    (void)state;
    const struct {
        const char *value;
        int want_rc;
        tide_reactor_kind want;
    } cases[] = {
        {"auto", 0, TIDE_REACTOR_AUTO},      {"", 0, TIDE_REACTOR_AUTO},
        {"io_uring", 0, TIDE_REACTOR_IO_URING}, {"EPOLL", 0, TIDE_REACTOR_EPOLL},
        {"uring", TIDE_EINVAL, TIDE_REACTOR_AUTO}, {"poll", TIDE_EINVAL, TIDE_REACTOR_AUTO},
    };
    tide_config cfg;
    tide_config_default(&cfg);
    assert_int_equal(cfg.reactor, TIDE_REACTOR_AUTO);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("TIDE_REACTOR", cases[i].value, 1);
        tide_config_default(&cfg);
        int rc = tide_config_from_env(&cfg);
        assert_int_equal(rc, cases[i].want_rc);
        if (rc == 0)
            assert_int_equal(cfg.reactor, cases[i].want);
    }
    unsetenv("TIDE_REACTOR");
}

/* TIDE_TRANSPORT names a transport of the registry; tide_init refuses an
 * unknown one before it opens a socket, and names the known ones. */
static void config_reads_transport(void **state)
{
    (void)state;
    tide_config cfg;
    tide_config_default(&cfg);
    assert_string_equal(cfg.transport, "");
    setenv("TIDE_TRANSPORT", "auto", 1);
    assert_int_equal(tide_config_from_env(&cfg), 0);
    assert_string_equal(cfg.transport, "");
    setenv("TIDE_TRANSPORT", "tcp", 1);
    assert_int_equal(tide_config_from_env(&cfg), 0);
    assert_string_equal(cfg.transport, "tcp");
    setenv("TIDE_TRANSPORT", "a-name-far-too-long", 1);
    assert_int_equal(tide_config_from_env(&cfg), TIDE_EINVAL);
    unsetenv("TIDE_TRANSPORT");

    tide_config_default(&cfg);
    strcpy(cfg.transport, "carrier-pigeon");
    cfg.log_level = 0;
    tide_comm *comm = (tide_comm *)&cfg;
    assert_int_equal(tide_init_with(&comm, &cfg), TIDE_EINVAL);
    assert_null(comm);
}

/* Thousands of keys (the table grows several times), some shared by
 * several nodes (notes from different peers about one collective): every
 * node is found under its key and only there, and removal leaves the
 * rest. */
static void seqmap_finds_every_node_through_growth(void **state)
{
    (void)state;
    enum { N = 5000 };
    struct tide__seqmap m = {0};
    static struct tide__seqmap_node nodes[N];
    for (int i = 0; i < N; i++) {
        nodes[i].comm_id = (uint32_t)(1 + i / 2 % 3);
        nodes[i].seq = (uint64_t)(i / 2); /* pairs share a sequence number */
        assert_int_equal(tide__seqmap_add(&m, &nodes[i]), 0);
    }
    assert_int_equal(m.count, N);
    assert_true(m.nslots >= N);
    for (int i = 0; i < N; i++) {
        int found = 0;
        struct tide__seqmap_node *n = NULL;
        while ((n = tide__seqmap_find(&m, nodes[i].comm_id, nodes[i].seq, n))) {
            assert_int_equal(n->comm_id, nodes[i].comm_id);
            assert_true(n->seq == nodes[i].seq);
            found += n == &nodes[i];
        }
        assert_int_equal(found, 1);
    }
    assert_null(tide__seqmap_find(&m, 9, 0, NULL));
    for (int i = 0; i < N; i += 2)
        tide__seqmap_remove(&m, &nodes[i]);
    tide__seqmap_remove(&m, &nodes[0]); /* absent: no effect */
    assert_int_equal(m.count, N / 2);
    for (int i = 0; i < N; i++) {
        struct tide__seqmap_node *n = NULL;
        bool seen = false;
        while ((n = tide__seqmap_find(&m, nodes[i].comm_id, nodes[i].seq, n)))
            seen |= n == &nodes[i];
        assert_int_equal(seen, i % 2 == 1);
    }
    tide__seqmap_free(&m);
    assert_null(tide__seqmap_find(&m, 1, 0, NULL));
}

/* A peer's account of its failure reaches logs, tide_req_message and
 * Python tracebacks: no escape sequences, bells or line breaks, bounded. */
static void peer_text_is_made_printable(void **state)
{
    (void)state;
    char out[16];
    const char in[] = "a\x1b" "[31mb\a\r\nc\x7f\xc3\xa9" "d";
    tide__printable_copy(out, sizeof out, in, sizeof in - 1);
    assert_string_equal(out, "a?[31mb???c???d");
    tide__printable_copy(out, sizeof out, "ok", 2);
    assert_string_equal(out, "ok");
    tide__printable_copy(out, 1, "xyz", 3);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timer_heap_fires_in_deadline_then_arm_order),
        cmocka_unit_test(timer_rearm_moves_the_deadline),
        cmocka_unit_test(mpsc_keeps_each_producers_order),
        cmocka_unit_test(frame_round_trips),
        cmocka_unit_test(frame_rejects_corruption),
        cmocka_unit_test(match_is_fifo_per_key),
        cmocka_unit_test(match_checks_length_and_signature),
        cmocka_unit_test(unexpected_copy_delivers),
        cmocka_unit_test(every_error_has_a_name_and_text),
        cmocka_unit_test(config_reads_each_launcher),
        cmocka_unit_test(config_reads_yield_when_idle),
        cmocka_unit_test(config_reads_tcp_congestion),
        cmocka_unit_test(init_refuses_a_huge_world),
        cmocka_unit_test(config_reads_log_level_names),
        cmocka_unit_test(config_reads_master_port),
        cmocka_unit_test(config_reads_reactor),
        cmocka_unit_test(config_reads_transport),
        cmocka_unit_test(seqmap_finds_every_node_through_growth),
        cmocka_unit_test(peer_text_is_made_printable),
    };
    return cmocka_run_group_tests_name("engine units", tests, NULL, NULL);
}
