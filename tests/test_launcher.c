/* test_launcher.c - tide-run end to end: the ranks' environment, the
 * prefixed output relay, failure handling, signal forwarding and usage
 * errors.  Each test runs the real launcher (path in $TIDE_RUN) over
 * small /bin/sh ranks and checks its stdout, stderr and exit status.
 * Every wait is bounded: by RUN_TIMEOUT_MS in the helpers, and by an
 * alarm() per test as a backstop. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/placement.h"

enum {
    RUN_TIMEOUT_MS = 30000, /* far beyond any run; a shared 2-core box is slow */
    ALARM_SECONDS = 90,     /* backstop if a helper itself hangs */
    MAX_ARGS = 32,
    TOKEN_HEX = 64,
};

/* One launcher run: its pipes, what it wrote, and how it ended. */
struct run {
    pid_t pid;
    int out_fd; /* launcher's stdout; -1 at EOF */
    int err_fd; /* launcher's stderr; -1 at EOF */
    char *out;  /* NUL-terminated, grows */
    size_t out_len;
    char *err;
    size_t err_len;
    int status; /* waitpid status */
    int64_t started_ms;
    int64_t elapsed_ms; /* start to reaped */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *launcher_path(void)
{
    const char *path = getenv("TIDE_RUN");
    if (path == NULL || path[0] == '\0')
        fail_msg("TIDE_RUN is not set; it must name the tide-run binary");
    return path;
}

/* The test runner may have SIGINT ignored or signals blocked; both would
 * survive exec and make the ranks' traps no-ops. */
static void reset_signals(void)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

/* Starts `tide-run args...` with stdout and stderr captured. */
static void run_start(struct run *r, const char *const *args)
{
    const char *argv[MAX_ARGS + 2] = {launcher_path()};
    int out_pipe[2], err_pipe[2];

    for (int i = 0; args[i] != NULL; i++) {
        assert_true(i < MAX_ARGS);
        argv[i + 1] = args[i];
    }
    *r = (struct run){.out = calloc(1, 1), .err = calloc(1, 1)};
    assert_non_null(r->out);
    assert_non_null(r->err);
    assert_int_equal(pipe2(out_pipe, O_CLOEXEC), 0);
    assert_int_equal(pipe2(err_pipe, O_CLOEXEC), 0);
    r->started_ms = now_ms();
    r->pid = fork();
    assert_true(r->pid >= 0);
    if (r->pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, STDIN_FILENO);
        dup2(out_pipe[1], STDOUT_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
        reset_signals();
        execv(argv[0], (char *const *)argv);
        dprintf(STDERR_FILENO, "cannot exec %s: %s\n", argv[0], strerror(errno));
        _exit(126);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    r->out_fd = out_pipe[0];
    r->err_fd = err_pipe[0];
}

/* Appends one read from *fd to the buffer; closes *fd at EOF. */
static void drain_once(int *fd, char **buf, size_t *len)
{
    char chunk[65536];
    ssize_t n = read(*fd, chunk, sizeof chunk);

    if (n < 0 && errno == EINTR)
        return;
    if (n <= 0) {
        close(*fd);
        *fd = -1;
        return;
    }
    char *grown = realloc(*buf, *len + (size_t)n + 1);
    assert_non_null(grown);
    memcpy(grown + *len, chunk, (size_t)n);
    *len += (size_t)n;
    grown[*len] = '\0';
    *buf = grown;
}

/* Reads whatever arrives within the time left.  False once timed out. */
static bool run_pump(struct run *r)
{
    struct pollfd p[2] = {{.fd = r->out_fd, .events = POLLIN}, {.fd = r->err_fd, .events = POLLIN}};
    int64_t left = r->started_ms + RUN_TIMEOUT_MS - now_ms();

    if (left <= 0)
        return false;
    if (poll(p, 2, (int)left) < 0 && errno != EINTR)
        fail_msg("poll: %s", strerror(errno));
    if (p[0].revents != 0)
        drain_once(&r->out_fd, &r->out, &r->out_len);
    if (p[1].revents != 0)
        drain_once(&r->err_fd, &r->err, &r->err_len);
    return true;
}

static int count_of(const char *haystack, const char *needle)
{
    int count = 0;
    size_t len = strlen(needle);

    for (const char *p = strstr(haystack, needle); p != NULL; p = strstr(p + len, needle))
        count++;
    return count;
}

static void run_kill(struct run *r)
{
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
}

/* Waits until stdout holds `count` copies of `needle`. */
static void run_wait_for(struct run *r, const char *needle, int count)
{
    while (count_of(r->out, needle) < count) {
        if ((r->out_fd < 0 && r->err_fd < 0) || !run_pump(r)) {
            run_kill(r);
            fail_msg("wanted %d x '%s' on stdout; got:\n%s\nstderr:\n%s", count, needle, r->out,
                     r->err);
        }
    }
}

/* Reads both pipes to EOF and reaps the launcher, within the time limit. */
static void run_finish(struct run *r)
{
    while (r->out_fd >= 0 || r->err_fd >= 0) {
        if (!run_pump(r)) {
            run_kill(r);
            fail_msg("tide-run still running after %d ms; stdout:\n%s\nstderr:\n%s", RUN_TIMEOUT_MS,
                     r->out, r->err);
        }
    }
    for (;;) {
        pid_t pid = waitpid(r->pid, &r->status, WNOHANG);
        assert_true(pid >= 0);
        if (pid == r->pid)
            break;
        if (now_ms() - r->started_ms > RUN_TIMEOUT_MS) {
            run_kill(r);
            fail_msg("tide-run closed its output but did not exit");
        }
        usleep(10000);
    }
    r->elapsed_ms = now_ms() - r->started_ms;
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

static void run_to_end(struct run *r, const char *const *args)
{
    run_start(r, args);
    run_finish(r);
}

static int exit_code(const struct run *r)
{
    if (!WIFEXITED(r->status))
        fail_msg("tide-run died by signal %d; stderr:\n%s", WTERMSIG(r->status), r->err);
    return WEXITSTATUS(r->status);
}

/* The launcher's own lines on stderr (the ranks' lines start with '['). */
static int launcher_lines(const struct run *r)
{
    return count_of(r->err, "tide-run: ");
}

static void assert_contains(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) == NULL)
        fail_msg("expected '%s' in:\n%s", needle, haystack);
}

static bool is_lower_hex(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    return s[len] == '\0';
}

static bool is_number(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* ------------------------------------------------------------ environment */

static const char env_script[] =
    "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
    "${#TIDE_JOB_TOKEN} $TIDE_JOB_TOKEN $OMP_NUM_THREADS $OPENBLAS_NUM_THREADS\"";

/* What one rank printed with env_script. */
struct env_line {
    int prefix, rank, world, local_rank, local_world, token_len, omp, openblas;
    char addr[64], port[16], token[TOKEN_HEX + 2];
};

static void parse_env_line(const char *line, struct env_line *e)
{
    int fields = sscanf(line, "[%d] %d %d %d %d %63s %15s %d %65s %d %d", &e->prefix, &e->rank,
                        &e->world, &e->local_rank, &e->local_world, e->addr, e->port, &e->token_len,
                        e->token, &e->omp, &e->openblas);
    if (fields != 11)
        fail_msg("unexpected line: '%s'", line);
}

static void rank_environment_is_set(void **state)
{
    (void)state;
    struct run r;
    struct env_line lines[3];
    bool seen[3] = {false};

    run_to_end(&r, (const char *const[]){"-n", "3", "--", "/bin/sh", "-c", env_script, NULL});
    assert_int_equal(exit_code(&r), 0);
    char *save = NULL;
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        struct env_line e;
        parse_env_line(line, &e);
        assert_in_range(e.prefix, 0, 2);
        assert_false(seen[e.prefix]);
        seen[e.prefix] = true;
        lines[e.prefix] = e;
    }
    for (int i = 0; i < 3; i++) {
        const struct env_line *e = &lines[i];
        assert_true(seen[i]);
        assert_int_equal(e->rank, i);
        assert_int_equal(e->local_rank, i);
        assert_int_equal(e->world, 3);
        assert_int_equal(e->local_world, 3);
        assert_string_equal(e->addr, "127.0.0.1");
        assert_true(is_number(e->port));
        assert_in_range(atoi(e->port), 1, 65535);
        assert_int_equal(e->token_len, TOKEN_HEX);
        assert_true(is_lower_hex(e->token, TOKEN_HEX));
        assert_string_equal(e->token, lines[0].token);
        assert_string_equal(e->port, lines[0].port);
        assert_int_equal(e->omp, 1);
        assert_int_equal(e->openblas, 1);
    }
    run_free(&r);
}

static void explicit_port_and_addr_are_passed(void **state)
{
    (void)state;
    struct run r;

    run_to_end(&r, (const char *const[]){"--port", "12345", "--addr", "127.0.0.2", "-n", "2", "--",
                                         "/bin/sh", "-c", "echo $MASTER_ADDR:$MASTER_PORT", NULL});
    assert_int_equal(exit_code(&r), 0);
    assert_contains(r.out, "[0] 127.0.0.2:12345\n");
    assert_contains(r.out, "[1] 127.0.0.2:12345\n");
    run_free(&r);
}

static void preset_thread_counts_are_kept(void **state)
{
    (void)state;
    struct run r;

    setenv("OMP_NUM_THREADS", "4", 1);
    run_to_end(&r, (const char *const[]){"-n", "1", "--", "/bin/sh", "-c",
                                         "echo $OMP_NUM_THREADS $OPENBLAS_NUM_THREADS", NULL});
    unsetenv("OMP_NUM_THREADS");
    assert_int_equal(exit_code(&r), 0);
    assert_string_equal(r.out, "[0] 4 1\n");
    run_free(&r);
}

static void each_launch_gets_a_new_token(void **state)
{
    (void)state;
    const char *const args[] = {"-n", "1", "--", "/bin/sh", "-c", "echo $TIDE_JOB_TOKEN", NULL};
    struct run first, second;

    run_to_end(&first, args);
    run_to_end(&second, args);
    assert_int_equal(exit_code(&first), 0);
    assert_int_equal(exit_code(&second), 0);
    assert_int_equal(strlen(first.out), strlen("[0] \n") + TOKEN_HEX);
    assert_string_not_equal(first.out, second.out);
    run_free(&first);
    run_free(&second);
}

/* ----------------------------------------------------------------- output */

/* The manual page made from --help (tools/meson.build, help2man) is
 * beside the binary and says what --help says. */
static void manual_page_is_made(void **state)
{
    (void)state;
    char path[PATH_MAX], text[16384];
    snprintf(path, sizeof path, "%s.1", launcher_path());
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("no manual page at %s (is help2man installed?)", path);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_contains(text, ".SH NAME\ntide-run \\- start the ranks of a tide job, here or on "
                          "several hosts");
    assert_contains(text, "\\fB\\-\\-nnodes\\fR");
    assert_contains(text, "\\fB\\-\\-keep\\-going\\fR");
}

/* ------------------------------------------------------ mpirun's habits */

static const char test_token[] =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static void mpirun_spellings_are_accepted(void **state)
{
    (void)state;
    struct run r;

    setenv("TIDE_LAUNCHER_KEPT", "here", 1);
    run_to_end(&r, (const char *const[]){"-np", "2", "-x", "TIDE_LAUNCHER_SET=1", "-x",
                                         "TIDE_LAUNCHER_KEPT", "--tag-output", "--map-by", "slot",
                                         "--", "/bin/sh", "-c",
                                         "echo $TIDE_LAUNCHER_SET $TIDE_LAUNCHER_KEPT", NULL});
    unsetenv("TIDE_LAUNCHER_KEPT");
    assert_int_equal(exit_code(&r), 0);
    assert_contains(r.out, "[0] 1 here\n");
    assert_contains(r.out, "[1] 1 here\n");
    run_free(&r);
}

/* Node 1 of 3 with 2 ranks a node: ranks 2 and 3 of 6, the job's token. */
static void node_share_of_a_bigger_job(void **state)
{
    (void)state;
    struct run r;

    setenv("TIDE_JOB_TOKEN", test_token, 1);
    run_to_end(&r, (const char *const[]){"--nnodes", "3", "--node-rank", "1", "--port", "23456",
                                         "-n", "2", "--", "/bin/sh", "-c", env_script, NULL});
    unsetenv("TIDE_JOB_TOKEN");
    assert_int_equal(exit_code(&r), 0);
    int seen = 0;
    char *save = NULL;
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        struct env_line e;
        parse_env_line(line, &e);
        assert_in_range(e.prefix, 2, 3);
        assert_int_equal(e.rank, e.prefix);
        assert_int_equal(e.local_rank, e.prefix - 2);
        assert_int_equal(e.world, 6);
        assert_int_equal(e.local_world, 2);
        assert_string_equal(e.port, "23456");
        assert_string_equal(e.token, test_token);
        seen++;
    }
    assert_int_equal(seen, 2);
    run_free(&r);
}

