/* dtypes.c - the public data types and reduction operations as the
 * whole library sees them: their names (as nccl-tests prints them), their
 * sizes, and which values are valid.  The engine owns them, since its
 * recorder and trace name what a collective moved; the kernels that
 * combine them are collectives/reduction.c. */
#include "engine/dtypes.h"
#include "tide.h"

static const struct {
    const char *name; /* as nccl-tests prints it */
    size_t size;      /* bytes per element */
} dtype_info[TIDE_DTYPE_COUNT] = {
    [TIDE_INT8] = {"int8", 1},      [TIDE_UINT8] = {"uint8", 1},
    [TIDE_INT32] = {"int32", 4},    [TIDE_UINT32] = {"uint32", 4},
    [TIDE_INT64] = {"int64", 8},    [TIDE_UINT64] = {"uint64", 8},
    [TIDE_FLOAT16] = {"half", 2},   [TIDE_BFLOAT16] = {"bfloat16", 2},
    [TIDE_FLOAT32] = {"float", 4},  [TIDE_FLOAT64] = {"double", 8},
};

static const char *const op_names[TIDE_OP_COUNT] = {
    [TIDE_SUM] = "sum", [TIDE_PROD] = "prod", [TIDE_MIN] = "min",
    [TIDE_MAX] = "max", [TIDE_AVG] = "avg", [TIDE_BAND] = "band",
    [TIDE_BOR] = "bor", [TIDE_BXOR] = "bxor",
};

bool tide__dtype_valid(int dtype)
{
    return dtype >= 0 && dtype < TIDE_DTYPE_COUNT;
}

bool tide__op_valid(int op)
{
    return op >= 0 && op < TIDE_OP_COUNT;
}

size_t tide_dtype_size(tide_dtype dtype)
{
    return tide__dtype_valid((int)dtype) ? dtype_info[dtype].size : 0;
}

const char *tide_dtype_name(tide_dtype dtype)
{
    return tide__dtype_valid((int)dtype) ? dtype_info[dtype].name : "?";
}

const char *tide_op_name(tide_op op)
{
    return tide__op_valid((int)op) ? op_names[op] : "?";
}
