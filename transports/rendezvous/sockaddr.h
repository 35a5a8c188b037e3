/* sockaddr.h - socket addresses for the bootstrap: resolving MASTER_ADDR,
 * telling loopback from the rest, printing "IP:PORT", listening on one,
 * and the 24-byte wire form that REGISTER and TABLE messages carry.
 *
 * Wire form of one address (network byte order throughout):
 *
 *   0        2        4                                  20         24
 *   +--------+--------+----------------------------------+----------+
 *   | family |  port  | address (IPv4 in bytes 0..3,     | reserved |
 *   | 4 or 6 |        |   the rest zero; IPv6 all 16)    |  zero    |
 *   +--------+--------+----------------------------------+----------+
 *
 * The family is 4 or 6, never the host's AF_* constant, so hosts with
 * different AF_INET6 values agree.  IPv6 scope ids are not carried:
 * link-local addresses are not supported as rendezvous addresses.
 */
#ifndef TIDE_SOCKADDR_H
#define TIDE_SOCKADDR_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define TIDE_ADDR_WIRE_SIZE 24
#define TIDE_ADDR_WIRE_INET 4
#define TIDE_ADDR_WIRE_INET6 6

/* Room for "[IPv6]:PORT" and its NUL, with some to spare. */
#define TIDE_ADDR_STRLEN 64

/* An IPv4 or IPv6 endpoint.  The union spares casts between the views. */
struct tide__addr {
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_storage ss;
    } u;
    socklen_t len; /* bytes of u that are meaningful */
};

/*
 * Resolve host (a name or a numeric IPv4/IPv6 address) and port into *out:
 * the first address getaddrinfo gives for which this host can make a
 * socket.  Returns 0, or TIDE_EBOOTSTRAP with the resolver's reason in
 * err.  May query DNS; never connects anywhere.
 */
int tide__addr_resolve(const char *host, int port, struct tide__addr *out, char *err,
                       size_t errlen);

/* 1 if a is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x.x.x). */
int tide__addr_is_loopback(const struct tide__addr *a);

/* The port of a, in host order (0 for an unknown family). */
int tide__addr_port(const struct tide__addr *a);

/* Set the port of a (host order). */
void tide__addr_set_port(struct tide__addr *a, int port);

/* Write "IP:PORT" or "[IPv6]:PORT" into out (always NUL-terminated). */
void tide__addr_format(const struct tide__addr *a, char *out, size_t cap);

/* Open a nonblocking, close-on-exec listener bound to a (SO_REUSEADDR,
 * backlog SOMAXCONN).  Returns the fd, or -errno. */
int tide__addr_listen(const struct tide__addr *a);

/* Encode a into its wire form.  Returns 0, or TIDE_EINVAL when a is
 * neither IPv4 nor IPv6. */
int tide__addr_encode(const struct tide__addr *a, uint8_t out[TIDE_ADDR_WIRE_SIZE]);

/* Decode and validate a wire address.  Returns 0, or TIDE_EPROTO for an
 * unknown family, port 0, or non-zero padding or reserved bytes. */
int tide__addr_decode(const uint8_t in[TIDE_ADDR_WIRE_SIZE], struct tide__addr *out);

#endif
