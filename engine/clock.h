/* clock.h - monotonic time in nanoseconds, the one clock of the engine. */
#ifndef TIDE_CLOCK_H
#define TIDE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define TIDE_NS_PER_US 1000ull
#define TIDE_NS_PER_MS 1000000ull
#define TIDE_NS_PER_S 1000000000ull

static inline uint64_t tide__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * TIDE_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* The same clock as of the kernel's last tick (1-4 ms ago): 3-6 ns a
 * read in a VM where tide__now_ns costs 25-45, for times that are only
 * shown, never waited on (the flight recorder's of a collective that
 * ended on the direct path, collectives/board.c). */
static inline uint64_t tide__coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * TIDE_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Seconds (possibly fractional, possibly huge) to a nanosecond span that
 * cannot overflow when added to now: capped at about 100 years. */
static inline uint64_t tide__seconds_to_ns(double s)
{
    if (s <= 0)
        return 0;
    if (s > 3.0e9)
        return 3000000000ull * TIDE_NS_PER_S;
    return (uint64_t)(s * 1e9);
}

#endif
