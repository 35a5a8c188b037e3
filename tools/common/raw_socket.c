/* raw_socket.c - see raw_socket.h. */
#include "tools/common/raw_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *what)
{
    fprintf(stderr, "%s failed: %s\n", what, strerror(errno));
    return -1;
}

int raw_send_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fail("send");
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int raw_recv_all(int fd, void *buf, size_t len, int flags)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, flags);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            fprintf(stderr, "recv: the peer closed the raw connection\n");
            return -1;
        }
        if (errno == EINTR || ((flags & MSG_DONTWAIT) && (errno == EAGAIN || errno == EWOULDBLOCK)))
            continue;
        return fail("recv");
    }
    return 0;
}

int raw_listen(uint16_t *port, int backlog)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, backlog) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        fail("listen on 127.0.0.1");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

int raw_nodelay(int fd)
{
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0
               ? fail("setsockopt TCP_NODELAY")
               : 0;
}

int raw_dial(uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        fail("connect to 127.0.0.1");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (raw_nodelay(fd)) {
        close(fd);
        return -1;
    }
    return fd;
}
