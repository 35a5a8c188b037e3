/* test_placement.c - where ranks and their progress threads run: tide-run's
 * plan (tools/launcher/bind.c) on made-up machines of 1 to 64 cores, with and
 * without SMT siblings, for 1 to 64 ranks; libtide's own decision
 * (engine/placement.c) on masks of 1, 2, 4, 16 and 64 CPUs, bound or
 * shared (an unbound launch spread by local rank), inside a container's
 * cpuset or not; the two together (the
 * launcher's plan read back by libtide); and one real tide_init that
 * moves its progress thread where TIDE_PROGRESS_CPUS says. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/placement.h"
#include "tide.h"
#include "tools/launcher/bind.h"

/* ------------------------------------------------------------- machines */

/* A machine of ncores cores; with smt, core k is CPUs k and k + ncores
 * (Linux numbers siblings in the upper half), else CPU k. */
static void machine(struct bind_plan *plan, int ncores, bool smt)
{
    *plan = (struct bind_plan){0};
    plan->ncores = ncores;
    plan->cores = calloc((size_t)ncores, sizeof *plan->cores);
    assert_non_null(plan->cores);
    for (int k = 0; k < ncores; k++) {
        CPU_SET(k, &plan->cores[k]);
        if (smt)
            CPU_SET(k + ncores, &plan->cores[k]);
    }
}

static void set_minus(cpu_set_t *out, const cpu_set_t *a, const cpu_set_t *b)
{
    CPU_ZERO(out);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, a) && !CPU_ISSET(c, b))
            CPU_SET(c, out);
}

static bool inside(const cpu_set_t *a, const cpu_set_t *b)
{
    cpu_set_t both;
    CPU_AND(&both, a, b);
    return CPU_EQUAL(&both, a);
}

/* --------------------------------------------------------- tide-run plan */

/* What must hold of any bound plan: each rank's compute CPUs (its mask
 * less its progress CPUs) are a non-empty set no other rank computes on
 * or progresses on; progress CPUs lie inside the mask; and where the
 * machine has room (more cores than ranks, or SMT), every rank has them. */
static void check_plan(const struct bind_plan *plan, int n, bool smt)
{
    cpu_set_t machine_cpus, compute[64];
    CPU_ZERO(&machine_cpus);
    for (int k = 0; k < plan->ncores; k++)
        CPU_OR(&machine_cpus, &machine_cpus, &plan->cores[k]);
    for (int r = 0; r < n; r++) {
        assert_true(inside(&plan->mask[r], &machine_cpus));
        assert_true(inside(&plan->progress[r], &plan->mask[r]));
        set_minus(&compute[r], &plan->mask[r], &plan->progress[r]);
        assert_true(CPU_COUNT(&compute[r]) > 0);
        bool room = plan->ncores > n || smt;
        if (room != (CPU_COUNT(&plan->progress[r]) > 0))
            fail_msg("%d ranks, %d cores%s: rank %d has %d progress CPUs", n, plan->ncores,
                     smt ? " (SMT)" : "", r, CPU_COUNT(&plan->progress[r]));
    }
    for (int r = 0; r < n; r++) {
        for (int q = 0; q < n; q++) {
            cpu_set_t both;
            CPU_AND(&both, &compute[r], &plan->mask[q]);
            if (q != r && CPU_COUNT(&both))
                fail_msg("%d ranks, %d cores: rank %d's compute CPUs are in rank %d's mask", n,
                         plan->ncores, r, q);
        }
    }
}

/* How many ranks share rank r's progress CPUs (itself included). */
static int sharing(const struct bind_plan *plan, int n, int r)
{
    int k = 0;
    for (int q = 0; q < n; q++)
        k += CPU_EQUAL(&plan->progress[q], &plan->progress[r]);
    return k;
}

static void plan_holds_on_every_machine(void **state)
{
    (void)state;
    static const int cores[] = {1, 2, 4, 8, 16, 24, 32, 64};
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++) {
        for (int smt = 0; smt <= (cores[i] <= 32); smt++) {
            for (int n = 1; n <= 64; n++) {
                struct bind_plan plan;
                char err[160] = "";
                machine(&plan, cores[i], smt);
                int rc = bind_plan_assign(&plan, BIND_AUTO, n, err, sizeof err);
                assert_int_equal(rc, 0);
                assert_true(plan.bind == (n <= cores[i]));
                if (plan.bind)
                    check_plan(&plan, n, smt);
                for (int r = 0; plan.bind && cores[i] + smt > n && r < n; r++) {
                    int spare = cores[i] - n, most = spare ? (n + spare - 1) / spare : 1;
                    if (cores[i] >= 2 * n || smt)
                        most = 1; /* a progress core or sibling of its own */
                    assert_true(sharing(&plan, n, r) <= most);
                }
                bind_plan_free(&plan);
            }
        }
    }
}

