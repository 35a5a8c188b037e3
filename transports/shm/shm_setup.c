/* shm_setup.c - which peers share this host, and the segments between
 * us (the layout is in shm_peer.h).
 *
 * Runs in tide_init right after the TCP bootstrap, over its blocking
 * sockets, before anything else reads them:
 *   1. every rank sends every peer its identity (kernel boot id, network
 *      namespace, user, TIDE_HOST_ID, pid and the fd of its segment) and
 *      reads theirs;
 *   2. for each peer with the same boot id, namespace, user and host id
 *      it opens the peer's segment through /proc/<pid>/fd and maps its
 *      header and its own ring there;
 *   3. it tries to read the peer's segment header out of the peer's own
 *      memory with process_vm_readv (the single-copy path, shm_peer.h);
 *   4. it tells each such peer whether both worked and hears the same
 *      back: a pair uses shared memory only if both sides mapped, and
 *      single copies only if both could read the other;
 *   5. it tells every rank of its machine whether it shares memory with
 *      all the others there, and hears the same back: the staging area
 *      (shm_peer.h) is offered on a host only if all of its ranks do, so
 *      that they choose collectives that read it alike.  Every rank
 *      also knows every rank's machine (the identities of step 1): that
 *      is how hierarchical collectives group ranks (transport.h,
 *      host_of).
 * The network namespace is part of "same host" so that test hosts made
 * of namespaces on one machine stay apart, as real hosts would be; the
 * PID namespace because a pid means nothing in another one (containers
 * that share the network often do not share it), and a random nonce in
 * the segment, checked after mapping, makes sure the fd we opened is the
 * segment the peer meant. */
#include "transports/shm/shm_peer.h"
#include "engine/board.h"
#include "engine/clock.h"
#include "engine/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define IDENT_MAGIC "tideshm1"

/* What a rank tells every peer: fixed size, every field fixed width. */
struct ident {
    char magic[8];
    char boot_id[40];  /* /proc/sys/kernel/random/boot_id */
    char host_id[64];  /* TIDE_HOST_ID, or "" */
    uint64_t netns;    /* inode of /proc/self/ns/net */
    uint64_t pidns;    /* inode of /proc/self/ns/pid */
    uint64_t nonce;    /* our segment's, or 0 */
    uint32_t uid;
    int32_t pid;
    int32_t memfd;     /* our segment, or -1 if we could not make one */
    uint32_t size;     /* the job's size, as a check */
    uint64_t probe;    /* where our segment's magic is in our memory */
};

enum { MAPPED = 1, READABLE = 2 }; /* what a rank tells a peer in step 4 */

static void read_boot_id(char out[40])
{
    memset(out, 0, 40);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    if (!fgets(out, 40, f))
        out[0] = '\0';
    fclose(f);
}

static void make_ident(const struct tide__shm *tp, struct ident *id)
{
    struct stat st;
    const char *host = getenv("TIDE_HOST_ID");
    memset(id, 0, sizeof *id);
    memcpy(id->magic, IDENT_MAGIC, sizeof id->magic);
    read_boot_id(id->boot_id);
    snprintf(id->host_id, sizeof id->host_id, "%s", host ? host : "");
    id->netns = stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
    id->pidns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
    id->nonce = tp->hdr ? tp->hdr->nonce : 0;
    id->uid = (uint32_t)getuid();
    id->pid = (int32_t)getpid();
    id->memfd = tp->memfd;
    id->size = (uint32_t)tp->size;
    id->probe = (uint64_t)(uintptr_t)tp->hdr;
}

/* One machine, as the job sees it: the grouping hierarchical
 * collectives use, whether or not the two can share memory. */
static bool same_machine(const struct ident *a, const struct ident *b)
{
    return a->boot_id[0] && !memcmp(a->boot_id, b->boot_id, sizeof a->boot_id) &&
           !memcmp(a->host_id, b->host_id, sizeof a->host_id) && a->netns == b->netns &&
           a->netns != 0 && a->pidns == b->pidns && a->pidns != 0 && a->uid == b->uid;
}

