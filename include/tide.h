/*
 * tide.h - the one public header of tide, an event-driven asynchronous
 * collectives engine.
 *
 * Shape of the API (see docs/architecture.md for the inside):
 *   - A communicator (tide_comm) is a group of ranks, created by tide_init()
 *     (the world) or from another (tide_comm_split, tide_comm_create_group).
 *     Ranks on one host reach each other through shared memory, the others
 *     through a mesh of TCP connections that prove the job token and, with
 *     one, authenticate every frame (TIDE_TRANSPORT, TIDE_WIRE_AUTH).
 *   - Every operation is nonblocking and returns a pending request
 *     (tide_req) at once.  tide_wait() and tide_test() finish it; the
 *     blocking forms (tide_send, tide_recv, ...) are isend/irecv + wait.
 *   - One reactor thread per process drives all sockets and shared rings
 *     through io_uring, or epoll where io_uring is refused or not built
 *     (TIDE_PROGRESS=thread, the default), so operations progress while
 *     the caller computes.  With TIDE_PROGRESS=inline the caller's thread
 *     drives the reactor from inside tide_wait()/tide_test().
 *   - The simulated network, for tests and planning, has its own header:
 *     tide_sim.h.
 *
 * Errors: every function that can fail returns 0 or a negative TIDE_E*
 * code; tide_strerror() names it and tide_req_message() tells the story of
 * a failed request (rank, peer, operation, sequence).
 *
 * Threads: in thread mode every function may be called from any thread,
 * except that one request must not be waited on by two threads at once.
 * In inline mode a communicator belongs to the thread that created it.
 * Collectives on one communicator must be called in the same order on
 * every rank (as in MPI): the order is the order in which the calls
 * enter tide, so two threads of a rank that issue collectives on one
 * communicator at once must agree on an order between them (a lock), or
 * use a communicator each (tide_comm_split).  Without that, same-shaped
 * collectives pair up differently on different ranks and mix their
 * data: nothing can tell them apart.  Point-to-point messages are
 * matched by source and tag, in order per pair, from any thread.
 */
#ifndef TIDE_H
#define TIDE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TIDE_API __attribute__((visibility("default")))
#else
#define TIDE_API
#endif

#define TIDE_VERSION_MAJOR 0
#define TIDE_VERSION_MINOR 1
#define TIDE_VERSION_PATCH 0

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/*
 * One table gives the codes, their names and their messages, so the three
 * cannot drift apart.  Codes are negative; 0 is success.
 */
#define TIDE_ERRNO_MAP(X)                                                     \
    X(EINVAL, -1, "invalid argument")                                         \
    X(ENOMEM, -2, "out of memory")                                            \
    X(ETIMEDOUT, -3, "timed out")                                             \
    X(EPEER, -4, "a peer rank was lost")                                      \
    X(ETRUNCATE, -5, "message longer than the receive buffer")                \
    X(EAUTH, -6, "authentication failed")                                     \
    X(EMISMATCH, -7, "ranks called mismatched operations")                    \
    X(EABORTED, -8, "communicator aborted")                                   \
    X(EIO, -9, "I/O error")                                                   \
    X(ENOSYS, -10, "not supported on this system")                            \
    X(EBOOTSTRAP, -11, "bootstrap failed")                                    \
    X(EPROTO, -12, "protocol error from a peer")                              \
    X(EBUSY, -13, "resource busy")                                            \
    X(EREVOKED, -14, "communicator revoked")

typedef enum tide_errno {
#define TIDE_ERRNO_ENUM(name, value, text) TIDE_##name = (value),
    TIDE_ERRNO_MAP(TIDE_ERRNO_ENUM)
#undef TIDE_ERRNO_ENUM
} tide_errno;

/* A static, human-readable message for an error code (never NULL). */
TIDE_API const char *tide_strerror(int err);

/* The library's version, "MAJOR.MINOR.PATCH" (static; TIDE_VERSION_* are
 * the header's, which a program compiled against). */
TIDE_API const char *tide_version(void);

/* The symbolic name of an error code, e.g. "TIDE_EPEER" (never NULL). */
TIDE_API const char *tide_err_name(int err);

/* ------------------------------------------------------------------ */
/* Configuration and communicators                                     */
/* ------------------------------------------------------------------ */

typedef struct tide_comm tide_comm;
typedef struct tide_req tide_req;

typedef enum tide_progress_mode {
    TIDE_PROGRESS_THREAD = 0, /* a reactor thread drives the network */
    TIDE_PROGRESS_INLINE = 1  /* tide_wait/tide_test drive it */
} tide_progress_mode;

/* The event loop under a context (TIDE_REACTOR).  io_uring lets the
 * kernel do each transfer; epoll, for where io_uring is refused (Docker's
 * default seccomp profile, kernel.io_uring_disabled), makes non-blocking
 * calls when sockets are ready.  Both run every transport, collective and
 * progress mode. */
