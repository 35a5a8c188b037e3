/* loopback_limits.c - what this machine's loopback TCP can do at best, the
 * ceiling every collective here is measured against (tools/compare.sh).
 *
 *     loopback-limits [--mib M] [--reps R] [--iters I] [--ring N]... [--json FILE]
 *
 * Plain sockets between forked processes, no tide, no MPI:
 *   stream   one TCP connection, one direction: M MiB plus a 1-byte ack;
 *   ring N   N processes, each sends M MiB to the next while it receives
 *            M MiB from the previous one (a sender thread per process).
 *            With N = 2 both directions share one connection: "both
 *            directions at once".  This is the per-link ceiling of a ring
 *            collective's bus bandwidth at N ranks on this many cores;
 *   rtt      8-byte ping-pong on a TCP_NODELAY connection, the receiver
 *            either spinning on recv(MSG_DONTWAIT) or blocking in recv;
 *   memcpy   one process copying M MiB, for scale.
 * Every figure is the best of R repetitions (a ceiling: the highest rate,
 * the shortest round trip), as a noisy neighbour only ever slows a run
 * down; 1 GB = 1e9 B.
 *
 * This file owns: options, the process group (listeners made before the
 * fork, so every rank can dial its neighbour at once), the token ring
 * that starts and stops each timed repetition, the tests and the report.
 * It is a helper of compare.sh, built by meson but not installed.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/common/raw_socket.h"

enum { MAX_REPS = 64, MAX_RINGS = 8, MAX_GROUP = 64 };

struct options {
    long mib;              /* bulk size per repetition */
    int reps;              /* timed repetitions of every test */
    long iters;            /* round trips per rtt repetition */
    int rings[MAX_RINGS];  /* ring sizes to measure */
    int nrings;
    const char *json;      /* --json FILE or NULL */
};

/* One rank's view of its group: the connection to the next rank and the
 * one from the previous rank (the same socket when the group has two). */
struct member {
    int rank, size;
    int next, prev;
    uint8_t *buf, *inbuf; /* M MiB to send, M MiB to receive into */
    size_t bytes;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int sys_fail(const char *call)
{
    fprintf(stderr, "loopback-limits: %s: %s\n", call, strerror(errno));
    return -1;
}

/* ---------------------------------------------------------------- group */

/* A token goes once round the ring: rank 0 sends first and returns when
 * it is back; everyone else forwards it.  Run after a transfer, it tells
 * rank 0 that every rank is done (the token follows the data in each
 * stream); run before, it is a barrier. */
static int token_ring(const struct member *m)
{
    uint8_t t = 1;
    if (m->rank == 0)
        return raw_send_all(m->next, &t, 1) || raw_recv_all(m->prev, &t, 1, 0) ? -1 : 0;
    return raw_recv_all(m->prev, &t, 1, 0) || raw_send_all(m->next, &t, 1) ? -1 : 0;
}

typedef int (*group_fn)(struct member *m, const struct options *opt, double *result);

/* Connects rank (in a group of size) to its neighbours.  listeners[i] is
 * rank i's listener; a dial completes in the kernel's backlog before the
 * peer calls accept, so every rank can dial first and accept second. */
static int join_ring(struct member *m, const int *listeners, const uint16_t *ports)
{
    if (m->size == 2 && m->rank == 0) {
        m->prev = m->next = -1; /* rank 1 dials the one connection */
    } else if ((m->next = raw_dial(ports[(m->rank + 1) % m->size])) < 0) {
        return -1;
    }
    if (m->size == 2 && m->rank == 1) {
        m->prev = m->next;
        return 0;
    }
    m->prev = accept4(listeners[m->rank], NULL, NULL, SOCK_CLOEXEC);
    if (m->prev < 0)
        return sys_fail("accept");
    if (m->size == 2)
        m->next = m->prev;
    return 0;
}

/* Runs fn on size forked ranks joined in a ring; rank 0 is this process
 * and gets the result.  Returns 0 when every rank succeeded. */
static int run_group(int size, group_fn fn, const struct options *opt, double *result)
{
    int listeners[MAX_GROUP];
    uint16_t ports[MAX_GROUP];
    pid_t pids[MAX_GROUP] = {0};
    int failed = 0;
    for (int i = 0; i < size; i++)
        if ((listeners[i] = raw_listen(&ports[i], 4)) < 0)
            return -1;
    fflush(NULL);
    for (int r = 1; r < size && !failed; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            failed = sys_fail("fork");
        } else if (pids[r] == 0) {
            struct member m = {.rank = r, .size = size};
            double ignored;
            _exit(join_ring(&m, listeners, ports) || fn(&m, opt, &ignored) ? 1 : 0);
        }
    }
    struct member m = {.rank = 0, .size = size, .next = -1, .prev = -1};
    if (!failed && (join_ring(&m, listeners, ports) || fn(&m, opt, result)))
        failed = 1;
    for (int i = 0; i < size; i++)
        close(listeners[i]);
    if (m.next >= 0 && m.next != m.prev)
        close(m.next);
    if (m.prev >= 0)
        close(m.prev);
    for (int r = 1; r < size; r++) {
        int status = 0;
        if (pids[r] > 0 && (waitpid(pids[r], &status, 0) < 0 || status != 0))
            failed = 1;
    }
    return failed ? -1 : 0;
}

