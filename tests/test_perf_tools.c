/* test_perf_tools.c - tide-perf and tide-overlap end to end, as a smoke
 * test: each case runs `tide-run -n 4 -- <tool> ...` on small sizes and
 * checks the exit status, that -c 1 found no wrong element in any row
 * (out of place and in place), the table's shape and the --json keys.
 * No timing is asserted.  The tools sit beside tide-run ($TIDE_RUN).
 * Every run is bounded by RUN_TIMEOUT_MS; TIDE_TIMEOUT bounds each call. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tide.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    RUN_TIMEOUT_MS = 120000, /* generous: ASan on a shared 2-core machine */
    MAX_ARGS = 40,
};

/* One finished run: what it printed (stdout and stderr, interleaved) and
 * its exit status, or -1 when it did not exit normally. */
struct run {
    char *out;
    size_t len;
    int status;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* $TIDE_RUN's directory + name: the tools are built beside the launcher. */
static void tool_path(const char *name, char *path, size_t len)
{
    const char *run = getenv("TIDE_RUN");
    if (run == NULL || run[0] == '\0')
        fail_msg("TIDE_RUN is not set; it must name the tide-run binary");
    const char *slash = strrchr(run, '/');
    int dir = slash ? (int)(slash - run + 1) : 0;
    assert_true((size_t)snprintf(path, len, "%.*s%s", dir, run, name) < len);
}

static void append(struct run *r, const char *chunk, size_t n)
{
    r->out = realloc(r->out, r->len + n + 1);
    assert_non_null(r->out);
    memcpy(r->out + r->len, chunk, n);
    r->len += n;
    r->out[r->len] = '\0';
}

/* Reads fd to EOF within the deadline; false if the deadline passed. */
static bool drain(int fd, struct run *r, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return false;
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        char chunk[65536];
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n == 0)
            return true;
        if (n > 0)
            append(r, chunk, (size_t)n);
        else if (errno != EINTR && errno != EAGAIN)
            fail_msg("read: %s", strerror(errno));
    }
}

/* Runs `tide-run -n 4 -- <tool> args...` (args NULL-terminated). */
static struct run run_tool(const char *tool, const char *const *args)
{
    char run_path[PATH_MAX], tool_bin[PATH_MAX];
    tool_path("tide-run", run_path, sizeof run_path);
    tool_path(tool, tool_bin, sizeof tool_bin);
    const char *argv[MAX_ARGS + 6] = {run_path, "-n", "4", "--", tool_bin};
    for (int i = 0; args[i] != NULL; i++) {
        assert_true(i < MAX_ARGS);
        argv[5 + i] = args[i];
    }
    struct run r = {.out = calloc(1, 1), .status = -1};
    int fds[2];
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        dprintf(STDERR_FILENO, "cannot exec %s: %s\n", argv[0], strerror(errno));
        _exit(126);
    }
    close(fds[1]);
    bool finished = drain(fds[0], &r, now_ms() + RUN_TIMEOUT_MS);
    close(fds[0]);
    if (!finished)
        kill(pid, SIGTERM); /* tide-run stops its ranks */
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!finished)
        fail_msg("%s still running after %d ms; output:\n%s", tool, RUN_TIMEOUT_MS, r.out);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

static void expect_status(const struct run *r, int status)
{
    if (r->status == status)
        return;
    /* The end says why (a rank's error, tide-run's account); cmocka
     * prints a few KB of a message at most. */
    const char *tail = r->len > 3000 ? r->out + r->len - 3000 : r->out;
    fail_msg("exit status %d, wanted %d; output%s:\n%s", r->status, status,
             tail == r->out ? "" : " (its last 3000 bytes)", tail);
}

/* Rank 0's table rows: "[0] " lines that are not comments.  Calls fn on
 * each row's whitespace-separated fields; returns how many rows. */
