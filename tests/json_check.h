/* json_check.h - validate JSON text in tests. */
#ifndef TIDE_TEST_JSON_CHECK_H
#define TIDE_TEST_JSON_CHECK_H

#include <stddef.h>

/* 0 when text[0..len) is exactly one well-formed JSON value in valid
 * UTF-8; else -1 with what and where in err. */
int json_check(const char *text, size_t len, char *err, size_t errlen);

#endif
