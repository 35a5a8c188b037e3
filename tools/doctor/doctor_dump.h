/* doctor_dump.h - flight-recorder dumps as tide-doctor reads them (the
 * format is written by engine/recorder_dump.c: one communicator header
 * and one operation per line). */
#ifndef TIDE_DOCTOR_DUMP_H
#define TIDE_DOCTOR_DUMP_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define DOC_PEERS 64

struct doc_op {
    uint64_t seq, count, bytes;
    int root;
    char kind[24], dtype[16], op[16], algorithm[32], state[12], status[24];
    uint64_t post_ns, start_ns, end_ns; /* the rank's monotonic clock */
    int waits_for[DOC_PEERS], nwaits;   /* world ranks */
    int sends_to[DOC_PEERS], nsends;
};

struct doc_comm {
    uint32_t id;
    int comm_rank, comm_size;
    int *members; /* comm rank -> world rank */
    uint64_t called; /* collectives the program called on it */
    char first_error[600];
    struct doc_op *ops; /* oldest first */
    size_t nops, cap;
};

/* A job larger than this is not one tide runs: its dumps are refused. */
#define DOC_MAX_RANKS (1 << 20)

struct doc_dump {
    int rank, size; /* world */
    bool truncated; /* its last line is not the writer's last: cut short */
    char reason[16];
    uint64_t now_ns, wall_ns; /* read together when the dump was written */
    struct doc_comm *comms;
    size_t ncomms;
};

/* Read path into d.  0, or -1 with why in err. */
int doc_dump_read(const char *path, struct doc_dump *d, char *err, size_t errlen);
void doc_dump_free(struct doc_dump *d);

/* The op of seq on c, or NULL when c's ring does not hold it. */
const struct doc_op *doc_find_op(const struct doc_comm *c, uint64_t seq);
/* The highest seq c's ring holds (0: none). */
uint64_t doc_last_seq(const struct doc_comm *c);
/* When an op time t of dump d happened, in the realtime clock (ns). */
uint64_t doc_wall(const struct doc_dump *d, uint64_t t);

#endif
