/* launcher.c - tide-run: start the ranks of a program, here or on several
 * hosts (launcher_hosts.c), and supervise them.
 *
 * It does not link libtide: it only starts processes and relays their
 * output.  What is about other hosts (-H, --hostfile, the agent's
 * command) is launcher_hosts.c's; starting and watching an agent is here.
 *
 *   options      argv parsing, --help, the PATH check for the program
 *   environment  torchrun's variables, a free MASTER_PORT, TIDE_JOB_TOKEN
 *                (or, for one of several hosts, the job's), -x exports
 *   spawn        fork + execvp of one rank, bound to its core (bind.c), or
 *                of the agent that starts another host's tide-run
 *   relay        per-pipe line buffers; whole lines out, "[rank] " first
 *   supervise    signalfd, reaping, stop/kill deadlines, the poll loop
 *   main         ties them together and picks the exit status
 *
 * Single-threaded: one poll() loop over a signalfd (SIGCHLD, SIGINT,
 * SIGTERM), the ranks' (and agents') stdout/stderr pipes and, started
 * by another tide-run, the stdin it keeps open while it lives.  Because the signals are
 * blocked and read from the signalfd, no code runs in signal context.
 *
 * Failure policy: the first rank to exit non-zero or die by a signal is
 * the cause.  Every other live rank gets SIGTERM, then SIGKILL once the
 * grace period is over; their deaths are never reported as the cause.
 * With --keep-going a rank killed by a signal is reported and the others
 * go on (programs that recover with tide_comm_shrink); a rank that exits
 * non-zero still stops the job.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/launcher/bind.h"
#include "tools/common/cli.h"
#include "tools/launcher/launcher_hosts.h"
#include "tide.h"

enum {
    MAX_RANKS = 1024,
    MAX_NODES = 1024,
    MAX_EXPORTS = 64,
    LINE_CAP = 64 * 1024, /* longer lines are split at this size */
    PREFIX_CAP = 16,      /* "[1023] " plus its NUL */
    TOKEN_BYTES = 32,     /* TIDE_JOB_TOKEN is twice this in hex */
    DEFAULT_GRACE_MS = 5000,
    /*
     * Once every rank is reaped, a pipe can only still be open because a
     * rank left a background process holding it.  We collect its output
     * for this long, then stop rather than hang on it.
     */
    DRAIN_MS = 2000,
    EXIT_FAILURE_LAUNCHER = 1,
    EXIT_USAGE = 2,
    EXIT_EXEC_FAILED = 127,
};

/* ---------------------------------------------------------------- options */

struct options {
    int nranks;       /* -n; 0 until given */
    int port;         /* --port; 0 means pick a free one */
    const char *addr; /* --addr; becomes MASTER_ADDR (unset: 127.0.0.1, or
                       * with -H the first host) */
    bool no_prefix;   /* --no-prefix: ranks inherit stdout/stderr */
    bool keep_going;  /* --keep-going: a rank killed by a signal stops nobody */
    int64_t grace_ms; /* --grace: SIGTERM to SIGKILL delay */
    int64_t dump_after_ms; /* --dump-on-timeout: SIGUSR1 to all after this; 0: never */
    enum bind_mode bind;   /* --bind-to */
    int nnodes, node_rank; /* --nnodes, --node-rank: this launcher's share of a bigger job */
    const char *exports[MAX_EXPORTS]; /* -x NAME[=VALUE], as given */
    int nexports;
    char **program;   /* argv after the options, NULL-terminated */
    /* Several hosts (launcher_hosts.h): -H/--hostfile, the agent that
     * reaches them, and which of them is this one (-1: none) */
    struct host_plan hosts;
    const char *agent;
    int local_host;
    /* A share of a bigger job: its size and our first rank (defaults
     * from --nnodes); --token-stdin: the token comes on stdin, which then
     * stays open as the starting tide-run's lifeline */
    int world_size, first_rank;
    bool token_stdin;
};

enum parse_result { PARSE_RUN, PARSE_HELP, PARSE_VERSION, PARSE_ERROR };

static const char help_text[] =
    "Usage: tide-run -n N [options] [--] PROGRAM [ARGS...]\n"
    "       tide-run -H HOST[:SLOTS],... | --hostfile FILE [-n N] [options] [--] PROGRAM...\n"
    "\n"
    "Start N ranks of PROGRAM on this host, or on several hosts, and wait\n"
    "for all of them.\n"
    "\n"
    "Options:\n"
    "  -n N, -np N      number of ranks, 1 to 1024 a host (with -H or --hostfile:\n"
    "                   the whole job's, default one per slot)\n"
    "  -H, --host HOST[:SLOTS],...\n"
    "                   start ranks on these hosts, filling each one's slots\n"
    "                   (default 1) in order; rank 0 runs on the first.  This\n"
    "                   host (localhost, 127.x or its name) runs its ranks\n"
    "                   itself; every other host gets, through the agent, a\n"
    "                   tide-run at this one's path (as mpirun's daemons), with\n"
    "                   the job's token on its stdin, never on a command line.\n"
    "                   Give PROGRAM as a path valid on every host.\n"
    "  --hostfile FILE, --machinefile FILE\n"
    "                   the hosts, one a line: NAME, NAME:SLOTS or NAME slots=N;\n"
    "                   # starts a comment\n"
    "  --agent CMD      how to reach another host: CMD HOST COMMAND... (default:\n"
    "                   $TIDE_RUN_AGENT, else ssh; e.g. \"ip netns exec\"); an ssh\n"
    "                   or rsh agent gets the command quoted for the remote shell\n"
    "  --port P         MASTER_PORT for the ranks (default: a free port)\n"
    "  --addr A         MASTER_ADDR for the ranks (default: 127.0.0.1, or with -H\n"
    "                   the first host's name; required when the first host is\n"
    "                   this one and others are not: the address they reach it at)\n"
    "  --no-prefix      ranks write straight to stdout/stderr, without\n"
    "                   the \"[rank] \" prefix on each line\n"
    "  --grace SECONDS  time between SIGTERM and SIGKILL (default: 5)\n"
    "  --keep-going     a rank killed by a signal does not stop the others,\n"
    "                   for programs that go on without it (tide_comm_shrink,\n"
    "                   tide-fsdp-train --elastic); a rank that exits non-zero\n"
    "                   still stops the job\n"
    "  --bind-to core|none|auto\n"
    "                   core: each rank on a core of its own (its hardware\n"
    "                   threads), as mpirun does for two ranks; none: where\n"
    "                   the scheduler puts them; auto (default): core when\n"
    "                   there are at least as many cores as ranks\n"
    "  --dump-on-timeout SECONDS\n"
    "                   if the job still runs after SECONDS, send every rank\n"
    "                   SIGUSR1: tide ranks write their flight-recorder dump\n"
    "                   to TIDE_DUMP_DIR (default: ./tide-dumps-<pid>), for\n"
    "                   tide-doctor; ranks start with SIGUSR1 ignored until\n"
    "                   tide takes it, so the signal never kills one\n"
    "  -x NAME[=VALUE]  export NAME to the ranks (with VALUE, or as set\n"
    "                   here), as mpirun does; repeatable\n"
    "  --tag-output     mpirun's name for the \"[rank] \" prefix (the default)\n"
    "  --map-by core|slot\n"
    "                   mpirun's names for tide-run's placement: rank k on\n"
    "                   the k-th core (or pair of cores; see --bind-to)\n"
    "  --nnodes H --node-rank I\n"
    "                   this tide-run starts ranks I*N .. I*N+N-1 of a job of\n"
    "                   H*N ranks, one tide-run per host (as torchrun's\n"
    "                   options): give every one the same --addr (the host\n"
    "                   of node rank 0), --port and TIDE_JOB_TOKEN in the\n"
    "                   environment (64 hex digits, e.g. from\n"
    "                   `openssl rand -hex 32`); what -H does for you\n"
    "  --world-size W --first-rank K\n"
    "                   with --nnodes: a job of W ranks of which this tide-run\n"
    "                   starts K .. K+N-1 (hosts may differ in size)\n"
    "  --token-stdin    read TIDE_JOB_TOKEN from the first line of stdin, and\n"
    "                   stop the ranks when stdin closes (how -H starts the\n"
    "                   other hosts' tide-runs)\n"
    "  -h, --help       print this help\n"
    "  --version        print tide's version\n"
    "\n"
    "Options also take one dash (-np 4, -host a,b, -hostfile F) and\n"
    "--opt=VALUE.  Each rank gets RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LOCAL_WORLD_SIZE, GROUP_RANK (the node rank), MASTER_ADDR, MASTER_PORT\n"
    "and TIDE_JOB_TOKEN (64 hex digits, fresh for each job unless given).\n"
    "OMP_NUM_THREADS and OPENBLAS_NUM_THREADS default to 1.\n"
    "\n"
    "SIGINT and SIGTERM are forwarded to every rank.  If a rank fails, the\n"
    "others get SIGTERM, and SIGKILL after the grace period.\n"
    "\n"
    "Exit status: 0 if every rank exited 0 (with --keep-going: if at least\n"
    "one did and the others were killed by signals); otherwise the first\n"
    "failing rank's exit status, or 128+N if signal N killed it; 2 on bad\n"
    "usage.\n";

