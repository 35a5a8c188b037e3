/* doctor.c - tide-doctor DIR: read the flight-recorder dumps of every rank
 * of a job (TIDE_DUMP_DIR, one tide-dump-<rank>.json each) and say in a
 * few lines who is behind and where:
 *
 *   rank 3 never entered allreduce #170 on world (its last was #169, posted 4.1 s ago); ranks 0,1,2 wait for it
 *
 * and which ranks called different collectives at the same sequence
 * number, which ranks left no dump, and what the first errors were.
 * Exit status: 0 when nothing looks wrong, 1 when something does, 2 when
 * the dumps cannot be read. */
#include "tide.h"
#include "tools/common/cli.h"
#include "tools/doctor/doctor_dump.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job {
    struct doc_dump *by_rank; /* indexed by world rank; rank -1: no dump */
    int size;
    uint64_t ref_wall; /* the latest dump: "ago" is measured from it */
    int findings;
};

/* "0,1,2" or "0-5,9": ranks (sorted) as a short list; runs of three or
 * more become ranges. */
static void rank_list(const int *r, int n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at < len; i++) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1)
            j++;
        bool range = j > i + 1;
        int k = range ? snprintf(buf + at, len - at, "%s%d-%d", i ? "," : "", r[i], r[j])
                      : snprintf(buf + at, len - at, "%s%d", i ? "," : "", r[i]);
        if (k < 0)
            break;
        at += (size_t)k;
        if (range)
            i = j;
    }
}

static const char *plural(int n)
{
    return n == 1 ? "" : "s";
}

/* "world", or "comm 2 (ranks 1,3)": ids alone repeat across a split. */
static void comm_name(const struct doc_comm *c, char *buf, size_t len)
{
    if (c->id == 1) {
        snprintf(buf, len, "world");
        return;
    }
    char members[200];
    rank_list(c->members, c->comm_size, members, sizeof members);
    snprintf(buf, len, "comm %u (ranks %s)", c->id, members);
}

/* "allreduce of 8 int32 (sum)": what an op was, to compare and to print. */
static void signature(const struct doc_op *o, char *buf, size_t len)
{
    if (!strcmp(o->kind, "barrier")) {
        snprintf(buf, len, "barrier");
        return;
    }
    bool reduces = strstr(o->kind, "reduce") != NULL;
    int n = snprintf(buf, len, "%s of %llu %s", o->kind, (unsigned long long)o->count, o->dtype);
    if (reduces && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " (%s)", o->op);
    if (o->root >= 0 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " from root %d", o->root);
}

/* One communicator in two dumps?  Ids are unique only within a rank (the
 * two halves of a split may both be comm 2), so the members decide too. */
static bool same_comm(const struct doc_comm *a, const struct doc_comm *b)
{
    return a->id == b->id && a->comm_size == b->comm_size &&
           !memcmp(a->members, b->members, (size_t)a->comm_size * sizeof *a->members);
}

/* World rank w's view of communicator `like`, or NULL. */
static const struct doc_comm *view(const struct job *j, int w, const struct doc_comm *like)
{
    if (w < 0 || w >= j->size || j->by_rank[w].rank < 0)
        return NULL;
    const struct doc_dump *d = &j->by_rank[w];
    for (size_t i = 0; i < d->ncomms; i++)
        if (same_comm(&d->comms[i], like))
            return &d->comms[i];
    return NULL;
}

static double ago_s(const struct job *j, int w, uint64_t t)
{
    return (double)(j->ref_wall - doc_wall(&j->by_rank[w], t)) / 1e9;
}

