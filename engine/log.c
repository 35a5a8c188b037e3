/* log.c - leveled logging to stderr, one write per line. */
#include "engine/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static int log_level = TIDE_LOG_WARN;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void tide__log_set_level(int level)
{
    log_level = level;
}

int tide__log_enabled(int level)
{
    return level <= log_level;
}

void tide__log(int level, int rank, const char *fmt, ...)
{
    if (!tide__log_enabled(level))
        return;
    if (level < 0 || level > TIDE_LOG_DEBUG)
        level = TIDE_LOG_DEBUG;

    char line[1024];
    int n;
    if (rank >= 0)
        n = snprintf(line, sizeof line, "tide[rank %d] %s: ", rank, level_names[level]);
    else
        n = snprintf(line, sizeof line, "tide %s: ", level_names[level]);
    if (n < 0)
        return;

    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;

    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nothing sensible to do if stderr is gone */
}