/* ---------------------------------------------------------------- tests */

/* The best of n values: the largest (rates) or the smallest (times). */
static double best(const double *v, int n, int want_max)
{
    double x = v[0];
    for (int i = 1; i < n; i++)
        x = (want_max ? v[i] > x : v[i] < x) ? v[i] : x;
    return x;
}

static int alloc_buffers(struct member *m, const struct options *opt)
{
    m->bytes = (size_t)opt->mib << 20;
    m->buf = malloc(m->bytes);
    m->inbuf = malloc(m->bytes);
    if (!m->buf || !m->inbuf) {
        fprintf(stderr, "loopback-limits: out of memory for %ld MiB\n", opt->mib);
        return -1;
    }
    /* Touch every page now so no timed transfer pays for page faults. */
    memset(m->buf, 0x5a, m->bytes);
    memset(m->inbuf, 0, m->bytes);
    return 0;
}

static void free_buffers(struct member *m)
{
    free(m->buf);
    free(m->inbuf);
}

/* Stream: rank 0 sends, rank 1 receives and acks; GB/s on rank 0. */
static int stream_fn(struct member *m, const struct options *opt, double *gbps)
{
    double v[MAX_REPS] = {0};
    uint8_t ack = 1;
    int rc = alloc_buffers(m, opt);
    for (int r = -1; r < opt->reps && !rc; r++) { /* r = -1 warms up */
        rc = token_ring(m);
        double t0 = now_s();
        if (!rc && m->rank == 0)
            rc = raw_send_all(m->next, m->buf, m->bytes) || raw_recv_all(m->prev, &ack, 1, 0);
        else if (!rc)
            rc = raw_recv_all(m->prev, m->inbuf, m->bytes, 0) || raw_send_all(m->next, &ack, 1);
        if (r >= 0)
            v[r] = (double)m->bytes / (now_s() - t0) / 1e9;
    }
    if (!rc && m->rank == 0)
        *gbps = best(v, opt->reps, 1);
    free_buffers(m);
    return rc;
}

static void *send_thread(void *arg)
{
    struct member *m = arg;
    return raw_send_all(m->next, m->buf, m->bytes) ? (void *)1 : NULL;
}

/* One ring step: send to next on a thread while receiving from prev. */
static int ring_step(struct member *m)
{
    pthread_t t;
    void *sent = NULL;
    if (pthread_create(&t, NULL, send_thread, m) != 0) {
        fprintf(stderr, "loopback-limits: pthread_create failed\n");
        return -1;
    }
    int rc = raw_recv_all(m->prev, m->inbuf, m->bytes, 0);
    pthread_join(t, &sent);
    return rc || sent ? -1 : 0;
}