typedef enum tide_reactor_kind {
    TIDE_REACTOR_AUTO = 0,     /* io_uring if this process may create a ring, else epoll */
    TIDE_REACTOR_IO_URING = 1, /* io_uring or fail with TIDE_ENOSYS */
    TIDE_REACTOR_EPOLL = 2
} tide_reactor_kind;

/*
 * Everything tide_init() reads from the environment, to be given
 * explicitly to tide_init_with().  Fill it with tide_config_default()
 * first, then set what you need: fields left at their defaults keep them.
 */
typedef struct tide_config {
    int rank;                   /* 0..size-1 */
    int size;                   /* number of ranks, 1 to 1048576 (2^20) */
    int local_rank;             /* rank within this host (-1: unknown) */
    int local_size;             /* ranks on this host (-1: unknown) */
    char master_addr[256];      /* rank 0's rendezvous host (name or IP) */
    int master_port;            /* rank 0's rendezvous port (1..65535) */
    char job_token[256];        /* shared secret; "" = none (loopback only) */
    double timeout_s;           /* default deadline of every operation */
    double bootstrap_timeout_s; /* deadline for rendezvous + mesh */
    tide_progress_mode progress;
    int spin_us;                /* spin this long without arrivals before blocking */
    int log_level;              /* 0 errors, 1 warnings, 2 info, 3 debug */
    char trace_path[1024];      /* "" = no trace; see tide_trace_begin */
    int yield_when_idle;        /* spinning waiters yield the core: 1 always, 0 never, -1 only
                                   when local_size is unknown or exceeds the cores this
                                   process may run on */
    char tcp_congestion[16];    /* TCP congestion control of the rank connections: "" (auto)
                                   Reno between ranks on one host, the system's to other
                                   hosts; "system" the system's everywhere; or a name the
                                   kernel allows, e.g. "cubic", on every connection */
    tide_reactor_kind reactor;  /* TIDE_REACTOR_AUTO: io_uring, else epoll (said once at
                                   info level, with the reason) */
    char transport[16];         /* how ranks reach each other: "" (auto: shared memory
                                   between the ranks on one host where they can share
                                   it, TCP to the others), "shm" (the same, but a pair on
                                   one host that cannot share memory fails tide_init),
                                   or "tcp" (TCP only) */
    char progress_cpus[128];    /* where the progress thread runs: "" (auto: a CPU of this
                                   process's mask that the caller's thread then leaves to
                                   it, when the mask has two or more CPUs and no other
                                   local rank shares it, or, when the local ranks share
                                   the whole host with two CPUs a rank or more, the
                                   (local_rank+1)-th highest), "none", or a CPU list
                                   ("5", "5,21", "4-5"); said at info level */
    char wire_auth[16];         /* what protects frames on TCP connections after the
                                   handshake: "" (auto: "mac" when job_token is set, else
                                   "off"), "off", "mac" (each frame carries Poly1305 tags
                                   under per-connection keys: an altered, dropped, replayed
                                   or forged frame fails the connection with an error
                                   instead of delivering) or "encrypt" (the same, payloads
                                   ChaCha20-encrypted too).  Every rank must use the same;
                                   "mac" and "encrypt" need a token.  Shared memory between
                                   ranks of one user on one host is not covered. */
} tide_config;

/* Fill cfg with defaults: size 1, rank 0, 127.0.0.1:29500, timeout 300 s,
 * thread progress, spin 50 us, yield when oversubscribed (-1), automatic
 * TCP congestion control (""), automatic reactor, warnings logged. */
TIDE_API void tide_config_default(tide_config *cfg);

/*
 * Fill cfg from the environment, on top of what it holds.  Understands
 * torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), Open MPI
 * (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), Slurm
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and MPICH's or Intel MPI's
 * mpiexec (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS), in that
 * order of preference (a PMIX_RANK with none of them, which says no world
 * size, is TIDE_EINVAL rather than a job of one), plus MASTER_ADDR,
 * MASTER_PORT (the one after it under torchrun, whose store listens
 * there; TIDE_MASTER_PORT over both), TIDE_JOB_TOKEN, TIDE_TIMEOUT,
 * TIDE_BOOTSTRAP_TIMEOUT, TIDE_PROGRESS, TIDE_SPIN_US, TIDE_YIELD_WHEN_IDLE
 * (auto, 0 or 1), TIDE_TCP_CONGESTION (auto, system or an algorithm's
 * name), TIDE_REACTOR (auto, io_uring or epoll), TIDE_TRANSPORT (auto or
 * a transport's name), TIDE_PROGRESS_CPUS (auto, none or a CPU list),
 * TIDE_WIRE_AUTH (auto, off, mac or encrypt), TIDE_LOG_LEVEL and
 * TIDE_TRACE (trace_path).
 * Returns TIDE_EINVAL (and logs which variable) on a malformed value.
 */
TIDE_API int tide_config_from_env(tide_config *cfg);

/*
 * Join the job described by the environment: tide_config_default(),
 * tide_config_from_env(), tide_init_with().  On success *comm is the world
 * communicator; on failure *comm is NULL and the error was logged.
 */
