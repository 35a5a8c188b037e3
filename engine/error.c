/* error.c - names and messages of the TIDE_E* codes, from the one table
 * in tide.h, and the mapping from system errno values (done once, here). */
#include "tide.h"
#include "engine/error.h"

#include <errno.h>

#define STR(x) #x
#define VERSION_OF(a, b, c) STR(a) "." STR(b) "." STR(c)

const char *tide_version(void)
{
    return VERSION_OF(TIDE_VERSION_MAJOR, TIDE_VERSION_MINOR, TIDE_VERSION_PATCH);
}

const char *tide_strerror(int err)
{
    if (err == 0)
        return "success";
    switch (err) {
#define TIDE_ERRNO_TEXT(name, value, text) \
    case value:                            \
        return text;
        TIDE_ERRNO_MAP(TIDE_ERRNO_TEXT)
#undef TIDE_ERRNO_TEXT
    }
    return "unknown error";
}

const char *tide_err_name(int err)
{
    if (err == 0)
        return "TIDE_OK";
    switch (err) {
#define TIDE_ERRNO_NAME(name, value, text) \
    case value:                            \
        return "TIDE_" #name;
        TIDE_ERRNO_MAP(TIDE_ERRNO_NAME)
#undef TIDE_ERRNO_NAME
    }
    return "TIDE_E?";
}

int tide__err_from_errno(int e)
{
    if (e < 0)
        e = -e;
    switch (e) {
    case 0:
        return 0;
    case ENOMEM:
        return TIDE_ENOMEM;
    case ETIMEDOUT:
        return TIDE_ETIMEDOUT;
    case EINVAL:
        return TIDE_EINVAL;
    case ECONNRESET:
    case ECONNREFUSED:
    case ECONNABORTED:
    case EPIPE:
    case ENOTCONN:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ESHUTDOWN:
        return TIDE_EPEER;
    case ENOSYS:
    case EPERM:
    case EOPNOTSUPP:
        return TIDE_ENOSYS;
    default:
        return TIDE_EIO;
    }
}
