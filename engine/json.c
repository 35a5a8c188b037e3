/* json.c - see json.h. */
#include "engine/json.h"

#include <stdio.h>

const char *tide__json_char(unsigned char c, char out[8])
{
    if (c == '"' || c == '\\')
        snprintf(out, 8, "\\%c", c);
    else if (c < 0x20)
        snprintf(out, 8, "\\u%04x", c);
    else
        snprintf(out, 8, "%c", c);
    return out;
}

void tide__json_escape(const char *s, void (*put)(void *sink, const char *piece), void *sink)
{
    char esc[8];
    for (; *s; s++)
        put(sink, tide__json_char((unsigned char)*s, esc));
}
