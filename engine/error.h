/* error.h - internal error helpers. */
#ifndef TIDE_ERROR_H
#define TIDE_ERROR_H

/* Map a system errno (either sign) to a TIDE_E* code.  Called only at the
 * edges that talk to the kernel. */
int tide__err_from_errno(int e);

#endif