/* Two tide-runs, as on two hosts, make one job of four ranks whose
 * collectives are checked. */
static void two_launchers_make_one_job(void **state)
{
    (void)state;
    char perf[PATH_MAX], port[16];
    const char *run_path = launcher_path();
    const char *slash = strrchr(run_path, '/');
    snprintf(perf, sizeof perf, "%.*stide-perf", slash ? (int)(slash - run_path + 1) : 0,
             run_path);
    snprintf(port, sizeof port, "%d", 20000 + (int)(getpid() % 20000));
    setenv("TIDE_JOB_TOKEN", test_token, 1);
    struct run node[2];
    for (int k = 0; k < 2; k++) {
        const char *rank = k ? "1" : "0";
        run_start(&node[k], (const char *const[]){"--nnodes", "2", "--node-rank", rank, "--port",
                                                  port, "--bind-to", "none", "-n", "2", "--",
                                                  perf, "-b", "8", "-e", "4K", "-f", "8", "-n",
                                                  "3", "-w", "1", "-c", "1", NULL});
    }
    unsetenv("TIDE_JOB_TOKEN");
    for (int k = 0; k < 2; k++)
        run_finish(&node[k]);
    for (int k = 0; k < 2; k++) {
        if (exit_code(&node[k]) != 0)
            fail_msg("node %d exited %d: %s%s", k, exit_code(&node[k]), node[k].out, node[k].err);
    }
    assert_contains(node[0].out, "[0] # Out of bounds values : 0 OK");
    assert_contains(node[0].out, "4 ranks");
    run_free(&node[0]);
    run_free(&node[1]);
}