TIDE_API int tide_init(tide_comm **comm);

/*
 * Join the job described by cfg.  Rendezvous at rank 0, then a full mesh
 * of TCP connections, each authenticated with cfg->job_token, all before
 * cfg->bootstrap_timeout_s.  Returns TIDE_EAUTH when a peer refuses our
 * token, TIDE_EBOOTSTRAP when the job cannot be assembled in time,
 * TIDE_ENOSYS when cfg->reactor is TIDE_REACTOR_IO_URING and io_uring is
 * unavailable (seccomp, io_uring_disabled); TIDE_REACTOR_AUTO falls back
 * to epoll instead.
 */
TIDE_API int tide_init_with(tide_comm **comm, const tide_config *cfg);

/* The event loop comm's process runs on: "io_uring" or "epoll" (see
 * tide_reactor_kind), "sim" for a rank of the simulated network; NULL
 * when comm is NULL. */
TIDE_API const char *tide_comm_reactor(const tide_comm *comm);

/* The transport that carries this process's messages to rank peer of
 * comm: "shm" (shared memory, ranks on this host), "tcp", or "sim" for
 * the simulated network.  Messages to yourself never leave the process,
 * whatever it says.  NULL when comm is NULL, peer is out of range or
 * comm's process has finalized. */
TIDE_API const char *tide_comm_transport(const tide_comm *comm, int peer);

/*
 * Where comm's progress thread runs (TIDE_PROGRESS_CPUS, tide-run's
 * binding): writes its CPUs as a list ("7", "6,22") into buf, or "" when
 * it was left to the scheduler (or there is no progress thread: inline
 * progress, a simulated rank).  Returns 1 when those CPUs are its own -
 * the calling thread of tide_init was moved off them, so communication
 * moves while that thread computes - 0 when it shares the caller's, and
 * TIDE_EINVAL when comm or buf is NULL or len is 0.
 */
TIDE_API int tide_comm_progress_cpus(const tide_comm *comm, char *buf, size_t len);

/* This process's rank in comm, or TIDE_EINVAL when comm is NULL. */
TIDE_API int tide_comm_rank(const tide_comm *comm);

/* The number of ranks in comm, or TIDE_EINVAL when comm is NULL. */
TIDE_API int tide_comm_size(const tide_comm *comm);

/*
 * Fail every pending request of comm with TIDE_EABORTED and mark comm
 * broken: later operations fail at once.  Returns promptly (it does not
 * wait for peers).  The communicator must still be finalized.
 */
TIDE_API int tide_comm_abort(tide_comm *comm);

/*
 * Revoke comm (MPI ULFM's MPI_Comm_revoke): every rank's pending
 * operations on comm fail promptly with TIDE_EREVOKED, and so does every
 * later one, collective or point-to-point, on any rank.  Not collective:
 * one rank calls it, typically after an operation failed there with
 * TIDE_EPEER or TIDE_ETIMEDOUT, to wake the ranks that wait on comm for
 * something that will never come (a rank that only waits on a healthy
 * peer is otherwise told nothing).  The notice is forwarded by every rank
 * that receives it, so it reaches all live ranks even when the revoking
 * rank dies while sending it.  Revoking twice, or on several ranks at
 * once, is harmless.  Returns 0 once the notice is handed to the
 * transport (it does not wait for peers); TIDE_EINVAL when comm is NULL,
 * TIDE_EABORTED after tide_comm_abort (or a simulated crash) here.
 * Other communicators, the world included, are not touched.
 *
 *     int rc = tide_allreduce(comm, buf, buf, n, TIDE_FLOAT, TIDE_SUM);
 *     if (rc == TIDE_EPEER || rc == TIDE_ETIMEDOUT)
 *         tide_comm_revoke(comm);      // wake the others
 *     if (rc != 0) {
 *         // every rank now fails on comm with rc or TIDE_EREVOKED:
 *         // release it and go on on another communicator
 *     }
 */
TIDE_API int tide_comm_revoke(tide_comm *comm);

/*
 * Recovery after a rank is lost, MPI ULFM's way: revoke the communicator
 * (above) so that every rank stops waiting on it, then shrink it to the
 * ranks still alive and go on there.  Both calls below are collective
 * over the live ranks of comm -- every live rank makes the same calls in
 * the same order -- work on a revoked communicator, and are not stopped
 * by ranks that die before or during them.
 *
 * Failures are detected by the connections: a killed rank's close is
 * noticed at once.  A rank that is alive but stopped (SIGSTOP, a
 * debugger, a hang) is not detected: the call then fails at its deadline
 * (TIDE_TIMEOUT) with TIDE_ETIMEDOUT, naming the ranks it waited for.
 *
 *     int rc = tide_allreduce(comm, grad, grad, n, TIDE_FLOAT32, TIDE_SUM);
 *     while (rc != 0) {
 *         tide_comm_revoke(comm);          // wake every rank out of comm
 *         tide_comm *smaller;
 *         if (tide_comm_shrink(comm, &smaller) != 0)
 *             return -1;                   // e.g. a stopped rank: give up
 *         if (comm != world)
 *             tide_comm_free(comm);
 *         comm = smaller;                  // ranks renumbered 0..size-1
 *         reload_or_recompute(grad);       // redo the failed step
 *         rc = tide_allreduce(comm, grad, grad, n, TIDE_FLOAT32, TIDE_SUM);
 *     }
 *
 * The loop matters: a rank that dies during the shrink may still be in
 * the new communicator (every survivor then has it, alike), and the next
 * operation there fails with TIDE_EPEER.
 */

