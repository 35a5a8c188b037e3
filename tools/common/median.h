/* median.h - the median of a run of measurements, as the tools report
 * them beside (or instead of) means: one stalled call in a hundred moves
 * a mean, not a median. */
#ifndef TIDE_TOOLS_MEDIAN_H
#define TIDE_TOOLS_MEDIAN_H

#include <stddef.h>

/* The median of v[0..n) (the mean of the middle two when n is even; 0
 * when n is 0).  Sorts v in place. */
double median_sort(double *v, size_t n);

#endif
