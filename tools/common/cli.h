/* cli.h - what every tide tool's command line does alike (issue 34):
 * -h and --help print usage on stdout and --version "NAME VERSION", both
 * with status 0; a usage error is one line on stderr,
 *     NAME: what is wrong (see NAME --help)
 * with status 2; numbers are read whole and range-checked.  Links nothing
 * of libtide, so tide-doctor can use it. */
#ifndef TIDE_CLI_H
#define TIDE_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

/* The exit status of a usage error. */
enum { CLI_EXIT_USAGE = 2 };

/* Who is answering. */
struct cli_tool {
    const char *name;    /* "tide-sim": messages and --version say it */
    const char *usage;   /* the --help text, its usage line first */
    const char *version; /* tide_version(), or tide.h's numbers without libtide */
    const struct option *longs; /* its getopt_long table: errors name its options */
    bool quiet; /* -h and --version answer 0 printing nothing (ranks but rank 0) */
};

/* Getopt's code c (from an option string that begins with ':', so that
 * getopt itself prints nothing) when it is one every tool answers alike:
 * 'h' and 'V' (--version) print (unless t->quiet) and return 0; '?' (an
 * unknown option, or a value given to one that takes none) and ':' (no
 * value) are said as usage errors, returning CLI_EXIT_USAGE.
 * Returns -1 for any other c: an option of the tool's own. */
int cli_common(const struct cli_tool *t, int c, char **argv);

/* How cli_parse hands a tool one of its own options: code c, `at` its
 * longindex into t->longs (-1 for the short form), arg its value (NULL
 * for none).  Returns 0 when taken; -1 when the value is bad (cli_parse
 * says so, as cli_bad_value); else the status of a usage error it has
 * said itself. */
typedef int (*cli_take_fn)(void *ctx, int c, int at, const char *arg);

/* A tool's whole command line: getopt_long over t->longs and `shorts`
 * (which must begin with ':'), what every tool answers alike through
 * cli_common, each option of the tool's own through take(ctx, ...), and
 * operands refused.  Returns -1 to go on (checks between options are
 * the tool's), else the status to exit with. */
int cli_parse(const struct cli_tool *t, int argc, char **argv, const char *shorts,
              cli_take_fn take, void *ctx);

/* The whole command line of a tool whose only options are -h, --help and
 * --version.  Returns -1 to go on, with the operands at
 * argv[optind..argc-1]; else the status to exit with. */
int cli_help_version(const struct cli_tool *t, int argc, char **argv);

/* Prints "NAME: WHAT (see NAME --help)", WHAT formatted as by printf, on
 * stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const struct cli_tool *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A usage error for value v of the option getopt_long just returned: c,
 * and at, its longindex into t->longs (-1 when the short form was used). */
int cli_bad_value(const struct cli_tool *t, int at, int c, const char *v);

/* Whether s is, whole, a decimal integer in [min, max] (a finite number
 * >= min), stored in *out; *out is left alone otherwise.  No leading
 * blanks, no trailing characters. */
bool cli_parse_long(const char *s, long min, long max, long *out);
bool cli_parse_int(const char *s, int min, int max, int *out);
bool cli_parse_double(const char *s, double min, double *out);

/* A list value such as "4,64,1024": s copied into buf (len bytes) and
 * cut at each sep, parts[i] pointing at each piece (empty pieces too, for
 * the parser of a piece to refuse).  Returns how many, or -1 when s does
 * not fit buf or has more than max pieces. */
int cli_split(const char *s, char sep, char *buf, size_t len, char **parts, int max);

#endif