/* ------------------------------------------------ several hosts (-H) */

/* tests/fake_agent.sh: an "ssh" that runs the command on this machine. */
static const char *fake_agent(void)
{
    const char *path = getenv("TIDE_FAKE_AGENT");
    if (path == NULL || path[0] == '\0')
        fail_msg("TIDE_FAKE_AGENT is not set; it must name tests/fake_agent.sh");
    return path;
}

/* mpirun's habit: the program may follow the options without "--". */
static void program_may_follow_without_dashes(void **state)
{
    (void)state;
    struct run r;
    run_to_end(&r, (const char *const[]){"-np", "2", "/bin/sh", "-c", "echo $RANK", NULL});
    assert_int_equal(exit_code(&r), 0);
    assert_contains(r.out, "[0] 0\n");
    assert_contains(r.out, "[1] 1\n");
    run_free(&r);
}

/* -H localhost:1,hostB:2 (hostB reached through the agent, on this
 * machine): rank 0 here, ranks 1 and 2 "there", one job: one token, one
 * port, each host's local ranks; the token never on a command line. */
static void hosts_make_one_job_through_an_agent(void **state)
{
    (void)state;
    char log[] = "/tmp/tide-agent-log-XXXXXX";
    int fd = mkstemp(log);
    assert_true(fd >= 0);
    close(fd);
    setenv("TIDE_FAKE_AGENT_LOG", log, 1);
    struct run r;
    run_to_end(&r, (const char *const[]){"-H", "localhost:1,hostB:2", "--addr", "127.0.0.1",
                                         "--agent", fake_agent(), "/bin/sh", "-c", env_script,
                                         NULL});
    unsetenv("TIDE_FAKE_AGENT_LOG");
    if (exit_code(&r) != 0)
        fail_msg("exit %d; stderr:\n%s", exit_code(&r), r.err);
    struct env_line lines[3];
    bool seen[3] = {false};
    char *save = NULL;
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        struct env_line e;
        parse_env_line(line, &e);
        assert_in_range(e.prefix, 0, 2);
        assert_false(seen[e.prefix]);
        seen[e.prefix] = true;
        lines[e.prefix] = e;
    }
    for (int i = 0; i < 3; i++) {
        assert_true(seen[i]);
        assert_int_equal(lines[i].rank, i);
        assert_int_equal(lines[i].world, 3);
        assert_int_equal(lines[i].local_rank, i == 0 ? 0 : i - 1);
        assert_int_equal(lines[i].local_world, i == 0 ? 1 : 2);
        assert_string_equal(lines[i].token, lines[0].token);
        assert_string_equal(lines[i].port, lines[0].port);
        assert_string_equal(lines[i].addr, "127.0.0.1");
    }
    char said[8192] = "";
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    said[fread(said, 1, sizeof said - 1, f)] = '\0';
    fclose(f);
    unlink(log);
    assert_contains(said, "hostB\n");
    assert_contains(said, "--token-stdin\n");
    assert_contains(said, "--first-rank\n1\n");
    if (strstr(said, lines[0].token))
        fail_msg("the job's token was on the agent's command line:\n%s", said);
    run_free(&r);
}

