/* test_doctor.c - tide-doctor on dumps written by hand, for what real
 * runs rarely show: two communicators with the same id (the halves of a
 * split), a count mismatch far back in the ring, escaped text, a rank
 * whose only trace is another's sends_to, a clean job, and files that are
 * not dumps; and its command line.  The dumps follow engine/recorder_dump.c's layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];
static int odd_rank = -1; /* calls allreduce #3 with a count of 99 instead of 8 */

/* One op line: seq, kind, count, state, and a sends_to list. */
static void put_op(FILE *f, int seq, const char *kind, int count, const char *state,
                   const char *sends, int last)
{
    fprintf(f,
            "{\"seq\":%d,\"kind\":\"%s\",\"count\":%d,\"dtype\":\"float\",\"op\":\"sum\","
            "\"root\":-1,\"bytes\":%d,\"algorithm\":\"ring\",\"state\":\"%s\",\"status\":\"OK\","
            "\"post_ns\":%d000000,\"start_ns\":%d000001,\"end_ns\":0,\"waits_for\":[],"
            "\"sends_to\":[%s]}%s\n",
            seq, kind, count, count * 4, state, 1000 + seq, 1000 + seq, sends, last ? "" : ",");
}

/* Rank `rank` of `size`: world ops 1..last (the last one's state given),
 * and a comm with id 2 of `members`. */
static void write_dump(int rank, int size, int last, const char *state, const char *sends,
                       const char *members, int half_last, const char *error)
{
    char path[128];
    snprintf(path, sizeof path, "%s/tide-dump-%d.json", dir, rank);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"tide_dump\":1,\"rank\":%d,\"size\":%d,\"pid\":1,\"reason\":\"signal\","
            "\"now_ns\":9000000000,\"wall_ns\":1800000000000000000,\"comms\":[\n",
            rank, size);
    fprintf(f, "{\"comm\":1,\"comm_rank\":%d,\"comm_size\":%d,\"members\":[", rank, size);
    for (int r = 0; r < size; r++)
        fprintf(f, "%s%d", r ? "," : "", r);
    fprintf(f, "],\"called\":%d,\"first_error\":\"%s\",\"ops\":[\n", last, error);
    /* Written newest-first past a wrap, as a ring may hold them. */
    for (int s = last; s >= 1; s--)
        put_op(f, s, "allreduce", s == 3 && rank == odd_rank ? 99 : 8, s == last ? state : "done",
               s == last ? sends : "", s == 1);
    fprintf(f, "]},\n{\"comm\":2,\"comm_rank\":0,\"comm_size\":2,\"members\":[%s],\"called\":%d,"
               "\"first_error\":\"\",\"ops\":[\n",
            members, half_last);
    for (int s = 1; s <= half_last; s++)
        put_op(f, s, "allgather", 4, "done", "", s == half_last);
    fprintf(f, "]}]}\n");
    fclose(f);
}

/* Runs tide-doctor with args (redirections allowed): its exit status, and
 * what reached the pipe in out. */
static int run_doctor_with(const char *args, char *out, size_t len)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s", getenv("TIDE_DOCTOR"), args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    printf("%s", out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_doctor(char *out, size_t len)
{
    return run_doctor_with(dir, out, len);
}

static void expect_in(const char *report, const char *want)
{
    if (!strstr(report, want))
        fail_msg("the doctor did not say \"%s\"; it said:\n%s", want, report);
}

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/tide-doctor-unit-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* 4 ranks: rank 1 called allreduce #3 with another count; rank 3 left no
 * dump and rank 0's running #6 sends to it; with rank 3 silent, nobody is
 * "behind" on a communicator. */