/* Candidates for shared memory: one machine, and both made a segment. */
static bool same_host(const struct ident *a, const struct ident *b)
{
    return same_machine(a, b) && a->memfd >= 0 && b->memfd >= 0;
}

/* Every rank's host, named by the lowest rank on it.  Every rank has
 * every identity, so every rank computes the same map. */
static void map_hosts(struct tide__shm *tp, const struct ident *ids)
{
    for (int p = 0; p < tp->size; p++) {
        tp->host[p] = p;
        for (int q = 0; q < p; q++) {
            if (same_machine(&ids[q], &ids[p])) {
                tp->host[p] = q;
                break;
            }
        }
    }
}

/* Move len bytes over a blocking socket, waiting at most until deadline
 * (poll first, so that a silent peer cannot hold us past it). */
static int move_bytes(int fd, void *buf, size_t len, bool out, uint64_t deadline)
{
    uint8_t *p = buf;
    while (len) {
        uint64_t now = tide__now_ns();
        if (now >= deadline)
            return TIDE_ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        uint64_t left_ms = (deadline - now) / TIDE_NS_PER_MS + 1;
        int ms = left_ms > INT_MAX ? INT_MAX : (int)left_ms;
        if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
            return TIDE_EPEER;
        if (!(pfd.revents & (out ? POLLOUT : POLLIN)) && !(pfd.revents & (POLLERR | POLLHUP)))
            continue;
        ssize_t n = out ? send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL)
                        : recv(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            return TIDE_EPEER;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The header and each ring start on a page of their own, whatever the
 * page size (16 and 64 KiB on some arm64 and ppc64 kernels): mmap maps
 * from page boundaries only. */
static size_t page_round(size_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t p = page > 0 ? (size_t)page : 4096;
    return (n + p - 1) / p * p;
}

static size_t header_bytes(void)
{
    return page_round(sizeof(struct shm_header));
}

static size_t ring_bytes(void)
{
    return page_round(sizeof(struct shm_ring));
}

static size_t ring_offset(int rank)
{
    return header_bytes() + (size_t)rank * ring_bytes();
}

/* The staging area follows the rings (slots are page multiples). */
static size_t stage_offset(int size)
{
    return ring_offset(size);
}

static size_t stage_bytes(void)
{
    return (size_t)SHM_STAGE_SLOTS * SHM_STAGE_SLOT;
}

/* The board area follows the staging area; peers map both in one. */
static size_t shared_bytes(void)
{
    return stage_bytes() + page_round(BOARD_AREA_BYTES);
}

/* Our segment: the header and one ring per rank, all zero. */
static int make_segment(struct tide__shm *tp, char *err, size_t errlen)
{
    tp->seg_bytes = stage_offset(tp->size) + shared_bytes();
    tp->memfd = memfd_create("tide-shm", MFD_CLOEXEC);
    if (tp->memfd < 0 || ftruncate(tp->memfd, (off_t)tp->seg_bytes) != 0) {
        snprintf(err, errlen, "memfd of %zu bytes: %s", tp->seg_bytes, strerror(errno));
        return TIDE_ENOSYS;
    }
    void *seg = mmap(NULL, tp->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, tp->memfd, 0);
    if (seg == MAP_FAILED) {
        snprintf(err, errlen, "mapping our segment: %s", strerror(errno));
        return TIDE_ENOSYS;
    }
    tp->hdr = seg;
    tp->stage = (uint8_t *)seg + stage_offset(tp->size);
    tp->board = tp->stage + stage_bytes();
    tp->hdr->magic = SHM_MAGIC;
    tp->hdr->size = (uint32_t)tp->size;
    while (!tp->hdr->nonce)
        if (getrandom(&tp->hdr->nonce, sizeof tp->hdr->nonce, 0) != sizeof tp->hdr->nonce)
            tp->hdr->nonce = (uint64_t)getpid() << 32 ^ (uint64_t)tide__now_ns();
    return 0;
}

/* Map the peer's header and our ring in its segment.  0 or -errno. */
static int map_peer(struct tide__shm *tp, struct shm_peer *c, const struct ident *id)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)id->pid, (int)id->memfd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* Not a segment of the job's size: something else has that number
     * (a mapping past its end would raise SIGBUS). */
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size < stage_offset(tp->size) + shared_bytes()) {
        close(fd);
        return -EPROTO;
    }
    void *hdr = mmap(NULL, header_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *ring = mmap(NULL, ring_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                      (off_t)ring_offset(tp->rank));
    void *stage = mmap(NULL, shared_bytes(), PROT_READ, MAP_SHARED, fd,
                       (off_t)stage_offset(tp->size));
    int rc = hdr == MAP_FAILED || ring == MAP_FAILED || stage == MAP_FAILED ? -errno : 0;
    close(fd);
    const struct shm_header *h = hdr;
    if (!rc && (h->magic != SHM_MAGIC || h->size != (uint32_t)tp->size || h->nonce != id->nonce))
        rc = -EPROTO;
    if (!rc) {
        c->peer_hdr = hdr;
        c->out = ring;
        c->in = (struct shm_ring *)((uint8_t *)tp->hdr + ring_offset(c->peer));
        c->stage = stage;
        c->board = (uint8_t *)stage + stage_bytes();
        return 0;
    }
    if (stage != MAP_FAILED)
        munmap(stage, shared_bytes());
    if (hdr != MAP_FAILED)
        munmap(hdr, header_bytes());
    if (ring != MAP_FAILED)
        munmap(ring, ring_bytes());
    return rc;
}

