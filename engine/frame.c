/* frame.c - encoding and validation of the wire header (see frame.h).
 * Everything a peer sends passes through tide__frame_decode before the
 * engine believes a byte of it; the parser fuzzer targets this file. */
#include "engine/frame.h"
#include "tide.h"
#include "engine/wire_bytes.h"

void tide__frame_encode(const struct tide__frame *f, uint8_t out[TIDE_FRAME_HDR_SIZE])
{
    tide__put32(out + 0, TIDE_FRAME_MAGIC);
    out[4] = TIDE_FRAME_VERSION;
    out[5] = f->type;
    out[6] = f->kind;
    out[7] = f->dtype;
    out[8] = f->redop;
    out[9] = f->flags;
    out[10] = out[11] = 0;
    tide__put32(out + 12, f->comm_id);
    tide__put32(out + 16, f->tag);
    tide__put32(out + 20, (uint32_t)f->root);
    tide__put64(out + 24, f->seq);
    tide__put64(out + 32, f->len);
    tide__put64(out + 40, f->count);
}

int tide__frame_decode(const uint8_t in[TIDE_FRAME_HDR_SIZE], struct tide__frame *f)
{
    if (tide__get32(in) != TIDE_FRAME_MAGIC || in[4] != TIDE_FRAME_VERSION)
        return TIDE_EPROTO;
    f->type = in[5];
    f->kind = in[6];
    f->dtype = in[7];
    f->redop = in[8];
    f->flags = in[9];
    f->comm_id = tide__get32(in + 12);
    f->tag = tide__get32(in + 16);
    f->root = (int32_t)tide__get32(in + 20);
    f->seq = tide__get64(in + 24);
    f->len = tide__get64(in + 32);
    f->count = tide__get64(in + 40);
    if (f->type != TIDE_FRAME_DATA)
        return TIDE_EPROTO;
    if (f->kind == 0 || f->kind >= TIDE_KIND_MAX_)
        return TIDE_EPROTO;
    if (f->len > TIDE_FRAME_MAX_PAYLOAD)
        return TIDE_EPROTO;
    return 0;
}

int tide__frame_poison_error(const struct tide__frame *f)
{
    /* Judged as unsigned: negating the tag as an int overflows (undefined
     * behaviour) when a peer sends 0x80000000. */
    if (f->tag >= 1 && f->tag <= (uint32_t)-TIDE_EREVOKED) /* the lowest code */
        return -(int)f->tag;
    return TIDE_EPROTO;
}

int tide__frame_same_key(const struct tide__frame *a, const struct tide__frame *b)
{
    return a->comm_id == b->comm_id && a->seq == b->seq && a->tag == b->tag;
}

int tide__frame_same_signature(const struct tide__frame *a, const struct tide__frame *b)
{
    return a->kind == b->kind && a->dtype == b->dtype && a->redop == b->redop &&
           a->root == b->root && a->count == b->count && a->flags == b->flags;
}
