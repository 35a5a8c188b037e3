/* json.h - the one rule for writing text into a JSON string, shared by
 * the flight recorder's dumps (recorder_dump.c) and the trace
 * (trace_json.c): quotes and backslashes escaped, control bytes as
 * \u00XX, everything else as it is. */
#ifndef TIDE_JSON_H
#define TIDE_JSON_H

/* Byte c as it goes inside a JSON string: out (at least 8 bytes) holds
 * c itself or its escape, NUL-terminated; returns out. */
const char *tide__json_char(unsigned char c, char out[8]);

/* s as the inside of a JSON string, handed to put(sink, piece) a piece
 * at a time: the one writer, whatever the sink (a FILE, a text). */
void tide__json_escape(const char *s, void (*put)(void *sink, const char *piece), void *sink);

#endif