__attribute__((format(printf, 1, 2))) static void usage_error(const char *fmt, ...)
{
    va_list ap;

    fputs("tide-run: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see tide-run --help)\n", stderr);
}

/* Option `name`'s whole number in [min, max] into *out, or a usage error. */
static bool apply_int(const char *name, const char *value, int min, int max, int *out)
{
    if (cli_parse_int(value, min, max, out))
        return true;
    usage_error("%s must be from %d to %d, not '%s'", name, min, max, value);
    return false;
}

static bool apply_nranks(struct options *opt, const char *value)
{
    return apply_int("-n", value, 1, MAX_RANKS, &opt->nranks);
}

static bool apply_port(struct options *opt, const char *value)
{
    return apply_int("--port", value, 1, 65535, &opt->port);
}

static bool apply_addr(struct options *opt, const char *value)
{
    if (value[0] == '\0') {
        usage_error("--addr must not be empty");
        return false;
    }
    opt->addr = value;
    return true;
}

static bool apply_grace(struct options *opt, const char *value)
{
    char *end;
    double seconds = strtod(value, &end);

    /* Written this way round so that NaN fails too. */
    if (end == value || *end != '\0' || !(seconds >= 0 && seconds <= 86400)) {
        usage_error("--grace must be 0 to 86400 seconds, not '%s'", value);
        return false;
    }
    opt->grace_ms = (int64_t)(seconds * 1000 + 0.5);
    return true;
}

static bool apply_dump_timeout(struct options *opt, const char *value)
{
    char *end;
    double seconds = strtod(value, &end);

    if (end == value || *end != '\0' || !(seconds > 0 && seconds <= 86400 * 365)) {
        usage_error("--dump-on-timeout must be a positive number of seconds, not '%s'", value);
        return false;
    }
    opt->dump_after_ms = (int64_t)(seconds * 1000 + 0.5);
    return true;
}

static bool apply_bind(struct options *opt, const char *value)
{
    if (bind_parse(value, &opt->bind))
        return true;
    usage_error("--bind-to must be core, none or auto, not '%s'", value);
    return false;
}

static bool apply_export(struct options *opt, const char *value)
{
    if (value[0] == '\0' || value[0] == '=') {
        usage_error("-x needs NAME or NAME=VALUE, not '%s'", value);
        return false;
    }
    if (!strchr(value, '=') && !getenv(value)) {
        usage_error("-x %s: %s is not set here; give -x %s=VALUE", value, value, value);
        return false;
    }
    if (opt->nexports == MAX_EXPORTS) {
        usage_error("at most %d -x options", MAX_EXPORTS);
        return false;
    }
    opt->exports[opt->nexports++] = value;
    return true;
}

/* Open MPI's mapping policies that mean what tide-run does on one host:
 * ranks in order over the cores.  The others (socket, numa, ppr:...)
 * would need a placement tide-run does not make. */
static bool apply_map_by(struct options *opt, const char *value)
{
    (void)opt;
    if (!strcmp(value, "core") || !strcmp(value, "slot"))
        return true;
    usage_error("--map-by %s: tide-run maps by core (or slot, the same on one host); "
                "use --bind-to for the rest", value);
    return false;
}

static bool apply_nnodes(struct options *opt, const char *value)
{
    return apply_int("--nnodes", value, 1, MAX_NODES, &opt->nnodes);
}

static bool apply_node_rank(struct options *opt, const char *value)
{
    return apply_int("--node-rank", value, 0, MAX_NODES - 1, &opt->node_rank);
}

static bool apply_world_size(struct options *opt, const char *value)
{
    return apply_int("--world-size", value, 1, MAX_RANKS * MAX_NODES, &opt->world_size);
}

static bool apply_first_rank(struct options *opt, const char *value)
{
    return apply_int("--first-rank", value, 0, MAX_RANKS * MAX_NODES - 1, &opt->first_rank);
}

static bool apply_hosts(struct options *opt, const char *value)
{
    char why[160];
    if (hosts_add_list(&opt->hosts, value, why, sizeof why) == 0)
        return true;
    usage_error("-H %s: %s", value, why);
    return false;
}

static bool apply_hostfile(struct options *opt, const char *value)
{
    char why[1200];
    if (hosts_add_file(&opt->hosts, value, why, sizeof why) == 0)
        return true;
    usage_error("%s", why);
    return false;
}

static bool apply_agent(struct options *opt, const char *value)
{
    if (value[strspn(value, " ")] == '\0') {
        usage_error("--agent must name a command (such as ssh)");
        return false;
    }
    opt->agent = value;
    return true;
}

/* Long options; getopt_long_only also takes them with one dash, as mpirun
 * does (-np, -host, -hostfile), and falls back to the short option
 * where one is a prefix of several (-n, -x, -H, -h). */
enum {
    OPT_PORT = 256, OPT_ADDR, OPT_NO_PREFIX, OPT_KEEP_GOING, OPT_GRACE, OPT_BIND,
    OPT_DUMP, OPT_TAG_OUTPUT, OPT_MAP_BY, OPT_NNODES, OPT_NODE_RANK, OPT_HOSTFILE,
    OPT_AGENT, OPT_TOKEN_STDIN, OPT_WORLD_SIZE, OPT_FIRST_RANK, OPT_VERSION,
};