/*
 * Agree on the live ranks of comm and make a communicator of them:
 * *newcomm has every rank of comm not found dead, in comm's order,
 * renumbered from 0.  Every rank that returns 0 gets the same members,
 * even when the ranks saw different failures and when ranks die during
 * the call (those are in or out alike on every survivor).  Costs n + 1
 * rounds of messages among comm's n ranks; nothing is sent to a rank
 * known dead.  Returns 0, TIDE_ETIMEDOUT (a rank neither answers nor
 * dies: see above), TIDE_EPEER (the others lost this rank: a link broke
 * between live ranks), TIDE_EBUSY (the new communicator's id is in use
 * here), TIDE_ENOMEM, or TIDE_EINVAL (NULL argument; *newcomm is NULL on
 * every failure).  Release the new communicator with tide_comm_free.
 */
TIDE_API int tide_comm_shrink(tide_comm *comm, tide_comm **newcomm);

/*
 * "Did everyone finish this step?": *flag becomes the AND of the *flag
 * of every live rank of comm (nonzero counts as 1), the same on every
 * rank that returns 0.  A rank that dies during the call counts or not,
 * alike on every survivor; dead ranks do not block it.  Works on a
 * revoked communicator, and takes part in comm's order of agreements
 * (shrinks and agrees), not of its collectives.  Returns 0 or, as
 * tide_comm_shrink, TIDE_ETIMEDOUT, TIDE_EPEER, TIDE_ENOMEM, TIDE_EINVAL.
 */
TIDE_API int tide_comm_agree(tide_comm *comm, int *flag);

/*
 * A failure this rank learned of after the collective it concerns had
 * already succeeded here (see "Rules shared by every collective": a rank
 * that only sends can finish before its peers find the calls
 * mismatched), like NCCL's ncclCommGetAsyncError.  Returns 0 when there
 * is none, else its error (TIDE_EMISMATCH), and sets *message (when not
 * NULL) to an account valid until the next collective call on comm,
 * which reports the failure and clears it.  Makes one nonblocking pass
 * of progress first, so polling it works in inline mode too.
 * TIDE_EINVAL when comm is NULL.
 */
TIDE_API int tide_comm_async_error(tide_comm *comm, const char **message);

/*
 * Close the communicator: fail what is still pending with TIDE_EABORTED,
 * stop the reactor, close every connection and free everything except
 * requests the caller still holds (tide_req_free them before or after).
 * Not collective: it does not wait for the other ranks -- except when
 * tracing (TIDE_TRACE), where every rank sends its events to rank 0
 * first (waiting at most a minute for each step; a rank that cannot
 * writes its own <path>.rank<R>.json instead).  Afterwards every call
 * on the world or on a communicator made from it returns TIDE_EINVAL
 * ("used after tide_finalize"; tide_comm_rank and tide_comm_size still
 * answer); tide_comm_free still frees a subcommunicator.
 */
TIDE_API int tide_finalize(tide_comm *comm);

/* ------------------------------------------------------------------ */
/* Pending requests                                                    */
/* ------------------------------------------------------------------ */

/*
 * Wait for req to complete, at most timeout_ms milliseconds (-1: up to the
 * operation's own deadline, which then fails it with TIDE_ETIMEDOUT).
 * Returns 0 when the operation succeeded, its error when it failed, and
 * TIDE_ETIMEDOUT when timeout_ms elapsed first: the request then stays
 * pending and may be waited on again.  Spins until TIDE_SPIN_US pass
 * without anything arriving, then sleeps in the kernel.
 */
TIDE_API int tide_wait(tide_req *req, int timeout_ms);

/*
 * Never blocks.  Sets *done to 1 and returns the operation's result when
 * it has completed; sets *done to 0 and returns 0 when it is pending.
 * In inline mode it makes one nonblocking pass of progress.
 */
TIDE_API int tide_test(tide_req *req, int *done);

/*
 * Release the caller's hold on req.  A request freed while pending still
 * completes (its buffers must stay valid until then); it is reclaimed
 * afterwards.  NULL is ignored.
 */
TIDE_API void tide_req_free(tide_req *req);

