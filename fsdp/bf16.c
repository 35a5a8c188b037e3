/* bf16.c - see bf16.h. */
#include "fsdp/bf16.h"

#include <string.h>

uint16_t tide__fsdp_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

void tide__fsdp_narrow(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = tide__fsdp_to_bf16(src[i]);
}

uint16_t *tide__fsdp_bf16_area(float *buf, size_t n)
{
    return (uint16_t *)(void *)((char *)buf + n * sizeof(uint16_t));
}

/* Going forwards is safe: float i occupies bytes [4i, 4i+4) and the first
 * value not yet read, i+1, sits at 2n + 2(i+1) >= 4i + 4 for i < n.  Both
 * sides go through bytes of the one buffer, so the compiler knows they
 * alias and keeps each read before the write that may cover it. */
void tide__fsdp_widen_in_place(float *buf, size_t n)
{
    unsigned char *bytes = (unsigned char *)buf;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, bytes + 2 * n + 2 * i, sizeof h);
        uint32_t u = (uint32_t)h << 16;
        memcpy(bytes + 4 * i, &u, sizeof u);
    }
}