/* A hostfile in its three spellings, with comments and blank lines;
 * a bad line is named by its number. */
static void hostfile_is_read(void **state)
{
    (void)state;
    char path[] = "/tmp/tide-hosts-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    dprintf(fd, "# the job's hosts\nlocalhost slots=1\n\n  hostB:2   # two\nhostC\n");
    close(fd);
    struct run r;
    run_to_end(&r, (const char *const[]){"--hostfile", path, "--addr", "127.0.0.1", "--agent",
                                         fake_agent(), "/bin/sh", "-c",
                                         "echo $RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE",
                                         NULL});
    if (exit_code(&r) != 0)
        fail_msg("exit %d; stderr:\n%s", exit_code(&r), r.err);
    assert_contains(r.out, "[0] 0/4 0/1\n");
    assert_contains(r.out, "[1] 1/4 0/2\n");
    assert_contains(r.out, "[2] 2/4 1/2\n");
    assert_contains(r.out, "[3] 3/4 0/1\n");
    run_free(&r);
    fd = open(path, O_WRONLY | O_APPEND);
    dprintf(fd, "hostD slots=many\n");
    close(fd);
    run_to_end(&r, (const char *const[]){"--hostfile", path, "true", NULL});
    unlink(path);
    assert_int_equal(exit_code(&r), 2);
    assert_contains(r.err, ", line 6: 'slots=many' is not slots=N");
    run_free(&r);
}

/* A rank failing on another host ends the job with its status; the
 * ranks here are stopped. */
static void a_failing_host_stops_the_job(void **state)
{
    (void)state;
    struct run r;
    run_to_end(&r, (const char *const[]){"-H", "localhost:1,hostB:1", "--addr", "127.0.0.1",
                                         "--agent", fake_agent(), "--grace", "1", "/bin/sh",
                                         "-c", "if [ $RANK = 1 ]; then exit 3; fi; sleep 20",
                                         NULL});
    assert_int_equal(exit_code(&r), 3);
    assert_contains(r.err, "host hostB's tide-run exited with status 3");
    assert_true(r.elapsed_ms < 15000);
    run_free(&r);
}

/* An agent named ssh gets one remote shell command: every word quoted,
 * so spaces and quotes in the program's arguments arrive as given.  The
 * stand-in "ssh" runs its words through sh -c, as sshd's shell would. */
