/* congestion.c - which TCP congestion control the rank connections use.
 *
 * Between two ranks on one host the network is the loopback device: no
 * link to share, no queue to keep short, and the only losses are
 * spurious ones (segments of one connection sent from two CPUs reach the
 * receiver out of order).  Congestion control there can only slow a
 * transfer, and one that paces does: under BBR (the system default on
 * this project's machines) `ss` showed 16 MiB allreduce connections
 * paced at ~1 GB/s, BBR's estimate of a "bandwidth" that is really the
 * CPUs' copy speed, which the bursts of a collective keep pulling down.
 * So by default ("auto") a connection whose ends share an address, or
 * that runs over loopback, uses Reno, which every process may choose (the
 * kernel always allows it); a connection to another host keeps what the
 * administrator chose for the network it crosses.
 *
 * What it bought here (BBR the system default; interleaved tide-perf
 * rounds against TIDE_TCP_CONGESTION=system): docs/architecture.md,
 * "The wire".
 */
#include "transports/rendezvous/congestion.h"
#include "transports/rendezvous/sockaddr.h"
#include "tide.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static bool is_auto(const char *choice)
{
    return choice[0] == '\0';
}

static bool is_system(const char *choice)
{
    return strcmp(choice, "system") == 0;
}

static int set_on(int fd, const char *name)
{
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) < 0)
        return -errno;
    return 0;
}

int tide__tcp_congestion_check(const char *choice, char *why, size_t len)
{
    if (is_auto(choice) || is_system(choice))
        return 0;
    /* Try it on a socket of our own: the kernel's answer is the rule. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int e = fd < 0 ? -errno : set_on(fd, choice);
    if (fd >= 0)
        close(fd);
    if (e == 0)
        return 0;
    snprintf(why, len,
             "TCP congestion control \"%s\" cannot be used: %s (see "
             "/proc/sys/net/ipv4/tcp_allowed_congestion_control)",
             choice, strerror(-e));
    return TIDE_EINVAL;
}

static bool same_address(const struct tide__addr *a, const struct tide__addr *b)
{
    if (a->u.sa.sa_family != b->u.sa.sa_family)
        return false;
    if (a->u.sa.sa_family == AF_INET)
        return a->u.in4.sin_addr.s_addr == b->u.in4.sin_addr.s_addr;
    if (a->u.sa.sa_family == AF_INET6)
        return memcmp(&a->u.in6.sin6_addr, &b->u.in6.sin6_addr, sizeof a->u.in6.sin6_addr) == 0;
    return false;
}

/* Both ends on this host: the peer is a loopback address, or ours. */
static bool same_host(int fd)
{
    struct tide__addr self, peer;
    self.len = peer.len = (socklen_t)sizeof self.u;
    if (getsockname(fd, &self.u.sa, &self.len) < 0 || getpeername(fd, &peer.u.sa, &peer.len) < 0)
        return false;
    return tide__addr_is_loopback(&peer) || same_address(&self, &peer);
}

int tide__tcp_congestion_apply(int fd, const char *choice)
{
    if (is_system(choice))
        return 0;
    if (!is_auto(choice))
        return set_on(fd, choice);
    if (same_host(fd))
        (void)set_on(fd, TIDE_TCP_CONGESTION_SAME_HOST); /* if refused, the system's stays */
    return 0;
}
