/* perf_check.h - tide-perf's -c 1: inputs with a per-rank pattern that
 * every dtype holds exactly, and a count of the output elements that
 * differ from what the collective must produce. */
#ifndef TIDE_PERF_CHECK_H
#define TIDE_PERF_CHECK_H

#include "tools/common/bench_common.h"

/* Write this rank's input for one call of shape s and poison the rest of
 * the output, so a call that writes nothing cannot pass. */
void perf_check_fill(struct bench *b, const struct bench_shape *s, bool inplace);

/* The number of this rank's output elements that are wrong after the
 * call (0 where the rank has no output, as a reduce's non-roots).  In
 * place and out of place, the output lands at the same place in recv. */
long perf_check_count(const struct bench *b, const struct bench_shape *s);

#endif /* TIDE_PERF_CHECK_H */
