/* bench_p2p.c - tide-bench-p2p: tide's point-to-point latency and bandwidth
 * next to plain TCP sockets between the same two processes, in one run.
 *
 *     tide-run -n 2 -- tide-bench-p2p [--iters N] [--mib M] [--reps R]
 *                                     [--warmup W] [--json FILE]
 *
 * The anchors are what tide should be judged against on one machine:
 *   busy-poll  a TCP_NODELAY loopback connection whose receiver spins on
 *              recv(MSG_DONTWAIT): the best a socket round trip can do;
 *   blocking   the same connection with a plain blocking recv: processes
 *              that sleep in the kernel between messages;
 *   stream     a blocking send()/recv() loop of the whole buffer.
 *
 * This file owns the whole tool:
 *   options    argv parsing and --help
 *   raw        the loopback TCP connection and its short-send/recv loops
 *   latency    8-byte ping-pong, tide and both raw anchors
 *   bandwidth  one-way bulk transfer plus a 1-byte ack, tide and raw
 *   report     the table on rank 0's stdout and the --json file
 *
 * Fairness: the variants never run at the same time (a tide_barrier sits
 * before every timed block), and their blocks are interleaved rep by rep
 * so that a noisy neighbour on this shared machine hurts all of them
 * alike.  Only rank 0 times and prints; rank 1 mirrors every step.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/common/cli.h"
#include "tools/common/median.h"
#include "tools/common/raw_socket.h"
#include "tide.h"

enum {
    TAG_PORT = 1, /* rank 0 -> 1: the raw listener's port */
    TAG_PING = 2, /* the 8-byte ping-pong word, both ways */
    TAG_BULK = 3, /* rank 0 -> 1: the bulk buffer */
    TAG_ACK = 4,  /* rank 1 -> 0: one byte, 1 = arrived (and checked) */
    MAX_REPS = 100,
};

/* The three ways of doing an 8-byte round trip. */
enum lat_kind { LAT_TIDE, LAT_SPIN, LAT_BLOCK, LAT_KINDS };

/* The two ways of moving the bulk buffer. */
enum bw_kind { BW_TIDE, BW_RAW, BW_KINDS };

static const char *const lat_names[LAT_KINDS] = {"tide", "busy_poll", "blocking"};
static const char *const bw_names[BW_KINDS] = {"tide", "blocking_stream"};

struct options {
    long iters;       /* timed round trips per latency variant, all reps */
    long warmup;      /* untimed round trips per latency variant */
    long mib;         /* bulk transfer size, MiB */
    int reps;         /* timed blocks (latency) and transfers (bandwidth) */
    const char *json; /* --json FILE, or NULL */
};

