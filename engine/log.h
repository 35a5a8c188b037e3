/* log.h - the engine's only way to print: leveled lines on stderr.
 * The library never prints through anything else (no perror, no printf). */
#ifndef TIDE_LOG_H
#define TIDE_LOG_H

enum { TIDE_LOG_ERROR = 0, TIDE_LOG_WARN = 1, TIDE_LOG_INFO = 2, TIDE_LOG_DEBUG = 3 };

/* Set once per process by tide_init (write-once global, see STYLE.md). */
void tide__log_set_level(int level);
int tide__log_enabled(int level);

/* Print "tide[rank R] level: message\n" if level is enabled (rank < 0: no
 * rank).  One write(2) per line so ranks sharing a terminal don't mangle
 * each other's lines. */
void tide__log(int level, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