/* The first sequence number at which members called different things. */
static void find_mismatch(struct job *j, const struct doc_comm *any, uint64_t last)
{
    uint64_t first = last > 255 ? last - 255 : 1;
    char cname[256];
    comm_name(any, cname, sizeof cname);
    for (uint64_t s = first; s <= last; s++) {
        char sig0[128] = "", sig[128];
        int same[1024], other[1024], ns = 0, no = 0, odd = -1;
        for (int m = 0; m < any->comm_size && m < 1024; m++) {
            const struct doc_comm *c = view(j, any->members[m], any);
            const struct doc_op *o = c ? doc_find_op(c, s) : NULL;
            if (!o)
                continue;
            signature(o, sig, sizeof sig);
            if (!sig0[0])
                snprintf(sig0, sizeof sig0, "%s", sig);
            if (!strcmp(sig, sig0))
                same[ns++] = any->members[m];
            else
                other[no++] = any->members[m], odd = any->members[m];
        }
        if (!no)
            continue;
        const struct doc_op *oo = doc_find_op(view(j, odd, any), s);
        signature(oo, sig, sizeof sig);
        char a[256], b[256];
        rank_list(other, no, a, sizeof a);
        rank_list(same, ns, b, sizeof b);
        if (no > ns) /* the smaller group first: it is the likelier culprit */
            printf("mismatch at #%llu on %s: rank%s %s called %s; rank%s %s called %s\n",
                   (unsigned long long)s, cname, plural(ns), b, sig0, plural(no), a, sig);
        else
            printf("mismatch at #%llu on %s: rank%s %s called %s; rank%s %s called %s\n",
                   (unsigned long long)s, cname, plural(no), a, sig, plural(ns), b, sig0);
        j->findings++;
        return;
    }
}

/* Members that entered seq and have not finished it. */
static int waiting_in(const struct job *j, const struct doc_comm *any, uint64_t seq, int *out)
{
    int n = 0;
    for (int m = 0; m < any->comm_size; m++) {
        const struct doc_comm *c = view(j, any->members[m], any);
        const struct doc_op *o = c ? doc_find_op(c, seq) : NULL;
        if (o && strcmp(o->state, "done"))
            out[n++] = any->members[m];
    }
    return n;
}

/* Rank w, whose dump's last collective on the comm is before last. */
static void report_behind(struct job *j, const struct doc_comm *any, int w, uint64_t last,
                          const struct doc_op *ahead, const int *waiters, int nw)
{
    const struct doc_comm *c = view(j, w, any);
    uint64_t mine = doc_last_seq(c);
    const struct doc_op *o = doc_find_op(c, mine);
    char cname[256], who[256], since[96] = "";
    comm_name(any, cname, sizeof cname);
    rank_list(waiters, nw, who, sizeof who);
    if (o)
        snprintf(since, sizeof since, "its last was #%llu, %s, posted %.1f s ago",
                 (unsigned long long)mine, o->state, ago_s(j, w, o->post_ns));
    else
        snprintf(since, sizeof since, "it has run none");
    printf("rank %d never entered %s #%llu on %s (%s%s)", w, ahead->kind,
           (unsigned long long)(mine + 1), cname, since,
           c->called > mine ? "; it called the next one but never started it" : "");
    if (nw)
        printf("; rank%s %s wait%s for it", plural(nw), who, nw == 1 ? "s" : "");
    printf("\n");
    (void)last;
    j->findings++;
}

/* Ranks without a dump that members' pending ops wait on. */
static void report_silent(struct job *j, const struct doc_comm *any, uint64_t last)
{
    char cname[256];
    comm_name(any, cname, sizeof cname);
    for (int m = 0; m < any->comm_size; m++) {
        int w = any->members[m];
        if (view(j, w, any))
            continue;
        int who[1024], n = 0;
        const char *kind = "its collective";
        for (int k = 0; k < any->comm_size && n < 1024; k++) {
            const struct doc_comm *c = view(j, any->members[k], any);
            const struct doc_op *o = c ? doc_find_op(c, last) : NULL;
            if (!o || !strcmp(o->state, "done"))
                continue;
            bool named = false;
            for (int i = 0; i < o->nwaits; i++)
                named |= o->waits_for[i] == w;
            for (int i = 0; i < o->nsends; i++)
                named |= o->sends_to[i] == w;
            if (named)
                who[n++] = any->members[k], kind = o->kind;
        }
        if (!n)
            continue;
        char list[256];
        rank_list(who, n, list, sizeof list);
        printf("rank%s %s wait%s for rank %d in %s #%llu on %s; rank %d left no dump\n", plural(n),
               list, n == 1 ? "s" : "", w, kind, (unsigned long long)last, cname, w);
        j->findings++;
    }
}

