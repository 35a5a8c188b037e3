/* launcher_hosts.c - see launcher_hosts.h. */
#include "tools/launcher/launcher_hosts.h"
#include "tools/common/cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_HOSTS = 1024, MAX_SLOTS = 1024 };

static int slots_of(const char *text, long *out)
{
    return cli_parse_long(text, 1, MAX_SLOTS, out) ? 0 : -1;
}

/* Add slots to host `name` (a new one at the end, or the one of that
 * name).  0, or -1 with why. */
static int add_host(struct host_plan *p, const char *name, size_t name_len, int slots, char *why,
                    size_t len)
{
    if (name_len == 0) {
        snprintf(why, len, "a host with no name");
        return -1;
    }
    for (int i = 0; i < p->n; i++) {
        if (strlen(p->hosts[i].name) == name_len && !strncmp(p->hosts[i].name, name, name_len)) {
            p->hosts[i].slots += slots;
            return 0;
        }
    }
    if (p->n == MAX_HOSTS) {
        snprintf(why, len, "more than %d hosts", MAX_HOSTS);
        return -1;
    }
    struct host *grown = realloc(p->hosts, ((size_t)p->n + 1) * sizeof *grown);
    char *copy = strndup(name, name_len);
    if (!grown || !copy) {
        free(copy);
        if (grown)
            p->hosts = grown;
        snprintf(why, len, "out of memory");
        return -1;
    }
    p->hosts = grown;
    p->hosts[p->n++] = (struct host){.name = copy, .slots = slots, .local = hosts_is_local(copy)};
    return 0;
}

int hosts_add_list(struct host_plan *p, const char *list, char *why, size_t len)
{
    const char *at = list;
    for (;;) {
        size_t n = strcspn(at, ",");
        char entry[512];
        if (n >= sizeof entry) {
            snprintf(why, len, "host entry too long: %.40s...", at);
            return -1;
        }
        memcpy(entry, at, n);
        entry[n] = '\0';
        char *colon = strrchr(entry, ':');
        long slots = 1;
        if (colon && slots_of(colon + 1, &slots) != 0) {
            snprintf(why, len, "bad slot count in '%s' (1 to %d)", entry, MAX_SLOTS);
            return -1;
        }
        size_t name_len = colon ? (size_t)(colon - entry) : n;
        if (add_host(p, entry, name_len, (int)slots, why, len) != 0)
            return -1;
        if (at[n] == '\0')
            return 0;
        at += n + 1;
    }
}

/* One hostfile line, comment and blanks stripped: "NAME", "NAME:N" or
 * "NAME slots=N".  0, or -1 with why. */
static int add_line(struct host_plan *p, char *line, char *why, size_t len)
{
    char *name = line + strspn(line, " \t");
    size_t name_len = strcspn(name, " \t");
    char *rest = name + name_len;
    rest += strspn(rest, " \t");
    long slots = 1;
    if (*rest) {
        if (strncmp(rest, "slots=", 6) != 0 || slots_of(rest + 6, &slots) != 0) {
            snprintf(why, len, "'%s' is not slots=N (N from 1 to %d)", rest, MAX_SLOTS);
            return -1;
        }
    } else {
        char *colon = memchr(name, ':', name_len);
        if (colon) {
            name[name_len] = '\0';
            if (slots_of(colon + 1, &slots) != 0) {
                snprintf(why, len, "bad slot count in '%s' (1 to %d)", name, MAX_SLOTS);
                return -1;
            }
            name_len = (size_t)(colon - name);
        }
    }
    return add_host(p, name, name_len, (int)slots, why, len);
}

int hosts_add_file(struct host_plan *p, const char *path, char *why, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, len, "cannot read hostfile %s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024], what[256];
    int number = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        number++;
        line[strcspn(line, "#\r\n")] = '\0';
        size_t end = strlen(line);
        while (end > 0 && isspace((unsigned char)line[end - 1]))
            line[--end] = '\0';
        if (line[strspn(line, " \t")] == '\0')
            continue;
        rc = add_line(p, line, what, sizeof what);
        if (rc != 0)
            snprintf(why, len, "%s, line %d: %s", path, number, what);
    }
    fclose(f);
    if (rc == 0 && p->n == 0) {
        snprintf(why, len, "hostfile %s names no host", path);
        rc = -1;
    }
    return rc;
}

