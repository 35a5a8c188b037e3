/* recorder_dump.c - a rank's flight-recorder dump: one JSON file,
 * $TIDE_DUMP_DIR/tide-dump-<rank>.json, rewritten whole at each dump
 * (written to a temporary name and renamed, so a reader never sees half
 * a file).  tools/doctor/doctor.c merges the files of all ranks.
 *
 * The layout puts one communicator header and one operation per line,
 * so that the doctor (and grep) can read it line by line:
 *
 *   {"tide_dump":1,"rank":0,"size":4,"pid":123,"reason":"deadline",
 *    "now_ns":...,"wall_ns":...,"comms":[
 *   {"comm":1,"comm_rank":0,"comm_size":4,"members":[0,1,2,3],"called":41,"first_error":"...","ops":[
 *   {"seq":40,"kind":"allreduce","count":8,"dtype":"int32","op":"sum","root":-1,"bytes":32,
 *    "algorithm":"recursive_doubling","state":"done","status":"OK","post_ns":...,
 *    "start_ns":...,"end_ns":...,"waits_for":[],"sends_to":[]},
 *   ...]}]}
 *
 * Times are the rank's monotonic clock; now_ns and wall_ns (realtime)
 * were read together, so the doctor can put every rank on one time line.
 * post_ns and now_ns are precise; start_ns and end_ns are the coarse
 * clock's (the kernel's last tick: 1-4 ms behind, recorder.c), never
 * before post_ns, so an operation shorter than a tick may show 0.
 * Ranks are world ranks.  Reactor thread only. */
#include "engine/context.h"
#include "engine/json.h"
#include "engine/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *state_name(uint8_t state)
{
    static const char *names[] = {"empty", "started", "done", "failed"};
    return state < 4 ? names[state] : "?";
}

static void to_file(void *f, const char *piece)
{
    fputs(piece, f);
}

/* A JSON string (json.h). */
static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    tide__json_escape(s, to_file, f);
    fputc('"', f);
}

static void put_peers(FILE *f, const char *key, const tide_req *req, enum tide__msg_dir dir)
{
    int peers[64];
    int n = req ? tide__req_waits_on(req, dir, peers, 64) : 0;
    fprintf(f, ",\"%s\":[", key);
    for (int i = 0; i < n && i < 64; i++)
        fprintf(f, "%s%d", i ? "," : "", peers[i]);
    fputc(']', f);
}

/* The running request of (comm, seq), whose messages say whom it awaits. */
static const tide_req *running(struct tide__ctx *ctx, const tide_comm *comm, uint64_t seq)
{
    struct tide__seqmap_node *n = NULL;
    while ((n = tide__seqmap_find(&ctx->running, comm->id, seq, n))) {
        const tide_req *req = container_of(n, tide_req, by_seq);
        if (!req->finished)
            return req;
    }
    return NULL;
}

static void put_op(FILE *f, struct tide__ctx *ctx, const tide_comm *comm,
                   const struct tide__rec_op *op)
{
    fprintf(f, "{\"seq\":%llu,\"kind\":\"%s\",\"count\":%llu,\"dtype\":\"%s\",\"op\":\"%s\","
               "\"root\":%d,\"bytes\":%zu,\"algorithm\":",
            (unsigned long long)op->seq, tide__kind_name(ctx, op->kind),
            (unsigned long long)op->count,
            tide_dtype_name((tide_dtype)op->dtype), tide_op_name((tide_op)op->redop), op->root,
            op->bytes);
    put_string(f, op->algorithm ? op->algorithm : "");
    fprintf(f, ",\"state\":\"%s\",\"status\":\"%s\",\"post_ns\":%llu,\"start_ns\":%llu,"
               "\"end_ns\":%llu",
            state_name(op->state), op->status ? tide_err_name(op->status) : "OK",
            (unsigned long long)op->t_post, (unsigned long long)op->t_start,
            (unsigned long long)op->t_end);
    const tide_req *req = op->state == TIDE_REC_STARTED ? running(ctx, comm, op->seq) : NULL;
    put_peers(f, "waits_for", req, TIDE_MSG_RECV);
    put_peers(f, "sends_to", req, TIDE_MSG_SEND);
    fputc('}', f);
}

static void put_comm(FILE *f, struct tide__ctx *ctx, const tide_comm *comm, bool first)
{
    fprintf(f, "%s\n{\"comm\":%u,\"comm_rank\":%d,\"comm_size\":%d,\"members\":[", first ? "" : ",",
            comm->id, comm->rank, comm->size);
    for (int r = 0; r < comm->size; r++)
        fprintf(f, "%s%d", r ? "," : "", comm->world_of ? comm->world_of[r] : r);
    fprintf(f, "],\"called\":%llu,\"first_error\":",
            (unsigned long long)(atomic_load(&((tide_comm *)comm)->next_seq) - 1));
    const struct tide__recorder *rec = comm->rec;
    put_string(f, rec ? rec->first_error : "");
    fprintf(f, ",\"ops\":[");
    /* Oldest first: start after the newest slot and go round. */
    uint64_t newest = 0;
    for (int i = 0; rec && i < TIDE_REC_OPS; i++)
        if (rec->ops[i].seq > newest)
            newest = rec->ops[i].seq;
    bool any = false;
    for (uint64_t k = 0; rec && k < TIDE_REC_OPS; k++) {
        const struct tide__rec_op *op = &rec->ops[(newest + 1 + k) % TIDE_REC_OPS];
        if (op->state == TIDE_REC_EMPTY)
            continue;
        fprintf(f, "%s\n", any ? "," : "");
        put_op(f, ctx, comm, op);
        any = true;
    }
    fprintf(f, "]}");
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put_dump(FILE *f, struct tide__ctx *ctx, const char *reason)
{
    fprintf(f, "{\"tide_dump\":1,\"rank\":%d,\"size\":%d,\"pid\":%d,\"reason\":\"%s\",", ctx->rank,
            ctx->size, (int)getpid(), reason);
    fprintf(f, "\"now_ns\":%llu,\"wall_ns\":%llu,\"comms\":[",
            (unsigned long long)tide__ctx_now(ctx), (unsigned long long)wall_ns());
    put_comm(f, ctx, &ctx->world, true);
    /* Sub-communicators are listed under pool_lock (they are made and
     * freed on user threads); their rings are the reactor's. */
    pthread_mutex_lock(&ctx->pool_lock);
    for (tide_comm *c = ctx->comms; c; c = c->next)
        put_comm(f, ctx, c, false);
    pthread_mutex_unlock(&ctx->pool_lock);
    fprintf(f, "]}\n");
}

int tide__rec_dump(struct tide__ctx *ctx, const char *reason)
{
    if (!ctx->rec.dir[0])
        return TIDE_EINVAL;
    char path[300], tmp[310];
    snprintf(path, sizeof path, "%s/tide-dump-%d.json", ctx->rec.dir, ctx->rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        tide__log(TIDE_LOG_WARN, ctx->rank, "flight recorder: cannot write %s: %s", tmp,
                  strerror(errno));
        return TIDE_EINVAL;
    }
    put_dump(f, ctx, reason);
    int bad = ferror(f) | fclose(f);
    if (bad || rename(tmp, path) != 0) {
        tide__log(TIDE_LOG_WARN, ctx->rank, "flight recorder: cannot write %s", path);
        return TIDE_EINVAL;
    }
    tide__log(TIDE_LOG_INFO, ctx->rank, "flight recorder: %s dump in %s", reason, path);
    return 0;
}