static void analyse_comm(struct job *j, const struct doc_comm *any)
{
    uint64_t last = 0;
    const struct doc_op *ahead = NULL;
    for (int m = 0; m < any->comm_size; m++) {
        const struct doc_comm *c = view(j, any->members[m], any);
        if (c && doc_last_seq(c) > last) {
            last = doc_last_seq(c);
            ahead = doc_find_op(c, last);
        }
    }
    if (!ahead)
        return;
    find_mismatch(j, any, last);
    int *waiters = malloc((size_t)any->comm_size * sizeof *waiters);
    if (!waiters) {
        fprintf(stderr, "tide-doctor: out of memory\n");
        return;
    }
    int nw = waiting_in(j, any, last, waiters);
    for (int m = 0; m < any->comm_size; m++) {
        int w = any->members[m];
        const struct doc_comm *c = view(j, w, any);
        if (c && doc_last_seq(c) < last)
            report_behind(j, any, w, last, ahead, waiters, nw);
    }
    free(waiters);
    report_silent(j, any, last);
}

/* The rank a loss error names first: "rank 3 was lost", or the peer of
 * the failed send, receive or board flag (collectives/board.c).  -1 when msg is no loss. */
static int lost_rank(const char *msg)
{
    const char *p = strstr(msg, "): ");
    int k;
    if (!p || !strstr(msg, "a peer rank was lost"))
        return -1;
    p += 3;
    if (sscanf(p, "rank %d was lost", &k) == 1 || sscanf(p, "send to rank %d", &k) == 1 ||
        sscanf(p, "receive from rank %d", &k) == 1 ||
        sscanf(p, "waiting for the board flag from rank %d", &k) == 1)
        return k;
    return -1;
}

/* The first error each rank kept: a few lines, and who was lost. */
static void report_errors(struct job *j)
{
    int shown = 0, lost = -1, named[1024], nn = 0;
    for (int w = 0; w < j->size; w++) {
        for (size_t i = 0; j->by_rank[w].rank >= 0 && i < j->by_rank[w].ncomms; i++) {
            const char *e = j->by_rank[w].comms[i].first_error;
            if (!e[0])
                continue;
            if (shown++ < 3)
                printf("first error: %s\n", e);
            int l = lost_rank(e);
            if (l >= 0 && (lost < 0 || l == lost) && nn < 1024)
                lost = l, named[nn++] = w;
            j->findings++;
            break;
        }
    }
    if (lost >= 0) {
        char list[256];
        rank_list(named, nn, list, sizeof list);
        printf("rank %d was lost (rank%s %s say%s so)\n", lost, plural(nn), list,
               nn == 1 ? "s" : "");
    }
}

static int load(struct job *j, const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "tide-doctor: cannot open %s\n", dir);
        return -1;
    }
    struct dirent *e;
    int loaded = 0;
    while ((e = readdir(dp))) {
        int r;
        char tail[8];
        if (sscanf(e->d_name, "tide-dump-%d.jso%1[n]", &r, tail) != 2 || strstr(e->d_name, ".tmp"))
            continue;
        char path[4096], err[200];
        struct doc_dump d;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (doc_dump_read(path, &d, err, sizeof err) < 0) {
            fprintf(stderr, "tide-doctor: %s: %s\n", path, err);
            continue;
        }
        if (d.size > j->size) {
            struct doc_dump *more = realloc(j->by_rank, (size_t)d.size * sizeof *more);
            if (!more)
                break;
            for (int k = j->size; k < d.size; k++)
                more[k].rank = -1, more[k].comms = NULL, more[k].ncomms = 0;
            j->by_rank = more;
            j->size = d.size;
        }
        if (d.rank >= j->size || j->by_rank[d.rank].rank >= 0) {
            doc_dump_free(&d);
            continue;
        }
        j->by_rank[d.rank] = d;
        if (d.wall_ns > j->ref_wall)
            j->ref_wall = d.wall_ns;
        loaded++;
    }
    closedir(dp);
    return loaded;
}

