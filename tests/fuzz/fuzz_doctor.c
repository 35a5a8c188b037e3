/* fuzz_doctor.c - libFuzzer target for tide-doctor's dump parser
 * (tools/doctor/doctor_dump.c): any bytes as a dump file must read as a
 * dump or fail with a reason, never crash, overrun or claim what it does
 * not hold (issue 33: a crafted dump of 4000 members overflowed the
 * stack; a claimed size of ten million cost 535 MB).
 *
 *   tools/fuzz.sh [SECONDS]   builds and runs it beside fuzz_wire */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tools/doctor/doctor_dump.h"

static void invariant(int ok, const char *what)
{
    if (ok)
        return;
    fprintf(stderr, "invariant broken: %s\n", what);
    abort();
}

/* What a dump that read must hold together. */
static void check(const struct doc_dump *d)
{
    invariant(d->size >= 1 && d->size <= DOC_MAX_RANKS, "size within the limit");
    invariant(d->rank >= 0 && d->rank < d->size, "rank within the job");
    for (size_t i = 0; i < d->ncomms; i++) {
        const struct doc_comm *c = &d->comms[i];
        invariant(c->comm_size >= 1 && c->comm_size <= d->size, "comm within the job");
        invariant(c->comm_rank >= 0 && c->comm_rank < c->comm_size, "comm rank within it");
        invariant(c->nops <= c->cap, "ops within their array");
        for (int r = 0; r < c->comm_size; r++)
            invariant(c->members[r] >= 0 && c->members[r] < d->size, "member within the job");
        for (size_t k = 0; k < c->nops; k++) {
            const struct doc_op *op = &c->ops[k];
            invariant(op->nwaits >= 0 && op->nwaits <= DOC_PEERS, "waits within their array");
            invariant(op->nsends >= 0 && op->nsends <= DOC_PEERS, "sends within their array");
            invariant(memchr(op->kind, 0, sizeof op->kind) != NULL, "kind terminated");
            invariant(memchr(op->status, 0, sizeof op->status) != NULL, "status terminated");
            (void)doc_find_op(c, op->seq); /* what tide-doctor asks: must not crash */
            (void)doc_wall(d, op->post_ns);
        }
        (void)doc_last_seq(c);
        invariant(memchr(c->first_error, 0, sizeof c->first_error) != NULL, "error terminated");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("tide-dump", 0);
        invariant(fd >= 0, "memfd_create");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    invariant(ftruncate(fd, 0) == 0, "ftruncate");
    invariant(pwrite(fd, data, size, 0) == (ssize_t)size, "pwrite");
    struct doc_dump d;
    char err[256];
    if (doc_dump_read(path, &d, err, sizeof err) == 0) {
        check(&d);
        doc_dump_free(&d);
    } else {
        invariant(err[0] != '\0', "a refused dump says why");
    }
    return 0;
}
