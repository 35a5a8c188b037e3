/* config.c - tide_config defaults and the environment conventions users
 * already have (torchrun, Open MPI, Slurm), read in one place. */
#include "tide.h"
#include "engine/log.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void tide_config_default(tide_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->rank = 0;
    cfg->size = 1;
    cfg->local_rank = -1;
    cfg->local_size = -1;
    strcpy(cfg->master_addr, "127.0.0.1");
    cfg->master_port = 29500;
    cfg->timeout_s = 300.0;
    cfg->bootstrap_timeout_s = 0; /* 0: follow timeout_s */
    cfg->progress = TIDE_PROGRESS_THREAD;
    cfg->spin_us = 50;
    cfg->yield_when_idle = -1;
    cfg->reactor = TIDE_REACTOR_AUTO;
    cfg->log_level = TIDE_LOG_WARN;
}

/* Parse a whole decimal integer in [lo, hi]; 0 or TIDE_EINVAL. */
static int parse_int(const char *name, const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        tide__log(TIDE_LOG_ERROR, -1, "%s=\"%s\" is not an integer in [%ld, %ld]", name, s, lo, hi);
        return TIDE_EINVAL;
    }
    *out = (int)v;
    return 0;
}

static int parse_seconds(const char *name, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !(v > 0)) {
        tide__log(TIDE_LOG_ERROR, -1, "%s=\"%s\" is not a positive number of seconds", name, s);
        return TIDE_EINVAL;
    }
    *out = v;
    return 0;
}

static int copy_string(const char *name, const char *s, char *dst, size_t cap)
{
    if (strlen(s) >= cap) {
        tide__log(TIDE_LOG_ERROR, -1, "%s is longer than %zu characters", name, cap - 1);
        return TIDE_EINVAL;
    }
    strcpy(dst, s);
    return 0;
}

/* The launcher conventions, in order of preference.  A convention applies
 * when its rank variable is set. */
struct launcher_vars {
    const char *rank, *size, *local_rank, *local_size;
};

static const struct launcher_vars conventions[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    /* MPICH's and Intel MPI's Hydra (mpiexec) */
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

/* Launchers that say a rank but not the world's size in the environment:
 * a process that found only these would have run alone, silently. */
static const char *const rank_only[] = {"PMIX_RANK", "PALS_RANKID"};

/* Read one optional integer variable into *out. */
static int env_int(const char *name, long lo, long hi, int *out)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    return parse_int(name, s, lo, hi, out);
}

static int read_convention(tide_config *cfg);

static int read_ranks(tide_config *cfg)
{
    int rc = read_convention(cfg);
    if (rc <= 0)
        return rc;
    for (size_t i = 0; i < sizeof rank_only / sizeof rank_only[0]; i++) {
        if (getenv(rank_only[i])) {
            tide__log(TIDE_LOG_ERROR, -1, "%s is set but no world size is: run under a "
                      "launcher tide reads (tide-run, torchrun, mpirun, srun, mpiexec) or set "
                      "RANK and WORLD_SIZE", rank_only[i]);
            return TIDE_EINVAL;
        }
    }
    return 0;
}

/* The first launcher convention whose rank variable is set: 0, or
 * TIDE_EINVAL (said); 1 when none is. */
static int read_convention(tide_config *cfg)
{
    for (size_t i = 0; i < sizeof conventions / sizeof conventions[0]; i++) {
        const struct launcher_vars *v = &conventions[i];
        if (!getenv(v->rank))
            continue;
        int rc = env_int(v->size, 1, INT_MAX, &cfg->size);
        if (!rc)
            rc = env_int(v->rank, 0, INT_MAX, &cfg->rank);
        if (!rc)
            rc = env_int(v->local_rank, 0, INT_MAX, &cfg->local_rank);
        /* Slurm's tasks-per-node can read "4(x2)"; ignore what isn't a number. */
        const char *ls = getenv(v->local_size);
        if (!rc && ls && strspn(ls, "0123456789") == strlen(ls) && *ls)
            rc = env_int(v->local_size, 1, INT_MAX, &cfg->local_size);
        if (rc)
            return rc;
        if (cfg->rank >= cfg->size) {
            tide__log(TIDE_LOG_ERROR, -1, "%s=%d is not below %s=%d", v->rank, cfg->rank,
                      v->size, cfg->size);
            return TIDE_EINVAL;
        }
        return 0;
    }
    return 1;
}

/* A variable whose value is one of a few names (any case). */
struct env_name {
    const char *name;
    int value;
};

/* VAR's value looked up in names[n] into *out (untouched when VAR is
 * unset or empty).  0, or TIDE_EINVAL with what is expected. */
static int env_named(const char *var, const struct env_name *names, size_t n,
                     const char *expected, int *out)
{
    const char *s = getenv(var);
    if (!s || !*s)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcasecmp(s, names[i].name)) {
            *out = names[i].value;
            return 0;
        }
    }
    tide__log(TIDE_LOG_ERROR, -1, "%s=\"%s\": expected %s", var, s, expected);
    return TIDE_EINVAL;
}

static int read_progress(tide_config *cfg)
{
    static const struct env_name names[] = {{"thread", TIDE_PROGRESS_THREAD},
                                            {"inline", TIDE_PROGRESS_INLINE}};
    int mode = cfg->progress;
    int rc = env_named("TIDE_PROGRESS", names, sizeof names / sizeof names[0],
                       "\"thread\" or \"inline\"", &mode);
    cfg->progress = (tide_progress_mode)mode;
    return rc;
}

