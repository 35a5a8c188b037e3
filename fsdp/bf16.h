/* bf16.h - float32 <-> bfloat16 for all-gathers in bfloat16.  The gathered
 * bytes are widened in place, inside the float32 buffer they arrived in,
 * so a bfloat16 gather needs no second full-size buffer. */
#ifndef TIDE_FSDP_BF16_H
#define TIDE_FSDP_BF16_H

#include <stddef.h>
#include <stdint.h>

/* Round to nearest, ties to even (NaN stays NaN). */
uint16_t tide__fsdp_to_bf16(float x);

/* Narrow n floats into dst. */
void tide__fsdp_narrow(const float *src, uint16_t *dst, size_t n);

/* buf holds n floats' worth of bytes whose upper half (bytes 2n..4n)
 * holds n bfloat16 values; widen them into buf[0..n) in place. */
void tide__fsdp_widen_in_place(float *buf, size_t n);

/* Where the bfloat16 values must be for tide__fsdp_widen_in_place. */
uint16_t *tide__fsdp_bf16_area(float *buf, size_t n);

#endif