/* An account of how req failed (rank, peer, operation, sequence), or ""
 * while it is pending or when it succeeded.  Valid until tide_req_free.
 * A deadline (TIDE_ETIMEDOUT) says what the rank still waited for: the
 * collective's signature, communicator, bytes, algorithm and its round
 * or step, then "no data yet from rank 3" (receives that had not
 * arrived) and "sends not taken by rank 1" (sends the peer had not
 * drained).  A loss (TIDE_EPEER) names the rank lost first, even when the
 * news came through a third rank ("rank 3 was lost; rank 2 reported: ...").
 * Ranks in messages are world ranks.
 *
 * Flight recorder: each communicator keeps its last 256 collectives
 * (sequence, signature, bytes, algorithm, post/start/end times, state,
 * peers awaited).  With TIDE_DUMP_DIR set, every rank writes it as
 * TIDE_DUMP_DIR/tide-dump-<rank>.json on its first error or deadline (at
 * most once a second) and on SIGUSR1 (TIDE_DUMP_SIGNAL: USR1, USR2, a
 * number, or none; taken only when its handler is the default or
 * ignored; a blocking call in the thread the signal lands on returns
 * EINTR as with any handler).  `tide-doctor DIR` merges the dumps;
 * `tide-run --dump-on-timeout S` signals a job still running after S s. */
TIDE_API const char *tide_req_message(const tide_req *req);

/*
 * Run fn(req, arg) on the reactor thread when req completes, before any
 * waiter sees it complete; at once (on the reactor) if it already has.
 * fn must not block or wait on requests; it may post new operations.
 * One callback per request: a second returns TIDE_EBUSY.
 */
TIDE_API int tide_req_on_complete(tide_req *req, void (*fn)(tide_req *, void *), void *arg);

/*
 * Completion queues: one thread learns of many requests' ends by blocking
 * in one call (like MPI_Waitsome, or a verbs CQ), instead of a thread or
 * a test loop per request.  What a language binding needs to complete its
 * futures without running the language on the reactor thread.
 *
 * tide_cq_attach claims req's one completion callback (tide_req_on_complete:
 * TIDE_EBUSY if it has one) and queues tag when req completes; req must
 * not be freed before its tag has been returned by tide_cq_wait.
 * tide_cq_wait blocks until at least one tag is queued, timeout_ms pass
 * (-1: no limit; 0: never block) or tide_cq_interrupt is called; it moves
 * up to max tags, in completion order, into tags and returns how many
 * (0 on a timeout or an interrupt).  Every request whose tag it returns
 * tests done (tide_test), with its result and message.  In inline
 * progress mode requests complete only while some thread drives the
 * reactor (tide_wait/tide_test).  Any thread may call any of these;
 * tide_cq_interrupt wakes a waiter (or makes the next wait return at
 * once) and is how a poller thread is stopped.  tide_cq_destroy returns
 * TIDE_EBUSY, freeing nothing, while an attached request has not
 * completed; tags completed but not yet returned are dropped.
 */
typedef struct tide_cq tide_cq;
TIDE_API int tide_cq_create(tide_cq **cq);
TIDE_API int tide_cq_attach(tide_cq *cq, tide_req *req, uint64_t tag);
TIDE_API int tide_cq_wait(tide_cq *cq, uint64_t *tags, int max, int timeout_ms);
TIDE_API int tide_cq_interrupt(tide_cq *cq);
TIDE_API int tide_cq_destroy(tide_cq *cq);

/* ------------------------------------------------------------------ */
/* Point-to-point                                                      */
/* ------------------------------------------------------------------ */

/*
 * Send bytes from buf to rank peer with a user tag (>= 0).  buf must stay
 * valid and unchanged until the request completes.  Messages from one
 * rank to another with the same tag are received in the order sent;
 * messages with different tags are independent.  A send completes once
 * the data is handed to the network (it does not wait for the receive).
 * Sending to yourself works.  TIDE_EINVAL at the call for a bad peer, a
 * negative tag, or buf NULL with bytes > 0.
 */
TIDE_API int tide_isend(tide_comm *comm, const void *buf, size_t bytes, int peer, int tag,
                        tide_req **req);

/* tide_irecv's peer for a receive from whichever rank sends first. */
#define TIDE_ANY_SOURCE (-1)

/*
 * Receive a message from peer with tag into buf (capacity bytes).  A
 * message longer than bytes fails the request with TIDE_ETRUNCATE and
 * leaves buf untouched; a shorter one succeeds, and tide_req_bytes() says
 * how many bytes arrived.
 *
 * peer TIDE_ANY_SOURCE (MPI_ANY_SOURCE) takes the first message with tag
 * to arrive from any rank of the communicator, itself included, and
 * tide_req_source() says whose it was.  Messages from one rank still
 * match in the order sent, and receives in the order posted: an
 * any-source receive posted before a receive naming rank r takes r's
 * message first if it is the first to arrive.  Which of several ranks
 * whose messages are all waiting goes first is not defined.  As in
 * MPI's fault-tolerance rules (ULFM), the loss of any rank of the
 * communicator fails a pending any-source receive with TIDE_EPEER, since
 * that rank might have been its sender.
 */
TIDE_API int tide_irecv(tide_comm *comm, void *buf, size_t bytes, int peer, int tag,
                        tide_req **req);

