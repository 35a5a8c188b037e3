/* cli.c - see cli.h.  Links nothing of libtide: tide-doctor uses it. */
#include "tools/common/cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const struct cli_tool *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", t->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see %s --help)\n", t->name);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_bad_value(const struct cli_tool *t, int at, int c, const char *v)
{
    if (at >= 0)
        return cli_usage_error(t, "bad value '%s' for --%s", v, t->longs[at].name);
    return cli_usage_error(t, "bad value '%s' for -%c", v, c);
}

/* "--help=1": a long option of t's that takes no value was given one
 * (getopt_long says only '?', with the option's code in optopt). */
static bool given_a_value(const struct cli_tool *t, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2) != 0 || !eq || !optopt)
        return false;
    for (const struct option *o = t->longs; o && o->name; o++)
        if (o->val == optopt && o->has_arg == no_argument &&
            strncmp(o->name, arg + 2, (size_t)(eq - arg - 2)) == 0)
            return true;
    return false;
}

/* What getopt refused, worded like the tool's other usage errors: its own
 * message would name argv[0], often a path, and not --help.  argv[optind
 * - 1] is the word it stopped at, except for an unknown letter inside a
 * group such as -xq, which optopt names. */
static int refused(const struct cli_tool *t, int c, char **argv)
{
    const char *arg = argv[optind - 1];
    bool is_long = strncmp(arg, "--", 2) == 0;
    if (c == ':' && is_long)
        return cli_usage_error(t, "%s needs a value", arg);
    if (c == ':')
        return cli_usage_error(t, "-%c needs a value", optopt);
    if (given_a_value(t, arg))
        return cli_usage_error(t, "%.*s takes no value", (int)(strchr(arg, '=') - arg), arg);
    if (optopt)
        return cli_usage_error(t, "unknown option '-%c'", optopt);
    return cli_usage_error(t, "unknown option '%s'", arg);
}

int cli_common(const struct cli_tool *t, int c, char **argv)
{
    switch (c) {
    case 'h':
        if (!t->quiet)
            fputs(t->usage, stdout); /* asked for: not an error */
        return 0;
    case 'V':
        if (!t->quiet)
            printf("%s %s\n", t->name, t->version);
        return 0;
    case '?':
    case ':':
        return refused(t, c, argv);
    default:
        return -1;
    }
}

int cli_parse(const struct cli_tool *t, int argc, char **argv, const char *shorts,
              cli_take_fn take, void *ctx)
{
    int c, at = -1;
    while ((c = getopt_long(argc, argv, shorts, t->longs, &at)) != -1) {
        int rc = cli_common(t, c, argv);
        if (rc >= 0)
            return rc; /* --help or --version answered, or a usage error said */
        rc = take(ctx, c, at, optarg);
        if (rc < 0)
            return cli_bad_value(t, at, c, optarg);
        if (rc > 0)
            return rc;
        at = -1;
    }
    if (optind < argc)
        return cli_usage_error(t, "unexpected argument '%s'", argv[optind]);
    return -1;
}

int cli_help_version(const struct cli_tool *t, int argc, char **argv)
{
    static const struct option longs[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    struct cli_tool own = *t;
    own.longs = longs;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        int rc = cli_common(&own, c, argv);
        if (rc >= 0)
            return rc;
    }
    return -1;
}

bool cli_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (isspace((unsigned char)*s) || end == s || *end != '\0' || errno || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool cli_parse_int(const char *s, int min, int max, int *out)
{
    long v;
    if (!cli_parse_long(s, min, max, &v))
        return false;
    *out = (int)v;
    return true;
}

bool cli_parse_double(const char *s, double min, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (isspace((unsigned char)*s) || end == s || *end != '\0' || !isfinite(v) || v < min)
        return false;
    *out = v;
    return true;
}

int cli_split(const char *s, char sep, char *buf, size_t len, char **parts, int max)
{
    if ((size_t)snprintf(buf, len, "%s", s) >= len)
        return -1;
    int n = 0;
    for (char *p = buf; p; n++) {
        if (n == max)
            return -1;
        parts[n] = p;
        p = strchr(p, sep);
        if (p)
            *p++ = '\0';
    }
    return n;
}