static void an_ssh_agent_gets_quoted_words(void **state)
{
    (void)state;
    char dir[] = "/tmp/tide-ssh-XXXXXX", ssh[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(ssh, sizeof ssh, "%s/ssh", dir);
    FILE *f = fopen(ssh, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\nshift\nexec /bin/sh -c \"$*\"\n", f);
    fclose(f);
    chmod(ssh, 0755);
    struct run r;
    run_to_end(&r, (const char *const[]){"-H", "hostB:2", "--addr", "127.0.0.1", "--agent", ssh,
                                         "/bin/sh", "-c", "echo \"$RANK: it's  'here'\"", NULL});
    unlink(ssh);
    rmdir(dir);
    if (exit_code(&r) != 0)
        fail_msg("exit %d; stderr:\n%s", exit_code(&r), r.err);
    assert_contains(r.out, "[0] 0: it's  'here'\n");
    assert_contains(r.out, "[1] 1: it's  'here'\n");
    run_free(&r);
}

/* The tide-run started through an agent watches its stdin: when the one
 * that started it is gone, it stops its ranks rather than leave them. */
static void ranks_stop_when_their_launcher_is_gone(void **state)
{
    (void)state;
    struct run r;
    run_start(&r, (const char *const[]){"-H", "hostB:1", "--addr", "127.0.0.1", "--agent",
                                        fake_agent(), "--grace", "1", "/bin/sh", "-c",
                                        "echo pid $$; exec sleep 30", NULL});
    run_wait_for(&r, "pid ", 1);
    int pid = atoi(strstr(r.out, "pid ") + 4);
    assert_true(pid > 1);
    run_kill(&r); /* SIGKILL: no chance to stop anyone itself */
    int64_t until = now_ms() + 10000;
    while (kill(pid, 0) == 0 && now_ms() < until)
        usleep(20000);
    if (kill(pid, 0) == 0) {
        kill(pid, SIGKILL);
        fail_msg("rank %d still ran 10 s after its launchers were gone", pid);
    }
    run_free(&r);
}

static void all_ranks_succeed_exits_zero(void **state)
{
    (void)state;
    struct run r;

    run_to_end(&r, (const char *const[]){"-n", "4", "--", "/bin/sh", "-c", "exit 0", NULL});
    assert_int_equal(exit_code(&r), 0);
    assert_int_equal(launcher_lines(&r), 0);
    assert_string_equal(r.out, "");
    run_free(&r);
}

static void partial_last_line_gets_prefix_and_newline(void **state)
{
    (void)state;
    struct run r;

    run_to_end(&r, (const char *const[]){"-n", "2", "--", "/bin/sh", "-c",
                                         "echo whole; printf half-$RANK", NULL});
    assert_int_equal(exit_code(&r), 0);
    assert_contains(r.out, "[0] half-0\n");
    assert_contains(r.out, "[1] half-1\n");
    assert_int_equal(count_of(r.out, "] whole\n"), 2);
    run_free(&r);
}

static void stderr_lines_go_to_stderr(void **state)
{
    (void)state;
    struct run r;

    run_to_end(&r, (const char *const[]){"-n", "2", "--", "/bin/sh", "-c",
                                         "echo out-$RANK; echo err-$RANK >&2", NULL});
    assert_int_equal(exit_code(&r), 0);
    assert_contains(r.out, "[1] out-1\n");
    assert_contains(r.err, "[1] err-1\n");
    assert_null(strstr(r.out, "err-"));
    assert_null(strstr(r.err, "out-"));
    run_free(&r);
}

/* Checks "[r] r:k:xxx..." lines: whole, and in order k = 0, 1, ... per rank. */
static void check_interleaved_lines(char *out, int ranks, int lines, size_t width)
{
    int next[8] = {0};
    char *save = NULL;

    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int prefix, rank, k, used = 0;
        if (sscanf(line, "[%d] %d:%d:%n", &prefix, &rank, &k, &used) != 3 || used == 0)
            fail_msg("mangled line start: '%.60s'", line);
        assert_int_equal(prefix, rank);
        assert_in_range(rank, 0, ranks - 1);
        assert_int_equal(k, next[rank]);
        assert_int_equal(strlen(line + used), width);
        assert_int_equal(strspn(line + used, "x"), width);
        next[rank]++;
    }
    for (int i = 0; i < ranks; i++)
        assert_int_equal(next[i], lines);
}

static void lines_of_ranks_never_mix(void **state)
{
    (void)state;
    struct run r;
    /* Lines far longer than PIPE_BUF so that ranks' writes get split. */
    const char *script = "x=$(head -c 3000 /dev/zero | tr '\\0' x); i=0; "
                         "while [ $i -lt 300 ]; do echo \"$RANK:$i:$x\"; i=$((i+1)); done";

    run_to_end(&r, (const char *const[]){"-n", "3", "--", "/bin/sh", "-c", script, NULL});
    assert_int_equal(exit_code(&r), 0);
    check_interleaved_lines(r.out, 3, 300, 3000);
    run_free(&r);
}

static void huge_line_is_split_but_kept(void **state)
{
    (void)state;
    struct run r;
    const size_t width = 200000;
    const char *script = "head -c 200000 /dev/zero | tr '\\0' y; echo";

    run_to_end(&r, (const char *const[]){"-n", "1", "--", "/bin/sh", "-c", script, NULL});
    assert_int_equal(exit_code(&r), 0);
    assert_int_equal((size_t)count_of(r.out, "y"), width);
    char *save = NULL;
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        assert_int_equal(strncmp(line, "[0] ", 4), 0);
        assert_int_equal(strspn(line + 4, "y"), strlen(line + 4));
    }
    run_free(&r);
}

static void no_prefix_passes_output_through(void **state)
{
    (void)state;
    struct run r;

    run_to_end(&r, (const char *const[]){"--no-prefix", "-n", "2", "--", "/bin/sh", "-c",
                                         "echo hello-$RANK; echo oops-$RANK >&2", NULL});
    assert_int_equal(exit_code(&r), 0);
    assert_contains(r.out, "hello-0\n");
    assert_contains(r.out, "hello-1\n");
    assert_contains(r.err, "oops-1\n");
    assert_null(strchr(r.out, '['));
    assert_null(strchr(r.err, '['));
    run_free(&r);
}

static void help_is_printed(void **state)
{
    (void)state;
    struct run r;

    run_to_end(&r, (const char *const[]){"--help", NULL});
    assert_int_equal(exit_code(&r), 0);
    assert_contains(r.out, "Usage: tide-run -n N");
    assert_contains(r.out, "--grace");
    run_free(&r);
}

/* ---------------------------------------------------------------- failure */

/* A failing rank: its exit code and message, and others stopped fast. */
struct failure_case {
    const char *name;
    const char *const args[MAX_ARGS];
    int status;          /* launcher's exit status */
    const char *message; /* its one stderr line, without "tide-run: " */
};

