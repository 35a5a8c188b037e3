/* sockaddr.c - resolving, classifying, printing and (de)serialising the
 * IPv4/IPv6 addresses the bootstrap exchanges (see sockaddr.h for the wire
 * layout).  Pure functions apart from tide__addr_resolve and
 * tide__addr_listen. */
#include "transports/rendezvous/sockaddr.h"
#include "tide.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Can this host make a TCP socket of this family?  ("localhost" may give
 * ::1 first on a host whose kernel has IPv6 disabled.) */
static int family_usable(int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

int tide__addr_resolve(const char *host, int port, struct tide__addr *out, char *err,
                       size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;

    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int g = getaddrinfo(host, service, &hints, &res);
    if (g != 0) {
        snprintf(err, errlen, "cannot resolve MASTER_ADDR \"%s\": %s", host, gai_strerror(g));
        return TIDE_EBOOTSTRAP;
    }
    int rc = TIDE_EBOOTSTRAP;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        if (ai->ai_addrlen > sizeof out->u || !family_usable(ai->ai_family))
            continue;
        memset(out, 0, sizeof *out);
        memcpy(&out->u, ai->ai_addr, ai->ai_addrlen);
        out->len = ai->ai_addrlen;
        rc = 0;
        break;
    }
    freeaddrinfo(res);
    if (rc)
        snprintf(err, errlen, "MASTER_ADDR \"%s\" has no IPv4 or IPv6 address usable here", host);
    return rc;
}

int tide__addr_is_loopback(const struct tide__addr *a)
{
    if (a->u.sa.sa_family == AF_INET)
        return (ntohl(a->u.in4.sin_addr.s_addr) >> 24) == 127;
    if (a->u.sa.sa_family != AF_INET6)
        return 0;
    const struct in6_addr *v6 = &a->u.in6.sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(v6))
        return 1;
    return IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127;
}

int tide__addr_port(const struct tide__addr *a)
{
    if (a->u.sa.sa_family == AF_INET)
        return ntohs(a->u.in4.sin_port);
    if (a->u.sa.sa_family == AF_INET6)
        return ntohs(a->u.in6.sin6_port);
    return 0;
}

void tide__addr_set_port(struct tide__addr *a, int port)
{
    if (a->u.sa.sa_family == AF_INET)
        a->u.in4.sin_port = htons((uint16_t)port);
    else if (a->u.sa.sa_family == AF_INET6)
        a->u.in6.sin6_port = htons((uint16_t)port);
}

void tide__addr_format(const struct tide__addr *a, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    int port = tide__addr_port(a);
    if (a->u.sa.sa_family == AF_INET &&
        inet_ntop(AF_INET, &a->u.in4.sin_addr, ip, sizeof ip)) {
        snprintf(out, cap, "%s:%d", ip, port);
        return;
    }
    if (a->u.sa.sa_family == AF_INET6 &&
        inet_ntop(AF_INET6, &a->u.in6.sin6_addr, ip, sizeof ip)) {
        snprintf(out, cap, "[%s]:%d", ip, port);
        return;
    }
    snprintf(out, cap, "(address family %d)", (int)a->u.sa.sa_family);
}

int tide__addr_listen(const struct tide__addr *a)
{
    int fd = socket(a->u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* A restarted job must not wait out TIME_WAIT on its master port. */
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, &a->u.sa, a->len) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

int tide__addr_encode(const struct tide__addr *a, uint8_t out[TIDE_ADDR_WIRE_SIZE])
{
    memset(out, 0, TIDE_ADDR_WIRE_SIZE);
    if (a->u.sa.sa_family == AF_INET) {
        put16(out, TIDE_ADDR_WIRE_INET);
        memcpy(out + 4, &a->u.in4.sin_addr, 4);
    } else if (a->u.sa.sa_family == AF_INET6) {
        put16(out, TIDE_ADDR_WIRE_INET6);
        memcpy(out + 4, &a->u.in6.sin6_addr, 16);
    } else {
        return TIDE_EINVAL;
    }
    put16(out + 2, (uint16_t)tide__addr_port(a));
    return 0;
}

/* 1 if all n bytes at p are zero. */
static int all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

int tide__addr_decode(const uint8_t in[TIDE_ADDR_WIRE_SIZE], struct tide__addr *out)
{
    uint16_t family = get16(in);
    uint16_t port = get16(in + 2);
    if (port == 0 || !all_zero(in + 20, 4))
        return TIDE_EPROTO;
    memset(out, 0, sizeof *out);
    if (family == TIDE_ADDR_WIRE_INET) {
        if (!all_zero(in + 8, 12))
            return TIDE_EPROTO;
        out->u.in4.sin_family = AF_INET;
        out->u.in4.sin_port = htons(port);
        memcpy(&out->u.in4.sin_addr, in + 4, 4);
        out->len = sizeof out->u.in4;
        return 0;
    }
    if (family == TIDE_ADDR_WIRE_INET6) {
        out->u.in6.sin6_family = AF_INET6;
        out->u.in6.sin6_port = htons(port);
        memcpy(&out->u.in6.sin6_addr, in + 4, 16);
        out->len = sizeof out->u.in6;
        return 0;
    }
    return TIDE_EPROTO;
}