static void names_mismatch_and_silent_rank(void **state)
{
    odd_rank = 1;
    write_dump(0, 4, 6, "started", "3", "0,2", 5, "rank 0: \\\"quoted\\\" error");
    write_dump(1, 4, 6, "started", "", "1,3", 2, "");
    write_dump(2, 4, 6, "started", "", "0,2", 5, "");
    char out[8192];
    assert_int_equal(run_doctor(out, sizeof out), 1);
    expect_in(out, "dumps from 3 of 4 ranks");
    expect_in(out, "no dump from rank 3:");
    expect_in(out, "mismatch at #3 on world: rank 1 called allreduce of 99 float (sum); ranks 0,2 "
                   "called allreduce of 8 float (sum)");
    expect_in(out, "rank 0 waits for rank 3 in allreduce #6 on world; rank 3 left no dump");
    expect_in(out, "first error: rank 0: \"quoted\" error");
    if (strstr(out, "never entered"))
        fail_msg("no rank is behind on a communicator whose members all dumped:\n%s", out);
}

/* 2 ranks, rank 1 behind by one on world and on its comm 2. */
static void names_the_rank_behind(void **state)
{
    write_dump(0, 2, 7, "started", "", "0,1", 4, "");
    write_dump(1, 2, 6, "done", "", "0,1", 3, "");
    char out[8192];
    assert_int_equal(run_doctor(out, sizeof out), 1);
    expect_in(out, "rank 1 never entered allreduce #7 on world (its last was #6, done, posted ");
    expect_in(out, "rank 0 waits for it");
    expect_in(out, "rank 1 never entered allgather #4 on comm 2 (ranks 0,1) (its last was #3");
}

/* Both halves of a split are comm 2 here: each is analysed on its own,
 * and the lag is found in the second one. */
static void keeps_the_halves_of_a_split_apart(void **state)
{
    odd_rank = -1;
    write_dump(0, 4, 6, "done", "", "0,2", 5, "");
    write_dump(1, 4, 6, "done", "", "1,3", 3, "");
    write_dump(2, 4, 6, "done", "", "0,2", 5, "");
    write_dump(3, 4, 6, "done", "", "1,3", 2, "");
    char out[8192];
    assert_int_equal(run_doctor(out, sizeof out), 1);
    expect_in(out, "rank 3 never entered allgather #3 on comm 2 (ranks 1,3) (its last was #2");
    if (strstr(out, "ranks 0,2) (its"))
        fail_msg("the halves were mixed up:\n%s", out);
}

static void clean_job_and_bad_files(void **state)
{
    write_dump(0, 2, 5, "done", "", "0,1", 2, "");
    write_dump(1, 2, 5, "done", "", "0,1", 2, "");
    char path[128];
    snprintf(path, sizeof path, "%s/tide-dump-7.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "not a dump\n");
    fclose(f);
    char out[8192];
    assert_int_equal(run_doctor(out, sizeof out), 0);
    expect_in(out, "dumps from 2 of 2 ranks");
    expect_in(out, "nothing looks wrong");
}

/* Dumps no run writes: a member list of 4000 (an array of 1024 on the
 * stack overflowed), a size of ten million (half a gigabyte, and "ranks
 * 1-1024" missing), ESC and BEL inside a message, and a file cut short.
 * The doctor reads what it can, refuses what it cannot, flags the cut,
 * and prints no control byte. */
static void crafted_dumps(void **state)
{
    char path[128];
    snprintf(path, sizeof path, "%s/tide-dump-0.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"tide_dump\":1,\"rank\":0,\"size\":4000,\"pid\":1,\"reason\":\"signal\","
               "\"now_ns\":9,\"wall_ns\":9,\"comms\":[\n{\"comm\":1,\"comm_rank\":0,"
               "\"comm_size\":4000,\"members\":[");
    for (int r = 0; r < 4000; r++)
        fprintf(f, "%s%d", r ? "," : "", r);
    fprintf(f, "],\"called\":1,\"first_error\":\"ring \x1b[2J\x07 bell\",\"ops\":[\n");
    put_op(f, 1, "allreduce", 8, "started", "", 1);
    fprintf(f, "]}]}\n");
    fclose(f);
    snprintf(path, sizeof path, "%s/tide-dump-1.json", dir);
    f = fopen(path, "w");
    fprintf(f, "{\"tide_dump\":1,\"rank\":1,\"size\":10000000,\"comms\":[\n]}\n");
    fclose(f);
    write_dump(2, 4000, 3, "started", "", "0,2", 1, "");
    snprintf(path, sizeof path, "%s/tide-dump-2.json", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size - 5), 0); /* the closing "]}]}\n" */

    char out[16384];
    assert_int_equal(run_doctor(out, sizeof out), 1);
    expect_in(out, "dumps from 2 of 4000 ranks");
    expect_in(out, "no dump from 3998 ranks (1,3-3999)");
    expect_in(out, "rank 2's dump is cut short");
    expect_in(out, "first error: ring ?[2J? bell");
    for (const char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 && *p != '\n')
            fail_msg("a control byte (%d) reached the report", *p);
}