/* Blocking forms: post, wait up to the operation's deadline, free. */
TIDE_API int tide_send(tide_comm *comm, const void *buf, size_t bytes, int peer, int tag);
TIDE_API int tide_recv(tide_comm *comm, void *buf, size_t bytes, int peer, int tag);

/* Bytes a completed receive got (0 for sends and pending requests). */
TIDE_API size_t tide_req_bytes(const tide_req *req);

/* The rank (in the receive's communicator) whose message a completed
 * receive got: the peer it named, or for TIDE_ANY_SOURCE the one that
 * sent first.  -1 for sends, pending or failed receives and collectives. */
TIDE_API int tide_req_source(const tide_req *req);

/* ------------------------------------------------------------------ */
/* Data types and reduction operations                                 */
/* ------------------------------------------------------------------ */

typedef enum tide_dtype {
    TIDE_INT8 = 0,
    TIDE_UINT8 = 1,
    TIDE_INT32 = 2,
    TIDE_UINT32 = 3,
    TIDE_INT64 = 4,
    TIDE_UINT64 = 5,
    TIDE_FLOAT16 = 6,  /* IEEE 754 binary16 */
    TIDE_BFLOAT16 = 7, /* the upper half of a binary32 */
    TIDE_FLOAT32 = 8,
    TIDE_FLOAT64 = 9,
    TIDE_DTYPE_COUNT
} tide_dtype;

/*
 * Reductions are elementwise.  Integers wrap around (two's complement)
 * on overflow.  float16 and bfloat16 are combined in float and rounded
 * back to nearest-even after every combination.  MIN and MAX return NaN
 * when either operand is NaN.  AVG is SUM divided by the group size at
 * the end (integers: truncating division).  BAND, BOR and BXOR (MPI's
 * MPI_BAND, MPI_BOR, MPI_BXOR) are for the integer dtypes only: with a
 * floating-point dtype the call returns TIDE_EINVAL.
 */
typedef enum tide_op {
    TIDE_SUM = 0,
    TIDE_PROD = 1,
    TIDE_MIN = 2,
    TIDE_MAX = 3,
    TIDE_AVG = 4,
    TIDE_BAND = 5,
    TIDE_BOR = 6,
    TIDE_BXOR = 7,
    TIDE_OP_COUNT
} tide_op;

/* Bytes per element of dtype; 0 for an unknown dtype. */
TIDE_API size_t tide_dtype_size(tide_dtype dtype);

/* Short names as nccl-tests prints them ("int8", "half", "bfloat16",
 * "float", "double", ...; "sum", "prod", "min", "max", "avg"), or "?". */
TIDE_API const char *tide_dtype_name(tide_dtype dtype);
TIDE_API const char *tide_op_name(tide_op op);

/* ------------------------------------------------------------------ */
/* Collectives                                                         */
/* ------------------------------------------------------------------ */

/*
 * Rules shared by every collective:
 *   - Every rank of comm calls comm's collectives in the same order, with
 *     matching kind, count, dtype, op and root (as in MPI).  Ranks that do
 *     not get TIDE_EMISMATCH on every rank, with a message saying what
 *     differed, instead of a hang or a corrupt buffer.  A rank that only
 *     sends in the collective (a broadcast's or scatter's root, a leaf of
 *     a reduce or gather) may have finished it successfully before the
 *     news comes back; it gets TIDE_EMISMATCH from the next collective
 *     it starts on comm (that request reports it, sends nothing and
 *     counts for nothing: call again), and tide_comm_async_error shows
 *     it before then.
 *   - The nonblocking form returns at once with *req; the buffers must
 *     stay valid (and a send buffer unchanged) until it completes.  The
 *     blocking form has the same name without the "i" and waits up to the
 *     operation's deadline (TIDE_TIMEOUT).
 *   - Counts are in elements of dtype.  A count of 0 and a group of one
 *     rank are valid.  Buffers may be NULL only where their count is 0.
 *   - Results are identical to the last bit on every rank, and from run
 *     to run for the same inputs, group size and algorithm.
 *   - In place: pass TIDE_IN_PLACE as sendbuf where noted (the input is
 *     then read from recvbuf, where MPI puts it).  Otherwise buffers are
 *     taken literally: sendbuf may equal or overlap recvbuf, and the input
 *     is whatever sendbuf points at when the call is made.
 *   - The algorithm is chosen by group size and message size;
 *     TIDE_ALGO_<COLLECTIVE>=<name> (e.g. TIDE_ALGO_ALLREDUCE=ring)
 *     overrides it, and tide_req_algorithm() names the one used (a group
 *     of one always runs "local", a copy; an unknown name is TIDE_EINVAL
 *     whatever the group).
 *   - Bad arguments (a NULL buffer with count > 0, an unknown dtype or op,
 *     a root outside the group) return TIDE_EINVAL at the call, with a
 *     warning in the log; nothing is sent.
 */
#define TIDE_IN_PLACE ((const void *)1)