static int for_each_row(const struct run *r, void (*fn)(char **f, int n, const void *arg),
                        const void *arg)
{
    char *copy = strdup(r->out), *save = NULL;
    assert_non_null(copy);
    int rows = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "[0] ", 4) != 0 || line[4] == '#' || strstr(line, "tide["))
            continue;
        char *f[32], *fsave = NULL;
        int n = 0;
        for (char *t = strtok_r(line + 4, " ", &fsave); t && n < 32;
             t = strtok_r(NULL, " ", &fsave))
            f[n++] = t;
        fn(f, n, arg);
        rows++;
    }
    free(copy);
    return rows;
}

static void load_file(const char *path, struct run *into)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("%s: %s", path, strerror(errno));
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        append(into, chunk, n);
    fclose(f);
}

static int count_of(const char *haystack, const char *needle)
{
    int count = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle))
        count++;
    return count;
}

/* Every record must carry every key the compare script reads. */
static void expect_json(const char *path, const char *const *keys, int records)
{
    struct run j = {.out = calloc(1, 1)};
    load_file(path, &j);
    if (j.out[0] != '[' || count_of(j.out, "{") != records)
        fail_msg("%s: wanted a JSON array of %d records:\n%s", path, records, j.out);
    for (int i = 0; keys[i]; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\":", keys[i]);
        if (count_of(j.out, quoted) != records)
            fail_msg("%s: key %s is not in every record:\n%s", path, keys[i], j.out);
    }
    free(j.out);
    unlink(path);
}

static void json_path(char *path, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, len, "%s/tide-perf-test-%d.json", dir && *dir ? dir : "/tmp", (int)getpid());
}

/* ------------------------------------------------------------- tide-perf */

/* One -c 1 run: a collective and the dtype/reduction/root it uses. */
struct perf_case {
    const char *op;
    const char *dtype;
    const char *redop;
    const char *root;
    bool inplace; /* has in-place columns (else N/A) */
    int rows;     /* sizes 8 B .. 256 KiB by x8, or 1 for barrier */
};

static const struct perf_case perf_cases[] = {
    {"allreduce", "float", "sum", "0", true, 6},
    {"allreduce", "bfloat16", "avg", "0", true, 6},
    {"allgather", "half", "sum", "0", true, 6},
    {"reduce_scatter", "int32", "max", "0", true, 6},
    {"broadcast", "double", "sum", "3", false, 6},
    {"reduce", "uint8", "prod", "1", true, 6},
    {"alltoall", "int8", "sum", "0", false, 6},
    {"gather", "int32", "sum", "1", false, 6},
    {"scatter", "uint64", "sum", "1", false, 6},
    {"barrier", "float", "sum", "0", false, 1},
};

/* Fields: size count type redop root | time algbw busbw #wrong | same | algo */
static void expect_checked_row(char **f, int n, const void *arg)
{
    const struct perf_case *c = arg;
    if (n != 14)
        fail_msg("%s: a row of %d fields, wanted 14 (starting %s)", c->op, n, n ? f[0] : "");
    if (strcmp(f[8], "0") != 0)
        fail_msg("%s %s bytes: %s wrong out of place", c->op, f[0], f[8]);
    if (strcmp(f[12], c->inplace ? "0" : "N/A") != 0)
        fail_msg("%s %s bytes: in place '%s', wanted %s", c->op, f[0], f[12],
                 c->inplace ? "0" : "N/A");
}

static void perf_checks_every_collective(void **state)
{
    char json[PATH_MAX];
    json_path(json, sizeof json);
    for (size_t i = 0; i < sizeof perf_cases / sizeof perf_cases[0]; i++) {
        const struct perf_case *c = &perf_cases[i];
        const char *args[] = {"--op", c->op, "-b", "8", "-e", "256K", "-f", "8", "-n", "2",
                              "-w", "1", "-d", c->dtype, "-o", c->redop, "-r", c->root,
                              "-c", "1", "--json", json, NULL};
        struct run r = run_tool("tide-perf", args);
        expect_status(&r, 0);
        assert_non_null(strstr(r.out, "# Out of bounds values : 0 OK"));
        assert_non_null(strstr(r.out, "# Avg bus bandwidth    : "));
        assert_int_equal(for_each_row(&r, expect_checked_row, c), c->rows);
        static const char *const keys[] = {
            "tool", "reactor", "op", "ranks", "bytes", "count", "dtype", "redop", "root", "algo",
            "inplace", "time_us", "algbw_gbps", "busbw_gbps", "wrong", NULL};
        expect_json(json, keys, c->rows * (c->inplace ? 2 : 1));
        free(r.out);
    }
}

