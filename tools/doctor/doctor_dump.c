/* doctor_dump.c - reading one rank's flight-recorder dump.  The writer
 * (engine/recorder_dump.c) puts the header, each communicator and each
 * operation on lines of their own, so a line is one object and a key
 * ("seq": ...) is found by its quoted name followed by a colon: inside
 * strings quotes are escaped, so a key can never match there. */
#include "tools/doctor/doctor_dump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the value of "key" starts in line, or NULL. */
static const char *value_of(const char *line, const char *key)
{
    char pat[40];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? p + strlen(pat) : NULL;
}

static uint64_t get_u64(const char *line, const char *key)
{
    const char *p = value_of(line, key);
    return p ? strtoull(p, NULL, 10) : 0;
}

static int get_int(const char *line, const char *key, int dflt)
{
    const char *p = value_of(line, key);
    return p ? (int)strtol(p, NULL, 10) : dflt;
}

/* A JSON string value, unescaped (\uXXXX of control bytes kept as '?').
 * Raw control bytes become '?' too: a crafted dump must not send ESC or
 * BEL sequences to the terminal that prints the report. */
static void get_str(const char *line, const char *key, char *out, size_t len)
{
    const char *p = value_of(line, key);
    size_t n = 0;
    out[0] = '\0';
    if (!p || *p != '"')
        return;
    for (p++; *p && *p != '"' && n + 1 < len; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            if (*p == 'u') {
                p += strlen(p) >= 5 ? 4 : 0;
                out[n++] = '?';
                continue;
            }
        }
        unsigned char ch = (unsigned char)*p;
        out[n++] = ch < 0x20 || ch == 0x7f ? '?' : *p;
    }
    out[n] = '\0';
}

/* An array of ints; returns how many (at most max). */
static int get_ints(const char *line, const char *key, int *out, int max)
{
    const char *p = value_of(line, key);
    int n = 0;
    if (!p || *p != '[')
        return 0;
    p++;
    while (*p && *p != ']' && n < max) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int read_comm(const char *line, struct doc_dump *d)
{
    struct doc_comm *more = realloc(d->comms, (d->ncomms + 1) * sizeof *more);
    if (!more)
        return -1;
    d->comms = more;
    struct doc_comm *c = &d->comms[d->ncomms++];
    memset(c, 0, sizeof *c);
    c->id = (uint32_t)get_u64(line, "comm");
    c->comm_rank = get_int(line, "comm_rank", -1);
    c->comm_size = get_int(line, "comm_size", 0);
    /* Every number that indexes something in tide-doctor is checked
     * here, once: a communicator within the job, members that are ranks
     * of it. */
    if (c->comm_size <= 0 || c->comm_size > d->size || c->comm_rank < 0 ||
        c->comm_rank >= c->comm_size)
        return -1;
    c->members = calloc((size_t)c->comm_size, sizeof *c->members);
    if (!c->members)
        return -1;
    if (get_ints(line, "members", c->members, c->comm_size) != c->comm_size)
        return -1;
    for (int r = 0; r < c->comm_size; r++)
        if (c->members[r] < 0 || c->members[r] >= d->size)
            return -1;
    c->called = get_u64(line, "called");
    get_str(line, "first_error", c->first_error, sizeof c->first_error);
    return 0;
}

static int read_op(const char *line, struct doc_comm *c)
{
    if (c->nops == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct doc_op *more = realloc(c->ops, cap * sizeof *more);
        if (!more)
            return -1;
        c->ops = more;
        c->cap = cap;
    }
    struct doc_op *o = &c->ops[c->nops++];
    memset(o, 0, sizeof *o);
    o->seq = get_u64(line, "seq");
    o->count = get_u64(line, "count");
    o->bytes = get_u64(line, "bytes");
    o->root = get_int(line, "root", -1);
    get_str(line, "kind", o->kind, sizeof o->kind);
    get_str(line, "dtype", o->dtype, sizeof o->dtype);
    get_str(line, "op", o->op, sizeof o->op);
    get_str(line, "algorithm", o->algorithm, sizeof o->algorithm);
    get_str(line, "state", o->state, sizeof o->state);
    get_str(line, "status", o->status, sizeof o->status);
    o->post_ns = get_u64(line, "post_ns");
    o->start_ns = get_u64(line, "start_ns");
    o->end_ns = get_u64(line, "end_ns");
    o->nwaits = get_ints(line, "waits_for", o->waits_for, DOC_PEERS);
    o->nsends = get_ints(line, "sends_to", o->sends_to, DOC_PEERS);
    return 0;
}

static int read_line(const char *line, struct doc_dump *d, int lineno, char *err, size_t errlen)
{
    int rc = 0;
    if (lineno == 1) {
        if (!value_of(line, "tide_dump")) {
            snprintf(err, errlen, "not a tide flight-recorder dump");
            return -1;
        }
        d->rank = get_int(line, "rank", -1);
        d->size = get_int(line, "size", 0);
        /* The size sizes the doctor's table of ranks: a crafted one must
         * not cost gigabytes. */
        if (d->size < 1 || d->size > DOC_MAX_RANKS || d->rank < 0 || d->rank >= d->size) {
            snprintf(err, errlen, "rank %d of size %d: not a job of 1 to %d ranks", d->rank,
                     d->size, DOC_MAX_RANKS);
            return -1;
        }
        get_str(line, "reason", d->reason, sizeof d->reason);
        d->now_ns = get_u64(line, "now_ns");
        d->wall_ns = get_u64(line, "wall_ns");
    } else if (!strncmp(line, "{\"comm\":", 8)) {
        rc = read_comm(line, d);
    } else if (!strncmp(line, "{\"seq\":", 7)) {
        rc = d->ncomms ? read_op(line, &d->comms[d->ncomms - 1]) : -1;
    }
    if (rc)
        snprintf(err, errlen, "line %d is malformed or memory ran out", lineno);
    return rc;
}

int doc_dump_read(const char *path, struct doc_dump *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s", strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0;
    ssize_t got;
    while (rc == 0 && (got = getline(&line, &cap, f)) > 0) {
        rc = read_line(line, d, ++lineno, err, errlen);
        /* The writer ends with the last communicator's "]}", the list's
         * "]" and the dump's "}", then a newline: anything else was cut
         * short (a rank killed while writing, a full disk). */
        d->truncated = got < 5 || strcmp(line + got - 5, "]}]}\n") != 0;
    }
    free(line);
    fclose(f);
    if (rc == 0 && (d->rank < 0 || d->ncomms == 0)) {
        snprintf(err, errlen, "no rank or no communicator in it");
        rc = -1;
    }
    if (rc)
        doc_dump_free(d);
    return rc;
}

void doc_dump_free(struct doc_dump *d)
{
    for (size_t i = 0; i < d->ncomms; i++) {
        free(d->comms[i].members);
        free(d->comms[i].ops);
    }
    free(d->comms);
    d->comms = NULL;
    d->ncomms = 0;
}

const struct doc_op *doc_find_op(const struct doc_comm *c, uint64_t seq)
{
    for (size_t i = 0; i < c->nops; i++)
        if (c->ops[i].seq == seq)
            return &c->ops[i];
    return NULL;
}

uint64_t doc_last_seq(const struct doc_comm *c)
{
    uint64_t last = 0;
    for (size_t i = 0; i < c->nops; i++)
        if (c->ops[i].seq > last)
            last = c->ops[i].seq;
    return last;
}

uint64_t doc_wall(const struct doc_dump *d, uint64_t t)
{
    return d->wall_ns - (d->now_ns - t);
}
