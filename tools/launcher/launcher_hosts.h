/* launcher_hosts.h - tide-run's hosts: mpirun's -H and --hostfile, which
 * ranks go where, and the command that starts a host's share of the job
 * through an agent such as ssh.
 *
 * A job over hosts is the job --nnodes already runs (one tide-run per
 * host, all meeting at MASTER_ADDR:MASTER_PORT under one token), except
 * that the first tide-run starts the others: through AGENT HOST, each
 * told its ranks (--first-rank, -n), the job's size (--world-size), its
 * place (--node-rank of --nnodes) and the token on its standard input
 * (--token-stdin), never on a command line another user could read. */
#ifndef TIDE_LAUNCHER_HOSTS_H
#define TIDE_LAUNCHER_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

struct host {
    char *name;
    int slots;      /* as many ranks as it takes (mpirun's slots) */
    int nranks;     /* ranks placed on it */
    int first_rank; /* the first of them, in the job */
    bool local;     /* this host: its ranks are started here, no agent */
};

struct host_plan {
    struct host *hosts;
    int n;
    int world; /* ranks in the job */
};

/* -H a,b:2,c: each entry NAME or NAME:SLOTS (1 slot when not given; a
 * name given again adds to its slots).  0, or -1 with why. */
int hosts_add_list(struct host_plan *p, const char *list, char *why, size_t len);

/* A hostfile: a line per host, "NAME", "NAME slots=N" or "NAME:N", '#'
 * starting a comment.  0, or -1 with why (naming the line). */
int hosts_add_file(struct host_plan *p, const char *path, char *why, size_t len);

/* Place np ranks (0: one per slot) on the hosts in order, filling each
 * host's slots before the next; hosts left without ranks are dropped.
 * -1 with why when the slots do not hold np ranks. */
int hosts_place(struct host_plan *p, int np, char *why, size_t len);

/* Whether name is this machine (localhost, a loopback address, or our
 * host name). */
bool hosts_is_local(const char *name);

/* The argv that starts host h's share: the agent's words (split on
 * spaces), h's name, then the remote tide-run with h's ranks (-n,
 * --first-rank) and place (--node-rank) and the rest of its options, quoted
 * for a remote shell when the agent is ssh or rsh.  `tail` is the
 * options every host's tide-run gets (NULL-terminated), `program` the
 * job's program and arguments.  NULL-terminated; free with
 * hosts_argv_free.  NULL when out of memory. */
char **hosts_remote_argv(const char *agent, const struct host *h, int node_rank,
                         const char *tide_run, char *const *tail, char *const *program);
void hosts_argv_free(char **argv);

void hosts_free(struct host_plan *p);

#endif