/* A communicator that names ranks outside the job, or claims more ranks
 * than the job has: that dump is refused whole, saying where, and the
 * others are read. */
static void members_outside_the_job(void **state)
{
    write_dump(0, 2, 5, "done", "", "0,1", 2, "");
    write_dump(1, 2, 5, "done", "", "0,5", 2, "");
    char out[8192];
    run_doctor(out, sizeof out);
    expect_in(out, "dumps from 1 of 2 ranks");
    expect_in(out, "no dump from rank 1"); /* (stderr names the file and line) */
}

static void empty_directory(void **state)
{
    char out[8192];
    assert_int_equal(run_doctor(out, sizeof out), 2);
}

/* The command line as every tool has it (tools/common/cli.h): help on stdout
 * with status 0, and a misuse as one line on stderr with status 2. */
static void answers_its_command_line(void **state)
{
    (void)state;
    static const struct {
        const char *name, *args;
        int status;
        const char *said; /* the whole of stderr for status 2, else the start of stdout */
    } cases[] = {
        {"help", "--help 2>/dev/null", 0, "Usage: tide-doctor DIR\n"},
        {"short help", "-h 2>/dev/null", 0, "Usage: tide-doctor DIR\n"},
        {"unknown option", "--dir=/tmp 2>&1 >/dev/null", 2,
         "tide-doctor: unknown option '--dir=/tmp' (see tide-doctor --help)\n"},
        {"value to a flag", "--help=all 2>&1 >/dev/null", 2,
         "tide-doctor: --help takes no value (see tide-doctor --help)\n"},
        {"no directory", "2>&1 >/dev/null", 2,
         "tide-doctor: name the dump directory (see tide-doctor --help)\n"},
        {"two directories", "/tmp /tmp 2>&1 >/dev/null", 2,
         "tide-doctor: one dump directory, please (see tide-doctor --help)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[4096];
        int status = run_doctor_with(cases[i].args, out, sizeof out);
        bool ok = cases[i].status == 2 ? strcmp(out, cases[i].said) == 0
                                       : strncmp(out, cases[i].said, strlen(cases[i].said)) == 0;
        if (status != cases[i].status || !ok)
            fail_msg("%s: status %d, said '%s'; wanted %d, '%s'", cases[i].name, status, out,
                     cases[i].status, cases[i].said);
    }
}

int main(void)
{
    if (!getenv("TIDE_DOCTOR"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(names_mismatch_and_silent_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(names_the_rank_behind, setup, teardown),
        cmocka_unit_test_setup_teardown(keeps_the_halves_of_a_split_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(clean_job_and_bad_files, setup, teardown),
        cmocka_unit_test_setup_teardown(crafted_dumps, setup, teardown),
        cmocka_unit_test_setup_teardown(members_outside_the_job, setup, teardown),
        cmocka_unit_test_setup_teardown(empty_directory, setup, teardown),
        cmocka_unit_test(answers_its_command_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