static void unmap_peer(struct shm_peer *c)
{
    if (c->peer_hdr)
        munmap(c->peer_hdr, header_bytes());
    if (c->out)
        munmap(c->out, ring_bytes());
    if (c->stage)
        munmap(c->stage, shared_bytes());
    c->peer_hdr = NULL;
    c->out = NULL;
    c->stage = NULL;
    c->board = NULL;
    c->in = NULL;
}

void shm_unmap(struct tide__shm *tp)
{
    for (int p = 0; p < tp->size; p++)
        unmap_peer(&tp->peers[p]);
    if (tp->hdr)
        munmap(tp->hdr, tp->seg_bytes);
    if (tp->memfd >= 0)
        close(tp->memfd);
    tp->hdr = NULL;
    tp->stage = NULL;
    tp->board = NULL;
    tp->stage_ok = false;
    tp->memfd = -1;
}

/* Steps 1: every identity to every peer, then theirs. */
static int swap_idents(struct tide__shm *tp, int *fds, struct ident *ids, uint64_t deadline,
                       char *err, size_t errlen)
{
    for (int p = 0; p < tp->size; p++)
        if (p != tp->rank && move_bytes(fds[p], &ids[tp->rank], sizeof *ids, true, deadline)) {
            snprintf(err, errlen, "could not send rank %d who we are", p);
            return TIDE_EBOOTSTRAP;
        }
    for (int p = 0; p < tp->size; p++) {
        if (p == tp->rank)
            continue;
        if (move_bytes(fds[p], &ids[p], sizeof *ids, false, deadline)) {
            snprintf(err, errlen, "rank %d did not say who it is", p);
            return TIDE_EBOOTSTRAP;
        }
        if (memcmp(ids[p].magic, IDENT_MAGIC, sizeof ids[p].magic) ||
            ids[p].size != (uint32_t)tp->size) {
            snprintf(err, errlen, "rank %d does not use the shm transport (is TIDE_TRANSPORT "
                     "the same on every rank?)", p);
            return TIDE_EBOOTSTRAP;
        }
    }
    return 0;
}

/* Step 3: may we copy out of the peer's memory?  Not in a container
 * without ptrace permission, for one. */
