/* congestion.h - the TCP congestion control of the rank connections
 * (tide_config.tcp_congestion, TIDE_TCP_CONGESTION). */
#ifndef TIDE_CONGESTION_H
#define TIDE_CONGESTION_H

#include <stddef.h>

/* The name used between two ranks on one host when the choice is "auto". */
#define TIDE_TCP_CONGESTION_SAME_HOST "reno"

/*
 * Whether this process may use the choice: "" (auto) and "system" always
 * may; a named algorithm must be one the kernel has and lets this process
 * set (net.ipv4.tcp_allowed_congestion_control, or any available one with
 * CAP_NET_ADMIN).  Returns 0, or TIDE_EINVAL with the reason in why.
 */
int tide__tcp_congestion_check(const char *choice, char *why, size_t len);

/*
 * Apply the choice to the connected TCP socket fd: auto gives a
 * connection between two ranks on one host TIDE_TCP_CONGESTION_SAME_HOST
 * and leaves the others alone; "system" leaves every connection alone; a
 * name is set on every connection.  Returns 0, or -errno when a named
 * algorithm cannot be set (auto never fails: a connection keeps the
 * system's choice).
 */
int tide__tcp_congestion_apply(int fd, const char *choice);

#endif