/* Ring: per-link GB/s on rank 0, timed until every rank is done. */
static int ring_fn(struct member *m, const struct options *opt, double *gbps)
{
    double v[MAX_REPS] = {0};
    int rc = alloc_buffers(m, opt);
    for (int r = -1; r < opt->reps && !rc; r++) {
        rc = token_ring(m);
        double t0 = now_s();
        rc = rc ? rc : ring_step(m);
        rc = rc ? rc : token_ring(m);
        if (r >= 0)
            v[r] = (double)m->bytes / (now_s() - t0) / 1e9;
    }
    if (!rc && m->rank == 0)
        *gbps = best(v, opt->reps, 1);
    free_buffers(m);
    return rc;
}

/* Round trips in blocks; rank 0 gets the best block's mean, us. */
static int rtt_fn(struct member *m, const struct options *opt, int flags, double *us)
{
    double v[MAX_REPS] = {0};
    long per_block = opt->iters / opt->reps;
    int rc = 0;
    for (int r = -1; r < opt->reps && !rc; r++) {
        uint64_t word = 0;
        rc = token_ring(m);
        double t0 = now_s();
        for (long i = 0; i < per_block && !rc; i++) {
            if (m->rank == 0)
                rc = raw_send_all(m->next, &word, 8) || raw_recv_all(m->prev, &word, 8, flags);
            else
                rc = raw_recv_all(m->prev, &word, 8, flags) || raw_send_all(m->next, &word, 8);
        }
        if (r >= 0)
            v[r] = (now_s() - t0) * 1e6 / (double)per_block;
    }
    if (!rc && m->rank == 0)
        *us = best(v, opt->reps, 0);
    return rc;
}

static int rtt_busy_fn(struct member *m, const struct options *opt, double *us)
{
    return rtt_fn(m, opt, MSG_DONTWAIT, us);
}

static int rtt_blocking_fn(struct member *m, const struct options *opt, double *us)
{
    return rtt_fn(m, opt, 0, us);
}

static int memcpy_gbps(const struct options *opt, double *gbps)
{
    struct member m = {0};
    double v[MAX_REPS] = {0};
    if (alloc_buffers(&m, opt))
        return -1;
    for (int r = 0; r < opt->reps; r++) {
        double t0 = now_s();
        memcpy(m.inbuf, m.buf, m.bytes);
        v[r] = (double)m.bytes / (now_s() - t0) / 1e9;
        m.buf[r] ^= m.inbuf[m.bytes - 1 - (size_t)r]; /* keep the copy observable */
    }
    *gbps = best(v, opt->reps, 1);
    free_buffers(&m);
    return 0;
}

/* --------------------------------------------------------------- report */

static const char help_text[] =
    "Usage: loopback-limits [--mib M] [--reps R] [--iters I] [--ring N]... [--json FILE]\n"
    "\n"
    "Loopback TCP ceilings: one stream, a ring of N processes sending and\n"
    "receiving at once (N = 2: both directions of one connection), the\n"
    "8-byte round trip (busy-polling and blocking receiver), memcpy.\n"
    "\n"
    "  --mib M      bytes per transfer, MiB (default 64)\n"
    "  --reps R     repetitions, the best is reported (default 5)\n"
    "  --iters I    round trips per rtt test (default 20000)\n"
    "  --ring N     measure a ring of N processes (repeatable; default 2 and 4)\n"
    "  --json FILE  also write the figures as a JSON array of records\n";