struct bench {
    tide_comm *comm;
    int rank;
    int fd;                             /* the raw loopback connection */
    struct options opt;
    uint8_t *big;                       /* rank 0 sends it, rank 1 fills it */
    size_t big_bytes;
    double lat_us[LAT_KINDS][MAX_REPS]; /* rank 0: mean round trip per block */
    double bw_gbs[BW_KINDS][MAX_REPS];  /* rank 0: GB/s (1e9 B/s) per rep */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reports a failed tide call; returns -1 so callers can `return tide_ok()`. */
static int tide_ok(const char *what, int rc)
{
    if (rc == 0)
        return 0;
    fprintf(stderr, "%s failed: %s (%s)\n", what, tide_strerror(rc), tide_err_name(rc));
    return -1;
}

static int sys_fail(const char *call)
{
    fprintf(stderr, "%s failed: %s\n", call, strerror(errno));
    return -1;
}

/* ---------------------------------------------------------------- options */

static const char help_text[] =
    "Usage: tide-run -n 2 -- tide-bench-p2p [options]\n"
    "\n"
    "tide point-to-point latency and bandwidth next to raw loopback sockets.\n"
    "\n"
    "  --iters N    timed 8-byte round trips per variant (default 20000)\n"
    "  --warmup N   untimed round trips per variant first (default 1000)\n"
    "  --mib M      one-way transfer size in MiB (default 64)\n"
    "  --reps R     latency blocks and timed transfers (default 5, max 100)\n"
    "  --json FILE  also write the numbers as JSON (rank 0)\n"
    "  --version    print tide's version\n";

/* Option c's value (cli.h's cli_take_fn): -1 when it is not a number in
 * its range. */
static int take_value(void *options, int c, int at, const char *arg)
{
    struct options *opt = options;
    bool ok = false;
    (void)at;
    switch (c) {
    case 'i': ok = cli_parse_long(arg, 1, LONG_MAX, &opt->iters); break;
    case 'w': ok = cli_parse_long(arg, 0, LONG_MAX, &opt->warmup); break;
    case 'm': ok = cli_parse_long(arg, 1, 1L << 20, &opt->mib); break;
    case 'r': ok = cli_parse_int(arg, 1, MAX_REPS, &opt->reps); break;
    case 'j': opt->json = arg; ok = true; break;
    }
    return ok ? 0 : -1;
}

/* Returns -1 to run, else the status to exit with: 0 after --help or
 * --version, 2 on a usage error, said as every tool says one
 * (tools/common/cli.h).  Parsed before tide_init: no rank has started
 * anything yet. */
static int parse_options(int argc, char **argv, struct options *opt)
{
    static const struct option longs[] = {
        {"iters", required_argument, NULL, 'i'}, {"warmup", required_argument, NULL, 'w'},
        {"mib", required_argument, NULL, 'm'},   {"reps", required_argument, NULL, 'r'},
        {"json", required_argument, NULL, 'j'},  {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},     {NULL, 0, NULL, 0},
    };
    *opt = (struct options){.iters = 20000, .warmup = 1000, .mib = 64, .reps = 5};
    const struct cli_tool t = {.name = "tide-bench-p2p", .usage = help_text,
                               .version = tide_version(), .longs = longs};
    int rc = cli_parse(&t, argc, argv, ":h", take_value, opt);
    if (rc >= 0)
        return rc;
    if (opt->iters < opt->reps)
        return cli_usage_error(&t, "--iters %ld is fewer than --reps %d", opt->iters, opt->reps);
    return -1;
}

/* -------------------------------------------------------------------- raw */

/* Connects rank 0 and rank 1 with one plain TCP connection: rank 0
 * listens, tells rank 1 the port through tide, and accepts.  Both ends
 * get TCP_NODELAY so 8-byte messages are not held back by Nagle. */
static int raw_connect(struct bench *b)
{
    int32_t port = 0;
    if (b->rank == 0) {
        uint16_t p16 = 0;
        int lfd = raw_listen(&p16, 1);
        port = p16;
        if (lfd < 0 ||
            tide_ok("sending the raw port", tide_send(b->comm, &port, sizeof port, 1, TAG_PORT))) {
            if (lfd >= 0)
                close(lfd);
            return -1;
        }
        b->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        close(lfd);
        if (b->fd < 0)
            return sys_fail("accept");
        return raw_nodelay(b->fd);
    }
    if (tide_ok("receiving the raw port", tide_recv(b->comm, &port, sizeof port, 0, TAG_PORT)))
        return -1;
    b->fd = raw_dial((uint16_t)port);
    return b->fd < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- latency */

static int put_word(struct bench *b, enum lat_kind kind, const uint64_t *word)
{
    if (kind == LAT_TIDE)
        return tide_ok("tide_send (ping)", tide_send(b->comm, word, sizeof *word, 1 - b->rank, TAG_PING));
    return raw_send_all(b->fd, word, sizeof *word);
}

static int get_word(struct bench *b, enum lat_kind kind, uint64_t *word)
{
    if (kind == LAT_TIDE)
        return tide_ok("tide_recv (ping)", tide_recv(b->comm, word, sizeof *word, 1 - b->rank, TAG_PING));
    return raw_recv_all(b->fd, word, sizeof *word, kind == LAT_SPIN ? MSG_DONTWAIT : 0);
}

/* iters round trips: rank 0 sends i and expects i back, rank 1 echoes.
 * On rank 0 *us is the mean round trip in microseconds. */
static int lat_block(struct bench *b, enum lat_kind kind, long iters, double *us)
{
    if (tide_ok("tide_barrier", tide_barrier(b->comm)))
        return -1;
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
        uint64_t word = (uint64_t)i;
        if (b->rank == 0 && (put_word(b, kind, &word) || get_word(b, kind, &word)))
            return -1;
        if (b->rank == 1 && (get_word(b, kind, &word) || put_word(b, kind, &word)))
            return -1;
        if (b->rank == 0 && word != (uint64_t)i) {
            fprintf(stderr, "%s ping-pong: sent %ld, got %llu back\n", lat_names[kind], i,
                    (unsigned long long)word);
            return -1;
        }
    }
    if (us)
        *us = (now_s() - t0) * 1e6 / (double)(iters ? iters : 1);
    return 0;
}

/* Warm every variant up, then run reps timed blocks of each, interleaved. */
static int run_latency(struct bench *b)
{
    long per_block = b->opt.iters / b->opt.reps;
    for (int k = 0; k < LAT_KINDS; k++)
        if (lat_block(b, (enum lat_kind)k, b->opt.warmup, NULL))
            return -1;
    for (int r = 0; r < b->opt.reps; r++)
        for (int k = 0; k < LAT_KINDS; k++)
            if (lat_block(b, (enum lat_kind)k, per_block, &b->lat_us[k][r]))
                return -1;
    return 0;
}

/* -------------------------------------------------------------- bandwidth */

static uint32_t pattern_word(size_t i)
{
    return (uint32_t)(i * 0x9e3779b9u) ^ 0x7469u;
}

static void fill_pattern(uint8_t *buf, size_t bytes)
{
    uint32_t *w = (uint32_t *)buf;
    for (size_t i = 0; i < bytes / sizeof *w; i++)
        w[i] = pattern_word(i);
}

/* Returns 1 when buf holds the sender's pattern, else 0 (and says where). */
static int pattern_ok(const uint8_t *buf, size_t bytes)
{
    const uint32_t *w = (const uint32_t *)buf;
    for (size_t i = 0; i < bytes / sizeof *w; i++) {
        if (w[i] != pattern_word(i)) {
            fprintf(stderr, "data check: word %zu is %08x, expected %08x\n", i, w[i],
                    pattern_word(i));
            return 0;
        }
    }
    return 1;
}

/* Rank 1's side of one transfer: receive it all, then ack with 1 byte. */
static int bw_receive(struct bench *b, enum bw_kind kind, int check)
{
    uint8_t ack = 1;
    if (kind == BW_RAW) {
        if (raw_recv_all(b->fd, b->big, b->big_bytes, 0))
            return -1;
    } else {
        tide_req *req;
        int rc = tide_irecv(b->comm, b->big, b->big_bytes, 0, TAG_BULK, &req);
        if (tide_ok("tide_irecv (bulk)", rc) || tide_ok("tide_wait (bulk)", tide_wait(req, -1)))
            return -1;
        size_t got = tide_req_bytes(req);
        tide_req_free(req);
        if (got != b->big_bytes) {
            fprintf(stderr, "tide bulk receive got %zu bytes, expected %zu\n", got, b->big_bytes);
            ack = 0;
        }
    }
    if (check && ack)
        ack = (uint8_t)pattern_ok(b->big, b->big_bytes);
    if (kind == BW_RAW ? raw_send_all(b->fd, &ack, 1)
                       : tide_ok("tide_send (ack)", tide_send(b->comm, &ack, 1, 0, TAG_ACK)))
        return -1;
    return ack ? 0 : -1;
}

/* Rank 0's side: send it all and wait for the ack; *gbs is 1e9 B/s. */
static int bw_send(struct bench *b, enum bw_kind kind, double *gbs)
{
    uint8_t ack = 0;
    double t0 = now_s();
    if (kind == BW_RAW) {
        if (raw_send_all(b->fd, b->big, b->big_bytes) || raw_recv_all(b->fd, &ack, 1, 0))
            return -1;
    } else {
        if (tide_ok("tide_send (bulk)", tide_send(b->comm, b->big, b->big_bytes, 1, TAG_BULK)) ||
            tide_ok("tide_recv (ack)", tide_recv(b->comm, &ack, 1, 1, TAG_ACK)))
            return -1;
    }
    double s = now_s() - t0;
    if (ack != 1) {
        fprintf(stderr, "%s transfer: rank 1 did not get the data as sent\n", bw_names[kind]);
        return -1;
    }
    if (gbs)
        *gbs = (double)b->big_bytes / s / 1e9;
    return 0;
}

/* One transfer of the bulk buffer.  With check, rank 1 first zeroes its
 * buffer and afterwards verifies every word, so stale data from an earlier
 * transfer cannot pass; the timed transfers skip both. */
static int bw_once(struct bench *b, enum bw_kind kind, int check, double *gbs)
{
    if (check && b->rank == 1)
        memset(b->big, 0, b->big_bytes);
    if (tide_ok("tide_barrier", tide_barrier(b->comm)))
        return -1;
    return b->rank == 0 ? bw_send(b, kind, gbs) : bw_receive(b, kind, check);
}

/* A checked warm-up transfer per variant, then reps timed ones, interleaved. */
static int run_bandwidth(struct bench *b)
{
    for (int k = 0; k < BW_KINDS; k++)
        if (bw_once(b, (enum bw_kind)k, 1, NULL))
            return -1;
    for (int r = 0; r < b->opt.reps; r++)
        for (int k = 0; k < BW_KINDS; k++)
            if (bw_once(b, (enum bw_kind)k, 0, &b->bw_gbs[k][r]))
                return -1;
    return 0;
}

/* ----------------------------------------------------------------- report */

/* The median of n values (sorts a copy; n <= MAX_REPS). */
static double median(const double *v, int n)
{
    double s[MAX_REPS];
    memcpy(s, v, (size_t)n * sizeof *s);
    return median_sort(s, (size_t)n);
}

static double best(const double *v, int n, int want_max)
{
    double x = v[0];
    for (int i = 1; i < n; i++)
        x = want_max ? (v[i] > x ? v[i] : x) : (v[i] < x ? v[i] : x);
    return x;
}

/* What this process's tide runs with, as tide_init read it. */
static void progress_setting(char *out, size_t cap)
{
    tide_config cfg;
    tide_config_default(&cfg);
    tide_config_from_env(&cfg);
    snprintf(out, cap, "TIDE_PROGRESS=%s, TIDE_SPIN_US=%d",
             cfg.progress == TIDE_PROGRESS_INLINE ? "inline" : "thread", cfg.spin_us);
}

static void print_table(const struct bench *b)
{
    int n = b->opt.reps;
    double lt = median(b->lat_us[LAT_TIDE], n), ls = median(b->lat_us[LAT_SPIN], n);
    double lb = median(b->lat_us[LAT_BLOCK], n);
    double bt = median(b->bw_gbs[BW_TIDE], n), br = median(b->bw_gbs[BW_RAW], n);
    double bt_max = best(b->bw_gbs[BW_TIDE], n, 1), br_max = best(b->bw_gbs[BW_RAW], n, 1);
    char mode[96], med[32], top[32];
    progress_setting(mode, sizeof mode);
    snprintf(med, sizeof med, "%ld MiB one-way, median", b->opt.mib);
    snprintf(top, sizeof top, "%ld MiB one-way, best", b->opt.mib);
    printf("tide point-to-point vs raw sockets, 2 ranks on this machine (one run)\n");
    printf("%s; latency = median of %d block means of %ld round trips;\n", mode, n,
           b->opt.iters / n);
    printf("bandwidth = %ld MiB one-way + 1-byte ack, %d reps, 1 GB = 1e9 B\n", b->opt.mib, n);
    printf("%-22s %12s   %-21s   %7s\n", "test", "tide", "raw (anchor)", "ratio");
    printf("%-22s %9.1f us   busy-poll %8.1f us   %6.2fx   (target <= 1.2x)\n", "8 B round trip",
           lt, ls, lt / ls);
    printf("%-22s %12s   blocking  %8.1f us   %6.2fx\n", "8 B round trip", "", lb, lt / lb);
    printf("%-22s %7.2f GB/s   blocking  %6.2f GB/s   %5.0f %%   (target >= 90 %%)\n",
           med, bt, br, 100 * bt / br);
    printf("%-22s %7.2f GB/s   blocking  %6.2f GB/s   %5.0f %%\n", top, bt_max,
           br_max, 100 * bt_max / br_max);
}

static void json_series(FILE *f, const char *name, const double *v, int n, int want_max,
                        const char *sep)
{
    fprintf(f, "    \"%s\": {\"median\": %.4f, \"best\": %.4f, \"reps\": [", name, median(v, n),
            best(v, n, want_max));
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.4f", i ? ", " : "", v[i]);
    fprintf(f, "]}%s\n", sep);
}

static int write_json(const struct bench *b, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return sys_fail(path);
    tide_config cfg;
    tide_config_default(&cfg);
    tide_config_from_env(&cfg);
    int n = b->opt.reps;
    fprintf(f, "{\n  \"progress\": \"%s\",\n  \"spin_us\": %d,\n",
            cfg.progress == TIDE_PROGRESS_INLINE ? "inline" : "thread", cfg.spin_us);
    fprintf(f, "  \"iters\": %ld,\n  \"warmup\": %ld,\n  \"reps\": %d,\n  \"bytes\": %zu,\n",
            b->opt.iters, b->opt.warmup, n, b->big_bytes);
    fprintf(f, "  \"round_trip_us\": {\n");
    for (int k = 0; k < LAT_KINDS; k++)
        json_series(f, lat_names[k], b->lat_us[k], n, 0, k + 1 < LAT_KINDS ? "," : "");
    fprintf(f, "  },\n  \"one_way_gbs\": {\n");
    for (int k = 0; k < BW_KINDS; k++)
        json_series(f, bw_names[k], b->bw_gbs[k], n, 1, k + 1 < BW_KINDS ? "," : "");
    fprintf(f, "  },\n  \"latency_ratio_tide_over_busy_poll\": %.4f,\n",
            median(b->lat_us[LAT_TIDE], n) / median(b->lat_us[LAT_SPIN], n));
    fprintf(f, "  \"bandwidth_ratio_tide_over_raw\": %.4f\n}\n",
            median(b->bw_gbs[BW_TIDE], n) / median(b->bw_gbs[BW_RAW], n));
    if (fclose(f) != 0)
        return sys_fail(path);
    return 0;
}

/* ------------------------------------------------------------------- main */

/* Rank 0 fills the bulk buffer with the pattern; rank 1 touches its pages,
 * so that no timed transfer pays for first-touch page faults. */
static int alloc_big(struct bench *b)
{
    b->big_bytes = (size_t)b->opt.mib << 20;
    b->big = malloc(b->big_bytes);
    if (!b->big) {
        fprintf(stderr, "allocating %ld MiB failed\n", b->opt.mib);
        return -1;
    }
    if (b->rank == 0)
        fill_pattern(b->big, b->big_bytes);
    else
        memset(b->big, 0, b->big_bytes);
    return 0;
}

static int run(struct bench *b)
{
    if (tide_comm_size(b->comm) != 2) {
        if (b->rank == 0)
            fprintf(stderr, "tide-bench-p2p needs exactly 2 ranks (tide-run -n 2)\n");
        return -1;
    }
    if (alloc_big(b) || raw_connect(b) || run_latency(b) || run_bandwidth(b))
        return -1;
    if (tide_ok("the final tide_barrier", tide_barrier(b->comm)))
        return -1;
    if (b->rank != 0)
        return 0;
    print_table(b);
    return b->opt.json ? write_json(b, b->opt.json) : 0;
}

int main(int argc, char **argv)
{
    static struct bench b = {.fd = -1};
    int rc = parse_options(argc, argv, &b.opt);
    if (rc >= 0)
        return rc;
    rc = tide_init(&b.comm);
    if (rc)
        return tide_ok("joining the job (tide_init)", rc) ? 1 : 0;
    b.rank = tide_comm_rank(b.comm);
    int failed = run(&b) != 0;
    if (b.fd >= 0)
        close(b.fd);
    free(b.big);
    if (tide_ok("tide_finalize", tide_finalize(b.comm)))
        failed = 1;
    fflush(stdout);
    return failed;
}
