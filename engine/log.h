/* log.h - the engine's only way to print: leveled lines on stderr.
 * The library never prints through anything else (no perror, no printf). */
#ifndef TIDE_LOG_H
#define TIDE_LOG_H

#include <stddef.h>

enum { TIDE_LOG_ERROR = 0, TIDE_LOG_WARN = 1, TIDE_LOG_INFO = 2, TIDE_LOG_DEBUG = 3 };

/* Set once per process by tide_init (write-once global, see STYLE.md). */
void tide__log_set_level(int level);
int tide__log_enabled(int level);

/* Print "tide[rank R] level: message\n" if level is enabled (rank < 0: no
 * rank).  One write(2) per line so ranks sharing a terminal don't mangle
 * each other's lines. */
void tide__log(int level, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Copy text a peer sent (len bytes, not terminated) into dst as one
 * printable line of at most cap - 1 characters: any byte outside
 * printable ASCII becomes '?', so a peer cannot write escape sequences,
 * bells or fake lines into our logs, tide_req_message or tracebacks. */
void tide__printable_copy(char *dst, size_t cap, const void *src, size_t len);

#endif