static const struct option long_options[] = {
    {"np", required_argument, NULL, 'n'},
    {"host", required_argument, NULL, 'H'},
    {"hostfile", required_argument, NULL, OPT_HOSTFILE},
    {"machinefile", required_argument, NULL, OPT_HOSTFILE},
    {"agent", required_argument, NULL, OPT_AGENT},
    {"port", required_argument, NULL, OPT_PORT},
    {"addr", required_argument, NULL, OPT_ADDR},
    {"no-prefix", no_argument, NULL, OPT_NO_PREFIX},
    {"keep-going", no_argument, NULL, OPT_KEEP_GOING},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"bind-to", required_argument, NULL, OPT_BIND},
    {"dump-on-timeout", required_argument, NULL, OPT_DUMP},
    {"tag-output", no_argument, NULL, OPT_TAG_OUTPUT},
    {"map-by", required_argument, NULL, OPT_MAP_BY},
    {"nnodes", required_argument, NULL, OPT_NNODES},
    {"node-rank", required_argument, NULL, OPT_NODE_RANK},
    {"token-stdin", no_argument, NULL, OPT_TOKEN_STDIN},
    {"world-size", required_argument, NULL, OPT_WORLD_SIZE},
    {"first-rank", required_argument, NULL, OPT_FIRST_RANK},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static const struct {
    int code;
    bool (*apply)(struct options *opt, const char *value);
} appliers[] = {
    {'n', apply_nranks},           {'x', apply_export},
    {'H', apply_hosts},            {OPT_HOSTFILE, apply_hostfile},
    {OPT_AGENT, apply_agent},      {OPT_PORT, apply_port},
    {OPT_ADDR, apply_addr},        {OPT_GRACE, apply_grace},
    {OPT_BIND, apply_bind},        {OPT_DUMP, apply_dump_timeout},
    {OPT_MAP_BY, apply_map_by},    {OPT_NNODES, apply_nnodes},
    {OPT_NODE_RANK, apply_node_rank}, {OPT_WORLD_SIZE, apply_world_size},
    {OPT_FIRST_RANK, apply_first_rank},
};

/* Option `code` with its value; PARSE_RUN to go on. */
static enum parse_result take_option(struct options *opt, int code, const char *value)
{
    switch (code) {
    case 'h': return PARSE_HELP;
    case OPT_VERSION: return PARSE_VERSION;
    case OPT_NO_PREFIX: opt->no_prefix = true; return PARSE_RUN;
    case OPT_KEEP_GOING: opt->keep_going = true; return PARSE_RUN;
    case OPT_TAG_OUTPUT: return PARSE_RUN; /* tide-run's prefix is mpirun's tag */
    case OPT_TOKEN_STDIN: opt->token_stdin = true; return PARSE_RUN;
    default: break;
    }
    for (size_t k = 0; k < sizeof appliers / sizeof appliers[0]; k++)
        if (appliers[k].code == code)
            return appliers[k].apply(opt, value) ? PARSE_RUN : PARSE_ERROR;
    return PARSE_ERROR;
}

static bool is_token(const char *t)
{
    return t && strlen(t) == 2 * TOKEN_BYTES &&
           strspn(t, "0123456789abcdefABCDEF") == 2 * TOKEN_BYTES;
}

/* --token-stdin: the job's token is the first line on stdin, from the
 * tide-run that started this one (waited for at most 30 s). */
