/* cli.h - the command line of a tool whose only options are -h/--help
 * and --version, as its peers answer them. */
#ifndef TIDE_CLI_H
#define TIDE_CLI_H

/* Parses argv with getopt_long: -h and --help print usage on stdout,
 * --version prints "NAME VERSION", both exit status 0; an unknown option
 * is a usage error on stderr, status 2.  Returns -1 to go on, with the
 * operands at argv[optind..argc-1]; else the status to exit with. */
int cli_help_version(int argc, char **argv, const char *name, const char *usage,
                     const char *version);

#endif
