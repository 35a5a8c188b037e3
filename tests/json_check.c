/* json_check.c - is a text one well-formed JSON value (RFC 8259), in
 * valid UTF-8?  Enough for tests to hold a writer of JSON to the grammar
 * the viewers parse; it builds nothing. */
#include "tests/json_check.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct cur {
    const unsigned char *start, *p, *end;
    int depth;
    char *err;
    size_t errlen;
};

static bool fail(struct cur *c, const char *what)
{
    if (c->err && !c->err[0])
        snprintf(c->err, c->errlen, "%s at byte %zu", what,
                 (size_t)(c->p - c->start));
    return false;
}

static void skip_ws(struct cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

static bool literal(struct cur *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return fail(c, "bad literal");
    c->p += n;
    return true;
}

/* One UTF-8 character of 2-4 bytes starting at c->p (a lead byte). */
static bool utf8_char(struct cur *c)
{
    unsigned char b = *c->p;
    int more = b >= 0xF0 && b <= 0xF4 ? 3 : b >= 0xE0 ? 2 : b >= 0xC2 && b <= 0xDF ? 1 : -1;
    if (more < 0 || c->end - c->p <= more)
        return fail(c, "invalid UTF-8");
    for (int i = 1; i <= more; i++)
        if ((c->p[i] & 0xC0) != 0x80)
            return fail(c, "invalid UTF-8");
    c->p += more + 1;
    return true;
}

static bool string(struct cur *c)
{
    c->p++; /* the opening quote */
    while (c->p < c->end) {
        unsigned char b = *c->p;
        if (b == '"') {
            c->p++;
            return true;
        }
        if (b < 0x20)
            return fail(c, "control character in string");
        if (b == '\\') {
            if (c->end - c->p < 2)
                break;
            unsigned char e = c->p[1];
            if (e == 'u') {
                if (c->end - c->p < 6)
                    break;
                for (int i = 2; i < 6; i++)
                    if (!strchr("0123456789abcdefABCDEF", c->p[i]) || !c->p[i])
                        return fail(c, "bad \\u escape");
                c->p += 6;
            } else if (strchr("\"\\/bfnrt", e) && e) {
                c->p += 2;
            } else {
                return fail(c, "bad escape");
            }
            continue;
        }
        if (b < 0x80)
            c->p++;
        else if (!utf8_char(c))
            return false;
    }
    return fail(c, "unterminated string");
}

static bool digits(struct cur *c)
{
    const unsigned char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
        c->p++;
    return c->p > start || fail(c, "digit expected");
}

static bool number(struct cur *c)
{
    if (*c->p == '-')
        c->p++;
    if (c->p < c->end && *c->p == '0')
        c->p++;
    else if (!digits(c))
        return false;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!digits(c))
            return false;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            c->p++;
        if (!digits(c))
            return false;
    }
    return true;
}

static bool value(struct cur *c);

/* An object or array: open, members separated by commas, close. */
static bool container(struct cur *c, char close, bool keys)
{
    if (++c->depth > 256)
        return fail(c, "nested too deep");
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        c->depth--;
        return true;
    }
    for (;;) {
        skip_ws(c);
        if (keys) {
            if (c->p >= c->end || *c->p != '"' || !string(c))
                return fail(c, "key expected");
            skip_ws(c);
            if (c->p >= c->end || *c->p++ != ':')
                return fail(c, "':' expected");
        }
        if (!value(c))
            return false;
        skip_ws(c);
        if (c->p >= c->end)
            return fail(c, "unterminated container");
        if (*c->p == close) {
            c->p++;
            c->depth--;
            return true;
        }
        if (*c->p++ != ',')
            return fail(c, "',' expected");
    }
}

static bool value(struct cur *c)
{
    skip_ws(c);
    if (c->p >= c->end)
        return fail(c, "value expected");
    switch (*c->p) {
    case '{': return container(c, '}', true);
    case '[': return container(c, ']', false);
    case '"': return string(c);
    case 't': return literal(c, "true");
    case 'f': return literal(c, "false");
    case 'n': return literal(c, "null");
    default:
        if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))
            return number(c);
        return fail(c, "unexpected character");
    }
}

int json_check(const char *text, size_t len, char *err, size_t errlen)
{
    const unsigned char *t = (const unsigned char *)text;
    struct cur c = {t, t, t + len, 0, err, errlen};
    if (err && errlen)
        err[0] = '\0';
    if (!value(&c))
        return -1;
    skip_ws(&c);
    if (c.p != c.end) {
        fail(&c, "text after the value");
        return -1;
    }
    return 0;
}