/* Every communicator seen, each analysed once (from the first dump that
 * has it). */
static void analyse_all(struct job *j)
{
    const struct doc_comm *seen[256];
    int nseen = 0;
    for (int w = 0; w < j->size; w++) {
        for (size_t i = 0; j->by_rank[w].rank >= 0 && i < j->by_rank[w].ncomms; i++) {
            const struct doc_comm *c = &j->by_rank[w].comms[i];
            bool done = false;
            for (int k = 0; k < nseen; k++)
                done |= same_comm(seen[k], c);
            if (done || nseen == 256)
                continue;
            seen[nseen++] = c;
            analyse_comm(j, c);
        }
    }
}

static const char usage[] =
    "Usage: tide-doctor DIR\n"
    "\n"
    "Reads the flight-recorder dumps (TIDE_DUMP_DIR) of a job's ranks and\n"
    "says who is behind and where.\n"
    "\n"
    "  -h, --help   print this help\n"
    "  --version    print tide's version\n"
    "\n"
    "Exit status: 0 nothing wrong found; 1 see the report; 2 no dump could\n"
    "be read.\n";

/* -1 to go on with the directory at argv[optind]; else the exit status
 * (0 after --help or --version, 2 on misuse). */
static int parse_args(int argc, char **argv)
{
    /* Not tide_version(): the doctor only reads files and links no
     * libtide (meson.build), so tide.h's numbers, the release it was
     * built from, are its version. */
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", TIDE_VERSION_MAJOR, TIDE_VERSION_MINOR,
             TIDE_VERSION_PATCH);
    const struct cli_tool tool = {.name = "tide-doctor", .usage = usage, .version = version};
    int rc = cli_help_version(&tool, argc, argv);
    if (rc >= 0 || argc - optind == 1)
        return rc;
    return cli_usage_error(&tool, "%s", optind == argc ? "name the dump directory"
                                                       : "one dump directory, please");
}

int main(int argc, char **argv)
{
    int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    const char *dir = argv[optind];
    struct job j = {0};
    int n = load(&j, dir);
    if (n <= 0) {
        fprintf(stderr, "tide-doctor: no readable tide-dump-*.json in %s\n", dir);
        return 2;
    }
    int *missing = malloc((size_t)j.size * sizeof *missing), nm = 0;
    for (int w = 0; missing && w < j.size; w++)
        if (j.by_rank[w].rank < 0)
            missing[nm++] = w;
    printf("tide-doctor: dumps from %d of %d ranks\n", n, j.size);
    if (nm) {
        char list[512];
        rank_list(missing, nm, list, sizeof list);
        if (nm == 1)
            printf("no dump from rank %s: dead, or stopped and never resumed\n", list);
        else
            printf("no dump from %d ranks (%s%s): dead, or stopped and never resumed\n", nm,
                   list, strlen(list) + 1 >= sizeof list ? "..." : "");
        j.findings++;
    }
    free(missing);
    for (int w = 0; w < j.size; w++) {
        if (j.by_rank[w].rank >= 0 && j.by_rank[w].truncated) {
            printf("rank %d's dump is cut short: its last operations may be missing\n", w);
            j.findings++;
        }
    }
    analyse_all(&j);
    report_errors(&j);
    if (!j.findings)
        printf("nothing looks wrong: every rank finished the same collectives\n");
    for (int w = 0; w < j.size; w++)
        if (j.by_rank[w].rank >= 0)
            doc_dump_free(&j.by_rank[w]);
    free(j.by_rank);
    return j.findings ? 1 : 0;
}
