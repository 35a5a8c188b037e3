/* log.c - leveled logging to stderr, one write per line.  A line says
 * which rank, when (UTC, to the microsecond) and where (host:pid), so the
 * stderr of a job's ranks, merged by a launcher or a batch system, can be
 * put back in order and matched with other hosts' logs:
 *
 *   tide[rank 3] 16:01:02.123456Z node7:4321 warning: lost rank 2: ... */
#include "engine/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
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

void tide__printable_copy(char *dst, size_t cap, const void *src, size_t len)
{
    const unsigned char *s = src;
    size_t k = 0;
    if (!cap)
        return;
    for (; k < len && k < cap - 1; k++)
        dst[k] = s[k] >= 0x20 && s[k] < 0x7f ? (char)s[k] : '?';
    dst[k] = '\0';
}

void tide__log(int level, int rank, const char *fmt, ...)
{
    if (!tide__log_enabled(level))
        return;
    if (level < 0 || level > TIDE_LOG_DEBUG)
        level = TIDE_LOG_DEBUG;

    char line[1024], who[24] = "tide", host[64] = "?";
    if (rank >= 0)
        snprintf(who, sizeof who, "tide[rank %d]", rank);
    if (gethostname(host, sizeof host) != 0)
        host[0] = '?', host[1] = '\0';
    host[sizeof host - 1] = '\0';
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%s %02d:%02d:%02d.%06ldZ %s:%d %s: ", who, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, now.tv_nsec / 1000, host, (int)getpid(),
                     level_names[level]);
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
