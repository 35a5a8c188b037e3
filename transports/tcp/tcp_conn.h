/* tcp_conn.h - one connection to one peer, shared by tcp.c (lifecycle,
 * posting, withdrawing), tcp_send.c and tcp_recv.c.
 *
 * Per connection at most one send and one receive are in the kernel at a
 * time: io_uring does not keep order between several sends on a socket,
 * and a short send would leave a hole in the stream.
 *
 * Receiving: bytes land in a small staging buffer (read by the thread
 * that drives, or by a kernel receive armed before it sleeps: see
 * tcp_recv.c); headers are parsed there and small payloads copied out.
 * When the rest of a payload is large, the next receive goes straight
 * into its destination (the user's buffer, or an unexpected-message
 * buffer), so big messages are never copied in user space.
 *
 * Sending: queued messages go out in batches, one sendmsg with an iovec
 * per header and per payload, straight from the user's buffers; small
 * batches by a direct non-blocking call, the rest through the ring.
 *
 * With an authenticated data plane (wire_auth.h) each header is followed
 * by its tag and each payload by its own; the sender seals a batch as it
 * fills it (encrypting payloads into buffers of its own), except that a
 * large payload, which ends its batch, is sealed a piece at a time
 * shortly before the kernel takes it; the receiver checks a header's tag
 * before believing it, a large payload's pieces as they land, and a
 * payload's tag before completing what it was for. */
#ifndef TIDE_TCP_CONN_H
#define TIDE_TCP_CONN_H

#include <stdbool.h>
#include <sys/uio.h>
#include <sys/socket.h>

#include "engine/context.h"
#include "transports/rx.h"
#include "transports/tcp/wire_auth.h"

#define TCP_TX_BATCH 32               /* messages per sendmsg */
#define TCP_STAGE_BYTES (16 * 1024)   /* staging buffer per connection */
#define TCP_DIRECT_MIN (4 * 1024)     /* payload rest received in place */
#define TCP_MAX_SUBMIT (1u << 30)     /* io_uring results are ints */
#define TCP_SEND_NOW_MAX (64 * 1024)  /* batches sent without the ring */
/* With MACs a batch stops growing past this many payload bytes: a batch
 * of small payloads is sealed whole before it is sent, and the wire
 * should not wait for thirty-two sealed chunks. */
#define TCP_SEAL_BATCH_BYTES (256 * 1024)
/* A large payload's sealing keeps this far ahead of what the kernel has
 * taken: far enough that the wire does not wait for the next piece, not
 * so far that it waits for the first. */
#define TCP_SEAL_AHEAD (1024 * 1024)
#define TCP_HDR_MAX (TIDE_FRAME_HDR_SIZE + TIDE_WIRE_TAG_SIZE)
/* With MACs a direct receive takes at most this much, so that a large
 * payload's tag takes each piece while it is in the cache (tcp_recv.c's
 * landed; 256 KiB pieces are tagged at 9.8 GB/s here, 16 MiB at 7.7). */
#define TCP_AUTH_PIECE (256 * 1024)

struct tide__tcp;

struct tcp_conn {
    struct tide__tcp *tp;
    int peer;
    int fd;             /* -1 for ourselves */
    const char *lost;   /* NULL while healthy; why it broke */
    char lost_buf[160];

    /* sending */
    struct tide__msgq sq;                  /* queued, not yet in the kernel */
    tide__msg *tx[TCP_TX_BATCH];           /* in the kernel, in stream order */
    size_t tx_end[TCP_TX_BATCH];           /* stream offset where each ends */
    unsigned ntx, tx_next;                 /* batch size; next to complete */
    uint8_t tx_hdr[TCP_TX_BATCH][TCP_HDR_MAX];      /* header, then its tag */
    uint8_t tx_tag[TCP_TX_BATCH][TIDE_WIRE_TAG_SIZE]; /* payload tags */
    uint8_t *tx_secret[TCP_TX_BATCH];      /* encrypted payloads, ours to free */
    struct iovec tx_iov[3 * TCP_TX_BATCH]; /* what is left to send */
    unsigned tx_iov_first, tx_iov_n;
    struct iovec tx_sub[3 * TCP_TX_BATCH]; /* the part given to the kernel */
    struct msghdr tx_mh;
    size_t tx_sent, tx_total;
    /* A large payload is sealed piece by piece as it goes (tcp_send.c's
     * seal_ahead): the kernel gets the batch up to tx_ready only. */
    size_t tx_ready;
    tide__msg *tx_sealing;                 /* the payload being sealed, or NULL */
    unsigned tx_seal_slot;
    size_t tx_sealed;                      /* its bytes sealed so far */
    bool tx_busy;
    struct tide__uop tx_uop;

    /* receiving: the frame arriving and where it goes (transports/rx.h) */
    struct tide__rx rx;
    uint8_t *stage;
    size_t stage_len, stage_pos;  /* valid bytes; bytes consumed */
    bool rx_direct;               /* the kernel writes into rx.dst */
    bool rx_cancelled;            /* rx_msg was withdrawn mid-receive */
    bool rx_busy;                 /* a kernel receive is armed */
    bool rx_idle;                 /* bytes wanted (stage or rx_dst); none armed */
    bool parked;                  /* frame waits for room in the pool */
    bool rx_tag_due;              /* the payload is in; its tag is not */
    struct tide__uop rx_uop;

    /* wire_auth.h, when tp->wire is not TIDE_WIRE_OFF */
    struct tide__wire_dir tx_auth, rx_auth;
};

struct tide__tcp {
    struct tide__transport base;
    int rank, size;
    struct tcp_conn *conns;   /* [size]; conns[rank] serves self-sends */
    unsigned kernel_ops;      /* our SQEs whose CQE has not come back */
    struct tide__rx_pool pool; /* payload bytes held as unexpected */
    unsigned nparked;         /* connections waiting for pool room */
    bool aborting;            /* abort/finalize: losses are expected */
    int wire;                 /* enum tide__wire_mode, on every connection */
    size_t hdr_size;          /* a header on the wire, with its tag if any */
    struct tide__uop cancel_uop;
};

/* tcp.c */
void tcp_conn_lost(struct tcp_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tcp_unexpected_freed(struct tide__tcp *tp);

/* tcp_send.c */
void tcp_send_complete(struct tide__uop *uop, int res);
void tcp_send_post(struct tcp_conn *c, tide__msg *m);
int tcp_send_withdraw(struct tcp_conn *c, tide__msg *m, bool stalled);
void tcp_send_fail_all(struct tcp_conn *c);
/* Teardown: free what the batch in flight holds. */
void tcp_send_free(struct tcp_conn *c);

/* tcp_recv.c */
void tcp_recv_complete(struct tide__uop *uop, int res);
void tcp_recv_start(struct tcp_conn *c);
/* A driver spins: if the stage waits for bytes someone needs (a posted
 * receive, a frame half in), read them with a non-blocking recv().
 * Returns 1 when something happened (bytes, end, error), else 0. */
int tcp_recv_poll(struct tcp_conn *c);
/* A driver is about to sleep: give an idle stage a kernel receive. */
void tcp_recv_arm(struct tcp_conn *c);
/* The connection was just lost: fail what depends on its receiving half. */
void tcp_recv_lost(struct tcp_conn *c);
void tcp_recv_post(struct tcp_conn *c, tide__msg *m);
int tcp_recv_withdraw(struct tcp_conn *c, tide__msg *m);
void tcp_recv_unpark(struct tcp_conn *c);
void tcp_recv_fail_all(struct tcp_conn *c);

#endif