/* The layouts bind.h promises, on a 16-core machine. */
static void plan_layouts_on_sixteen_cores(void **state)
{
    (void)state;
    struct bind_plan plan;
    char err[160] = "";

    machine(&plan, 16, false); /* 8 ranks: two cores each, neighbours */
    assert_int_equal(bind_plan_assign(&plan, BIND_AUTO, 8, err, sizeof err), 0);
    assert_true(CPU_ISSET(6, &plan.mask[3]) && CPU_ISSET(7, &plan.progress[3]));
    assert_int_equal(CPU_COUNT(&plan.mask[3]), 2);
    assert_non_null(strstr(plan.summary, "one for its progress thread"));
    bind_plan_free(&plan);

    machine(&plan, 16, true); /* 16 ranks, SMT: the sibling */
    assert_int_equal(bind_plan_assign(&plan, BIND_AUTO, 16, err, sizeof err), 0);
    assert_true(CPU_ISSET(5, &plan.mask[5]) && CPU_ISSET(21, &plan.mask[5]));
    assert_int_equal(CPU_COUNT(&plan.progress[5]), 1);
    assert_true(CPU_ISSET(21, &plan.progress[5]));
    bind_plan_free(&plan);

    machine(&plan, 16, false); /* 12 ranks: runs of 3 share a spare core */
    assert_int_equal(bind_plan_assign(&plan, BIND_AUTO, 12, err, sizeof err), 0);
    assert_true(CPU_ISSET(3, &plan.progress[0]) && CPU_ISSET(3, &plan.progress[2]));
    assert_true(CPU_ISSET(4, &plan.mask[3]) && CPU_ISSET(7, &plan.progress[3]));
    bind_plan_free(&plan);

    machine(&plan, 16, false); /* 16 ranks: no room, and it says so */
    assert_int_equal(bind_plan_assign(&plan, BIND_AUTO, 16, err, sizeof err), 0);
    assert_int_equal(CPU_COUNT(&plan.progress[0]), 0);
    assert_non_null(strstr(plan.summary, "no room for progress"));
    bind_plan_free(&plan);

    machine(&plan, 16, false); /* 17 ranks: auto leaves them unbound ... */
    assert_int_equal(bind_plan_assign(&plan, BIND_AUTO, 17, err, sizeof err), 0);
    assert_false(plan.bind);
    assert_non_null(strstr(plan.summary, "17 ranks on 16 cores: not bound"));
    bind_plan_free(&plan);

    machine(&plan, 16, false); /* ... and --bind-to core refuses */
    assert_int_equal(bind_plan_assign(&plan, BIND_CORE, 17, err, sizeof err), -1);
    assert_non_null(strstr(err, "17 ranks but 16 cores"));
    bind_plan_free(&plan);
}

/* ------------------------------------------------------ libtide's choice */

static struct tide__placement_in mask_of(int lo, int count, int host, int local,
                                         const char *setting)
{
    struct tide__placement_in in = {.setting = setting, .host_cpus = host, .local_size = local,
                                    .local_rank = -1};
    CPU_ZERO(&in.mask);
    for (int c = lo; c < lo + count; c++)
        CPU_SET(c, &in.mask);
    return in;
}

struct auto_case {
    const char *name;
    int lo, count, host, local; /* the mask: CPUs lo..lo+count-1 of host */
    int local_rank;             /* -1: unknown */
    int progress;               /* the CPU chosen, or -1 for none */
    const char *says;
};

static const struct auto_case auto_cases[] = {
    {"one CPU: no room", 3, 1, 16, 8, 3, -1, "shares CPU 3 with the caller"},
    {"two CPUs of 16, bound by a launcher", 6, 2, 16, 8, 3, 7, "caller on 6"},
    {"four CPUs of 16, 4 local ranks", 4, 4, 16, 4, 1, 7, "caller on 4-6"},
    {"four CPUs of 16, local size unknown", 4, 4, 16, -1, -1, 7, "caller on 4-6"},
    {"16 CPUs shared by 8 ranks, local rank unknown", 0, 16, 16, 8, -1, -1, "shared by 8 ranks"},
    {"16 CPUs, local size unknown", 0, 16, 16, -1, -1, -1, "is unknown"},
    {"whole 16-CPU host, torchrun's 4 ranks, rank 1", 0, 16, 16, 4, 1, 14, "caller on 0-11"},
    {"whole 16-CPU host, 8 ranks, rank 7", 0, 16, 16, 8, 7, 8, "caller on 0-7"},
    {"whole 16-CPU host, 9 ranks: no room", 0, 16, 16, 9, 2, -1, "shared by 9 ranks"},
    {"a socket of 8 of 16 CPUs shared by 4 of 8 ranks", 8, 8, 16, 8, 5, -1, "shared by 8 ranks"},
    {"whole 64-CPU host, one rank on it", 0, 64, 64, 1, 0, 63, "caller on 0-62"},
    {"64 CPUs of a 128-CPU host, 4 ranks", 0, 64, 128, 4, 0, -1, "shared by 4 ranks"},
    {"64 CPUs of a 128-CPU host, 2 ranks", 64, 64, 128, 2, 1, 127, "caller on 64-126"},
    {"container cpuset of 4, unbound, 2 ranks", 0, 4, 4, 2, 0, 3, "caller on 0-1"},
    {"container cpuset of 4, bound two each", 2, 2, 4, 2, 1, 3, "caller on 2"},
};