/* Block until every rank of comm has entered the barrier.  Algorithms:
 * "board" where every rank shares one host's memory (the default there:
 * each rank raises a flag and reads the others'), "dissemination"
 * elsewhere (ceil(log2 n) rounds of messages).  As in MPI, a barrier
 * orders no messages: one sent before it may still be arriving after. */
TIDE_API int tide_ibarrier(tide_comm *comm, tide_req **req);
TIDE_API int tide_barrier(tide_comm *comm);

/*
 * recvbuf[i] = op over every rank of sendbuf[i], for i < count, on every
 * rank.  TIDE_IN_PLACE: the input is recvbuf.  Algorithms: "ring"
 * (reduce-scatter + all-gather, chunked and pipelined; large messages),
 * "rabenseifner" (recursive halving + doubling; mid sizes),
 * "recursive_doubling" (small), "shm" (ranks of one host, reading each
 * other's staging memory), "hier" (ranks spread evenly over hosts:
 * reduce-scatter inside each host, all-reduce across, all-gather
 * inside; docs/algorithms.md), "board" and "board_rsag" (ranks of one
 * host, vectors of up to 64 KiB: each rank publishes its vector once in
 * shared memory and reduces from its peers' in place; one-shot, and
 * reduce-scatter + all-gather).
 */
TIDE_API int tide_iallreduce(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                             tide_dtype dtype, tide_op op, tide_req **req);
TIDE_API int tide_allreduce(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                            tide_dtype dtype, tide_op op);

/* Root's buf (count elements) lands in buf on every rank.  Algorithms:
 * "binomial" (small), "chain" (pipelined chain; large), "shm" (ranks of
 * one host, large), "board" (ranks of one host, up to 64 KiB: the root
 * publishes in shared memory, the others copy out). */
TIDE_API int tide_ibroadcast(tide_comm *comm, void *buf, size_t count, tide_dtype dtype, int root,
                             tide_req **req);
TIDE_API int tide_broadcast(tide_comm *comm, void *buf, size_t count, tide_dtype dtype, int root);

/* Like allreduce, but only root's recvbuf receives the result (recvbuf
 * may be NULL elsewhere).  TIDE_IN_PLACE at root: the input is recvbuf.
 * Algorithms: "binomial", "board" (ranks of one host, up to 64 KiB: each
 * publishes its input in shared memory, the root reduces them all and
 * the others return at once; the default on 2 such ranks). */
TIDE_API int tide_ireduce(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                          tide_dtype dtype, tide_op op, int root, tide_req **req);
TIDE_API int tide_reduce(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                         tide_dtype dtype, tide_op op, int root);

/* Rank r's sendcount elements land at recvbuf + r*sendcount on every
 * rank (recvbuf holds size*sendcount).  TIDE_IN_PLACE: rank r's input is
 * already at its place in recvbuf.  Algorithms: "ring", "bruck",
 * "recursive_doubling" (power-of-two groups), "shm" and "board" (ranks
 * of one host: large vectors, and blocks of up to 64 KiB). */
TIDE_API int tide_iallgather(tide_comm *comm, const void *sendbuf, void *recvbuf,
                             size_t sendcount, tide_dtype dtype, tide_req **req);
TIDE_API int tide_allgather(tide_comm *comm, const void *sendbuf, void *recvbuf,
                            size_t sendcount, tide_dtype dtype);

/* Per-rank counts: rank r contributes counts[r] elements, which land at
 * recvbuf + (counts[0] + ... + counts[r-1]).  counts has size entries,
 * the same on every rank, and is read during the call only.  sendbuf
 * holds counts[rank] elements.  Algorithm: "ring". */
TIDE_API int tide_iallgatherv(tide_comm *comm, const void *sendbuf, void *recvbuf,
                              const size_t *counts, tide_dtype dtype, tide_req **req);
TIDE_API int tide_allgatherv(tide_comm *comm, const void *sendbuf, void *recvbuf,
                             const size_t *counts, tide_dtype dtype);

/* sendbuf holds size*recvcount elements; rank r receives block r of
 * their reduction (elements r*recvcount .. (r+1)*recvcount-1) in recvbuf.
 * TIDE_IN_PLACE: the input is recvbuf (size*recvcount elements) and the
 * result is left at its start, as in MPI.  Algorithms: "ring",
 * "recursive_halving", "shm" (ranks of one host: each reduces its block
 * straight out of every rank's staging slot), "board" (ranks of one
 * host, inputs of up to 64 KiB). */
TIDE_API int tide_ireduce_scatter(tide_comm *comm, const void *sendbuf, void *recvbuf,
                                  size_t recvcount, tide_dtype dtype, tide_op op, tide_req **req);
TIDE_API int tide_reduce_scatter(tide_comm *comm, const void *sendbuf, void *recvbuf,
                                 size_t recvcount, tide_dtype dtype, tide_op op);