static int read_yield(tide_config *cfg)
{
    const char *s = getenv("TIDE_YIELD_WHEN_IDLE");
    if (!s || !*s)
        return 0;
    if (!strcasecmp(s, "auto")) {
        cfg->yield_when_idle = -1;
        return 0;
    }
    if (!strcmp(s, "0") || !strcmp(s, "1")) {
        cfg->yield_when_idle = s[0] - '0';
        return 0;
    }
    tide__log(TIDE_LOG_ERROR, -1, "TIDE_YIELD_WHEN_IDLE=\"%s\": expected \"auto\", \"0\" or \"1\"",
              s);
    return TIDE_EINVAL;
}

/* Our rendezvous port: TIDE_MASTER_PORT, else MASTER_PORT - except under
 * torchrun, whose agent's TCPStore already listens on MASTER_PORT (plain
 * tide.init() there failed with "Address already in use"): then the
 * port after it.  (tide.torch goes through that store instead.) */
static int read_master_port(tide_config *cfg)
{
    const char *ours = getenv("TIDE_MASTER_PORT");
    if (ours && *ours)
        return env_int("TIDE_MASTER_PORT", 1, 65535, &cfg->master_port);
    const char *s = getenv("MASTER_PORT");
    if (!s || !*s)
        return 0;
    bool torchrun = getenv("TORCHELASTIC_RUN_ID") != NULL;
    int rc = env_int("MASTER_PORT", 1, torchrun ? 65534 : 65535, &cfg->master_port);
    if (!rc && torchrun)
        cfg->master_port++;
    return rc;
}

/* TIDE_LOG_LEVEL: a number, 0-3, or its name, as other tools' users write
 * it ("debug" was a fatal error). */
static int read_log_level(tide_config *cfg)
{
    static const struct env_name names[] = {{"0", 0},    {"1", 1},       {"2", 2},
                                            {"3", 3},    {"error", 0},   {"warn", 1},
                                            {"warning", 1}, {"info", 2}, {"debug", 3}};
    return env_named("TIDE_LOG_LEVEL", names, sizeof names / sizeof names[0],
                     "0-3 or error, warn, info, debug", &cfg->log_level);
}

static int read_reactor(tide_config *cfg)
{
    static const struct env_name names[] = {{"auto", TIDE_REACTOR_AUTO},
                                            {"io_uring", TIDE_REACTOR_IO_URING},
                                            {"epoll", TIDE_REACTOR_EPOLL}};
    int kind = cfg->reactor;
    int rc = env_named("TIDE_REACTOR", names, sizeof names / sizeof names[0],
                       "\"auto\", \"io_uring\" or \"epoll\"", &kind);
    cfg->reactor = (tide_reactor_kind)kind;
    return rc;
}

int tide_config_from_env(tide_config *cfg)
{
    if (!cfg)
        return TIDE_EINVAL;
    int rc = read_ranks(cfg);
    const char *s;
    if (!rc && (s = getenv("MASTER_ADDR")) && *s)
        rc = copy_string("MASTER_ADDR", s, cfg->master_addr, sizeof cfg->master_addr);
    if (!rc)
        rc = read_master_port(cfg);
    if (!rc && (s = getenv("TIDE_JOB_TOKEN")))
        rc = copy_string("TIDE_JOB_TOKEN", s, cfg->job_token, sizeof cfg->job_token);
    if (!rc && (s = getenv("TIDE_TIMEOUT")) && *s)
        rc = parse_seconds("TIDE_TIMEOUT", s, &cfg->timeout_s);
    if (!rc && (s = getenv("TIDE_BOOTSTRAP_TIMEOUT")) && *s)
        rc = parse_seconds("TIDE_BOOTSTRAP_TIMEOUT", s, &cfg->bootstrap_timeout_s);
    if (!rc)
        rc = read_progress(cfg);
    if (!rc)
        rc = env_int("TIDE_SPIN_US", 0, 10000000, &cfg->spin_us);
    if (!rc)
        rc = read_yield(cfg);
    if (!rc)
        rc = read_reactor(cfg);
    if (!rc)
        rc = read_log_level(cfg);
    if (!rc && (s = getenv("TIDE_TCP_CONGESTION")))
        rc = copy_string("TIDE_TCP_CONGESTION", strcasecmp(s, "auto") ? s : "",
                         cfg->tcp_congestion, sizeof cfg->tcp_congestion);
    if (!rc && (s = getenv("TIDE_TRANSPORT")))
        rc = copy_string("TIDE_TRANSPORT", strcasecmp(s, "auto") ? s : "", cfg->transport,
                         sizeof cfg->transport);
    if (!rc && (s = getenv("TIDE_PROGRESS_CPUS")))
        rc = copy_string("TIDE_PROGRESS_CPUS", strcasecmp(s, "auto") ? s : "", cfg->progress_cpus,
                         sizeof cfg->progress_cpus);
    if (!rc && (s = getenv("TIDE_WIRE_AUTH")))
        rc = copy_string("TIDE_WIRE_AUTH", strcasecmp(s, "auto") ? s : "", cfg->wire_auth,
                         sizeof cfg->wire_auth);
    if (!rc && (s = getenv("TIDE_TRACE")))
        rc = copy_string("TIDE_TRACE", s, cfg->trace_path, sizeof cfg->trace_path);
    return rc;
}