static void auto_placement_by_mask(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof auto_cases / sizeof auto_cases[0]; i++) {
        const struct auto_case *t = &auto_cases[i];
        struct tide__placement_in in = mask_of(t->lo, t->count, t->host, t->local, "");
        in.local_rank = t->local_rank;
        struct tide__placement p;
        assert_int_equal(tide__placement_decide(&in, &p), 0);
        if (t->progress < 0 && CPU_COUNT(&p.progress))
            fail_msg("%s: placed where it should not be: %s", t->name, p.why);
        if (t->progress >= 0 && !(CPU_COUNT(&p.progress) == 1 && CPU_ISSET(t->progress,
                                                                            &p.progress)))
            fail_msg("%s: expected CPU %d: %s", t->name, t->progress, p.why);
        assert_true(p.own == (t->progress >= 0));
        if (!strstr(p.why, t->says))
            fail_msg("%s: '%s' does not say '%s'", t->name, p.why, t->says);
    }
}

/* Every local rank of an unbound launch, spread: the progress threads on
 * CPUs of their own, none of them where any caller may run. */
static void unbound_ranks_spread_their_progress_threads(void **state)
{
    (void)state;
    static const int hosts[][2] = {{16, 8}, {16, 2}, {64, 16}, {32, 16}, {4, 2}};
    for (size_t h = 0; h < sizeof hosts / sizeof hosts[0]; h++) {
        int cpus = hosts[h][0], local = hosts[h][1];
        cpu_set_t progress_all, callers_all;
        CPU_ZERO(&progress_all);
        CPU_ZERO(&callers_all);
        for (int r = 0; r < local; r++) {
            struct tide__placement_in in = mask_of(0, cpus, cpus, local, "auto");
            in.local_rank = r;
            struct tide__placement p;
            assert_int_equal(tide__placement_decide(&in, &p), 0);
            assert_true(p.own);
            assert_int_equal(CPU_COUNT(&p.progress), 1);
            cpu_set_t both;
            CPU_AND(&both, &progress_all, &p.progress);
            assert_int_equal(CPU_COUNT(&both), 0); /* a CPU each */
            CPU_OR(&progress_all, &progress_all, &p.progress);
            CPU_OR(&callers_all, &callers_all, &p.caller);
        }
        cpu_set_t both;
        CPU_AND(&both, &progress_all, &callers_all);
        assert_int_equal(CPU_COUNT(&both), 0);
        assert_int_equal(CPU_COUNT(&callers_all), cpus - local);
    }
}

static void explicit_and_bad_settings(void **state)
{
    (void)state;
    struct tide__placement p;
    struct tide__placement_in in = mask_of(4, 2, 16, 8, "5");
    assert_int_equal(tide__placement_decide(&in, &p), 0);
    assert_true(p.own && CPU_ISSET(5, &p.progress) && CPU_COUNT(&p.caller) == 1 &&
                CPU_ISSET(4, &p.caller));

    in = mask_of(4, 1, 16, 8, "4"); /* the caller's only CPU: shared, and said */
    assert_int_equal(tide__placement_decide(&in, &p), 0);
    assert_false(p.own);
    assert_int_equal(CPU_COUNT(&p.caller), 0);
    assert_non_null(strstr(p.why, "shared with the caller"));

    in = mask_of(0, 16, 16, 8, "none");
    assert_int_equal(tide__placement_decide(&in, &p), 0);
    assert_int_equal(CPU_COUNT(&p.progress), 0);

    static const char *const bad[] = {"x", "3-", "-3", "3,", "5-4", "1,,2", "99999", "4 5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        in = mask_of(0, 16, 16, 8, bad[i]);
        if (tide__placement_decide(&in, &p) != TIDE_EINVAL)
            fail_msg("TIDE_PROGRESS_CPUS=\"%s\" accepted", bad[i]);
        assert_non_null(strstr(p.why, "expected auto, none or a CPU list"));
        assert_false(tide__placement_setting_ok(bad[i]));
    }
}

