/* harness.c - see harness.h. */
#include "tests/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

int harness_rank = -1;

void harness_defaults(struct harness_opts *o)
{
    memset(o, 0, sizeof *o);
    o->progress = TIDE_PROGRESS_THREAD;
    o->timeout_s = 20;
    o->bootstrap_s = 20;
    o->spin_us = -1;
    o->run_limit_s = 60;
}

void harness_sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int harness_free_port(const char *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, addr ? addr : "127.0.0.1", &sa.sin_addr);
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
}

static void fresh_token(char *out, size_t cap)
{
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        memset(raw, 7, sizeof raw);
    for (size_t i = 0; i < sizeof raw && 2 * i + 2 < cap; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

void harness_config(tide_config *cfg, int rank, int n, int port, const char *token,
                    const struct harness_opts *o)
{
    tide_config_default(cfg);
    cfg->rank = rank;
    cfg->size = n;
    cfg->master_port = port;
    snprintf(cfg->master_addr, sizeof cfg->master_addr, "%s", o->master ? o->master : "127.0.0.1");
    snprintf(cfg->job_token, sizeof cfg->job_token, "%s", token);
    cfg->timeout_s = o->timeout_s;
    cfg->bootstrap_timeout_s = o->bootstrap_s;
    cfg->progress = o->progress;
    if (o->spin_us >= 0)
        cfg->spin_us = o->spin_us;
    if (o->trace_path)
        snprintf(cfg->trace_path, sizeof cfg->trace_path, "%s", o->trace_path);
    /* Configs are built here, not read from the environment: carry the
     * reactor choice over so a suite can be run on either backend. */
    const char *reactor = getenv("TIDE_REACTOR");
    if (reactor && !strcmp(reactor, "epoll"))
        cfg->reactor = TIDE_REACTOR_EPOLL;
    else if (reactor && !strcmp(reactor, "io_uring"))
        cfg->reactor = TIDE_REACTOR_IO_URING;
    /* And where the progress thread runs, to run a suite with progress
     * threads on CPUs of their own (progress.c's own-CPU paths) by hand:
     * on this 2-core machine TIDE_PROGRESS_CPUS=1 puts every rank's
     * progress thread on CPU 1 and every caller on CPU 0, where the
     * collective, failure and thread-exit suites pass and the timing
     * test of test_p2p_tcp cannot (two callers share one CPU). */
    const char *cpus = getenv("TIDE_PROGRESS_CPUS");
    if (cpus)
        snprintf(cfg->progress_cpus, sizeof cfg->progress_cpus, "%s", cpus);
    const char *transport = getenv("TIDE_TRANSPORT");
    if (transport) /* as tide_config_from_env reads it: "auto" is "" */
        snprintf(cfg->transport, sizeof cfg->transport, "%s",
                 strcasecmp(transport, "auto") ? transport : "");
    const char *lvl = getenv("TIDE_LOG_LEVEL");
    cfg->log_level = lvl ? atoi(lvl) : 1;
}

/* Wait for all children, killing them at the run limit. */
static int reap(pid_t *pids, int n, int run_limit_s)
{
    int failed = 0, left = n;
    time_t give_up = time(NULL) + run_limit_s;
    while (left > 0) {
        /* Our ranks only: a test may have children of its own (a relay). */
        int reaped = 0;
        for (int i = 0; i < n; i++) {
            int status;
            if (pids[i] <= 0 || waitpid(pids[i], &status, WNOHANG) != pids[i])
                continue;
            pids[i] = 0;
            left--;
            reaped++;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                continue;
            failed++;
            if (WIFSIGNALED(status))
                fprintf(stderr, "harness: rank %d died of signal %d\n", i, WTERMSIG(status));
            else
                fprintf(stderr, "harness: rank %d exited %d\n", i, WEXITSTATUS(status));
        }
        if (reaped)
            continue;
        if (time(NULL) > give_up) {
            for (int i = 0; i < n; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            give_up = time(NULL) + 3600;
            fprintf(stderr, "harness: run limit of %d s reached, killing ranks\n", run_limit_s);
            failed++;
        }
        usleep(2000);
    }
    return failed;
}

int harness_run_raw(int n, int run_limit_s, int (*fn)(int rank, int port, void *arg), void *arg)
{
    int port = harness_free_port(NULL);
    if (port < 0)
        return n;
    return harness_run_raw_on(n, run_limit_s, port, fn, arg);
}

int harness_run_raw_on(int n, int run_limit_s, int port, int (*fn)(int rank, int port, void *arg),
                       void *arg)
{
    pid_t pids[256];
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            harness_rank = i;
            alarm((unsigned)run_limit_s + 5);
            _exit(fn(i, port, arg));
        }
    }
    return reap(pids, n, run_limit_s);
}

struct body_call {
    const struct harness_opts *o;
    harness_body body;
    void *arg;
    int n;
    char token[40];
};

/* TIDE_TEST_HOST_SIZE=k splits a job on this machine into "hosts" of k
 * consecutive ranks (TIDE_HOST_ID), so one machine runs shared memory
 * inside them and TCP between them.  0 when unset. */
static int test_host_size(void)
{
    const char *s = getenv("TIDE_TEST_HOST_SIZE");
    return s && atoi(s) > 0 ? atoi(s) : 0;
}

/* What TIDE_EXPECT_TRANSPORT wants between rank and peer: its value, or
 * for "mixed" shm inside a test host and tcp between them. */
static const char *expected_transport(const char *want, int rank, int peer)
{
    int k = test_host_size();
    if (strcmp(want, "mixed") || !k)
        return want;
    return rank / k == peer / k ? "shm" : "tcp";
}

static int run_body(int rank, int port, void *p)
{
    struct body_call *bc = p;
    tide_config cfg;
    if (test_host_size()) {
        char host[32];
        snprintf(host, sizeof host, "test-host-%d", rank / test_host_size());
        setenv("TIDE_HOST_ID", host, 1);
    }
    harness_config(&cfg, rank, bc->n, port, bc->token, bc->o);
    tide_comm *comm;
    int rc = tide_init_with(&comm, &cfg);
    EXPECT(rc == 0, "tide_init_with: %s", tide_err_name(rc));
    /* Set by deny-io-uring: a suite meant for epoll must not pass on
     * io_uring by accident. */
    const char *want = getenv("TIDE_EXPECT_REACTOR");
    EXPECT(!want || !strcmp(tide_comm_reactor(comm), want), "running on %s, not %s",
           tide_comm_reactor(comm), want);
    /* Likewise for a suite run again on shared memory. */
    const char *want_tp = getenv("TIDE_EXPECT_TRANSPORT");
    for (int peer = 0; want_tp && peer < tide_comm_size(comm); peer++)
        EXPECT(peer == rank ||
                   !strcmp(tide_comm_transport(comm, peer), expected_transport(want_tp, rank, peer)),
               "rank %d reached over %s, not %s", peer, tide_comm_transport(comm, peer),
               expected_transport(want_tp, rank, peer));
    bc->body(comm, bc->arg);
    EXPECT_OK(tide_finalize(comm));
    return 0;
}

int harness_run(int n, const struct harness_opts *o, harness_body body, void *arg)
{
    struct harness_opts defaults;
    if (!o) {
        harness_defaults(&defaults);
        o = &defaults;
    }
    struct body_call bc = {.o = o, .body = body, .arg = arg, .n = n};
    if (o->token)
        snprintf(bc.token, sizeof bc.token, "%s", o->token);
    else
        fresh_token(bc.token, sizeof bc.token);
    return harness_run_raw(n, o->run_limit_s, run_body, &bc);
}

void harness_killed_mid_allreduce(tide_comm *comm, void *arg)
{
    const struct harness_kill *k = arg;
    int r = tide_comm_rank(comm);
    size_t count = (size_t)16 << 20;
    float *v = calloc(count, sizeof *v);
    EXPECT(v, "calloc");
    EXPECT_OK(tide_barrier(comm));
    tide_req *req;
    EXPECT_OK(tide_iallreduce(comm, TIDE_IN_PLACE, v, count, TIDE_FLOAT32, TIDE_SUM, &req));
    if (r == k->victim) {
        struct timespec pause = {0, (long)k->pause_ms * 1000 * 1000};
        nanosleep(&pause, NULL);
        raise(SIGKILL);
    }
    int rc = tide_wait(req, 20000);
    EXPECT(!strcmp(tide_req_algorithm(req), k->algo), "ran %s, not %s", tide_req_algorithm(req),
           k->algo);
    EXPECT(rc == TIDE_EPEER, "rank %d: the allreduce returned %s: %s", r, tide_err_name(rc),
           tide_req_message(req));
    tide_req_free(req);
    rc = tide_allreduce(comm, TIDE_IN_PLACE, v, 1 << 20, TIDE_FLOAT32, TIDE_SUM);
    EXPECT(rc != 0, "rank %d: an allreduce after the loss succeeded", r);
    free(v);
}

int harness_init_logged(tide_comm **comm, const tide_config *cfg, char *text, size_t cap)
{
    FILE *log = tmpfile();
    int saved = dup(2);
    fflush(stderr);
    dup2(fileno(log), 2);
    int rc = tide_init_with(comm, cfg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(log);
    size_t got = fread(text, 1, cap - 1, log);
    text[got] = '\0';
    fclose(log);
    return rc;
}