static const struct failure_case failure_cases[] = {
    {"exit 3 while others sleep",
     {"-n", "3", "--", "/bin/sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; sleep 30", NULL},
     3,
     "rank 1 exited with status 3\n"},
    {"SIGKILL while others sleep",
     {"-n", "2", "--", "/bin/sh", "-c", "if [ $RANK = 1 ]; then kill -9 $$; fi; sleep 30", NULL},
     128 + SIGKILL,
     NULL /* built from strsignal below */},
    /* Rank 0 shrugs off SIGTERM and is SIGKILLed; the cause is still rank 1. */
    {"others ignore SIGTERM",
     {"--grace", "1", "-n", "2", "--", "/bin/sh", "-c",
      "trap '' TERM; if [ $RANK = 1 ]; then sleep 0.3; exit 1; fi; "
      "while :; do sleep 0.1; done",
      NULL},
     1,
     "rank 1 exited with status 1\n"},
    {"rank 0 fails at once",
     {"-n", "4", "--", "/bin/sh", "-c", "if [ $RANK = 0 ]; then exit 42; fi; sleep 30", NULL},
     42,
     "rank 0 exited with status 42\n"},
};

static void first_failure_stops_the_job(void **state)
{
    (void)state;
    char killed[128];

    snprintf(killed, sizeof killed, "rank 1 was killed by signal %d (%s)\n", SIGKILL,
             strsignal(SIGKILL));
    for (size_t i = 0; i < sizeof failure_cases / sizeof failure_cases[0]; i++) {
        const struct failure_case *c = &failure_cases[i];
        const char *message = c->message ? c->message : killed;
        struct run r;

        print_message("case: %s\n", c->name);
        run_to_end(&r, c->args);
        assert_int_equal(exit_code(&r), c->status);
        assert_int_equal(launcher_lines(&r), 1);
        assert_contains(r.err, message);
        /* The survivors sleep 30 s; stopping them must not take that long. */
        assert_true(r.elapsed_ms < 10000);
        run_free(&r);
    }
}

/* --keep-going: a rank killed by a signal is reported and the others go
 * on to the end (they must finish their 0.3 s, not be stopped); the job
 * exits 0 because the rest did.  A rank that exits non-zero still fails
 * the job, and so does one where every rank was killed. */
static void keep_going_forgives_killed_ranks(void **state)
{
    (void)state;
    static const char *const killed[] = {
        "--keep-going", "-n", "3", "--", "/bin/sh", "-c",
        "if [ $RANK = 1 ]; then kill -9 $$; fi; sleep 0.3; echo done", NULL};
    static const char *const exits[] = {
        "--keep-going", "-n", "3", "--", "/bin/sh", "-c",
        "if [ $RANK = 1 ]; then exit 3; fi; sleep 30", NULL};
    static const char *const all_killed[] = {
        "--keep-going", "-n", "2", "--", "/bin/sh", "-c", "kill -9 $$", NULL};
    struct run r;

    run_to_end(&r, killed);
    assert_int_equal(exit_code(&r), 0);
    assert_contains(r.err, "rank 1 was killed by signal 9");
    assert_contains(r.err, "the others go on (--keep-going)");
    assert_int_equal(count_of(r.out, "done"), 2);
    run_free(&r);

    run_to_end(&r, exits);
    assert_int_equal(exit_code(&r), 3);
    assert_contains(r.err, "rank 1 exited with status 3");
    assert_true(r.elapsed_ms < 10000);
    run_free(&r);

    run_to_end(&r, all_killed);
    assert_int_equal(exit_code(&r), 128 + SIGKILL);
    run_free(&r);
}

/* ---------------------------------------------------------------- binding */

/* The CPUs rank `rank` reported ("[R] <list> <yield>") into *set, and the
 * TIDE_YIELD_WHEN_IDLE it saw ("-" if unset). */
static void rank_cpus(const char *out, int rank, cpu_set_t *set, char yield[8])
{
    char prefix[16], list[256];
    snprintf(prefix, sizeof prefix, "[%d] ", rank);
    const char *line = strstr(out, prefix);
    if (!line || sscanf(line + strlen(prefix), "%255s %7s", list, yield) != 2)
        fail_msg("no CPU list from rank %d in:\n%s", rank, out);
    if (tide__cpulist_parse(list, set) != 0 || CPU_COUNT(set) == 0)
        fail_msg("rank %d: bad CPU list '%s'", rank, list);
}

static const char cpus_script[] =
    "echo \"$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status) "
    "${TIDE_YIELD_WHEN_IDLE:--}\"";

/* --bind-to core puts each rank on CPUs of its own, inside ours, and
 * tells it not to yield its core; --bind-to none leaves our whole mask.
 * A machine with one core cannot bind two ranks: then it must say so. */
