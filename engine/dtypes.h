/* dtypes.h - which values name a public data type or reduction operation
 * (engine/dtypes.c, beside their names and sizes). */
#ifndef TIDE_DTYPES_H
#define TIDE_DTYPES_H

#include <stdbool.h>

/* Whether the value names a tide_dtype / tide_op (the *_COUNT bounds are
 * not valid).  Takes int so that a value off the wire can be checked
 * before it is trusted as an enum. */
bool tide__dtype_valid(int dtype);
bool tide__op_valid(int op);

#endif
