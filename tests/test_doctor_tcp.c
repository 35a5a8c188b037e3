/* test_doctor_tcp.c - the flight recorder and tide-doctor on real rank
 * processes (4 ranks, TIDE_DUMP_DIR set, a random victim rank):
 *   - the victim stops (SIGSTOP) before collective #41: the survivors
 *     dump at their deadline; then the victim is sent SIGUSR1 and resumed,
 *     dumps from its signal thread, and the doctor says it never entered
 *     allreduce #41 and that the others wait for it;
 *   - the same, never resumed: the doctor says it left no dump and who
 *     waits for it;
 *   - the victim is killed: the doctor says it left no dump and was lost;
 *   - the victim skips allreduce #41 and calls a barrier: the doctor names
 *     the mismatch at #41. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include <cmocka.h>

#include "tests/harness.h"

#define RANKS 4
#define ROUNDS 40

enum fault { STOPPED_RESUMED, STOPPED, KILLED, SKIPPED, STOPPED_IN_FLIGHT };

struct shared {
    volatile int victim;
    volatile enum fault fault;
    int answered; /* ranks past their failed collective */
    char dir[128];
};
static struct shared *shm;

/* Until the n other ranks have answered (at most 15 s). */
static void wait_answered(int n)
{
    for (int i = 0; i < 1500 && __atomic_load_n(&shm->answered, __ATOMIC_SEQ_CST) < n; i++)
        harness_sleep_ms(10);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A watchdog process: once the survivors have their errors, resume the
 * stopped victim with SIGUSR1 pending (if asked) and give it time to
 * dump, then kill it. */
static void stop(bool resume)
{
    pid_t victim = getpid();
    if (fork() == 0) {
        wait_answered(RANKS - 1);
        if (resume) {
            char path[200];
            snprintf(path, sizeof path, "%s/tide-dump-%d.json", shm->dir, shm->victim);
            kill(victim, SIGUSR1);
            kill(victim, SIGCONT);
            for (int i = 0; i < 500 && !exists(path); i++)
                harness_sleep_ms(10);
        }
        kill(victim, SIGKILL);
        _exit(0);
    }
    raise(SIGSTOP);
    for (;;) /* resumed: its signal thread dumps; the watchdog ends it */
        harness_sleep_ms(100);
}

#define IN_FLIGHT 8

/* The scenario: batches of IN_FLIGHT nonblocking allreduces,
 * alternating between the world and a split half (even and odd ranks);
 * the victim stops before batch ROUNDS / 4.  The survivors' batch fails
 * on the world and on the victim's half; the other half's completes. */
static void in_flight_body(tide_comm *comm)
{
    int r = tide_comm_rank(comm), v = shm->victim;
    tide_comm *half;
    EXPECT_OK(tide_comm_split(comm, r % 2, r, &half));
    int32_t in[IN_FLIGHT][8], out[IN_FLIGHT][8];
    tide_req *req[IN_FLIGHT];
    for (int batch = 0;; batch++) {
        if (batch == ROUNDS / 4 && r == v)
            stop(true);
        for (int k = 0; k < IN_FLIGHT; k++) {
            in[k][0] = r;
            EXPECT_OK(tide_iallreduce(k % 2 ? half : comm, in[k], out[k], 8, TIDE_INT32,
                                      TIDE_SUM, &req[k]));
        }
        int failed = 0;
        for (int k = 0; k < IN_FLIGHT; k++) {
            failed += tide_wait(req[k], 20000) != 0;
            tide_req_free(req[k]);
        }
        if (batch < ROUNDS / 4)
            EXPECT(failed == 0, "batch %d: %d failed", batch, failed);
        else
            break;
    }
    __atomic_add_fetch(&shm->answered, 1, __ATOMIC_SEQ_CST);
    wait_answered(RANKS - 1);
    tide_comm_free(half);
    EXPECT_OK(tide_comm_abort(comm));
}

static void body(tide_comm *comm, void *arg)
{
    if (shm->fault == STOPPED_IN_FLIGHT) {
        in_flight_body(comm);
        return;
    }
    int r = tide_comm_rank(comm), v = shm->victim;
    int32_t in[8] = {r}, out[8];
    for (int i = 0; i < ROUNDS; i++)
        EXPECT_OK(tide_allreduce(comm, in, out, 8, TIDE_INT32, TIDE_SUM));
    if (r == v && (shm->fault == STOPPED || shm->fault == STOPPED_RESUMED))
        stop(shm->fault == STOPPED_RESUMED);
    if (r == v && shm->fault == KILLED)
        raise(SIGKILL);
    int rc;
    if (r == v) /* SKIPPED: the victim goes straight to the next collective */
        rc = tide_barrier(comm);
    else
        rc = tide_allreduce(comm, in, out, 8, TIDE_INT32, TIDE_SUM);
    EXPECT(rc != 0, "collective #41 succeeded on rank %d", r);
    __atomic_add_fetch(&shm->answered, 1, __ATOMIC_SEQ_CST);
    wait_answered(shm->fault == SKIPPED ? RANKS : RANKS - 1);
    EXPECT_OK(tide_comm_abort(comm)); /* the victim may be stopped: no waiting on it */
}

/* tide-doctor's report on the dumps in dir, which it then removes. */
static char *doctor_report(const char *dir)
{
    const char *doctor = getenv("TIDE_DOCTOR");
    assert_non_null(doctor);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "%s %s; rm -rf %s", doctor, dir, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    static char report[8192];
    size_t n = fread(report, 1, sizeof report - 1, p);
    report[n] = '\0';
    pclose(p);
    return report;
}

/* Run the job with fault, then the doctor; return its report. */
static char *run_case(enum fault fault, int *victim)
{
    memset(shm, 0, sizeof *shm);
    shm->fault = fault;
    shm->victim = *victim = rand() % RANKS;
    snprintf(shm->dir, sizeof shm->dir, "/tmp/tide-doctor-XXXXXX");
    assert_non_null(mkdtemp(shm->dir));
    setenv("TIDE_DUMP_DIR", shm->dir, 1);
    struct harness_opts o;
    harness_defaults(&o);
    o.timeout_s = 2;
    o.run_limit_s = 40;
    int failed = harness_run(RANKS, &o, body, NULL);
    unsetenv("TIDE_DUMP_DIR");
    assert_int_equal(failed, fault == SKIPPED ? 0 : 1);

    char *report = doctor_report(shm->dir);
    printf("victim %d:\n%s", *victim, report);
    return report;
}

static void expect_in(const char *report, const char *want)
{
    if (!report || !strstr(report, want))
        fail_msg("the doctor did not say \"%s\"; it said:\n%s", want,
                 report ? report : "(nothing)");
}

static void doctor_names_the_stopped_rank(void **state)
{
    int v;
    char want[160];
    const char *report = run_case(STOPPED_RESUMED, &v);
    snprintf(want, sizeof want,
             "rank %d never entered allreduce #41 on world (its last was #40, done, posted ", v);
    expect_in(report, want);
    expect_in(report, "wait for it");
    expect_in(report, "dumps from 4 of 4 ranks");
}

static void doctor_names_the_silent_stopped_rank(void **state)
{
    int v;
    char want[160];
    const char *report = run_case(STOPPED, &v);
    snprintf(want, sizeof want, "no dump from rank %d:", v);
    expect_in(report, want);
    snprintf(want, sizeof want, " for rank %d in allreduce #41 on world; rank %d left no dump", v,
             v);
    expect_in(report, want);
}

/* The split is world #1; 10 batches of 8 take world #2..41 and half
 * #1..40; the doctor names the victim on both. */
static void doctor_names_the_stopped_rank_in_flight(void **state)
{
    int v;
    char want[160];
    const char *report = run_case(STOPPED_IN_FLIGHT, &v);
    expect_in(report, "dumps from 4 of 4 ranks");
    snprintf(want, sizeof want, "rank %d never entered allreduce #42 on world (its last was #41, ",
             v);
    expect_in(report, want);
    snprintf(want, sizeof want, "rank %d never entered allreduce #41 on comm ", v);
    expect_in(report, want);
}

static void doctor_names_the_killed_rank(void **state)
{
    int v;
    char want[160];
    const char *report = run_case(KILLED, &v);
    snprintf(want, sizeof want, "no dump from rank %d:", v);
    expect_in(report, want);
    snprintf(want, sizeof want, "rank %d was lost (ranks ", v);
    expect_in(report, want);
}

static void doctor_names_the_skipped_collective(void **state)
{
    int v;
    char want[160];
    const char *report = run_case(SKIPPED, &v);
    snprintf(want, sizeof want, "mismatch at #41 on world: rank %d called barrier; ", v);
    expect_in(report, want);
    expect_in(report, "called allreduce of 8 int32 (sum)\n");
}

/* Reads fd to EOF into buf (NUL-terminated). */
/* A dump signal that comes before the first collective (a launcher's
 * --dump-on-timeout during a long setup) dumps instead of killing: the
 * handler is armed at tide_init. */
static void early_body(tide_comm *comm, void *arg)
{
    (void)arg;
    raise(SIGUSR1);
    char path[256];
    snprintf(path, sizeof path, "%s/tide-dump-%d.json", shm->dir, tide_comm_rank(comm));
    for (int i = 0; i < 500 && !exists(path); i++)
        harness_sleep_ms(10);
    EXPECT(exists(path), "no dump at %s after the signal", path);
    EXPECT_OK(tide_barrier(comm));
}

static void signal_before_the_first_collective_dumps(void **state)
{
    memset(shm, 0, sizeof *shm);
    snprintf(shm->dir, sizeof shm->dir, "/tmp/tide-doctor-XXXXXX");
    assert_non_null(mkdtemp(shm->dir));
    setenv("TIDE_DUMP_DIR", shm->dir, 1);
    int failed = harness_run(2, NULL, early_body, NULL);
    unsetenv("TIDE_DUMP_DIR");
    assert_int_equal(failed, 0);
}

static void slurp(int fd, char *buf, size_t len)
{
    size_t n = 0;
    ssize_t k;
    while (n + 1 < len && (k = read(fd, buf + n, len - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
}

/* tide-run --dump-on-timeout on a job whose rank 1 computes for 20 s
 * instead of entering allreduce #11: every rank dumps on the signal (the
 * sleeping one from its signal thread), and the doctor names it. */
static void launcher_dump_on_timeout(void **state)
{
    const char *run = getenv("TIDE_RUN"), *prog = getenv("TIDE_HANG_RANK");
    assert_non_null(run);
    assert_non_null(prog);
    char dir[] = "/tmp/tide-doctor-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int out[2];
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], STDERR_FILENO);
        setenv("TIDE_DUMP_DIR", dir, 1);
        setenv("TIDE_TIMEOUT", "4", 1);
        signal(SIGUSR1, SIG_DFL);
        execl(run, run, "-n", "3", "--dump-on-timeout", "1.5", "--", prog, "1", "10", "20",
              (char *)NULL);
        _exit(126);
    }
    close(out[1]);
    static char said[16384];
    slurp(out[0], said, sizeof said);
    close(out[0]);
    int status;
    waitpid(pid, &status, 0);
    if (!strstr(said, "asked every rank for a flight-recorder dump"))
        fail_msg("tide-run did not ask for dumps; it said:\n%s", said);

    const char *report = doctor_report(dir);
    printf("%s", report);
    expect_in(report, "dumps from 3 of 3 ranks");
    expect_in(report, "rank 1 never entered allreduce #11 on world (its last was #10, done, posted ");
    expect_in(report, "ranks 0,2 wait for it");
}

int main(void)
{
    shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED)
        return 1;
    srand((unsigned)time(NULL));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(doctor_names_the_stopped_rank),
        cmocka_unit_test(doctor_names_the_silent_stopped_rank),
        cmocka_unit_test(doctor_names_the_stopped_rank_in_flight),
        cmocka_unit_test(doctor_names_the_killed_rank),
        cmocka_unit_test(doctor_names_the_skipped_collective),
        cmocka_unit_test(launcher_dump_on_timeout),
        cmocka_unit_test(signal_before_the_first_collective_dumps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