static int parse_options(int argc, char **argv, struct options *opt)
{
    static const struct option longs[] = {
        {"mib", required_argument, NULL, 'm'},  {"reps", required_argument, NULL, 'r'},
        {"iters", required_argument, NULL, 'i'}, {"ring", required_argument, NULL, 'n'},
        {"json", required_argument, NULL, 'j'},  {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *opt = (struct options){.mib = 64, .reps = 5, .iters = 20000};
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        char *end = NULL;
        long v = c != 'j' && optarg ? strtol(optarg, &end, 10) : 0;
        if (end && (*end != '\0' || end == optarg || v < 1))
            c = '?';
        switch (c) {
        case 'm': opt->mib = v; break;
        case 'r': opt->reps = v <= MAX_REPS ? (int)v : 0; break;
        case 'i': opt->iters = v; break;
        case 'n':
            if (v < 2 || v > MAX_GROUP || opt->nrings == MAX_RINGS)
                c = '?';
            else
                opt->rings[opt->nrings++] = (int)v;
            break;
        case 'j': opt->json = optarg; break;
        case 'h': fputs(help_text, stdout); return 1;
        }
        if (c == '?') {
            fputs(help_text, stderr);
            return -1;
        }
    }
    if (optind != argc || opt->reps < 1 || opt->iters < opt->reps) {
        fputs(help_text, stderr);
        return -1;
    }
    if (opt->nrings == 0) {
        opt->rings[0] = 2;
        opt->rings[1] = 4;
        opt->nrings = 2;
    }
    return 0;
}

struct results {
    double stream_gbps, ring_gbps[MAX_RINGS], rtt_busy_us, rtt_blocking_us, memcpy_gbps;
};

static int write_json(const char *path, const struct options *opt, const struct results *res)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return sys_fail(path);
    size_t bytes = (size_t)opt->mib << 20;
    const char *head = "{\"tool\": \"loopback\", \"test\": ";
    fprintf(f, "[\n  %s\"stream\", \"ranks\": 2, \"bytes\": %zu, \"gbps\": %.4f},\n", head,
            bytes, res->stream_gbps);
    for (int i = 0; i < opt->nrings; i++)
        fprintf(f, "  %s\"ring\", \"ranks\": %d, \"bytes\": %zu, \"gbps\": %.4f},\n", head,
                opt->rings[i], bytes, res->ring_gbps[i]);
    fprintf(f, "  %s\"rtt_busy_poll\", \"ranks\": 2, \"bytes\": 8, \"time_us\": %.3f},\n",
            head, res->rtt_busy_us);
    fprintf(f, "  %s\"rtt_blocking\", \"ranks\": 2, \"bytes\": 8, \"time_us\": %.3f},\n", head,
            res->rtt_blocking_us);
    fprintf(f, "  %s\"memcpy\", \"ranks\": 1, \"bytes\": %zu, \"gbps\": %.4f}\n]\n", head, bytes,
            res->memcpy_gbps);
    return fclose(f) == 0 ? 0 : sys_fail(path);
}

int main(int argc, char **argv)
{
    struct options opt;
    struct results res = {0};
    int rc = parse_options(argc, argv, &opt);
    if (rc)
        return rc > 0 ? 0 : 2;
    if (run_group(2, stream_fn, &opt, &res.stream_gbps))
        return 1;
    for (int i = 0; i < opt.nrings; i++)
        if (run_group(opt.rings[i], ring_fn, &opt, &res.ring_gbps[i]))
            return 1;
    if (run_group(2, rtt_busy_fn, &opt, &res.rtt_busy_us) ||
        run_group(2, rtt_blocking_fn, &opt, &res.rtt_blocking_us) ||
        memcpy_gbps(&opt, &res.memcpy_gbps))
        return 1;
    printf("loopback limits (best of %d, %ld MiB transfers, 1 GB = 1e9 B)\n", opt.reps, opt.mib);
    printf("  one stream, one way              %7.2f GB/s\n", res.stream_gbps);
    for (int i = 0; i < opt.nrings; i++) {
        char label[64];
        snprintf(label, sizeof label, "ring of %d, per link%s", opt.rings[i],
                 opt.rings[i] == 2 ? " (both ways)" : "");
        printf("  %-32s %7.2f GB/s\n", label, res.ring_gbps[i]);
    }
    printf("  8 B round trip, busy-poll        %7.1f us\n", res.rtt_busy_us);
    printf("  8 B round trip, blocking         %7.1f us\n", res.rtt_blocking_us);
    printf("  memcpy                           %7.2f GB/s\n", res.memcpy_gbps);
    return opt.json && write_json(opt.json, &opt, &res) ? 1 : 0;
}