/* Per-rank counts: sendbuf holds counts[0] + ... + counts[size-1]
 * elements; rank r receives the reduction of its block (counts[r]
 * elements, starting after the blocks of ranks below r).  counts is read
 * during the call only.  TIDE_IN_PLACE as for tide_ireduce_scatter.
 * Algorithms: "ring", "recursive_halving". */
TIDE_API int tide_ireduce_scatterv(tide_comm *comm, const void *sendbuf, void *recvbuf,
                                   const size_t *counts, tide_dtype dtype, tide_op op,
                                   tide_req **req);
TIDE_API int tide_reduce_scatterv(tide_comm *comm, const void *sendbuf, void *recvbuf,
                                  const size_t *counts, tide_dtype dtype, tide_op op);

/* Rank r's sendcount elements land at root's recvbuf + r*sendcount
 * (recvbuf is read only at root).  Algorithms: "binomial", "board"
 * (ranks of one host, blocks of up to 64 KiB: the root copies every
 * rank's out of shared memory; the default on 2 such ranks). */
TIDE_API int tide_igather(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                          tide_dtype dtype, int root, tide_req **req);
TIDE_API int tide_gather(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                         tide_dtype dtype, int root);

/* Root's sendbuf + r*recvcount lands in rank r's recvbuf (sendbuf is
 * read only at root).  Algorithms: "binomial", "board" (ranks of one
 * host, a sendbuf of up to 64 KiB: each rank copies its block out of the
 * root's in shared memory; the default on 2 such ranks). */
TIDE_API int tide_iscatter(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                           tide_dtype dtype, int root, tide_req **req);
TIDE_API int tide_scatter(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                          tide_dtype dtype, int root);

/* Block p of rank r's sendbuf (count elements at sendbuf + p*count)
 * lands at recvbuf + r*count on rank p.  sendbuf and recvbuf must not
 * overlap.  Algorithms: "pairwise", "board" (ranks of one host, a
 * sendbuf of up to 64 KiB: each rank copies its block out of every
 * peer's; the default there). */
TIDE_API int tide_ialltoall(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                            tide_dtype dtype, tide_req **req);
TIDE_API int tide_alltoall(tide_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                           tide_dtype dtype);

/* The algorithm a collective request runs ("p2p" for point-to-point): a
 * static string, valid for the life of the process. */
TIDE_API const char *tide_req_algorithm(const tide_req *req);

/* ------------------------------------------------------------------ */
/* Tracing                                                             */
/* ------------------------------------------------------------------ */

/*
 * TIDE_TRACE=/path/trace.json (or tide_config.trace_path) records a
 * timeline of every rank and writes it at tide_finalize as one
 * Chrome/Perfetto trace (https://ui.perfetto.dev, chrome://tracing): per
 * rank, the reactor's tracks (each operation with its kind, algorithm,
 * bytes, sequence and result; each message, i.e. chunk, sent and
 * received) and one track per thread that called tide (time blocked in
 * tide_wait, each post).  Clocks of ranks on other hosts are aligned to
 * rank 0's.  Events go to a preallocated buffer (no locks, no allocation;
 * past 4 Mi events per rank the rest are counted as dropped).  Off, it
 * costs one branch per hook.
 *
 * tide_trace_begin/tide_trace_end add the caller's own regions to its
 * thread's track ("forward layer 3"), so communication can be seen
 * against compute.  Regions nest; name is copied (up to 31 bytes).  Both
 * return 0 and do nothing when tracing is off; TIDE_EINVAL on NULL.
 */
TIDE_API int tide_trace_begin(tide_comm *comm, const char *name);
TIDE_API int tide_trace_end(tide_comm *comm);

/* 1 when this process records a trace, else 0. */
TIDE_API int tide_trace_enabled(const tide_comm *comm);

/* ------------------------------------------------------------------ */
/* Subgroups                                                           */
/* ------------------------------------------------------------------ */

/*
 * Split comm as MPI_Comm_split does: ranks that pass the same color form
 * a new communicator, ordered by key (ties by rank in comm).  color
 * TIDE_UNDEFINED (negative) joins none: *newcomm is NULL.  Collective
 * over comm (it exchanges colors and keys), so it takes part in comm's
 * order of collectives.
 */
#define TIDE_UNDEFINED (-1)
TIDE_API int tide_comm_split(tide_comm *comm, int color, int key, tide_comm **newcomm);

/*
 * A communicator of the ranks of comm listed in ranks[0..n-1] (sorted
 * and de-duplicated: the new ranks follow the order of comm).  Called by
 * the members only, in the same order; it sends nothing.  A caller that
 * is not a member, or a rank outside comm, gets TIDE_EINVAL.
 */
TIDE_API int tide_comm_create_group(tide_comm *comm, const int *ranks, int n,
                                    tide_comm **newcomm);

/*
 * Release a communicator made by tide_comm_split or
 * tide_comm_create_group.  Requests still pending on it complete
 * normally; it is reclaimed after the last one.  (The world communicator
 * is released by tide_finalize.)
 */
TIDE_API int tide_comm_free(tide_comm *comm);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_H */