static int read_token_stdin(void)
{
    char line[2 * TOKEN_BYTES + 2];
    size_t got = 0;
    while (got < sizeof line - 1 && (got == 0 || line[got - 1] != '\n')) {
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        if (poll(&p, 1, 30000) <= 0)
            break;
        ssize_t n = read(STDIN_FILENO, line + got, sizeof line - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    line[got] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (!is_token(line)) {
        usage_error("--token-stdin: no token of 64 hex digits came on stdin within 30 s");
        return -1;
    }
    if (setenv("TIDE_JOB_TOKEN", line, 1) != 0) {
        fprintf(stderr, "tide-run: setenv: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* A job over several tide-runs: they must meet at one address and port,
 * under one token, and each must know its place. */
static enum parse_result check_nodes(const struct options *opt)
{
    if (opt->node_rank >= opt->nnodes) {
        usage_error("--node-rank %d is not below --nnodes %d", opt->node_rank, opt->nnodes);
        return PARSE_ERROR;
    }
    if (opt->first_rank + opt->nranks > opt->world_size) {
        usage_error("ranks %d..%d are not in a job of %d (--first-rank, -n, --world-size)",
                    opt->first_rank, opt->first_rank + opt->nranks - 1, opt->world_size);
        return PARSE_ERROR;
    }
    if (opt->nnodes == 1)
        return PARSE_RUN;
    if (opt->port == 0) {
        usage_error("--nnodes %d needs --port: every tide-run of the job must give the same",
                    opt->nnodes);
        return PARSE_ERROR;
    }
    if (!is_token(getenv("TIDE_JOB_TOKEN"))) {
        usage_error("--nnodes %d needs TIDE_JOB_TOKEN set to the job's 64 hex digits, the "
                    "same for every tide-run (e.g. openssl rand -hex 32)", opt->nnodes);
        return PARSE_ERROR;
    }
    return PARSE_RUN;
}

/* -H or --hostfile: place the ranks; this tide-run starts those of this
 * host (if it is one of them) and, through the agent, every other
 * host's tide-run. */
static enum parse_result plan_hosts(struct options *opt)
{
    char why[160];
    struct host_plan *p = &opt->hosts;
    if (opt->nnodes > 1 || opt->token_stdin) {
        usage_error("-H and --hostfile start every host's tide-run: no --nnodes here");
        return PARSE_ERROR;
    }
    if (hosts_place(p, opt->nranks, why, sizeof why) != 0) {
        usage_error("%s", why);
        return PARSE_ERROR;
    }
    opt->nranks = 0;
    opt->nnodes = p->n;
    opt->world_size = p->world;
    for (int i = 0; i < p->n; i++) {
        if (!p->hosts[i].local)
            continue;
        if (opt->local_host >= 0) {
            usage_error("%s and %s both name this host", p->hosts[opt->local_host].name,
                        p->hosts[i].name);
            return PARSE_ERROR;
        }
        opt->local_host = i;
        opt->nranks = p->hosts[i].nranks;
        opt->first_rank = p->hosts[i].first_rank;
        opt->node_rank = i;
    }
    bool remote = opt->nnodes > (opt->local_host >= 0);
    if (remote && !opt->addr && p->hosts[0].local) {
        usage_error("rank 0 runs here: give --addr, the address the other hosts reach this "
                    "one at");
        return PARSE_ERROR;
    }
    if (!opt->addr)
        opt->addr = p->hosts[0].name;
    return PARSE_RUN;
}

static enum parse_result check_options(struct options *opt)
{
    if (opt->program == NULL || opt->program[0] == NULL) {
        usage_error("missing program: put it after the options (or after --)");
        return PARSE_ERROR;
    }
    if (opt->hosts.n > 0)
        return plan_hosts(opt);
    if (opt->nranks == 0) {
        usage_error("missing -n N (the number of ranks), or -H/--hostfile");
        return PARSE_ERROR;
    }
    if (!opt->addr)
        opt->addr = "127.0.0.1";
    if (opt->world_size == 0)
        opt->world_size = opt->nnodes * opt->nranks;
    if (opt->first_rank < 0)
        opt->first_rank = opt->node_rank * opt->nranks;
    return check_nodes(opt);
}

static enum parse_result parse_args(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){.grace_ms = DEFAULT_GRACE_MS, .nnodes = 1,
                            .first_rank = -1, .local_host = -1};
    const char *agent = getenv("TIDE_RUN_AGENT");
    opt->agent = agent && *agent ? agent : "ssh";
    int code;
    /* '+': options stop at the program, as mpirun's do; ':' and opterr 0:
     * getopt's complaints in our words. */
    opterr = 0;
    while ((code = getopt_long_only(argc, argv, "+:n:x:H:h", long_options, NULL)) != -1) {
        if (code == ':' || code == '?') {
            const char *arg = argv[optind - 1];
            if (code == ':')
                usage_error("option %s needs a value", arg);
            else
                usage_error("unknown option '%s'", arg);
            return PARSE_ERROR;
        }
        enum parse_result r = take_option(opt, code, optarg);
        if (r != PARSE_RUN)
            return r;
    }
    if (optind < argc)
        opt->program = argv + optind;
    if (opt->token_stdin && read_token_stdin() != 0)
        return PARSE_ERROR;
    return check_options(opt);
}

/* Returns 0 if execve could run `path`, else the errno it would see. */
static int check_executable(const char *path)
{
    struct stat st;

    if (stat(path, &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return EACCES;
    if (access(path, X_OK) != 0)
        return errno;
    return 0;
}

/*
 * Looks `name` up the way execvp will, so that a typo is one usage error
 * (exit 2) instead of N ranks each failing with 127.  Returns 0 or errno.
 */
static int find_program(const char *name)
{
    if (name[0] == '\0')
        return ENOENT;
    if (strchr(name, '/') != NULL)
        return check_executable(name);

    const char *dir = getenv("PATH");
    if (dir == NULL || dir[0] == '\0')
        dir = "/bin:/usr/bin"; /* glibc's execvp default */
    int err = ENOENT;
    for (;;) {
        const char *end = strchrnul(dir, ':');
        int dir_len = (int)(end - dir);
        char path[PATH_MAX];
        /* An empty PATH entry means the current directory. */
        int n = snprintf(path, sizeof path, "%.*s%s%s", dir_len, dir, dir_len > 0 ? "/" : "", name);

        if (n > 0 && (size_t)n < sizeof path) {
            int e = check_executable(path);
            if (e == 0)
                return 0;
            if (e == EACCES)
                err = EACCES; /* execvp reports this too */
        }
        if (*end == '\0')
            return err;
        dir = end + 1;
    }
}

/* ------------------------------------------------------------ environment */

/*
 * Binds a TCP socket to port 0 on `addr` and returns the port the kernel
 * chose, or -1 with a message printed.  Racy by nature (someone else may
 * take the port before rank 0 does), which torchrun accepts as well.
 */
static int pick_free_port(const char *addr)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *list;
    int rc = getaddrinfo(addr, "0", &hints, &list);

    if (rc != 0) {
        fprintf(stderr, "tide-run: cannot resolve --addr %s: %s\n", addr, gai_strerror(rc));
        return -1;
    }
    int port = -1;
    int err = EADDRNOTAVAIL;
    for (struct addrinfo *ai = list; ai != NULL && port < 0; ai = ai->ai_next) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0) {
            err = errno;
            continue;
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
            port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                            : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else
            err = errno;
        close(fd);
    }
    freeaddrinfo(list);
    if (port < 0)
        fprintf(stderr, "tide-run: cannot bind a port on %s: %s\n", addr, strerror(err));
    return port;
}

/* Fills `hex` with TOKEN_BYTES fresh random bytes as lowercase hex. */
static int make_token(char hex[2 * TOKEN_BYTES + 1])
{
    unsigned char raw[TOKEN_BYTES];
    size_t got = 0;

    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "tide-run: getrandom: %s\n", strerror(errno));
            return -1;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

/* --dump-on-timeout: the ranks' TIDE_DUMP_DIR, made unless it exists. */
static int setup_dump_dir(void)
{
    char dir[64];
    const char *given = getenv("TIDE_DUMP_DIR");

    if (!given || !*given) {
        snprintf(dir, sizeof dir, "tide-dumps-%d", (int)getpid());
        if (setenv("TIDE_DUMP_DIR", dir, 1) != 0) {
            fprintf(stderr, "tide-run: setenv: %s\n", strerror(errno));
            return -1;
        }
        given = dir;
    }
    if (mkdir(given, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "tide-run: cannot make %s: %s\n", given, strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * Sets the variables every rank shares in our own environment, so that
 * fork passes them on; RANK and LOCAL_RANK are set in each child.
 */
/* -x: NAME=VALUE sets; NAME alone is already in our environment, which
 * the ranks inherit. */
static int export_variables(const struct options *opt)
{
    for (int i = 0; i < opt->nexports; i++) {
        const char *eq = strchr(opt->exports[i], '=');
        if (!eq)
            continue;
        char name[256];
        size_t len = (size_t)(eq - opt->exports[i]);
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1),
                 opt->exports[i]);
        if (setenv(name, eq + 1, 1) != 0) {
            fprintf(stderr, "tide-run: -x %s: %s\n", opt->exports[i], strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int setup_environment(struct options *opt)
{
    char world[16], local_world[16], node[16], port[16], token[2 * TOKEN_BYTES + 1];
    int port_number = opt->port;

    /* Starting other hosts' tide-runs, the address may be another
     * host's: a port free here is the best guess. */
    const char *bind_addr = opt->hosts.n > 0 ? "0.0.0.0" : opt->addr;
    if (port_number == 0 && (port_number = pick_free_port(bind_addr)) < 0)
        return -1;
    /* One job of several tide-runs: the token every one was given, or for
     * -H and --hostfile the one given here if any.  Else a fresh one. */
    const char *given = getenv("TIDE_JOB_TOKEN");
    if (opt->nnodes > 1 && !opt->hosts.n)
        snprintf(token, sizeof token, "%s", given);
    else if (opt->hosts.n && is_token(given))
        snprintf(token, sizeof token, "%s", given);
    else if (make_token(token) != 0)
        return -1;
    opt->port = port_number;
    snprintf(world, sizeof world, "%d", opt->world_size);
    snprintf(local_world, sizeof local_world, "%d", opt->nranks);
    snprintf(node, sizeof node, "%d", opt->node_rank);
    snprintf(port, sizeof port, "%d", port_number);
    if (export_variables(opt) != 0)
        return -1;
    if (setenv("WORLD_SIZE", world, 1) != 0 || setenv("LOCAL_WORLD_SIZE", local_world, 1) != 0 ||
        setenv("GROUP_RANK", node, 1) != 0 ||
        setenv("MASTER_ADDR", opt->addr, 1) != 0 || setenv("MASTER_PORT", port, 1) != 0 ||
        setenv("TIDE_JOB_TOKEN", token, 1) != 0 || setenv("OMP_NUM_THREADS", "1", 0) != 0 ||
        setenv("OPENBLAS_NUM_THREADS", "1", 0) != 0) {
        fprintf(stderr, "tide-run: setenv: %s\n", strerror(errno));
        return -1;
    }
    return opt->dump_after_ms ? setup_dump_dir() : 0;
}

/* ------------------------------------------------------------------ state */

/* One pipe from a rank: its stdout or its stderr. */
struct stream {
    int fd;     /* read end; -1 once closed */
    int rank;   /* whose output this is */
    int out_fd; /* where its lines go: our stdout or stderr */
    size_t len; /* bytes of the unfinished line in buf */
    char *buf;  /* LINE_CAP bytes */
};

/* A process we start: a rank of this host, or (-H, --hostfile) the
 * agent that starts another host's tide-run, whose lines come already
 * prefixed and pass as they are. */
struct rank {
    char **argv;       /* an agent: its command (launcher_hosts.h) */
    pid_t pid;         /* 0 before fork and once reaped */
    struct stream out; /* its stdout */
    struct stream err; /* its stderr */
    int host;          /* an agent: the host's index in opt.hosts; -1: a rank */
    int lifeline;      /* an agent: the write end of its stdin, which carries
                        * the token and stays open while we live */
};

struct failure {
    int rank;         /* first failing rank (a host's first); -1 while none */
    const char *host; /* the host whose tide-run failed; NULL: a rank here */
    int wait_status;  /* its waitpid status */
    int spawn_errno;  /* non-zero: it could not be started */
};

struct launcher {
    struct options opt;
    struct rank *ranks;             /* the ranks here, then one agent per other host */
    int nprocs;                     /* entries in ranks */
    int lifeline_fd;                /* --token-stdin: stdin, watched; -1: none */
    int live;                       /* ranks forked, not yet reaped */
    int open_streams;               /* pipes not yet closed */
    int signal_fd;                  /* SIGCHLD, SIGINT, SIGTERM */
    sigset_t child_mask;            /* our starting mask, for children */
    struct sigaction child_sigpipe; /* our starting SIGPIPE action */
    struct rlimit child_nofile;     /* our starting fd limit */
    struct bind_plan bind;          /* which core each rank runs on */
    bool stopping;                  /* ranks have been told to stop */
    bool killed;                    /* SIGKILL has been sent */
    int64_t kill_at_ms;             /* if stopping: when to SIGKILL */
    int64_t drain_until_ms;         /* if nothing is live: give up pipes */
    int64_t dump_at_ms;             /* --dump-on-timeout: when to send SIGUSR1; 0: done */
    struct failure failure;
    struct failure lost;    /* --keep-going: the first rank killed, forgiven */
    int exited_ok;          /* ranks that exited 0 */
    char *scratch;          /* one prefixed line on its way out */
    struct pollfd *pfds;    /* signal_fd, then the open streams */
    struct stream **polled; /* polled[k] is behind pfds[k + 1] */
};

/* Rank `local` of this launcher in the whole job (--nnodes). */
static int global_rank(const struct launcher *l, int local)
{
    return l->opt.first_rank + local;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ relay */

/*
 * Writes everything or gives up quietly: if our own stdout is gone
 * (EPIPE), losing output beats dying and leaving the ranks unsupervised.
 */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            /* Our stdout may be a non-blocking fd we inherited. */
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, -1);
        } else if (!(n < 0 && errno == EINTR)) {
            return;
        }
    }
}

/* One write per line, so lines of different ranks never mix. */
static void emit_line(struct launcher *l, const struct stream *s, const char *line, size_t len)
{
    int prefix_len = 0;
    if (l->ranks[s->rank].host < 0)
        prefix_len = snprintf(l->scratch, PREFIX_CAP, "[%d] ", global_rank(l, s->rank));

    memcpy(l->scratch + prefix_len, line, len);
    l->scratch[(size_t)prefix_len + len] = '\n';
    write_all(s->out_fd, l->scratch, (size_t)prefix_len + len + 1);
}

static void emit_complete_lines(struct launcher *l, struct stream *s)
{
    size_t start = 0;
    char *newline;

    while ((newline = memchr(s->buf + start, '\n', s->len - start))) {
        size_t end = (size_t)(newline - s->buf);

        emit_line(l, s, s->buf + start, end - start);
        start = end + 1;
    }
    /* A line that fills the whole buffer cannot wait for its end. */
    if (start == 0 && s->len == LINE_CAP) {
        emit_line(l, s, s->buf, s->len);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

/* Flushes a last unfinished line (adding its newline) and closes. */
static void stream_close(struct launcher *l, struct stream *s)
{
    if (s->len > 0)
        emit_line(l, s, s->buf, s->len);
    s->len = 0;
    close(s->fd);
    s->fd = -1;
    l->open_streams--;
}

/*
 * Does one read from the pipe.  Returns 1 if data came, 0 if the stream
 * is now closed, -1 if there was nothing to read yet.
 */
static int stream_read(struct launcher *l, struct stream *s)
{
    ssize_t n = read(s->fd, s->buf + s->len, LINE_CAP - s->len);

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return -1;
    if (n <= 0) {
        stream_close(l, s);
        return 0;
    }
    s->len += (size_t)n;
    emit_complete_lines(l, s);
    return 1;
}

/*
 * Every rank is gone but some pipe is still held open (see DRAIN_MS):
 * take what is buffered without blocking, then close.
 */
static void drain_all_now(struct launcher *l)
{
    for (int i = 0; i < l->nprocs; i++) {
        struct stream *pair[2] = {&l->ranks[i].out, &l->ranks[i].err};

        for (int k = 0; k < 2; k++) {
            struct stream *s = pair[k];

            if (s->fd < 0)
                continue;
            fcntl(s->fd, F_SETFL, O_NONBLOCK);
            while (s->fd >= 0 && stream_read(l, s) > 0)
                ;
            if (s->fd >= 0)
                stream_close(l, s);
        }
    }
}

/* ------------------------------------------------------------------ spawn */

/* At info level (TIDE_LOG_LEVEL 2 or 3, info or debug, as libtide's):
 * where ranks and their progress threads go, or why they are not bound. */
static void say_binding(const struct bind_plan *plan)
{
    const char *level = getenv("TIDE_LOG_LEVEL");
    bool info = level && (atoi(level) >= 2 || !strcasecmp(level, "info") ||
                          !strcasecmp(level, "debug"));
    if (!info || !plan->summary[0])
        return;
    fprintf(stderr, "tide-run: %s\n", plan->summary);
}

/* In a forked child: the signal mask, SIGPIPE's disposition and the fd
 * limit survive exec, so it gets back the ones we started with. */
static void restore_for_exec(const struct launcher *l)
{
    sigprocmask(SIG_SETMASK, &l->child_mask, NULL);
    sigaction(SIGPIPE, &l->child_sigpipe, NULL);
    if (l->child_nofile.rlim_cur != 0)
        setrlimit(RLIMIT_NOFILE, &l->child_nofile);
}

/* Runs in the forked child; never returns. */
_Noreturn static void run_child(const struct launcher *l, int rank, int out_fd, int err_fd)
{
    const char *program = l->opt.program[0];
    char value[16];

    char global[16];
    snprintf(value, sizeof value, "%d", rank);
    snprintf(global, sizeof global, "%d", global_rank(l, rank));
    if (setenv("RANK", global, 1) != 0 || setenv("LOCAL_RANK", value, 1) != 0) {
        dprintf(STDERR_FILENO, "tide-run: setenv: %s\n", strerror(errno));
        _exit(EXIT_EXEC_FAILED);
    }
    if (out_fd >= 0 && (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0))
        _exit(EXIT_EXEC_FAILED);
    restore_for_exec(l);
    /* Until tide installs its dump handler (at the first collective), a
     * SIGUSR1 from --dump-on-timeout must not kill the rank. */
    if (l->opt.dump_after_ms)
        signal(SIGUSR1, SIG_IGN);
    int err = bind_apply(&l->bind, rank);
    if (err)
        dprintf(STDERR_FILENO, "tide-run: rank %d runs unbound: %s\n", global_rank(l, rank),
                strerror(err));
    execvp(program, l->opt.program);
    dprintf(STDERR_FILENO, "tide-run: cannot run %s: %s\n", program, strerror(errno));
    _exit(EXIT_EXEC_FAILED);
}

static void close_pipe(int fds[2])
{
    for (int k = 0; k < 2; k++) {
        if (fds[k] >= 0)
            close(fds[k]);
        fds[k] = -1;
    }
}

static void stream_open(struct launcher *l, struct stream *s, int fd)
{
    s->fd = fd;
    s->len = 0;
    l->open_streams++;
}

/* The ends a child gets: its stdin (agents only), stdout and stderr
 * pipes' write ends; -1 where it keeps ours. */
struct child_fds {
    int in, out, err;
};

/*
 * Forks process ranks[i] with its stdout and stderr on pipes of their own
 * (unless --no-prefix) and, for an agent, its stdin on a pipe whose
 * write end becomes r->lifeline.  The pipes are O_CLOEXEC, so each child
 * keeps only its own ends (dup2 onto 0, 1 and 2 clears the flag there).
 * In the child returns 0 with *fds set; in the parent the pid, with the
 * streams open; -errno on error, with nothing left open.
 */
static pid_t fork_piped(struct launcher *l, struct rank *r, bool with_stdin,
                        struct child_fds *fds)
{
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    int err = 0;
    if ((with_stdin && pipe2(in_pipe, O_CLOEXEC) != 0) ||
        (!l->opt.no_prefix && (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)))
        err = errno;
    pid_t pid = err == 0 ? fork() : -1;
    if (pid < 0 && err == 0)
        err = errno;
    if (err != 0) {
        close_pipe(in_pipe);
        close_pipe(out_pipe);
        close_pipe(err_pipe);
        return -err;
    }
    if (pid == 0) {
        *fds = (struct child_fds){in_pipe[0], out_pipe[1], err_pipe[1]};
        return 0;
    }
    r->pid = pid;
    l->live++;
    if (with_stdin) {
        close(in_pipe[0]);
        r->lifeline = in_pipe[1];
    }
    if (!l->opt.no_prefix) {
        close(out_pipe[1]);
        close(err_pipe[1]);
        stream_open(l, &r->out, out_pipe[0]);
        stream_open(l, &r->err, err_pipe[0]);
    }
    return pid;
}

/* Forks rank `i`.  Returns 0 or an errno; on error nothing is left open. */
static int spawn_rank(struct launcher *l, int i)
{
    struct child_fds fds;
    pid_t pid = fork_piped(l, &l->ranks[i], false, &fds);
    if (pid == 0)
        run_child(l, i, fds.out, fds.err);
    return pid < 0 ? (int)-pid : 0;
}

/* Runs in the forked child of an agent; never returns. */
_Noreturn static void run_agent(const struct launcher *l, const struct rank *a, int in_fd,
                                int out_fd, int err_fd)
{
    if (dup2(in_fd, STDIN_FILENO) < 0 ||
        (out_fd >= 0 && (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)))
        _exit(EXIT_EXEC_FAILED);
    restore_for_exec(l);
    execvp(a->argv[0], a->argv);
    dprintf(STDERR_FILENO, "tide-run: cannot run the agent %s: %s\n", a->argv[0],
            strerror(errno));
    _exit(EXIT_EXEC_FAILED);
}

/* Forks the agent at ranks[i] and hands it the job's token on the pipe
 * that is its stdin (kept open: the other end's lifeline).  0 or an
 * errno; on error nothing is left open. */
static int spawn_agent(struct launcher *l, int i)
{
    struct rank *a = &l->ranks[i];
    struct child_fds fds;
    pid_t pid = fork_piped(l, a, true, &fds);
    if (pid == 0)
        run_agent(l, a, fds.in, fds.out, fds.err);
    if (pid < 0)
        return (int)-pid;
    char line[2 * TOKEN_BYTES + 2];
    int n = snprintf(line, sizeof line, "%s\n", getenv("TIDE_JOB_TOKEN"));
    write_all(a->lifeline, line, (size_t)n); /* 65 bytes: a pipe takes them at once */
    return 0;
}

/* -------------------------------------------------------------- supervise */

static void signal_all(const struct launcher *l, int sig)
{
    for (int i = 0; i < l->nprocs; i++)
        if (l->ranks[i].pid > 0)
            kill(l->ranks[i].pid, sig);
}

/* Sends `sig` to every live rank; the first call starts the grace clock. */
static void begin_stop(struct launcher *l, int sig)
{
    signal_all(l, sig);
    if (l->stopping)
        return;
    l->stopping = true;
    l->kill_at_ms = now_ms() + l->opt.grace_ms;
}

static void spawn_all(struct launcher *l)
{
    for (int i = 0; i < l->nprocs; i++) {
        int host = l->ranks[i].host;
        int err = host < 0 ? spawn_rank(l, i) : spawn_agent(l, i);

        if (err == 0)
            continue;
        l->failure = (struct failure){.rank = host < 0 ? global_rank(l, i) : 0,
                                      .host = host < 0 ? NULL : l->opt.hosts.hosts[host].name,
                                      .spawn_errno = err};
        begin_stop(l, SIGTERM);
        return;
    }
}

/* An agent's end: its host's tide-run ended with the status of the
 * first rank there to fail, which that tide-run has already named. */
static void note_agent_exit(struct launcher *l, int i, int status)
{
    const struct host *h = &l->opt.hosts.hosts[l->ranks[i].host];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        l->exited_ok += h->nranks;
        return;
    }
    if (l->failure.rank < 0)
        l->failure = (struct failure){.rank = h->first_rank, .host = h->name,
                                      .wait_status = status};
    if (!l->stopping)
        begin_stop(l, SIGTERM);
}

static void note_exit(struct launcher *l, int local, int status)
{
    if (l->ranks[local].host >= 0) {
        note_agent_exit(l, local, status);
        return;
    }
    int rank = global_rank(l, local); /* what the messages and the job call it */
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        l->exited_ok++;
        return;
    }
    if (l->opt.keep_going && !l->stopping && WIFSIGNALED(status)) {
        fprintf(stderr, "tide-run: rank %d was killed by signal %d (%s); the others go on "
                        "(--keep-going)\n",
                rank, WTERMSIG(status), strsignal(WTERMSIG(status)));
        if (l->lost.rank < 0)
            l->lost = (struct failure){.rank = rank, .wait_status = status};
        return;
    }
    /* Later deaths are usually our own SIGTERM/SIGKILL at work. */
    if (l->failure.rank < 0)
        l->failure = (struct failure){.rank = rank, .wait_status = status};
    if (!l->stopping)
        begin_stop(l, SIGTERM);
}

static int rank_of_pid(const struct launcher *l, pid_t pid)
{
    for (int i = 0; i < l->nprocs; i++)
        if (l->ranks[i].pid == pid)
            return i;
    return -1;
}

/* SIGCHLDs merge, so one signal may stand for many exits: loop. */
static void reap_children(struct launcher *l)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int i = rank_of_pid(l, pid);

        if (i < 0)
            continue;
        l->ranks[i].pid = 0;
        l->live--;
        note_exit(l, i, status);
    }
    if (l->live == 0 && l->open_streams > 0 && l->drain_until_ms == 0)
        l->drain_until_ms = now_ms() + DRAIN_MS;
}

static void handle_signals(struct launcher *l)
{
    struct signalfd_siginfo info;
    bool child_exited = false;

    while (read(l->signal_fd, &info, sizeof info) == sizeof info) {
        if (info.ssi_signo == SIGCHLD)
            child_exited = true;
        else
            begin_stop(l, (int)info.ssi_signo);
    }
    if (child_exited)
        reap_children(l);
}

static void handle_deadlines(struct launcher *l)
{
    int64_t now = now_ms();

    if (l->dump_at_ms && l->live > 0 && now >= l->dump_at_ms) {
        signal_all(l, SIGUSR1);
        l->dump_at_ms = 0;
        fprintf(stderr,
                "tide-run: still running after %.1f s: asked every rank for a flight-recorder "
                "dump; see: tide-doctor %s\n",
                (double)l->opt.dump_after_ms / 1000, getenv("TIDE_DUMP_DIR"));
    }

    if (l->stopping && !l->killed && l->live > 0 && now >= l->kill_at_ms) {
        signal_all(l, SIGKILL);
        l->killed = true;
    }
    if (l->live == 0 && l->drain_until_ms != 0 && now >= l->drain_until_ms)
        drain_all_now(l);
}

static int poll_timeout(const struct launcher *l)
{
    int64_t deadline = -1;

    if (l->stopping && !l->killed && l->live > 0)
        deadline = l->kill_at_ms;
    if (l->live == 0 && l->drain_until_ms != 0)
        deadline = l->drain_until_ms;
    if (l->dump_at_ms && l->live > 0 && (deadline < 0 || l->dump_at_ms < deadline))
        deadline = l->dump_at_ms;
    if (deadline < 0)
        return -1;
    int64_t left = deadline - now_ms();
    if (left < 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

static nfds_t build_poll_set(struct launcher *l)
{
    nfds_t n = 0;

    l->pfds[n++] = (struct pollfd){.fd = l->signal_fd, .events = POLLIN};
    for (int i = 0; i < l->nprocs; i++) {
        struct stream *pair[2] = {&l->ranks[i].out, &l->ranks[i].err};

        for (int k = 0; k < 2; k++) {
            if (pair[k]->fd < 0)
                continue;
            l->polled[n - 1] = pair[k];
            l->pfds[n++] = (struct pollfd){.fd = pair[k]->fd, .events = POLLIN};
        }
    }
    if (l->lifeline_fd >= 0 && !l->stopping) {
        l->polled[n - 1] = NULL; /* not a stream: see watch_lifeline */
        l->pfds[n++] = (struct pollfd){.fd = l->lifeline_fd, .events = POLLIN};
    }
    return n;
}

/* --token-stdin: our stdin closes when the tide-run that started us (on
 * another host, through ssh) is gone or stops the job.  Then we stop
 * too, as mpirun's daemons do when their launcher goes. */
static void watch_lifeline(struct launcher *l)
{
    char drop[64];
    ssize_t n = read(l->lifeline_fd, drop, sizeof drop);
    if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN)))
        return;
    l->lifeline_fd = -1;
    if (l->stopping)
        return;
    fprintf(stderr, "tide-run: the tide-run that started this host's ranks is gone: "
                    "stopping them\n");
    begin_stop(l, SIGTERM);
}

/*
 * Runs until every rank is reaped and every pipe closed.  Returns 0, or
 * -1 if poll itself broke (then the ranks have been SIGKILLed).
 */
static int run_loop(struct launcher *l)
{
    while (l->live > 0 || l->open_streams > 0) {
        nfds_t n = build_poll_set(l);

        if (poll(l->pfds, n, poll_timeout(l)) < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ENOMEM)
                continue;
            fprintf(stderr, "tide-run: poll: %s\n", strerror(errno));
            signal_all(l, SIGKILL);
            return -1;
        }
        if (l->pfds[0].revents != 0)
            handle_signals(l);
        /* One read per pipe per pass, so no rank can starve others. */
        for (nfds_t k = 1; k < n; k++) {
            if (l->pfds[k].revents == 0)
                continue;
            if (l->polled[k - 1] == NULL)
                watch_lifeline(l);
            else if (l->polled[k - 1]->fd >= 0)
                stream_read(l, l->polled[k - 1]);
        }
        handle_deadlines(l);
    }
    return 0;
}

/* ------------------------------------------------------------------- main */

/* Prints the one line about the cause and returns our exit status. */
static int report_failure(const struct failure *f)
{
    int st = f->wait_status;

    if (f->rank < 0)
        return 0;
    if (f->spawn_errno != 0 && f->host) {
        fprintf(stderr, "tide-run: cannot start the agent for host %s: %s\n", f->host,
                strerror(f->spawn_errno));
        return EXIT_FAILURE_LAUNCHER;
    }
    if (f->spawn_errno != 0) {
        fprintf(stderr, "tide-run: cannot start rank %d: %s\n", f->rank, strerror(f->spawn_errno));
        return EXIT_FAILURE_LAUNCHER;
    }
    if (f->host && WIFEXITED(st)) {
        fprintf(stderr, "tide-run: host %s's tide-run exited with status %d\n", f->host,
                WEXITSTATUS(st));
        return WEXITSTATUS(st);
    }
    if (f->host) {
        fprintf(stderr, "tide-run: host %s's tide-run (or its agent) was killed by signal %d "
                        "(%s)\n", f->host, WTERMSIG(st), strsignal(WTERMSIG(st)));
        return 128 + WTERMSIG(st);
    }
    if (WIFEXITED(st)) {
        fprintf(stderr, "tide-run: rank %d exited with status %d\n", f->rank, WEXITSTATUS(st));
        return WEXITSTATUS(st);
    }
    fprintf(stderr, "tide-run: rank %d was killed by signal %d (%s)\n", f->rank, WTERMSIG(st),
            strsignal(WTERMSIG(st)));
    return 128 + WTERMSIG(st);
}

/*
 * If we were started with fd 0, 1 or 2 closed, a pipe could land there
 * and be clobbered by dup2 in a child.  Fill the gaps with /dev/null.
 */
static void ensure_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
            open("/dev/null", O_RDWR);
}

/*
 * Two pipes per rank can pass the usual soft limit of 1024 fds.  The old
 * limit is kept for the children: select() breaks past 1024.
 */
static void raise_fd_limit(struct launcher *l)
{
    struct rlimit lim;
    rlim_t need = (rlim_t)l->nprocs * 3 + 32;

    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return;
    l->child_nofile = lim;
    if (lim.rlim_cur >= need)
        return;
    lim.rlim_cur = lim.rlim_max < need ? lim.rlim_max : need;
    setrlimit(RLIMIT_NOFILE, &lim);
}

/* Allocates the buffers and takes over the signals.  0 or -1. */
/* The options every other host's tide-run is started with (beside its
 * -n, --first-rank and --node-rank): the job's shape and meeting point,
 * and what this tide-run was told.  Static strings, ones in `store` (5
 * of NUM_CAP bytes) and ones it allocates in owned[0..nexports-1]. */
enum { NUM_CAP = 24, NEED_WORDS = 2 * MAX_EXPORTS + 24 };

static void remote_tail(const struct options *opt, const char **tail, char (*store)[NUM_CAP],
                        char **owned)
{
    int n = 0;
    snprintf(store[0], NUM_CAP, "%d", opt->nnodes);
    snprintf(store[1], NUM_CAP, "%d", opt->world_size);
    snprintf(store[2], NUM_CAP, "%d", opt->port);
    snprintf(store[3], NUM_CAP, "%.3f", (double)opt->grace_ms / 1000);
    snprintf(store[4], NUM_CAP, "%.3f", (double)opt->dump_after_ms / 1000);
    const char *words[] = {"--nnodes", store[0], "--world-size", store[1], "--addr", opt->addr,
                           "--port", store[2], "--grace", store[3], "--bind-to",
                           bind_name(opt->bind), "--token-stdin"};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        tail[n++] = words[k];
    if (opt->keep_going)
        tail[n++] = "--keep-going";
    if (opt->no_prefix)
        tail[n++] = "--no-prefix";
    if (opt->dump_after_ms) {
        tail[n++] = "--dump-on-timeout";
        tail[n++] = store[4];
    }
    /* -x NAME or NAME=VALUE: exported there as NAME=VALUE, the value it
     * has here (export_variables has put it in our environment). */
    for (int i = 0; i < opt->nexports; i++) {
        const char *name = opt->exports[i];
        tail[n++] = "-x";
        tail[n] = name;
        if (!strchr(name, '=') && asprintf(&owned[i], "%s=%s", name, getenv(name)) > 0)
            tail[n] = owned[i];
        n++;
    }
    tail[n] = NULL;
}

/* One agent per host other than this one, after the ranks here. */
static int make_agents(struct launcher *l)
{
    const struct options *opt = &l->opt;
    const char *tail[NEED_WORDS];
    char store[5][NUM_CAP], self[PATH_MAX], *owned[MAX_EXPORTS] = {NULL};
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0'; /* the other hosts run the tide-run installed where this one is */
    remote_tail(opt, tail, store, owned);
    int k = opt->nranks, rc = 0;
    for (int h = 0; h < opt->hosts.n && rc == 0; h++) {
        if (h == opt->local_host)
            continue;
        struct rank *a = &l->ranks[k++];
        a->host = h;
        a->argv = hosts_remote_argv(opt->agent, &opt->hosts.hosts[h], h, self,
                                    (char *const *)tail, opt->program);
        rc = a->argv ? 0 : -1;
    }
    for (int i = 0; i < opt->nexports; i++)
        free(owned[i]);
    return rc;
}

static int launcher_init(struct launcher *l)
{
    /* The ranks here, then an agent for every host but this one. */
    int n = l->opt.nranks + l->opt.hosts.n - (l->opt.local_host >= 0);
    sigset_t handled;
    struct sigaction ignore = {.sa_handler = SIG_IGN};

    l->nprocs = n;
    l->signal_fd = -1;
    l->lifeline_fd = l->opt.token_stdin ? STDIN_FILENO : -1;
    l->failure.rank = -1;
    l->lost.rank = -1;
    l->ranks = calloc((size_t)n, sizeof *l->ranks);
    l->scratch = malloc(PREFIX_CAP + LINE_CAP + 1);
    l->pfds = calloc((size_t)n * 2 + 2, sizeof *l->pfds);
    l->polled = calloc((size_t)n * 2 + 1, sizeof *l->polled);
    if (!l->ranks || !l->scratch || !l->pfds || !l->polled)
        return -1;
    for (int i = 0; i < n; i++) {
        struct rank *r = &l->ranks[i];

        r->host = -1;
        r->lifeline = -1;
        r->out = (struct stream){.fd = -1, .rank = i, .out_fd = 1};
        r->err = (struct stream){.fd = -1, .rank = i, .out_fd = 2};
        if (l->opt.no_prefix)
            continue;
        r->out.buf = malloc(LINE_CAP);
        r->err.buf = malloc(LINE_CAP);
        if (!r->out.buf || !r->err.buf)
            return -1;
    }
    /* Blocked before any fork, so no SIGCHLD can slip past. */
    sigemptyset(&handled);
    sigaddset(&handled, SIGCHLD);
    sigaddset(&handled, SIGINT);
    sigaddset(&handled, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &handled, &l->child_mask) != 0)
        return -1;
    l->signal_fd = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
    if (l->signal_fd < 0)
        return -1;
    /* A closed stdout must show up as EPIPE, not kill the launcher. */
    if (sigaction(SIGPIPE, &ignore, &l->child_sigpipe) != 0)
        return -1;
    if (!l->opt.no_prefix)
        raise_fd_limit(l);
    return make_agents(l);
}