/* A forced algorithm runs, and the table names it. */
static void perf_forces_an_algorithm(void **state)
{
    const char *args[] = {"-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
                          "-a", "ring", "-c", "1", NULL};
    struct run r = run_tool("tide-perf", args);
    expect_status(&r, 0);
    assert_non_null(strstr(r.out, " ring\n"));
    free(r.out);
}

/* Both forms are timed and checked: the blocking calls (the default,
 * which on one host may end without a request) and --nonblocking. */
static void perf_times_either_form(void **state)
{
    (void)state;
    const char *blocking[] = {"-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-w", "1", "-c", "1",
                              NULL};
    const char *posted[] = {"-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-w", "1", "-c", "1",
                            "--nonblocking", NULL};
    const char *const *forms[] = {blocking, posted};
    for (int k = 0; k < 2; k++) {
        struct run r = run_tool("tide-perf", forms[k]);
        expect_status(&r, 0);
        assert_non_null(strstr(r.out, "# Out of bounds values : 0 OK"));
        free(r.out);
    }
}

/* ---------------------------------------------------------- tide-overlap */

/* arg: non-NULL when the run had --interleave, whose Alt.Ovl column
 * comes last. */
static void expect_overlap_row(char **f, int n, const void *arg)
{
    int want = arg ? 9 : 8;
    if (n != want)
        fail_msg("a row of %d fields, wanted %d: size overall compute pure overlap post wait "
                 "median-overlap%s", n, want, arg ? " alternating-overlap" : "");
    static const int pct_fields[] = {4, 7, 8}; /* the mean's overlap, the medians', in turn */
    for (size_t k = 0; k < sizeof pct_fields / sizeof pct_fields[0] && pct_fields[k] < n; k++) {
        const char *pct = f[pct_fields[k]];
        if (atof(pct) < 0 || atof(pct) > 100)
            fail_msg("overlap %s%% is outside 0..100", pct);
    }
    /* Post and wait are parts of overall. */
    double overall = atof(f[1]), post = atof(f[5]), wait = atof(f[6]);
    if (post < 0 || wait < 0 || post + wait > overall * 1.001 + 0.01)
        fail_msg("post %s + wait %s us exceed overall %s us", f[5], f[6], f[1]);
}

static void overlap_runs_both_compute_models(void **state)
{
    char json[PATH_MAX];
    json_path(json, sizeof json);
    static const char *const keys[] = {"tool", "reactor", "op", "ranks", "bytes", "compute", "tests",
                                       "t_pure_us", "t_cpu_us", "t_overall_us", "t_post_us",
                                       "t_wait_us", "overlap_pct", "t_pure_median_us",
                                       "t_exposed_median_us", "t_exposed_median_max_us",
                                       "overlap_median_pct", "t_exposed_median_by_rank_us",
                                       NULL};
    const char *busy[] = {"-b", "8", "-e", "64K", "-f", "64", "-n", "3", "-w", "1",
                          "--json", json, NULL};
    struct run r = run_tool("tide-overlap", busy);
    expect_status(&r, 0);
    assert_non_null(strstr(r.out, "# Size"));
    assert_int_equal(for_each_row(&r, expect_overlap_row, NULL), 3);
    expect_json(json, keys, 3);
    free(r.out);

    const char *sleep[] = {"--op", "allgather", "--compute", "sleep", "-t", "2", "-b", "4K",
                           "-e", "4K", "-n", "3", "-w", "1", NULL};
    r = run_tool("tide-overlap", sleep);
    expect_status(&r, 0);
    assert_int_equal(for_each_row(&r, expect_overlap_row, NULL), 1);
    free(r.out);

    static const char *const alt_keys[] = {"overlap_median_pct", "t_alt_pure_median_us",
                                           "t_alt_exposed_median_us", "overlap_alt_pct", NULL};
    const char *turns[] = {"--compute", "sleep", "--interleave", "-b", "4K", "-e", "64K", "-f",
                           "16", "-n", "4", "-w", "1", "--json", json, NULL};
    r = run_tool("tide-overlap", turns);
    expect_status(&r, 0);
    assert_non_null(strstr(r.out, "Alt.Ovl(%)"));
    assert_int_equal(for_each_row(&r, expect_overlap_row, "interleave"), 2);
    expect_json(json, alt_keys, 2);
    free(r.out);
}

