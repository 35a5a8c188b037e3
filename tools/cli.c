/* cli.c - see cli.h.  Links nothing of libtide: tide-doctor uses it. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>

int cli_help_version(int argc, char **argv, const char *name, const char *usage,
                     const char *version)
{
    static const struct option longs[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout); /* asked for: not an error */
            return 0;
        }
        if (c == 'V') {
            printf("%s %s\n", name, version);
            return 0;
        }
        fprintf(stderr, "%s: see %s --help\n", name, name); /* getopt said what */
        return 2;
    }
    return -1;
}