int hosts_place(struct host_plan *p, int np, char *why, size_t len)
{
    long slots = 0;
    for (int i = 0; i < p->n; i++)
        slots += p->hosts[i].slots;
    if (np == 0)
        np = slots > INT_MAX ? INT_MAX : (int)slots;
    if (np > slots) {
        snprintf(why, len, "%d ranks do not fit the %ld slots of the hosts given", np, slots);
        return -1;
    }
    int placed = 0, kept = 0;
    for (int i = 0; i < p->n; i++) {
        struct host h = p->hosts[i];
        h.nranks = np - placed < h.slots ? np - placed : h.slots;
        h.first_rank = placed;
        placed += h.nranks;
        if (h.nranks == 0) {
            free(h.name);
            continue;
        }
        p->hosts[kept++] = h;
    }
    p->n = kept;
    p->world = np;
    return 0;
}

bool hosts_is_local(const char *name)
{
    char me[256];
    if (!strcmp(name, "localhost") || !strncmp(name, "127.", 4) || !strcmp(name, "::1"))
        return true;
    if (gethostname(me, sizeof me) != 0)
        return false;
    me[sizeof me - 1] = '\0';
    return !strcmp(name, me);
}

/* ---- the remote command ---- */

static bool agent_uses_a_shell(const char *agent)
{
    size_t n = strcspn(agent, " ");
    const char *base = agent;
    for (size_t i = 0; i < n; i++)
        if (agent[i] == '/')
            base = agent + i + 1;
    size_t b = n - (size_t)(base - agent);
    return b == 3 && (!strncmp(base, "ssh", 3) || !strncmp(base, "rsh", 3));
}

/* s as one word of a POSIX shell: '...' with each ' as '\''. */
static char *shell_quote(const char *s)
{
    size_t quotes = 0;
    for (const char *c = s; *c; c++)
        quotes += *c == '\'';
    char *out = malloc(strlen(s) + 3 * quotes + 3);
    if (!out)
        return NULL;
    char *w = out;
    *w++ = '\'';
    for (const char *c = s; *c; c++) {
        if (*c == '\'') {
            memcpy(w, "'\\''", 4);
            w += 4;
        } else {
            *w++ = *c;
        }
    }
    *w++ = '\'';
    *w = '\0';
    return out;
}

struct words {
    char **v;
    size_t n, cap;
    bool quote; /* words after the host go through a remote shell */
    bool failed;
};

static void push(struct words *w, const char *s, bool remote)
{
    if (w->failed)
        return;
    if (w->n + 2 > w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 32;
        char **grown = realloc(w->v, cap * sizeof *grown);
        if (!grown) {
            w->failed = true;
            return;
        }
        w->v = grown;
        w->cap = cap;
    }
    char *copy = remote && w->quote ? shell_quote(s) : strdup(s);
    if (!copy) {
        w->failed = true;
        return;
    }
    w->v[w->n++] = copy;
    w->v[w->n] = NULL;
}

static void push_int(struct words *w, const char *option, int value)
{
    char text[16];
    snprintf(text, sizeof text, "%d", value);
    push(w, option, true);
    push(w, text, true);
}

char **hosts_remote_argv(const char *agent, const struct host *h, int node_rank,
                         const char *tide_run, char *const *tail, char *const *program)
{
    struct words w = {.quote = agent_uses_a_shell(agent)};
    char *words = strdup(agent), *save = NULL;
    if (!words)
        return NULL;
    for (char *t = strtok_r(words, " ", &save); t; t = strtok_r(NULL, " ", &save))
        push(&w, t, false);
    free(words);
    push(&w, h->name, false);
    push(&w, tide_run, true);
    push_int(&w, "-n", h->nranks);
    push_int(&w, "--first-rank", h->first_rank);
    push_int(&w, "--node-rank", node_rank);
    for (int i = 0; tail[i]; i++)
        push(&w, tail[i], true);
    push(&w, "--", true);
    for (int i = 0; program[i]; i++)
        push(&w, program[i], true);
    if (!w.failed)
        return w.v;
    hosts_argv_free(w.v);
    return NULL;
}

void hosts_argv_free(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

void hosts_free(struct host_plan *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->hosts[i].name);
    free(p->hosts);
    *p = (struct host_plan){0};
}
