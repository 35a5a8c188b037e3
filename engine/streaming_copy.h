/* streaming_copy.h - a copy whose stores go around the caches
 * (streaming_copy.c). */
#ifndef TIDE_STREAMING_COPY_H
#define TIDE_STREAMING_COPY_H

#include <stddef.h>

/* memcpy with x86's streaming stores and a fence after them, so that a
 * release store that follows publishes the bytes; memcpy elsewhere. */
void tide__copy_streaming(void *dst, const void *src, size_t bytes);

#endif