static void ranks_are_bound_to_cores_of_their_own(void **state)
{
    (void)state;
    cpu_set_t ours, a, b;
    char ya[8], yb[8];
    struct run r;
    assert_int_equal(sched_getaffinity(0, sizeof ours, &ours), 0);

    run_to_end(&r, (const char *const[]){"--bind-to", "core", "-n", "2", "--", "/bin/sh", "-c",
                                         cpus_script, NULL});
    if (exit_code(&r) == 2) {
        assert_contains(r.err, "2 ranks but 1 cores");
    } else {
        assert_int_equal(exit_code(&r), 0);
        rank_cpus(r.out, 0, &a, ya);
        rank_cpus(r.out, 1, &b, yb);
        cpu_set_t both, inside;
        CPU_AND(&both, &a, &b);
        assert_int_equal(CPU_COUNT(&both), 0);
        CPU_OR(&both, &a, &b);
        CPU_AND(&inside, &both, &ours);
        assert_true(CPU_EQUAL(&inside, &both));
        assert_string_equal(ya, "0");
        assert_string_equal(yb, "0");
    }
    run_free(&r);

    run_to_end(&r, (const char *const[]){"--bind-to", "none", "-n", "2", "--", "/bin/sh", "-c",
                                         cpus_script, NULL});
    assert_int_equal(exit_code(&r), 0);
    rank_cpus(r.out, 1, &a, ya);
    assert_true(CPU_EQUAL(&a, &ours));
    assert_string_equal(ya, "-");
    run_free(&r);
}

static void exec_failure_in_child_exits_127(void **state)
{
    (void)state;
    char path[] = "/tmp/tide-launcher-test-XXXXXX";
    const char *script = "#!/nonexistent/interpreter\n";
    int fd = mkstemp(path);
    struct run r;

    /* Passes the launcher's PATH check, then execve fails on the #! line. */
    assert_true(fd >= 0);
    assert_int_equal(write(fd, script, strlen(script)), (ssize_t)strlen(script));
    assert_int_equal(fchmod(fd, 0755), 0);
    close(fd);
    run_to_end(&r, (const char *const[]){"-n", "2", "--", path, NULL});
    unlink(path);
    assert_int_equal(exit_code(&r), 127);
    assert_contains(r.err, "tide-run: cannot run /tmp/tide-launcher-test-");
    assert_int_equal(count_of(r.err, "\ntide-run: rank "), 1);
    run_free(&r);
}

/* ------------------------------------------------------------------ usage */

struct usage_case {
    const char *name;
    const char *const args[MAX_ARGS];
    const char *message; /* part of the one stderr line */
};

static const struct usage_case usage_cases[] = {
    {"no -n", {"--", "true", NULL}, "missing -n"},
    {"-n 0", {"-n", "0", "--", "true", NULL}, "-n must be from 1 to 1024"},
    {"-n 1025", {"-n", "1025", "--", "true", NULL}, "-n must be from 1 to 1024"},
    {"-n not a number", {"-n", "two", "--", "true", NULL}, "-n must be from 1 to 1024"},
    {"-n without value", {"-n", NULL}, "needs a value"},
    {"no program", {"-n", "2", "--", NULL}, "missing program"},
    {"--bind-to nonsense", {"--bind-to", "socket", "-n", "1", "--", "true", NULL},
     "--bind-to must be core, none or auto"},
    {"--bind-to core, too many ranks", {"--bind-to", "core", "-n", "1024", "--", "true", NULL},
     "1024 ranks but"},
    {"unknown option", {"-n", "2", "--bogus", "--", "true", NULL}, "unknown option '--bogus'"},
    {"bad port", {"--port", "70000", "-n", "1", "--", "true", NULL}, "--port"},
    {"bad grace", {"--grace", "-1", "-n", "1", "--", "true", NULL}, "--grace"},
    {"program not in PATH",
     {"-n", "2", "--", "tide-no-such-program", NULL},
     "cannot run tide-no-such-program"},
    {"program path missing",
     {"-n", "2", "--", "/nonexistent/prog", NULL},
     "cannot run /nonexistent/prog"},
    {"-H with a bad slot count", {"-H", "a:0,b", "--", "true", NULL}, "bad slot count in 'a:0'"},
    {"hostfile missing", {"--hostfile", "/nonexistent/hosts", "true", NULL},
     "cannot read hostfile /nonexistent/hosts"},
    {"more ranks than slots", {"-np", "5", "-H", "a:2,b:2", "true", NULL},
     "5 ranks do not fit the 4 slots"},
    {"rank 0 here, others elsewhere, no --addr", {"-H", "localhost,elsewhere", "true", NULL},
     "give --addr"},
    {"-H with --nnodes", {"-H", "a,b", "--nnodes", "2", "true", NULL}, "no --nnodes here"},
    {"--token-stdin with nothing on stdin",
     {"--token-stdin", "--nnodes", "2", "--port", "23456", "-n", "1", "true", NULL},
     "no token of 64 hex digits came on stdin"},
    {"--nnodes without --port", {"--nnodes", "2", "-n", "2", "--", "true", NULL},
     "needs --port"},
    {"--nnodes without a token",
     {"--nnodes", "2", "--port", "23456", "-n", "2", "--", "true", NULL},
     "needs TIDE_JOB_TOKEN"},
    {"--node-rank past --nnodes",
     {"--nnodes", "2", "--node-rank", "2", "-n", "2", "--", "true", NULL},
     "is not below --nnodes"},
    {"-x of an unset variable", {"-x", "TIDE_NO_SUCH_VARIABLE", "-n", "1", "--", "true", NULL},
     "is not set here"},
    {"-x without a name", {"-x", "=1", "-n", "1", "--", "true", NULL}, "-x needs NAME"},
    {"--map-by socket", {"--map-by", "socket", "-n", "1", "--", "true", NULL},
     "tide-run maps by core"},
};