static void launcher_free(struct launcher *l)
{
    for (int i = 0; l->ranks != NULL && i < l->nprocs; i++) {
        free(l->ranks[i].out.buf);
        free(l->ranks[i].err.buf);
        hosts_argv_free(l->ranks[i].argv);
        if (l->ranks[i].lifeline >= 0)
            close(l->ranks[i].lifeline);
    }
    hosts_free(&l->opt.hosts);
    free(l->ranks);
    free(l->scratch);
    free(l->pfds);
    free(l->polled);
    bind_plan_free(&l->bind);
    if (l->signal_fd >= 0)
        close(l->signal_fd);
}

/* Everything before the launch: the options, the program, the job's
 * environment, where ranks go.  -1 to launch; else our exit status. */
static int prepare(struct launcher *l, int argc, char **argv)
{
    switch (parse_args(argc, argv, &l->opt)) {
    case PARSE_HELP:
        fputs(help_text, stdout);
        return 0;
    case PARSE_VERSION: /* the launcher links no libtide: the header's */
        printf("tide-run %d.%d.%d\n", TIDE_VERSION_MAJOR, TIDE_VERSION_MINOR, TIDE_VERSION_PATCH);
        return 0;
    case PARSE_ERROR:
        return EXIT_USAGE;
    case PARSE_RUN:
        break;
    }
    int err = l->opt.nranks > 0 ? find_program(l->opt.program[0]) : 0;
    if (err != 0) {
        fprintf(stderr, "tide-run: cannot run %s: %s\n", l->opt.program[0], strerror(err));
        return EXIT_USAGE;
    }
    if (setup_environment(&l->opt) != 0)
        return EXIT_USAGE;
    char why[160];
    int nranks = l->opt.nranks;
    if (nranks > 0 && bind_plan_make(&l->bind, l->opt.bind, nranks, why, sizeof why) != 0) {
        usage_error("%s", why);
        return EXIT_USAGE;
    }
    return -1;
}

int main(int argc, char **argv)
{
    struct launcher l = {0};

    ensure_std_fds();
    int early = prepare(&l, argc, argv);
    if (early >= 0) {
        hosts_free(&l.opt.hosts);
        bind_plan_free(&l.bind);
        return early;
    }
    say_binding(&l.bind);
    if (launcher_init(&l) != 0) {
        fprintf(stderr, "tide-run: cannot start: %s\n", strerror(errno));
        launcher_free(&l);
        return EXIT_FAILURE_LAUNCHER;
    }
    if (l.opt.dump_after_ms)
        l.dump_at_ms = now_ms() + l.opt.dump_after_ms;
    spawn_all(&l);
    int status = EXIT_FAILURE_LAUNCHER;
    if (run_loop(&l) == 0) {
        /* --keep-going forgives the ranks killed only if one finished. */
        if (l.failure.rank < 0 && l.exited_ok == 0)
            l.failure = l.lost;
        status = report_failure(&l.failure);
    }
    launcher_free(&l);
    return status;
}