static bool can_read(const struct ident *id, char *why, size_t len)
{
    uint64_t magic = 0;
    struct iovec local = {&magic, sizeof magic}, remote = {(void *)(uintptr_t)id->probe, 8};
    if (process_vm_readv(id->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof magic &&
        magic == SHM_MAGIC)
        return true;
    snprintf(why, len, "%s", magic ? "read the wrong bytes" : strerror(errno));
    return false;
}

/* Steps 2 to 4: map every candidate's segment, then agree per pair. */
static int pair_up(struct tide__shm *tp, int *fds, const struct ident *ids, bool required,
                   uint64_t deadline, char *err, size_t errlen)
{
    int8_t *mine = calloc((size_t)tp->size, 1), *theirs = calloc((size_t)tp->size, 1);
    int rc = mine && theirs ? 0 : TIDE_ENOMEM, on_host = 0, paired = 0;
    for (int p = 0; !rc && p < tp->size; p++) {
        if (p == tp->rank || !same_host(&ids[tp->rank], &ids[p]))
            continue;
        on_host++;
        int e = map_peer(tp, &tp->peers[p], &ids[p]);
        char why[64];
        mine[p] = e == 0 ? MAPPED : 0;
        if (e)
            tide__log(required ? TIDE_LOG_WARN : TIDE_LOG_INFO, tp->rank,
                      "shm: cannot map rank %d's segment (/proc/%d/fd/%d): %s", p,
                      (int)ids[p].pid, (int)ids[p].memfd, strerror(-e));
        else if (tp->cma_min == SIZE_MAX || can_read(&ids[p], why, sizeof why))
            mine[p] |= tp->cma_min == SIZE_MAX ? 0 : READABLE;
        else
            tide__log(TIDE_LOG_INFO, tp->rank, "shm: no single copies with rank %d: "
                      "process_vm_readv: %s; large messages go through the ring", p, why);
    }
    for (int p = 0; !rc && p < tp->size; p++)
        if (p != tp->rank && same_host(&ids[tp->rank], &ids[p]) &&
            move_bytes(fds[p], &mine[p], 1, true, deadline))
            rc = TIDE_EBOOTSTRAP;
    for (int p = 0; !rc && p < tp->size; p++)
        if (p != tp->rank && same_host(&ids[tp->rank], &ids[p]) &&
            move_bytes(fds[p], &theirs[p], 1, false, deadline))
            rc = TIDE_EBOOTSTRAP;
    for (int p = 0; !rc && p < tp->size; p++) {
        struct shm_peer *c = &tp->peers[p];
        if (!(mine[p] & MAPPED) || !(theirs[p] & MAPPED)) {
            unmap_peer(c);
            continue;
        }
        c->pid = (pid_t)ids[p].pid;
        c->cma = (mine[p] & READABLE) && (theirs[p] & READABLE);
        c->stream_out = on_host == 1 && tp->base.ctx->streaming_stores;
        c->fd = fds[p];
        fds[p] = -1;
        paired++;
    }
    if (rc == TIDE_EBOOTSTRAP)
        snprintf(err, errlen, "a peer on this host went silent while pairing up");
    else if (rc == TIDE_ENOMEM)
        snprintf(err, errlen, "out of memory");
    else if (required && paired < on_host)
        rc = TIDE_ENOSYS, snprintf(err, errlen, "TIDE_TRANSPORT=shm, but %d of the %d other ranks "
                                   "on this host cannot share memory with this one (see the "
                                   "warnings above)", on_host - paired, on_host);
    else
        tide__log(TIDE_LOG_DEBUG, tp->rank, "shm: %d of %d other ranks on this host through "
                  "shared memory", paired, on_host);
    free(mine);
    free(theirs);
    return rc;
}

/* The pair's socket: the doorbell socket shared memory took, or the one
 * left to TCP. */
static int pair_fd(const struct tide__shm *tp, const int *fds, int p)
{
    return tp->peers[p].fd >= 0 ? tp->peers[p].fd : fds[p];
}

/* Step 5: does every rank of this host share memory with every other?
 * Every rank says whether it does to every other rank of its machine
 * (over the pair's socket, whether shared memory or TCP took it), so
 * all of them conclude alike. */
static int agree_on_stage(struct tide__shm *tp, const int *fds, uint64_t deadline)
{
    uint8_t mine = tp->hdr != NULL, theirs = 0;
    int here = tp->host[tp->rank], others = 0;
    for (int p = 0; mine && p < tp->size; p++)
        if (p != tp->rank && tp->host[p] == here && tp->peers[p].fd < 0)
            mine = 0;
    bool all = mine;
    for (int p = 0; p < tp->size; p++)
        if (p != tp->rank && tp->host[p] == here &&
            move_bytes(pair_fd(tp, fds, p), &mine, 1, true, deadline))
            return TIDE_EBOOTSTRAP;
    for (int p = 0; p < tp->size; p++) {
        if (p == tp->rank || tp->host[p] != here)
            continue;
        if (move_bytes(pair_fd(tp, fds, p), &theirs, 1, false, deadline))
            return TIDE_EBOOTSTRAP;
        all = all && theirs == 1;
        others++;
    }
    tp->stage_ok = all;
    tide__log(TIDE_LOG_DEBUG, tp->rank, "shm: collectives on this host (%d other ranks) %s "
              "staging memory", others, all ? "share" : "do not share");
    return 0;
}

/* Under Yama's ptrace_scope 1 (Ubuntu's default) a process may read
 * another's memory only as its ancestor, so ranks started side by side
 * could not copy from each other (can_read: EPERM) and their large
 * messages stayed in the rings, two copies each.  Where single copies
 * are wanted, a rank lets its user's other processes read it, as Open
 * MPI's vader does; TIDE_SHM_CMA=0 keeps it closed.  Without Yama the
 * call fails (EINVAL) and changes nothing. */
static void open_to_readers(const struct tide__shm *tp)
{
#ifdef PR_SET_PTRACER
    if (tp->cma_min == SIZE_MAX || !tp->hdr)
        return;
    if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0)
        tide__log(TIDE_LOG_INFO, tp->rank, "shm: Yama restricts ptrace here; this rank lets "
                  "its user's processes read its memory, for single copies between ranks "
                  "(TIDE_SHM_CMA=0: never)");
#else
    (void)tp;
#endif
}