static void bad_usage_exits_2(void **state)
{
    (void)state;

    for (size_t i = 0; i < sizeof usage_cases / sizeof usage_cases[0]; i++) {
        const struct usage_case *c = &usage_cases[i];
        struct run r;

        print_message("case: %s\n", c->name);
        run_to_end(&r, c->args);
        assert_int_equal(exit_code(&r), 2);
        assert_contains(r.err, c->message);
        assert_int_equal(strncmp(r.err, "tide-run: ", 10), 0);
        assert_int_equal(count_of(r.err, "\n"), 1);
        assert_string_equal(r.out, "");
        run_free(&r);
    }
}

/* ---------------------------------------------------------------- signals */

struct signal_case {
    int signo;
    const char *trap_name; /* as sh's trap spells it */
};

static const struct signal_case signal_cases[] = {
    {SIGTERM, "TERM"},
    {SIGINT, "INT"},
};

/* The sleep is short because sh runs a trap only between commands. */
static void signals_are_forwarded(void **state)
{
    (void)state;

    for (size_t i = 0; i < sizeof signal_cases / sizeof signal_cases[0]; i++) {
        const struct signal_case *c = &signal_cases[i];
        char script[200], got[32];
        struct run r;

        snprintf(got, sizeof got, "got-%s\n", c->trap_name);
        snprintf(script, sizeof script,
                 "trap 'echo got-%s; exit 0' %s; echo ready; while :; do sleep 0.1; done",
                 c->trap_name, c->trap_name);
        print_message("case: %s\n", c->trap_name);
        run_start(&r, (const char *const[]){"-n", "2", "--", "/bin/sh", "-c", script, NULL});
        run_wait_for(&r, "ready\n", 2);
        assert_int_equal(kill(r.pid, c->signo), 0);
        run_finish(&r);
        assert_int_equal(count_of(r.out, got), 2);
        assert_contains(r.out, "[0] got-");
        assert_contains(r.out, "[1] got-");
        /* Both ranks exited 0 after their trap, so the job succeeded. */
        assert_int_equal(exit_code(&r), 0);
        run_free(&r);
    }
}

static void ranks_ignoring_sigterm_are_killed_after_grace(void **state)
{
    (void)state;
    struct run r;

    run_start(&r,
              (const char *const[]){"--grace", "1", "-n", "2", "--", "/bin/sh", "-c",
                                    "trap '' TERM; echo ready; while :; do sleep 0.1; done", NULL});
    run_wait_for(&r, "ready\n", 2);
    int64_t signalled_ms = now_ms();
    assert_int_equal(kill(r.pid, SIGTERM), 0);
    run_finish(&r);
    assert_int_equal(exit_code(&r), 128 + SIGKILL);
    assert_contains(r.err, "was killed by signal 9");
    assert_int_equal(launcher_lines(&r), 1);
    /* Not before the grace period, and not much after it. */
    int64_t waited_ms = now_ms() - signalled_ms;
    assert_true(waited_ms >= 900);
    assert_true(waited_ms < 10000);
    run_free(&r);
}

static int arm_alarm(void **state)
{
    (void)state;
    alarm(ALARM_SECONDS);
    return 0;
}

static int disarm_alarm(void **state)
{
    (void)state;
    alarm(0);
    return 0;
}

#define LAUNCHER_TEST(fn) cmocka_unit_test_setup_teardown(fn, arm_alarm, disarm_alarm)

int main(void)
{
    /* The thread-count defaults are under test: start from a clean slate. */
    unsetenv("OMP_NUM_THREADS");
    unsetenv("OPENBLAS_NUM_THREADS");

    const struct CMUnitTest tests[] = {
        LAUNCHER_TEST(rank_environment_is_set),
        LAUNCHER_TEST(explicit_port_and_addr_are_passed),
        LAUNCHER_TEST(preset_thread_counts_are_kept),
        LAUNCHER_TEST(each_launch_gets_a_new_token),
        LAUNCHER_TEST(manual_page_is_made),
        LAUNCHER_TEST(mpirun_spellings_are_accepted),
        LAUNCHER_TEST(node_share_of_a_bigger_job),
        LAUNCHER_TEST(two_launchers_make_one_job),
        LAUNCHER_TEST(program_may_follow_without_dashes),
        LAUNCHER_TEST(hosts_make_one_job_through_an_agent),
        LAUNCHER_TEST(hostfile_is_read),
        LAUNCHER_TEST(a_failing_host_stops_the_job),
        LAUNCHER_TEST(an_ssh_agent_gets_quoted_words),
        LAUNCHER_TEST(ranks_stop_when_their_launcher_is_gone),
        LAUNCHER_TEST(all_ranks_succeed_exits_zero),
        LAUNCHER_TEST(partial_last_line_gets_prefix_and_newline),
        LAUNCHER_TEST(stderr_lines_go_to_stderr),
        LAUNCHER_TEST(lines_of_ranks_never_mix),
        LAUNCHER_TEST(huge_line_is_split_but_kept),
        LAUNCHER_TEST(no_prefix_passes_output_through),
        LAUNCHER_TEST(help_is_printed),
        LAUNCHER_TEST(first_failure_stops_the_job),
        LAUNCHER_TEST(keep_going_forgives_killed_ranks),
        LAUNCHER_TEST(ranks_are_bound_to_cores_of_their_own),
        LAUNCHER_TEST(exec_failure_in_child_exits_127),
        LAUNCHER_TEST(bad_usage_exits_2),
        LAUNCHER_TEST(signals_are_forwarded),
        LAUNCHER_TEST(ranks_ignoring_sigterm_are_killed_after_grace),
    };
    return cmocka_run_group_tests_name("launcher", tests, NULL, NULL);
}
