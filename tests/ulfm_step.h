/* ulfm_step.h - the recovery loop of tide.h's example, shared by the
 * recovery tests (simulated and real ranks). */
#ifndef TIDE_TEST_ULFM_STEP_H
#define TIDE_TEST_ULFM_STEP_H

#include "tide.h"

/* After a step that returned rc on *comm: agree whether every live rank
 * finished it; if not, revoke, shrink and make *comm the smaller
 * communicator (freeing the old one unless it is world).  Returns 1: go
 * on to the next step; 0: redo this step on *comm; else the error of
 * agree or shrink (*comm unchanged). */
int ulfm_after_step(tide_comm **comm, tide_comm *world, int rc);

#endif