/* ------------------------------------------------------------ bad usage */

static void bad_arguments_exit_2(void **state)
{
    static const struct {
        const char *tool;
        const char *args[4];
    } cases[] = {
        {"tide-perf", {"--op", "allsum", NULL}},
        {"tide-perf", {"-d", "float8", NULL}},
        {"tide-perf", {"-b", "12Q", NULL}},
        {"tide-perf", {"-a", "no_such_algorithm", NULL}},
        {"tide-overlap", {"-c", "1", NULL}},
        {"tide-overlap", {"--compute", "gpu", NULL}},
        {"tide-ring-demo", {"--ranks", "4", NULL}}, /* it used to ignore them and run */
        {"tide-bench-p2p", {"--iters", "x", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run r = run_tool(cases[i].tool, cases[i].args);
        expect_status(&r, 2);
        free(r.out);
    }
}

/* The first line cmd writes on stdout (the rest is read and dropped), and
 * its exit status, or -1 if it did not exit. */
static int first_line(const char *cmd, char *line, size_t len)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    line[0] = '\0';
    if (!fgets(line, (int)len, p))
        line[0] = '\0';
    char drop[256];
    while (fgets(drop, sizeof drop, p))
        ;
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Every installed tool, as its peers do (issue 34): --version says its
 * name and tide's version on stdout, exit 0; -h and --help print usage
 * on stdout, nothing on stderr, exit 0 (tide-sim called --version a bad
 * value, tide-doctor's --help went to stderr with status 2); an unknown
 * option is a usage error, status 2, said on stderr. */
static void every_tool_answers_like_its_peers(void **state)
{
    (void)state;
    static const char *const tools[] = {"tide-run",    "tide-perf",       "tide-overlap",
                                        "tide-sim",    "tide-doctor",     "tide-fsdp-train",
                                        "tide-ring-demo", "tide-bench-p2p"};
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        char bin[PATH_MAX], cmd[PATH_MAX + 64], line[256];
        tool_path(tools[i], bin, sizeof bin);
        snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", bin);
        int status = first_line(cmd, line, sizeof line);
        if (status != 0 || !strstr(line, tools[i]) || !strstr(line, tide_version()))
            fail_msg("%s --version: status %d, said '%s'", tools[i], status, line);
        for (int h = 0; h < 2; h++) {
            snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", bin, h ? "--help" : "-h");
            status = first_line(cmd, line, sizeof line); /* stderr alone */
            if (status != 0 || line[0])
                fail_msg("%s %s: status %d, stderr '%s'", tools[i], h ? "--help" : "-h",
                         status, line);
        }
        snprintf(cmd, sizeof cmd, "%s --help 2>/dev/null", bin);
        if (first_line(cmd, line, sizeof line) != 0 || !strcasestr(line, "usage"))
            fail_msg("%s --help: stdout began '%s'", tools[i], line);
        snprintf(cmd, sizeof cmd, "%s --no-such-option 2>&1 >/dev/null", bin);
        status = first_line(cmd, line, sizeof line);
        if (status != 2 || !strstr(line, "no-such-option"))
            fail_msg("%s --no-such-option: status %d, stderr '%s'", tools[i], status, line);
    }
}

/* The tools, run directly (each parses before it starts anything):
 * --opt=value works as --opt value does, and a bad option or value is
 * one line on stderr, "TOOL: what (see TOOL --help)", with status 2
 * (cli.h) -- tide-perf, tide-overlap and tide-bench-p2p printed getopt's
 * own line or their whole help before.  The run that succeeds is 4
 * simulated ranks of 1 KiB: milliseconds. */
static void every_tool_parses_alike(void **state)
{
    (void)state;
    static const struct {
        const char *name; /* what the case shows */
        const char *tool, *args;
        int status;
        const char *said; /* status 2: what is wrong; else the first line of stdout */
    } cases[] = {
        {"opt=value", "tide-sim", "--op=allgather --ranks=4 --bytes=1K --alpha=2us", 0,
         "# tide-sim: allgather of 1.0 KiB (float) on 4 simulated ranks\n"},
        {"bad number", "tide-sim", "--ranks=4x", 2, "bad value '4x' for --ranks"},
        {"out of range", "tide-sim", "--ranks 0", 2, "bad value '0' for --ranks"},
        {"bad list", "tide-sim", "--sweep --ranks-list 4,,8", 2,
         "bad value '4,,8' for --ranks-list"},
        {"no value", "tide-sim", "--ranks", 2, "--ranks needs a value"},
        {"value to a flag", "tide-sim", "--sweep=yes", 2, "--sweep takes no value"},
        {"unknown letter", "tide-sim", "-q", 2, "unknown option '-q'"},
        {"unknown option", "tide-ring-demo", "--ranks=4", 2, "unknown option '--ranks=4'"},
        {"operand", "tide-ring-demo", "4", 2, "unexpected argument '4'"},
        {"perf: unknown option", "tide-perf", "--bogus", 2, "unknown option '--bogus'"},
        {"perf: bad number", "tide-perf", "-n abc", 2, "bad value 'abc' for -n (1 or more)"},
        {"perf: bad name", "tide-perf", "--op=allsum", 2, "bad value 'allsum' for --op"},
        {"perf: no value", "tide-perf", "-b", 2, "-b needs a value"},
        {"perf: between options", "tide-perf", "-b 1M -e 1K", 2, "-b is larger than -e"},
        {"overlap: the other tool's", "tide-overlap", "-c 1", 2, "-c is a tide-perf option"},
        {"overlap: a perf flag", "tide-overlap", "--nonblocking", 2,
         "--nonblocking is a tide-perf option"},
        {"overlap: bad compute", "tide-overlap", "--compute gpu", 2,
         "bad value 'gpu' for --compute (busy or sleep)"},
        {"perf: an overlap flag", "tide-perf", "--interleave", 2,
         "--interleave is a tide-overlap option"},
        {"p2p: bad number", "tide-bench-p2p", "--iters=x", 2, "bad value 'x' for --iters"},
        {"p2p: out of range", "tide-bench-p2p", "--reps 200", 2, "bad value '200' for --reps"},
        {"p2p: operand", "tide-bench-p2p", "y", 2, "unexpected argument 'y'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char bin[PATH_MAX], cmd[PATH_MAX + 128], line[256], want[256];
        tool_path(cases[i].tool, bin, sizeof bin);
        bool usage = cases[i].status == 2;
        snprintf(cmd, sizeof cmd, "%s %s %s", bin, cases[i].args,
                 usage ? "2>&1 >/dev/null" : "2>/dev/null");
        if (usage)
            snprintf(want, sizeof want, "%s: %s (see %s --help)\n", cases[i].tool,
                     cases[i].said, cases[i].tool);
        else
            snprintf(want, sizeof want, "%s", cases[i].said);
        int status = first_line(cmd, line, sizeof line);
        if (status != cases[i].status || strcmp(line, want) != 0)
            fail_msg("%s: %s %s: status %d, said '%s'; wanted %d, '%s'", cases[i].name,
                     cases[i].tool, cases[i].args, status, line, cases[i].status, want);
    }
}

int main(void)
{
    /* Fail a stuck call long before the test's own timeout. */
    setenv("TIDE_TIMEOUT", "60", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_tool_answers_like_its_peers),
        cmocka_unit_test(every_tool_parses_alike),
        cmocka_unit_test(perf_checks_every_collective),
        cmocka_unit_test(perf_forces_an_algorithm),
        cmocka_unit_test(perf_times_either_form),
        cmocka_unit_test(overlap_runs_both_compute_models),
        cmocka_unit_test(bad_arguments_exit_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
