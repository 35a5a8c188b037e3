/* raw_socket.h - plain blocking loopback TCP, no tide at all: the anchors
 * the tools measure tide against (tide-bench-p2p's raw round trip and
 * stream, loopback-limits).  Failures print "<what> failed: <errno text>"
 * and return -1. */
#ifndef TIDE_RAW_SOCKET_H
#define TIDE_RAW_SOCKET_H

#include <stddef.h>
#include <stdint.h>

/* Send all of buf, resuming after short sends. */
int raw_send_all(int fd, const void *buf, size_t len);

/* Receive exactly len bytes.  With MSG_DONTWAIT in flags it never
 * sleeps: EAGAIN means "spin again" (the busy-poll anchor). */
int raw_recv_all(int fd, void *buf, size_t len, int flags);

/* A listener on 127.0.0.1 at an ephemeral port (*port gets it): its fd. */
int raw_listen(uint16_t *port, int backlog);

/* A connection to 127.0.0.1:port with TCP_NODELAY, so 8-byte messages
 * are not held back by Nagle: its fd. */
int raw_dial(uint16_t port);

/* TCP_NODELAY on an accepted connection.  0 or -1. */
int raw_nodelay(int fd);

#endif
