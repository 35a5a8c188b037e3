/* placement.c - see placement.h: the decision (pure), the CPU lists it
 * reads and writes, and the probe of this process's CPUs. */
#include "engine/placement.h"
#include "tide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int tide__cpulist_parse(const char *text, cpu_set_t *set)
{
    CPU_ZERO(set);
    if (!text || !*text)
        return -1;
    for (;;) {
        char *end;
        if (*text < '0' || *text > '9')
            return -1;
        long lo = strtol(text, &end, 10), hi = lo;
        if (*end == '-') {
            if (end[1] < '0' || end[1] > '9')
                return -1;
            hi = strtol(end + 1, &end, 10);
        }
        if (lo < 0 || hi < lo || hi >= CPU_SETSIZE)
            return -1;
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, set);
        if (*end == '\0' || *end == '\n')
            return 0;
        if (*end != ',')
            return -1;
        text = end + 1;
    }
}

void tide__cpulist_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int hi = c;
        while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set))
            hi++;
        int w = hi > c ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", c, hi)
                       : snprintf(buf + used, len - used, "%s%d", used ? "," : "", c);
        used += w > 0 ? (size_t)w : 0;
        c = hi;
    }
}

/* The (k+1)-th highest CPU of set, or -1. */
static int highest_cpu(const cpu_set_t *set, int k)
{
    for (int c = CPU_SETSIZE - 1; c >= 0; c--)
        if (CPU_ISSET(c, set) && k-- == 0)
            return c;
    return -1;
}

/* The progress thread on `progress`; the caller keeps the rest of its
 * mask, or all of it if nothing is left. */
static void place(const struct tide__placement_in *in, struct tide__placement *out,
                  const cpu_set_t *progress, const char *because)
{
    char p[64], c[64], m[64];
    out->progress = *progress;
    CPU_ZERO(&out->caller);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &in->mask) && !CPU_ISSET(cpu, progress))
            CPU_SET(cpu, &out->caller);
    tide__cpulist_format(progress, p, sizeof p);
    tide__cpulist_format(&in->mask, m, sizeof m);
    out->own = CPU_COUNT(&out->caller) > 0;
    if (!out->own) {
        snprintf(out->why, sizeof out->why, "progress thread on CPU %s, shared with the caller: "
                 "%s leaves the process's CPUs (%s) nothing else", p, because, m);
        return;
    }
    tide__cpulist_format(&out->caller, c, sizeof c);
    snprintf(out->why, sizeof out->why, "progress thread on CPU %s, the caller on %s (%s)", p, c,
             because);
}

/* auto on the whole host shared by the local ranks (placement.h): our
 * progress thread on the (local_rank+1)-th highest CPU, the caller off
 * the top local_size CPUs, where every local rank's progress thread is. */
static void place_spread(const struct tide__placement_in *in, struct tide__placement *out)
{
    char p[16], c[64];
    CPU_ZERO(&out->progress);
    CPU_SET(highest_cpu(&in->mask, in->local_rank), &out->progress);
    out->caller = in->mask;
    for (int k = 0; k < in->local_size; k++)
        CPU_CLR(highest_cpu(&in->mask, k), &out->caller);
    out->own = true;
    tide__cpulist_format(&out->progress, p, sizeof p);
    tide__cpulist_format(&out->caller, c, sizeof c);
    snprintf(out->why, sizeof out->why, "progress thread on CPU %s, the caller on %s (the %d "
             "local ranks share this host's %d CPUs; each progress thread gets one of the top "
             "%d)", p, c, in->local_size, CPU_COUNT(&in->mask), in->local_size);
}

/* auto: see placement.h. */
static void decide_auto(const struct tide__placement_in *in, struct tide__placement *out)
{
    int mine = CPU_COUNT(&in->mask), host = in->host_cpus, local = in->local_size;
    if (mine < 2) {
        char m[64];
        tide__cpulist_format(&in->mask, m, sizeof m);
        snprintf(out->why, sizeof out->why, "progress thread shares CPU %s with the caller: the "
                 "process may run on that CPU alone, so busy compute stalls communication "
                 "(%d CPUs here)", m, host);
        return;
    }
    bool alone = mine < host ? local < 0 || (long)mine * local <= host : local == 1;
    bool spread = !alone && mine == host && local > 1 && in->local_rank >= 0 &&
                  in->local_rank < local && mine >= 2 * local;
    if (spread) {
        place_spread(in, out);
        return;
    }
    if (!alone) {
        char what[120];
        if (local < 0)
            snprintf(what, sizeof what, "the %d CPUs of this process may be shared with other "
                     "ranks (how many run on this host is unknown)", mine);
        else
            snprintf(what, sizeof what, "the %d CPUs of this process are shared by %d ranks on "
                     "this host", mine, local);
        snprintf(out->why, sizeof out->why, "progress thread left to the scheduler: %s (%d CPUs "
                 "here)", what, host);
        return;
    }
    cpu_set_t last;
    CPU_ZERO(&last);
    CPU_SET(highest_cpu(&in->mask, 0), &last);
    place(in, out, &last, "TIDE_PROGRESS_CPUS=auto");
}

bool tide__placement_setting_ok(const char *setting)
{
    cpu_set_t list;
    return !*setting || !strcasecmp(setting, "auto") || !strcasecmp(setting, "none") ||
           tide__cpulist_parse(setting, &list) == 0;
}

int tide__placement_decide(const struct tide__placement_in *in, struct tide__placement *out)
{
    memset(out, 0, sizeof *out);
    const char *s = in->setting ? in->setting : "";
    if (!*s || !strcasecmp(s, "auto")) {
        decide_auto(in, out);
        return 0;
    }
    if (!strcasecmp(s, "none")) {
        snprintf(out->why, sizeof out->why, "progress thread not placed (TIDE_PROGRESS_CPUS=none)");
        return 0;
    }
    cpu_set_t list;
    if (tide__cpulist_parse(s, &list) != 0) {
        snprintf(out->why, sizeof out->why, "TIDE_PROGRESS_CPUS=\"%s\": expected auto, none or "
                 "a CPU list such as 3 or 2,18 or 4-5", s);
        return TIDE_EINVAL;
    }
    place(in, out, &list, "TIDE_PROGRESS_CPUS");
    return 0;
}

/* CPUs the job may have on this host: the cgroup's cpuset where one is
 * readable (a container's --cpuset-cpus), else the online CPUs. */
static int host_cpus(void)
{
    static const char *const files[] = {"/sys/fs/cgroup/cpuset.cpus.effective",
                                        "/sys/fs/cgroup/cpuset/cpuset.effective_cpus"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char text[4096];
        FILE *f = fopen(files[i], "r");
        if (!f)
            continue;
        cpu_set_t set;
        bool ok = fgets(text, sizeof text, f) && tide__cpulist_parse(text, &set) == 0;
        fclose(f);
        if (ok)
            return CPU_COUNT(&set);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void tide__placement_probe(struct tide__placement_in *in)
{
    if (sched_getaffinity(0, sizeof in->mask, &in->mask) != 0) {
        CPU_ZERO(&in->mask);
        CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &in->mask);
    }
    in->host_cpus = host_cpus();
    /* A mask wider than the host's count (a cgroup file we misread)
     * would make the test for "ours alone" meaningless. */
    if (in->host_cpus < CPU_COUNT(&in->mask))
        in->host_cpus = CPU_COUNT(&in->mask);
}