static void cpu_lists_round_trip(void **state)
{
    (void)state;
    static const char *const lists[] = {"0", "5", "0-3", "0-3,8,10-11", "1,3,5", "1023"};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        cpu_set_t set;
        char back[64];
        assert_int_equal(tide__cpulist_parse(lists[i], &set), 0);
        tide__cpulist_format(&set, back, sizeof back);
        assert_string_equal(back, lists[i]);
    }
    cpu_set_t set;
    assert_int_equal(tide__cpulist_parse("2,3,4\n", &set), 0); /* a sysfs line */
    char back[8];
    tide__cpulist_format(&set, back, sizeof back);
    assert_string_equal(back, "2-4");
}

/* What tide-run plans, libtide reads back: the progress thread on the
 * CPUs set aside, the caller on the rest, on its own. */
static void launcher_plan_read_back(void **state)
{
    (void)state;
    static const struct {
        int cores;
        bool smt;
        int n;
    } runs[] = {{16, false, 8}, {16, true, 16}, {16, false, 12}, {64, false, 2}, {4, true, 3}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct bind_plan plan;
        char err[160];
        machine(&plan, runs[i].cores, runs[i].smt);
        assert_int_equal(bind_plan_assign(&plan, BIND_AUTO, runs[i].n, err, sizeof err), 0);
        for (int r = 0; r < runs[i].n; r++) {
            char list[256];
            tide__cpulist_format(&plan.progress[r], list, sizeof list);
            struct tide__placement_in in = {.setting = list, .mask = plan.mask[r],
                                            .host_cpus = runs[i].cores * (runs[i].smt ? 2 : 1),
                                            .local_size = runs[i].n};
            struct tide__placement p;
            assert_int_equal(tide__placement_decide(&in, &p), 0);
            cpu_set_t compute;
            set_minus(&compute, &plan.mask[r], &plan.progress[r]);
            assert_true(p.own);
            assert_true(CPU_EQUAL(&p.caller, &compute));
            assert_true(CPU_EQUAL(&p.progress, &plan.progress[r]));
        }
        bind_plan_free(&plan);
    }
}

/* --------------------------------------------------------- a real init */

/* How many of this process's threads may run on exactly `want`. */
static int threads_on(const cpu_set_t *want)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f)) {
            cpu_set_t set;
            if (!strncmp(line, "Cpus_allowed_list:", 18) &&
                tide__cpulist_parse(line + 18 + strspn(line + 18, " \t"), &set) == 0)
                n += CPU_EQUAL(&set, want);
        }
        if (f)
            fclose(f);
    }
    closedir(d);
    return n;
}

/* A one-rank job told TIDE_PROGRESS_CPUS=<our last CPU>: its progress
 * thread runs there and the caller keeps the others; on a machine with
 * one CPU both share it; tide_finalize gives the caller its CPUs back. */
static void init_moves_the_progress_thread(void **state)
{
    (void)state;
    cpu_set_t before, after;
    assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &before))
            last = c;
    tide_config cfg;
    tide_config_default(&cfg);
    cfg.log_level = 0;
    snprintf(cfg.progress_cpus, sizeof cfg.progress_cpus, "%d", last);
    tide_comm *comm;
    assert_int_equal(tide_init_with(&comm, &cfg), 0);

    cpu_set_t progress;
    CPU_ZERO(&progress);
    CPU_SET(last, &progress);
    assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
    if (CPU_COUNT(&before) >= 2) {
        cpu_set_t rest;
        set_minus(&rest, &before, &progress);
        assert_true(CPU_EQUAL(&after, &rest));
        assert_int_equal(threads_on(&progress), 1);
    } else {
        assert_true(CPU_EQUAL(&after, &before));
    }
    int rc = tide_allreduce(comm, TIDE_IN_PLACE, &last, 1, TIDE_INT32, TIDE_SUM);
    assert_int_equal(rc, 0);
    assert_int_equal(tide_finalize(comm), 0);
    /* tide_finalize gives the caller its CPUs back. */
    assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
    assert_true(CPU_EQUAL(&after, &before));

    /* A bad setting is refused before anything starts. */
    snprintf(cfg.progress_cpus, sizeof cfg.progress_cpus, "%s", "1-0");
    assert_int_equal(tide_init_with(&comm, &cfg), TIDE_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_holds_on_every_machine),
        cmocka_unit_test(plan_layouts_on_sixteen_cores),
        cmocka_unit_test(auto_placement_by_mask),
        cmocka_unit_test(unbound_ranks_spread_their_progress_threads),
        cmocka_unit_test(explicit_and_bad_settings),
        cmocka_unit_test(cpu_lists_round_trip),
        cmocka_unit_test(launcher_plan_read_back),
        cmocka_unit_test(init_moves_the_progress_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
