/* reduction.h - the elementwise reduction kernels the collectives apply to
 * received data, and the float16/bfloat16 conversions they rest on.  Pure
 * functions of their arguments: no state, safe from any thread. */
#ifndef TIDE_REDUCTION_H
#define TIDE_REDUCTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide.h"

#include "engine/dtypes.h"

/* Whether op applies to dtype: the bitwise ops only to integers. */
bool tide__op_fits(tide_op op, tide_dtype dtype);

/*
 * dst[i] = a[i] op b[i] for i < n, n counted in elements of dtype.
 * dst may be a, b or both (in place); partial overlap is not allowed.
 * AVG combines as SUM: tide__reduce_avg divides once at the end.
 * Integers wrap; float16/bfloat16 combine in float and round back to
 * nearest-even; MIN/MAX give a quiet NaN when either operand is NaN, and
 * otherwise prefer -0 (MIN) or +0 (MAX) so that a op b and b op a give
 * the same bits.  An invalid dtype or op leaves dst untouched.
 */
void tide__reduce(tide_dtype dtype, tide_op op, void *dst, const void *a, const void *b,
                  size_t n);

/* buf[i] /= group_size, the last step of AVG.  Integers use C's
 * truncating division (signed types as signed, so -7 / 2 = -3); float32
 * divides in float, float64 in double, float16/bfloat16 in float rounded
 * back to nearest-even.  group_size < 2 leaves buf untouched. */
void tide__reduce_avg(tide_dtype dtype, void *buf, size_t n, int group_size);

/* IEEE binary16 and bfloat16 <-> binary32.  Widening is exact (a NaN comes
 * back quiet); narrowing rounds to nearest-even, subnormals included,
 * overflows to infinity and turns a NaN into a quiet NaN of the same sign. */
float tide__half_to_float(uint16_t h);
uint16_t tide__float_to_half(float f);
float tide__bf16_to_float(uint16_t b);
uint16_t tide__float_to_bf16(float f);

#endif