int shm_setup(struct tide__shm *tp, int *fds, double timeout_s, bool required, char *err,
              size_t errlen)
{
    uint64_t deadline = tide__now_ns() + tide__seconds_to_ns(timeout_s);
    struct ident *ids = calloc((size_t)tp->size, sizeof *ids);
    if (!ids) {
        snprintf(err, errlen, "out of memory");
        return TIDE_ENOMEM;
    }
    char why[160] = "";
    if (make_segment(tp, why, sizeof why)) {
        /* Peers see memfd -1 and leave us on TCP. */
        tide__log(required ? TIDE_LOG_WARN : TIDE_LOG_INFO, tp->rank, "shm: %s", why);
        shm_unmap(tp);
    }
    open_to_readers(tp); /* before a peer that has our ident probes us */
    make_ident(tp, &ids[tp->rank]);
    int rc = swap_idents(tp, fds, ids, deadline, err, errlen);
    if (!rc)
        map_hosts(tp, ids);
    if (!rc && required && !tp->hdr)
        rc = TIDE_ENOSYS, snprintf(err, errlen, "TIDE_TRANSPORT=shm, but %s", why);
    if (!rc)
        rc = pair_up(tp, fds, ids, required, deadline, err, errlen);
    if (!rc && (rc = agree_on_stage(tp, fds, deadline)) != 0)
        snprintf(err, errlen, "a peer went silent while agreeing on shared staging memory");
    free(ids);
    return rc;
}
